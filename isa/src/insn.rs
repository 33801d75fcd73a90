//! Instructions: the raw 8-byte slot, the typed [`Insn`], and the lossless conversion between
//! them.
//!
//! Decoding is strict: every field an instruction does not use must be zero (RFC 9669 §3), and
//! every opcode, register, size and immediate must name something Linux 6.18 defines. A word
//! that decodes re-encodes to exactly the same bytes.

use crate::opcode::*;
use std::fmt;

/// One 8-byte instruction slot, as it lies in memory (little-endian).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct RawInsn {
    pub code: u8,
    /// Destination register number (low nibble of the register byte).
    pub dst: u8,
    /// Source register number (high nibble of the register byte).
    pub src: u8,
    pub off: i16,
    pub imm: i32,
}

impl RawInsn {
    pub const fn new(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Self {
        RawInsn {
            code,
            dst: dst & 0xf,
            src: src & 0xf,
            off,
            imm,
        }
    }

    pub fn from_bytes(bytes: [u8; 8]) -> Self {
        RawInsn {
            code: bytes[0],
            dst: bytes[1] & 0xf,
            src: bytes[1] >> 4,
            off: i16::from_le_bytes([bytes[2], bytes[3]]),
            imm: i32::from_le_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]),
        }
    }

    pub fn to_bytes(self) -> [u8; 8] {
        let off = self.off.to_le_bytes();
        let imm = self.imm.to_le_bytes();
        [
            self.code,
            (self.src << 4) | (self.dst & 0xf),
            off[0],
            off[1],
            imm[0],
            imm[1],
            imm[2],
            imm[3],
        ]
    }

    /// The slot read as one little-endian 64-bit word (the opcode is the low byte).
    pub fn from_u64(word: u64) -> Self {
        Self::from_bytes(word.to_le_bytes())
    }

    pub fn to_u64(self) -> u64 {
        u64::from_le_bytes(self.to_bytes())
    }

    /// Splits a byte buffer into slots; `None` when its length is not a multiple of 8.
    pub fn parse_all(bytes: &[u8]) -> Option<Vec<RawInsn>> {
        if !bytes.len().is_multiple_of(8) {
            return None;
        }
        Some(
            bytes
                .chunks_exact(8)
                .map(|c| RawInsn::from_bytes(c.try_into().expect("chunk of 8")))
                .collect(),
        )
    }
}

/// A register, r0 to r10.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Reg(u8);

impl Reg {
    pub const R0: Reg = Reg(0);
    pub const R1: Reg = Reg(1);
    pub const R2: Reg = Reg(2);
    pub const R3: Reg = Reg(3);
    pub const R4: Reg = Reg(4);
    pub const R5: Reg = Reg(5);
    pub const R6: Reg = Reg(6);
    pub const R7: Reg = Reg(7);
    pub const R8: Reg = Reg(8);
    pub const R9: Reg = Reg(9);
    /// The read-only frame pointer.
    pub const R10: Reg = Reg(10);
    /// Number of registers.
    pub const COUNT: usize = 11;

    pub const fn new(n: u8) -> Option<Reg> {
        if n <= 10 { Some(Reg(n)) } else { None }
    }

    pub const fn index(self) -> usize {
        self.0 as usize
    }

    pub const fn number(self) -> u8 {
        self.0
    }
}

impl fmt::Display for Reg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "r{}", self.0)
    }
}

/// Operand width of ALU (32 vs 64 bit) and JMP (JMP32 vs JMP) instructions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Width {
    W32,
    W64,
}

/// Memory access size.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Size {
    B,
    H,
    W,
    DW,
}

impl Size {
    pub const fn bytes(self) -> usize {
        match self {
            Size::B => 1,
            Size::H => 2,
            Size::W => 4,
            Size::DW => 8,
        }
    }

    const fn code(self) -> u8 {
        match self {
            Size::B => BPF_B,
            Size::H => BPF_H,
            Size::W => BPF_W,
            Size::DW => BPF_DW,
        }
    }

    const fn from_code(code: u8) -> Size {
        match size(code) {
            BPF_B => Size::B,
            BPF_H => Size::H,
            BPF_W => Size::W,
            _ => Size::DW,
        }
    }
}

/// Second operand of ALU and conditional-jump instructions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Source {
    Reg(Reg),
    Imm(i32),
}

/// Binary ALU operations (`neg`, `movsx` and byte swaps have their own variants).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AluOp {
    Add,
    Sub,
    Mul,
    Div,
    /// Signed division: BPF_DIV with off = 1.
    SDiv,
    Or,
    And,
    Lsh,
    Rsh,
    Mod,
    /// Signed modulo: BPF_MOD with off = 1.
    SMod,
    Xor,
    Mov,
    Arsh,
}

impl AluOp {
    /// Every operation, for generators and exhaustive tests.
    pub const ALL: [AluOp; 14] = [
        AluOp::Add,
        AluOp::Sub,
        AluOp::Mul,
        AluOp::Div,
        AluOp::SDiv,
        AluOp::Or,
        AluOp::And,
        AluOp::Lsh,
        AluOp::Rsh,
        AluOp::Mod,
        AluOp::SMod,
        AluOp::Xor,
        AluOp::Mov,
        AluOp::Arsh,
    ];

    /// The opcode's operation bits and the `off` field that together select this operation.
    const fn code_and_off(self) -> (u8, i16) {
        match self {
            AluOp::Add => (BPF_ADD, 0),
            AluOp::Sub => (BPF_SUB, 0),
            AluOp::Mul => (BPF_MUL, 0),
            AluOp::Div => (BPF_DIV, 0),
            AluOp::SDiv => (BPF_DIV, 1),
            AluOp::Or => (BPF_OR, 0),
            AluOp::And => (BPF_AND, 0),
            AluOp::Lsh => (BPF_LSH, 0),
            AluOp::Rsh => (BPF_RSH, 0),
            AluOp::Mod => (BPF_MOD, 0),
            AluOp::SMod => (BPF_MOD, 1),
            AluOp::Xor => (BPF_XOR, 0),
            AluOp::Mov => (BPF_MOV, 0),
            AluOp::Arsh => (BPF_ARSH, 0),
        }
    }
}

/// Byte-order operations (BPF_END).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ByteOrder {
    /// ALU | END | TO_LE: convert to little endian (truncates on a little-endian host).
    ToLe,
    /// ALU | END | TO_BE: convert to big endian.
    ToBe,
    /// ALU64 | END | TO_LE: unconditional byte swap (cpu v4).
    Swap,
}

/// Conditions of conditional jumps.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum JmpCond {
    Eq,
    Gt,
    Ge,
    Set,
    Ne,
    Sgt,
    Sge,
    Lt,
    Le,
    Slt,
    Sle,
}

impl JmpCond {
    /// Every condition, for generators and exhaustive tests.
    pub const ALL: [JmpCond; 11] = [
        JmpCond::Eq,
        JmpCond::Gt,
        JmpCond::Ge,
        JmpCond::Set,
        JmpCond::Ne,
        JmpCond::Sgt,
        JmpCond::Sge,
        JmpCond::Lt,
        JmpCond::Le,
        JmpCond::Slt,
        JmpCond::Sle,
    ];

    const fn code(self) -> u8 {
        match self {
            JmpCond::Eq => BPF_JEQ,
            JmpCond::Gt => BPF_JGT,
            JmpCond::Ge => BPF_JGE,
            JmpCond::Set => BPF_JSET,
            JmpCond::Ne => BPF_JNE,
            JmpCond::Sgt => BPF_JSGT,
            JmpCond::Sge => BPF_JSGE,
            JmpCond::Lt => BPF_JLT,
            JmpCond::Le => BPF_JLE,
            JmpCond::Slt => BPF_JSLT,
            JmpCond::Sle => BPF_JSLE,
        }
    }

    const fn from_code(op: u8) -> Option<JmpCond> {
        Some(match op {
            BPF_JEQ => JmpCond::Eq,
            BPF_JGT => JmpCond::Gt,
            BPF_JGE => JmpCond::Ge,
            BPF_JSET => JmpCond::Set,
            BPF_JNE => JmpCond::Ne,
            BPF_JSGT => JmpCond::Sgt,
            BPF_JSGE => JmpCond::Sge,
            BPF_JLT => JmpCond::Lt,
            BPF_JLE => JmpCond::Le,
            BPF_JSLT => JmpCond::Slt,
            BPF_JSLE => JmpCond::Sle,
            _ => return None,
        })
    }
}

/// Atomic operations (BPF_STX | BPF_ATOMIC, selected by imm).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AtomicOp {
    Add,
    Or,
    And,
    Xor,
    FetchAdd,
    FetchOr,
    FetchAnd,
    FetchXor,
    /// Exchange: src receives the old value.
    Xchg,
    /// Compare r0 with memory, store src when equal; r0 receives the old value.
    Cmpxchg,
    /// `dst = load_acquire(src + off)`.
    LoadAcquire,
    /// `store_release(dst + off, src)`.
    StoreRelease,
}

impl AtomicOp {
    pub const fn imm(self) -> i32 {
        match self {
            AtomicOp::Add => BPF_ADD as i32,
            AtomicOp::Or => BPF_OR as i32,
            AtomicOp::And => BPF_AND as i32,
            AtomicOp::Xor => BPF_XOR as i32,
            AtomicOp::FetchAdd => BPF_ADD as i32 | BPF_FETCH,
            AtomicOp::FetchOr => BPF_OR as i32 | BPF_FETCH,
            AtomicOp::FetchAnd => BPF_AND as i32 | BPF_FETCH,
            AtomicOp::FetchXor => BPF_XOR as i32 | BPF_FETCH,
            AtomicOp::Xchg => BPF_XCHG,
            AtomicOp::Cmpxchg => BPF_CMPXCHG,
            AtomicOp::LoadAcquire => BPF_LOAD_ACQ,
            AtomicOp::StoreRelease => BPF_STORE_REL,
        }
    }

    pub const fn from_imm(imm: i32) -> Option<AtomicOp> {
        const ADD: i32 = BPF_ADD as i32;
        const OR: i32 = BPF_OR as i32;
        const AND: i32 = BPF_AND as i32;
        const XOR: i32 = BPF_XOR as i32;
        const FETCH_ADD: i32 = ADD | BPF_FETCH;
        const FETCH_OR: i32 = OR | BPF_FETCH;
        const FETCH_AND: i32 = AND | BPF_FETCH;
        const FETCH_XOR: i32 = XOR | BPF_FETCH;
        Some(match imm {
            ADD => AtomicOp::Add,
            OR => AtomicOp::Or,
            AND => AtomicOp::And,
            XOR => AtomicOp::Xor,
            FETCH_ADD => AtomicOp::FetchAdd,
            FETCH_OR => AtomicOp::FetchOr,
            FETCH_AND => AtomicOp::FetchAnd,
            FETCH_XOR => AtomicOp::FetchXor,
            BPF_XCHG => AtomicOp::Xchg,
            BPF_CMPXCHG => AtomicOp::Cmpxchg,
            BPF_LOAD_ACQ => AtomicOp::LoadAcquire,
            BPF_STORE_REL => AtomicOp::StoreRelease,
            _ => return None,
        })
    }

    /// Whether the operation writes the old memory value back to a register.
    pub const fn fetches(self) -> bool {
        matches!(
            self,
            AtomicOp::FetchAdd
                | AtomicOp::FetchOr
                | AtomicOp::FetchAnd
                | AtomicOp::FetchXor
                | AtomicOp::Xchg
                | AtomicOp::Cmpxchg
        )
    }
}

/// What the 64-bit immediate of `ld_imm64` stands for (its src_reg).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LdImm64Kind {
    /// A plain 64-bit constant.
    Imm,
    /// imm = map fd: the map's address.
    MapFd,
    /// imm = map fd, next imm = offset: an address inside the map's value.
    MapValue,
    /// imm = BTF id of a kernel variable.
    BtfId,
    /// imm = pc-relative instruction offset of a subprogram: its address.
    Func,
    /// imm = index into the fd array: the map's address.
    MapIdx,
    /// imm = index into the fd array, next imm = offset.
    MapIdxValue,
}

impl LdImm64Kind {
    pub const fn src(self) -> u8 {
        match self {
            LdImm64Kind::Imm => 0,
            LdImm64Kind::MapFd => BPF_PSEUDO_MAP_FD,
            LdImm64Kind::MapValue => BPF_PSEUDO_MAP_VALUE,
            LdImm64Kind::BtfId => BPF_PSEUDO_BTF_ID,
            LdImm64Kind::Func => BPF_PSEUDO_FUNC,
            LdImm64Kind::MapIdx => BPF_PSEUDO_MAP_IDX,
            LdImm64Kind::MapIdxValue => BPF_PSEUDO_MAP_IDX_VALUE,
        }
    }

    pub const fn from_src(src: u8) -> Option<LdImm64Kind> {
        Some(match src {
            0 => LdImm64Kind::Imm,
            BPF_PSEUDO_MAP_FD => LdImm64Kind::MapFd,
            BPF_PSEUDO_MAP_VALUE => LdImm64Kind::MapValue,
            BPF_PSEUDO_BTF_ID => LdImm64Kind::BtfId,
            BPF_PSEUDO_FUNC => LdImm64Kind::Func,
            BPF_PSEUDO_MAP_IDX => LdImm64Kind::MapIdx,
            BPF_PSEUDO_MAP_IDX_VALUE => LdImm64Kind::MapIdxValue,
            _ => return None,
        })
    }
}

/// Call targets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CallTarget {
    /// A helper function by id (src_reg 0).
    Helper(i32),
    /// A bpf-to-bpf call: target pc = pc + 1 + offset (src_reg 1).
    Local(i32),
    /// A kernel function by BTF id; `off` selects the module BTF fd (0: vmlinux).
    Kfunc { btf_id: i32, off: i16 },
}

/// One decoded instruction. `ld_imm64` is the only one that spans two slots.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Insn {
    Alu {
        width: Width,
        op: AluOp,
        dst: Reg,
        src: Source,
    },
    Neg {
        width: Width,
        dst: Reg,
    },
    /// Sign-extending move of the low `bits` (8, 16 or 32) of src.
    MovSx {
        width: Width,
        dst: Reg,
        src: Reg,
        bits: u8,
    },
    /// Arena pointer cast (ALU64 mov X with off = 1); imm = (dst addr space << 16) | src's.
    AddrSpaceCast {
        dst: Reg,
        src: Reg,
        imm: i32,
    },
    Endian {
        order: ByteOrder,
        bits: u8,
        dst: Reg,
    },
    LdImm64 {
        dst: Reg,
        kind: LdImm64Kind,
        imm: i32,
        next_imm: i32,
    },
    /// Legacy packet load: r0 = ntoh(*(size *)(skb->data + imm)).
    LdAbs {
        size: Size,
        imm: i32,
    },
    /// Legacy packet load: r0 = ntoh(*(size *)(skb->data + src + imm)).
    LdInd {
        size: Size,
        src: Reg,
        imm: i32,
    },
    Load {
        size: Size,
        sign_extend: bool,
        dst: Reg,
        src: Reg,
        off: i16,
    },
    Store {
        size: Size,
        dst: Reg,
        off: i16,
        imm: i32,
    },
    StoreReg {
        size: Size,
        dst: Reg,
        src: Reg,
        off: i16,
    },
    Atomic {
        size: Size,
        op: AtomicOp,
        dst: Reg,
        src: Reg,
        off: i16,
    },
    /// Unconditional jump; `long` is the JMP32 form (gotol) whose offset lives in imm.
    Ja {
        off: i32,
        long: bool,
    },
    Jump {
        width: Width,
        cond: JmpCond,
        dst: Reg,
        src: Source,
        off: i16,
    },
    MayGoto {
        off: i16,
    },
    Call(CallTarget),
    Exit,
}

impl Insn {
    /// The 64-bit value of an `ld_imm64`.
    pub fn imm64(imm: i32, next_imm: i32) -> u64 {
        ((next_imm as u32 as u64) << 32) | imm as u32 as u64
    }

    /// Number of 8-byte slots the instruction occupies.
    pub fn slots(&self) -> usize {
        if matches!(self, Insn::LdImm64 { .. }) {
            2
        } else {
            1
        }
    }

    /// Appends the instruction's slots to `out`.
    pub fn encode_into(&self, out: &mut Vec<RawInsn>) {
        let r = |reg: Reg| reg.number();
        let raw = match *self {
            Insn::Alu {
                width,
                op,
                dst,
                src,
            } => {
                let (op_code, off) = op.code_and_off();
                let class = alu_class(width);
                match src {
                    Source::Reg(s) => RawInsn::new(class | op_code | BPF_X, r(dst), r(s), off, 0),
                    Source::Imm(imm) => RawInsn::new(class | op_code | BPF_K, r(dst), 0, off, imm),
                }
            }
            Insn::Neg { width, dst } => RawInsn::new(alu_class(width) | BPF_NEG, r(dst), 0, 0, 0),
            Insn::MovSx {
                width,
                dst,
                src,
                bits,
            } => RawInsn::new(
                alu_class(width) | BPF_MOV | BPF_X,
                r(dst),
                r(src),
                bits as i16,
                0,
            ),
            Insn::AddrSpaceCast { dst, src, imm } => RawInsn::new(
                BPF_ALU64 | BPF_MOV | BPF_X,
                r(dst),
                r(src),
                BPF_ADDR_SPACE_CAST,
                imm,
            ),
            Insn::Endian { order, bits, dst } => {
                let code = match order {
                    ByteOrder::ToLe => BPF_ALU | BPF_END | BPF_TO_LE,
                    ByteOrder::ToBe => BPF_ALU | BPF_END | BPF_TO_BE,
                    ByteOrder::Swap => BPF_ALU64 | BPF_END | BPF_TO_LE,
                };
                RawInsn::new(code, r(dst), 0, 0, bits as i32)
            }
            Insn::LdImm64 {
                dst,
                kind,
                imm,
                next_imm,
            } => {
                out.push(RawInsn::new(
                    BPF_LD | BPF_IMM | BPF_DW,
                    r(dst),
                    kind.src(),
                    0,
                    imm,
                ));
                RawInsn::new(0, 0, 0, 0, next_imm)
            }
            Insn::LdAbs { size, imm } => RawInsn::new(BPF_LD | BPF_ABS | size.code(), 0, 0, 0, imm),
            Insn::LdInd { size, src, imm } => {
                RawInsn::new(BPF_LD | BPF_IND | size.code(), 0, r(src), 0, imm)
            }
            Insn::Load {
                size,
                sign_extend,
                dst,
                src,
                off,
            } => {
                let mode = if sign_extend { BPF_MEMSX } else { BPF_MEM };
                RawInsn::new(BPF_LDX | mode | size.code(), r(dst), r(src), off, 0)
            }
            Insn::Store {
                size,
                dst,
                off,
                imm,
            } => RawInsn::new(BPF_ST | BPF_MEM | size.code(), r(dst), 0, off, imm),
            Insn::StoreReg {
                size,
                dst,
                src,
                off,
            } => RawInsn::new(BPF_STX | BPF_MEM | size.code(), r(dst), r(src), off, 0),
            Insn::Atomic {
                size,
                op,
                dst,
                src,
                off,
            } => RawInsn::new(
                BPF_STX | BPF_ATOMIC | size.code(),
                r(dst),
                r(src),
                off,
                op.imm(),
            ),
            Insn::Ja { off, long: false } => RawInsn::new(BPF_JMP | BPF_JA, 0, 0, off as i16, 0),
            Insn::Ja { off, long: true } => RawInsn::new(BPF_JMP32 | BPF_JA, 0, 0, 0, off),
            Insn::Jump {
                width,
                cond,
                dst,
                src,
                off,
            } => {
                let class = if width == Width::W64 {
                    BPF_JMP
                } else {
                    BPF_JMP32
                };
                match src {
                    Source::Reg(s) => {
                        RawInsn::new(class | cond.code() | BPF_X, r(dst), r(s), off, 0)
                    }
                    Source::Imm(imm) => {
                        RawInsn::new(class | cond.code() | BPF_K, r(dst), 0, off, imm)
                    }
                }
            }
            Insn::MayGoto { off } => {
                RawInsn::new(BPF_JMP | BPF_JCOND | BPF_K, 0, BPF_MAY_GOTO, off, 0)
            }
            Insn::Call(CallTarget::Helper(id)) => RawInsn::new(BPF_JMP | BPF_CALL, 0, 0, 0, id),
            Insn::Call(CallTarget::Local(rel)) => {
                RawInsn::new(BPF_JMP | BPF_CALL, 0, BPF_PSEUDO_CALL, 0, rel)
            }
            Insn::Call(CallTarget::Kfunc { btf_id, off }) => {
                RawInsn::new(BPF_JMP | BPF_CALL, 0, BPF_PSEUDO_KFUNC_CALL, off, btf_id)
            }
            Insn::Exit => RawInsn::new(BPF_JMP | BPF_EXIT, 0, 0, 0, 0),
        };
        out.push(raw);
    }

    pub fn encode(&self) -> Vec<RawInsn> {
        let mut out = Vec::with_capacity(2);
        self.encode_into(&mut out);
        out
    }

    /// Decodes the instruction that starts at `slots[pc]`; returns it and its slot count.
    pub fn decode(slots: &[RawInsn], pc: usize) -> Result<(Insn, usize), DecodeError> {
        let raw = *slots.get(pc).ok_or(DecodeError {
            pc,
            code: 0,
            kind: DecodeErrorKind::OutOfRange,
        })?;
        let err = |kind| DecodeError {
            pc,
            code: raw.code,
            kind,
        };
        let insn = match class(raw.code) {
            BPF_ALU | BPF_ALU64 => decode_alu(raw).map_err(err)?,
            BPF_JMP | BPF_JMP32 => decode_jmp(raw).map_err(err)?,
            BPF_LDX => decode_ldx(raw).map_err(err)?,
            BPF_ST => decode_st(raw).map_err(err)?,
            BPF_STX => decode_stx(raw).map_err(err)?,
            _ => {
                if raw.code == BPF_LD | BPF_IMM | BPF_DW {
                    let next = slots.get(pc + 1).copied();
                    return decode_ld_imm64(raw, next).map(|i| (i, 2)).map_err(err);
                }
                decode_ld_legacy(raw).map_err(err)?
            }
        };
        Ok((insn, 1))
    }
}

fn alu_class(width: Width) -> u8 {
    if width == Width::W64 {
        BPF_ALU64
    } else {
        BPF_ALU
    }
}

/// Why a slot does not decode. `pc` is the slot index, `code` its opcode byte.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("insn {pc} (opcode 0x{code:02x}): {kind}")]
pub struct DecodeError {
    pub pc: usize,
    pub code: u8,
    pub kind: DecodeErrorKind,
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DecodeErrorKind {
    #[error("unknown opcode")]
    UnknownOpcode,
    #[error("invalid register r{reg} in the {field} field")]
    InvalidRegister { field: &'static str, reg: u8 },
    #[error("reserved field {field} must be {expected}, is {value}")]
    ReservedField {
        field: &'static str,
        expected: &'static str,
        value: i64,
    },
    #[error("invalid {field} {value}")]
    InvalidValue { field: &'static str, value: i64 },
    #[error("ld_imm64 needs a second slot, but the program ends")]
    TruncatedLdImm64,
    #[error("the second slot of ld_imm64 must have zero code, registers and offset")]
    BadLdImm64Second,
    #[error("no instruction at this index")]
    OutOfRange,
}

type Decoded = Result<Insn, DecodeErrorKind>;

fn reg(field: &'static str, n: u8) -> Result<Reg, DecodeErrorKind> {
    Reg::new(n).ok_or(DecodeErrorKind::InvalidRegister { field, reg: n })
}

fn must_be_zero(field: &'static str, value: i64) -> Result<(), DecodeErrorKind> {
    if value == 0 {
        Ok(())
    } else {
        Err(DecodeErrorKind::ReservedField {
            field,
            expected: "0",
            value,
        })
    }
}

fn decode_alu(raw: RawInsn) -> Decoded {
    let width = if class(raw.code) == BPF_ALU64 {
        Width::W64
    } else {
        Width::W32
    };
    let dst = reg("dst", raw.dst)?;
    let x = source(raw.code) == BPF_X;
    match op(raw.code) {
        BPF_NEG => {
            if x {
                return Err(DecodeErrorKind::UnknownOpcode);
            }
            must_be_zero("src", raw.src as i64)?;
            must_be_zero("off", raw.off as i64)?;
            must_be_zero("imm", raw.imm as i64)?;
            Ok(Insn::Neg { width, dst })
        }
        BPF_END => {
            must_be_zero("src", raw.src as i64)?;
            must_be_zero("off", raw.off as i64)?;
            let order = match (width, x) {
                (Width::W32, false) => ByteOrder::ToLe,
                (Width::W32, true) => ByteOrder::ToBe,
                (Width::W64, false) => ByteOrder::Swap,
                (Width::W64, true) => return Err(DecodeErrorKind::UnknownOpcode),
            };
            if !matches!(raw.imm, 16 | 32 | 64) {
                return Err(DecodeErrorKind::InvalidValue {
                    field: "byte swap width (imm)",
                    value: raw.imm as i64,
                });
            }
            Ok(Insn::Endian {
                order,
                bits: raw.imm as u8,
                dst,
            })
        }
        BPF_MOV if x && raw.off != 0 => {
            let src = reg("src", raw.src)?;
            if width == Width::W64 && raw.off == BPF_ADDR_SPACE_CAST {
                if raw.imm != 1 && raw.imm != 1 << 16 {
                    return Err(DecodeErrorKind::InvalidValue {
                        field: "addr_space_cast imm",
                        value: raw.imm as i64,
                    });
                }
                return Ok(Insn::AddrSpaceCast {
                    dst,
                    src,
                    imm: raw.imm,
                });
            }
            must_be_zero("imm", raw.imm as i64)?;
            let valid = match width {
                Width::W32 => matches!(raw.off, 8 | 16),
                Width::W64 => matches!(raw.off, 8 | 16 | 32),
            };
            if !valid {
                return Err(DecodeErrorKind::InvalidValue {
                    field: "movsx width (off)",
                    value: raw.off as i64,
                });
            }
            Ok(Insn::MovSx {
                width,
                dst,
                src,
                bits: raw.off as u8,
            })
        }
        code_op => {
            let op = binary_alu_op(code_op, raw.off)?;
            let src = if x {
                must_be_zero("imm", raw.imm as i64)?;
                Source::Reg(reg("src", raw.src)?)
            } else {
                must_be_zero("src", raw.src as i64)?;
                Source::Imm(raw.imm)
            };
            Ok(Insn::Alu {
                width,
                op,
                dst,
                src,
            })
        }
    }
}

fn binary_alu_op(code_op: u8, off: i16) -> Result<AluOp, DecodeErrorKind> {
    let signed = match off {
        0 => false,
        1 if matches!(code_op, BPF_DIV | BPF_MOD) => true,
        _ => {
            return Err(DecodeErrorKind::ReservedField {
                field: "off",
                expected: "0",
                value: off as i64,
            });
        }
    };
    Ok(match code_op {
        BPF_ADD => AluOp::Add,
        BPF_SUB => AluOp::Sub,
        BPF_MUL => AluOp::Mul,
        BPF_DIV if signed => AluOp::SDiv,
        BPF_DIV => AluOp::Div,
        BPF_OR => AluOp::Or,
        BPF_AND => AluOp::And,
        BPF_LSH => AluOp::Lsh,
        BPF_RSH => AluOp::Rsh,
        BPF_MOD if signed => AluOp::SMod,
        BPF_MOD => AluOp::Mod,
        BPF_XOR => AluOp::Xor,
        BPF_MOV => AluOp::Mov,
        BPF_ARSH => AluOp::Arsh,
        _ => return Err(DecodeErrorKind::UnknownOpcode),
    })
}

fn decode_jmp(raw: RawInsn) -> Decoded {
    let jmp32 = class(raw.code) == BPF_JMP32;
    let x = source(raw.code) == BPF_X;
    match op(raw.code) {
        BPF_JA => {
            if x {
                return Err(DecodeErrorKind::UnknownOpcode);
            }
            must_be_zero("dst", raw.dst as i64)?;
            must_be_zero("src", raw.src as i64)?;
            if jmp32 {
                must_be_zero("off", raw.off as i64)?;
                Ok(Insn::Ja {
                    off: raw.imm,
                    long: true,
                })
            } else {
                must_be_zero("imm", raw.imm as i64)?;
                Ok(Insn::Ja {
                    off: raw.off as i32,
                    long: false,
                })
            }
        }
        BPF_CALL => {
            // callx (BPF_X) is in RFC 9669's register-call proposal, but Linux has no such call.
            if jmp32 || x {
                return Err(DecodeErrorKind::UnknownOpcode);
            }
            must_be_zero("dst", raw.dst as i64)?;
            let target = match raw.src {
                0 => CallTarget::Helper(raw.imm),
                BPF_PSEUDO_CALL => CallTarget::Local(raw.imm),
                BPF_PSEUDO_KFUNC_CALL => CallTarget::Kfunc {
                    btf_id: raw.imm,
                    off: raw.off,
                },
                other => {
                    return Err(DecodeErrorKind::InvalidValue {
                        field: "call kind (src)",
                        value: other as i64,
                    });
                }
            };
            if !matches!(target, CallTarget::Kfunc { .. }) {
                must_be_zero("off", raw.off as i64)?;
            }
            Ok(Insn::Call(target))
        }
        BPF_EXIT => {
            if jmp32 || x {
                return Err(DecodeErrorKind::UnknownOpcode);
            }
            must_be_zero("dst", raw.dst as i64)?;
            must_be_zero("src", raw.src as i64)?;
            must_be_zero("off", raw.off as i64)?;
            must_be_zero("imm", raw.imm as i64)?;
            Ok(Insn::Exit)
        }
        BPF_JCOND => {
            if jmp32 || x {
                return Err(DecodeErrorKind::UnknownOpcode);
            }
            if raw.src != BPF_MAY_GOTO {
                return Err(DecodeErrorKind::InvalidValue {
                    field: "jcond condition (src)",
                    value: raw.src as i64,
                });
            }
            must_be_zero("dst", raw.dst as i64)?;
            must_be_zero("imm", raw.imm as i64)?;
            Ok(Insn::MayGoto { off: raw.off })
        }
        code_op => {
            let cond = JmpCond::from_code(code_op).ok_or(DecodeErrorKind::UnknownOpcode)?;
            let dst = reg("dst", raw.dst)?;
            let src = if x {
                must_be_zero("imm", raw.imm as i64)?;
                Source::Reg(reg("src", raw.src)?)
            } else {
                must_be_zero("src", raw.src as i64)?;
                Source::Imm(raw.imm)
            };
            let width = if jmp32 { Width::W32 } else { Width::W64 };
            Ok(Insn::Jump {
                width,
                cond,
                dst,
                src,
                off: raw.off,
            })
        }
    }
}

fn decode_ldx(raw: RawInsn) -> Decoded {
    let sign_extend = match mode(raw.code) {
        BPF_MEM => false,
        BPF_MEMSX if size(raw.code) != BPF_DW => true,
        _ => return Err(DecodeErrorKind::UnknownOpcode),
    };
    must_be_zero("imm", raw.imm as i64)?;
    Ok(Insn::Load {
        size: Size::from_code(raw.code),
        sign_extend,
        dst: reg("dst", raw.dst)?,
        src: reg("src", raw.src)?,
        off: raw.off,
    })
}

fn decode_st(raw: RawInsn) -> Decoded {
    if mode(raw.code) != BPF_MEM {
        return Err(DecodeErrorKind::UnknownOpcode);
    }
    must_be_zero("src", raw.src as i64)?;
    Ok(Insn::Store {
        size: Size::from_code(raw.code),
        dst: reg("dst", raw.dst)?,
        off: raw.off,
        imm: raw.imm,
    })
}

fn decode_stx(raw: RawInsn) -> Decoded {
    let size = Size::from_code(raw.code);
    let dst = reg("dst", raw.dst)?;
    let src = reg("src", raw.src)?;
    match mode(raw.code) {
        BPF_MEM => {
            must_be_zero("imm", raw.imm as i64)?;
            Ok(Insn::StoreReg {
                size,
                dst,
                src,
                off: raw.off,
            })
        }
        BPF_ATOMIC => {
            let op = AtomicOp::from_imm(raw.imm).ok_or(DecodeErrorKind::InvalidValue {
                field: "atomic operation (imm)",
                value: raw.imm as i64,
            })?;
            let acquire_release = matches!(op, AtomicOp::LoadAcquire | AtomicOp::StoreRelease);
            if !acquire_release && !matches!(size, Size::W | Size::DW) {
                return Err(DecodeErrorKind::InvalidValue {
                    field: "atomic size",
                    value: size.bytes() as i64,
                });
            }
            Ok(Insn::Atomic {
                size,
                op,
                dst,
                src,
                off: raw.off,
            })
        }
        _ => Err(DecodeErrorKind::UnknownOpcode),
    }
}

fn decode_ld_imm64(raw: RawInsn, next: Option<RawInsn>) -> Decoded {
    let next = next.ok_or(DecodeErrorKind::TruncatedLdImm64)?;
    if next.code != 0 || next.dst != 0 || next.src != 0 || next.off != 0 {
        return Err(DecodeErrorKind::BadLdImm64Second);
    }
    must_be_zero("off", raw.off as i64)?;
    let kind = LdImm64Kind::from_src(raw.src).ok_or(DecodeErrorKind::InvalidValue {
        field: "ld_imm64 kind (src)",
        value: raw.src as i64,
    })?;
    Ok(Insn::LdImm64 {
        dst: reg("dst", raw.dst)?,
        kind,
        imm: raw.imm,
        next_imm: next.imm,
    })
}

fn decode_ld_legacy(raw: RawInsn) -> Decoded {
    if size(raw.code) == BPF_DW {
        return Err(DecodeErrorKind::UnknownOpcode);
    }
    let size = Size::from_code(raw.code);
    must_be_zero("dst", raw.dst as i64)?;
    must_be_zero("off", raw.off as i64)?;
    match mode(raw.code) {
        BPF_ABS => {
            must_be_zero("src", raw.src as i64)?;
            Ok(Insn::LdAbs { size, imm: raw.imm })
        }
        BPF_IND => Ok(Insn::LdInd {
            size,
            src: reg("src", raw.src)?,
            imm: raw.imm,
        }),
        _ => Err(DecodeErrorKind::UnknownOpcode),
    }
}

/// A decoded program: the raw slots and, per slot, the instruction that starts there
/// (`None` for the second slot of an `ld_imm64`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Program {
    raw: Vec<RawInsn>,
    insns: Vec<Option<Insn>>,
}

impl Program {
    /// Decodes every slot; an empty program is an error, as it is for the kernel.
    pub fn decode(raw: Vec<RawInsn>) -> Result<Program, ProgramError> {
        if raw.is_empty() {
            return Err(ProgramError::Empty);
        }
        let mut insns = Vec::with_capacity(raw.len());
        let mut pc = 0;
        while pc < raw.len() {
            let (insn, slots) = Insn::decode(&raw, pc)?;
            insns.push(Some(insn));
            if slots == 2 {
                insns.push(None);
            }
            pc += slots;
        }
        Ok(Program { raw, insns })
    }

    /// Builds a program from typed instructions.
    pub fn from_insns(insns: &[Insn]) -> Result<Program, ProgramError> {
        let mut raw = Vec::new();
        for insn in insns {
            insn.encode_into(&mut raw);
        }
        Program::decode(raw)
    }

    pub fn raw(&self) -> &[RawInsn] {
        &self.raw
    }

    /// Number of slots.
    pub fn len(&self) -> usize {
        self.raw.len()
    }

    pub fn is_empty(&self) -> bool {
        self.raw.is_empty()
    }

    /// The instruction starting at slot `pc`; `None` past the end or inside an `ld_imm64`.
    pub fn insn(&self, pc: usize) -> Option<&Insn> {
        self.insns.get(pc).and_then(Option::as_ref)
    }

    /// The instructions with their slot index.
    pub fn iter(&self) -> impl Iterator<Item = (usize, &Insn)> {
        self.insns
            .iter()
            .enumerate()
            .filter_map(|(pc, i)| i.as_ref().map(|i| (pc, i)))
    }

    /// The program as little-endian bytes, 8 per slot.
    pub fn to_bytes(&self) -> Vec<u8> {
        self.raw.iter().flat_map(|r| r.to_bytes()).collect()
    }
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ProgramError {
    #[error("empty program: no instructions")]
    Empty,
    #[error(transparent)]
    Decode(#[from] DecodeError),
}
