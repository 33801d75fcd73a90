//! Every command ends quietly when its reader goes away (`bpfemu ... | head -1`): exit 0 and
//! nothing on standard error, never a panic.

#[allow(dead_code)]
mod cli_support;

use cli_support::{example, kernel_or_skip, root, stderr};
use std::process::{Command, Stdio};

/// Runs `bpfemu ARGS` with its standard output closed before it writes anything, and asserts
/// that it ends quietly.
#[track_caller]
fn ends_quietly_on_a_closed_pipe(args: &[&str]) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_bpfemu"))
        .args(args)
        .current_dir(root())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("bpfemu starts");
    // The reader leaves before the first line, as `head -0` would.
    drop(child.stdout.take());
    let out = child.wait_with_output().expect("bpfemu ends");
    let err = stderr(&out);
    assert!(
        !err.contains("panicked") && !err.contains("Broken pipe"),
        "bpfemu {args:?} complained about the closed pipe:\n{err}"
    );
    assert_eq!(out.status.code(), Some(0), "bpfemu {args:?}: {err}");
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
        ends_quietly_on_a_closed_pipe(&args);
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
    ends_quietly_on_a_closed_pipe(&[
        "replay",
        "--json",
        &reflector,
        &example("pcap/normal.pcap"),
        "--check",
        &record,
    ]);
}

#[test]
fn kernel_commands_end_quietly() {
    if !kernel_or_skip("kernel_commands_end_quietly") {
        return;
    }
    let reflector = example("xdp/build/reflector.v3.o");
    let normal = example("pcap/normal.pcap");
    for args in [
        vec!["diff", reflector.as_str(), normal.as_str()],
        vec!["diff", "--json", reflector.as_str(), normal.as_str()],
        vec!["diff", "--verifier", reflector.as_str()],
        vec![
            "bench",
            "--packets",
            "10",
            reflector.as_str(),
            normal.as_str(),
        ],
        vec!["conformance", "--kernel", "--json", "tests-dir"],
    ]
    .into_iter()
    .map(|args| {
        args.into_iter()
            .map(|a| {
                if a == "tests-dir" {
                    conformance_dir()
                } else {
                    a.to_owned()
                }
            })
            .collect::<Vec<String>>()
    }) {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        ends_quietly_on_a_closed_pipe(&args);
    }
}
