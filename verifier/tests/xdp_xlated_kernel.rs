//! The xlated program (`fixup.rs`) against the kernel's own (`xlated_prog_insns`, what
//! `bpftool prog dump xlated` prints) for the same accepted programs: ctx field conversion,
//! inlined array and hash lookups, the inlined `bpf_get_smp_processor_id` (and the
//! `bpf_fastcall` spill/fill pairs around it removed), division guards,
//! dead code and hard-wired branches, tail calls.
//!
//! Addresses are normalised: a helper call's `imm` (the kernel's is an address offset, ours
//! the helper id), an `ld_imm64` map reference's immediates (the kernel's is the map id, ours
//! the map index) and the per-CPU address the inlined processor id loads.
//!
//! Skipped with a message when bpf() is out of reach, unless `BPFEMU_REQUIRE_KERNEL=1`.

use bpfemu_conformance::libbpf::kernel_or_skip;
use bpfemu_isa::RawInsn;
use bpfemu_kernel::{
    BPF_LOG_LEVEL1, BPF_PROG_TYPE_XDP, LoadOptions, MapSpec as KernelMap, fd_imm, map_create,
    prog_load, prog_xlated,
};
use bpfemu_loader::{Kernel, MapOrigin, MapSpec};
use bpfemu_verifier::{Options, ProgramInput, verify};
use std::os::fd::AsFd;

fn r(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> RawInsn {
    RawInsn::new(code, dst, src, off, imm)
}

const EXIT: RawInsn = RawInsn::new(0x95, 0, 0, 0, 0);
const MOV0_2: RawInsn = RawInsn::new(0xb7, 0, 0, 0, 2);

fn loader_map(map_type: u32, key_size: u32, value_size: u32, max_entries: u32) -> MapSpec {
    MapSpec {
        name: format!("m{map_type}"),
        map_type,
        key_size,
        value_size,
        max_entries,
        map_flags: 0,
        numa_node: 0,
        pinning: 0,
        map_extra: 0,
        key_type: None,
        value_type: None,
        inner: None,
        init_slots: Vec::new(),
        initial: None,
        origin: MapOrigin::Legacy,
    }
}

/// Maps: 0 array of 12-byte values, 1 array of 24-byte values, 2 hash, 3 prog array.
fn maps() -> Vec<MapSpec> {
    vec![
        loader_map(2, 4, 12, 4),
        loader_map(2, 4, 24, 8),
        loader_map(1, 4, 8, 4),
        loader_map(3, 4, 4, 4),
    ]
}

/// `ld_imm64 rN, map[m]` with `imm` naming it.
fn ld_map(d: u8, imm: i32) -> [RawInsn; 2] {
    [r(0x18, d, 1, 0, imm), r(0, 0, 0, 0, 0)]
}

/// A lookup in map `m`: key 1 at fp-4.
fn lookup(imm: i32) -> Vec<RawInsn> {
    let [a, b] = ld_map(1, imm);
    vec![
        r(0x62, 10, 0, -4, 1),
        a,
        b,
        r(0xbf, 2, 10, 0, 0),
        r(0x07, 2, 0, 0, -4),
        r(0x85, 0, 0, 0, 1),
    ]
}

/// The programs, built with `map_imm(m)` naming map `m`.
fn programs(map_imm: &dyn Fn(usize) -> i32) -> Vec<(&'static str, Vec<RawInsn>)> {
    let div = |code: u8, off: i16| {
        vec![
            r(0x61, 2, 1, 16, 0),
            r(0x61, 3, 1, 12, 0),
            r(code, 2, 3, off, 0),
            r(0xbf, 0, 2, 0, 0),
            EXIT,
        ]
    };
    vec![
        (
            "ctx fields",
            vec![
                r(0x61, 2, 1, 0, 0),
                r(0x61, 3, 1, 4, 0),
                r(0x61, 4, 1, 8, 0),
                r(0x61, 5, 1, 12, 0),
                r(0x61, 6, 1, 16, 0),
                MOV0_2,
                EXIT,
            ],
        ),
        (
            "array lookup",
            [lookup(map_imm(0)), vec![MOV0_2, EXIT]].concat(),
        ),
        (
            "array lookup, 24-byte values",
            [lookup(map_imm(1)), vec![MOV0_2, EXIT]].concat(),
        ),
        (
            "hash lookup",
            [lookup(map_imm(2)), vec![MOV0_2, EXIT]].concat(),
        ),
        (
            "smp processor id and ktime",
            vec![r(0x85, 0, 0, 0, 8), r(0x85, 0, 0, 0, 5), MOV0_2, EXIT],
        ),
        (
            "bpf_fastcall pairs around smp processor id",
            vec![
                r(0xb7, 1, 0, 0, 1),
                r(0xb7, 2, 0, 0, 2),
                r(0x7b, 10, 2, -8, 0),
                r(0x7b, 10, 1, -16, 0),
                r(0x85, 0, 0, 0, 8),
                r(0x79, 1, 10, -16, 0),
                r(0x79, 2, 10, -8, 0),
                r(0xbf, 0, 1, 0, 0),
                r(0x0f, 0, 2, 0, 0),
                EXIT,
            ],
        ),
        (
            "bpf_fastcall pair whose slot is read elsewhere stays",
            vec![
                r(0xb7, 1, 0, 0, 1),
                r(0x7b, 10, 1, -8, 0),
                r(0x85, 0, 0, 0, 8),
                r(0x79, 1, 10, -8, 0),
                r(0x79, 0, 10, -8, 0),
                EXIT,
            ],
        ),
        ("div64 reg", div(0x3f, 0)),
        ("mod64 reg", div(0x9f, 0)),
        ("div32 reg", div(0x3c, 0)),
        ("mod32 reg", div(0x9c, 0)),
        ("sdiv64 reg", div(0x3f, 1)),
        ("smod64 reg", div(0x9f, 1)),
        ("sdiv32 reg", div(0x3c, 1)),
        ("smod32 reg", div(0x9c, 1)),
        (
            "sdiv by -1",
            vec![
                r(0x61, 2, 1, 16, 0),
                r(0x37, 2, 0, 1, -1),
                r(0x97, 2, 0, 1, -1),
                MOV0_2,
                EXIT,
            ],
        ),
        (
            "dead branches",
            vec![
                r(0xb7, 0, 0, 0, 1),
                r(0x15, 0, 0, 1, 0),
                r(0xb7, 0, 0, 0, 3),
                r(0x55, 0, 0, 1, 1),
                r(0xb7, 0, 0, 0, 4),
                r(0x05, 0, 0, 0, 0),
                EXIT,
            ],
        ),
        (
            "tail call with constant key",
            [
                vec![r(0xbf, 6, 1, 0, 0)],
                ld_map(2, map_imm(3)).to_vec(),
                vec![r(0xb7, 3, 0, 0, 1), r(0x85, 0, 0, 0, 12), MOV0_2, EXIT],
            ]
            .concat(),
        ),
    ]
}

/// Blanks what holds an address or an object id (see the crate doc).
pub fn normalise(insns: &[RawInsn]) -> Vec<RawInsn> {
    let mut out = insns.to_vec();
    for i in 0..out.len() {
        let insn = out[i];
        if insn.code == 0x85 && matches!(insn.src, 0 | 2) {
            out[i].imm = 0;
        }
        if insn.code == 0x18 && matches!(insn.src, 1 | 2) && i + 1 < out.len() {
            out[i].imm = 0;
            out[i + 1].imm = 0;
        }
        let percpu_next = out
            .get(i + 1)
            .is_some_and(|n| n.code == 0xbf && n.off == -1);
        if insn.code == 0xb7 && percpu_next {
            out[i].imm = 0;
        }
    }
    out
}

fn dump(insns: &[RawInsn]) -> String {
    insns
        .iter()
        .enumerate()
        .map(|(i, x)| {
            format!(
                "  {i}: {:02x} dst={} src={} off={} imm={}",
                x.code, x.dst, x.src, x.off, x.imm
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn xlated_programs_match_the_kernel() {
    if !kernel_or_skip("xlated_programs_match_the_kernel") {
        return;
    }
    let specs = maps();
    let fds: Vec<_> = specs
        .iter()
        .map(|m| {
            map_create(&KernelMap {
                map_type: m.map_type,
                key_size: m.key_size,
                value_size: m.value_size,
                max_entries: m.max_entries,
                ..KernelMap::default()
            })
            .expect("map")
        })
        .collect();
    let kernel_progs = programs(&|m| fd_imm(&fds[m]));
    let our_progs = programs(&|m| m as i32);
    let mut failures = Vec::new();
    let kernel = Kernel::running();
    for ((name, kprog), (_, oprog)) in kernel_progs.iter().zip(&our_progs) {
        let mut opts = LoadOptions::new(BPF_PROG_TYPE_XDP, kprog);
        opts.log_level = BPF_LOG_LEVEL1;
        let res = prog_load(&opts);
        let fd = res
            .fd
            .unwrap_or_else(|e| panic!("{name}: kernel refuses (errno {e}): {}", res.log));
        let theirs = normalise(&prog_xlated(fd.as_fd()).expect("xlated"));
        let input = ProgramInput::raw(BPF_PROG_TYPE_XDP, oprog, &specs, &kernel);
        let verdict = verify(&input, &Options::default());
        let Some(xlated) = verdict.xlated() else {
            failures.push(format!("{name}: bpfemu refuses: {:?}", verdict.rejection()));
            continue;
        };
        let ours = normalise(&xlated.insns);
        if ours != theirs {
            failures.push(format!(
                "{name}:\n kernel\n{}\n bpfemu\n{}",
                dump(&theirs),
                dump(&ours)
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
