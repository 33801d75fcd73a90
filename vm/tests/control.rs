//! Jumps, calls, may_goto, exits and the instruction budget.

mod common;
use bpfemu_isa::{AluOp, CallTarget, Insn, JmpCond, JmpCond::*, Size, Source, Width};
use bpfemu_vm::{MAX_CALL_FRAMES, Options, STACK_SIZE, Unsupported, VmError};
use common::*;

/// r0 = 0; if a <cond> b goto +1; exit; r0 = 1; exit  → whether the jump was taken.
fn taken(width: Width, cond: JmpCond, a: u64, b: u64) -> bool {
    let insns = [
        ld64(R1, a),
        ld64(R2, b),
        mov(R0, 0),
        jmp(width, cond, R1, Source::Reg(R2), 1),
        EXIT,
        mov(R0, 1),
        EXIT,
    ];
    run_ok(&insns) == 1
}

fn taken_imm(width: Width, cond: JmpCond, a: u64, imm: i32) -> bool {
    let insns = [
        ld64(R1, a),
        mov(R0, 0),
        jmp(width, cond, R1, Source::Imm(imm), 1),
        EXIT,
        mov(R0, 1),
        EXIT,
    ];
    run_ok(&insns) == 1
}

#[test]
fn jmp64_unsigned_and_signed() {
    let w = Width::W64;
    let m1 = u64::MAX;
    assert!(taken(w, Eq, 5, 5) && !taken(w, Eq, 5, 6));
    assert!(taken(w, Ne, 5, 6) && !taken(w, Ne, 5, 5));
    assert!(taken(w, Set, 0b110, 0b010) && !taken(w, Set, 0b100, 0b010));
    assert!(taken(w, Gt, m1, 1) && !taken(w, Gt, 1, 1));
    assert!(taken(w, Ge, 1, 1) && !taken(w, Ge, 0, 1));
    assert!(taken(w, Lt, 1, m1) && !taken(w, Lt, 1, 1));
    assert!(taken(w, Le, 1, 1) && !taken(w, Le, 2, 1));
    assert!(!taken(w, Sgt, m1, 1) && taken(w, Sgt, 1, m1));
    assert!(taken(w, Sge, m1, m1) && !taken(w, Sge, m1, 0));
    assert!(taken(w, Slt, m1, 0) && !taken(w, Slt, 0, m1));
    assert!(taken(w, Sle, m1, m1) && !taken(w, Sle, 0, m1));
}

#[test]
fn jmp64_immediate_is_sign_extended() {
    assert!(taken_imm(Width::W64, Eq, u64::MAX, -1));
    assert!(!taken_imm(Width::W64, Eq, 0xffff_ffff, -1));
    assert!(taken_imm(Width::W64, Gt, u64::MAX, -2));
    assert!(taken_imm(Width::W64, Slt, (-3i64) as u64, -2));
}

#[test]
fn jmp32_compares_low_halves() {
    let w = Width::W32;
    let hi = 0xffff_ffff_0000_0000;
    assert!(taken(w, Eq, hi | 5, 5));
    assert!(!taken(Width::W64, Eq, hi | 5, 5));
    assert!(taken(w, Gt, 0x8000_0000, hi | 1));
    assert!(!taken(w, Sgt, 0x8000_0000, 1));
    assert!(taken(w, Slt, 0xffff_ffff, 0));
    assert!(!taken(w, Set, 1 << 32, 1 << 32));
    assert!(taken_imm(w, Eq, 0xffff_ffff, -1));
    assert!(taken_imm(w, Sle, hi | 0xffff_fffe, -1));
    assert!(!taken_imm(w, Ge, 0x7fff_ffff, -1));
}

#[test]
fn ja_and_gotol() {
    let insns = [mov(R0, 1), ja(1), mov(R0, 2), EXIT];
    assert_eq!(run_ok(&insns), 1);
    let insns = [
        mov(R0, 1),
        Insn::Ja { off: 1, long: true },
        mov(R0, 2),
        EXIT,
    ];
    assert_eq!(run_ok(&insns), 1);
}

#[test]
fn jump_out_of_program_names_pc_and_target() {
    let err = run(&[mov(R0, 1), ja(5), EXIT]).unwrap_err();
    assert_eq!(
        err,
        VmError::JumpOutOfProgram {
            pc: 1,
            target: 7,
            len: 3
        }
    );
    assert_eq!(
        err.to_string(),
        "insn 1: jump to 7 is outside the program (insns 0..3)"
    );
    let err = run(&[ja(-2), EXIT]).unwrap_err();
    assert_eq!(
        err,
        VmError::JumpOutOfProgram {
            pc: 0,
            target: -1,
            len: 2
        }
    );
}

#[test]
fn jump_into_ld_imm64_is_an_error() {
    let err = run(&[ja(1), ld64(R0, 1), EXIT]).unwrap_err();
    assert_eq!(err, VmError::JumpIntoLdImm64 { pc: 0, target: 2 });
}

#[test]
fn falling_off_the_end() {
    let err = run(&[mov(R0, 1)]).unwrap_err();
    assert_eq!(err, VmError::FellOffEnd { pc: 0 });
    let err = run(&[mov(R0, 1), ld64(R0, 2)]).unwrap_err();
    assert_eq!(err, VmError::FellOffEnd { pc: 2 });
}

#[test]
fn instruction_budget() {
    // An infinite loop stops at the budget.
    let options = Options {
        insn_budget: 1000,
        ..Options::default()
    };
    let err = run_with(options, &[ja(-1)]).unwrap_err();
    assert_eq!(
        err,
        VmError::BudgetExceeded {
            pc: 0,
            budget: 1000
        }
    );
    assert!(err.to_string().contains("budget"));
    // Exactly `budget` instructions may run.
    let straight = [mov(R0, 1), mov(R0, 2), EXIT];
    let exact = Options {
        insn_budget: 3,
        ..Options::default()
    };
    assert_eq!(run_with(exact, &straight), Ok(2));
    let short = Options {
        insn_budget: 2,
        ..Options::default()
    };
    assert_eq!(
        run_with(short, &straight),
        Err(VmError::BudgetExceeded { pc: 2, budget: 2 })
    );
    // The default budget stops an infinite loop too.
    assert!(matches!(
        run(&[ja(-1)]),
        Err(VmError::BudgetExceeded { .. })
    ));
}

/// The fast loop charges the budget a run at a time; the coverage loop counts each
/// instruction. Whatever the budget, both stop at the same instruction with the same count,
/// through taken and untaken jumps, an `ld_imm64`, a call and a faulting load.
#[test]
fn budget_and_count_are_exact_at_every_instruction() {
    let text = "
        r0 = 0
        r2 = 0x100000000 ll
        r3 = 5
    loop:
        r0 += r3
        if r0 > 12 goto skip
        r0 += 1
        call double
    skip:
        r3 += -1
        if r3 != 0 goto loop
        r4 = 0
        r0 = *(u64 *)(r4 +0)
        exit
    double:
        r0 <<= 1
        exit
    ";
    let program =
        bpfemu_isa::Program::decode(bpfemu_isa::asm::assemble_kernel(text).unwrap()).unwrap();
    let run = |budget: u64, coverage: bool| {
        let mut interp = bpfemu_vm::Interpreter::new(Options {
            insn_budget: budget,
            ..Options::default()
        });
        if coverage {
            interp.set_coverage(Some(bpfemu_vm::Coverage::new([program.len()])));
        }
        let mut mem = bpfemu_vm::Memory::new();
        let result = interp.run(&program, [0; 5], &mut mem, &mut bpfemu_vm::NoHelpers);
        (result, interp.executed())
    };
    let (full, total) = run(1000, false);
    assert!(
        matches!(full, Err(VmError::Memory { pc: 11, .. })),
        "{full:?}"
    );
    for budget in 0..=total + 1 {
        assert_eq!(run(budget, false), run(budget, true), "budget {budget}");
    }
}

/// The `add` of an immediate followed by a 64-bit jump on the same register runs as one
/// fused op; a `ja +0` between them keeps them apart. Both must agree on the jump and on the
/// register, for every condition and operand kind (a jump immediate too wide to fuse too).
#[test]
fn a_fused_add_and_jump_runs_as_the_two_instructions() {
    let values = [0, 1, 5, 7, u64::MAX, i64::MIN as u64, 0x8000_0000, 1 << 40];
    for cond in JmpCond::ALL {
        let sources = [
            Source::Imm(7),
            Source::Imm(-1),
            Source::Imm(70_000),
            Source::Reg(R2),
        ];
        for src in sources {
            for &a in &values {
                for &b in &values {
                    let add = alu64_imm(AluOp::Add, R1, 2);
                    let jump = jmp(Width::W64, cond, R1, src, 2);
                    // r0 = r1, plus 1 << 62 when the jump was taken.
                    let tail = [
                        mov_reg(R0, R1),
                        EXIT,
                        mov_reg(R0, R1),
                        ld64(R3, 1 << 62),
                        alu64(AluOp::Add, R0, R3),
                        EXIT,
                    ];
                    let head = [ld64(R1, a), ld64(R2, b)];
                    let fused: Vec<Insn> =
                        head.into_iter().chain([add, jump]).chain(tail).collect();
                    let apart: Vec<Insn> = head
                        .into_iter()
                        .chain([add, ja(0), jump])
                        .chain(tail)
                        .collect();
                    assert_eq!(
                        run(&fused),
                        run(&apart),
                        "{cond:?} {src:?} on {a:#x}, {b:#x}"
                    );
                }
            }
        }
    }
}

/// r0 = 0; loop: may_goto +2; r0 += 1; goto loop; exit
fn may_goto_loop() -> Vec<Insn> {
    vec![
        mov(R0, 0),
        Insn::MayGoto { off: 2 },
        alu64_imm(AluOp::Add, R0, 1),
        ja(-3),
        EXIT,
    ]
}

#[test]
fn may_goto_falls_through_count_times_then_jumps() {
    let options = Options {
        may_goto_loops: 10,
        ..Options::default()
    };
    assert_eq!(run_with(options, &may_goto_loop()), Ok(10));
    let options = Options {
        may_goto_loops: 0,
        ..Options::default()
    };
    assert_eq!(run_with(options, &may_goto_loop()), Ok(0));
}

#[test]
fn may_goto_default_is_bpf_max_loops() {
    let options = Options {
        insn_budget: 1 << 26,
        ..Options::default()
    };
    assert_eq!(run_with(options, &may_goto_loop()), Ok(8 * 1024 * 1024));
}

#[test]
fn may_goto_count_is_per_frame() {
    // main: call f twice, add results; f loops with may_goto (count 3) and returns the count.
    let insns = [
        call_local(4),             // 0
        mov_reg(R6, R0),           // 1
        call_local(2),             // 2
        alu64(AluOp::Add, R0, R6), // 3
        EXIT,                      // 4
        mov(R0, 0),                // 5: f
        Insn::MayGoto { off: 2 },
        alu64_imm(AluOp::Add, R0, 1),
        ja(-3),
        EXIT,
    ];
    let options = Options {
        may_goto_loops: 3,
        ..Options::default()
    };
    assert_eq!(run_with(options, &insns), Ok(6));
}

#[test]
fn calls_pass_r1_to_r5_and_return_r0() {
    let insns = [
        mov(R1, 40),
        mov(R2, 2),
        call_local(1),
        EXIT,
        mov_reg(R0, R1), // 4: f(a, b) = a + b
        alu64(AluOp::Add, R0, R2),
        EXIT,
    ];
    assert_eq!(run_ok(&insns), 42);
}

#[test]
fn calls_preserve_r6_to_r9_and_the_caller_frame() {
    let insns = [
        mov(R6, 6),
        mov(R7, 7),
        mov(R8, 8),
        mov(R9, 9),
        store_imm(Size::DW, R10, -8, 77),
        mov_reg(R1, R10),
        call_local(8), // 6 -> 15
        // r0 = r6 + r7 + r8 + r9 + *(r10 - 8) + r0(=callee's result) + (r10 == r1)
        alu64(AluOp::Add, R0, R6),
        alu64(AluOp::Add, R0, R7),
        alu64(AluOp::Add, R0, R8),
        alu64(AluOp::Add, R0, R9),
        load(Size::DW, R2, R10, -8),
        alu64(AluOp::Add, R0, R2),
        EXIT,
        EXIT, // 14: never reached
        // 15: callee clobbers r6-r9 and its own stack; its frame is fresh and separate.
        mov(R6, 100),
        mov(R7, 100),
        mov(R8, 100),
        mov(R9, 100),
        load(Size::DW, R0, R10, -8), // fresh frame: zero
        store_imm(Size::DW, R10, -8, 1000),
        jmp(Width::W64, Eq, R10, Source::Reg(R1), 1), // r10 must differ from caller's
        alu64_imm(AluOp::Add, R0, 1),
        EXIT,
    ];
    assert_eq!(run_ok(&insns), 6 + 7 + 8 + 9 + 77 + 1);
}

#[test]
fn callee_can_use_a_pointer_into_the_caller_frame() {
    let insns = [
        store_imm(Size::W, R10, -4, 5),
        mov_reg(R1, R10),
        alu64_imm(AluOp::Add, R1, -4),
        call_local(2),
        load(Size::W, R0, R10, -4),
        EXIT,
        store_imm(Size::W, R1, 0, 9), // 6
        EXIT,
    ];
    assert_eq!(run_ok(&insns), 9);
}

/// `depth` frames: main is `r0 = 0; call f1; r0 += 1; exit`, each f_k is `call f_k+1;
/// r0 += 1; exit` (each call's target is the next group's call), the deepest is
/// `r0 = 100; exit`. The result is 100 + depth - 1.
fn nested_calls(depth: usize) -> Vec<Insn> {
    let mut insns = vec![mov(R0, 0)];
    for _ in 1..depth {
        insns.extend([call_local(2), alu64_imm(AluOp::Add, R0, 1), EXIT]);
    }
    insns.extend([mov(R0, 100), EXIT]);
    insns
}

#[test]
fn call_depth_limit_is_sixteen_frames() {
    assert_eq!(MAX_CALL_FRAMES, 16);
    // 16 frames: main + 15 nested calls, as 7.2 verifies them.
    assert_eq!(run(&nested_calls(16)), Ok(115));
    let err = run(&nested_calls(17)).unwrap_err();
    // The 16th call (at slot 1 + 15 * 3 = 46) would create the 17th frame.
    assert_eq!(err, VmError::CallDepthExceeded { pc: 46, target: 49 });
    assert!(
        err.to_string().starts_with("insn 46: call depth exceeded"),
        "{err}"
    );
}

#[test]
fn call_target_must_be_in_the_program() {
    let err = run(&[call_local(5), EXIT]).unwrap_err();
    assert_eq!(
        err,
        VmError::JumpOutOfProgram {
            pc: 0,
            target: 6,
            len: 2
        }
    );
}

#[test]
fn stack_is_512_bytes_per_frame() {
    let insns = [
        store_imm(Size::B, R10, -(STACK_SIZE as i16), 1),
        load(Size::B, R0, R10, -512),
        EXIT,
    ];
    assert_eq!(run_ok(&insns), 1);
}

#[test]
fn helpers_unknown_and_kfuncs_and_pseudo_ld_imm64_are_errors() {
    let err = run(&[call_helper(1), EXIT]).unwrap_err();
    assert_eq!(err, VmError::UnknownHelper { pc: 0, id: 1 });
    assert_eq!(
        err.to_string(),
        "insn 0: unknown helper 1 (bpf_map_lookup_elem): not provided by this environment"
    );
    let err = run(&[mov(R0, 0), call_helper(9999), EXIT]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "insn 1: unknown helper 9999: not provided by this environment"
    );
    let err = run(&[Insn::Call(CallTarget::Kfunc { btf_id: 5, off: 0 }), EXIT]).unwrap_err();
    assert!(matches!(
        err,
        VmError::Unsupported {
            pc: 0,
            what: Unsupported::Kfunc { .. }
        }
    ));
    let map = Insn::LdImm64 {
        dst: R1,
        kind: bpfemu_isa::LdImm64Kind::MapFd,
        imm: 3,
        next_imm: 0,
    };
    let err = run(&[map, EXIT]).unwrap_err();
    assert!(err.to_string().contains("need the loader"), "{err}");
}

/// Answers every helper call with the number of live stack frames at the time of the call,
/// and a tail call to program 1 for helper 12 (`bpf_tail_call`).
struct CountFrames;

impl bpfemu_vm::Helpers for CountFrames {
    fn call(
        &mut self,
        _id: i32,
        _args: [u64; 5],
        mem: &mut bpfemu_vm::Memory,
    ) -> Result<u64, bpfemu_vm::HelperError> {
        let frames = mem
            .regions()
            .filter(|r| matches!(r.kind(), bpfemu_vm::RegionKind::Stack { .. }))
            .count();
        Ok(frames as u64)
    }

    fn call_outcome(
        &mut self,
        id: i32,
        args: [u64; 5],
        mem: &mut bpfemu_vm::Memory,
    ) -> Result<bpfemu_vm::HelperOutcome, bpfemu_vm::HelperError> {
        match id {
            12 => Ok(bpfemu_vm::HelperOutcome::TailCall(1)),
            _ => self
                .call(id, args, mem)
                .map(bpfemu_vm::HelperOutcome::Return),
        }
    }
}

fn frames_seen(progs: &[bpfemu_isa::Program]) -> u64 {
    bpfemu_vm::Interpreter::default()
        .run_set(
            progs,
            0,
            [0; 5],
            &mut bpfemu_vm::Memory::new(),
            &mut CountFrames,
        )
        .unwrap_or_else(|e| panic!("program failed: {e}"))
}

#[test]
fn a_program_that_never_names_r10_runs_without_a_stack_frame() {
    // Nothing can reach the entry's frame, so none is made; naming r10 anywhere makes one.
    assert_eq!(frames_seen(&[prog(&[call_helper(1), EXIT])]), 0);
    let names_r10 = [call_helper(1), EXIT, mov_reg(R1, R10), EXIT];
    assert_eq!(frames_seen(&[prog(&names_r10)]), 1);
}

#[test]
fn a_frameless_entry_still_gives_its_callees_frames() {
    // main (no r10): calls f, which stores through its frame and counts the live frames.
    let insns = [
        call_local(1), // 0 -> 2
        EXIT,
        store_imm(Size::DW, R10, -8, 40), // 2: f
        call_helper(1),
        load(Size::DW, R1, R10, -8),
        alu64(AluOp::Add, R0, R1),
        EXIT,
    ];
    // f names r10, so the program gets frames: main's and f's are live in f (40 + 2).
    assert_eq!(frames_seen(&[prog(&insns)]), 42);
    // A set whose entry does not name r10 but whose tail-call target does keeps the frame:
    // the target runs in the entry's frame.
    let target = [
        store_imm(Size::DW, R10, -8, 5),
        call_helper(1),
        load(Size::DW, R1, R10, -8),
        alu64(AluOp::Add, R0, R1),
        EXIT,
    ];
    assert_eq!(
        frames_seen(&[prog(&[call_helper(12), EXIT]), prog(&target)]),
        6
    );
}
