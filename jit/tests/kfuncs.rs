//! kfunc calls (the numeric iterator) in the JIT give what the interpreter gives: the same
//! values, the same pointer (the iterator's own stack address, loadable by the program), the
//! same instruction counts, in checked and trusted mode; and a bad iterator pointer is the
//! same fault in the interpreter and the checked JIT, and still a fault (not undefined
//! behaviour) in trusted mode, since kfuncs reach memory through the vm.
//!
//! The kfuncs are named by BTF ids the tests choose (the runtime is given their names, never
//! BTF). `tests/iter_num_vs_kernel.rs` holds the values against the kernel itself.

use bpfemu_isa::RawInsn;
use bpfemu_isa::asm::assemble_kernel;
use bpfemu_jit::{Jit, Mode, Tier};
use bpfemu_vm::xdp::{PacketMeta, XdpConfig, XdpProgramSpec, XdpRuntime};

/// The BTF ids these programs give the iterator's kfuncs: any ids do, the runtime being told
/// their names ([`XdpConfig::kfunc_names`]) as the root crate tells it from the kernel's BTF.
const KFUNCS: [(i32, &str); 3] = [
    (9990, "bpf_iter_num_new"),
    (9991, "bpf_iter_num_next"),
    (9992, "bpf_iter_num_destroy"),
];

/// A runtime configuration naming the kfunc ids `names` gives.
fn config(names: &[(i32, &str)]) -> XdpConfig {
    XdpConfig {
        kfunc_names: Ok(names.iter().map(|&(id, n)| (id, n.to_string())).collect()),
        ..XdpConfig::default()
    }
}

/// `call NAME#9990` etc. become kfunc calls of the iterator's functions, by their ids in
/// [`KFUNCS`].
fn program(text: &str) -> Vec<RawInsn> {
    let mut raw = assemble_kernel(text).expect("the test program assembles");
    for slot in raw.iter_mut() {
        if slot.code == 0x85 && KFUNCS.iter().any(|&(id, _)| id == slot.imm) {
            slot.src = 2;
        }
    }
    raw
}

/// The iterator at r10-8 over [start, end): new's result at packet bytes 0-3, then for three
/// `next` calls: 0 at bytes 4k+4.. when it handed out the iterator's own address followed by
/// the value (`NONE` = 0x454e4f4e at both when it answered NULL).
fn iterate(start: i32, end: i32) -> String {
    let mut text = format!(
        "r9 = *(u32 *)(r1 +0)
         r1 = r10
         r1 += -8
         w2 = {start}
         w3 = {end}
         call iter_new#9990
         *(u32 *)(r9 +0) = r0
         r8 = 4\n"
    );
    for k in 0..3 {
        text.push_str(&format!(
            "r1 = r10
             r1 += -8
             call iter_next#9991
             if r0 == 0 goto none{k}
             r2 = r10
             r2 += -8
             r3 = r0
             r3 -= r2
             *(u32 *)(r9 +{a}) = r3
             r3 = *(u32 *)(r0 +0)
             *(u32 *)(r9 +{b}) = r3
             goto next{k}
             none{k}:
             *(u32 *)(r9 +{a}) = 0x454e4f4e
             *(u32 *)(r9 +{b}) = 0x454e4f4e
             next{k}:\n",
            a = 4 + 8 * k,
            b = 8 + 8 * k,
        ));
    }
    text.push_str(
        "r1 = r10
         r1 += -8
         call iter_destroy#9992
         r0 = 2
         exit",
    );
    text
}

fn run(insns: &[RawInsn], jit: Option<Jit>) -> String {
    let programs = vec![XdpProgramSpec {
        name: "iter".into(),
        insns: insns.to_vec(),
    }];
    let mut rt = XdpRuntime::new(programs, vec![], config(&KFUNCS)).expect("it builds");
    rt.runnable(0).expect("the kfuncs resolve");
    if let Some(jit) = jit {
        rt.set_engine(&jit).expect("the JIT compiles it");
    }
    match rt.run(0, &[0u8; 64], &PacketMeta::default()) {
        Ok(o) => format!(
            "{} in {}: {:02x?}",
            o.retval,
            o.insns_executed,
            &o.data_out[..28]
        ),
        Err(e) => e.to_string(),
    }
}

/// Checked code and trusted code, each from both tiers.
fn jits() -> [Jit; 4] {
    [
        Jit::new(Mode::Checked),
        Jit::new(Mode::Checked).with_tier(Tier::Baseline),
        Jit::new(Mode::Trusted),
        Jit::new(Mode::Trusted).with_tier(Tier::Baseline),
    ]
}

fn word(out: &str, index: usize) -> String {
    let bytes = out.split(": ").nth(1).expect("a run's bytes");
    let bytes: Vec<&str> = bytes
        .trim_matches(|c| c == '[' || c == ']')
        .split(", ")
        .collect();
    bytes[index * 4..index * 4 + 4].join("")
}

#[test]
fn the_iterator_agrees_in_every_engine() {
    let cases = [
        (0, 2),
        (5, 3),
        (0, 8 * 1024 * 1024),
        (0, 8 * 1024 * 1024 + 1),
        (i32::MIN, i32::MIN + 2),
        (i32::MAX - 1, i32::MAX),
        (7, 7),
    ];
    for (start, end) in cases {
        let insns = program(&iterate(start, end));
        let interp = run(&insns, None);
        assert!(interp.starts_with("2 in"), "{start}..{end}: {interp}");
        for jit in jits() {
            assert_eq!(run(&insns, Some(jit)), interp, "{start}..{end}, {jit:?}");
        }
        // A value handed out is at the iterator's own address.
        if start < end && (end as i64 - start as i64) <= 8 * 1024 * 1024 {
            assert_eq!(word(&interp, 1), "00000000", "{start}..{end}: {interp}");
            assert_eq!(
                word(&interp, 2),
                start
                    .to_le_bytes()
                    .iter()
                    .map(|b| format!("{b:02x}"))
                    .collect::<String>(),
                "{start}..{end}: {interp}"
            );
        }
    }
}

#[test]
fn a_bad_iterator_pointer_is_a_fault_in_every_engine() {
    let insns = program(
        "r1 = 4096
         w2 = 0
         w3 = 4
         call iter_new#9990
         r0 = 2
         exit",
    );
    let interp = run(&insns, None);
    assert!(
        interp.contains("insn 3: kfunc bpf_iter_num_new (btf id ")
            && interp.ends_with(
                "failed: invalid write of 8 bytes at 0x1000: no memory region is mapped"
            ),
        "{interp}"
    );
    for jit in jits() {
        assert_eq!(run(&insns, Some(jit)), interp, "{jit:?}");
    }
}

#[test]
fn an_unimplemented_kfunc_is_refused_by_name() {
    let id = 77;
    let insns = vec![
        RawInsn::new(0x85, 0, 2, 0, id),
        RawInsn::new(0xb7, 0, 0, 0, 2),
        RawInsn::new(0x95, 0, 0, 0, 0),
    ];
    let programs = vec![XdpProgramSpec {
        name: "rcu".into(),
        insns,
    }];
    let rt =
        XdpRuntime::new(programs, vec![], config(&[(id, "bpf_rcu_read_lock")])).expect("it builds");
    let err = rt.runnable(0).unwrap_err().to_string();
    assert_eq!(
        err,
        format!(
            "program rcu, insn 0: kfunc call (btf id {id}, module btf 0: bpf_rcu_read_lock), \
             which bpfemu does not support"
        )
    );
}
