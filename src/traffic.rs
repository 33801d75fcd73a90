//! Synthetic traffic: a frame builder (Ethernet, 802.1Q/802.1ad, IPv4 with options and
//! fragments, IPv6 with extension headers, UDP, TCP, ICMP, ARP) with correct checksums, and
//! the scenarios behind the bundled captures in `examples/pcap/`.
//!
//! Everything is deterministic: the same seed gives the same bytes, so the committed captures
//! can be checked against a fresh generation. Addresses come from the documentation ranges
//! (192.0.2.0/24, 198.51.100.0/24, 203.0.113.0/24, 2001:db8::/32).

use crate::pcap::PcapWriter;
use std::io;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::Path;

/// The generator behind every scenario (xorshift64*): the workspace's one PRNG, kept in
/// `bpfemu-vm` so that the tests draw from the same sequence.
pub use bpfemu_vm::rng::Rng;

pub use crate::layers::proto::{
    ETH_P_8021AD, ETH_P_8021Q, ETH_P_ARP, ETH_P_IP, ETH_P_IPV6, IPPROTO_ICMP, IPPROTO_ICMPV6,
    IPPROTO_TCP, IPPROTO_UDP,
};

/// TCP flag bits.
pub mod tcp_flags {
    pub const FIN: u8 = 0x01;
    pub const SYN: u8 = 0x02;
    pub const RST: u8 = 0x04;
    pub const PSH: u8 = 0x08;
    pub const ACK: u8 = 0x10;
}

/// The Internet checksum (RFC 1071) of `data`, starting from a partial `sum`.
pub fn checksum(data: &[u8], mut sum: u32) -> u16 {
    for chunk in data.chunks(2) {
        let word = u16::from_be_bytes([chunk[0], *chunk.get(1).unwrap_or(&0)]);
        sum += u32::from(word);
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

fn pseudo_sum(src: &[u8], dst: &[u8], proto: u8, len: usize) -> u32 {
    let mut sum = 0u32;
    for chunk in src.chunks(2).chain(dst.chunks(2)) {
        sum += u32::from(u16::from_be_bytes([chunk[0], chunk[1]]));
    }
    sum + u32::from(proto) + len as u32
}

/// Layer 3 of a frame.
#[derive(Clone, Debug)]
pub enum Network {
    V4(Ipv4),
    V6(Ipv6),
    /// An ARP request from `sender` for `target`.
    Arp {
        sender: Ipv4Addr,
        target: Ipv4Addr,
    },
    /// Any other ethertype with these bytes after the Ethernet header.
    Raw {
        ethertype: u16,
        payload: Vec<u8>,
    },
}

#[derive(Clone, Debug)]
pub struct Ipv4 {
    pub src: Ipv4Addr,
    pub dst: Ipv4Addr,
    pub ttl: u8,
    pub tos: u8,
    pub id: u16,
    /// More-fragments flag.
    pub more_fragments: bool,
    pub dont_fragment: bool,
    /// Fragment offset in 8-byte units.
    pub frag_offset: u16,
    /// Options, padded to a multiple of 4 bytes.
    pub options: Vec<u8>,
}

impl Ipv4 {
    pub fn new(src: Ipv4Addr, dst: Ipv4Addr) -> Ipv4 {
        Ipv4 {
            src,
            dst,
            ttl: 64,
            tos: 0,
            id: 0,
            more_fragments: false,
            dont_fragment: true,
            frag_offset: 0,
            options: Vec::new(),
        }
    }
}

#[derive(Clone, Debug)]
pub struct Ipv6 {
    pub src: Ipv6Addr,
    pub dst: Ipv6Addr,
    pub hop_limit: u8,
    pub flow_label: u32,
    /// Extension headers in order: (next-header value naming this header, its bytes without
    /// the leading next-header byte). Hop-by-hop 0, routing 43, fragment 44, dest opts 60.
    pub extensions: Vec<(u8, Vec<u8>)>,
}

impl Ipv6 {
    pub fn new(src: Ipv6Addr, dst: Ipv6Addr) -> Ipv6 {
        Ipv6 {
            src,
            dst,
            hop_limit: 64,
            flow_label: 0,
            extensions: Vec::new(),
        }
    }
}

/// Layer 4 of an IP packet.
#[derive(Clone, Debug)]
pub enum Transport {
    Udp {
        sport: u16,
        dport: u16,
        payload: Vec<u8>,
    },
    Tcp {
        sport: u16,
        dport: u16,
        flags: u8,
        seq: u32,
        payload: Vec<u8>,
    },
    /// ICMP (or ICMPv6 over IPv6) echo request.
    Echo { id: u16, seq: u16, payload: Vec<u8> },
    /// Any protocol number with these bytes.
    Raw { proto: u8, payload: Vec<u8> },
}

/// A whole frame, built by [`Frame::build`].
#[derive(Clone, Debug)]
pub struct Frame {
    pub dst_mac: [u8; 6],
    pub src_mac: [u8; 6],
    /// VLAN tags outermost first: (TPID, TCI).
    pub vlans: Vec<(u16, u16)>,
    pub network: Network,
    pub transport: Option<Transport>,
}

pub const MAC_A: [u8; 6] = [0x02, 0x00, 0x00, 0x00, 0x00, 0x0a];
pub const MAC_B: [u8; 6] = [0x02, 0x00, 0x00, 0x00, 0x00, 0x0b];

impl Frame {
    pub fn ipv4(src: Ipv4Addr, dst: Ipv4Addr, transport: Transport) -> Frame {
        Frame {
            dst_mac: MAC_B,
            src_mac: MAC_A,
            vlans: Vec::new(),
            network: Network::V4(Ipv4::new(src, dst)),
            transport: Some(transport),
        }
    }

    pub fn ipv6(src: Ipv6Addr, dst: Ipv6Addr, transport: Transport) -> Frame {
        Frame {
            dst_mac: MAC_B,
            src_mac: MAC_A,
            vlans: Vec::new(),
            network: Network::V6(Ipv6::new(src, dst)),
            transport: Some(transport),
        }
    }

    pub fn with_vlans(mut self, vlans: &[(u16, u16)]) -> Frame {
        self.vlans = vlans.to_vec();
        self
    }

    /// The frame's bytes with lengths and checksums filled in.
    pub fn build(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(128);
        out.extend_from_slice(&self.dst_mac);
        out.extend_from_slice(&self.src_mac);
        for (tpid, tci) in &self.vlans {
            out.extend_from_slice(&tpid.to_be_bytes());
            out.extend_from_slice(&tci.to_be_bytes());
        }
        match &self.network {
            Network::V4(ip) => {
                out.extend_from_slice(&ETH_P_IP.to_be_bytes());
                let (proto, l4) = self.l4(&ip.src.octets(), &ip.dst.octets(), false);
                out.extend(build_ipv4(ip, proto, &l4));
            }
            Network::V6(ip) => {
                out.extend_from_slice(&ETH_P_IPV6.to_be_bytes());
                let (proto, l4) = self.l4(&ip.src.octets(), &ip.dst.octets(), true);
                out.extend(build_ipv6(ip, proto, &l4));
            }
            Network::Arp { sender, target } => {
                out.extend_from_slice(&ETH_P_ARP.to_be_bytes());
                out.extend(build_arp(self.src_mac, *sender, *target));
            }
            Network::Raw { ethertype, payload } => {
                out.extend_from_slice(&ethertype.to_be_bytes());
                out.extend_from_slice(payload);
            }
        }
        out
    }

    fn l4(&self, src: &[u8], dst: &[u8], v6: bool) -> (u8, Vec<u8>) {
        match &self.transport {
            None => (IPPROTO_UDP, Vec::new()),
            Some(t) => build_transport(t, src, dst, v6),
        }
    }
}

fn build_ipv4(ip: &Ipv4, proto: u8, payload: &[u8]) -> Vec<u8> {
    let mut options = ip.options.clone();
    options.resize(options.len().div_ceil(4) * 4, 0);
    let header_len = 20 + options.len();
    let total = (header_len + payload.len()) as u16;
    let flags_frag = (u16::from(ip.dont_fragment) << 14)
        | (u16::from(ip.more_fragments) << 13)
        | (ip.frag_offset & 0x1fff);
    let mut h = vec![0x40 | (header_len / 4) as u8, ip.tos];
    h.extend_from_slice(&total.to_be_bytes());
    h.extend_from_slice(&ip.id.to_be_bytes());
    h.extend_from_slice(&flags_frag.to_be_bytes());
    h.extend_from_slice(&[ip.ttl, proto, 0, 0]);
    h.extend_from_slice(&ip.src.octets());
    h.extend_from_slice(&ip.dst.octets());
    h.extend_from_slice(&options);
    let sum = checksum(&h, 0);
    h[10..12].copy_from_slice(&sum.to_be_bytes());
    h.extend_from_slice(payload);
    h
}

fn build_ipv6(ip: &Ipv6, proto: u8, payload: &[u8]) -> Vec<u8> {
    let mut chain = Vec::new();
    let first_next = ip.extensions.first().map_or(proto, |(kind, _)| *kind);
    for (i, (_, body)) in ip.extensions.iter().enumerate() {
        let next = ip.extensions.get(i + 1).map_or(proto, |(kind, _)| *kind);
        chain.push(next);
        chain.extend_from_slice(body);
    }
    let payload_len = (chain.len() + payload.len()) as u16;
    let word = (6u32 << 28) | (ip.flow_label & 0xf_ffff);
    let mut h = word.to_be_bytes().to_vec();
    h.extend_from_slice(&payload_len.to_be_bytes());
    h.extend_from_slice(&[first_next, ip.hop_limit]);
    h.extend_from_slice(&ip.src.octets());
    h.extend_from_slice(&ip.dst.octets());
    h.extend(chain);
    h.extend_from_slice(payload);
    h
}

fn build_transport(t: &Transport, src: &[u8], dst: &[u8], v6: bool) -> (u8, Vec<u8>) {
    let (proto, mut seg, csum_at) = match t {
        Transport::Udp {
            sport,
            dport,
            payload,
        } => {
            let mut s = Vec::new();
            s.extend_from_slice(&sport.to_be_bytes());
            s.extend_from_slice(&dport.to_be_bytes());
            s.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
            s.extend_from_slice(&[0, 0]);
            s.extend_from_slice(payload);
            (IPPROTO_UDP, s, 6)
        }
        Transport::Tcp {
            sport,
            dport,
            flags,
            seq,
            payload,
        } => {
            let mut s = Vec::new();
            s.extend_from_slice(&sport.to_be_bytes());
            s.extend_from_slice(&dport.to_be_bytes());
            s.extend_from_slice(&seq.to_be_bytes());
            s.extend_from_slice(&0u32.to_be_bytes());
            s.extend_from_slice(&[5 << 4, *flags]);
            s.extend_from_slice(&64240u16.to_be_bytes());
            s.extend_from_slice(&[0, 0, 0, 0]);
            s.extend_from_slice(payload);
            (IPPROTO_TCP, s, 16)
        }
        Transport::Echo { id, seq, payload } => {
            let kind = if v6 { 128 } else { 8 };
            let mut s = vec![kind, 0, 0, 0];
            s.extend_from_slice(&id.to_be_bytes());
            s.extend_from_slice(&seq.to_be_bytes());
            s.extend_from_slice(payload);
            (if v6 { IPPROTO_ICMPV6 } else { IPPROTO_ICMP }, s, 2)
        }
        Transport::Raw { proto, payload } => return (*proto, payload.clone()),
    };
    // ICMPv4 has no pseudo-header; UDP, TCP and ICMPv6 do.
    let start = if proto == IPPROTO_ICMP {
        0
    } else {
        pseudo_sum(src, dst, proto, seg.len())
    };
    let mut sum = checksum(&seg, start);
    if proto == IPPROTO_UDP && sum == 0 {
        sum = 0xffff;
    }
    seg[csum_at..csum_at + 2].copy_from_slice(&sum.to_be_bytes());
    (proto, seg)
}

fn build_arp(mac: [u8; 6], sender: Ipv4Addr, target: Ipv4Addr) -> Vec<u8> {
    let mut a = vec![0, 1, 0x08, 0x00, 6, 4, 0, 1];
    a.extend_from_slice(&mac);
    a.extend_from_slice(&sender.octets());
    a.extend_from_slice(&[0; 6]);
    a.extend_from_slice(&target.octets());
    a
}

/// Addresses the scenarios use.
pub mod addr {
    use std::net::{Ipv4Addr, Ipv6Addr};
    /// Clients.
    pub const CLIENT_NET: [u8; 3] = [198, 51, 100];
    /// Services (VIPs, servers).
    pub const SERVER_NET: [u8; 3] = [192, 0, 2];
    /// Attack sources.
    pub const ATTACK_NET: [u8; 3] = [203, 0, 113];

    pub fn v4(net: [u8; 3], host: u8) -> Ipv4Addr {
        Ipv4Addr::new(net[0], net[1], net[2], host)
    }

    /// `2001:db8:<net>::<host>`
    pub fn v6(net: u16, host: u16) -> Ipv6Addr {
        Ipv6Addr::new(0x2001, 0xdb8, net, 0, 0, 0, 0, host)
    }
}

fn udp(rng: &mut Rng, dport: u16, len: usize) -> Transport {
    Transport::Udp {
        sport: 1024 + rng.below(60000) as u16,
        dport,
        payload: rng.bytes(len),
    }
}

fn tcp(rng: &mut Rng, dport: u16, flags: u8, len: usize) -> Transport {
    Transport::Tcp {
        sport: 1024 + rng.below(60000) as u16,
        dport,
        flags,
        seq: rng.next_u64() as u32,
        payload: rng.bytes(len),
    }
}

/// Ordinary traffic: UDP (DNS, QUIC), TCP (HTTP handshakes and data), ICMP, ARP, over IPv4 and
/// IPv6, a few of them VLAN-tagged.
pub fn normal(rng: &mut Rng, count: usize) -> Vec<Vec<u8>> {
    use addr::*;
    (0..count)
        .map(|i| {
            let client = 1 + rng.below(200) as u8;
            let server = 1 + rng.below(16) as u8;
            let (c4, s4) = (v4(CLIENT_NET, client), v4(SERVER_NET, server));
            let (c6, s6) = (v6(1, u16::from(client)), v6(2, u16::from(server)));
            let frame = match i % 10 {
                0 => Frame::ipv4(c4, s4, udp(rng, 53, 32)),
                1 => Frame::ipv4(c4, s4, tcp(rng, 80, tcp_flags::SYN, 0)),
                2 => Frame::ipv4(c4, s4, tcp(rng, 80, tcp_flags::ACK | tcp_flags::PSH, 200)),
                3 => Frame::ipv4(c4, s4, udp(rng, 443, 1200)),
                4 => Frame::ipv6(c6, s6, udp(rng, 53, 40)),
                5 => Frame::ipv6(c6, s6, tcp(rng, 443, tcp_flags::SYN, 0)),
                6 => Frame::ipv4(
                    c4,
                    s4,
                    Transport::Echo {
                        id: 7,
                        seq: i as u16,
                        payload: rng.bytes(56),
                    },
                ),
                7 => Frame::ipv6(
                    c6,
                    s6,
                    Transport::Echo {
                        id: 9,
                        seq: i as u16,
                        payload: rng.bytes(56),
                    },
                ),
                8 => Frame::ipv4(c4, s4, udp(rng, 4789, 100)).with_vlans(&[(ETH_P_8021Q, 100)]),
                _ => Frame {
                    dst_mac: [0xff; 6],
                    src_mac: MAC_A,
                    vlans: Vec::new(),
                    network: Network::Arp {
                        sender: c4,
                        target: s4,
                    },
                    transport: None,
                },
            };
            frame.build()
        })
        .collect()
}

/// Attack traffic: SYN flood from spoofed sources, UDP floods at amplification ports, ICMP
/// floods, from the attack network and from random addresses.
pub fn attack(rng: &mut Rng, count: usize) -> Vec<Vec<u8>> {
    use addr::*;
    (0..count)
        .map(|i| {
            let attacker = v4(ATTACK_NET, rng.below(256) as u8);
            let spoofed = std::net::Ipv4Addr::from(rng.next_u64() as u32);
            let victim = v4(SERVER_NET, 1 + rng.below(4) as u8);
            let frame = match i % 6 {
                0 | 1 => Frame::ipv4(spoofed, victim, tcp(rng, 80, tcp_flags::SYN, 0)),
                2 => Frame::ipv4(attacker, victim, udp(rng, 11211, 15)),
                3 => Frame::ipv4(attacker, victim, udp(rng, 123, 8)),
                4 => Frame::ipv4(
                    attacker,
                    victim,
                    Transport::Echo {
                        id: 1,
                        seq: i as u16,
                        payload: rng.bytes(1400),
                    },
                ),
                _ => Frame::ipv6(
                    v6(0x66, rng.below(0xffff) as u16),
                    v6(2, 1),
                    udp(rng, 53, 64),
                ),
            };
            frame.build()
        })
        .collect()
}

/// VLAN-tagged traffic: 802.1Q, 802.1ad and double-tagged (QinQ) frames over IPv4 and IPv6.
pub fn vlans(rng: &mut Rng, count: usize) -> Vec<Vec<u8>> {
    use addr::*;
    (0..count)
        .map(|i| {
            let tags: &[(u16, u16)] = match i % 4 {
                0 => &[(ETH_P_8021Q, 10)],
                1 => &[(ETH_P_8021AD, 20)],
                2 => &[(ETH_P_8021AD, 30), (ETH_P_8021Q, 31)],
                _ => &[(ETH_P_8021Q, 40), (ETH_P_8021Q, 41)],
            };
            let frame = if i % 2 == 0 {
                Frame::ipv4(v4(CLIENT_NET, 5), v4(SERVER_NET, 5), udp(rng, 53, 20))
            } else {
                Frame::ipv6(v6(1, 5), v6(2, 5), tcp(rng, 22, tcp_flags::ACK, 48))
            };
            frame.with_vlans(tags).build()
        })
        .collect()
}

/// IPv6 with extension headers: hop-by-hop, routing, destination options, fragments.
pub fn ipv6_extensions(rng: &mut Rng, count: usize) -> Vec<Vec<u8>> {
    use addr::*;
    let hop_by_hop = (0u8, vec![0, 1, 4, 0, 0, 0, 0]); // len 0 (8 bytes), PadN
    let dest_opts = (60u8, vec![0, 1, 4, 0, 0, 0, 0]);
    let routing = (43u8, {
        // Type 0, len 2 (24 bytes), no segments left, and the one listed address is the
        // destination itself: every reading of RFC 8200 takes the same address for the
        // pseudo-header then.
        let mut r = vec![2, 0, 0, 0, 0, 0, 0];
        r.extend_from_slice(&v6(2, 7).octets());
        r
    });
    (0..count)
        .map(|i| {
            let mut ip = Ipv6::new(v6(1, 7), v6(2, 7));
            ip.extensions = match i % 4 {
                0 => vec![hop_by_hop.clone()],
                1 => vec![hop_by_hop.clone(), dest_opts.clone()],
                2 => vec![routing.clone()],
                _ => vec![(44u8, vec![0, 0, 1, 0, 0, 0, i as u8])], // first fragment, M=1
            };
            Frame {
                dst_mac: MAC_B,
                src_mac: MAC_A,
                vlans: Vec::new(),
                network: Network::V6(ip),
                transport: Some(udp(rng, 53, 24)),
            }
            .build()
        })
        .collect()
}

/// Fragments: IPv4 first, middle and last fragments, and IPv4 with options.
pub fn fragments(rng: &mut Rng, count: usize) -> Vec<Vec<u8>> {
    use addr::*;
    (0..count)
        .map(|i| {
            let mut ip = Ipv4::new(v4(CLIENT_NET, 9), v4(SERVER_NET, 9));
            ip.id = i as u16;
            ip.dont_fragment = false;
            match i % 4 {
                0 => ip.more_fragments = true,
                1 => (ip.more_fragments, ip.frag_offset) = (true, 185),
                2 => ip.frag_offset = 370,
                _ => ip.options = vec![0x94, 0x04, 0x00, 0x00], // router alert
            }
            let transport = if ip.frag_offset == 0 {
                udp(rng, 5353, 64)
            } else {
                Transport::Raw {
                    proto: IPPROTO_UDP,
                    payload: rng.bytes(64),
                }
            };
            Frame {
                dst_mac: MAC_B,
                src_mac: MAC_A,
                vlans: Vec::new(),
                network: Network::V4(ip),
                transport: Some(transport),
            }
            .build()
        })
        .collect()
}

/// Malformed and truncated frames: headers cut short at every layer, bad IHL and lengths,
/// unknown ethertypes, runts of exactly 14 bytes, a VLAN tag with nothing behind it.
pub fn malformed(rng: &mut Rng) -> Vec<Vec<u8>> {
    use addr::*;
    let mut frames = Vec::new();
    let udp4 = Frame::ipv4(v4(CLIENT_NET, 3), v4(SERVER_NET, 3), udp(rng, 53, 16)).build();
    let tcp6 = Frame::ipv6(v6(1, 3), v6(2, 3), tcp(rng, 80, tcp_flags::SYN, 0)).build();
    // Cut at every interesting boundary: Ethernet only, mid IP, mid L4.
    for cut in [14, 15, 20, 33, 34, 36, 41] {
        frames.push(udp4[..cut].to_vec());
    }
    for cut in [14, 30, 53, 54, 60, 73] {
        frames.push(tcp6[..cut].to_vec());
    }
    // IHL below 5, IHL beyond the frame, total length beyond the frame, version 5.
    for (byte, value) in [(14, 0x44u8), (14, 0x4f), (16, 0xff), (14, 0x55)] {
        let mut f = udp4.clone();
        f[byte] = value;
        frames.push(f);
    }
    // An 802.1Q tag and nothing after it; a QinQ stack cut inside the inner tag.
    let tagged = Frame::ipv4(v4(CLIENT_NET, 4), v4(SERVER_NET, 4), udp(rng, 53, 8))
        .with_vlans(&[(ETH_P_8021AD, 1), (ETH_P_8021Q, 2)])
        .build();
    frames.push(tagged[..18].to_vec());
    frames.push(tagged[..20].to_vec());
    // Unknown ethertype, LLC length field, random garbage.
    frames.push(
        Frame {
            dst_mac: MAC_B,
            src_mac: MAC_A,
            vlans: Vec::new(),
            network: Network::Raw {
                ethertype: 0x88b5,
                payload: rng.bytes(46),
            },
            transport: None,
        }
        .build(),
    );
    frames.push(
        Frame {
            dst_mac: MAC_B,
            src_mac: MAC_A,
            vlans: Vec::new(),
            network: Network::Raw {
                ethertype: 0x002e,
                payload: rng.bytes(46),
            },
            transport: None,
        }
        .build(),
    );
    for len in [14, 60, 200] {
        frames.push(rng.bytes(len));
    }
    frames
}

/// Connections: multi-packet flows, interleaved, for stateful programs (load balancers,
/// session tables, ACLs keyed by the 5-tuple). Source ports are fixed so that configuration
/// (`examples/maps/`) can name single flows:
/// - TCP to 192.0.2.1:80 from 198.51.100.10..=21, source port 40000 + n: SYN, ACK, PSH|ACK
///   with 300 bytes, FIN|ACK;
/// - UDP to 192.0.2.2:53 from 198.51.100.30..=35, source port 50000 + n, three queries each
///   (the flow from .35 with a zero UDP checksum, "no checksum" over IPv4);
/// - UDP to 192.0.2.2:50000 + n from 198.51.100.40..=43, source port 33000 + n, three each;
/// - UDP to 192.0.2.3:443 from 198.51.100.45..=47, source port 44300 + n, two each;
/// - TCP to 192.0.2.9:22 from 198.51.100.48..=49 (two each), ICMP echo from 198.51.100.50
///   to 192.0.2.1 (two), IPv6 TCP 2001:db8:1::60 -> 2001:db8:2::1 port 80 (three).
pub fn flows(rng: &mut Rng) -> Vec<Vec<u8>> {
    use addr::*;
    let mut flows: Vec<Vec<Vec<u8>>> = Vec::new();
    let tcp_conn = |rng: &mut Rng, src: Ipv4Addr, dst: Ipv4Addr, sport: u16, dport: u16| {
        let seq = rng.next_u64() as u32;
        let steps: [(u8, usize); 4] = [
            (tcp_flags::SYN, 0),
            (tcp_flags::ACK, 0),
            (tcp_flags::PSH | tcp_flags::ACK, 300),
            (tcp_flags::FIN | tcp_flags::ACK, 0),
        ];
        steps
            .iter()
            .map(|&(flags, len)| {
                let t = Transport::Tcp {
                    sport,
                    dport,
                    flags,
                    seq,
                    payload: rng.bytes(len),
                };
                Frame::ipv4(src, dst, t).build()
            })
            .collect::<Vec<_>>()
    };
    let udp_flow = |rng: &mut Rng, src: Ipv4Addr, dst: Ipv4Addr, sport: u16, dport: u16, n| {
        (0..n)
            .map(|_| {
                let t = Transport::Udp {
                    sport,
                    dport,
                    payload: rng.bytes(40),
                };
                Frame::ipv4(src, dst, t).build()
            })
            .collect::<Vec<_>>()
    };
    for n in 0..12u8 {
        let src = v4(CLIENT_NET, 10 + n);
        flows.push(tcp_conn(
            rng,
            src,
            v4(SERVER_NET, 1),
            40000 + u16::from(n),
            80,
        ));
    }
    for n in 0..6u8 {
        let src = v4(CLIENT_NET, 30 + n);
        let mut f = udp_flow(rng, src, v4(SERVER_NET, 2), 50000 + u16::from(n), 53, 3);
        if n == 5 {
            for frame in &mut f {
                frame[40..42].copy_from_slice(&[0, 0]);
            }
        }
        flows.push(f);
    }
    for n in 0..4u8 {
        let src = v4(CLIENT_NET, 40 + n);
        let port = u16::from(n);
        flows.push(udp_flow(
            rng,
            src,
            v4(SERVER_NET, 2),
            33000 + port,
            50000 + port,
            3,
        ));
    }
    for n in 0..3u8 {
        let src = v4(CLIENT_NET, 45 + n);
        flows.push(udp_flow(
            rng,
            src,
            v4(SERVER_NET, 3),
            44300 + u16::from(n),
            443,
            2,
        ));
    }
    for n in 0..2u8 {
        let mut conn = tcp_conn(rng, v4(CLIENT_NET, 48 + n), v4(SERVER_NET, 9), 41000, 22);
        conn.truncate(2);
        flows.push(conn);
    }
    let echo = (0..2u16)
        .map(|seq| {
            let t = Transport::Echo {
                id: 11,
                seq,
                payload: rng.bytes(32),
            };
            Frame::ipv4(v4(CLIENT_NET, 50), v4(SERVER_NET, 1), t).build()
        })
        .collect();
    flows.push(echo);
    let v6_conn = (0..3u32)
        .map(|i| {
            let t = Transport::Tcp {
                sport: 42000,
                dport: 80,
                flags: if i == 0 {
                    tcp_flags::SYN
                } else {
                    tcp_flags::ACK
                },
                seq: i,
                payload: Vec::new(),
            };
            Frame::ipv6(v6(1, 0x60), v6(2, 1), t).build()
        })
        .collect();
    flows.push(v6_conn);
    // Round robin over the flows: each flow's packets stay in order, flows interleave.
    let longest = flows.iter().map(Vec::len).max().unwrap_or(0);
    (0..longest)
        .flat_map(|i| flows.iter().filter_map(move |f| f.get(i).cloned()))
        .collect()
}

/// The bundled captures: file name and frames.
pub fn bundled() -> Vec<(&'static str, Vec<Vec<u8>>)> {
    let mut rng = Rng::new(0x6270_6665_6d75); // "bpfemu"
    let mut out = vec![
        ("normal.pcap", normal(&mut rng, 200)),
        ("attack.pcap", attack(&mut rng, 200)),
        ("vlan.pcap", vlans(&mut rng, 40)),
        ("ipv6_ext.pcap", ipv6_extensions(&mut rng, 24)),
        ("fragments.pcap", fragments(&mut rng, 24)),
        ("malformed.pcap", malformed(&mut rng)),
    ];
    // Added later, with its own generator so the captures above stay byte-identical.
    let mut rng = Rng::new(0x0066_6c6f_7773); // "flows"
    out.push(("flows.pcap", flows(&mut rng)));
    out
}

/// Base timestamp of the bundled captures (2026-01-01T00:00:00Z), one packet every 10 µs.
pub const BUNDLED_EPOCH_NS: u64 = 1_767_225_600_000_000_000;
pub const BUNDLED_GAP_NS: u64 = 10_000;

/// Writes the bundled captures into `dir` (nanosecond pcap).
pub fn write_bundled(dir: &Path) -> io::Result<()> {
    std::fs::create_dir_all(dir)?;
    for (name, frames) in bundled() {
        let mut w = PcapWriter::create(&dir.join(name), true)?;
        for (i, frame) in frames.iter().enumerate() {
            w.write(BUNDLED_EPOCH_NS + i as u64 * BUNDLED_GAP_NS, frame)?;
        }
        w.finish()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipv4_header_checksum_verifies() {
        let f = Frame::ipv4(
            addr::v4(addr::CLIENT_NET, 1),
            addr::v4(addr::SERVER_NET, 1),
            Transport::Udp {
                sport: 1,
                dport: 2,
                payload: vec![1, 2, 3],
            },
        )
        .build();
        assert_eq!(checksum(&f[14..34], 0), 0, "IPv4 header sums to 0xffff");
        let udp = &f[34..];
        let sum = pseudo_sum(&f[26..30], &f[30..34], IPPROTO_UDP, udp.len());
        assert_eq!(checksum(udp, sum), 0, "UDP checksum verifies");
    }

    #[test]
    fn ipv6_tcp_checksum_verifies() {
        let f = Frame::ipv6(
            addr::v6(1, 1),
            addr::v6(2, 2),
            Transport::Tcp {
                sport: 5,
                dport: 6,
                flags: tcp_flags::SYN,
                seq: 7,
                payload: vec![9; 5],
            },
        )
        .build();
        let seg = &f[54..];
        assert_eq!(seg.len(), 25);
        let sum = pseudo_sum(&f[22..38], &f[38..54], IPPROTO_TCP, seg.len());
        assert_eq!(checksum(seg, sum), 0);
    }

    #[test]
    fn generation_is_deterministic() {
        assert_eq!(bundled()[0].1, bundled()[0].1);
        let mut a = Rng::new(1);
        let mut b = Rng::new(2);
        assert_ne!(a.next_u64(), b.next_u64());
    }

    #[test]
    fn every_bundled_frame_is_at_least_an_ethernet_header() {
        for (name, frames) in bundled() {
            assert!(!frames.is_empty(), "{name}");
            assert!(frames.iter().all(|f| f.len() >= 14), "{name}");
        }
    }
}
