//! `bpfemu replay --record/--check` as CI uses them: faults fail the run and are named by
//! region-relative places (never host addresses), so that their expectations are stable; the
//! file is compact and streamed (memory does not grow with the capture); a check names the
//! part of the run that changed, and a map difference lists only the entries that differ.

#[allow(dead_code)]
mod cli_support;

use bpfemu::pcap::{PcapReader, PcapWriter};
use cli_support::{Scratch, assert_exit, bpfemu, example, stderr, stdout};
use std::path::Path;
use std::process::{Command, Stdio};

/// The reflector with one instruction changed: `r3 = *(u8 *)(r7 + 12)` (the EtherType's
/// first byte, r7 = data) becomes a load at `off`, or an endless `goto -1` when `off` is None.
fn patched_reflector(dest: &str, off: Option<u16>) {
    let mut bytes = std::fs::read(example("xdp/build/reflector.v3.o")).unwrap();
    let load = [0x71, 0x73, 0x0c, 0, 0, 0, 0, 0];
    let at = bytes
        .windows(8)
        .position(|w| w == load)
        .expect("the reflector loads the EtherType");
    let insn: [u8; 8] = match off {
        Some(off) => {
            let [lo, hi] = off.to_le_bytes();
            [0x71, 0x73, lo, hi, 0, 0, 0, 0]
        }
        None => [0x05, 0, 0xff, 0xff, 0, 0, 0, 0],
    };
    bytes[at..at + 8].copy_from_slice(&insn);
    std::fs::write(dest, bytes).unwrap();
}

/// `--no-verify` when this bpfemu verifies before it runs (a patched program is one the
/// kernel's verifier would refuse; these tests are about what happens when it runs anyway).
fn unverified() -> Vec<&'static str> {
    let help = stdout(&bpfemu(&["replay", "--help"]));
    if help.contains("--no-verify") {
        vec!["--no-verify"]
    } else {
        Vec::new()
    }
}

fn replay(args: &[&str]) -> std::process::Output {
    let mut all = vec!["replay"];
    all.extend_from_slice(args);
    all.extend(unverified());
    bpfemu(&all)
}

/// A hex number long enough to be a host address (user space starts far above 4 GiB).
fn has_host_address(text: &str) -> bool {
    text.split(|c: char| !c.is_ascii_alphanumeric())
        .any(|w| w.starts_with("0x") && w.len() > 10)
}

/// The first `count` frames of a bundled capture, cycled, written as `dest`.
fn cycled_capture(dest: &str, source: &str, count: usize) {
    let frames: Vec<Vec<u8>> = PcapReader::open(Path::new(&example(source)))
        .unwrap()
        .map(|p| p.unwrap().data)
        .collect();
    let mut w = PcapWriter::create(Path::new(dest), true).unwrap();
    for (i, frame) in frames.iter().cycle().take(count).enumerate() {
        w.write(1_700_000_000_000_000_000 + i as u64 * 1000, frame)
            .unwrap();
    }
    w.finish().unwrap();
}

#[test]
fn faults_fail_the_replay_and_name_region_relative_places() {
    let dir = Scratch::new("exp-faults");
    let faulty = dir.path("faulty.o");
    // 1000 bytes past `data` is still inside the frame's own allocation, past data_end.
    patched_reflector(&faulty, Some(1000));
    let pcap = example("pcap/normal.pcap");

    let out = replay(&[&faulty, &pcap]);
    assert_exit(&out, 1);
    let table = stdout(&out);
    let line = table
        .lines()
        .find(|l| l.contains("packets faulted"))
        .unwrap_or_else(|| panic!("no fault line in\n{table}"));
    assert!(
        line.starts_with("180 packets faulted, the first: packet 0: ")
            && line.contains("insn 8: invalid read of 1 byte at pkt+1000: 927 bytes past the end of packet (74 bytes)"),
        "{line}"
    );
    assert!(!has_host_address(&table) && !has_host_address(&stderr(&out)));

    let out = replay(&["--json", &faulty, &pcap]);
    assert_exit(&out, 1);
    let json = stdout(&out);
    assert!(!has_host_address(&json), "{json}");
    let summary: serde_json::Value = serde_json::from_str(json.lines().last().unwrap()).unwrap();
    assert_eq!(summary["summary"]["faulted"], 180);
    assert_eq!(summary["summary"]["first_fault"]["index"], 0);

    // Recorded twice, the same file; checked, the same behaviour (the faults still fail it).
    let (a, b) = (dir.path("a.json"), dir.path("b.json"));
    assert_exit(&replay(&[&faulty, &pcap, "--record", &a]), 1);
    assert_exit(&replay(&[&faulty, &pcap, "--record", &b]), 1);
    let recorded = std::fs::read_to_string(&a).unwrap();
    assert_eq!(recorded, std::fs::read_to_string(&b).unwrap());
    assert!(!has_host_address(&recorded));
    let out = replay(&[&faulty, &pcap, "--check", &a]);
    assert_exit(&out, 1);
    assert!(
        stderr(&out).contains("check passed: 200 packets"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn runs_cut_by_the_instruction_budget_fail_the_replay() {
    let dir = Scratch::new("exp-budget");
    let looping = dir.path("loop.o");
    patched_reflector(&looping, None);
    let pcap = dir.path("two.pcap");
    cycled_capture(&pcap, "pcap/normal.pcap", 2);
    let out = replay(&[&looping, &pcap]);
    assert_exit(&out, 1);
    let table = stdout(&out);
    assert!(
        table.contains("2 packets faulted, the first: packet 0: ")
            && table.contains("instruction budget exhausted"),
        "{table}"
    );
}

#[test]
fn a_check_names_what_changed_in_the_run() {
    let dir = Scratch::new("exp-identity");
    let obj = example("xdp/build/reflector.v3.o");
    let pcap = example("pcap/normal.pcap");
    let exp = dir.path("exp.json");
    assert_exit(&bpfemu(&["replay", &obj, &pcap, "--record", &exp]), 0);
    // Compact: 200 packets, a few dozen bytes each.
    let size = std::fs::metadata(&exp).unwrap().len();
    assert!(size < 12_000, "{size} bytes for 200 packets");
    assert_exit(&bpfemu(&["replay", &obj, &pcap, "--check", &exp]), 0);

    let out = bpfemu(&[
        "replay", &obj, &pcap, "--check", &exp, "--seed", "7", "--cpus", "2", "--rxq", "0",
    ]);
    assert_exit(&out, 1);
    let report = stderr(&out);
    assert!(
        report.contains("--seed: recorded 0, now 7")
            && report.contains("--cpus: recorded 1, now 2")
            && report.contains("--rxq: recorded the RSS queue, now 0"),
        "{report}"
    );
    assert!(report.len() < 400, "{report}");

    let out = bpfemu(&[
        "replay",
        &obj,
        &example("pcap/attack.pcap"),
        "--check",
        &exp,
    ]);
    assert_exit(&out, 1);
    assert!(
        stderr(&out).contains("capture: recorded sha256 "),
        "{}",
        stderr(&out)
    );

    let maps = dir.path("maps.json");
    std::fs::write(&maps, "{}").unwrap();
    let out = bpfemu(&["replay", &obj, &pcap, "--check", &exp, "--maps", &maps]);
    assert_exit(&out, 1);
    assert!(
        stderr(&out).contains("--maps: recorded none, now maps.json (sha256 "),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_changed_program_is_compared_and_its_map_differences_listed() {
    let dir = Scratch::new("exp-maps");
    let obj = example("xdp/build/reflector.v3.o");
    let pcap = example("pcap/normal.pcap");
    let exp = dir.path("exp.json");
    assert_exit(&bpfemu(&["replay", &obj, &pcap, "--record", &exp]), 0);
    // The reflector counting each protocol by 2 (`*cnt += 1` becomes `+= 2`): the packets
    // are the same, the `proto_count` entries of the protocols seen are not.
    let changed = dir.path("changed.o");
    let mut bytes = std::fs::read(&obj).unwrap();
    let increment = [
        [0x79, 0x01, 0, 0, 0, 0, 0, 0],
        [0x07, 0x01, 0, 0, 1, 0, 0, 0],
        [0x7b, 0x10, 0, 0, 0, 0, 0, 0],
    ]
    .concat();
    let at = bytes
        .windows(24)
        .position(|w| w == increment)
        .expect("the reflector increments its counter");
    bytes[at + 12] = 2;
    std::fs::write(&changed, &bytes).unwrap();

    let out = bpfemu(&["replay", &changed, &pcap, "--check", &exp]);
    assert_exit(&out, 1);
    let report = stderr(&out);
    assert!(
        report.contains("the object changed since the recording"),
        "{report}"
    );
    assert!(!report.contains("packet "), "{report}");
    assert!(report.contains("map proto_count: "), "{report}");
    assert!(
        report.contains("\n  key 11000000\n    expected "),
        "{report}"
    );
    assert!(report.lines().any(|l| l.trim_start().starts_with("got ")));
    assert!(report.len() < 4000, "{} bytes:\n{report}", report.len());
}

/// Peak resident memory (VmHWM, KiB) of `bpfemu ARGS`, sampled until it exits.
fn peak_kib(args: &[&str]) -> u64 {
    let mut child = Command::new(env!("CARGO_BIN_EXE_bpfemu"))
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let status = format!("/proc/{}/status", child.id());
    let mut peak = 0;
    while child.try_wait().unwrap().is_none() {
        if let Ok(text) = std::fs::read_to_string(&status)
            && let Some(kib) = text
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        {
            peak = peak.max(kib);
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    peak
}

#[test]
fn record_and_check_memory_does_not_grow_with_the_capture() {
    let dir = Scratch::new("exp-memory");
    let obj = example("xdp/build/reflector.v3.o");
    let (small, large) = (dir.path("small.pcap"), dir.path("large.pcap"));
    cycled_capture(&small, "pcap/normal.pcap", 1_000);
    cycled_capture(&large, "pcap/normal.pcap", 30_000);
    let (es, el) = (dir.path("s.json"), dir.path("l.json"));
    let record_small = peak_kib(&["replay", &obj, &small, "--record", &es]);
    let record_large = peak_kib(&["replay", &obj, &large, "--record", &el]);
    let check_large = peak_kib(&["replay", &obj, &large, "--check", &el]);
    assert!(
        record_large < record_small + 4096 && check_large < record_small + 4096,
        "peak KiB: record 1000 packets {record_small}, record 30000 {record_large}, check 30000 {check_large}"
    );
    let size = std::fs::metadata(&el).unwrap().len();
    assert!(size < 30_000 * 60, "{size} bytes for 30000 packets");
}

/// A plain replay reads a capture file through a mapping: the pages it has read are let go
/// as it goes, so its resident memory does not grow with the file either.
#[test]
fn replay_memory_does_not_grow_with_the_mapped_capture() {
    let dir = Scratch::new("replay-memory");
    let obj = example("xdp/build/reflector.v3.o");
    let (small, large) = (dir.path("small.pcap"), dir.path("large.pcap"));
    cycled_capture(&small, "pcap/normal.pcap", 1_000);
    cycled_capture(&large, "pcap/normal.pcap", 150_000);
    let replay_small = peak_kib(&["replay", &obj, &small]);
    let replay_large = peak_kib(&["replay", &obj, &large]);
    let file_kib = std::fs::metadata(&large).unwrap().len() / 1024;
    // Kept pages would grow the peak by the file's size (34 MiB); what the reader keeps
    // mapped at once (a release step, the kernel's fault-around, the allocator) is a few MiB
    // whatever the file's size.
    assert!(
        replay_large < replay_small + file_kib / 4,
        "peak KiB: 1000 packets {replay_small}, 150000 packets {replay_large} (a file of {file_kib} KiB)"
    );
}
