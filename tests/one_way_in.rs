//! Every command that runs a program enters through `bpfemu::prepare::Prepared`: the program
//! `--prog` names (by function or by section) is the program verified, whichever command runs
//! it, and a program the verifier rejects runs nowhere without `--no-verify`.
//!
//! `tests/data/verify/section_named.o` holds `reads_unchecked` alone in section `xdp` (the
//! kernel's verifier rejects it: the Ethernet header is read before the length check) and
//! `reads_checked` alone in `xdp.frags`.

use bpfemu::jit::Engine;
use bpfemu::prepare::{Prepared, RefusalKind};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn object() -> PathBuf {
    root().join("tests/data/verify/section_named.o")
}

fn capture() -> PathBuf {
    root().join("examples/pcap/normal.pcap")
}

fn bpfemu(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_bpfemu"))
        .args(args)
        .output()
        .expect("bpfemu runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The arguments that run `prog` of the object under `command`, cheaply.
fn run_args(command: &str, prog: &str, out_dir: &Path) -> Vec<String> {
    let obj = object().display().to_string();
    let pcap = capture().display().to_string();
    let mut args: Vec<String> = vec![command.into(), obj];
    match command {
        "fuzz" => args.extend([
            "--runs".into(),
            "50".into(),
            "--out".into(),
            out_dir.display().to_string(),
        ]),
        "bench" => args.extend([pcap, "--packets".into(), "20".into()]),
        _ => args.push(pcap),
    }
    args.extend(["--prog".into(), prog.into()]);
    args
}

#[test]
fn a_section_name_picks_the_program_in_it() {
    let load = Default::default();
    let by_section = Prepared::open(&object(), Some("xdp"), &load).expect("opens");
    assert_eq!(by_section.program_name(), "reads_unchecked");
    let by_function = Prepared::open(&object(), Some("reads_checked"), &load).expect("opens");
    assert_eq!(by_function.program().section, "xdp.frags");
    let unknown = Prepared::open(&object(), Some("nothere"), &load)
        .err()
        .expect("no such program");
    assert!(
        unknown.to_string().contains("no program `nothere`"),
        "{unknown}"
    );
}

#[test]
fn the_gate_refuses_a_rejected_program_for_every_engine_unless_told() {
    let load = Default::default();
    let rejected = Prepared::open(&object(), Some("xdp"), &load).expect("opens");
    for engine in Engine::ALL {
        let refusal = rejected.admit(engine, false).expect_err("rejected");
        assert_eq!(refusal.kind, RefusalKind::Rejected, "{engine}");
        assert!(
            refusal.text.contains("section_named.c:")
                && refusal
                    .text
                    .contains("the verifier rejects program reads_unchecked"),
            "{engine}: {}",
            refusal.text
        );
        // --no-verify runs it checked; trusted code still will not run it.
        match engine.is_trusted() {
            true => {
                let refusal = rejected.admit(engine, true).expect_err("trusted");
                assert_eq!(refusal.kind, RefusalKind::EngineCannotRun, "{engine}");
            }
            false => assert_eq!(rejected.admit(engine, true).ok(), Some(None), "{engine}"),
        }
    }
    let accepted = Prepared::open(&object(), Some("xdp.frags"), &load).expect("opens");
    for engine in Engine::ALL {
        let bound = accepted.admit(engine, false).expect("accepted");
        assert_eq!(bound.is_some(), engine.is_trusted(), "{engine}");
    }
}

/// The bug this shape fixed: `replay --prog xdp` ran the rejected program in section `xdp`
/// (and exited 0), and `fuzz` fuzzed rejected programs silently.
#[test]
fn every_command_refuses_a_rejected_program_named_by_its_section() {
    let scratch = std::env::temp_dir().join(format!("bpfemu-one-way-in-{}", std::process::id()));
    for command in ["replay", "bench", "fuzz", "diff"] {
        let args = run_args(command, "xdp", &scratch.join(command));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = bpfemu(&args);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{command}: {stderr}");
        assert!(
            stderr.contains("the verifier rejects program reads_unchecked (--no-verify"),
            "{command}: {stderr}"
        );
        assert!(
            stderr.contains("section_named.c:"),
            "{command}: placed at its source line: {stderr}"
        );
        assert!(
            out.stdout.is_empty(),
            "{command}: nothing ran: {}",
            text(&out.stdout)
        );
    }
    // The accepted program, named by its section, runs; the rejected one runs checked when
    // asked to.
    for (prog, extra) in [("xdp.frags", None), ("xdp", Some("--no-verify"))] {
        for command in ["replay", "fuzz"] {
            let mut args = run_args(command, prog, &scratch.join(command));
            args.extend(extra.map(str::to_owned));
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let out = bpfemu(&args);
            let stderr = text(&out.stderr);
            assert!(
                !stderr.contains("the verifier rejects"),
                "{command} {prog}: {stderr}"
            );
            assert!(
                matches!(out.status.code(), Some(0 | 1)),
                "{command} {prog}: {stderr}"
            );
            assert!(!out.stdout.is_empty(), "{command} {prog}: it ran: {stderr}");
        }
    }
    let _ = std::fs::remove_dir_all(&scratch);
}

#[test]
fn verify_takes_a_section_name_as_the_other_commands_do() {
    let obj = object().display().to_string();
    let out = bpfemu(&["verify", &obj, "--prog", "xdp", "--json"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let programs = doc["programs"].as_array().expect("programs");
    let names: Vec<&str> = programs.iter().filter_map(|p| p["name"].as_str()).collect();
    assert_eq!(names, ["reads_unchecked"], "{doc}");
    let out = bpfemu(&["verify", &obj, "--prog", "xdp.frags"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
}

/// A section holding several programs names none of them: `tests/data/verify/unchecked_read.o`
/// has `xdp_ok` and `xdp_unchecked` in `xdp`. Running the first would replay `xdp_ok` while
/// the user may have meant the rejected one; every command that runs one program refuses and
/// lists them, and the function names still pick each.
#[test]
fn a_section_of_several_programs_must_be_named_by_function() {
    let obj = root().join("tests/data/verify/unchecked_read.o");
    let scratch = std::env::temp_dir().join(format!("bpfemu-one-way-many-{}", std::process::id()));
    for command in ["replay", "fuzz"] {
        let mut args = run_args(command, "xdp", &scratch.join(command));
        args[1] = obj.display().to_string();
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = bpfemu(&args);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{command}: {stderr}");
        assert!(
            stderr.contains("section `xdp` holds several programs (xdp_ok, xdp_unchecked)"),
            "{command}: {stderr}"
        );
    }
    let out = bpfemu(&[
        "replay",
        &obj.display().to_string(),
        &capture().display().to_string(),
        "--prog",
        "xdp_ok",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let _ = std::fs::remove_dir_all(&scratch);
}
