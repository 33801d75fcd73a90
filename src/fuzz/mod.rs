//! `bpfemu fuzz`: coverage-guided packet fuzzing of a user's XDP program.
//!
//! The interpreter records which instructions ran and which way every branch went
//! ([`bpfemu_vm::coverage`]); a mutant that reaches something new joins the corpus, and
//! mutants of the corpus ([`mutate`]) run until the time or run budget is spent. What counts
//! as a finding: `XDP_ABORTED`, a run that stops (a memory fault in checked mode, the
//! instruction budget), and whatever the user forbids with `--never`. A finding is kept when
//! it reaches code that earlier findings of its kind did not, so one bug gives one packet, two
//! paths to the same action give two.
//!
//! Left in `--out`: `findings.pcap` (one packet per finding, in finding order) with
//! `findings.json` (what each found), `corpus.pcap` (the corpus reduced to the entries that
//! together reach all the coverage, usable as a `replay --record` input), and the coverage by
//! source line as `coverage.txt`, `coverage.html` and `coverage.json` ([`report`]).
//!
//! Map contents carry over from packet to packet, as they do in the kernel; a finding is
//! therefore also re-run on freshly loaded maps, and `findings.json` says whether it
//! reproduces from there (`"reproduces_alone"`).

pub mod mutate;
pub mod report;

use crate::pcap::{PcapReader, PcapWriter};
use crate::progress::Progress;
use crate::replay::{ReplayOptions, Replayer, action_name};
use crate::traffic::{self, Rng};
use anyhow::{Context, Result, bail};
use bpfemu_vm::Coverage;
use bpfemu_vm::xdp::{PacketMeta, XdpAction, XdpOutcome};
use mutate::Mutator;
use serde_json::json;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::{Duration, Instant};

/// What `bpfemu fuzz` was asked to do.
#[derive(Clone, Debug)]
pub struct FuzzOptions {
    /// Object, program, maps, FIB, seed and load options, as for a replay.
    pub replay: ReplayOptions,
    /// Packets to start from; without it, generated traffic.
    pub seeds: Option<PathBuf>,
    pub time: Duration,
    pub runs: Option<u64>,
    pub out: PathBuf,
    pub never: Vec<Never>,
    pub json: bool,
}

/// A result the user forbids: an action, optionally only with a property of the packet it
/// leaves (`tx:bad-ipv4-csum`: an `XDP_TX` whose IPv4 header checksum is wrong).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Never {
    pub action: Option<&'static str>,
    pub condition: Option<Condition>,
    text: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Condition {
    BadIpv4Checksum,
    BadL4Checksum,
    /// Leaves fewer than 14 bytes (no Ethernet header).
    Short,
    /// Changed the packet's bytes.
    Rewritten,
}

const ACTIONS: [&str; 5] = ["aborted", "drop", "pass", "tx", "redirect"];
const CONDITIONS: [(&str, Condition); 4] = [
    ("bad-ipv4-csum", Condition::BadIpv4Checksum),
    ("bad-l4-csum", Condition::BadL4Checksum),
    ("short", Condition::Short),
    ("rewritten", Condition::Rewritten),
];

impl FromStr for Never {
    type Err = String;

    fn from_str(text: &str) -> Result<Never, String> {
        let (action, condition) = match text.split_once(':') {
            Some((a, c)) => (a, Some(c)),
            None => (text, None),
        };
        let action = match action {
            "any" => None,
            a => Some(*ACTIONS.iter().find(|&&n| n == a).ok_or_else(|| {
                format!("unknown action `{a}`: one of any, {}", ACTIONS.join(", "))
            })?),
        };
        let condition = condition
            .map(|c| {
                CONDITIONS
                    .iter()
                    .find(|(n, _)| *n == c)
                    .map(|(_, cond)| *cond)
                    .ok_or_else(|| {
                        let names: Vec<_> = CONDITIONS.iter().map(|(n, _)| *n).collect();
                        format!("unknown condition `{c}`: one of {}", names.join(", "))
                    })
            })
            .transpose()?;
        if action.is_none() && condition.is_none() {
            return Err("`any` needs a condition, e.g. any:short".into());
        }
        Ok(Never {
            action,
            condition,
            text: text.to_owned(),
        })
    }
}

impl Never {
    fn holds(&self, input: &[u8], outcome: &XdpOutcome) -> bool {
        if self
            .action
            .is_some_and(|a| a != action_name(outcome.action))
        {
            return false;
        }
        let out = &outcome.data_out[outcome.meta_len.min(outcome.data_out.len())..];
        match self.condition {
            None => true,
            Some(Condition::BadIpv4Checksum) => mutate::bad_ipv4_checksum(out),
            Some(Condition::BadL4Checksum) => mutate::bad_l4_checksum(out),
            Some(Condition::Short) => out.len() < mutate::MIN_LEN,
            Some(Condition::Rewritten) => out != input,
        }
    }
}

/// A packet that found something.
#[derive(Clone, Debug)]
pub struct Finding {
    /// `aborted`, `fault` or `never <spec>`.
    pub kind: String,
    pub detail: String,
    pub packet: Vec<u8>,
    /// The execution that found it (0-based).
    pub exec: u64,
    pub reproduces_alone: bool,
}

/// What a fuzzing run did.
#[derive(Clone, Debug, Default)]
pub struct FuzzSummary {
    pub execs: u64,
    pub elapsed: Duration,
    pub corpus: usize,
    pub coverage_bits: usize,
    pub findings: Vec<Finding>,
}

/// The largest corpus kept in memory; beyond it, new coverage replaces a random entry.
const MAX_CORPUS: usize = 4096;

/// The program under test, its coverage recorded run by run.
struct Runner {
    replayer: Replayer,
    execs: u64,
}

impl Runner {
    fn new(opts: &FuzzOptions) -> Result<Runner> {
        let mut replayer = Replayer::new(&opts.replay)?;
        replayer.runtime.record_coverage(true);
        Ok(Runner { replayer, execs: 0 })
    }

    /// Empty coverage of the runner's programs.
    fn empty_coverage(&mut self) -> Coverage {
        let mut cov = self.coverage().clone();
        cov.clear();
        cov
    }

    fn coverage(&mut self) -> &mut Coverage {
        self.replayer
            .runtime
            .coverage_mut()
            .expect("coverage is recorded from Runner::new")
    }

    /// Runs one packet: its outcome, and what it reached.
    fn run(&mut self, packet: &[u8]) -> (Result<XdpOutcome, String>, Coverage) {
        self.coverage().clear();
        let meta = PacketMeta {
            // A clock that advances a microsecond a packet: deterministic, and monotonic.
            ts_ns: 1_000_000_000 + self.execs * 1000,
            cpu: 0,
            ingress_ifindex: 0,
            rx_queue_index: 0,
        };
        self.execs += 1;
        let program = self.replayer.program;
        let outcome = self
            .replayer
            .runtime
            .run(program, packet, &meta)
            .map_err(|e| e.to_string());
        (outcome, self.coverage().clone())
    }
}

/// What a run found, if anything: its kind and detail.
fn classify(
    never: &[Never],
    packet: &[u8],
    outcome: &Result<XdpOutcome, String>,
) -> Option<(String, String)> {
    match outcome {
        Err(e) => Some(("fault".to_owned(), e.clone())),
        Ok(o) if o.action == XdpAction::Aborted => Some((
            "aborted".to_owned(),
            format!("XDP_ABORTED (r0 = {})", o.retval),
        )),
        Ok(o) => never
            .iter()
            .find(|n| n.holds(packet, o))
            .map(|n| (format!("never {}", n.text), format!("r0 = {}", o.retval))),
    }
}

struct Fuzzer {
    runner: Runner,
    total: Coverage,
    /// Coverage of the findings of each kind, so that a kind's finding is kept only when it
    /// reaches something new for that kind.
    by_kind: BTreeMap<String, Coverage>,
    corpus: Vec<Vec<u8>>,
    findings: Vec<Finding>,
    never: Vec<Never>,
}

impl Fuzzer {
    /// Runs one input; returns how many bits it added to the total, and keeps a finding.
    fn execute(&mut self, packet: &[u8]) -> usize {
        let exec = self.runner.execs;
        let (outcome, run) = self.runner.run(packet);
        let added = self.total.merge_new(&run);
        if let Some((kind, detail)) = classify(&self.never, packet, &outcome) {
            let empty = self.runner.empty_coverage();
            let seen = self.by_kind.entry(kind.clone()).or_insert(empty);
            if seen.merge_new(&run) > 0 {
                self.findings.push(Finding {
                    kind,
                    detail,
                    packet: packet.to_vec(),
                    exec,
                    reproduces_alone: false,
                });
            }
        }
        added
    }
}

/// Runs the fuzzer as the command line asked; returns the exit code (1 when it found
/// something).
pub fn fuzz(opts: &FuzzOptions) -> Result<u8> {
    prepare_out_dir(&opts.out)?;
    let seeds = initial_packets(opts)?;
    let mut runner = Runner::new(opts)?;
    crate::replay::print_warnings(&opts.replay.object, &runner.replayer.object);
    let total = runner.empty_coverage();
    let mut fuzzer = Fuzzer {
        runner,
        total,
        by_kind: BTreeMap::new(),
        corpus: Vec::new(),
        findings: Vec::new(),
        never: opts.never.clone(),
    };
    let start = Instant::now();
    for seed in &seeds {
        if fuzzer.execute(seed) > 0 || fuzzer.corpus.is_empty() {
            fuzzer.corpus.push(seed.clone());
        }
    }
    let mut mutator = Mutator::new(opts.replay.seed);
    // The share is of --runs when given, else of the --time budget.
    let (whole, unit_ms) = match opts.runs {
        Some(runs) => (runs, false),
        None => (opts.time.as_millis().min(u128::from(u64::MAX)) as u64, true),
    };
    let mut progress = Progress::new(!opts.json, "fuzz", "runs", Some(whole), 64);
    loop {
        let execs = fuzzer.runner.execs;
        if opts.runs.is_some_and(|runs| execs >= runs) {
            break;
        }
        // The clock is read every 64 runs: cheap, and a --runs budget stays deterministic.
        if execs.is_multiple_of(64) && start.elapsed() >= opts.time {
            break;
        }
        let rng = mutator.rng();
        let parent = rng.below(fuzzer.corpus.len() as u64) as usize;
        let other = rng.below(fuzzer.corpus.len() as u64) as usize;
        let mutant = mutator.mutate(&fuzzer.corpus[parent], &fuzzer.corpus[other]);
        if fuzzer.execute(&mutant) > 0 {
            if fuzzer.corpus.len() < MAX_CORPUS {
                fuzzer.corpus.push(mutant);
            } else {
                let slot = mutator.rng().below(MAX_CORPUS as u64) as usize;
                fuzzer.corpus[slot] = mutant;
            }
        }
        let position = || {
            if unit_ms {
                start.elapsed().as_millis() as u64
            } else {
                execs
            }
        };
        progress.tick_noting(execs, position, || {
            format!(
                "coverage {} bits, corpus {}, findings {}",
                fuzzer.total.count(),
                fuzzer.corpus.len(),
                fuzzer.findings.len()
            )
        });
    }
    progress.finish(fuzzer.runner.execs);
    let elapsed = start.elapsed();
    let execs = fuzzer.runner.execs;
    let mut findings = std::mem::take(&mut fuzzer.findings);
    check_reproduction(opts, &mut findings)?;
    let corpus = minimise(&mut fuzzer.runner, std::mem::take(&mut fuzzer.corpus));
    let summary = FuzzSummary {
        execs,
        elapsed,
        corpus: corpus.len(),
        coverage_bits: fuzzer.total.count(),
        findings,
    };
    write_outputs(opts, &mut fuzzer.runner, &fuzzer.total, &corpus, &summary)?;
    Ok(u8::from(!summary.findings.is_empty()))
}

/// `--out` must be a directory (made when missing); the files a previous run left there are
/// replaced, and no other file is touched.
fn prepare_out_dir(out: &Path) -> Result<()> {
    if out.exists() && !out.is_dir() {
        bail!("{}: --out must be a directory", out.display());
    }
    std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))
}

/// The packets to start from: the seed capture's (each cut to the mutants' limits), or
/// generated traffic.
fn initial_packets(opts: &FuzzOptions) -> Result<Vec<Vec<u8>>> {
    let mut packets = Vec::new();
    if let Some(path) = &opts.seeds {
        for packet in PcapReader::open(path)? {
            let mut data = packet?.data;
            if data.len() < mutate::MIN_LEN {
                continue;
            }
            data.truncate(mutate::MAX_LEN);
            packets.push(data);
            if packets.len() == MAX_CORPUS {
                break;
            }
        }
        if packets.is_empty() {
            bail!(
                "{}: no packet of at least {} bytes to start from",
                path.display(),
                mutate::MIN_LEN
            );
        }
    } else {
        let mut rng = Rng::new(opts.replay.seed);
        packets.extend(traffic::normal(&mut rng, 24));
        packets.extend(traffic::vlans(&mut rng, 4));
        packets.retain(|p| (mutate::MIN_LEN..=mutate::MAX_LEN).contains(&p.len()));
    }
    Ok(packets)
}

/// Re-runs every finding's packet alone, on freshly loaded maps.
fn check_reproduction(opts: &FuzzOptions, findings: &mut [Finding]) -> Result<()> {
    for finding in findings {
        let mut fresh = Runner::new(opts)?;
        fresh.execs = finding.exec;
        let (outcome, _) = fresh.run(&finding.packet);
        finding.reproduces_alone = classify(&opts.never, &finding.packet, &outcome)
            .is_some_and(|(kind, _)| kind == finding.kind);
    }
    Ok(())
}

/// The corpus reduced greedily: entries by how much they reach (shorter first among equals),
/// each kept when it adds to what the kept ones reach.
fn minimise(runner: &mut Runner, corpus: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    let mut runs: Vec<(usize, Coverage, Vec<u8>)> = corpus
        .into_iter()
        .map(|packet| {
            let (_, bits) = runner.run(&packet);
            (bits.count(), bits, packet)
        })
        .collect();
    runs.sort_by(|a, b| b.0.cmp(&a.0).then(a.2.len().cmp(&b.2.len())));
    let mut kept = runner.empty_coverage();
    runs.into_iter()
        .filter_map(|(_, bits, packet)| (kept.merge_new(&bits) > 0).then_some(packet))
        .collect()
}

fn write_pcap(path: &Path, packets: impl IntoIterator<Item = Vec<u8>>) -> Result<()> {
    let mut writer = PcapWriter::create(path, true)
        .with_context(|| format!("cannot create {}", path.display()))?;
    for (i, packet) in packets.into_iter().enumerate() {
        writer
            .write(1_000_000_000 + i as u64 * 1000, &packet)
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    writer
        .finish()
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}

fn write_text(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))
}

fn write_outputs(
    opts: &FuzzOptions,
    runner: &mut Runner,
    total: &Coverage,
    corpus: &[Vec<u8>],
    summary: &FuzzSummary,
) -> Result<()> {
    let out = &opts.out;
    write_pcap(
        &out.join("findings.pcap"),
        summary.findings.iter().map(|f| f.packet.clone()),
    )?;
    let findings_json: Vec<_> = summary
        .findings
        .iter()
        .enumerate()
        .map(|(i, f)| {
            json!({
                "packet": i,
                "kind": f.kind,
                "detail": f.detail,
                "exec": f.exec,
                "reproduces_alone": f.reproduces_alone,
                "data": crate::replay::hex(&f.packet),
            })
        })
        .collect();
    write_text(
        &out.join("findings.json"),
        &(serde_json::to_string_pretty(&findings_json)? + "\n"),
    )?;
    write_pcap(&out.join("corpus.pcap"), corpus.iter().cloned())?;

    // Coverage of every program that ran: the one under test and its tail-call targets.
    let object = &runner.replayer.object;
    let reports: Vec<report::SourceCoverage> = object
        .programs
        .iter()
        .enumerate()
        .filter(|(i, _)| *i == runner.replayer.program || total.program(*i).iter().any(|b| *b != 0))
        .map(|(i, spec)| report::by_line(spec, total.program(i)))
        .collect();
    let text: String = reports.iter().map(report::SourceCoverage::text).collect();
    write_text(&out.join("coverage.txt"), &text)?;
    let html: String = reports.iter().map(report::SourceCoverage::html).collect();
    write_text(&out.join("coverage.html"), &html)?;
    let coverage_json: Vec<_> = reports
        .iter()
        .map(report::SourceCoverage::to_json)
        .collect();
    write_text(
        &out.join("coverage.json"),
        &(serde_json::to_string_pretty(&coverage_json)? + "\n"),
    )?;

    let stdout = std::io::stdout();
    let mut w = stdout.lock();
    let rate = summary.execs as f64 / summary.elapsed.as_secs_f64().max(1e-9);
    if opts.json {
        let doc = json!({
            "execs": summary.execs,
            "elapsed_ms": summary.elapsed.as_secs_f64() * 1e3,
            "execs_per_sec": rate,
            "coverage_bits": summary.coverage_bits,
            "corpus": summary.corpus,
            "findings": findings_json,
            "coverage": coverage_json,
            "out": out.display().to_string(),
        });
        writeln!(w, "{doc}")?;
    } else {
        writeln!(
            w,
            "{} execs in {:.1} s ({rate:.0}/s), coverage {} bits, corpus {} packets",
            summary.execs,
            summary.elapsed.as_secs_f64(),
            summary.coverage_bits,
            summary.corpus
        )?;
        for report in &reports {
            writeln!(w, "{}", report.summary())?;
        }
        for (i, f) in summary.findings.iter().enumerate() {
            writeln!(
                w,
                "finding {i}: {}: {} ({} bytes{})",
                f.kind,
                f.detail,
                f.packet.len(),
                if f.reproduces_alone {
                    ""
                } else {
                    "; needs the map state of the run"
                }
            )?;
        }
        writeln!(
            w,
            "{} finding(s); packets in {}, corpus in {}, coverage in {}",
            summary.findings.len(),
            out.join("findings.pcap").display(),
            out.join("corpus.pcap").display(),
            out.join("coverage.{txt,html,json}").display()
        )?;
    }
    w.flush()?;
    Ok(())
}
