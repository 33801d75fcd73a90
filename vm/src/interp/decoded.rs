//! The interpreter's pre-decoded form of a program: one flat [`Op`] per instruction slot, with
//! the hot instructions specialised to a [`Code`] of their own (operation, width and operand
//! kind chosen once, at preparation), immediates widened as the instruction uses them, and
//! jump targets resolved and checked. Everything else runs through the general path
//! ([`Code::General`]), which executes the decoded [`bpfemu_isa::Insn`].
//!
//! Each memory instruction also keeps a hint: the index of the region its last access hit
//! (see [`crate::Memory::read_hinted`]), so that a load from the packet does not search the
//! regions again after a load from the stack.

use bpfemu_isa::{AluOp, Insn, JmpCond, LdImm64Kind, Program, Size, Source, Width};
use std::cell::Cell;

/// What an [`Op`] does. The `*Imm` forms take `Op::imm`, the `*Reg` forms register `src`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Code {
    Mov64Imm,
    Mov64Reg,
    Mov32Imm,
    Mov32Reg,
    Add64Imm,
    Add64Reg,
    Sub64Reg,
    And64Imm,
    Or64Reg,
    Xor64Reg,
    Lsh64Imm,
    Rsh64Imm,
    Add32Imm,
    /// Any other ALU operation: `Op::alu` says which.
    Alu64Imm,
    Alu64Reg,
    Alu32Imm,
    Alu32Reg,
    /// `ld_imm64` of a constant.
    LdImm64,
    LdxB,
    LdxH,
    LdxW,
    LdxDw,
    StB,
    StH,
    StW,
    StDw,
    StxB,
    StxH,
    StxW,
    StxDw,
    Ja,
    JeqImm,
    JneImm,
    JeqReg,
    JneReg,
    JgtReg,
    JgeReg,
    JgtImm,
    /// Any other 64-bit or 32-bit jump: `Op::cond` says which.
    Jmp64Imm,
    Jmp64Reg,
    Jmp32Imm,
    Jmp32Reg,
    /// `exit`: the run's end when the entry function returns, else the general path's return
    /// to the caller.
    Exit,
    /// Everything else: calls, atomics, byte swaps, legacy loads, `may_goto`, and the
    /// second slot of an `ld_imm64`.
    General,
}

/// A jump target that does not hold an instruction: taking the jump is the error the general
/// path reports.
pub(crate) const BAD_TARGET: u32 = u32::MAX;

/// One pre-decoded instruction slot.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Op {
    pub code: Code,
    pub dst: u8,
    pub src: u8,
    pub alu: AluOp,
    pub cond: JmpCond,
    /// The jump's target slot, or [`BAD_TARGET`].
    pub target: u32,
    pub off: i16,
    /// The immediate as the instruction uses it: sign-extended for 64-bit operations and
    /// stores, the low 32 bits for 32-bit operations, the full constant of an `ld_imm64`.
    pub imm: u64,
}

/// A program ready for the interpreter: the program and its pre-decoded slots.
#[derive(Debug)]
pub struct PreparedProgram {
    prog: Program,
    pub(crate) ops: Vec<Op>,
    /// Per slot: the region index the instruction's last memory access hit.
    pub(crate) hints: Vec<Cell<u32>>,
}

impl Clone for PreparedProgram {
    fn clone(&self) -> PreparedProgram {
        PreparedProgram::new(self.prog.clone())
    }
}

impl PreparedProgram {
    pub fn new(prog: Program) -> PreparedProgram {
        let ops = (0..prog.len()).map(|pc| decode(&prog, pc)).collect();
        let hints = (0..prog.len()).map(|_| Cell::new(0)).collect();
        PreparedProgram { prog, ops, hints }
    }

    pub fn program(&self) -> &Program {
        &self.prog
    }
}

fn general() -> Op {
    Op {
        code: Code::General,
        dst: 0,
        src: 0,
        alu: AluOp::Mov,
        cond: JmpCond::Eq,
        target: BAD_TARGET,
        off: 0,
        imm: 0,
    }
}

/// The slot a jump at `pc` by `off` reaches, if an instruction starts there.
fn target(prog: &Program, pc: usize, off: i64) -> u32 {
    let t = pc as i64 + 1 + off;
    match usize::try_from(t) {
        Ok(t) if prog.insn(t).is_some() && t < BAD_TARGET as usize => t as u32,
        _ => BAD_TARGET,
    }
}

fn decode(prog: &Program, pc: usize) -> Op {
    let Some(insn) = prog.insn(pc) else {
        return general();
    };
    let op = general();
    let decoded = match *insn {
        Insn::Alu {
            width,
            op: alu,
            dst,
            src,
        } => {
            let (src_reg, imm) = match src {
                Source::Reg(r) => (Some(r.index() as u8), 0),
                Source::Imm(i) => (None, i),
            };
            let imm = match width {
                Width::W64 => imm as i64 as u64,
                Width::W32 => imm as u32 as u64,
            };
            let code = match (width, alu, src_reg.is_some()) {
                (Width::W64, AluOp::Mov, false) => Code::Mov64Imm,
                (Width::W64, AluOp::Mov, true) => Code::Mov64Reg,
                (Width::W32, AluOp::Mov, false) => Code::Mov32Imm,
                (Width::W32, AluOp::Mov, true) => Code::Mov32Reg,
                (Width::W64, AluOp::Add, false) => Code::Add64Imm,
                (Width::W64, AluOp::Add, true) => Code::Add64Reg,
                (Width::W64, AluOp::Sub, true) => Code::Sub64Reg,
                (Width::W64, AluOp::And, false) => Code::And64Imm,
                (Width::W64, AluOp::Or, true) => Code::Or64Reg,
                (Width::W64, AluOp::Xor, true) => Code::Xor64Reg,
                (Width::W64, AluOp::Lsh, false) => Code::Lsh64Imm,
                (Width::W64, AluOp::Rsh, false) => Code::Rsh64Imm,
                (Width::W32, AluOp::Add, false) => Code::Add32Imm,
                (Width::W64, _, false) => Code::Alu64Imm,
                (Width::W64, _, true) => Code::Alu64Reg,
                (Width::W32, _, false) => Code::Alu32Imm,
                (Width::W32, _, true) => Code::Alu32Reg,
            };
            Op {
                code,
                dst: dst.index() as u8,
                src: src_reg.unwrap_or(0),
                alu,
                imm,
                ..op
            }
        }
        Insn::LdImm64 {
            dst,
            kind: LdImm64Kind::Imm,
            imm,
            next_imm,
        } => Op {
            code: Code::LdImm64,
            dst: dst.index() as u8,
            imm: Insn::imm64(imm, next_imm),
            ..op
        },
        Insn::Load {
            size,
            sign_extend: false,
            dst,
            src,
            off,
        } => Op {
            code: match size {
                Size::B => Code::LdxB,
                Size::H => Code::LdxH,
                Size::W => Code::LdxW,
                Size::DW => Code::LdxDw,
            },
            dst: dst.index() as u8,
            src: src.index() as u8,
            off,
            ..op
        },
        Insn::Store {
            size,
            dst,
            off,
            imm,
        } => Op {
            code: match size {
                Size::B => Code::StB,
                Size::H => Code::StH,
                Size::W => Code::StW,
                Size::DW => Code::StDw,
            },
            dst: dst.index() as u8,
            off,
            imm: imm as i64 as u64,
            ..op
        },
        Insn::StoreReg {
            size,
            dst,
            src,
            off,
        } => Op {
            code: match size {
                Size::B => Code::StxB,
                Size::H => Code::StxH,
                Size::W => Code::StxW,
                Size::DW => Code::StxDw,
            },
            dst: dst.index() as u8,
            src: src.index() as u8,
            off,
            ..op
        },
        Insn::Ja { off, .. } => Op {
            code: Code::Ja,
            target: target(prog, pc, off as i64),
            ..op
        },
        Insn::Jump {
            width,
            cond,
            dst,
            src,
            off,
        } => {
            let (src_reg, imm) = match src {
                Source::Reg(r) => (Some(r.index() as u8), 0),
                Source::Imm(i) => (None, i),
            };
            let imm = match width {
                Width::W64 => imm as i64 as u64,
                Width::W32 => imm as u32 as u64,
            };
            let code = match (width, cond, src_reg.is_some()) {
                (Width::W64, JmpCond::Eq, false) => Code::JeqImm,
                (Width::W64, JmpCond::Ne, false) => Code::JneImm,
                (Width::W64, JmpCond::Eq, true) => Code::JeqReg,
                (Width::W64, JmpCond::Ne, true) => Code::JneReg,
                (Width::W64, JmpCond::Gt, true) => Code::JgtReg,
                (Width::W64, JmpCond::Ge, true) => Code::JgeReg,
                (Width::W64, JmpCond::Gt, false) => Code::JgtImm,
                (Width::W64, _, false) => Code::Jmp64Imm,
                (Width::W64, _, true) => Code::Jmp64Reg,
                (Width::W32, _, false) => Code::Jmp32Imm,
                (Width::W32, _, true) => Code::Jmp32Reg,
            };
            Op {
                code,
                dst: dst.index() as u8,
                src: src_reg.unwrap_or(0),
                cond,
                target: target(prog, pc, off as i64),
                off,
                imm,
                ..op
            }
        }
        Insn::Exit => Op {
            code: Code::Exit,
            ..op
        },
        _ => op,
    };
    // A jump whose target holds no instruction takes the general path, which reports it
    // when (and only when) the jump is taken.
    if decoded.target == BAD_TARGET
        && matches!(
            decoded.code,
            Code::Ja
                | Code::JeqImm
                | Code::JneImm
                | Code::JeqReg
                | Code::JneReg
                | Code::JgtReg
                | Code::JgeReg
                | Code::JgtImm
                | Code::Jmp64Imm
                | Code::Jmp64Reg
                | Code::Jmp32Imm
                | Code::Jmp32Reg
        )
    {
        return general();
    }
    decoded
}
