//! `bpfemu test`: unit tests for XDP programs, without a kernel. A test file (TOML, the
//! format Rust users know from Cargo) holds `[[test]]` tables: the object and program, the
//! maps before, the packets in (hex, a pcap and an index range, or by layers with lengths
//! and checksums filled in) and what must come out (the action, the output packet as bytes
//! or layer fields, the redirect target, map entries, ring buffer and perf records, printk
//! lines). The report reads as `cargo test`'s, or TAP, JSON and JUnit XML for CI; `--bless`
//! writes what came out into the file as the new expectations (for review in the diff);
//! `--kernel` runs every test through the running kernel too (BPF_PROG_TEST_RUN) and fails
//! when the kernel does not meet the expectations either.
//!
//! - [`spec`]: the file read into cases, every key checked;
//! - [`check`]: expectations against results, differences by layer and field;
//! - `kernel`: the kernel's side, through [`crate::diff::Session`];
//! - [`report`]: text, TAP, JSON, JUnit (through [`crate::junit`]);
//! - [`bless`]: the file rewritten with `toml_edit`, everything but the expectations kept.

pub mod bless;
pub mod check;
mod kernel;
pub mod report;
pub mod spec;

use crate::mapio::{MapIo, RawMaps};
use crate::pcap::Packet;
use crate::prepare::{OpenError, Prepared, RefusalKind};
use crate::replay::{ReplayOptions, Replayer, events};
use anyhow::Result;
use bpfemu_jit::Engine;
use bpfemu_loader::LoadOptions;
use check::{Observed, PacketOut};
use spec::Case;
use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What `bpfemu test` was asked to do.
#[derive(Clone, Debug, Default, clap::Args)]
pub struct TestOptions {
    /// Test files (TOML, `[[test]]` tables).
    #[arg(value_name = "FILE", required = true)]
    pub files: Vec<PathBuf>,
    /// Write a JUnit XML report to FILE as well.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Report in TAP (Test Anything Protocol) instead of cargo test's text.
    #[arg(long, conflicts_with = "json")]
    pub tap: bool,
    /// Report as one JSON document.
    #[arg(long)]
    pub json: bool,
    /// Write what came out into the test files as the new expectations.
    #[arg(long)]
    pub bless: bool,
    /// Run every test through the running kernel too (BPF_PROG_TEST_RUN): a test fails when
    /// either bpfemu or the kernel does not meet its expectations.
    #[arg(long, conflicts_with = "bless")]
    pub kernel: bool,
    /// Only the tests whose `FILE::NAME` contains this.
    #[arg(long, value_name = "TEXT")]
    pub filter: Option<String>,
    /// Engine that runs the programs.
    #[arg(long, value_enum, default_value_t = Engine::Jit)]
    pub engine: Engine,
    /// How objects are loaded (from [`crate::load_args::LoadArgs`]).
    #[arg(skip)]
    pub load: LoadOptions,
}

/// How a test ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    Passed,
    /// Its expectations were rewritten from what came out (`--bless`).
    Blessed,
    /// What came out is not what it expects (or its program is rejected, or a run stopped).
    Failed(Vec<String>),
    /// It could not run: bad input (a file, a key, an object that does not load).
    Errored(String),
}

/// One test's result.
#[derive(Clone, Debug)]
pub struct CaseResult {
    pub file: PathBuf,
    pub name: String,
    pub line: usize,
    pub verdict: Verdict,
    pub time: Duration,
    /// What the report adds to the verdict (`kernel skipped: why`).
    pub note: Option<String>,
    /// Each packet in and what bpfemu gave for it (empty when the test did not run), so that
    /// other runners (the Python module's tests) can be held to the same cases.
    pub packets: Vec<RanPacket>,
}

/// One packet of a test as it ran in bpfemu.
#[derive(Clone, Debug)]
pub struct RanPacket {
    pub input: Vec<u8>,
    pub action: String,
    /// The metadata and frame after the run.
    pub output: Vec<u8>,
}

impl CaseResult {
    /// `FILE::NAME`, as the report and `--filter` name it.
    pub fn full_name(&self) -> String {
        format!("{}::{}", self.file.display(), self.name)
    }
}

/// What bpfemu's run of a test gave, and what blessing it needs.
pub struct CaseRun {
    pub observed: Observed,
    pub before: RawMaps,
    pub prepared: Arc<Prepared>,
    /// Bytes of metadata before each packet's frame.
    pub meta_lens: Vec<usize>,
}

/// Runs the test files as asked; the exit code: 0 all passed, 1 a test failed, 2 bad input
/// (or the kernel out of reach with `--kernel`).
pub fn test(opts: &TestOptions) -> Result<u8> {
    if opts.kernel
        && let Err(why) = crate::diff::kernel_ready()
    {
        writeln!(std::io::stderr(), "bpfemu test --kernel: {why}")?;
        return Ok(2);
    }
    let mut prepared = PreparedCache::default();
    let mut results = Vec::new();
    let start = Instant::now();
    for path in &opts.files {
        results.extend(run_file(path, opts, &mut prepared)?);
    }
    let elapsed = start.elapsed();
    if let Some(file) = &opts.junit {
        let xml = crate::junit::render(&report::junit_suites(&results));
        std::fs::write(file, xml).map_err(|e| {
            anyhow::anyhow!(
                "--junit {}: {}",
                file.display(),
                crate::replay::io_reason(&e)
            )
        })?;
    }
    let text = if opts.json {
        serde_json::to_string_pretty(&report::json(&results, elapsed))? + "\n"
    } else if opts.tap {
        report::tap(&results)
    } else {
        report::text(&results, elapsed)
    };
    // A reader that leaves early (`bpfemu test ... | head`) does not turn failures into a
    // pass: the verdict's code stands, as for `verify`.
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => return Err(e.into()),
        _ => {}
    }
    Ok(exit_code(&results))
}

/// 2 when a test could not run, else 1 when one failed, else 0 (and 2 when nothing ran:
/// no test is not a pass).
pub fn exit_code(results: &[CaseResult]) -> u8 {
    if results.is_empty()
        || results
            .iter()
            .any(|r| matches!(r.verdict, Verdict::Errored(_)))
    {
        2
    } else if results
        .iter()
        .any(|r| matches!(r.verdict, Verdict::Failed(_)))
    {
        1
    } else {
        0
    }
}

/// Objects opened and verified once per run, however many tests use them.
#[derive(Default)]
struct PreparedCache(HashMap<(PathBuf, Option<String>), Arc<Prepared>>);

impl PreparedCache {
    fn get(&mut self, case: &Case, load: &LoadOptions) -> Result<Arc<Prepared>, OpenError> {
        let key = (case.object.clone(), case.program.clone());
        if let Some(p) = self.0.get(&key) {
            return Ok(p.clone());
        }
        let p = Arc::new(Prepared::open(&case.object, case.program.as_deref(), load)?);
        self.0.insert(key, p.clone());
        Ok(p)
    }
}

fn run_file(
    path: &std::path::Path,
    opts: &TestOptions,
    cache: &mut PreparedCache,
) -> Result<Vec<CaseResult>> {
    let file = match spec::read(path) {
        Ok(f) => f,
        Err(why) => {
            return Ok(vec![CaseResult {
                file: path.to_owned(),
                name: "(file)".into(),
                line: 1,
                verdict: Verdict::Errored(why),
                time: Duration::ZERO,
                note: None,
                packets: Vec::new(),
            }]);
        }
    };
    let mut results = Vec::new();
    let mut blessings = Vec::new();
    for (index, case) in file.cases.iter().enumerate() {
        let case = match case {
            Ok(c) => c,
            Err(why) => {
                results.push(CaseResult {
                    file: path.to_owned(),
                    name: format!("test{index}"),
                    line: 1,
                    verdict: Verdict::Errored(why.clone()),
                    time: Duration::ZERO,
                    note: None,
                    packets: Vec::new(),
                });
                continue;
            }
        };
        let mut result = CaseResult {
            file: path.to_owned(),
            name: case.name.clone(),
            line: case.line,
            verdict: Verdict::Passed,
            time: Duration::ZERO,
            note: None,
            packets: Vec::new(),
        };
        if opts
            .filter
            .as_ref()
            .is_some_and(|f| !result.full_name().contains(f.as_str()))
        {
            continue;
        }
        let start = Instant::now();
        let at = format!("{}:{}", path.display(), case.line);
        result.verdict = if case.expect.is_empty() && !opts.bless {
            Verdict::Errored(format!(
                "{at}: test `{}` expects nothing: give [test.expect] (--bless fills it in)",
                case.name
            ))
        } else {
            let ran = run_bpfemu(case, opts, cache);
            if let Ok(run) = &ran {
                result.packets = ran_packets(case, run);
            }
            match ran {
                Err(v) => v,
                // A test that holds is left as written; the others get what came out.
                Ok(run) if opts.bless => {
                    let holds = !case.expect.is_empty()
                        && check::check(&case.expect, &run.observed, run.prepared.object())
                            .is_empty();
                    if holds {
                        Verdict::Passed
                    } else {
                        blessings.push((index, bless::expectations(case, &run)));
                        Verdict::Blessed
                    }
                }
                Ok(run) => judge(case, &run, opts, &at),
            }
        };
        result.time = start.elapsed();
        if opts.kernel
            && let Some(why) = &case.kernel_skip
        {
            result.note = Some(format!("kernel skipped: {why}"));
        }
        results.push(result);
    }
    if opts.bless && !blessings.is_empty() {
        bless::rewrite(path, &blessings)?;
    }
    Ok(results)
}

fn ran_packets(case: &Case, run: &CaseRun) -> Vec<RanPacket> {
    case.packets
        .iter()
        .zip(&run.observed.packets)
        .map(|(input, out)| RanPacket {
            input: input.clone(),
            action: out.action.clone(),
            output: [out.meta.as_slice(), out.frame.as_slice()].concat(),
        })
        .collect()
}

/// The test's verdict from bpfemu's run, and the kernel's with `--kernel`.
fn judge(case: &Case, run: &CaseRun, opts: &TestOptions, at: &str) -> Verdict {
    let mut problems = check::check(&case.expect, &run.observed, run.prepared.object());
    if opts.kernel && case.kernel_skip.is_none() {
        match kernel::observe(case, run, opts) {
            Ok(observed) => {
                let kernel_problems = check::check(&case.expect, &observed, run.prepared.object());
                problems.extend(kernel_problems.into_iter().map(|p| format!("kernel: {p}")));
            }
            Err(why) => return Verdict::Errored(format!("{at}: kernel: {why}")),
        }
    }
    match problems.is_empty() {
        true => Verdict::Passed,
        false => Verdict::Failed(problems),
    }
}

/// Runs a test's packets through bpfemu. A program the verifier rejects, or a run that stops,
/// fails the test; an object that cannot be used errs.
fn run_bpfemu(
    case: &Case,
    opts: &TestOptions,
    cache: &mut PreparedCache,
) -> Result<CaseRun, Verdict> {
    let prepared = cache
        .get(case, &opts.load)
        .map_err(|e| Verdict::Errored(e.to_string()))?;
    if let Err(refusal) = prepared.admit(opts.engine, false) {
        return Err(match refusal.kind {
            RefusalKind::Rejected => Verdict::Failed(vec![refusal.text]),
            RefusalKind::EngineCannotRun => Verdict::Errored(refusal.text),
        });
    }
    let replay = ReplayOptions {
        object: case.object.clone(),
        program: case.program.clone(),
        engine: opts.engine,
        ifindex: 1,
        cpus: case.cpus,
        pinned_cpu: Some(0),
        rxq: Some(0),
        fib: case.fib.clone(),
        sockets: case.sockets.clone(),
        load: opts.load.clone(),
        ..ReplayOptions::default()
    };
    let mut replayer = Replayer::with(prepared.clone(), &replay)
        .map_err(|e| Verdict::Errored(format!("{e:#}")))?;
    if let Some(doc) = &case.maps {
        let origin = format!("{}: test `{}`: maps", case.object.display(), case.name);
        MapIo::new(prepared.object(), &mut replayer.runtime)
            .load_json(doc, &origin)
            .map_err(|e| Verdict::Errored(format!("{e:#}")))?;
    }
    let before = replayer
        .raw_maps()
        .map_err(|e| Verdict::Errored(format!("{e:#}")))?;
    let mut observed = Observed {
        packets: Vec::new(),
        maps: RawMaps::new(),
        records: Vec::new(),
        printk: Some(Vec::new()),
    };
    let mut meta_lens = Vec::new();
    for (index, data) in case.packets.iter().enumerate() {
        let packet = Packet {
            index,
            ts_ns: 0,
            data: data.clone(),
            orig_len: data.len() as u32,
        };
        let o = replayer
            .run(&packet)
            .outcome
            .map_err(|e| Verdict::Failed(vec![format!("packet {index}: {e}")]))?;
        let meta = o.meta_len.min(o.data_out.len());
        meta_lens.push(meta);
        observed.packets.push(PacketOut {
            action: o.action.name().into_owned(),
            frame: o.data_out[meta..].to_vec(),
            meta: o.data_out[..meta].to_vec(),
            redirect: Some(
                o.redirect
                    .as_ref()
                    .map_or("none".to_owned(), ToString::to_string),
            ),
        });
        observed
            .records
            .extend(events(&o).iter().map(|e| e.to_text()));
        observed
            .printk
            .get_or_insert_default()
            .extend(o.printk.iter().cloned());
    }
    observed.maps = replayer
        .raw_maps()
        .map_err(|e| Verdict::Errored(format!("{e:#}")))?;
    Ok(CaseRun {
        observed,
        before,
        prepared,
        meta_lens,
    })
}
