//! The session: one object loaded in the kernel and in bpfemu, the packets and maps written
//! to both sides, and what each side answers.

use super::*;

// ---------------------------------------------------------------------------------------------
// Options and the session

/// What to compare.
#[derive(Clone, Debug, Default, clap::Args)]
pub struct DiffOptions {
    /// The BPF object.
    #[arg(value_name = "OBJ")]
    pub object: PathBuf,
    /// The XDP program to compare (needed when the object has several): its function name,
    /// or its section, as `ip link set dev DEV xdp obj FILE sec S` names it.
    #[arg(long = "prog")]
    pub program: Option<String>,
    /// Engine that runs bpfemu's side (the JIT by default; interp, the reference
    /// interpreter, stays selectable).
    #[arg(long, value_enum, default_value_t = Engine::Jit)]
    pub engine: Engine,
    /// Seed of bpfemu's bpf_get_prandom_u32.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// ingress_ifindex every packet arrives on, in both (default: test_run's, the loopback).
    #[arg(long)]
    pub ifindex: Option<u32>,
    /// rx_queue_index every packet arrives on, in both (default: 0).
    #[arg(long)]
    pub rxq: Option<u32>,
    /// Routing and neighbour tables for bpf_fib_lookup (JSON): bpfemu's model, and for the
    /// kernel a private network namespace built from the same file (its interfaces at the
    /// same ifindexes, addresses, routes, neighbours), where the kernel side runs.
    #[arg(long, value_name = "FILE")]
    pub fib: Option<PathBuf>,
    /// The sockets bpf_sk_lookup_tcp/udp find (JSON): bpfemu's table, and for the kernel the
    /// same sockets opened in the namespace where the kernel side runs.
    #[arg(long, value_name = "FILE")]
    pub sockets: Option<PathBuf>,
    /// Compare the program even if bpfemu's verifier rejects it (bpfemu's side in checked mode).
    #[arg(long)]
    pub no_verify: bool,
    /// How bpfemu loads the object (from [`crate::load_args::LoadArgs`]); `map_sizes` are
    /// applied to the kernel's maps as well.
    #[arg(skip)]
    pub load: LoadOptions,
    /// Show progress on standard error (set by the command line: a terminal).
    #[arg(skip)]
    pub progress: bool,
    /// The CPU the session's thread is pinned to, where the kernel runs the program (0 for
    /// diff, whose per-CPU comparisons read CPU 0's copy; bench's `--cpu`).
    #[arg(skip)]
    pub cpu: usize,
}

impl DiffOptions {
    pub fn new(object: impl Into<PathBuf>) -> DiffOptions {
        DiffOptions {
            object: object.into(),
            ..DiffOptions::default()
        }
    }
}

/// One object loaded in the kernel and in bpfemu, ready to compare packets and maps.
pub struct Session {
    /// Readers of the kernel's ring buffers and perf events (dropped before the maps).
    kernel_events: KernelEvents,
    kernel: KernelObject,
    prepared: Arc<Prepared>,
    ours: XdpRuntime,
    /// bpfemu again, tracking taint (only for objects that read the clock or random numbers).
    taint: Option<XdpRuntime>,
    program: usize,
    program_name: String,
    cpus: u32,
    nondeterminism: Nondeterminism,
    window: ClockWindow,
    _pin: CpuPin,
    /// Dropped last: the thread leaves the namespace, then it is deleted.
    _namespace: Option<FibNamespace>,
}

/// The namespace built from `--fib` (or a fresh one), held without a name so that a diff killed
/// by any signal leaves nothing in /run/netns, and this thread inside it (fields drop in this
/// order).
pub(super) struct FibNamespace {
    /// `--sockets`' sockets, opened inside.
    _sockets: Option<OpenSockets>,
    _inside: Entered,
    _netns: HeldNetns,
}

impl Session {
    /// Loads the object into the kernel and into bpfemu and pins this thread to CPU 0.
    pub fn open(opts: &DiffOptions) -> Result<Session, DiffError> {
        Self::open_with_maps(opts, None)
    }

    /// [`Self::open`], then the entries of a `--maps` document on both sides: global data
    /// (`.rodata` above all) goes into the kernel's maps before its programs load, as libbpf's
    /// `bpf_map__set_initial_value` does, the rest after.
    pub fn open_with_maps(
        opts: &DiffOptions,
        maps: Option<&serde_json::Value>,
    ) -> Result<Session, DiffError> {
        let path_str = opts.object.display().to_string();
        let prepared = Prepared::open(&opts.object, opts.program.as_deref(), &opts.load).map_err(
            |e| match e {
                OpenError::Load(e) => DiffError::Load {
                    path: path_str.clone(),
                    message: e.to_string(),
                },
                OpenError::Program { path, why } => DiffError::Program { path, message: why },
            },
        )?;
        Session::open_prepared(Arc::new(prepared), opts, maps)
    }

    /// [`Self::open_with_maps`] for an object a command has opened already (see [`Prepared`]);
    /// `opts`' object, program and load options are `prepared`'s.
    pub fn open_prepared(
        prepared: Arc<Prepared>,
        opts: &DiffOptions,
        maps: Option<&serde_json::Value>,
    ) -> Result<Session, DiffError> {
        let path_str = prepared.path().display().to_string();
        // Refused before the kernel is needed, as a rejected program would never reach it.
        prepared
            .admit(opts.engine, opts.no_verify)
            .map_err(DiffError::Refused)?;
        let object = prepared.object();
        let program_name = prepared.program_name().to_owned();
        kernel_ready().map_err(DiffError::KernelUnavailable)?;
        let fib =
            match &opts.fib {
                Some(file) => Some(bpfemu_vm::fib::Fib::from_json_file(file).map_err(|e| {
                    DiffError::Load {
                        path: file.display().to_string(),
                        message: e.to_string(),
                    }
                })?),
                None => None,
            };
        let sockets = match &opts.sockets {
            Some(file) => Some(
                SocketTable::from_json_file(file).map_err(|e| DiffError::Load {
                    path: file.display().to_string(),
                    message: e.to_string(),
                })?,
            ),
            None => None,
        };
        // Without --fib the kernel side runs in a fresh namespace, as bpfemu models one, so
        // that neither side depends on the host's devices and routes.
        let namespace = {
            let ns_err = |source| DiffError::Namespace {
                path: opts
                    .fib
                    .as_ref()
                    .map_or_else(|| path_str.clone(), |f| f.display().to_string()),
                source,
            };
            let fresh = bpfemu_vm::fib::Fib::fresh_netns();
            let netns = Netns::from_fib("bpfemu-diff", fib.as_ref().unwrap_or(&fresh))
                .and_then(Netns::into_held)
                .map_err(ns_err)?;
            let inside = netns.enter().map_err(ns_err)?;
            let opened = sockets
                .as_ref()
                .map(OpenSockets::open)
                .transpose()
                .map_err(|e| match &fib {
                    Some(_) => e,
                    None => NetnsError(format!(
                        "{} (without --fib the namespace's loopback is down: give a FIB \
                         whose lo is up, with its addresses)",
                        e.0
                    )),
                })
                .map_err(|source| DiffError::Namespace {
                    path: opts
                        .sockets
                        .as_ref()
                        .map_or_else(String::new, |f| f.display().to_string()),
                    source,
                })?;
            Some(FibNamespace {
                _sockets: opened,
                _inside: inside,
                _netns: netns,
            })
        };
        let cpus = kbpf::possible_cpus().map_err(|e| {
            DiffError::KernelUnavailable(format!("cannot count the possible CPUs (errno {e})"))
        })?;
        let contents = maps
            .map(|doc| {
                mapjson::parse_map_contents(doc, &object.maps, object.btf.as_ref())
                    .map_err(|e| DiffError::Maps(e.to_string()))
            })
            .transpose()?
            .unwrap_or_default();
        let (before_load, after_load): (Vec<MapContents>, Vec<MapContents>) = contents
            .into_iter()
            .partition(|c| is_global_data(object, &c.name));
        let kernel = KernelObject::load(
            object,
            &program_name,
            &KernelLoadOptions {
                log_level: 0,
                log_size: 1 << 20,
                initial: initial_entries(object, &before_load, cpus)?,
            },
        )
        .map_err(|error| DiffError::Kernel {
            path: path_str.clone(),
            error,
        })?;
        let kernel_events =
            KernelEvents::attach(object, &kernel, cpus).map_err(|(map, source)| {
                DiffError::Events {
                    path: path_str.clone(),
                    map,
                    source,
                }
            })?;
        let nondeterminism = scan_nondeterminism(object);
        let build = |seed: u64| {
            let setup = RunSetup {
                engine: opts.engine,
                cpus,
                seed,
                fib: fib.clone(),
                sockets: sockets.clone(),
                maps: None,
                no_verify: opts.no_verify,
            };
            prepared.runtime(&setup).map_err(|e| DiffError::Load {
                path: path_str.clone(),
                message: format!("{e:#}"),
            })
        };
        let ours = build(opts.seed)?;
        let taint = match nondeterminism.any() {
            true => {
                let mut rt = build(opts.seed)?;
                rt.track_taint(true);
                Some(rt)
            }
            false => None,
        };
        let program = prepared.program_index();
        let pin = CpuPin::new(opts.cpu).map_err(DiffError::Pin)?;
        let mut session = Session {
            kernel_events,
            kernel,
            prepared: Arc::clone(&prepared),
            ours,
            taint,
            program,
            program_name,
            cpus,
            nondeterminism,
            window: ClockWindow::default(),
            _pin: pin,
            _namespace: namespace,
        };
        session.write_maps(&before_load, false)?;
        session.write_maps(&after_load, true)?;
        session.fill_perf_slots()?;
        Ok(session)
    }

    /// Gives bpfemu's perf event arrays the slots the kernel side filled: slot `c` holds an
    /// event of CPU `c` (see [`events`]).
    fn fill_perf_slots(&mut self) -> Result<(), DiffError> {
        for (name, slots) in self.kernel_events.perf_slots() {
            let index = self.ours.maps().index_of(&name).expect("same object");
            for rt in std::iter::once(&mut self.ours).chain(self.taint.as_mut()) {
                let (maps, mem) = rt.maps_mut();
                for cpu in 0..slots {
                    let key = cpu.to_ne_bytes();
                    maps.sys_update(mem, index, &key, &key, 0).map_err(|e| {
                        DiffError::Maps(format!("map {name}: perf event slot {cpu}: {e}"))
                    })?;
                }
            }
        }
        Ok(())
    }

    /// Consumes what bpfemu's runs left in their ring buffers, as the kernel side's reader
    /// consumes the kernel's after every packet.
    fn consume_rings(&mut self) {
        for rt in std::iter::once(&mut self.ours).chain(self.taint.as_mut()) {
            let (maps, mem) = rt.maps_mut();
            for index in 0..maps.len() {
                if let Some(map) = maps.get_mut(index) {
                    let _ = map.ringbuf_consume(mem);
                }
            }
        }
    }

    /// The kernel side's fd of a map the program uses (to inspect or plant state in tests).
    pub fn kernel_map_fd(&self, name: &str) -> Option<std::os::fd::BorrowedFd<'_>> {
        self.kernel.map_fd(name)
    }

    /// What the kernel side said while loading that did not stop it.
    pub fn kernel_warnings(&self) -> &[String] {
        self.kernel.warnings()
    }

    pub fn program_name(&self) -> &str {
        &self.program_name
    }

    pub fn object(&self) -> &Object {
        self.prepared.object()
    }

    /// Possible CPUs of the kernel, and virtual CPUs of bpfemu.
    pub fn cpus(&self) -> u32 {
        self.cpus
    }

    pub fn nondeterminism(&self) -> &Nondeterminism {
        &self.nondeterminism
    }

    pub fn clock_window(&self) -> ClockWindow {
        self.window
    }

    /// Sets map contents on both sides from a `--maps` document (see [`crate::mapio`]).
    pub fn set_maps_json(&mut self, doc: &serde_json::Value) -> Result<(), DiffError> {
        let contents = mapjson::parse_map_contents(
            doc,
            &self.prepared.object().maps,
            self.prepared.object().btf.as_ref(),
        )
        .map_err(|e| DiffError::Maps(e.to_string()))?;
        self.set_maps(&contents)
    }

    /// Writes entries to both sides: the kernel's maps by fd, bpfemu's (and its taint runtime's) by
    /// `sys_update`. A per-CPU entry given once goes to every CPU. The kernel's read-only
    /// global data is frozen once loaded: give it to [`Self::open_with_maps`] instead.
    pub fn set_maps(&mut self, contents: &[MapContents]) -> Result<(), DiffError> {
        self.write_maps(contents, true)
    }

    /// [`Self::set_maps`]; the kernel's maps only with `kernel_too` (global data was written
    /// before its load), and only the maps the kernel side has (those its program uses).
    fn write_maps(&mut self, contents: &[MapContents], kernel_too: bool) -> Result<(), DiffError> {
        for map in contents {
            let spec = self
                .prepared
                .object()
                .maps
                .iter()
                .find(|m| m.name == map.name)
                .ok_or_else(|| DiffError::Maps(format!("no map named {}", map.name)))?;
            let index = self.ours.maps().index_of(&map.name).expect("same object");
            let fd = self.kernel.map_fd(&map.name).filter(|_| kernel_too);
            for (i, entry) in map.entries.iter().enumerate() {
                let value = sys_value(spec, &entry.value, self.cpus)
                    .map_err(|e| DiffError::Maps(format!("map {}: entry {i}: {e}", map.name)))?;
                if let Some(fd) = fd {
                    kbpf::map_update_fd(fd, &entry.key, &value, 0).map_err(|errno| {
                        let frozen = if errno == EPERM && is_global_data(self.prepared.object(), &map.name) {
                            " (read-only data is frozen once the program is loaded: give it with --maps)"
                        } else {
                            ""
                        };
                        DiffError::Maps(format!(
                            "map {}: entry {i}: the kernel refuses the update with {}{frozen}",
                            map.name,
                            Errno(errno)
                        ))
                    })?;
                }
                for rt in std::iter::once(&mut self.ours).chain(self.taint.as_mut()) {
                    let (maps, mem) = rt.maps_mut();
                    maps.sys_update(mem, index, &entry.key, &value, 0)
                        .map_err(|errno| {
                            DiffError::Maps(format!(
                                "map {}: entry {i}: bpfemu refuses the update with {errno}",
                                map.name
                            ))
                        })?;
                }
            }
        }
        Ok(())
    }

    /// Empties a map on both sides: hash-like maps lose every key, arrays get zero values.
    pub fn clear_map(&mut self, name: &str) -> Result<(), DiffError> {
        let spec = self
            .prepared
            .object()
            .maps
            .iter()
            .find(|m| m.name == name)
            .ok_or_else(|| DiffError::Maps(format!("no map named {name}")))?;
        let is_array = is_index_keyed(spec.map_type);
        let zero = vec![0u8; kbpf::sys_value_size(spec.map_type, spec.value_size, self.cpus)];
        if let Some(fd) = self.kernel.map_fd(name) {
            let keys = kernel_keys(fd, spec.key_size as usize, spec.max_entries as usize + 1)
                .map_err(|e| DiffError::Maps(format!("map {name}: listing keys: errno {e}")))?;
            for key in &keys {
                let r = if is_array {
                    kbpf::map_update_fd(fd, key, &zero, 0)
                } else {
                    kbpf::map_delete_fd(fd, key)
                };
                r.map_err(|e| DiffError::Maps(format!("map {name}: clearing: errno {e}")))?;
            }
        }
        let index = self.ours.maps().index_of(name).expect("same object");
        for rt in std::iter::once(&mut self.ours).chain(self.taint.as_mut()) {
            let (maps, mem) = rt.maps_mut();
            let mut keys = Vec::new();
            let mut key: Option<Vec<u8>> = None;
            while let Ok(next) = maps.sys_next_key(index, key.as_deref()) {
                keys.push(next.clone());
                key = Some(next);
                if keys.len() > spec.max_entries as usize {
                    break;
                }
            }
            for key in &keys {
                let r = if is_array {
                    maps.sys_update(mem, index, key, &zero, 0)
                } else {
                    maps.sys_delete(index, key)
                };
                r.map_err(|e| DiffError::Maps(format!("map {name}: clearing in bpfemu: {e}")))?;
            }
        }
        Ok(())
    }

    /// Runs one packet through the kernel and bpfemu (and the taint runtime) and compares.
    pub fn run_packet(&mut self, index: usize, data: &[u8]) -> PacketComparison {
        self.run_packet_ctx(index, data, None)
    }

    /// [`Self::run_packet`] with an `xdp_md` as test_run's `ctx_in` on both sides (`data`
    /// then starts with `md.data` bytes of metadata): the kernel's ctx checks and errnos
    /// against bpfemu's ([`XdpRuntime::run_ctx`]).
    pub fn run_packet_ctx(
        &mut self,
        index: usize,
        data: &[u8],
        md: Option<&XdpMd>,
    ) -> PacketComparison {
        let fd = self.kernel.program_fd(&self.program_name).expect("loaded");
        let t0 = kbpf::monotonic_ns();
        let b0 = kbpf::boottime_ns();
        let kernel = kbpf::test_run_xdp(fd, data, md, 1);
        let kernel_records: Vec<EventRecord> = self
            .kernel_events
            .read()
            .into_iter()
            .map(EventRecord::from_kernel)
            .collect();
        let t1 = kbpf::monotonic_ns();
        let b1 = kbpf::boottime_ns();
        if self.window.monotonic_start_ns == 0 {
            self.window.monotonic_start_ns = t0;
            self.window.boottime_start_ns = b0;
        }
        self.window.monotonic_end_ns = t1;
        self.window.boottime_end_ns = b1;
        let meta = PacketMeta {
            ts_ns: t0,
            ..PacketMeta::default()
        };
        let program = self.program;
        let run = |rt: &mut XdpRuntime, meta: &PacketMeta| match md {
            Some(md) => rt.run_ctx(program, data, meta, md),
            None => rt.run(program, data, meta),
        };
        let ours = run(&mut self.ours, &meta);
        let taint = self.taint.as_mut().and_then(|rt| {
            // A run that stops has no result to leave out.
            let _ = run(rt, &meta);
            rt.last_taint()
        });
        self.consume_rings();
        let events = EventComparison::new(
            kernel_records,
            ours.as_ref()
                .ok()
                .map(events::bpfemu_records)
                .unwrap_or_default(),
            taint.as_ref().and_then(|t| t.events),
        );
        let mut cmp = compare_packet(index, kernel, ours, taint.as_ref());
        cmp.add_events(events);
        cmp
    }

    /// The kernel's copy of the program, for `bpfemu bench` to test-run it on this (pinned)
    /// thread.
    pub fn kernel_program_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.kernel.program_fd(&self.program_name).expect("loaded")
    }

    /// Compares every map's contents (see the module docs for what is left out, and why).
    pub fn compare_maps(&mut self) -> Result<Vec<MapReport>, DiffError> {
        let mut reports = Vec::new();
        for (index, spec) in self.prepared.object().maps.iter().enumerate() {
            let type_name = map_type_short_name(spec.map_type).unwrap_or_else(|| "unknown".into());
            if let Some(reason) = not_comparable(spec.map_type) {
                reports.push(MapReport::skipped(&spec.name, &type_name, reason));
                continue;
            }
            let Some(fd) = self.kernel.map_fd(&spec.name) else {
                reports.push(MapReport::skipped(
                    &spec.name,
                    &type_name,
                    "the program does not use it (the kernel side has only what it needs)",
                ));
                continue;
            };
            let layout = MapLayout::new(spec, self.prepared.object().btf.as_ref());
            let taint = self.taint.as_ref();
            // Only a map that holds tainted bytes has its entries' taint looked up.
            let tainted = taint.filter(|rt| rt.map_has_taint(index));
            let mut acc =
                MapComparison::new(&layout, taint.and_then(|rt| rt.map_keys_taint(index)));
            let lookup =
                |rt: &XdpRuntime, key: &[u8]| rt.maps().sys_lookup(rt.memory(), index, key, 0).ok();
            let value_taint = |key: &[u8]| tainted.and_then(|rt| rt.map_value_taint(index, key));
            // The kernel's entries stream in batches; each is looked up on bpfemu's side and
            // judged at once, so no side is ever held whole.
            let vlen = kbpf::sys_value_size(spec.map_type, spec.value_size, self.cpus);
            let by_index = is_index_keyed(spec.map_type);
            let mut kernel_keys: HashSet<Vec<u8>> = HashSet::new();
            let ours = &self.ours;
            let in_place = array_storage(ours, index).filter(|_| tainted.is_none());
            let mut judge = |acc: &mut MapComparison, key: &[u8], value: &[u8]| {
                // Plain arrays are read in place: an entry equal on both sides costs one
                // comparison and no copy.
                if let Some(stored) = in_place.as_ref()
                    && let Some(index) = key.first_chunk::<4>().map(|k| u32::from_ne_bytes(*k))
                    && stored.value(index as usize) == Some(value)
                {
                    acc.equal_block(1);
                    return;
                }
                let o = lookup(ours, key);
                acc.entry(key, Some(value), o.as_deref(), value_taint(key).as_deref());
                if !by_index {
                    kernel_keys.insert(key.to_vec());
                }
            };
            if let Some(mapped) = self.kernel.map_array(&spec.name) {
                // The kernel's array mapped into this process: no syscall at all, and blocks
                // of elements equal on both sides (slots and padding alike) in one comparison.
                let (size, stride) = (spec.value_size as usize, mapped.stride());
                let kernel_bytes = mapped.bytes();
                let same_layout = in_place.as_ref().filter(|o| o.slot_size == stride);
                for (b, block) in kernel_bytes.chunks(BLOCK_ELEMENTS * stride).enumerate() {
                    let start = b * BLOCK_ELEMENTS * stride;
                    let range = start..start + block.len();
                    if let Some(o) = same_layout
                        && o.bytes.get(range.clone()) == Some(block)
                    {
                        acc.equal_block(block.len() / stride);
                        continue;
                    }
                    for (i, slot) in block.chunks_exact(stride).enumerate() {
                        let index = (b * BLOCK_ELEMENTS + i) as u32;
                        judge(&mut acc, &index.to_ne_bytes(), &slot[..size]);
                    }
                }
            } else {
                stream_kernel_entries(
                    fd,
                    spec.key_size as usize,
                    vlen,
                    spec.max_entries,
                    |k, v| judge(&mut acc, k, v),
                )
                .map_err(|e| {
                    DiffError::Maps(format!(
                        "map {}: reading the kernel's entries: {}",
                        spec.name,
                        Errno(e)
                    ))
                })?;
            }
            if !by_index {
                // Keys only bpfemu has.
                for key in runtime_keys(ours, index, spec.max_entries) {
                    if !kernel_keys.contains(&key) {
                        let o = lookup(ours, &key);
                        acc.entry(&key, None, o.as_deref(), value_taint(&key).as_deref());
                    }
                }
            }
            reports.push(acc.finish(&spec.name, &type_name));
        }
        Ok(reports)
    }
}

/// The errno of a write to a frozen map.
pub(super) const EPERM: i32 = Errno::EPERM.0;

/// Whether the object's map `name` holds global data (`.rodata`, `.data`, `.bss`, `.kconfig`).
pub(super) fn is_global_data(object: &Object, name: &str) -> bool {
    object.maps.iter().any(|m| {
        m.name == name
            && matches!(
                m.origin,
                bpfemu_loader::MapOrigin::GlobalData { .. } | bpfemu_loader::MapOrigin::Kconfig
            )
    })
}

/// Entries to write into the kernel's maps before its load, in the syscall layout.
pub(super) fn initial_entries(
    object: &Object,
    contents: &[MapContents],
    cpus: u32,
) -> Result<InitialEntries, DiffError> {
    let mut out = InitialEntries::new();
    for map in contents {
        let spec = object
            .maps
            .iter()
            .find(|m| m.name == map.name)
            .ok_or_else(|| DiffError::Maps(format!("no map named {}", map.name)))?;
        let entries = out.entry(map.name.clone()).or_default();
        for (i, entry) in map.entries.iter().enumerate() {
            let value = sys_value(spec, &entry.value, cpus)
                .map_err(|e| DiffError::Maps(format!("map {}: entry {i}: {e}", map.name)))?;
            entries.push((entry.key.clone(), value));
        }
    }
    Ok(out)
}

/// A value in the syscall layout: per-CPU maps get one 8-byte-padded copy per CPU.
pub(super) fn sys_value(
    spec: &bpfemu_loader::MapSpec,
    value: &MapValue,
    cpus: u32,
) -> Result<Vec<u8>, String> {
    if !kbpf::is_per_cpu_map(spec.map_type) {
        return match value {
            MapValue::Single(v) => Ok(v.clone()),
            MapValue::PerCpu(_) => Err("per-CPU values for a map that is not per-CPU".into()),
        };
    }
    let slot = (spec.value_size as usize).div_ceil(8) * 8;
    let values = match value {
        MapValue::Single(v) => vec![v.clone(); cpus as usize],
        MapValue::PerCpu(vs) if vs.len() == cpus as usize => vs.clone(),
        MapValue::PerCpu(vs) => {
            return Err(format!(
                "{} per-CPU values given, the kernel has {cpus} possible CPUs",
                vs.len()
            ));
        }
    };
    let mut out = Vec::with_capacity(slot * values.len());
    for mut v in values {
        v.resize(slot, 0);
        out.extend(v);
    }
    Ok(out)
}

pub(super) fn kernel_keys(
    fd: std::os::fd::BorrowedFd<'_>,
    key_len: usize,
    limit: usize,
) -> Result<Vec<Vec<u8>>, i32> {
    let mut keys = Vec::new();
    let mut key: Option<Vec<u8>> = None;
    loop {
        match kbpf::map_next_key_fd(fd, key.as_deref(), key_len) {
            Ok(next) => {
                keys.push(next.clone());
                key = Some(next);
            }
            // ENOENT: past the last key.
            Err(2) => return Ok(keys),
            Err(e) => return Err(e),
        }
        if keys.len() >= limit {
            return Ok(keys);
        }
    }
}
