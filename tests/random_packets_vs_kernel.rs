//! Property tests against the running kernel: random and malformed packets through every
//! corpus program in the kernel (BPF_PROG_TEST_RUN) and in bpfemu, through
//! [`bpfemu::diff::Session`]: per packet equal return values and `data_out` (or errno), and at
//! the end equal maps (modulo the clock/random fields the session reports as not compared).
//!
//! Packets: random lengths from 14 bytes to the linear frame limit (3520), 0-3 VLAN tags
//! (802.1Q and 802.1ad), IPv4 with options, bad IHL, bad total lengths and fragments, IPv6
//! with extension header chains (hop-by-hop, routing incl. RH0, fragment, destination
//! options), TCP/UDP/ICMP and raw protocols, truncated at any byte, plus random byte flips.
//! Addresses and ports come from a small pool, and the maps the programs look up (VIPs,
//! blocklists, ACLs, forwarding tables, allowed ports, rate limits) are filled at random from
//! the same pool before every batch, so lookups hit.
//!
//! Each object is loaded once per test; a proptest case is a batch of packets (and new map
//! contents), so the load is amortized. Budgets are fixed numbers of cases.
//!
//! Skipped with a message when bpf() is out of reach, unless `BPFEMU_REQUIRE_KERNEL=1`.

mod common;

use bpfemu::diff::{DiffOptions, PacketVerdict, Session, format_map, format_packet};
use bpfemu::traffic::{
    ETH_P_8021AD, ETH_P_8021Q, ETH_P_ARP, ETH_P_IP, ETH_P_IPV6, Frame, Ipv4, Ipv6, Network, Rng,
    Transport, addr,
};
use bpfemu_conformance::libbpf::kernel_or_skip;
use bpfemu_loader::btf::json::{MapContents, MapEntry, MapValue};
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use std::cell::RefCell;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::PathBuf;

/// The frame limit of BPF_PROG_TEST_RUN for XDP without fragments.
const MAX_LINEAR: usize = 3520;
/// Packets per proptest case.
const BATCH: usize = 32;

// ---------------------------------------------------------------------------------------------
// The address and port pool

fn v4(i: u8) -> Ipv4Addr {
    match i % 13 {
        0..=3 => addr::v4(addr::SERVER_NET, 1 + i % 4),
        4..=7 => addr::v4(addr::CLIENT_NET, 1 + i % 4),
        8..=11 => addr::v4(addr::ATTACK_NET, 1 + i % 4),
        _ => Ipv4Addr::new(10, 0, 0, 1),
    }
}

fn v6(i: u8) -> Ipv6Addr {
    addr::v6(1 + u16::from(i % 3), 1 + u16::from(i / 3 % 4))
}

const PORTS: [u16; 8] = [53, 80, 443, 8080, 9000, 12345, 0, 65535];

fn port(i: u8) -> u16 {
    PORTS[usize::from(i) % PORTS.len()]
}

// ---------------------------------------------------------------------------------------------
// Packet recipes

#[derive(Clone, Debug)]
enum L3 {
    V4 {
        src: u8,
        dst: u8,
        ttl: u8,
        tos: u8,
        /// Option bytes (0-40; padded to a multiple of 4 by the builder).
        options: Vec<u8>,
        /// 0: DF, 1: MF at offset 0, 2: a later fragment, 3: no flags.
        frag: u8,
        /// Written over the IHL nibble after building.
        bad_ihl: Option<u8>,
        /// Written over the total length after building.
        bad_total_len: Option<u16>,
    },
    V6 {
        src: u8,
        dst: u8,
        /// (kind selector, length in 8-byte units beyond the first, routing type).
        exts: Vec<(u8, u8, u8)>,
    },
    Arp {
        src: u8,
        dst: u8,
    },
    Raw {
        ethertype: u16,
    },
}

#[derive(Clone, Debug)]
enum L4 {
    Tcp { sport: u8, dport: u8, flags: u8 },
    Udp { sport: u8, dport: u8 },
    Echo { id: u16 },
    Raw { proto: u8 },
}

#[derive(Clone, Debug)]
enum Recipe {
    /// A parseable frame, possibly broken afterwards.
    Frame {
        vlans: Vec<(bool, u16)>,
        l3: L3,
        l4: L4,
        payload: usize,
        /// Cut the frame to this many bytes (at least 14).
        cut: Option<usize>,
        /// (offset, xor) flips.
        flips: Vec<(usize, u8)>,
        seed: u64,
    },
    /// Random bytes after a chosen ethertype, of a random length.
    Noise {
        ethertype: u16,
        len: usize,
        seed: u64,
    },
}

fn l3() -> impl Strategy<Value = L3> {
    prop_oneof![
        5 => (
            any::<u8>(),
            any::<u8>(),
            prop_oneof![Just(64u8), Just(1u8), Just(0u8), any::<u8>()],
            any::<u8>(),
            prop_oneof![
                4 => Just(Vec::new()),
                1 => proptest::collection::vec(
                    prop_oneof![Just(1u8), Just(0u8), Just(7u8), Just(0x44u8), any::<u8>()],
                    1..=40
                ),
            ],
            0u8..4,
            prop_oneof![6 => Just(None), 1 => (0u8..16).prop_map(Some)],
            prop_oneof![6 => Just(None), 1 => any::<u16>().prop_map(Some)],
        )
            .prop_map(
                |(src, dst, ttl, tos, options, frag, bad_ihl, bad_total_len)| L3::V4 {
                    src,
                    dst,
                    ttl,
                    tos,
                    options,
                    frag,
                    bad_ihl,
                    bad_total_len,
                }
            ),
        3 => (
            any::<u8>(),
            any::<u8>(),
            proptest::collection::vec((0u8..6, 0u8..3, 0u8..5), 0..=4),
        )
            .prop_map(|(src, dst, exts)| L3::V6 { src, dst, exts }),
        1 => (any::<u8>(), any::<u8>()).prop_map(|(src, dst)| L3::Arp { src, dst }),
        1 => prop_oneof![Just(0x88ccu16), Just(ETH_P_8021Q), Just(0x0000), any::<u16>()]
            .prop_map(|ethertype| L3::Raw { ethertype }),
    ]
}

fn l4() -> impl Strategy<Value = L4> {
    prop_oneof![
        4 => (any::<u8>(), any::<u8>(), any::<u8>())
            .prop_map(|(sport, dport, flags)| L4::Tcp { sport, dport, flags }),
        4 => (any::<u8>(), any::<u8>()).prop_map(|(sport, dport)| L4::Udp { sport, dport }),
        1 => any::<u16>().prop_map(|id| L4::Echo { id }),
        1 => prop_oneof![Just(4u8), Just(47u8), Just(50u8), any::<u8>()]
            .prop_map(|proto| L4::Raw { proto }),
    ]
}

fn recipe() -> impl Strategy<Value = Recipe> {
    let vlan = (any::<bool>(), any::<u16>());
    prop_oneof![
        8 => (
            prop_oneof![
                3 => Just(Vec::new()),
                1 => proptest::collection::vec(vlan, 1..=3),
            ],
            l3(),
            l4(),
            prop_oneof![4 => 0usize..64, 2 => 64usize..1500, 1 => 1500usize..MAX_LINEAR],
            prop_oneof![3 => Just(None), 1 => (14usize..120).prop_map(Some)],
            proptest::collection::vec((any::<usize>(), 1u8..=255), 0..=2),
            any::<u64>(),
        )
            .prop_map(|(vlans, l3, l4, payload, cut, flips, seed)| Recipe::Frame {
                vlans,
                l3,
                l4,
                payload,
                cut,
                flips,
                seed,
            }),
        1 => (
            prop_oneof![
                Just(ETH_P_IP),
                Just(ETH_P_IPV6),
                Just(ETH_P_8021Q),
                Just(ETH_P_8021AD),
                Just(ETH_P_ARP),
                any::<u16>(),
            ],
            14usize..=MAX_LINEAR,
            any::<u64>(),
        )
            .prop_map(|(ethertype, len, seed)| Recipe::Noise {
                ethertype,
                len,
                seed,
            }),
    ]
}

/// An IPv6 extension header: (next-header value naming it, its bytes after the next-header
/// byte).
fn extension(kind: u8, len: u8, rtype: u8, rng: &mut Rng) -> (u8, Vec<u8>) {
    let (code, len) = match kind {
        0 => (0u8, len),
        1 => (43, len),
        2 => (44, 0),
        3 => (60, len),
        4 => (51, len), // AH: length in 4-byte units minus 2
        _ => (60, 0),
    };
    if code == 44 {
        // Fragment header: reserved, offset/flags, identification.
        let mut body = vec![0u8, 0, 1];
        body.extend(rng.bytes(4));
        return (code, body);
    }
    let total = if code == 51 {
        4 * (usize::from(len) + 2)
    } else {
        8 * (usize::from(len) + 1)
    };
    let mut body = vec![len];
    if code == 43 {
        // Routing type (0 is the deprecated RH0), segments left.
        body.extend([[0u8, 2, 4, 3, 0][usize::from(rtype)], 1]);
    }
    while body.len() < total - 1 {
        body.push(if code == 43 { 0 } else { 1 }); // PadN-ish filler
    }
    (code, body)
}

fn build(r: &Recipe) -> Vec<u8> {
    match r {
        Recipe::Noise {
            ethertype,
            len,
            seed,
        } => {
            let mut rng = Rng::new(*seed);
            let mut out = [bpfemu::traffic::MAC_B, bpfemu::traffic::MAC_A].concat();
            out.extend(ethertype.to_be_bytes());
            out.extend(rng.bytes(len.saturating_sub(14)));
            out.truncate((*len).max(14));
            out
        }
        Recipe::Frame {
            vlans,
            l3,
            l4,
            payload,
            cut,
            flips,
            seed,
        } => {
            let mut rng = Rng::new(*seed);
            let transport = match l4 {
                L4::Tcp {
                    sport,
                    dport,
                    flags,
                } => Transport::Tcp {
                    sport: port(*sport).wrapping_add(u16::from(*sport >= 128) * 1000),
                    dport: port(*dport),
                    flags: *flags,
                    seq: rng.next_u64() as u32,
                    payload: rng.bytes(*payload),
                },
                L4::Udp { sport, dport } => Transport::Udp {
                    sport: port(*sport).wrapping_add(u16::from(*sport >= 128) * 1000),
                    dport: port(*dport),
                    payload: rng.bytes(*payload),
                },
                L4::Echo { id } => Transport::Echo {
                    id: *id,
                    seq: 1,
                    payload: rng.bytes(*payload),
                },
                L4::Raw { proto } => Transport::Raw {
                    proto: *proto,
                    payload: rng.bytes(*payload),
                },
            };
            let tags: Vec<(u16, u16)> = vlans
                .iter()
                .map(|(ad, tci)| (if *ad { ETH_P_8021AD } else { ETH_P_8021Q }, *tci))
                .collect();
            let mut frame = match l3 {
                L3::V4 {
                    src,
                    dst,
                    ttl,
                    tos,
                    options,
                    frag,
                    ..
                } => {
                    // Destinations lean towards the service addresses the maps hold.
                    let dst = *dst % 6;
                    let mut ip = Ipv4::new(v4(*src), v4(dst));
                    ip.ttl = *ttl;
                    ip.tos = *tos;
                    ip.options = options.clone();
                    ip.id = rng.next_u64() as u16;
                    match frag {
                        0 => {}
                        1 => {
                            ip.dont_fragment = false;
                            ip.more_fragments = true;
                        }
                        2 => {
                            ip.dont_fragment = false;
                            ip.frag_offset = 1 + rng.below(100) as u16;
                        }
                        _ => ip.dont_fragment = false,
                    }
                    Frame {
                        network: Network::V4(ip),
                        ..Frame::ipv4(v4(*src), v4(dst), transport)
                    }
                }
                L3::V6 { src, dst, exts } => {
                    let mut ip = Ipv6::new(v6(*src), v6(*dst));
                    ip.extensions = exts
                        .iter()
                        .map(|&(k, l, t)| extension(k, l, t, &mut rng))
                        .collect();
                    Frame {
                        network: Network::V6(ip),
                        ..Frame::ipv6(v6(*src), v6(*dst), transport)
                    }
                }
                L3::Arp { src, dst } => Frame {
                    network: Network::Arp {
                        sender: v4(*src),
                        target: v4(*dst),
                    },
                    transport: None,
                    ..Frame::ipv4(v4(0), v4(0), transport)
                },
                L3::Raw { ethertype } => Frame {
                    network: Network::Raw {
                        ethertype: *ethertype,
                        payload: rng.bytes(20 + *payload % 200),
                    },
                    transport: None,
                    ..Frame::ipv4(v4(0), v4(0), transport)
                },
            };
            frame = frame.with_vlans(&tags);
            let mut out = frame.build();
            let l3_off = 14 + 4 * tags.len();
            if let L3::V4 {
                bad_ihl,
                bad_total_len,
                ..
            } = l3
            {
                if let (Some(ihl), Some(b)) = (bad_ihl, out.get_mut(l3_off)) {
                    *b = (*b & 0xf0) | ihl;
                }
                if let Some(len) = bad_total_len
                    && out.len() >= l3_off + 4
                {
                    out[l3_off + 2..l3_off + 4].copy_from_slice(&len.to_be_bytes());
                }
            }
            out.truncate(MAX_LINEAR);
            if let Some(cut) = cut {
                out.truncate((*cut).max(14));
            }
            let len = out.len();
            for (at, x) in flips {
                out[at % len] ^= x;
            }
            out
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Random map contents, by object

fn entry(key: Vec<u8>, value: Vec<u8>) -> MapEntry {
    MapEntry {
        key,
        value: MapValue::Single(value),
    }
}

fn contents(name: &str, entries: Vec<MapEntry>) -> MapContents {
    MapContents {
        name: name.into(),
        entries,
    }
}

fn v4_mapped(a: Ipv4Addr) -> Vec<u8> {
    let mut out = vec![0u8; 10];
    out.extend([0xff, 0xff]);
    out.extend(a.octets());
    out
}

/// Hash-like maps cleared before each batch, and the new contents, for one object.
fn random_maps(stem: &str, rng: &mut Rng) -> (Vec<&'static str>, Vec<MapContents>) {
    let n = |rng: &mut Rng, max: u64| rng.below(max + 1) as usize;
    let pick = |rng: &mut Rng| rng.below(256) as u8;
    match stem {
        "ddos_filter" => {
            let v4s = (0..n(rng, 3))
                .map(|_| {
                    let plen = [8u32, 16, 24, 32, 0][rng.below(5) as usize];
                    let key = [plen.to_ne_bytes().to_vec(), v4(pick(rng)).octets().to_vec()];
                    entry(key.concat(), vec![0; 16])
                })
                .collect();
            let v6s = (0..n(rng, 2))
                .map(|_| {
                    let plen = [32u32, 48, 64, 128][rng.below(4) as usize];
                    let key = [plen.to_ne_bytes().to_vec(), v6(pick(rng)).octets().to_vec()];
                    entry(key.concat(), vec![0; 16])
                })
                .collect();
            let ports = (0..n(rng, 3))
                .map(|_| entry(port(pick(rng)).to_be_bytes().to_vec(), vec![0; 16]))
                .collect();
            (
                vec!["blocklist_v4", "blocklist_v6", "blocked_udp_ports"],
                vec![
                    contents("blocklist_v4", v4s),
                    contents("blocklist_v6", v6s),
                    contents("blocked_udp_ports", ports),
                ],
            )
        }
        "l4lb" => {
            let vips = (0..n(rng, 6))
                .map(|_| {
                    let mut key = v4(pick(rng) % 4).octets().to_vec();
                    let p = if rng.below(2) == 0 {
                        0
                    } else {
                        port(pick(rng))
                    };
                    key.extend(p.to_be_bytes());
                    key.extend([[6u8, 17][rng.below(2) as usize], 0]);
                    let flags = rng.below(2) as u32;
                    let num = rng.below(3) as u32;
                    entry(key, [flags.to_ne_bytes(), num.to_ne_bytes()].concat())
                })
                .collect();
            let reals = (0..4u32)
                .map(|i| {
                    let value = [v4(4 + pick(rng) % 4).octets(), [0; 4]].concat();
                    entry(i.to_ne_bytes().to_vec(), value)
                })
                .collect();
            let rings = (0..8u32)
                .map(|_| {
                    let slot = rng.below(3 * 1024) as u32;
                    entry(
                        slot.to_ne_bytes().to_vec(),
                        (rng.below(4) as u32).to_ne_bytes().to_vec(),
                    )
                })
                .collect();
            let mut ctl = rng.bytes(6);
            ctl.extend([0, 0]);
            ctl.extend(v4(pick(rng)).octets());
            (
                vec!["vip_map"],
                vec![
                    contents("vip_map", vips),
                    contents("reals", reals),
                    contents("ch_rings", rings),
                    contents("ctl_array", vec![entry(0u32.to_ne_bytes().to_vec(), ctl)]),
                ],
            )
        }
        "firewall" => {
            let rules = (0..n(rng, 6))
                .map(|_| {
                    let (s, d) = if rng.below(3) == 0 {
                        (
                            v6(pick(rng)).octets().to_vec(),
                            v6(pick(rng)).octets().to_vec(),
                        )
                    } else {
                        (v4_mapped(v4(pick(rng))), v4_mapped(v4(pick(rng))))
                    };
                    let sport = if rng.below(2) == 0 {
                        0
                    } else {
                        port(pick(rng))
                    };
                    let key = [
                        s,
                        d,
                        sport.to_be_bytes().to_vec(),
                        port(pick(rng)).to_be_bytes().to_vec(),
                        vec![[6u8, 17, 1, 58][rng.below(4) as usize]],
                    ]
                    .concat();
                    let value = [
                        (rng.below(2) as u32).to_ne_bytes(),
                        (rng.below(99) as u32).to_ne_bytes(),
                    ];
                    entry(key, value.concat())
                })
                .collect();
            (vec!["acl"], vec![contents("acl", rules)])
        }
        "nat_lb" => {
            let vips = (0..n(rng, 4))
                .map(|_| {
                    let mut key = v4(pick(rng) % 4).octets().to_vec();
                    key.extend(port(pick(rng)).to_be_bytes());
                    key.extend([[6u8, 17][rng.below(2) as usize], 0]);
                    let base = rng.below(4) as u32;
                    let count = rng.below(4) as u32;
                    entry(key, [base.to_ne_bytes(), count.to_ne_bytes()].concat())
                })
                .collect();
            let backends = (0..8u32)
                .map(|i| {
                    let mut value = v4(4 + pick(rng) % 4).octets().to_vec();
                    value.extend(port(pick(rng)).to_be_bytes());
                    value.extend([0, 0]);
                    entry(i.to_ne_bytes().to_vec(), value)
                })
                .collect();
            (
                vec!["vips"],
                vec![contents("vips", vips), contents("backends", backends)],
            )
        }
        "p4_parser" => {
            let value = |rng: &mut Rng| {
                let mut v = (rng.below(4) as u32).to_ne_bytes().to_vec();
                v.extend(rng.bytes(12));
                v
            };
            let rows = (0..n(rng, 5))
                .map(|_| {
                    let a = u32::from_be_bytes(v4(pick(rng)).octets());
                    let p = if rng.below(3) == 0 {
                        0
                    } else {
                        port(pick(rng))
                    };
                    let key = [
                        a.to_ne_bytes().to_vec(),
                        p.to_ne_bytes().to_vec(),
                        vec![0, 0],
                    ];
                    entry(key.concat(), value(rng))
                })
                .collect();
            let default = vec![entry(0u32.to_ne_bytes().to_vec(), value(rng))];
            (
                vec!["fwd_table"],
                vec![
                    contents("fwd_table", rows),
                    contents("fwd_table_defaultAction", default),
                ],
            )
        }
        "ringbuf_events" => {
            let ports = (0..n(rng, 3))
                .map(|_| entry(port(pick(rng)).to_be_bytes().to_vec(), vec![1]))
                .collect();
            (
                vec!["allowed_ports"],
                vec![contents("allowed_ports", ports)],
            )
        }
        "spin_lock" => {
            let buckets = (0..n(rng, 4))
                .map(|_| {
                    let class = rng.below(64) as u32;
                    let rate = [0u64, 1_000_000, 1_000_000_000][rng.below(3) as usize];
                    let burst = 1000 + rng.below(5000);
                    let mut v = vec![0u8; 8];
                    for x in [rng.below(burst), 0, rate, burst, 0] {
                        v.extend(x.to_ne_bytes());
                    }
                    entry(class.to_ne_bytes().to_vec(), v)
                })
                .collect();
            (vec![], vec![contents("buckets", buckets)])
        }
        _ => (vec![], vec![]),
    }
}

/// Fixed entries set once per object.
fn fixed_maps(stem: &str) -> Vec<MapContents> {
    match stem {
        // Both CPUs get a cpumap queue so the flow-hash redirect has a target.
        "ddos_filter" => vec![contents(
            "cpu_map",
            (0..2u32)
                .map(|c| {
                    entry(
                        c.to_ne_bytes().to_vec(),
                        [192u32.to_ne_bytes(), [0; 4]].concat(),
                    )
                })
                .collect(),
        )],
        _ => vec![],
    }
}

// ---------------------------------------------------------------------------------------------
// The runner

/// Not run here, with the reason: `router` (the kernel's FIB is the namespace's routing
/// table; `tests/router_vs_kernel.rs` compares it in a namespace built from its FIB file),
/// `legacy_maps` (libbpf >= 1.0 refuses it).
const NOT_COMPARED: &[&str] = &["router", "legacy_maps"];

fn objects(level: &str, only: Option<&[&str]>) -> Vec<(String, PathBuf)> {
    common::corpus(level, NOT_COMPARED)
        .into_iter()
        .filter(|(stem, _)| only.is_none_or(|o| o.contains(&stem.as_str())))
        .collect()
}

/// What one object's run gave.
#[derive(Default)]
struct Tally {
    packets: usize,
    not_compared: usize,
    refused: usize,
    /// Kernel verdicts by action, to show the programs' paths were exercised.
    actions: std::collections::BTreeMap<String, usize>,
}

fn run_object(stem: &str, path: &PathBuf, cases: u32) -> Tally {
    let mut opts = DiffOptions::new(path);
    if stem == "tailcall" {
        opts.program = Some("xdp_entry".into());
    }
    let session = Session::open(&opts).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let session = RefCell::new(session);
    session
        .borrow_mut()
        .set_maps(&fixed_maps(stem))
        .unwrap_or_else(|e| panic!("{stem}: {e}"));
    let tally = RefCell::new(Tally::default());
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        max_shrink_iters: 256,
        ..Config::default()
    });
    let strategy = (
        any::<u64>(),
        proptest::collection::vec(recipe(), BATCH..=BATCH),
    );
    let result = runner.run(&strategy, |(map_seed, recipes)| {
        let mut s = session.borrow_mut();
        let (clear, maps) = random_maps(stem, &mut Rng::new(map_seed));
        for name in clear {
            s.clear_map(name)
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
        }
        s.set_maps(&maps)
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        let mut t = tally.borrow_mut();
        for (i, r) in recipes.iter().enumerate() {
            let packet = build(r);
            let cmp = s.run_packet(t.packets, &packet);
            t.packets += 1;
            match &cmp.verdict {
                PacketVerdict::Equal => {}
                PacketVerdict::NotCompared { .. } => t.not_compared += 1,
                PacketVerdict::Mismatch { .. } => {
                    return Err(TestCaseError::fail(format!(
                        "{}: batch packet {i} ({} bytes) {:02x?}\nrecipe {r:?}\n{}",
                        path.display(),
                        packet.len(),
                        packet,
                        format_packet(&cmp)
                    )));
                }
            }
            match &cmp.kernel {
                bpfemu::diff::Outcome::Ran { action, .. } => {
                    *t.actions.entry(action.clone()).or_default() += 1;
                }
                _ => t.refused += 1,
            }
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("{stem}: {e}");
    }
    let maps = session
        .borrow_mut()
        .compare_maps()
        .unwrap_or_else(|e| panic!("{stem}: {e}"));
    let mut shown = String::new();
    for m in &maps {
        shown.push_str(&format_map(m));
    }
    let mismatches: usize = maps.iter().map(|m| m.mismatches.len()).sum();
    assert_eq!(mismatches, 0, "{}: maps differ:\n{shown}", path.display());
    let tally = tally.into_inner();
    eprintln!(
        "{}: {} packets equal ({} not compared: clock-dependent; {} refused alike); kernel verdicts {:?}",
        path.display(),
        tally.packets - tally.not_compared,
        tally.not_compared,
        tally.refused,
        tally.actions
    );
    for m in maps.iter().filter(|m| !m.not_compared_fields.is_empty()) {
        eprint!("{}", format_map(m));
    }
    tally
}

fn run_level(level: &str, only: Option<&[&str]>, cases: u32) {
    let objs = objects(level, only);
    assert!(!objs.is_empty());
    let mut total = 0;
    for (stem, path) in &objs {
        total += run_object(stem, path, cases).packets;
    }
    eprintln!("{level}: {} objects, {total} random packets", objs.len());
}

/// Every corpus program at -mcpu v3: 96 batches of 32 packets each.
#[test]
fn random_packets_v3_match_kernel() {
    if !kernel_or_skip("random_packets_v3_match_kernel") {
        return;
    }
    run_level("v3", None, 96);
}

/// A subset at v2 and v4 (the ones with the most branches and packet rewrites).
#[test]
fn random_packets_v2_v4_match_kernel() {
    if !kernel_or_skip("random_packets_v2_v4_match_kernel") {
        return;
    }
    let subset: &[&str] = &[
        "l4lb",
        "nat_lb",
        "p4_parser",
        "firewall",
        "bpf_loop",
        "reflector",
    ];
    for level in ["v2", "v4"] {
        run_level(level, Some(subset), 24);
    }
}

/// The generator makes what it promises (no kernel needed).
#[test]
fn recipes_cover_the_frame_limits() {
    let mut runner = TestRunner::deterministic();
    let mut lens = Vec::new();
    for _ in 0..2000 {
        let r = recipe().new_tree(&mut runner).unwrap().current();
        lens.push(build(&r).len());
    }
    assert!(lens.iter().all(|&l| (14..=MAX_LINEAR).contains(&l)));
    assert!(lens.contains(&14) || lens.iter().any(|&l| l < 40));
    assert!(lens.iter().any(|&l| l > 3000));
}
