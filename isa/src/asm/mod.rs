//! Assemblers: text to instruction slots, in two dialects.
//!
//! - [`assemble_ubpf`]: the uBPF dialect the bpf_conformance suite is written in
//!   (`mov32 %r0, 1`, `ldxdw %r0, [%r1+8]`, `jne %r0, 15, label`). The suite is how this project
//!   measures its interpreter and JIT against other eBPF implementations, so its programs must
//!   assemble exactly as the suite's own assembler assembles them, and its negative inputs must
//!   fail with a reason.
//! - [`assemble_kernel`]: the syntax of the kernel's verifier log and `bpftool prog dump xlated`
//!   (`r0 = *(u32 *)(r1 +4)`, `if w1 s< 0x5 goto pc-2`), exactly what [`crate::disasm`] prints,
//!   so a log line can be pasted back into a test, and the disassembler is checked by
//!   round-tripping through it.
//!
//! Both return raw slots (`ld_imm64` takes two) and report the first problem as an [`AsmError`]
//! with a 1-based line and column. Labels (`name:`) may be used before they are defined. An
//! empty source assembles to an empty program: whether that is an error is the caller's call.

mod kernel;
mod labels;
mod lex;
mod ubpf;

pub use kernel::assemble_kernel;
pub use ubpf::assemble_ubpf;

/// Why a source does not assemble, and where (1-based line and column, in characters).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("line {line}, column {column}: {message}")]
pub struct AsmError {
    pub line: usize,
    pub column: usize,
    pub message: String,
}

impl AsmError {
    pub(crate) fn new(line: usize, column: usize, message: impl Into<String>) -> Self {
        AsmError {
            line,
            column,
            message: message.into(),
        }
    }

    /// The error a parser reported at `error.at`, a position inside `text` on line `line`.
    pub(crate) fn from_syntax(line: usize, text: &str, error: lex::SyntaxError<'_>) -> Self {
        AsmError::new(line, lex::column(text, error.at), error.message)
    }
}
