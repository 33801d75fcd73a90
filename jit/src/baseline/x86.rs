//! A small x86-64 encoder: only the instruction forms the baseline compiler emits.
//!
//! Registers are numbered as the hardware numbers them (`RAX` 0 ... `R15` 15); the REX prefix
//! carries their fourth bit. Memory operands are `[base + disp]` or `[base + index * scale +
//! disp]`; the encoder picks the shortest displacement.

/// A host register number.
pub type R = u8;

pub const RAX: R = 0;
pub const RCX: R = 1;
pub const RDX: R = 2;
pub const RBX: R = 3;
pub const RSP: R = 4;
pub const RBP: R = 5;
pub const RSI: R = 6;
pub const RDI: R = 7;
pub const R8: R = 8;
pub const R9: R = 9;
pub const R10: R = 10;
pub const R11: R = 11;
pub const R12: R = 12;
pub const R13: R = 13;
pub const R14: R = 14;
pub const R15: R = 15;

/// Operand size of an instruction.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Sz {
    B,
    H,
    W,
    Q,
}

/// Condition codes (the low nibble of `Jcc`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u8)]
pub enum Cc {
    B = 0x2,
    Ae = 0x3,
    E = 0x4,
    Ne = 0x5,
    Be = 0x6,
    A = 0x7,
    L = 0xc,
    Ge = 0xd,
    Le = 0xe,
    G = 0xf,
}

/// The two-operand ALU group: the `/digit` of `0x81` and the opcode of the `r/m, r` form is
/// `digit * 8 + 1`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u8)]
pub enum Arith {
    Add = 0,
    Or = 1,
    And = 4,
    Sub = 5,
    Xor = 6,
    Cmp = 7,
}

/// Shifts: the `/digit` of `0xC1` / `0xD3`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u8)]
pub enum Shift {
    Ror = 1,
    Shl = 4,
    Shr = 5,
    Sar = 7,
}

/// A memory operand.
#[derive(Clone, Copy, Debug)]
pub struct Mem {
    pub base: R,
    pub index: Option<(R, u8)>,
    pub disp: i32,
}

/// `[base + disp]`.
pub fn mem(base: R, disp: i32) -> Mem {
    Mem {
        base,
        index: None,
        disp,
    }
}

/// `[base + index * scale + disp]` (`scale` 1, 2, 4 or 8; `index` never `RSP`).
pub fn mem_index(base: R, index: R, scale: u8, disp: i32) -> Mem {
    Mem {
        base,
        index: Some((index, scale)),
        disp,
    }
}

/// A code position to jump to, bound once its offset is known.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Label(pub u32);

/// An encoded code buffer with the labels and the 32-bit displacements that wait for them.
#[derive(Default)]
pub struct Asm {
    pub buf: Vec<u8>,
    labels: Vec<Option<u32>>,
    /// (position of a rel32 field, label): the field is relative to the end of the field.
    fixups: Vec<(u32, Label)>,
}

fn fits_i8(v: i64) -> bool {
    v == v as i8 as i64
}

fn fits_i32(v: i64) -> bool {
    v == v as i32 as i64
}

impl Asm {
    pub fn new() -> Asm {
        Asm::default()
    }

    pub fn pos(&self) -> u32 {
        self.buf.len() as u32
    }

    pub fn label(&mut self) -> Label {
        self.labels.push(None);
        Label(self.labels.len() as u32 - 1)
    }

    pub fn bind(&mut self, l: Label) {
        self.labels[l.0 as usize] = Some(self.pos());
    }

    pub fn offset_of(&self, l: Label) -> Option<u32> {
        self.labels[l.0 as usize]
    }

    /// Writes every pending displacement; false when a label was never bound.
    pub fn resolve(&mut self) -> bool {
        for &(at, l) in &self.fixups {
            let Some(target) = self.labels[l.0 as usize] else {
                return false;
            };
            let rel = target as i64 - (at as i64 + 4);
            self.buf[at as usize..at as usize + 4].copy_from_slice(&(rel as i32).to_le_bytes());
        }
        self.fixups.clear();
        true
    }

    fn byte(&mut self, b: u8) {
        self.buf.push(b);
    }

    fn bytes(&mut self, b: &[u8]) {
        self.buf.extend_from_slice(b);
    }

    fn imm32(&mut self, v: i32) {
        self.bytes(&v.to_le_bytes());
    }

    fn rel32_to(&mut self, l: Label) {
        let at = self.pos();
        self.fixups.push((at, l));
        self.imm32(0);
    }

    /// The operand-size prefix and REX of an instruction whose `reg` field is `reg` and whose
    /// r/m names `rm` (register) or `base`/`index` (memory). `byte_regs`: an 8-bit register
    /// operand, for which SPL/BPL/SIL/DIL need a REX prefix.
    fn prefix(&mut self, sz: Sz, reg: R, rm: R, index: R, byte_regs: bool) {
        if sz == Sz::H {
            self.byte(0x66);
        }
        let w = (sz == Sz::Q) as u8;
        let rex = 0x40 | (w << 3) | ((reg >> 3) << 2) | ((index >> 3) << 1) | (rm >> 3);
        let needs_byte_rex = byte_regs && ((4..8).contains(&reg) || (4..8).contains(&rm));
        if rex != 0x40 || needs_byte_rex {
            self.byte(rex);
        }
    }

    fn modrm_rr(&mut self, reg: R, rm: R) {
        self.byte(0xc0 | ((reg & 7) << 3) | (rm & 7));
    }

    fn modrm_mem(&mut self, reg: R, m: Mem) {
        let reg = (reg & 7) << 3;
        let base = m.base & 7;
        // [rbp]/[r13] have no disp-less form.
        let (md, disp_len) = if m.disp == 0 && base != 5 {
            (0x00, 0)
        } else if fits_i8(m.disp as i64) {
            (0x40, 1)
        } else {
            (0x80, 4)
        };
        match m.index {
            None if base != 4 => self.byte(md | reg | base),
            None => {
                self.byte(md | reg | 4);
                self.byte(0x24);
            }
            Some((index, scale)) => {
                let ss = match scale {
                    1 => 0,
                    2 => 1,
                    4 => 2,
                    _ => 3,
                };
                self.byte(md | reg | 4);
                self.byte((ss << 6) | ((index & 7) << 3) | base);
            }
        }
        match disp_len {
            1 => self.byte(m.disp as i8 as u8),
            4 => self.imm32(m.disp),
            _ => {}
        }
    }

    fn op_rr(&mut self, sz: Sz, opcode: &[u8], reg: R, rm: R) {
        self.prefix(sz, reg, rm, 0, sz == Sz::B);
        self.bytes(opcode);
        self.modrm_rr(reg, rm);
    }

    fn op_rm(&mut self, sz: Sz, opcode: &[u8], reg: R, m: Mem) {
        let index = m.index.map_or(0, |(i, _)| i);
        self.prefix(sz, reg, m.base, index, sz == Sz::B);
        self.bytes(opcode);
        self.modrm_mem(reg, m);
    }

    // Moves.

    /// `mov dst, src` (32-bit zero-extends).
    pub fn mov_rr(&mut self, sz: Sz, dst: R, src: R) {
        self.op_rr(sz, &[0x89], src, dst);
    }

    /// `dst = imm` as a 64-bit value, in the shortest form.
    pub fn mov_imm64(&mut self, dst: R, imm: u64) {
        if imm <= u32::MAX as u64 {
            if imm == 0 {
                self.op_rr(Sz::W, &[0x31], dst, dst);
                return;
            }
            self.prefix(Sz::W, 0, dst, 0, false);
            self.byte(0xb8 | (dst & 7));
            self.imm32(imm as u32 as i32);
        } else if fits_i32(imm as i64) {
            self.op_rr(Sz::Q, &[0xc7], 0, dst);
            self.imm32(imm as i32);
        } else {
            self.prefix(Sz::Q, 0, dst, 0, false);
            self.byte(0xb8 | (dst & 7));
            self.bytes(&imm.to_le_bytes());
        }
    }

    /// `mov dst32, imm32` (zero-extends).
    pub fn mov_imm32(&mut self, dst: R, imm: u32) {
        self.mov_imm64(dst, imm as u64);
    }

    /// A load of `sz` zero-extended to 64 bits.
    pub fn load_zx(&mut self, sz: Sz, dst: R, m: Mem) {
        match sz {
            Sz::B => self.op_rm(Sz::W, &[0x0f, 0xb6], dst, m),
            Sz::H => self.op_rm(Sz::W, &[0x0f, 0xb7], dst, m),
            Sz::W => self.op_rm(Sz::W, &[0x8b], dst, m),
            Sz::Q => self.op_rm(Sz::Q, &[0x8b], dst, m),
        }
    }

    /// A load of `sz` sign-extended to 64 bits.
    pub fn load_sx(&mut self, sz: Sz, dst: R, m: Mem) {
        match sz {
            Sz::B => self.op_rm(Sz::Q, &[0x0f, 0xbe], dst, m),
            Sz::H => self.op_rm(Sz::Q, &[0x0f, 0xbf], dst, m),
            Sz::W => self.op_rm(Sz::Q, &[0x63], dst, m),
            Sz::Q => self.op_rm(Sz::Q, &[0x8b], dst, m),
        }
    }

    /// `mov [m], src` of `sz`.
    pub fn store(&mut self, sz: Sz, m: Mem, src: R) {
        let op: &[u8] = if sz == Sz::B { &[0x88] } else { &[0x89] };
        self.op_rm(sz, op, src, m);
    }

    /// `mov [m], imm` of `sz` (a 64-bit store sign-extends `imm`).
    pub fn store_imm(&mut self, sz: Sz, m: Mem, imm: i32) {
        match sz {
            Sz::B => {
                self.op_rm(Sz::W, &[0xc6], 0, m);
                self.byte(imm as u8);
            }
            Sz::H => {
                self.op_rm(Sz::H, &[0xc7], 0, m);
                self.bytes(&(imm as u16).to_le_bytes());
            }
            _ => {
                self.op_rm(sz, &[0xc7], 0, m);
                self.imm32(imm);
            }
        }
    }

    /// `movsx dst, src` of the low `from` bits (`to`: W zero-extends the 32-bit result).
    pub fn movsx_rr(&mut self, to: Sz, from: Sz, dst: R, src: R) {
        match from {
            Sz::B => {
                // The byte register form needs REX for SPL-DIL.
                let w = (to == Sz::Q) as u8;
                let rex = 0x40 | (w << 3) | ((dst >> 3) << 2) | (src >> 3);
                if rex != 0x40 || (4..8).contains(&src) {
                    self.byte(rex);
                }
                self.bytes(&[0x0f, 0xbe]);
                self.modrm_rr(dst, src);
            }
            Sz::H => self.op_rr(to, &[0x0f, 0xbf], dst, src),
            Sz::W if to == Sz::Q => self.op_rr(Sz::Q, &[0x63], dst, src),
            _ => self.mov_rr(Sz::W, dst, src),
        }
    }

    /// `movzx dst32, src16`.
    pub fn movzx16_rr(&mut self, dst: R, src: R) {
        self.op_rr(Sz::W, &[0x0f, 0xb7], dst, src);
    }

    pub fn lea(&mut self, dst: R, m: Mem) {
        self.op_rm(Sz::Q, &[0x8d], dst, m);
    }

    // Arithmetic.

    /// `op dst, src`.
    pub fn arith_rr(&mut self, sz: Sz, op: Arith, dst: R, src: R) {
        self.op_rr(sz, &[(op as u8) * 8 + 1], src, dst);
    }

    /// `op dst, imm` (sign-extended to 64 bits in the 64-bit form).
    pub fn arith_ri(&mut self, sz: Sz, op: Arith, dst: R, imm: i32) {
        if fits_i8(imm as i64) {
            self.op_rr(sz, &[0x83], op as u8, dst);
            self.byte(imm as i8 as u8);
        } else {
            self.op_rr(sz, &[0x81], op as u8, dst);
            self.imm32(imm);
        }
    }

    /// `op dst, [m]`.
    pub fn arith_rm(&mut self, sz: Sz, op: Arith, dst: R, m: Mem) {
        self.op_rm(sz, &[(op as u8) * 8 + 3], dst, m);
    }

    /// `op qword [m], imm`.
    pub fn arith_mi(&mut self, sz: Sz, op: Arith, m: Mem, imm: i32) {
        if fits_i8(imm as i64) {
            self.op_rm(sz, &[0x83], op as u8, m);
            self.byte(imm as i8 as u8);
        } else {
            self.op_rm(sz, &[0x81], op as u8, m);
            self.imm32(imm);
        }
    }

    /// `lock op [m], src` (add, or, and, xor).
    pub fn lock_arith_mr(&mut self, sz: Sz, op: Arith, m: Mem, src: R) {
        self.byte(0xf0);
        self.op_rm(sz, &[(op as u8) * 8 + 1], src, m);
    }

    /// `test a, b`.
    pub fn test_rr(&mut self, sz: Sz, a: R, b: R) {
        self.op_rr(sz, &[0x85], b, a);
    }

    /// `test a, imm` (sign-extended in the 64-bit form).
    pub fn test_ri(&mut self, sz: Sz, a: R, imm: i32) {
        self.op_rr(sz, &[0xf7], 0, a);
        self.imm32(imm);
    }

    /// `imul dst, src`.
    pub fn imul_rr(&mut self, sz: Sz, dst: R, src: R) {
        self.op_rr(sz, &[0x0f, 0xaf], dst, src);
    }

    /// `imul dst, src, imm`.
    pub fn imul_rri(&mut self, sz: Sz, dst: R, src: R, imm: i32) {
        if fits_i8(imm as i64) {
            self.op_rr(sz, &[0x6b], dst, src);
            self.byte(imm as i8 as u8);
        } else {
            self.op_rr(sz, &[0x69], dst, src);
            self.imm32(imm);
        }
    }

    /// `div r` (unsigned, of rdx:rax or edx:eax).
    pub fn div(&mut self, sz: Sz, r: R) {
        self.op_rr(sz, &[0xf7], 6, r);
    }

    /// `idiv r`.
    pub fn idiv(&mut self, sz: Sz, r: R) {
        self.op_rr(sz, &[0xf7], 7, r);
    }

    /// `cqo` / `cdq`: sign-extends rax into rdx.
    pub fn sign_extend_rax(&mut self, sz: Sz) {
        if sz == Sz::Q {
            self.byte(0x48);
        }
        self.byte(0x99);
    }

    pub fn neg(&mut self, sz: Sz, r: R) {
        self.op_rr(sz, &[0xf7], 3, r);
    }

    /// `shift r, cl`.
    pub fn shift_cl(&mut self, sz: Sz, op: Shift, r: R) {
        self.op_rr(sz, &[0xd3], op as u8, r);
    }

    /// `shift r, imm`.
    pub fn shift_ri(&mut self, sz: Sz, op: Shift, r: R, imm: u8) {
        self.op_rr(sz, &[0xc1], op as u8, r);
        self.byte(imm);
    }

    /// `bswap r` (32 or 64 bits).
    pub fn bswap(&mut self, sz: Sz, r: R) {
        self.prefix(sz, 0, r, 0, false);
        self.bytes(&[0x0f, 0xc8 | (r & 7)]);
    }

    // Atomics.

    /// `lock xadd [m], r`.
    pub fn lock_xadd(&mut self, sz: Sz, m: Mem, r: R) {
        self.byte(0xf0);
        self.op_rm(sz, &[0x0f, 0xc1], r, m);
    }

    /// `xchg [m], r` (locked by itself).
    pub fn xchg_mr(&mut self, sz: Sz, m: Mem, r: R) {
        self.op_rm(sz, &[0x87], r, m);
    }

    /// `lock cmpxchg [m], r`.
    pub fn lock_cmpxchg(&mut self, sz: Sz, m: Mem, r: R) {
        self.byte(0xf0);
        self.op_rm(sz, &[0x0f, 0xb1], r, m);
    }

    // Control flow.

    pub fn jmp(&mut self, l: Label) {
        self.byte(0xe9);
        self.rel32_to(l);
    }

    pub fn jcc(&mut self, cc: Cc, l: Label) {
        self.bytes(&[0x0f, 0x80 | cc as u8]);
        self.rel32_to(l);
    }

    /// `call rel32` to a label of this buffer.
    pub fn call_label(&mut self, l: Label) {
        self.byte(0xe8);
        self.rel32_to(l);
    }

    /// `call r`.
    pub fn call_r(&mut self, r: R) {
        self.prefix(Sz::W, 0, r, 0, false);
        self.byte(0xff);
        self.modrm_rr(2, r);
    }

    /// Calls the absolute address `addr` through `scratch`.
    pub fn call_abs(&mut self, addr: u64, scratch: R) {
        self.mov_imm64(scratch, addr);
        self.call_r(scratch);
    }

    pub fn push(&mut self, r: R) {
        if r >= 8 {
            self.byte(0x41);
        }
        self.byte(0x50 | (r & 7));
    }

    pub fn pop(&mut self, r: R) {
        if r >= 8 {
            self.byte(0x41);
        }
        self.byte(0x58 | (r & 7));
    }

    pub fn ret(&mut self) {
        self.byte(0xc3);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(f: impl FnOnce(&mut Asm)) -> Vec<u8> {
        let mut a = Asm::new();
        f(&mut a);
        a.buf
    }

    // Expected bytes as the Intel manual's encodings give them.
    #[test]
    fn encodings() {
        assert_eq!(enc(|a| a.mov_rr(Sz::Q, RAX, RDI)), [0x48, 0x89, 0xf8]);
        assert_eq!(enc(|a| a.mov_rr(Sz::W, R13, RSI)), [0x41, 0x89, 0xf5]);
        assert_eq!(
            enc(|a| a.load_zx(Sz::Q, RAX, mem(R12, 8))),
            [0x49, 0x8b, 0x44, 0x24, 0x08]
        );
        assert_eq!(
            enc(|a| a.load_zx(Sz::B, RSI, mem(RBP, 0))),
            [0x0f, 0xb6, 0x75, 0x00]
        );
        assert_eq!(
            enc(|a| a.store(Sz::B, mem(RAX, -1), RSI)),
            [0x40, 0x88, 0x70, 0xff]
        );
        assert_eq!(
            enc(|a| a.arith_ri(Sz::Q, Arith::Add, R9, 3)),
            [0x49, 0x83, 0xc1, 0x03]
        );
        assert_eq!(
            enc(|a| a.load_zx(Sz::Q, R11, mem_index(R12, R10, 8, 96))),
            [0x4f, 0x8b, 0x5c, 0xd4, 0x60]
        );
        assert_eq!(enc(|a| a.bswap(Sz::Q, R15)), [0x49, 0x0f, 0xcf]);
        assert_eq!(
            enc(|a| a.movsx_rr(Sz::Q, Sz::B, RAX, RSI)),
            [0x48, 0x0f, 0xbe, 0xc6]
        );
        assert_eq!(
            enc(|a| a.movsx_rr(Sz::W, Sz::B, RAX, RSI)),
            [0x40, 0x0f, 0xbe, 0xc6]
        );
        assert_eq!(
            enc(|a| a.mov_imm64(RAX, u64::MAX)),
            [0x48, 0xc7, 0xc0, 0xff, 0xff, 0xff, 0xff]
        );
        assert_eq!(
            enc(|a| a.lock_cmpxchg(Sz::Q, mem(R10, 0), R11)),
            [0xf0, 0x4d, 0x0f, 0xb1, 0x1a]
        );
    }
}
