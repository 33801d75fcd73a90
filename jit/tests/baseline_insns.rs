//! The baseline compiler's templates, one instruction class at a time, against the
//! interpreter on edge operands: every ALU operation of both widths (INT64_MIN / -1 and x / 0
//! for the signed and unsigned divisions and modulos, shifts by 31, 32, 63 and 64, 32-bit
//! results zero-extended), negation, byte swaps of 16, 32 and 64 bits, sign-extending moves
//! and loads, jumps of both widths signed and unsigned, and the atomics of both sizes with and
//! without fetch. The operands sit in the registers x86 treats specially (r0 is rax, the
//! dividend; r3 is rdx; r4 is rcx, the shift count) as well as in plain ones, and every
//! register is compared after the instruction, so a template that clobbers a neighbour fails.
//! Each case runs in both modes: checked code's access checks keep r0-r5 across their calls.

use bpfemu_isa::{
    AluOp, AtomicOp, ByteOrder, Insn, JmpCond, LdImm64Kind, Program, Reg, Size, Source, Width,
};
use bpfemu_jit::{Jit, Mode, Tier};
use bpfemu_vm::{Engine, Interpreter, Memory, NoHelpers, RegionKind};

/// The registers an instruction may use (r1 holds the buffer, r10 the frame).
const DATA: [u8; 9] = [0, 2, 3, 4, 5, 6, 7, 8, 9];

const VALUES: [u64; 14] = [
    0,
    1,
    u64::MAX,
    i64::MIN as u64,
    i64::MAX as u64,
    0x8000_0000,
    0xffff_ffff,
    0x7fff_ffff,
    31,
    32,
    63,
    64,
    0x1234_5678_9abc_def0,
    0xffff_ffff_8000_0000,
];

const IMMS: [i32; 10] = [0, 1, -1, i32::MIN, i32::MAX, 31, 32, 63, 64, -0x1234_5679];

/// (dst, src) pairs: plain registers, and x86's rax, rdx and rcx in every role.
const PAIRS: [(u8, u8); 10] = [
    (6, 7),
    (0, 4),
    (4, 0),
    (3, 4),
    (4, 3),
    (0, 3),
    (3, 0),
    (4, 4),
    (0, 0),
    (4, 9),
];

fn r(n: u8) -> Reg {
    Reg::new(n).unwrap()
}

fn ld(dst: u8, v: u64) -> Insn {
    Insn::LdImm64 {
        dst: r(dst),
        kind: LdImm64Kind::Imm,
        imm: v as u32 as i32,
        next_imm: (v >> 32) as u32 as i32,
    }
}

/// Every data register set to a distinct value, then `setup`, then `body`, then every data
/// register stored into the buffer and exit.
fn program(setup: &[(u8, u64)], body: &[Insn]) -> Program {
    let mut insns: Vec<Insn> = DATA
        .iter()
        .map(|&d| ld(d, 0x0101_0101_0101_0101u64.wrapping_mul(d as u64 + 3)))
        .collect();
    insns.extend(setup.iter().map(|&(d, v)| ld(d, v)));
    insns.extend_from_slice(body);
    for (i, &d) in DATA.iter().enumerate() {
        insns.push(Insn::StoreReg {
            size: Size::DW,
            dst: Reg::R1,
            src: r(d),
            off: 64 + i as i16 * 8,
        });
    }
    insns.push(Insn::Exit);
    Program::from_insns(&insns).unwrap()
}

/// r0 and the buffer after a run of `prog` with the buffer's first 64 bytes `input`.
fn run(engine: &dyn Engine, prog: &Program, input: &[u8; 64]) -> (Result<u64, String>, Vec<u8>) {
    let mut exe = engine.prepare(prog).expect("compiles");
    let mut mem = Memory::new();
    let mut bytes = input.to_vec();
    bytes.resize(64 + 8 * DATA.len(), 0);
    let id = mem.add_copy(RegionKind::Input, &bytes, true);
    let addr = mem.region(id).unwrap().base();
    let result = exe.run([addr, 0, 0, 0, 0], &mut mem, &mut NoHelpers);
    (
        result.map_err(|e| e.to_string()),
        mem.region(id).unwrap().bytes().to_vec(),
    )
}

fn input() -> [u8; 64] {
    std::array::from_fn(|i| (i as u8).wrapping_mul(37).wrapping_add(0x81))
}

/// The program gives the same r0 and buffer under the interpreter and the baseline tier, in
/// both modes (checked code's loads and stores go through its access checks).
fn agree(prog: &Program, input: &[u8; 64]) {
    let interp = run(&Interpreter::default(), prog, input);
    assert!(interp.0.is_ok(), "{interp:?}");
    for mode in [Mode::Trusted, Mode::Checked] {
        let jit = run(&Jit::new(mode).with_tier(Tier::Baseline), prog, input);
        assert_eq!(
            jit,
            interp,
            "the baseline ({mode:?}) differs on\n{}",
            bpfemu_isa::disasm::program_text(prog)
        );
    }
}

#[test]
fn alu_with_registers_at_both_widths() {
    for width in [Width::W64, Width::W32] {
        for op in AluOp::ALL {
            for (dst, src) in PAIRS {
                for &a in &VALUES {
                    for &b in &VALUES {
                        let insn = Insn::Alu {
                            width,
                            op,
                            dst: r(dst),
                            src: Source::Reg(r(src)),
                        };
                        agree(&program(&[(dst, a), (src, b)], &[insn]), &input());
                    }
                }
            }
        }
    }
}

#[test]
fn alu_with_immediates_at_both_widths() {
    for width in [Width::W64, Width::W32] {
        for op in AluOp::ALL {
            for dst in [0, 3, 4, 6] {
                for &a in &VALUES {
                    for imm in IMMS {
                        let insn = Insn::Alu {
                            width,
                            op,
                            dst: r(dst),
                            src: Source::Imm(imm),
                        };
                        agree(&program(&[(dst, a)], &[insn]), &input());
                    }
                }
            }
        }
    }
}

#[test]
fn negation_byte_swaps_and_sign_extension() {
    for &a in &VALUES {
        for dst in [0, 4, 6] {
            for width in [Width::W64, Width::W32] {
                let neg = Insn::Neg { width, dst: r(dst) };
                agree(&program(&[(dst, a)], &[neg]), &input());
            }
            for order in [ByteOrder::ToLe, ByteOrder::ToBe, ByteOrder::Swap] {
                for bits in [16, 32, 64] {
                    let swap = Insn::Endian {
                        order,
                        bits,
                        dst: r(dst),
                    };
                    agree(&program(&[(dst, a ^ 0x80)], &[swap]), &input());
                }
            }
        }
        for (dst, src) in [(6, 7), (0, 2), (2, 6), (4, 4), (7, 9)] {
            for width in [Width::W64, Width::W32] {
                for bits in [8, 16, 32] {
                    // A 32-bit move sign-extends 8 and 16 bits only.
                    if width == Width::W32 && bits == 32 {
                        continue;
                    }
                    let movsx = Insn::MovSx {
                        width,
                        dst: r(dst),
                        src: r(src),
                        bits,
                    };
                    // The low byte / half / word with its sign bit set and clear.
                    for v in [a, a | 0x80, a | 0x8000, a | 0x8000_0000] {
                        agree(&program(&[(src, v)], &[movsx]), &input());
                    }
                }
            }
        }
    }
}

#[test]
fn loads_and_stores_of_every_size() {
    for size in [Size::B, Size::H, Size::W, Size::DW] {
        for sign_extend in [false, true] {
            if sign_extend && size == Size::DW {
                continue;
            }
            for off in [0, 7, 16, 56] {
                for dst in [0, 2, 9] {
                    let load = Insn::Load {
                        size,
                        sign_extend,
                        dst: r(dst),
                        src: Reg::R1,
                        off,
                    };
                    agree(&program(&[], &[load]), &input());
                }
            }
        }
        for &v in &VALUES {
            let stores = [
                Insn::StoreReg {
                    size,
                    dst: Reg::R1,
                    src: r(4),
                    off: 3,
                },
                Insn::Store {
                    size,
                    dst: Reg::R1,
                    off: 40,
                    imm: v as i32,
                },
            ];
            agree(&program(&[(4, v)], &stores), &input());
        }
    }
}

#[test]
fn jumps_of_both_widths_signed_and_unsigned() {
    for width in [Width::W64, Width::W32] {
        for cond in JmpCond::ALL {
            for &a in &VALUES {
                let jump_then = |src| {
                    [
                        Insn::Jump {
                            width,
                            cond,
                            dst: r(6),
                            src,
                            off: 2,
                        },
                        ld(0, 1),
                        Insn::Ja {
                            off: 1,
                            long: false,
                        },
                        ld(0, 2),
                    ]
                };
                // ld_imm64 takes two slots: the taken jump skips `r0 = 1; goto`.
                let fix = |mut body: [Insn; 4]| {
                    if let Insn::Jump { off, .. } = &mut body[0] {
                        *off = 3;
                    }
                    if let Insn::Ja { off, .. } = &mut body[2] {
                        *off = 2;
                    }
                    body
                };
                for &b in &VALUES {
                    let body = fix(jump_then(Source::Reg(r(7))));
                    agree(&program(&[(6, a), (7, b)], &body), &input());
                }
                for imm in IMMS {
                    let body = fix(jump_then(Source::Imm(imm)));
                    agree(&program(&[(6, a)], &body), &input());
                }
            }
        }
    }
}

#[test]
fn atomics_of_both_sizes_with_and_without_fetch() {
    let ops = [
        AtomicOp::Add,
        AtomicOp::Or,
        AtomicOp::And,
        AtomicOp::Xor,
        AtomicOp::FetchAdd,
        AtomicOp::FetchOr,
        AtomicOp::FetchAnd,
        AtomicOp::FetchXor,
        AtomicOp::Xchg,
        AtomicOp::Cmpxchg,
    ];
    let mut memory = input();
    for size in [Size::W, Size::DW] {
        for op in ops {
            for src in [0, 2, 4] {
                for &v in &VALUES {
                    for expected_hit in [false, true] {
                        let off = 8;
                        let old = u64::from_le_bytes(memory[8..16].try_into().unwrap());
                        // Cmpxchg: r0 equal to memory (in the low 32 bits for W) or not.
                        let r0 = if expected_hit {
                            old | (0xdead_0000_0000_0000 * (size == Size::W) as u64)
                        } else {
                            old ^ 1
                        };
                        let insn = Insn::Atomic {
                            size,
                            op,
                            dst: Reg::R1,
                            src: r(src),
                            off,
                        };
                        let setup = if src == 0 {
                            vec![(0, v)]
                        } else {
                            vec![(0, r0), (src, v)]
                        };
                        agree(&program(&setup, &[insn]), &memory);
                    }
                }
                memory.rotate_left(3);
            }
        }
    }
    // Load-acquire and store-release of every size.
    for size in [Size::B, Size::H, Size::W, Size::DW] {
        let body = [
            Insn::Atomic {
                size,
                op: AtomicOp::LoadAcquire,
                dst: r(4),
                src: Reg::R1,
                off: 8,
            },
            Insn::Atomic {
                size,
                op: AtomicOp::StoreRelease,
                dst: Reg::R1,
                src: r(0),
                off: 24,
            },
        ];
        agree(&program(&[(0, 0x8899_aabb_ccdd_eeff)], &body), &input());
    }
}

/// Checked code's faults are the interpreter's, message and all (the instruction index, the
/// access, the region and where the address lies in it), under both tiers: loads, stores and
/// atomics past the end of the buffer or below it, below the frame, misaligned atomics that
/// fit (done by the runtime) and that do not.
#[test]
fn checked_faults_read_as_the_interpreters() {
    let atomic = |size, op, off| Insn::Atomic {
        size,
        op,
        dst: Reg::R1,
        src: r(2),
        off,
    };
    let load = |size, src, off| Insn::Load {
        size,
        sign_extend: false,
        dst: r(0),
        src,
        off,
    };
    let len = 64 + 8 * DATA.len() as i16;
    let cases: Vec<(Vec<Insn>, bool)> = vec![
        (vec![load(Size::W, Reg::R1, len - 2)], true),
        (vec![load(Size::DW, Reg::R1, -1)], true),
        (vec![load(Size::B, Reg::R10, -513)], true),
        (vec![load(Size::H, Reg::R10, -2)], false),
        (
            vec![Insn::Store {
                size: Size::DW,
                dst: Reg::R1,
                off: len - 4,
                imm: 7,
            }],
            true,
        ),
        (
            vec![Insn::StoreReg {
                size: Size::H,
                dst: Reg::R10,
                src: r(2),
                off: 0,
            }],
            true,
        ),
        (vec![atomic(Size::W, AtomicOp::Add, len - 2)], true),
        (vec![atomic(Size::DW, AtomicOp::FetchAdd, len - 5)], true),
        (vec![atomic(Size::DW, AtomicOp::FetchOr, 3)], false),
        (vec![atomic(Size::W, AtomicOp::Cmpxchg, 1)], false),
        (vec![atomic(Size::W, AtomicOp::Xchg, 2)], false),
    ];
    for (body, faults) in cases {
        let mut insns = vec![ld(2, 0x1122_3344_5566_7788), ld(0, 0x1122_3344)];
        insns.extend(body);
        insns.push(Insn::Exit);
        let prog = Program::from_insns(&insns).unwrap();
        let text = bpfemu_isa::disasm::program_text(&prog);
        let interp = run(&Interpreter::default(), &prog, &input());
        assert_eq!(interp.0.is_err(), faults, "{interp:?}\n{text}");
        for tier in [Tier::Cranelift, Tier::Baseline] {
            let jit = run(&Jit::new(Mode::Checked).with_tier(tier), &prog, &input());
            assert_eq!(jit, interp, "checked {tier:?} differs on\n{text}");
        }
    }
}
