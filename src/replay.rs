//! `bpfemu replay`: every packet of a capture through an XDP program, with the kernel's
//! semantics, and what came out: per-packet verdicts and bytes, per-action captures, a
//! summary, JSON for machines, and expectations to record and check.
//!
//! A packet the kernel would refuse (shorter than an Ethernet header; longer than the linear
//! part plus 17 page-sized fragments, 73152 bytes) or whose run stops (a memory fault, the
//! instruction budget) is reported with an `error` and the replay goes on. A capture that breaks off is reported after everything read
//! before it has been written out: no processed packet is lost from the outputs.

use crate::digest::{HashingReader, StreamDigest};
use crate::expect::{Checker, PacketRecord, Recorder, RunIdentity, file_name, map_delta};
use crate::mapio::MapIo;
use crate::pcap::{Packet, PacketRef, PcapReadError, PcapReader, PcapWriter};
use crate::prepare::{Prepared, RunSetup};
use crate::progress::Progress;
use crate::rss;
use anyhow::{Context, Result, bail};
use bpfemu_jit::Engine;
use bpfemu_loader::{LoadOptions, Object};
use bpfemu_vm::xdp::{PacketError, PacketMeta, XdpAction, XdpOutcome, XdpRuntime, XdpVerdict};
use serde_json::json;
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What `bpfemu replay` was asked to do: the command line's flags as parsed, and the same
/// struct for callers of the library.
#[derive(Clone, Debug, Default, clap::Args)]
pub struct ReplayOptions {
    /// The BPF object.
    #[arg(value_name = "OBJ")]
    pub object: PathBuf,
    /// The capture (pcap or pcapng, Ethernet).
    #[arg(value_name = "PCAP")]
    pub capture: PathBuf,
    /// The XDP program to run (needed when the object has several): its function name, or
    /// its section, as `ip link set dev DEV xdp obj FILE sec S` names it.
    #[arg(long = "prog")]
    pub program: Option<String>,
    /// Engine that runs the program (the JIT by default; interp, the reference interpreter,
    /// stays selectable).
    #[arg(long, value_enum, default_value_t = Engine::Jit)]
    pub engine: Engine,
    /// ingress_ifindex the program sees (BPF_PROG_TEST_RUN's default: 1, the loopback).
    #[arg(long, default_value_t = 1)]
    pub ifindex: u32,
    /// rx_queue_index the program sees (default: the queue RSS steers the packet to).
    #[arg(long)]
    pub rxq: Option<u32>,
    /// Virtual CPUs; packets are steered by a Toeplitz RSS hash of their flow.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=256))]
    pub cpus: u32,
    /// Seed of bpf_get_prandom_u32.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Routing and neighbour tables for bpf_fib_lookup (JSON).
    #[arg(long, value_name = "FILE")]
    pub fib: Option<PathBuf>,
    /// The sockets bpf_sk_lookup_tcp/udp find (JSON).
    #[arg(long, value_name = "FILE")]
    pub sockets: Option<PathBuf>,
    /// Initial map contents (JSON: typed by BTF as bpftool shows them, or raw hex pairs).
    #[arg(long, value_name = "FILE")]
    pub maps: Option<PathBuf>,
    /// Write the map contents after the replay (JSON, as bpftool map dump shows them).
    #[arg(long, value_name = "FILE")]
    pub dump_maps: Option<PathBuf>,
    /// Write one capture per action (pass, tx, redirect, drop, aborted) into DIR.
    #[arg(long, value_name = "DIR")]
    pub out_dir: Option<PathBuf>,
    /// One JSON object per packet and a final summary object, instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Write the expectations of this replay (per-packet results, final maps) to FILE.
    #[arg(long, value_name = "FILE")]
    pub record: Option<PathBuf>,
    /// Compare with expectations recorded earlier; exit 1 at the first difference.
    #[arg(long, value_name = "FILE", conflicts_with = "record")]
    pub check: Option<PathBuf>,
    /// Run the program even if bpfemu's verifier rejects it (in checked mode, faults reported).
    #[arg(long)]
    pub no_verify: bool,
    /// Show the records of ring buffer or perf event array MAP typed by TYPE, a type of the
    /// object's BTF (`events='struct event'`), in --json and --dump-maps (repeatable).
    #[arg(long = "record-type", value_name = "MAP=TYPE", value_parser = crate::record_types::parse_record_type)]
    pub record_types: Vec<(String, String)>,
    /// How the object is loaded (from [`crate::load_args::LoadArgs`]).
    #[arg(skip)]
    pub load: LoadOptions,
    /// Show a progress bar (set by the command line: a terminal, no JSON).
    #[arg(skip)]
    pub progress: bool,
    /// Run every packet on this CPU instead of the one RSS steers it to (as test_run runs
    /// on the calling CPU): `bpfemu run` and `bpfemu test` use CPU 0.
    #[arg(skip)]
    pub pinned_cpu: Option<u32>,
}

/// What happened to one packet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PacketResult {
    pub index: usize,
    pub cpu: u32,
    pub outcome: Result<XdpOutcome, String>,
}

impl PacketResult {
    fn action_name(&self) -> Cow<'static, str> {
        match &self.outcome {
            Ok(o) => o.action.name(),
            Err(_) => "error".into(),
        }
    }

    /// The JSON object `--json` prints for the packet.
    pub fn to_json(&self) -> serde_json::Value {
        match &self.outcome {
            Ok(o) => {
                let mut v = json!({
                    "index": self.index,
                    "cpu": self.cpu,
                    "retval": o.retval,
                    "action": o.action.name(),
                    "data": hex(&o.data_out),
                    "meta_len": o.meta_len,
                    "printk": o.printk,
                });
                if let Some(target) = &o.redirect {
                    v["redirect"] = json!(target.to_string());
                }
                let events: Vec<_> = events(o).iter().map(Event::to_json).collect();
                if !events.is_empty() {
                    v["events"] = json!(events);
                }
                v
            }
            Err(e) => json!({ "index": self.index, "cpu": self.cpu, "error": e }),
        }
    }
}

/// A ring buffer record or a perf event sample, as replay shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    pub map: String,
    /// The perf event array slot; `None` for a ring buffer record.
    pub slot: Option<u32>,
    pub data: Vec<u8>,
}

impl Event {
    pub fn to_json(&self) -> serde_json::Value {
        let mut v = json!({ "map": self.map, "data": hex(&self.data) });
        if let Some(slot) = self.slot {
            v["slot"] = json!(slot);
        }
        v
    }

    /// `MAP HEX` or `MAP[SLOT] HEX`: one event in an expectations file.
    pub fn to_text(&self) -> String {
        match self.slot {
            Some(slot) => format!("{}[{slot}] {}", self.map, hex(&self.data)),
            None => format!("{} {}", self.map, hex(&self.data)),
        }
    }
}

/// The events of one run: ring buffer records, then perf event samples, each in order.
pub fn events(o: &XdpOutcome) -> Vec<Event> {
    let ring = o.ring_events.iter().map(|e| Event {
        map: e.map.clone(),
        slot: None,
        data: e.data.clone(),
    });
    let perf = o.perf_events.iter().map(|e| Event {
        map: e.map.clone(),
        slot: Some(e.slot),
        data: e.data.clone(),
    });
    ring.chain(perf).collect()
}

/// The captures `--out-dir` may hold: one per action, `unknown` for return values past 4.
const ACTIONS: [&str; 6] = ["aborted", "drop", "pass", "tx", "redirect", "unknown"];

/// An OS error's reason without Rust's "(os error N)" suffix, as tcpdump prints it.
pub fn io_reason(error: &std::io::Error) -> String {
    let text = error.to_string();
    match text.find(" (os error") {
        Some(cut) => text[..cut].to_owned(),
        None => text,
    }
}

pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0xf)]));
    }
    out
}

/// Totals of a replay.
#[derive(Clone, Debug, Default)]
pub struct Summary {
    pub packets: usize,
    pub per_action: BTreeMap<Cow<'static, str>, usize>,
    pub elapsed: Duration,
    pub insns: u64,
    /// Packets refused or whose run stopped (a fault, the instruction budget).
    pub faulted: usize,
    /// The first of them: its index and why.
    pub first_fault: Option<(usize, String)>,
}

impl Summary {
    /// Counts one packet's result.
    pub fn add(&mut self, result: &PacketResult) {
        self.count(
            result.action_name(),
            result.outcome.as_ref().ok().map(|o| o.insns_executed),
        );
        if let Err(why) = &result.outcome {
            self.fault(result.index, why);
        }
    }

    /// Records a packet that faulted (or was refused).
    fn fault(&mut self, index: usize, why: &str) {
        self.faulted += 1;
        if self.first_fault.is_none() {
            self.first_fault = Some((index, why.to_owned()));
        }
    }

    /// Counts a packet with this action name (and its instructions, when it ran to the end).
    fn count(&mut self, action: Cow<'static, str>, insns: Option<u64>) {
        self.count_many(action, 1, insns.unwrap_or(0));
    }

    fn count_many(&mut self, action: Cow<'static, str>, packets: usize, insns: u64) {
        if packets > 0 {
            self.packets += packets;
            *self.per_action.entry(action).or_default() += packets;
        }
        self.insns += insns;
    }

    /// "N packets faulted, the first: packet I: why", when any did.
    pub fn fault_line(&self) -> Option<String> {
        let (index, why) = self.first_fault.as_ref()?;
        let plural = if self.faulted == 1 { "" } else { "s" };
        Some(format!(
            "{} packet{plural} faulted, the first: packet {index}: {why}",
            self.faulted
        ))
    }

    pub fn packets_per_sec(&self) -> f64 {
        self.packets as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    pub fn to_json(&self) -> serde_json::Value {
        json!({
            "summary": {
                "packets": self.packets,
                "actions": self.per_action,
                "elapsed_ms": self.elapsed.as_secs_f64() * 1e3,
                "packets_per_sec": self.packets_per_sec(),
                "insns": self.insns,
                "faulted": self.faulted,
                "first_fault": self.first_fault.as_ref().map(|(index, error)| {
                    json!({ "index": index, "error": error })
                }),
            }
        })
    }

    /// The table printed at the end of a text replay.
    pub fn table(&self) -> String {
        let mut out = String::from("action      packets      share\n");
        for (action, n) in &self.per_action {
            let share = 100.0 * *n as f64 / self.packets.max(1) as f64;
            out += &format!("{action:<10} {n:>8} {share:>9.1}%\n");
        }
        out += &format!(
            "total      {:>8}   {:.3} s, {:.0} packets/s, {} insns\n",
            self.packets,
            self.elapsed.as_secs_f64(),
            self.packets_per_sec(),
            self.insns
        );
        if let Some(line) = self.fault_line() {
            out += &line;
            out.push('\n');
        }
        out
    }
}

/// Verdict counts of the fast path, by action, merged into the [`Summary`] at the end.
#[derive(Default)]
struct VerdictCounts {
    packets: usize,
    /// Aborted, drop, pass, tx, redirect.
    actions: [usize; 5],
    errors: usize,
    insns: u64,
}

/// The actions [`VerdictCounts`] counts, in its order.
const COUNTED: [XdpAction; 5] = [
    XdpAction::Aborted,
    XdpAction::Drop,
    XdpAction::Pass,
    XdpAction::Tx,
    XdpAction::Redirect,
];

impl VerdictCounts {
    /// Counts a verdict; an unknown action (named by its value) goes to `summary` directly.
    #[inline]
    fn count(&mut self, action: XdpAction, insns: u64, summary: &mut Summary) {
        self.packets += 1;
        self.insns += insns;
        // In COUNTED's order.
        let slot = match action {
            XdpAction::Aborted => 0,
            XdpAction::Drop => 1,
            XdpAction::Pass => 2,
            XdpAction::Tx => 3,
            XdpAction::Redirect => 4,
            XdpAction::Unknown(_) => return summary.count_many(action.name(), 1, 0),
        };
        self.actions[slot] += 1;
    }

    fn error(&mut self) {
        self.errors += 1;
        self.packets += 1;
    }

    fn add_to(&self, summary: &mut Summary) {
        for (&action, &n) in COUNTED.iter().zip(&self.actions) {
            summary.count_many(action.name(), n, 0);
        }
        summary.count_many("error".into(), self.errors, self.insns);
    }
}

/// One pcap per action in `--out-dir`, opened when the first packet of that action comes.
struct ActionCaptures {
    dir: PathBuf,
    writers: BTreeMap<Cow<'static, str>, PcapWriter<BufWriter<File>>>,
}

impl ActionCaptures {
    /// Prepares `dir` before the replay: created when missing, refused when it is no
    /// directory, and emptied of the captures an earlier replay left, so that what it holds
    /// afterwards is this replay's alone.
    fn new(dir: &Path) -> Result<ActionCaptures> {
        if dir.exists() && !dir.is_dir() {
            bail!("--out-dir {}: not a directory", dir.display());
        }
        std::fs::create_dir_all(dir).map_err(|e| {
            anyhow::anyhow!(
                "--out-dir {}: cannot create it: {}",
                dir.display(),
                io_reason(&e)
            )
        })?;
        for action in ACTIONS {
            let stale = dir.join(format!("{action}.pcap"));
            match std::fs::remove_file(&stale) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => bail!(
                    "cannot remove the earlier {}: {}",
                    stale.display(),
                    io_reason(&e)
                ),
            }
        }
        Ok(ActionCaptures {
            dir: dir.to_owned(),
            writers: BTreeMap::new(),
        })
    }

    /// Writes the frame as it leaves the program: from `data` (metadata stays behind).
    fn write(&mut self, packet: &PacketRef<'_>, result: &PacketResult) -> Result<()> {
        let Ok(outcome) = &result.outcome else {
            return Ok(());
        };
        // Return values outside 0-4 share one capture, `unknown.pcap`.
        let action = match outcome.action {
            XdpAction::Unknown(_) => Cow::Borrowed("unknown"),
            known => known.name(),
        };
        if !self.writers.contains_key(&action) {
            let path = self.dir.join(format!("{action}.pcap"));
            let writer = PcapWriter::create(&path, true)
                .with_context(|| format!("cannot create {}", path.display()))?;
            self.writers.insert(action.clone(), writer);
        }
        let frame = &outcome.data_out[outcome.meta_len.min(outcome.data_out.len())..];
        let writer = self.writers.get_mut(&action).expect("inserted above");
        writer
            .write(packet.ts_ns, frame)
            .context("writing an action capture")
    }

    fn finish(self) -> Result<()> {
        for (action, writer) in self.writers {
            writer
                .finish()
                .with_context(|| format!("writing {action}.pcap"))?;
        }
        Ok(())
    }
}

/// The loaded program and its runtime, ready for packets.
pub struct Replayer {
    /// The object and its program, as every command opens them.
    pub prepared: Arc<Prepared>,
    pub runtime: XdpRuntime,
    pub program: usize,
    pub program_name: String,
    /// How long the engine took to prepare the programs (the JIT's compile; zero for the
    /// interpreter, which decodes them as the runtime is built).
    pub compile_time: Duration,
    opts: ReplayOptions,
    /// Every event record of the replay, by packet, for `--dump-maps`.
    events: Vec<(usize, Event)>,
    record_types: crate::record_types::RecordTypes,
}

impl Replayer {
    /// Opens the object (see [`Prepared`]) and makes the runtime that replays its program.
    pub fn new(opts: &ReplayOptions) -> Result<Replayer> {
        let prepared = Prepared::open(&opts.object, opts.program.as_deref(), &opts.load)?;
        Replayer::with(Arc::new(prepared), opts)
    }

    /// The runtime that replays `prepared`'s program as `opts` asks (its object and program
    /// fields are `prepared`'s).
    pub fn with(prepared: Arc<Prepared>, opts: &ReplayOptions) -> Result<Replayer> {
        let path = prepared.path();
        let record_types =
            crate::record_types::RecordTypes::resolve(prepared.object(), path, &opts.record_types)?;
        let fib = match &opts.fib {
            Some(file) => Some(bpfemu_vm::fib::Fib::from_json_file(file)?),
            None => None,
        };
        let sockets = match &opts.sockets {
            Some(file) => Some(bpfemu_vm::sockets::SocketTable::from_json_file(file)?),
            None => None,
        };
        let setup = RunSetup {
            engine: opts.engine,
            cpus: opts.cpus,
            seed: opts.seed,
            fib,
            sockets,
            maps: opts.maps.as_deref(),
            no_verify: opts.no_verify,
        };
        let (runtime, compile_time) = prepared.runtime_timed(&setup)?;
        if let Some(rxq) = opts.rxq {
            // As test_run refuses the ctx, before any packet.
            runtime
                .check_rx(opts.ifindex, rxq)
                .map_err(|e| anyhow::anyhow!("--rxq {rxq} with --ifindex {}: {e}", opts.ifindex))?;
        }
        let program = prepared.program_index();
        if let Some(reason) = runtime.test_run_refusal(program) {
            anyhow::bail!("{}: {reason}", path.display());
        }
        Ok(Replayer {
            program_name: prepared.program_name().to_owned(),
            prepared,
            runtime,
            program,
            compile_time,
            opts: opts.clone(),
            events: Vec::new(),
            record_types,
        })
    }

    /// The object the program comes from.
    pub fn object(&self) -> &Object {
        self.prepared.object()
    }

    /// Runs one packet: steered to its CPU, at its capture time.
    pub fn run(&mut self, packet: &Packet) -> PacketResult {
        self.run_ref(&packet.as_ref())
    }

    /// [`Replayer::run`] on a borrowed frame.
    pub fn run_ref(&mut self, packet: &PacketRef<'_>) -> PacketResult {
        let (cpu, verdict) = self.verdict(packet);
        let outcome = verdict
            .map(|v| self.runtime.last_outcome(v))
            .map_err(|e| e.to_string());
        if let (Ok(o), Some(_)) = (&outcome, &self.opts.dump_maps) {
            self.events
                .extend(events(o).into_iter().map(|e| (packet.index, e)));
        }
        PacketResult {
            index: packet.index,
            cpu,
            outcome,
        }
    }

    /// The JSON object `--json` prints for a packet: [`PacketResult::to_json`], its records
    /// typed as `--record-type` says.
    pub fn packet_json(&self, result: &PacketResult) -> serde_json::Value {
        let mut v = result.to_json();
        if let (Ok(o), false) = (&result.outcome, self.record_types.is_empty())
            && let Some(list) = v.get_mut("events").and_then(|e| e.as_array_mut())
        {
            for (json, e) in list.iter_mut().zip(events(o)) {
                self.record_types.decorate(json, &e.map, &e.data);
            }
        }
        v
    }

    /// Every map's entries as raw bytes (what expectations compare).
    pub fn raw_maps(&mut self) -> Result<crate::mapio::RawMaps> {
        MapIo::new(self.prepared.object(), &mut self.runtime).raw_snapshot()
    }

    /// Runs one packet for its verdict only (the fast path: nothing is copied); the CPU it
    /// was steered to.
    pub fn verdict(&mut self, packet: &PacketRef<'_>) -> (u32, Result<XdpVerdict, PacketError>) {
        let meta = self.meta(packet);
        (
            meta.cpu,
            self.runtime.run_in_place(self.program, packet.data, &meta),
        )
    }

    /// What the program's ctx says of a packet besides its bytes: its time, the CPU RSS
    /// steered it to, the device and queue.
    #[inline]
    fn meta(&self, packet: &PacketRef<'_>) -> PacketMeta {
        let cpu = match self.opts.pinned_cpu {
            Some(cpu) => cpu,
            None => rss::steer(packet.data, self.opts.cpus.max(1)),
        };
        PacketMeta {
            ts_ns: packet.ts_ns,
            cpu,
            ingress_ifindex: self.opts.ifindex,
            rx_queue_index: self.opts.rxq.unwrap_or(cpu),
        }
    }

    /// The maps as `--dump-maps` writes them; a ring buffer or perf event array lists the
    /// records the replay produced in it, each with its packet.
    pub fn maps_json(&mut self) -> Result<serde_json::Value> {
        let mut doc = MapIo::new(self.prepared.object(), &mut self.runtime).dump()?;
        for (packet, e) in &self.events {
            if let Some(list) = doc.get_mut(&e.map).and_then(|v| v.as_array_mut()) {
                let mut record = e.to_json();
                record["packet"] = json!(packet);
                self.record_types.decorate(&mut record, &e.map, &e.data);
                list.push(record);
            }
        }
        Ok(doc)
    }
}

/// The loader's warnings about an object, each once, on standard error.
pub fn print_warnings(path: &Path, object: &Object) {
    let mut seen = std::collections::BTreeSet::new();
    for w in object.warnings.iter().filter(|w| seen.insert(w.as_str())) {
        let _ = writeln!(
            std::io::stderr(),
            "bpfemu: {}: warning: {w}",
            path.display()
        );
    }
}

/// Runs the whole replay as the command line asked; returns the process exit code: 0, or 1
/// when a packet faulted or a check found a difference.
pub fn replay(opts: &ReplayOptions) -> Result<u8> {
    // Every output is checked before any work, so that a bad path fails in a moment.
    check_dump_target(opts.dump_maps.as_deref())?;
    let mut captures = opts
        .out_dir
        .as_deref()
        .map(ActionCaptures::new)
        .transpose()?;
    let mut replayer = Replayer::new(opts)?;
    print_warnings(&opts.object, replayer.object());
    let expectations = opts.record.is_some() || opts.check.is_some();
    let identity = if expectations {
        Some(run_identity(opts, &replayer.program_name)?)
    } else {
        None
    };
    let mut checker = match &opts.check {
        Some(file) => Some(Checker::open(file)?),
        None => None,
    };
    if let (Some(checker), Some(now), Some(file)) = (&checker, &identity, &opts.check) {
        if let Some(note) = checker.recorded.object_change(now) {
            writeln!(std::io::stderr(), "bpfemu: {note}; comparing its behaviour")?;
        }
        let changes = checker.recorded.changes(now);
        if !changes.is_empty() {
            let mut err = std::io::stderr().lock();
            writeln!(
                err,
                "check failed: this run is not the one recorded in {}:",
                file.display()
            )?;
            for change in changes {
                writeln!(err, "  {change}")?;
            }
            return Ok(1);
        }
    }
    let mut recorder = match &opts.record {
        Some(file) => Some(Recorder::create(file)?),
        None => None,
    };
    if let (Some(recorder), Some(run)) = (recorder.as_mut(), &identity) {
        recorder.header(run)?;
    }
    let maps_before = if expectations {
        Some(replayer.raw_maps()?)
    } else {
        None
    };
    let (mut reader, capture_digest) = if expectations {
        open_capture(&opts.capture)?
    } else {
        // Nothing records or checks the capture's digest: no need to hash every byte.
        (PcapReader::open(&opts.capture)?, None)
    };
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let mut summary = Summary::default();
    let mut first_difference = None;
    let mut progress = Progress::capture(opts.progress, &opts.capture, 1024);
    // Only verdicts are needed unless packets are printed, written, recorded or checked, or
    // their ring and perf records are dumped with the maps.
    let verdicts_only =
        !opts.json && captures.is_none() && !expectations && opts.dump_maps.is_none();
    let start = Instant::now();
    let capture_error = if verdicts_only {
        let mut counts = VerdictCounts::default();
        let error = count_verdicts(
            &mut replayer,
            &mut reader,
            &mut counts,
            &mut summary,
            &mut progress,
            &mut out,
        )?;
        counts.add_to(&mut summary);
        error
    } else {
        let mut capture_error = None;
        while let Some(item) = reader.next_ref() {
            let packet = match item {
                Ok(p) => p,
                Err(e) => {
                    capture_error = Some(e);
                    break;
                }
            };
            let result = replayer.run_ref(&packet);
            summary.add(&result);
            if opts.json {
                writeln!(out, "{}", replayer.packet_json(&result))?;
            } else if let Ok(outcome) = &result.outcome {
                // bpf_trace_printk output, as `bpftool prog tracelog` would show it, by packet.
                if !outcome.printk.is_empty() {
                    progress.suspend(|| print_printk(&mut out, result.index, &outcome.printk))?;
                }
            }
            if let Some(captures) = captures.as_mut() {
                captures.write(&packet, &result)?;
            }
            if expectations {
                let record = PacketRecord::new(packet.data, &result);
                if let Some(recorder) = recorder.as_mut() {
                    recorder.packet(&record)?;
                }
                if let (Some(checker), None) = (checker.as_mut(), &first_difference) {
                    first_difference = checker.packet(packet.data, &record)?;
                }
            }
            progress.tick(summary.packets as u64, || reader.bytes_read());
        }
        capture_error
    };
    summary.elapsed = start.elapsed();
    progress.finish((summary.packets) as u64);
    if let Some(captures) = captures {
        captures.finish()?;
    }
    if let Some(file) = &opts.dump_maps {
        write_json(file, &replayer.maps_json()?)?;
    }
    if opts.json {
        writeln!(out, "{}", summary.to_json())?;
    } else {
        write!(out, "{}", summary.table())?;
    }
    out.flush()?;
    if let Some(error) = capture_error {
        if let Some(recorder) = recorder {
            recorder.abandon();
        }
        bail!(
            "{error} ({} packets before it were replayed and written out)",
            summary.packets
        );
    }
    let mut code = 0;
    if let Some(before) = &maps_before {
        let after = replayer.raw_maps()?;
        let digest = capture_digest.map(|d| d.hex()).unwrap_or_default();
        if let Some(recorder) = recorder {
            recorder.finish(summary.packets, digest.clone(), &map_delta(before, &after))?;
        }
        if let (Some(checker), Some(file)) = (checker, &opts.check) {
            let object = replayer.prepared.object();
            let describe = |map: &str, key: &[u8], value: &[u8]| {
                crate::mapio::describe_entry(object, map, key, value)
            };
            let mut problems =
                checker.finish(summary.packets, &digest, before, &after, describe)?;
            let at = usize::from(problems.first().is_some_and(|p| p.starts_with("capture:")));
            if let Some(difference) = first_difference {
                problems.insert(at, difference);
            }
            let mut err = std::io::stderr().lock();
            if problems.is_empty() {
                writeln!(
                    err,
                    "check passed: {} packets and the final maps as recorded in {}",
                    summary.packets,
                    file.display()
                )?;
            } else {
                writeln!(err, "check failed against {}:", file.display())?;
                for problem in problems {
                    writeln!(err, "{problem}")?;
                }
                code = 1;
            }
        }
    }
    if let Some(line) = summary.fault_line() {
        if opts.json {
            // The table says it otherwise; JSON readers get it in the summary object.
            writeln!(std::io::stderr(), "bpfemu: {line}")?;
        }
        code = 1;
    }
    Ok(code)
}

/// The replay's fast path, when nothing asks for more than verdicts: each packet run in place
/// and counted (its bpf_trace_printk lines printed), nothing copied or kept. Returns the
/// error that broke the capture off, if one did.
fn count_verdicts(
    replayer: &mut Replayer,
    reader: &mut PcapReader,
    counts: &mut VerdictCounts,
    summary: &mut Summary,
    progress: &mut Progress,
    out: &mut impl Write,
) -> Result<Option<PcapReadError>> {
    while let Some(item) = reader.next_ref() {
        // Borrowed where the reader built it: a copy loads `orig_len` and its padding as one
        // word over the narrow store just made (a store-forwarding stall on every packet).
        let packet = match item {
            Ok(ref p) => p,
            Err(e) => return Ok(Some(e)),
        };
        let meta = replayer.meta(packet);
        // Matched where it lands, not moved (see `bench`: a copy of the whole result just
        // after the runtime wrote it waits for those stores).
        let verdict = replayer
            .runtime
            .run_in_place(replayer.program, packet.data, &meta);
        match &verdict {
            Ok(v) => {
                let printk = replayer.runtime.last_printk();
                if !printk.is_empty() {
                    progress.suspend(|| print_printk(out, packet.index, printk))?;
                }
                counts.count(v.action, v.insns_executed, summary);
            }
            Err(e) => {
                counts.error();
                summary.fault(packet.index, &e.to_string());
            }
        }
        progress.tick(counts.packets as u64, || reader.bytes_read());
    }
    Ok(None)
}

/// What identifies this run, for `--record` and `--check`.
fn run_identity(opts: &ReplayOptions, program: &str) -> Result<RunIdentity> {
    let digest = |path: &Path| {
        crate::digest::file_sha256(path).with_context(|| format!("cannot read {}", path.display()))
    };
    let optional = |path: &Option<PathBuf>| -> Result<(Option<String>, Option<String>)> {
        Ok(match path {
            Some(p) => (Some(file_name(p)), Some(digest(p)?)),
            None => (None, None),
        })
    };
    let (maps, maps_sha256) = optional(&opts.maps)?;
    let (fib, fib_sha256) = optional(&opts.fib)?;
    let (sockets, sockets_sha256) = optional(&opts.sockets)?;
    Ok(RunIdentity {
        object: file_name(&opts.object),
        object_sha256: digest(&opts.object)?,
        program: program.to_owned(),
        capture: file_name(&opts.capture),
        seed: opts.seed,
        cpus: opts.cpus,
        ifindex: opts.ifindex,
        rxq: opts.rxq,
        maps,
        maps_sha256,
        fib,
        fib_sha256,
        sockets,
        sockets_sha256,
        map_sizes: opts.load.map_sizes.clone(),
    })
}

/// The capture's packets, digested as they stream by (`-` is standard input). Streamed, not
/// mapped: a replay that records or checks handles every packet at length anyway, and the
/// digest sees each byte once, as it goes by.
fn open_capture(path: &Path) -> Result<(PcapReader, Option<StreamDigest>)> {
    let source = crate::pcap::open_stream(path)?;
    let (hashing, digest) = HashingReader::new(source);
    Ok((PcapReader::from_reader(path, hashing)?, Some(digest)))
}

/// `--dump-maps FILE` must be writable after the replay: not a directory, in one that exists.
fn check_dump_target(file: Option<&Path>) -> Result<()> {
    let Some(file) = file else { return Ok(()) };
    if file.is_dir() {
        bail!("--dump-maps {}: is a directory", file.display());
    }
    let parent = match file.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    if !parent.is_dir() {
        bail!(
            "--dump-maps {}: the directory {} does not exist",
            file.display(),
            parent.display()
        );
    }
    Ok(())
}

/// A packet's bpf_trace_printk lines, each labelled with the packet.
fn print_printk(out: &mut impl Write, index: usize, lines: &[String]) -> std::io::Result<()> {
    for line in lines {
        writeln!(out, "packet {index}: {line}")?;
    }
    Ok(())
}

fn write_json(file: &Path, value: &serde_json::Value) -> Result<()> {
    let text = serde_json::to_string_pretty(value)?;
    std::fs::write(file, text + "\n").with_context(|| format!("cannot write {}", file.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fast path's counts land under each action's own name, unknown return values
    /// under their number, as the full path's [`Summary::add`] names them.
    #[test]
    fn verdict_counts_name_each_action() {
        let mut counts = VerdictCounts::default();
        let mut summary = Summary::default();
        for (i, &action) in COUNTED.iter().enumerate() {
            for _ in 0..=i {
                counts.count(action, 2, &mut summary);
            }
        }
        counts.count(XdpAction::Unknown(7), 2, &mut summary);
        counts.error();
        counts.add_to(&mut summary);
        let per_action: Vec<(&str, usize)> = summary
            .per_action
            .iter()
            .map(|(name, n)| (name.as_ref(), *n))
            .collect();
        assert_eq!(
            per_action,
            [
                ("7", 1),
                ("aborted", 1),
                ("drop", 2),
                ("error", 1),
                ("pass", 3),
                ("redirect", 5),
                ("tx", 4)
            ]
        );
        assert_eq!((summary.packets, summary.insns), (17, 32));
    }
}
