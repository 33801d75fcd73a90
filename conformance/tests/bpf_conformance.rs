//! The whole bpf_conformance suite, run the way `bpfemu conformance` runs it: every test passes
//! (or is skipped with a stated reason), and every negative input is rejected for its reason.

use bpfemu::conformance::runner::{self, Mode, Outcome, Stage, TestReport};
use bpfemu::jit::Engine;
use std::path::PathBuf;

/// The suite's checkout: `../shared/conformance/bpf_conformance` from the workspace root,
/// unless `BPFEMU_CONFORMANCE_DIR` names another.
fn suite_dir() -> PathBuf {
    let dir = std::env::var_os("BPFEMU_CONFORMANCE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("../../shared/conformance/bpf_conformance")
        });
    assert!(
        dir.join("tests").is_dir(),
        "the bpf_conformance suite is not at {}",
        dir.display()
    );
    dir
}

fn run(sub: &str) -> Vec<TestReport> {
    run_with(sub, Engine::Interp)
}

fn run_with(sub: &str, engine: Engine) -> Vec<TestReport> {
    runner::run_dir(&suite_dir().join(sub), engine).expect("suite directory readable")
}

#[test]
fn every_suite_test_passes() {
    every_suite_test_passes_under(Engine::Interp);
}

#[test]
fn every_suite_test_passes_under_the_jit() {
    every_suite_test_passes_under(Engine::Jit);
}

/// Trusted code from the baseline compiler, on every test that expects a result (those that
/// expect an error need the checks trusted code leaves to a verifier).
#[test]
fn every_suite_test_passes_under_the_baseline_jit() {
    every_suite_test_passes_under(Engine::JitBaseline);
}

/// Checked code from the baseline compiler, on every test, those that expect an error too:
/// the suite's programs are not verified, so its checks must stop them as the interpreter's.
#[test]
fn every_suite_test_passes_under_the_checked_baseline_jit() {
    every_suite_test_passes_under(Engine::JitBaselineChecked);
}

fn every_suite_test_passes_under(engine: Engine) {
    let reports = run_with("tests", engine);
    assert!(reports.len() >= 300, "only {} tests found", reports.len());
    let failures: Vec<String> = reports
        .iter()
        .filter_map(|r| match &r.outcome {
            Outcome::Fail { .. } => runner::report_line(r, Mode::ExpectPass),
            _ => None,
        })
        .collect();
    assert!(
        failures.is_empty(),
        "{} failing tests:\n{}",
        failures.len(),
        failures.join("\n")
    );
    let skipped: Vec<&str> = reports
        .iter()
        .filter(|r| match &r.outcome {
            Outcome::Skip { reason } => !reason.contains("trusted code"),
            _ => false,
        })
        .map(|r| r.name.as_str())
        .collect();
    assert_eq!(
        skipped,
        ["callx"],
        "only callx (not a Linux instruction) may be skipped"
    );
}

/// The reason each negative file must be rejected for, from its name.
fn expected_stage(name: &str) -> Stage {
    match name {
        "empty" | "empty_instructions" | "invalid_unknown_directive" => Stage::EmptyProgram,
        // `or %r0, %r10` runs fine; the file expects an error, so the result is a mismatch.
        "error" => Stage::Mismatch,
        // The expectation is wrong on purpose in the upper 32 bits.
        "incorrect_return_value_high_bits" => Stage::Mismatch,
        n if n.starts_with("unused-") => Stage::Decode,
        n if n.starts_with("invalid_") => Stage::Assemble,
        other => panic!("no expectation for negative file {other}"),
    }
}

#[test]
fn every_negative_input_is_rejected_for_its_reason() {
    let reports = run("negative");
    assert_eq!(reports.len(), 60);
    let mut wrong = Vec::new();
    for report in &reports {
        let want = expected_stage(&report.name);
        match &report.outcome {
            Outcome::Fail { stage, .. } if *stage == want => {}
            other => wrong.push(format!("{}: expected {want}, got {other:?}", report.name)),
        }
    }
    assert!(
        wrong.is_empty(),
        "{} negative files not rejected as expected:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
    assert_eq!(runner::summarize(&reports, Mode::ExpectFail).failed, 0);
}

#[test]
fn assembler_rejections_name_the_problem() {
    let reports = run("negative");
    let message = |name: &str| match &reports.iter().find(|r| r.name == name).unwrap().outcome {
        Outcome::Fail { message, .. } => message.to_lowercase(),
        other => panic!("{name}: {other:?}"),
    };
    for (file, words) in [
        ("invalid_register", "register"),
        ("invalid_mnemonic", "mnemonic"),
        ("invalid_label", "label"),
        ("invalid_operand_count", "operand"),
        ("invalid_lock", "operand"),
        ("invalid_lock2", "operand"),
        ("invalid_imm32_dec_range", "range"),
        ("invalid_imm32_hex_range", "range"),
        ("invalid_offset_range", "range"),
    ] {
        let text = message(file);
        assert!(
            text.contains(words),
            "{file}: `{text}` does not mention {words}"
        );
        assert!(
            text.contains(".data:"),
            "{file}: `{text}` does not name the file and line"
        );
    }
}
