//! The arithmetic of one instruction, apart from registers and control flow: ALU operations,
//! byte swaps, sign extension and jump conditions, with the kernel's runtime semantics.
//!
//! Division never traps. The verifier's `do_misc_fixups` (kernel/bpf/verifier.c) patches
//! every division so that at runtime `x / 0 = 0`, `x % 0 = x`, `x s/ -1 = -x` and
//! `x s% -1 = 0`; a 32-bit form writes a 32-bit result, so the upper half of the destination
//! is zeroed in every case, including `w % 0`, which the kernel patches with `w = w`.
//! Shift amounts are masked to 5 or 6 bits, as x86-64 does for the JIT'd shift instructions.
//! Signed division otherwise truncates toward zero and the remainder takes the dividend's sign
//! (x86-64 `idiv`; core.c computes the same with `div64_s64` and `abs_s32`).

use bpfemu_isa::{AluOp, ByteOrder, JmpCond};

/// A 64-bit ALU operation (`BPF_ALU64`); `src` is the register or the sign-extended imm.
pub fn alu64(op: AluOp, dst: u64, src: u64) -> u64 {
    let (sd, ss) = (dst as i64, src as i64);
    match op {
        AluOp::Add => dst.wrapping_add(src),
        AluOp::Sub => dst.wrapping_sub(src),
        AluOp::Mul => dst.wrapping_mul(src),
        AluOp::Div => dst.checked_div(src).unwrap_or(0),
        // wrapping_div maps MIN s/ -1 to MIN, which is -MIN: the kernel's neg patch.
        AluOp::SDiv => sd
            .checked_div(ss)
            .unwrap_or(if ss == 0 { 0 } else { sd.wrapping_neg() }) as u64,
        AluOp::Mod => dst.checked_rem(src).unwrap_or(dst),
        AluOp::SMod => smod64(sd, ss) as u64,
        AluOp::Or => dst | src,
        AluOp::And => dst & src,
        AluOp::Xor => dst ^ src,
        AluOp::Lsh => dst << (src & 63),
        AluOp::Rsh => dst >> (src & 63),
        AluOp::Arsh => (sd >> (src & 63)) as u64,
        AluOp::Mov => src,
    }
}

fn smod64(dst: i64, src: i64) -> i64 {
    match src {
        0 => dst,
        _ => dst.wrapping_rem(src),
    }
}

/// A 32-bit ALU operation (`BPF_ALU`) on the low halves; the caller zero-extends the result.
pub fn alu32(op: AluOp, dst: u32, src: u32) -> u32 {
    let (sd, ss) = (dst as i32, src as i32);
    match op {
        AluOp::Add => dst.wrapping_add(src),
        AluOp::Sub => dst.wrapping_sub(src),
        AluOp::Mul => dst.wrapping_mul(src),
        AluOp::Div => dst.checked_div(src).unwrap_or(0),
        AluOp::SDiv => sd
            .checked_div(ss)
            .unwrap_or(if ss == 0 { 0 } else { sd.wrapping_neg() }) as u32,
        AluOp::Mod => dst.checked_rem(src).unwrap_or(dst),
        AluOp::SMod => smod32(sd, ss) as u32,
        AluOp::Or => dst | src,
        AluOp::And => dst & src,
        AluOp::Xor => dst ^ src,
        AluOp::Lsh => dst << (src & 31),
        AluOp::Rsh => dst >> (src & 31),
        AluOp::Arsh => (sd >> (src & 31)) as u32,
        AluOp::Mov => src,
    }
}

fn smod32(dst: i32, src: i32) -> i32 {
    match src {
        0 => dst,
        _ => dst.wrapping_rem(src),
    }
}

/// Sign-extends the low `bits` (8, 16 or 32) of `value` to 64 bits.
pub fn sign_extend(value: u64, bits: u8) -> u64 {
    match bits {
        8 => value as i8 as i64 as u64,
        16 => value as i16 as i64 as u64,
        32 => value as i32 as i64 as u64,
        _ => value,
    }
}

/// `BPF_END`. On a little-endian host, `to_le` only truncates; `to_be` and the cpu v4
/// unconditional swap both reverse the bytes of the low `bits` and zero the rest.
pub fn endian(order: ByteOrder, bits: u8, value: u64) -> u64 {
    match (order, bits) {
        (ByteOrder::ToLe, 16) => value as u16 as u64,
        (ByteOrder::ToLe, 32) => value as u32 as u64,
        (ByteOrder::ToLe, _) => value,
        (ByteOrder::ToBe | ByteOrder::Swap, 16) => (value as u16).swap_bytes() as u64,
        (ByteOrder::ToBe | ByteOrder::Swap, 32) => (value as u32).swap_bytes() as u64,
        (ByteOrder::ToBe | ByteOrder::Swap, _) => value.swap_bytes(),
    }
}

/// A 64-bit jump condition (`BPF_JMP`).
pub fn cond64(cond: JmpCond, a: u64, b: u64) -> bool {
    let (sa, sb) = (a as i64, b as i64);
    match cond {
        JmpCond::Eq => a == b,
        JmpCond::Ne => a != b,
        JmpCond::Set => a & b != 0,
        JmpCond::Gt => a > b,
        JmpCond::Ge => a >= b,
        JmpCond::Lt => a < b,
        JmpCond::Le => a <= b,
        JmpCond::Sgt => sa > sb,
        JmpCond::Sge => sa >= sb,
        JmpCond::Slt => sa < sb,
        JmpCond::Sle => sa <= sb,
    }
}

/// A 32-bit jump condition (`BPF_JMP32`): compares the low halves only.
pub fn cond32(cond: JmpCond, a: u32, b: u32) -> bool {
    // Sign-extending both halves keeps signed and unsigned order of the 32-bit values.
    cond64(cond, a as i32 as i64 as u64, b as i32 as i64 as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cond32_orders_like_32_bit_values() {
        assert!(cond32(JmpCond::Gt, 0x8000_0000, 1));
        assert!(!cond32(JmpCond::Sgt, 0x8000_0000, 1));
        assert!(cond32(JmpCond::Lt, 1, 0xffff_ffff));
        assert!(cond32(JmpCond::Sgt, 1, 0xffff_ffff));
    }

    #[test]
    fn endian_variants() {
        let v = 0x0102_0304_0506_0708;
        assert_eq!(endian(ByteOrder::ToLe, 16, v), 0x0708);
        assert_eq!(endian(ByteOrder::ToLe, 32, v), 0x0506_0708);
        assert_eq!(endian(ByteOrder::ToLe, 64, v), v);
        assert_eq!(endian(ByteOrder::ToBe, 16, v), 0x0807);
        assert_eq!(endian(ByteOrder::ToBe, 32, v), 0x0807_0605);
        assert_eq!(endian(ByteOrder::ToBe, 64, v), 0x0807_0605_0403_0201);
        assert_eq!(endian(ByteOrder::Swap, 16, v), 0x0807);
        assert_eq!(endian(ByteOrder::Swap, 64, v), 0x0807_0605_0403_0201);
    }
}
