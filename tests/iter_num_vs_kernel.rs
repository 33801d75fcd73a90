//! The numeric open-coded iterator (kfuncs `bpf_iter_num_new/next/destroy`, what libbpf's
//! `bpf_for` calls) in bpfemu against the kernel: the programs of `tests/data/iter/` loaded by
//! libbpf into the running kernel and by bpfemu, the same packets run through both
//! (BPF_PROG_TEST_RUN and `XdpRuntime::run`, one fresh runtime and one fresh kernel object per
//! engine); per packet the return value and `data_out` must be equal, and after every packet
//! the maps' contents.
//!
//! - `iter_sum.c`: `bpf_for` over bounds read from the packet (empty, reversed, negative and
//!   wide ranges, and a nested loop), summing into a map and writing into the packet.
//! - `iter_edges.c`: the three kfuncs called directly with edge arguments (start > end, a
//!   width of exactly `BPF_MAX_LOOPS` and one more, `INT_MIN..INT_MAX`, ranges at `INT_MAX`,
//!   a start of `INT_MIN` whose `start - 1` wraps, empty ranges, `next` after the end,
//!   `destroy` then `new`), each return value and each value `next` hands out recorded in an
//!   array map.
//!
//! Every engine: the interpreter, the checked JIT, and the trusted JIT once the kernel's
//! verifier accepted the program (as `tests/xdp_vs_kernel.rs` does; bpfemu's own verifier
//! does not check iterators yet, so the CLI's `--engine jit-trusted` still refuses them).
//!
//! Skipped with a message when bpf() is out of reach, unless `BPFEMU_REQUIRE_KERNEL=1`.

use bpfemu::replay::hex;
use bpfemu::runtime::{EngineChoice, build_runtime};
use bpfemu_conformance::libbpf::{
    LibbpfObject, LogOptions, kernel_or_skip, map_entries_fd, test_run,
};
use bpfemu_loader::{LoadOptions, load_file};
use bpfemu_vm::xdp::{PacketMeta, XdpConfig, XdpRuntime};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn object(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/iter")
        .join(name)
}

/// A 64-byte packet (an Ethernet header of zeros) whose bytes from 14 on are `tail`.
fn packet(tail: &[u8]) -> Vec<u8> {
    let mut p: Vec<u8> = (0..64u8).map(|i| i.wrapping_mul(37)).collect();
    p[..14].fill(0);
    p[14..14 + tail.len()].copy_from_slice(tail);
    p
}

/// `iter_sum`'s packets: start (bytes 14-15) and end (16-17), big-endian i16, and the inner
/// loop's width in byte 18.
fn sum_packets() -> Vec<Vec<u8>> {
    let ranges: &[(i16, i16, u8)] = &[
        (0, 10, 3),
        (0, 0, 0),
        (5, 5, 1),
        (10, 0, 2),
        (-20, 20, 15),
        (-32768, -32760, 4),
        (-32768, 32767, 7),
        (1000, 3100, 9),
        (32760, 32767, 2),
        (-1, 1, 1),
    ];
    let mut out: Vec<Vec<u8>> = ranges
        .iter()
        .map(|&(s, e, inner)| {
            let mut tail = Vec::new();
            tail.extend_from_slice(&s.to_be_bytes());
            tail.extend_from_slice(&e.to_be_bytes());
            tail.push(inner);
            packet(&tail)
        })
        .collect();
    // Too short for the bounds: passed untouched.
    out.push(vec![0u8; 18]);
    out
}

/// `iter_edges`' packets: byte 14 a signed start, byte 15 a width (its low 3 bits).
fn edge_packets() -> Vec<Vec<u8>> {
    let mut out: Vec<Vec<u8>> = [(0u8, 0u8), (3, 5), (0x80, 7), (0x7f, 2), (0xfe, 4)]
        .iter()
        .map(|&(s, w)| packet(&[s, w]))
        .collect();
    out.push(vec![0u8; 14]);
    out
}

type Dump = BTreeMap<String, Vec<(Vec<u8>, Vec<u8>)>>;

fn bpfemu_maps(rt: &XdpRuntime) -> Dump {
    rt.maps()
        .iter()
        .enumerate()
        .map(|(i, m)| {
            (
                m.name().to_string(),
                rt.maps().dump(rt.memory(), i).unwrap(),
            )
        })
        .collect()
}

fn kernel_maps(kobj: &LibbpfObject, rt: &XdpRuntime) -> Dump {
    rt.maps()
        .iter()
        .map(|m| {
            let fd = kobj.map_fd(m.name()).expect("the kernel has the map");
            let entries = map_entries_fd(fd, m.key_size(), m.sys_value_size(), 1 << 16).unwrap();
            (m.name().to_string(), entries)
        })
        .collect()
}

/// Runs every packet through the kernel and through bpfemu under `engine`; returns the
/// number of packets compared.
fn compare(file: &str, packets: &[Vec<u8>], engine: EngineChoice) -> usize {
    let path = object(file);
    let obj = load_file(&path, &LoadOptions::default()).expect("bpfemu loads");
    let cfg = XdpConfig {
        // The kernel has no budget: iter_edges hands out values of an 8M range.
        insn_budget: 1 << 30,
        ..XdpConfig::default()
    };
    let mut rt = build_runtime(&obj, cfg).unwrap_or_else(|e| panic!("{file}: {e}"));
    let mut kobj = LibbpfObject::open_file(&path).expect("libbpf opens");
    let loaded = kobj.load(&LogOptions::default());
    assert!(
        loaded.result.is_ok(),
        "{file}: kernel load failed: {}",
        loaded.failure_tail(20)
    );
    engine
        .apply(&mut rt)
        .unwrap_or_else(|e| panic!("{file}, {}: {e}", engine.name()));
    let mut compared = 0;
    for prog in &obj.programs {
        let index = rt.program_index(&prog.name).unwrap();
        rt.runnable(index)
            .unwrap_or_else(|e| panic!("{file}: bpfemu cannot run {}: {e}", prog.name));
        let fd = kobj.program_fd(&prog.name).expect("kernel program");
        for (n, data) in packets.iter().enumerate() {
            let at = format!("{file} {} under {}, packet {n}", prog.name, engine.name());
            let ours = rt
                .run(index, data, &PacketMeta::default())
                .unwrap_or_else(|e| panic!("{at}: bpfemu: {e}"));
            let theirs = test_run(fd, data, None, 1).unwrap_or_else(|e| panic!("{at}: errno {e}"));
            assert_eq!(ours.retval, theirs.retval, "{at}: retval");
            assert_eq!(hex(&ours.data_out), hex(&theirs.data), "{at}: data_out");
            assert_eq!(bpfemu_maps(&rt), kernel_maps(&kobj, &rt), "{at}: maps");
            compared += 1;
        }
    }
    compared
}

fn compare_all(engine: EngineChoice) {
    if !kernel_or_skip("iter_num_vs_kernel") {
        return;
    }
    let n = compare("iter_sum.o", &sum_packets(), engine)
        + compare("iter_edges.o", &edge_packets(), engine);
    eprintln!(
        "{}: {n} packets equal to the kernel's (retval, data_out, maps)",
        engine.name()
    );
}

#[test]
fn iterators_match_the_kernel_in_the_interpreter() {
    compare_all(EngineChoice::Interp);
}

#[test]
fn iterators_match_the_kernel_in_the_checked_jit() {
    compare_all(EngineChoice::Jit);
}

#[test]
fn iterators_match_the_kernel_in_the_trusted_jit() {
    compare_all(EngineChoice::JitTrusted);
}

/// What `iter_edges` records, spelled out (so that a change on both sides at once shows):
/// the kernel's answers as this machine's 6.18 gives them.
#[test]
fn edge_values_are_the_kernels() {
    let path = object("iter_edges.o");
    let obj = load_file(&path, &LoadOptions::default()).expect("bpfemu loads");
    let mut rt = match build_runtime(&obj, XdpConfig::default()) {
        Ok(rt) => rt,
        Err(e) => panic!("{e}"),
    };
    if rt.runnable(0).is_err() && !Path::new("/sys/kernel/btf/vmlinux").exists() {
        eprintln!("edge_values_are_the_kernels: skipping: no kernel BTF to name the kfuncs");
        return;
    }
    rt.run(0, &packet(&[0xfe, 4]), &PacketMeta::default())
        .unwrap();
    let out = rt.maps().dump(rt.memory(), 0).unwrap();
    let v: Vec<i64> = out
        .iter()
        .map(|(_, v)| i64::from_le_bytes(v[..8].try_into().unwrap()))
        .collect();
    const NONE: i64 = 0x4e4f_4e45;
    const EINVAL: i64 = -22;
    const E2BIG: i64 = -7;
    const MAX: i64 = i32::MAX as i64;
    const MIN: i64 = i32::MIN as i64;
    let expected: &[(usize, &[i64])] = &[
        (0, &[EINVAL, NONE, NONE]),
        (3, &[0, 0, 1, 2]),
        (7, &[E2BIG, NONE, NONE]),
        (10, &[0, -4, -3]),
        (13, &[E2BIG, NONE, NONE]),
        (16, &[0, NONE, NONE]),
        (19, &[0, MAX - 2, MAX - 1, NONE, NONE]),
        (24, &[0, MIN, MIN + 1, MIN + 2, NONE, NONE]),
        (30, &[0, NONE, NONE]),
        (33, &[0, -3, -2, -1, 0, NONE, NONE]),
        (40, &[EINVAL, NONE]),
        (42, &[0, -2, -1, 0, 1, NONE, NONE, NONE, NONE, NONE]),
        (52, &[0, 100, 0, -2, -1, NONE, NONE, EINVAL, NONE]),
    ];
    for &(slot, values) in expected {
        assert_eq!(&v[slot..slot + values.len()], values, "slots from {slot}");
    }
}
