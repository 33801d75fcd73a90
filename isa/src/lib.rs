//! The eBPF instruction set as Linux 6.18 defines it (RFC 9669 plus the kernel's additions).
//!
//! - [`insn`]: the 8-byte [`RawInsn`] slot, the typed [`Insn`], strict decoding (every unused
//!   field must be zero) and lossless encoding, and [`Program`], a decoded instruction stream.
//! - [`disasm`]: text byte-identical to the kernel's verifier log (`kernel/bpf/disasm.c`).
//! - [`asm`]: an assembler for that kernel syntax and for the uBPF dialect of bpf_conformance.
//! - [`helpers`]: helper function ids and names.
//! - [`inline_policy`]: the helper calls the kernel replaces with inline code.
//! - [`kernel_version`]: the kernels bpfemu answers as.
//!
//! ```
//! use bpfemu_isa::{Insn, Program, RawInsn};
//!
//! // r0 = 1; exit
//! let raw = vec![RawInsn::from_u64(0x0000_0001_0000_00b7), RawInsn::from_u64(0x95)];
//! let prog = Program::decode(raw).unwrap();
//! assert_eq!(prog.insn(1), Some(&Insn::Exit));
//! ```

pub mod asm;
pub mod disasm;
pub mod inline_policy;
pub mod insn;
pub mod kernel_version;
pub mod opcode;
pub mod uapi;

pub use kernel_version::KernelVersion;
pub use uapi::helpers;

pub use insn::{
    AluOp, AtomicOp, ByteOrder, CallTarget, DecodeError, DecodeErrorKind, Insn, JmpCond,
    LdImm64Kind, Program, ProgramError, RawInsn, Reg, Size, Source, Width,
};
