//! Every program of the corpus (`examples/xdp/build/NAME.vN.o`) replayed through the library API
//! (`bpfemu::replay::Replayer`) over the bundled captures, with its example configuration
//! (`examples/maps/NAME.json`, `examples/fib/router.json`), and its *behaviour* checked: what
//! each program must do to each packet is computed here, from the input packet, by small
//! parsers and checksum functions of this file (not by bpfemu code), following the program's
//! source. Counters in maps are checked against counts computed the same way.
//!
//! Each program runs at -mcpu v2, v3 and v4; the three must also agree with each other on every
//! packet (action, return value, bytes, redirect target) and on the final maps.
//!
//! Replays use 2 virtual CPUs (RSS steering), ingress ifindex 1 (2 for the router, whose FIB
//! has eth0 = 2), seed 0.

use bpfemu::pcap::{Packet, PcapReader};
use bpfemu::replay::hex;
use bpfemu::replay::{PacketResult, ReplayOptions, Replayer};
use bpfemu_vm::xdp::{RedirectTarget, XdpAction, XdpOutcome};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

const CPUS: u32 = 2;
const ALL_CAPTURES: &[&str] = &[
    "normal.pcap",
    "attack.pcap",
    "vlan.pcap",
    "ipv6_ext.pcap",
    "fragments.pcap",
    "malformed.pcap",
    "flows.pcap",
];
const EPOCH_NS: u64 = 1_767_225_600_000_000_000;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

// ---------------------------------------------------------------------------------------------
// Replaying

/// One replay: the packets in order (all captures concatenated), their results, the replayer
/// (for its maps) afterwards.
struct Run {
    packets: Vec<Packet>,
    results: Vec<PacketResult>,
    replayer: Replayer,
}

impl Run {
    fn outcome(&self, i: usize) -> &XdpOutcome {
        match &self.results[i].outcome {
            Ok(o) => o,
            Err(e) => panic!("packet {i}: {e}"),
        }
    }

    /// The map with this name (or global data section).
    fn map_index(&self, name: &str) -> usize {
        let maps = self.replayer.runtime.maps();
        maps.iter()
            .position(|m| m.name() == name || m.spec().global_section.as_deref() == Some(name))
            .unwrap_or_else(|| panic!("no map {name}"))
    }

    /// Every (key, syscall-side value) of a map.
    fn entries(&self, name: &str) -> BTreeMap<Vec<u8>, Vec<u8>> {
        let rt = &self.replayer.runtime;
        rt.maps()
            .dump(rt.memory(), self.map_index(name))
            .unwrap()
            .into_iter()
            .collect()
    }

    fn lookup(&self, name: &str, key: &[u8]) -> Option<Vec<u8>> {
        let rt = &self.replayer.runtime;
        rt.maps()
            .sys_lookup(rt.memory(), self.map_index(name), key, 0)
            .ok()
    }

    /// A per-CPU array of u64 counters: each slot summed over the CPUs.
    fn percpu_u64(&self, name: &str) -> Vec<u64> {
        let mut out = Vec::new();
        for (_, v) in self.entries(name) {
            out.push(v.chunks(8).map(|c| le64(c, 0)).sum());
        }
        out
    }

    /// A variable of a global data section (`.bss`, `.data`), read through the BTF-typed dump.
    fn var(&mut self, section: &str, name: &str) -> u64 {
        let doc = self.replayer.maps_json().unwrap();
        let (_, entries) = doc
            .as_object()
            .unwrap()
            .iter()
            .find(|(k, _)| k.ends_with(section))
            .unwrap_or_else(|| panic!("no {section}"));
        let vars = &entries[0]["formatted"]["value"][section];
        vars.as_array()
            .unwrap()
            .iter()
            .find_map(|v| v.get(name))
            .and_then(serde_json::Value::as_u64)
            .unwrap_or_else(|| panic!("no {section} {name} in {vars}"))
    }
}

struct Setup<'a> {
    program: &'a str,
    entry: Option<&'a str>,
    maps: Option<&'a str>,
    fib: Option<&'a str>,
    ifindex: u32,
    captures: &'a [&'a str],
}

impl<'a> Setup<'a> {
    fn new(program: &'a str) -> Setup<'a> {
        Setup {
            program,
            entry: None,
            maps: None,
            fib: None,
            ifindex: 1,
            captures: ALL_CAPTURES,
        }
    }

    fn maps(mut self) -> Self {
        self.maps = Some(self.program);
        self
    }

    fn run(&self, level: &str) -> Run {
        let opts = ReplayOptions {
            object: root().join(format!("examples/xdp/build/{}.{level}.o", self.program)),
            capture: PathBuf::new(),
            program: self.entry.map(str::to_owned),
            ifindex: self.ifindex,
            cpus: CPUS,
            maps: self
                .maps
                .map(|m| root().join(format!("examples/maps/{m}.json"))),
            fib: self
                .fib
                .map(|f| root().join(format!("examples/fib/{f}.json"))),
            ..ReplayOptions::default()
        };
        let mut replayer =
            Replayer::new(&opts).unwrap_or_else(|e| panic!("{} {level}: {e:#}", self.program));
        let mut packets = Vec::new();
        for cap in self.captures {
            let path = root().join("examples/pcap").join(cap);
            packets.extend(PcapReader::open(&path).unwrap().map(Result::unwrap));
        }
        let results = packets.iter().map(|p| replayer.run(p)).collect();
        Run {
            packets,
            results,
            replayer,
        }
    }

    /// Runs at v2, v3 and v4, checks each with `check`, and that the three agree.
    fn check(&self, check: impl Fn(&mut Run)) {
        let mut seen: Option<(Vec<String>, serde_json::Value)> = None;
        for level in ["v2", "v3", "v4"] {
            let mut run = self.run(level);
            check(&mut run);
            let summary: Vec<String> = run
                .results
                .iter()
                .map(|r| match &r.outcome {
                    Ok(o) => format!(
                        "{} cpu{} {} {:?} {} meta {} {:?}",
                        r.index,
                        r.cpu,
                        o.retval,
                        o.action,
                        hex(&o.data_out),
                        o.meta_len,
                        o.redirect
                    ),
                    Err(e) => format!("{} error {e}", r.index),
                })
                .collect();
            let maps = run.replayer.maps_json().unwrap();
            if let Some((s, m)) = &seen {
                for (i, (a, b)) in s.iter().zip(&summary).enumerate() {
                    assert_eq!(
                        a, b,
                        "{}: v2 and {level} differ on packet {i}",
                        self.program
                    );
                }
                assert_eq!(m, &maps, "{}: v2 and {level} maps differ", self.program);
            } else {
                seen = Some((summary, maps));
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Independent packet parsing and checksums

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

fn le32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

fn le64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

/// RFC 1071 one's-complement sum of `data` added to `sum`, folded, not complemented.
fn ones_sum(data: &[u8], mut sum: u32) -> u16 {
    for c in data.chunks(2) {
        sum += u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]));
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

/// Whether an IPv4 header (with its checksum field) sums to 0xffff.
fn ipv4_header_ok(hdr: &[u8]) -> bool {
    ones_sum(hdr, 0) == 0xffff
}

/// Whether the TCP/UDP segment at `l4` (to the end of the frame) verifies with the IPv4
/// pseudo-header of the header at `l3`.
fn l4_checksum_ok_v4(f: &[u8], l3: usize, l4: usize, proto: u8) -> bool {
    let len = f.len() - l4;
    let mut pseudo = f[l3 + 12..l3 + 20].to_vec();
    pseudo.extend_from_slice(&[0, proto]);
    pseudo.extend_from_slice(&(len as u16).to_be_bytes());
    let s = ones_sum(&pseudo, 0);
    ones_sum(&f[l4..], u32::from(s)) == 0xffff
}

const ETH_IP: u16 = 0x0800;
const ETH_IPV6: u16 = 0x86dd;

/// Ethernet plus up to two 802.1Q/802.1ad tags (the corpus' `parse_ethhdr_vlan`): the inner
/// ethertype, the L3 offset and the VLAN ids; `None` when a header is cut short.
fn l2(f: &[u8]) -> Option<(u16, usize, [u16; 2])> {
    if f.len() < 14 {
        return None;
    }
    let mut proto = be16(f, 12);
    let mut off = 14;
    let mut vids = [0u16; 2];
    for vid in &mut vids {
        if proto != 0x8100 && proto != 0x88a8 {
            break;
        }
        if f.len() < off + 4 {
            return None;
        }
        *vid = be16(f, off) & 0xfff;
        proto = be16(f, off + 2);
        off += 4;
    }
    Some((proto, off, vids))
}

/// `parse_iphdr`: the protocol and the L4 offset (IHL honoured, at least 5, inside the frame).
fn ip4(f: &[u8], l3: usize) -> Option<(u8, usize)> {
    if f.len() < l3 + 20 {
        return None;
    }
    let hl = usize::from(f[l3] & 0xf) * 4;
    (hl >= 20 && l3 + hl <= f.len()).then_some((f[l3 + 9], l3 + hl))
}

/// `parse_ip6hdr`: next header and the offset after the fixed header.
fn ip6(f: &[u8], l3: usize) -> Option<(u8, usize)> {
    (f.len() >= l3 + 40).then(|| (f[l3 + 6], l3 + 40))
}

/// The L3 protocol: `Some((v6, proto, l4))` for parseable IPv4/IPv6, `Err(())` for an IP
/// header cut short, `Ok(None)` for anything else.
fn l3(f: &[u8]) -> Result<Option<(bool, u8, usize, usize)>, ()> {
    let Some((proto, off, _)) = l2(f) else {
        return Ok(None);
    };
    match proto {
        ETH_IP => ip4(f, off)
            .map(|(p, l4)| Some((false, p, off, l4)))
            .ok_or(()),
        ETH_IPV6 => ip6(f, off)
            .map(|(p, l4)| Some((true, p, off, l4)))
            .ok_or(()),
        _ => Ok(None),
    }
}

/// UDP (8 bytes) or TCP (doff honoured) ports, `None` when the header is cut short.
fn ports(f: &[u8], l4: usize, proto: u8) -> Option<(u16, u16)> {
    match proto {
        17 => (f.len() >= l4 + 8).then(|| (be16(f, l4), be16(f, l4 + 2))),
        6 => {
            let hl = usize::from(*f.get(l4 + 12)? >> 4) * 4;
            (f.len() >= l4 + 20 && hl >= 20 && l4 + hl <= f.len())
                .then(|| (be16(f, l4), be16(f, l4 + 2)))
        }
        _ => None,
    }
}

fn in_prefix(addr: &[u8], net: &[u8], len: usize) -> bool {
    (0..len).all(|bit| (addr[bit / 8] ^ net[bit / 8]) & (0x80 >> (bit % 8)) == 0)
}

fn action(run: &Run, i: usize) -> XdpAction {
    run.outcome(i).action
}

fn assert_unchanged(run: &Run, i: usize, what: &str) {
    assert_eq!(
        hex(&run.outcome(i).data_out),
        hex(&run.packets[i].data),
        "packet {i}: {what}: bytes must be unchanged"
    );
}

// ---------------------------------------------------------------------------------------------
// The programs

/// UDP over IPv4/IPv6 (VLAN-tagged or not) goes back out with the MACs swapped; everything
/// else is dropped; IP packets are counted per protocol and reflected bytes summed.
#[test]
fn reflector() {
    Setup::new("reflector").check(|run| {
        let mut protos = [0u64; 256];
        let mut bytes = 0u64;
        for (i, p) in run.packets.iter().enumerate() {
            let f = &p.data;
            let o = run.outcome(i);
            let parsed = l3(f);
            if let Ok(Some((_, proto, _, l4))) = parsed {
                protos[usize::from(proto)] += 1;
                if proto == 17 && f.len() >= l4 + 8 {
                    assert_eq!(o.action, XdpAction::Tx, "packet {i}");
                    let mut want = f.clone();
                    want[0..6].copy_from_slice(&f[6..12]);
                    want[6..12].copy_from_slice(&f[0..6]);
                    assert_eq!(hex(&o.data_out), hex(&want), "packet {i}");
                    bytes += f.len() as u64;
                    continue;
                }
            }
            assert_eq!(o.action, XdpAction::Drop, "packet {i}");
        }
        let counted = run.percpu_u64("proto_count");
        assert_eq!(counted, protos.to_vec());
        assert!(protos[6] > 0 && protos[17] > 0 && protos[1] > 0 && protos[58] > 0);
        assert_eq!(run.percpu_u64("reflected_bytes"), vec![bytes]);
    });
}

/// The l4lb configuration (`examples/maps/l4lb.json`).
mod l4lb_cfg {
    pub const GW_MAC: [u8; 6] = [2, 0, 0, 0, 0, 0xfe];
    pub const SRC: [u8; 4] = [192, 0, 2, 254];
    pub const REALS: [[u8; 4]; 5] = [
        [192, 0, 2, 201],
        [192, 0, 2, 202],
        [192, 0, 2, 203],
        [192, 0, 2, 211],
        [192, 0, 2, 212],
    ];
    /// (address, port (0: any, F_NO_PORT), protocol, vip_num, reals of the ring (None: the
    /// ring points past the reals)).
    pub type Vip = ([u8; 4], u16, u8, u32, Option<&'static [u32]>);
    pub const VIPS: [Vip; 3] = [
        ([192, 0, 2, 1], 80, 6, 0, Some(&[0, 1, 2])),
        ([192, 0, 2, 2], 0, 17, 1, Some(&[3, 4])),
        ([192, 0, 2, 3], 443, 17, 2, None),
    ];
}

/// The Jenkins-style mix of l4lb.c over the flow key as the program loads it (little-endian
/// loads of network-order fields).
fn l4lb_hash(saddr: u32, daddr: u32, sport: u16, dport: u16, proto: u8) -> u32 {
    let (mut a, mut b) = (saddr, daddr);
    let mut c = ((u32::from(sport) << 16) | u32::from(dport)) ^ u32::from(proto);
    a = a.wrapping_sub(c);
    a ^= c.rotate_left(4);
    c = c.wrapping_add(b);
    b = b.wrapping_sub(a);
    b ^= a.rotate_left(6);
    a = a.wrapping_add(c);
    c = c.wrapping_sub(b);
    c ^= b.rotate_left(8);
    b = b.wrapping_add(a);
    a = a.wrapping_sub(c);
    a ^= c.rotate_left(16);
    c = c.wrapping_add(b);
    let _ = a;
    c ^ b
}

/// Packets to a VIP are encapsulated IPv4-in-IPv4 towards the real the ring gives (stable per
/// flow), with a valid outer checksum and the inner packet intact, and go out with XDP_TX;
/// fragments, non-VIP, non-TCP/UDP and non-IPv4 traffic passes; a VIP whose ring points past
/// the reals drops. The connection table holds every flow seen, with its real.
#[test]
fn l4lb() {
    use l4lb_cfg::*;
    Setup::new("l4lb").maps().check(|run| {
        let mut flows: BTreeMap<Vec<u8>, (u32, u64)> = BTreeMap::new();
        let mut no_real = 0;
        let mut per_flow_real: BTreeMap<Vec<u8>, [u8; 4]> = BTreeMap::new();
        let (mut hits, mut encapsulated) = (0, 0);
        for (i, p) in run.packets.iter().enumerate() {
            let f = &p.data;
            let o = run.outcome(i);
            let Some((ETH_IP, l3off, _)) = l2(f) else {
                assert_eq!(o.action, XdpAction::Pass, "packet {i}: not IPv4");
                continue;
            };
            let Some((proto, l4)) = ip4(f, l3off) else {
                assert_eq!(o.action, XdpAction::Drop, "packet {i}: bad IPv4");
                continue;
            };
            if be16(f, l3off + 6) & 0x3fff != 0 || (proto != 6 && proto != 17) {
                assert_eq!(o.action, XdpAction::Pass, "packet {i}: fragment / other");
                continue;
            }
            let Some((_, dport)) = ports(f, l4, proto) else {
                assert_eq!(o.action, XdpAction::Drop, "packet {i}: L4 cut short");
                continue;
            };
            let daddr: [u8; 4] = f[l3off + 16..l3off + 20].try_into().unwrap();
            let vip = VIPS
                .iter()
                .find(|v| v.0 == daddr && v.2 == proto && (v.1 == 0 || v.1 == dport));
            let Some(&(_, _, _, _, ring)) = vip else {
                assert_eq!(o.action, XdpAction::Pass, "packet {i}: no VIP");
                continue;
            };
            hits += 1;
            let mut key = f[l3off + 12..l3off + 20].to_vec();
            key.extend_from_slice(&f[l4..l4 + 4]);
            key.extend_from_slice(&[proto, 0, 0, 0]);
            let Some(ring) = ring else {
                assert_eq!(o.action, XdpAction::Drop, "packet {i}: VIP without reals");
                // The ring slot names real 4096 (past the reals): the connection is recorded,
                // the real lookup fails.
                flows.insert(key, (4096, p.ts_ns));
                no_real += 1;
                continue;
            };
            let h = l4lb_hash(
                le32(f, l3off + 12),
                le32(f, l3off + 16),
                u16::from_le_bytes([f[l4], f[l4 + 1]]),
                u16::from_le_bytes([f[l4 + 2], f[l4 + 3]]),
                proto,
            );
            let real_idx = ring[(h & 1023) as usize % ring.len()];
            let real = REALS[real_idx as usize];
            assert_eq!(o.action, XdpAction::Tx, "packet {i}: to a VIP");
            let out = &o.data_out;
            assert_eq!(out.len(), f.len() + 20, "packet {i}");
            assert_eq!(out[0..6], GW_MAC, "packet {i}: dst MAC = gateway");
            assert_eq!(
                out[6..12],
                f[0..6],
                "packet {i}: src MAC = the MAC the client used"
            );
            assert_eq!(be16(out, 12), ETH_IP);
            let outer = &out[14..34];
            assert_eq!(outer[0], 0x45, "packet {i}: version/IHL");
            assert_eq!(outer[1], f[l3off + 1], "packet {i}: TOS copied");
            assert_eq!(
                be16(outer, 2),
                be16(f, l3off + 2) + 20,
                "packet {i}: tot_len"
            );
            assert_eq!(&outer[4..8], &[0, 0, 0, 0], "packet {i}: id, frag");
            assert_eq!((outer[8], outer[9]), (64, 4), "packet {i}: TTL, IPIP");
            assert_eq!(outer[12..16], SRC, "packet {i}: outer source");
            assert_eq!(outer[16..20], real, "packet {i}: outer destination = real");
            assert!(ipv4_header_ok(outer), "packet {i}: outer checksum");
            assert_eq!(hex(&out[34..]), hex(&f[14..]), "packet {i}: inner intact");
            if let Some(prev) = per_flow_real.insert(key.clone(), real) {
                assert_eq!(prev, real, "packet {i}: real stable per flow");
            }
            flows.insert(key, (real_idx, p.ts_ns));
            encapsulated += 1;
        }
        assert!(
            encapsulated > 50 && per_flow_real.len() > 20,
            "{encapsulated}"
        );
        let conns = run.entries("conn_table");
        assert_eq!(conns.len(), flows.len(), "one connection per flow");
        for (key, (real_idx, ts)) in &flows {
            let v = &conns[key];
            assert_eq!(le32(v, 0), *real_idx, "conn_table real");
            assert_eq!(le64(v, 8), *ts, "conn_table last_seen = last packet's time");
        }
        let stats = run.percpu_u64("lb_stats");
        assert_eq!(stats[0], hits, "ST_VIP_HIT");
        assert_eq!(stats[3], no_real, "ST_NO_REAL");
        assert_eq!(hits, encapsulated + no_real);
        assert!(no_real > 0);
    });
}

/// The nat_lb configuration: VIP -> (backend base, count); backends.
const NAT_VIPS: [([u8; 4], u16, u8, u32, u32); 3] = [
    ([192, 0, 2, 1], 80, 6, 0, 2),
    ([192, 0, 2, 2], 53, 17, 2, 1),
    ([192, 0, 2, 3], 443, 17, 3, 0),
];
const NAT_BACKENDS: [([u8; 4], u16); 3] = [
    ([192, 0, 2, 201], 8080),
    ([192, 0, 2, 202], 8080),
    ([192, 0, 2, 211], 5353),
];

/// Swaps the endpoints of an IPv4 TCP/UDP frame without options (a reply), checksums redone.
fn reply_of(f: &[u8]) -> Vec<u8> {
    let mut r = f.to_vec();
    r[0..6].copy_from_slice(&f[6..12]);
    r[6..12].copy_from_slice(&f[0..6]);
    r[26..30].copy_from_slice(&f[30..34]);
    r[30..34].copy_from_slice(&f[26..30]);
    r[34..36].copy_from_slice(&f[36..38]);
    r[36..38].copy_from_slice(&f[34..36]);
    r[24..26].copy_from_slice(&[0, 0]);
    let c = !ones_sum(&r[14..34], 0);
    r[24..26].copy_from_slice(&c.to_be_bytes());
    let at = if r[23] == 6 { 34 + 16 } else { 34 + 6 };
    if !(r[23] == 17 && be16(f, at) == 0) {
        r[at..at + 2].copy_from_slice(&[0, 0]);
        let mut pseudo = r[26..34].to_vec();
        pseudo.extend_from_slice(&[0, r[23]]);
        pseudo.extend_from_slice(&((r.len() - 34) as u16).to_be_bytes());
        let c = !ones_sum(&r[34..], u32::from(ones_sum(&pseudo, 0)));
        r[at..at + 2].copy_from_slice(&c.to_be_bytes());
    }
    r
}

/// Client packets to a VIP get their destination rewritten to a backend (valid IPv4 and L4
/// checksums; a zero UDP checksum stays zero), one backend per flow, forward and reverse
/// sessions exist; replies from the backend (built here from the rewritten packets) get their
/// source rewritten back to the VIP.
#[test]
fn nat_lb() {
    Setup::new("nat_lb").maps().check(|run| {
        let mut sessions: BTreeMap<Vec<u8>, ([u8; 4], u16)> = BTreeMap::new();
        let mut replies = Vec::new();
        for (i, p) in run.packets.iter().enumerate() {
            let f = &p.data;
            let o = run.outcome(i);
            let Some((ETH_IP, l3off, _)) = l2(f) else {
                assert_eq!(o.action, XdpAction::Pass, "packet {i}");
                continue;
            };
            let Some((proto, l4)) = ip4(f, l3off) else {
                assert_eq!(o.action, XdpAction::Drop, "packet {i}");
                continue;
            };
            if be16(f, l3off + 6) & 0x3fff != 0 || (proto != 6 && proto != 17) {
                assert_eq!(o.action, XdpAction::Pass, "packet {i}");
                assert_unchanged(run, i, "fragment / other protocol");
                continue;
            }
            let Some((sport, dport)) = ports(f, l4, proto) else {
                assert_eq!(o.action, XdpAction::Drop, "packet {i}");
                continue;
            };
            let daddr: [u8; 4] = f[l3off + 16..l3off + 20].try_into().unwrap();
            let Some(&(_, _, _, base, count)) = NAT_VIPS
                .iter()
                .find(|v| v.0 == daddr && v.1 == dport && v.2 == proto)
            else {
                assert_eq!(o.action, XdpAction::Pass, "packet {i}");
                assert_unchanged(run, i, "not to a VIP");
                continue;
            };
            if count == 0 {
                assert_eq!(
                    o.action,
                    XdpAction::Drop,
                    "packet {i}: VIP without backends"
                );
                continue;
            }
            let s = le32(f, l3off + 12);
            let sp = u32::from(u16::from_le_bytes([f[l4], f[l4 + 1]]));
            let (baddr, bport) = NAT_BACKENDS[(base + (s ^ sp ^ (s >> 16)) % count) as usize];
            assert_eq!(o.action, XdpAction::Pass, "packet {i}");
            let out = &o.data_out;
            let mut want = f.clone();
            want[l3off + 16..l3off + 20].copy_from_slice(&baddr);
            want[l4 + 2..l4 + 4].copy_from_slice(&bport.to_be_bytes());
            let (ip_sum, l4_sum) = (l3off + 10, l4 + if proto == 6 { 16 } else { 6 });
            for at in [ip_sum, ip_sum + 1, l4_sum, l4_sum + 1] {
                want[at] = out[at];
            }
            assert_eq!(
                hex(out),
                hex(&want),
                "packet {i}: only addr/port/checksums change"
            );
            assert!(ipv4_header_ok(&out[l3off..l4]), "packet {i}: IPv4 checksum");
            if proto == 17 && be16(f, l4 + 6) == 0 {
                assert_eq!(be16(out, l4 + 6), 0, "packet {i}: zero UDP checksum kept");
            } else {
                assert!(
                    l4_checksum_ok_v4(out, l3off, l4, proto),
                    "packet {i}: L4 checksum"
                );
            }
            let mut key = f[l3off + 12..l3off + 20].to_vec();
            key.extend_from_slice(&f[l4..l4 + 4]);
            key.extend_from_slice(&[proto, 0, 0, 0]);
            if sessions.insert(key, (baddr, bport)).is_none() && l3off == 14 {
                replies.push((out.clone(), f.clone()));
            }
            let _ = sport;
        }
        let table = run.entries("sessions");
        assert_eq!(
            table.len(),
            2 * sessions.len(),
            "forward + reverse sessions"
        );
        for (key, (baddr, bport)) in &sessions {
            let v = &table[key];
            assert_eq!((&v[0..4], be16(v, 4), v[6]), (&baddr[..], *bport, 0));
            let mut rev = baddr.to_vec();
            rev.extend_from_slice(&key[0..4]);
            rev.extend_from_slice(&bport.to_be_bytes());
            rev.extend_from_slice(&key[8..10]);
            rev.extend_from_slice(&key[12..16]);
            let rv = &table[&rev];
            assert_eq!(&rv[0..4], &key[4..8], "reverse: the VIP");
            assert_eq!(&rv[4..6], &key[10..12], "reverse: the VIP port");
            assert_eq!(rv[6], 1, "reverse: rewrite the source");
        }
        let created = run.var(".bss", "sessions_created");
        assert_eq!(created, sessions.len() as u64, "sessions_created");
        assert_eq!(run.var(".bss", "insert_races"), 0);
        assert!(sessions.len() >= 20);
        // Replies, from each backend to its client, through the same runtime.
        for (fwd, orig) in replies {
            let reply = reply_of(&fwd);
            let pkt = Packet {
                index: 0,
                ts_ns: EPOCH_NS,
                orig_len: reply.len() as u32,
                data: reply.clone(),
            };
            let r = run.replayer.run(&pkt);
            let o = r.outcome.unwrap();
            assert_eq!(o.action, XdpAction::Pass);
            let want = reply_of(&orig);
            assert_eq!(
                hex(&o.data_out[26..38]),
                hex(&want[26..38]),
                "reply: VIP again"
            );
            assert!(ipv4_header_ok(&o.data_out[14..34]), "reply: IPv4 checksum");
            if !(orig[23] == 17 && be16(&orig, 40) == 0) {
                assert!(
                    l4_checksum_ok_v4(&o.data_out, 14, 34, orig[23]),
                    "reply: L4"
                );
            }
        }
    });
}

/// The murmur3 finaliser of ddos_filter.c.
fn mix32(mut h: u32) -> u32 {
    h ^= h >> 16;
    h = h.wrapping_mul(0x85eb_ca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2_ae35);
    h ^ (h >> 16)
}

/// Sources in blocked prefixes and UDP to blocked ports are dropped, each rule's hit counter
/// and the per-reason statistics equal to the counts computed here; the rest is redirected to
/// the cpumap entry the flow hash picks (of the 2 configured); non-IP passes.
#[test]
fn ddos_filter() {
    Setup::new("ddos_filter").maps().check(|run| {
        let v4_rules: [([u8; 4], usize, u32); 2] =
            [([203, 0, 113, 0], 25, 1), ([198, 51, 100, 128], 25, 2)];
        let v6_net = [0x20, 0x01, 0x0d, 0xb8, 0, 0x66];
        let port_rules: [(u16, u32); 4] = [(19, 10), (123, 11), (389, 12), (11211, 13)];
        let mut hits: BTreeMap<u32, u64> = BTreeMap::new();
        let mut stats = [0u64; 4];
        for (i, p) in run.packets.iter().enumerate() {
            let f = &p.data;
            let o = run.outcome(i);
            let (v6, proto, l3off, l4) = match l3(f) {
                Ok(Some(x)) => x,
                Ok(None) => {
                    assert_eq!(o.action, XdpAction::Pass, "packet {i}: not IP");
                    continue;
                }
                Err(()) => {
                    assert_eq!(o.action, XdpAction::Drop, "packet {i}: bad IP");
                    continue;
                }
            };
            let (rule, mut hash) = if v6 {
                let src = &f[l3off + 8..l3off + 24];
                let dst = &f[l3off + 24..l3off + 40];
                let rule = in_prefix(src, &v6_net, 48).then_some((3, 2));
                let h = le32(src, 12) ^ le32(dst, 12) ^ le32(src, 8) ^ le32(dst, 8);
                (rule, h)
            } else {
                let src = &f[l3off + 12..l3off + 16];
                let rule = v4_rules
                    .iter()
                    .find(|r| in_prefix(src, &r.0, r.1))
                    .map(|r| (r.2, 1));
                (rule, le32(f, l3off + 12) ^ le32(f, l3off + 16))
            };
            if let Some((id, stat)) = rule {
                assert_eq!(o.action, XdpAction::Drop, "packet {i}: blocked source");
                *hits.entry(id).or_default() += 1;
                stats[stat] += 1;
                continue;
            }
            if proto == 17 {
                let Some((_, dport)) = ports(f, l4, 17) else {
                    assert_eq!(o.action, XdpAction::Drop, "packet {i}: UDP cut short");
                    continue;
                };
                if let Some(r) = port_rules.iter().find(|r| r.0 == dport) {
                    assert_eq!(o.action, XdpAction::Drop, "packet {i}: blocked port");
                    *hits.entry(r.1).or_default() += 1;
                    stats[3] += 1;
                    continue;
                }
                let s = u32::from(u16::from_le_bytes([f[l4], f[l4 + 1]]));
                let d = u32::from(u16::from_le_bytes([f[l4 + 2], f[l4 + 3]]));
                hash ^= (s << 16) | d;
            }
            hash ^= u32::from(proto);
            stats[0] += 1;
            let cpu = mix32(hash) % 2;
            assert_eq!(o.action, XdpAction::Redirect, "packet {i}");
            assert_unchanged(run, i, "redirected");
            match &o.redirect {
                Some(RedirectTarget::Cpu { map, cpu: c }) => {
                    assert_eq!((map.as_str(), *c), ("cpu_map", cpu), "packet {i}");
                    assert!(*c < CPUS);
                }
                other => panic!("packet {i}: redirect {other:?}"),
            }
        }
        assert!(stats.iter().all(|&n| n > 0), "every path taken: {stats:?}");
        assert_eq!(run.percpu_u64("stats"), stats.to_vec());
        let mut counted = BTreeMap::new();
        for map in ["blocklist_v4", "blocklist_v6", "blocked_udp_ports"] {
            for v in run.entries(map).values() {
                counted.insert(le32(v, 8), le64(v, 0));
            }
        }
        for (id, n) in &counted {
            assert_eq!(*n, hits.get(id).copied().unwrap_or(0), "rule {id} hits");
        }
        assert_eq!(counted.len(), 7);
    });
}

/// An ACL rule: source, destination, source port (0 = wildcard), destination port, protocol,
/// deny.
type FwRule = ([u8; 16], [u8; 16], u16, u16, u8, bool);

/// Exact 5-tuple rules first, then the source-port wildcard, else the default policy from
/// `.rodata` (set to deny); non-IP passes (`allow_non_ip`).
#[test]
fn firewall() {
    Setup::new("firewall").maps().check(|run| {
        // (source, destination, sport (0 = wildcard), dport, proto, deny?)
        let v4 = |a: [u8; 4]| {
            let mut m = [0u8; 16];
            m[10] = 0xff;
            m[11] = 0xff;
            m[12..].copy_from_slice(&a);
            m
        };
        let v6 = |net: u8, host: u8| {
            let mut m = [0u8; 16];
            m[..4].copy_from_slice(&[0x20, 0x01, 0x0d, 0xb8]);
            m[5] = net;
            m[15] = host;
            m
        };
        let rules: Vec<FwRule> = vec![
            (
                v4([198, 51, 100, 11]),
                v4([192, 0, 2, 1]),
                40001,
                80,
                6,
                true,
            ),
            (v4([198, 51, 100, 10]), v4([192, 0, 2, 1]), 0, 80, 6, false),
            (v4([198, 51, 100, 11]), v4([192, 0, 2, 1]), 0, 80, 6, false),
            (v4([198, 51, 100, 30]), v4([192, 0, 2, 2]), 0, 53, 17, false),
            (v4([198, 51, 100, 31]), v4([192, 0, 2, 2]), 0, 53, 17, true),
            (v4([198, 51, 100, 50]), v4([192, 0, 2, 1]), 0, 0, 1, false),
            (v6(1, 5), v6(2, 5), 0, 22, 6, false),
        ];
        let mut stats = [0u64; 3];
        for (i, p) in run.packets.iter().enumerate() {
            let f = &p.data;
            let o = run.outcome(i);
            let (is_v6, proto, l3off, l4) = match l3(f) {
                Ok(Some(x)) => x,
                Ok(None) => {
                    assert_eq!(o.action, XdpAction::Pass, "packet {i}: not IP");
                    continue;
                }
                Err(()) => {
                    assert_eq!(o.action, XdpAction::Drop, "packet {i}: bad IP");
                    continue;
                }
            };
            let (src, dst) = if is_v6 {
                let s: [u8; 16] = f[l3off + 8..l3off + 24].try_into().unwrap();
                (s, f[l3off + 24..l3off + 40].try_into().unwrap())
            } else {
                let s: [u8; 4] = f[l3off + 12..l3off + 16].try_into().unwrap();
                (v4(s), v4(f[l3off + 16..l3off + 20].try_into().unwrap()))
            };
            let (sport, dport) = match proto {
                6 | 17 => match ports(f, l4, proto) {
                    Some(p) => p,
                    None => {
                        assert_eq!(o.action, XdpAction::Drop, "packet {i}: L4 cut short");
                        continue;
                    }
                },
                _ => (0, 0),
            };
            let find = |sp: u16| {
                rules
                    .iter()
                    .find(|r| (r.0, r.1, r.2, r.3, r.4) == (src, dst, sp, dport, proto))
            };
            let deny = match find(sport).or_else(|| find(0)) {
                Some(r) => {
                    stats[usize::from(r.5)] += 1;
                    r.5
                }
                None => {
                    stats[2] += 1;
                    true
                }
            };
            let want = if deny {
                XdpAction::Drop
            } else {
                XdpAction::Pass
            };
            assert_eq!(o.action, want, "packet {i}");
            assert_unchanged(run, i, "firewall");
        }
        assert!(stats.iter().all(|&n| n > 0), "{stats:?}");
        assert_eq!(run.percpu_u64("fw_stats"), stats.to_vec());
    });
}

/// With `examples/fib/router.json`: forwarded packets leave with TTL/hop limit - 1 (valid
/// IPv4 checksum), the next hop's MAC and the egress MAC, redirected to the egress port in
/// the devmap; gateway without neighbour, too big for the route MTU, TTL <= 1, no route and
/// non-IP -> XDP_PASS; blackhole/unreachable -> XDP_DROP.
#[test]
fn router() {
    let mut setup = Setup::new("router").maps();
    setup.fib = Some("router");
    setup.ifindex = 2;
    setup.check(|run| {
        const ETH1: [u8; 6] = [2, 0, 0, 0, 1, 1];
        const ETH2: [u8; 6] = [2, 0, 0, 0, 2, 1];
        const NH1: [u8; 6] = [2, 0, 0, 0, 1, 2];
        const NH2: [u8; 6] = [2, 0, 0, 0, 2, 2];
        let mut stats = [0u64; 5];
        let mut seen = BTreeSet::new();
        for (i, p) in run.packets.iter().enumerate() {
            let f = &p.data;
            let o = run.outcome(i);
            // parse_ethhdr peels VLAN tags.
            let parsed = l3(f);
            let want = match parsed {
                Ok(None) => ("pass", None),
                Err(()) => ("drop", None),
                Ok(Some((v6, _, l3off, _))) => {
                    let ttl = f[l3off + if v6 { 7 } else { 8 }];
                    if ttl <= 1 {
                        ("pass", None)
                    } else if v6 {
                        let dst = &f[l3off + 24..l3off + 40];
                        let net = [0x20, 0x01, 0x0d, 0xb8, 0, 2, 0, 0];
                        if in_prefix(dst, &net, 64) {
                            ("fwd", Some((l3off, true, ETH1, NH1, 3u32)))
                        } else {
                            ("pass", None)
                        }
                    } else {
                        let d = &f[l3off + 16..l3off + 20];
                        let tot = be16(f, l3off + 2);
                        if d[..3] != [192, 0, 2] {
                            ("pass", None)
                        } else {
                            match d[3] {
                                0..=3 if tot > 1500 => ("pass", None),
                                0..=3 => ("fwd", Some((l3off, false, ETH1, NH1, 3))),
                                4..=7 if tot > 1400 => ("pass", None),
                                4..=7 => ("fwd", Some((l3off, false, ETH2, NH2, 4))),
                                8..=11 => ("pass", None),
                                12..=16 => ("drop", None),
                                _ => ("pass", None),
                            }
                        }
                    }
                }
            };
            seen.insert(want.0);
            match want {
                ("fwd", Some((l3off, v6, smac, dmac, port))) => {
                    stats[4] += 1;
                    assert_eq!(o.action, XdpAction::Redirect, "packet {i}");
                    let out = &o.data_out;
                    let mut exp = f.clone();
                    exp[0..6].copy_from_slice(&dmac);
                    exp[6..12].copy_from_slice(&smac);
                    if v6 {
                        exp[l3off + 7] -= 1;
                    } else {
                        exp[l3off + 8] -= 1;
                        exp[l3off + 10..l3off + 12].copy_from_slice(&out[l3off + 10..l3off + 12]);
                        let hl = usize::from(f[l3off] & 0xf) * 4;
                        if ipv4_header_ok(&f[l3off..l3off + hl]) {
                            assert!(ipv4_header_ok(&out[l3off..l3off + hl]), "packet {i}: csum");
                        }
                    }
                    assert_eq!(hex(out), hex(&exp), "packet {i}");
                    match &o.redirect {
                        Some(RedirectTarget::Dev { map, key, .. }) => {
                            assert_eq!((map.as_str(), *key), ("tx_port", port), "packet {i}")
                        }
                        other => panic!("packet {i}: {other:?}"),
                    }
                }
                (a, _) => {
                    let (want, idx) = if a == "pass" {
                        (XdpAction::Pass, 2)
                    } else {
                        (XdpAction::Drop, 1)
                    };
                    stats[idx] += 1;
                    assert_eq!(o.action, want, "packet {i}");
                    assert_unchanged(run, i, a);
                }
            }
        }
        assert_eq!(seen.len(), 3, "{seen:?}");
        assert_eq!(run.percpu_u64("action_stats"), stats.to_vec());
    });
}

/// The match-action table: forward (MAC rewrite, TTL - 1, full checksum, redirect to the
/// devmap port, or XDP_PASS when the port is not in it), set DSCP (checksum redone), drop,
/// default NoAction; IPv4 with options or a wrong version and cut-short headers are rejected
/// (drop); non-IPv4 is emitted unchanged. Hit/miss counters counted here.
#[test]
fn p4_parser() {
    Setup::new("p4_parser").maps().check(|run| {
        let mut counters = [0u64; 2];
        let mut forwarded = 0;
        for (i, p) in run.packets.iter().enumerate() {
            let f = &p.data;
            let o = run.outcome(i);
            // One 802.1Q tag at most.
            let (mut et, mut off) = (be16(f, 12), 14);
            if et == 0x8100 {
                if f.len() < 18 {
                    assert_eq!(o.action, XdpAction::Drop, "packet {i}");
                    continue;
                }
                (et, off) = (be16(f, 16), 18);
            }
            let need = match et {
                ETH_IP => 20,
                ETH_IPV6 => 40,
                _ => 0,
            };
            if f.len() < off + need {
                assert_eq!(o.action, XdpAction::Drop, "packet {i}: cut short");
                continue;
            }
            let proto = match et {
                ETH_IP => f[off + 9],
                ETH_IPV6 => f[off + 6],
                _ => 0,
            };
            if et == ETH_IP && f[off] != 0x45 {
                assert_eq!(
                    o.action,
                    XdpAction::Drop,
                    "packet {i}: not a plain IPv4 header"
                );
                continue;
            }
            let l4 = off + need;
            let has_l4 = (et == ETH_IP || et == ETH_IPV6) && (proto == 6 || proto == 17);
            if has_l4 && f.len() < l4 + 4 {
                assert_eq!(o.action, XdpAction::Drop, "packet {i}: ports cut short");
                continue;
            }
            if et != ETH_IP {
                assert_eq!(o.action, XdpAction::Pass, "packet {i}");
                assert_unchanged(run, i, "not IPv4");
                continue;
            }
            let dport = if has_l4 { be16(f, l4 + 2) } else { 0 };
            let dst = &f[off + 16..off + 20];
            let entry = match (dst, dport) {
                ([192, 0, 2, 1], 80) => Some((1, [2, 0, 0, 0, 0, 0xfe], 1u32)),
                ([192, 0, 2, 5], 53) => Some((1, [2, 0, 0, 0, 0, 0xfd], 7)),
                ([192, 0, 2, 2], 53) => Some((2, [0; 6], 0)),
                ([192, 0, 2, 3], 443) => Some((3, [0; 6], 0)),
                _ => None,
            };
            counters[usize::from(entry.is_some())] += 1;
            let (act, dmac, port) = entry.unwrap_or((0, [0; 6], 0));
            let mut exp = f.clone();
            let mut want = XdpAction::Pass;
            let mut redirect = None;
            let mut recompute = true;
            match act {
                1 => {
                    exp[6..12].copy_from_slice(&f[0..6]);
                    exp[0..6].copy_from_slice(&dmac);
                    if f[off + 8] <= 1 {
                        recompute = false;
                    } else {
                        exp[off + 8] -= 1;
                        if port == 1 {
                            want = XdpAction::Redirect;
                            redirect = Some(port);
                        }
                    }
                }
                2 => exp[off + 1] = (46 << 2) | (f[off + 1] & 3),
                3 => {
                    assert_eq!(o.action, XdpAction::Drop, "packet {i}: drop action");
                    continue;
                }
                _ => {}
            }
            if recompute {
                exp[off + 10..off + 12].copy_from_slice(&[0, 0]);
                let c = !ones_sum(&exp[off..off + 20], 0);
                exp[off + 10..off + 12].copy_from_slice(&c.to_be_bytes());
            }
            assert_eq!(o.action, want, "packet {i}");
            assert_eq!(hex(&o.data_out), hex(&exp), "packet {i}");
            if let Some(port) = redirect {
                forwarded += 1;
                assert!(
                    matches!(&o.redirect, Some(RedirectTarget::Dev { map, key, .. })
                        if map == "tx_ports" && *key == port),
                    "packet {i}: {:?}",
                    o.redirect
                );
            }
        }
        assert!(forwarded > 0 && counters[0] > 0 && counters[1] > 0);
        assert_eq!(run.percpu_u64("fwd_table_counters"), counters.to_vec());
    });
}

/// UDP to the configured port (`.rodata` xsk_udp_port = 53) goes to the AF_XDP socket of the
/// packet's RX queue (only queue 0 has one: others fall back to XDP_PASS); everything else
/// passes; per-queue counters count the wanted packets.
#[test]
fn xsk_dispatch() {
    Setup::new("xsk_dispatch").maps().check(|run| {
        let mut per_queue = [0u64; 64];
        let mut to_socket = 0;
        for (i, p) in run.packets.iter().enumerate() {
            let f = &p.data;
            let o = run.outcome(i);
            let wanted = match l3(f) {
                Ok(Some((_, 17, _, l4))) => ports(f, l4, 17).is_some_and(|(_, d)| d == 53),
                _ => false,
            };
            let queue = run.results[i].cpu;
            assert_unchanged(run, i, "xsk_dispatch");
            if !wanted {
                assert_eq!(o.action, XdpAction::Pass, "packet {i}");
                continue;
            }
            per_queue[queue as usize] += 1;
            if queue == 0 {
                to_socket += 1;
                assert_eq!(o.action, XdpAction::Redirect, "packet {i}");
                assert!(
                    matches!(&o.redirect, Some(RedirectTarget::Xsk { map, queue: 0 }) if map == "xsks_map"),
                    "packet {i}: {:?}",
                    o.redirect
                );
            } else {
                assert_eq!(o.action, XdpAction::Pass, "packet {i}: no socket on queue");
            }
        }
        assert!(to_socket > 0 && per_queue[1] > 0);
        assert_eq!(run.percpu_u64("rx_per_queue"), per_queue.to_vec());
    });
}

/// Frames from the trusted (MAC, first VLAN id) pairs in `.rodata` pass and are counted (every
/// `sample_every`-th (`.data`, 4) sampled); the rest are counted as rejected and dropped
/// (`verdict_for_untrusted` = XDP_DROP), the last one's VLAN remembered.
#[test]
fn globals() {
    Setup::new("globals").maps().check(|run| {
        let (mut admitted, mut rejected, mut sampled, mut last_vlan) = (0u64, 0u64, 0u64, 0u32);
        for (i, p) in run.packets.iter().enumerate() {
            let f = &p.data;
            let o = run.outcome(i);
            assert_unchanged(run, i, "globals");
            let Some((_, _, vids)) = l2(f) else {
                assert_eq!(o.action, XdpAction::Drop, "packet {i}");
                continue;
            };
            if f[6..12] == [2, 0, 0, 0, 0, 0x0a] && (vids[0] == 10 || vids[0] == 100) {
                admitted += 1;
                if admitted % 4 == 0 {
                    sampled += 1;
                }
                assert_eq!(o.action, XdpAction::Pass, "packet {i}");
            } else {
                rejected += 1;
                last_vlan = u32::from(vids[0]);
                assert_eq!(o.action, XdpAction::Drop, "packet {i}");
            }
        }
        assert!(admitted > 0 && rejected > 0 && sampled > 0);
        let got = [
            run.var(".bss", "admitted"),
            run.var(".bss", "rejected"),
            run.var(".bss", "sampled"),
            run.var(".bss", "last_untrusted_vlan"),
        ];
        assert_eq!(got, [admitted, rejected, sampled, u64::from(last_vlan)]);
    });
}

/// Frames longer than the snap length (`.rodata` snaplen = 96) are cut to it, unless they are
/// IPv4 UDP to the keep-whole port (443); trimmed bytes summed.
#[test]
fn adjust_tail() {
    Setup::new("adjust_tail").maps().check(|run| {
        let (mut trimmed, mut kept, mut cut) = (0u64, 0, 0);
        for (i, p) in run.packets.iter().enumerate() {
            let f = &p.data;
            let o = run.outcome(i);
            assert_eq!(o.action, XdpAction::Pass, "packet {i}");
            let keep = match l2(f) {
                Some((ETH_IP, off, _)) => match ip4(f, off) {
                    Some((17, l4)) => ports(f, l4, 17).is_some_and(|(_, d)| d == 443),
                    _ => false,
                },
                _ => false,
            };
            if f.len() <= 96 || keep {
                kept += usize::from(keep && f.len() > 96);
                assert_unchanged(run, i, "short or kept whole");
            } else {
                cut += 1;
                trimmed += f.len() as u64 - 96;
                assert_eq!(hex(&o.data_out), hex(&f[..96]), "packet {i}");
            }
        }
        assert!(kept > 0 && cut > 0);
        assert_eq!(run.percpu_u64("trimmed_bytes"), vec![trimmed]);
    });
}

/// A 16-byte record in front of every frame: mark by protocol, flow hash, L3/L4 offsets, L4
/// protocol; the frame itself unchanged; always XDP_PASS.
#[test]
fn adjust_meta() {
    Setup::new("adjust_meta").check(|run| {
        for (i, p) in run.packets.iter().enumerate() {
            let f = &p.data;
            let o = run.outcome(i);
            assert_eq!(o.action, XdpAction::Pass, "packet {i}");
            assert_eq!(o.meta_len, 16, "packet {i}");
            assert_eq!(
                hex(&o.data_out[16..]),
                hex(f),
                "packet {i}: frame unchanged"
            );
            let m = &o.data_out[..16];
            let (mut l4off, mut proto, mut hash) = (0u16, 0i32, 0u32);
            let l3off: u16 = match l2(f) {
                Some((ETH_IP, off, _)) => {
                    match ip4(f, off) {
                        Some((pr, l4)) => {
                            l4off = l4 as u16;
                            proto = i32::from(pr);
                            hash = le32(f, off + 12) ^ le32(f, off + 16) ^ u32::from(pr);
                        }
                        None => proto = -1,
                    }
                    off as u16
                }
                Some((_, off, _)) => off as u16,
                // Cut short in a VLAN tag: the cursor stays after the Ethernet header.
                None => 14,
            };
            let mark = match proto {
                6 => 0x100,
                17 => 0x200,
                _ => 0,
            };
            assert_eq!(le32(m, 0), mark, "packet {i}: mark");
            assert_eq!(le32(m, 4), hash, "packet {i}: hash");
            assert_eq!(
                u16::from_le_bytes([m[8], m[9]]),
                l3off,
                "packet {i}: l3_off"
            );
            assert_eq!(
                u16::from_le_bytes([m[10], m[11]]),
                l4off,
                "packet {i}: l4_off"
            );
            assert_eq!(m[12], proto.max(0) as u8, "packet {i}: l4_proto");
            assert_eq!(&m[13..16], &[0, 0, 0]);
        }
    });
}

/// The entry program tail-calls the IPv4 or IPv6 stage (slots filled from the object); the
/// stages drop martian/multicast sources and cut-short headers; non-IP passes from the entry.
#[test]
fn tailcall() {
    let mut setup = Setup::new("tailcall");
    setup.entry = Some("xdp_entry");
    setup.check(|run| {
        let mut hits = [0u64; 3];
        for (i, p) in run.packets.iter().enumerate() {
            let f = &p.data;
            let o = run.outcome(i);
            assert_unchanged(run, i, "tailcall");
            let want = match l2(f) {
                Some((ETH_IP, off, _)) => {
                    hits[0] += 1;
                    match ip4(f, off) {
                        Some(_) if f[off + 12] == 0 || f[off + 12] == 127 => XdpAction::Drop,
                        Some(_) => XdpAction::Pass,
                        None => XdpAction::Drop,
                    }
                }
                Some((ETH_IPV6, off, _)) => {
                    hits[1] += 1;
                    match ip6(f, off) {
                        Some(_) if f[off + 8] == 0xff => XdpAction::Drop,
                        Some(_) => XdpAction::Pass,
                        None => XdpAction::Drop,
                    }
                }
                _ => {
                    hits[2] += 1;
                    XdpAction::Pass
                }
            };
            assert_eq!(o.action, want, "packet {i}");
        }
        assert!(hits.iter().all(|&n| n > 0));
        assert_eq!(run.percpu_u64("stage_hits"), hits.to_vec());
    });
}

/// IPv6 extension headers walked with bpf_loop: Type 0 routing headers and chains that run
/// past the frame are dropped, the rest pass, counted by upper-layer protocol.
#[test]
fn bpf_loop() {
    Setup::new("bpf_loop").check(|run| {
        let mut l4 = [0u64; 256];
        let mut dropped_rh0 = 0;
        for (i, p) in run.packets.iter().enumerate() {
            let f = &p.data;
            let o = run.outcome(i);
            assert_unchanged(run, i, "bpf_loop");
            let Some((ETH_IPV6, off, _)) = l2(f) else {
                assert_eq!(o.action, XdpAction::Pass, "packet {i}");
                continue;
            };
            let Some((mut next, mut at)) = ip6(f, off) else {
                assert_eq!(o.action, XdpAction::Drop, "packet {i}");
                continue;
            };
            let mut verdict = None;
            for _ in 0..16 {
                if ![0, 43, 44, 60].contains(&next) {
                    verdict = Some(true);
                    break;
                }
                if f.len() < at + 4 || (next == 43 && f[at + 2] == 0) {
                    dropped_rh0 += usize::from(f.len() >= at + 4);
                    verdict = Some(false);
                    break;
                }
                let len = if next == 44 {
                    8
                } else {
                    (usize::from(f[at + 1]) + 1) * 8
                };
                next = f[at];
                at += len;
            }
            if verdict == Some(true) {
                l4[usize::from(next)] += 1;
                assert_eq!(o.action, XdpAction::Pass, "packet {i}");
            } else {
                assert_eq!(o.action, XdpAction::Drop, "packet {i}");
            }
        }
        assert!(dropped_rh0 > 0 && l4[17] > 0 && l4[6] > 0);
        assert_eq!(run.percpu_u64("l4_seen"), l4.to_vec());
    });
}

/// TCP SYNs over IPv4 to ports outside the allow set (22, 443) are dropped, each reported in
/// the ring buffer with up to 64 bytes of the frame, and a summary every 32 drops.
#[test]
fn ringbuf_events() {
    Setup::new("ringbuf_events").maps().check(|run| {
        let mut drops = Vec::new();
        for (i, p) in run.packets.iter().enumerate() {
            let f = &p.data;
            let o = run.outcome(i);
            assert_unchanged(run, i, "ringbuf_events");
            let syn = match l2(f) {
                Some((ETH_IP, off, _)) if f.len() >= off + 20 => match ip4(f, off) {
                    Some((6, l4)) => ports(f, l4, 6)
                        .filter(|_| f[l4 + 13] & 0x12 == 0x02)
                        .map(|(_, d)| d),
                    _ => None,
                },
                _ => None,
            };
            match syn {
                Some(d) if d != 22 && d != 443 => {
                    assert_eq!(o.action, XdpAction::Drop, "packet {i}");
                    drops.push(i);
                }
                _ => assert_eq!(o.action, XdpAction::Pass, "packet {i}"),
            }
        }
        assert!(drops.len() > 32);
        let pending = run.var(".bss", "drops_pending");
        assert_eq!(pending as usize, drops.len() % 32, "drops_pending");
        // The records, as a consumer reads them.
        let index = run.map_index("events");
        let (maps, mem) = run.replayer.runtime.maps_mut();
        let records = maps.get_mut(index).unwrap().ringbuf_consume(mem).unwrap();
        let mut expected = Vec::new();
        for (n, &i) in drops.iter().enumerate() {
            let f = &run.packets[i].data;
            let cap = f.len().min(64);
            let mut e = vec![1, 0];
            e.extend_from_slice(&(cap as u16).to_le_bytes());
            e.extend_from_slice(&(f.len() as u32).to_le_bytes());
            e.extend_from_slice(&1u32.to_le_bytes());
            e.extend_from_slice(&run.results[i].cpu.to_le_bytes());
            e.extend_from_slice(&run.packets[i].ts_ns.to_le_bytes());
            e.extend_from_slice(&f[..cap]);
            e.resize(88, 0);
            expected.push(e);
            if (n + 1) % 32 == 0 {
                let mut s = vec![2, 0, 0, 0];
                s.extend_from_slice(&32u32.to_le_bytes());
                s.extend_from_slice(&run.packets[i].ts_ns.to_le_bytes());
                expected.push(s);
            }
        }
        let got: Vec<String> = records.iter().map(|r| hex(&r.data)).collect();
        let want: Vec<String> = expected.iter().map(|e| hex(e)).collect();
        assert_eq!(got, want);
    });
}

/// A token bucket on DSCP 0 (2 MB/s, burst 4000 bytes, full at the capture epoch) simulated
/// here with the capture timestamps; DSCP 46 has an empty bucket with no refill (always
/// drops: no traffic uses it); other classes are unlimited. Non-IPv4 passes.
#[test]
fn spin_lock() {
    Setup::new("spin_lock").maps().check(|run| {
        let (mut tokens, mut last, mut dropped) = (4000u64, EPOCH_NS, 0u64);
        let (mut passed, mut limited) = (0, 0);
        for (i, p) in run.packets.iter().enumerate() {
            let f = &p.data;
            let o = run.outcome(i);
            assert_unchanged(run, i, "spin_lock");
            let Some((ETH_IP, off, _)) = l2(f) else {
                assert_eq!(o.action, XdpAction::Pass, "packet {i}");
                continue;
            };
            if ip4(f, off).is_none() {
                assert_eq!(o.action, XdpAction::Drop, "packet {i}");
                continue;
            }
            assert_eq!(f[off + 1] >> 2, 0, "captures use DSCP 0");
            let elapsed = p.ts_ns.wrapping_sub(last).min(1_000_000_000);
            tokens = (tokens + elapsed * 2_000_000 / 1_000_000_000).min(4000);
            last = p.ts_ns;
            let len = f.len() as u64;
            if tokens >= len {
                tokens -= len;
                passed += 1;
                assert_eq!(o.action, XdpAction::Pass, "packet {i}");
            } else {
                dropped += 1;
                limited += 1;
                assert_eq!(o.action, XdpAction::Drop, "packet {i}");
            }
        }
        assert!(passed > 0 && limited > 0);
        let b = run.lookup("buckets", &0u32.to_le_bytes()).unwrap();
        assert_eq!(
            (le64(&b, 8), le64(&b, 16), le64(&b, 40)),
            (tokens, last, dropped)
        );
    });
}

/// Static and global subprograms: non-IP passes, cut-short IP drops, UDP from a non-reserved
/// port to an ephemeral port (>= 49152) drops; per-port-class accounting.
#[test]
fn subprogs() {
    Setup::new("subprogs").check(|run| {
        let (mut packets, mut bytes, mut well_known, mut dropped) = (0u64, 0u64, 0u64, 0);
        for (i, p) in run.packets.iter().enumerate() {
            let f = &p.data;
            let o = run.outcome(i);
            assert_unchanged(run, i, "subprogs");
            let et = be16(f, 12);
            if et != ETH_IP && et != ETH_IPV6 {
                assert_eq!(o.action, XdpAction::Pass, "packet {i}");
                continue;
            }
            let (proto, l4) = match l3(f) {
                Ok(Some((_, proto, _, l4))) => (proto, l4),
                _ => {
                    assert_eq!(o.action, XdpAction::Drop, "packet {i}");
                    continue;
                }
            };
            let (sport, dport) = match proto {
                6 | 17 => match ports(f, l4, proto) {
                    Some(p) => p,
                    None => {
                        assert_eq!(o.action, XdpAction::Drop, "packet {i}");
                        continue;
                    }
                },
                _ => (0, 0),
            };
            packets += 1;
            bytes += f.len() as u64;
            well_known += u64::from(dport != 0 && dport < 1024);
            if proto == 17 && dport >= 49152 && sport >= 1024 {
                dropped += 1;
                assert_eq!(o.action, XdpAction::Drop, "packet {i}");
            } else {
                assert_eq!(o.action, XdpAction::Pass, "packet {i}");
            }
        }
        assert!(dropped > 0);
        let st = run.entries("stats");
        let v = st.values().next().unwrap();
        let sum = |at: usize| v.chunks(24).map(|c| le64(c, at)).sum::<u64>();
        assert_eq!((sum(0), sum(8), sum(16)), (packets, bytes, well_known));
    });
}

/// CO-RE relocated ctx reads: every CPU that saw a packet records ifindex 1, its RX queue,
/// `egress_ifindex` found (size 4), XDP_REDIRECT = 4 and `struct bpf_fib_lookup` of 64 bytes;
/// the action is the kernel's XDP_PASS.
#[test]
fn core_ctx() {
    Setup::new("core_ctx").check(|run| {
        let mut cpus_seen = BTreeSet::new();
        for (i, _) in run.packets.iter().enumerate() {
            assert_eq!(action(run, i), XdpAction::Pass, "packet {i}");
            assert_unchanged(run, i, "core_ctx");
            cpus_seen.insert(run.results[i].cpu);
        }
        let v = run.lookup("last_ctx", &0u32.to_le_bytes()).unwrap();
        for cpu in 0..CPUS {
            let c = &v[cpu as usize * 24..cpu as usize * 24 + 24];
            let fields: Vec<u32> = (0..6).map(|k| le32(c, k * 4)).collect();
            if cpus_seen.contains(&cpu) {
                assert_eq!(fields, vec![1, cpu, 4, 1, 4, 64], "cpu {cpu}");
            }
        }
        assert_eq!(cpus_seen.len(), 2);
    });
}
