//! The bpf_conformance test format: parsing `.data` files.
//!
//! A file is a list of sections, each opened by a line `-- NAME`; `#` starts a comment
//! anywhere on a line. The sections that matter are `asm`, `raw` (wins over `asm`), `mem`,
//! `result` and `error`; the rest (`c`, `no register offset`, unknown names) are ignored.

use bpfemu_isa::RawInsn;
use std::path::{Path, PathBuf};

/// One conformance test as its file states it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TestCase {
    /// File name without the `.data` extension.
    pub name: String,
    pub path: PathBuf,
    /// The `asm` section (comments stripped, blank lines kept so line numbers match).
    pub asm: Option<String>,
    /// The `raw` section's slots, with the file line each came from.
    pub raw: Option<Vec<RawInsn>>,
    /// The memory block handed to the program (empty when there is none).
    pub mem: Vec<u8>,
    pub expect: Expectation,
    /// Line in the file where the asm section's first line is, for error positions.
    pub asm_first_line: usize,
}

/// What the test expects.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Expectation {
    /// r0 at exit, all 64 bits.
    Result(u64),
    /// The run must fail; the text is the suite's wording, for reports only.
    Error(String),
    /// Neither: the suite skips such files.
    Nothing,
}

/// A `.data` file that cannot be understood.
#[derive(Debug, thiserror::Error)]
#[error("{}:{line}: {message}", path.display())]
pub struct ParseError {
    pub path: PathBuf,
    pub line: usize,
    pub message: String,
}

#[derive(Default)]
struct Section {
    name: String,
    first_line: usize,
    lines: Vec<(usize, String)>,
}

/// Parses the text of a `.data` file.
pub fn parse(path: &Path, text: &str) -> Result<TestCase, ParseError> {
    let err = |line: usize, message: String| ParseError {
        path: path.to_owned(),
        line,
        message,
    };
    let sections = split_sections(text);
    let find = |name: &str| sections.iter().find(|s| s.name == name);

    let asm = find("asm").map(|s| {
        s.lines
            .iter()
            .map(|(_, l)| l.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    });
    let asm_first_line = find("asm").map_or(0, |s| s.first_line + 1);
    let raw = match find("raw") {
        Some(section) => Some(parse_raw(section).map_err(|(line, m)| err(line, m))?),
        None => None,
    };
    let mem = match find("mem") {
        Some(section) => parse_hex_bytes(section).map_err(|(line, m)| err(line, m))?,
        None => Vec::new(),
    };
    let expect = if let Some(section) = find("result") {
        let (line, text) = section
            .lines
            .iter()
            .find(|(_, l)| !l.trim().is_empty())
            .ok_or_else(|| err(section.first_line, "empty result section".into()))?;
        Expectation::Result(
            parse_result(text.trim())
                .ok_or_else(|| err(*line, format!("bad result value `{}`", text.trim())))?,
        )
    } else if let Some(section) = find("error") {
        Expectation::Error(
            section
                .lines
                .iter()
                .map(|(_, l)| l.trim())
                .collect::<Vec<_>>()
                .join(" ")
                .trim()
                .to_owned(),
        )
    } else {
        Expectation::Nothing
    };
    let name = path
        .file_stem()
        .map_or_else(String::new, |s| s.to_string_lossy().into_owned());
    Ok(TestCase {
        name,
        path: path.to_owned(),
        asm,
        raw,
        mem,
        expect,
        asm_first_line,
    })
}

/// Reads and parses a `.data` file.
pub fn load(path: &Path) -> Result<TestCase, ParseError> {
    let text = std::fs::read_to_string(path).map_err(|e| ParseError {
        path: path.to_owned(),
        line: 0,
        message: format!("cannot read: {e}"),
    })?;
    parse(path, &text)
}

/// The `.data` files of a directory, sorted by name.
pub fn list_dir(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "data"))
        .collect();
    files.sort();
    Ok(files)
}

fn split_sections(text: &str) -> Vec<Section> {
    let mut sections: Vec<Section> = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let number = index + 1;
        if let Some(name) = line.strip_prefix("-- ") {
            sections.push(Section {
                name: name.trim().to_owned(),
                first_line: number,
                lines: Vec::new(),
            });
            continue;
        }
        let content = line.split('#').next().unwrap_or("");
        if let Some(section) = sections.last_mut() {
            section.lines.push((number, content.to_owned()));
        }
    }
    sections
}

/// `raw` lines are either one 64-bit word (`0x...` or decimal) or eight hex bytes.
fn parse_raw(section: &Section) -> Result<Vec<RawInsn>, (usize, String)> {
    let mut slots = Vec::new();
    for (line, text) in &section.lines {
        let tokens: Vec<&str> = text.split_whitespace().collect();
        match tokens.len() {
            0 => {}
            1 => {
                let word = parse_result(tokens[0])
                    .ok_or((*line, format!("bad instruction word `{}`", tokens[0])))?;
                slots.push(RawInsn::from_u64(word));
            }
            8 => {
                let mut bytes = [0u8; 8];
                for (byte, token) in bytes.iter_mut().zip(&tokens) {
                    *byte = u8::from_str_radix(token, 16)
                        .map_err(|_| (*line, format!("bad byte `{token}`")))?;
                }
                slots.push(RawInsn::from_bytes(bytes));
            }
            n => {
                return Err((
                    *line,
                    format!("expected one word or eight bytes, found {n} tokens"),
                ));
            }
        }
    }
    Ok(slots)
}

fn parse_hex_bytes(section: &Section) -> Result<Vec<u8>, (usize, String)> {
    let mut bytes = Vec::new();
    for (line, text) in &section.lines {
        for token in text.split_whitespace() {
            bytes.push(
                u8::from_str_radix(token, 16)
                    .map_err(|_| (*line, format!("bad byte `{token}`")))?,
            );
        }
    }
    Ok(bytes)
}

/// Hex when the text contains `0x`, decimal otherwise (the suite's rule).
fn parse_result(text: &str) -> Option<u64> {
    match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => text.parse().ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_sections_comments_and_both_raw_forms() {
        let text = "# header\n-- asm\nmov %r0, 1 # one\nexit\n-- raw\n0x00000001000000b7\n95 00 00 00 00 00 00 00\n-- mem\naa bb\ncc\n-- result\n0x1\n";
        let case = parse(Path::new("t/x.data"), text).unwrap();
        assert_eq!(case.name, "x");
        assert_eq!(case.asm.as_deref(), Some("mov %r0, 1 \nexit"));
        assert_eq!(case.asm_first_line, 3);
        assert_eq!(case.raw.as_ref().unwrap().len(), 2);
        assert_eq!(case.raw.as_ref().unwrap()[0].code, 0xb7);
        assert_eq!(case.raw.as_ref().unwrap()[1].code, 0x95);
        assert_eq!(case.mem, vec![0xaa, 0xbb, 0xcc]);
        assert_eq!(case.expect, Expectation::Result(1));
    }

    #[test]
    fn result_is_decimal_without_0x() {
        let case = parse(Path::new("x.data"), "-- asm\nexit\n-- result\n10\n").unwrap();
        assert_eq!(case.expect, Expectation::Result(10));
    }

    #[test]
    fn error_and_missing_expectations() {
        let case = parse(
            Path::new("x.data"),
            "-- asm\nexit\n-- error\nInvalid register",
        )
        .unwrap();
        assert_eq!(case.expect, Expectation::Error("Invalid register".into()));
        let case = parse(Path::new("x.data"), "-- asm\nexit\n").unwrap();
        assert_eq!(case.expect, Expectation::Nothing);
    }

    #[test]
    fn bad_bytes_name_the_line() {
        let err = parse(Path::new("x.data"), "-- mem\n00 zz\n").unwrap_err();
        assert_eq!(err.to_string(), "x.data:2: bad byte `zz`");
    }
}
