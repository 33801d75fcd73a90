//! The interpreter's pre-decoded form of a program: one flat 16-byte [`Op`] per instruction
//! slot, each with a [`Code`] of its own for its operation, width and operand kind (chosen
//! once, at preparation, so that running it is one dispatch), jump targets resolved and
//! checked. What the fast loop does not run (calls, atomics, legacy loads, `may_goto`, ...)
//! is [`Code::General`]: the general path executes the decoded [`bpfemu_isa::Insn`].
//!
//! Each slot also knows the length of its *run*: how many instructions execute from it up to
//! and including the next one that always leaves straight-line code (`ja`, an exit, a general
//! instruction) when every conditional jump on the way falls through. The fast loop charges a
//! whole run against the instruction budget when it enters it, and gives back the rest when
//! a jump is taken or an access faults, instead of counting instruction by instruction (see
//! `Machine::run_fast`).
//!
//! Each memory instruction also keeps a hint: the index of the region its last access hit
//! (see [`crate::Memory::read_hinted`]), so that a load from the packet does not search the
//! regions again after a load from the stack.

use bpfemu_isa::{AluOp, ByteOrder, Insn, JmpCond, LdImm64Kind, Program, Reg, Size, Source, Width};
use std::cell::Cell;

/// Calls `$callback! { ($($args)*) alu { .. } jump { .. } }` with the specialised ALU and
/// jump codes: for each operation, its codes for (64-bit, imm), (64-bit, reg), (32-bit, imm),
/// (32-bit, reg), and for an ALU operation also the codes of the same four forms fused with
/// the register move to their destination before them (`r3 = r1; r3 += 14`), for a jump the
/// codes of its 64-bit forms fused with the `add` of an immediate to the register it tests
/// before it (`r2 += 1; if r2 < r3 goto loop`; see `fuse_pairs`). One list serves both the definition of [`Code`] and the interpreter's
/// loop, so that a code cannot be decoded as one operation and run as another.
macro_rules! with_specialised_codes {
    ($callback:ident ! ( $($args:tt)* )) => {
        $callback! {
            ($($args)*)
            alu {
                Add => Add64Imm Add64Reg Add32Imm Add32Reg;
                    MovAdd64Imm MovAdd64Reg MovAdd32Imm MovAdd32Reg,
                Sub => Sub64Imm Sub64Reg Sub32Imm Sub32Reg;
                    MovSub64Imm MovSub64Reg MovSub32Imm MovSub32Reg,
                Mul => Mul64Imm Mul64Reg Mul32Imm Mul32Reg;
                    MovMul64Imm MovMul64Reg MovMul32Imm MovMul32Reg,
                Div => Div64Imm Div64Reg Div32Imm Div32Reg;
                    MovDiv64Imm MovDiv64Reg MovDiv32Imm MovDiv32Reg,
                SDiv => SDiv64Imm SDiv64Reg SDiv32Imm SDiv32Reg;
                    MovSDiv64Imm MovSDiv64Reg MovSDiv32Imm MovSDiv32Reg,
                Mod => Mod64Imm Mod64Reg Mod32Imm Mod32Reg;
                    MovMod64Imm MovMod64Reg MovMod32Imm MovMod32Reg,
                SMod => SMod64Imm SMod64Reg SMod32Imm SMod32Reg;
                    MovSMod64Imm MovSMod64Reg MovSMod32Imm MovSMod32Reg,
                Or => Or64Imm Or64Reg Or32Imm Or32Reg;
                    MovOr64Imm MovOr64Reg MovOr32Imm MovOr32Reg,
                And => And64Imm And64Reg And32Imm And32Reg;
                    MovAnd64Imm MovAnd64Reg MovAnd32Imm MovAnd32Reg,
                Xor => Xor64Imm Xor64Reg Xor32Imm Xor32Reg;
                    MovXor64Imm MovXor64Reg MovXor32Imm MovXor32Reg,
                Lsh => Lsh64Imm Lsh64Reg Lsh32Imm Lsh32Reg;
                    MovLsh64Imm MovLsh64Reg MovLsh32Imm MovLsh32Reg,
                Rsh => Rsh64Imm Rsh64Reg Rsh32Imm Rsh32Reg;
                    MovRsh64Imm MovRsh64Reg MovRsh32Imm MovRsh32Reg,
                Arsh => Arsh64Imm Arsh64Reg Arsh32Imm Arsh32Reg;
                    MovArsh64Imm MovArsh64Reg MovArsh32Imm MovArsh32Reg,
                Mov => Mov64Imm Mov64Reg Mov32Imm Mov32Reg;
                    MovMov64Imm MovMov64Reg MovMov32Imm MovMov32Reg,
            }
            jump {
                Eq => Jeq64Imm Jeq64Reg Jeq32Imm Jeq32Reg; AddJeq64Imm AddJeq64Reg,
                Ne => Jne64Imm Jne64Reg Jne32Imm Jne32Reg; AddJne64Imm AddJne64Reg,
                Set => Jset64Imm Jset64Reg Jset32Imm Jset32Reg; AddJset64Imm AddJset64Reg,
                Gt => Jgt64Imm Jgt64Reg Jgt32Imm Jgt32Reg; AddJgt64Imm AddJgt64Reg,
                Ge => Jge64Imm Jge64Reg Jge32Imm Jge32Reg; AddJge64Imm AddJge64Reg,
                Lt => Jlt64Imm Jlt64Reg Jlt32Imm Jlt32Reg; AddJlt64Imm AddJlt64Reg,
                Le => Jle64Imm Jle64Reg Jle32Imm Jle32Reg; AddJle64Imm AddJle64Reg,
                Sgt => Jsgt64Imm Jsgt64Reg Jsgt32Imm Jsgt32Reg; AddJsgt64Imm AddJsgt64Reg,
                Sge => Jsge64Imm Jsge64Reg Jsge32Imm Jsge32Reg; AddJsge64Imm AddJsge64Reg,
                Slt => Jslt64Imm Jslt64Reg Jslt32Imm Jslt32Reg; AddJslt64Imm AddJslt64Reg,
                Sle => Jsle64Imm Jsle64Reg Jsle32Imm Jsle32Reg; AddJsle64Imm AddJsle64Reg,
            }
        }
    };
}
pub(crate) use with_specialised_codes;

/// Defines [`Code`] (the specialised codes, then `$other`) and the decoding of ALU
/// operations and conditional jumps to their codes.
macro_rules! define_codes {
    (
        ($($(#[$meta:meta])* $other:ident,)*)
        alu { $($op:ident => $ai64:ident $ar64:ident $ai32:ident $ar32:ident;
            $mi64:ident $mr64:ident $mi32:ident $mr32:ident,)* }
        jump { $($cond:ident => $ji64:ident $jr64:ident $ji32:ident $jr32:ident;
            $aji64:ident $ajr64:ident,)* }
    ) => {
        /// What an [`Op`] does. `*Imm` forms take `Op::imm`, `*Reg` forms register `src`
        /// (`src2` for the operation of a fused move).
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        #[repr(u8)]
        pub(crate) enum Code {
            $($ai64, $ar64, $ai32, $ar32, $mi64, $mr64, $mi32, $mr32,)*
            $($ji64, $jr64, $ji32, $jr32, $aji64, $ajr64,)*
            $($(#[$meta])* $other,)*
        }

        fn alu_code(op: AluOp, width: Width, reg: bool) -> Code {
            match (op, width, reg) {
                $(
                    (AluOp::$op, Width::W64, false) => Code::$ai64,
                    (AluOp::$op, Width::W64, true) => Code::$ar64,
                    (AluOp::$op, Width::W32, false) => Code::$ai32,
                    (AluOp::$op, Width::W32, true) => Code::$ar32,
                )*
            }
        }

        fn jump_code(cond: JmpCond, width: Width, reg: bool) -> Code {
            match (cond, width, reg) {
                $(
                    (JmpCond::$cond, Width::W64, false) => Code::$ji64,
                    (JmpCond::$cond, Width::W64, true) => Code::$jr64,
                    (JmpCond::$cond, Width::W32, false) => Code::$ji32,
                    (JmpCond::$cond, Width::W32, true) => Code::$jr32,
                )*
            }
        }

        /// The code of `first` then `second` on the same `dst`, run as one, if they fuse.
        fn fused_code(first: Code, second: Code) -> Option<Code> {
            match (first, second) {
                $(
                    (Code::Add64Imm, Code::$ji64) => Some(Code::$aji64),
                    (Code::Add64Imm, Code::$jr64) => Some(Code::$ajr64),
                )*
                $(
                    (Code::Mov64Reg, Code::$ai64) => Some(Code::$mi64),
                    (Code::Mov64Reg, Code::$ar64) => Some(Code::$mr64),
                    (Code::Mov32Reg, Code::$ai32) => Some(Code::$mi32),
                    (Code::Mov32Reg, Code::$ar32) => Some(Code::$mr32),
                )*
                _ => None,
            }
        }

        impl Code {
            /// Conditional jumps and `ja`: codes whose `Op::target` is a slot.
            fn jumps(self) -> bool {
                matches!(self, $(Code::$ji64 | Code::$jr64 | Code::$ji32 | Code::$jr32 |)* Code::Ja)
            }
        }
    };
}

with_specialised_codes!(define_codes!(
    /// `ld_imm64` of a constant: `Op::target` holds the high half of the constant.
    LdImm64,
    LdxB,
    LdxH,
    LdxW,
    LdxDw,
    /// Sign-extending loads (cpu v4).
    LdxSB,
    LdxSH,
    LdxSW,
    StB,
    StH,
    StW,
    StDw,
    StxB,
    StxH,
    StxW,
    StxDw,
    Neg64,
    Neg32,
    /// Sign-extending moves (cpu v4): `Op::imm` is how many low bits of src to extend.
    MovSx64,
    MovSx32,
    /// Byte swaps: `to_be` and the cpu v4 `bswap` (the same on a little-endian host).
    Be16,
    Be32,
    Be64,
    /// `to_le`: truncations on a little-endian host.
    Le16,
    Le32,
    Le64,
    Ja,
    /// A byte load, then a shift of the loaded register, run as one (a big-endian field
    /// assembled byte by byte: `w1 = *(u8 *)(r2 +1); w1 <<= 8`): `Op::imm` is the shift.
    LdxBLsh32Imm,
    LdxBLsh64Imm,
    /// A shift by `Op::imm`, then the or of register `src2` (the next byte of such a field).
    Lsh32ImmOr32Reg,
    Lsh64ImmOr64Reg,
    /// `exit`: the run's end when the entry function returns, else the general path's return
    /// to the caller.
    Exit,
    /// Everything else: calls, atomics, legacy loads, `may_goto`, pseudo `ld_imm64`s, the
    /// second slot of an `ld_imm64`, and jumps to a slot without an instruction.
    General,
    /// The slot past the last one: reaching it is falling off the end of the program.
    End,
));

impl Code {
    /// Whether straight-line execution stops after this code (see [`PreparedProgram`]'s
    /// runs): it always jumps, exits, or leaves the fast loop. A conditional jump does not
    /// end a run: one not taken goes on in it.
    fn ends_run(self) -> bool {
        matches!(self, Code::Ja | Code::Exit | Code::General | Code::End)
    }
}

/// A jump target that does not hold an instruction: taking the jump is the error the general
/// path reports.
const BAD_TARGET: u32 = u32::MAX;

/// One pre-decoded instruction slot.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Op {
    /// The instruction's immediate (the low half of an `ld_imm64`'s constant).
    pub imm: i32,
    /// A jump's target slot; the high half of an `ld_imm64`'s constant.
    pub target: u32,
    pub off: i16,
    pub code: Code,
    pub dst: Slot,
    pub src: Slot,
    /// The second instruction's source register of a fused pair.
    pub src2: Slot,
}

/// A register number below 16. The interpreter indexes its 16 register slots with it, and
/// the compiler, knowing an enum's range, needs neither a bounds check nor a mask (one less
/// instruction per operand of every op).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
#[rustfmt::skip]
pub(crate) enum Slot {
    S0, S1, S2, S3, S4, S5, S6, S7, S8, S9, S10, S11, S12, S13, S14, S15,
}

impl Slot {
    #[rustfmt::skip]
    const ALL: [Slot; 16] = [
        Slot::S0, Slot::S1, Slot::S2, Slot::S3, Slot::S4, Slot::S5, Slot::S6, Slot::S7,
        Slot::S8, Slot::S9, Slot::S10, Slot::S11, Slot::S12, Slot::S13, Slot::S14, Slot::S15,
    ];

    /// The slot of a register (r0-r10).
    fn of(reg: Reg) -> Slot {
        Slot::ALL[reg.index() & 15]
    }

    #[inline(always)]
    pub fn index(self) -> usize {
        self as usize
    }
}

impl Op {
    /// The immediate as a 64-bit operation uses it: sign-extended, as the kernel's `(s64) IMM`.
    #[inline(always)]
    pub fn imm64(&self) -> u64 {
        self.imm as i64 as u64
    }

    /// The immediate as a 32-bit operation uses it.
    #[inline(always)]
    pub fn imm32(&self) -> u32 {
        self.imm as u32
    }

    /// The constant of an `ld_imm64`.
    #[inline(always)]
    pub fn wide_imm(&self) -> u64 {
        Insn::imm64(self.imm, self.target as i32)
    }
}

/// A program ready for the interpreter: the program and its pre-decoded slots.
#[derive(Debug)]
pub struct PreparedProgram {
    prog: Program,
    /// One per slot, and [`Code::End`] past the last.
    pub(crate) ops: Vec<Op>,
    /// Per slot of `ops`: the length of the run that starts there (0 for [`Code::End`]).
    pub(crate) runs: Vec<u32>,
    /// Per slot of a jump: what taking it does to the budget left, in one addition: the
    /// rest of its run, which will not execute, comes back, and the target's run is charged.
    pub(crate) taken_cost: Vec<i64>,
    /// Per slot: the region index the instruction's last memory access hit.
    pub(crate) hints: Vec<Cell<u32>>,
    /// Whether any slot names r10. A program that never does cannot reach its stack frame
    /// (helpers only see what r1-r5 hold), so a run of it needs none: as the kernel's JIT
    /// sets up no stack for a program of stack depth 0.
    pub(crate) names_r10: bool,
}

impl Clone for PreparedProgram {
    fn clone(&self) -> PreparedProgram {
        PreparedProgram::new(self.prog.clone())
    }
}

impl PreparedProgram {
    pub fn new(prog: Program) -> PreparedProgram {
        let mut ops: Vec<Op> = (0..prog.len()).map(|pc| decode(&prog, pc)).collect();
        fuse_pairs(&mut ops);
        ops.push(Op {
            code: Code::End,
            ..general()
        });
        let runs = run_lengths(&ops);
        let taken_cost = ops
            .iter()
            .zip(&runs)
            .map(|(op, &run)| match op.code.jumps() {
                true => run as i64 - 1 - runs[op.target as usize] as i64,
                false => 0,
            })
            .collect();
        let hints = (0..prog.len()).map(|_| Cell::new(0)).collect();
        // Raw fields, so that no operand form is missed: a field that is not a register (an
        // ld_imm64's kind, a call's) never reads 10, and a false alarm only keeps the frame.
        let r10 = Reg::R10.index() as u8;
        let names_r10 = prog
            .raw()
            .iter()
            .any(|raw| raw.dst == r10 || raw.src == r10);
        PreparedProgram {
            prog,
            ops,
            runs,
            taken_cost,
            hints,
            names_r10,
        }
    }

    pub fn program(&self) -> &Program {
        &self.prog
    }
}

/// Per slot, how many instructions execute from it through the next run-ending one, on the
/// path where conditional jumps fall through (an `ld_imm64` is one instruction of two slots). Saturates at
/// `u32::MAX`, which only makes the fast loop count a run instruction by instruction.
fn run_lengths(ops: &[Op]) -> Vec<u32> {
    let mut runs = vec![0u32; ops.len()];
    for pc in (0..ops.len()).rev() {
        let code = ops[pc].code;
        runs[pc] = match code {
            Code::End => 0,
            _ if code.ends_run() => 1,
            Code::LdImm64 => runs.get(pc + 2).map_or(1, |rest| rest.saturating_add(1)),
            _ => runs.get(pc + 1).map_or(1, |rest| rest.saturating_add(1)),
        };
    }
    runs
}

/// Gives the first of each pair of instructions the loop runs as one op the fused code:
/// - a register move, then an ALU operation of the same width on the moved-to register
///   (clang's `r3 = r1; r3 += 14` for a pointer and an offset, `w2 = w1; w2 >>= 8` for a
///   field): the operation's immediate in `imm`, its source in `src2`;
/// - the `add` of an immediate, then a 64-bit conditional jump on the same register (a loop's
///   counter, a bounds check's `r1 += 14; if r1 > r3`): the jump's register in `src`, its
///   immediate in `off` (when it fits), its target in `target`.
///
/// - a byte load, then a shift of the loaded register, and a shift, then the or of a
///   register (the byte-wise big-endian fields of the corpus's parsers; see [`Code`]).
///
/// The second slot keeps its own op, for jumps to it. Only a first instruction may fault,
/// so a fault is always at the fused op's own slot; a fused jump is taken from the second
/// slot.
fn fuse_pairs(ops: &mut [Op]) {
    for pc in 1..ops.len() {
        let (first, second) = (ops[pc - 1], ops[pc]);
        if second.dst != first.dst {
            continue;
        }
        let byte_field = match (first.code, second.code) {
            (Code::LdxB, Code::Lsh32Imm) => Some((Code::LdxBLsh32Imm, second.imm, first.src2)),
            (Code::LdxB, Code::Lsh64Imm) => Some((Code::LdxBLsh64Imm, second.imm, first.src2)),
            (Code::Lsh32Imm, Code::Or32Reg) => Some((Code::Lsh32ImmOr32Reg, first.imm, second.src)),
            (Code::Lsh64Imm, Code::Or64Reg) => Some((Code::Lsh64ImmOr64Reg, first.imm, second.src)),
            _ => None,
        };
        if let Some((code, imm, src2)) = byte_field {
            ops[pc - 1] = Op {
                code,
                imm,
                src2,
                ..first
            };
            continue;
        }
        let Some(code) = fused_code(first.code, second.code) else {
            continue;
        };
        ops[pc - 1] = if first.code == Code::Add64Imm {
            let Ok(jump_imm) = i16::try_from(second.imm) else {
                continue;
            };
            Op {
                code,
                src: second.src,
                off: jump_imm,
                target: second.target,
                ..first
            }
        } else {
            Op {
                code,
                imm: second.imm,
                src2: second.src,
                ..first
            }
        };
    }
}

fn general() -> Op {
    Op {
        code: Code::General,
        dst: Slot::S0,
        src: Slot::S0,
        src2: Slot::S0,
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

/// The register and immediate of an operand.
fn operand(src: Source) -> (Option<Slot>, i32) {
    match src {
        Source::Reg(r) => (Some(Slot::of(r)), 0),
        Source::Imm(i) => (None, i),
    }
}

fn decode(prog: &Program, pc: usize) -> Op {
    let Some(insn) = prog.insn(pc) else {
        return general();
    };
    let op = general();
    let sized = |codes: [Code; 4], size: Size| match size {
        Size::B => codes[0],
        Size::H => codes[1],
        Size::W => codes[2],
        Size::DW => codes[3],
    };
    let by_width = |width: Width, w64: Code, w32: Code| match width {
        Width::W64 => w64,
        Width::W32 => w32,
    };
    let decoded = match *insn {
        Insn::Alu {
            width,
            op: alu,
            dst,
            src,
        } => {
            let (src, imm) = operand(src);
            Op {
                code: alu_code(alu, width, src.is_some()),
                dst: Slot::of(dst),
                src: src.unwrap_or(Slot::S0),
                imm,
                ..op
            }
        }
        Insn::Neg { width, dst } => Op {
            code: by_width(width, Code::Neg64, Code::Neg32),
            dst: Slot::of(dst),
            ..op
        },
        Insn::MovSx {
            width,
            dst,
            src,
            bits,
        } => Op {
            code: by_width(width, Code::MovSx64, Code::MovSx32),
            dst: Slot::of(dst),
            src: Slot::of(src),
            imm: bits as i32,
            ..op
        },
        Insn::Endian { order, bits, dst } => {
            let code = match (order, bits) {
                (ByteOrder::ToLe, 16) => Code::Le16,
                (ByteOrder::ToLe, 32) => Code::Le32,
                (ByteOrder::ToLe, 64) => Code::Le64,
                (ByteOrder::ToBe | ByteOrder::Swap, 16) => Code::Be16,
                (ByteOrder::ToBe | ByteOrder::Swap, 32) => Code::Be32,
                (ByteOrder::ToBe | ByteOrder::Swap, 64) => Code::Be64,
                _ => return general(),
            };
            Op {
                code,
                dst: Slot::of(dst),
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
            dst: Slot::of(dst),
            imm,
            target: next_imm as u32,
            ..op
        },
        Insn::Load {
            size,
            sign_extend,
            dst,
            src,
            off,
        } => {
            let code = match (sign_extend, size) {
                (false, size) => sized([Code::LdxB, Code::LdxH, Code::LdxW, Code::LdxDw], size),
                (true, Size::B) => Code::LdxSB,
                (true, Size::H) => Code::LdxSH,
                (true, Size::W) => Code::LdxSW,
                (true, Size::DW) => return general(),
            };
            Op {
                code,
                dst: Slot::of(dst),
                src: Slot::of(src),
                off,
                ..op
            }
        }
        Insn::Store {
            size,
            dst,
            off,
            imm,
        } => Op {
            code: sized([Code::StB, Code::StH, Code::StW, Code::StDw], size),
            dst: Slot::of(dst),
            off,
            imm,
            ..op
        },
        Insn::StoreReg {
            size,
            dst,
            src,
            off,
        } => Op {
            code: sized([Code::StxB, Code::StxH, Code::StxW, Code::StxDw], size),
            dst: Slot::of(dst),
            src: Slot::of(src),
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
            let (src, imm) = operand(src);
            Op {
                code: jump_code(cond, width, src.is_some()),
                dst: Slot::of(dst),
                src: src.unwrap_or(Slot::S0),
                target: target(prog, pc, off as i64),
                off,
                imm,
                src2: Slot::S0,
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
    if decoded.code.jumps() && decoded.target == BAD_TARGET {
        return general();
    }
    decoded
}

#[cfg(test)]
mod tests {
    use super::*;
    use bpfemu_isa::asm::assemble_kernel;

    fn prepared(text: &str) -> PreparedProgram {
        PreparedProgram::new(Program::decode(assemble_kernel(text).unwrap()).unwrap())
    }

    #[test]
    fn ops_are_sixteen_bytes() {
        assert_eq!(std::mem::size_of::<Op>(), 16);
    }

    #[test]
    fn runs_end_at_ja_exits_and_general_instructions() {
        let p = prepared(
            "
            r0 = 1
            r1 = 0x100000000 ll
            if r0 == 1 goto out
            r0 += 1
            call bpf_get_prandom_u32
            r0 += 2
        out:
            exit
            ",
        );
        // Slots: mov, ld_imm64 (two), jeq, add, call, add, exit, end.
        assert_eq!(p.runs, [5, 4, 1, 3, 2, 1, 2, 1, 0]);
        // Taking the jump skips `r0 += 1; call` and charges `exit`.
        assert_eq!(p.taken_cost[3], 2 - 1);
        assert_eq!(p.ops[1].wide_imm(), 0x1_0000_0000);
        assert_eq!(p.ops[8].code, Code::End);
    }

    #[test]
    fn a_move_and_an_operation_on_its_register_fuse() {
        let p = prepared(
            "r3 = r1\nr3 += 14\nr4 = r3\nr4 += r2\nr5 = r1\nr6 += 1\nw7 = w1\nw7 >>= 8\nr8 = r1\nw8 += 1\nexit",
        );
        let codes: Vec<Code> = p.ops.iter().map(|op| op.code).collect();
        assert_eq!(
            codes[..10],
            [
                Code::MovAdd64Imm,
                Code::Add64Imm,
                Code::MovAdd64Reg,
                Code::Add64Reg,
                Code::Mov64Reg,
                Code::Add64Imm,
                Code::MovRsh32Imm,
                Code::Rsh32Imm,
                Code::Mov64Reg,
                Code::Add32Imm,
            ]
        );
        assert_eq!(
            (p.ops[0].dst, p.ops[0].src, p.ops[0].imm),
            (Slot::S3, Slot::S1, 14)
        );
        assert_eq!(
            (p.ops[2].dst, p.ops[2].src, p.ops[2].src2),
            (Slot::S4, Slot::S3, Slot::S2)
        );
    }

    #[test]
    fn a_run_may_fall_off_the_end() {
        let p = prepared("r0 = 1\nr0 += 1");
        assert_eq!(p.runs, [2, 1, 0]);
    }
}
