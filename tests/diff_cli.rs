//! `bpfemu diff` against the running kernel, through the command line: the corpus times the
//! bundled captures gives 0 mismatches; a mismatch is printed with both sides and a hex diff
//! and exits 1; `--verifier` reports every corpus program accepted with its statistics;
//! `conformance --kernel` agrees; without privileges the command says so and exits 2.
//!
//! Skipped with a message when bpf() is out of reach, unless `BPFEMU_REQUIRE_KERNEL=1`.

mod common;

use bpfemu::diff::{self, Outcome, PacketVerdict};
use bpfemu_conformance::libbpf::kernel_or_skip;
use bpfemu_vm::taint::TaintSource;
use bpfemu_vm::xdp::PacketTaint;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn bpfemu(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_bpfemu"))
        .args(args)
        .current_dir(root())
        .output()
        .expect("bpfemu runs")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Objects left out of the packet comparison, with the reason:
/// - `router`: `bpf_fib_lookup` reads the kernel's routing table; compared with `--fib` (the
///   kernel side then runs in a namespace built from the file) below, and without it (a
///   fresh namespace on both sides);
/// - `legacy_maps`: libbpf >= 1.0 refuses it (expected).
const NOT_COMPARED: &[&str] = &["router", "legacy_maps"];

fn corpus(level: &str) -> Vec<PathBuf> {
    common::corpus(level, NOT_COMPARED)
        .into_iter()
        .map(|(_, path)| path)
        .collect()
}

fn captures() -> Vec<PathBuf> {
    let mut caps: Vec<PathBuf> = std::fs::read_dir(root().join("examples/pcap"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "pcap"))
        .collect();
    caps.sort();
    caps
}

/// `--prog` for objects with several XDP programs: the entry one.
fn prog_args(obj: &Path) -> Vec<String> {
    let name = obj.file_name().unwrap().to_string_lossy();
    if name.starts_with("tailcall.") {
        vec!["--prog".into(), "xdp_entry".into()]
    } else {
        Vec::new()
    }
}

/// Runs `bpfemu diff` and checks the last line says `N packets, 0 mismatches` and exit 0;
/// returns N.
fn diff_clean(obj: &Path, cap: &Path, extra: &[&str]) -> usize {
    let mut args: Vec<String> = vec![
        "diff".into(),
        obj.display().to_string(),
        cap.display().to_string(),
    ];
    args.extend(prog_args(obj));
    args.extend(extra.iter().map(|s| s.to_string()));
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = bpfemu(&refs);
    let stdout = text(&out.stdout);
    let last = stdout.lines().last().unwrap_or_default().to_owned();
    assert!(
        out.status.code() == Some(0) && last.ends_with(" packets, 0 mismatches"),
        "{} x {}: exit {:?}\n{stdout}\n{}",
        obj.display(),
        cap.display(),
        out.status.code(),
        text(&out.stderr)
    );
    last.split_whitespace().next().unwrap().parse().unwrap()
}

#[test]
fn corpus_v3_times_every_capture_has_no_mismatch() {
    if !kernel_or_skip("corpus_v3_times_every_capture_has_no_mismatch") {
        return;
    }
    let mut packets = 0;
    let objs = corpus("v3");
    assert!(objs.len() >= 15, "{objs:?}");
    for obj in &objs {
        for cap in captures() {
            packets += diff_clean(obj, &cap, &[]);
        }
    }
    eprintln!(
        "{} objects x {} captures: {packets} packets, 0 mismatches",
        objs.len(),
        captures().len()
    );
}

#[test]
fn corpus_v2_and_v4_have_no_mismatch() {
    if !kernel_or_skip("corpus_v2_and_v4_have_no_mismatch") {
        return;
    }
    for level in ["v2", "v4"] {
        for obj in corpus(level) {
            for cap in ["normal.pcap", "malformed.pcap"] {
                diff_clean(&obj, &root().join("examples/pcap").join(cap), &[]);
            }
        }
    }
}

/// Every corpus program under the baseline JIT (`--engine jit-baseline`, trusted code from
/// the baseline compiler, run after bpfemu's verifier accepted it) agrees with the kernel: v3
/// over every capture, v2 and v4 over the normal and malformed ones.
#[test]
fn corpus_has_no_mismatch_under_the_baseline_jit() {
    if !kernel_or_skip("corpus_has_no_mismatch_under_the_baseline_jit") {
        return;
    }
    assert!(corpus_packets_clean_under("jit-baseline") > 0);
}

/// Every corpus program under the baseline JIT's checked code (`--engine
/// jit-baseline-checked`, no verifier involved) agrees with the kernel, over the same
/// captures as the trusted baseline.
#[test]
fn corpus_has_no_mismatch_under_the_checked_baseline_jit() {
    if !kernel_or_skip("corpus_has_no_mismatch_under_the_checked_baseline_jit") {
        return;
    }
    assert!(corpus_packets_clean_under("jit-baseline-checked") > 0);
}

/// The corpus through `engine` against the kernel, every packet equal: v3 over every capture,
/// v2 and v4 over the normal and malformed ones. Gives the packets compared.
fn corpus_packets_clean_under(engine: &str) -> usize {
    let engine = ["--engine", engine];
    let mut packets = 0;
    for obj in corpus("v3") {
        for cap in captures() {
            packets += diff_clean(&obj, &cap, &engine);
        }
    }
    for level in ["v2", "v4"] {
        for obj in corpus(level) {
            for cap in ["normal.pcap", "malformed.pcap"] {
                packets += diff_clean(&obj, &root().join("examples/pcap").join(cap), &engine);
            }
        }
    }
    packets
}

/// l4lb with VIPs set through `--maps`: the connection table fills on both sides; its
/// `last_seen_ns` holds clock readings and is reported as not compared, the rest is equal.
#[test]
fn clock_fields_are_reported_not_compared() {
    if !kernel_or_skip("clock_fields_are_reported_not_compared") {
        return;
    }
    let mut vips = Vec::new();
    for host in 1..=20u8 {
        for proto in [6u8, 17] {
            // vip_key {addr 192.0.2.host, port 0, proto, pad} -> vip_meta {F_NO_PORT, 0}
            vips.push(serde_json::json!([
                format!("c00002{host:02x}0000{proto:02x}00"),
                "0100000000000000"
            ]));
        }
    }
    let doc = serde_json::json!({
        "vip_map": vips,
        "reals": [["00000000", "c633640100000000"]],
        "ctl_array": [["00000000", "0200000000990000c0000201"]],
    });
    let file = std::env::temp_dir().join(format!("bpfemu-diff-l4lb-{}.json", std::process::id()));
    std::fs::write(&file, doc.to_string()).unwrap();
    let obj = root().join("examples/xdp/build/l4lb.v3.o");
    let cap = root().join("examples/pcap/normal.pcap");
    let out = bpfemu(&[
        "diff",
        obj.to_str().unwrap(),
        cap.to_str().unwrap(),
        "--maps",
        file.to_str().unwrap(),
        "--json",
    ]);
    let _ = std::fs::remove_file(&file);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["summary"]["mismatches"], 0, "{report:#}");
    assert_eq!(
        report["nondeterminism"]["clock"][0]["helper"],
        "bpf_ktime_get_ns"
    );
    let conn = report["maps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "conn_table")
        .unwrap();
    assert!(conn["kernel_entries"].as_u64().unwrap() > 0, "{conn:#}");
    assert_eq!(conn["kernel_entries"], conn["equal_entries"]);
    let fields: Vec<&str> = conn["not_compared_fields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["field"].as_str().unwrap())
        .collect();
    assert_eq!(fields, ["last_seen_ns"], "{conn:#}");
    // Maps of a program that reads no clock have nothing left out.
    let stats = report["maps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "lb_stats")
        .unwrap();
    assert_eq!(stats["not_compared_fields"].as_array().unwrap().len(), 0);
    assert!(stats["equal_entries"].as_u64().unwrap() > 0);
}

/// The router without a FIB: both sides answer `bpf_fib_lookup` as a fresh network namespace
/// does (bpfemu from `Fib::fresh_netns`, the kernel side inside a new namespace): no
/// mismatches, exit 0, whatever the host's routes are.
#[test]
fn router_without_fib_equals_the_kernel_in_a_fresh_namespace() {
    if !kernel_or_skip("router_without_fib_equals_the_kernel_in_a_fresh_namespace") {
        return;
    }
    let obj = root().join("examples/xdp/build/router.v3.o");
    let cap = root().join("examples/pcap/normal.pcap");
    let out = bpfemu(&["diff", obj.to_str().unwrap(), cap.to_str().unwrap()]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(!stdout.contains("MISMATCH"), "{stdout}");
    let last = stdout.lines().last().unwrap();
    let words: Vec<&str> = last.split_whitespace().collect();
    assert_eq!(
        (words[1], words[2], words[3]),
        ("packets,", "0", "mismatches"),
        "{last}"
    );
    assert!(words[0].parse::<usize>().unwrap() > 0);
}

/// The mismatch format on a synthetic difference: both sides, the first differing offset
/// marked, context from both.
#[test]
fn mismatch_format_marks_the_first_difference() {
    let mut a: Vec<u8> = (0..60).collect();
    let kernel = Outcome::Ran {
        retval: 2,
        action: "pass".into(),
        data: a.clone(),
    };
    a[30] = 0xee;
    a[31] = 0xef;
    let ours = Outcome::Ran {
        retval: 3,
        action: "tx".into(),
        data: a,
    };
    let cmp = diff::compare_outcomes(7, kernel, ours, None);
    assert_eq!(
        cmp.verdict,
        PacketVerdict::Mismatch {
            differs: vec!["retval".into(), "data".into()]
        }
    );
    let shown = diff::format_packet(&cmp);
    let expected = "packet 7: MISMATCH (retval, data)\n\
                    \x20 kernel: pass (retval 2), 60 bytes\n\
                    \x20 bpfemu: tx (retval 3), 60 bytes\n\
                    \x20 data: first difference at offset 30 (0x1e); 2 byte(s) differ; lengths: kernel 60, bpfemu 60\n\
                    \x20   kernel 0x0016: 16 17 18 19 1a 1b 1c 1d [1e] 1f 20 21 22 23 24 25 26\n\
                    \x20   bpfemu 0x0016: 16 17 18 19 1a 1b 1c 1d [ee] ef 20 21 22 23 24 25 26\n";
    assert_eq!(shown, expected);
    // Refusals compare by errno; a refusal against a run is an outcome mismatch.
    let refused = |errno| Outcome::Refused {
        errno,
        error: String::new(),
    };
    assert_eq!(
        diff::compare_outcomes(0, refused(22), refused(22), None).verdict,
        PacketVerdict::Equal
    );
    assert!(diff::compare_outcomes(0, refused(22), refused(7), None).is_mismatch());
    let summary = diff::summarize(10, &[cmp], &[]);
    assert_eq!(summary.to_string(), "10 packets, 1 mismatches");
}

/// A difference only in bytes that depend on a clock reading is reported, not judged; a
/// return value that depends on one is not compared, and said so with the call; untainted
/// bytes are still judged.
#[test]
fn taint_dependent_results_are_listed_not_judged() {
    let ran = |retval, data: &[u8]| Outcome::Ran {
        retval,
        action: String::new(),
        data: data.to_vec(),
    };
    let clock = TaintSource {
        helper: 5,
        prog: 0,
        pc: 7,
    };
    let bytes_tainted = PacketTaint {
        verdict: None,
        bounds: None,
        bytes: vec![None, None, Some(clock), None],
        events: None,
    };
    let cmp = diff::compare_outcomes(
        1,
        ran(2, &[1, 2, 3, 4]),
        ran(2, &[1, 2, 9, 4]),
        Some(&bytes_tainted),
    );
    assert_eq!(cmp.verdict, PacketVerdict::Equal);
    assert_eq!(cmp.excluded_offsets, [2]);
    assert!(
        diff::format_packet(&cmp).contains(
            "not compared (bytes that depend on bpf_ktime_get_ns at insn 7): offsets [2]"
        ),
        "{}",
        diff::format_packet(&cmp)
    );
    let verdict_tainted = PacketTaint {
        verdict: Some(clock),
        bounds: None,
        bytes: vec![None; 4],
        events: None,
    };
    let cmp = diff::compare_outcomes(
        2,
        ran(2, &[1, 2, 3, 4]),
        ran(1, &[1, 2, 3, 4]),
        Some(&verdict_tainted),
    );
    assert_eq!(
        cmp.verdict,
        PacketVerdict::NotCompared {
            reason: "verdict depends on bpf_ktime_get_ns at insn 7".into()
        }
    );
    // Untainted bytes are still judged, whatever the verdict depends on.
    let cmp = diff::compare_outcomes(
        3,
        ran(2, &[1, 2, 3, 4]),
        ran(1, &[0, 2, 9, 4]),
        Some(&bytes_tainted),
    );
    assert!(cmp.is_mismatch());
    let cmp = diff::compare_outcomes(
        4,
        ran(2, &[1, 2, 3, 4]),
        ran(1, &[0, 2, 3, 4]),
        Some(&verdict_tainted),
    );
    assert_eq!(
        cmp.verdict,
        PacketVerdict::Mismatch {
            differs: vec!["data".into()]
        }
    );
}

#[test]
fn verifier_accepts_every_corpus_program_with_statistics() {
    if !kernel_or_skip("verifier_accepts_every_corpus_program_with_statistics") {
        return;
    }
    let mut programs = 0;
    for level in ["v2", "v3", "v4"] {
        let objs: Vec<PathBuf> = corpus(level)
            .into_iter()
            .chain(std::iter::once(
                root().join(format!("examples/xdp/build/router.{level}.o")),
            ))
            .collect();
        for obj in objs {
            let out = bpfemu(&["diff", "--verifier", obj.to_str().unwrap(), "--json"]);
            let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            let mut disagree = false;
            for p in doc["programs"].as_array().unwrap() {
                let k = &p["kernel"];
                assert_eq!(k["accepted"], true, "{}: {p:#}", obj.display());
                assert!(k["processed_insns"].as_u64().unwrap() > 0, "{p:#}");
                assert!(k["verification_time_usec"].is_u64(), "{p:#}");
                // bpfemu's column: its verdict, and `agree` exactly when verdict and error match.
                let b = &p["bpfemu"];
                assert!(b["processed_insns"].is_u64(), "{p:#}");
                let agree = b["accepted"] == k["accepted"]
                    && (b["accepted"] == true || b["error"] == k["error"]);
                assert_eq!(p["agree"], agree, "{p:#}");
                disagree |= !agree;
                programs += 1;
            }
            // Exit 1 when bpfemu's verifier disagrees with the kernel (the kernel accepts all).
            assert_eq!(
                out.status.code(),
                Some(i32::from(disagree)),
                "{}",
                text(&out.stderr)
            );
        }
    }
    assert!(programs >= 3 * 17, "{programs} programs");
    let obj = root().join("examples/xdp/build/tailcall.v3.o");
    let out = bpfemu(&["diff", "--verifier", obj.to_str().unwrap()]);
    let stdout = text(&out.stdout);
    assert!(stdout.contains("bpfemu"), "{stdout}");
    assert!(
        stdout.contains("3 programs: 3 accepted, 0 rejected by the kernel; bpfemu agrees on "),
        "{stdout}"
    );
}

#[test]
fn verifier_log_statistics_are_parsed() {
    let log = "0: R1=ctx() R10=fp0\n; int x = 0;\n0: (b7) r0 = 2\n1: (95) exit\n\
               processed 2 insns (limit 1000000) max_states_per_insn 0 total_states 0 peak_states 0 mark_read 0\n\
               verification time 12 usec\nstack depth 0\n";
    let v = diff::parse_verifier_log(log, true);
    assert_eq!(v.processed_insns, Some(2));
    assert_eq!(v.verification_time_usec, Some(12));
    assert!(v.error.is_none());
    let log = "0: (79) r0 = *(u64 *)(r1 +0)\ninvalid bpf_context access off=0 size=8\n\
               processed 1 insns (limit 1000000) max_states_per_insn 0 total_states 0 peak_states 0 mark_read 0\n";
    let v = diff::parse_verifier_log(log, false);
    assert_eq!(
        v.error.as_deref(),
        Some("invalid bpf_context access off=0 size=8")
    );
}

#[test]
fn conformance_through_the_kernel_has_no_difference() {
    if !kernel_or_skip("conformance_through_the_kernel_has_no_difference") {
        return;
    }
    let dir = root().join("../shared/conformance/bpf_conformance/tests");
    let out = bpfemu(&["conformance", dir.to_str().unwrap(), "--kernel"]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    let last = stdout.lines().last().unwrap();
    assert!(last.contains(" agree, 0 differ, "), "{last}");
    let out = bpfemu(&["conformance", dir.to_str().unwrap(), "--kernel", "--json"]);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["summary"]["differ"], 0);
    assert!(doc["summary"]["agree"].as_u64().unwrap() > 250);
}

/// Without privileges (as `nobody`), `bpfemu diff` says the kernel is out of reach and exits
/// 2. Where no unprivileged user can be switched to, the detection itself is checked.
#[test]
fn without_privileges_diff_exits_2() {
    // SAFETY: geteuid has no preconditions.
    let root_user = unsafe { libc::geteuid() } == 0;
    let setpriv = Path::new("/usr/bin/setpriv");
    let nobody = std::fs::read_to_string("/etc/passwd")
        .is_ok_and(|p| p.lines().any(|l| l.starts_with("nobody:")));
    if !(root_user && setpriv.exists() && nobody) {
        match diff::kernel_ready() {
            Ok(()) => eprintln!("the kernel is reachable: nothing to check without privileges"),
            Err(why) => assert!(why.contains("not usable"), "{why}"),
        }
        return;
    }
    let obj = root().join("examples/xdp/build/reflector.v3.o");
    let cap = root().join("examples/pcap/normal.pcap");
    for args in [
        vec!["diff", obj.to_str().unwrap(), cap.to_str().unwrap()],
        vec!["diff", "--verifier", obj.to_str().unwrap()],
    ] {
        let out = Command::new(setpriv)
            .args([
                "--reuid=nobody",
                "--regid=nogroup",
                "--clear-groups",
                "--inh-caps=-all",
            ])
            .arg(env!("CARGO_BIN_EXE_bpfemu"))
            .args(&args)
            .current_dir("/")
            .output()
            .expect("setpriv runs");
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains("bpf() is not usable here") && stderr.contains("needs root"),
            "{stderr}"
        );
        assert!(out.stdout.is_empty());
    }
}

/// The `/run/netns` names a process made (`bpfemu-diff-PID-N`).
fn namespaces_of(pid: u32) -> Vec<String> {
    std::fs::read_dir("/run/netns")
        .map(|dir| {
            dir.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with(&format!("bpfemu-diff-{pid}-")))
                .collect()
        })
        .unwrap_or_default()
}

/// Whether a thread of `pid` runs in another network namespace than this process.
fn has_left_our_namespace(pid: u32) -> bool {
    let ours = std::fs::read_link("/proc/self/ns/net").expect("our namespace");
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|tasks| {
            tasks
                .flatten()
                .any(|t| std::fs::read_link(t.path().join("ns/net")).is_ok_and(|ns| ns != ours))
        })
        .unwrap_or(false)
}

/// `bench` and `diff` run the kernel side in a namespace of their own; killed while in it (the
/// way tests/cli_numeric stops a bench that runs on, or a user's Ctrl-C), they must leave no
/// name behind in /run/netns (30 `bpfemu-diff-PID-0` entries piled up so).
#[test]
fn a_killed_bench_leaves_no_namespace() {
    if !kernel_or_skip("a_killed_bench_leaves_no_namespace") {
        return;
    }
    let obj = root().join("examples/xdp/build/reflector.v3.o");
    let cap = root().join("examples/pcap/normal.pcap");
    for signal in [libc::SIGKILL, libc::SIGINT, libc::SIGTERM] {
        let mut command = Command::new(env!("CARGO_BIN_EXE_bpfemu"));
        command
            .args(["bench", obj.to_str().unwrap(), cap.to_str().unwrap()])
            .args(["--packets", "1000000000000"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        // A test run from a background shell inherits SIGINT ignored, and a bench that
        // ignores it would never end: the child starts with the default dispositions, as one
        // started from a terminal does.
        // SAFETY: only async-signal-safe calls (signal) between fork and exec.
        unsafe {
            use std::os::unix::process::CommandExt;
            command.pre_exec(|| {
                libc::signal(libc::SIGINT, libc::SIG_DFL);
                libc::signal(libc::SIGTERM, libc::SIG_DFL);
                Ok(())
            });
        }
        let mut child = command.spawn().expect("bpfemu runs");
        let pid = child.id();
        let start = std::time::Instant::now();
        while !has_left_our_namespace(pid) {
            assert!(
                start.elapsed() < std::time::Duration::from_secs(60),
                "bench never entered its namespace"
            );
            assert!(child.try_wait().unwrap().is_none(), "bench ended early");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        // SAFETY: kill on the pid of a child this test spawned and has not reaped yet.
        assert_eq!(unsafe { libc::kill(pid as i32, signal) }, 0);
        let status = wait_at_most(&mut child, std::time::Duration::from_secs(30))
            .unwrap_or_else(|| panic!("signal {signal}: bench still runs 30 s later"));
        assert!(!status.success(), "signal {signal}: {status:?}");
        assert_eq!(namespaces_of(pid), Vec::<String>::new(), "signal {signal}");
    }
}

/// The child's exit status, or `None` (and the child killed) when it runs past `limit`.
fn wait_at_most(
    child: &mut std::process::Child,
    limit: std::time::Duration,
) -> Option<std::process::ExitStatus> {
    let start = std::time::Instant::now();
    while start.elapsed() < limit {
        if let Some(status) = child.try_wait().expect("waitpid") {
            return Some(status);
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

/// A name left by a process that is gone (killed before it could delete it, by an older
/// bpfemu) is deleted by the next diff.
#[test]
fn a_diff_deletes_namespaces_whose_process_is_gone() {
    if !kernel_or_skip("a_diff_deletes_namespaces_whose_process_is_gone") {
        return;
    }
    let mut gone = Command::new("true").spawn().expect("true runs");
    gone.wait().expect("true ends");
    let orphan = format!("bpfemu-diff-{}-0", gone.id());
    let added = Command::new("ip")
        .args(["netns", "add", &orphan])
        .status()
        .expect("ip runs");
    assert!(added.success());
    let out = Command::new(env!("CARGO_BIN_EXE_bpfemu"))
        .arg("diff")
        .arg(root().join("examples/xdp/build/reflector.v3.o"))
        .arg(root().join("examples/pcap/normal.pcap"))
        .output()
        .expect("bpfemu runs");
    let left = namespaces_of(gone.id());
    if !left.is_empty() {
        let _ = Command::new("ip").args(["netns", "del", &orphan]).status();
    }
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(left, Vec::<String>::new());
}
