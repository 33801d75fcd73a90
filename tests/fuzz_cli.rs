//! `bpfemu fuzz` as a user runs it: a planted bug found and written out as a packet that
//! replays to the same result, coverage by source line for a corpus program, determinism for a
//! seed, and option errors.

use bpfemu::pcap::PcapReader;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn bpfemu(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_bpfemu"))
        .args(args)
        .output()
        .expect("bpfemu runs")
}

fn repo(path: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(path)
        .display()
        .to_string()
}

/// A scratch directory of this test, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("bpfemu-fuzz-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    fn path(&self, file: &str) -> String {
        self.0.join(file).display().to_string()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn packets(path: &str) -> Vec<Vec<u8>> {
    PcapReader::open(Path::new(path))
        .unwrap()
        .map(|p| p.unwrap().data)
        .collect()
}

const PLANTED: &str = "tests/fuzz_programs/build/hop_by_hop_bug.o";

#[test]
fn finds_the_planted_hop_by_hop_bug_from_a_capture_without_one() {
    let seeds = repo("examples/pcap/normal.pcap");
    // The seeds never carry a hop-by-hop header: the fuzzer has to make one.
    assert!(
        packets(&seeds)
            .iter()
            .all(|p| !(p.len() > 20 && p[12..14] == [0x86, 0xdd] && p[20] == 0))
    );
    let dir = Scratch::new("planted");
    let out = bpfemu(&[
        "fuzz",
        &repo(PLANTED),
        "--seeds",
        &seeds,
        "--runs",
        "5000",
        "--out",
        &dir.path("out"),
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("finding 0: aborted: XDP_ABORTED"), "{text}");

    let found = packets(&dir.path("out/findings.pcap"));
    assert_eq!(found.len(), 1, "one bug, one packet");
    let p = &found[0];
    assert_eq!(p[12..14], [0x86, 0xdd]);
    assert_eq!(p[14 + 6], 0, "IPv6 next header is hop-by-hop");

    // The packet it wrote replays to the same verdict.
    let replay = bpfemu(&[
        "replay",
        &repo(PLANTED),
        &dir.path("out/findings.pcap"),
        "--json",
    ]);
    let first = String::from_utf8_lossy(&replay.stdout);
    assert!(
        first
            .lines()
            .next()
            .unwrap()
            .contains("\"action\":\"aborted\""),
        "{first}"
    );

    let findings: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path("out/findings.json")).unwrap())
            .unwrap();
    assert_eq!(findings[0]["kind"], "aborted");
    assert_eq!(findings[0]["reproduces_alone"], true);
}

#[test]
fn reports_coverage_by_source_line_for_a_corpus_program() {
    let dir = Scratch::new("coverage");
    let out = bpfemu(&[
        "fuzz",
        &repo("examples/xdp/build/firewall.v3.o"),
        "--maps",
        &repo("examples/maps/firewall.json"),
        "--runs",
        "3000",
        "--out",
        &dir.path("out"),
        "--json",
    ]);
    assert!(out.status.code() == Some(0) || out.status.code() == Some(1));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["execs"], 3000);
    let report = &doc["coverage"][0];
    let lines = report["lines"].as_array().unwrap();
    assert!(lines.len() > 20, "{report}");
    let in_source = |l: &&serde_json::Value| l["file"].as_str().unwrap().ends_with("firewall.c");
    assert!(lines.iter().filter(in_source).count() > 20, "{report}");
    let reached = lines
        .iter()
        .filter(|l| l["insns_ran"].as_u64().unwrap() > 0)
        .count();
    assert!(
        reached > lines.len() / 2,
        "{reached} of {} lines reached",
        lines.len()
    );
    assert!(report["branches_taken"].as_u64().unwrap() <= report["branches"].as_u64().unwrap());

    let text = std::fs::read_to_string(dir.path("out/coverage.txt")).unwrap();
    assert!(
        text.starts_with("xdp_firewall: lines ") || text.contains(": lines "),
        "{text}"
    );
    let html = std::fs::read_to_string(dir.path("out/coverage.html")).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>") && html.contains("firewall.c"));
    // The corpus it leaves is a capture a replay takes.
    let corpus = packets(&dir.path("out/corpus.pcap"));
    assert!(!corpus.is_empty());
}

#[test]
fn the_same_seed_gives_the_same_run() {
    let dir = Scratch::new("determinism");
    let run = |seed: &str, out: &str| {
        bpfemu(&[
            "fuzz",
            &repo(PLANTED),
            "--runs",
            "1500",
            "--seed",
            seed,
            "--out",
            &dir.path(out),
        ]);
        (
            std::fs::read(dir.path(&format!("{out}/corpus.pcap"))).unwrap(),
            std::fs::read(dir.path(&format!("{out}/findings.json"))).unwrap(),
        )
    };
    let a = run("7", "a");
    assert_eq!(a, run("7", "b"));
    assert_ne!(a.0, run("8", "c").0);
}

/// Two workers split the runs and share what they find: the planted bug, reachable by both,
/// is one finding; the runs add up to `--runs`; the corpus written is the shared one.
#[test]
fn workers_split_the_runs_and_share_the_findings() {
    let dir = Scratch::new("jobs");
    let out = bpfemu(&[
        "fuzz",
        &repo(PLANTED),
        "--seeds",
        &repo("examples/pcap/normal.pcap"),
        "--runs",
        "9001",
        "--jobs",
        "2",
        "--json",
        "--out",
        &dir.path("out"),
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    let doc: serde_json::Value = serde_json::from_str(text.trim()).expect("one JSON document");
    assert_eq!(doc["execs"], 9001, "{doc}");
    let findings = doc["findings"].as_array().expect("findings");
    assert_eq!(findings.len(), 1, "one bug, one finding: {doc}");
    assert_eq!(findings[0]["kind"], "aborted");
    assert!(doc["corpus"].as_u64().unwrap() > 1, "{doc}");
    assert_eq!(
        packets(&dir.path("out/corpus.pcap")).len() as u64,
        doc["corpus"].as_u64().unwrap()
    );
}

#[test]
fn bad_options_are_refused_before_any_work() {
    let dir = Scratch::new("options");
    std::fs::write(dir.path("file"), "x").unwrap();
    for (args, message) in [
        (vec!["--never", "tx:odd"], "unknown condition `odd`"),
        (vec!["--never", "any"], "`any` needs a condition"),
        (vec!["--time", "5 parsecs"], "unknown unit"),
        (vec!["--time", "9000000h"], "at most a year"),
        (vec!["--runs", "0"], "--runs"),
        (vec!["--jobs", "0"], "--jobs"),
        (
            vec!["--allow-ignored", "map_frobnicate"],
            "unknown helper `map_frobnicate`",
        ),
        (
            vec!["--allow-ignored", "map_delete_elem:EWHAT"],
            "unknown errno `EWHAT`",
        ),
        (
            vec!["--out", &dir.path("file")],
            "--out must be a directory",
        ),
    ] {
        let mut all = vec!["fuzz", PLANTED];
        all.extend(&args);
        let out = Command::new(env!("CARGO_BIN_EXE_bpfemu"))
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .args(&all)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(message), "{args:?}: {err}");
        assert!(err.trim_end().lines().count() <= 4, "{err}");
    }
}

const IGNORED: &str = "tests/fuzz_programs/build/ignored_error.o";

/// Fuzzes one program of the ignored-error object; its stdout and exit code.
fn fuzz_ignored(prog: &str, extra: &[&str], dir: &Scratch) -> (String, Option<i32>) {
    let mut args = vec![
        "fuzz".to_owned(),
        repo(IGNORED),
        "--prog".to_owned(),
        prog.to_owned(),
        "--runs".to_owned(),
        "2000".to_owned(),
        "--out".to_owned(),
        dir.path(prog),
    ];
    args.extend(extra.iter().map(|a| a.to_string()));
    let out = Command::new(env!("CARGO_BIN_EXE_bpfemu"))
        .args(&args)
        .output()
        .unwrap();
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        out.status.code(),
    )
}

#[test]
fn a_helper_error_the_program_drops_is_a_finding_with_its_source_line() {
    let dir = Scratch::new("ignored");
    let (text, code) = fuzz_ignored("learn_unchecked", &[], &dir);
    assert_eq!(code, Some(1), "{text}");
    assert!(
        text.contains(
            "ignored error: bpf_map_update_elem returned -E2BIG (7) at insn 30 \
             (./ignored_error.c:45), and the program never looked at it"
        ),
        "{text}"
    );
    // One call site, one errno: one finding, however often it happened.
    assert_eq!(text.matches("ignored error:").count(), 1, "{text}");
    let findings: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path("learn_unchecked/findings.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(findings[0]["kind"], "ignored error");
    // The map fills up over the run: on fresh maps the same packet's update succeeds.
    assert_eq!(findings[0]["reproduces_alone"], false);

    // The same failures, checked by the program: nothing to report.
    let (text, code) = fuzz_ignored("learn_checked", &[], &dir);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("0 finding(s)"), "{text}");
}

#[test]
fn allowed_ignored_errors_are_not_findings() {
    let dir = Scratch::new("allowed");
    for allow in [
        "map_update_elem",
        "bpf_map_update_elem:E2BIG",
        "map_update_elem:7",
    ] {
        let (text, code) = fuzz_ignored("learn_unchecked", &["--allow-ignored", allow], &dir);
        assert_eq!(code, Some(0), "{allow}: {text}");
    }
    // Another errno of that helper is still a finding.
    let (text, code) = fuzz_ignored(
        "learn_unchecked",
        &["--allow-ignored", "map_update_elem:ENOENT"],
        &dir,
    );
    assert_eq!(code, Some(1), "{text}");
}
