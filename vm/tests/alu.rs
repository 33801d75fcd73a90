//! ALU semantics, including the kernel's runtime rewrites of division and the 32-bit forms'
//! zero-extension.

mod common;
use bpfemu_isa::{AluOp::*, ByteOrder, Insn, Width};
use common::*;

const MIN64: u64 = i64::MIN as u64;
const MIN32: u64 = i32::MIN as u32 as u64;
const NEG1: u64 = u64::MAX;
/// Upper-half garbage that a 32-bit operation must clear.
const HI: u64 = 0xdead_beef_0000_0000;

#[test]
fn basic_64_bit_ops() {
    assert_eq!(binop(alu64, Add, u64::MAX, 2), 1);
    assert_eq!(binop(alu64, Sub, 1, 2), NEG1);
    assert_eq!(binop(alu64, Mul, 1 << 63, 2), 0);
    assert_eq!(binop(alu64, Mul, 0x1_0000_0001, 3), 0x3_0000_0003);
    assert_eq!(binop(alu64, Or, 0xf0, 0x0f), 0xff);
    assert_eq!(binop(alu64, And, 0xf0f0, 0xff00), 0xf000);
    assert_eq!(binop(alu64, Xor, 0xff, 0x0f), 0xf0);
    assert_eq!(binop(alu64, Mov, 7, HI | 5), HI | 5);
}

#[test]
fn basic_32_bit_ops_zero_extend() {
    assert_eq!(binop(alu32, Add, HI | 0xffff_ffff, 2), 1);
    assert_eq!(binop(alu32, Sub, HI | 1, 2), 0xffff_ffff);
    assert_eq!(binop(alu32, Mul, HI | 0x8000_0000, 2), 0);
    assert_eq!(binop(alu32, Or, HI, 1), 1);
    assert_eq!(binop(alu32, And, HI | 0xff, u64::MAX), 0xff);
    assert_eq!(binop(alu32, Xor, HI, HI), 0);
    assert_eq!(binop(alu32, Mov, 0, HI | 9), 9);
}

#[test]
fn immediates_sign_extend_in_64_bit_and_truncate_in_32_bit() {
    assert_eq!(run_ok(&[mov(R0, -1), EXIT]), NEG1);
    assert_eq!(run_ok(&[alu32_imm(Mov, R0, -1), EXIT]), 0xffff_ffff);
    assert_eq!(
        run_ok(&[mov(R0, 0), alu64_imm(Add, R0, -2), EXIT]),
        (-2i64) as u64
    );
    assert_eq!(run_ok(&[ld64(R0, HI), alu64_imm(And, R0, -1), EXIT]), HI);
    assert_eq!(run_ok(&[ld64(R0, HI | 3), alu32_imm(And, R0, -1), EXIT]), 3);
}

#[test]
fn unsigned_division_and_modulo() {
    assert_eq!(binop(alu64, Div, 100, 7), 14);
    assert_eq!(binop(alu64, Mod, 100, 7), 2);
    assert_eq!(binop(alu64, Div, NEG1, 2), u64::MAX / 2);
    // 32-bit forms use the low halves of both operands.
    assert_eq!(binop(alu32, Div, HI | 100, HI | 7), 14);
    assert_eq!(binop(alu32, Mod, HI | 100, HI | 7), 2);
}

#[test]
fn division_by_zero_is_zero_and_modulo_keeps_the_dividend() {
    assert_eq!(binop(alu64, Div, 5, 0), 0);
    assert_eq!(binop(alu64, Mod, HI | 5, 0), HI | 5);
    assert_eq!(binop(alu32, Div, HI | 5, 0), 0);
    // 32-bit modulo by zero keeps the low half and zeroes the upper (the kernel's `w = w`).
    assert_eq!(binop(alu32, Mod, HI | 5, 0), 5);
    // A 32-bit divisor is zero when its low half is, whatever the upper half holds.
    assert_eq!(binop(alu32, Div, 5, 1 << 32), 0);
    assert_eq!(binop(alu32, Mod, HI | 5, 1 << 32), 5);
    assert_eq!(binop(alu64, SDiv, 5, 0), 0);
    assert_eq!(binop(alu64, SMod, HI | 5, 0), HI | 5);
    assert_eq!(binop(alu32, SDiv, HI | 5, 0), 0);
    assert_eq!(binop(alu32, SMod, HI | 5, 0), 5);
    // Immediate divisors behave the same (the verifier rejects them; we must not trap).
    assert_eq!(run_ok(&[mov(R0, 5), alu64_imm(Div, R0, 0), EXIT]), 0);
    assert_eq!(run_ok(&[mov(R0, 5), alu64_imm(Mod, R0, 0), EXIT]), 5);
    assert_eq!(run_ok(&[ld64(R0, HI | 5), alu32_imm(Mod, R0, 0), EXIT]), 5);
}

#[test]
fn signed_division_truncates_toward_zero() {
    let n = |v: i64| v as u64;
    assert_eq!(binop(alu64, SDiv, n(-7), 2), n(-3));
    assert_eq!(binop(alu64, SMod, n(-7), 2), n(-1));
    assert_eq!(binop(alu64, SDiv, 7, n(-2)), n(-3));
    assert_eq!(binop(alu64, SMod, 7, n(-2)), 1);
    assert_eq!(
        binop(alu32, SDiv, (-7i32) as u32 as u64, 2),
        (-3i32) as u32 as u64
    );
    assert_eq!(
        binop(alu32, SMod, (-7i32) as u32 as u64, 2),
        (-1i32) as u32 as u64
    );
    // INT_MIN / 2: core.c's old abs() made this wrong; x86 idiv (and the fixed core.c) don't.
    assert_eq!(binop(alu32, SDiv, MIN32, 2), 0xc000_0000);
    assert_eq!(binop(alu64, SDiv, MIN64, 2), n(i64::MIN / 2));
}

#[test]
fn signed_division_by_minus_one() {
    assert_eq!(binop(alu64, SDiv, MIN64, NEG1), MIN64);
    assert_eq!(binop(alu64, SMod, MIN64, NEG1), 0);
    assert_eq!(binop(alu64, SDiv, 5, NEG1), (-5i64) as u64);
    assert_eq!(binop(alu32, SDiv, HI | MIN32, NEG1), MIN32);
    assert_eq!(binop(alu32, SMod, HI | MIN32, NEG1), 0);
    // A 32-bit divisor of -1 is decided by the low half only.
    assert_eq!(binop(alu32, SDiv, 5, 0xffff_ffff), 0xffff_fffb);
    assert_eq!(
        run_ok(&[ld64(R0, MIN64), alu64_imm(SDiv, R0, -1), EXIT]),
        MIN64
    );
    assert_eq!(run_ok(&[ld64(R0, MIN64), alu64_imm(SMod, R0, -1), EXIT]), 0);
    assert_eq!(
        run_ok(&[ld64(R0, HI | MIN32), alu32_imm(SDiv, R0, -1), EXIT]),
        MIN32
    );
    assert_eq!(
        run_ok(&[ld64(R0, HI | 7), alu32_imm(SMod, R0, -1), EXIT]),
        0
    );
}

#[test]
fn shifts_mask_the_amount() {
    assert_eq!(binop(alu64, Lsh, 1, 65), 2);
    assert_eq!(binop(alu64, Rsh, 1 << 63, 63 + 64), 1);
    assert_eq!(binop(alu64, Arsh, MIN64, 63), NEG1);
    assert_eq!(binop(alu64, Arsh, MIN64, 64), MIN64);
    assert_eq!(binop(alu32, Lsh, 1, 33), 2);
    assert_eq!(binop(alu32, Lsh, HI | 1, 31), 0x8000_0000);
    assert_eq!(binop(alu32, Rsh, HI | 0x8000_0000, 31), 1);
    assert_eq!(binop(alu32, Rsh, HI | 0x8000_0000, 32), 0x8000_0000);
    // 32-bit arithmetic shift uses bit 31 as the sign and zero-extends the result.
    assert_eq!(binop(alu32, Arsh, 0x8000_0000, 4), 0xf800_0000);
    assert_eq!(binop(alu32, Arsh, 0x8000_0000, 36), 0xf800_0000);
    assert_eq!(run_ok(&[mov(R0, 1), alu64_imm(Lsh, R0, 64 + 3), EXIT]), 8);
    assert_eq!(
        run_ok(&[mov(R0, -16), alu32_imm(Arsh, R0, 2), EXIT]),
        0xffff_fffc
    );
}

#[test]
fn neg() {
    let neg = |width, v: u64| run_ok(&[ld64(R0, v), Insn::Neg { width, dst: R0 }, EXIT]);
    assert_eq!(neg(Width::W64, 1), NEG1);
    assert_eq!(neg(Width::W64, MIN64), MIN64);
    assert_eq!(neg(Width::W32, HI | 1), 0xffff_ffff);
    assert_eq!(neg(Width::W32, HI), 0);
}

#[test]
fn movsx() {
    let movsx = |width, bits, v: u64| {
        run_ok(&[
            ld64(R1, v),
            Insn::MovSx {
                width,
                dst: R0,
                src: R1,
                bits,
            },
            EXIT,
        ])
    };
    assert_eq!(movsx(Width::W64, 8, 0x80), 0xffff_ffff_ffff_ff80);
    assert_eq!(movsx(Width::W64, 8, HI | 0x7f), 0x7f);
    assert_eq!(movsx(Width::W64, 16, 0x8000), 0xffff_ffff_ffff_8000);
    assert_eq!(movsx(Width::W64, 32, 0x8000_0000), 0xffff_ffff_8000_0000);
    assert_eq!(movsx(Width::W64, 32, HI | 0x7fff_ffff), 0x7fff_ffff);
    assert_eq!(movsx(Width::W32, 8, HI | 0x80), 0xffff_ff80);
    assert_eq!(movsx(Width::W32, 16, HI | 0x8001), 0xffff_8001);
}

#[test]
fn byte_order() {
    let v = 0x0102_0304_0506_0708u64;
    let end = |order, bits| run_ok(&[ld64(R0, v), endian(order, bits, R0), EXIT]);
    assert_eq!(end(ByteOrder::ToLe, 16), 0x0708);
    assert_eq!(end(ByteOrder::ToLe, 32), 0x0506_0708);
    assert_eq!(end(ByteOrder::ToLe, 64), v);
    assert_eq!(end(ByteOrder::ToBe, 16), 0x0807);
    assert_eq!(end(ByteOrder::ToBe, 32), 0x0807_0605);
    assert_eq!(end(ByteOrder::ToBe, 64), 0x0807_0605_0403_0201);
    assert_eq!(end(ByteOrder::Swap, 16), 0x0807);
    assert_eq!(end(ByteOrder::Swap, 32), 0x0807_0605);
    assert_eq!(end(ByteOrder::Swap, 64), 0x0807_0605_0403_0201);
}

#[test]
fn ld_imm64_loads_all_64_bits() {
    assert_eq!(
        run_ok(&[ld64(R0, 0x8000_0000_ffff_ffff), EXIT]),
        0x8000_0000_ffff_ffff
    );
}

#[test]
fn r1_to_r5_are_the_arguments() {
    let insns = [
        mov_reg(R0, R1),
        alu64(Add, R0, R2),
        alu64(Add, R0, R3),
        alu64(Add, R0, bpfemu_isa::Reg::R4),
        alu64(Add, R0, bpfemu_isa::Reg::R5),
        EXIT,
    ];
    assert_eq!(run_args(&insns, [1, 20, 300, 4000, 50000]), Ok(54321));
}

/// A register move followed by an operation on the moved-to register runs as one fused op;
/// a `ja +0` between them keeps them apart. Both must give the same registers for every
/// operation, width and operand kind, including the operation reading its own destination.
#[test]
fn a_fused_move_and_operation_runs_as_the_two_instructions() {
    let values = [0, 1, 7, 63, 64, HI | 5, MIN64, MIN32, NEG1, 0x8000_0000];
    for op in bpfemu_isa::AluOp::ALL {
        for width in [Width::W64, Width::W32] {
            let mov = Insn::Alu {
                width,
                op: Mov,
                dst: R3,
                src: bpfemu_isa::Source::Reg(R1),
            };
            let seconds = [
                bpfemu_isa::Source::Imm(-3),
                bpfemu_isa::Source::Imm(13),
                bpfemu_isa::Source::Reg(R2),
                bpfemu_isa::Source::Reg(R3),
            ];
            for src in seconds {
                let second = Insn::Alu {
                    width,
                    op,
                    dst: R3,
                    src,
                };
                for (&a, &b) in values.iter().zip(values.iter().rev()) {
                    // r0 = r3 ^ (r1 << 1) ^ r2: what the pair left in r3, r1 and r2.
                    let tail = [
                        Insn::Alu {
                            width: Width::W64,
                            op: Mov,
                            dst: R0,
                            src: bpfemu_isa::Source::Reg(R1),
                        },
                        alu64_imm(Lsh, R0, 1),
                        alu64(Xor, R0, R3),
                        alu64(Xor, R0, R2),
                        EXIT,
                    ];
                    let fused: Vec<Insn> = [mov, second].into_iter().chain(tail).collect();
                    let apart: Vec<Insn> = [mov, ja(0), second].into_iter().chain(tail).collect();
                    let args = [a, b, 0, 0, 0];
                    assert_eq!(
                        run_args(&fused, args),
                        run_args(&apart, args),
                        "{op:?} {width:?} {src:?} on {a:#x}, {b:#x}"
                    );
                }
            }
        }
    }
}

/// The fused pairs of a byte-wise field (a byte load then a shift of it, a shift then the or
/// of a register) give what the two instructions give apart, faults included.
#[test]
fn fused_byte_field_pairs_run_as_the_two_instructions() {
    use bpfemu_isa::Size;
    let values = [0, 1, 0x80, 0xff, HI | 0x1234_5678, NEG1, MIN64];
    let shifts = [0, 8, 24, 31, 40, 63];
    for width in [Width::W64, Width::W32] {
        for &shift in &shifts {
            for &a in &values {
                for &b in &values {
                    let shl = Insn::Alu {
                        width,
                        op: Lsh,
                        dst: R1,
                        src: bpfemu_isa::Source::Imm(shift),
                    };
                    let or = |src| Insn::Alu {
                        width,
                        op: Or,
                        dst: R1,
                        src: bpfemu_isa::Source::Reg(src),
                    };
                    // The stack holds `a`; r1 = `b`, r2 = `a`; r0 = r1 ^ (r2 << 1) at the end.
                    let head = [ld64(R2, a), store(Size::DW, R10, -8, R2), ld64(R1, b)];
                    let tail = [
                        mov_reg(R0, R2),
                        alu64_imm(Lsh, R0, 1),
                        alu64(Xor, R0, R1),
                        EXIT,
                    ];
                    let pairs = [
                        [load(Size::B, R1, R10, -7), shl],
                        [load(Size::B, R1, R3, 0), shl],
                        [shl, or(R2)],
                        [shl, or(R1)],
                    ];
                    for [first, second] in pairs {
                        let fused: Vec<Insn> = head
                            .into_iter()
                            .chain([first, second])
                            .chain(tail)
                            .collect();
                        let apart: Vec<Insn> = head
                            .into_iter()
                            .chain([first, ja(0), second])
                            .chain(tail)
                            .collect();
                        assert_eq!(
                            run(&fused),
                            run(&apart),
                            "{first:?}; {second:?} on {a:#x}, {b:#x}"
                        );
                    }
                }
            }
        }
    }
}
