//! Every command ends quietly when its reader goes away (`bpfemu ... | head -1`): nothing on
//! standard error, never a panic, and never exit 0 for a run that did not finish. A command
//! whose verdict is known before its output (verify, diff) exits with the verdict's code, so
//! that `set -o pipefail; bpfemu verify bad.o | head -1` still fails; the others exit 141, as a
//! shell reports a process that SIGPIPE ended (tcpdump, cat).

#[allow(dead_code)]
mod cli_support;

use cli_support::{example, kernel_or_skip, root, stderr};
use std::process::{Command, Stdio};

/// What a shell reports for a process that SIGPIPE ended.
const SIGPIPE_EXIT: i32 = 141;

/// Runs `bpfemu ARGS` with its standard output closed before it writes anything, and asserts
/// that it ends quietly with exit code `code`.
#[track_caller]
fn ends_quietly_on_a_closed_pipe(args: &[&str], code: i32) {
    // The reader is gone before bpfemu starts, as with `head -0`: its first write fails,
    // however little it writes (a live reader's pipe would buffer a short output whole).
    let (reader, writer) = std::io::pipe().expect("a pipe");
    drop(reader);
    let out = Command::new(env!("CARGO_BIN_EXE_bpfemu"))
        .args(args)
        .current_dir(root())
        .stdout(writer)
        .stderr(Stdio::piped())
        .output()
        .expect("bpfemu runs");
    let err = stderr(&out);
    assert!(
        !err.contains("panicked") && !err.contains("Broken pipe"),
        "bpfemu {args:?} complained about the closed pipe:\n{err}"
    );
    assert_eq!(out.status.code(), Some(code), "bpfemu {args:?}: {err}");
}

fn conformance_dir() -> String {
    root()
        .join("../shared/conformance/bpf_conformance/tests")
        .display()
        .to_string()
}

#[test]
fn offline_commands_end_quietly() {
    let reflector = example("xdp/build/reflector.v3.o");
    let normal = example("pcap/normal.pcap");
    let dir = conformance_dir();
    for args in [
        vec!["conformance", "--json", dir.as_str()],
        vec!["conformance", dir.as_str()],
        vec!["inspect", reflector.as_str()],
        vec!["inspect", "--json", reflector.as_str()],
        vec!["disasm", reflector.as_str()],
        vec!["replay", reflector.as_str(), normal.as_str()],
        vec!["replay", "--json", reflector.as_str(), normal.as_str()],
    ] {
        ends_quietly_on_a_closed_pipe(&args, SIGPIPE_EXIT);
    }
}

#[test]
fn verify_keeps_its_verdict_on_a_closed_pipe() {
    let rejected = root().join("tests/data/verify/unchecked_read.o");
    let rejected = rejected.to_str().expect("utf-8 path");
    let accepted = example("xdp/build/reflector.v3.o");
    for (args, verdict) in [
        (vec!["verify", rejected, "--log-level", "2"], 1),
        (vec!["verify", rejected, "--json"], 1),
        (vec!["verify", &accepted, "--log-level", "2"], 0),
    ] {
        ends_quietly_on_a_closed_pipe(&args, verdict);
    }
}

#[test]
fn check_output_ends_quietly() {
    let scratch = cli_support::Scratch::new("pipes-check");
    let reflector = example("xdp/build/reflector.v3.o");
    let record = scratch.path("exp.json");
    let out = cli_support::bpfemu(&[
        "replay",
        &reflector,
        &example("pcap/normal.pcap"),
        "--record",
        &record,
    ]);
    cli_support::assert_exit(&out, 0);
    ends_quietly_on_a_closed_pipe(
        &[
            "replay",
            "--json",
            &reflector,
            &example("pcap/normal.pcap"),
            "--check",
            &record,
        ],
        SIGPIPE_EXIT,
    );
}

#[test]
fn kernel_commands_end_quietly() {
    if !kernel_or_skip("kernel_commands_end_quietly") {
        return;
    }
    let reflector = example("xdp/build/reflector.v3.o");
    let normal = example("pcap/normal.pcap");
    for (args, code) in [
        (vec!["diff", reflector.as_str(), normal.as_str()], 0),
        (
            vec!["diff", "--json", reflector.as_str(), normal.as_str()],
            0,
        ),
        (vec!["diff", "--verifier", reflector.as_str()], 0),
        (
            vec![
                "bench",
                "--packets",
                "10",
                reflector.as_str(),
                normal.as_str(),
            ],
            SIGPIPE_EXIT,
        ),
        (
            vec!["conformance", "--kernel", "--json", "tests-dir"],
            SIGPIPE_EXIT,
        ),
    ] {
        let args: Vec<String> = args
            .into_iter()
            .map(|a| match a {
                "tests-dir" => conformance_dir(),
                a => a.to_owned(),
            })
            .collect();
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        ends_quietly_on_a_closed_pipe(&args, code);
    }
}
