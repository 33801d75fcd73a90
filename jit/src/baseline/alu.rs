//! Arithmetic: the ALU instructions, negation, sign-extending moves and byte swaps, with the
//! kernel's semantics: 32-bit results zero-extended (every 32-bit x86 operation does it),
//! shift amounts masked to the width (as x86 masks them), `x / 0 = 0`, `x % 0 = x`,
//! `x s/ -1 = -x`, `x s% -1 = 0`.

use super::x86::*;
use super::{FnCompiler, SAVE, T1, T2};
use bpfemu_isa::{AluOp, ByteOrder, Source, Width};

/// The operand size of `width`.
pub(crate) fn size(width: Width) -> Sz {
    match width {
        Width::W64 => Sz::Q,
        Width::W32 => Sz::W,
    }
}

/// The two-operand form of `op`, when it has one.
fn arith(op: AluOp) -> Option<Arith> {
    Some(match op {
        AluOp::Add => Arith::Add,
        AluOp::Sub => Arith::Sub,
        AluOp::Or => Arith::Or,
        AluOp::And => Arith::And,
        AluOp::Xor => Arith::Xor,
        _ => return None,
    })
}

fn shift(op: AluOp) -> Option<Shift> {
    Some(match op {
        AluOp::Lsh => Shift::Shl,
        AluOp::Rsh => Shift::Shr,
        AluOp::Arsh => Shift::Sar,
        _ => return None,
    })
}

impl FnCompiler<'_> {
    /// `dst op= src` at `width`.
    pub(crate) fn alu(&mut self, width: Width, op: AluOp, dst: R, src: Source) {
        let sz = size(width);
        let src = match src {
            Source::Reg(r) => Ok(super::host(r)),
            Source::Imm(imm) => Err(imm),
        };
        if let Some(a) = arith(op) {
            match src {
                Ok(s) => self.a.arith_rr(sz, a, dst, s),
                Err(imm) => self.a.arith_ri(sz, a, dst, imm),
            }
            return;
        }
        if let Some(sh) = shift(op) {
            match src {
                Ok(s) => self.shift_by_reg(sz, sh, dst, s),
                Err(imm) => {
                    let mask = if sz == Sz::Q { 63 } else { 31 };
                    self.a.shift_ri(sz, sh, dst, imm as u8 & mask);
                }
            }
            return;
        }
        match (op, src) {
            (AluOp::Mov, Ok(s)) => self.a.mov_rr(sz, dst, s),
            (AluOp::Mov, Err(imm)) => match width {
                Width::W64 => self.a.mov_imm64(dst, imm as i64 as u64),
                Width::W32 => self.a.mov_imm32(dst, imm as u32),
            },
            (AluOp::Mul, Ok(s)) => self.a.imul_rr(sz, dst, s),
            (AluOp::Mul, Err(imm)) => self.a.imul_rri(sz, dst, dst, imm),
            _ => self.division(sz, op, dst, src),
        }
    }

    /// A shift by a register: x86 takes the amount in `cl` (r4's register).
    fn shift_by_reg(&mut self, sz: Sz, sh: Shift, dst: R, src: R) {
        if src == RCX {
            self.a.shift_cl(sz, sh, dst);
        } else if dst == RCX {
            self.a.mov_rr(Sz::Q, T2, RCX);
            self.a.mov_rr(Sz::Q, RCX, src);
            self.a.shift_cl(sz, sh, T2);
            self.a.mov_rr(Sz::Q, RCX, T2);
        } else {
            self.a.mov_rr(Sz::Q, T2, RCX);
            self.a.mov_rr(Sz::Q, RCX, src);
            self.a.shift_cl(sz, sh, dst);
            self.a.mov_rr(Sz::Q, RCX, T2);
        }
    }

    /// Division and modulo, never a trap: `div`/`idiv` take the dividend in rdx:rax (r3 and
    /// r0, kept in the save area meanwhile) and the divisor in a scratch register.
    fn division(&mut self, sz: Sz, op: AluOp, dst: R, src: Result<R, i32>) {
        let signed = matches!(op, AluOp::SDiv | AluOp::SMod);
        let modulo = matches!(op, AluOp::Mod | AluOp::SMod);
        if let Err(imm) = src {
            // A constant divisor: its special cases are known now.
            let divisor = match sz {
                Sz::Q => imm as i64,
                _ => imm as u32 as i32 as i64,
            };
            if divisor == 0 {
                match modulo {
                    false => self.a.mov_imm32(dst, 0),
                    true => self.a.mov_rr(sz, dst, dst),
                }
                return;
            }
            if signed && divisor == -1 {
                match modulo {
                    false => self.a.neg(sz, dst),
                    true => self.a.mov_imm32(dst, 0),
                }
                return;
            }
        }
        match src {
            Ok(s) => self.a.mov_rr(Sz::Q, T1, s),
            Err(imm) => match sz {
                Sz::Q => self.a.mov_imm64(T1, imm as i64 as u64),
                _ => self.a.mov_imm32(T1, imm as u32),
            },
        }
        let save_rax = mem(RSP, SAVE);
        let save_rdx = mem(RSP, SAVE + 3 * 8);
        self.a.store(Sz::Q, save_rax, RAX);
        self.a.store(Sz::Q, save_rdx, RDX);
        self.a.mov_rr(Sz::Q, RAX, dst);
        let (zero, minus_one, done) = (self.a.label(), self.a.label(), self.a.label());
        let constant = src.is_err();
        if !constant {
            self.a.test_rr(sz, T1, T1);
            self.a.jcc(Cc::E, zero);
            if signed {
                self.a.arith_ri(sz, Arith::Cmp, T1, -1);
                self.a.jcc(Cc::E, minus_one);
            }
        }
        if signed {
            self.a.sign_extend_rax(sz);
            self.a.idiv(sz, T1);
        } else {
            self.a.mov_imm32(RDX, 0);
            self.a.div(sz, T1);
        }
        self.a.mov_rr(Sz::Q, T2, if modulo { RDX } else { RAX });
        if !constant {
            self.a.jmp(done);
            self.a.bind(zero);
            match modulo {
                false => self.a.mov_imm32(T2, 0),
                true => self.a.mov_rr(sz, T2, RAX),
            }
            self.a.jmp(done);
            self.a.bind(minus_one);
            if signed {
                match modulo {
                    false => {
                        self.a.neg(sz, RAX);
                        self.a.mov_rr(sz, T2, RAX);
                    }
                    true => self.a.mov_imm32(T2, 0),
                }
            }
            self.a.bind(done);
        }
        self.a.load_zx(Sz::Q, RAX, save_rax);
        self.a.load_zx(Sz::Q, RDX, save_rdx);
        self.a.mov_rr(sz, dst, T2);
    }

    /// `dst = (s64|s32) (s8|s16|s32) src`.
    pub(crate) fn movsx(&mut self, width: Width, dst: R, src: R, bits: u8) {
        let to = size(width);
        match bits {
            8 => self.a.movsx_rr(to, Sz::B, dst, src),
            16 => self.a.movsx_rr(to, Sz::H, dst, src),
            32 => self.a.movsx_rr(to, Sz::W, dst, src),
            _ => self.a.mov_rr(to, dst, src),
        }
    }

    /// Byte order conversion of the low `bits` of `dst`, zero-extended.
    pub(crate) fn endian(&mut self, order: ByteOrder, bits: u8, dst: R) {
        let swap = order != ByteOrder::ToLe;
        match (bits, swap) {
            (16, false) => self.a.movzx16_rr(dst, dst),
            (16, true) => {
                self.a.shift_ri(Sz::H, Shift::Ror, dst, 8);
                self.a.movzx16_rr(dst, dst);
            }
            (32, false) => self.a.mov_rr(Sz::W, dst, dst),
            (32, true) => self.a.bswap(Sz::W, dst),
            (_, false) => {}
            (_, true) => self.a.bswap(Sz::Q, dst),
        }
    }
}
