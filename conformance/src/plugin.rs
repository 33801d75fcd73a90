//! The bpf_conformance plugin protocol, so the upstream runner (and any other VM's harness)
//! can measure bpfemu the way it measures uBPF or rbpf.
//!
//! The runner starts `plugin [MEM] [OPTIONS...]` once per test: MEM is the memory block in hex
//! (absent when the test has none), the program arrives on standard input as one line of hex
//! (the raw little-endian slots). The plugin prints r0 in hex and exits 0, or prints an error
//! message and exits 1. Options are accepted and ignored: bpfemu needs none.

use bpfemu::conformance::runner::SuiteHelpers;
use bpfemu_isa::{Program, RawInsn};

/// What the plugin prints and its exit code.
#[derive(Debug, PartialEq, Eq)]
pub struct PluginOutput {
    pub stdout: String,
    pub exit_code: u8,
}

/// Decodes hex digits, ignoring whitespace between bytes: `"b7 00"` and `"b700"` are equal.
pub fn decode_hex(text: &str) -> Result<Vec<u8>, String> {
    let digits: Vec<u8> = text.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    if !digits.len().is_multiple_of(2) {
        return Err(format!("odd number of hex digits ({})", digits.len()));
    }
    digits
        .chunks_exact(2)
        .map(|pair| {
            let s = std::str::from_utf8(pair).map_err(|_| "non-ASCII input".to_string())?;
            u8::from_str_radix(s, 16).map_err(|_| format!("bad hex byte `{s}`"))
        })
        .collect()
}

/// Runs one test the way the protocol asks: `args` are the plugin's arguments (without the
/// program name), `program_hex` the line read from standard input.
pub fn run(args: &[String], program_hex: &str) -> PluginOutput {
    match execute(args, program_hex) {
        Ok(r0) => PluginOutput {
            stdout: format!("{r0:x}\n"),
            exit_code: 0,
        },
        Err(message) => PluginOutput {
            stdout: format!("{message}\n"),
            exit_code: 1,
        },
    }
}

fn execute(args: &[String], program_hex: &str) -> Result<u64, String> {
    let mem_hex = args
        .first()
        .filter(|a| !a.starts_with('-'))
        .map_or("", String::as_str);
    let mut mem = decode_hex(mem_hex).map_err(|e| format!("memory argument: {e}"))?;
    let code = decode_hex(program_hex).map_err(|e| format!("program: {e}"))?;
    let slots = RawInsn::parse_all(&code).ok_or_else(|| {
        format!(
            "program: {} bytes is not a whole number of instructions",
            code.len()
        )
    })?;
    let program = Program::decode(slots).map_err(|e| e.to_string())?;
    bpfemu_vm::run_on_buffer(&program, &mut mem, &mut SuiteHelpers).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_with_and_without_spaces() {
        assert_eq!(decode_hex("b7 00\n01").unwrap(), vec![0xb7, 0x00, 0x01]);
        assert_eq!(decode_hex("b70001").unwrap(), vec![0xb7, 0x00, 0x01]);
        assert!(decode_hex("b7 0").is_err());
        assert!(decode_hex("zz").is_err());
    }

    #[test]
    fn returns_r0_in_hex() {
        // r0 = r2 (the memory length); exit
        let out = run(&["01 02 03".into()], "bf200000000000009500000000000000");
        assert_eq!(
            out,
            PluginOutput {
                stdout: "3\n".into(),
                exit_code: 0
            }
        );
    }

    #[test]
    fn options_are_not_memory() {
        let out = run(
            &["--some-option".into()],
            "bf200000000000009500000000000000",
        );
        assert_eq!(out.stdout, "0\n");
    }

    #[test]
    fn errors_exit_one_with_a_message() {
        let out = run(&[], "8501000000000000");
        assert_eq!(out.exit_code, 1);
        assert!(out.stdout.contains("reserved field dst"), "{}", out.stdout);
        assert_eq!(run(&[], "").exit_code, 1);
    }
}
