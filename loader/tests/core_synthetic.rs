//! CO-RE on hand-built BTF: ambiguity, validation and patching errors, load-size changes,
//! flavors, enum64, flexible arrays and candidate pruning.

use bpfemu_isa::RawInsn;
use bpfemu_loader::btf::*;
use bpfemu_loader::core_relo::{CoreFailure, CoreRelocator, POISON_HELPER_ID, relocate};

fn t(name: &str, kind: BtfKind) -> BtfType {
    BtfType {
        name: name.into(),
        kind,
    }
}
fn int(name: &str, size: u32, signed: bool) -> BtfType {
    let encoding = IntEncoding {
        signed,
        ..Default::default()
    };
    t(
        name,
        BtfKind::Int {
            size,
            encoding,
            bit_offset: 0,
            bits: (size * 8) as u8,
        },
    )
}
fn m(name: &str, ty: TypeId, bit_offset: u32) -> Member {
    Member {
        name: name.into(),
        ty,
        bit_offset,
        bitfield_size: 0,
    }
}
fn strukt(name: &str, size: u32, members: Vec<Member>) -> BtfType {
    t(name, BtfKind::Struct { size, members })
}
fn btf(types: Vec<BtfType>) -> Btf {
    let mut all = vec![t("", BtfKind::Void)];
    all.extend(types);
    Btf {
        types: all,
        strings: vec![0],
        raw_refusal: None,
    }
}
fn relo(insn: u32, type_id: TypeId, access: &str, kind: CoreReloKind) -> CoreRelo {
    CoreRelo {
        insn,
        type_id,
        access: access.into(),
        kind,
    }
}
const LDX_W: u8 = 0x61;
const LDX_DW: u8 = 0x79;
const MOV64_K: u8 = 0xb7;

/// Local: [1] u32, [2] struct foo { u32 a; u32 b; }.
fn local() -> Btf {
    btf(vec![
        int("unsigned int", 4, false),
        strukt("foo", 8, vec![m("a", 1, 0), m("b", 1, 32)]),
    ])
}

#[test]
fn flavors_match_and_agreeing_candidates_are_fine() {
    // Two target flavors that place `b` identically.
    let target = btf(vec![
        int("unsigned int", 4, false),
        strukt("foo", 16, vec![m("x", 1, 0), m("b", 1, 64)]),
        strukt("foo___v2", 16, vec![m("b", 1, 64)]),
    ]);
    let mut insns = [RawInsn::new(LDX_W, 0, 1, 4, 0)];
    relocate(
        &mut insns,
        &[relo(0, 2, "0:1", CoreReloKind::FieldByteOffset)],
        &local(),
        &target,
    )
    .unwrap();
    assert_eq!(insns[0].off, 8);
}

#[test]
fn offset_ambiguity_is_an_error() {
    let target = btf(vec![
        int("unsigned int", 4, false),
        strukt("foo", 16, vec![m("b", 1, 64)]),
        strukt("foo___v2", 16, vec![m("b", 1, 96)]),
    ]);
    let mut insns = [RawInsn::new(LDX_W, 0, 1, 4, 0)];
    let e = relocate(
        &mut insns,
        &[relo(0, 2, "0:1", CoreReloKind::FieldByteOffset)],
        &local(),
        &target,
    )
    .unwrap_err();
    assert_eq!(
        e.reason,
        CoreFailure::FieldOffsetAmbiguity {
            first: 64,
            other: 96
        }
    );
    assert_eq!(
        (e.insn, e.type_name.as_str(), e.access.as_str()),
        (0, "struct foo", "0:1")
    );
    assert!(
        e.to_string()
            .contains("<byte_off> at insn #0 for [2] struct foo access '0:1'"),
        "{e}"
    );
}

#[test]
fn decision_ambiguity_is_an_error() {
    // Same offset, different sizes.
    let target = btf(vec![
        int("unsigned int", 4, false),
        int("unsigned long", 8, false),
        strukt("foo", 16, vec![m("b", 1, 64)]),
        strukt("foo___v2", 16, vec![m("b", 2, 64)]),
    ]);
    let mut insns = [RawInsn::new(MOV64_K, 1, 0, 0, 4)];
    let e = relocate(
        &mut insns,
        &[relo(0, 2, "0:1", CoreReloKind::FieldByteSize)],
        &local(),
        &target,
    )
    .unwrap_err();
    assert!(
        matches!(e.reason, CoreFailure::DecisionAmbiguity { .. }),
        "{e}"
    );
}

#[test]
fn instruction_must_hold_the_local_value() {
    let target = btf(vec![
        int("unsigned int", 4, false),
        strukt("foo", 8, vec![m("b", 1, 0)]),
    ]);
    let mut insns = [RawInsn::new(LDX_W, 0, 1, 0, 0)];
    let e = relocate(
        &mut insns,
        &[relo(0, 2, "0:1", CoreReloKind::FieldByteOffset)],
        &local(),
        &target,
    )
    .unwrap_err();
    assert!(
        matches!(
            e.reason,
            CoreFailure::UnexpectedValue {
                class: "LDX/ST/STX",
                got: 0,
                expected: 4,
                new: 0
            }
        ),
        "{e}"
    );
}

#[test]
fn load_width_follows_unsigned_fields_and_poisons_signed_ones() {
    let grow = |signed| {
        btf(vec![
            int("long", 8, signed),
            strukt("foo", 16, vec![m("b", 1, 64)]),
        ])
    };
    let r = [relo(0, 2, "0:1", CoreReloKind::FieldByteOffset)];
    let mut insns = [RawInsn::new(LDX_W, 0, 1, 4, 0)];
    relocate(&mut insns, &r, &local(), &grow(false)).unwrap();
    assert_eq!(insns[0], RawInsn::new(LDX_DW, 0, 1, 8, 0));
    let mut insns = [RawInsn::new(LDX_W, 0, 1, 4, 0)];
    relocate(&mut insns, &r, &local(), &grow(true)).unwrap();
    assert_eq!(insns[0], RawInsn::new(0x85, 0, 0, 0, POISON_HELPER_ID));
}

#[test]
fn missing_field_poisons_ld_imm64_both_slots_but_exists_gives_zero() {
    let target = btf(vec![
        int("unsigned int", 4, false),
        strukt("foo", 4, vec![m("a", 1, 0)]),
    ]);
    let mut insns = [
        RawInsn::new(0x18, 1, 0, 0, 4),
        RawInsn::default(),
        RawInsn::new(MOV64_K, 2, 0, 0, 1),
    ];
    let relos = [
        relo(0, 2, "0:1", CoreReloKind::FieldByteOffset),
        relo(2, 2, "0:1", CoreReloKind::FieldExists),
    ];
    relocate(&mut insns, &relos, &local(), &target).unwrap();
    let poison = RawInsn::new(0x85, 0, 0, 0, POISON_HELPER_ID);
    assert_eq!(insns, [poison, poison, RawInsn::new(MOV64_K, 2, 0, 0, 0)]);
}

#[test]
fn patching_errors() {
    let target = local();
    let l = local();
    let r = |insn, access: &str| [relo(insn, 2, access, CoreReloKind::FieldByteOffset)];
    let check = |insns: &mut [RawInsn], relos: &[CoreRelo]| {
        relocate(insns, relos, &l, &target).unwrap_err().reason
    };
    assert_eq!(
        check(&mut [RawInsn::new(LDX_W, 0, 1, 4, 0)], &r(5, "0:1")),
        CoreFailure::InsnOutOfRange { len: 1 }
    );
    assert!(matches!(
        check(&mut [RawInsn::new(0x0f, 1, 2, 0, 0)], &r(0, "0:1")),
        CoreFailure::UnsupportedInsn { .. }
    ));
    assert_eq!(
        check(&mut [RawInsn::new(0x18, 1, 0, 0, 4)], &r(0, "0:1")),
        CoreFailure::BadLdImm64
    );
    assert!(matches!(
        check(&mut [RawInsn::new(LDX_W, 0, 1, 4, 0)], &r(0, "0:7")),
        CoreFailure::BadAccess(_)
    ));
    assert!(matches!(
        check(&mut [RawInsn::new(LDX_W, 0, 1, 4, 0)], &r(0, "0::1")),
        CoreFailure::BadAccess(_)
    ));
    assert!(matches!(
        check(&mut [RawInsn::new(LDX_W, 0, 1, 4, 0)], &r(0, ":1")),
        CoreFailure::BadAccess(_)
    ));
}

#[test]
fn anonymous_local_type_is_rejected_but_local_type_id_is_not() {
    let l = btf(vec![int("int", 4, true), strukt("", 4, vec![m("a", 1, 0)])]);
    let mut insns = [RawInsn::new(MOV64_K, 1, 0, 0, 0)];
    let e = relocate(
        &mut insns,
        &[relo(0, 2, "0", CoreReloKind::TypeSize)],
        &l,
        &l,
    )
    .unwrap_err();
    assert_eq!(e.reason, CoreFailure::AnonymousType);
    relocate(
        &mut insns,
        &[relo(0, 2, "0", CoreReloKind::TypeIdLocal)],
        &l,
        &l,
    )
    .unwrap();
    assert_eq!(insns[0].imm, 2);
}

#[test]
fn enum64_values_and_enum_sign_extension() {
    let l = btf(vec![t(
        "e",
        BtfKind::Enum {
            size: 4,
            signed: false,
            values: vec![EnumValue {
                name: "V___a".into(),
                value: 1,
            }],
        },
    )]);
    let target = btf(vec![
        t(
            "e",
            BtfKind::Enum64 {
                size: 8,
                signed: false,
                values: vec![EnumValue {
                    name: "V".into(),
                    value: 1 << 40,
                }],
            },
        ),
        t(
            "e___2",
            BtfKind::Enum {
                size: 4,
                signed: false,
                values: vec![EnumValue {
                    name: "W".into(),
                    value: 0x8000_0000,
                }],
            },
        ),
    ]);
    let mut insns = [RawInsn::new(0x18, 1, 0, 0, 1), RawInsn::default()];
    relocate(
        &mut insns,
        &[relo(0, 1, "0", CoreReloKind::EnumvalValue)],
        &l,
        &target,
    )
    .unwrap();
    assert_eq!((insns[0].imm, insns[1].imm), (0, 1 << 8));
    // A 32-bit enumerator is sign-extended, as libbpf reads it through a signed field.
    let target = btf(vec![t(
        "e",
        BtfKind::Enum {
            size: 4,
            signed: false,
            values: vec![EnumValue {
                name: "V".into(),
                value: 0x8000_0000,
            }],
        },
    )]);
    let mut insns = [RawInsn::new(0x18, 1, 0, 0, 1), RawInsn::default()];
    relocate(
        &mut insns,
        &[relo(0, 1, "0", CoreReloKind::EnumvalValue)],
        &l,
        &target,
    )
    .unwrap();
    assert_eq!((insns[0].imm, insns[1].imm), (i32::MIN, -1));
}

#[test]
fn flexible_array_index_beyond_zero_length() {
    // struct foo { u32 n; u32 data[]; }; access data[3].
    let l = btf(vec![
        int("unsigned int", 4, false),
        t(
            "",
            BtfKind::Array {
                elem: 1,
                index: 1,
                len: 0,
            },
        ),
        strukt("foo", 4, vec![m("n", 1, 0), m("data", 2, 32)]),
    ]);
    let mut insns = [RawInsn::new(LDX_W, 0, 1, 16, 0)];
    relocate(
        &mut insns,
        &[relo(0, 3, "0:1:3", CoreReloKind::FieldByteOffset)],
        &l,
        &l,
    )
    .unwrap();
    assert_eq!(insns[0].off, 16);
}

#[test]
fn candidates_are_pruned_to_those_that_matched() {
    let l = local();
    // `foo` lacks `a`; `foo___2` has both fields.
    let target = btf(vec![
        int("unsigned int", 4, false),
        strukt("foo", 8, vec![m("b", 1, 32)]),
        strukt("foo___2", 8, vec![m("a", 1, 32), m("b", 1, 0)]),
    ]);
    let mut r = CoreRelocator::new(&l, &target);
    let a = r
        .resolve(0, &relo(0, 2, "0:0", CoreReloKind::FieldByteOffset))
        .unwrap();
    assert_eq!(a.new_val, 4);
    // Only foo___2 is left, so `b` resolves to 0 (with foo still in, this would be ambiguous).
    let b = r
        .resolve(1, &relo(0, 2, "0:1", CoreReloKind::FieldByteOffset))
        .unwrap();
    assert_eq!(b.new_val, 0);
}

#[test]
fn type_matches_is_stricter_than_type_exists() {
    let l = local();
    let target = btf(vec![
        int("unsigned int", 8, false),
        strukt("foo", 16, vec![m("a", 1, 0), m("b", 1, 64)]),
    ]);
    let mut r = CoreRelocator::new(&l, &target);
    assert_eq!(
        r.resolve(0, &relo(0, 2, "0", CoreReloKind::TypeExists))
            .unwrap()
            .new_val,
        1
    );
    assert_eq!(
        r.resolve(1, &relo(0, 2, "0", CoreReloKind::TypeMatches))
            .unwrap()
            .new_val,
        0
    );
    let mut r = CoreRelocator::new(&l, &l);
    assert_eq!(
        r.resolve(2, &relo(0, 2, "0", CoreReloKind::TypeMatches))
            .unwrap()
            .new_val,
        1
    );
}
