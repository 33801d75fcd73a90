//! `bpfemu bench`: how fast each of bpfemu's engines runs a program over a capture, beside the
//! kernel on the same packets and map contents, in one run, on one pinned CPU.
//!
//! The engines are the interpreter, the JIT checked (every access validated, as the
//! interpreter does), the JIT trusted and the baseline JIT (both on host memory directly: only
//! what bpfemu's verifier accepts, as for replay; else the report says why it did not run);
//! `--engine` picks some.
//! Each runs on a runtime of its own with the same map contents, two loops over the capture
//! cycled up to `--packets` (read once, so memory stays bounded by the capture):
//!
//! - **test_run's loop**, the one compared with the kernel: each distinct packet is loaded
//!   once and run as many times as the cycle visits it, each run on the frame the previous
//!   one left, the repeats in one call ([`XdpRuntime::run_again_repeated`](bpfemu_vm::xdp::XdpRuntime::run_again_repeated)). This is what
//!   BPF_PROG_TEST_RUN does with `repeat`: it builds the `xdp_buff` once, runs its repeats
//!   in one loop in the kernel and never resets the buffer between them, so a program that
//!   rewrites its packet or moves its bounds sees its own output (l4lb's second run finds an
//!   IP-in-IP packet and takes a much shorter path). Timing bpfemu on fresh packets against
//!   the kernel on its own output compared different work; `tests/repeat_vs_kernel.rs`
//!   holds this loop to the kernel's results.
//! - **replay's loop**: every packet loaded into the reused frame afresh, then run: what
//!   `bpfemu replay` pays a packet.
//!
//! The JIT's compile time is reported apart. bpfemu's time is the thread's CPU time
//! (`CLOCK_THREAD_CPUTIME_ID`, so that other processes on a shared machine do not count;
//! wall time is reported too). The kernel reports its own mean duration per run, measured in
//! the kernel with preemption off; each engine's time is given as a multiple of it. The kernel
//! does not count instructions: every instructions/s figure uses the first engine's count for
//! the same loop.
//!
//! Without root or `bpf()`, bpfemu's figures are given alone and the report says why.

use crate::diff::{self, DiffOptions, Session};
use crate::pcap::{Packet, PcapReader};
use crate::prepare::Prepared;
use crate::progress::Progress;
use crate::replay::{ReplayOptions, Replayer};
use anyhow::{Context, Result, bail};
use bpfemu_jit::Engine;
use bpfemu_kernel as kbpf;
use bpfemu_vm::xdp::PacketMeta;
use serde_json::json;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Clone, Debug, Default, clap::Args)]
pub struct BenchOptions {
    /// The BPF object.
    #[arg(value_name = "OBJ")]
    pub object: PathBuf,
    /// The capture whose packets are run (repeated up to --packets).
    #[arg(value_name = "PCAP")]
    pub capture: PathBuf,
    /// The XDP program to run (needed when the object has several): its function name, or
    /// its section, as `ip link set dev DEV xdp obj FILE sec S` names it.
    #[arg(long = "prog")]
    pub program: Option<String>,
    /// Map contents set on both sides before the run (as for replay).
    #[arg(long, value_name = "FILE")]
    pub maps: Option<PathBuf>,
    /// Routing tables for bpf_fib_lookup (as for replay and diff).
    #[arg(long, value_name = "FILE")]
    pub fib: Option<PathBuf>,
    /// The sockets bpf_sk_lookup_tcp/udp find (as for replay and diff).
    #[arg(long, value_name = "FILE")]
    pub sockets: Option<PathBuf>,
    /// How many packets to run: the capture's, cycled (or cut) to this many.
    #[arg(long, default_value_t = 1_000_000)]
    pub packets: usize,
    /// An engine to measure (repeatable; default: interp, jit, jit-trusted, jit-baseline and
    /// jit-baseline-checked), in the report's order.
    #[arg(long = "engine", value_enum)]
    pub engines: Vec<Engine>,
    /// Benchmark the program even if bpfemu's verifier rejects it (checked engines only).
    #[arg(long)]
    pub no_verify: bool,
    /// The CPU every measurement runs on, bpfemu's engines and the kernel's program alike
    /// (as `taskset -c N` would pin it; default 0).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub cpu: usize,
    /// How the object is loaded (from [`crate::load_args::LoadArgs`]).
    #[arg(skip)]
    pub load: bpfemu_loader::LoadOptions,
    /// Show each engine's progress on standard error (set by the command line: a terminal).
    #[arg(skip)]
    pub progress: bool,
}

/// One engine's figures.
#[derive(Clone, Debug, PartialEq)]
pub struct EngineFigures {
    /// "interp", "jit" (checked), "jit-trusted", "jit-baseline" or "jit-baseline-checked".
    pub engine: &'static str,
    /// Time to get the program ready to run: the runtime, the maps, the compile (the object
    /// is loaded and verified once, before any engine).
    pub prepare: Duration,
    /// The JIT's compile alone (zero for the interpreter).
    pub compile: Duration,
    /// test_run's loop, the one the kernel's time is compared with: each distinct packet
    /// loaded once and run as often as the cycle visits it.
    pub test_run: LoopFigures,
    /// replay's loop: every packet loaded into the frame afresh, then run.
    pub replay: LoopFigures,
}

/// What one loop over the packets measured.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LoopFigures {
    /// CPU time of the thread for every packet.
    pub cpu: Duration,
    pub wall: Duration,
    /// Instructions the engine counted.
    pub insns: u64,
    /// Runs that stopped or that test_run would refuse.
    pub errors: usize,
}

/// An engine that ran, or why it did not.
#[derive(Clone, Debug, PartialEq)]
pub struct EngineRun {
    pub engine: &'static str,
    pub figures: Result<EngineFigures, String>,
}

/// The kernel's figures.
#[derive(Clone, Debug, PartialEq)]
pub struct KernelFigures {
    /// The sum over packets of test_run's mean duration times the packet's repeats.
    pub program: Duration,
    /// Wall time of all the test_run calls.
    pub wall: Duration,
    /// test_run calls made (one per distinct packet).
    pub calls: usize,
    /// Packets the kernel refused.
    pub errors: usize,
}

/// The measured figures.
#[derive(Clone, Debug)]
pub struct BenchReport {
    pub program: String,
    pub packets: usize,
    /// Packets in the capture, cycled to `packets`.
    pub capture_packets: usize,
    /// The engines measured: interpreter, checked JIT, trusted JIT unless `--engine` chose.
    pub engines: Vec<EngineRun>,
    /// The kernel's figures, or why there are none.
    pub kernel: Result<KernelFigures, String>,
    /// The CPU the measurements ran on, as the thread found itself at their end.
    pub cpu: usize,
}

pub fn bench(opts: &BenchOptions) -> Result<BenchReport> {
    // The program and maps first, on both sides: a wrong name fails before the capture is
    // read. This thread is pinned to `--cpu` (0 by default) for bpfemu and the kernel alike.
    // One object, verified once, for every engine and the kernel's side; a program the
    // verifier rejects is refused here, before anything runs.
    let prepared = Arc::new(Prepared::open(
        &opts.object,
        opts.program.as_deref(),
        &opts.load,
    )?);
    prepared.admit(Engine::Interp, opts.no_verify)?;
    // Pinned before anything runs, with or without the kernel's side (whose session pins the
    // same CPU again).
    let _pin = pin_to(opts.cpu)?;
    let session = match diff::kernel_ready() {
        Ok(()) => Ok(kernel_session(&prepared, opts)?),
        Err(why) => Err(why),
    };
    // As many virtual CPUs as the kernel has, as diff gives them: map files may name CPUs
    // (cpumap entries, per-CPU values) and must mean the same on both sides.
    let cpus = session.as_ref().map_or(1, Session::cpus);
    // The interpreter's runtime first: its errors (a bad object, map file or program name)
    // are the command's.
    let (interp, prepare) = bpfemu_replayer(&prepared, opts, cpus, Engine::Interp)?;
    crate::replay::print_warnings(&opts.object, interp.object());
    let program = interp.program_name.clone();
    let capture = read_capture(opts)?;
    let mut interp = Some((interp, prepare));
    let chosen = match opts.engines.is_empty() {
        true => &Engine::ALL[..],
        false => &opts.engines[..],
    };
    let engines = chosen
        .iter()
        .map(|&choice| EngineRun {
            engine: choice.name(),
            figures: engine_figures(&prepared, opts, cpus, choice, &mut interp, &capture),
        })
        .collect();
    Ok(BenchReport {
        program,
        packets: opts.packets,
        capture_packets: capture.len(),
        engines,
        kernel: session.map(|s| measure_kernel(&s, &capture, opts)),
        cpu: bpfemu_kernel::current_cpu().unwrap_or(opts.cpu),
    })
}

/// One engine over the capture, each on a runtime of its own with the maps as `--maps` sets
/// them; or why it cannot run.
fn engine_figures(
    prepared: &Arc<Prepared>,
    opts: &BenchOptions,
    cpus: u32,
    choice: Engine,
    interp: &mut Option<(Replayer, Duration)>,
    capture: &[Packet],
) -> Result<EngineFigures, String> {
    // The trusted JIT's runtime is refused when bpfemu's verifier rejects what it would run.
    let (mut replayer, prepare) = match (choice, interp.take()) {
        (Engine::Interp, Some(ready)) => ready,
        _ => bpfemu_replayer(prepared, opts, cpus, choice).map_err(|e| format!("{e:#}"))?,
    };
    Ok(measure_runtime(
        choice.name(),
        prepare,
        &mut replayer,
        capture,
        opts,
    ))
}

/// The capture's packets, once.
fn read_capture(opts: &BenchOptions) -> Result<Vec<Packet>> {
    let packets: Vec<Packet> = PcapReader::open(&opts.capture)?.collect::<Result<_, _>>()?;
    if packets.is_empty() {
        bail!("{}: no packets", opts.capture.display());
    }
    Ok(packets)
}

/// Pins this thread to `cpu`; a CPU this process may not run on is bad input.
fn pin_to(cpu: usize) -> Result<bpfemu_kernel::CpuPin> {
    // cpu_set_t holds 1,024 CPUs; past it no pin can name the CPU.
    if cpu >= 1024 {
        bail!("--cpu {cpu}: no such CPU here");
    }
    bpfemu_kernel::CpuPin::new(cpu)
        .with_context(|| format!("--cpu {cpu}: cannot run there (not a CPU this process may use)"))
}

fn kernel_session(prepared: &Arc<Prepared>, opts: &BenchOptions) -> Result<Session> {
    let diff_opts = DiffOptions {
        cpu: opts.cpu,
        program: opts.program.clone(),
        load: opts.load.clone(),
        fib: opts.fib.clone(),
        sockets: opts.sockets.clone(),
        no_verify: opts.no_verify,
        ..DiffOptions::new(&opts.object)
    };
    let doc: Option<serde_json::Value> = match &opts.maps {
        Some(file) => {
            let text = std::fs::read_to_string(file)
                .with_context(|| format!("cannot read {}", file.display()))?;
            Some(
                serde_json::from_str(&text)
                    .with_context(|| format!("{}: not JSON", file.display()))?,
            )
        }
        None => None,
    };
    // Global data goes in before the kernel's load (read-only data is frozen then).
    Ok(Session::open_prepared(
        Arc::clone(prepared),
        &diff_opts,
        doc.as_ref(),
    )?)
}

/// bpfemu's runtime for `engine` with the maps as `--maps` sets them, and the time it took to
/// prepare.
fn bpfemu_replayer(
    prepared: &Arc<Prepared>,
    opts: &BenchOptions,
    cpus: u32,
    engine: Engine,
) -> Result<(Replayer, Duration)> {
    let replay_opts = ReplayOptions {
        object: opts.object.clone(),
        program: opts.program.clone(),
        maps: opts.maps.clone(),
        fib: opts.fib.clone(),
        sockets: opts.sockets.clone(),
        load: opts.load.clone(),
        cpus,
        ifindex: 1,
        engine,
        no_verify: opts.no_verify,
        ..ReplayOptions::default()
    };
    let start = Instant::now();
    let replayer = Replayer::with(Arc::clone(prepared), &replay_opts)?;
    Ok((replayer, start.elapsed()))
}

/// How often test_run runs each packet of the capture: `count` packets cycling it, so the
/// first `count % len` packets once more than the others (zero for a packet never reached).
fn repeats(capture_len: usize, count: usize) -> impl Iterator<Item = usize> {
    let (rounds, extra) = (count / capture_len.max(1), count % capture_len.max(1));
    (0..capture_len).map(move |j| rounds + usize::from(j < extra))
}

/// One engine's two loops on the replayer's runtime: test_run's (each distinct packet loaded
/// once and run as often as the cycle visits it, the frame as the last run left it), then
/// replay's (every packet of the cycle loaded afresh, then run). The maps carry over from the
/// first loop to the second, as from one replayed packet to the next.
fn measure_runtime(
    engine: &'static str,
    prepare: Duration,
    replayer: &mut Replayer,
    capture: &[Packet],
    opts: &BenchOptions,
) -> EngineFigures {
    // A bar per loop, each against the packets asked.
    let total = Some(opts.packets as u64);
    let mut progress = Progress::new(opts.progress, engine, "packets", total, 4096);
    let test_run = repeat_loop(replayer, capture, opts.packets, &mut progress);
    progress.finish(opts.packets as u64);
    let label = format!("{engine} replay");
    let mut progress = Progress::new(opts.progress, &label, "packets", total, 4096);
    let replay = replay_loop(replayer, capture, opts.packets, &mut progress);
    progress.finish(opts.packets as u64);
    EngineFigures {
        engine,
        prepare,
        compile: replayer.compile_time,
        test_run,
        replay,
    }
}

/// Where a packet's run begins on the clock: the cycle's index gives a clock that moves.
fn packet_meta(i: usize) -> PacketMeta {
    PacketMeta {
        ts_ns: (i as u64).wrapping_mul(1000),
        ..PacketMeta::default()
    }
}

/// test_run's loop: each distinct packet loaded once and run, then run again `repeat - 1`
/// times in one call on the frame the previous run left, as BPF_PROG_TEST_RUN runs its
/// repeats in one system call (the repeats share the packet's clock). A packet the load
/// refuses, or a batch that stops, counts all its runs as errors.
fn repeat_loop(
    replayer: &mut Replayer,
    capture: &[Packet],
    count: usize,
    progress: &mut Progress,
) -> LoopFigures {
    let (program, runtime) = (replayer.program, &mut replayer.runtime);
    let mut figures = LoopFigures::default();
    let mut done = 0usize;
    let clock = CpuClock::start();
    for (packet, repeat) in capture.iter().zip(repeats(capture.len(), count)) {
        if repeat == 0 {
            continue;
        }
        let meta = packet_meta(done);
        done += repeat;
        // Read where it lands, not moved: a copy of the whole result just after the runtime
        // wrote it would wait for those stores (a store-forwarding stall).
        let first = runtime.run_in_place(program, &packet.data, &meta);
        match &first {
            Ok(verdict) => figures.insns += verdict.insns_executed,
            Err(_) => {
                figures.errors += repeat;
                continue;
            }
        }
        if repeat > 1 {
            let again = runtime.run_again_repeated(program, &meta, repeat as u64 - 1);
            match &again {
                Ok(verdict) => figures.insns += verdict.insns_executed,
                Err(_) => figures.errors += repeat - 1,
            }
        }
        progress.tick(done as u64, || done as u64);
    }
    (figures.cpu, figures.wall) = clock.stop();
    figures
}

/// Replay's loop: every packet of the cycle loaded into the reused frame, then run.
fn replay_loop(
    replayer: &mut Replayer,
    capture: &[Packet],
    count: usize,
    progress: &mut Progress,
) -> LoopFigures {
    let (program, runtime) = (replayer.program, &mut replayer.runtime);
    let mut figures = LoopFigures::default();
    let clock = CpuClock::start();
    for (i, packet) in capture.iter().cycle().take(count).enumerate() {
        let result = runtime.run_in_place(program, &packet.data, &packet_meta(i));
        match &result {
            Ok(verdict) => figures.insns += verdict.insns_executed,
            Err(_) => figures.errors += 1,
        }
        progress.tick(i as u64, || i as u64);
    }
    (figures.cpu, figures.wall) = clock.stop();
    figures
}

/// Each distinct packet through test_run once, repeated as often as the cycle visits it.
fn measure_kernel(session: &Session, capture: &[Packet], opts: &BenchOptions) -> KernelFigures {
    let count = opts.packets;
    let total = Some(count as u64);
    let mut progress = Progress::new(opts.progress, "kernel", "packets", total, 1);
    let mut done = 0u64;
    let fd = session.kernel_program_fd();
    let mut program_ns = 0u128;
    let (mut calls, mut errors) = (0, 0);
    let start = Instant::now();
    for (packet, repeat) in capture.iter().zip(repeats(capture.len(), count)) {
        if repeat == 0 {
            continue;
        }
        // test_run takes a u32 repeat; more than that is split into several calls.
        let mut left = repeat;
        while left > 0 {
            let n = left.min(u32::MAX as usize);
            calls += 1;
            match kbpf::test_run(fd, &packet.data, None, n as u32) {
                Ok(run) => program_ns += u128::from(run.duration_ns) * n as u128,
                Err(_) => errors += n,
            }
            left -= n;
        }
        done += repeat as u64;
        progress.tick(done, || done);
    }
    progress.finish(done);
    KernelFigures {
        program: Duration::from_nanos(program_ns.min(u64::MAX as u128) as u64),
        wall: start.elapsed(),
        calls,
        errors,
    }
}

/// The calling thread's CPU time and the wall clock, from one start.
struct CpuClock {
    cpu: u64,
    wall: Instant,
}

impl CpuClock {
    fn start() -> CpuClock {
        CpuClock {
            cpu: kbpf::thread_cpu_ns(),
            wall: Instant::now(),
        }
    }

    /// (CPU time, wall time) since the start.
    fn stop(self) -> (Duration, Duration) {
        let wall = self.wall.elapsed();
        let cpu = Duration::from_nanos(kbpf::thread_cpu_ns().saturating_sub(self.cpu));
        (cpu, wall)
    }
}

fn per_sec(count: f64, time: Duration) -> f64 {
    count / time.as_secs_f64().max(1e-9)
}

fn ns_per(time: Duration, count: usize) -> f64 {
    time.as_nanos() as f64 / count.max(1) as f64
}

impl BenchReport {
    /// The first engine that ran: every engine runs the same instructions, so the
    /// instructions/s of the others and of the kernel use its count.
    fn reference(&self) -> Option<&EngineFigures> {
        self.engines.iter().find_map(|e| e.figures.as_ref().ok())
    }

    /// Instructions of test_run's loop (what the kernel ran too).
    fn insns(&self) -> u64 {
        self.reference().map_or(0, |e| e.test_run.insns)
    }

    fn insns_per_packet(&self) -> f64 {
        self.insns() as f64 / self.packets.max(1) as f64
    }

    /// The engine's time in test_run's loop over the kernel's, the same loop on the same
    /// packets: below 1 the engine is faster. None without the kernel or without packets.
    pub fn time_vs_kernel(&self, engine: &EngineFigures) -> Option<f64> {
        let kernel = self.kernel.as_ref().ok().filter(|_| self.packets > 0)?;
        Some(engine.test_run.cpu.as_secs_f64() / kernel.program.as_secs_f64().max(1e-12))
    }

    pub fn to_text(&self) -> String {
        if self.packets == 0 {
            // No time to compare: a table of zeros and a 1.000x would read as a measurement.
            return format!("0 packets through {}: nothing measured\n", self.program);
        }
        let n = self.packets;
        let mut out = format!(
            "{n} packets through {} ({} in the capture, cycled), {:.1} instructions a run, on CPU {}\n",
            self.program,
            self.capture_packets,
            self.insns_per_packet(),
            self.cpu
        );
        out += "              -------- test_run's loop: the packet run `repeat` times --------  \
                 replay: loaded, run\n";
        out += "engine        prepare ms  compile ms      ns/run   M insns/s  time / kernel's  \
                 ns/packet  M packets/s\n";
        let insns = self.insns() as f64;
        for run in &self.engines {
            let e = match &run.figures {
                Ok(e) => e,
                Err(why) => {
                    out += &format!("{:<12}  not run: {why}\n", run.engine);
                    continue;
                }
            };
            let ratio = self
                .time_vs_kernel(e)
                .map_or_else(|| "-".to_string(), |r| format!("{r:.3}x"));
            out += &format!(
                "{:<12} {:>11.3} {:>11.3} {:>11.1} {:>11.1}  {ratio:>15}  {:>9.1} {:>12.2}\n",
                e.engine,
                e.prepare.as_secs_f64() * 1e3,
                e.compile.as_secs_f64() * 1e3,
                ns_per(e.test_run.cpu, n),
                per_sec(insns, e.test_run.cpu) / 1e6,
                ns_per(e.replay.cpu, n),
                per_sec(n as f64, e.replay.cpu) / 1e6,
            );
            let errors = e.test_run.errors + e.replay.errors;
            if errors > 0 {
                out += &format!("  ({errors} runs stopped or refused)\n");
            }
        }
        match &self.kernel {
            Ok(k) => {
                out += &format!(
                    "{:<12} {:>11} {:>11} {:>11.1} {:>11.1}  {:>15}\n",
                    "kernel (JIT)",
                    "-",
                    "-",
                    ns_per(k.program, n),
                    per_sec(insns, k.program) / 1e6,
                    "1.000x",
                );
                out += &format!(
                    "kernel: BPF_PROG_TEST_RUN with repeat, {} calls in {:.3} s wall\n",
                    k.calls,
                    k.wall.as_secs_f64()
                );
                if k.errors > 0 {
                    out += &format!("  ({} packets refused by the kernel)\n", k.errors);
                }
            }
            Err(why) => out += &format!("kernel: not measured ({why})\n"),
        }
        out
    }

    pub fn to_json(&self) -> serde_json::Value {
        let insns = self.insns() as f64;
        let n = self.packets;
        let engines: Vec<serde_json::Value> = self
            .engines
            .iter()
            .map(|run| {
                let e = match &run.figures {
                    Ok(e) => e,
                    Err(why) => return json!({ "engine": run.engine, "not_run": why }),
                };
                let mut doc = json!({
                    "engine": e.engine,
                    "prepare_ms": e.prepare.as_secs_f64() * 1e3,
                    "compile_ms": e.compile.as_secs_f64() * 1e3,
                    "cpu_seconds": e.test_run.cpu.as_secs_f64(),
                    "wall_seconds": e.test_run.wall.as_secs_f64(),
                    "ns_per_packet": ns_per(e.test_run.cpu, n),
                    "packets_per_sec": per_sec(n as f64, e.test_run.cpu),
                    "insns": e.test_run.insns,
                    "insns_per_sec": per_sec(insns, e.test_run.cpu),
                    "errors": e.test_run.errors,
                    "replay": {
                        "cpu_seconds": e.replay.cpu.as_secs_f64(),
                        "wall_seconds": e.replay.wall.as_secs_f64(),
                        "ns_per_packet": ns_per(e.replay.cpu, n),
                        "packets_per_sec": per_sec(n as f64, e.replay.cpu),
                        "insns": e.replay.insns,
                        "errors": e.replay.errors,
                    },
                });
                if let Some(r) = self.time_vs_kernel(e) {
                    doc["time_vs_kernel"] = json!(r);
                }
                doc
            })
            .collect();
        let kernel = match &self.kernel {
            Ok(k) => {
                json!({
                    "program_seconds": k.program.as_secs_f64(),
                    "ns_per_packet": ns_per(k.program, n),
                    "packets_per_sec": per_sec(n as f64, k.program),
                    "insns_per_sec": per_sec(insns, k.program),
                    "test_run_calls": k.calls,
                    "test_run_wall_seconds": k.wall.as_secs_f64(),
                    "errors": k.errors,
                })
            }
            Err(why) => json!({ "unavailable": why }),
        };
        json!({
            "program": self.program,
            "packets": n,
            "capture_packets": self.capture_packets,
            "insns_per_packet": self.insns_per_packet(),
            "cpu": self.cpu,
            "engines": engines,
            "kernel": kernel,
        })
    }
}
