//! `bpfemu verify --kernel 5.10,6.1,...`: every program judged as each kernel named, one
//! column per kernel. The question a CI gate asks is "does every kernel we ship to load
//! this", so a program fails the run when any of them refuses it.

use super::batch::{Batch, ProgramResult};
use super::table::{RowVerdict, aligned};
use bpfemu_loader::Kernel;
use serde_json::{Value, json};
use std::fmt::Write;

/// One kernel's answers.
pub struct Column {
    pub kernel: Kernel,
    pub batch: Batch,
}

/// A program's cells, one per kernel in the order named (`None`: the kernel's run did not
/// judge it, as when its object could not be loaded for that kernel).
struct Line<'a> {
    file: &'a str,
    name: &'a str,
    section: &'a str,
    cells: Vec<Option<&'a ProgramResult>>,
}

fn lines(columns: &[Column]) -> Vec<Line<'_>> {
    let mut out: Vec<Line<'_>> = Vec::new();
    for (k, column) in columns.iter().enumerate() {
        for p in &column.batch.programs {
            let at = out
                .iter()
                .position(|l| l.file == p.file && l.name == p.name);
            let line = match at {
                Some(i) => &mut out[i],
                None => {
                    out.push(Line {
                        file: &p.file,
                        name: &p.name,
                        section: &p.section,
                        cells: vec![None; columns.len()],
                    });
                    out.last_mut().expect("just pushed")
                }
            };
            line.cells[k] = Some(p);
        }
    }
    out
}

/// 1 when any kernel rejects a program; else 2 when any kernel's run could not judge
/// something (an object, an undecided program, nothing at all); else 0.
pub fn exit_code(columns: &[Column]) -> u8 {
    let codes: Vec<u8> = columns.iter().map(|c| c.batch.exit_code()).collect();
    if codes.contains(&1) {
        1
    } else {
        codes.into_iter().max().unwrap_or(2)
    }
}

fn cell_word(p: Option<&ProgramResult>) -> String {
    match p {
        None => "-".to_owned(),
        Some(p) => match p.verdict {
            RowVerdict::Accepted => format!("ok ({})", p.stats.processed_insns),
            other => other.word().to_owned(),
        },
    }
}

/// The table (one row per program, one column per kernel, `ok (PROCESSED)` or the verdict),
/// then each rejection's reason with the kernels that give it, then a summary per kernel.
pub fn render_text(columns: &[Column]) -> String {
    let mut header = vec!["File".to_owned(), "Program".to_owned()];
    header.extend(columns.iter().map(|c| c.kernel.version().to_string()));
    let lines = lines(columns);
    let cells: Vec<Vec<String>> = lines
        .iter()
        .map(|l| {
            let mut row = vec![l.file.to_owned(), l.name.to_owned()];
            row.extend(l.cells.iter().map(|c| cell_word(*c)));
            row
        })
        .collect();
    let mut out = aligned(&header, &cells, header.len());
    let mut reasons = String::new();
    for l in &lines {
        // Kernels giving the same message share a line.
        let mut by_message: Vec<(&str, Vec<&str>)> = Vec::new();
        for (c, cell) in columns.iter().zip(&l.cells) {
            let Some(rejection) = cell.and_then(|p| p.rejection.as_ref()) else {
                continue;
            };
            let version = c.kernel.version().name();
            match by_message.iter_mut().find(|(m, _)| *m == rejection.message) {
                Some((_, kernels)) => kernels.push(version),
                None => by_message.push((&rejection.message, vec![version])),
            }
        }
        for (message, kernels) in by_message {
            writeln!(
                reasons,
                "{}: {}: {}: {message}",
                l.file,
                l.name,
                kernels.join(", ")
            )
            .expect("string");
        }
    }
    if !reasons.is_empty() {
        out.push('\n');
        out.push_str(&reasons);
    }
    out.push('\n');
    for c in columns {
        writeln!(out, "kernel {}: {}", c.kernel.describe(), c.batch.summary()).expect("string");
    }
    for (c, failure) in columns
        .iter()
        .flat_map(|c| c.batch.failures.iter().map(move |f| (c, f)))
    {
        writeln!(
            out,
            "kernel {}: not loaded: {}",
            c.kernel.version(),
            failure.error
        )
        .expect("string");
    }
    out
}

/// Per program, each kernel's verdict, processed count and message (`null` where it
/// accepts), and per kernel the summary counts.
pub fn to_json(columns: &[Column]) -> Value {
    let programs: Vec<Value> = lines(columns)
        .iter()
        .map(|l| {
            let mut kernels = serde_json::Map::new();
            for (c, cell) in columns.iter().zip(&l.cells) {
                let value = match cell {
                    None => Value::Null,
                    Some(p) => json!({
                        "verdict": p.verdict.word(),
                        "processed_insns": p.stats.processed_insns,
                        "error": p.rejection.as_ref().map(|r| r.message.clone()),
                    }),
                };
                kernels.insert(c.kernel.version().to_string(), value);
            }
            json!({
                "object": l.file, "name": l.name, "section": l.section, "kernels": kernels,
            })
        })
        .collect();
    let kernels: Vec<Value> = columns
        .iter()
        .map(|c| {
            let failures: Vec<Value> = c
                .batch
                .failures
                .iter()
                .map(|f| json!({ "object": f.file, "error": f.error }))
                .collect();
            json!({
                "version": c.kernel.version().to_string(),
                "described": c.kernel.describe(),
                "accepted": c.batch.count(RowVerdict::Accepted),
                "rejected": c.batch.count(RowVerdict::Rejected),
                "undecided": c.batch.count(RowVerdict::Undecided),
                "not_loaded": failures,
            })
        })
        .collect();
    json!({ "kernels": kernels, "programs": programs })
}

/// One line per program and kernel: veristat's first columns, the kernel, the processed
/// count and the message.
pub fn render_csv(columns: &[Column]) -> String {
    let mut out = String::from("file_name,prog_name,kernel,verdict,total_insns,error\n");
    for l in lines(columns) {
        for (c, cell) in columns.iter().zip(&l.cells) {
            let Some(p) = cell else { continue };
            let error = p.rejection.as_ref().map_or("", |r| r.message.as_str());
            writeln!(
                out,
                "{},{},{},{},{},{}",
                super::table::csv_field(l.file),
                super::table::csv_field(l.name),
                c.kernel.version(),
                p.verdict.csv_word(),
                p.stats.processed_insns,
                super::table::csv_field(error),
            )
            .expect("string");
        }
    }
    out
}
