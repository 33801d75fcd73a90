//! [`XdpRuntime`]: a loaded object (programs and maps) that runs one packet at a time as
//! `BPF_PROG_TEST_RUN` runs it, and what a run gives back ([`XdpOutcome`]).

use super::determinism::{Clock, Prandom};
use super::frame::{Refusal, XdpFrame};
use super::helpers::{RunState, XdpEnv, maps::FOR_EACH_KEY_REGION};
use super::prepare::{PrepareError, prepare};
use crate::error::VmError;
use crate::fib::Fib;
use crate::interp::{DEFAULT_INSN_BUDGET, Interpreter, Options};
use crate::maps::{Errno, MapEnv, MapError, MapSpec, Maps};
use crate::memory::{Memory, RegionKind};
use bpfemu_isa::{Program, RawInsn};
use std::fmt;

/// XDP actions (`enum xdp_action`).
pub const XDP_ABORTED: u32 = 0;
pub const XDP_DROP: u32 = 1;
pub const XDP_PASS: u32 = 2;
pub const XDP_TX: u32 = 3;
pub const XDP_REDIRECT: u32 = 4;

/// How the runtime runs.
#[derive(Clone, Debug)]
pub struct XdpConfig {
    /// Virtual CPUs (at least 1): per-CPU map copies, `bpf_get_smp_processor_id`.
    pub cpus: u32,
    /// Seed of `bpf_get_prandom_u32`.
    pub seed: u64,
    /// The routing state `bpf_fib_lookup` consults (and `bpf_check_mtu` the MTUs of).
    pub fib: Option<Fib>,
    /// Instructions one packet may execute (including tail calls and callbacks).
    pub insn_budget: u64,
}

impl Default for XdpConfig {
    fn default() -> XdpConfig {
        XdpConfig {
            cpus: 1,
            seed: 0,
            fib: None,
            insn_budget: DEFAULT_INSN_BUDGET,
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
}

/// Where a redirect sends the packet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RedirectTarget {
    /// `bpf_redirect(ifindex, 0)`.
    Ifindex(u32),
    /// A DEVMAP/DEVMAP_HASH entry (`ifindex` `None`: a broadcast whose key is absent).
    Dev {
        map: String,
        key: u32,
        ifindex: Option<u32>,
        broadcast: bool,
        exclude_ingress: bool,
    },
    /// A CPUMAP entry.
    Cpu { map: String, cpu: u32 },
    /// An XSKMAP entry (the AF_XDP socket bound to this queue).
    Xsk { map: String, queue: u32 },
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
    maps: Maps,
    names: Vec<String>,
    programs: Vec<Program>,
    interp: Interpreter,
    prandom: Prandom,
    fib: Option<Fib>,
    devices: Vec<NetDevice>,
    cpus: u32,
}

impl XdpRuntime {
    /// Creates the maps (with their initial contents) and prepares the programs.
    pub fn new(
        programs: Vec<XdpProgramSpec>,
        maps: Vec<(MapSpec, MapInit)>,
        cfg: XdpConfig,
    ) -> Result<XdpRuntime, RuntimeError> {
        if cfg.cpus == 0 {
            return Err(RuntimeError::Config("at least one CPU is needed".into()));
        }
        let mut mem = Memory::new();
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
        let prepared = programs
            .iter()
            .enumerate()
            .map(|(i, p)| prepare(&p.name, i, &p.insns, &registry))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(XdpRuntime {
            mem,
            maps: registry,
            names: programs.into_iter().map(|p| p.name).collect(),
            programs: prepared,
            interp: Interpreter::new(Options {
                insn_budget: cfg.insn_budget,
                ..Options::default()
            }),
            prandom: Prandom::new(cfg.seed, cfg.cpus),
            devices: devices(cfg.fib.as_ref()),
            fib: cfg.fib,
            cpus: cfg.cpus,
        })
    }

    pub fn program_index(&self, name: &str) -> Option<usize> {
        self.names.iter().position(|n| n == name)
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

    /// The maps and the memory their values live in, for reading and writing them between
    /// packets (`--maps`, `--dump-maps`).
    pub fn maps_mut(&mut self) -> (&mut Maps, &mut Memory) {
        (&mut self.maps, &mut self.mem)
    }

    /// Runs program `prog` on one packet, as BPF_PROG_TEST_RUN without a ctx would (with
    /// `meta`'s receive queue, CPU and clock).
    pub fn run(
        &mut self,
        prog: usize,
        packet: &[u8],
        meta: &PacketMeta,
    ) -> Result<XdpOutcome, PacketError> {
        assert!(prog < self.programs.len(), "program {prog} is not loaded");
        if meta.cpu >= self.cpus {
            return Err(PacketError::Refused {
                errno: Errno::EINVAL,
                reason: format!(
                    "CPU {} is not one of the {} virtual CPUs",
                    meta.cpu, self.cpus
                ),
            });
        }
        let mut frame = XdpFrame::new(
            &mut self.mem,
            packet,
            meta.ingress_ifindex,
            meta.rx_queue_index,
        )
        .map_err(|Refusal { errno, reason }| PacketError::Refused { errno, reason })?;
        let mut run = RunState::new(meta.cpu, Clock { ts_ns: meta.ts_ns });
        let ctx = frame.ctx_addr(&self.mem);
        let mut env = XdpEnv {
            maps: &mut self.maps,
            frame: &mut frame,
            run: &mut run,
            prandom: &mut self.prandom,
            fib: self.fib.as_ref(),
            devices: &self.devices,
        };
        let result = self.interp.run_set(
            &self.programs,
            prog,
            [ctx, 0, 0, 0, 0],
            &mut self.mem,
            &mut env,
        );
        let insns_executed = self.interp.executed();
        let data_out = frame.data_out(&self.mem);
        let meta_len = frame.meta_len();
        let frags_len = frame.frags_len();
        frame.release(&mut self.mem);
        self.remove_scratch();
        let retval = result.map_err(|error| PacketError::Run {
            error,
            insns_executed,
        })? as u32;
        let action = XdpAction::from_retval(retval);
        Ok(XdpOutcome {
            retval,
            action,
            data_out,
            meta_len,
            frags_len,
            redirect: run.redirect.filter(|_| action == XdpAction::Redirect),
            printk: run.printk,
            perf_events: run.events,
            insns_executed,
        })
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

impl XdpEnv<'_> {
    /// The device with this ifindex.
    pub fn device(&self, ifindex: u32) -> Option<NetDevice> {
        self.devices.iter().copied().find(|d| d.ifindex == ifindex)
    }
}

/// The devices `bpf_check_mtu` knows: the FIB's interfaces, else the loopback device.
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
