//! [`XdpRuntime`]: a loaded object (programs and maps) that runs one packet at a time as
//! `BPF_PROG_TEST_RUN` runs it, and what a run gives back ([`XdpOutcome`]).

use super::determinism::{Clock, Prandom};
use super::frame::{Refusal, XdpFrame};
use super::helpers::socket::SocketRegions;
use super::helpers::{RunState, XdpEnv, maps::FOR_EACH_KEY_REGION};
use super::kfuncs::{KfuncNames, KfuncResolver, ResolvedKfunc};
use super::prepare::{PrepareError, prepare};
use crate::coverage::Coverage;
use crate::engine::{Engine, Executable};
use crate::error::VmError;
use crate::fib::Fib;
use crate::interp::{DEFAULT_INSN_BUDGET, Interpreter, Options, PreparedProgram};
use crate::maps::{Errno, MapEnv, MapError, MapName, MapSpec, Maps};
use crate::memory::{Memory, RegionKind};
use crate::sockets::SocketTable;
use crate::taint::{TaintSource, TaintState};
use bpfemu_isa::{Program, RawInsn};
use std::collections::BTreeMap;
use std::fmt;

/// XDP actions (`enum xdp_action`), as the kernel numbers them.
pub use bpfemu_isa::uapi::{XDP_ABORTED, XDP_DROP, XDP_PASS, XDP_REDIRECT, XDP_TX};

/// How the runtime runs.
#[derive(Clone, Debug)]
pub struct XdpConfig {
    /// Virtual CPUs (at least 1): per-CPU map copies, `bpf_get_smp_processor_id`.
    pub cpus: u32,
    /// Seed of `bpf_get_prandom_u32`.
    pub seed: u64,
    /// The routing state `bpf_fib_lookup` consults (and `bpf_check_mtu` the MTUs of).
    pub fib: Option<Fib>,
    /// The sockets `bpf_sk_lookup_tcp` and its kin find (none by default: a fresh network
    /// namespace's).
    pub sockets: Option<SocketTable>,
    /// Instructions one packet may execute (including tail calls and callbacks).
    pub insn_budget: u64,
    /// The receive devices a ctx's `ingress_ifindex` and `rx_queue_index` are checked against
    /// ([`XdpRuntime::run_ctx`]), the loopback (ifindex 1, one queue) included when not
    /// listed. `None`: bpfemu has no devices, so any ifindex other than the loopback's is
    /// taken, with any queue (the kernel would refuse an ifindex it lacks with ENODEV and a
    /// queue past the device's with EINVAL).
    pub rx_devices: Option<Vec<RxDevice>>,
    /// The names of the kfuncs the programs call, by BTF id, from the BTF of the kernel they
    /// were loaded into (the one the loader resolved `__ksym` externs against). Default: none
    /// (a program calling a kfunc is refused when prepared).
    pub kfunc_names: KfuncNames,
}

/// A device packets can arrive on: its ifindex and `real_num_rx_queues`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RxDevice {
    pub ifindex: u32,
    pub rx_queues: u32,
}

impl Default for XdpConfig {
    fn default() -> XdpConfig {
        XdpConfig {
            cpus: 1,
            seed: 0,
            fib: None,
            sockets: None,
            insn_budget: DEFAULT_INSN_BUDGET,
            rx_devices: None,
            kfunc_names: Ok(BTreeMap::new()),
        }
    }
}

/// A network device as `bpf_check_mtu` sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NetDevice {
    pub ifindex: u32,
    pub mtu: u32,
    pub hard_header_len: u32,
}

/// The loopback device test_run receives on when no ctx names another: ifindex 1.
pub const LOOPBACK: NetDevice = NetDevice {
    ifindex: 1,
    mtu: 65536,
    hard_header_len: 14,
};

/// Where and when a packet arrives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PacketMeta {
    /// The clock every time helper reads.
    pub ts_ns: u64,
    /// The virtual CPU the packet is steered to (below [`XdpConfig::cpus`]).
    pub cpu: u32,
    pub ingress_ifindex: u32,
    pub rx_queue_index: u32,
}

impl Default for PacketMeta {
    /// test_run's default: the loopback device's queue 0, on CPU 0, at time 0.
    fn default() -> PacketMeta {
        PacketMeta {
            ts_ns: 0,
            cpu: 0,
            ingress_ifindex: LOOPBACK.ifindex,
            rx_queue_index: 0,
        }
    }
}

/// `struct xdp_md` as BPF_PROG_TEST_RUN takes it in `ctx_in` (net/bpf/test_run.c,
/// `bpf_prog_test_run_xdp` and `xdp_convert_md_to_buff`): offsets from `data_meta`, so `data`
/// is the metadata length (the first `data` bytes of `data_in` become metadata in front of
/// the packet, out of the headroom) and `data_end` the input's length; `data_meta` and
/// `egress_ifindex` must be 0; `ingress_ifindex` 0 means the loopback's queue 0, which
/// `rx_queue_index` must then name. After the run the kernel writes back `data` (the metadata
/// length) and `data_end` (the linear part's end), both from `data_meta`.
///
/// ```
/// use bpfemu_vm::xdp::runtime::XdpMd;
/// let md = XdpMd::new(64, 8, 2, 0);
/// assert_eq!((md.data, md.data_end, md.ingress_ifindex), (8, 64, 2));
/// assert_eq!(XdpMd::from_bytes(&md.to_bytes()), Some(md));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct XdpMd {
    pub data: u32,
    pub data_end: u32,
    pub data_meta: u32,
    pub ingress_ifindex: u32,
    pub rx_queue_index: u32,
    pub egress_ifindex: u32,
}

impl XdpMd {
    /// The ctx for an input of `input_len` bytes whose first `meta_len` are metadata.
    pub fn new(input_len: usize, meta_len: u32, ingress_ifindex: u32, rx_queue_index: u32) -> Self {
        XdpMd {
            data: meta_len,
            data_end: input_len as u32,
            data_meta: 0,
            ingress_ifindex,
            rx_queue_index,
            egress_ifindex: 0,
        }
    }

    /// The metadata length the ctx asks for.
    pub fn meta_len(&self) -> u32 {
        self.data
    }

    /// The 24 bytes of the struct, native endian.
    pub fn to_bytes(&self) -> [u8; super::ctx::XDP_MD_SIZE] {
        let mut out = [0u8; super::ctx::XDP_MD_SIZE];
        let fields = [
            self.data,
            self.data_end,
            self.data_meta,
            self.ingress_ifindex,
            self.rx_queue_index,
            self.egress_ifindex,
        ];
        for (chunk, v) in out.chunks_mut(4).zip(fields) {
            chunk.copy_from_slice(&v.to_ne_bytes());
        }
        out
    }

    /// The struct from its bytes (`None` unless exactly 24).
    pub fn from_bytes(bytes: &[u8]) -> Option<XdpMd> {
        if bytes.len() != super::ctx::XDP_MD_SIZE {
            return None;
        }
        let f = |i: usize| u32::from_ne_bytes(bytes[i * 4..i * 4 + 4].try_into().expect("4 bytes"));
        Some(XdpMd {
            data: f(0),
            data_end: f(1),
            data_meta: f(2),
            ingress_ifindex: f(3),
            rx_queue_index: f(4),
            egress_ifindex: f(5),
        })
    }

    /// What the kernel writes back into the ctx after a run that gave `outcome`.
    pub fn after(&self, outcome: &XdpOutcome) -> XdpMd {
        XdpMd {
            data: outcome.meta_len as u32,
            data_end: (outcome.data_out.len() - outcome.frags_len) as u32,
            ..*self
        }
    }
}

/// A program to load: its name and final instructions (map `ld_imm64` imm = map index).
#[derive(Clone, Debug)]
pub struct XdpProgramSpec {
    pub name: String,
    pub insns: Vec<RawInsn>,
}

/// A map's contents at creation: global data, and the slots of prog arrays (program
/// indexes) and map-in-maps (map indexes), as libbpf fills them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MapInit {
    pub data: Option<Vec<u8>>,
    pub prog_slots: Vec<(u32, usize)>,
    pub map_slots: Vec<(u32, usize)>,
}

/// What a program returned, as an action.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum XdpAction {
    Aborted,
    Drop,
    Pass,
    Tx,
    Redirect,
    Unknown(u32),
}

impl XdpAction {
    pub fn from_retval(retval: u32) -> XdpAction {
        match retval {
            XDP_ABORTED => XdpAction::Aborted,
            XDP_DROP => XdpAction::Drop,
            XDP_PASS => XdpAction::Pass,
            XDP_TX => XdpAction::Tx,
            XDP_REDIRECT => XdpAction::Redirect,
            other => XdpAction::Unknown(other),
        }
    }

    /// The action's name in reports (`pass`, `tx`; the number for an unknown one), as the
    /// file names of `--out-dir` and the `--never` conditions spell it.
    pub fn name(self) -> std::borrow::Cow<'static, str> {
        match self {
            XdpAction::Aborted => "aborted".into(),
            XdpAction::Drop => "drop".into(),
            XdpAction::Pass => "pass".into(),
            XdpAction::Tx => "tx".into(),
            XdpAction::Redirect => "redirect".into(),
            XdpAction::Unknown(retval) => retval.to_string().into(),
        }
    }
}

/// Where a redirect sends the packet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RedirectTarget {
    /// `bpf_redirect(ifindex, 0)`.
    Ifindex(u32),
    /// A DEVMAP/DEVMAP_HASH entry (`ifindex` `None`: a broadcast whose key is absent).
    Dev {
        map: MapName,
        key: u32,
        ifindex: Option<u32>,
        broadcast: bool,
        exclude_ingress: bool,
    },
    /// A CPUMAP entry.
    Cpu { map: MapName, cpu: u32 },
    /// An XSKMAP entry (the AF_XDP socket bound to this queue).
    Xsk { map: MapName, queue: u32 },
}

impl fmt::Display for RedirectTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RedirectTarget::Ifindex(i) => write!(f, "ifindex {i}"),
            RedirectTarget::Dev {
                map,
                key,
                ifindex,
                broadcast,
                exclude_ingress,
            } => {
                write!(f, "{map}[{key}]")?;
                if let Some(i) = ifindex {
                    write!(f, " (ifindex {i})")?;
                }
                if *broadcast {
                    f.write_str(" broadcast")?;
                }
                if *exclude_ingress {
                    f.write_str(" exclude-ingress")?;
                }
                Ok(())
            }
            RedirectTarget::Cpu { map, cpu } => write!(f, "{map}[{cpu}] (cpu {cpu})"),
            RedirectTarget::Xsk { map, queue } => write!(f, "{map}[{queue}] (xsk)"),
        }
    }
}

/// A `bpf_perf_event_output` sample.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PerfEvent {
    pub map: String,
    /// The perf event array slot (the CPU, for `BPF_F_CURRENT_CPU`).
    pub slot: u32,
    pub data: Vec<u8>,
}

/// A ring buffer record (`bpf_ringbuf_output`, or a reserved sample submitted).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RingEvent {
    pub map: String,
    pub data: Vec<u8>,
}

/// What one run's results depend on ([`XdpRuntime::last_taint`]); `None` everywhere: on
/// nothing the kernel does not reproduce.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PacketTaint {
    /// The return value (r0's taint, or control's).
    pub verdict: Option<TaintSource>,
    /// The packet's bounds (its length, where data starts).
    pub bounds: Option<TaintSource>,
    /// Each byte of `data_out`.
    pub bytes: Vec<Option<TaintSource>>,
    /// The run's event records (ring buffer, perf event output).
    pub events: Option<TaintSource>,
}

/// What one packet's run gave.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct XdpOutcome {
    pub retval: u32,
    pub action: XdpAction,
    /// test_run's `data_out`: from `data_meta` to `data_end`, then the fragments' bytes (a
    /// packet longer than the linear part's 3520 bytes is a multi-buffer frame).
    pub data_out: Vec<u8>,
    /// Bytes of metadata at the start of `data_out`.
    pub meta_len: usize,
    /// Bytes at the end of `data_out` that come from fragments (0 for a linear frame).
    pub frags_len: usize,
    /// The redirect target, for an `XDP_REDIRECT` verdict.
    pub redirect: Option<RedirectTarget>,
    /// `bpf_trace_printk` lines, in order.
    pub printk: Vec<String>,
    /// `bpf_perf_event_output` samples, in order.
    pub perf_events: Vec<PerfEvent>,
    /// The ring buffers' records this run committed, consumed after it.
    pub ring_events: Vec<RingEvent>,
    pub insns_executed: u64,
}

/// What one packet's run gave, without copying anything: the packet's bytes and the run's
/// records stay in the runtime until the next packet ([`XdpRuntime::last_data_out`],
/// [`XdpRuntime::last_printk`]). The fast path of a replay that only counts verdicts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct XdpVerdict {
    pub retval: u32,
    pub action: XdpAction,
    /// The redirect target, for an `XDP_REDIRECT` verdict.
    pub redirect: Option<RedirectTarget>,
    pub insns_executed: u64,
}

/// Why a runtime cannot be built.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error(transparent)]
    Map(#[from] MapError),
    #[error("map {map}: initial contents: {errno}")]
    MapInit { map: String, errno: Errno },
    #[error(transparent)]
    Prepare(#[from] PrepareError),
    #[error("{0}")]
    Config(String),
}

/// Why a packet has no outcome.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PacketError {
    /// BPF_PROG_TEST_RUN would refuse it with this errno.
    #[error("refused as the kernel refuses it ({errno}): {reason}")]
    Refused { errno: Errno, reason: String },
    /// The run stopped.
    #[error("run stopped after {insns_executed} instructions: {error}")]
    Run { error: VmError, insns_executed: u64 },
}

/// A loaded object, ready to run packets.
pub struct XdpRuntime {
    mem: Memory,
    /// The one frame every packet is loaded into.
    frame: XdpFrame,
    /// The last run's records (printk lines, events, redirect), reused from run to run.
    last_run: RunState,
    /// Each ring buffer's producer position before the last run, by map index.
    ring_marks: Vec<(usize, u64)>,
    /// The entry function's r1-r5: the ctx's address, then zeros.
    entry_args: [u64; 5],
    /// The indexes of the ring buffer maps (the maps are all created with the runtime), so
    /// that a run does not ask every map whether it is one.
    rings: Vec<usize>,
    maps: Maps,
    names: Vec<String>,
    programs: Vec<Program>,
    /// The programs as the interpreter runs them (pre-decoded once).
    prepared: Vec<PreparedProgram>,
    /// Why a program could not be prepared (its slot in `programs` then holds a stub that is
    /// never run): one program's unsupported helper does not stop the others of the object.
    unprepared: Vec<Option<PrepareError>>,
    /// The kfuncs the programs call, resolved when they were prepared.
    kfuncs: Vec<ResolvedKfunc>,
    /// Why BPF_PROG_TEST_RUN refuses a program whatever the packet (its expected attach
    /// type, [`XdpRuntime::set_expected_attach_type`]).
    test_run_refusals: Vec<Option<String>>,
    interp: Interpreter,
    /// The programs as another engine (the JIT) prepared them; `None` runs the interpreter,
    /// which also runs whenever coverage is recorded.
    compiled: Option<Box<dyn Executable>>,
    prandom: Prandom,
    fib: Option<Fib>,
    sockets: SocketRegions,
    devices: Vec<NetDevice>,
    rx_devices: Option<Vec<RxDevice>>,
    cpus: u32,
}

impl XdpRuntime {
    /// Creates the maps (with their initial contents) and prepares the programs. A program
    /// that cannot be prepared (an unsupported helper, a kfunc) does not fail the runtime:
    /// [`XdpRuntime::runnable`] answers its error for the program chosen to run, and a tail
    /// call into it stops the run with that error.
    pub fn new(
        programs: Vec<XdpProgramSpec>,
        maps: Vec<(MapSpec, MapInit)>,
        cfg: XdpConfig,
    ) -> Result<XdpRuntime, RuntimeError> {
        if cfg.cpus == 0 {
            return Err(RuntimeError::Config("at least one CPU is needed".into()));
        }
        let mut mem = Memory::new();
        // The frame, its ctx and the entry function's stack first: the regions every packet
        // touches are the first an address lookup tries.
        let frame = XdpFrame::empty(&mut mem);
        let entry_args = [frame.ctx_addr(), 0, 0, 0, 0];
        let stack = mem.add_stack_frame(0);
        mem.remove_stack_frame(stack);
        let mut registry = Maps::new(MapEnv::with_cpus(cfg.cpus));
        for (spec, _) in &maps {
            registry.create(&mut mem, spec)?;
        }
        for (index, (spec, init)) in maps.iter().enumerate() {
            fill(&mut registry, &mut mem, index, init).map_err(|errno| RuntimeError::MapInit {
                map: spec.name.clone(),
                errno,
            })?;
        }
        let sockets = SocketRegions::new(cfg.sockets.unwrap_or_default(), &mut mem);
        let mut prepared = Vec::with_capacity(programs.len());
        let mut unprepared = Vec::with_capacity(programs.len());
        let mut kfuncs = KfuncResolver::new(&cfg.kfunc_names);
        for (i, p) in programs.iter().enumerate() {
            match prepare(&p.name, i, &p.insns, &registry, &mut kfuncs) {
                Ok(prog) => {
                    prepared.push(prog);
                    unprepared.push(None);
                }
                Err(e) => {
                    prepared.push(stub_program());
                    unprepared.push(Some(e));
                }
            }
        }
        Ok(XdpRuntime {
            mem,
            frame,
            last_run: RunState::new(0, Clock { ts_ns: 0 }),
            ring_marks: Vec::new(),
            entry_args,
            rings: (0..registry.len())
                .filter(|&i| {
                    registry
                        .get(i)
                        .is_some_and(|m| m.ringbuf_producer_pos().is_some())
                })
                .collect(),
            maps: registry,
            names: programs.into_iter().map(|p| p.name).collect(),
            prepared: prepared.iter().cloned().map(PreparedProgram::new).collect(),
            test_run_refusals: vec![None; prepared.len()],
            programs: prepared,
            unprepared,
            kfuncs: kfuncs.into_resolved(),
            interp: {
                let mut interp = Interpreter::new(Options {
                    insn_budget: cfg.insn_budget,
                    ..Options::default()
                });
                // The runtime's memory is the interpreter's alone between its runs, but for
                // the JIT's, before which run_frame_repeated parks the interpreter's frame.
                interp.keep_frames();
                interp
            },
            compiled: None,
            prandom: Prandom::new(cfg.seed, cfg.cpus),
            // No FIB given: a fresh network namespace's (the loopback alone).
            devices: devices(Some(cfg.fib.as_ref().unwrap_or(&Fib::fresh_netns()))),
            fib: Some(cfg.fib.unwrap_or_else(Fib::fresh_netns)),
            sockets,
            rx_devices: cfg.rx_devices,
            cpus: cfg.cpus,
        })
    }

    /// Runs the programs with `engine` from now on (the interpreter until then), with the
    /// runtime's budget.
    pub fn set_engine(&mut self, engine: &dyn Engine) -> Result<(), VmError> {
        let arrays: Vec<_> = (0..self.maps.len())
            .filter_map(|i| Some((self.maps.handle(i), self.maps.get(i)?.inline_array()?)))
            .collect();
        let mut compiled =
            engine.prepare_set_with_arrays(&self.programs, *self.interp.options(), &arrays)?;
        // This runtime's memory is the engine's alone between its runs, but for the
        // interpreter's, before which run_frame_repeated parks the engine's frames: they may
        // stay live from packet to packet.
        compiled.keep_frames();
        if let Some(old) = self.compiled.as_mut() {
            old.release_frames(&mut self.mem);
        }
        self.compiled = Some(compiled);
        Ok(())
    }

    pub fn program_index(&self, name: &str) -> Option<usize> {
        self.names.iter().position(|n| n == name)
    }

    /// Gives program `prog` the expected attach type it was loaded with. BPF_PROG_TEST_RUN
    /// refuses every packet (EINVAL, before looking at it) for a program that runs from a
    /// devmap or cpumap entry (`BPF_XDP_DEVMAP`, `BPF_XDP_CPUMAP`: `SEC("xdp/devmap")`,
    /// `SEC("xdp.frags/cpumap")`...), as `bpf_prog_test_run_xdp` does; so does bpfemu then.
    pub fn set_expected_attach_type(&mut self, prog: usize, attach_type: u32) {
        let target = match attach_type {
            BPF_XDP_DEVMAP => "BPF_XDP_DEVMAP (it runs from a devmap entry)",
            BPF_XDP_CPUMAP => "BPF_XDP_CPUMAP (it runs from a cpumap entry)",
            _ => {
                self.test_run_refusals[prog] = None;
                return;
            }
        };
        self.test_run_refusals[prog] = Some(format!(
            "program {} has expected attach type {target}, which BPF_PROG_TEST_RUN does not run",
            self.names[prog]
        ));
    }

    /// Why BPF_PROG_TEST_RUN refuses program `prog` whatever the packet, if it does.
    pub fn test_run_refusal(&self, prog: usize) -> Option<&str> {
        self.test_run_refusals[prog].as_deref()
    }

    /// Whether program `prog` can run: it and every program it can reach by tail calls
    /// (through the prog arrays' current slots) were prepared; else the first error met.
    pub fn runnable(&self, prog: usize) -> Result<(), PrepareError> {
        let mut seen = vec![false; self.programs.len()];
        let mut todo = vec![prog];
        while let Some(p) = todo.pop() {
            if std::mem::replace(&mut seen[p], true) {
                continue;
            }
            if let Some(e) = &self.unprepared[p] {
                return Err(e.clone());
            }
            if self.programs[p].iter().any(|(_, i)| *i == TAIL_CALL) {
                todo.extend(
                    self.prog_array_targets()
                        .filter(|&t| t < self.programs.len()),
                );
            }
        }
        Ok(())
    }

    /// Every program some prog array slot holds now.
    fn prog_array_targets(&self) -> impl Iterator<Item = usize> + '_ {
        self.maps
            .iter()
            .filter(|m| m.map_type() == crate::maps::MapType::ProgArray)
            .flat_map(|m| (0..m.max_entries()).filter_map(|slot| m.prog_array_get(slot)))
            .map(|p| p as usize)
    }

    /// Why program `prog` itself could not be prepared, if it could not.
    pub fn prepare_error(&self, prog: usize) -> Option<&PrepareError> {
        self.unprepared.get(prog).and_then(Option::as_ref)
    }

    pub fn program_names(&self) -> &[String] {
        &self.names
    }

    pub fn maps(&self) -> &Maps {
        &self.maps
    }

    pub fn memory(&self) -> &Memory {
        &self.mem
    }

    /// Starts recording coverage of every program of the object (`true`), from nothing, or
    /// stops (`false`); see [`crate::coverage`].
    pub fn record_coverage(&mut self, on: bool) {
        let coverage = on.then(|| Coverage::new(self.programs.iter().map(Program::len)));
        self.interp.set_coverage(coverage);
    }

    /// Starts (`true`, from nothing) or stops (`false`) taint tracking ([`crate::taint`]):
    /// while it is on, runs go through the interpreter.
    pub fn track_taint(&mut self, on: bool) {
        self.interp.set_taint(on.then(TaintState::new));
    }

    /// What the last run's results depend on, with taint tracking on: its return value, its
    /// packet's bounds, and each byte of `data_out` (fragments count as tainted when the
    /// bounds are).
    pub fn last_taint(&self) -> Option<PacketTaint> {
        let taint = self.interp.taint()?;
        let (addr, linear) = self.frame.data_out_addr(&self.mem);
        let total = linear + self.frame.frags_len();
        let bytes = (0..total)
            .map(|i| match i < linear {
                true => taint.mem(&self.mem, addr + i as u64, 1),
                false => taint.bounds(),
            })
            .collect();
        Some(PacketTaint {
            verdict: taint.result(),
            bounds: taint.bounds(),
            bytes,
            events: taint.events(),
        })
    }

    /// With taint tracking on: the taint of each byte of map `map`'s value at `key`, in the
    /// syscall layout (per-CPU maps: every CPU's copy, each padded to 8 bytes); `None`
    /// without tracking or without such a value in memory.
    pub fn map_value_taint(&self, map: usize, key: &[u8]) -> Option<Vec<Option<TaintSource>>> {
        let taint = self.interp.taint()?;
        let m = self.maps.get(map)?;
        let (size, sys) = (m.value_size(), m.sys_value_size());
        let copies = if sys == size {
            1
        } else {
            sys / (size.div_ceil(8) * 8)
        };
        let stride = if copies == 1 {
            size
        } else {
            size.div_ceil(8) * 8
        };
        let mut out = vec![None; sys];
        for cpu in 0..copies {
            let addr = m.value_addr(&self.mem, key, cpu as u32)?;
            for i in 0..size {
                out[cpu * stride + i] = taint.mem(&self.mem, addr + i as u64, 1);
            }
        }
        Some(out)
    }

    /// With taint tracking on: whether any value of map `map` holds a tainted byte.
    pub fn map_has_taint(&self, map: usize) -> bool {
        let (Some(taint), Some(m)) = (self.interp.taint(), self.maps.get(map)) else {
            return false;
        };
        let kind = match &m.spec().global_section {
            Some(section) => RegionKind::Global {
                section: section.clone(),
            },
            None => RegionKind::MapValue {
                map: m.name().to_owned(),
            },
        };
        taint.touches(&self.mem, &kind)
    }

    /// With taint tracking on: whether map `map`'s set of keys depends on taint.
    pub fn map_keys_taint(&self, map: usize) -> Option<TaintSource> {
        self.interp.taint()?.key_set(map)
    }

    /// The coverage recorded since [`XdpRuntime::record_coverage`], program indexes as in
    /// [`XdpRuntime::program_names`].
    pub fn coverage_mut(&mut self) -> Option<&mut Coverage> {
        self.interp.coverage_mut()
    }

    /// The maps and the memory their values live in, for reading and writing them between
    /// packets (`--maps`, `--dump-maps`).
    pub fn maps_mut(&mut self) -> (&mut Maps, &mut Memory) {
        (&mut self.maps, &mut self.mem)
    }

    /// Runs program `prog` on one packet, as BPF_PROG_TEST_RUN without a ctx would (with
    /// `meta`'s receive queue, CPU and clock; the ingress device and queue are not checked).
    pub fn run(
        &mut self,
        prog: usize,
        packet: &[u8],
        meta: &PacketMeta,
    ) -> Result<XdpOutcome, PacketError> {
        let verdict = self.run_in_place(prog, packet, meta)?;
        Ok(self.last_outcome(verdict))
    }

    /// [`XdpRuntime::run`] without copying the packet out: the verdict only; the bytes and
    /// records stay here until the next packet. Nothing is allocated (unless the program
    /// prints or emits events).
    pub fn run_in_place(
        &mut self,
        prog: usize,
        packet: &[u8],
        meta: &PacketMeta,
    ) -> Result<XdpVerdict, PacketError> {
        self.check_cpu(prog, meta)?;
        self.frame
            .load(
                &mut self.mem,
                packet,
                0,
                meta.ingress_ifindex,
                meta.rx_queue_index,
            )
            .map_err(refused)?;
        self.run_frame(prog, meta)
    }

    /// Runs program `prog` again on the frame as the last run left it, without loading a
    /// packet: what BPF_PROG_TEST_RUN does on each of its `repeat` runs after the first (it
    /// builds the `xdp_buff` once, so a program that rewrites its packet or moves its bounds
    /// sees its own output). Only meaningful after a packet was loaded successfully.
    pub fn run_again(&mut self, prog: usize, meta: &PacketMeta) -> Result<XdpVerdict, PacketError> {
        self.run_again_repeated(prog, meta, 1)
    }

    /// [`XdpRuntime::run_again`] `times` times (at least once) in one call, as
    /// BPF_PROG_TEST_RUN's loop runs its repeats: each run on the frame the previous one left,
    /// with `meta`'s CPU and clock, the helpers' per-run state afresh. Stops at the first run
    /// that fails. The verdict is the last run's; its instruction count is all of them.
    pub fn run_again_repeated(
        &mut self,
        prog: usize,
        meta: &PacketMeta,
        times: u64,
    ) -> Result<XdpVerdict, PacketError> {
        self.check_cpu(prog, meta)?;
        self.run_frame_repeated(prog, meta, times)
    }

    /// The last packet's `data_out` (see [`XdpOutcome::data_out`]).
    pub fn last_data_out(&self) -> Vec<u8> {
        self.frame.data_out(&self.mem)
    }

    /// The last packet's `bpf_trace_printk` lines.
    pub fn last_printk(&self) -> &[String] {
        &self.last_run.printk
    }

    /// The full outcome of the run that gave `verdict`, the last one (its printk lines and
    /// events move into the outcome).
    pub fn last_outcome(&mut self, verdict: XdpVerdict) -> XdpOutcome {
        XdpOutcome {
            retval: verdict.retval,
            action: verdict.action,
            data_out: self.frame.data_out(&self.mem),
            meta_len: self.frame.meta_len(),
            frags_len: self.frame.frags_len(),
            redirect: verdict.redirect,
            printk: std::mem::take(&mut self.last_run.printk),
            perf_events: std::mem::take(&mut self.last_run.events),
            ring_events: self.ring_records_since_mark(),
            insns_executed: verdict.insns_executed,
        }
    }

    /// Runs program `prog` as BPF_PROG_TEST_RUN does with `md` as `ctx_in`: `input` starts
    /// with `md.data` bytes of metadata; the ingress device and queue come from `md` (the
    /// loopback's queue 0 for ingress 0), `meta` gives the CPU and the clock. A ctx the kernel
    /// refuses is refused with its errno, in its order: EINVAL for a ctx that does not
    /// describe the input (`data_meta` not 0, `data_end` not the input's length, `data` past
    /// `data_end`, not a multiple of 4 or over 216, which would reach the headroom's
    /// `xdp_frame` area) or a packet under 14 bytes after the metadata; then EINVAL for
    /// an `egress_ifindex` or a queue without an ingress device; ENODEV for an unknown device
    /// and EINVAL for a queue past its queues (against [`XdpConfig::rx_devices`]); ENOMEM for
    /// an input too long for the frame's fragments.
    pub fn run_ctx(
        &mut self,
        prog: usize,
        input: &[u8],
        meta: &PacketMeta,
        md: &XdpMd,
    ) -> Result<XdpOutcome, PacketError> {
        self.check_cpu(prog, meta)?;
        let invalid = |reason: String| PacketError::Refused {
            errno: Errno::EINVAL,
            reason,
        };
        let meta_len = md.data as usize;
        if md.data_meta != 0
            || md.data_end as usize != input.len()
            || md.data > md.data_end
            || !meta_len.is_multiple_of(4)
            || meta_len > super::frame::XDP_CTX_META_MAX
        {
            return Err(invalid(format!(
                "xdp_md {{ data: {}, data_end: {}, data_meta: {} }} does not describe {} input \
                 bytes with a metadata length that is a multiple of 4 up to {}",
                md.data,
                md.data_end,
                md.data_meta,
                input.len(),
                super::frame::XDP_CTX_META_MAX
            )));
        }
        if input.len() - meta_len < super::frame::ETH_HLEN {
            super::frame::check_size(input.len(), meta_len).map_err(refused)?;
        }
        if md.egress_ifindex != 0 {
            return Err(invalid("xdp_md.egress_ifindex must be 0".into()));
        }
        let (ingress, rxq) = self.check_rx(md.ingress_ifindex, md.rx_queue_index)?;
        self.frame
            .load(&mut self.mem, input, meta_len, ingress, rxq)
            .map_err(refused)?;
        let verdict = self.run_frame(prog, meta)?;
        Ok(self.last_outcome(verdict))
    }

    /// The device and queue a ctx's `ingress_ifindex` and `rx_queue_index` name, checked as
    /// test_run's `xdp_convert_md_to_buff` checks them: a queue needs a device (EINVAL), the
    /// device must exist (ENODEV), the queue must be one of its queues (EINVAL). Ifindex 0
    /// is the loopback's queue 0.
    pub fn check_rx(
        &self,
        ingress_ifindex: u32,
        rx_queue_index: u32,
    ) -> Result<(u32, u32), PacketError> {
        let invalid = |reason: String| PacketError::Refused {
            errno: Errno::EINVAL,
            reason,
        };
        match ingress_ifindex {
            0 if rx_queue_index != 0 => Err(invalid(
                "an rx_queue_index without an ingress_ifindex".into(),
            )),
            0 => Ok((LOOPBACK.ifindex, 0)),
            ifindex => {
                let queues = self
                    .rx_queues(ifindex)
                    .ok_or_else(|| PacketError::Refused {
                        errno: Errno::ENODEV,
                        reason: format!("no device with ifindex {ifindex}"),
                    })?;
                if rx_queue_index >= queues {
                    return Err(invalid(format!(
                        "rx queue {rx_queue_index} of ifindex {ifindex}, which has {queues}"
                    )));
                }
                Ok((ifindex, rx_queue_index))
            }
        }
    }

    /// The receive queues of a device: `None` for a device that does not exist.
    fn rx_queues(&self, ifindex: u32) -> Option<u32> {
        let listed = self.rx_devices.as_ref().map(|list| {
            list.iter()
                .find(|d| d.ifindex == ifindex)
                .map(|d| d.rx_queues)
        });
        match listed {
            Some(Some(queues)) => Some(queues),
            _ if ifindex == LOOPBACK.ifindex => Some(1),
            Some(None) => None,
            None => Some(u32::MAX),
        }
    }

    /// Whether program `prog` may run on `meta`'s CPU: test_run takes it and it was
    /// prepared (the common case, checked without building an error), else why not.
    #[inline]
    fn check_cpu(&self, prog: usize, meta: &PacketMeta) -> Result<(), PacketError> {
        if meta.cpu < self.cpus
            && matches!(self.test_run_refusals.get(prog), Some(None))
            && matches!(self.unprepared.get(prog), Some(None))
        {
            return Ok(());
        }
        self.refuse_cpu(prog, meta)
    }

    /// [`XdpRuntime::check_cpu`]'s answer when something is wrong, in test_run's order.
    #[cold]
    fn refuse_cpu(&self, prog: usize, meta: &PacketMeta) -> Result<(), PacketError> {
        assert!(prog < self.programs.len(), "program {prog} is not loaded");
        if let Some(reason) = &self.test_run_refusals[prog] {
            return Err(PacketError::Refused {
                errno: Errno::EINVAL,
                reason: reason.clone(),
            });
        }
        if let Some(e) = &self.unprepared[prog] {
            return Err(PacketError::Refused {
                errno: Errno::EINVAL,
                reason: e.to_string(),
            });
        }
        if meta.cpu >= self.cpus {
            return Err(PacketError::Refused {
                errno: Errno::EINVAL,
                reason: format!(
                    "CPU {} is not one of the {} virtual CPUs",
                    meta.cpu, self.cpus
                ),
            });
        }
        Ok(())
    }

    /// Runs program `prog` on the loaded frame.
    fn run_frame(&mut self, prog: usize, meta: &PacketMeta) -> Result<XdpVerdict, PacketError> {
        self.run_frame_repeated(prog, meta, 1)
    }

    /// Runs program `prog` on the loaded frame `times` times (at least once).
    fn run_frame_repeated(
        &mut self,
        prog: usize,
        meta: &PacketMeta,
        times: u64,
    ) -> Result<XdpVerdict, PacketError> {
        self.mark_ring_positions();
        // The JIT runs unless coverage or taint is recorded (only the interpreter does).
        let compiled = self.compiled.is_some()
            && self.interp.coverage_mut().is_none()
            && self.interp.taint().is_none();
        // Each engine keeps its frames live from one of its runs to the next, and parks them
        // before the other runs.
        if compiled {
            self.interp.release_frames(&mut self.mem);
        } else if let Some(exe) = self.compiled.as_mut() {
            exe.release_frames(&mut self.mem);
        }
        let run = &mut self.last_run;
        run.reset(meta.cpu, Clock { ts_ns: meta.ts_ns });
        let mut env = XdpEnv {
            maps: &mut self.maps,
            frame: &mut self.frame,
            run,
            prandom: &mut self.prandom,
            fib: self.fib.as_ref(),
            sockets: &self.sockets,
            devices: &self.devices,
            unprepared: &self.unprepared,
            kfuncs: &self.kfuncs,
        };
        // r1 = the ctx, whose address never moves: the arguments are built once, with the
        // runtime (built per run, they were read back by the engine with wide loads over
        // the narrow stores just made: a store-forwarding stall).
        let args = self.entry_args;
        // A repeated interpreted run's instruction count, all runs together.
        let mut interp_total = None;
        // The engine's result is matched where it lands, never moved whole: a copy of it
        // with wide loads just after the engine's narrow stores waits for them (a
        // store-forwarding stall, the largest single cost of a run of a small program).
        let result = match &mut self.compiled {
            Some(exe) if compiled && times > 1 => {
                exe.run_entry_repeated(prog, args, &mut self.mem, &mut env, times)
            }
            Some(exe) if compiled => exe.run_entry(prog, args, &mut self.mem, &mut env),
            _ if times > 1 => {
                let (result, total) = interp_repeated(
                    &mut self.interp,
                    &self.prepared,
                    (prog, args),
                    &mut self.mem,
                    &mut env,
                    times,
                );
                interp_total = Some(total);
                result
            }
            _ => self
                .interp
                .run_prepared(&self.prepared, prog, args, &mut self.mem, &mut env),
        };
        let retval = match result {
            Ok(r0) => r0 as u32,
            Err(error) => return Err(self.stopped(error, compiled)),
        };
        let insns_executed = interp_total.unwrap_or_else(|| self.executed(compiled));
        let action = XdpAction::from_retval(retval);
        Ok(XdpVerdict {
            retval,
            action,
            redirect: self
                .last_run
                .redirect
                .take()
                .filter(|_| action == XdpAction::Redirect),
            insns_executed,
        })
    }

    /// Instructions the last run executed, by the engine that ran it.
    fn executed(&self, compiled: bool) -> u64 {
        match &self.compiled {
            Some(exe) if compiled => exe.executed(),
            _ => self.interp.executed(),
        }
    }

    /// The error of a run that stopped, after cleaning up what it left.
    #[cold]
    fn stopped(&mut self, error: VmError, compiled: bool) -> PacketError {
        self.remove_scratch();
        PacketError::Run {
            error,
            insns_executed: self.executed(compiled),
        }
    }

    /// Notes each ring buffer's producer position, by map index, before a run (in a list
    /// kept from run to run: the fast path allocates nothing).
    fn mark_ring_positions(&mut self) {
        self.ring_marks.clear();
        for &index in &self.rings {
            let map = self.maps.get(index).expect("a ring buffer of the runtime");
            if let Some(pos) = map.ringbuf_producer_pos() {
                self.ring_marks.push((index, pos));
            }
        }
    }

    /// The records the run committed: from each ring's producer position before it, left in
    /// the ring (nothing consumes them, as in BPF_PROG_TEST_RUN without a reader), in map
    /// order then ring order.
    fn ring_records_since_mark(&self) -> Vec<RingEvent> {
        let mut out = Vec::new();
        for &(index, pos) in &self.ring_marks {
            let map = self.maps.get(index).expect("in range");
            let records = map.ringbuf_records_from(&self.mem, pos).unwrap_or_default();
            out.extend(records.into_iter().map(|r| RingEvent {
                map: map.name().to_string(),
                data: r.data,
            }));
        }
        out
    }

    /// Removes what helpers left behind when a run stopped inside a callback loop.
    fn remove_scratch(&mut self) {
        let scratch: Vec<_> = self
            .mem
            .regions()
            .filter(
                |r| matches!(r.kind(), RegionKind::Other { name } if name == FOR_EACH_KEY_REGION),
            )
            .map(|r| r.id())
            .collect();
        for id in scratch {
            self.mem.remove(id);
        }
    }
}

/// The interpreter's runs of [`XdpRuntime::run_again_repeated`]: the result of the last, and
/// the instructions of all.
fn interp_repeated(
    interp: &mut Interpreter,
    prepared: &[PreparedProgram],
    (prog, args): (usize, [u64; 5]),
    mem: &mut Memory,
    env: &mut XdpEnv<'_>,
    times: u64,
) -> (Result<u64, VmError>, u64) {
    crate::engine::repeat_runs(times, env, |helpers| {
        let result = interp.run_prepared(prepared, prog, args, mem, helpers);
        (result, interp.executed())
    })
}

fn refused(Refusal { errno, reason }: Refusal) -> PacketError {
    PacketError::Refused { errno, reason }
}

impl XdpEnv<'_> {
    /// The device with this ifindex.
    pub fn device(&self, ifindex: u32) -> Option<NetDevice> {
        self.devices.iter().copied().find(|d| d.ifindex == ifindex)
    }
}

/// The devices `bpf_check_mtu` knows: the FIB's interfaces, else the loopback device.
/// `enum bpf_attach_type`: programs a devmap or cpumap entry runs.
use bpfemu_isa::uapi::{BPF_XDP_CPUMAP, BPF_XDP_DEVMAP};

/// `call bpf_tail_call`.
const TAIL_CALL: bpfemu_isa::Insn = bpfemu_isa::Insn::Call(bpfemu_isa::CallTarget::Helper(12));

/// What stands in for a program that could not be prepared: `r0 = 0; exit`, never run
/// (runs and tail calls into it are refused first).
fn stub_program() -> Program {
    Program::decode(vec![
        RawInsn::new(0xb7, 0, 0, 0, 0),
        RawInsn::new(0x95, 0, 0, 0, 0),
    ])
    .expect("a valid program")
}

fn devices(fib: Option<&Fib>) -> Vec<NetDevice> {
    let mut out: Vec<NetDevice> = fib
        .map(|f| {
            f.interfaces
                .iter()
                .map(|i| NetDevice {
                    ifindex: i.ifindex,
                    mtu: i.mtu,
                    hard_header_len: 14,
                })
                .collect()
        })
        .unwrap_or_default();
    if !out.iter().any(|d| d.ifindex == LOOPBACK.ifindex) {
        out.push(LOOPBACK);
    }
    out
}

/// Writes a map's initial contents through the syscall side, as libbpf does after creating it.
fn fill(maps: &mut Maps, mem: &mut Memory, index: usize, init: &MapInit) -> Result<(), Errno> {
    if let Some(data) = &init.data {
        let size = maps.get(index).expect("created").value_size();
        let mut value = data.clone();
        value.resize(size, 0);
        maps.sys_update(mem, index, &0u32.to_ne_bytes(), &value, 0)?;
    }
    for &(slot, target) in init.prog_slots.iter().chain(&init.map_slots) {
        let value = (target as u32).to_ne_bytes();
        maps.sys_update(mem, index, &slot.to_ne_bytes(), &value, 0)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// r0 = ctx->ingress_ifindex * 1000 + ctx->rx_queue_index * 10 + (data - data_meta)
    fn runtime(rx_devices: Option<Vec<RxDevice>>) -> XdpRuntime {
        let insns = vec![
            RawInsn::new(0x61, 2, 1, 12, 0), // r2 = ingress_ifindex
            RawInsn::new(0x27, 2, 0, 0, 1000),
            RawInsn::new(0x61, 3, 1, 16, 0), // r3 = rx_queue_index
            RawInsn::new(0x27, 3, 0, 0, 10),
            RawInsn::new(0x0f, 2, 3, 0, 0),
            RawInsn::new(0x61, 3, 1, 0, 0), // r3 = data
            RawInsn::new(0x61, 4, 1, 8, 0), // r4 = data_meta
            RawInsn::new(0x1f, 3, 4, 0, 0),
            RawInsn::new(0x0f, 2, 3, 0, 0),
            RawInsn::new(0xbf, 0, 2, 0, 0),
            RawInsn::new(0x95, 0, 0, 0, 0),
        ];
        let prog = XdpProgramSpec {
            name: "md".into(),
            insns,
        };
        let cfg = XdpConfig {
            rx_devices,
            ..XdpConfig::default()
        };
        XdpRuntime::new(vec![prog], vec![], cfg).unwrap()
    }

    /// Reads 8 bytes of headroom (after `bpf_xdp_adjust_head(ctx, -64)`) and 8 bytes of
    /// stack, returns their OR, then dirties both: a frame and stack reused from the last
    /// packet must look as test_run's fresh zeroed page and a new call's stack do.
    #[test]
    fn reused_frame_and_stack_start_clean() {
        let insns = vec![
            RawInsn::new(0xbf, 6, 1, 0, 0),      // r6 = ctx
            RawInsn::new(0xb7, 2, 0, 0, -64),    // r2 = -64
            RawInsn::new(0x85, 0, 0, 0, 44),     // bpf_xdp_adjust_head(ctx, -64)
            RawInsn::new(0x61, 2, 6, 0, 0),      // r2 = data
            RawInsn::new(0x61, 3, 6, 4, 0),      // r3 = data_end
            RawInsn::new(0xbf, 4, 2, 0, 0),      // r4 = r2
            RawInsn::new(0x07, 4, 0, 0, 8),      // r4 += 8
            RawInsn::new(0x2d, 4, 3, 8, 0),      // if r4 > r3 goto out
            RawInsn::new(0x79, 0, 2, 0, 0),      // r0 = *(u64 *)(r2 + 0)
            RawInsn::new(0x7a, 2, 0, 0, -1),     // *(u64 *)(r2 + 0) = -1
            RawInsn::new(0x79, 5, 10, -8, 0),    // r5 = *(u64 *)(r10 - 8)
            RawInsn::new(0x4f, 0, 5, 0, 0),      // r0 |= r5
            RawInsn::new(0x7a, 10, 0, -8, -1),   // *(u64 *)(r10 - 8) = -1
            RawInsn::new(0x79, 5, 10, -512, 0),  // r5 = *(u64 *)(r10 - 512)
            RawInsn::new(0x4f, 0, 5, 0, 0),      // r0 |= r5
            RawInsn::new(0x7a, 10, 0, -512, -1), // *(u64 *)(r10 - 512) = -1
            RawInsn::new(0x95, 0, 0, 0, 0),      // exit
        ];
        let prog = XdpProgramSpec {
            name: "dirty".into(),
            insns,
        };
        let mut rt = XdpRuntime::new(vec![prog], vec![], XdpConfig::default()).unwrap();
        let m = PacketMeta::default();
        for len in [64, 14, 200, 64] {
            let out = rt.run(0, &vec![0xaa; len], &m).unwrap();
            assert_eq!(out.retval, 0, "packet of {len} bytes");
            assert_eq!(out.data_out.len(), 64 + len);
            assert_eq!(out.data_out[..8], [0xff; 8]);
            assert!(out.data_out[8..64].iter().all(|&b| b == 0));
            assert!(out.data_out[64..].iter().all(|&b| b == 0xaa));
        }
    }

    fn errno(r: Result<XdpOutcome, PacketError>) -> i32 {
        match r {
            Err(PacketError::Refused { errno, .. }) => errno.0,
            other => panic!("not refused: {other:?}"),
        }
    }

    /// Linux 6.18's test_run ctx checks, in its order (the values come from
    /// `tests/ctx_vs_kernel.rs`, which holds them against the kernel).
    #[test]
    fn ctx_checks_follow_test_run() {
        let devices = vec![RxDevice {
            ifindex: 5,
            rx_queues: 4,
        }];
        let mut rt = runtime(Some(devices));
        let m = PacketMeta::default();
        let input = [0u8; 72];
        let ok = |rt: &mut XdpRuntime, md: XdpMd| rt.run_ctx(0, &input, &m, &md).unwrap().retval;
        assert_eq!(ok(&mut rt, XdpMd::new(72, 8, 0, 0)), 1008);
        assert_eq!(ok(&mut rt, XdpMd::new(72, 0, 5, 3)), 5030);
        assert_eq!(ok(&mut rt, XdpMd::new(72, 4, 1, 0)), 1004);
        let run = |rt: &mut XdpRuntime, md: XdpMd| errno(rt.run_ctx(0, &input, &m, &md));
        // The ctx must describe the input; at most 216 bytes of metadata.
        for md in [
            XdpMd::new(72, 6, 0, 0),
            XdpMd::new(71, 0, 0, 0),
            XdpMd {
                data_meta: 4,
                ..XdpMd::new(72, 8, 0, 0)
            },
            XdpMd::new(72, 76, 0, 0),
        ] {
            assert_eq!(run(&mut rt, md), 22, "{md:?}");
        }
        let big = [0u8; 300];
        let md = XdpMd::new(300, 220, 0, 0);
        assert_eq!(errno(rt.run_ctx(0, &big, &m, &md)), 22);
        assert!(rt.run_ctx(0, &big, &m, &XdpMd::new(300, 216, 0, 0)).is_ok());
        // The packet after the metadata is at least 14 bytes, checked before the device.
        assert_eq!(
            errno(rt.run_ctx(0, &input[..20], &m, &XdpMd::new(20, 8, 99, 0))),
            22
        );
        // Devices and queues.
        assert_eq!(run(&mut rt, XdpMd::new(72, 0, 99, 0)), 19);
        assert_eq!(run(&mut rt, XdpMd::new(72, 0, 5, 4)), 22);
        assert_eq!(run(&mut rt, XdpMd::new(72, 0, 1, 1)), 22);
        assert_eq!(run(&mut rt, XdpMd::new(72, 0, 0, 1)), 22);
        let egress = XdpMd {
            egress_ifindex: 2,
            ..XdpMd::new(72, 0, 99, 0)
        };
        assert_eq!(run(&mut rt, egress), 22);
        // Without a device list, any ifindex and queue but the loopback's.
        let mut open = runtime(None);
        assert_eq!(ok(&mut open, XdpMd::new(72, 0, 99, 7)), 99070);
        assert_eq!(run(&mut open, XdpMd::new(72, 0, 1, 1)), 22);
    }
}
