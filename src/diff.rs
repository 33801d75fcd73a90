//! `bpfemu diff`: the running kernel as the judge. One object is loaded twice, into the kernel
//! through the raw bpf() syscall ([`bpfemu_kernel::object`]: the selected program
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
//!   network namespace built from the same FIB file ([`bpfemu_kernel::netns`]: the
//!   file's interfaces at its ifindexes, addresses, routes, neighbours), which the session's
//!   thread enters while the session lives: `bpf_fib_lookup` answers from it, devmap values
//!   are its ifindexes, and the loopback is its own. The namespace is deleted when the
//!   session drops. Without a FIB the kernel side runs in a fresh namespace (the loopback alone,
//!   `Fib::fresh_netns`), which is what bpfemu answers from then.
//! - **Sockets**: with [`DiffOptions::sockets`] the same socket table is bpfemu's and, opened
//!   as real sockets in that namespace ([`bpfemu_kernel::sockets`]), the kernel's: the socket
//!   lookups of both sides search the same sockets. Without it neither side has any.
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
mod image;
mod maps;
mod packets;
mod session;
mod verdicts;

pub use events::{EventComparison, EventRecord};
pub use image::*;
pub use maps::*;
pub use packets::*;
pub use session::*;
pub use verdicts::*;

use crate::prepare::{OpenError, Prepared, Refusal, RunSetup};
use crate::replay::hex;
use bpfemu_isa::RawInsn;
use bpfemu_isa::uapi::*;
use bpfemu_jit::Engine;
use bpfemu_kernel::events::KernelEvents;
use bpfemu_kernel::netns::{Entered, HeldNetns, Netns, NetnsError};
use bpfemu_kernel::object::{InitialEntries, KernelLoadOptions, KernelObject, KernelObjectError};
use bpfemu_kernel::sockets::OpenSockets;
use bpfemu_kernel::verifier_error_line;
use bpfemu_kernel::{self as kernel, BPF_PROG_TYPE_XDP};
use bpfemu_kernel::{self as kbpf, CpuPin, TestRunOutput, XdpMd};
use bpfemu_loader::btf::json::{self as mapjson, MapContents, MapValue};
use bpfemu_loader::btf::{Btf, BtfKind, TypeId};
use bpfemu_loader::{LoadOptions, Object};
use bpfemu_vm::sockets::SocketTable;
use bpfemu_vm::taint::TaintSource;
use bpfemu_vm::xdp::{PacketError, PacketMeta, PacketTaint, XdpAction, XdpOutcome, XdpRuntime};
use serde::Serialize;
use std::collections::{BTreeMap, HashSet};
use std::fmt::Write as _;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;

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
    /// The program may not run: bpfemu's verifier rejects it, or the engine cannot run it.
    #[error("{0}")]
    Refused(#[source] Refusal),
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
        source: bpfemu_kernel::netns::NetnsError,
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
            Errno(errno)
        )
    })?;
    kbpf::test_run(fd.as_fd(), &[0u8; 14], None, 1)
        .map(|_| ())
        .map_err(|errno| {
            format!(
                "the kernel's BPF_PROG_TEST_RUN is not usable here ({}); nothing was compared",
                Errno(errno)
            )
        })
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
    prepared: Arc<Prepared>,
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
            Session::open_prepared(prepared, opts, Some(doc)).map_err(|e| match e {
                DiffError::Maps(m) => anyhow::anyhow!("{}: {m}", file.display()),
                other => other.into(),
            })?
        }
        _ => Session::open_prepared(prepared, opts, None)?,
    };
    crate::replay::print_warnings(&opts.object, session.object());
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
