//! The kernel-syntax assembler on the forms users paste from verifier logs and bpftool dumps,
//! on hand-written programs with labels, and on the errors it must report.

use bpfemu_isa::RawInsn;
use bpfemu_isa::asm::{AsmError, assemble_kernel};

fn one(text: &str) -> RawInsn {
    let slots = assemble_kernel(text).unwrap_or_else(|e| panic!("{text}: {e}"));
    assert_eq!(slots.len(), 1, "{text}");
    slots[0]
}

fn raw(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> RawInsn {
    RawInsn::new(code, dst, src, off, imm)
}

fn error(text: &str) -> AsmError {
    match assemble_kernel(text) {
        Ok(slots) => panic!("{text} assembled to {slots:?}"),
        Err(e) => e,
    }
}

#[test]
fn alu_forms() {
    assert_eq!(one("r0 = 1"), raw(0xb7, 0, 0, 0, 1));
    assert_eq!(one("w0 = w1"), raw(0xbc, 0, 1, 0, 0));
    assert_eq!(one("r0 s/= r1"), raw(0x3f, 0, 1, 1, 0));
    assert_eq!(one("w3 s%= -5"), raw(0x94, 3, 0, 1, -5));
    assert_eq!(one("r3 s>>= 4"), raw(0xc7, 3, 0, 0, 4));
    assert_eq!(one("r0 = (s16)r1"), raw(0xbf, 0, 1, 16, 0));
    assert_eq!(one("w0 = (s8)w1"), raw(0xbc, 0, 1, 8, 0));
    assert_eq!(one("r0 = -r0"), raw(0x87, 0, 0, 0, 0));
    assert_eq!(one("w2 = -w2"), raw(0x84, 2, 0, 0, 0));
    assert_eq!(one("r1 = be16 r1"), raw(0xdc, 1, 0, 0, 16));
    assert_eq!(one("r1 = le64 r1"), raw(0xd4, 1, 0, 0, 64));
    assert_eq!(one("r1 = bswap32 r1"), raw(0xd7, 1, 0, 0, 32));
    assert_eq!(
        one("r1 = addr_space_cast(r2, 1, 0)"),
        raw(0xbf, 1, 2, 1, 1 << 16)
    );
}

#[test]
fn memory_forms() {
    assert_eq!(one("r0 = *(u32 *)(r1 +4)"), raw(0x61, 0, 1, 4, 0));
    assert_eq!(one("r0 = *(s16 *)(r1 -2)"), raw(0x89, 0, 1, -2, 0));
    assert_eq!(one("*(u8 *)(r10 -8) = 1"), raw(0x72, 10, 0, -8, 1));
    assert_eq!(one("*(u64 *)(r10 -8) = r1"), raw(0x7b, 10, 1, -8, 0));
    assert_eq!(one("r0 = *(u16 *)skb[12]"), raw(0x28, 0, 0, 0, 12));
    assert_eq!(one("r0 = *(u8 *)skb[r7 + -2]"), raw(0x50, 0, 7, 0, -2));
}

#[test]
fn atomic_forms() {
    assert_eq!(one("lock *(u64 *)(r0 +0) += r1"), raw(0xdb, 0, 1, 0, 0));
    assert_eq!(
        one("lock *(u32 *)(r10 -8) ^= r1"),
        raw(0xc3, 10, 1, -8, 0xa0)
    );
    assert_eq!(
        one("r1 = atomic64_fetch_add((u64 *)(r0 +0), r1)"),
        raw(0xdb, 0, 1, 0, 0x01)
    );
    assert_eq!(
        one("r1 = atomic_fetch_and((u32 *)(r2 +4), r1)"),
        raw(0xc3, 2, 1, 4, 0x51)
    );
    assert_eq!(
        one("r3 = atomic64_xchg((u64 *)(r2 +0), r3)"),
        raw(0xdb, 2, 3, 0, 0xe1)
    );
    assert_eq!(
        one("r0 = atomic64_cmpxchg((u64 *)(r10 -8), r0, r2)"),
        raw(0xdb, 10, 2, -8, 0xf1)
    );
    assert_eq!(
        one("r0 = load_acquire((u8 *)(r10 -1))"),
        raw(0xd3, 0, 10, -1, 0x100)
    );
    assert_eq!(
        one("store_release((u16 *)(r10 -2), r1)"),
        raw(0xcb, 10, 1, -2, 0x110)
    );
}

#[test]
fn ld_imm64_forms() {
    let pair = |imm: i32, next: i32| vec![raw(0x18, 1, 0, 0, imm), raw(0, 0, 0, 0, next)];
    assert_eq!(assemble_kernel("r1 = 0x1234").unwrap(), pair(0x1234, 0));
    assert_eq!(assemble_kernel("r1 = 0x1234 ll").unwrap(), pair(0x1234, 0));
    assert_eq!(assemble_kernel("r1 = 4660 ll").unwrap(), pair(0x1234, 0));
    assert_eq!(
        assemble_kernel("r1 = 0xffffffffffffffff").unwrap(),
        pair(-1, -1)
    );
}

#[test]
fn control_flow_forms() {
    assert_eq!(one("goto pc+3"), raw(0x05, 0, 0, 3, 0));
    assert_eq!(one("gotol pc+70000"), raw(0x06, 0, 0, 0, 70000));
    assert_eq!(one("may_goto pc+3"), raw(0xe5, 0, 0, 3, 0));
    assert_eq!(one("if r1 > r6 goto pc+31"), raw(0x2d, 1, 6, 31, 0));
    assert_eq!(one("if w1 s< 0x5 goto pc-2"), raw(0xc6, 1, 0, -2, 5));
    assert_eq!(one("if r1 == 0xffffffff goto pc+0"), raw(0x15, 1, 0, 0, -1));
    assert_eq!(one("call bpf_map_lookup_elem#1"), raw(0x85, 0, 0, 0, 1));
    assert_eq!(one("call unknown#9999"), raw(0x85, 0, 0, 0, 9999));
    assert_eq!(one("call pc+4"), raw(0x85, 0, 1, 0, 4));
    assert_eq!(one("call kernel-function#1234"), raw(0x85, 0, 2, 0, 1234));
    assert_eq!(one("call bpf_rcu_read_lock#42"), raw(0x85, 0, 2, 0, 42));
    assert_eq!(one("exit"), raw(0x95, 0, 0, 0, 0));
}

#[test]
fn log_and_bpftool_lines() {
    let log = "\
; int xdp_prog(struct xdp_md *ctx)
0: (b7) r0 = 2
   1: (61) r2 = *(u32 *)(r1 +4)     ; R1=ctx() R2_w=pkt_end()

2: (18) r3 = 0x1
4: (95) exit
";
    let slots = assemble_kernel(log).unwrap();
    assert_eq!(
        slots,
        vec![
            raw(0xb7, 0, 0, 0, 2),
            raw(0x61, 2, 1, 4, 0),
            raw(0x18, 3, 0, 0, 1),
            raw(0, 0, 0, 0, 0),
            raw(0x95, 0, 0, 0, 0),
        ]
    );
}

#[test]
fn labels_for_hand_written_programs() {
    let src = "\
    r0 = 0
loop:
    r0 += 1
    if r0 < 10 goto loop
    call sub
    goto done
sub:
    call bpf_get_prandom_u32
    exit
done:
    exit
";
    let slots = assemble_kernel(src).unwrap();
    assert_eq!(slots[2], raw(0xa5, 0, 0, -2, 10));
    assert_eq!(slots[3], raw(0x85, 0, 1, 0, 1));
    assert_eq!(slots[4], raw(0x05, 0, 0, 2, 0));
    assert_eq!(slots[5], raw(0x85, 0, 0, 0, 7));
}

#[test]
fn empty_source_is_an_empty_program() {
    assert_eq!(assemble_kernel("").unwrap(), vec![]);
    assert_eq!(assemble_kernel("; only a comment\n\n").unwrap(), vec![]);
}

#[test]
fn opcode_prefix_must_match() {
    let e = error("0: (b4) r0 = 1");
    assert_eq!((e.line, e.column), (1, 5));
    assert!(
        e.message.contains("(b4)") && e.message.contains("(b7)"),
        "{e}"
    );
}

#[test]
fn errors_name_the_problem() {
    let cases = [
        ("r11 = 1", 1, "invalid register `r11`"),
        ("r0 = w1", 6, "`r` and `w` registers mixed"),
        ("w0 = (s32)w1", 1, "not a valid instruction"),
        ("r1 = be16 r2", 11, "expected r1"),
        ("r0 = *(u32 *)(r1 +4", 20, "expected `)`"),
        ("*(u32 *)(r1 +70000) = 1", 13, "offset out of 16-bit range"),
        ("r0 = 2147483648", 6, "out of range"),
        ("goto nowhere", 6, "unknown label `nowhere`"),
        ("r0 = 1 2", 8, "unexpected `2`"),
        ("frobnicate r0", 1, "expected an instruction"),
        ("w1 = 0x1", 6, "ld_imm64 needs an `r` destination"),
        ("lock *(u8 *)(r1 +0) += r2", 1, "not a valid instruction"),
    ];
    for (text, column, reason) in cases {
        let e = error(text);
        assert!(e.message.contains(reason), "{text}: `{e}` lacks `{reason}`");
        assert_eq!(e.column, column, "{text}: {e}");
    }
}
