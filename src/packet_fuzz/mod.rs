//! `bpfemu fuzz`: coverage-guided packet fuzzing of a user's XDP program.
//!
//! The interpreter records which instructions ran and which way every branch went
//! ([`bpfemu_vm::coverage`]); a mutant that reaches something new joins the corpus, and
//! mutants of the corpus ([`mutate`]) run until the time or run budget is spent. What counts
//! as a finding: `XDP_ABORTED`, a run that stops (a memory fault in checked mode, the
//! instruction budget), a helper error the program never examined (a `-errno` it overwrote or
//! dropped unread, followed by the interpreter's watch: [`bpfemu_vm::coverage`]; exceptions by
//! `--allow-ignored`), and whatever the user forbids with `--never`. A finding is kept when it
//! reaches code that earlier findings of its kind did not, so one bug gives one packet, two
//! paths to the same action give two; an ignored error is kept once per call site and errno.
//!
//! Left in `--out` (by default a fresh `bpfemu-fuzz-*` directory under the system's temp dir,
//! named on standard error when the run starts, so that no run writes into the source tree or
//! over another run's results): `findings.pcap` (one packet per finding, in finding order) with
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
use crate::replay::{ReplayOptions, Replayer};
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
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// What `bpfemu fuzz` was asked to do: the command line's flags as parsed.
#[derive(Clone, Debug, clap::Args)]
pub struct FuzzOptions {
    /// The BPF object.
    #[arg(value_name = "OBJ")]
    pub object: PathBuf,
    /// The XDP program to fuzz (needed when the object has several): its function name, or
    /// its section.
    #[arg(long = "prog")]
    pub program: Option<String>,
    /// Initial map contents (JSON, as for replay).
    #[arg(long, value_name = "FILE")]
    pub maps: Option<PathBuf>,
    /// Routing and neighbour tables for bpf_fib_lookup (JSON, as for replay).
    #[arg(long, value_name = "FILE")]
    pub fib: Option<PathBuf>,
    /// The sockets bpf_sk_lookup_tcp/udp find (JSON, as for replay).
    #[arg(long, value_name = "FILE")]
    pub sockets: Option<PathBuf>,
    /// Packets to start from (pcap or pcapng); default: generated traffic.
    #[arg(long, value_name = "PCAP")]
    pub seeds: Option<PathBuf>,
    /// How long to fuzz: `90s`, `5m`, `1h`, or seconds.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    pub time: Duration,
    /// Stop after this many runs (deterministic for a --seed, unlike --time).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub runs: Option<u64>,
    /// Seed of the mutator, the generated traffic and bpf_get_prandom_u32.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Forbidden results, each a finding: ACTION (aborted, drop, pass, tx, redirect, any) with
    /// an optional :CONDITION (bad-ipv4-csum, bad-l4-csum, short, rewritten) of the packet
    /// the program leaves, e.g. `--never tx:bad-ipv4-csum`. Repeatable.
    #[arg(long, value_name = "ACTION[:CONDITION]")]
    pub never: Vec<Never>,
    /// A helper whose errors the program may leave unexamined (not a finding), all of them or
    /// one errno: `--allow-ignored map_delete_elem:ENOENT`. Repeatable.
    #[arg(long, value_name = "HELPER[:ERRNO]")]
    pub allow_ignored: Vec<AllowIgnored>,
    /// Where findings, the corpus and the coverage report go (default: a fresh directory
    /// under the system's temp dir, named when the run starts).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Fuzz the program even if bpfemu's verifier rejects it (in checked mode, faults reported).
    #[arg(long)]
    pub no_verify: bool,
    /// One JSON document instead of the text summary.
    #[arg(long)]
    pub json: bool,
    /// Workers fuzzing at once, each with its own copy of the program and its maps, sharing
    /// the corpus, the coverage and the findings. One worker is deterministic for a seed;
    /// several are not (they race to find things first).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub jobs: u32,
    /// How the object is loaded (from [`crate::load_args::LoadArgs`]).
    #[arg(skip)]
    pub load: bpfemu_loader::LoadOptions,
}

impl FuzzOptions {
    /// The replay each run is: one CPU, the fuzz's object, maps, routes and seed.
    fn replay(&self) -> ReplayOptions {
        ReplayOptions {
            object: self.object.clone(),
            program: self.program.clone(),
            cpus: 1,
            seed: self.seed,
            fib: self.fib.clone(),
            sockets: self.sockets.clone(),
            maps: self.maps.clone(),
            load: self.load.clone(),
            no_verify: self.no_verify,
            ..Default::default()
        }
    }
}

/// `90s`, `5m`, `1h`, `250ms` or a number of seconds.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
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
    Duration::try_from_secs_f64(seconds)
        .ok()
        .filter(|d| *d <= Duration::from_secs(366 * 24 * 3600))
        .ok_or_else(|| format!("'{text}' is not a duration of at most a year"))
}

/// A helper whose errors (all, or one errno) the program may leave unexamined:
/// `map_delete_elem:ENOENT`, `bpf_xdp_adjust_tail`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AllowIgnored {
    pub helper: i32,
    pub errno: Option<i64>,
}

impl FromStr for AllowIgnored {
    type Err = String;

    fn from_str(text: &str) -> Result<AllowIgnored, String> {
        let (name, errno) = match text.split_once(':') {
            Some((n, e)) => (n, Some(e)),
            None => (text, None),
        };
        let helper = bpfemu_isa::helpers::helper_id(name)
            .ok_or_else(|| format!("unknown helper `{name}` (a name such as map_delete_elem)"))?;
        let errno = errno
            .map(|e| {
                e.parse::<i64>()
                    .ok()
                    .filter(|n| (1..=4095).contains(n))
                    .or_else(|| errno_number(e))
                    .ok_or_else(|| {
                        format!("unknown errno `{e}` (a name such as ENOENT, or 1-4095)")
                    })
            })
            .transpose()?;
        Ok(AllowIgnored { helper, errno })
    }
}

fn errno_number(name: &str) -> Option<i64> {
    (1..=4095).find(|&n| bpfemu_vm::maps::Errno(n as i32).name() == Some(name))
}

/// `-E2BIG (7)`, or `-errno 123`.
fn errno_text(errno: i64) -> String {
    match bpfemu_vm::maps::Errno(errno as i32).name() {
        Some(name) => format!("-{name} ({errno})"),
        None => format!("-{errno}"),
    }
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
        if self.action.is_some_and(|a| a != outcome.action.name()) {
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
    /// `aborted`, `fault`, `ignored error` or `never <spec>`.
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
        let mut replayer = Replayer::new(&opts.replay())?;
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

    /// Runs one packet: its outcome; what it reached is [`Runner::coverage`] until the next run.
    fn run(&mut self, packet: &[u8]) -> Result<XdpOutcome, String> {
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
        self.replayer
            .runtime
            .run(program, packet, &meta)
            .map_err(|e| e.to_string())
    }

    /// What the last run found: its kind, its detail, and for an ignored helper error the
    /// call site and errno that identify it.
    fn classify(
        &mut self,
        opts: &Judge<'_>,
        packet: &[u8],
        outcome: &Result<XdpOutcome, String>,
    ) -> Vec<Found> {
        let mut found = Vec::new();
        match outcome {
            Err(e) => found.push(Found::new("fault", e.clone())),
            Ok(o) if o.action == XdpAction::Aborted => found.push(Found::new(
                "aborted",
                format!("XDP_ABORTED (r0 = {})", o.retval),
            )),
            Ok(o) => {
                found.extend(opts.never.iter().find(|n| n.holds(packet, o)).map(|n| {
                    Found::new(&format!("never {}", n.text), format!("r0 = {}", o.retval))
                }))
            }
        }
        let ignored = self.coverage().ignored_errors().to_vec();
        for e in ignored {
            let allowed = opts
                .allow_ignored
                .iter()
                .any(|a| a.helper == e.helper && a.errno.is_none_or(|n| n == e.errno));
            if !allowed {
                let detail = self.describe_ignored(&e);
                found.push(Found {
                    kind: "ignored error".to_owned(),
                    detail,
                    site: Some((e.prog, e.pc, e.helper, e.errno)),
                });
            }
        }
        found
    }

    /// `bpf_map_update_elem returned -E2BIG (7) at insn 42 (prog.c:57) and the program never
    /// looked at it`.
    fn describe_ignored(&self, e: &bpfemu_vm::coverage::IgnoredError) -> String {
        let name = bpfemu_isa::helpers::helper_name(e.helper).unwrap_or("unknown");
        let spec = self.replayer.object().programs.get(e.prog);
        let mut place = format!("insn {}", e.pc);
        if let Some(spec) = spec {
            if e.prog != self.replayer.program {
                place = format!("{} insn {}", spec.name, e.pc);
            }
            if let Some(src) = crate::verify::source_of(&spec.line_info, e.pc) {
                place.push_str(&format!(" ({}:{})", src.file_name, src.line));
            }
        }
        format!(
            "bpf_{name} returned {} at {place}, and the program never looked at it",
            errno_text(e.errno)
        )
    }
}

/// What judges a run: the user's `--never` and `--allow-ignored`.
struct Judge<'a> {
    never: &'a [Never],
    allow_ignored: &'a [AllowIgnored],
}

impl<'a> Judge<'a> {
    fn new(opts: &'a FuzzOptions) -> Judge<'a> {
        Judge {
            never: &opts.never,
            allow_ignored: &opts.allow_ignored,
        }
    }
}

/// One thing a run found.
struct Found {
    kind: String,
    detail: String,
    /// An ignored error's program, call slot, helper and errno.
    site: Option<(usize, usize, i32, i64)>,
}

impl Found {
    fn new(kind: &str, detail: String) -> Found {
        Found {
            kind: kind.to_owned(),
            detail,
            site: None,
        }
    }
}

/// What the workers of a run share: every run's coverage, the corpus that reaches it, the
/// findings. A worker takes the lock when a run of its own reached something new to it or
/// found something, and every [`PULL_EVERY`] runs to take the others' new corpus entries.
struct Shared {
    total: Coverage,
    /// Coverage of the findings of each kind, so that a kind's finding is kept only when it
    /// reaches something new for that kind.
    by_kind: BTreeMap<String, Coverage>,
    /// The corpus, each entry with the worker that added it.
    corpus: Vec<(usize, Vec<u8>)>,
    /// Entries replaced since the corpus was full (the next slot to replace).
    replaced: usize,
    findings: Vec<Finding>,
    /// Ignored errors already found, by call site and errno.
    sites: std::collections::BTreeSet<(usize, usize, i32, i64)>,
}

/// How many runs a worker makes between looks at the others' corpus entries.
const PULL_EVERY: u64 = 256;

impl Shared {
    /// A packet whose run reached `run`: kept when that is new to the whole run.
    fn offer(&mut self, worker: usize, packet: &[u8], run: &Coverage) {
        if self.total.merge_new(run) == 0 {
            return;
        }
        if self.corpus.len() < MAX_CORPUS {
            self.corpus.push((worker, packet.to_vec()));
        } else {
            self.corpus[self.replaced % MAX_CORPUS] = (worker, packet.to_vec());
            self.replaced += 1;
        }
    }
}

/// One worker: its own runner, the coverage its own runs reached, and its corpus (its own
/// entries and the ones it took from the others).
struct Fuzzer {
    worker: usize,
    runner: Runner,
    total: Coverage,
    corpus: Vec<Vec<u8>>,
    /// How much of the shared corpus this worker has looked at.
    pulled: usize,
}

impl Fuzzer {
    fn new(worker: usize, runner: Runner) -> Fuzzer {
        let mut runner = runner;
        let total = runner.empty_coverage();
        Fuzzer {
            worker,
            runner,
            total,
            corpus: Vec::new(),
            pulled: 0,
        }
    }

    /// Runs one input; returns how many bits it added to this worker's coverage, and keeps
    /// its findings and (when new to the run) the input itself.
    fn execute(&mut self, judge: &Judge<'_>, shared: &Mutex<Shared>, packet: &[u8]) -> usize {
        let exec = self.runner.execs;
        let outcome = self.runner.run(packet);
        let run = self
            .runner
            .replayer
            .runtime
            .coverage_mut()
            .expect("coverage is recorded from Runner::new");
        let added = self.total.merge_new(run);
        let found = self.runner.classify(judge, packet, &outcome);
        if added == 0 && found.is_empty() {
            return 0;
        }
        let mut shared = shared.lock().expect("no worker panics holding the lock");
        if added > 0 {
            shared.offer(self.worker, packet, self.runner.coverage());
        }
        for f in found {
            let new = match f.site {
                Some(site) => shared.sites.insert(site),
                None => {
                    if !shared.by_kind.contains_key(&f.kind) {
                        let empty = self.runner.empty_coverage();
                        shared.by_kind.insert(f.kind.clone(), empty);
                    }
                    let run = self.runner.coverage();
                    let seen = shared.by_kind.get_mut(&f.kind).expect("inserted above");
                    seen.merge_new(run) > 0
                }
            };
            if new {
                shared.findings.push(Finding {
                    kind: f.kind,
                    detail: f.detail,
                    packet: packet.to_vec(),
                    exec,
                    reproduces_alone: false,
                });
            }
        }
        added
    }

    fn keep(&mut self, packet: Vec<u8>, mutator: &mut Mutator) {
        if self.corpus.len() < MAX_CORPUS {
            self.corpus.push(packet);
        } else {
            let slot = mutator.rng().below(MAX_CORPUS as u64) as usize;
            self.corpus[slot] = packet;
        }
    }

    /// Takes the entries the other workers added to the shared corpus since the last look.
    fn pull(&mut self, shared: &Mutex<Shared>, mutator: &mut Mutator) {
        let taken: Vec<Vec<u8>> = {
            let shared = shared.lock().expect("no worker panics holding the lock");
            let from = self.pulled.min(shared.corpus.len());
            self.pulled = shared.corpus.len();
            shared.corpus[from..]
                .iter()
                .filter(|(w, _)| *w != self.worker)
                .map(|(_, p)| p.clone())
                .collect()
        };
        for packet in taken {
            self.keep(packet, mutator);
        }
    }
}

/// What bounds a worker's runs, and what it reports them to.
struct Budget<'a> {
    start: Instant,
    time: Duration,
    /// This worker's share of `--runs`.
    runs: Option<u64>,
    /// Runs of all workers so far, counted in steps of 64.
    all_execs: &'a AtomicU64,
    workers: usize,
}

/// One worker's fuzzing: the seeds, then mutants until the budget is spent. `progress` is
/// given to the worker on the calling thread, which shows everyone's runs.
fn work(
    fuzzer: &mut Fuzzer,
    opts: &FuzzOptions,
    shared: &Mutex<Shared>,
    seeds: &[Vec<u8>],
    budget: &Budget<'_>,
    mut progress: Option<&mut Progress>,
) {
    let judge = Judge::new(opts);
    for seed in seeds {
        if fuzzer.execute(&judge, shared, seed) > 0 || fuzzer.corpus.is_empty() {
            fuzzer.corpus.push(seed.clone());
        }
    }
    let mut mutator = Mutator::new(opts.seed.wrapping_add(fuzzer.worker as u64));
    let unit_ms = opts.runs.is_none();
    loop {
        let execs = fuzzer.runner.execs;
        if budget.runs.is_some_and(|runs| execs >= runs) {
            break;
        }
        // The clock is read every 64 runs: cheap, and a --runs budget stays deterministic.
        if execs.is_multiple_of(64) {
            if budget.start.elapsed() >= budget.time {
                break;
            }
            if execs > 0 {
                budget.all_execs.fetch_add(64, Ordering::Relaxed);
            }
        }
        if budget.workers > 1 && execs.is_multiple_of(PULL_EVERY) {
            fuzzer.pull(shared, &mut mutator);
        }
        let rng = mutator.rng();
        let parent = rng.below(fuzzer.corpus.len() as u64) as usize;
        let other = rng.below(fuzzer.corpus.len() as u64) as usize;
        let mutant = mutator.mutate(&fuzzer.corpus[parent], &fuzzer.corpus[other]);
        if fuzzer.execute(&judge, shared, &mutant) > 0 {
            fuzzer.keep(mutant, &mut mutator);
        }
        if let Some(progress) = progress.as_deref_mut() {
            let all = budget.all_execs.load(Ordering::Relaxed).max(execs);
            let position = || {
                if unit_ms {
                    budget.start.elapsed().as_millis() as u64
                } else {
                    all
                }
            };
            progress.tick_noting(all, position, || {
                let shared = shared.lock().expect("no worker panics holding the lock");
                format!(
                    "coverage {} bits, corpus {}, findings {}",
                    shared.total.count(),
                    shared.corpus.len(),
                    shared.findings.len()
                )
            });
        }
    }
}

/// Worker `worker`'s share of `--runs`.
fn runs_of(opts: &FuzzOptions, worker: usize) -> Option<u64> {
    let jobs = u64::from(opts.jobs);
    opts.runs
        .map(|runs| runs / jobs + u64::from((worker as u64) < runs % jobs))
}

/// Runs the fuzzer as the command line asked; returns the exit code (1 when it found
/// something).
pub fn fuzz(opts: &FuzzOptions) -> Result<u8> {
    if let Some(out) = &opts.out {
        prepare_out_dir(out)?;
    }
    let seeds = initial_packets(opts)?;
    let runner = Runner::new(opts)?;
    crate::replay::print_warnings(&opts.object, runner.replayer.object());
    // The default directory is made once the inputs have loaded (a refused object leaves
    // nothing behind) and named before the run, so it can be found however the run ends.
    let out = match &opts.out {
        Some(out) => out.clone(),
        None => {
            let out = fresh_out_dir()?;
            eprintln!("bpfemu fuzz: writing to {}", out.display());
            out
        }
    };
    let mut first = Fuzzer::new(0, runner);
    let shared = Mutex::new(Shared {
        total: first.total.clone(),
        by_kind: BTreeMap::new(),
        corpus: Vec::new(),
        replaced: 0,
        findings: Vec::new(),
        sites: Default::default(),
    });
    let all_execs = AtomicU64::new(0);
    let start = Instant::now();
    let budget = |worker: usize| Budget {
        start,
        time: opts.time,
        runs: runs_of(opts, worker),
        all_execs: &all_execs,
        workers: opts.jobs as usize,
    };
    // The share is of --runs when given, else of the --time budget.
    let whole = match opts.runs {
        Some(runs) => runs,
        None => opts.time.as_millis().min(u128::from(u64::MAX)) as u64,
    };
    let mut progress = Progress::new(!opts.json, "fuzz", "runs", Some(whole), 64);
    let others_execs = std::thread::scope(|scope| -> Result<u64> {
        let others: Vec<_> = (1..opts.jobs as usize)
            .map(|worker| {
                let (shared, seeds, budget) = (&shared, &seeds, budget(worker));
                scope.spawn(move || -> Result<u64> {
                    let mut fuzzer = Fuzzer::new(worker, Runner::new(opts)?);
                    work(&mut fuzzer, opts, shared, seeds, &budget, None);
                    Ok(fuzzer.runner.execs)
                })
            })
            .collect();
        work(
            &mut first,
            opts,
            &shared,
            &seeds,
            &budget(0),
            Some(&mut progress),
        );
        let mut execs = 0;
        for worker in others {
            execs += worker.join().expect("a fuzzing worker panicked")?;
        }
        Ok(execs)
    })?;
    let execs = first.runner.execs + others_execs;
    progress.finish(execs);
    let elapsed = start.elapsed();
    let shared = shared
        .into_inner()
        .expect("no worker panics holding the lock");
    let mut findings = shared.findings;
    findings.sort_by_key(|f| f.exec);
    check_reproduction(opts, &mut findings)?;
    let corpus = shared.corpus.into_iter().map(|(_, p)| p).collect();
    let corpus = minimise(&mut first.runner, corpus);
    let summary = FuzzSummary {
        execs,
        elapsed,
        corpus: corpus.len(),
        coverage_bits: shared.total.count(),
        findings,
    };
    write_outputs(
        opts,
        &out,
        &mut first.runner,
        &shared.total,
        &corpus,
        &summary,
    )?;
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

/// A directory no earlier run wrote to, under the system's temp dir: `bpfemu-fuzz-PID-N`,
/// the first N not taken (by this process's earlier runs, or a process of the same id
/// before).
fn fresh_out_dir() -> Result<PathBuf> {
    let base = std::env::temp_dir();
    let pid = std::process::id();
    for n in 0..1000 {
        let dir = base.join(format!("bpfemu-fuzz-{pid}-{n}"));
        match std::fs::create_dir(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e).with_context(|| format!("cannot create {}", dir.display())),
        }
    }
    bail!(
        "no free bpfemu-fuzz-{pid}-N directory in {}: give one with --out",
        base.display()
    )
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
        let mut rng = Rng::new(opts.seed);
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
        let outcome = fresh.run(&finding.packet);
        finding.reproduces_alone = fresh
            .classify(&Judge::new(opts), &finding.packet, &outcome)
            .iter()
            .any(|f| f.kind == finding.kind && f.detail == finding.detail);
    }
    Ok(())
}

/// The corpus reduced greedily: entries by how much they reach (shorter first among equals),
/// each kept when it adds to what the kept ones reach.
fn minimise(runner: &mut Runner, corpus: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    let mut runs: Vec<(usize, Coverage, Vec<u8>)> = corpus
        .into_iter()
        .map(|packet| {
            let _ = runner.run(&packet);
            let bits = runner.coverage().clone();
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
    out: &Path,
    runner: &mut Runner,
    total: &Coverage,
    corpus: &[Vec<u8>],
    summary: &FuzzSummary,
) -> Result<()> {
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
    let object = runner.replayer.object();
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
