//! Every numeric option of every command at 0, 1 and its maximum: an answer or a one-line
//! error, never a panic or an abort, and memory that does not follow the number (`bench
//! --packets` cycles the capture instead of materialising it). Names are checked before work.

#[allow(dead_code)]
mod cli_support;

use cli_support::{example, kernel_or_skip, root, stderr};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How a run ended: its exit code and standard error, or still running (and how much memory
/// it held) when the time was up.
enum Ending {
    Exited { code: Option<i32>, stderr: String },
    StillRunning { peak_kib: u64 },
}

fn peak_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|text| {
            text.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

fn run_for(args: &[String], limit: Duration) -> Ending {
    let mut child = Command::new(env!("CARGO_BIN_EXE_bpfemu"))
        .args(args)
        .current_dir(root())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    let mut peak = 0;
    loop {
        if child.try_wait().unwrap().is_some() {
            let out = child.wait_with_output().unwrap();
            return Ending::Exited {
                code: out.status.code(),
                stderr: stderr(&out),
            };
        }
        peak = peak.max(peak_kib(child.id()));
        if start.elapsed() > limit {
            child.kill().unwrap();
            child.wait().unwrap();
            return Ending::StillRunning { peak_kib: peak };
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `bpfemu BASE OPTION VALUE` for VALUE in 0, 1 and `max`: each ends with 0, 1 or 2 and, on 2,
/// one line of error; or, when `may_run_on`, is still running after a few seconds in
/// bounded memory.
fn at_the_edges(base: &[&str], option: &str, max: &str, may_run_on: bool) {
    for value in ["0", "1", max] {
        let value = match option {
            "--map-size" => format!("proto_count={value}"),
            _ => value.to_owned(),
        };
        let mut args: Vec<String> = base.iter().map(|s| s.to_string()).collect();
        args.push(option.into());
        args.push(value.clone());
        let limit = Duration::from_secs(if may_run_on { 4 } else { 20 });
        match run_for(&args, limit) {
            Ending::Exited { code, stderr } => {
                assert!(
                    matches!(code, Some(0..=2)),
                    "{args:?} ended with {code:?}: {stderr}"
                );
                assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
                if code == Some(2) {
                    // One line of error (clap adds its pointer to --help to its own).
                    let said = stderr
                        .lines()
                        .filter(|l| !l.is_empty() && !l.starts_with("For more information"))
                        .count();
                    assert_eq!(said, 1, "{args:?}: {stderr}");
                }
            }
            Ending::StillRunning { peak_kib } => {
                assert!(may_run_on, "{args:?} still runs after {limit:?}");
                assert!(peak_kib < 100 << 10, "{args:?} holds {peak_kib} KiB");
            }
        }
    }
}

const U32_MAX: &str = "4294967295";
const U64_MAX: &str = "18446744073709551615";

#[test]
fn replay_options_at_their_edges() {
    let obj = example("xdp/build/reflector.v3.o");
    let pcap = example("pcap/normal.pcap");
    let base = ["replay", obj.as_str(), pcap.as_str()];
    at_the_edges(&base, "--ifindex", U32_MAX, false);
    at_the_edges(&base, "--rxq", U32_MAX, false);
    at_the_edges(&base, "--cpus", "256", false);
    at_the_edges(&base, "--cpus", U32_MAX, false);
    at_the_edges(&base, "--seed", U64_MAX, false);
    at_the_edges(&base, "--map-size", U32_MAX, false);
}

#[test]
fn load_options_at_their_edges() {
    let obj = example("xdp/build/reflector.v3.o");
    at_the_edges(&["inspect", &obj], "--map-size", U32_MAX, false);
    at_the_edges(&["disasm", &obj], "--map-size", U32_MAX, false);
    at_the_edges(&["verify", &obj], "--map-size", U32_MAX, false);
    at_the_edges(&["verify", &obj], "--log-level", "2", false);
    at_the_edges(&["verify", &obj], "--log-level", U64_MAX, false);
}

#[test]
fn bench_packets_at_their_edges_in_bounded_memory() {
    let obj = example("xdp/build/reflector.v3.o");
    let pcap = example("pcap/normal.pcap");
    let base = ["bench", obj.as_str(), pcap.as_str()];
    at_the_edges(&base, "--packets", "1000000000000", true);
    at_the_edges(&base, "--packets", U64_MAX, true);
    at_the_edges(
        &["bench", &obj, &pcap, "--packets", "10"],
        "--map-size",
        U32_MAX,
        false,
    );
}

#[test]
fn a_wrong_program_name_fails_before_the_work() {
    let obj = example("xdp/build/reflector.v3.o");
    let pcap = example("pcap/normal.pcap");
    for args in [
        vec![
            "bench",
            &obj,
            &pcap,
            "--prog",
            "nope",
            "--packets",
            "1000000000000",
        ],
        vec!["replay", &obj, &pcap, "--prog", "nope"],
    ] {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        let start = Instant::now();
        match run_for(&args, Duration::from_secs(10)) {
            Ending::Exited { code, stderr } => {
                assert_eq!(code, Some(2), "{stderr}");
                assert!(stderr.contains("program `nope`"), "{stderr}");
            }
            Ending::StillRunning { .. } => panic!("{args:?} still runs"),
        }
        assert!(start.elapsed() < Duration::from_secs(5));
    }
}

#[test]
fn diff_options_at_their_edges() {
    if !kernel_or_skip("diff_options_at_their_edges") {
        return;
    }
    let obj = example("xdp/build/reflector.v3.o");
    let pcap = example("pcap/normal.pcap");
    let base = ["diff", obj.as_str(), pcap.as_str()];
    at_the_edges(&base, "--seed", U64_MAX, false);
    at_the_edges(&base, "--map-size", U32_MAX, false);
    at_the_edges(&base, "--ifindex", U32_MAX, false);
    at_the_edges(&base, "--rxq", U32_MAX, false);
}
