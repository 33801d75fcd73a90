//! The interpreter is the JIT's oracle: random programs over random inputs give the same r0,
//! the same memory, the same executed count and the same fault (variant, instruction index,
//! access, region and position) under both engines, in checked mode always and in trusted mode
//! whenever the interpreter's run touched only valid memory.
//!
//! The programs use every instruction class: ALU of both widths with immediates and
//! registers, division by random values (zero and -1 included), movsx, byte swaps, ld_imm64,
//! loads (sign-extending too), stores, atomics, LD_ABS/LD_IND, jumps of both widths anywhere
//! (loops, targets outside the program, into an ld_imm64), may_goto, bpf-to-bpf calls and a
//! helper. r1 (the input buffer) and r10 (the stack) are only ever used as bases, so that no
//! host address reaches a result.
//!
//! `BPFEMU_JIT_CASES` sets the number of cases (default 500).

use bpfemu_isa::{
    AluOp, AtomicOp, ByteOrder, CallTarget, Insn, JmpCond, LdImm64Kind, Program, Reg, Size, Source,
    Width,
};
use bpfemu_jit::{Jit, Mode, Tier};
use bpfemu_vm::memory::{FaultCause, Position};
use bpfemu_vm::{Engine, HelperError, Helpers, Interpreter, Memory, Options, RegionKind, VmError};
use proptest::prelude::*;

const INPUT_LEN: usize = 64;

/// A small deterministic generator (splitmix64), driven by proptest's seed.
struct Gen(u64);

impl Gen {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len() as u64) as usize]
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    /// Interesting values more often than uniform ones.
    fn imm(&mut self) -> i32 {
        match self.below(4) {
            0 => self.pick(&[0, 1, -1, 2, 31, 32, 63, 64, i32::MIN, i32::MAX]),
            1 => self.below(16) as i32,
            _ => self.next() as i32,
        }
    }

    /// A data register: never r1 (the input pointer) or r10 (the frame pointer).
    fn data_reg(&mut self) -> Reg {
        self.pick(&[
            Reg::R0,
            Reg::R2,
            Reg::R3,
            Reg::R4,
            Reg::R5,
            Reg::R6,
            Reg::R7,
            Reg::R8,
            Reg::R9,
        ])
    }

    fn width(&mut self) -> Width {
        if self.chance(50) {
            Width::W64
        } else {
            Width::W32
        }
    }

    fn size(&mut self) -> Size {
        self.pick(&[Size::B, Size::H, Size::W, Size::DW])
    }

    fn source(&mut self) -> Source {
        if self.chance(50) {
            Source::Reg(self.data_reg())
        } else {
            Source::Imm(self.imm())
        }
    }

    /// A memory operand: the input buffer or the stack, mostly in bounds.
    fn base_off(&mut self, size: Size) -> (Reg, i16) {
        let n = size.bytes() as i64;
        let aligned = |g: &mut Gen, lo: i64, hi: i64| {
            let slots = (hi - lo) / n;
            lo + g.below(slots as u64) as i64 * n
        };
        if self.chance(50) {
            let off = match self.below(10) {
                0 => self.below(INPUT_LEN as u64 + 16) as i64 - 8,
                _ => aligned(self, 0, INPUT_LEN as i64),
            };
            (Reg::R1, off as i16)
        } else {
            let off = match self.below(10) {
                0 => self.below(540) as i64 - 524,
                _ => aligned(self, -512, 0),
            };
            (Reg::R10, off as i16)
        }
    }
}

/// One instruction of a function body; jumps get their offsets once the layout is known.
#[derive(Clone, Copy)]
enum Item {
    Plain(Insn),
    /// A jump to `target`, a slot of the whole program (maybe invalid).
    Jump {
        width: Width,
        cond: JmpCond,
        dst: Reg,
        src: Source,
        target: i64,
    },
    Ja {
        target: i64,
    },
    MayGoto {
        target: i64,
    },
    /// A call to the subprogram.
    CallSub,
}

fn random_insn(g: &mut Gen) -> Insn {
    match g.below(22) {
        0..=5 => {
            let op = g.pick(&AluOp::ALL);
            Insn::Alu {
                width: g.width(),
                op,
                dst: g.data_reg(),
                src: g.source(),
            }
        }
        6 => Insn::Neg {
            width: g.width(),
            dst: g.data_reg(),
        },
        7 => {
            let width = g.width();
            let bits = match width {
                Width::W64 => g.pick(&[8, 16, 32]),
                Width::W32 => g.pick(&[8, 16]),
            };
            Insn::MovSx {
                width,
                dst: g.data_reg(),
                src: g.data_reg(),
                bits,
            }
        }
        8 => Insn::Endian {
            order: g.pick(&[ByteOrder::ToLe, ByteOrder::ToBe, ByteOrder::Swap]),
            bits: g.pick(&[16, 32, 64]),
            dst: g.data_reg(),
        },
        9 => Insn::LdImm64 {
            dst: g.data_reg(),
            kind: LdImm64Kind::Imm,
            imm: g.imm(),
            next_imm: g.imm(),
        },
        10..=12 => {
            let size = g.size();
            let (src, off) = g.base_off(size);
            Insn::Load {
                size,
                sign_extend: size != Size::DW && g.chance(30),
                dst: g.data_reg(),
                src,
                off,
            }
        }
        13 | 14 => {
            let size = g.size();
            let (dst, off) = g.base_off(size);
            Insn::StoreReg {
                size,
                dst,
                src: g.data_reg(),
                off,
            }
        }
        15 => {
            let size = g.size();
            let (dst, off) = g.base_off(size);
            Insn::Store {
                size,
                dst,
                off,
                imm: g.imm(),
            }
        }
        16 | 17 => {
            let op = g.pick(&[
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
                AtomicOp::LoadAcquire,
                AtomicOp::StoreRelease,
            ]);
            let size = match op {
                AtomicOp::LoadAcquire | AtomicOp::StoreRelease => g.size(),
                _ => g.pick(&[Size::W, Size::DW]),
            };
            let (base, off) = g.base_off(size);
            let data = g.data_reg();
            // Load-acquire reads through src, the others write through dst.
            let (dst, src) = match op {
                AtomicOp::LoadAcquire => (data, base),
                _ => (base, data),
            };
            Insn::Atomic {
                size,
                op,
                dst,
                src,
                off,
            }
        }
        18 => Insn::LdAbs {
            size: g.pick(&[Size::B, Size::H, Size::W]),
            imm: g.below(INPUT_LEN as u64 + 8) as i32 - 4,
        },
        19 => Insn::LdInd {
            size: g.pick(&[Size::B, Size::H, Size::W]),
            src: g.data_reg(),
            imm: g.below(INPUT_LEN as u64) as i32,
        },
        _ => Insn::Call(CallTarget::Helper(ECHO)),
    }
}

/// A function body of `n` items whose jumps land in `[lo, hi)` (slots), sometimes outside.
fn random_body(g: &mut Gen, n: usize, lo: i64, hi: i64, may_call: bool) -> Vec<Item> {
    (0..n)
        .map(|_| {
            let target = if g.chance(5) {
                g.pick(&[-1, hi + 3, 1 << 20])
            } else {
                lo + g.below((hi - lo).max(1) as u64) as i64
            };
            match g.below(12) {
                0 | 1 => {
                    let width = g.width();
                    Item::Jump {
                        width,
                        cond: g.pick(&JmpCond::ALL),
                        dst: g.data_reg(),
                        src: g.source(),
                        target,
                    }
                }
                2 if g.chance(30) => Item::Ja { target },
                3 if g.chance(40) => Item::MayGoto { target },
                4 if may_call && g.chance(40) => Item::CallSub,
                _ => Item::Plain(random_insn(g)),
            }
        })
        .collect()
}

fn slots(item: &Item) -> i64 {
    match item {
        Item::Plain(i) => i.slots() as i64,
        _ => 1,
    }
}

/// Lays out `main; exit; [sub; exit]` and resolves jump offsets.
fn random_program(g: &mut Gen) -> Program {
    let with_sub = g.chance(30);
    let main_n = 1 + g.below(30) as usize;
    let sub_n = 1 + g.below(10) as usize;
    // Guess the layout to aim jumps (ld_imm64 makes it a little longer; a miss is a test too).
    let main_len = main_n as i64 + 1;
    let total = main_len + if with_sub { sub_n as i64 + 1 } else { 0 };
    let mut items = random_body(g, main_n, 0, main_len, with_sub);
    items.push(Item::Plain(Insn::Exit));
    let sub_start = items.iter().map(slots).sum::<i64>();
    if with_sub {
        items.extend(random_body(g, sub_n, main_len, total, false));
        items.push(Item::Plain(Insn::Exit));
    }
    let mut insns = Vec::new();
    let mut pc = 0i64;
    for item in &items {
        let rel = |target: i64| target - pc - 1;
        insns.push(match *item {
            Item::Plain(i) => i,
            Item::Jump {
                width,
                cond,
                dst,
                src,
                target,
            } => Insn::Jump {
                width,
                cond,
                dst,
                src,
                off: rel(target).clamp(i16::MIN as i64, i16::MAX as i64) as i16,
            },
            Item::Ja { target } => Insn::Ja {
                off: rel(target) as i32,
                long: false,
            },
            Item::MayGoto { target } => Insn::MayGoto {
                off: rel(target).clamp(i16::MIN as i64, i16::MAX as i64) as i16,
            },
            Item::CallSub => Insn::Call(CallTarget::Local(rel(sub_start) as i32)),
        });
        pc += slots(item);
    }
    Program::from_insns(&insns).expect("generated instructions encode")
}

/// Helper 5 mixes its arguments (never r1, a pointer, into the result).
const ECHO: i32 = 5;

struct Mixer;

impl Helpers for Mixer {
    fn call(&mut self, id: i32, args: [u64; 5], _mem: &mut Memory) -> Result<u64, HelperError> {
        match id {
            ECHO if args[1] == 7 => Err(HelperError::Failed("seven".into())),
            ECHO => Ok(args[1].rotate_left(7) ^ args[2].wrapping_mul(3) ^ args[3]),
            _ => Err(HelperError::Unknown(id)),
        }
    }
}

/// What a run gives, with host addresses taken out.
#[derive(Debug, PartialEq, Eq)]
struct RunResult {
    result: Result<u64, String>,
    input: Vec<u8>,
    executed: u64,
}

fn normalize(e: &VmError) -> String {
    match e {
        VmError::Memory { pc, fault } => {
            let cause = match &fault.cause {
                FaultCause::OutOfBounds { nearest: None } => "unmapped".to_string(),
                // A wild address (a random scalar used as a pointer) lands near whichever
                // region the host happened to place nearby, which differs between two runs:
                // only a near miss, made from a region's own pointer, names the region.
                FaultCause::OutOfBounds {
                    nearest: Some((region, pos)),
                } => match *pos {
                    Position::BeforeStart { by } | Position::PastEnd { by } if by >= 4096 => {
                        "far from any region".to_string()
                    }
                    Position::BeforeStart { by } => format!("{by} before {}", region.name),
                    Position::PastEnd { by } => format!("{by} past {}", region.name),
                },
                FaultCause::ReadOnly { region } => format!("read-only {}", region.name),
                FaultCause::CtxAccess { region, off } => format!("ctx {} {off}", region.name),
            };
            format!(
                "insn {pc}: {} of {} bytes: {cause}",
                fault.access, fault.len
            )
        }
        other => other.to_string(),
    }
}

fn run(engine: &dyn Engine, prog: &Program, input: &[u8], args: [u64; 3]) -> RunResult {
    let mut exe = engine.prepare(prog).expect("the program compiles");
    let mut mem = Memory::new();
    let id = mem.add_copy(RegionKind::Input, input, true);
    mem.set_packet(Some(id));
    let addr = mem.region(id).unwrap().base();
    let result = exe.run(
        [addr, INPUT_LEN as u64, args[0], args[1], args[2]],
        &mut mem,
        &mut Mixer,
    );
    RunResult {
        result: result.map_err(|e| normalize(&e)),
        input: mem.region(id).unwrap().bytes().to_vec(),
        executed: exe.executed(),
    }
}

fn options() -> Options {
    Options {
        insn_budget: 3000,
        may_goto_loops: 4,
    }
}

/// Both tiers, in both modes.
const TIERS: [Tier; 2] = [Tier::Cranelift, Tier::Baseline];

fn misaligned_atomics(prog: &Program) -> bool {
    prog.iter().any(|(_, insn)| {
        matches!(insn, Insn::Atomic { size, off, .. } if *off as i64 % size.bytes() as i64 != 0)
    })
}

fn check(seed: u64) -> Result<(), TestCaseError> {
    let mut g = Gen(seed);
    let prog = random_program(&mut g);
    let input: Vec<u8> = (0..INPUT_LEN).map(|_| g.next() as u8).collect();
    let args = [g.imm() as i64 as u64, g.next(), g.below(4)];
    let text = bpfemu_isa::disasm::program_text(&prog);
    let interp = run(&Interpreter::new(options()), &prog, &input, args);
    for tier in TIERS {
        let checked = run(
            &Jit::with_options(Mode::Checked, options()).with_tier(tier),
            &prog,
            &input,
            args,
        );
        prop_assert_eq!(
            &interp,
            &checked,
            "checked JIT ({:?}) differs on\n{}",
            tier,
            text
        );
    }
    let memory_fault = interp
        .result
        .as_ref()
        .is_err_and(|e| e.contains(" bytes: "));
    if !memory_fault && !misaligned_atomics(&prog) {
        for tier in TIERS {
            let trusted = run(
                &Jit::with_options(Mode::Trusted, options()).with_tier(tier),
                &prog,
                &input,
                args,
            );
            prop_assert_eq!(
                &interp,
                &trusted,
                "trusted JIT ({:?}) differs on\n{}",
                tier,
                text
            );
        }
    }
    Ok(())
}

fn cases() -> u32 {
    std::env::var("BPFEMU_JIT_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(500)
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: cases(),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn jit_agrees_with_the_interpreter(seed in any::<u64>()) {
        check(seed)?;
    }
}

/// Programs the random walk reaches rarely: nested calls past the frame limit, the budget
/// running out inside a long block, division edge cases.
#[test]
fn edge_cases_agree() {
    use Insn::*;
    let r = |n| Reg::new(n).unwrap();
    let alu = |width, op, dst: u8, src| Alu {
        width,
        op,
        dst: r(dst),
        src,
    };
    let programs: Vec<Vec<Insn>> = vec![
        // Recursion: the 17th frame is refused (7.2 verifies 16).
        vec![Call(CallTarget::Local(-1)), Exit],
        // A long block in an endless loop: the budget stops it mid-block.
        vec![
            alu(Width::W64, AluOp::Add, 0, Source::Imm(1)),
            alu(Width::W64, AluOp::Add, 0, Source::Imm(2)),
            alu(Width::W64, AluOp::Add, 0, Source::Imm(3)),
            alu(Width::W64, AluOp::Add, 0, Source::Imm(4)),
            Ja {
                off: -5,
                long: false,
            },
        ],
        // Signed division and modulo of the most negative values by -1 and 0.
        vec![
            LdImm64 {
                dst: r(2),
                kind: LdImm64Kind::Imm,
                imm: 0,
                next_imm: i32::MIN,
            },
            alu(Width::W64, AluOp::Mov, 3, Source::Reg(r(2))),
            alu(Width::W64, AluOp::SDiv, 3, Source::Imm(-1)),
            alu(Width::W64, AluOp::Mov, 4, Source::Reg(r(2))),
            alu(Width::W64, AluOp::SMod, 4, Source::Imm(-1)),
            alu(Width::W32, AluOp::Mov, 5, Source::Imm(i32::MIN)),
            alu(Width::W32, AluOp::SDiv, 5, Source::Imm(-1)),
            alu(Width::W32, AluOp::Mod, 2, Source::Imm(0)),
            alu(Width::W64, AluOp::Mov, 0, Source::Reg(r(3))),
            alu(Width::W64, AluOp::Xor, 0, Source::Reg(r(4))),
            alu(Width::W64, AluOp::Add, 0, Source::Reg(r(5))),
            alu(Width::W64, AluOp::Add, 0, Source::Reg(r(2))),
            Exit,
        ],
        // Falling off the end.
        vec![alu(Width::W64, AluOp::Mov, 0, Source::Imm(1))],
    ];
    for insns in programs {
        let prog = Program::from_insns(&insns).unwrap();
        let input = [0u8; INPUT_LEN];
        let a = run(&Interpreter::new(options()), &prog, &input, [0; 3]);
        for tier in TIERS {
            let b = run(
                &Jit::with_options(Mode::Checked, options()).with_tier(tier),
                &prog,
                &input,
                [0; 3],
            );
            assert_eq!(
                a,
                b,
                "checked {tier:?}: {}",
                bpfemu_isa::disasm::program_text(&prog)
            );
        }
        for tier in TIERS {
            let c = run(
                &Jit::with_options(Mode::Trusted, options()).with_tier(tier),
                &prog,
                &input,
                [0; 3],
            );
            assert_eq!(
                a,
                c,
                "{tier:?}: {}",
                bpfemu_isa::disasm::program_text(&prog)
            );
        }
        assert!(a.executed > 0);
    }
}
