//! Round trips between the disassembler and the kernel-syntax assembler.
//!
//! - Every valid instruction, printed by `disasm::insn_text` (bare, and as a verifier-log line
//!   with its `N: (op)` prefix), assembles back to exactly its encoding.
//! - Every bpf_conformance program, assembled from the uBPF dialect, disassembled and assembled
//!   again from kernel syntax, gives the same slots.
//!
//! Excluded because the kernel's text does not carry them (see `asm::kernel`): the `src_reg`
//! kind of `ld_imm64` (only plain constants are generated; the others are checked to come back
//! as plain constants of the printed value) and the module BTF fd (`off`) of a kfunc call (only
//! `off` 0 is generated).

use bpfemu_isa::asm::{assemble_kernel, assemble_ubpf};
use bpfemu_isa::disasm::{insn_text, log_line, program_text};
use bpfemu_isa::{
    AluOp, AtomicOp, ByteOrder, CallTarget, Insn, JmpCond, LdImm64Kind, Program, RawInsn, Reg,
    Size, Source, Width,
};
use proptest::prelude::*;
use std::fs;
use std::path::Path;

fn reg() -> impl Strategy<Value = Reg> {
    (0u8..=10).prop_map(|n| Reg::new(n).expect("r0..r10"))
}

fn width() -> impl Strategy<Value = Width> {
    prop_oneof![Just(Width::W32), Just(Width::W64)]
}

fn size() -> impl Strategy<Value = Size> {
    prop_oneof![Just(Size::B), Just(Size::H), Just(Size::W), Just(Size::DW)]
}

/// Sizes of the legacy packet loads and sign-extending loads (no 8-byte form).
fn narrow_size() -> impl Strategy<Value = Size> {
    prop_oneof![Just(Size::B), Just(Size::H), Just(Size::W)]
}

fn source() -> impl Strategy<Value = Source> {
    prop_oneof![
        reg().prop_map(Source::Reg),
        any::<i32>().prop_map(Source::Imm)
    ]
}

fn alu_op() -> impl Strategy<Value = AluOp> {
    use AluOp::*;
    prop::sample::select(vec![
        Add, Sub, Mul, Div, SDiv, Or, And, Lsh, Rsh, Mod, SMod, Xor, Mov, Arsh,
    ])
}

fn jmp_cond() -> impl Strategy<Value = JmpCond> {
    use JmpCond::*;
    prop::sample::select(vec![Eq, Gt, Ge, Set, Ne, Sgt, Sge, Lt, Le, Slt, Sle])
}

fn alu() -> impl Strategy<Value = Insn> {
    prop_oneof![
        (width(), alu_op(), reg(), source()).prop_map(|(width, op, dst, src)| Insn::Alu {
            width,
            op,
            dst,
            src
        }),
        (width(), reg()).prop_map(|(width, dst)| Insn::Neg { width, dst }),
        (reg(), reg(), prop::sample::select(vec![8u8, 16, 32])).prop_map(|(dst, src, bits)| {
            Insn::MovSx {
                width: Width::W64,
                dst,
                src,
                bits,
            }
        }),
        (reg(), reg(), prop::sample::select(vec![8u8, 16])).prop_map(|(dst, src, bits)| {
            Insn::MovSx {
                width: Width::W32,
                dst,
                src,
                bits,
            }
        }),
        (reg(), reg(), prop::sample::select(vec![1, 1 << 16]))
            .prop_map(|(dst, src, imm)| Insn::AddrSpaceCast { dst, src, imm }),
        (
            prop::sample::select(vec![ByteOrder::ToLe, ByteOrder::ToBe, ByteOrder::Swap]),
            prop::sample::select(vec![16u8, 32, 64]),
            reg()
        )
            .prop_map(|(order, bits, dst)| Insn::Endian { order, bits, dst }),
    ]
}

fn loads_and_stores() -> impl Strategy<Value = Insn> {
    prop_oneof![
        (reg(), any::<i32>(), any::<i32>()).prop_map(|(dst, imm, next_imm)| Insn::LdImm64 {
            dst,
            kind: LdImm64Kind::Imm,
            imm,
            next_imm
        }),
        (narrow_size(), any::<i32>()).prop_map(|(size, imm)| Insn::LdAbs { size, imm }),
        (narrow_size(), reg(), any::<i32>()).prop_map(|(size, src, imm)| Insn::LdInd {
            size,
            src,
            imm
        }),
        (size(), reg(), reg(), any::<i16>()).prop_map(|(size, dst, src, off)| Insn::Load {
            size,
            sign_extend: false,
            dst,
            src,
            off
        }),
        (narrow_size(), reg(), reg(), any::<i16>()).prop_map(|(size, dst, src, off)| {
            Insn::Load {
                size,
                sign_extend: true,
                dst,
                src,
                off,
            }
        }),
        (size(), reg(), any::<i16>(), any::<i32>()).prop_map(|(size, dst, off, imm)| {
            Insn::Store {
                size,
                dst,
                off,
                imm,
            }
        }),
        (size(), reg(), reg(), any::<i16>()).prop_map(|(size, dst, src, off)| Insn::StoreReg {
            size,
            dst,
            src,
            off
        }),
    ]
}

fn atomic() -> impl Strategy<Value = Insn> {
    use AtomicOp::*;
    let read_modify_write = prop::sample::select(vec![
        Add, Or, And, Xor, FetchAdd, FetchOr, FetchAnd, FetchXor, Xchg, Cmpxchg,
    ]);
    prop_oneof![
        (
            read_modify_write,
            prop_oneof![Just(Size::W), Just(Size::DW)],
            reg(),
            reg(),
            any::<i16>()
        )
            .prop_map(|(op, size, dst, src, off)| Insn::Atomic {
                size,
                op,
                dst,
                src,
                off
            }),
        (
            prop::sample::select(vec![LoadAcquire, StoreRelease]),
            size(),
            reg(),
            reg(),
            any::<i16>()
        )
            .prop_map(|(op, size, dst, src, off)| Insn::Atomic {
                size,
                op,
                dst,
                src,
                off
            }),
    ]
}

fn control_flow() -> impl Strategy<Value = Insn> {
    prop_oneof![
        any::<i16>().prop_map(|off| Insn::Ja {
            off: off.into(),
            long: false
        }),
        any::<i32>().prop_map(|off| Insn::Ja { off, long: true }),
        any::<i16>().prop_map(|off| Insn::MayGoto { off }),
        (width(), jmp_cond(), reg(), source(), any::<i16>()).prop_map(
            |(width, cond, dst, src, off)| Insn::Jump {
                width,
                cond,
                dst,
                src,
                off
            }
        ),
        prop_oneof![0i32..=211, any::<i32>()].prop_map(|id| Insn::Call(CallTarget::Helper(id))),
        any::<i32>().prop_map(|rel| Insn::Call(CallTarget::Local(rel))),
        any::<i32>().prop_map(|btf_id| Insn::Call(CallTarget::Kfunc { btf_id, off: 0 })),
        Just(Insn::Exit),
    ]
}

/// Every `Insn` variant the disassembler prints without loss, with in-range fields.
fn insn() -> impl Strategy<Value = Insn> {
    prop_oneof![alu(), loads_and_stores(), atomic(), control_flow()]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4096))]

    #[test]
    fn generated_instructions_are_valid(insn in insn()) {
        let slots = insn.encode();
        prop_assert_eq!(Insn::decode(&slots, 0).map(|(i, _)| i), Ok(insn));
    }

    #[test]
    fn insn_text_assembles_back(insn in insn()) {
        let text = insn_text(&insn);
        let slots = assemble_kernel(&text).map_err(|e| TestCaseError::fail(format!("{text}: {e}")))?;
        prop_assert_eq!(slots, insn.encode(), "{}", text);
    }

    #[test]
    fn log_line_assembles_back(insn in insn(), pc in 0usize..100_000) {
        let code = insn.encode()[0].code;
        let line = log_line(pc, code, &insn);
        let slots = assemble_kernel(&line).map_err(|e| TestCaseError::fail(format!("{line}: {e}")))?;
        prop_assert_eq!(slots, insn.encode(), "{}", line);
    }
}

/// The lossy `ld_imm64` kinds come back as plain constants of what was printed.
#[test]
fn ld_imm64_pseudo_kinds_come_back_as_constants() {
    for kind in [
        LdImm64Kind::MapFd,
        LdImm64Kind::MapValue,
        LdImm64Kind::BtfId,
        LdImm64Kind::Func,
        LdImm64Kind::MapIdx,
        LdImm64Kind::MapIdxValue,
    ] {
        let insn = Insn::LdImm64 {
            dst: Reg::R1,
            kind,
            imm: 5,
            next_imm: 8,
        };
        let printed_value = match kind {
            // Map pointers print as 0x0 to readers without allow_ptr_leaks.
            LdImm64Kind::MapFd | LdImm64Kind::MapValue => 0,
            _ => Insn::imm64(5, 8),
        };
        let constant = Insn::LdImm64 {
            dst: Reg::R1,
            kind: LdImm64Kind::Imm,
            imm: printed_value as u32 as i32,
            next_imm: (printed_value >> 32) as i32,
        };
        assert_eq!(
            assemble_kernel(&insn_text(&insn)).unwrap(),
            constant.encode(),
            "{kind:?}"
        );
    }
}

/// The module BTF fd of a kfunc call is not printed; it comes back as 0 (vmlinux).
#[test]
fn kfunc_module_fd_is_not_printed() {
    let insn = Insn::Call(CallTarget::Kfunc { btf_id: 77, off: 3 });
    let slots = assemble_kernel(&insn_text(&insn)).unwrap();
    assert_eq!(slots, vec![RawInsn::new(0x85, 0, 2, 0, 77)]);
}

/// Programs of the conformance suite the disassembler cannot print: instructions Linux does
/// not have (`call %r2`, uBPF's register call, opcode 0x8d).
const NOT_LINUX_INSTRUCTIONS: &[&str] = &["callx.data"];

#[test]
fn conformance_programs_survive_disassembly() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../shared/conformance/bpf_conformance/tests");
    let mut checked = 0;
    let mut entries: Vec<_> = fs::read_dir(&dir)
        .expect("conformance tests")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "data"))
        .collect();
    entries.sort();
    for path in entries {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let Some(asm) = asm_section(&fs::read_to_string(&path).unwrap()) else {
            continue;
        };
        let slots = assemble_ubpf(&asm).unwrap_or_else(|e| panic!("{name}: {e}"));
        let program = match Program::decode(slots.clone()) {
            Ok(program) => program,
            Err(e) if NOT_LINUX_INSTRUCTIONS.contains(&name.as_str()) => {
                let _ = e;
                continue;
            }
            Err(e) => panic!("{name}: {e}"),
        };
        let text = program_text(&program);
        let again = assemble_kernel(&text).unwrap_or_else(|e| panic!("{name}: {e}\n{text}"));
        assert_eq!(again, slots, "{name}:\n{text}");
        checked += 1;
    }
    assert!(checked >= 300, "only {checked} programs checked");
}

fn asm_section(data: &str) -> Option<String> {
    let mut in_asm = false;
    let mut asm: Option<String> = None;
    for line in data.lines() {
        if let Some(section) = line.strip_prefix("-- ") {
            in_asm = section.trim() == "asm";
            if in_asm {
                asm.get_or_insert_with(String::new);
            }
        } else if in_asm {
            let asm = asm.as_mut().expect("asm started");
            asm.push_str(line);
            asm.push('\n');
        }
    }
    asm
}
