//! Decoding is lossless and strict: every slot sequence that decodes re-encodes to the same
//! bytes, and a reserved field set on a valid instruction is rejected, naming the field.

use bpfemu_isa::opcode::*;
use bpfemu_isa::{DecodeErrorKind, Insn, Program, ProgramError, RawInsn};
use proptest::prelude::*;

/// Field values that hit the interesting cases far more often than uniform random words would.
fn slot() -> impl Strategy<Value = RawInsn> {
    let reg = prop_oneof![8 => 0u8..=10, 1 => 0u8..=15];
    let off = prop_oneof![4 => Just(0i16), 1 => Just(1), 1 => prop::sample::select(vec![8i16, 16, 32]), 2 => any::<i16>()];
    let imm = prop_oneof![
        4 => Just(0i32),
        2 => prop::sample::select(vec![1i32, 16, 32, 64, 0x40, 0x41, 0x50, 0x51, 0xa0, 0xa1, 0xe1, 0xf1, 0x100, 0x110, 1 << 16]),
        3 => any::<i32>(),
    ];
    // Loads of class LD and stores of class ST have few valid opcodes: give them a fair share.
    let code = prop_oneof![
        6 => any::<u8>(),
        1 => prop::sample::select(vec![0x18u8, 0x20, 0x28, 0x30, 0x40, 0x48, 0x50, 0x62, 0x6a, 0x72, 0x7a]),
    ];
    (code, reg.clone(), reg, off, imm)
        .prop_map(|(code, dst, src, off, imm)| RawInsn::new(code, dst, src, off, imm))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(20_000))]

    #[test]
    fn raw_bytes_round_trip(word in any::<u64>()) {
        prop_assert_eq!(RawInsn::from_u64(word).to_u64(), word);
    }

    #[test]
    fn decoded_slots_reencode_identically(slots in prop::collection::vec(slot(), 1..6)) {
        if let Ok(prog) = Program::decode(slots.clone()) {
            let mut again = Vec::new();
            for (_, insn) in prog.iter() {
                insn.encode_into(&mut again);
            }
            prop_assert_eq!(again, slots);
        }
    }

    #[test]
    fn decode_of_encode_is_identity(slots in prop::collection::vec(slot(), 1..4)) {
        if let Ok(prog) = Program::decode(slots) {
            for (pc, insn) in prog.iter() {
                let encoded = insn.encode();
                let (back, n) = Insn::decode(&encoded, 0).unwrap();
                prop_assert_eq!(&back, insn, "pc {}", pc);
                prop_assert_eq!(n, encoded.len());
            }
        }
    }
}

fn decode_one(raw: RawInsn) -> Result<Insn, DecodeErrorKind> {
    Insn::decode(&[raw, RawInsn::default()], 0)
        .map(|(i, _)| i)
        .map_err(|e| e.kind)
}

fn reserved(field: &str, result: Result<Insn, DecodeErrorKind>) {
    match result {
        Err(DecodeErrorKind::ReservedField { field: f, .. }) => assert_eq!(f, field),
        other => panic!("expected reserved field {field} error, got {other:?}"),
    }
}

#[test]
fn reserved_fields_are_rejected_by_name() {
    let add_k = BPF_ALU64 | BPF_ADD | BPF_K;
    let add_x = BPF_ALU64 | BPF_ADD | BPF_X;
    reserved("src", decode_one(RawInsn::new(add_k, 0, 1, 0, 1)));
    reserved("off", decode_one(RawInsn::new(add_k, 0, 0, 1, 1)));
    reserved("imm", decode_one(RawInsn::new(add_x, 0, 1, 0, 1)));
    reserved(
        "off",
        decode_one(RawInsn::new(BPF_ALU | BPF_END | BPF_TO_LE, 1, 0, 1, 16)),
    );
    reserved(
        "src",
        decode_one(RawInsn::new(BPF_ALU | BPF_END | BPF_TO_BE, 1, 1, 0, 16)),
    );
    reserved(
        "imm",
        decode_one(RawInsn::new(BPF_ALU64 | BPF_NEG, 1, 0, 0, 1)),
    );
    reserved(
        "dst",
        decode_one(RawInsn::new(BPF_JMP | BPF_CALL, 1, 0, 0, 1)),
    );
    reserved(
        "off",
        decode_one(RawInsn::new(BPF_JMP | BPF_CALL, 0, 0, 1, 1)),
    );
    reserved(
        "imm",
        decode_one(RawInsn::new(BPF_JMP | BPF_JA, 0, 0, 1, 1)),
    );
    reserved(
        "off",
        decode_one(RawInsn::new(BPF_JMP32 | BPF_JA, 0, 0, 1, 1)),
    );
    reserved(
        "dst",
        decode_one(RawInsn::new(BPF_JMP | BPF_EXIT, 1, 0, 0, 0)),
    );
    reserved(
        "off",
        decode_one(RawInsn::new(BPF_JMP | BPF_EXIT, 0, 0, 1, 0)),
    );
    reserved(
        "src",
        decode_one(RawInsn::new(BPF_JMP | BPF_JEQ | BPF_K, 1, 2, 1, 0)),
    );
    reserved(
        "imm",
        decode_one(RawInsn::new(BPF_JMP | BPF_JEQ | BPF_X, 1, 2, 1, 7)),
    );
    reserved(
        "imm",
        decode_one(RawInsn::new(BPF_LDX | BPF_MEM | BPF_W, 0, 1, 0, 1)),
    );
    reserved(
        "src",
        decode_one(RawInsn::new(BPF_ST | BPF_MEM | BPF_W, 10, 1, -8, 1)),
    );
    reserved(
        "imm",
        decode_one(RawInsn::new(BPF_STX | BPF_MEM | BPF_DW, 10, 1, -8, 1)),
    );
    reserved(
        "off",
        decode_one(RawInsn::new(BPF_LD | BPF_IMM | BPF_DW, 1, 0, 1, 1)),
    );
    reserved(
        "dst",
        decode_one(RawInsn::new(BPF_LD | BPF_ABS | BPF_W, 1, 0, 0, 1)),
    );
}

#[test]
fn invalid_encodings_are_rejected() {
    let kind = |raw| decode_one(raw).unwrap_err();
    assert_eq!(
        kind(RawInsn::new(0xff, 0, 0, 0, 0)),
        DecodeErrorKind::UnknownOpcode
    );
    assert_eq!(
        kind(RawInsn::new(BPF_ALU64 | BPF_END | BPF_TO_BE, 1, 0, 0, 16)),
        DecodeErrorKind::UnknownOpcode
    );
    assert!(matches!(
        kind(RawInsn::new(BPF_ALU | BPF_END, 1, 0, 0, 8)),
        DecodeErrorKind::InvalidValue { .. }
    ));
    assert!(matches!(
        kind(RawInsn::new(BPF_ALU | BPF_MOV | BPF_X, 1, 2, 32, 0)),
        DecodeErrorKind::InvalidValue { .. }
    ));
    assert!(matches!(
        kind(RawInsn::new(BPF_ALU64 | BPF_MOV | BPF_X, 11, 2, 0, 0)),
        DecodeErrorKind::InvalidRegister { reg: 11, .. }
    ));
    assert!(matches!(
        kind(RawInsn::new(BPF_STX | BPF_ATOMIC | BPF_B, 1, 2, 0, 0)),
        DecodeErrorKind::InvalidValue { .. }
    ));
    assert!(matches!(
        kind(RawInsn::new(BPF_STX | BPF_ATOMIC | BPF_DW, 1, 2, 0, 0x02)),
        DecodeErrorKind::InvalidValue { .. }
    ));
    assert_eq!(
        kind(RawInsn::new(BPF_LDX | BPF_MEMSX | BPF_DW, 1, 2, 0, 0)),
        DecodeErrorKind::UnknownOpcode
    );
    assert_eq!(
        kind(RawInsn::new(BPF_JMP | BPF_CALL | BPF_X, 0, 2, 0, 0)),
        DecodeErrorKind::UnknownOpcode
    );
}

#[test]
fn ld_imm64_needs_a_clean_second_slot() {
    let first = RawInsn::new(BPF_LD | BPF_IMM | BPF_DW, 1, 0, 0, 7);
    let err = Program::decode(vec![first]).unwrap_err();
    assert!(
        matches!(err, ProgramError::Decode(e) if e.kind == DecodeErrorKind::TruncatedLdImm64 && e.pc == 0)
    );
    let err = Program::decode(vec![first, RawInsn::new(0, 1, 0, 0, 0)]).unwrap_err();
    assert!(matches!(err, ProgramError::Decode(e) if e.kind == DecodeErrorKind::BadLdImm64Second));
    let prog = Program::decode(vec![
        first,
        RawInsn::new(0, 0, 0, 0, 1),
        RawInsn::new(BPF_JMP | BPF_EXIT, 0, 0, 0, 0),
    ])
    .unwrap();
    assert_eq!(prog.insn(1), None);
    assert_eq!(prog.insn(2), Some(&Insn::Exit));
    match prog.insn(0) {
        Some(Insn::LdImm64 { imm, next_imm, .. }) => {
            assert_eq!(Insn::imm64(*imm, *next_imm), 0x1_0000_0007)
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn empty_program_is_an_error() {
    assert_eq!(
        Program::decode(Vec::new()).unwrap_err(),
        ProgramError::Empty
    );
}

#[test]
fn decode_error_names_index_and_opcode() {
    let err = Program::decode(vec![
        RawInsn::new(BPF_JMP | BPF_EXIT, 0, 0, 0, 0),
        RawInsn::new(0x07, 0, 0, 1, 1),
    ])
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "insn 1 (opcode 0x07): reserved field off must be 0, is 1"
    );
}

/// Guards the property tests above against passing vacuously: the slot generator must produce
/// decodable instructions of every class often.
#[test]
fn generator_reaches_every_class() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let strategy = slot();
    let mut decoded_per_class = [0usize; 8];
    for _ in 0..20_000 {
        let raw = strategy.new_tree(&mut runner).unwrap().current();
        if decode_one(raw).is_ok() {
            decoded_per_class[class(raw.code) as usize] += 1;
        }
    }
    for (class, count) in decoded_per_class.iter().enumerate() {
        assert!(
            *count >= 50,
            "class {class}: only {count} of 20000 random slots decoded"
        );
    }
}
