//! `bpfemu replay`: every packet of a capture through an XDP program, with the kernel's
//! semantics, and what came out: per-packet verdicts and bytes, per-action captures, a
//! summary, JSON for machines, and expectations to record and check.
//!
//! A packet the kernel would refuse (shorter than an Ethernet header; longer than the linear
//! part plus 17 page-sized fragments, 73152 bytes) or whose run stops (a memory fault, the
//! instruction budget) is reported with an `error` and the replay goes on. A capture that breaks off is reported after everything read
//! before it has been written out: no processed packet is lost from the outputs.

use crate::expect::{Expectations, PacketExpectation};
use crate::mapio::MapIo;
use crate::pcap::{Packet, PcapReader, PcapWriter};
use crate::rss;
use crate::runtime;
use anyhow::{Context, Result, bail};
use bpfemu_loader::{LoadOptions, Object};
use bpfemu_vm::xdp::{PacketMeta, XdpAction, XdpConfig, XdpOutcome, XdpRuntime};
use serde_json::json;
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// What `bpfemu replay` was asked to do.
#[derive(Clone, Debug, Default)]
pub struct ReplayOptions {
    pub object: PathBuf,
    pub capture: PathBuf,
    pub program: Option<String>,
    pub ifindex: u32,
    pub rxq: Option<u32>,
    pub cpus: u32,
    pub seed: u64,
    pub fib: Option<PathBuf>,
    pub maps: Option<PathBuf>,
    pub dump_maps: Option<PathBuf>,
    pub out_dir: Option<PathBuf>,
    pub json: bool,
    pub record: Option<PathBuf>,
    pub check: Option<PathBuf>,
    pub load: LoadOptions,
    /// Show a progress bar (a terminal, no JSON).
    pub progress: bool,
    /// The engine that runs the program.
    pub engine: runtime::EngineChoice,
}

/// What happened to one packet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PacketResult {
    pub index: usize,
    pub cpu: u32,
    pub outcome: Result<XdpOutcome, String>,
}

impl PacketResult {
    fn action_name(&self) -> &'static str {
        match &self.outcome {
            Ok(o) => action_name(o.action),
            Err(_) => "error",
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
                    "action": action_name(o.action),
                    "data": hex(&o.data_out),
                    "meta_len": o.meta_len,
                    "printk": o.printk,
                });
                if let Some(target) = &o.redirect {
                    v["redirect"] = json!(target.to_string());
                }
                v
            }
            Err(e) => json!({ "index": self.index, "cpu": self.cpu, "error": e }),
        }
    }

    fn expectation(&self) -> PacketExpectation {
        match &self.outcome {
            Ok(o) => PacketExpectation {
                index: self.index,
                action: Some(action_name(o.action).to_owned()),
                retval: Some(o.retval),
                data: Some(hex(&o.data_out)),
                redirect: o.redirect.as_ref().map(ToString::to_string),
                error: None,
            },
            Err(e) => PacketExpectation {
                index: self.index,
                action: None,
                retval: None,
                data: None,
                redirect: None,
                error: Some(e.clone()),
            },
        }
    }
}

pub fn action_name(action: XdpAction) -> &'static str {
    match action {
        XdpAction::Aborted => "aborted",
        XdpAction::Drop => "drop",
        XdpAction::Pass => "pass",
        XdpAction::Tx => "tx",
        XdpAction::Redirect => "redirect",
        XdpAction::Unknown(_) => "unknown",
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
    pub per_action: BTreeMap<&'static str, usize>,
    pub elapsed: Duration,
    pub insns: u64,
}

impl Summary {
    fn add(&mut self, result: &PacketResult) {
        self.packets += 1;
        *self.per_action.entry(result.action_name()).or_default() += 1;
        if let Ok(o) = &result.outcome {
            self.insns += o.insns_executed;
        }
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
        out
    }
}

/// One pcap per action in `--out-dir`, opened when the first packet of that action comes.
struct ActionCaptures {
    dir: PathBuf,
    writers: BTreeMap<&'static str, PcapWriter<BufWriter<File>>>,
}

impl ActionCaptures {
    fn new(dir: &Path) -> Result<ActionCaptures> {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        Ok(ActionCaptures {
            dir: dir.to_owned(),
            writers: BTreeMap::new(),
        })
    }

    /// Writes the frame as it leaves the program: from `data` (metadata stays behind).
    fn write(&mut self, packet: &Packet, result: &PacketResult) -> Result<()> {
        let Ok(outcome) = &result.outcome else {
            return Ok(());
        };
        let action = action_name(outcome.action);
        if !self.writers.contains_key(action) {
            let path = self.dir.join(format!("{action}.pcap"));
            let writer = PcapWriter::create(&path, true)
                .with_context(|| format!("cannot create {}", path.display()))?;
            self.writers.insert(action, writer);
        }
        let frame = &outcome.data_out[outcome.meta_len.min(outcome.data_out.len())..];
        let writer = self.writers.get_mut(action).expect("inserted above");
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
    pub object: Object,
    pub runtime: XdpRuntime,
    pub program: usize,
    pub program_name: String,
    opts: ReplayOptions,
}

impl Replayer {
    pub fn new(opts: &ReplayOptions) -> Result<Replayer> {
        let path = &opts.object;
        let object = bpfemu_loader::load_file(path, &opts.load)
            .with_context(|| format!("cannot load {}", path.display()))?;
        let program_name = pick_program(&object, opts.program.as_deref())?;
        let fib = match &opts.fib {
            Some(file) => Some(bpfemu_vm::fib::Fib::from_json_file(file)?),
            None => None,
        };
        let config = XdpConfig {
            cpus: opts.cpus.max(1),
            seed: opts.seed,
            fib,
            ..XdpConfig::default()
        };
        let mut runtime = runtime::build_runtime(&object, config)
            .with_context(|| format!("{}: cannot prepare the program", path.display()))?;
        opts.engine
            .apply(&mut runtime)
            .with_context(|| format!("{}: cannot compile the program", path.display()))?;
        if let Some(file) = &opts.maps {
            MapIo::new(&object, &mut runtime).load_file(file)?;
        }
        let program = runtime
            .program_index(&program_name)
            .expect("program chosen from the object");
        Ok(Replayer {
            object,
            runtime,
            program,
            program_name,
            opts: opts.clone(),
        })
    }

    /// Runs one packet: steered to its CPU, at its capture time.
    pub fn run(&mut self, packet: &Packet) -> PacketResult {
        let cpu = rss::steer(&packet.data, self.opts.cpus.max(1));
        let meta = PacketMeta {
            ts_ns: packet.ts_ns,
            cpu,
            ingress_ifindex: self.opts.ifindex,
            rx_queue_index: self.opts.rxq.unwrap_or(cpu),
        };
        let outcome = self
            .runtime
            .run(self.program, &packet.data, &meta)
            .map_err(|e| e.to_string());
        PacketResult {
            index: packet.index,
            cpu,
            outcome,
        }
    }

    /// The maps as `--dump-maps` writes them.
    pub fn maps_json(&mut self) -> Result<serde_json::Value> {
        MapIo::new(&self.object, &mut self.runtime).dump()
    }
}

/// The program to run: the one named, or the object's only XDP program.
fn pick_program(object: &Object, wanted: Option<&str>) -> Result<String> {
    const BPF_PROG_TYPE_XDP: u32 = 6;
    let names: Vec<&str> = object.programs.iter().map(|p| p.name.as_str()).collect();
    if let Some(name) = wanted {
        let Some(p) = object.programs.iter().find(|p| p.name == name) else {
            bail!(
                "{}: no program `{name}`; it has {}",
                object.name,
                names.join(", ")
            );
        };
        if p.prog_type != BPF_PROG_TYPE_XDP {
            bail!(
                "{}: program `{name}` (section {}) is not an XDP program",
                object.name,
                p.section
            );
        }
        return Ok(name.to_owned());
    }
    let xdp: Vec<&str> = object
        .programs
        .iter()
        .filter(|p| p.prog_type == BPF_PROG_TYPE_XDP)
        .map(|p| p.name.as_str())
        .collect();
    match xdp.as_slice() {
        [only] => Ok((*only).to_owned()),
        [] => bail!("{}: no XDP program in this object", object.name),
        [first, ..] => bail!(
            "{}: several XDP programs ({}); choose one with --prog (the first is `{first}`)",
            object.name,
            xdp.join(", ")
        ),
    }
}

/// Runs the whole replay as the command line asked; returns the process exit code.
pub fn replay(opts: &ReplayOptions) -> Result<u8> {
    let mut replayer = Replayer::new(opts)?;
    let reader = PcapReader::open(&opts.capture)?;
    let expected = match &opts.check {
        Some(file) => Some(Expectations::load(file)?),
        None => None,
    };
    let mut captures = opts
        .out_dir
        .as_deref()
        .map(ActionCaptures::new)
        .transpose()?;
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let mut summary = Summary::default();
    let mut recorded = Vec::new();
    let mut first_difference = None;
    let mut capture_error = None;
    let progress = Progress::new(opts.progress, &opts.capture);
    let start = Instant::now();
    for item in reader {
        let packet = match item {
            Ok(p) => p,
            Err(e) => {
                capture_error = Some(e);
                break;
            }
        };
        let result = replayer.run(&packet);
        summary.add(&result);
        if opts.json {
            writeln!(out, "{}", result.to_json())?;
        } else if let Ok(outcome) = &result.outcome {
            // bpf_trace_printk output, as `bpftool prog tracelog` would show it, by packet.
            for line in &outcome.printk {
                writeln!(out, "packet {}: {line}", result.index)?;
            }
        }
        if let Some(captures) = captures.as_mut() {
            captures.write(&packet, &result)?;
        }
        if expected.is_some() || opts.record.is_some() {
            let expectation = result.expectation();
            if let (Some(exp), None) = (&expected, &first_difference) {
                first_difference = exp.compare_packet(&expectation);
            }
            if opts.record.is_some() {
                recorded.push(expectation);
            }
        }
        progress.tick(summary.packets);
    }
    summary.elapsed = start.elapsed();
    progress.finish();
    if let Some(captures) = captures {
        captures.finish()?;
    }
    // The final maps only when something reads them: a dump of big maps is not free.
    let wants_maps = opts.dump_maps.is_some() || opts.record.is_some() || expected.is_some();
    let maps = if wants_maps {
        replayer.maps_json()?
    } else {
        serde_json::Value::Null
    };
    if let Some(file) = &opts.dump_maps {
        write_json(file, &maps)?;
    }
    if opts.json {
        writeln!(out, "{}", summary.to_json())?;
    } else {
        write!(out, "{}", summary.table())?;
    }
    out.flush()?;
    if let Some(file) = &opts.record {
        let exp = Expectations::new(opts, &replayer.program_name, recorded, maps.clone());
        exp.save(file)?;
    }
    if let Some(error) = capture_error {
        bail!(
            "{error} ({} packets before it were replayed and written out)",
            summary.packets
        );
    }
    if let Some(exp) = &expected {
        let difference = first_difference.or_else(|| exp.compare_end(summary.packets, &maps));
        if let Some(difference) = difference {
            eprintln!("{difference}");
            return Ok(1);
        }
        eprintln!(
            "check passed: {} packets and the final maps as expected",
            summary.packets
        );
    }
    Ok(0)
}

fn write_json(file: &Path, value: &serde_json::Value) -> Result<()> {
    let text = serde_json::to_string_pretty(value)?;
    std::fs::write(file, text + "\n").with_context(|| format!("cannot write {}", file.display()))
}

/// A progress bar on standard error for long replays on a terminal.
struct Progress(Option<indicatif::ProgressBar>);

impl Progress {
    fn new(enabled: bool, capture: &Path) -> Progress {
        if !enabled {
            return Progress(None);
        }
        let bar = indicatif::ProgressBar::new_spinner();
        bar.set_message(capture.display().to_string());
        Progress(Some(bar))
    }

    fn tick(&self, packets: usize) {
        if let Some(bar) = &self.0
            && packets.is_multiple_of(4096)
        {
            bar.set_position(packets as u64);
        }
    }

    fn finish(&self) {
        if let Some(bar) = &self.0 {
            bar.finish_and_clear();
        }
    }
}
