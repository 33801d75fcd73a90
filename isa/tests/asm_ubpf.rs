//! Encodings of the uBPF dialect, one per instruction family, and its label rules.

use bpfemu_isa::RawInsn;
use bpfemu_isa::asm::assemble_ubpf;

fn raw(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> RawInsn {
    RawInsn::new(code, dst, src, off, imm)
}

fn one(text: &str) -> RawInsn {
    let slots = assemble_ubpf(text).unwrap_or_else(|e| panic!("{text}: {e}"));
    assert_eq!(slots.len(), 1, "{text}");
    slots[0]
}

#[test]
fn alu() {
    assert_eq!(one("mov32 %r0, 1"), raw(0xb4, 0, 0, 0, 1));
    assert_eq!(one("add %r1, %r2"), raw(0x0f, 1, 2, 0, 0));
    assert_eq!(one("sdiv32 %r1, -3"), raw(0x34, 1, 0, 1, -3));
    assert_eq!(one("smod %r1, %r2"), raw(0x9f, 1, 2, 1, 0));
    assert_eq!(one("arsh32 %r1, 0xffffffff"), raw(0xc4, 1, 0, 0, -1));
    assert_eq!(one("neg %r3"), raw(0x87, 3, 0, 0, 0));
    assert_eq!(one("movsx832 %r0, %r1"), raw(0xbc, 0, 1, 8, 0));
    assert_eq!(one("movsx1664 %r0, %r1"), raw(0xbf, 0, 1, 16, 0));
    assert_eq!(one("movsx3264 %r0, %r1"), raw(0xbf, 0, 1, 32, 0));
    assert_eq!(one("le16 %r0"), raw(0xd4, 0, 0, 0, 16));
    assert_eq!(one("be64 %r0"), raw(0xdc, 0, 0, 0, 64));
    assert_eq!(one("bswap32 %r0"), raw(0xd7, 0, 0, 0, 32));
    assert_eq!(one("swap16 %r0"), raw(0xd7, 0, 0, 0, 16));
}

#[test]
fn memory() {
    assert_eq!(one("ldxdw %r0, [%r1+8]"), raw(0x79, 0, 1, 8, 0));
    assert_eq!(one("ldxh %r0, [%r1]"), raw(0x69, 0, 1, 0, 0));
    assert_eq!(one("ldxsh %r0, [%r1+0x2]"), raw(0x89, 0, 1, 2, 0));
    assert_eq!(one("ldxb %r0, [%r1+0xffff]"), raw(0x71, 0, 1, -1, 0));
    assert_eq!(one("stb [%r10-1], 0xff"), raw(0x72, 10, 0, -1, 0xff));
    assert_eq!(
        one("stdw [%r10-8], 0x11223344"),
        raw(0x7a, 10, 0, -8, 0x11223344)
    );
    assert_eq!(one("stxw [%r10-4], %r1"), raw(0x63, 10, 1, -4, 0));
    assert_eq!(
        assemble_ubpf("lddw %r1, 0x8877665544332211").unwrap(),
        vec![
            raw(0x18, 1, 0, 0, 0x44332211),
            raw(0, 0, 0, 0, 0x88776655_u32 as i32)
        ]
    );
    assert_eq!(
        assemble_ubpf("lddw %r0, -1").unwrap(),
        vec![raw(0x18, 0, 0, 0, -1), raw(0, 0, 0, 0, -1)]
    );
}

#[test]
fn atomics() {
    assert_eq!(one("lock add [%r10-8], %r1"), raw(0xdb, 10, 1, -8, 0x00));
    assert_eq!(
        one("lock fetch or32 [%r10-4], %r3"),
        raw(0xc3, 10, 3, -4, 0x41)
    );
    assert_eq!(one("lock xchg [%r10-8], %r1"), raw(0xdb, 10, 1, -8, 0xe1));
    assert_eq!(
        one("lock cmpxchg32 [%r10-8], %r1"),
        raw(0xc3, 10, 1, -8, 0xf1)
    );
}

#[test]
fn jumps_and_calls() {
    assert_eq!(one("ja +2"), raw(0x05, 0, 0, 2, 0));
    assert_eq!(one("ja32 -1"), raw(0x06, 0, 0, 0, -1));
    assert_eq!(one("jne %r0, 15, +1"), raw(0x55, 0, 0, 1, 15));
    assert_eq!(one("jsle32 %r0, %r1, -3"), raw(0xde, 0, 1, -3, 0));
    assert_eq!(one("jeq %r1, 0x80000000, +1"), raw(0x15, 1, 0, 1, i32::MIN));
    assert_eq!(one("call 5"), raw(0x85, 0, 0, 0, 5));
    assert_eq!(one("call helper 5"), raw(0x85, 0, 0, 0, 5));
    assert_eq!(one("call bpf_map_lookup_elem"), raw(0x85, 0, 0, 0, 1));
    assert_eq!(one("call %r2"), raw(0x8d, 2, 0, 0, 0));
    assert_eq!(one("call runtime 42"), raw(0x85, 0, 2, 0, 42));
    assert_eq!(one("exit"), raw(0x95, 0, 0, 0, 0));
}

#[test]
fn labels() {
    let src = "\
        ja32 target      # long jump over the call
        call local func
    target:
        jeq %r0, 0, exit
        exit
    func:
        exit
    ";
    let slots = assemble_ubpf(src).unwrap();
    assert_eq!(slots[0], raw(0x06, 0, 0, 0, 1));
    assert_eq!(slots[1], raw(0x85, 0, 1, 0, 2));
    // The first `exit` defines the label `exit`.
    assert_eq!(slots[2], raw(0x15, 0, 0, 0, 0));
}

#[test]
fn a_written_exit_label_wins_over_the_implicit_one() {
    let slots = assemble_ubpf("ja exit\nexit\nexit:\nexit").unwrap();
    assert_eq!(slots[0], raw(0x05, 0, 0, 1, 0));
}

#[test]
fn label_errors() {
    let e = assemble_ubpf("a:\na:\nexit").unwrap_err();
    assert_eq!((e.line, e.column), (2, 1));
    assert!(e.message.contains("duplicate label `a`"), "{e}");
    let far = format!("ja end\n{}end:\nexit", "mov %r0, 0\n".repeat(40000));
    let e = assemble_ubpf(&far).unwrap_err();
    assert!(e.message.contains("out of range"), "{e}");
}

#[test]
fn operand_errors() {
    let cases = [
        ("mov %r0", "wrong number of operands for `mov`"),
        ("mov %r0, %rx", "invalid register `%rx`"),
        ("mov 1, %r0", "expected a register like %r1"),
        ("stxw %r10, %r1", "expected a memory operand"),
        ("stw [%r10-4], %r1", "expected an immediate"),
        ("ldxdw %r0, [%r1+8", "expected `]`"),
        ("lock nand [%r10-8], %r1", "unknown atomic operation `nand`"),
        ("call far 3", "expected a call mode"),
        ("call bpf_nonexistent", "unknown helper"),
        ("jeq %r0, 1, [%r1]", "expected a label or a relative offset"),
        ("ja +32768", "jump offset +32768 out of range"),
        ("lddw %r0, 0x10000000000000000", "64-bit immediate"),
        ("movsx3232 %r0, %r1", "unknown mnemonic"),
        ("ldxsdw %r0, [%r1]", "unknown mnemonic"),
    ];
    for (text, reason) in cases {
        let e = assemble_ubpf(text).unwrap_err();
        assert!(e.message.contains(reason), "{text}: `{e}` lacks `{reason}`");
    }
}
