//! What CI systems read besides text: GitHub Actions' workflow commands (annotations on the
//! source line of a pull request) and JUnit XML.

use super::batch::Batch;
use super::table::RowVerdict;
use crate::junit::{Case, Outcome, Suite};

/// Whether bpfemu runs as a GitHub Actions step (the runner sets `GITHUB_ACTIONS=true`).
pub fn in_github_actions() -> bool {
    std::env::var_os("GITHUB_ACTIONS").is_some_and(|v| v == "true")
}

/// One `::error` (rejected, or an object not loaded) or `::warning` (undecided) command per
/// program, at its source line where line info gives one.
pub fn github_annotations(batch: &Batch) -> Vec<String> {
    let mut lines = Vec::new();
    for p in &batch.programs {
        let Some(r) = &p.rejection else { continue };
        let level = match p.verdict {
            RowVerdict::Undecided => "warning",
            _ => "error",
        };
        let mut props = Vec::new();
        match (&r.source, &r.source_path) {
            (Some(src), Some(path)) => {
                props.push(("file", path.clone()));
                props.push(("line", src.line.max(1).to_string()));
                if src.column > 0 {
                    props.push(("col", src.column.to_string()));
                }
            }
            _ => props.push(("file", p.file.clone())),
        }
        props.push((
            "title",
            format!("bpfemu verify: {} ({})", p.name, r.kind.id),
        ));
        lines.push(command(level, &props, &r.error_text));
    }
    for f in &batch.failures {
        lines.push(command(
            "error",
            &[
                ("file", f.file.clone()),
                ("title", "bpfemu verify: not loaded".into()),
            ],
            &f.error,
        ));
    }
    lines
}

/// `::LEVEL k=v,k=v::message`, escaped as the runner unescapes: `%`, CR and LF in both
/// parts, and `:` and `,` in property values too.
fn command(level: &str, props: &[(&str, String)], message: &str) -> String {
    let props: Vec<String> = props
        .iter()
        .map(|(k, v)| format!("{k}={}", escape_property(v)))
        .collect();
    format!(
        "::{level} {}::{}",
        props.join(","),
        escape_data(message.trim_end())
    )
}

fn escape_data(s: &str) -> String {
    s.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

fn escape_property(s: &str) -> String {
    escape_data(s).replace(':', "%3A").replace(',', "%2C")
}

/// One suite per object, one case per program: rejected programs fail, undecided ones and
/// objects that did not load are errors, programs bpfemu does not verify are skipped.
pub fn junit_suites(batch: &Batch) -> Vec<Suite> {
    let mut suites: Vec<Suite> = batch
        .objects
        .iter()
        .map(|file| Suite {
            name: file.clone(),
            cases: Vec::new(),
        })
        .collect();
    for p in &batch.programs {
        let outcome = match (&p.rejection, p.verdict) {
            (None, _) => Outcome::Passed,
            (Some(r), RowVerdict::Undecided) => Outcome::Errored {
                message: r.message.clone(),
                kind: r.kind.id.to_owned(),
                detail: r.error_text.clone(),
            },
            (Some(r), _) => Outcome::Failed {
                message: r.message.clone(),
                kind: r.kind.id.to_owned(),
                detail: r.error_text.clone(),
            },
        };
        let log = p.text.trim_end();
        suite(&mut suites, &p.file).cases.push(Case {
            classname: p.file.clone(),
            name: p.name.clone(),
            time: p.stats.time,
            outcome,
            output: (!log.is_empty()).then(|| log.to_owned()),
        });
    }
    for n in &batch.not_verified {
        suite(&mut suites, &n.file).cases.push(Case {
            classname: n.file.clone(),
            name: n.name.clone(),
            time: Default::default(),
            outcome: Outcome::Skipped {
                message: n.reason.clone(),
            },
            output: None,
        });
    }
    for f in &batch.failures {
        suite(&mut suites, &f.file).cases.push(Case {
            classname: f.file.clone(),
            name: "load".into(),
            time: Default::default(),
            outcome: Outcome::Errored {
                message: f.error.clone(),
                kind: "load".into(),
                detail: f.error.clone(),
            },
            output: None,
        });
    }
    suites
}

/// The suite of `file`, made at the end when the object had none yet (it failed to load).
fn suite<'a>(suites: &'a mut Vec<Suite>, file: &str) -> &'a mut Suite {
    let i = match suites.iter().position(|s| s.name == file) {
        Some(i) => i,
        None => {
            suites.push(Suite {
                name: file.to_owned(),
                cases: Vec::new(),
            });
            suites.len() - 1
        }
    };
    &mut suites[i]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_escape_what_the_runner_unescapes() {
        let line = command(
            "error",
            &[("file", "a,b:c.c".into()), ("line", "3".into())],
            "100% bad\nnext",
        );
        assert_eq!(line, "::error file=a%2Cb%3Ac.c,line=3::100%25 bad%0Anext");
        let line = command("warning", &[("file", "x.c".into())], "one\ntwo\n");
        assert_eq!(line, "::warning file=x.c::one%0Atwo");
    }
}
