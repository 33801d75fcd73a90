//! The plugin binary speaks the upstream protocol: for every suite test with a result, the
//! plugin started as the upstream runner starts it prints that result.

use bpfemu::conformance::runner::build_program;
use bpfemu::conformance::suite::{self, Expectation};
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

fn hex(bytes: &[u8]) -> String {
    bytes
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(" ")
}

fn run_plugin(mem: &[u8], program: &[u8]) -> (String, i32) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_bpfemu-conformance-plugin"));
    if !mem.is_empty() {
        cmd.arg(hex(mem));
    }
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("plugin starts");
    writeln!(child.stdin.take().unwrap(), "{}", hex(program)).unwrap();
    let out = child.wait_with_output().unwrap();
    (
        String::from_utf8_lossy(&out.stdout).trim().to_owned(),
        out.status.code().unwrap_or(-1),
    )
}

#[test]
fn plugin_reproduces_every_result() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../shared/conformance/bpf_conformance/tests");
    let mut checked = 0;
    let mut wrong = Vec::new();
    for path in suite::list_dir(&dir).expect("suite present") {
        let case = suite::load(&path).unwrap();
        let Expectation::Result(want) = case.expect else {
            continue;
        };
        let Ok(program) = build_program(&case) else {
            continue;
        };
        let (stdout, code) = run_plugin(&case.mem, &program.to_bytes());
        if code != 0 || u64::from_str_radix(&stdout, 16) != Ok(want) {
            wrong.push(format!(
                "{}: exit {code}, printed `{stdout}`, expected {want:x}",
                case.name
            ));
        }
        checked += 1;
    }
    assert!(checked >= 300, "only {checked} tests checked");
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn plugin_reports_errors_with_exit_one() {
    // call with a non-zero dst register: a reserved field.
    let (stdout, code) = run_plugin(
        &[],
        &[0x85, 0x01, 0, 0, 0, 0, 0, 0, 0x95, 0, 0, 0, 0, 0, 0, 0],
    );
    assert_eq!(code, 1);
    assert!(stdout.contains("reserved field dst"), "{stdout}");
}
