//! `bpfemu verify --compare BASE.csv NEW.csv` and `--baseline BASE.csv`: per program the old
//! and new statistics with their absolute and relative change, as veristat's `-C` shows them,
//! and the thresholds a team fails its CI on (`--fail-on 'insns>+10%'`, `verdict`).

use super::table::{Row, RowVerdict, Stat, aligned};
use anyhow::{Result, bail};
use std::fmt::Write;

/// One `--fail-on` rule.
#[derive(Clone, Debug, PartialEq)]
pub enum Rule {
    /// A program's verdict changed (accepted to rejected, or the other way).
    VerdictChanged,
    /// A program of the baseline is gone, or a new one appeared, in the new run.
    ProgramSetChanged,
    /// `STAT>LIMIT`: the statistic grew past the limit.
    Grew { stat: Stat, limit: Limit },
}

/// How a statistic's growth is measured.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Limit {
    /// `+N%`: more than N percent over the baseline's value.
    Percent(f64),
    /// `+N`: more than N over the baseline's value.
    Increase(i64),
    /// `N`: the new value is over N, whatever the baseline was.
    Above(i64),
}

/// The rules when none is given: a verdict that changes fails; statistics only inform.
pub fn default_rules() -> Vec<Rule> {
    vec![Rule::VerdictChanged]
}

/// Parses `--fail-on` values: comma-separated rules, `verdict`, `programs`, or
/// `STAT>+N%`, `STAT>+N`, `STAT>N` with STAT any name veristat gives a statistic.
pub fn parse_rules(specs: &[String]) -> Result<Vec<Rule>> {
    let mut rules = Vec::new();
    for spec in specs.iter().flat_map(|s| s.split(',')) {
        rules.push(parse_rule(spec.trim())?);
    }
    Ok(rules)
}

fn parse_rule(spec: &str) -> Result<Rule> {
    match spec {
        "verdict" => return Ok(Rule::VerdictChanged),
        "programs" => return Ok(Rule::ProgramSetChanged),
        _ => {}
    }
    let Some((name, limit)) = spec.split_once('>') else {
        bail!(
            "--fail-on '{spec}': expected verdict, programs, or STAT>+N%, STAT>+N, STAT>N \
             (for example insns>+10%)"
        );
    };
    let Some(stat) = Stat::by_name(name.trim()) else {
        let known: Vec<&str> = Stat::ALL.iter().flat_map(|s| s.names()).copied().collect();
        bail!(
            "--fail-on '{spec}': unknown statistic '{}' (known: {})",
            name.trim(),
            known.join(", ")
        );
    };
    let limit = limit.trim();
    let bad = || anyhow::anyhow!("--fail-on '{spec}': '{limit}' is not +N%, +N or N");
    let limit = if let Some(pct) = limit.strip_prefix('+').and_then(|l| l.strip_suffix('%')) {
        let pct: f64 = pct.parse().map_err(|_| bad())?;
        if !pct.is_finite() || pct < 0.0 {
            return Err(bad());
        }
        Limit::Percent(pct)
    } else if let Some(n) = limit.strip_prefix('+') {
        Limit::Increase(n.parse().map_err(|_| bad())?)
    } else {
        Limit::Above(limit.parse().map_err(|_| bad())?)
    };
    Ok(Rule::Grew { stat, limit })
}

impl std::fmt::Display for Rule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Rule::VerdictChanged => write!(f, "verdict"),
            Rule::ProgramSetChanged => write!(f, "programs"),
            Rule::Grew { stat, limit } => {
                let name = stat.names().last().expect("a name");
                match limit {
                    Limit::Percent(p) => write!(f, "{name}>+{p}%"),
                    Limit::Increase(n) => write!(f, "{name}>+{n}"),
                    Limit::Above(n) => write!(f, "{name}>{n}"),
                }
            }
        }
    }
}

/// A program in one run or both.
#[derive(Debug)]
pub struct Pair<'a> {
    pub base: Option<&'a Row>,
    pub new: Option<&'a Row>,
}

impl Pair<'_> {
    fn any(&self) -> &Row {
        self.new.or(self.base).expect("one side at least")
    }
}

/// The comparison: every program of either run, joined on (file, program); a file name
/// joins by its path or, where that finds nothing, by its base name when that is unique on
/// both sides (veristat writes base names; bpfemu writes the path it was given).
pub struct Comparison<'a> {
    pub pairs: Vec<Pair<'a>>,
    /// Each broken rule, as a line.
    pub failures: Vec<String>,
}

pub fn compare<'a>(base: &'a [Row], new: &'a [Row], rules: &[Rule]) -> Comparison<'a> {
    let mut pairs: Vec<Pair<'a>> = Vec::new();
    let mut matched = vec![false; base.len()];
    for n in new {
        let found = find_match(base, &matched, n);
        if let Some(i) = found {
            matched[i] = true;
        }
        pairs.push(Pair {
            base: found.map(|i| &base[i]),
            new: Some(n),
        });
    }
    for (i, b) in base.iter().enumerate() {
        if !matched[i] {
            pairs.push(Pair {
                base: Some(b),
                new: None,
            });
        }
    }
    pairs.sort_by(|a, b| {
        let (a, b) = (a.any(), b.any());
        (&a.file, &a.program).cmp(&(&b.file, &b.program))
    });
    let failures = pairs
        .iter()
        .flat_map(|pair| rules.iter().filter_map(move |rule| broken(pair, rule)))
        .collect();
    Comparison { pairs, failures }
}

fn find_match(base: &[Row], matched: &[bool], n: &Row) -> Option<usize> {
    let free = |i: &usize| !matched[*i] && base[*i].program == n.program;
    if let Some(i) = (0..base.len())
        .filter(free)
        .find(|i| base[*i].file == n.file)
    {
        return Some(i);
    }
    let name = |file: &str| {
        std::path::Path::new(file)
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
    };
    let wanted = name(&n.file);
    let same: Vec<usize> = (0..base.len())
        .filter(free)
        .filter(|i| name(&base[*i].file) == wanted)
        .collect();
    (same.len() == 1).then(|| same[0])
}

/// The line saying how `pair` breaks `rule`, if it does.
fn broken(pair: &Pair<'_>, rule: &Rule) -> Option<String> {
    let who = {
        let r = pair.any();
        format!("{}/{}", r.file, r.program)
    };
    match (rule, pair.base, pair.new) {
        (Rule::ProgramSetChanged, None, Some(_)) => Some(format!("{who}: new program")),
        (Rule::ProgramSetChanged, Some(_), None) => Some(format!("{who}: program gone")),
        (Rule::VerdictChanged, Some(b), Some(n)) if b.verdict != n.verdict => Some(format!(
            "{who}: verdict {} -> {} (fails verdict)",
            verdict_word(b.verdict),
            verdict_word(n.verdict)
        )),
        (Rule::Grew { stat, limit }, Some(b), Some(n)) => {
            let (old, new) = (b.value(*stat)?, n.value(*stat)?);
            let over = match limit {
                Limit::Percent(p) => old != new && percent(old, new).is_none_or(|pct| pct > *p),
                Limit::Increase(d) => new - old > *d,
                Limit::Above(v) => new > *v,
            };
            over.then(|| {
                format!(
                    "{who}: {} {old} -> {new} ({}) (fails {rule})",
                    stat.names().last().expect("a name"),
                    delta(old, new)
                )
            })
        }
        _ => None,
    }
}

fn verdict_word(v: Option<RowVerdict>) -> &'static str {
    v.map_or("-", RowVerdict::word)
}

/// The relative change in percent; `None` from a zero baseline.
fn percent(old: i64, new: i64) -> Option<f64> {
    (old != 0).then(|| (new - old) as f64 * 100.0 / old.unsigned_abs() as f64)
}

/// `+12 (+3.45%)`, as veristat writes a difference.
fn delta(old: i64, new: i64) -> String {
    let diff = new - old;
    match percent(old, new) {
        Some(pct) => format!("{diff:+} ({pct:+.2}%)"),
        None if diff == 0 => "+0 (+0.00%)".to_owned(),
        None => format!("{diff:+} (+inf%)"),
    }
}

/// The statistics the comparison shows.
const SHOWN: [Stat; 4] = [
    Stat::TotalInsns,
    Stat::TotalStates,
    Stat::PeakStates,
    Stat::Duration,
];

/// The comparison as a table (per statistic: base, new, and the difference), then the rules
/// broken.
pub fn render(cmp: &Comparison<'_>) -> String {
    let mut header: Vec<String> = ["File", "Program", "Verdict (A)", "Verdict (B)"]
        .map(String::from)
        .to_vec();
    for stat in SHOWN {
        for side in ["A", "B", "DIFF"] {
            header.push(format!("{} ({side})", stat.header()));
        }
    }
    let cells: Vec<Vec<String>> = cmp
        .pairs
        .iter()
        .map(|pair| {
            let any = pair.any();
            let mut line = vec![
                any.file.clone(),
                any.program.clone(),
                pair.base
                    .map_or("-", |r| verdict_word(r.verdict))
                    .to_owned(),
                pair.new.map_or("-", |r| verdict_word(r.verdict)).to_owned(),
            ];
            for stat in SHOWN {
                let old = pair.base.and_then(|r| r.value(stat));
                let new = pair.new.and_then(|r| r.value(stat));
                let show = |v: Option<i64>| v.map_or("-".to_owned(), |v| v.to_string());
                line.push(show(old));
                line.push(show(new));
                line.push(match (old, new) {
                    (Some(o), Some(n)) => delta(o, n),
                    _ => "-".to_owned(),
                });
            }
            line
        })
        .collect();
    let mut out = aligned(&header, &cells, 4);
    if cmp.failures.is_empty() {
        writeln!(
            out,
            "{} programs compared: no threshold crossed",
            cmp.pairs.len()
        )
        .expect("string");
    } else {
        for failure in &cmp.failures {
            writeln!(out, "{failure}").expect("string");
        }
        writeln!(
            out,
            "{} programs compared: {} thresholds crossed",
            cmp.pairs.len(),
            cmp.failures.len()
        )
        .expect("string");
    }
    out
}

/// The comparison as JSON: per program both sides and the differences, then the failures.
pub fn to_json(cmp: &Comparison<'_>) -> serde_json::Value {
    let side = |r: Option<&Row>| {
        r.map(|r| {
            let mut v = serde_json::json!({ "verdict": r.verdict.map(RowVerdict::word) });
            for (stat, value) in &r.values {
                v[stat.csv_name()] = serde_json::json!(value);
            }
            v
        })
    };
    let programs: Vec<serde_json::Value> = cmp
        .pairs
        .iter()
        .map(|p| {
            let any = p.any();
            serde_json::json!({
                "file": any.file,
                "program": any.program,
                "base": side(p.base),
                "new": side(p.new),
            })
        })
        .collect();
    serde_json::json!({ "programs": programs, "failures": cmp.failures })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn row(file: &str, prog: &str, verdict: RowVerdict, insns: i64) -> Row {
        Row {
            file: file.into(),
            program: prog.into(),
            verdict: Some(verdict),
            values: BTreeMap::from([(Stat::TotalInsns, insns)]),
        }
    }

    #[test]
    fn rules_parse_as_written_and_refuse_nonsense() {
        let rules = parse_rules(&["insns>+10%,states>+5".into(), "verdict".into()]).unwrap();
        assert_eq!(
            rules,
            vec![
                Rule::Grew {
                    stat: Stat::TotalInsns,
                    limit: Limit::Percent(10.0)
                },
                Rule::Grew {
                    stat: Stat::TotalStates,
                    limit: Limit::Increase(5)
                },
                Rule::VerdictChanged
            ]
        );
        for bad in [
            "insns",
            "cycles>+1%",
            "insns>+ten%",
            "insns>+-5%",
            "insns>+inf%",
        ] {
            assert!(parse_rules(&[bad.into()]).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_threshold_fails_only_past_its_limit() {
        use RowVerdict::Accepted as A;
        let base = [row("a.o", "p", A, 100), row("a.o", "q", A, 100)];
        let new = [row("a.o", "p", A, 110), row("a.o", "q", A, 111)];
        let rules = parse_rules(&["insns>+10%".into()]).unwrap();
        let cmp = compare(&base, &new, &rules);
        assert_eq!(cmp.failures.len(), 1, "{:?}", cmp.failures);
        assert!(
            cmp.failures[0].starts_with("a.o/q: insns 100 -> 111 (+11 (+11.00%))"),
            "{:?}",
            cmp.failures
        );
    }

    #[test]
    fn verdict_changes_and_program_sets_are_rules_of_their_own() {
        use RowVerdict::{Accepted, Rejected};
        let base = [
            row("a.o", "p", Accepted, 1),
            row("a.o", "gone", Accepted, 1),
        ];
        let new = [
            row("a.o", "p", Rejected, 1),
            row("a.o", "fresh", Accepted, 1),
        ];
        let cmp = compare(&base, &new, &default_rules());
        assert_eq!(
            cmp.failures,
            ["a.o/p: verdict accepted -> rejected (fails verdict)"]
        );
        let cmp = compare(&base, &new, &[Rule::ProgramSetChanged]);
        assert_eq!(
            cmp.failures,
            ["a.o/fresh: new program", "a.o/gone: program gone"]
        );
    }

    #[test]
    fn a_veristat_base_name_joins_a_path() {
        use RowVerdict::Accepted as A;
        let base = [row("x.bpf.o", "p", A, 10)];
        let new = [row("build/x.bpf.o", "p", A, 20)];
        let cmp = compare(&base, &new, &[]);
        assert_eq!(cmp.pairs.len(), 1);
        assert!(cmp.pairs[0].base.is_some() && cmp.pairs[0].new.is_some());
        assert!(render(&cmp).contains("+10 (+100.00%)"));
    }
}
