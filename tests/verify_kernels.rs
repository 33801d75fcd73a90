//! `--kernel`: the kernel a command answers as. `verify` takes several and prints a matrix;
//! the other commands take one; an unknown version is refused naming the profiles; the
//! default kernel is said beside the answer.

use std::path::PathBuf;
use std::process::{Command, Output};

fn bpfemu(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_bpfemu"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("bpfemu runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn data(path: &str) -> String {
    let full = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(path);
    assert!(full.exists(), "{} is built", full.display());
    path.to_owned()
}

const ACCEPTED: &str = "examples/xdp/build/pass.v3.o";
const REJECTED: &str = "tests/data/verify/unchecked_read.o";

#[test]
fn an_unknown_kernel_is_refused_naming_the_profiles() {
    let out = bpfemu(&["verify", &data(ACCEPTED), "--kernel", "6.18,4.19"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr)
            .contains("no profile of kernel '4.19' (bpfemu answers as 5.10, 6.1, 6.12, 6.18, 7.2)"),
        "{}",
        text(&out.stderr)
    );
    assert!(out.stdout.is_empty());
}

#[test]
fn commands_that_answer_for_one_kernel_refuse_several() {
    for command in ["inspect", "disasm"] {
        let out = bpfemu(&[command, &data(ACCEPTED), "--kernel", "6.1,6.12"]);
        assert_eq!(out.status.code(), Some(2), "{command}");
        assert!(
            text(&out.stderr).contains(&format!(
                "`bpfemu {command}` answers for one kernel; only `verify` takes several"
            )),
            "{command}: {}",
            text(&out.stderr)
        );
    }
    // One kernel is fine.
    let out = bpfemu(&["inspect", &data(ACCEPTED), "--kernel", "6.1"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
}

/// The running kernel's release, and the line `verify` ends its text with by default.
fn default_kernel_said() -> String {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").expect("procfs");
    let release = release.trim();
    match bpfemu_isa::KernelVersion::of_release(release) {
        Some(v) => format!("kernel {v} (the running kernel): "),
        None => format!("kernel 6.18 (the running kernel, {release}, has no profile): "),
    }
}

#[test]
fn the_kernel_answered_as_is_said() {
    let out = bpfemu(&["verify", &data(ACCEPTED)]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let last = text(&out.stdout)
        .lines()
        .last()
        .unwrap_or_default()
        .to_owned();
    assert!(last.starts_with(&default_kernel_said()), "{last}");
    assert!(
        last.ends_with("1 programs: 1 accepted, 0 rejected"),
        "{last}"
    );

    let out = bpfemu(&["verify", &data(ACCEPTED), "--kernel", "6.12", "--json"]);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(doc["kernel"]["version"], "6.12");
    assert_eq!(doc["kernel"]["described"], "6.12");
}

#[test]
fn a_repeated_kernel_is_one_column() {
    let out = bpfemu(&["verify", &data(ACCEPTED), "--kernel", "6.18,6.18", "--json"]);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    // One kernel: the single-kernel report, not a matrix.
    assert_eq!(doc["kernel"]["version"], "6.18", "{doc:#}");
    assert!(doc.get("kernels").is_none());
}

#[test]
fn the_matrix_has_a_column_per_kernel_and_fails_when_any_rejects() {
    let kernels = "6.12,6.18,7.2";
    let out = bpfemu(&[
        "verify",
        &data(ACCEPTED),
        &data(REJECTED),
        "--kernel",
        kernels,
        "--json",
    ]);
    // unchecked_read.o: xdp_ok, accepted, and xdp_unchecked, rejected.
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let versions: Vec<&str> = doc["kernels"]
        .as_array()
        .expect("kernels")
        .iter()
        .map(|k| k["version"].as_str().expect("version"))
        .collect();
    assert_eq!(versions, ["6.12", "6.18", "7.2"]);
    let programs = doc["programs"].as_array().expect("programs");
    assert_eq!(programs.len(), 3, "{doc:#}");
    for p in programs {
        let rejected = p["name"] == "xdp_unchecked";
        for v in &versions {
            let cell = &p["kernels"][v];
            assert_eq!(
                cell["verdict"],
                if rejected { "rejected" } else { "accepted" },
                "{p:#}"
            );
            assert_eq!(cell["error"].is_null(), !rejected, "{p:#}");
        }
    }

    // Only the accepted one: every kernel loads it, exit 0; the text has a column per kernel.
    let out = bpfemu(&["verify", &data(ACCEPTED), "--kernel", kernels]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let header = stdout.lines().next().expect("header");
    let columns: Vec<&str> = header.split_whitespace().collect();
    assert_eq!(
        columns,
        ["File", "Program", "6.12", "6.18", "7.2"],
        "{stdout}"
    );
    for v in ["6.12", "6.18", "7.2"] {
        assert!(
            stdout.contains(&format!("kernel {v}: 1 programs: 1 accepted, 0 rejected")),
            "{stdout}"
        );
    }
}

#[test]
fn the_matrix_csv_has_a_line_per_program_and_kernel() {
    let out = bpfemu(&[
        "verify",
        &data(REJECTED),
        "--prog",
        "xdp_unchecked",
        "--kernel",
        "6.1,6.18",
        "--csv",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let stdout = text(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines[0],
        "file_name,prog_name,kernel,verdict,total_insns,error"
    );
    assert_eq!(lines.len(), 3, "{stdout}");
    let error = "R1 offset is outside of the packet";
    assert!(
        lines[1].ends_with(&format!(",xdp_unchecked,6.1,failure,2,{error}")),
        "{stdout}"
    );
    assert!(
        lines[2].ends_with(&format!(",xdp_unchecked,6.18,failure,2,{error}")),
        "{stdout}"
    );
}

#[test]
fn reports_of_one_kernel_are_refused_with_several() {
    for flag in [
        &["--sarif", "/dev/null"][..],
        &["--explain"],
        &["--log-level", "2"],
    ] {
        let mut args = vec!["verify", ACCEPTED, "--kernel", "6.1,6.18"];
        args.extend_from_slice(flag);
        let out = bpfemu(&args);
        assert_eq!(out.status.code(), Some(2), "{flag:?}");
        assert!(
            text(&out.stderr).contains("reports on one kernel: name one with --kernel"),
            "{flag:?}: {}",
            text(&out.stderr)
        );
    }
}

/// Every command's flags parse together: `--kernel` (a version) joined the shared flags, and
/// `bpfemu test` keeps its own `--kernel` (run in the running kernel too). clap refuses two
/// flags of one name only when the command's arguments are built, so each is asked for help.
#[test]
fn every_command_builds_its_arguments() {
    let out = bpfemu(&["--help"]);
    assert_eq!(out.status.code(), Some(0));
    let help = text(&out.stdout);
    let commands: Vec<&str> = help
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .collect();
    assert!(commands.len() >= 10, "{help}");
    for command in commands {
        let out = bpfemu(&[command, "--help"]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{command}: {}",
            text(&out.stderr)
        );
    }
    let test_help = text(&bpfemu(&["test", "--help"]).stdout);
    assert!(test_help.contains("running kernel too"), "{test_help}");
}
