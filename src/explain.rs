//! Why a program was rejected, as `bpfemu verify` prints it: the kernel's last log lines
//! under the error, a caret under the source column, notes placed at the instructions that
//! established or lost what failed (`file.c:LINE:COL: note: ...`), and with `--explain` the
//! path from the entry to the error. The analysis itself is the verifier's
//! (`bpfemu_verifier::explain`); this module only renders it.

use bpfemu_loader::SourceLine;
use bpfemu_verifier::explain::{Explanation, Note, PathStep};
use serde_json::{Value, json};
use std::fmt::Write;

/// `file:line:column` (column left out when line_info has none).
pub fn place(src: &SourceLine) -> String {
    if src.column == 0 {
        format!("{}:{}", src.file_name, src.line)
    } else {
        format!("{}:{}:{}", src.file_name, src.line, src.column)
    }
}

/// The source line as compilers quote it, with a caret under the column when line_info has
/// one; nothing for a line without text.
pub fn quote(src: &SourceLine) -> String {
    let text = src.line_text.trim();
    if text.is_empty() {
        return String::new();
    }
    let mut out = format!("  {:>5} | {text}\n", src.line);
    if let Some(pad) = caret_padding(&src.line_text, src.column) {
        writeln!(out, "  {:>5} | {pad}^", "").expect("string");
    }
    out
}

/// The characters before the caret: the line's own tabs kept (so the caret lines up however
/// tabs are shown), everything else a space; `None` when the column is unknown or outside
/// the quoted (trimmed) text.
fn caret_padding(line: &str, column: u32) -> Option<String> {
    let column = (column as usize).checked_sub(1)?;
    let leading = line.len() - line.trim_start().len();
    let before = line.get(leading..column)?;
    if column >= line.trim_end().len() {
        return None;
    }
    Some(
        before
            .chars()
            .map(|c| if c == '\t' { '\t' } else { ' ' })
            .collect(),
    )
}

/// The kernel's lines under the error (only when it logs one that qualifies the verdict),
/// then the notes.
pub fn diagnostics(object: &str, explanation: &Explanation) -> String {
    let mut out = String::new();
    if let [qualifier, verdict] = explanation.log_lines.as_slice() {
        writeln!(out, "  kernel log: {qualifier}").expect("string");
        writeln!(out, "              {verdict}").expect("string");
    }
    for note in &explanation.notes {
        out.push_str(&note_text(object, note));
    }
    out
}

fn note_text(object: &str, note: &Note) -> String {
    let insn = note
        .insn
        .map_or(String::new(), |pc| format!(" [insn {pc}]"));
    match &note.source {
        Some(src) => format!(
            "{}: note: {}{insn}\n{}",
            place(src),
            note.message,
            quote(src)
        ),
        None => format!("{object}: note: {}{insn}\n", note.message),
    }
}

/// `--explain`: the instructions of the rejected path that touched what failed, each under
/// its source line as the kernel's log shows it, with the registers as it left them.
pub fn path_text(explanation: &Explanation) -> String {
    let shown = explanation.path.len();
    let mut out = format!(
        "  path to the error: {} instructions, {} shown (those that touched what failed)\n",
        explanation.path_len, shown
    );
    let mut last_line: Option<(String, u32)> = None;
    let split = explanation.path.len().saturating_sub(1);
    for (i, step) in explanation.path.iter().enumerate() {
        if explanation.elided > 0 && i == split.min(8) {
            writeln!(out, "    ... {} more ...", explanation.elided).expect("string");
        }
        if let Some(src) = &step.source {
            let key = (src.file_name.clone(), src.line);
            if last_line.as_ref() != Some(&key) {
                let file = src.file_name.rsplit('/').next().unwrap_or(&src.file_name);
                writeln!(out, "    ; {} @ {file}:{}", src.line_text.trim(), src.line)
                    .expect("string");
                last_line = Some(key);
            }
        }
        out.push_str(&step_line(step));
    }
    out
}

fn step_line(step: &PathStep) -> String {
    if step.state.is_empty() {
        format!("    {}\n", step.text)
    } else {
        format!("    {:<40} ; {}\n", step.text, step.state)
    }
}

/// The explanation in the JSON report; the path only with `--explain`.
pub fn to_json(explanation: &Explanation, with_path: bool) -> Value {
    let source = |s: &Option<SourceLine>| {
        json!(s.as_ref().map(|src| json!({
            "file": src.file_name,
            "line": src.line,
            "column": src.column,
            "text": src.line_text.trim(),
        })))
    };
    let notes: Vec<Value> = explanation
        .notes
        .iter()
        .map(|n| json!({"message": n.message, "insn": n.insn, "source": source(&n.source)}))
        .collect();
    let mut doc = json!({
        "log_lines": explanation.log_lines,
        "notes": notes,
    });
    if with_path {
        doc["path_len"] = json!(explanation.path_len);
        doc["path"] = json!(
            explanation
                .path
                .iter()
                .map(|s| json!({
                    "insn": s.insn,
                    "text": s.text,
                    "state": s.state,
                    "source": source(&s.source),
                }))
                .collect::<Vec<_>>()
        );
    }
    doc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_caret_keeps_the_lines_tabs_and_skips_its_indentation() {
        assert_eq!(
            caret_padding("\treturn eth->h_proto;", 13).as_deref(),
            Some("           ")
        );
        assert_eq!(
            caret_padding("\tif (a\t&& b)", 10).as_deref(),
            Some("     \t  ")
        );
        assert_eq!(caret_padding("\treturn x;", 0), None);
        assert_eq!(caret_padding("\treturn x;", 1), None);
        assert_eq!(caret_padding("\treturn x;", 40), None);
    }
}
