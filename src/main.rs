//! The `bpfemu` command line.

mod disasm;
mod inspect;

use anyhow::Context;
use bpfemu::conformance::runner::{self, Mode};
use bpfemu::prepare::{Prepared, Refusal, RefusalKind};
use bpfemu_jit::Engine;
use bpfemu_loader::{Kernel, LoadOptions, Object};
use clap::{Parser, Subcommand};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::OnceLock;

#[derive(Parser)]
#[command(
    name = "bpfemu",
    version,
    about = "The kernel's eBPF machinery for XDP, in userspace"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a bpf_conformance test directory (`*.data` files) and report
    /// `N passed, M failed, K skipped`.
    Conformance {
        /// Directory of `.data` files.
        dir: PathBuf,
        /// Engine that runs the programs.
        #[arg(long, value_enum, default_value_t = Engine::Interp)]
        engine: Engine,
        /// Print one JSON document instead of text.
        #[arg(long)]
        json: bool,
        /// Every file must be rejected (the suite's `negative` directory): a test passes when
        /// it fails to assemble, decode or match, and fails when it runs clean.
        #[arg(long)]
        expect_fail: bool,
        /// Run every test through the running kernel too (each wrapped in an XDP program that
        /// stores the full r0 in a map) and report kernel vs bpfemu; exit 1 on any difference.
        #[arg(long, conflicts_with = "expect_fail")]
        kernel: bool,
    },
    /// Show what loading an object gives: programs, maps, global data, relocations.
    Inspect {
        /// The BPF object (`clang -target bpf` output).
        obj: PathBuf,
        /// Print one JSON document instead of text.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        load: LoadArgs,
    },
    /// Disassemble each program as loaded (subprograms appended), in the layout of
    /// `bpftool prog dump xlated`, with source lines.
    Disasm {
        /// The BPF object.
        obj: PathBuf,
        /// Only this program.
        #[arg(long)]
        prog: Option<String>,
        /// Show the program after the verifier's rewrites, as the kernel runs it (ctx
        /// accesses converted, helpers inlined, dead code removed): comparable with
        /// `bpftool prog dump xlated`.
        #[arg(long)]
        xlated: bool,
        #[command(flatten)]
        load: LoadArgs,
    },
    /// Verify every program as the kernel's verifier would: verdict, the kernel's message at
    /// its source line, the log; exit 0 when all are accepted, 1 when one is rejected, 2 when
    /// one uses what bpfemu does not check yet (undecided).
    Verify {
        /// The BPF object.
        obj: PathBuf,
        /// Only this program.
        #[arg(long)]
        prog: Option<String>,
        /// The verifier log to print: 0 none, 1 the path to the error, 2 every state.
        #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=2))]
        log_level: u32,
        /// One JSON document instead of text.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        load: LoadArgs,
    },
    /// Run every packet of a capture through an XDP program, with the kernel's semantics.
    Replay(Box<ReplayArgs>),
    /// Measure bpfemu's speed over a capture against the kernel's on the same packets.
    Bench(BenchArgs),
    /// Compare bpfemu with the running kernel: every packet of a capture through both
    /// (BPF_PROG_TEST_RUN), then every map; or, with --verifier, the kernel's verdicts.
    Diff(Box<DiffArgs>),
    /// Coverage-guided packet fuzzing of an XDP program: mutated packets until the time or
    /// run budget is spent; findings (XDP_ABORTED, faults, helper errors left unexamined,
    /// --never) and a minimised corpus as captures, coverage by source line. Exit 1 when
    /// something was found.
    Fuzz(Box<FuzzArgs>),
}

#[derive(clap::Args)]
struct FuzzArgs {
    /// The BPF object.
    obj: PathBuf,
    /// The XDP program to fuzz (needed when the object has several).
    #[arg(long)]
    prog: Option<String>,
    /// Initial map contents (JSON, as for replay).
    #[arg(long, value_name = "FILE")]
    maps: Option<PathBuf>,
    /// Routing and neighbour tables for bpf_fib_lookup (JSON, as for replay).
    #[arg(long, value_name = "FILE")]
    fib: Option<PathBuf>,
    /// Packets to start from (pcap or pcapng); default: generated traffic.
    #[arg(long, value_name = "PCAP")]
    seeds: Option<PathBuf>,
    /// How long to fuzz: `90s`, `5m`, `1h`, or seconds.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    time: std::time::Duration,
    /// Stop after this many runs (deterministic for a --seed, unlike --time).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    runs: Option<u64>,
    /// Seed of the mutator, the generated traffic and bpf_get_prandom_u32.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Forbidden results, each a finding: ACTION (aborted, drop, pass, tx, redirect, any) with
    /// an optional :CONDITION (bad-ipv4-csum, bad-l4-csum, short, rewritten) of the packet
    /// the program leaves, e.g. `--never tx:bad-ipv4-csum`. Repeatable.
    #[arg(long, value_name = "ACTION[:CONDITION]")]
    never: Vec<bpfemu::packet_fuzz::Never>,
    /// A helper whose errors the program may leave unexamined (not a finding), all of them or
    /// one errno: `--allow-ignored map_delete_elem:ENOENT`. Repeatable.
    #[arg(long, value_name = "HELPER[:ERRNO]")]
    allow_ignored: Vec<bpfemu::packet_fuzz::AllowIgnored>,
    /// Where findings, the corpus and the coverage report go (default: a fresh directory
    /// under the system's temp dir, named when the run starts).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Fuzz the program even if bpfemu's verifier rejects it (in checked mode, faults reported).
    #[arg(long)]
    no_verify: bool,
    /// One JSON document instead of the text summary.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    load: LoadArgs,
}

/// `90s`, `5m`, `1h`, `250ms` or a number of seconds.
fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    let (number, unit) = match text.find(|c: char| !c.is_ascii_digit() && c != '.') {
        Some(at) => text.split_at(at),
        None => (text, "s"),
    };
    let value: f64 = number
        .parse()
        .map_err(|_| format!("'{text}' is not a duration (e.g. 90s, 5m, 1h)"))?;
    let seconds = match unit {
        "ms" => value / 1e3,
        "s" => value,
        "m" => value * 60.0,
        "h" => value * 3600.0,
        _ => return Err(format!("'{text}': unknown unit '{unit}' (ms, s, m, h)")),
    };
    std::time::Duration::try_from_secs_f64(seconds)
        .ok()
        .filter(|d| *d <= std::time::Duration::from_secs(366 * 24 * 3600))
        .ok_or_else(|| format!("'{text}' is not a duration of at most a year"))
}

#[derive(clap::Args)]
struct DiffArgs {
    /// The BPF object.
    obj: PathBuf,
    /// The capture (pcap or pcapng, Ethernet).
    #[arg(required_unless_present = "verifier")]
    pcap: Option<PathBuf>,
    /// The XDP program to compare (needed when the object has several): its function name,
    /// or its section, as `ip link set dev DEV xdp obj FILE sec S` names it.
    #[arg(long)]
    prog: Option<String>,
    /// Initial map contents for both sides (JSON, as for replay --maps).
    #[arg(long, value_name = "FILE")]
    maps: Option<PathBuf>,
    /// Engine that runs bpfemu's side (the JIT by default; interp, the reference
    /// interpreter, stays selectable).
    #[arg(long, value_enum, default_value_t = Engine::Jit)]
    engine: Engine,
    /// Seed of bpfemu's bpf_get_prandom_u32.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// ingress_ifindex every packet arrives on, in both (default: test_run's, the loopback).
    #[arg(long)]
    ifindex: Option<u32>,
    /// rx_queue_index every packet arrives on, in both (default: 0).
    #[arg(long)]
    rxq: Option<u32>,
    /// Routing and neighbour tables for bpf_fib_lookup (JSON): bpfemu's model, and for the
    /// kernel a private network namespace built from the same file (its interfaces at the
    /// same ifindexes, addresses, routes, neighbours), where the kernel side runs.
    #[arg(long, value_name = "FILE")]
    fib: Option<PathBuf>,
    /// One JSON document instead of text.
    #[arg(long)]
    json: bool,
    /// Load every program in the kernel and report its verifier verdict, beside bpfemu's.
    #[arg(long, conflicts_with_all = ["pcap", "maps", "prog", "fib"])]
    verifier: bool,
    /// Compare the program even if bpfemu's verifier rejects it (bpfemu's side in checked mode).
    #[arg(long)]
    no_verify: bool,
    #[command(flatten)]
    load: LoadArgs,
}

#[derive(clap::Args)]
struct BenchArgs {
    /// The BPF object.
    obj: PathBuf,
    /// The capture whose packets are run (repeated up to --packets).
    pcap: PathBuf,
    /// The XDP program to run (needed when the object has several): its function name, or
    /// its section, as `ip link set dev DEV xdp obj FILE sec S` names it.
    #[arg(long)]
    prog: Option<String>,
    /// Map contents set on both sides before the run (as for replay).
    #[arg(long, value_name = "FILE")]
    maps: Option<PathBuf>,
    /// Routing tables for bpf_fib_lookup (as for replay and diff).
    #[arg(long, value_name = "FILE")]
    fib: Option<PathBuf>,
    /// How many packets to run.
    #[arg(long, default_value_t = 1_000_000)]
    packets: usize,
    /// One JSON document instead of the table.
    #[arg(long)]
    json: bool,
    /// Benchmark the program even if bpfemu's verifier rejects it.
    #[arg(long)]
    no_verify: bool,
    /// An engine to measure (repeatable; default: interp, jit, jit-trusted, jit-baseline and
    /// jit-baseline-checked).
    #[arg(long, value_enum)]
    engine: Vec<Engine>,
    #[command(flatten)]
    load: LoadArgs,
}

#[derive(clap::Args)]
struct ReplayArgs {
    /// The BPF object.
    obj: PathBuf,
    /// The capture (pcap or pcapng, Ethernet).
    pcap: PathBuf,
    /// The XDP program to run (needed when the object has several): its function name, or
    /// its section, as `ip link set dev DEV xdp obj FILE sec S` names it.
    #[arg(long)]
    prog: Option<String>,
    /// Engine that runs the program (the JIT by default; interp, the reference interpreter,
    /// stays selectable).
    #[arg(long, value_enum, default_value_t = Engine::Jit)]
    engine: Engine,
    /// ingress_ifindex the program sees (BPF_PROG_TEST_RUN's default: 1, the loopback).
    #[arg(long, default_value_t = 1)]
    ifindex: u32,
    /// rx_queue_index the program sees (default: the queue RSS steers the packet to).
    #[arg(long)]
    rxq: Option<u32>,
    /// Virtual CPUs; packets are steered by a Toeplitz RSS hash of their flow.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=256))]
    cpus: u32,
    /// Seed of bpf_get_prandom_u32.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Routing and neighbour tables for bpf_fib_lookup (JSON).
    #[arg(long, value_name = "FILE")]
    fib: Option<PathBuf>,
    /// Initial map contents (JSON: typed by BTF as bpftool shows them, or raw hex pairs).
    #[arg(long, value_name = "FILE")]
    maps: Option<PathBuf>,
    /// Write the map contents after the replay (JSON, as bpftool map dump shows them).
    #[arg(long, value_name = "FILE")]
    dump_maps: Option<PathBuf>,
    /// Write one capture per action (pass, tx, redirect, drop, aborted) into DIR.
    #[arg(long, value_name = "DIR")]
    out_dir: Option<PathBuf>,
    /// One JSON object per packet and a final summary object, instead of the table.
    #[arg(long)]
    json: bool,
    /// Write the expectations of this replay (per-packet results, final maps) to FILE.
    #[arg(long, value_name = "FILE")]
    record: Option<PathBuf>,
    /// Compare with expectations recorded earlier; exit 1 at the first difference.
    #[arg(long, value_name = "FILE", conflicts_with = "record")]
    check: Option<PathBuf>,
    /// Run the program even if bpfemu's verifier rejects it (in checked mode, faults reported).
    #[arg(long)]
    no_verify: bool,
    /// Show the records of ring buffer or perf event array MAP typed by TYPE, a type of the
    /// object's BTF (`events='struct event'`), in --json and --dump-maps (repeatable).
    #[arg(long = "record-type", value_name = "MAP=TYPE", value_parser = bpfemu::record_types::parse_record_type)]
    record_types: Vec<(String, String)>,
    #[command(flatten)]
    load: LoadArgs,
}

impl ReplayArgs {
    fn options(&self) -> bpfemu::replay::ReplayOptions {
        use std::io::IsTerminal;
        bpfemu::replay::ReplayOptions {
            engine: self.engine,
            no_verify: self.no_verify,
            object: self.obj.clone(),
            capture: self.pcap.clone(),
            program: self.prog.clone(),
            ifindex: self.ifindex,
            rxq: self.rxq,
            cpus: self.cpus,
            seed: self.seed,
            fib: self.fib.clone(),
            maps: self.maps.clone(),
            dump_maps: self.dump_maps.clone(),
            out_dir: self.out_dir.clone(),
            json: self.json,
            record: self.record.clone(),
            check: self.check.clone(),
            load: self.load.options(),
            progress: !self.json && std::io::stderr().is_terminal(),
            record_types: self.record_types.clone(),
        }
    }
}

/// How an object is loaded.
#[derive(clap::Args)]
struct LoadArgs {
    /// max_entries for a map declared with 0, `NAME=N` (repeatable).
    #[arg(long = "map-size", value_name = "NAME=N", value_parser = parse_map_size)]
    map_sizes: Vec<(String, u32)>,
    /// The kernel's BTF: CO-RE, ksyms, the verifier's kfunc checks and the kfuncs the
    /// runtime calls follow it (default: /sys/kernel/btf/vmlinux).
    #[arg(long, value_name = "FILE")]
    btf: Option<PathBuf>,
    /// The kernel `btf` stands for, built on first use and shared by every load of the
    /// command, so its BTF is read at most once.
    #[arg(skip)]
    kernel: OnceLock<Kernel>,
}

impl LoadArgs {
    fn options(&self) -> LoadOptions {
        LoadOptions {
            kernel: self
                .kernel
                .get_or_init(|| {
                    self.btf
                        .as_ref()
                        .map_or_else(Kernel::running, Kernel::with_btf_file)
                })
                .clone(),
            map_sizes: self.map_sizes.iter().cloned().collect::<BTreeMap<_, _>>(),
            kconfig: None,
            // bpfemu's commands run XDP programs: a section that names no type (iproute2's
            // `prog`, its tail-call sections) is XDP, as under `ip link set dev DEV xdp obj`.
            untyped_prog_type: Some(bpfemu_isa::uapi::BPF_PROG_TYPE_XDP),
        }
    }
}

fn parse_map_size(arg: &str) -> Result<(String, u32), String> {
    let (name, n) = arg.split_once('=').ok_or("expected NAME=N")?;
    let n = n.parse().map_err(|_| format!("'{n}' is not a number"))?;
    Ok((name.to_string(), n))
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(code) => code,
        // A reader that stops early (`bpfemu replay ... --json | head`) is not an error.
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        // A program refused before it ran: the verifier's placed message as it stands.
        Err(e) if refusal(&e).is_some() => {
            let refused = refusal(&e).expect("matched");
            let text = match refused.kind {
                RefusalKind::Rejected => refused.text.clone(),
                RefusalKind::EngineCannotRun => format!("bpfemu: {}", refused.text),
            };
            let _ = writeln!(std::io::stderr(), "{text}");
            ExitCode::from(refused.exit_code())
        }
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "bpfemu: {}", render_error(&e));
            ExitCode::from(2)
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Conformance {
            dir,
            engine,
            json,
            expect_fail,
            kernel,
        } => {
            if kernel {
                return conformance_kernel(&dir, json);
            }
            if engine.is_trusted() {
                anyhow::bail!(
                    "--engine {engine} runs verified programs only; the suite's programs are \
                     not verified: use --engine jit or jit-baseline-checked"
                );
            }
            let mode = if expect_fail {
                Mode::ExpectFail
            } else {
                Mode::ExpectPass
            };
            conformance(&dir, engine, json, mode)
        }
        Command::Inspect { obj, json, load } => {
            let object = load_object(&obj, &load)?;
            if json {
                let doc = serde_json::to_string_pretty(&inspect::to_json(&object))?;
                writeln!(stdout(), "{doc}")?;
            } else {
                write!(stdout(), "{}", inspect::to_text(&object))?;
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Disasm {
            obj,
            prog,
            xlated,
            load,
        } => {
            let object = load_object(&obj, &load)?;
            let kernel_btf = disasm::calls_kfuncs(&object)
                .then(|| object.kernel.btf().ok())
                .flatten();
            let rendered = if xlated {
                disasm::render_xlated(&object, prog.as_deref(), kernel_btf)
                    .map(|r| r.map_err(|e| anyhow::anyhow!("{}: {e}", obj.display())))
                    .transpose()?
            } else {
                disasm::render(&object, prog.as_deref(), kernel_btf)
            };
            let text = rendered.with_context(|| {
                format!(
                    "{}: no program named '{}'",
                    obj.display(),
                    prog.unwrap_or_default()
                )
            })?;
            write!(stdout(), "{text}")?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Verify {
            obj,
            prog,
            log_level,
            json,
            load,
        } => verify(&obj, prog.as_deref(), log_level, json, &load),
        Command::Replay(args) => Ok(ExitCode::from(bpfemu::replay::replay(&args.options())?)),
        Command::Diff(args) => diff(&args),
        Command::Fuzz(args) => {
            let opts = bpfemu::packet_fuzz::FuzzOptions {
                replay: bpfemu::replay::ReplayOptions {
                    object: args.obj.clone(),
                    program: args.prog.clone(),
                    cpus: 1,
                    seed: args.seed,
                    fib: args.fib.clone(),
                    maps: args.maps.clone(),
                    load: args.load.options(),
                    no_verify: args.no_verify,
                    ..Default::default()
                },
                seeds: args.seeds.clone(),
                time: args.time,
                runs: args.runs,
                out: args.out.clone(),
                never: args.never.clone(),
                allow_ignored: args.allow_ignored.clone(),
                json: args.json,
            };
            Ok(ExitCode::from(bpfemu::packet_fuzz::fuzz(&opts)?))
        }
        Command::Bench(args) => {
            let report = bpfemu::bench::bench(&bpfemu::bench::BenchOptions {
                object: args.obj.clone(),
                capture: args.pcap.clone(),
                program: args.prog.clone(),
                maps: args.maps.clone(),
                fib: args.fib.clone(),
                packets: args.packets,
                load: args.load.options(),
                progress: std::io::IsTerminal::is_terminal(&std::io::stderr()),
                engines: args.engine.clone(),
                no_verify: args.no_verify,
            })?;
            if args.json {
                let doc = serde_json::to_string_pretty(&report.to_json())?;
                writeln!(stdout(), "{doc}")?;
            } else {
                write!(stdout(), "{}", report.to_text())?;
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// `bpfemu diff`: exit 0 when equal, 1 on a mismatch, 2 when the kernel is out of reach.
fn diff(args: &DiffArgs) -> anyhow::Result<ExitCode> {
    use bpfemu::diff;
    // A comparison of runs verifies first, before it needs the kernel, as a rejected program
    // would never reach it; `--verifier` compares verdicts, so it verifies nothing first.
    let prepared = match args.verifier {
        true => None,
        false => {
            let prepared = Prepared::open(&args.obj, args.prog.as_deref(), &args.load.options())?;
            prepared.admit(args.engine, args.no_verify)?;
            Some(std::sync::Arc::new(prepared))
        }
    };
    if let Err(why) = diff::kernel_ready() {
        eprintln!("bpfemu diff: {why}");
        return Ok(ExitCode::from(2));
    }
    let Some(prepared) = prepared else {
        let verdicts = diff::verify_in_kernel(&args.obj, &args.load.options())?;
        if args.json {
            let doc = serde_json::json!({
                "object": args.obj.display().to_string(),
                "programs": verdicts,
            });
            writeln!(stdout(), "{}", serde_json::to_string_pretty(&doc)?)?;
        } else {
            let text = diff::format_verdicts(&args.obj.display().to_string(), &verdicts);
            write!(stdout(), "{text}")?;
        }
        // A program the kernel rejects fails the run, as it would fail the deploy; so does a
        // verdict or message of bpfemu's verifier that differs from the kernel's.
        // Programs bpfemu does not verify (not XDP) are shown, not judged: the kernel may
        // refuse them only for want of what a loader gives them (an attach target).
        let rejected = verdicts
            .iter()
            .any(|v| v.bpfemu.verified && !v.kernel.accepted);
        let disagree = verdicts.iter().any(|v| !v.agree);
        return Ok(ExitCode::from(u8::from(rejected || disagree)));
    };
    let pcap = args.pcap.as_deref().context("a capture is needed")?;
    let opts = diff::DiffOptions {
        object: args.obj.clone(),
        program: args.prog.clone(),
        load: args.load.options(),
        seed: args.seed,
        fib: args.fib.clone(),
        engine: args.engine,
        no_verify: args.no_verify,
        ifindex: args.ifindex,
        rxq: args.rxq,
        progress: std::io::IsTerminal::is_terminal(&std::io::stderr()),
    };
    let json = args.json;
    // A closed pipe stops the printing; the comparison still ends normally, so that the
    // kernel side (namespace, programs, maps) is torn down as usual.
    let mut closed: Option<std::io::Error> = None;
    let report = diff::diff_capture(prepared, &opts, pcap, args.maps.as_deref(), |cmp| {
        if !json && closed.is_none() {
            closed = write!(stdout(), "{}", diff::format_packet(cmp)).err();
        }
    })?;
    if let Some(e) = closed {
        return Err(e.into());
    }
    if json {
        writeln!(stdout(), "{}", serde_json::to_string_pretty(&report)?)?;
    } else {
        // The header goes to stderr so the packet lines stream before the end.
        write!(std::io::stderr(), "{}", diff::format_header(&report))?;
        write!(stdout(), "{}", diff::format_maps_and_summary(&report))?;
    }
    Ok(if report.summary.mismatches == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// `bpfemu verify`: exit 0 when every selected program is accepted, 1 when one is rejected,
/// 2 when one uses something bpfemu's verifier does not check yet (and none is rejected).
fn verify(
    obj: &Path,
    prog: Option<&str>,
    log_level: u32,
    json: bool,
    load: &LoadArgs,
) -> anyhow::Result<ExitCode> {
    use bpfemu::verify;
    let object = load_object(obj, load)?;
    let name = obj.display().to_string();
    let report = verify::verify_object(&object, prog, log_level)
        .with_context(|| format!("{name}: no program named '{}'", prog.unwrap_or_default()))?;
    if report.verdicts.is_empty() && report.not_verified.is_empty() {
        anyhow::bail!("{name}: the object holds no program");
    }
    if json {
        let doc = verify::to_json(&name, &report, log_level > 0);
        writeln!(stdout(), "{}", serde_json::to_string_pretty(&doc)?)?;
    } else {
        write!(stdout(), "{}", verify::to_text(&name, &report))?;
    }
    if report.verdicts.is_empty() {
        // Nothing judged: saying "accepted" would pass a CI job that checked nothing.
        eprintln!(
            "bpfemu: {name}: no XDP program to verify (bpfemu's verifier judges XDP programs)"
        );
        return Ok(ExitCode::from(2));
    }
    // A rejection fails the job; a program bpfemu cannot judge yet is not a pass either.
    let word = |w: &str| report.verdicts.iter().any(|v| v.word() == w);
    Ok(if word("rejected") {
        ExitCode::from(1)
    } else if word("undecided") {
        ExitCode::from(2)
    } else {
        ExitCode::SUCCESS
    })
}

/// Progress through a conformance directory's files.
fn files_progress(dir: &Path, total: usize) -> bpfemu::progress::Progress {
    // The last part of the path: a long prefix would push the bar past the terminal's width.
    let label = dir
        .file_name()
        .map_or_else(|| dir.display().to_string(), |n| n.to_string_lossy().into());
    bpfemu::progress::Progress::new(true, &label, "files", Some(total as u64), 1)
}

/// `bpfemu conformance DIR --kernel`.
fn conformance_kernel(dir: &Path, json: bool) -> anyhow::Result<ExitCode> {
    use bpfemu::conformance::kernel_isa::{self, KernelIsaError};
    let mut progress: Option<bpfemu::progress::Progress> = None;
    let on_file = |done: usize, total: usize| {
        let progress = progress.get_or_insert_with(|| files_progress(dir, total));
        progress.tick(done as u64, || done as u64);
    };
    let reports = match kernel_isa::run_dir_against_kernel_with(dir, on_file) {
        Ok(r) => r,
        Err(e @ KernelIsaError::KernelUnavailable) => {
            eprintln!("bpfemu conformance: {e}");
            return Ok(ExitCode::from(2));
        }
        Err(e) => return Err(e.into()),
    };
    if let Some(progress) = &progress {
        progress.finish(reports.len() as u64);
    }
    if reports.is_empty() {
        anyhow::bail!("{} holds no .data files", dir.display());
    }
    let summary = kernel_isa::summarize(&reports);
    if json {
        let doc = serde_json::json!({ "engine": "kernel", "tests": reports, "summary": summary });
        writeln!(stdout(), "{}", serde_json::to_string_pretty(&doc)?)?;
    } else {
        write!(stdout(), "{}", kernel_isa::format_reports(&reports))?;
    }
    Ok(if summary.differ == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// An error and its causes on one line, each said once: a cause already in the text (an OS
/// error that a library's message quotes) is left out, and so is Rust's "(os error N)".
fn render_error(error: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in error.chain() {
        let part = strip_os_error_code(&cause.to_string());
        if text.contains(&part) {
            continue;
        }
        if !text.is_empty() {
            text += ": ";
        }
        text += &part;
    }
    text
}

fn strip_os_error_code(text: &str) -> String {
    let mut out = text.to_owned();
    while let Some(start) = out.find(" (os error ") {
        let end = out[start..].find(')').map_or(out.len(), |e| start + e + 1);
        out.replace_range(start..end, "");
    }
    out
}

/// Standard output through `write!`, so that a closed pipe is an error that ends the command
/// quietly (see [`main`]) instead of `println!`'s panic.
fn stdout() -> std::io::StdoutLock<'static> {
    std::io::stdout().lock()
}

/// The refusal that ended a command, wherever it sits in the error's chain.
fn refusal(error: &anyhow::Error) -> Option<&Refusal> {
    error
        .chain()
        .find_map(|cause| cause.downcast_ref::<Refusal>())
}

fn is_broken_pipe(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// Loads an object; errors already name the file.
fn load_object(path: &Path, load: &LoadArgs) -> anyhow::Result<Object> {
    let object = bpfemu_loader::load_file(path, &load.options())?;
    bpfemu::replay::print_warnings(path, &object);
    Ok(object)
}

fn conformance(
    dir: &std::path::Path,
    engine: Engine,
    json: bool,
    mode: Mode,
) -> anyhow::Result<ExitCode> {
    let files = bpfemu::conformance::suite::list_dir(dir)
        .with_context(|| format!("cannot read the test directory {}", dir.display()))?;
    let mut progress = files_progress(dir, files.len());
    let mut reports = Vec::with_capacity(files.len());
    for file in &files {
        reports.push(runner::run_file(file, engine));
        progress.tick(reports.len() as u64, || reports.len() as u64);
    }
    progress.finish(reports.len() as u64);
    if reports.is_empty() {
        anyhow::bail!("{} holds no .data files", dir.display());
    }
    let summary = runner::summarize(&reports, mode);
    if json {
        let doc =
            serde_json::json!({ "engine": engine.name(), "tests": reports, "summary": summary });
        writeln!(stdout(), "{}", serde_json::to_string_pretty(&doc)?)?;
    } else {
        let mut out = stdout();
        for line in reports.iter().filter_map(|r| runner::report_line(r, mode)) {
            writeln!(out, "{line}")?;
        }
        writeln!(out, "{summary}")?;
    }
    Ok(if summary.failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
