//! The `bpfemu` command line.

mod inspect;

use anyhow::Context;
use bpfemu::conformance::runner::{self, Mode};
use bpfemu::disasm;
use bpfemu::errors::render_error;
use bpfemu::load_args::LoadArgs;
use bpfemu::prepare::{Prepared, Refusal, RefusalKind};
use bpfemu_isa::KernelVersion;
use bpfemu_jit::Engine;
use bpfemu_loader::Object;
use clap::{Parser, Subcommand};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

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
    /// Verify every program of the objects (directories are searched for BPF objects) as the
    /// kernel's verifier would: verdict, the kernel's message at its source line, the log,
    /// veristat's statistics (a table, `--csv`, `--json`, SARIF, JUnit), comparisons with a
    /// baseline CSV. Exit 0 when all are accepted, 1 when one is rejected or a `--fail-on`
    /// threshold is crossed, 2 when an object cannot be read or a program uses what bpfemu does
    /// not check yet (undecided).
    Verify(Box<bpfemu::verify::command::VerifyArgs>),
    /// Run every packet of a capture through an XDP program, with the kernel's semantics.
    Replay(Box<ReplayArgs>),
    /// Run one packet through an XDP program (as `bpftool prog run`): the verdict, the packet
    /// out (hex and as tcpdump prints it), the redirect target, map changes, records, printk.
    Run(Box<RunArgs>),
    /// Run test files (TOML: packets in, what must come out) and report as `cargo test` does;
    /// exit 1 when a test fails, 2 on bad input.
    Test(Box<TestArgs>),
    /// Measure bpfemu's speed over a capture against the kernel's on the same packets.
    Bench(Box<BenchArgs>),
    /// Compare bpfemu with the running kernel: every packet of a capture through both
    /// (BPF_PROG_TEST_RUN), then every map; or, with --verifier, the kernel's verdicts.
    Diff(Box<DiffArgs>),
    /// The running kernel's verdict on every program of an object, as `diff --verifier`'s
    /// kernel side: one JSON line per program (`program`, `section`, `kernel`). A job for a VM
    /// booted with another kernel (bpfemu_vmkernel), so hidden.
    #[command(hide = true)]
    KernelVerdicts {
        obj: PathBuf,
        #[command(flatten)]
        load: LoadArgs,
    },
    /// The kernels bpfemu answers as (`--kernel`) and whether each one's BTF is at hand;
    /// `fetch` gets the BTF of those named (default: all) by booting Debian's image of each
    /// under QEMU once (needs apt with the suites of scripts/kernel_apt_sources.sh, and
    /// qemu-system-x86).
    Kernels {
        #[command(subcommand)]
        action: Option<KernelsAction>,
    },
    /// Coverage-guided packet fuzzing of an XDP program: mutated packets until the time or
    /// run budget is spent; findings (XDP_ABORTED, faults, helper errors left unexamined,
    /// --never) and a minimised corpus as captures, coverage by source line. Exit 1 when
    /// something was found.
    Fuzz(Box<FuzzArgs>),
}

#[derive(Subcommand)]
enum KernelsAction {
    /// Fetch each kernel's BTF into the kernel cache ($BPFEMU_KERNELS, else
    /// ~/.cache/bpfemu/kernels).
    Fetch {
        /// The kernels (default: every profile).
        #[arg(value_delimiter = ',')]
        versions: Vec<KernelVersion>,
        /// Seconds one boot may take.
        #[arg(long, default_value_t = 300)]
        timeout: u64,
    },
}

/// `bpfemu replay`: the library's options and how the object is loaded.
#[derive(clap::Args)]
struct ReplayArgs {
    #[command(flatten)]
    opts: bpfemu::replay::ReplayOptions,
    #[command(flatten)]
    load: LoadArgs,
}

/// `bpfemu run`.
#[derive(clap::Args)]
struct RunArgs {
    #[command(flatten)]
    opts: bpfemu::run::RunOptions,
    #[command(flatten)]
    load: LoadArgs,
}

/// `bpfemu test`.
#[derive(clap::Args)]
struct TestArgs {
    #[command(flatten)]
    opts: bpfemu::testfile::TestOptions,
    #[command(flatten)]
    load: bpfemu::load_args::ObjectArgs,
}

/// `bpfemu fuzz`.
#[derive(clap::Args)]
struct FuzzArgs {
    #[command(flatten)]
    opts: bpfemu::packet_fuzz::FuzzOptions,
    #[command(flatten)]
    load: LoadArgs,
}

/// `bpfemu bench`: the library's options, and how the report is printed.
#[derive(clap::Args)]
struct BenchArgs {
    #[command(flatten)]
    opts: bpfemu::bench::BenchOptions,
    /// One JSON document instead of the table.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    load: LoadArgs,
}

/// `bpfemu diff`: a capture compared (the library's options), or the verdicts.
#[derive(clap::Args)]
struct DiffArgs {
    #[command(flatten)]
    opts: bpfemu::diff::DiffOptions,
    /// The capture (pcap or pcapng, Ethernet).
    #[arg(required_unless_present = "verifier")]
    pcap: Option<PathBuf>,
    /// Initial map contents for both sides (JSON, as for replay --maps).
    #[arg(long, value_name = "FILE")]
    maps: Option<PathBuf>,
    /// One JSON document instead of text.
    #[arg(long)]
    json: bool,
    /// Load every program in the kernel and report its verifier verdict, beside bpfemu's.
    #[arg(long, conflicts_with_all = ["pcap", "maps", "program", "fib", "sockets"])]
    verifier: bool,
    /// With --verifier: the judge is this kernel image (a vmlinuz), booted under QEMU (TCG)
    /// instead of the running kernel; bpfemu answers as the version its boot header names
    /// (or the one --kernel names), with the booted kernel's BTF unless --btf gives one.
    #[arg(long, value_name = "VMLINUZ", requires = "verifier")]
    kernel_image: Option<PathBuf>,
    #[command(flatten)]
    load: LoadArgs,
}

/// `bpfemu kernel-verdicts`: exit 0 when every line was written, 2 when the kernel is out of
/// reach or the object does not load.
fn kernel_verdicts(obj: &Path, load: &LoadArgs) -> anyhow::Result<ExitCode> {
    if let Err(why) = bpfemu::diff::kernel_ready() {
        eprintln!("bpfemu kernel-verdicts: {why}");
        return Ok(ExitCode::from(2));
    }
    let verdicts = bpfemu::diff::kernel_verdicts(obj, &load.options())?;
    let mut out = stdout();
    for verdict in verdicts {
        writeln!(out, "{}", serde_json::to_string(&verdict)?)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Whether progress goes to standard error: only a terminal shows it.
fn stderr_is_terminal() -> bool {
    std::io::IsTerminal::is_terminal(&std::io::stderr())
}

fn main() -> ExitCode {
    // Booted as a VM's /init (bpfemu_vmkernel::Vm): run the initramfs's jobs, power off.
    if bpfemu_vmkernel::guest::is_init() {
        bpfemu_vmkernel::guest::run_as_init();
    }
    match run(Cli::parse()) {
        Ok(code) => code,
        // A reader that left early (`bpfemu replay ... --json | head -1`): the command stopped
        // before its end, so it cannot claim success; quietly, with the code a shell gives a
        // process SIGPIPE ended, as tcpdump's would be. (verify and diff, whose verdict is
        // known before their output is, keep the verdict's code instead.)
        Err(e) if is_broken_pipe(&e) => ExitCode::from(CLOSED_PIPE_EXIT),
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
            let object = load_object(&obj, &load, "inspect")?;
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
            let object = load_object(&obj, &load, "disasm")?;
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
        Command::Verify(args) => {
            let ending = bpfemu::verify::command::run(&args)?;
            verdict_despite_closed_pipe(ending.written, ending.code)
        }
        Command::Replay(args) => {
            let ReplayArgs { mut opts, load } = *args;
            opts.load = one_kernel(&load, "replay")?;
            opts.progress = !opts.json && stderr_is_terminal();
            Ok(ExitCode::from(bpfemu::replay::replay(&opts)?))
        }
        Command::Diff(args) => diff(*args),
        Command::KernelVerdicts { obj, load } => kernel_verdicts(&obj, &load),
        Command::Kernels { action: None } => {
            write!(stdout(), "{}", bpfemu::kernels::list())?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Kernels {
            action: Some(KernelsAction::Fetch { versions, timeout }),
        } => {
            let versions = match versions.is_empty() {
                true => KernelVersion::ALL.to_vec(),
                false => versions,
            };
            let done = bpfemu::kernels::fetch(&versions, std::time::Duration::from_secs(timeout))?;
            write!(stdout(), "{done}")?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Run(args) => {
            let RunArgs { mut opts, load } = *args;
            opts.load = one_kernel(&load, "run")?;
            Ok(ExitCode::from(bpfemu::run::run(&opts)?))
        }
        Command::Test(args) => {
            let TestArgs { mut opts, load } = *args;
            opts.load = LoadArgs::from(load).options();
            Ok(ExitCode::from(bpfemu::testfile::test(&opts)?))
        }
        Command::Fuzz(args) => {
            let FuzzArgs { mut opts, load } = *args;
            opts.load = one_kernel(&load, "fuzz")?;
            Ok(ExitCode::from(bpfemu::packet_fuzz::fuzz(&opts)?))
        }
        Command::Bench(args) => {
            let BenchArgs {
                mut opts,
                json,
                load,
            } = *args;
            opts.load = one_kernel(&load, "bench")?;
            opts.progress = stderr_is_terminal();
            let report = bpfemu::bench::bench(&opts)?;
            if json {
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
fn diff(args: DiffArgs) -> anyhow::Result<ExitCode> {
    use bpfemu::diff;
    let DiffArgs {
        mut opts,
        pcap,
        maps,
        json,
        verifier,
        kernel_image,
        load,
    } = args;
    if let Some(image) = kernel_image {
        return diff_kernel_image(&image, &opts.object, &load, json);
    }
    opts.load = one_kernel(&load, "diff")?;
    let kernel = &opts.load.kernel;
    if KernelVersion::running() != Some(kernel.version()) {
        anyhow::bail!(
            "--kernel {}: `bpfemu diff` compares with the running kernel, which is not {}",
            kernel.version(),
            kernel.version()
        );
    }
    opts.progress = stderr_is_terminal();
    // A comparison of runs verifies first, before it needs the kernel, as a rejected program
    // would never reach it; `--verifier` compares verdicts, so it verifies nothing first.
    let prepared = match verifier {
        true => None,
        false => {
            let prepared = Prepared::open(&opts.object, opts.program.as_deref(), &opts.load)?;
            prepared.admit(opts.engine, opts.no_verify)?;
            Some(std::sync::Arc::new(prepared))
        }
    };
    if let Err(why) = diff::kernel_ready() {
        eprintln!("bpfemu diff: {why}");
        return Ok(ExitCode::from(2));
    }
    let Some(prepared) = prepared else {
        let verdicts = diff::verify_in_kernel(&opts.object, &opts.load)?;
        let written = (|| -> anyhow::Result<()> {
            if json {
                let doc = serde_json::json!({
                    "object": opts.object.display().to_string(),
                    "programs": verdicts,
                });
                writeln!(stdout(), "{}", serde_json::to_string_pretty(&doc)?)?;
            } else {
                let text = diff::format_verdicts(&opts.object.display().to_string(), &verdicts);
                write!(stdout(), "{text}")?;
            }
            Ok(())
        })();
        return verdict_despite_closed_pipe(written, verdicts_exit(&verdicts));
    };
    let pcap = pcap.as_deref().context("a capture is needed")?;
    // A closed pipe stops the printing; the comparison still ends normally, so that the
    // kernel side (namespace, programs, maps) is torn down as usual.
    let mut closed: Option<std::io::Error> = None;
    let report = diff::diff_capture(prepared, &opts, pcap, maps.as_deref(), |cmp| {
        if !json && closed.is_none() {
            closed = write!(stdout(), "{}", diff::format_packet(cmp)).err();
        }
    })?;
    let verdict = u8::from(report.summary.mismatches != 0);
    let written = match closed {
        Some(e) => Err(e.into()),
        None if json => {
            writeln!(stdout(), "{}", serde_json::to_string_pretty(&report)?).map_err(Into::into)
        }
        None => {
            // The header goes to stderr so the packet lines stream before the end.
            let _ = write!(std::io::stderr(), "{}", diff::format_header(&report));
            write!(stdout(), "{}", diff::format_maps_and_summary(&report)).map_err(Into::into)
        }
    };
    verdict_despite_closed_pipe(written, verdict)
}

/// `diff --verifier`'s verdict: 1 when a program the kernel judges is rejected there (it
/// would fail the deploy) or when bpfemu's verdict or message differs; else 0. Programs
/// bpfemu does not verify (not XDP) are shown, not judged: the kernel may refuse them only
/// for want of what a loader gives them (an attach target).
fn verdicts_exit(verdicts: &[bpfemu::diff::ProgramVerdict]) -> u8 {
    let rejected = verdicts
        .iter()
        .any(|v| v.bpfemu.verified && !v.kernel.accepted);
    let disagree = verdicts.iter().any(|v| !v.agree);
    u8::from(rejected || disagree)
}

/// `diff --verifier --kernel-image VMLINUZ`: exit codes as against the running kernel; 2 when
/// the image is not a kernel, names no profile, or does not boot.
fn diff_kernel_image(
    image: &Path,
    object: &Path,
    load: &LoadArgs,
    json: bool,
) -> anyhow::Result<ExitCode> {
    use bpfemu::diff;
    let compared = diff::compare_with_image(
        image,
        &load.kernel,
        object,
        &load.object.map_sizes,
        load.object.btf.as_deref(),
    );
    let compared = match compared {
        Ok(compared) => compared,
        Err(why) => {
            eprintln!("bpfemu diff: {why}");
            return Ok(ExitCode::from(2));
        }
    };
    let written = (|| -> anyhow::Result<()> {
        if json {
            let doc = serde_json::json!({
                "object": object.display().to_string(),
                "kernel_image": image.display().to_string(),
                "release": compared.release,
                "answered_as": compared.answered_as,
                "programs": compared.programs,
            });
            writeln!(stdout(), "{}", serde_json::to_string_pretty(&doc)?)?;
        } else {
            writeln!(
                stdout(),
                "kernel: {} booted from {} (bpfemu answers as {})",
                compared.release,
                image.display(),
                compared.answered_as
            )?;
            let text = diff::format_verdicts(&object.display().to_string(), &compared.programs);
            write!(stdout(), "{text}")?;
        }
        Ok(())
    })();
    verdict_despite_closed_pipe(written, verdicts_exit(&compared.programs))
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

/// 128 + SIGPIPE: what a shell reports for a process a closed pipe killed.
const CLOSED_PIPE_EXIT: u8 = 141;

/// The verdict's code when the output that reports it could not all be written because its
/// reader left: the verdict stands (a rejection still fails the pipeline), the rest of the
/// output was not wanted. Any other write error is an error.
fn verdict_despite_closed_pipe(
    written: anyhow::Result<()>,
    verdict: u8,
) -> anyhow::Result<ExitCode> {
    match written {
        Err(e) if !is_broken_pipe(&e) => Err(e),
        _ => Ok(ExitCode::from(verdict)),
    }
}

fn is_broken_pipe(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// The load options of a command that answers for one kernel.
fn one_kernel(load: &LoadArgs, command: &str) -> anyhow::Result<bpfemu_loader::LoadOptions> {
    load.one_kernel(command)?;
    Ok(load.options())
}

/// Loads an object; errors already name the file.
fn load_object(path: &Path, load: &LoadArgs, command: &str) -> anyhow::Result<Object> {
    let object = bpfemu_loader::load_file(path, &one_kernel(load, command)?)?;
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
