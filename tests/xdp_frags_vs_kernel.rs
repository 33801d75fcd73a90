//! Multi-buffer XDP frames against the kernel: packets longer than the 3520 bytes of an XDP
//! frame's linear part, which BPF_PROG_TEST_RUN (net/bpf/test_run.c) carries in page-sized
//! fragments, up to `MAX_SKB_FRAGS` of them, for every XDP program, with or without
//! `BPF_F_XDP_HAS_FRAGS`.
//!
//! Small programs (kernel assembler syntax) exercise each fragment-aware helper —
//! `bpf_xdp_get_buff_len`, `bpf_xdp_load_bytes/store_bytes` across fragment boundaries,
//! `bpf_xdp_adjust_tail` growing the last fragment and shrinking (releasing fragments, then
//! the linear part), `bpf_xdp_adjust_head/meta` (linear part only), `bpf_check_mtu` (linear
//! length only) — and the corpus objects run on jumbo frames. Each program is loaded into
//! the kernel twice (without and with `BPF_F_XDP_HAS_FRAGS`; both must answer alike) and run
//! by bpfemu; per packet the return value and `data_out` (or the errno) must be equal.
//!
//! Skipped with a message when bpf() is out of reach, unless `BPFEMU_REQUIRE_KERNEL=1`.

mod common;

use bpfemu::replay::hex;
use bpfemu::traffic::{Frame, Ipv6, Network, Transport};
use bpfemu::vm_runtime::build_runtime;
use bpfemu_conformance::libbpf::{
    LibbpfObject, LogOptions, TestRunOutput, kernel_or_skip, test_run,
};
use bpfemu_isa::asm::assemble_kernel;
use bpfemu_kernel::{self as kernel, BPF_PROG_TYPE_XDP};
use bpfemu_loader::{LoadOptions, load_file};
use bpfemu_vm::xdp::{PacketError, PacketMeta, XdpConfig, XdpOutcome, XdpProgramSpec, XdpRuntime};
use std::net::{Ipv4Addr, Ipv6Addr};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

/// `BPF_F_XDP_HAS_FRAGS`.
const BPF_F_XDP_HAS_FRAGS: u32 = 1 << 5;
/// The linear part of test_run's frame: a page less 256 bytes of headroom and 320 of
/// `skb_shared_info`.
const LINEAR: usize = 3520;
/// The longest packet test_run takes: the linear part and 17 page-sized fragments.
const LONGEST: usize = LINEAR + 17 * 4096;

/// The sizes every program runs on: below, at and past the linear limit, at fragment
/// boundaries, jumbo frames, the longest packet the kernel accepts and the first it refuses.
const SIZES: &[usize] = &[
    14,
    3519,
    LINEAR,
    LINEAR + 1,
    4096,
    LINEAR + 4096,
    LINEAR + 4097,
    9000,
    16384,
    65535,
    LONGEST - 1,
    LONGEST,
    LONGEST + 1,
    100_000,
];

/// A packet whose bytes tell their offset apart across pages.
fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i ^ (i >> 8) ^ (i >> 16)) as u8).collect()
}

/// One program on both sides: the kernel's two loads (without and with the frags flag) and
/// bpfemu's runtime.
struct Both {
    name: String,
    plain: OwnedFd,
    frags: OwnedFd,
    rt: XdpRuntime,
}

impl Both {
    fn new(name: &str, src: &str) -> Both {
        let insns = assemble_kernel(src).unwrap_or_else(|e| panic!("{name}: {e}\n{src}"));
        let load = |flags| {
            let mut opts = kernel::LoadOptions::new(BPF_PROG_TYPE_XDP, &insns);
            opts.prog_flags = flags;
            let r = kernel::prog_load(&opts);
            r.fd.unwrap_or_else(|e| panic!("{name}: kernel load: errno {e}\n{}", r.log))
        };
        let spec = XdpProgramSpec {
            name: name.into(),
            insns: insns.clone(),
        };
        Both {
            name: name.into(),
            plain: load(0),
            frags: load(BPF_F_XDP_HAS_FRAGS),
            rt: XdpRuntime::new(vec![spec], vec![], XdpConfig::default()).unwrap(),
        }
    }

    /// Runs `data` on all three and compares; a short description of the result.
    fn check(&mut self, data: &[u8]) -> String {
        let at = format!("{} on {} bytes", self.name, data.len());
        let plain = test_run(self.plain.as_fd(), data, None, 1);
        let frags = test_run(self.frags.as_fd(), data, None, 1);
        let seen = |r: &Result<TestRunOutput, i32>| {
            r.as_ref()
                .map(|o| (o.retval, o.data.clone()))
                .map_err(|e| *e)
        };
        assert_eq!(
            seen(&plain),
            seen(&frags),
            "{at}: the kernel with and without the frags flag"
        );
        compare(&at, self.rt.run(0, data, &PacketMeta::default()), plain)
    }
}

/// bpfemu's outcome against the kernel's: equal retval and data_out, or equal errno.
fn compare(
    at: &str,
    ours: Result<XdpOutcome, PacketError>,
    theirs: Result<TestRunOutput, i32>,
) -> String {
    match (ours, theirs) {
        (Ok(o), Ok(k)) => {
            assert_eq!(o.retval, k.retval, "{at}: retval");
            if o.data_out != k.data {
                let first = o.data_out.iter().zip(&k.data).position(|(a, b)| a != b);
                panic!(
                    "{at}: data_out differs: bpfemu {} bytes, kernel {} bytes, first \
                     difference at {first:?}\nbpfemu {}\nkernel {}",
                    o.data_out.len(),
                    k.data.len(),
                    hex(&o.data_out[..o.data_out.len().min(96)]),
                    hex(&k.data[..k.data.len().min(96)]),
                );
            }
            format!("retval {:#x}, {} bytes out", o.retval, o.data_out.len())
        }
        (Err(PacketError::Refused { errno, .. }), Err(kerr)) => {
            assert_eq!(errno.0, kerr, "{at}: errno");
            format!("errno {kerr}")
        }
        (o, k) => panic!("{at}: bpfemu {o:?}, kernel {k:?}"),
    }
}

/// An XDP program's return value from two 8-bit helper results: `(first << 8) | second`.
const PAIR: &str = "r7 &= 255\nr7 <<= 8\nr0 &= 255\nr0 |= r7\n";

#[test]
fn long_packets_run_in_fragments_for_every_program() {
    if !kernel_or_skip("long_packets_run_in_fragments_for_every_program") {
        return;
    }
    let mut buff_len = Both::new("buff_len", "call bpf_xdp_get_buff_len#188\nexit\n");
    let mut linear = Both::new(
        "linear_len",
        "r2 = *(u32 *)(r1 +4)\nr1 = *(u32 *)(r1 +0)\nr2 -= r1\nr0 = r2\nexit\n",
    );
    for &len in SIZES.iter().chain(&[0, 13]) {
        let data = pattern(len);
        let total = buff_len.check(&data);
        let lin = linear.check(&data);
        eprintln!("{len} bytes: bpf_xdp_get_buff_len {total}; data_end - data {lin}");
    }
}

/// `bpf_xdp_load_bytes(ctx, off, stack, n)` then `bpf_xdp_store_bytes(ctx, 0, stack, n)`:
/// what was loaded lands at the packet's start; the load's r0 is the return value.
fn load_program(off: i64, n: usize) -> String {
    let mut s = String::from("r6 = r1\nr1 = 0\n");
    for i in (8..=n).step_by(8) {
        s += &format!("*(u64 *)(r10 -{i}) = r1\n");
    }
    s += &format!(
        "r1 = r6\nr2 = {off}\nr3 = r10\nr3 += -{n}\nr4 = {n}\ncall bpf_xdp_load_bytes#189\n\
         r7 = r0\nr1 = r6\nr2 = 0\nr3 = r10\nr3 += -{n}\nr4 = {n}\n\
         call bpf_xdp_store_bytes#190\nr0 = r7\nexit\n"
    );
    s
}

/// `bpf_xdp_store_bytes(ctx, off, stack, n)` of a recognisable pattern; r0 is its result.
fn store_program(off: i64, n: usize) -> String {
    let mut s = String::from("r6 = r1\n");
    for i in (8..=n).step_by(8) {
        s += &format!(
            "r1 = {:#x} ll\n*(u64 *)(r10 -{i}) = r1\n",
            0xa0a1_a2a3_a4a5_a6a7u64 + i as u64
        );
    }
    s += &format!(
        "r1 = r6\nr2 = {off}\nr3 = r10\nr3 += -{n}\nr4 = {n}\ncall bpf_xdp_store_bytes#190\nexit\n"
    );
    s
}

#[test]
fn load_and_store_bytes_across_fragments_match_kernel() {
    if !kernel_or_skip("load_and_store_bytes_across_fragments_match_kernel") {
        return;
    }
    let fixed = [
        0i64, 3504, 3510, 3519, 3520, 7610, 7616, 65535, 65536, 70000, -1,
    ];
    let mut runs = 0;
    for n in [16usize, 256] {
        let mut progs: Vec<(i64, Both, Both)> = fixed
            .iter()
            .map(|&off| {
                (
                    off,
                    Both::new(&format!("load@{off}x{n}"), &load_program(off, n)),
                    Both::new(&format!("store@{off}x{n}"), &store_program(off, n)),
                )
            })
            .collect();
        for &len in SIZES {
            let data = pattern(len);
            for (_, load, store) in &mut progs {
                load.check(&data);
                store.check(&data);
                runs += 2;
            }
            // The packet's last bytes, and one past them.
            for off in [len as i64 - n as i64, len as i64 - n as i64 + 1] {
                if off >= 0 && len >= n {
                    Both::new(&format!("load@{off}x{n}"), &load_program(off, n)).check(&data);
                    Both::new(&format!("store@{off}x{n}"), &store_program(off, n)).check(&data);
                    runs += 2;
                }
            }
        }
    }
    eprintln!("{runs} load/store runs equal to the kernel's");
}

/// Two `bpf_xdp_adjust_tail` calls; the return value pairs their results.
fn tail_program(first: i64, second: i64) -> String {
    format!(
        "r6 = r1\nr2 = {first}\ncall bpf_xdp_adjust_tail#65\nr7 = r0\nr1 = r6\nr2 = {second}\n\
         call bpf_xdp_adjust_tail#65\n{PAIR}exit\n"
    )
}

#[test]
fn adjust_tail_on_fragments_matches_kernel() {
    if !kernel_or_skip("adjust_tail_on_fragments_matches_kernel") {
        return;
    }
    let mut runs = 0;
    for &len in SIZES {
        let lin = len.min(LINEAR) as i64;
        let frags = len as i64 - lin;
        let last = match frags % 4096 {
            0 if frags > 0 => 4096,
            r => r,
        };
        let len = len as i64;
        let pairs = [
            (-1, 0),
            (1, 0),
            (-14, 0),
            (0, 0),
            (4096 - last, 1),
            (4096, 0),
            (4097, 0),
            (-last, 0),
            (-last, 1),
            (-last, 100),
            (-last - 1, 0),
            (-frags, 0),
            (-frags, 1),
            (-frags - 10, 10),
            (-frags - 10, 11),
            (-frags - 1, 0),
            (-(len - 14), 0),
            (-(len - 13), 0),
            (-(len - 14), 3506),
            (i32::MIN as i64, 0),
            (i32::MAX as i64, 0),
            (-5000, -5000),
        ];
        let data = pattern(len as usize);
        for (a, b) in pairs {
            Both::new(&format!("tail({a},{b})"), &tail_program(a, b)).check(&data);
            runs += 1;
        }
    }
    eprintln!("{runs} adjust_tail runs equal to the kernel's");
}

#[test]
fn head_meta_and_mtu_with_fragments_match_kernel() {
    if !kernel_or_skip("head_meta_and_mtu_with_fragments_match_kernel") {
        return;
    }
    let head_meta = |meta: i64, head: i64| {
        format!(
            "r6 = r1\nr2 = {meta}\ncall bpf_xdp_adjust_meta#54\nr7 = r0\nr1 = r6\nr2 = {head}\n\
             call bpf_xdp_adjust_head#44\n{PAIR}exit\n"
        )
    };
    // bpf_check_mtu(ctx, 0, &mtu, len_diff, 0) on the loopback device (MTU 65536): the
    // kernel checks the linear length only.
    let mtu = |diff: i64| {
        format!(
            "r6 = r1\nr1 = 0\n*(u32 *)(r10 -4) = r1\nr1 = r6\nr2 = 0\nr3 = r10\nr3 += -4\n\
             r4 = {diff}\nr5 = 0\ncall bpf_check_mtu#163\nexit\n"
        )
    };
    let mut progs: Vec<Both> = [
        (0, -16),
        (-8, 3506),
        (-8, 3507),
        (-4, -200),
        (0, 3506),
        (0, 3507),
    ]
    .iter()
    .map(|&(m, h)| Both::new(&format!("meta({m})+head({h})"), &head_meta(m, h)))
    .collect();
    progs.extend(
        [62030, 62031, -4000]
            .iter()
            .map(|&d| Both::new(&format!("check_mtu({d})"), &mtu(d))),
    );
    // What `*mtu_len` holds afterwards, on success and on the errors (flags, no device):
    // the return value is `(r0 & 0xff) << 24 | mtu_len`.
    let mtu_out = |ifindex: i64, mtu_in: i64, flags: i64| {
        format!(
            "r6 = r1
r1 = {mtu_in}
*(u32 *)(r10 -4) = r1
r1 = r6
r2 = {ifindex}
r3 = r10
             r3 += -4
r4 = 0
r5 = {flags}
call bpf_check_mtu#163
r0 &= 255
r0 <<= 24
             r1 = *(u32 *)(r10 -4)
r0 |= r1
exit
"
        )
    };
    for (ifindex, mtu_in, flags) in [
        (0, 0, 0),
        (0, 1234, 0),
        (0, 1234, 1),
        (999, 1234, 0),
        (1, 65600, 0),
    ] {
        progs.push(Both::new(
            &format!("check_mtu(ifindex {ifindex}, mtu {mtu_in}, flags {flags})"),
            &mtu_out(ifindex, mtu_in, flags),
        ));
    }
    for &len in SIZES {
        let data = pattern(len);
        for p in &mut progs {
            p.check(&data);
        }
    }
}

/// Ethernet frames of exactly `len` bytes (when at least the headers fit): IPv4/UDP, IPv4/TCP,
/// IPv6/UDP behind extension headers, VLAN-tagged IPv4/UDP. IP and UDP length fields wrap
/// past 65535 bytes, as they would in a crafted frame.
fn jumbo_frames(len: usize) -> Vec<Vec<u8>> {
    (0..4)
        .filter_map(|shape| {
            let headers = jumbo_frame(shape, Vec::new()).build().len();
            let payload = len.checked_sub(headers)?;
            let frame = jumbo_frame(shape, pattern(payload)).build();
            assert_eq!(frame.len(), len);
            Some(frame)
        })
        .collect()
}

/// Frame `shape` of [`jumbo_frames`] around `payload`.
fn jumbo_frame(shape: usize, payload: Vec<u8>) -> Frame {
    let c4 = Ipv4Addr::new(198, 51, 100, 7);
    let s4 = Ipv4Addr::new(192, 0, 2, 1);
    let udp = |dport, payload| Transport::Udp {
        sport: 40000,
        dport,
        payload,
    };
    match shape {
        0 => Frame::ipv4(c4, s4, udp(53, payload)),
        1 => Frame::ipv4(
            c4,
            s4,
            Transport::Tcp {
                sport: 40000,
                dport: 80,
                flags: 0x18,
                seq: 7,
                payload,
            },
        ),
        2 => {
            let mut ip6 = Ipv6::new(
                Ipv6Addr::new(0x2001, 0xdb8, 1, 0, 0, 0, 0, 7),
                Ipv6Addr::new(0x2001, 0xdb8, 2, 0, 0, 0, 0, 1),
            );
            ip6.extensions = vec![
                (0, vec![0, 1, 4, 0, 0, 0, 0]),
                (60, vec![0, 1, 4, 0, 0, 0, 0]),
            ];
            let mut f = Frame::ipv6(ip6.src, ip6.dst, udp(53, payload));
            f.network = Network::V6(ip6);
            f
        }
        _ => Frame::ipv4(c4, s4, udp(4789, payload)).with_vlans(&[(0x8100, 100)]),
    }
}

/// The corpus (-mcpu=v3), loaded by libbpf as its sections say (no `xdp.frags`), on jumbo
/// frames of every size.
#[test]
fn corpus_on_jumbo_frames_matches_kernel() {
    if !kernel_or_skip("corpus_on_jumbo_frames_matches_kernel") {
        return;
    }
    let objs = common::corpus("v3", &["router", "legacy_maps"]);
    let packets: Vec<Vec<u8>> = SIZES.iter().flat_map(|&n| jumbo_frames(n)).collect();
    let mut total = 0;
    for (_, path) in objs {
        let mut kobj = LibbpfObject::open_file(&path).expect("libbpf opens");
        let loaded = kobj.load(&LogOptions::default());
        assert!(
            loaded.result.is_ok(),
            "{}: {}",
            path.display(),
            loaded.failure_tail(20)
        );
        let obj = load_file(&path, &LoadOptions::default()).expect("bpfemu loads");
        let mut rt = build_runtime(&obj, XdpConfig::default()).unwrap();
        for prog in &obj.programs {
            let index = rt.program_index(&prog.name).unwrap();
            let fd: BorrowedFd<'_> = kobj.program_fd(&prog.name).expect("kernel program");
            let mut seen = std::collections::BTreeMap::<String, usize>::new();
            for data in &packets {
                let at = format!("{} {} on {} bytes", path.display(), prog.name, data.len());
                let ours = rt.run(index, data, &PacketMeta::default());
                let theirs = test_run(fd, data, None, 1);
                let summary = compare(&at, ours, theirs);
                *seen
                    .entry(summary.split(',').next().unwrap().to_string())
                    .or_default() += 1;
                total += 1;
            }
            eprintln!("{} {}: {seen:?}", path.display(), prog.name);
        }
    }
    eprintln!("{total} corpus runs on jumbo frames equal to the kernel's");
    assert!(total > 0);
}

/// `bpf_perf_event_output(ctx, perf_array, (ctx_len << 32) | 0, stack, 8)` into an empty
/// perf event array: a ctx length within `bpf_xdp_get_buff_len` (fragments included) passes
/// the size check and meets the empty slot (-ENOENT); a longer one is -EFAULT.
#[test]
fn perf_event_output_ctx_length_counts_fragments() {
    if !kernel_or_skip("perf_event_output_ctx_length_counts_fragments") {
        return;
    }
    use bpfemu_vm::maps::{MapSpec, MapType};
    use bpfemu_vm::xdp::MapInit;
    let kmap = kernel::map_create(&kernel::MapSpec {
        map_type: MapType::PerfEventArray.raw(),
        key_size: 4,
        value_size: 4,
        max_entries: 1,
        ..Default::default()
    })
    .expect("perf event array");
    let mut seen = std::collections::BTreeMap::<String, usize>::new();
    for &len in SIZES {
        let data = pattern(len);
        let lin = len.min(LINEAR);
        for ctx_len in [lin, lin + 1, len, len + 1] {
            let src = format!(
                "r6 = r1\nr1 = 0\n*(u64 *)(r10 -8) = r1\nr1 = r6\nr2 = 0x0 ll\n\
                 r3 = {:#x} ll\nr4 = r10\nr4 += -8\nr5 = 8\ncall bpf_perf_event_output#25\nexit\n",
                (ctx_len as u64) << 32
            );
            let mut insns = assemble_kernel(&src).unwrap();
            // The map reference: `BPF_PSEUDO_MAP_FD`, the kernel's fd / bpfemu's map index.
            insns[4].src = 1;
            insns[4].imm = kernel::fd_imm(&kmap);
            let mut opts = kernel::LoadOptions::new(BPF_PROG_TYPE_XDP, &insns);
            opts.log_level = 0;
            let r = kernel::prog_load(&opts);
            let fd = r.fd.unwrap_or_else(|e| panic!("perf program: errno {e}"));
            insns[4].imm = 0;
            let spec = MapSpec::new("events", MapType::PerfEventArray, 4, 4, 1);
            let mut rt = XdpRuntime::new(
                vec![XdpProgramSpec {
                    name: "perf".into(),
                    insns,
                }],
                vec![(spec, MapInit::default())],
                XdpConfig::default(),
            )
            .unwrap();
            let at = format!("perf ctx_len {ctx_len} on {len} bytes");
            let summary = compare(
                &at,
                rt.run(0, &data, &PacketMeta::default()),
                test_run(fd.as_fd(), &data, None, 1),
            );
            *seen.entry(summary).or_default() += 1;
        }
    }
    eprintln!("{seen:?}");
    // -ENOENT (within the packet) and -EFAULT (past it) both met.
    assert!(
        seen.contains_key("retval 0xfffffffe, 14 bytes out"),
        "{seen:?}"
    );
    assert!(
        seen.keys().any(|k| k.starts_with("retval 0xfffffff2")),
        "{seen:?}"
    );
}
