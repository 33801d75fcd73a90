//! Jumps: a conditional jump is a `cmp` (or a `test` for JSET) of the operation's width and a
//! `jcc` to the target's block; the driver continues with the fall-through. `may_goto` counts
//! down the frame's count in its slot.

use super::x86::*;
use super::{FnCompiler, MAY_GOTO, host};
use bpfemu_isa::{JmpCond, Source, Width};

/// The condition code that takes the jump after `cmp dst, src` (`test` for `Set`).
fn cc(cond: JmpCond) -> Cc {
    match cond {
        JmpCond::Eq => Cc::E,
        JmpCond::Ne | JmpCond::Set => Cc::Ne,
        JmpCond::Gt => Cc::A,
        JmpCond::Ge => Cc::Ae,
        JmpCond::Lt => Cc::B,
        JmpCond::Le => Cc::Be,
        JmpCond::Sgt => Cc::G,
        JmpCond::Sge => Cc::Ge,
        JmpCond::Slt => Cc::L,
        JmpCond::Sle => Cc::Le,
    }
}

impl FnCompiler<'_> {
    /// `if dst cond src goto pc + 1 + off` at `width` (a 64-bit comparison sees the immediate
    /// sign-extended, a 32-bit one its 32 bits: what x86's `imm32` forms do).
    pub(crate) fn jump(
        &mut self,
        width: Width,
        cond: JmpCond,
        dst: R,
        src: Source,
        pc: usize,
        off: i16,
    ) {
        let sz = super::alu::size(width);
        match (cond, src) {
            (JmpCond::Set, Source::Reg(s)) => self.a.test_rr(sz, dst, host(s)),
            (JmpCond::Set, Source::Imm(imm)) => self.a.test_ri(sz, dst, imm),
            (_, Source::Reg(s)) => self.a.arith_rr(sz, Arith::Cmp, dst, host(s)),
            (_, Source::Imm(imm)) => self.a.arith_ri(sz, Arith::Cmp, dst, imm),
        }
        let target = self.target_label(pc, off as i64);
        self.a.jcc(cc(cond), target);
    }

    /// `may_goto`: to the target once the count is spent, else one fewer and on.
    pub(crate) fn may_goto(&mut self, pc: usize, off: i16) {
        let target = self.target_label(pc, off as i64);
        let slot = mem(RSP, MAY_GOTO);
        self.a.arith_mi(Sz::Q, Arith::Cmp, slot, 0);
        self.a.jcc(Cc::E, target);
        self.a.arith_mi(Sz::Q, Arith::Sub, slot, 1);
    }
}
