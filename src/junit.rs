//! JUnit XML, the report format CI systems read test results from (GitLab, Jenkins, the
//! GitHub test-report actions): `verify --junit` writes one test case per program, `test
//! --junit` one per test. The shape is the common denominator those readers accept:
//! `<testsuites>` of `<testsuite>` of `<testcase>`, each case passed, failed (`<failure>`),
//! errored (`<error>`: it could not be judged) or skipped (`<skipped>`).

use std::fmt::Write;
use std::time::Duration;

/// One `<testsuite>`: an object verified, or a test file run.
#[derive(Clone, Debug, Default)]
pub struct Suite {
    pub name: String,
    pub cases: Vec<Case>,
}

/// One `<testcase>`.
#[derive(Clone, Debug)]
pub struct Case {
    /// What readers group cases by: the object or test file.
    pub classname: String,
    pub name: String,
    pub time: Duration,
    pub outcome: Outcome,
    /// Shown by readers under the case (`<system-out>`): a log, a difference.
    pub output: Option<String>,
}

/// How a case ended.
#[derive(Clone, Debug)]
pub enum Outcome {
    Passed,
    /// The check ran and said no. `kind` is the failure's `type` attribute (a rule id).
    Failed {
        message: String,
        kind: String,
        detail: String,
    },
    /// The check could not run or could not decide.
    Errored {
        message: String,
        kind: String,
        detail: String,
    },
    Skipped {
        message: String,
    },
}

impl Suite {
    fn count(&self, pred: impl Fn(&Outcome) -> bool) -> usize {
        self.cases.iter().filter(|c| pred(&c.outcome)).count()
    }

    fn time(&self) -> Duration {
        self.cases.iter().map(|c| c.time).sum()
    }
}

/// The document, UTF-8 with its declaration.
pub fn render(suites: &[Suite]) -> String {
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let all = |pred: fn(&Outcome) -> bool| suites.iter().map(|s| s.count(pred)).sum::<usize>();
    writeln!(
        out,
        "<testsuites name=\"bpfemu\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\" time=\"{}\">",
        suites.iter().map(|s| s.cases.len()).sum::<usize>(),
        all(|o| matches!(o, Outcome::Failed { .. })),
        all(|o| matches!(o, Outcome::Errored { .. })),
        all(|o| matches!(o, Outcome::Skipped { .. })),
        seconds(suites.iter().map(Suite::time).sum()),
    )
    .expect("string");
    for suite in suites {
        render_suite(&mut out, suite);
    }
    out.push_str("</testsuites>\n");
    out
}

fn render_suite(out: &mut String, suite: &Suite) {
    writeln!(
        out,
        "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\" time=\"{}\">",
        attr(&suite.name),
        suite.cases.len(),
        suite.count(|o| matches!(o, Outcome::Failed { .. })),
        suite.count(|o| matches!(o, Outcome::Errored { .. })),
        suite.count(|o| matches!(o, Outcome::Skipped { .. })),
        seconds(suite.time()),
    )
    .expect("string");
    for case in &suite.cases {
        render_case(out, case);
    }
    out.push_str("  </testsuite>\n");
}

fn render_case(out: &mut String, case: &Case) {
    write!(
        out,
        "    <testcase classname=\"{}\" name=\"{}\" time=\"{}\"",
        attr(&case.classname),
        attr(&case.name),
        seconds(case.time)
    )
    .expect("string");
    if matches!(case.outcome, Outcome::Passed) && case.output.is_none() {
        out.push_str("/>\n");
        return;
    }
    out.push_str(">\n");
    let element = |out: &mut String, tag: &str, message: &str, kind: &str, detail: &str| {
        writeln!(
            out,
            "      <{tag} message=\"{}\" type=\"{}\">{}</{tag}>",
            attr(message),
            attr(kind),
            text(detail)
        )
        .expect("string");
    };
    match &case.outcome {
        Outcome::Passed => {}
        Outcome::Failed {
            message,
            kind,
            detail,
        } => element(out, "failure", message, kind, detail),
        Outcome::Errored {
            message,
            kind,
            detail,
        } => element(out, "error", message, kind, detail),
        Outcome::Skipped { message } => {
            writeln!(out, "      <skipped message=\"{}\"/>", attr(message)).expect("string")
        }
    }
    if let Some(output) = &case.output {
        writeln!(out, "      <system-out>{}</system-out>", text(output)).expect("string");
    }
    out.push_str("    </testcase>\n");
}

/// Seconds with millisecond precision, as JUnit readers parse `time`.
fn seconds(d: Duration) -> String {
    format!("{:.3}", d.as_secs_f64())
}

/// Element text: markup escaped, and characters XML 1.0 cannot carry at all (NUL and most
/// other C0 controls, which a verifier log or a packet's printk may hold) replaced, since a
/// reader refuses the whole file over one of them.
fn text(s: &str) -> String {
    escape(s, false)
}

/// An attribute value: as [`text`], and quotes and line breaks as references so they survive
/// attribute-value normalisation.
fn attr(s: &str) -> String {
    escape(s, true)
}

fn escape(s: &str, attribute: bool) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' if attribute => out.push_str("&quot;"),
            '\n' if attribute => out.push_str("&#10;"),
            '\r' => out.push_str("&#13;"),
            '\t' if attribute => out.push_str("&#9;"),
            '\t' | '\n' => out.push(c),
            c if is_xml_char(c) => out.push(c),
            _ => out.push('\u{FFFD}'),
        }
    }
    out
}

/// XML 1.0's Char production.
fn is_xml_char(c: char) -> bool {
    matches!(c, '\u{20}'..='\u{D7FF}' | '\u{E000}'..='\u{FFFD}' | '\u{10000}'..='\u{10FFFF}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_and_controls_cannot_break_the_document() {
        let s = escape("a<b>&\"c\"\n\u{0}\u{1b}", true);
        assert_eq!(s, "a&lt;b&gt;&amp;&quot;c&quot;&#10;\u{FFFD}\u{FFFD}");
        let t = escape("x\ny\t\u{7}", false);
        assert_eq!(t, "x\ny\t\u{FFFD}");
    }

    #[test]
    fn counts_follow_the_outcomes() {
        let case = |name: &str, outcome| Case {
            classname: "obj.o".into(),
            name: name.into(),
            time: Duration::from_millis(1500),
            outcome,
            output: None,
        };
        let suite = Suite {
            name: "obj.o".into(),
            cases: vec![
                case("ok", Outcome::Passed),
                case(
                    "bad",
                    Outcome::Failed {
                        message: "m".into(),
                        kind: "k".into(),
                        detail: "d".into(),
                    },
                ),
                case(
                    "skip",
                    Outcome::Skipped {
                        message: "s".into(),
                    },
                ),
            ],
        };
        let doc = render(&[suite]);
        assert!(doc.contains(
            "<testsuite name=\"obj.o\" tests=\"3\" failures=\"1\" errors=\"0\" skipped=\"1\" time=\"4.500\">"
        ));
        assert!(doc.contains("<failure message=\"m\" type=\"k\">d</failure>"));
        assert!(doc.contains("name=\"ok\" time=\"1.500\"/>"));
    }
}
