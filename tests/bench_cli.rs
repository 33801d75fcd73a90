//! `bpfemu bench`: the packet count it was asked for, bpfemu's figures, and the kernel's beside
//! them (or the reason they are missing).

use std::path::Path;
use std::process::Command;

fn bench(extra: &[&str]) -> serde_json::Value {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = Command::new(env!("CARGO_BIN_EXE_bpfemu"))
        .arg("bench")
        .arg(root.join("examples/xdp/build/reflector.v3.o"))
        .arg(root.join("examples/pcap/normal.pcap"))
        .args(["--packets", "3000", "--json"])
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
    let doc = bench(&[]);
    assert_eq!(doc["packets"], 3000);
    assert_eq!(doc["program"], "xdp_reflector");
    let ours = &doc["bpfemu"];
    assert!(ours["packets_per_sec"].as_f64().unwrap() > 0.0);
    // 3000 packets of normal.pcap: 61.3 instructions a packet on average (the 1M run's mean).
    let insns = ours["insns"].as_u64().unwrap();
    assert!((150_000..250_000).contains(&insns), "{insns} instructions");
    if !bpfemu_conformance::libbpf::kernel_or_skip("bench_reports_both_sides") {
        assert!(doc["kernel"]["unavailable"].is_string());
        return;
    }
    let kernel = &doc["kernel"];
    let test_run = kernel["test_run_seconds"].as_f64().unwrap();
    assert!(test_run > 0.0 && kernel["program_seconds"].as_f64().unwrap() > 0.0);
    let ratio = doc["ratio_to_test_run"].as_f64().unwrap();
    let expected = test_run / ours["seconds"].as_f64().unwrap();
    assert!((ratio - expected).abs() < 1e-9 * expected.max(1.0));
}
