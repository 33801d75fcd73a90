//! Kernel-syntax disassembly: the text Linux 6.18 prints for an instruction in its verifier log
//! (`print_bpf_insn()` in `kernel/bpf/disasm.c`), byte for byte.
//!
//! Byte-identical matters because our verifier's log is compared against the kernel's, line by
//! line. A log line at level 2 reads `N: (op) text`; [`log_line`] builds it, [`insn_text`] the
//! part after `(op) `.
//!
//! The kernel's spelling has quirks that are easy to get wrong, so they are spelled out here:
//! - offsets are signed with an explicit sign (`(r10 -8)`, `(r1 +0)`, `goto pc+0`);
//! - ALU immediates are signed decimal, jump immediates unsigned hex of the 32-bit value
//!   (`if r1 > 0xffffffff goto pc+1`), `ld_imm64` values hex of the 64-bit value;
//! - 32-bit ALU and JMP32 operands are `w` registers, but byte swaps, loads, stores and atomics
//!   always name `r` registers;
//! - by load time the kernel has replaced the immediate of a map or ksym `ld_imm64` by an
//!   address. A map by fd (`src_reg` 1 or 2) prints `0x0` unless the loader may see kernel
//!   pointers (then the address); 6.18 prints the address of a map by fd-array index
//!   (`src_reg` 5 or 6) and of a ksym (`src_reg` 3) even to a loader that may not. Addresses
//!   come from [`Symbols::imm64`]; without one we print the instruction's own immediate.
//!
//! Names the instruction alone cannot give (kfuncs need BTF; an xlated dump shows `map[id:N]`)
//! come from a [`Symbols`] implementation, the counterpart of the kernel's `bpf_insn_cbs`.

use crate::helpers::helper_name;
use crate::insn::{
    AluOp, AtomicOp, ByteOrder, CallTarget, Insn, JmpCond, LdImm64Kind, Program, Reg, Size, Source,
    Width,
};
use std::fmt::Write;

/// Where names and immediates that the instruction does not carry come from.
///
/// Every method has the default the verifier uses while loading a program, so
/// `impl Symbols for MyType {}` behaves like [`VerifierLog`].
pub trait Symbols {
    /// Name of a call target that is not a helper the kernel knows by id: a kfunc (the verifier
    /// asks BTF), a local call (`None` prints the relative offset, `pc+N`), or an unknown helper.
    fn call_name(&self, _insn: &Insn) -> Option<String> {
        None
    }

    /// Text of an `ld_imm64` value; `value` is already `0` for a map pointer the reader may not
    /// see. `None` prints `0x{value:x}`.
    fn imm64(&self, _insn: &Insn, _value: u64) -> Option<String> {
        None
    }

    /// Whether map addresses of `ld_imm64` (`src_reg` 1 and 2) are shown; the kernel's
    /// `allow_ptr_leaks`. When false they print as `0x0`.
    fn allow_ptr_leaks(&self) -> bool {
        false
    }
}

/// The defaults: what an unprivileged load's verifier log prints, without kfunc names.
#[derive(Clone, Copy, Debug, Default)]
pub struct VerifierLog;

impl Symbols for VerifierLog {}

/// The text after `(op) ` with the default symbol resolution.
pub fn insn_text(insn: &Insn) -> String {
    insn_text_with(insn, &VerifierLog)
}

/// The text after `(op) `, asking `syms` for names and immediates.
pub fn insn_text_with(insn: &Insn, syms: &impl Symbols) -> String {
    match *insn {
        Insn::Alu {
            width,
            op,
            dst,
            src,
        } => alu(width, op, dst, src),
        Insn::Neg { width, dst } => {
            let d = wreg(width, dst);
            format!("{d} = -{d}")
        }
        Insn::MovSx {
            width,
            dst,
            src,
            bits,
        } => format!("{} = (s{bits}){}", wreg(width, dst), wreg(width, src)),
        Insn::AddrSpaceCast { dst, src, imm } => format!(
            "{dst} = addr_space_cast({src}, {}, {})",
            imm as u32 >> 16,
            imm as u16
        ),
        Insn::Endian { order, bits, dst } => {
            let name = match order {
                ByteOrder::ToLe => "le",
                ByteOrder::ToBe => "be",
                ByteOrder::Swap => "bswap",
            };
            format!("{dst} = {name}{bits} {dst}")
        }
        Insn::LdImm64 { dst, .. } => format!("{dst} = {}", ld_imm64_value(insn, syms)),
        Insn::LdAbs { size, imm } => format!("r0 = *({} *)skb[{imm}]", unsigned(size)),
        Insn::LdInd { size, src, imm } => {
            format!("r0 = *({} *)skb[{src} + {imm}]", unsigned(size))
        }
        Insn::Load {
            size,
            sign_extend,
            dst,
            src,
            off,
        } => {
            let ty = if sign_extend {
                signed(size)
            } else {
                unsigned(size)
            };
            format!("{dst} = *({ty} *)({src} {off:+})")
        }
        Insn::Store {
            size,
            dst,
            off,
            imm,
        } => format!("*({} *)({dst} {off:+}) = {imm}", unsigned(size)),
        Insn::StoreReg {
            size,
            dst,
            src,
            off,
        } => format!("*({} *)({dst} {off:+}) = {src}", unsigned(size)),
        Insn::Atomic {
            size,
            op,
            dst,
            src,
            off,
        } => atomic(size, op, dst, src, off),
        Insn::Ja { off, long: false } => format!("goto pc{off:+}"),
        Insn::Ja { off, long: true } => format!("gotol pc{off:+}"),
        Insn::MayGoto { off } => format!("may_goto pc{off:+}"),
        Insn::Jump {
            width,
            cond,
            dst,
            src,
            off,
        } => {
            let rhs = match src {
                Source::Reg(s) => wreg(width, s),
                Source::Imm(imm) => format!("0x{:x}", imm as u32),
            };
            format!(
                "if {} {} {rhs} goto pc{off:+}",
                wreg(width, dst),
                jmp_op(cond)
            )
        }
        Insn::Call(target) => call(insn, target, syms),
        Insn::Exit => "exit".to_string(),
    }
}

/// One verifier-log line, `"{pc}: ({code:02x}) {text}"`, without a newline.
pub fn log_line(pc: usize, code: u8, insn: &Insn) -> String {
    log_line_with(pc, code, insn, &VerifierLog)
}

/// [`log_line`] with names and immediates from `syms`.
pub fn log_line_with(pc: usize, code: u8, insn: &Insn, syms: &impl Symbols) -> String {
    format!("{pc}: ({code:02x}) {}", insn_text_with(insn, syms))
}

/// Every instruction of `prog` as a [`log_line`], one per line, each ending in `\n`.
pub fn program_text(prog: &Program) -> String {
    program_text_with(prog, &VerifierLog)
}

/// [`program_text`] with names and immediates from `syms`.
pub fn program_text_with(prog: &Program, syms: &impl Symbols) -> String {
    let mut out = String::new();
    for (pc, insn) in prog.iter() {
        let code = prog.raw()[pc].code;
        // Writing to a String cannot fail.
        let _ = writeln!(out, "{}", log_line_with(pc, code, insn, syms));
    }
    out
}

/// A register as the kernel names it for an operation of `width`: `w` for 32 bits.
fn wreg(width: Width, reg: Reg) -> String {
    match width {
        Width::W32 => format!("w{}", reg.number()),
        Width::W64 => format!("r{}", reg.number()),
    }
}

fn alu(width: Width, op: AluOp, dst: Reg, src: Source) -> String {
    let rhs = match src {
        Source::Reg(s) => wreg(width, s),
        Source::Imm(imm) => imm.to_string(),
    };
    format!("{} {} {rhs}", wreg(width, dst), alu_op(op))
}

fn alu_op(op: AluOp) -> &'static str {
    match op {
        AluOp::Add => "+=",
        AluOp::Sub => "-=",
        AluOp::Mul => "*=",
        AluOp::Div => "/=",
        AluOp::SDiv => "s/=",
        AluOp::Or => "|=",
        AluOp::And => "&=",
        AluOp::Lsh => "<<=",
        AluOp::Rsh => ">>=",
        AluOp::Mod => "%=",
        AluOp::SMod => "s%=",
        AluOp::Xor => "^=",
        AluOp::Mov => "=",
        AluOp::Arsh => "s>>=",
    }
}

fn jmp_op(cond: JmpCond) -> &'static str {
    match cond {
        JmpCond::Eq => "==",
        JmpCond::Gt => ">",
        JmpCond::Ge => ">=",
        JmpCond::Set => "&",
        JmpCond::Ne => "!=",
        JmpCond::Sgt => "s>",
        JmpCond::Sge => "s>=",
        JmpCond::Lt => "<",
        JmpCond::Le => "<=",
        JmpCond::Slt => "s<",
        JmpCond::Sle => "s<=",
    }
}

fn unsigned(size: Size) -> &'static str {
    match size {
        Size::B => "u8",
        Size::H => "u16",
        Size::W => "u32",
        Size::DW => "u64",
    }
}

/// Sign-extending loads have no 64-bit form; the decoder never produces one.
fn signed(size: Size) -> &'static str {
    match size {
        Size::B => "s8",
        Size::H => "s16",
        Size::W | Size::DW => "s32",
    }
}

fn atomic(size: Size, op: AtomicOp, dst: Reg, src: Reg, off: i16) -> String {
    let ty = unsigned(size);
    // The kernel names fetching atomics after the C API: `atomic64_*` for 8 bytes, `atomic_*`
    // for 4.
    let bits = if size == Size::DW { "64" } else { "" };
    let mem = format!("({ty} *)({dst} {off:+})");
    let fetch = |name: &str| format!("{src} = atomic{bits}_fetch_{name}({mem}, {src})");
    match op {
        AtomicOp::Add => format!("lock *{mem} += {src}"),
        AtomicOp::Or => format!("lock *{mem} |= {src}"),
        AtomicOp::And => format!("lock *{mem} &= {src}"),
        AtomicOp::Xor => format!("lock *{mem} ^= {src}"),
        AtomicOp::FetchAdd => fetch("add"),
        AtomicOp::FetchOr => fetch("or"),
        AtomicOp::FetchAnd => fetch("and"),
        AtomicOp::FetchXor => fetch("xor"),
        AtomicOp::Xchg => format!("{src} = atomic{bits}_xchg({mem}, {src})"),
        AtomicOp::Cmpxchg => format!("r0 = atomic{bits}_cmpxchg({mem}, r0, {src})"),
        // Here src is the address register and dst the destination.
        AtomicOp::LoadAcquire => format!("{dst} = load_acquire(({ty} *)({src} {off:+}))"),
        AtomicOp::StoreRelease => format!("store_release({mem}, {src})"),
    }
}

fn ld_imm64_value(insn: &Insn, syms: &impl Symbols) -> String {
    let Insn::LdImm64 {
        kind,
        imm,
        next_imm,
        ..
    } = *insn
    else {
        unreachable!("ld_imm64_value is only called for ld_imm64");
    };
    let is_map_ptr = matches!(kind, LdImm64Kind::MapFd | LdImm64Kind::MapValue);
    let value = if is_map_ptr && !syms.allow_ptr_leaks() {
        0
    } else {
        Insn::imm64(imm, next_imm)
    };
    syms.imm64(insn, value)
        .unwrap_or_else(|| format!("0x{value:x}"))
}

fn call(insn: &Insn, target: CallTarget, syms: &impl Symbols) -> String {
    // Helpers the kernel knows by id are named from its table before any callback is asked.
    if let CallTarget::Helper(id) = target
        && let Some(name) = helper_name(id)
    {
        return format!("call bpf_{name}#{id}");
    }
    let name = syms.call_name(insn);
    match target {
        CallTarget::Local(rel) => format!("call pc{}", name.unwrap_or_else(|| format!("{rel:+}"))),
        CallTarget::Kfunc { btf_id, .. } => format!(
            "call {}#{btf_id}",
            name.as_deref().unwrap_or("kernel-function")
        ),
        CallTarget::Helper(id) => format!("call {}#{id}", name.as_deref().unwrap_or("unknown")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::insn::RawInsn;

    fn text(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> String {
        let slots = [RawInsn::new(code, dst, src, off, imm), RawInsn::default()];
        let (insn, _) = Insn::decode(&slots, 0).expect("decodes");
        insn_text(&insn)
    }

    #[test]
    fn alu_forms() {
        assert_eq!(text(0xb7, 0, 0, 0, -1), "r0 = -1");
        assert_eq!(text(0x04, 1, 0, 0, 7), "w1 += 7");
        assert_eq!(text(0x0f, 1, 2, 0, 0), "r1 += r2");
        assert_eq!(text(0x3c, 1, 2, 1, 0), "w1 s/= w2");
        assert_eq!(text(0x97, 3, 0, 1, -5), "r3 s%= -5");
        assert_eq!(text(0xc7, 3, 0, 0, 4), "r3 s>>= 4");
        assert_eq!(text(0x87, 4, 0, 0, 0), "r4 = -r4");
        assert_eq!(text(0x84, 4, 0, 0, 0), "w4 = -w4");
        assert_eq!(text(0xbf, 0, 1, 8, 0), "r0 = (s8)r1");
        assert_eq!(text(0xbc, 0, 1, 16, 0), "w0 = (s16)w1");
        assert_eq!(text(0xbf, 1, 2, 1, 1), "r1 = addr_space_cast(r2, 0, 1)");
        assert_eq!(
            text(0xbf, 1, 2, 1, 1 << 16),
            "r1 = addr_space_cast(r2, 1, 0)"
        );
    }

    #[test]
    fn byte_swaps() {
        assert_eq!(text(0xdc, 1, 0, 0, 16), "r1 = be16 r1");
        assert_eq!(text(0xd4, 1, 0, 0, 64), "r1 = le64 r1");
        assert_eq!(text(0xd7, 1, 0, 0, 32), "r1 = bswap32 r1");
    }

    #[test]
    fn memory_forms() {
        assert_eq!(text(0x79, 0, 10, -8, 0), "r0 = *(u64 *)(r10 -8)");
        assert_eq!(text(0x91, 0, 1, 2, 0), "r0 = *(s8 *)(r1 +2)");
        assert_eq!(text(0x62, 10, 0, -4, -3), "*(u32 *)(r10 -4) = -3");
        assert_eq!(text(0x6b, 10, 1, 0, 0), "*(u16 *)(r10 +0) = r1");
        assert_eq!(text(0x30, 0, 0, 0, 12), "r0 = *(u8 *)skb[12]");
        assert_eq!(text(0x48, 0, 7, 0, -2), "r0 = *(u16 *)skb[r7 + -2]");
    }

    #[test]
    fn atomics() {
        assert_eq!(text(0xdb, 0, 1, 0, 0x00), "lock *(u64 *)(r0 +0) += r1");
        assert_eq!(text(0xc3, 10, 1, -8, 0xa0), "lock *(u32 *)(r10 -8) ^= r1");
        assert_eq!(
            text(0xdb, 0, 1, 0, 0x01),
            "r1 = atomic64_fetch_add((u64 *)(r0 +0), r1)"
        );
        assert_eq!(
            text(0xc3, 2, 1, 4, 0x51),
            "r1 = atomic_fetch_and((u32 *)(r2 +4), r1)"
        );
        assert_eq!(
            text(0xdb, 2, 3, 0, 0xe1),
            "r3 = atomic64_xchg((u64 *)(r2 +0), r3)"
        );
        assert_eq!(
            text(0xdb, 10, 2, -8, 0xf1),
            "r0 = atomic64_cmpxchg((u64 *)(r10 -8), r0, r2)"
        );
        assert_eq!(
            text(0xd3, 0, 10, -1, 0x100),
            "r0 = load_acquire((u8 *)(r10 -1))"
        );
        assert_eq!(
            text(0xcb, 10, 1, -2, 0x110),
            "store_release((u16 *)(r10 -2), r1)"
        );
    }

    #[test]
    fn jumps_and_calls() {
        assert_eq!(text(0x05, 0, 0, -3, 0), "goto pc-3");
        assert_eq!(text(0x06, 0, 0, 0, 70000), "gotol pc+70000");
        assert_eq!(text(0xe5, 0, 0, 2, 0), "may_goto pc+2");
        assert_eq!(text(0x15, 1, 0, 0, 0), "if r1 == 0x0 goto pc+0");
        assert_eq!(text(0x26, 1, 0, -1, -1), "if w1 > 0xffffffff goto pc-1");
        assert_eq!(text(0xde, 1, 2, 5, 0), "if w1 s<= w2 goto pc+5");
        assert_eq!(text(0x85, 0, 0, 0, 1), "call bpf_map_lookup_elem#1");
        assert_eq!(text(0x85, 0, 0, 0, 9999), "call unknown#9999");
        assert_eq!(text(0x85, 0, 1, 0, 4), "call pc+4");
        assert_eq!(text(0x85, 0, 1, 0, -7), "call pc-7");
        assert_eq!(text(0x85, 0, 2, 0, 1234), "call kernel-function#1234");
        assert_eq!(text(0x95, 0, 0, 0, 0), "exit");
    }

    #[test]
    fn ld_imm64_values() {
        let ld = |kind, imm, next_imm| Insn::LdImm64 {
            dst: Reg::R1,
            kind,
            imm,
            next_imm,
        };
        assert_eq!(
            insn_text(&ld(LdImm64Kind::Imm, -1, 0x1234)),
            "r1 = 0x1234ffffffff"
        );
        assert_eq!(insn_text(&ld(LdImm64Kind::Imm, 0, 0)), "r1 = 0x0");
        assert_eq!(insn_text(&ld(LdImm64Kind::MapFd, 5, 0)), "r1 = 0x0");
        assert_eq!(insn_text(&ld(LdImm64Kind::MapValue, 5, 8)), "r1 = 0x0");
        assert_eq!(insn_text(&ld(LdImm64Kind::Func, 3, 0)), "r1 = 0x3");

        struct Leaky;
        impl Symbols for Leaky {
            fn allow_ptr_leaks(&self) -> bool {
                true
            }
        }
        assert_eq!(
            insn_text_with(&ld(LdImm64Kind::MapValue, 5, 8), &Leaky),
            "r1 = 0x800000005"
        );

        struct MapIds;
        impl Symbols for MapIds {
            fn imm64(&self, insn: &Insn, _value: u64) -> Option<String> {
                match insn {
                    Insn::LdImm64 {
                        kind: LdImm64Kind::MapFd,
                        imm,
                        ..
                    } => Some(format!("map[id:{imm}]")),
                    _ => None,
                }
            }
            fn call_name(&self, _insn: &Insn) -> Option<String> {
                Some("bpf_rcu_read_lock".into())
            }
        }
        assert_eq!(
            insn_text_with(&ld(LdImm64Kind::MapFd, 7, 0), &MapIds),
            "r1 = map[id:7]"
        );
        let kfunc = Insn::Call(CallTarget::Kfunc { btf_id: 42, off: 0 });
        assert_eq!(insn_text_with(&kfunc, &MapIds), "call bpf_rcu_read_lock#42");
    }

    #[test]
    fn whole_program() {
        let prog = Program::from_insns(&[
            Insn::LdImm64 {
                dst: Reg::R0,
                kind: LdImm64Kind::Imm,
                imm: 1,
                next_imm: 0,
            },
            Insn::Exit,
        ])
        .expect("valid program");
        assert_eq!(program_text(&prog), "0: (18) r0 = 0x1\n2: (95) exit\n");
        assert_eq!(log_line(3, 0x95, &Insn::Exit), "3: (95) exit");
    }
}
