//! The `bpfemu` command line.

use anyhow::Context;
use bpfemu::conformance::runner::{self, EngineKind, Mode};
use clap::{Parser, Subcommand, ValueEnum};
use std::path::PathBuf;
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
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum Engine {
    /// The reference interpreter (checked memory).
    Interp,
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("bpfemu: {e:#}");
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
        } => {
            let engine = match engine {
                Engine::Interp => EngineKind::Interp,
            };
            let mode = if expect_fail {
                Mode::ExpectFail
            } else {
                Mode::ExpectPass
            };
            conformance(&dir, engine, json, mode)
        }
    }
}

fn conformance(
    dir: &std::path::Path,
    engine: EngineKind,
    json: bool,
    mode: Mode,
) -> anyhow::Result<ExitCode> {
    let reports = runner::run_dir(dir, engine)
        .with_context(|| format!("cannot read the test directory {}", dir.display()))?;
    if reports.is_empty() {
        anyhow::bail!("{} holds no .data files", dir.display());
    }
    let summary = runner::summarize(&reports, mode);
    if json {
        let doc = serde_json::json!({ "engine": engine, "tests": reports, "summary": summary });
        println!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        for line in reports.iter().filter_map(|r| runner::report_line(r, mode)) {
            println!("{line}");
        }
        println!("{summary}");
    }
    Ok(if summary.failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
