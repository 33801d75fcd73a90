//! `bpfemu run`: one packet through an XDP program, as `bpftool prog run` does it with the
//! kernel, without one: the verdict, the packet that comes out (hex, and the line tcpdump
//! prints for it), the redirect target, the map entries the run changed, the ring buffer and
//! perf event records and the `bpf_printk` lines.
//!
//! The program goes through [`crate::prepare`] as every run does: a program the verifier
//! rejects is refused with its message.

use crate::expect::map_delta;
use crate::mapio::{RawMaps, describe_entry};
use crate::pcap::Packet;
use crate::replay::{Event, ReplayOptions, Replayer, events, hex};
use anyhow::{Context, Result, bail};
use bpfemu_jit::Engine;
use bpfemu_loader::LoadOptions;
use bpfemu_vm::xdp::XdpOutcome;
use serde_json::json;
use std::io::Write;
use std::path::PathBuf;

/// What `bpfemu run` was asked to do.
#[derive(Clone, Debug, clap::Args)]
pub struct RunOptions {
    /// The BPF object.
    #[arg(value_name = "OBJ")]
    pub object: PathBuf,
    /// The packet: hex digits (spaces and colons allowed), or @FILE for a file's raw bytes
    /// (@- reads standard input), as bpftool's `data_in`.
    #[arg(long, value_name = "HEX|@FILE")]
    pub data: String,
    /// The XDP program to run (needed when the object has several): its function or section
    /// name.
    #[arg(long = "prog")]
    pub program: Option<String>,
    /// Map contents before the run (JSON as bpftool map dump shows them, as replay --maps).
    #[arg(long, value_name = "FILE")]
    pub maps: Option<PathBuf>,
    /// Run the packet N times over the same maps (as bpftool prog run's `repeat`); the output
    /// is the last run's, the map changes those of all N.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub repeat: u32,
    /// One JSON object instead of text.
    #[arg(long)]
    pub json: bool,
    /// Engine that runs the program.
    #[arg(long, value_enum, default_value_t = Engine::Jit)]
    pub engine: Engine,
    /// Run the program even if bpfemu's verifier rejects it (in checked mode).
    #[arg(long)]
    pub no_verify: bool,
    /// How the object is loaded (from [`crate::load_args::LoadArgs`]).
    #[arg(skip)]
    pub load: LoadOptions,
}

/// The packet `--data` gives.
pub fn read_data(data: &str) -> Result<Vec<u8>> {
    let bytes = match data.strip_prefix('@') {
        Some("-") => {
            let mut buf = Vec::new();
            std::io::Read::read_to_end(&mut std::io::stdin(), &mut buf)
                .context("--data @-: cannot read standard input")?;
            buf
        }
        Some(file) => std::fs::read(file)
            .map_err(|e| anyhow::anyhow!("--data @{file}: {}", crate::replay::io_reason(&e)))?,
        None => {
            crate::layers::build::parse_hex(data).map_err(|e| anyhow::anyhow!("--data: {e}"))?
        }
    };
    if bytes.is_empty() {
        bail!("--data: the packet is empty");
    }
    Ok(bytes)
}

/// The runtime for one program, as `run` and `test` build it: one CPU, the packet's clock at
/// zero, the maps of `maps` (a bpftool JSON file).
pub fn replayer(
    object: &std::path::Path,
    program: Option<&str>,
    maps: Option<PathBuf>,
    engine: Engine,
    no_verify: bool,
    load: &LoadOptions,
) -> Result<Replayer> {
    let opts = ReplayOptions {
        object: object.to_owned(),
        program: program.map(str::to_owned),
        engine,
        ifindex: 1,
        cpus: 1,
        pinned_cpu: Some(0),
        maps,
        no_verify,
        load: load.clone(),
        ..ReplayOptions::default()
    };
    Replayer::new(&opts)
}

/// One run's result, as `run` prints it.
pub struct RunReport {
    pub outcome: XdpOutcome,
    pub before: RawMaps,
    pub after: RawMaps,
}

impl RunReport {
    /// The frame that leaves the program (after any metadata).
    pub fn frame(&self) -> &[u8] {
        let o = &self.outcome;
        &o.data_out[o.meta_len.min(o.data_out.len())..]
    }

    pub fn events(&self) -> Vec<Event> {
        events(&self.outcome)
    }
}

/// Runs `packet` `repeat` times; the last run's outcome and the maps around all of them.
pub fn run_packet(replayer: &mut Replayer, packet: &[u8], repeat: u32) -> Result<RunReport> {
    let before = replayer.raw_maps()?;
    let packet = Packet {
        index: 0,
        ts_ns: 0,
        data: packet.to_vec(),
        orig_len: packet.len() as u32,
    };
    let mut last = None;
    for _ in 0..repeat {
        last = Some(replayer.run(&packet).outcome);
    }
    let outcome = last
        .expect("repeat is at least 1")
        .map_err(|e| anyhow::anyhow!("the packet's run stopped: {e}"))?;
    let after = replayer.raw_maps()?;
    Ok(RunReport {
        outcome,
        before,
        after,
    })
}

/// `bpfemu run`: exit 0 when the program ran, 1 when its run stopped (a fault).
pub fn run(opts: &RunOptions) -> Result<u8> {
    let data = read_data(&opts.data)?;
    let mut replayer = replayer(
        &opts.object,
        opts.program.as_deref(),
        opts.maps.clone(),
        opts.engine,
        opts.no_verify,
        &opts.load,
    )?;
    crate::replay::print_warnings(&opts.object, replayer.object());
    let report = match run_packet(&mut replayer, &data, opts.repeat) {
        Ok(r) => r,
        Err(e) => {
            writeln!(std::io::stderr(), "bpfemu: {}: {e}", opts.object.display())?;
            return Ok(1);
        }
    };
    let changes = map_changes(&replayer, &report);
    let mut out = std::io::stdout().lock();
    if opts.json {
        writeln!(out, "{}", to_json(&report, &changes))?;
    } else {
        write!(out, "{}", to_text(&report, &changes))?;
    }
    Ok(0)
}

/// A map entry the run changed: the map, the entry typed by BTF (as bpftool shows it), and
/// whether the run deleted it.
pub struct MapChange {
    pub map: String,
    pub entry: String,
    pub deleted: bool,
}

pub fn map_changes(replayer: &Replayer, report: &RunReport) -> Vec<MapChange> {
    map_delta(&report.before, &report.after)
        .into_iter()
        .map(|((map, key), value)| {
            let (value, deleted) = match value {
                Some(v) => (v, false),
                None => (report.before[&map][&key].clone(), true),
            };
            MapChange {
                entry: describe_entry(replayer.object(), &map, &key, &value),
                map,
                deleted,
            }
        })
        .collect()
}

fn to_text(report: &RunReport, changes: &[MapChange]) -> String {
    let o = &report.outcome;
    let mut s = format!("action: {} (retval {})\n", o.action.name(), o.retval);
    let frame = report.frame();
    s += &format!("packet: {} bytes", frame.len());
    if o.meta_len > 0 {
        s += &format!(
            " after {} bytes of metadata ({})",
            o.meta_len,
            hex(&o.data_out[..o.meta_len])
        );
    }
    s += &format!(
        "\n  {}\n  {}\n",
        hex(frame),
        crate::layers::tcpdump::line(frame)
    );
    if let Some(target) = &o.redirect {
        s += &format!("redirect: {target}\n");
    }
    for c in changes {
        let verb = if c.deleted { "deleted" } else { "now" };
        s += &format!("map {}: {verb} {}\n", c.map, c.entry);
    }
    for e in report.events() {
        s += &format!("record: {}\n", e.to_text());
    }
    for line in &o.printk {
        s += &format!("printk: {line}\n");
    }
    s
}

fn to_json(report: &RunReport, changes: &[MapChange]) -> serde_json::Value {
    let o = &report.outcome;
    let frame = report.frame();
    let mut v = json!({
        "retval": o.retval,
        "action": o.action.name(),
        "data": hex(frame),
        "meta": hex(&o.data_out[..o.meta_len.min(o.data_out.len())]),
        "tcpdump": crate::layers::tcpdump::line(frame),
        "redirect": o.redirect.as_ref().map(ToString::to_string),
        "printk": o.printk,
        "events": report.events().iter().map(Event::to_json).collect::<Vec<_>>(),
    });
    v["maps"] = changes
        .iter()
        .map(|c| {
            let entry: serde_json::Value =
                serde_json::from_str(&c.entry).unwrap_or_else(|_| json!(c.entry));
            json!({ "map": c.map, "entry": entry, "deleted": c.deleted })
        })
        .collect();
    v
}
