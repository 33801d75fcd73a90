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
//! - raw programs around single calls (`registers_after_the_kfuncs_match_the_kernel`): r0
//!   register for register, the upper half of `bpf_iter_num_new`'s `int` (zero: the x86-64
//!   kernel's eax, zero-extended; a sign-extending runtime fails here), `next`'s pointer
//!   compared with r10 - 8, and NULL as a whole 64-bit zero.
//!
//! Every engine: the interpreter, the checked JIT, and the trusted JIT once the kernel's
//! verifier accepted the program (as `tests/xdp_vs_kernel.rs` does; bpfemu's own verifier
//! does not check iterators yet, so the CLI's `--engine jit-trusted` still refuses them).
//!
//! Skipped with a message when bpf() is out of reach, unless `BPFEMU_REQUIRE_KERNEL=1`.

use bpfemu::jit::Engine;
use bpfemu::replay::hex;
use bpfemu::vm_runtime::build_runtime;
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
    // Pseudo-random bounds and widths (a fixed LCG: the same packets every run).
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    for _ in 0..48 {
        x = x
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let b = x.to_be_bytes();
        // Mostly short ranges (a start and an end near each other), some wide.
        let start = i16::from_be_bytes([b[0], b[1]]);
        let end = match b[2] & 3 {
            0 => i16::from_be_bytes([b[3], b[4]]),
            _ => start.saturating_add(i16::from(b[3] as i8) * 4),
        };
        let mut tail = Vec::new();
        tail.extend_from_slice(&start.to_be_bytes());
        tail.extend_from_slice(&end.to_be_bytes());
        tail.push(b[5]);
        out.push(packet(&tail));
    }
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
fn compare(file: &str, packets: &[Vec<u8>], engine: Engine) -> usize {
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
    rt.set_engine(&*engine.build(None))
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

fn compare_all(engine: Engine) {
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
    compare_all(Engine::Interp);
}

#[test]
fn iterators_match_the_kernel_in_the_checked_jit() {
    compare_all(Engine::Jit);
}

#[test]
fn iterators_match_the_kernel_in_the_trusted_jit() {
    compare_all(Engine::JitTrusted);
}

#[test]
fn iterators_match_the_kernel_in_the_baseline_jit() {
    compare_all(Engine::JitBaseline);
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

/// A raw program around one `bpf_iter_num_new(r10 - 8, start, end)`: `probe` picks what it
/// returns: 0 the low half of r0 after new, 1 the high half, 2 whether the first next
/// returned the iterator's own address (1), NULL (2) or something else (3), 3 the high half
/// of r0 after next when it returned NULL.
fn register_probe(ids: [i32; 3], start: i32, end: i32, probe: u8) -> Vec<bpfemu_isa::RawInsn> {
    use bpfemu_isa::RawInsn as I;
    let [new, next, destroy] = ids;
    let mut p = vec![
        I::new(0xbf, 1, 10, 0, 0), // r1 = r10
        I::new(0x07, 1, 0, 0, -8), // r1 += -8
        I::new(0xb4, 2, 0, 0, start),
        I::new(0xb4, 3, 0, 0, end),
        I::new(0x85, 0, 2, 0, new),
        I::new(0xbf, 6, 0, 0, 0),  // r6 = r0
        I::new(0xbf, 1, 10, 0, 0), // r1 = r10
        I::new(0x07, 1, 0, 0, -8), // r1 += -8
        I::new(0x85, 0, 2, 0, next),
        I::new(0xbf, 7, 0, 0, 0), // r7 = r0
    ];
    let tail: &[I] = match probe {
        0 => &[I::new(0xbc, 0, 6, 0, 0)], // w0 = w6
        1 => &[I::new(0xbf, 0, 6, 0, 0), I::new(0x77, 0, 0, 0, 32)], // r0 = r6 >> 32
        2 => &[
            I::new(0xb7, 0, 0, 0, 2),  // r0 = 2
            I::new(0x15, 7, 0, 5, 0),  // if r7 == 0 goto out
            I::new(0xbf, 1, 10, 0, 0), // r1 = r10
            I::new(0x07, 1, 0, 0, -8), // r1 += -8
            I::new(0xb7, 0, 0, 0, 1),  // r0 = 1
            I::new(0x1d, 7, 1, 1, 0),  // if r7 == r1 goto out
            I::new(0xb7, 0, 0, 0, 3),  // r0 = 3
        ],
        _ => &[
            I::new(0xb7, 0, 0, 0, 7),  // r0 = 7
            I::new(0x55, 7, 0, 2, 0),  // if r7 != 0 goto out
            I::new(0xbf, 0, 7, 0, 0),  // r0 = r7
            I::new(0x77, 0, 0, 0, 32), // r0 >>= 32
        ],
    };
    p.extend_from_slice(tail);
    p.extend([
        I::new(0xbf, 1, 10, 0, 0), // out: r1 = r10
        I::new(0x07, 1, 0, 0, -8), // r1 += -8
        I::new(0x85, 0, 2, 0, destroy),
        I::new(0xbf, 0, 8, 0, 0), // placeholder, replaced below
        I::new(0x95, 0, 0, 0, 0),
    ]);
    // r0 must survive destroy (a call clobbers r0): keep it in r8 across the call.
    let n = p.len();
    p.insert(n - 5, I::new(0xbf, 8, 0, 0, 0)); // r8 = r0
    p
}

/// r0 as the kernel leaves it around the kfuncs, register for register: the upper half of
/// new's `int` (zero, as x86-64's eax return leaves it), the pointer next hands out (the
/// iterator's own stack address) and NULL as a whole 64-bit zero.
#[test]
fn registers_after_the_kfuncs_match_the_kernel() {
    use bpfemu_kernel as kernel;
    use bpfemu_vm::xdp::XdpProgramSpec;
    if !kernel_or_skip("registers_after_the_kfuncs_match_the_kernel") {
        return;
    }
    let running = bpfemu_loader::Kernel::running();
    let btf = running.btf().expect("the running kernel's BTF");
    let ids = [
        "bpf_iter_num_new",
        "bpf_iter_num_next",
        "bpf_iter_num_destroy",
    ]
    .map(|name| {
        btf.find_by_name_kind(name, |k| {
            matches!(k, bpfemu_loader::btf::BtfKind::Func { .. })
        })
        .expect("the kernel's BTF names the kfunc") as i32
    });
    let cases = [
        (5, 3),
        (0, 8 * 1024 * 1024 + 1),
        (0, 4),
        (i32::MIN, i32::MIN + 1),
        (9, 9),
    ];
    // The runtime is told the names of the ids, as build_runtime tells it from an object.
    let config = XdpConfig {
        kfunc_names: Ok(ids
            .into_iter()
            .zip(
                [
                    "bpf_iter_num_new",
                    "bpf_iter_num_next",
                    "bpf_iter_num_destroy",
                ]
                .map(String::from),
            )
            .collect()),
        ..XdpConfig::default()
    };
    let packet = packet(&[]);
    let mut compared = 0;
    for (start, end) in cases {
        for probe in 0..4u8 {
            let insns = register_probe(ids, start, end, probe);
            let at = format!("{start}..{end}, probe {probe}");
            let opts = kernel::LoadOptions::new(kernel::BPF_PROG_TYPE_XDP, &insns);
            let loaded = kernel::prog_load(&opts);
            let fd = loaded
                .fd
                .unwrap_or_else(|e| panic!("{at}: kernel load: errno {e}\n{}", loaded.log));
            let theirs = test_run(std::os::fd::AsFd::as_fd(&fd), &packet, None, 1)
                .unwrap_or_else(|e| panic!("{at}: errno {e}"));
            for engine in [
                Engine::Interp,
                Engine::Jit,
                Engine::JitTrusted,
                Engine::JitBaseline,
            ] {
                let spec = XdpProgramSpec {
                    name: "probe".into(),
                    insns: insns.clone(),
                };
                let mut rt = XdpRuntime::new(vec![spec], vec![], config.clone()).unwrap();
                rt.set_engine(&*engine.build(None)).unwrap();
                let ours = rt
                    .run(0, &packet, &PacketMeta::default())
                    .unwrap_or_else(|e| panic!("{at}, {}: {e}", engine.name()));
                assert_eq!(ours.retval, theirs.retval, "{at}, {}", engine.name());
                compared += 1;
            }
        }
    }
    eprintln!("{compared} register probes equal to the kernel's");
}

/// The command line end to end: `bpfemu diff --no-verify` (bpfemu's verifier does not check
/// iterators yet) over a bundled capture finds no difference with the kernel, under the
/// interpreter and the checked JIT, for both objects; without `--no-verify` it either says
/// why not or agrees too.
#[test]
fn bpfemu_diff_finds_no_difference() {
    if !kernel_or_skip("bpfemu_diff_finds_no_difference") {
        return;
    }
    let capture = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/pcap/flows.pcap");
    let diff = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_bpfemu"))
            .arg("diff")
            .args(args)
            .output()
            .expect("bpfemu runs")
    };
    for file in ["iter_sum.o", "iter_edges.o"] {
        let obj = object(file);
        let (obj, capture) = (obj.to_str().unwrap(), capture.to_str().unwrap());
        for engine in ["interp", "jit"] {
            let out = diff(&["--no-verify", "--engine", engine, obj, capture]);
            let stdout = String::from_utf8_lossy(&out.stdout);
            let last = stdout.lines().last().unwrap_or("");
            assert!(
                out.status.success() && last.ends_with(" packets, 0 mismatches"),
                "{file}, {engine}: {stdout}{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        // Verified first: refused with the way out while bpfemu's verifier does not check
        // iterators; equal to the kernel once it does.
        let verified = diff(&[obj, capture]);
        let (stdout, stderr) = (
            String::from_utf8_lossy(&verified.stdout),
            String::from_utf8_lossy(&verified.stderr),
        );
        match verified.status.success() {
            true => assert!(
                stdout.trim_end().ends_with(" packets, 0 mismatches"),
                "{stdout}"
            ),
            false => assert!(stderr.contains("--no-verify"), "{file}: {stderr}"),
        }
    }
}
