//! Running bpf_conformance tests: assemble (or take the raw slots), decode, run with the suite's
//! convention, compare all 64 bits of r0.
//!
//! The convention: r1 = the memory block's address (0 without one), r2 = its length, a
//! 512-byte stack, and helper 5 returning its first argument.

use super::suite::{self, Expectation, TestCase};
use bpfemu_isa::{Program, ProgramError, asm};
use bpfemu_jit::Engine;
use bpfemu_vm::{HelperError, Helpers, Memory};
use serde::Serialize;
use std::fmt;
use std::path::Path;

/// Whether the directory holds tests that must pass, or inputs that must be rejected.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Mode {
    #[default]
    ExpectPass,
    ExpectFail,
}

/// Where a test stopped short of a matching result.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    /// The `.data` file itself is malformed.
    Parse,
    /// The assembler rejected the `asm` section.
    Assemble,
    /// A slot does not decode (reserved field set, unknown opcode, ...).
    Decode,
    /// No instructions at all.
    EmptyProgram,
    /// The run stopped with an error where a result was expected.
    Run,
    /// The run finished with another r0 than expected, or finished where an error was expected.
    Mismatch,
}

impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Stage::Parse => "malformed test file",
            Stage::Assemble => "assembler error",
            Stage::Decode => "decoder error",
            Stage::EmptyProgram => "empty program",
            Stage::Run => "run error",
            Stage::Mismatch => "result mismatch",
        })
    }
}

/// The outcome of one test.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "outcome", rename_all = "lowercase")]
pub enum Outcome {
    /// Result (or error) as expected; `r0` is absent when an error was expected.
    Pass {
        r0: Option<u64>,
    },
    Fail {
        stage: Stage,
        message: String,
    },
    Skip {
        reason: String,
    },
}

/// One test's report line.
#[derive(Clone, Debug, Serialize)]
pub struct TestReport {
    pub name: String,
    #[serde(flatten)]
    pub outcome: Outcome,
}

/// Totals; in [`Mode::ExpectFail`] a test "passes" when it was rejected.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Summary {
    pub passed: usize,
    pub failed: usize,
    pub skipped: usize,
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} passed, {} failed, {} skipped",
            self.passed, self.failed, self.skipped
        )
    }
}

/// The suite's helper table: only helper 5, which returns its first argument.
pub struct SuiteHelpers;

/// The helper id bpf_conformance's `call_unwind_fail` test calls.
const ECHO_HELPER: i32 = 5;

impl Helpers for SuiteHelpers {
    fn call(&mut self, id: i32, args: [u64; 5], _mem: &mut Memory) -> Result<u64, HelperError> {
        if id == ECHO_HELPER {
            Ok(args[0])
        } else {
            Err(HelperError::Unknown(id))
        }
    }
}

/// Why a test cannot mean anything under Linux semantics, if it cannot.
fn skip_reason(case: &TestCase) -> Option<String> {
    // A file without a program is rejected as empty whatever it expects; the suite's skip rule
    // is for programs that state no expectation.
    let has_program = case.raw.is_some()
        || case
            .asm
            .as_deref()
            .is_some_and(|asm| !asm.trim().is_empty());
    if case.expect == Expectation::Nothing && has_program {
        return Some("the file states neither a result nor an error".into());
    }
    let calls_register = case.asm.as_deref().is_some_and(|asm| {
        asm.lines().any(|l| {
            l.trim_start()
                .strip_prefix("call")
                .is_some_and(|rest| rest.trim_start().starts_with('%'))
        })
    });
    if calls_register && case.raw.is_none() {
        return Some(
            "callx (call through a register) is a uBPF extension: Linux has no BPF_CALL|BPF_X \
             instruction and its verifier rejects the opcode"
                .into(),
        );
    }
    None
}

/// Builds the program a test describes: its raw slots, else its assembled `asm` section.
pub fn build_program(case: &TestCase) -> Result<Program, (Stage, String)> {
    let slots = match (&case.raw, &case.asm) {
        (Some(raw), _) => raw.clone(),
        (None, Some(text)) => asm::assemble_ubpf(text).map_err(|e| {
            let line = case.asm_first_line + e.line - 1;
            (
                Stage::Assemble,
                format!("{}:{line}: {e}", case.path.display()),
            )
        })?,
        (None, None) => Vec::new(),
    };
    Program::decode(slots).map_err(|e| match e {
        ProgramError::Empty => (Stage::EmptyProgram, e.to_string()),
        ProgramError::Decode(d) => (Stage::Decode, d.to_string()),
    })
}

/// Runs one parsed test.
pub fn run_case(case: &TestCase, engine: Engine) -> Outcome {
    if let Some(reason) = skip_reason(case) {
        return Outcome::Skip { reason };
    }
    // Trusted code checks nothing: its programs must pass a verifier, which the suite's do not.
    if engine.is_trusted() && matches!(case.expect, Expectation::Error(_)) {
        return Outcome::Skip {
            reason: "it expects an error, and trusted code checks nothing".into(),
        };
    }
    let program = match build_program(case) {
        Ok(p) => p,
        Err((stage, message)) => return Outcome::Fail { stage, message },
    };
    let mut mem = case.mem.clone();
    let result =
        bpfemu_vm::run_on_buffer_with(&*engine.build(None), &program, &mut mem, &mut SuiteHelpers);
    match (&case.expect, result) {
        (Expectation::Result(want), Ok(got)) if *want == got => Outcome::Pass { r0: Some(got) },
        (Expectation::Result(want), Ok(got)) => Outcome::Fail {
            stage: Stage::Mismatch,
            message: format!("r0 = {got:#x}, expected {want:#x}"),
        },
        (Expectation::Result(_), Err(e)) => Outcome::Fail {
            stage: Stage::Run,
            message: e.to_string(),
        },
        (Expectation::Error(_), Err(_)) => Outcome::Pass { r0: None },
        (Expectation::Error(want), Ok(got)) => Outcome::Fail {
            stage: Stage::Mismatch,
            message: format!("r0 = {got:#x}, expected the error `{want}`"),
        },
        (Expectation::Nothing, Ok(got)) => Outcome::Pass { r0: Some(got) },
        (Expectation::Nothing, Err(e)) => Outcome::Fail {
            stage: Stage::Run,
            message: e.to_string(),
        },
    }
}

/// Loads and runs one `.data` file.
pub fn run_file(path: &Path, engine: Engine) -> TestReport {
    match suite::load(path) {
        Ok(case) => TestReport {
            name: case.name.clone(),
            outcome: run_case(&case, engine),
        },
        Err(e) => TestReport {
            name: path
                .file_stem()
                .map_or_else(String::new, |s| s.to_string_lossy().into_owned()),
            outcome: Outcome::Fail {
                stage: Stage::Parse,
                message: e.to_string(),
            },
        },
    }
}

/// Runs every `.data` file of `dir`.
pub fn run_dir(dir: &Path, engine: Engine) -> std::io::Result<Vec<TestReport>> {
    Ok(suite::list_dir(dir)?
        .iter()
        .map(|p| run_file(p, engine))
        .collect())
}

/// Counts outcomes; in [`Mode::ExpectFail`] a rejected test counts as passed and an accepted
/// one as failed.
pub fn summarize(reports: &[TestReport], mode: Mode) -> Summary {
    let mut summary = Summary::default();
    for report in reports {
        match (&report.outcome, mode) {
            (Outcome::Skip { .. }, _) => summary.skipped += 1,
            (Outcome::Pass { .. }, Mode::ExpectPass) | (Outcome::Fail { .. }, Mode::ExpectFail) => {
                summary.passed += 1
            }
            _ => summary.failed += 1,
        }
    }
    summary
}

/// The line printed for a report, or `None` for a quiet success.
pub fn report_line(report: &TestReport, mode: Mode) -> Option<String> {
    let name = &report.name;
    match (&report.outcome, mode) {
        (Outcome::Pass { .. }, Mode::ExpectPass) => None,
        (Outcome::Pass { r0 }, Mode::ExpectFail) => Some(match r0 {
            Some(r0) => format!(
                "FAIL {name}: accepted with r0 = {r0:#x}, but every test here must be rejected"
            ),
            None => format!("FAIL {name}: accepted, but every test here must be rejected"),
        }),
        (Outcome::Fail { stage, message }, Mode::ExpectPass) => {
            Some(format!("FAIL {name}: {stage}: {message}"))
        }
        (Outcome::Fail { stage, message }, Mode::ExpectFail) => {
            Some(format!("rejected {name}: {stage}: {message}"))
        }
        (Outcome::Skip { reason }, _) => Some(format!("SKIP {name}: {reason}")),
    }
}
