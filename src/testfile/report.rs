//! The report of a `bpfemu test` run: text as `cargo test` prints it, TAP, JSON, and the
//! suites of a JUnit document (one per test file, written by [`crate::junit`]).

use super::{CaseResult, Verdict};
use crate::junit::{Case, Outcome, Suite};
use serde_json::json;
use std::time::Duration;

/// `cargo test`'s layout: one line per test, the failures' details, then the result line.
pub fn text(results: &[CaseResult], elapsed: Duration) -> String {
    let plural = if results.len() == 1 { "" } else { "s" };
    let mut out = format!("\nrunning {} test{plural}\n", results.len());
    for r in results {
        let word = match &r.verdict {
            Verdict::Passed => "ok",
            Verdict::Blessed => "ok (blessed)",
            Verdict::Failed(_) => "FAILED",
            Verdict::Errored(_) => "ERROR",
        };
        match &r.note {
            Some(note) => out += &format!("test {} ... {word} ({note})\n", r.full_name()),
            None => out += &format!("test {} ... {word}\n", r.full_name()),
        }
    }
    let bad: Vec<&CaseResult> = results
        .iter()
        .filter(|r| matches!(r.verdict, Verdict::Failed(_) | Verdict::Errored(_)))
        .collect();
    if !bad.is_empty() {
        out += "\nfailures:\n";
        for r in &bad {
            out += &format!("\n---- {} ----\n", r.full_name());
            out += &details(r);
        }
        out += "\nfailures:\n";
        for r in &bad {
            out += &format!("    {}\n", r.full_name());
        }
    }
    let (passed, failed, errors) = counts(results);
    let word = if failed + errors == 0 && !results.is_empty() {
        "ok"
    } else {
        "FAILED"
    };
    let blessed = results
        .iter()
        .filter(|r| r.verdict == Verdict::Blessed)
        .count();
    out += &format!("\ntest result: {word}. {passed} passed; {failed} failed");
    if errors > 0 {
        out += &format!("; {errors} errors");
    }
    if blessed > 0 {
        out += &format!("; {blessed} blessed");
    }
    out += &format!("; finished in {:.2}s\n\n", elapsed.as_secs_f64());
    out
}

/// A failed or errored test's lines: where it is, then each difference.
fn details(r: &CaseResult) -> String {
    match &r.verdict {
        Verdict::Failed(problems) => {
            let mut s = format!(
                "{}:{}: test `{}` failed:\n",
                r.file.display(),
                r.line,
                r.name
            );
            for p in problems {
                for line in p.lines() {
                    s += &format!("  {line}\n");
                }
            }
            s
        }
        Verdict::Errored(why) => format!("{why}\n"),
        _ => String::new(),
    }
}

/// Passed (blessed included), failed, errored.
fn counts(results: &[CaseResult]) -> (usize, usize, usize) {
    let n = |f: fn(&Verdict) -> bool| results.iter().filter(|r| f(&r.verdict)).count();
    (
        n(|v| matches!(v, Verdict::Passed | Verdict::Blessed)),
        n(|v| matches!(v, Verdict::Failed(_))),
        n(|v| matches!(v, Verdict::Errored(_))),
    )
}

/// TAP version 13: a plan, `ok`/`not ok` lines, each failure's details as comments.
pub fn tap(results: &[CaseResult]) -> String {
    let mut out = format!("TAP version 13\n1..{}\n", results.len());
    for (i, r) in results.iter().enumerate() {
        let ok = matches!(r.verdict, Verdict::Passed | Verdict::Blessed);
        out += &format!(
            "{} {} - {}\n",
            if ok { "ok" } else { "not ok" },
            i + 1,
            // `#` starts a directive in TAP: not in a name.
            r.full_name().replace('#', "\\#")
        );
        if let Some(note) = &r.note {
            out += &format!("# {note}\n");
        }
        for line in details(r).lines() {
            out += &format!("# {line}\n");
        }
    }
    out
}

/// One JSON document: every test with its outcome and differences, then the counts.
pub fn json(results: &[CaseResult], elapsed: Duration) -> serde_json::Value {
    let tests: Vec<_> = results
        .iter()
        .map(|r| {
            let (outcome, problems) = match &r.verdict {
                Verdict::Passed => ("passed", vec![]),
                Verdict::Blessed => ("blessed", vec![]),
                Verdict::Failed(p) => ("failed", p.clone()),
                Verdict::Errored(e) => ("error", vec![e.clone()]),
            };
            json!({
                "file": r.file.display().to_string(),
                "name": r.name,
                "line": r.line,
                "outcome": outcome,
                "problems": problems,
                "time_ms": r.time.as_secs_f64() * 1e3,
                "note": r.note,
                "packets": r.packets.iter().map(|p| json!({
                    "in": crate::replay::hex(&p.input),
                    "action": p.action,
                    "out": crate::replay::hex(&p.output),
                })).collect::<Vec<_>>(),
            })
        })
        .collect();
    let (passed, failed, errors) = counts(results);
    json!({
        "tests": tests,
        "summary": {
            "passed": passed,
            "failed": failed,
            "errors": errors,
            "elapsed_ms": elapsed.as_secs_f64() * 1e3,
        }
    })
}

/// One suite per test file, a case per test.
pub fn junit_suites(results: &[CaseResult]) -> Vec<Suite> {
    let mut suites: Vec<Suite> = Vec::new();
    for r in results {
        let file = r.file.display().to_string();
        if suites.last().is_none_or(|s| s.name != file) {
            suites.push(Suite {
                name: file.clone(),
                cases: Vec::new(),
            });
        }
        let outcome = match &r.verdict {
            Verdict::Passed | Verdict::Blessed => Outcome::Passed,
            Verdict::Failed(problems) => Outcome::Failed {
                message: problems.first().cloned().unwrap_or_default(),
                kind: "expectation".into(),
                detail: details(r),
            },
            Verdict::Errored(why) => Outcome::Errored {
                message: why.lines().next().unwrap_or_default().to_owned(),
                kind: "bad-input".into(),
                detail: why.clone(),
            },
        };
        suites.last_mut().expect("pushed").cases.push(Case {
            classname: file,
            name: r.name.clone(),
            time: r.time,
            outcome,
            output: None,
        });
    }
    suites
}
