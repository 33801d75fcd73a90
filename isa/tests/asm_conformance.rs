//! The uBPF assembler against the bpf_conformance suite: every test program assembles, and
//! every input the suite marks as an assembler error fails with an error naming the problem.

use bpfemu_isa::asm::assemble_ubpf;
use std::fs;
use std::path::{Path, PathBuf};

fn suite_dir(kind: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../shared/conformance/bpf_conformance")
        .join(kind)
}

/// The `.data` files of one directory of the suite, sorted by name.
fn data_files(kind: &str) -> Vec<PathBuf> {
    let dir = suite_dir(kind);
    let mut files: Vec<PathBuf> = fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|entry| entry.expect("directory entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "data"))
        .collect();
    files.sort();
    files
}

/// The `-- asm` section of a `.data` file, `None` when it has none.
fn asm_section(path: &Path) -> Option<String> {
    let text = fs::read_to_string(path).expect("readable .data file");
    let mut section = None;
    let mut asm: Option<String> = None;
    for line in text.lines() {
        if let Some(name) = line.strip_prefix("-- ") {
            section = Some(name.trim().to_owned());
            if section.as_deref() == Some("asm") {
                asm.get_or_insert_with(String::new);
            }
            continue;
        }
        if section.as_deref() == Some("asm") {
            let asm = asm.as_mut().expect("asm section started");
            asm.push_str(line);
            asm.push('\n');
        }
    }
    asm
}

#[test]
fn every_test_program_assembles() {
    let files = data_files("tests");
    assert!(files.len() >= 300, "the suite has {} tests", files.len());
    let mut assembled = 0;
    for path in &files {
        let Some(asm) = asm_section(path) else {
            continue;
        };
        let slots = assemble_ubpf(&asm).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(!slots.is_empty(), "{}: no instructions", path.display());
        assembled += 1;
    }
    assert!(assembled >= 300, "only {assembled} programs assembled");
}

/// The negative inputs that must fail in the assembler, with a word the error must contain.
const ASSEMBLER_ERRORS: &[(&str, &str)] = &[
    (
        "invalid_imm32_dec_range.data",
        "32-bit immediate 2147483648 out of range",
    ),
    (
        "invalid_imm32_hex_range.data",
        "32-bit immediate 0x100000000 out of range",
    ),
    ("invalid_label.data", "unknown label `NOT_A_LABEL`"),
    ("invalid_lock.data", "wrong number of operands for `lock`"),
    ("invalid_lock2.data", "wrong number of operands for `lock`"),
    ("invalid_mnemonic.data", "unknown mnemonic `ldxq`"),
    ("invalid_offset.data", "expected a memory operand"),
    ("invalid_offset_range.data", "offset +0x10000 out of range"),
    (
        "invalid_operand_count.data",
        "wrong number of operands for `lddw`",
    ),
    ("invalid_register.data", "invalid register `%r50`"),
];

#[test]
fn assembler_negatives_fail_with_the_reason() {
    for (name, reason) in ASSEMBLER_ERRORS {
        let path = suite_dir("negative").join(name);
        let asm = asm_section(&path).unwrap_or_else(|| panic!("{name} has an asm section"));
        match assemble_ubpf(&asm) {
            Ok(slots) => panic!("{name} assembled to {} slots", slots.len()),
            Err(e) => assert!(
                e.message.contains(reason),
                "{name}: error `{e}` does not mention `{reason}`"
            ),
        }
    }
}

/// The other negative files are runtime or verifier errors (or raw bytes): their asm, if any,
/// is valid; an empty section assembles to nothing and the runner reports it.
#[test]
fn other_negative_inputs_assemble() {
    for path in data_files("negative") {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if ASSEMBLER_ERRORS.iter().any(|(n, _)| *n == name) {
            continue;
        }
        if let Some(asm) = asm_section(&path) {
            assemble_ubpf(&asm).unwrap_or_else(|e| panic!("{name}: {e}"));
        }
    }
}

#[test]
fn errors_point_at_line_and_column() {
    let err = assemble_ubpf("mov %r0, 1\n  or %r0, %r50\nexit").unwrap_err();
    assert_eq!((err.line, err.column), (2, 11));
    assert_eq!(
        err.to_string(),
        "line 2, column 11: invalid register `%r50`: registers are %r0 to %r10"
    );
}
