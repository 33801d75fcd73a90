//! Coverage by source line, from the program's BTF line_info: which lines ran, which never
//! did, and which branch directions were never taken; as text, a self-contained HTML page and
//! JSON.

use bpfemu_isa::{Insn, Program};
use bpfemu_loader::ProgramSpec;
use bpfemu_vm::coverage::{FELL_THROUGH, RAN, TAKEN};
use serde_json::json;
use std::collections::BTreeMap;
use std::fmt::Write;

/// One source line of a program with what coverage says of it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LineCoverage {
    pub file: String,
    pub line: u32,
    pub text: String,
    /// Instructions compiled from the line, and how many of them ran.
    pub insns: usize,
    pub insns_ran: usize,
    /// Branch directions of the line's conditional jumps, and how many were seen.
    pub branches: usize,
    pub branches_taken: usize,
}

impl LineCoverage {
    pub fn reached(&self) -> bool {
        self.insns_ran > 0
    }

    /// Reached, but some branch direction never seen.
    pub fn partial(&self) -> bool {
        self.reached() && self.branches_taken < self.branches
    }
}

/// The coverage of one program by line, in file then line order.
#[derive(Clone, Debug, Default)]
pub struct SourceCoverage {
    pub program: String,
    pub lines: Vec<LineCoverage>,
    /// Instructions and branch directions in all, and seen, counting those without line info.
    pub insns: usize,
    pub insns_ran: usize,
    pub branches: usize,
    pub branches_taken: usize,
}

/// Maps `bits` (one byte a slot, as [`bpfemu_vm::Coverage::program`] gives) onto `spec`'s
/// source lines. Instructions before the first line_info record count in the totals only.
pub fn by_line(spec: &ProgramSpec, bits: &[u8]) -> SourceCoverage {
    let mut report = SourceCoverage {
        program: spec.name.clone(),
        ..SourceCoverage::default()
    };
    let program = Program::decode(spec.insns.clone()).ok();
    let mut lines: BTreeMap<(String, u32), LineCoverage> = BTreeMap::new();
    let mut info = spec.line_info.iter().peekable();
    let mut current: Option<(String, u32)> = None;
    for pc in 0..spec.insns.len() {
        while let Some(next) = info.peek() {
            if next.insn > pc {
                break;
            }
            let key = (next.file_name.clone(), next.line);
            lines.entry(key.clone()).or_insert_with(|| LineCoverage {
                file: next.file_name.clone(),
                line: next.line,
                text: next.line_text.trim_end().to_owned(),
                ..LineCoverage::default()
            });
            current = Some(key);
            info.next();
        }
        let Some(insn) = program.as_ref().and_then(|p| p.insn(pc)) else {
            continue; // the second slot of an ld_imm64
        };
        let b = bits.get(pc).copied().unwrap_or(0);
        let is_branch = matches!(insn, Insn::Jump { .. } | Insn::MayGoto { .. });
        let ran = usize::from(b & RAN != 0);
        let (branches, taken) = if is_branch {
            (
                2,
                usize::from(b & TAKEN != 0) + usize::from(b & FELL_THROUGH != 0),
            )
        } else {
            (0, 0)
        };
        report.insns += 1;
        report.insns_ran += ran;
        report.branches += branches;
        report.branches_taken += taken;
        if let Some(line) = current.as_ref().and_then(|k| lines.get_mut(k)) {
            line.insns += 1;
            line.insns_ran += ran;
            line.branches += branches;
            line.branches_taken += taken;
        }
    }
    report.lines = lines.into_values().filter(|l| l.insns > 0).collect();
    report
}

fn share(part: usize, whole: usize) -> f64 {
    if whole == 0 {
        100.0
    } else {
        100.0 * part as f64 / whole as f64
    }
}

impl SourceCoverage {
    fn lines_reached(&self) -> usize {
        self.lines.iter().filter(|l| l.reached()).count()
    }

    /// One summary line: lines, instructions and branch directions covered.
    pub fn summary(&self) -> String {
        format!(
            "{}: lines {}/{} ({:.1}%), instructions {}/{} ({:.1}%), branches {}/{} ({:.1}%)",
            self.program,
            self.lines_reached(),
            self.lines.len(),
            share(self.lines_reached(), self.lines.len()),
            self.insns_ran,
            self.insns,
            share(self.insns_ran, self.insns),
            self.branches_taken,
            self.branches,
            share(self.branches_taken, self.branches),
        )
    }

    /// The summary, then every line never reached and every line with a branch direction
    /// never seen, as `file:line: text`.
    pub fn text(&self) -> String {
        let mut out = self.summary() + "\n";
        for line in &self.lines {
            let what = if !line.reached() {
                "never reached"
            } else if line.partial() {
                "branch partly taken"
            } else {
                continue;
            };
            let _ = writeln!(
                out,
                "{}:{}: {what}: {}",
                line.file,
                line.line,
                line.text.trim()
            );
        }
        out
    }

    pub fn to_json(&self) -> serde_json::Value {
        json!({
            "program": self.program,
            "insns": self.insns,
            "insns_ran": self.insns_ran,
            "branches": self.branches,
            "branches_taken": self.branches_taken,
            "lines": self.lines.iter().map(|l| json!({
                "file": l.file,
                "line": l.line,
                "text": l.text,
                "insns": l.insns,
                "insns_ran": l.insns_ran,
                "branches": l.branches,
                "branches_taken": l.branches_taken,
            })).collect::<Vec<_>>(),
        })
    }

    /// A self-contained HTML page: the summary and every line with its state.
    pub fn html(&self) -> String {
        let mut out = String::from(
            "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>bpfemu coverage</title>\n\
             <style>body{font-family:sans-serif}table{border-collapse:collapse;font-family:monospace}\
             td{padding:0 .6em;white-space:pre}.hit{background:#dfd}.miss{background:#fdd}\
             .part{background:#ffd}th{text-align:left}</style></head><body>\n",
        );
        let _ = writeln!(
            out,
            "<h1>{}</h1><p>{}</p>",
            escape(&self.program),
            escape(&self.summary())
        );
        let mut file = None;
        for line in &self.lines {
            if file != Some(&line.file) {
                if file.is_some() {
                    out += "</table>\n";
                }
                let _ = writeln!(
                    out,
                    "<h2>{}</h2><table><tr><th>line</th><th>insns</th><th>branches</th><th>source</th></tr>",
                    escape(&line.file)
                );
                file = Some(&line.file);
            }
            let class = if !line.reached() {
                "miss"
            } else if line.partial() {
                "part"
            } else {
                "hit"
            };
            let branches = if line.branches == 0 {
                String::new()
            } else {
                format!("{}/{}", line.branches_taken, line.branches)
            };
            let _ = writeln!(
                out,
                "<tr class=\"{class}\"><td>{}</td><td>{}/{}</td><td>{branches}</td><td>{}</td></tr>",
                line.line,
                line.insns_ran,
                line.insns,
                escape(&line.text)
            );
        }
        if file.is_some() {
            out += "</table>\n";
        }
        out + "</body></html>\n"
    }
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;
    use bpfemu_isa::asm::assemble_kernel;
    use bpfemu_loader::SourceLine;

    fn line(insn: usize, line: u32, text: &str) -> SourceLine {
        SourceLine {
            insn,
            file_name: "p.c".into(),
            line_text: text.into(),
            line,
            column: 1,
            file_name_off: 0,
            line_off: 0,
        }
    }

    #[test]
    fn lines_take_their_instructions_and_branches() {
        let insns = assemble_kernel("if r1 > 0x5 goto pc+2\nr0 = 2\nexit\nr0 = 1\nexit\n").unwrap();
        let spec = ProgramSpec {
            name: "p".into(),
            section: "xdp".into(),
            prog_type: 6,
            expected_attach_type: None,
            prog_flags: 0,
            naming: Default::default(),
            functions: vec![("p".into(), 0)],
            func_info: Vec::new(),
            insns,
            line_info: vec![
                line(0, 10, "if (x > 5)"),
                line(1, 11, "return 2;"),
                line(3, 12, "return 1;"),
            ],
            unrelocated_map_fds: Vec::new(),
            poisoned_calls: Vec::new(),
        };
        let bits = [RAN | TAKEN, 0, 0, RAN, RAN];
        let report = by_line(&spec, &bits);
        let got: Vec<_> = report
            .lines
            .iter()
            .map(|l| (l.line, l.insns, l.insns_ran, l.branches, l.branches_taken))
            .collect();
        assert_eq!(got, [(10, 1, 1, 2, 1), (11, 2, 0, 0, 0), (12, 2, 2, 0, 0)]);
        let text = report.text();
        assert!(text.starts_with("p: lines 2/3 (66.7%), instructions 3/5 (60.0%), branches 1/2"));
        assert!(text.contains("p.c:11: never reached: return 2;"));
        assert!(text.contains("p.c:10: branch partly taken: if (x > 5)"));
        let html = report.html();
        assert!(html.contains("<tr class=\"miss\"><td>11</td>"));
        assert!(html.contains("if (x &gt; 5)"));
    }
}
