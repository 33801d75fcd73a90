//! `--engine jit-trusted` runs only what bpfemu's own verifier accepts, `--no-verify` or not: a
//! rejected program is refused with the verifier's message at its source line (no kernel
//! involved), an accepted one runs with the interpreter's results, and a program that makes
//! tail calls needs every program of the object accepted. `--engine jit-baseline` (the same
//! trusted code from the baseline compiler) obeys the same rules: every test runs both.

use bpfemu_verifier::{Options, ProgramInput, verify};
use std::path::PathBuf;
use std::process::{Command, Output};

fn bpfemu(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_bpfemu"))
        .args(args)
        .output()
        .expect("bpfemu runs")
}

fn path(rel: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join(rel)
        .display()
        .to_string()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The per-packet JSON lines of a replay, and its summary without the timings.
/// The engines that run host code, verified programs only.
const TRUSTED: [&str; 2] = ["jit-trusted", "jit-baseline"];

fn replay_json(obj: &str, pcap: &str, prog: &str, engine: &str) -> (Vec<String>, String) {
    let out = bpfemu(&[
        "replay", obj, pcap, "--prog", prog, "--engine", engine, "--json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let mut lines: Vec<String> = stdout.lines().map(str::to_owned).collect();
    let summary: serde_json::Value =
        serde_json::from_str(&lines.pop().expect("a summary")).expect("JSON summary");
    let s = &summary["summary"];
    let stable = format!(
        "{} {} {} {}",
        s["actions"], s["packets"], s["insns"], s["faulted"]
    );
    (lines, stable)
}

#[test]
fn a_program_the_verifier_rejects_is_refused_with_its_message() {
    let obj_path = path("tests/data/verify/unchecked_read.o");
    let obj = bpfemu_loader::load_file(obj_path.as_ref(), &Default::default()).expect("loads");
    let prog = obj
        .programs
        .iter()
        .find(|p| p.name == "xdp_unchecked")
        .expect("program");
    let verdict = verify(&ProgramInput::new(&obj, prog), &Options::default());
    let rejection = verdict
        .rejection()
        .expect("the kernel rejects this program; so must bpfemu's verifier");
    let pcap = path("examples/pcap/normal.pcap");
    for engine in TRUSTED {
        refused_with_the_verifiers_message(&obj_path, &pcap, engine, prog, rejection);
    }
    // The checked JIT runs it, and reports the fault the verifier foresaw on a short packet
    // or runs it clean on a long one: either way it is not refused.
    let checked = bpfemu(&[
        "replay",
        &obj_path,
        &pcap,
        "--prog",
        "xdp_unchecked",
        "--engine",
        "jit",
        "--json",
        "--no-verify",
    ]);
    assert!(!checked.stdout.is_empty(), "{}", text(&checked.stderr));
    assert!(
        checked.status.code() != Some(2),
        "{}",
        text(&checked.stderr)
    );
}

fn refused_with_the_verifiers_message(
    obj_path: &str,
    pcap: &str,
    engine: &str,
    prog: &bpfemu_loader::ProgramSpec,
    rejection: &bpfemu_verifier::Rejection,
) {
    let out = bpfemu(&[
        "replay",
        obj_path,
        pcap,
        "--prog",
        "xdp_unchecked",
        "--engine",
        engine,
        // Even told to skip the verifier, trusted code will not run it.
        "--no-verify",
    ]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        out.stdout.is_empty(),
        "no packet ran: {}",
        text(&out.stdout)
    );
    let first = stderr.lines().next().unwrap_or("");
    let pc = rejection.insn.expect("the rejection names an instruction");
    let src = bpfemu::verify::source_of(&prog.line_info, pc).expect("line_info covers it");
    let place = format!("{}:{}:{}", src.file_name, src.line, src.column);
    assert!(first.starts_with(&format!("bpfemu: {place}: ")), "{stderr}");
    assert!(
        first.ends_with(&format!(": error: {}", rejection.message)),
        "{stderr}"
    );
    assert!(
        stderr.contains("rejects program xdp_unchecked: run it with --engine jit"),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!(
            "--engine {engine} runs only what bpfemu's verifier accepts"
        )),
        "{stderr}"
    );
}

#[test]
fn an_accepted_program_runs_as_the_interpreter_runs_it() {
    // Its neighbour in the object is rejected; it makes no tail calls, so that does not matter.
    let obj = path("tests/data/verify/unchecked_read.o");
    let pcap = path("examples/pcap/normal.pcap");
    let interp = replay_json(&obj, &pcap, "xdp_ok", "interp");
    for engine in TRUSTED {
        let trusted = replay_json(&obj, &pcap, "xdp_ok", engine);
        assert!(!trusted.0.is_empty());
        assert_eq!(trusted, interp, "{engine}");
    }
}

#[test]
fn tail_calls_need_every_program_verified_and_then_run_alike() {
    let obj = path("examples/xdp/build/tailcall.v3.o");
    let loaded = bpfemu_loader::load_file(obj.as_ref(), &Default::default()).expect("loads");
    assert!(loaded.programs.len() > 1);
    let all_accepted = loaded
        .programs
        .iter()
        .all(|p| verify(&ProgramInput::new(&loaded, p), &Options::default()).is_accepted());
    assert!(all_accepted, "the kernel accepts every tailcall program");
    let entry = &loaded.programs[0].name;
    let pcap = path("examples/pcap/flows.pcap");
    let interp = replay_json(&obj, &pcap, entry, "interp");
    for engine in TRUSTED {
        let trusted = replay_json(&obj, &pcap, entry, engine);
        assert!(!trusted.0.is_empty());
        assert_eq!(trusted, interp, "{engine}");
    }
}

/// A tail call may reach any program of the object, so every engine needs all of them
/// verified, as the kernel loads none of them otherwise: the dispatcher is refused with the
/// rejected stage's message (exit 1). With `--no-verify` the checked engines run it and the
/// trusted ones still refuse (exit 2).
#[test]
fn a_tail_call_into_a_rejected_program_is_refused() {
    let obj = path("tests/objects/tailcall_unverified.o");
    let pcap = path("examples/pcap/normal.pcap");
    let run = |engine: &str, extra: &[&str]| {
        let mut args = vec![
            "replay",
            &obj,
            &pcap,
            "--prog",
            "dispatcher",
            "--engine",
            engine,
        ];
        args.extend(extra);
        bpfemu(&args)
    };
    for engine in ["interp", "jit", "jit-baseline-checked"]
        .iter()
        .chain(TRUSTED.iter())
    {
        let out = run(engine, &[]);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{engine}: {stderr}");
        assert!(
            stderr.contains("the verifier rejects program unchecked_stage (--no-verify"),
            "{engine}: {stderr}"
        );
        assert!(out.stdout.is_empty(), "{engine}: nothing ran");
    }
    for engine in TRUSTED {
        let out = run(engine, &["--no-verify"]);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{engine}: {stderr}");
        assert!(
            stderr.contains("rejects program unchecked_stage: run it with --engine jit"),
            "{stderr}"
        );
    }
    // Checked and told to, the same dispatcher runs.
    let out = run("jit", &["--no-verify"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
}

/// Every trusted engine refuses to replay `prog` of `obj` (exit 2, no packet run), saying
/// `why`.
fn trusted_engines_refuse(obj: &str, prog: &str, why: &str) {
    let pcap = path("examples/pcap/normal.pcap");
    for engine in TRUSTED {
        let out = bpfemu(&["replay", obj, &pcap, "--prog", prog, "--engine", engine]);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{engine}: {stderr}");
        assert!(
            out.stdout.is_empty(),
            "no packet ran: {}",
            text(&out.stdout)
        );
        assert!(stderr.contains(why), "{engine}: {stderr}");
    }
}

/// The verdict of the first program of `obj`, which must be an acceptance.
fn accepted_verdict(obj: &str) -> bpfemu_verifier::Verdict {
    let obj = bpfemu_loader::load_file(obj.as_ref(), &Default::default()).expect("loads");
    let verdict = verify(
        &ProgramInput::new(&obj, &obj.programs[0]),
        &Options::default(),
    );
    assert!(verdict.is_accepted(), "{:?}", verdict.rejection());
    verdict
}

#[test]
fn a_program_reading_kernel_structures_is_refused() {
    // Accepted (as the kernel accepts it), but it reads the map's struct bpf_array, which no
    // bpfemu runtime has: the trusted JIT would read host memory at a made-up address.
    let obj_path = path("tests/data/verify/map_internals.o");
    assert!(accepted_verdict(&obj_path).reads_kernel_memory());
    trusted_engines_refuse(
        &obj_path,
        "xdp_map_internals",
        "program xdp_map_internals reads kernel structures",
    );
}

#[test]
fn a_program_checked_against_the_wrong_frame_is_refused() {
    // 6.18 accepts it (`scalar += r10` keeps the scalar's frame number, so a callee's store
    // through it is checked against its caller's stack) and it then writes through 0: the
    // trusted engines would do that on host memory. The checked JIT reports the fault.
    let obj_path = path("tests/data/kernels/frameno_stack_arith.o");
    assert_eq!(
        accepted_verdict(&obj_path).kernel_flaw(),
        Some(bpfemu_verifier::KernelFlaw::MisframedStackPointer)
    );
    trusted_engines_refuse(
        &obj_path,
        "store_through_own_frame",
        "taken for another frame's",
    );
    let pcap = path("examples/pcap/normal.pcap");
    let out = bpfemu(&["replay", &obj_path, &pcap, "--engine", "jit"]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(
        stdout.contains("invalid write of 8 bytes at 0x0"),
        "{stdout}"
    );
}

#[test]
fn a_null_for_a_nonnull_argument_is_not_run_trusted() {
    // 6.18 lets a NULL constant through for a global function's `arg:nonnull` pointer, which
    // the function reads: the trusted engines would read host address 0.
    let obj_path = path("tests/data/kernels/global_arg_null.o");
    trusted_engines_refuse(
        &obj_path,
        "null_to_nonnull",
        "a NULL passed for a global function's argument",
    );
    let pcap = path("examples/pcap/normal.pcap");
    // The control passes a stack pointer: it runs.
    let out = bpfemu(&[
        "replay",
        &obj_path,
        &pcap,
        "--prog",
        "stack_to_nonnull",
        "--engine",
        "jit-trusted",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
}

#[test]
fn sixteen_frames_run_as_7_2_in_every_engine() {
    // 7.2 verifies 16 nested frames, the older kernels 8: a program verified as 7.2 runs all
    // its frames in each engine, and the same program is refused as 6.18 before any run.
    let obj_path = path("tests/data/kernels/call_depth.o");
    let pcap = path("examples/pcap/normal.pcap");
    for engine in [
        "interp",
        "jit",
        "jit-trusted",
        "jit-baseline",
        "jit-baseline-checked",
    ] {
        let out = bpfemu(&[
            "replay",
            &obj_path,
            &pcap,
            "--prog",
            "sixteen_frames",
            "--kernel",
            "7.2",
            "--engine",
            engine,
        ]);
        let stdout = text(&out.stdout);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{engine}: {}",
            text(&out.stderr)
        );
        // chain14 adds 1 at each of its 14 levels to x & 1: r0 & 3 is XDP_TX (3) or PASS (2),
        // by the low bit of the packet's ingress ifindex (1 in a replay).
        assert!(stdout.contains("tx              200"), "{engine}: {stdout}");
    }
    let out = bpfemu(&["replay", &obj_path, &pcap, "--prog", "sixteen_frames"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("the call stack of 9 frames is too deep"),
        "{}",
        text(&out.stderr)
    );
}
