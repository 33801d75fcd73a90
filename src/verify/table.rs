//! One row per program, with the statistics veristat reports, under veristat's names: the
//! table `bpfemu verify` prints, its CSV, and the CSV files (bpfemu's or veristat's own) that
//! `--compare` and `--baseline` read.

use anyhow::{Context, Result, bail};
use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::Path;

/// A statistic of a row, as veristat names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Stat {
    Duration,
    TotalInsns,
    TotalStates,
    PeakStates,
    MaxStatesPerInsn,
    MarkRead,
    StackDepth,
}

impl Stat {
    pub const ALL: [Stat; 7] = [
        Stat::Duration,
        Stat::TotalInsns,
        Stat::TotalStates,
        Stat::PeakStates,
        Stat::MaxStatesPerInsn,
        Stat::MarkRead,
        Stat::StackDepth,
    ];

    /// The CSV column name (veristat's first name for it).
    pub fn csv_name(self) -> &'static str {
        self.names()[0]
    }

    /// Every name veristat accepts for it (CSV headers, `-e`), the CSV one first.
    pub fn names(self) -> &'static [&'static str] {
        match self {
            Stat::Duration => &["duration", "dur"],
            Stat::TotalInsns => &["total_insns", "insns"],
            Stat::TotalStates => &["total_states", "states"],
            Stat::PeakStates => &["peak_states"],
            Stat::MaxStatesPerInsn => &["max_states_per_insn"],
            Stat::MarkRead => &["max_mark_read_len", "mark_read"],
            Stat::StackDepth => &["stack_depth", "stack"],
        }
    }

    /// The table header (veristat's).
    pub fn header(self) -> &'static str {
        match self {
            Stat::Duration => "Duration (us)",
            Stat::TotalInsns => "Insns",
            Stat::TotalStates => "States",
            Stat::PeakStates => "Peak states",
            Stat::MaxStatesPerInsn => "Max states per insn",
            Stat::MarkRead => "Max mark read length",
            Stat::StackDepth => "Stack depth",
        }
    }

    pub fn by_name(name: &str) -> Option<Stat> {
        Stat::ALL.into_iter().find(|s| s.names().contains(&name))
    }
}

/// The statistics the table shows by default (veristat's default columns, with the peak and
/// the stack, which XDP teams watch too; the others are in the CSV).
pub const TABLE_STATS: [Stat; 5] = [
    Stat::Duration,
    Stat::TotalInsns,
    Stat::TotalStates,
    Stat::PeakStates,
    Stat::StackDepth,
];

/// A program's verdict in a row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RowVerdict {
    Accepted,
    Rejected,
    /// bpfemu cannot say what the kernel would (a kfunc it does not check yet).
    Undecided,
}

impl RowVerdict {
    /// The table's word, as bpfemu says it everywhere.
    pub fn word(self) -> &'static str {
        match self {
            RowVerdict::Accepted => "accepted",
            RowVerdict::Rejected => "rejected",
            RowVerdict::Undecided => "undecided",
        }
    }

    /// The CSV's word: veristat's `success`/`failure`, so that veristat's `-C` reads bpfemu's
    /// files and bpfemu reads veristat's.
    pub fn csv_word(self) -> &'static str {
        match self {
            RowVerdict::Accepted => "success",
            RowVerdict::Rejected => "failure",
            RowVerdict::Undecided => "undecided",
        }
    }

    fn parse(word: &str) -> Option<RowVerdict> {
        match word {
            "success" | "accepted" => Some(RowVerdict::Accepted),
            "failure" | "rejected" => Some(RowVerdict::Rejected),
            "undecided" => Some(RowVerdict::Undecided),
            _ => None,
        }
    }
}

/// One program's row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Row {
    /// The object's path as given (veristat writes the base name; `--compare` matches either).
    pub file: String,
    pub program: String,
    pub verdict: Option<RowVerdict>,
    pub values: BTreeMap<Stat, i64>,
}

impl Row {
    pub fn value(&self, stat: Stat) -> Option<i64> {
        self.values.get(&stat).copied()
    }
}

/// The aligned table: names and verdict left-aligned, numbers right-aligned, two spaces
/// between columns, a dashed rule under the header (veristat's layout).
pub fn render_table(rows: &[Row]) -> String {
    let mut header = vec!["File".to_owned(), "Program".into(), "Verdict".into()];
    header.extend(TABLE_STATS.iter().map(|s| s.header().to_owned()));
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let mut line = vec![
                r.file.clone(),
                r.program.clone(),
                r.verdict.map_or("", RowVerdict::word).to_owned(),
            ];
            line.extend(
                TABLE_STATS
                    .iter()
                    .map(|s| r.value(*s).map_or_else(String::new, |v| v.to_string())),
            );
            line
        })
        .collect();
    aligned(&header, &cells, 3)
}

/// Columns `left` and after are right-aligned.
pub fn aligned(header: &[String], cells: &[Vec<String>], left: usize) -> String {
    let width = |i: usize| {
        cells
            .iter()
            .map(|c| c[i].chars().count())
            .chain([header[i].chars().count()])
            .max()
            .unwrap_or(0)
    };
    let widths: Vec<usize> = (0..header.len()).map(width).collect();
    let mut out = String::new();
    let mut line = |values: &[String]| {
        let mut text = String::new();
        for (i, (value, w)) in values.iter().zip(&widths).enumerate() {
            if i > 0 {
                text.push_str("  ");
            }
            if i < left {
                write!(text, "{value:<w$}").expect("string");
            } else {
                write!(text, "{value:>w$}").expect("string");
            }
        }
        out.push_str(text.trim_end());
        out.push('\n');
    };
    line(header);
    line(&widths.iter().map(|w| "-".repeat(*w)).collect::<Vec<_>>());
    for row in cells {
        line(row);
    }
    out
}

/// The CSV bpfemu writes: veristat's column names and verdict words, every statistic.
pub fn render_csv(rows: &[Row]) -> String {
    let mut out = String::from("file_name,prog_name,verdict");
    for stat in Stat::ALL {
        write!(out, ",{}", stat.csv_name()).expect("string");
    }
    out.push('\n');
    for r in rows {
        write!(
            out,
            "{},{},{}",
            csv_field(&r.file),
            csv_field(&r.program),
            r.verdict.map_or("", RowVerdict::csv_word)
        )
        .expect("string");
        for stat in Stat::ALL {
            out.push(',');
            if let Some(v) = r.value(stat) {
                write!(out, "{v}").expect("string");
            }
        }
        out.push('\n');
    }
    out
}

/// A field quoted when it must be (RFC 4180). Paths with commas are rare but possible;
/// veristat itself never quotes, so its files never need unquoting beyond this.
pub(super) fn csv_field(value: &str) -> String {
    if value.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", value.replace('"', "\"\""))
    } else {
        value.to_owned()
    }
}

/// Reads a CSV written by `bpfemu verify --csv` or by veristat (`-o csv`, any `-e` selection
/// of columns it can write: columns bpfemu does not know, such as `prog_size`, are read past).
pub fn read_csv(path: &Path) -> Result<Vec<Row>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    parse_csv(&text).map_err(|e| anyhow::anyhow!("{}:{e}", path.display()))
}

/// What a column holds.
enum Column {
    File,
    Program,
    Verdict,
    Stat(Stat),
    Other,
}

/// `text` as CSV rows; errors are `LINE: message`.
pub fn parse_csv(text: &str) -> Result<Vec<Row>> {
    let mut lines = split_records(text)
        .into_iter()
        .filter(|(_, r)| !r.is_empty());
    let Some((header_line, header)) = lines.next() else {
        bail!("1: empty file: a CSV with a header line was expected");
    };
    let columns: Vec<Column> = header
        .iter()
        .map(|name| match name.trim() {
            "file_name" | "filename" | "file" => Column::File,
            "prog_name" | "progname" | "prog" => Column::Program,
            "verdict" => Column::Verdict,
            other => Stat::by_name(other).map_or(Column::Other, Column::Stat),
        })
        .collect();
    let has = |f: fn(&Column) -> bool| columns.iter().any(f);
    if !has(|c| matches!(c, Column::File)) || !has(|c| matches!(c, Column::Program)) {
        bail!(
            "{header_line}: the header names no file_name and prog_name columns (veristat's \
             or bpfemu's CSV was expected)"
        );
    }
    let mut rows = Vec::new();
    for (line, record) in lines {
        if record.len() != columns.len() {
            bail!(
                "{line}: {} fields where the header has {}",
                record.len(),
                columns.len()
            );
        }
        let mut row = Row {
            file: String::new(),
            program: String::new(),
            verdict: None,
            values: BTreeMap::new(),
        };
        for (column, field) in columns.iter().zip(record) {
            let field = field.trim();
            match column {
                Column::File => row.file = field.to_owned(),
                Column::Program => row.program = field.to_owned(),
                Column::Verdict if field.is_empty() => {}
                Column::Verdict => {
                    row.verdict = Some(RowVerdict::parse(field).with_context(|| {
                        format!("{line}: unknown verdict '{field}' (success or failure expected)")
                    })?)
                }
                Column::Stat(_) if field.is_empty() => {}
                Column::Stat(stat) => {
                    let value = field.parse().with_context(|| {
                        format!("{line}: '{field}' is not an integer ({})", stat.csv_name())
                    })?;
                    row.values.insert(*stat, value);
                }
                Column::Other => {}
            }
        }
        rows.push(row);
    }
    Ok(rows)
}

/// Records with their 1-based starting line, quoted fields unquoted (a blank line is an
/// empty record).
pub fn split_records(text: &str) -> Vec<(usize, Vec<String>)> {
    let mut records = Vec::new();
    let (mut record, mut field) = (Vec::new(), String::new());
    let (mut quoted, mut line, mut start) = (false, 1, 1);
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' if quoted && chars.peek() == Some(&'"') => {
                field.push('"');
                chars.next();
            }
            '"' if quoted => quoted = false,
            '"' if field.is_empty() => quoted = true,
            ',' if !quoted => record.push(std::mem::take(&mut field)),
            '\r' if !quoted => {}
            '\n' if !quoted => {
                record.push(std::mem::take(&mut field));
                let done = std::mem::take(&mut record);
                let blank = done.len() == 1 && done[0].is_empty();
                records.push((start, if blank { Vec::new() } else { done }));
                line += 1;
                start = line;
            }
            c => {
                if c == '\n' {
                    line += 1;
                }
                field.push(c);
            }
        }
    }
    if !field.is_empty() || !record.is_empty() {
        record.push(field);
        records.push((start, record));
    }
    records
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(file: &str, prog: &str, insns: i64) -> Row {
        Row {
            file: file.into(),
            program: prog.into(),
            verdict: Some(RowVerdict::Accepted),
            values: [(Stat::TotalInsns, insns), (Stat::Duration, 7)]
                .into_iter()
                .collect(),
        }
    }

    #[test]
    fn bpfemu_csv_reads_back_as_written() {
        let rows = vec![
            row("a.o", "xdp_a", 10),
            row("dir,with comma/b.o", "xdp_b", 20),
        ];
        assert_eq!(parse_csv(&render_csv(&rows)).unwrap(), rows);
    }

    #[test]
    fn veristat_csv_with_columns_bpfemu_lacks_is_read() {
        let text = "file_name,prog_name,verdict,duration,total_insns,total_states,peak_states,\
                    max_states_per_insn,max_mark_read_len,prog_size,prog_size_jited,prog_type,\
                    attach_type,stack_depth,max_stack_depth,mem_peak\n\
                    x.bpf.o,handle,success,120,55,4,4,1,2,40,200,xdp,xdp,16,16,0\n\
                    x.bpf.o,other,failure,30,9,1,1,0,0,9,0,xdp,xdp,0,0,0\n";
        let rows = parse_csv(text).unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].value(Stat::TotalInsns), Some(55));
        assert_eq!(rows[0].value(Stat::StackDepth), Some(16));
        assert_eq!(rows[1].verdict, Some(RowVerdict::Rejected));
    }

    #[test]
    fn a_bad_field_names_its_line() {
        let err = parse_csv("file_name,prog_name,insns\na.o,p,12\na.o,q,many\n").unwrap_err();
        assert!(
            err.to_string().starts_with("3: 'many' is not an integer"),
            "{err}"
        );
        let err = parse_csv("name,insns\n").unwrap_err();
        assert!(err.to_string().starts_with("1: the header"), "{err}");
        let err = parse_csv("file,prog\na.o\n").unwrap_err();
        assert!(err.to_string().starts_with("2: 1 fields"), "{err}");
    }

    #[test]
    fn the_table_aligns_its_columns() {
        let table = render_table(&[row("a.o", "xdp_long_name", 1234), row("b.o", "p", 5)]);
        let lines: Vec<&str> = table.lines().collect();
        assert!(lines[0].starts_with("File  Program        Verdict   Duration (us)  Insns"));
        assert!(lines[2].contains("xdp_long_name  accepted              7   1234"));
        assert!(lines[3].contains("p              accepted              7      5"));
    }
}
