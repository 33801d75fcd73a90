//! Shorthands for building test programs from typed instructions.
#![allow(dead_code)]

use bpfemu_isa::{
    AluOp, AtomicOp, ByteOrder, CallTarget, Insn, JmpCond, LdImm64Kind, Program, Reg, Size, Source,
    Width,
};
use bpfemu_vm::{Interpreter, Memory, NoHelpers, Options, VmError};

pub const R0: Reg = Reg::R0;
pub const R1: Reg = Reg::R1;
pub const R2: Reg = Reg::R2;
pub const R3: Reg = Reg::R3;
pub const R6: Reg = Reg::R6;
pub const R7: Reg = Reg::R7;
pub const R8: Reg = Reg::R8;
pub const R9: Reg = Reg::R9;
pub const R10: Reg = Reg::R10;

pub fn alu64(op: AluOp, dst: Reg, src: Reg) -> Insn {
    Insn::Alu {
        width: Width::W64,
        op,
        dst,
        src: Source::Reg(src),
    }
}
pub fn alu64_imm(op: AluOp, dst: Reg, imm: i32) -> Insn {
    Insn::Alu {
        width: Width::W64,
        op,
        dst,
        src: Source::Imm(imm),
    }
}
pub fn alu32(op: AluOp, dst: Reg, src: Reg) -> Insn {
    Insn::Alu {
        width: Width::W32,
        op,
        dst,
        src: Source::Reg(src),
    }
}
pub fn alu32_imm(op: AluOp, dst: Reg, imm: i32) -> Insn {
    Insn::Alu {
        width: Width::W32,
        op,
        dst,
        src: Source::Imm(imm),
    }
}
pub fn mov(dst: Reg, imm: i32) -> Insn {
    alu64_imm(AluOp::Mov, dst, imm)
}
pub fn mov_reg(dst: Reg, src: Reg) -> Insn {
    alu64(AluOp::Mov, dst, src)
}
pub fn ld64(dst: Reg, value: u64) -> Insn {
    Insn::LdImm64 {
        dst,
        kind: LdImm64Kind::Imm,
        imm: value as u32 as i32,
        next_imm: (value >> 32) as u32 as i32,
    }
}
pub fn load(size: Size, dst: Reg, src: Reg, off: i16) -> Insn {
    Insn::Load {
        size,
        sign_extend: false,
        dst,
        src,
        off,
    }
}
pub fn load_sx(size: Size, dst: Reg, src: Reg, off: i16) -> Insn {
    Insn::Load {
        size,
        sign_extend: true,
        dst,
        src,
        off,
    }
}
pub fn store(size: Size, dst: Reg, off: i16, src: Reg) -> Insn {
    Insn::StoreReg {
        size,
        dst,
        src,
        off,
    }
}
pub fn store_imm(size: Size, dst: Reg, off: i16, imm: i32) -> Insn {
    Insn::Store {
        size,
        dst,
        off,
        imm,
    }
}
pub fn atomic(size: Size, op: AtomicOp, dst: Reg, src: Reg, off: i16) -> Insn {
    Insn::Atomic {
        size,
        op,
        dst,
        src,
        off,
    }
}
pub fn jmp(width: Width, cond: JmpCond, dst: Reg, src: Source, off: i16) -> Insn {
    Insn::Jump {
        width,
        cond,
        dst,
        src,
        off,
    }
}
pub fn ja(off: i32) -> Insn {
    Insn::Ja { off, long: false }
}
pub fn call_local(rel: i32) -> Insn {
    Insn::Call(CallTarget::Local(rel))
}
pub fn call_helper(id: i32) -> Insn {
    Insn::Call(CallTarget::Helper(id))
}
pub fn endian(order: ByteOrder, bits: u8, dst: Reg) -> Insn {
    Insn::Endian { order, bits, dst }
}
pub const EXIT: Insn = Insn::Exit;

pub fn prog(insns: &[Insn]) -> Program {
    Program::from_insns(insns).expect("test program encodes and decodes")
}

/// Runs with no memory but the stack, the given args, and no helpers.
pub fn run_args(insns: &[Insn], args: [u64; 5]) -> Result<u64, VmError> {
    Interpreter::default().run(&prog(insns), args, &mut Memory::new(), &mut NoHelpers)
}

pub fn run(insns: &[Insn]) -> Result<u64, VmError> {
    run_args(insns, [0; 5])
}

pub fn run_ok(insns: &[Insn]) -> u64 {
    run(insns).unwrap_or_else(|e| panic!("program failed: {e}"))
}

pub fn run_with(options: Options, insns: &[Insn]) -> Result<u64, VmError> {
    Interpreter::new(options).run(&prog(insns), [0; 5], &mut Memory::new(), &mut NoHelpers)
}

/// r0 = a (64-bit); r1 = b (64-bit); <op> r0, r1; exit
pub fn binop(insn_for: fn(AluOp, Reg, Reg) -> Insn, op: AluOp, a: u64, b: u64) -> u64 {
    run_ok(&[ld64(R0, a), ld64(R1, b), insn_for(op, R0, R1), EXIT])
}
