//! `bpfemu_vm::fib` against the kernel's `bpf_fib_lookup`: a topology is built in a private
//! network namespace, an XDP program calls the helper on a params struct it reads from a map
//! (run with BPF_PROG_TEST_RUN, ingress on an interface of the namespace, from a thread that
//! entered it: `bpfemu_kernel::netns`), and for every lookup in a table the kernel's struct and return value must equal
//! the model's, built from `Fib::from_system` of the same namespace.

use bpfemu_conformance::libbpf::{XdpMd, kernel_or_skip, test_run_xdp};
use bpfemu_isa::{AluOp, CallTarget, Insn, JmpCond, LdImm64Kind, Reg, Size, Source, Width};
use bpfemu_kernel::netns::Netns;
use bpfemu_kernel::{self as kernel, BPF_PROG_TYPE_XDP, LoadOptions, MapSpec};
use bpfemu_vm::fib::{self, Fib, offsets};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};

/// Map value: params (64 bytes), flags (u32 at 64), retval (u64 at 72).
const VALUE_SIZE: u32 = 80;

fn sh(ns: &Netns, args: &[&str]) {
    ns.ip(args).unwrap_or_else(|e| panic!("{e}"));
}

fn sysctl(ns: &Netns, key: &str, value: &str) {
    ns.sysctl(key, value).unwrap_or_else(|e| panic!("{e}"));
}

fn ifindex(ns: &Netns, name: &str) -> u32 {
    ns.ifindex(name).unwrap_or_else(|e| panic!("{e}"))
}

/// The XDP program: look up the value, call bpf_fib_lookup(ctx, value, plen, value.flags),
/// store the return value, XDP_PASS.
fn program(map: &OwnedFd, plen: i32) -> Vec<bpfemu_isa::RawInsn> {
    let insns = [
        Insn::Alu {
            width: Width::W64,
            op: AluOp::Mov,
            dst: Reg::R6,
            src: Source::Reg(Reg::R1),
        },
        Insn::Store {
            size: Size::W,
            dst: Reg::R10,
            off: -4,
            imm: 0,
        },
        Insn::Alu {
            width: Width::W64,
            op: AluOp::Mov,
            dst: Reg::R2,
            src: Source::Reg(Reg::R10),
        },
        Insn::Alu {
            width: Width::W64,
            op: AluOp::Add,
            dst: Reg::R2,
            src: Source::Imm(-4),
        },
        Insn::LdImm64 {
            dst: Reg::R1,
            kind: LdImm64Kind::MapFd,
            imm: map.as_raw_fd(),
            next_imm: 0,
        },
        Insn::Call(CallTarget::Helper(1)), // map_lookup_elem
        Insn::Jump {
            width: Width::W64,
            cond: JmpCond::Eq,
            dst: Reg::R0,
            src: Source::Imm(0),
            off: 7,
        },
        Insn::Alu {
            width: Width::W64,
            op: AluOp::Mov,
            dst: Reg::R7,
            src: Source::Reg(Reg::R0),
        },
        Insn::Alu {
            width: Width::W64,
            op: AluOp::Mov,
            dst: Reg::R1,
            src: Source::Reg(Reg::R6),
        },
        Insn::Alu {
            width: Width::W64,
            op: AluOp::Mov,
            dst: Reg::R2,
            src: Source::Reg(Reg::R7),
        },
        Insn::Alu {
            width: Width::W64,
            op: AluOp::Mov,
            dst: Reg::R3,
            src: Source::Imm(plen),
        },
        Insn::Load {
            size: Size::W,
            sign_extend: false,
            dst: Reg::R4,
            src: Reg::R7,
            off: 64,
        },
        Insn::Call(CallTarget::Helper(69)), // fib_lookup
        Insn::StoreReg {
            size: Size::DW,
            dst: Reg::R7,
            src: Reg::R0,
            off: 72,
        },
        Insn::Alu {
            width: Width::W64,
            op: AluOp::Mov,
            dst: Reg::R0,
            src: Source::Imm(2),
        },
        Insn::Exit,
    ];
    insns.iter().flat_map(Insn::encode).collect()
}

fn map_update(map: &OwnedFd, value: &[u8; VALUE_SIZE as usize]) {
    let key = 0u32;
    // SAFETY: key and value are live buffers of the map's key and value sizes.
    let rc = unsafe {
        libbpf_sys::bpf_map_update_elem(
            map.as_raw_fd(),
            (&key as *const u32).cast(),
            value.as_ptr().cast(),
            0,
        )
    };
    assert_eq!(rc, 0, "map update");
}

fn map_lookup(map: &OwnedFd) -> [u8; VALUE_SIZE as usize] {
    let key = 0u32;
    let mut value = [0u8; VALUE_SIZE as usize];
    // SAFETY: key and value are live buffers of the map's key and value sizes.
    let rc = unsafe {
        libbpf_sys::bpf_map_lookup_elem(
            map.as_raw_fd(),
            (&key as *const u32).cast(),
            value.as_mut_ptr().cast(),
        )
    };
    assert_eq!(rc, 0, "map lookup");
    value
}

#[derive(Clone, Debug)]
struct Case {
    name: String,
    params: [u8; 64],
    flags: u32,
    plen: i32,
}

/// A params struct with the output-only bytes filled with junk, so that every write shows.
fn params(family: u8, ifindex: u32, dst: IpAddr, src: IpAddr, tot_len: u16) -> [u8; 64] {
    let mut p = [0u8; 64];
    p[offsets::FAMILY] = family;
    p[offsets::L4_PROTOCOL] = 6;
    p[offsets::SPORT..offsets::SPORT + 2].copy_from_slice(&1234u16.to_be_bytes());
    p[offsets::DPORT..offsets::DPORT + 2].copy_from_slice(&80u16.to_be_bytes());
    p[offsets::TOT_LEN..offsets::TOT_LEN + 2].copy_from_slice(&tot_len.to_ne_bytes());
    p[offsets::IFINDEX..offsets::IFINDEX + 4].copy_from_slice(&ifindex.to_ne_bytes());
    p[12..16].copy_from_slice(&[0, 0x11, 0x22, 0x33]); // tos 0 / rt_metric junk
    match src {
        IpAddr::V4(a) => p[16..20].copy_from_slice(&a.octets()),
        IpAddr::V6(a) => p[16..32].copy_from_slice(&a.octets()),
    }
    match dst {
        IpAddr::V4(a) => {
            p[32..36].copy_from_slice(&a.octets());
            p[36..48].fill(0x5a);
        }
        IpAddr::V6(a) => p[32..48].copy_from_slice(&a.octets()),
    }
    p[48..52].copy_from_slice(&[0xaa, 0xbb, 0xcc, 0xdd]);
    p[52..64].fill(0xee);
    p
}

fn with_tbid(mut p: [u8; 64], tbid: u32) -> [u8; 64] {
    p[offsets::TBID..offsets::TBID + 4].copy_from_slice(&tbid.to_ne_bytes());
    p
}

fn with_mark(mut p: [u8; 64], mark: u32) -> [u8; 64] {
    p[offsets::MARK..offsets::MARK + 4].copy_from_slice(&mark.to_ne_bytes());
    p
}

struct Topo {
    r0: u32,
    r1: u32,
    r2: u32,
    p0: u32,
}

fn build(ns: &Netns) -> Topo {
    sysctl(ns, "net.ipv6.conf.all.accept_dad", "0");
    sysctl(ns, "net.ipv6.conf.default.accept_dad", "0");
    sh(ns, &["link", "set", "lo", "up"]);
    for (r, p) in [("r0", "p0"), ("r1", "p1"), ("r2", "p2")] {
        sh(ns, &["link", "add", r, "type", "veth", "peer", "name", p]);
    }
    sh(ns, &["link", "set", "r0", "address", "02:00:00:00:00:10"]);
    sh(
        ns,
        &[
            "link",
            "set",
            "r1",
            "address",
            "02:00:00:00:00:11",
            "mtu",
            "1400",
        ],
    );
    sh(ns, &["link", "set", "r2", "address", "02:00:00:00:00:12"]);
    for d in ["r0", "r1", "r2", "p0", "p1", "p2"] {
        sh(ns, &["link", "set", d, "up"]);
    }
    sysctl(ns, "net.ipv4.conf.all.forwarding", "1");
    sysctl(ns, "net.ipv6.conf.all.forwarding", "1");
    sysctl(ns, "net.ipv4.conf.r2.forwarding", "0");
    sysctl(ns, "net.ipv6.conf.r2.forwarding", "0");
    for (dev, a4, a6) in [
        ("r0", "10.0.1.1/24", "2001:db8:1::1/64"),
        ("r1", "10.0.2.1/24", "2001:db8:2::1/64"),
        ("r2", "10.0.3.1/24", "2001:db8:3::1/64"),
    ] {
        sh(ns, &["addr", "add", a4, "dev", dev]);
        sh(ns, &["-6", "addr", "add", a6, "dev", dev, "nodad"]);
    }
    sh(ns, &["addr", "add", "10.0.1.9/24", "dev", "r0"]); // secondary
    sh(ns, &["addr", "add", "192.168.77.1/24", "dev", "r2"]);

    let neigh = |ip: &str, mac: &str, dev: &str, nud: &str| {
        sh(
            ns,
            &["neigh", "add", ip, "lladdr", mac, "dev", dev, "nud", nud],
        );
    };
    neigh("10.0.1.2", "02:00:00:00:01:02", "r0", "permanent");
    neigh("10.0.2.2", "02:00:00:00:02:02", "r1", "permanent");
    neigh("10.0.1.5", "02:00:00:00:01:05", "r0", "stale");
    neigh("10.0.1.6", "02:00:00:00:01:06", "r0", "noarp");
    neigh("10.70.0.5", "02:00:00:00:70:05", "r0", "permanent");
    neigh("2001:db8:1::2", "02:00:00:00:61:02", "r0", "permanent");
    neigh("2001:db8:2::2", "02:00:00:00:62:02", "r1", "permanent");
    neigh("fe80::2", "02:00:00:00:fe:02", "r0", "permanent");
    sh(
        ns,
        &["neigh", "add", "10.0.1.7", "dev", "r0", "nud", "failed"],
    );

    let route = |args: &[&str]| {
        let mut v = Vec::new();
        let args = match args.split_first() {
            Some((&"-6", rest)) => {
                v.push("-6");
                rest
            }
            _ => args,
        };
        v.extend(["route", "add"]);
        v.extend_from_slice(args);
        sh(ns, &v);
    };
    route(&["10.10.0.0/16", "via", "10.0.1.2"]);
    route(&["10.10.5.0/24", "via", "10.0.2.2", "metric", "10"]);
    route(&["10.10.5.0/24", "via", "10.0.1.2", "metric", "20"]);
    route(&["10.11.0.0/16", "via", "10.0.1.5"]);
    route(&["10.12.0.0/16", "via", "10.0.1.6"]);
    route(&["10.13.0.0/16", "via", "10.0.1.7"]);
    route(&["10.20.0.0/16", "via", "10.0.1.3"]);
    route(&["10.30.0.0/16", "via", "10.0.2.2"]);
    route(&["blackhole", "10.40.0.0/16"]);
    route(&["unreachable", "10.41.0.0/16"]);
    route(&["prohibit", "10.42.0.0/16"]);
    route(&["throw", "10.43.0.0/16"]);
    route(&["10.50.0.0/16", "via", "10.0.1.2", "src", "10.0.3.1"]);
    route(&["10.60.0.0/16", "via", "inet6", "2001:db8:1::2", "dev", "r0"]);
    route(&["10.70.0.0/16", "dev", "r0"]);
    route(&["10.80.0.0/16", "via", "10.0.1.2", "mtu", "1300"]);
    route(&[
        "10.90.0.0/16",
        "via",
        "10.0.2.2",
        "dev",
        "r1",
        "table",
        "100",
    ]);
    route(&["10.10.0.0/16", "via", "10.0.2.2", "table", "100"]);
    route(&["unreachable", "default", "table", "100"]);
    route(&["-6", "2001:db8:10::/48", "via", "2001:db8:1::2"]);
    route(&[
        "-6",
        "2001:db8:10:5::/64",
        "via",
        "2001:db8:2::2",
        "metric",
        "10",
    ]);
    route(&[
        "-6",
        "2001:db8:10:5::/64",
        "via",
        "2001:db8:1::2",
        "metric",
        "20",
    ]);
    route(&["-6", "2001:db8:20::/48", "via", "2001:db8:1::3"]);
    route(&["-6", "2001:db8:30::/48", "via", "2001:db8:2::2"]);
    route(&["-6", "blackhole", "2001:db8:40::/48"]);
    route(&["-6", "unreachable", "2001:db8:41::/48"]);
    route(&["-6", "prohibit", "2001:db8:42::/48"]);
    route(&[
        "-6",
        "2001:db8:50::/48",
        "via",
        "2001:db8:1::2",
        "src",
        "2001:db8:3::1",
    ]);
    route(&["-6", "2001:db8:60::/48", "via", "fe80::2", "dev", "r0"]);
    route(&[
        "-6",
        "2001:db8:10::/48",
        "via",
        "2001:db8:2::2",
        "table",
        "100",
    ]);
    Topo {
        r0: ifindex(ns, "r0"),
        r1: ifindex(ns, "r1"),
        r2: ifindex(ns, "r2"),
        p0: ifindex(ns, "p0"),
    }
}

/// (label, flags, ifindex, tot_len, tbid, mark)
type Variant = (&'static str, u32, u32, u16, Option<u32>, Option<u32>);

fn cases(t: &Topo) -> Vec<Case> {
    let v4 = |s: &str| IpAddr::V4(s.parse::<Ipv4Addr>().unwrap());
    let v6 = |s: &str| IpAddr::V6(s.parse::<Ipv6Addr>().unwrap());
    let dsts4 = [
        "10.10.1.1",
        "10.10.5.1",
        "10.11.1.1",
        "10.12.1.1",
        "10.13.1.1",
        "10.20.1.1",
        "10.30.1.1",
        "10.40.1.1",
        "10.41.1.1",
        "10.42.1.1",
        "10.43.1.1",
        "10.50.1.1",
        "10.60.1.1",
        "10.70.0.5",
        "10.70.0.6",
        "10.80.1.1",
        "10.90.1.1",
        "192.0.2.1",
        "10.0.1.1",
        "10.0.1.9",
        "10.0.1.255",
        "10.0.2.77",
        "127.0.0.1",
        "10.99.1.1",
        "10.98.1.1",
    ];
    let dsts6 = [
        "2001:db8:10::1",
        "2001:db8:10:5::1",
        "2001:db8:20::1",
        "2001:db8:30::1",
        "2001:db8:40::1",
        "2001:db8:41::1",
        "2001:db8:42::1",
        "2001:db8:50::1",
        "2001:db8:60::1",
        "2001:db8:1::1",
        "2001:db8:1::2",
        "2001:db8:2::77",
        "2001:db8:99::1",
        "fe80::2",
        "ff02::1",
        "::1",
    ];
    use fib::{
        BPF_FIB_LOOKUP_DIRECT as D, BPF_FIB_LOOKUP_MARK as M, BPF_FIB_LOOKUP_OUTPUT as O,
        BPF_FIB_LOOKUP_SKIP_NEIGH as N, BPF_FIB_LOOKUP_SRC as S, BPF_FIB_LOOKUP_TBID as T,
    };
    // (label, flags, ifindex, tot_len, tbid, mark)
    let variants: Vec<Variant> = vec![
        ("plain", 0, t.r0, 0, None, None),
        ("direct", D, t.r0, 0, None, None),
        ("output-r0", O, t.r0, 0, None, None),
        ("output-r1", O, t.r1, 0, None, None),
        ("skip-neigh", N, t.r0, 0, None, None),
        ("src", S, t.r0, 0, None, None),
        ("src-skip-neigh", S | N, t.r0, 0, None, None),
        ("direct-output-src", D | O | S, t.r1, 0, None, None),
        ("tbid100", D | T, t.r0, 0, Some(100), None),
        ("tbid0", D | T, t.r0, 0, Some(0), None),
        ("tbid255", D | T, t.r0, 0, Some(255), None),
        ("tbid200-missing", D | T, t.r0, 0, Some(200), None),
        ("tbid-without-direct", T, t.r0, 0, Some(100), None),
        ("mark5", M, t.r0, 0, None, Some(5)),
        ("mark5-direct", M | D, t.r0, 0, None, Some(5)),
        ("totlen1400", 0, t.r0, 1400, None, None),
        ("totlen1401", 0, t.r0, 1401, None, None),
        ("totlen1500", 0, t.r0, 1500, None, None),
        ("totlen1501", 0, t.r0, 1501, None, None),
        ("fwd-disabled", 0, t.r2, 0, None, None),
        ("ingress-p0", 0, t.p0, 0, None, None),
        ("no-such-dev", 0, 999, 0, None, None),
    ];
    let mut out = Vec::new();
    for (family, dsts, src) in [
        (fib::AF_INET, &dsts4[..], v4("0.0.0.0")),
        (fib::AF_INET6, &dsts6[..], v6("::")),
    ] {
        for dst in dsts {
            let dst_ip = if family == fib::AF_INET {
                v4(dst)
            } else {
                v6(dst)
            };
            for &(label, flags, ifx, tot_len, tbid, mark) in &variants {
                let mut p = params(family, ifx, dst_ip, src, tot_len);
                if let Some(tb) = tbid {
                    p = with_tbid(p, tb);
                }
                if let Some(m) = mark {
                    p = with_mark(p, m);
                }
                out.push(Case {
                    name: format!("{dst} {label}"),
                    params: p,
                    flags,
                    plen: 64,
                });
            }
        }
    }
    // A source address given as input (it takes part in rule matching and is overwritten by
    // BPF_FIB_LOOKUP_SRC), and link-local sources (never forwarded).
    out.push(Case {
        name: "10.10.1.1 from 10.0.1.77 src".into(),
        params: params(fib::AF_INET, t.r0, v4("10.10.1.1"), v4("10.0.1.77"), 0),
        flags: S,
        plen: 64,
    });
    out.push(Case {
        name: "2001:db8:10::1 from fe80::9".into(),
        params: params(fib::AF_INET6, t.r0, v6("2001:db8:10::1"), v6("fe80::9"), 0),
        flags: 0,
        plen: 64,
    });
    // The helper's own checks.
    let base = params(fib::AF_INET, t.r0, v4("10.10.1.1"), v4("0.0.0.0"), 0);
    out.push(Case {
        name: "bad flag".into(),
        params: base,
        flags: 1 << 6,
        plen: 64,
    });
    out.push(Case {
        name: "plen 32".into(),
        params: base,
        flags: 0,
        plen: 32,
    });
    out.push(Case {
        name: "plen 72".into(),
        params: base,
        flags: 0,
        plen: 72,
    });
    let mut bad_family = base;
    bad_family[0] = 7;
    out.push(Case {
        name: "family 7".into(),
        params: bad_family,
        flags: 0,
        plen: 64,
    });
    out
}

/// Runs every case in the kernel, from a thread inside the namespace.
fn run_kernel(ns: &Netns, cases: &[Case], ingress: u32) -> Vec<([u8; 64], i64)> {
    let map = kernel::map_create(&MapSpec::array(VALUE_SIZE, 1)).expect("array map");
    let mut progs = std::collections::HashMap::new();
    for plen in [32, 64, 72] {
        let insns = program(&map, plen);
        let mut opts = LoadOptions::new(BPF_PROG_TYPE_XDP, &insns);
        opts.log_level = 0;
        let res = kernel::prog_load(&opts);
        progs.insert(
            plen,
            res.fd
                .unwrap_or_else(|e| panic!("load (plen {plen}): errno {e}")),
        );
    }
    ns.run_in(|| {
        let packet = [0u8; 64];
        let md = XdpMd::new(packet.len(), 0, ingress, 0);
        cases
            .iter()
            .map(|c| {
                let mut value = [0u8; VALUE_SIZE as usize];
                value[..64].copy_from_slice(&c.params);
                value[64..68].copy_from_slice(&c.flags.to_ne_bytes());
                value[72..80].fill(0x77);
                map_update(&map, &value);
                let out = test_run_xdp(progs[&c.plen].as_fd(), &packet, Some(&md), 1)
                    .unwrap_or_else(|e| panic!("{}: test run: errno {e}", c.name));
                assert_eq!(out.retval, 2, "{}: XDP_PASS", c.name);
                let v = map_lookup(&map);
                let ret = i64::from_ne_bytes(v[72..80].try_into().unwrap());
                (v[..64].try_into().unwrap(), ret)
            })
            .collect()
    })
}

fn hex(b: &[u8]) -> String {
    b.iter()
        .map(|x| format!("{x:02x}"))
        .collect::<Vec<_>>()
        .join("")
}

fn compare(
    phase: &str,
    fib: &Fib,
    cases: &[Case],
    kernel: &[([u8; 64], i64)],
    ingress: u32,
) -> Vec<String> {
    let mut failures = Vec::new();
    for (c, (kp, kret)) in cases.iter().zip(kernel) {
        let mut p = c.params;
        let ret = fib::fib_lookup(fib, &mut p, c.plen as u32, c.flags, ingress);
        if ret != *kret || p != *kp {
            failures.push(format!(
                "[{phase}] {} (flags {:#x}): kernel ret {kret} params {}\n{:>w$}   ours ret {ret} params {}",
                c.name,
                c.flags,
                hex(kp),
                "",
                hex(&p),
                w = phase.len() + c.name.len() + 12
            ));
        }
    }
    failures
}

#[test]
fn fib_lookup_matches_the_kernel() {
    if !kernel_or_skip("fib_lookup_matches_the_kernel") {
        return;
    }
    let ns = match Netns::create("bpfemu-fib") {
        Ok(ns) => ns,
        Err(e) => {
            let required = std::env::var("BPFEMU_REQUIRE_KERNEL").is_ok_and(|v| v == "1");
            assert!(!required, "BPFEMU_REQUIRE_KERNEL=1 but {e}");
            eprintln!("fib_lookup_matches_the_kernel: skipping: {e}");
            return;
        }
    };
    let topo = build(&ns);
    let cases = cases(&topo);

    let mut failures = Vec::new();
    let mut total = 0;
    let mut histogram = std::collections::BTreeMap::new();
    // Phase 1: default rules (local and main merged). Phase 2: custom rules.
    for phase in ["default-rules", "custom-rules"] {
        if phase == "custom-rules" {
            sh(
                &ns,
                &["rule", "add", "fwmark", "5", "table", "100", "pref", "100"],
            );
            sh(
                &ns,
                &[
                    "-6", "rule", "add", "fwmark", "5", "table", "100", "pref", "100",
                ],
            );
            sh(
                &ns,
                &[
                    "rule",
                    "add",
                    "to",
                    "10.99.0.0/16",
                    "prohibit",
                    "pref",
                    "200",
                ],
            );
            sh(
                &ns,
                &[
                    "rule",
                    "add",
                    "iif",
                    "lo",
                    "to",
                    "10.98.0.0/16",
                    "blackhole",
                    "pref",
                    "210",
                ],
            );
            sh(
                &ns,
                &[
                    "rule",
                    "add",
                    "ipproto",
                    "tcp",
                    "dport",
                    "80",
                    "to",
                    "10.90.0.0/16",
                    "table",
                    "100",
                    "pref",
                    "220",
                ],
            );
        }
        let fib = Fib::from_system(Some(ns.name())).expect("snapshot");
        let kernel = run_kernel(&ns, &cases, topo.r0);
        total += cases.len();
        for (_, ret) in &kernel {
            *histogram.entry(*ret).or_insert(0usize) += 1;
        }
        failures.extend(compare(phase, &fib, &cases, &kernel, topo.r0));
    }
    assert!(
        failures.is_empty(),
        "{} of {total} lookups differ from the kernel:\n{}",
        failures.len(),
        failures.join("\n")
    );
    eprintln!(
        "fib_lookup_matches_the_kernel: {total} lookups agree with the kernel; \
         return values (value: count): {histogram:?}"
    );
    // Every return path must have been exercised.
    for ret in [-97, -22, -19, 0, 1, 2, 3, 4, 5, 7, 8] {
        assert!(histogram.contains_key(&ret), "no lookup returned {ret}");
    }
}
