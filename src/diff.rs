//! `bpfemu diff`: the running kernel as the judge. One object is loaded twice, into the kernel
//! through the raw bpf() syscall ([`bpfemu_conformance::kernel_object`]: the selected program
//! and the maps and programs it needs, as bpfemu's loader resolved them) and into bpfemu; both
//! get the same initial map contents (global data before the kernel's load, read-only data
//! frozen as libbpf freezes it); every packet runs
//! through both (the kernel through `BPF_PROG_TEST_RUN`); per packet the return value, the
//! `data_out` bytes (or the errno of a refused packet) and the ring buffer and perf event
//! records the run emitted (`events`: the kernel's read from its rings after each run) are
//! compared, and at the end every map's contents.
//!
//! ```no_run
//! use bpfemu::diff::{DiffOptions, Session};
//! let opts = DiffOptions::new("examples/xdp/build/reflector.v3.o");
//! let mut session = Session::open(&opts).unwrap();
//! let packet = vec![0u8; 64];
//! let cmp = session.run_packet(0, &packet);
//! assert!(!cmp.is_mismatch(), "{}", bpfemu::diff::format_packet(&cmp));
//! let maps = session.compare_maps().unwrap();
//! assert_eq!(maps.iter().map(|m| m.mismatches.len()).sum::<usize>(), 0);
//! ```
//!
//! # Making both sides see the same machine
//! - **Context**: the kernel runs without a ctx, so the program sees test_run's defaults
//!   (ingress ifindex 1, the loopback device, rx queue 0); bpfemu's [`PacketMeta`] defaults are
//!   the same. [`Session::run_packet_ctx`] passes an `xdp_md` (metadata length, ingress
//!   device, rx queue) to both sides instead.
//! - **Routes and devices**: with [`DiffOptions::fib`] the kernel side runs in a private
//!   network namespace built from the same FIB file ([`bpfemu_conformance::netns`]: the
//!   file's interfaces at its ifindexes, addresses, routes, neighbours), which the session's
//!   thread enters while the session lives: `bpf_fib_lookup` answers from it, devmap values
//!   are its ifindexes, and the loopback is its own. The namespace is deleted when the
//!   session drops. Without a FIB the kernel side runs in a fresh namespace (the loopback alone,
//!   `Fib::fresh_netns`), which is what bpfemu answers from then.
//! - **Per-CPU state**: bpfemu runs with as many virtual CPUs as the kernel has possible CPUs
//!   (so per-CPU values have the same number of copies, each padded to 8 bytes) and runs every
//!   packet on CPU 0; the [`Session`] pins the calling thread to CPU 0 while it lives, so the
//!   kernel's test runs update CPU 0's copies too. A session must stay on the thread that
//!   opened it.
//! - **Initial maps**: a `--maps` document is parsed once
//!   ([`bpfemu_loader::btf::json::parse_map_contents`]) and written to both sides through the
//!   syscall interface (kernel map fds, bpfemu's `sys_update`), with the per-CPU layout above.
//!
//! # The clock and random numbers
//! The kernel's clock and random pool cannot be replayed into bpfemu, so for an object that
//! calls a clock helper (`bpf_ktime_get_ns`, `_boot_ns`, `_coarse_ns`, `_tai_ns`,
//! `bpf_jiffies64`) or `bpf_get_prandom_u32` (found by scanning every program's instructions
//! for helper calls, [`scan_nondeterminism`]) the comparison works as follows:
//! 1. **Close clocks.** bpfemu's clock for a packet is the host's `CLOCK_MONOTONIC`, read just
//!    before the kernel runs the same packet; the kernel reads its clock a few microseconds
//!    later. The window from the first packet's reading to the end of the last run is the
//!    run's *clock window*.
//! 2. **Taint.** A second bpfemu runtime, with the same seed and clock, runs every packet in
//!    the interpreter with taint tracking ([`bpfemu_vm::taint`]): every value that comes from
//!    those helpers is tainted, and the taint follows what the program does with it (registers,
//!    stack, packet and map bytes, helper arguments and results, and the branches it steers).
//!    Exactly the results that depend on taint are left out, each with the helper call it
//!    depends on (`verdict depends on bpf_get_prandom_u32 at insn 5`):
//!    - a packet whose return value depends on taint has its return value *not compared*, and
//!      one whose bounds do (a tainted `bpf_xdp_adjust_head`) its bytes; the bytes of `data_out`
//!      that depend on taint are left out of that packet's byte comparison (and listed);
//!      everything else is still compared;
//!    - a map field (a BTF struct member, a global variable, or the whole value without BTF)
//!      that depends on taint in any entry is not compared in that map, nor is the key set of a
//!      map whose keys were inserted or deleted under taint.
//!
//! Every field left out is reported per map with its reason ([`ExcludedField`]), whether or not
//! the values happened to agree; nothing is left out silently. Objects that read neither the
//! clock nor random numbers get no taint runtime and no exclusions: every byte is compared.
//!
//! # What is not compared
//! Maps whose contents are references to kernel objects (prog arrays, map-in-maps, devmaps,
//! cpumaps, xskmaps), event channels (ring buffers, perf event arrays), and maps that cannot
//! be iterated without consuming them (queues, stacks, bloom filters) are listed with the
//! reason instead of being compared.

mod events;

pub use events::{EventComparison, EventRecord};

use crate::replay::hex;
use bpfemu_conformance::kernel::{self, BPF_PROG_TYPE_XDP};
use bpfemu_conformance::kernel::{self as kbpf, CpuPin, TestRunOutput, XdpMd};
use bpfemu_conformance::kernel_events::KernelEvents;
use bpfemu_conformance::kernel_isa::verifier_error_line;
use bpfemu_conformance::kernel_object::{
    InitialEntries, KernelLoadOptions, KernelObject, KernelObjectError,
};
use bpfemu_conformance::netns::{Entered, HeldNetns, Netns};
use bpfemu_isa::RawInsn;
use bpfemu_loader::btf::json::{self as mapjson, MapContents, MapValue};
use bpfemu_loader::btf::{Btf, BtfKind, TypeId};
use bpfemu_loader::{LoadOptions, Object};
use bpfemu_vm::taint::TaintSource;
use bpfemu_vm::xdp::{
    PacketError, PacketMeta, PacketTaint, XdpAction, XdpConfig, XdpOutcome, XdpRuntime,
};
use serde::Serialize;
use std::collections::{BTreeMap, HashSet};
use std::fmt::Write as _;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};

// ---------------------------------------------------------------------------------------------
// Errors

/// Why a comparison could not start or go on.
#[derive(Debug, thiserror::Error)]
pub enum DiffError {
    #[error("{0}")]
    KernelUnavailable(String),
    #[error("{path}: bpfemu cannot load the object: {message}")]
    Load { path: String, message: String },
    #[error("{path}: {error}")]
    Kernel {
        path: String,
        error: KernelObjectError,
    },
    #[error("{path}: {message}")]
    Program { path: String, message: String },
    /// `--engine jit-trusted` on a program bpfemu's verifier rejects.
    #[error("{0}")]
    Unverified(String),
    #[error("maps: {0}")]
    Maps(String),
    #[error("{path}: map {map}: cannot read the kernel's records: {source}")]
    Events {
        path: String,
        map: String,
        source: std::io::Error,
    },
    #[error("cannot pin the thread to CPU 0: {0}")]
    Pin(std::io::Error),
    #[error("{path}: {source}")]
    Namespace {
        path: String,
        source: bpfemu_conformance::netns::NetnsError,
    },
}

// ---------------------------------------------------------------------------------------------
// Kernel reachability

/// Whether the kernel can load and test-run an XDP program from this process: `Err` with a
/// sentence for the user (not root, no CAP_BPF/CAP_NET_ADMIN, no bpf() syscall).
pub fn kernel_ready() -> Result<(), String> {
    let insns = [
        RawInsn::new(0xb7, 0, 0, 0, 2), // r0 = XDP_PASS
        RawInsn::new(0x95, 0, 0, 0, 0), // exit
    ];
    let mut opts = kernel::LoadOptions::new(BPF_PROG_TYPE_XDP, &insns);
    opts.log_level = 0;
    let fd = kernel::prog_load(&opts).fd.map_err(|errno| {
        format!(
            "the kernel's bpf() is not usable here: loading an XDP program fails with {} \
             (bpfemu diff needs root, or CAP_BPF and CAP_NET_ADMIN, and a kernel with the bpf \
             syscall); nothing was compared",
            errno_name(errno)
        )
    })?;
    kbpf::test_run(fd.as_fd(), &[0u8; 14], None, 1)
        .map(|_| ())
        .map_err(|errno| {
            format!(
                "the kernel's BPF_PROG_TEST_RUN is not usable here ({}); nothing was compared",
                errno_name(errno)
            )
        })
}

fn errno_name(errno: i32) -> String {
    bpfemu_vm::maps::Errno(errno).to_string()
}

// ---------------------------------------------------------------------------------------------
// Clock and random helpers

/// Helper ids that read a clock: ktime_get_ns, jiffies64, ktime_get_boot_ns,
/// ktime_get_coarse_ns, ktime_get_tai_ns.
const CLOCK_HELPERS: &[i32] = &[5, 118, 125, 160, 208];
/// Helper ids that return random numbers: get_prandom_u32.
const RANDOM_HELPERS: &[i32] = &[7];

/// One program's call of a clock or random helper.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct HelperUse {
    pub program: String,
    pub helper: String,
    /// Calls of it in the program's instructions.
    pub calls: usize,
}

/// Which programs of an object read the clock or random numbers.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Nondeterminism {
    pub clock: Vec<HelperUse>,
    pub random: Vec<HelperUse>,
}

impl Nondeterminism {
    pub fn any(&self) -> bool {
        !self.clock.is_empty() || !self.random.is_empty()
    }
}

/// Scans every program (tail-call targets and subprograms included) for calls of clock and
/// random helpers.
pub fn scan_nondeterminism(object: &Object) -> Nondeterminism {
    let mut out = Nondeterminism::default();
    for prog in &object.programs {
        let mut counts: BTreeMap<i32, usize> = BTreeMap::new();
        let mut pc = 0;
        while pc < prog.insns.len() {
            let insn = &prog.insns[pc];
            if insn.code == 0x85 && insn.src == 0 {
                *counts.entry(insn.imm).or_default() += 1;
            }
            // An ld_imm64 takes two slots; its second slot is no instruction.
            pc += if insn.code == 0x18 { 2 } else { 1 };
        }
        for (id, calls) in counts {
            let helper_use = || HelperUse {
                program: prog.name.clone(),
                helper: format!(
                    "bpf_{}",
                    bpfemu_isa::helpers::helper_name(id).unwrap_or("?")
                ),
                calls,
            };
            if CLOCK_HELPERS.contains(&id) {
                out.clock.push(helper_use());
            } else if RANDOM_HELPERS.contains(&id) {
                out.random.push(helper_use());
            }
        }
    }
    out
}

/// The host clocks' span over the run: every clock reading a program made lies inside it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ClockWindow {
    pub monotonic_start_ns: u64,
    pub monotonic_end_ns: u64,
    pub boottime_start_ns: u64,
    pub boottime_end_ns: u64,
}

// ---------------------------------------------------------------------------------------------
// Options and the session

/// What to compare.
#[derive(Clone, Debug, Default)]
pub struct DiffOptions {
    pub object: PathBuf,
    /// The XDP program (needed when the object has several).
    pub program: Option<String>,
    /// How bpfemu loads the object; `map_sizes` are applied to the kernel's maps as well.
    pub load: LoadOptions,
    /// Seed of bpfemu's `bpf_get_prandom_u32`.
    pub seed: u64,
    /// Routing state for `bpf_fib_lookup` (JSON, as for replay): bpfemu's model, and the
    /// namespace the kernel side runs in (see the module docs).
    pub fib: Option<PathBuf>,
    /// The engine that runs bpfemu's side.
    pub engine: crate::runtime::EngineChoice,
    /// `ingress_ifindex` and `rx_queue_index` of every packet, handed to both sides as
    /// test_run's ctx (each side checks them as it does); `None`: no ctx (the loopback, queue 0).
    pub ifindex: Option<u32>,
    pub rxq: Option<u32>,
    /// Show progress on standard error when it is a terminal.
    pub progress: bool,
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
    object: Object,
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
struct FibNamespace {
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
        let object =
            bpfemu_loader::load_file(&opts.object, &opts.load).map_err(|e| DiffError::Load {
                path: path_str.clone(),
                message: e.to_string(),
            })?;
        let program_name = pick_program(&object, opts.program.as_deref()).map_err(|message| {
            DiffError::Program {
                path: path_str.clone(),
                message,
            }
        })?;
        let stack_bound = match opts.engine {
            engine if engine.is_trusted() => Some(
                crate::runtime::require_verified_for(engine, &object, &path_str, &program_name)
                    .map_err(DiffError::Unverified)?,
            ),
            _ => None,
        };
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
            Some(FibNamespace {
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
            .partition(|c| is_global_data(&object, &c.name));
        let kernel = KernelObject::load(
            &object,
            &program_name,
            &KernelLoadOptions {
                log_level: 0,
                log_size: 1 << 20,
                initial: initial_entries(&object, &before_load, cpus)?,
            },
        )
        .map_err(|error| DiffError::Kernel {
            path: path_str.clone(),
            error,
        })?;
        let kernel_events =
            KernelEvents::attach(&object, &kernel, cpus).map_err(|(map, source)| {
                DiffError::Events {
                    path: path_str.clone(),
                    map,
                    source,
                }
            })?;
        let nondeterminism = scan_nondeterminism(&object);
        let build = |seed: u64| {
            let cfg = XdpConfig {
                cpus,
                seed,
                fib: fib.clone(),
                ..XdpConfig::default()
            };
            let mut rt =
                crate::runtime::build_runtime(&object, cfg).map_err(|e| DiffError::Load {
                    path: path_str.clone(),
                    message: e.to_string(),
                })?;
            opts.engine
                .apply_verified(&mut rt, stack_bound)
                .map_err(|e| DiffError::Load {
                    path: path_str.clone(),
                    message: e.to_string(),
                })?;
            Ok(rt)
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
        let program = ours
            .program_index(&program_name)
            .expect("the program comes from the object");
        ours.runnable(program).map_err(|e| DiffError::Load {
            path: path_str.clone(),
            message: e.to_string(),
        })?;
        let pin = CpuPin::new(0).map_err(DiffError::Pin)?;
        let mut session = Session {
            kernel_events,
            kernel,
            object,
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
        &self.object
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
        let contents =
            mapjson::parse_map_contents(doc, &self.object.maps, self.object.btf.as_ref())
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
                .object
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
                        let frozen = if errno == EPERM && is_global_data(&self.object, &map.name) {
                            " (read-only data is frozen once the program is loaded: give it with --maps)"
                        } else {
                            ""
                        };
                        DiffError::Maps(format!(
                            "map {}: entry {i}: the kernel refuses the update with {}{frozen}",
                            map.name,
                            errno_name(errno)
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
            .object
            .maps
            .iter()
            .find(|m| m.name == name)
            .ok_or_else(|| DiffError::Maps(format!("no map named {name}")))?;
        let is_array = matches!(spec.map_type, 2 | 6);
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
        for (index, spec) in self.object.maps.iter().enumerate() {
            let type_name = map_type_name(spec.map_type);
            if let Some(reason) = not_comparable(spec.map_type) {
                reports.push(MapReport::skipped(&spec.name, type_name, reason));
                continue;
            }
            let Some(fd) = self.kernel.map_fd(&spec.name) else {
                reports.push(MapReport::skipped(
                    &spec.name,
                    type_name,
                    "the program does not use it (the kernel side has only what it needs)",
                ));
                continue;
            };
            let layout = MapLayout::new(spec, self.object.btf.as_ref());
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
                        errno_name(e)
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
            reports.push(acc.finish(&spec.name, type_name));
        }
        Ok(reports)
    }
}

/// The errno of a write to a frozen map.
const EPERM: i32 = 1;

/// Whether the object's map `name` holds global data (`.rodata`, `.data`, `.bss`, `.kconfig`).
fn is_global_data(object: &Object, name: &str) -> bool {
    object.maps.iter().any(|m| {
        m.name == name
            && matches!(
                m.origin,
                bpfemu_loader::MapOrigin::GlobalData { .. } | bpfemu_loader::MapOrigin::Kconfig
            )
    })
}

/// Entries to write into the kernel's maps before its load, in the syscall layout.
fn initial_entries(
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

/// The program to compare: the one named, or the object's only XDP program.
fn pick_program(object: &Object, wanted: Option<&str>) -> Result<String, String> {
    let xdp: Vec<&str> = object
        .programs
        .iter()
        .filter(|p| p.prog_type == BPF_PROG_TYPE_XDP)
        .map(|p| p.name.as_str())
        .collect();
    // A section name picks the program in it, as `ip link set ... sec S` does.
    let wanted = wanted.map(|w| object.find_program(w).map_or(w, |p| p.name.as_str()));
    match wanted {
        Some(name) if xdp.contains(&name) => Ok(name.to_owned()),
        Some(name) => Err(format!(
            "no XDP program `{name}`; the object has {}",
            if xdp.is_empty() {
                "none".to_owned()
            } else {
                xdp.join(", ")
            }
        )),
        None => match xdp.as_slice() {
            [only] => Ok((*only).to_owned()),
            [] => Err("no XDP program in this object".to_owned()),
            several if object.iproute2_default(several).is_some() => Ok(object
                .iproute2_default(several)
                .unwrap_or_default()
                .to_owned()),
            [first, ..] => Err(format!(
                "several XDP programs ({}); choose one with --prog (the first is `{first}`)",
                xdp.join(", ")
            )),
        },
    }
}

/// A value in the syscall layout: per-CPU maps get one 8-byte-padded copy per CPU.
fn sys_value(
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

fn kernel_keys(
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

// ---------------------------------------------------------------------------------------------
// Packets

/// What one side did with a packet.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Outcome {
    /// The program ran: its return value and test_run's `data_out`.
    Ran {
        retval: u32,
        action: String,
        #[serde(serialize_with = "ser_hex")]
        data: Vec<u8>,
    },
    /// BPF_PROG_TEST_RUN refused the packet (or bpfemu refused it as the kernel would).
    Refused { errno: i32, error: String },
    /// bpfemu's run stopped (a fault, the instruction budget): never a kernel outcome.
    Stopped { error: String },
}

impl Outcome {
    fn from_kernel(r: Result<TestRunOutput, i32>) -> Outcome {
        match r {
            Ok(o) => Outcome::Ran {
                retval: o.retval,
                action: action_name(o.retval),
                data: o.data,
            },
            Err(errno) => Outcome::Refused {
                errno,
                error: errno_name(errno),
            },
        }
    }

    fn from_bpfemu(r: Result<XdpOutcome, PacketError>) -> Outcome {
        match r {
            Ok(o) => Outcome::Ran {
                retval: o.retval,
                action: action_name(o.retval),
                data: o.data_out,
            },
            Err(PacketError::Refused { errno, reason }) => Outcome::Refused {
                errno: errno.0,
                error: format!("{errno}: {reason}"),
            },
            Err(e @ PacketError::Run { .. }) => Outcome::Stopped {
                error: e.to_string(),
            },
        }
    }

    /// A short description: `pass (retval 2), 60 bytes`.
    pub fn describe(&self) -> String {
        match self {
            Outcome::Ran {
                retval,
                action,
                data,
            } => {
                format!("{action} (retval {retval}), {} bytes", data.len())
            }
            Outcome::Refused { error, .. } => format!("refused: {error}"),
            Outcome::Stopped { error } => format!("stopped: {error}"),
        }
    }
}

fn action_name(retval: u32) -> String {
    crate::replay::action_name(XdpAction::from_retval(retval)).into_owned()
}

/// How one packet compared.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum PacketVerdict {
    Equal,
    Mismatch {
        /// Which parts differ: `retval`, `data`, `errno`, `outcome`.
        differs: Vec<String>,
    },
    /// The return value (or the packet's bounds) depends on the clock or random numbers:
    /// listed with the call it depends on, not judged; the rest of the result was equal.
    NotCompared {
        reason: String,
    },
}

/// One packet through both sides.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PacketComparison {
    pub index: usize,
    pub kernel: Outcome,
    pub bpfemu: Outcome,
    #[serde(flatten)]
    pub verdict: PacketVerdict,
    /// Offsets of `data_out` left out of the comparison because they depend on the clock or
    /// random numbers (see the module docs); empty for most packets.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub excluded_offsets: Vec<usize>,
    /// The ring buffer and perf event records of the run, on both sides (`None` when neither
    /// side emitted any).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub events: Option<EventComparison>,
    /// What the excluded bytes depend on (`bpf_ktime_get_ns at insn 7`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub excluded_because: Option<String>,
}

impl PacketComparison {
    pub fn is_mismatch(&self) -> bool {
        matches!(self.verdict, PacketVerdict::Mismatch { .. })
    }

    /// Whether it is worth printing: a mismatch, a packet not compared, excluded bytes or
    /// records not judged.
    pub fn is_notable(&self) -> bool {
        self.verdict != PacketVerdict::Equal
            || !self.excluded_offsets.is_empty()
            || self.events.as_ref().is_some_and(|e| e.not_compared)
    }

    /// Adds the comparison of the run's event records: differing records make the packet a
    /// mismatch (`events` among what differs).
    pub fn add_events(&mut self, events: EventComparison) {
        if events.is_empty() {
            return;
        }
        if events.differ {
            match &mut self.verdict {
                PacketVerdict::Equal => {
                    self.verdict = PacketVerdict::Mismatch {
                        differs: vec!["events".into()],
                    }
                }
                PacketVerdict::Mismatch { differs } => differs.push("events".into()),
                PacketVerdict::NotCompared { .. } => {}
            }
        }
        self.events = Some(events);
    }
}

/// Compares the kernel's and bpfemu's results for one packet; `taint` says what bpfemu's
/// results depend on (`None`: the object reads neither the clock nor random numbers).
pub fn compare_packet(
    index: usize,
    kernel: Result<TestRunOutput, i32>,
    ours: Result<XdpOutcome, PacketError>,
    taint: Option<&PacketTaint>,
) -> PacketComparison {
    let kernel = Outcome::from_kernel(kernel);
    let bpfemu = Outcome::from_bpfemu(ours);
    compare_outcomes(index, kernel, bpfemu, taint)
}

/// [`compare_packet`] on outcomes already converted: what depends on taint is left out and
/// said so, everything else is judged.
pub fn compare_outcomes(
    index: usize,
    kernel: Outcome,
    bpfemu: Outcome,
    taint: Option<&PacketTaint>,
) -> PacketComparison {
    let mut excluded_offsets = Vec::new();
    let mut excluded_because = None;
    let verdict = match (&kernel, &bpfemu) {
        (
            Outcome::Ran {
                retval: kr,
                data: kd,
                ..
            },
            Outcome::Ran {
                retval: br,
                data: bd,
                ..
            },
        ) => {
            let (verdict_taint, bounds_taint) =
                taint.map_or((None, None), |t| (t.verdict, t.bounds));
            if bounds_taint.is_none()
                && let Some(t) = taint
            {
                excluded_offsets = (0..bd.len())
                    .filter(|&i| t.bytes.get(i).copied().flatten().is_some())
                    .collect();
                let mut sources: Vec<String> = excluded_offsets
                    .iter()
                    .filter_map(|&i| t.bytes[i].map(|s| s.to_string()))
                    .collect();
                sources.dedup();
                excluded_because = (!sources.is_empty()).then(|| sources.join(", "));
            }
            let mut differs = Vec::new();
            if verdict_taint.is_none() && kr != br {
                differs.push("retval".to_owned());
            }
            let data_equal = kd.len() == bd.len()
                && (0..kd.len())
                    .all(|i| kd[i] == bd[i] || excluded_offsets.binary_search(&i).is_ok());
            if bounds_taint.is_none() && !data_equal {
                differs.push("data".to_owned());
            }
            let mut left_out = Vec::new();
            if let Some(t) = verdict_taint {
                left_out.push(format!("verdict depends on {t}"));
            }
            if let Some(t) = bounds_taint {
                left_out.push(format!("packet bounds (and bytes) depend on {t}"));
            }
            if !differs.is_empty() {
                PacketVerdict::Mismatch { differs }
            } else if !left_out.is_empty() {
                PacketVerdict::NotCompared {
                    reason: left_out.join("; "),
                }
            } else {
                PacketVerdict::Equal
            }
        }
        (Outcome::Refused { errno: a, .. }, Outcome::Refused { errno: b, .. }) => {
            if a == b {
                PacketVerdict::Equal
            } else {
                PacketVerdict::Mismatch {
                    differs: vec!["errno".into()],
                }
            }
        }
        _ => PacketVerdict::Mismatch {
            differs: vec!["outcome".into()],
        },
    };
    PacketComparison {
        index,
        kernel,
        bpfemu,
        verdict,
        excluded_offsets,
        events: None,
        excluded_because,
    }
}

/// Bytes of context shown on each side of the first difference.
const HEX_CONTEXT: usize = 8;

/// A hex diff of two byte strings around their first difference: `None` when equal.
///
/// ```
/// let text = bpfemu::diff::hex_diff(&[1, 2, 3, 4], &[1, 2, 9, 4]).unwrap();
/// assert!(text.contains("first difference at offset 2 (0x2)"));
/// assert!(text.contains("[03]") && text.contains("[09]"));
/// ```
pub fn hex_diff(kernel: &[u8], ours: &[u8]) -> Option<String> {
    let first = (0..kernel.len().max(ours.len())).find(|&i| kernel.get(i) != ours.get(i))?;
    let differing = (0..kernel.len().max(ours.len()))
        .filter(|&i| kernel.get(i) != ours.get(i))
        .count();
    let start = first.saturating_sub(HEX_CONTEXT);
    let end = (first + HEX_CONTEXT + 1).min(kernel.len().max(ours.len()));
    let line = |bytes: &[u8]| {
        let mut s = format!("{start:#06x}:");
        for i in start..end {
            let b = bytes.get(i).map_or("--".to_owned(), |b| format!("{b:02x}"));
            if i == first {
                write!(s, " [{b}]").expect("string");
            } else {
                write!(s, " {b}").expect("string");
            }
        }
        s
    };
    let mut out = format!(
        "first difference at offset {first} ({first:#x}); {differing} byte(s) differ; lengths: kernel {}, bpfemu {}\n",
        kernel.len(),
        ours.len()
    );
    writeln!(out, "    kernel {}", line(kernel)).expect("string");
    writeln!(out, "    bpfemu {}", line(ours)).expect("string");
    Some(out)
}

/// The text printed for a notable packet (several lines, ending with a newline).
pub fn format_packet(cmp: &PacketComparison) -> String {
    let mut out = String::new();
    let head = match &cmp.verdict {
        PacketVerdict::Equal => "equal".to_owned(),
        PacketVerdict::Mismatch { differs } => format!("MISMATCH ({})", differs.join(", ")),
        PacketVerdict::NotCompared { reason } => format!("not compared: {reason}"),
    };
    writeln!(out, "packet {}: {head}", cmp.index).expect("string");
    writeln!(out, "  kernel: {}", cmp.kernel.describe()).expect("string");
    writeln!(out, "  bpfemu: {}", cmp.bpfemu.describe()).expect("string");
    if let (Outcome::Ran { data: k, .. }, Outcome::Ran { data: b, .. }) = (&cmp.kernel, &cmp.bpfemu)
        && let Some(diff) = hex_diff(k, b)
    {
        write!(out, "  data: {diff}").expect("string");
    }
    if !cmp.excluded_offsets.is_empty() {
        writeln!(
            out,
            "  not compared (bytes that depend on {}): offsets {:?}",
            cmp.excluded_because
                .as_deref()
                .unwrap_or("the clock or random numbers"),
            cmp.excluded_offsets
        )
        .expect("string");
    }
    if let Some(events) = cmp.events.as_ref().filter(|e| e.differ || e.not_compared) {
        out.push_str(&events.describe());
    }
    out
}

fn ser_hex<S: serde::Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&hex(bytes))
}

fn ser_opt_hex<S: serde::Serializer>(bytes: &Option<Vec<u8>>, s: S) -> Result<S::Ok, S::Error> {
    match bytes {
        Some(b) => s.serialize_str(&hex(b)),
        None => s.serialize_none(),
    }
}

// ---------------------------------------------------------------------------------------------
// Maps

/// A field of a map value: a BTF struct member or global variable (nested ones by dotted
/// path), or the whole value when there is no BTF.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Leaf {
    path: String,
    offset: usize,
    size: usize,
}

/// How a map's values split into fields, and into per-CPU copies.
struct MapLayout {
    leaves: Vec<Leaf>,
    value_size: usize,
    /// The padded size of one CPU's copy, for per-CPU maps.
    per_cpu_slot: Option<usize>,
}

impl MapLayout {
    fn new(spec: &bpfemu_loader::MapSpec, btf: Option<&Btf>) -> MapLayout {
        let value_size = spec.value_size as usize;
        let mut leaves = Vec::new();
        if let (Some(btf), Some(ty)) = (btf, spec.value_type) {
            collect_leaves(btf, ty, "", 0, &mut leaves, 0);
        }
        leaves.retain(|l| l.size > 0 && l.offset + l.size <= value_size);
        fill_gaps(&mut leaves, value_size);
        MapLayout {
            leaves,
            value_size,
            per_cpu_slot: kbpf::is_per_cpu_map(spec.map_type).then(|| value_size.div_ceil(8) * 8),
        }
    }

    /// The value's copies: `(Some(cpu), bytes)` per CPU, or `(None, bytes)`.
    fn copies<'a>(&self, value: &'a [u8]) -> Vec<(Option<usize>, &'a [u8])> {
        match self.per_cpu_slot {
            Some(slot) => value
                .chunks(slot)
                .enumerate()
                .map(|(cpu, c)| (Some(cpu), &c[..self.value_size.min(c.len())]))
                .collect(),
            None => vec![(None, value)],
        }
    }
}

const MAX_LEAF_DEPTH: usize = 8;

fn collect_leaves(
    btf: &Btf,
    ty: TypeId,
    path: &str,
    offset: usize,
    out: &mut Vec<Leaf>,
    depth: usize,
) {
    let Some(id) = btf.skip_mods_and_typedefs(ty) else {
        return;
    };
    let Some(t) = btf.get(id) else {
        return;
    };
    let size = btf.size_of(id).unwrap_or(0) as usize;
    let name_or = |fallback: &str| {
        if path.is_empty() {
            fallback.to_owned()
        } else {
            path.to_owned()
        }
    };
    match &t.kind {
        BtfKind::Struct { members, .. } if depth < MAX_LEAF_DEPTH => {
            for m in members {
                let child = match (path.is_empty(), m.name.is_empty()) {
                    (_, true) => path.to_owned(),
                    (true, false) => m.name.clone(),
                    (false, false) => format!("{path}.{}", m.name),
                };
                let off = offset + (m.bit_offset / 8) as usize;
                if m.bitfield_size > 0 {
                    let bits = (m.bit_offset % 8 + m.bitfield_size) as usize;
                    out.push(Leaf {
                        path: child,
                        offset: off,
                        size: bits.div_ceil(8),
                    });
                } else {
                    collect_leaves(btf, m.ty, &child, off, out, depth + 1);
                }
            }
        }
        BtfKind::DataSec { vars, .. } if depth < MAX_LEAF_DEPTH => {
            for v in vars {
                let name = btf.name_of(v.ty).unwrap_or("?").to_owned();
                let var_ty = match btf.get(v.ty).map(|t| &t.kind) {
                    Some(BtfKind::Var { ty, .. }) => *ty,
                    _ => continue,
                };
                let before = out.len();
                collect_leaves(
                    btf,
                    var_ty,
                    &name,
                    offset + v.offset as usize,
                    out,
                    depth + 1,
                );
                if out.len() == before {
                    out.push(Leaf {
                        path: name,
                        offset: offset + v.offset as usize,
                        size: v.size as usize,
                    });
                }
            }
        }
        _ => out.push(Leaf {
            path: name_or("(value)"),
            offset,
            size,
        }),
    }
}

/// Adds `(padding @N)` leaves for bytes no field covers, so every byte is compared.
fn fill_gaps(leaves: &mut Vec<Leaf>, value_size: usize) {
    let mut covered = vec![false; value_size];
    for l in leaves.iter() {
        covered[l.offset..l.offset + l.size]
            .iter_mut()
            .for_each(|c| *c = true);
    }
    let mut i = 0;
    while i < value_size {
        if covered[i] {
            i += 1;
            continue;
        }
        let start = i;
        while i < value_size && !covered[i] {
            i += 1;
        }
        let path = if start == 0 && i == value_size {
            "(value)".to_owned()
        } else {
            format!("(bytes {start}..{i})")
        };
        leaves.push(Leaf {
            path,
            offset: start,
            size: i - start,
        });
    }
    leaves.sort_by_key(|l| (l.offset, l.size));
}

/// A field left out of a map's comparison.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ExcludedField {
    pub field: String,
    pub reason: String,
    /// Entries (per-CPU copies count once each) where the kernel and bpfemu differ in it.
    pub entries_differing: usize,
}

/// One field of one entry that differs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FieldDiff {
    pub field: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu: Option<usize>,
    #[serde(serialize_with = "ser_hex")]
    pub kernel: Vec<u8>,
    #[serde(serialize_with = "ser_hex")]
    pub bpfemu: Vec<u8>,
}

/// One entry that differs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct EntryMismatch {
    #[serde(serialize_with = "ser_hex")]
    pub key: Vec<u8>,
    /// The kernel's value (absent: the key is only in bpfemu).
    #[serde(serialize_with = "ser_opt_hex")]
    pub kernel: Option<Vec<u8>>,
    #[serde(serialize_with = "ser_opt_hex")]
    pub bpfemu: Option<Vec<u8>>,
    /// The fields that differ (both sides have the key).
    pub fields: Vec<FieldDiff>,
}

/// How one map compared.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MapReport {
    pub name: String,
    pub map_type: String,
    pub compared: bool,
    /// Why the map was not compared at all.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_compared_reason: Option<String>,
    pub kernel_entries: usize,
    pub bpfemu_entries: usize,
    /// Entries equal in every compared field.
    pub equal_entries: usize,
    pub mismatches: Vec<EntryMismatch>,
    /// Entries that differ beyond the first 10,000, counted but not listed.
    #[serde(skip_serializing_if = "is_zero")]
    pub unlisted_mismatches: usize,
    /// Fields not compared (clock readings, clock/random-derived values), with the reason.
    pub not_compared_fields: Vec<ExcludedField>,
    /// Keys present on one side only that are not judged (the key set itself depends on the
    /// clock or random numbers).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_compared_keys: Option<String>,
}

impl MapReport {
    fn skipped(name: &str, map_type: &str, reason: &str) -> MapReport {
        MapReport {
            name: name.to_owned(),
            map_type: map_type.to_owned(),
            compared: false,
            not_compared_reason: Some(reason.to_owned()),
            kernel_entries: 0,
            bpfemu_entries: 0,
            equal_entries: 0,
            mismatches: Vec::new(),
            unlisted_mismatches: 0,
            not_compared_fields: Vec::new(),
            not_compared_keys: None,
        }
    }
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// Why a map type's contents are not compared, or `None` when they are.
fn not_comparable(map_type: u32) -> Option<&'static str> {
    match map_type {
        1 | 2 | 5 | 6 | 9 | 10 | 11 => None,
        3 => Some("a prog array holds program references (kernel fds vs. bpfemu indices)"),
        12 | 13 => Some("a map-in-map holds map references (kernel fds vs. bpfemu indices)"),
        14 | 25 => Some("a devmap holds devices (the kernel returns its own program ids)"),
        16 => Some("a cpumap holds CPU queues (the kernel returns its own program ids)"),
        17 => Some("an xskmap holds AF_XDP sockets, which the syscall side cannot read"),
        4 => Some("a perf event array is an event channel, not stored state"),
        27 => Some("a ring buffer's records are consumed by user space, not iterated"),
        22 | 23 => Some("a queue or stack can only be read by popping it"),
        30 => Some("a bloom filter cannot be iterated"),
        _ => Some("this map type is not compared"),
    }
}

/// `BPF_MAP_TYPE_*` names, lower-case, as bpftool shows them.
pub fn map_type_name(map_type: u32) -> &'static str {
    const NAMES: &[&str] = &[
        "unspec",
        "hash",
        "array",
        "prog_array",
        "perf_event_array",
        "percpu_hash",
        "percpu_array",
        "stack_trace",
        "cgroup_array",
        "lru_hash",
        "lru_percpu_hash",
        "lpm_trie",
        "array_of_maps",
        "hash_of_maps",
        "devmap",
        "sockmap",
        "cpumap",
        "xskmap",
        "sockhash",
        "cgroup_storage",
        "reuseport_sockarray",
        "percpu_cgroup_storage",
        "queue",
        "stack",
        "sk_storage",
        "devmap_hash",
        "struct_ops",
        "ringbuf",
        "inode_storage",
        "task_storage",
        "bloom_filter",
        "user_ringbuf",
        "cgrp_storage",
        "arena",
    ];
    NAMES.get(map_type as usize).copied().unwrap_or("unknown")
}

/// Entries that differ kept in full for the report; beyond it they are counted only.
const MAX_LISTED_MISMATCHES: usize = 10_000;

/// Array elements compared in one block when the kernel's array is mapped.
const BLOCK_ELEMENTS: usize = 4096;

/// Map types whose keys are the indices `0..max_entries`, all always present.
fn is_index_keyed(map_type: u32) -> bool {
    matches!(map_type, 2 | 6)
}

/// Calls `each(key, value)` for every entry of a kernel map: in batches where the map type has
/// batch operations, one key at a time where it does not (LPM tries). At most `max_entries`
/// entries are read.
fn stream_kernel_entries(
    fd: std::os::fd::BorrowedFd<'_>,
    key_len: usize,
    value_len: usize,
    max_entries: u32,
    mut each: impl FnMut(&[u8], &[u8]),
) -> Result<(), i32> {
    // About 8 MiB of keys and values a batch.
    let chunk =
        ((8usize << 20) / (key_len + value_len).max(1)).clamp(1, max_entries.max(1) as usize);
    let mut seen = 0usize;
    let batched = kbpf::map_lookup_batches(fd, key_len, value_len, chunk, |n, keys, values| {
        for i in 0..n {
            each(
                &keys[i * key_len..(i + 1) * key_len],
                &values[i * value_len..(i + 1) * value_len],
            );
        }
        seen += n;
    });
    match batched {
        Ok(()) => Ok(()),
        // No batch operations for this map type: one entry at a time.
        Err(22 | 95 | 524) if seen == 0 => {
            let mut key: Option<Vec<u8>> = None;
            for _ in 0..=max_entries {
                let next = match kbpf::map_next_key_fd(fd, key.as_deref(), key_len) {
                    Ok(k) => k,
                    Err(2) => return Ok(()),
                    Err(e) => return Err(e),
                };
                match kbpf::map_lookup_fd(fd, &next, value_len) {
                    Ok(v) => each(&next, &v),
                    Err(2) => {}
                    Err(e) => return Err(e),
                }
                key = Some(next);
            }
            Ok(())
        }
        Err(e) => Err(e),
    }
}

/// A runtime's plain array map, in place.
fn array_storage(rt: &XdpRuntime, index: usize) -> Option<bpfemu_vm::maps::ArrayStorage<'_>> {
    rt.maps()
        .get(index)
        .and_then(|m| m.array_storage(rt.memory()))
}

/// A runtime map's keys in `get_next_key` order (at most `max_entries + 1`).
fn runtime_keys(
    rt: &XdpRuntime,
    index: usize,
    max_entries: u32,
) -> impl Iterator<Item = Vec<u8>> + '_ {
    let mut key: Option<Vec<u8>> = None;
    std::iter::from_fn(move || {
        let next = rt.maps().sys_next_key(index, key.as_deref()).ok()?;
        key = Some(next.clone());
        Some(next)
    })
    .take(max_entries as usize + 1)
}

/// One entry that differs before exclusions are known.
struct Candidate {
    key: Vec<u8>,
    kernel: Option<Vec<u8>>,
    ours: Option<Vec<u8>>,
}

/// One map's comparison, fed entry by entry ([`MapComparison::entry`]) and judged at the end,
/// when every field that depends on the clock or random numbers is known.
struct MapComparison<'a> {
    layout: &'a MapLayout,
    kernel_entries: usize,
    bpfemu_entries: usize,
    /// Entries byte-for-byte equal on both sides.
    equal_entries: usize,
    /// Fields tainted in some entry of bpfemu's, with what they depend on.
    tainted: BTreeMap<String, TaintSource>,
    /// What the key set depends on, when keys were inserted or deleted under taint.
    keys_tainted: Option<TaintSource>,
    candidates: Vec<Candidate>,
    /// Differing entries beyond [`MAX_LISTED_MISMATCHES`].
    unlisted: usize,
}

impl<'a> MapComparison<'a> {
    fn new(layout: &'a MapLayout, keys_tainted: Option<TaintSource>) -> Self {
        MapComparison {
            layout,
            kernel_entries: 0,
            bpfemu_entries: 0,
            equal_entries: 0,
            tainted: BTreeMap::new(),
            keys_tainted,
            candidates: Vec::new(),
            unlisted: 0,
        }
    }

    /// One key: the kernel's value, bpfemu's (`None`: no such key), and the taint of each
    /// byte of bpfemu's (`None`: nothing tainted).
    fn entry(
        &mut self,
        key: &[u8],
        kernel: Option<&[u8]>,
        ours: Option<&[u8]>,
        taint: Option<&[Option<TaintSource>]>,
    ) {
        self.kernel_entries += usize::from(kernel.is_some());
        self.bpfemu_entries += usize::from(ours.is_some());
        if let Some(taint) = taint {
            self.note_taint(taint);
        }
        if kernel.is_some() && kernel == ours {
            self.equal_entries += 1;
            return;
        }
        if self.candidates.len() < MAX_LISTED_MISMATCHES {
            self.candidates.push(Candidate {
                key: key.to_vec(),
                kernel: kernel.map(<[u8]>::to_vec),
                ours: ours.map(<[u8]>::to_vec),
            });
        } else {
            self.unlisted += 1;
        }
    }

    /// `n` entries equal byte for byte on both sides, with nothing tainted in them.
    fn equal_block(&mut self, n: usize) {
        self.kernel_entries += n;
        self.bpfemu_entries += n;
        self.equal_entries += n;
    }

    /// Marks every field with a tainted byte in some CPU's copy.
    fn note_taint(&mut self, taint: &[Option<TaintSource>]) {
        let stride = self.layout.per_cpu_slot.unwrap_or(taint.len().max(1));
        for copy in taint.chunks(stride) {
            for leaf in &self.layout.leaves {
                let bytes = copy
                    .get(leaf.offset..leaf.offset + leaf.size)
                    .unwrap_or_default();
                if let Some(source) = bytes.iter().find_map(|t| *t) {
                    self.tainted.entry(leaf.path.clone()).or_insert(source);
                }
            }
        }
    }

    /// The report: differing entries judged field by field, with the excluded fields left out.
    fn finish(self, name: &str, map_type: &str) -> MapReport {
        let excluded: BTreeMap<String, ExcludedField> = self
            .tainted
            .iter()
            .map(|(path, source)| {
                let field = ExcludedField {
                    field: path.clone(),
                    reason: format!("depends on {source}"),
                    entries_differing: 0,
                };
                (path.clone(), field)
            })
            .collect();
        let mut excluded = excluded;
        let mut mismatches = Vec::new();
        let mut equal_entries = self.equal_entries;
        for c in self.candidates {
            let (Some(k), Some(o)) = (&c.kernel, &c.ours) else {
                if self.keys_tainted.is_none() {
                    mismatches.push(EntryMismatch {
                        key: c.key,
                        kernel: c.kernel,
                        bpfemu: c.ours,
                        fields: Vec::new(),
                    });
                }
                continue;
            };
            let fields = self.layout.differing_fields(k, o, &mut excluded);
            if fields.is_empty() {
                equal_entries += 1;
            } else {
                mismatches.push(EntryMismatch {
                    key: c.key,
                    kernel: Some(k.clone()),
                    bpfemu: Some(o.clone()),
                    fields,
                });
            }
        }
        MapReport {
            name: name.to_owned(),
            map_type: map_type.to_owned(),
            compared: true,
            not_compared_reason: None,
            kernel_entries: self.kernel_entries,
            bpfemu_entries: self.bpfemu_entries,
            equal_entries,
            mismatches,
            unlisted_mismatches: self.unlisted,
            not_compared_fields: excluded.into_values().collect(),
            not_compared_keys: self.keys_tainted.map(|source| {
                format!(
                    "keys present on one side only are not judged: the key set depends on \
                     {source} (keys inserted or deleted under its taint)"
                )
            }),
        }
    }
}

impl MapLayout {
    /// The fields of two values that differ; those in `excluded` are counted there instead.
    fn differing_fields(
        &self,
        k: &[u8],
        o: &[u8],
        excluded: &mut BTreeMap<String, ExcludedField>,
    ) -> Vec<FieldDiff> {
        let mut fields = Vec::new();
        for ((cpu, ck), (_, co)) in self.copies(k).into_iter().zip(self.copies(o)) {
            for leaf in &self.leaves {
                let (fk, fo) = (field(ck, leaf), field(co, leaf));
                if fk == fo {
                    continue;
                }
                if let Some(e) = excluded.get_mut(&leaf.path) {
                    e.entries_differing += 1;
                    continue;
                }
                fields.push(FieldDiff {
                    field: leaf.path.clone(),
                    cpu,
                    kernel: fk.to_vec(),
                    bpfemu: fo.to_vec(),
                });
            }
        }
        if k.len() != o.len() {
            fields.push(FieldDiff {
                field: "(value length)".into(),
                cpu: None,
                kernel: (k.len() as u32).to_be_bytes().to_vec(),
                bpfemu: (o.len() as u32).to_be_bytes().to_vec(),
            });
        }
        fields
    }
}

fn field<'a>(copy: &'a [u8], leaf: &Leaf) -> &'a [u8] {
    copy.get(leaf.offset..leaf.offset + leaf.size)
        .unwrap_or_default()
}

/// The text printed for a map's comparison.
pub fn format_map(report: &MapReport) -> String {
    let mut out = String::new();
    if !report.compared {
        writeln!(
            out,
            "map {} ({}): not compared: {}",
            report.name,
            report.map_type,
            report.not_compared_reason.as_deref().unwrap_or("")
        )
        .expect("string");
        return out;
    }
    writeln!(
        out,
        "map {} ({}): {} kernel entries, {} bpfemu entries, {} equal, {} mismatches",
        report.name,
        report.map_type,
        report.kernel_entries,
        report.bpfemu_entries,
        report.equal_entries,
        report.mismatches.len() + report.unlisted_mismatches
    )
    .expect("string");
    for e in &report.not_compared_fields {
        writeln!(
            out,
            "  not compared: field {}: {} ({} differing)",
            e.field, e.reason, e.entries_differing
        )
        .expect("string");
    }
    if let Some(keys) = &report.not_compared_keys {
        writeln!(out, "  not compared: {keys}").expect("string");
    }
    if report.unlisted_mismatches > 0 {
        writeln!(
            out,
            "  {} more entries differ (not listed)",
            report.unlisted_mismatches
        )
        .expect("string");
    }
    for m in &report.mismatches {
        match (&m.kernel, &m.bpfemu) {
            (Some(_), None) => {
                writeln!(out, "  MISMATCH key {}: only in the kernel", hex(&m.key))
            }
            (None, Some(_)) => writeln!(out, "  MISMATCH key {}: only in bpfemu", hex(&m.key)),
            _ => {
                writeln!(out, "  MISMATCH key {}:", hex(&m.key)).expect("string");
                for f in &m.fields {
                    let cpu = f.cpu.map_or(String::new(), |c| format!(" (cpu {c})"));
                    writeln!(
                        out,
                        "    {}{cpu}: kernel {}, bpfemu {}",
                        f.field,
                        hex(&f.kernel),
                        hex(&f.bpfemu)
                    )
                    .expect("string");
                }
                Ok(())
            }
        }
        .expect("string");
    }
    out
}

// ---------------------------------------------------------------------------------------------
// A whole capture

/// Totals of a comparison.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Summary {
    pub packets: usize,
    /// Packet mismatches plus map entry mismatches.
    pub mismatches: usize,
    pub packet_mismatches: usize,
    pub map_mismatches: usize,
    /// Packets whose results depend on the clock or random numbers and differ.
    pub packets_not_compared: usize,
}

impl std::fmt::Display for Summary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} packets, {} mismatches",
            self.packets, self.mismatches
        )
    }
}

/// Everything `bpfemu diff OBJ PCAP` found: the `--json` document.
#[derive(Clone, Debug, Serialize)]
pub struct DiffReport {
    pub object: String,
    pub program: String,
    pub engine: &'static str,
    /// Kernel possible CPUs = bpfemu virtual CPUs; every packet runs on CPU 0.
    pub cpus: u32,
    /// The programs that read the clock or random numbers (see the module docs).
    pub nondeterminism: Nondeterminism,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub clock_window: Option<ClockWindow>,
    /// Packets that are not plain agreements: mismatches, packets not compared, packets with
    /// bytes left out.
    pub packets: Vec<PacketComparison>,
    pub maps: Vec<MapReport>,
    pub summary: Summary,
}

/// Sums up packet comparisons and map reports.
pub fn summarize(packets: usize, notable: &[PacketComparison], maps: &[MapReport]) -> Summary {
    let packet_mismatches = notable.iter().filter(|p| p.is_mismatch()).count();
    let map_mismatches = maps
        .iter()
        .map(|m| m.mismatches.len() + m.unlisted_mismatches)
        .sum();
    Summary {
        packets,
        mismatches: packet_mismatches + map_mismatches,
        packet_mismatches,
        map_mismatches,
        packets_not_compared: notable
            .iter()
            .filter(|p| matches!(p.verdict, PacketVerdict::NotCompared { .. }))
            .count(),
    }
}

/// Runs every packet of a capture through both sides (after `maps`, a `--maps` file, is set on
/// both) and compares the maps at the end. `on_packet` sees each notable packet as it comes.
/// `--ifindex`/`--rxq` against this host's devices, as test_run checks its ctx: a queue
/// needs a device, the device must exist (else ENODEV for every packet), the queue must be one
/// of its receive queues (else EINVAL). Said once, before any packet.
fn check_host_rx(ifindex: Option<u32>, rxq: Option<u32>) -> Result<(), String> {
    let (ifindex, rxq) = match (ifindex, rxq) {
        (None, None) => return Ok(()),
        (i, q) => (i.unwrap_or(1), q.unwrap_or(0)),
    };
    if ifindex == 0 {
        return match rxq {
            0 => Ok(()),
            q => Err(format!(
                "--rxq {q} without --ifindex: the kernel refuses a queue without a device (EINVAL)"
            )),
        };
    }
    let devices =
        std::fs::read_dir("/sys/class/net").map_err(|e| format!("/sys/class/net: {e}"))?;
    for dev in devices.flatten() {
        let path = dev.path();
        let index = std::fs::read_to_string(path.join("ifindex")).unwrap_or_default();
        if index.trim().parse() != Ok(ifindex) {
            continue;
        }
        let queues = std::fs::read_dir(path.join("queues"))
            .map(|q| {
                q.flatten()
                    .filter(|e| e.file_name().to_string_lossy().starts_with("rx-"))
                    .count()
            })
            .unwrap_or(1) as u32;
        return if rxq < queues.max(1) {
            Ok(())
        } else {
            Err(format!(
                "--rxq {rxq}: {} (ifindex {ifindex}) has {} receive queues; the kernel refuses the packets (EINVAL)",
                dev.file_name().to_string_lossy(),
                queues.max(1)
            ))
        };
    }
    Err(format!(
        "--ifindex {ifindex}: no such device on this host; the kernel refuses the packets (ENODEV)"
    ))
}

pub fn diff_capture(
    opts: &DiffOptions,
    capture: &Path,
    maps: Option<&Path>,
    mut on_packet: impl FnMut(&PacketComparison),
) -> anyhow::Result<DiffReport> {
    use anyhow::Context;
    let doc = maps
        .map(|file| -> anyhow::Result<serde_json::Value> {
            let text = std::fs::read_to_string(file)
                .with_context(|| format!("cannot read {}", file.display()))?;
            serde_json::from_str(&text).with_context(|| format!("{}: not JSON", file.display()))
        })
        .transpose()?;
    if opts.fib.is_none() {
        check_host_rx(opts.ifindex, opts.rxq).map_err(|e| anyhow::anyhow!(e))?;
    }
    let mut reader = crate::pcap::PcapReader::open(capture)?;
    let mut session = match (&doc, maps) {
        (Some(doc), Some(file)) => {
            Session::open_with_maps(opts, Some(doc)).map_err(|e| match e {
                DiffError::Maps(m) => anyhow::anyhow!("{}: {m}", file.display()),
                other => other.into(),
            })?
        }
        _ => Session::open(opts)?,
    };
    crate::replay::print_warnings(&opts.object, &session.object);
    let mut notable = Vec::new();
    let mut count = 0;
    let mut progress = crate::progress::Progress::capture(opts.progress, capture, 8);
    while let Some(packet) = reader.next() {
        let packet = packet?;
        let cmp = if opts.ifindex.is_some() || opts.rxq.is_some() {
            let md = XdpMd::new(
                packet.data.len(),
                0,
                opts.ifindex.unwrap_or(1),
                opts.rxq.unwrap_or(0),
            );
            session.run_packet_ctx(packet.index, &packet.data, Some(&md))
        } else {
            session.run_packet(packet.index, &packet.data)
        };
        count += 1;
        if cmp.is_notable() {
            progress.suspend(|| on_packet(&cmp));
            notable.push(cmp);
        }
        progress.tick(count as u64, || reader.bytes_read());
    }
    progress.finish(count as u64);
    let maps = session.compare_maps()?;
    let summary = summarize(count, &notable, &maps);
    let reads_clock = !session.nondeterminism().clock.is_empty();
    Ok(DiffReport {
        object: opts.object.display().to_string(),
        program: session.program_name().to_owned(),
        engine: opts.engine.name(),
        cpus: session.cpus(),
        nondeterminism: session.nondeterminism().clone(),
        clock_window: reads_clock.then(|| session.clock_window()),
        packets: notable,
        maps,
        summary,
    })
}

/// The lines printed before the packets: what is compared, and the clock/random policy.
pub fn format_header(report: &DiffReport) -> String {
    let mut out = format!(
        "diff {} program {}: kernel (BPF_PROG_TEST_RUN, pinned to CPU 0) vs bpfemu ({}, {} CPUs, packets on CPU 0)\n",
        report.object, report.program, report.engine, report.cpus
    );
    let uses = |v: &[HelperUse]| {
        v.iter()
            .map(|u| format!("{} calls {}", u.program, u.helper))
            .collect::<Vec<_>>()
            .join(", ")
    };
    if !report.nondeterminism.clock.is_empty() {
        writeln!(
            out,
            "clock: {}: bpfemu's clock is the host's, read before each kernel run; clock-dependent fields are not compared (listed per map)",
            uses(&report.nondeterminism.clock)
        )
        .expect("string");
    }
    if !report.nondeterminism.random.is_empty() {
        writeln!(
            out,
            "random: {}: random-dependent results and fields are not compared (listed)",
            uses(&report.nondeterminism.random)
        )
        .expect("string");
    }
    out
}

/// The complete text report after the packets were printed: maps, then the summary line.
pub fn format_maps_and_summary(report: &DiffReport) -> String {
    let mut out = String::new();
    for m in &report.maps {
        out.push_str(&format_map(m));
    }
    if report.summary.packets_not_compared > 0 {
        writeln!(
            out,
            "{} packets not compared (their results depend on the clock or random numbers)",
            report.summary.packets_not_compared
        )
        .expect("string");
    }
    writeln!(out, "{}", report.summary).expect("string");
    out
}

// ---------------------------------------------------------------------------------------------
// Verifier verdicts

/// The kernel's verdict on one program.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct KernelVerdict {
    pub accepted: bool,
    /// The kernel's error line for a rejection (or why the load could not happen).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// `processed N insns` from the statistics line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub processed_insns: Option<u64>,
    /// `verification time N usec`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verification_time_usec: Option<u64>,
    /// The full statistics line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stats: Option<String>,
}

/// One program's line of `bpfemu diff --verifier`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ProgramVerdict {
    pub program: String,
    pub section: String,
    pub kernel: KernelVerdict,
    /// bpfemu's verifier on the same program.
    pub bpfemu: BpfemuVerdict,
    /// Same verdict, and for a rejection the same error line.
    pub agree: bool,
}

/// bpfemu's verdict on one program.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct BpfemuVerdict {
    /// False for programs bpfemu's verifier does not judge (not XDP): then nothing else
    /// counts, and the program is left out of the agreement.
    pub verified: bool,
    pub accepted: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub processed_insns: u64,
    pub verification_time_usec: u64,
}

impl BpfemuVerdict {
    /// bpfemu's verifier on program `p` of `object`.
    pub fn of(object: &bpfemu_loader::Object, p: &bpfemu_loader::ProgramSpec) -> BpfemuVerdict {
        use bpfemu_verifier::{Options, ProgramInput, verify};
        if !crate::verify::is_verified_type(p) {
            return BpfemuVerdict {
                verified: false,
                accepted: false,
                error: Some(crate::verify::not_verified_reason(p)),
                processed_insns: 0,
                verification_time_usec: 0,
            };
        }
        let v = verify(&ProgramInput::new(object, p), &Options::default());
        BpfemuVerdict {
            verified: true,
            accepted: v.is_accepted(),
            // Compared with the kernel's last meaningful log line: where the kernel logs no
            // reason, bpfemu's log gives that line too.
            error: v.rejection().map(|r| {
                r.kernel_error_line()
                    .map_or_else(|| verifier_error_line(&v.log), str::to_owned)
            }),
            processed_insns: v.stats.processed_insns,
            verification_time_usec: v.stats.time.as_micros() as u64,
        }
    }

    /// Whether the kernel said the same: verdict, and error line for a rejection.
    pub fn agrees_with(&self, kernel: &KernelVerdict) -> bool {
        !self.verified
            || self.accepted == kernel.accepted && (self.accepted || self.error == kernel.error)
    }
}

/// Parses a verifier log (level 1 with `BPF_LOG_STATS`).
pub fn parse_verifier_log(log: &str, loaded: bool) -> KernelVerdict {
    let stats = log
        .lines()
        .rev()
        .find(|l| l.starts_with("processed ") && l.contains(" insns"))
        .map(str::to_owned);
    let processed_insns = stats
        .as_deref()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse().ok());
    let verification_time_usec = log
        .lines()
        .rev()
        .find_map(|l| l.trim().strip_prefix("verification time "))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok());
    KernelVerdict {
        accepted: loaded,
        error: (!loaded).then(|| verifier_error_line(log)),
        processed_insns,
        verification_time_usec,
        stats,
    }
}

/// Loads every program of the object in the kernel, each on its own with the maps and programs
/// it needs (raw bpf(), log level 1 with statistics; the log grows until it fits), and reports
/// each verdict: one rejection does not hide the others'.
pub fn verify_in_kernel(path: &Path, load: &LoadOptions) -> Result<Vec<ProgramVerdict>, DiffError> {
    kernel_ready().map_err(DiffError::KernelUnavailable)?;
    let object = bpfemu_loader::load_file(path, load).map_err(|e| DiffError::Load {
        path: path.display().to_string(),
        message: e.to_string(),
    })?;
    let opts = KernelLoadOptions {
        log_level: kbpf::BPF_LOG_LEVEL1 | kbpf::BPF_LOG_STATS,
        log_size: 16 << 20,
        initial: InitialEntries::new(),
    };
    let mut out = Vec::new();
    for p in &object.programs {
        let kernel = match KernelObject::load(&object, &p.name, &opts) {
            Ok(k) => parse_verifier_log(k.log(), true),
            Err(KernelObjectError::ProgLoad { log, errno, .. }) => {
                let mut v = parse_verifier_log(&log, false);
                if log.trim().is_empty() {
                    v.error = Some(format!("the kernel refuses it ({})", errno_name(errno)));
                }
                v
            }
            Err(e) => KernelVerdict {
                accepted: false,
                error: Some(e.to_string()),
                processed_insns: None,
                verification_time_usec: None,
                stats: None,
            },
        };
        let bpfemu = BpfemuVerdict::of(&object, p);
        out.push(ProgramVerdict {
            program: p.name.clone(),
            section: p.section.clone(),
            agree: bpfemu.agrees_with(&kernel),
            kernel,
            bpfemu,
        });
    }
    Ok(out)
}

/// The `--verifier` table.
pub fn format_verdicts(object: &str, verdicts: &[ProgramVerdict]) -> String {
    let mut out = format!("{object}\n");
    let width = verdicts
        .iter()
        .map(|v| v.program.len())
        .max()
        .unwrap_or(0)
        .max(7);
    writeln!(
        out,
        "{:<width$}  {:<8}  {:>10}  {:>10}  {:<8}  {:>10}  {:>10}  {:<5}  kernel error",
        "program", "kernel", "insns", "time (us)", "bpfemu", "insns", "time (us)", "same"
    )
    .expect("string");
    let verdict = |accepted: bool| if accepted { "accepted" } else { "rejected" };
    for v in verdicts {
        let num = |n: Option<u64>| n.map_or("-".to_owned(), |n| n.to_string());
        let ours = |n: u64| {
            if v.bpfemu.verified {
                n.to_string()
            } else {
                "-".into()
            }
        };
        writeln!(
            out,
            "{:<width$}  {:<8}  {:>10}  {:>10}  {:<8}  {:>10}  {:>10}  {:<5}  {}",
            v.program,
            verdict(v.kernel.accepted),
            num(v.kernel.processed_insns),
            num(v.kernel.verification_time_usec),
            if v.bpfemu.verified {
                verdict(v.bpfemu.accepted)
            } else {
                "-"
            },
            ours(v.bpfemu.processed_insns),
            ours(v.bpfemu.verification_time_usec),
            match (v.bpfemu.verified, v.agree) {
                (false, _) => "-",
                (true, true) => "yes",
                (true, false) => "NO",
            },
            v.kernel.error.as_deref().unwrap_or("")
        )
        .expect("string");
        if !v.bpfemu.verified {
            writeln!(
                out,
                "{:<width$}  bpfemu: {}",
                "",
                v.bpfemu.error.as_deref().unwrap_or("")
            )
            .expect("string");
        } else if !v.agree && v.bpfemu.error.is_some() {
            writeln!(
                out,
                "{:<width$}  bpfemu error: {}",
                "",
                v.bpfemu.error.as_deref().unwrap_or("")
            )
            .expect("string");
        }
    }
    let accepted = verdicts.iter().filter(|v| v.kernel.accepted).count();
    let verified = verdicts.iter().filter(|v| v.bpfemu.verified);
    write!(
        out,
        "{} programs: {accepted} accepted, {} rejected by the kernel; bpfemu agrees on {}",
        verdicts.len(),
        verdicts.len() - accepted,
        verified.clone().filter(|v| v.agree).count()
    )
    .expect("string");
    let others = verdicts.len() - verified.count();
    if others > 0 {
        write!(out, " ({others} not verified: not XDP)").expect("string");
    }
    out.push('\n');
    out
}
