//! `bpfemu bench`: the packet count it was asked for, the figures of each of bpfemu's engines
//! (interpreter, JIT checked, JIT trusted), and the kernel's beside them (or the reason they are
//! missing).

use std::path::Path;
use std::process::Command;

fn bench(packets: usize) -> serde_json::Value {
    bench_with(packets, &[])
}

fn bench_with(packets: usize, extra: &[&str]) -> serde_json::Value {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = Command::new(env!("CARGO_BIN_EXE_bpfemu"))
        .arg("bench")
        .arg(root.join("examples/xdp/build/reflector.v3.o"))
        .arg(root.join("examples/pcap/normal.pcap"))
        .args(["--packets", &packets.to_string(), "--json"])
        .args(extra)
        .output()
        .expect("bpfemu runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON")
}

#[test]
fn bench_reports_both_sides() {
    let doc = bench(3000);
    assert_eq!(doc["packets"], 3000);
    assert_eq!(doc["capture_packets"], 200);
    assert_eq!(doc["program"], "xdp_reflector");
    let interp = &doc["engines"][0];
    assert_eq!(interp["engine"], "interp");
    assert!(interp["packets_per_sec"].as_f64().unwrap() > 0.0);
    assert_eq!(interp["errors"], 0);
    // 3000 packets of normal.pcap: 61.3 instructions a packet on average (the 1M run's mean).
    let insns = interp["insns"].as_u64().unwrap();
    assert!((150_000..250_000).contains(&insns), "{insns} instructions");
    let per_packet = interp["ns_per_packet"].as_f64().unwrap();
    let cpu = interp["cpu_seconds"].as_f64().unwrap();
    assert!((per_packet - cpu * 1e9 / 3000.0).abs() < 1e-6 * per_packet);
    if !bpfemu_conformance::libbpf::kernel_or_skip("bench_reports_both_sides") {
        assert!(doc["kernel"]["unavailable"].is_string());
        assert!(interp.get("ratio_to_kernel").is_none());
        return;
    }
    let kernel = &doc["kernel"];
    // The 200 distinct packets, each test-run once with its repeat count.
    assert_eq!(kernel["test_run_calls"], 200);
    assert_eq!(kernel["errors"], 0);
    let program = kernel["program_seconds"].as_f64().unwrap();
    assert!(program > 0.0);
    for engine in doc["engines"].as_array().unwrap() {
        let cpu = engine["cpu_seconds"].as_f64().unwrap();
        let ratio = engine["time_vs_kernel"].as_f64().unwrap();
        assert!((ratio - cpu / program).abs() < 1e-9 * ratio.max(1.0));
    }
}

#[test]
fn bench_runs_every_engine_on_the_same_packets() {
    let doc = bench(1000);
    let engines = doc["engines"].as_array().unwrap();
    let names: Vec<&str> = engines
        .iter()
        .map(|e| e["engine"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "interp",
            "jit",
            "jit-trusted",
            "jit-baseline",
            "jit-baseline-checked"
        ]
    );
    let interp_insns = engines[0]["insns"].as_u64().unwrap();
    for engine in engines {
        assert_eq!(engine["errors"], 0, "{engine}");
        // Every engine ran the same instructions on the same packets.
        assert_eq!(engine["insns"].as_u64().unwrap(), interp_insns, "{engine}");
        assert!(engine["ns_per_packet"].as_f64().unwrap() > 0.0);
    }
    // The interpreter compiles nothing; the JIT's compile is part of its preparation.
    assert_eq!(engines[0]["compile_ms"].as_f64().unwrap(), 0.0);
    for jit in &engines[1..] {
        let compile = jit["compile_ms"].as_f64().unwrap();
        assert!(compile > 0.0 && compile <= jit["prepare_ms"].as_f64().unwrap());
    }
}

#[test]
fn bench_cycles_a_capture_shorter_than_the_count() {
    // 250 packets of a 200-packet capture: the first 50 run twice.
    let doc = bench(250);
    assert_eq!(doc["packets"], 250);
    let insns = doc["engines"][0]["insns"].as_u64().unwrap();
    let once = bench(200)["engines"][0]["insns"].as_u64().unwrap();
    let first_fifty = bench(50)["engines"][0]["insns"].as_u64().unwrap();
    assert_eq!(insns, once + first_fifty);
}

#[test]
fn bench_measures_only_the_engines_asked_for() {
    let doc = bench_with(400, &["--engine", "jit-trusted", "--engine", "interp"]);
    let engines = doc["engines"].as_array().unwrap();
    let names: Vec<&str> = engines
        .iter()
        .map(|e| e["engine"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["jit-trusted", "interp"]);
    assert_eq!(engines[0]["insns"], engines[1]["insns"]);
}

#[test]
fn bench_reports_replay_beside_test_run() {
    // The reflector swaps addresses: a packet run again does the same work, so both loops
    // count the same instructions; replay's loop loads each packet, test_run's once.
    let doc = bench(600);
    for engine in doc["engines"].as_array().unwrap() {
        let replay = &engine["replay"];
        assert_eq!(replay["insns"], engine["insns"], "{engine}");
        assert_eq!(replay["errors"], 0);
        let cpu = replay["cpu_seconds"].as_f64().unwrap();
        let per_packet = replay["ns_per_packet"].as_f64().unwrap();
        assert!((per_packet - cpu * 1e9 / 600.0).abs() < 1e-6 * per_packet.max(1.0));
    }
}

/// `--cpu N` pins the measurements to CPU N: started by `taskset` on one CPU, bench finds
/// itself on the other at the end of its measurements, and reports it; a CPU the machine
/// does not have is bad input.
#[test]
fn bench_runs_on_the_cpu_asked_for() {
    let cpus = std::thread::available_parallelism().map_or(1, usize::from);
    if cpus < 2 {
        eprintln!("bench_runs_on_the_cpu_asked_for: skipping: one CPU");
        return;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let run = |started_on: &str, cpu: &str| {
        Command::new("taskset")
            .args(["-c", started_on, env!("CARGO_BIN_EXE_bpfemu"), "bench"])
            .arg(root.join("examples/xdp/build/reflector.v3.o"))
            .arg(root.join("examples/pcap/normal.pcap"))
            .args([
                "--packets",
                "200",
                "--engine",
                "interp",
                "--cpu",
                cpu,
                "--json",
            ])
            .output()
            .expect("taskset runs")
    };
    for (started_on, cpu) in [("0", "1"), ("1", "0")] {
        let out = run(started_on, cpu);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
        assert_eq!(doc["cpu"].to_string(), cpu, "started on {started_on}");
    }
    let absent = (cpus + 64).to_string();
    let out = run("0", &absent);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with(&format!("bpfemu: --cpu {absent}: ")),
        "{err}"
    );
}
