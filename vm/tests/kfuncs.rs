//! kfunc calls in the interpreter beyond their values (which `jit/tests/kfuncs.rs` and the
//! root's `tests/iter_num_vs_kernel.rs` hold): taint tracking follows the iterator, from the
//! arguments of `bpf_iter_num_new` through its 8 bytes on the stack to what `next` hands out.
//!
//! The kfuncs are named by BTF ids the tests choose (the runtime is given their names, never
//! BTF).

use bpfemu_isa::RawInsn;
use bpfemu_vm::xdp::{PacketMeta, XdpConfig, XdpProgramSpec, XdpRuntime};

/// The BTF ids these programs give the iterator's kfuncs: any ids do, the runtime being told
/// their names ([`XdpConfig::kfunc_names`]) as the root crate tells it from the kernel's BTF.
const IDS: [i32; 3] = [9990, 9991, 9992];

fn config() -> XdpConfig {
    let names = [
        "bpf_iter_num_new",
        "bpf_iter_num_next",
        "bpf_iter_num_destroy",
    ];
    XdpConfig {
        kfunc_names: Ok(IDS.into_iter().zip(names.map(String::from)).collect()),
        ..XdpConfig::default()
    }
}

fn ins(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> RawInsn {
    RawInsn::new(code, dst, src, off, imm)
}

/// The iterator over [0, end): `end` is a random number's low 2 bits (r7) when `random`, else
/// 3; the first value `next` hands out (if any) goes to packet byte 0, `end` to byte 1.
fn program([new, next, destroy]: [i32; 3], random: bool) -> Vec<RawInsn> {
    let mut p = vec![ins(0x61, 9, 1, 0, 0)]; // r9 = ctx->data
    if random {
        p.push(ins(0x85, 0, 0, 0, 7)); // call bpf_get_prandom_u32
        p.push(ins(0xbf, 7, 0, 0, 0)); // r7 = r0
        p.push(ins(0x57, 7, 0, 0, 3)); // r7 &= 3
        p.push(ins(0x07, 7, 0, 0, 1)); // r7 += 1
    } else {
        p.push(ins(0xb7, 7, 0, 0, 3)); // r7 = 3
    }
    p.extend([
        ins(0x73, 9, 7, 1, 0),       // *(u8 *)(r9 + 1) = r7
        ins(0xbf, 1, 10, 0, 0),      // r1 = r10
        ins(0x07, 1, 0, 0, -8),      // r1 += -8
        ins(0xb4, 2, 0, 0, 0),       // w2 = 0
        ins(0xbc, 3, 7, 0, 0),       // w3 = w7
        ins(0x85, 0, 2, 0, new),     // call bpf_iter_num_new
        ins(0xbf, 1, 10, 0, 0),      // r1 = r10
        ins(0x07, 1, 0, 0, -8),      // r1 += -8
        ins(0x85, 0, 2, 0, next),    // call bpf_iter_num_next
        ins(0x15, 0, 0, 2, 0),       // if r0 == 0 goto +2
        ins(0x61, 1, 0, 0, 0),       // r1 = *(u32 *)(r0 + 0)
        ins(0x73, 9, 1, 0, 0),       // *(u8 *)(r9 + 0) = r1
        ins(0xbf, 1, 10, 0, 0),      // r1 = r10
        ins(0x07, 1, 0, 0, -8),      // r1 += -8
        ins(0x85, 0, 2, 0, destroy), // call bpf_iter_num_destroy
        ins(0xb7, 0, 0, 0, 2),       // r0 = XDP_PASS
        ins(0x95, 0, 0, 0, 0),       // exit
    ]);
    p
}

fn taint_of_bytes(insns: Vec<RawInsn>) -> (Vec<u8>, Vec<bool>) {
    let spec = XdpProgramSpec {
        name: "iter".into(),
        insns,
    };
    let mut rt = XdpRuntime::new(vec![spec], vec![], config()).expect("it builds");
    rt.runnable(0).expect("the kfuncs resolve");
    rt.track_taint(true);
    let mut packet = vec![0u8; 64];
    packet[0] = 0xaa;
    let out = rt.run(0, &packet, &PacketMeta::default()).expect("it runs");
    let taint = rt.last_taint().expect("tracking");
    let tainted = taint.bytes.iter().take(3).map(Option::is_some).collect();
    (out.data_out[..3].to_vec(), tainted)
}

#[test]
fn taint_follows_the_iterator() {
    let ids = IDS;
    // A random bound: the end byte is tainted, and so is the value next hands out (from the
    // iterator's bytes, written from a tainted argument).
    let (bytes, tainted) = taint_of_bytes(program(ids, true));
    assert_eq!(bytes[0], 0, "the first value of 0..end");
    assert_eq!(tainted, [true, true, false], "{bytes:?}");
    // Constant bounds: nothing is tainted.
    let (bytes, tainted) = taint_of_bytes(program(ids, false));
    assert_eq!(bytes, [0, 3, 0]);
    assert_eq!(tainted, [false, false, false]);
}

/// What prepare says when a kfunc cannot be named: the kernel's BTF could not be read (the
/// caller says why), a module's kfunc; each names the program, the instruction and the id.
#[test]
fn unresolvable_kfuncs_are_refused_with_the_reason() {
    let spec = |off: i16| XdpProgramSpec {
        name: "k".into(),
        insns: vec![
            ins(0xb7, 0, 0, 0, 2),
            ins(0x85, 0, 2, off, 77),
            ins(0x95, 0, 0, 0, 0),
        ],
    };
    let cfg = XdpConfig {
        kfunc_names: Err("/nonexistent/vmlinux: No such file or directory (os error 2)".into()),
        ..XdpConfig::default()
    };
    let rt = XdpRuntime::new(vec![spec(0), spec(3)], vec![], cfg).expect("it builds");
    let no_btf = rt.runnable(0).unwrap_err().to_string();
    assert!(
        no_btf.starts_with(
            "program k, insn 1: kfunc call (btf id 77, module btf 0: no kernel BTF to name it: \
             /nonexistent/vmlinux: "
        ),
        "{no_btf}"
    );
    assert_eq!(
        rt.runnable(1).unwrap_err().to_string(),
        "program k, insn 1: kfunc call (btf id 77, module btf 3: a module's kfunc), which \
         bpfemu does not support"
    );
}

/// An id the caller's names lack names no function of the kernel's BTF: refused, by id.
#[test]
fn an_unnamed_kfunc_id_is_not_a_function() {
    let spec = XdpProgramSpec {
        name: "k".into(),
        insns: vec![
            ins(0xb7, 0, 0, 0, 2),
            ins(0x85, 0, 2, 0, 77),
            ins(0x95, 0, 0, 0, 0),
        ],
    };
    let rt = XdpRuntime::new(vec![spec], vec![], config()).expect("it builds");
    assert_eq!(
        rt.runnable(0).unwrap_err().to_string(),
        "program k, insn 1: kfunc call (btf id 77, module btf 0: not a function of the kernel's \
         BTF), which bpfemu does not support"
    );
}
