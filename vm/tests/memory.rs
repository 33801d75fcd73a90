//! Checked memory: loads, stores and atomics inside regions, and the faults outside them.

mod common;
use bpfemu_isa::{AluOp, AtomicOp, Insn, Program, Size};
use bpfemu_vm::{
    Access, FaultCause, HelperError, Helpers, Interpreter, MemFault, Memory, NoHelpers, Position,
    RegionKind, VmError, run_on_buffer,
};
use common::*;

fn on_buffer(insns: &[Insn], buf: &mut [u8]) -> Result<u64, VmError> {
    run_on_buffer(&prog(insns), buf, &mut NoHelpers)
}

fn fault_of(err: VmError) -> (usize, MemFault) {
    match err {
        VmError::Memory { pc, fault } => (pc, *fault),
        other => panic!("expected a memory fault, got {other}"),
    }
}

fn position(fault: &MemFault) -> (&str, &Position) {
    match &fault.cause {
        FaultCause::OutOfBounds {
            nearest: Some((region, pos)),
        } => (&region.name, pos),
        other => panic!("expected out of bounds, got {other:?}"),
    }
}

#[test]
fn loads_of_every_size_and_sign_extension() {
    let mut buf = [0x81, 0x82, 0x83, 0x84, 0x85, 0x86, 0x87, 0x88];
    let cases = [
        (load(Size::B, R0, R1, 0), 0x81),
        (load(Size::H, R0, R1, 0), 0x8281),
        (load(Size::W, R0, R1, 0), 0x8483_8281),
        (load(Size::DW, R0, R1, 0), 0x8887_8685_8483_8281),
        (load_sx(Size::B, R0, R1, 0), 0xffff_ffff_ffff_ff81),
        (load_sx(Size::H, R0, R1, 0), 0xffff_ffff_ffff_8281),
        (load_sx(Size::W, R0, R1, 4), 0xffff_ffff_8887_8685),
    ];
    for (insn, want) in cases {
        assert_eq!(on_buffer(&[insn, EXIT], &mut buf), Ok(want), "{insn:?}");
    }
}

#[test]
fn stores_write_back_to_the_buffer() {
    let mut buf = [0u8; 16];
    let insns = [
        ld64(R2, 0x1122_3344_5566_7788),
        store(Size::DW, R1, 0, R2),
        store(Size::H, R1, 8, R2),
        store_imm(Size::B, R1, 10, -1),
        store_imm(Size::W, R1, 12, -2),
        mov(R0, 0),
        EXIT,
    ];
    assert_eq!(on_buffer(&insns, &mut buf), Ok(0));
    assert_eq!(
        buf,
        [
            0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11, 0x88, 0x77, 0xff, 0, 0xfe, 0xff, 0xff,
            0xff
        ]
    );
}

#[test]
fn store_imm_dw_sign_extends() {
    let insns = [
        store_imm(Size::DW, R10, -8, -1),
        load(Size::DW, R0, R10, -8),
        EXIT,
    ];
    assert_eq!(run_ok(&insns), u64::MAX);
}

#[test]
fn empty_buffer_gives_null_r1_and_no_region() {
    assert_eq!(
        on_buffer(&[mov_reg(R0, R1), alu64(AluOp::Or, R0, R2), EXIT], &mut []),
        Ok(0)
    );
    let (pc, fault) = fault_of(on_buffer(&[load(Size::B, R0, R1, 0), EXIT], &mut []).unwrap_err());
    assert_eq!((pc, fault.addr), (0, 0));
    // A null pointer is no place in any region, whatever region happens to be nearest.
    assert_eq!(
        fault.cause,
        FaultCause::OutOfBounds { nearest: None },
        "{fault}"
    );
    assert_eq!(
        fault.to_string(),
        "invalid read of 1 byte at 0x0: no memory region is mapped"
    );
}

#[test]
fn read_past_the_end_of_the_buffer() {
    let mut buf = [0u8; 8];
    let err = on_buffer(&[mov(R0, 0), load(Size::W, R0, R1, 16), EXIT], &mut buf).unwrap_err();
    let text = err.to_string();
    let (pc, fault) = fault_of(err);
    assert_eq!((pc, fault.access, fault.len), (1, Access::Read, 4));
    assert_eq!(
        position(&fault),
        ("input buffer", &Position::PastEnd { by: 12 })
    );
    assert_eq!(
        text,
        "insn 1: invalid read of 4 bytes at input+16: 12 bytes past the end of input buffer (8 bytes)"
    );
}

#[test]
fn access_straddling_the_end() {
    let mut buf = [0u8; 8];
    let err = on_buffer(&[load(Size::DW, R0, R1, 4), EXIT], &mut buf).unwrap_err();
    let (_, fault) = fault_of(err);
    assert_eq!(
        position(&fault),
        ("input buffer", &Position::PastEnd { by: 4 })
    );
    // A write that straddles leaves the buffer untouched.
    let mut buf = [0u8; 8];
    let err = on_buffer(&[store_imm(Size::W, R1, 6, -1), EXIT], &mut buf).unwrap_err();
    assert_eq!(fault_of(err).1.access, Access::Write);
    assert_eq!(buf, [0; 8]);
}

#[test]
fn stack_overflow_and_underflow() {
    // Above the top of the frame (r10 + 0 is one past the end).
    let err = run(&[load(Size::B, R0, R10, 0), EXIT]).unwrap_err();
    let (pc, fault) = fault_of(err);
    assert_eq!(pc, 0);
    assert_eq!(
        position(&fault),
        ("stack frame 0", &Position::PastEnd { by: 1 })
    );
    // Below the bottom: 520 bytes down is 8 bytes before the frame's start.
    let err = run(&[mov(R0, 0), store(Size::DW, R10, -520, R0), EXIT]).unwrap_err();
    let text = err.to_string();
    let (pc, fault) = fault_of(err);
    assert_eq!((pc, fault.access, fault.len), (1, Access::Write, 8));
    assert_eq!(
        position(&fault),
        ("stack frame 0", &Position::BeforeStart { by: 8 })
    );
    assert!(
        text.contains("8 bytes before the start of stack frame 0"),
        "{text}"
    );
}

#[test]
fn overflow_from_a_callee_frame_does_not_reach_the_caller_frame() {
    // The callee writes just above its own frame: a fault, wherever the caller's frame is.
    let insns = [call_local(1), EXIT, store_imm(Size::DW, R10, 0, 1), EXIT];
    let (pc, fault) = fault_of(run(&insns).unwrap_err());
    assert_eq!(pc, 2);
    assert_eq!(position(&fault).0, "stack frame 1");
}

#[test]
fn write_to_a_read_only_region() {
    let mut mem = Memory::new();
    let ro = mem.add_copy(RegionKind::Ctx, &[7; 8], false);
    let base = mem.region(ro).unwrap().base();
    let read = prog(&[load(Size::B, R0, R1, 3), EXIT]);
    let mut interp = Interpreter::default();
    assert_eq!(
        interp.run(&read, [base, 0, 0, 0, 0], &mut mem, &mut NoHelpers),
        Ok(7)
    );
    let write = prog(&[mov(R0, 0), store_imm(Size::B, R1, 3, 1), EXIT]);
    let err = interp
        .run(&write, [base, 0, 0, 0, 0], &mut mem, &mut NoHelpers)
        .unwrap_err();
    let text = err.to_string();
    assert_eq!(
        text, "insn 1: invalid write of 1 byte at ctx+3: ctx (8 bytes) is read-only",
        "{text}"
    );
    let (pc, fault) = fault_of(err);
    assert_eq!((pc, fault.access), (1, Access::Write));
    assert!(matches!(fault.cause, FaultCause::ReadOnly { ref region } if region.name == "ctx"));
    // Atomics need write permission even when they do not end up writing.
    let cmpxchg = prog(&[
        mov(R0, 0),
        mov(R2, 0),
        atomic(Size::W, AtomicOp::Cmpxchg, R1, R2, 0),
        EXIT,
    ]);
    let err = interp
        .run(&cmpxchg, [base, 0, 0, 0, 0], &mut mem, &mut NoHelpers)
        .unwrap_err();
    assert!(matches!(fault_of(err).1.cause, FaultCause::ReadOnly { .. }));
    assert_eq!(mem.region(ro).unwrap().bytes(), &[7; 8]);
}

#[test]
fn runs_leave_no_stack_regions_behind() {
    let mut mem = Memory::new();
    let p = prog(&[call_local(1), EXIT, load(Size::DW, R0, R10, 8), EXIT]);
    let mut interp = Interpreter::default();
    assert!(interp.run(&p, [0; 5], &mut mem, &mut NoHelpers).is_err());
    assert_eq!(mem.regions().count(), 0);
    assert_eq!(
        interp.run(&prog(&[mov(R0, 3), EXIT]), [0; 5], &mut mem, &mut NoHelpers),
        Ok(3)
    );
    assert_eq!(mem.regions().count(), 0);
}

/// mem[0] (8 bytes, at r1) starts as `init`; r2 = operand; runs `op`; returns (r0, r2, mem).
fn atomic_case(size: Size, op: AtomicOp, init: u64, operand: u64, r0: u64) -> (u64, u64, u64) {
    let insns = [
        ld64(R2, operand),
        ld64(R0, r0),
        atomic(size, op, R1, R2, 0),
        store(Size::DW, R1, 8, R2),
        store(Size::DW, R1, 16, R0),
        EXIT,
    ];
    let mut buf = [0u8; 24];
    buf[..8].copy_from_slice(&init.to_le_bytes());
    on_buffer(&insns, &mut buf).unwrap();
    let word = |i: usize| u64::from_le_bytes(buf[i * 8..i * 8 + 8].try_into().unwrap());
    (word(2), word(1), word(0))
}

#[test]
fn atomic_arithmetic_64() {
    use AtomicOp::*;
    let (init, x) = (0x00ff_0000_0000_0f0f, 0x0f0f_0000_0000_00ff);
    assert_eq!(
        atomic_case(Size::DW, Add, init, x, 0),
        (0, x, init.wrapping_add(x))
    );
    assert_eq!(atomic_case(Size::DW, Or, init, x, 0), (0, x, init | x));
    assert_eq!(atomic_case(Size::DW, And, init, x, 0), (0, x, init & x));
    assert_eq!(atomic_case(Size::DW, Xor, init, x, 0), (0, x, init ^ x));
    assert_eq!(
        atomic_case(Size::DW, FetchAdd, init, x, 0),
        (0, init, init.wrapping_add(x))
    );
    assert_eq!(
        atomic_case(Size::DW, FetchOr, init, x, 0),
        (0, init, init | x)
    );
    assert_eq!(
        atomic_case(Size::DW, FetchAnd, init, x, 0),
        (0, init, init & x)
    );
    assert_eq!(
        atomic_case(Size::DW, FetchXor, init, x, 0),
        (0, init, init ^ x)
    );
    assert_eq!(atomic_case(Size::DW, Xchg, init, x, 0), (0, init, x));
}

#[test]
fn atomic_arithmetic_32_touches_only_the_low_word_and_zero_extends_fetches() {
    use AtomicOp::*;
    let init = 0xaaaa_aaaa_ffff_fff0;
    let x = 0x1234_5678_0000_0020; // the upper half of the operand is ignored
    let hi = init & !0xffff_ffff;
    assert_eq!(atomic_case(Size::W, Add, init, x, 0), (0, x, hi | 0x10));
    assert_eq!(
        atomic_case(Size::W, FetchAdd, init, x, 0),
        (0, 0xffff_fff0, hi | 0x10)
    );
    assert_eq!(
        atomic_case(Size::W, FetchOr, init, x, 0),
        (0, 0xffff_fff0, hi | 0xffff_fff0)
    );
    assert_eq!(
        atomic_case(Size::W, FetchAnd, init, x, 0),
        (0, 0xffff_fff0, hi | 0x20)
    );
    assert_eq!(
        atomic_case(Size::W, FetchXor, init, x, 0),
        (0, 0xffff_fff0, hi | 0xffff_ffd0)
    );
    assert_eq!(
        atomic_case(Size::W, Xchg, init, x, 0),
        (0, 0xffff_fff0, hi | 0x20)
    );
}

#[test]
fn cmpxchg_success_and_failure() {
    use AtomicOp::Cmpxchg;
    // 64-bit: equal → store, r0 = old; different → no store, r0 = old.
    assert_eq!(atomic_case(Size::DW, Cmpxchg, 5, 9, 5), (5, 9, 9));
    assert_eq!(atomic_case(Size::DW, Cmpxchg, 5, 9, 6), (5, 9, 5));
    // 32-bit compares the low half of r0 and zero-extends the old value into r0.
    let init = 0x7777_7777_8000_0005;
    assert_eq!(
        atomic_case(Size::W, Cmpxchg, init, 9, 0xffff_ffff_8000_0005),
        (0x8000_0005, 9, 0x7777_7777_0000_0009)
    );
    assert_eq!(
        atomic_case(Size::W, Cmpxchg, init, 9, 6),
        (0x8000_0005, 9, init)
    );
}

#[test]
fn load_acquire_and_store_release() {
    let mut buf = 0x8877_6655_4433_2211u64.to_le_bytes();
    for (size, want) in [
        (Size::B, 0x11),
        (Size::H, 0x2211),
        (Size::W, 0x4433_2211),
        (Size::DW, 0x8877_6655_4433_2211),
    ] {
        let insns = [
            mov(R0, -1),
            atomic(size, AtomicOp::LoadAcquire, R0, R1, 0),
            EXIT,
        ];
        assert_eq!(on_buffer(&insns, &mut buf), Ok(want), "{size:?}");
    }
    let mut buf = [0u8; 8];
    let insns = [
        mov(R2, -1),
        atomic(Size::H, AtomicOp::StoreRelease, R1, R2, 2),
        mov(R0, 0),
        EXIT,
    ];
    assert_eq!(on_buffer(&insns, &mut buf), Ok(0));
    assert_eq!(buf, [0, 0, 0xff, 0xff, 0, 0, 0, 0]);
}

#[test]
fn atomic_out_of_bounds_names_the_pc() {
    let mut buf = [0u8; 8];
    let insns = [mov(R2, 1), atomic(Size::DW, AtomicOp::Add, R1, R2, 4), EXIT];
    let (pc, fault) = fault_of(on_buffer(&insns, &mut buf).unwrap_err());
    assert_eq!((pc, fault.access, fault.len), (1, Access::Write, 8));
}

#[test]
fn legacy_packet_loads() {
    let mut mem = Memory::new();
    let pkt = mem.add_copy(RegionKind::Packet, &[0x12, 0x34, 0x56, 0x78, 0x9a], false);
    mem.set_packet(Some(pkt));
    let mut interp = Interpreter::default();
    let mut run = |insns: &[Insn]| interp.run(&prog(insns), [0; 5], &mut mem, &mut NoHelpers);
    let abs = |size, imm| Insn::LdAbs { size, imm };
    assert_eq!(run(&[abs(Size::B, 1), EXIT]), Ok(0x34));
    assert_eq!(run(&[abs(Size::H, 1), EXIT]), Ok(0x3456));
    assert_eq!(run(&[abs(Size::W, 1), EXIT]), Ok(0x3456_789a));
    let ind = Insn::LdInd {
        size: Size::H,
        src: R2,
        imm: 1,
    };
    assert_eq!(run(&[mov(R2, 2), ind, EXIT]), Ok(0x789a));
    // Out of bounds (past the end, negative offset) ends the function with r0 = 0.
    assert_eq!(run(&[mov(R0, 5), abs(Size::W, 2), mov(R0, 7), EXIT]), Ok(0));
    assert_eq!(run(&[abs(Size::B, -1), mov(R0, 7), EXIT]), Ok(0));
    assert_eq!(run(&[mov(R2, -3), ind, mov(R0, 7), EXIT]), Ok(0));
    // In a subprogram it returns 0 to the caller.
    let sub = [
        call_local(2),
        alu64_imm(AluOp::Add, R0, 1),
        EXIT,
        abs(Size::B, 9),
        EXIT,
    ];
    assert_eq!(run(&sub), Ok(1));
    // Without a packet it is an error.
    let err = run_on_buffer(&prog(&[abs(Size::B, 0), EXIT]), &mut [1], &mut NoHelpers);
    assert_eq!(err, Err(VmError::NoPacket { pc: 0 }));
}

/// Helpers: 1 returns the sum of its args; 2 reads 4 bytes at r1; 3 fails.
struct TestHelpers;

impl Helpers for TestHelpers {
    fn call(&mut self, id: i32, args: [u64; 5], mem: &mut Memory) -> Result<u64, HelperError> {
        match id {
            1 => Ok(args.iter().sum()),
            2 => Ok(mem.read(args[0], 4)?),
            3 => Err(HelperError::Failed("no good".into())),
            _ => Err(HelperError::Unknown(id)),
        }
    }
}

#[test]
fn helper_calls() {
    let run = |insns: &[Insn]| {
        Interpreter::default().run(
            &prog(insns),
            [1, 2, 3, 4, 5],
            &mut Memory::new(),
            &mut TestHelpers,
        )
    };
    // r1-r5 are the helper's arguments and stay unchanged after the call.
    assert_eq!(
        run(&[call_helper(1), alu64(AluOp::Add, R0, R1), EXIT]),
        Ok(16)
    );
    // Helpers reach the stack through the memory.
    let insns = [
        store_imm(Size::W, R10, -4, 0x55),
        mov_reg(R1, R10),
        alu64_imm(AluOp::Add, R1, -4),
        call_helper(2),
        EXIT,
    ];
    assert_eq!(run(&insns), Ok(0x55));
    let err = run(&[mov(R1, 16), call_helper(2), EXIT]).unwrap_err();
    assert!(
        matches!(
            err,
            VmError::Helper {
                pc: 1,
                id: 2,
                source: HelperError::Memory(_)
            }
        ),
        "{err}"
    );
    let err = run(&[call_helper(3), EXIT]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "insn 0: helper 3 (bpf_map_delete_elem) failed: no good"
    );
    assert_eq!(
        run(&[call_helper(77), EXIT]),
        Err(VmError::UnknownHelper { pc: 0, id: 77 })
    );
}

#[test]
fn engine_trait_runs_the_interpreter() {
    use bpfemu_vm::Engine;
    let engine = Interpreter::default();
    assert_eq!(engine.name(), "interp");
    let program: Program = prog(&[mov_reg(R0, R1), alu64_imm(AluOp::Mul, R0, 3), EXIT]);
    let mut exe = engine.prepare(&program).unwrap();
    let mut mem = Memory::new();
    assert_eq!(exe.run([5, 0, 0, 0, 0], &mut mem, &mut NoHelpers), Ok(15));
    assert_eq!(exe.run([7, 0, 0, 0, 0], &mut mem, &mut NoHelpers), Ok(21));
}
