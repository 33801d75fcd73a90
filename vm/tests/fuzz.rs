//! Random programs never panic, never run past the instruction budget, and leave the memory
//! as they found it (apart from the bytes of its regions).

use bpfemu_isa::{Insn, Program, RawInsn};
use bpfemu_vm::{Interpreter, Memory, NoHelpers, Options, RegionKind};
use proptest::prelude::*;

const BUDGET: u64 = 2_000;

/// Opcode bytes, weighted toward those that decode (the strict decoder rejects most others).
fn code() -> impl Strategy<Value = u8> {
    prop_oneof![
        // ALU / ALU64 with every operation and source.
        (0u8..14, any::<bool>(), any::<bool>()).prop_map(|(op, x, w64)| {
            (op << 4) | if x { 0x08 } else { 0 } | if w64 { 0x07 } else { 0x04 }
        }),
        // JMP / JMP32 with every operation and source.
        (0u8..15, any::<bool>(), any::<bool>()).prop_map(|(op, x, j32)| {
            (op << 4) | if x { 0x08 } else { 0 } | if j32 { 0x06 } else { 0x05 }
        }),
        // Loads, stores and atomics of every size and mode.
        (0u8..8, 0u8..4, 0u8..4).prop_map(|(mode, size, class)| (mode << 5) | (size << 3) | class),
        Just(0x18u8), // ld_imm64
        Just(0x95u8), // exit
        any::<u8>(),
    ]
}

fn small() -> impl Strategy<Value = i32> {
    prop_oneof![
        -4i32..8,
        Just(8),
        Just(16),
        Just(32),
        Just(64),
        Just(-8),
        Just(-512),
        Just(0xe1),
        Just(0xf1),
        Just(0x100),
        Just(0x110),
        any::<i32>(),
    ]
}

/// A register field: often 0, since many instructions require a zero field.
fn reg() -> impl Strategy<Value = u8> {
    prop_oneof![3 => Just(0u8), 3 => 0u8..11, 1 => 0u8..16]
}

fn field() -> impl Strategy<Value = i32> {
    prop_oneof![3 => Just(0), 1 => small()]
}

fn slot() -> impl Strategy<Value = RawInsn> {
    (code(), reg(), reg(), field(), field())
        .prop_map(|(code, dst, src, off, imm)| RawInsn::new(code, dst, src, off as i16, imm))
}

/// Keeps the slots that decode where they stand (both slots of an ld_imm64), dropping the
/// rest, so that most generated vectors yield a program.
fn decodable(slots: Vec<RawInsn>) -> Option<Program> {
    let mut kept = Vec::with_capacity(slots.len());
    let mut pc = 0;
    while pc < slots.len() {
        match Insn::decode(&slots, pc) {
            Ok((_, n)) => {
                kept.extend_from_slice(&slots[pc..pc + n]);
                pc += n;
            }
            Err(_) => pc += 1,
        }
    }
    Program::decode(kept).ok()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

    #[test]
    fn random_programs_are_contained(slots in prop::collection::vec(slot(), 1..64), data in prop::collection::vec(any::<u8>(), 0..64)) {
        let Some(prog) = decodable(slots) else { return Ok(()) };
        let mut mem = Memory::new();
        let input = mem.add_copy(RegionKind::Input, &data, true);
        let ro = mem.add_copy(RegionKind::Ctx, &data, false);
        mem.set_packet(Some(ro));
        let base = mem.region(input).unwrap().base();
        let options = Options { insn_budget: BUDGET, may_goto_loops: 16 };
        let mut interp = Interpreter::new(options);
        let _ = interp.run(&prog, [base, data.len() as u64, 0, 0, 0], &mut mem, &mut NoHelpers);
        prop_assert!(interp.executed() <= BUDGET);
        prop_assert_eq!(mem.regions().count(), 2);
        prop_assert_eq!(mem.region(ro).unwrap().bytes(), &data[..]);
    }
}

/// Guards the generator: most vectors must yield programs of some length, or the property
/// above would test nothing.
#[test]
fn generator_yields_programs() {
    use proptest::strategy::ValueTree;
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let strategy = prop::collection::vec(slot(), 1..64);
    let lengths: Vec<usize> = (0..500)
        .filter_map(|_| decodable(strategy.new_tree(&mut runner).ok()?.current()))
        .map(|p| p.len())
        .collect();
    assert!(lengths.len() > 400, "{} programs", lengths.len());
    let long = lengths.iter().filter(|&&n| n >= 5).count();
    eprintln!("{} programs, {long} of 5+ slots", lengths.len());
    assert!(long > 200, "{long} long programs");
}
