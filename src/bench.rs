//! `bpfemu bench`: how fast bpfemu runs a program over a capture, as a ratio against a peer
//! measured in the same run on the same pinned CPU: the kernel itself, running the same
//! packets with the same map contents through `BPF_PROG_TEST_RUN`.
//!
//! Two kernel figures are given: wall time with one syscall a packet (what a tool driving the
//! kernel pays), and the time test_run reports for the program alone (the JIT's own speed).
//! Without root or `bpf()` the peer is out of reach: bpfemu's figure is given alone and the
//! report says why.

use crate::diff::{self, DiffOptions, Session, Throughput};
use crate::pcap::PcapReader;
use crate::replay::{ReplayOptions, Replayer};
use anyhow::{Context, Result, bail};
use serde_json::json;
use std::path::PathBuf;
use std::time::Instant;

#[derive(Clone, Debug, Default)]
pub struct BenchOptions {
    pub object: PathBuf,
    pub capture: PathBuf,
    pub program: Option<String>,
    pub maps: Option<PathBuf>,
    pub fib: Option<PathBuf>,
    /// Packets to run: the capture's, repeated (or cut) to this many.
    pub packets: usize,
    pub load: bpfemu_loader::LoadOptions,
}

/// The measured figures.
#[derive(Clone, Debug)]
pub struct BenchReport {
    pub program: String,
    pub throughput: Throughput,
    /// Why there is no kernel figure, when there is none.
    pub no_peer: Option<String>,
}

/// The capture's frames, once: a run cycles through them up to `--packets`, so that memory
/// stays that of the capture however many packets are asked for.
fn frames(opts: &BenchOptions) -> Result<Vec<Vec<u8>>> {
    let read: Vec<Vec<u8>> = PcapReader::open(&opts.capture)?
        .map(|p| p.map(|p| p.data))
        .collect::<Result<_, _>>()?;
    if read.is_empty() {
        bail!("{}: no packets", opts.capture.display());
    }
    Ok(read)
}

pub fn bench(opts: &BenchOptions) -> Result<BenchReport> {
    match diff::kernel_ready() {
        Ok(()) => with_kernel(opts),
        Err(why) => alone(opts, why),
    }
}

fn with_kernel(opts: &BenchOptions) -> Result<BenchReport> {
    let diff_opts = DiffOptions {
        program: opts.program.clone(),
        load: opts.load.clone(),
        fib: opts.fib.clone(),
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
    // The program and maps first: a wrong name fails before the capture is read.
    let mut session = Session::open_with_maps(&diff_opts, doc.as_ref())?;
    let frames = frames(opts)?;
    let throughput = session.throughput(&frames, opts.packets);
    Ok(BenchReport {
        program: session.program_name().to_owned(),
        throughput,
        no_peer: None,
    })
}

/// bpfemu only, through the replay path (the kernel is out of reach).
fn alone(opts: &BenchOptions, why: String) -> Result<BenchReport> {
    let replay_opts = ReplayOptions {
        object: opts.object.clone(),
        program: opts.program.clone(),
        maps: opts.maps.clone(),
        fib: opts.fib.clone(),
        load: opts.load.clone(),
        cpus: 1,
        ifindex: 1,
        ..ReplayOptions::default()
    };
    let mut replayer = Replayer::new(&replay_opts)?;
    // Built before the clock starts: the measurement is of running packets, not copying them.
    let packets: Vec<crate::pcap::Packet> = frames(opts)?
        .into_iter()
        .enumerate()
        .map(|(index, data)| crate::pcap::Packet {
            index,
            ts_ns: index as u64 * 1000,
            orig_len: data.len() as u32,
            data,
        })
        .collect();
    let start = Instant::now();
    let mut insns = 0;
    for packet in packets.iter().cycle().take(opts.packets) {
        if let Ok(outcome) = replayer.run(packet).outcome {
            insns += outcome.insns_executed;
        }
    }
    let throughput = Throughput {
        packets: opts.packets,
        ours: start.elapsed(),
        insns,
        kernel: Default::default(),
        kernel_program_ns: 0,
    };
    Ok(BenchReport {
        program: replayer.program_name.clone(),
        throughput,
        no_peer: Some(why),
    })
}

fn per_sec(count: f64, secs: f64) -> f64 {
    count / secs.max(1e-9)
}

impl BenchReport {
    pub fn to_text(&self) -> String {
        let t = &self.throughput;
        if t.packets == 0 {
            // No time was measured: a speed or a ratio would be noise.
            return format!("0 packets through {}: nothing measured\n", self.program);
        }
        let n = t.packets as f64;
        let ours = t.ours.as_secs_f64();
        let mut out = format!(
            "{} packets through {}\n  bpfemu (interpreter)             {:>8.3} s  {:>12.0} packets/s  {:>6.1} M insns/s\n",
            t.packets,
            self.program,
            ours,
            per_sec(n, ours),
            per_sec(t.insns as f64, ours) / 1e6,
        );
        if let Some(why) = &self.no_peer {
            out += &format!("  kernel: not measured ({why})\n");
            return out;
        }
        let kernel = t.kernel.as_secs_f64();
        let program = t.kernel_program_ns as f64 / 1e9;
        out += &format!(
            "  kernel, a test_run a packet      {:>8.3} s  {:>12.0} packets/s\n  kernel, program time only        {:>8.3} s  {:>12.0} packets/s\n",
            kernel,
            per_sec(n, kernel),
            program,
            per_sec(n, program),
        );
        out += &format!(
            "  bpfemu / kernel: {:.2}x the speed of test_run calls, {:.3}x the JIT's program time\n",
            kernel / ours.max(1e-9),
            program / ours.max(1e-9),
        );
        out
    }

    pub fn to_json(&self) -> serde_json::Value {
        let t = &self.throughput;
        let n = t.packets as f64;
        let ours = t.ours.as_secs_f64();
        let mut doc = json!({
            "program": self.program,
            "packets": t.packets,
            "bpfemu": { "seconds": ours, "packets_per_sec": per_sec(n, ours), "insns": t.insns },
        });
        match &self.no_peer {
            _ if t.packets == 0 => doc["bpfemu"] = json!({ "seconds": ours, "insns": t.insns }),
            Some(why) => doc["kernel"] = json!({ "unavailable": why }),
            None => {
                let kernel = t.kernel.as_secs_f64();
                let program = t.kernel_program_ns as f64 / 1e9;
                doc["kernel"] = json!({
                    "test_run_seconds": kernel,
                    "test_run_packets_per_sec": per_sec(n, kernel),
                    "program_seconds": program,
                    "program_packets_per_sec": per_sec(n, program),
                });
                doc["ratio_to_test_run"] = json!(kernel / ours.max(1e-9));
                doc["ratio_to_program_time"] = json!(program / ours.max(1e-9));
            }
        }
        doc
    }
}
