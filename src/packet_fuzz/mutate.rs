//! A structure-aware packet mutator: it knows where Ethernet, VLAN tags, IPv4, IPv6 and its
//! extension headers, TCP, UDP and ICMP put their fields, so that it changes what parsers
//! branch on (EtherTypes, protocol numbers, lengths, flags, header chains) rather than only
//! random bytes, and it can repair lengths and checksums so that the mutated packet gets past
//! a program's sanity checks to the code behind them.

use crate::traffic::{Rng, checksum};

/// The kernel's BPF_PROG_TEST_RUN takes nothing shorter than an Ethernet header.
pub const MIN_LEN: usize = 14;
/// Mutants stay within the linear part of a test-run frame (no fragments).
pub const MAX_LEN: usize = 3520;

use crate::layers::proto::{
    ETH_P_8021AD, ETH_P_8021Q, ETH_P_ARP, ETH_P_IP, ETH_P_IPV6, IPPROTO_DSTOPTS, IPPROTO_FRAGMENT,
    IPPROTO_GRE, IPPROTO_HOPOPTS, IPPROTO_ICMP, IPPROTO_ICMPV6, IPPROTO_NONE, IPPROTO_ROUTING,
    IPPROTO_TCP, IPPROTO_UDP,
};

/// Where a packet's layers start, as far as its bytes go.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Layers {
    /// Offset of the EtherType that names the network layer (after any VLAN tags).
    pub ethertype_at: usize,
    pub network: Option<Network>,
    /// The transport protocol and where its header starts.
    pub transport: Option<(u8, usize)>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Network {
    Ipv4 {
        at: usize,
        header_len: usize,
    },
    /// `next_header_at`: the byte naming the header after the last one parsed.
    Ipv6 {
        at: usize,
        next_header_at: usize,
    },
}

fn be16(p: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*p.get(at)?, *p.get(at + 1)?]))
}

/// Finds the layers of an Ethernet frame.
pub fn parse(p: &[u8]) -> Layers {
    let mut layers = Layers {
        ethertype_at: 12,
        ..Layers::default()
    };
    let mut ethertype = be16(p, 12);
    while matches!(ethertype, Some(ETH_P_8021Q | ETH_P_8021AD)) {
        layers.ethertype_at += 4;
        ethertype = be16(p, layers.ethertype_at);
    }
    let l3 = layers.ethertype_at + 2;
    match ethertype {
        Some(ETH_P_IP) if p.len() >= l3 + 20 => {
            let header_len = usize::from(p[l3] & 0xf) * 4;
            layers.network = Some(Network::Ipv4 { at: l3, header_len });
            layers.transport = Some((p[l3 + 9], l3 + header_len.max(20)));
        }
        Some(ETH_P_IPV6) if p.len() >= l3 + 40 => {
            let mut next_header_at = l3 + 6;
            let mut at = l3 + 40;
            // Up to 8 extension headers, as far as the bytes go.
            for _ in 0..8 {
                let next = p[next_header_at];
                let len = match next {
                    IPPROTO_HOPOPTS | IPPROTO_ROUTING | IPPROTO_DSTOPTS => match p.get(at + 1) {
                        Some(&l) => (usize::from(l) + 1) * 8,
                        None => break,
                    },
                    IPPROTO_FRAGMENT => 8,
                    _ => break,
                };
                if p.len() < at + len {
                    break;
                }
                next_header_at = at;
                at += len;
            }
            layers.network = Some(Network::Ipv6 {
                at: l3,
                next_header_at,
            });
            layers.transport = Some((p[next_header_at], at));
        }
        _ => {}
    }
    layers
}

/// The mutator: deterministic for a seed.
pub struct Mutator {
    rng: Rng,
}

const INTERESTING_8: [u8; 9] = [0, 1, 2, 0x0f, 0x10, 0x7f, 0x80, 0xfe, 0xff];
const INTERESTING_16: [u16; 9] = [0, 1, 14, 20, 40, 0x7fff, 0x8000, 0xfffe, 0xffff];

impl Mutator {
    pub fn new(seed: u64) -> Mutator {
        Mutator {
            rng: Rng::new(seed),
        }
    }

    pub fn rng(&mut self) -> &mut Rng {
        &mut self.rng
    }

    fn pick<T: Copy>(&mut self, from: &[T]) -> T {
        from[self.rng.below(from.len() as u64) as usize]
    }

    fn chance(&mut self, one_in: u64) -> bool {
        self.rng.below(one_in) == 0
    }

    /// A mutant of `packet`: one to four mutations, then (usually) lengths and checksums made
    /// consistent again; `other` is another corpus entry to splice from. Always between
    /// [`MIN_LEN`] and [`MAX_LEN`] bytes.
    pub fn mutate(&mut self, packet: &[u8], other: &[u8]) -> Vec<u8> {
        let mut p = packet.to_vec();
        let rounds = 1 + self.rng.below(4);
        for _ in 0..rounds {
            self.mutate_once(&mut p, other);
        }
        if !self.chance(4) {
            fix_lengths_and_checksums(&mut p);
        }
        p.resize(p.len().clamp(MIN_LEN, MAX_LEN), 0);
        p
    }

    fn mutate_once(&mut self, p: &mut Vec<u8>, other: &[u8]) {
        let layers = parse(p);
        match self.rng.below(12) {
            0 => self.flip_bit(p),
            1 => self.set_interesting(p),
            2 => self.set_ethertype(p, layers),
            3 | 4 => self.mutate_network(p, layers),
            5 => self.mutate_transport(p, layers),
            6 => self.insert_ipv6_extension(p, layers),
            7 => self.toggle_vlan(p, layers),
            8 => self.resize(p),
            9 => self.splice(p, other),
            10 => self.random_bytes(p),
            _ => self.flip_bit_in_headers(p, layers),
        }
    }

    fn flip_bit(&mut self, p: &mut [u8]) {
        if p.is_empty() {
            return;
        }
        let at = self.rng.below(p.len() as u64) as usize;
        p[at] ^= 1 << self.rng.below(8);
    }

    fn flip_bit_in_headers(&mut self, p: &mut [u8], layers: Layers) {
        let end = layers
            .transport
            .map_or(p.len(), |(_, at)| at + 20)
            .min(p.len());
        if end == 0 {
            return;
        }
        let at = self.rng.below(end as u64) as usize;
        p[at] ^= 1 << self.rng.below(8);
    }

    fn set_interesting(&mut self, p: &mut [u8]) {
        if p.len() < 2 {
            return;
        }
        let at = self.rng.below(p.len() as u64 - 1) as usize;
        if self.chance(2) {
            p[at] = self.pick(&INTERESTING_8);
        } else {
            let v = self.pick(&INTERESTING_16);
            p[at..at + 2].copy_from_slice(&v.to_be_bytes());
        }
    }

    fn set_ethertype(&mut self, p: &mut [u8], layers: Layers) {
        let at = layers.ethertype_at;
        if p.len() < at + 2 {
            return;
        }
        let mut v = self.pick(&[
            ETH_P_IP,
            ETH_P_IPV6,
            ETH_P_8021Q,
            ETH_P_8021AD,
            ETH_P_ARP,
            0,
        ]);
        if v == 0 {
            v = self.rng.next_u64() as u16;
        }
        p[at..at + 2].copy_from_slice(&v.to_be_bytes());
    }

    fn protocol(&mut self) -> u8 {
        let chosen = self.pick(&[
            IPPROTO_TCP,
            IPPROTO_UDP,
            IPPROTO_ICMP,
            IPPROTO_ICMPV6,
            IPPROTO_GRE,
            IPPROTO_HOPOPTS,
            IPPROTO_ROUTING,
            IPPROTO_FRAGMENT,
            IPPROTO_DSTOPTS,
            IPPROTO_NONE,
            0xff,
        ]);
        if chosen == 0xff {
            self.rng.next_u64() as u8
        } else {
            chosen
        }
    }

    fn mutate_network(&mut self, p: &mut [u8], layers: Layers) {
        match layers.network {
            Some(Network::Ipv4 { at, .. }) => match self.rng.below(6) {
                // version and IHL
                0 => p[at] = (self.pick(&[4u8, 6, 0, 15]) << 4) | self.pick(&[5u8, 0, 4, 6, 15]),
                // total length
                1 => {
                    let v = self.pick(&INTERESTING_16);
                    p[at + 2..at + 4].copy_from_slice(&v.to_be_bytes());
                }
                // flags and fragment offset: MF, DF, an offset
                2 => {
                    let v = self.pick(&[0x2000u16, 0x4000, 0x0001, 0x2001, 0x1fff, 0]);
                    p[at + 6..at + 8].copy_from_slice(&v.to_be_bytes());
                }
                3 => p[at + 8] = self.pick(&[0u8, 1, 2, 64, 255]),
                4 => p[at + 9] = self.protocol(),
                _ => {
                    let addr = self.rng.next_u64() as u32;
                    let off = at + self.pick(&[12usize, 16]);
                    p[off..off + 4].copy_from_slice(&addr.to_be_bytes());
                }
            },
            Some(Network::Ipv6 { at, next_header_at }) => match self.rng.below(4) {
                0 => p[next_header_at] = self.protocol(),
                1 => {
                    let v = self.pick(&INTERESTING_16);
                    p[at + 4..at + 6].copy_from_slice(&v.to_be_bytes());
                }
                2 => p[at + 7] = self.pick(&[0u8, 1, 2, 64, 255]),
                _ => p[at] = (self.pick(&[6u8, 4, 0, 15]) << 4) | (p[at] & 0xf),
            },
            None => self.set_ethertype(p, layers),
        }
    }

    fn mutate_transport(&mut self, p: &mut [u8], layers: Layers) {
        let Some((proto, at)) = layers.transport else {
            return self.mutate_network(p, layers);
        };
        let field16 = |p: &mut [u8], off: usize, v: u16| {
            if p.len() >= at + off + 2 {
                p[at + off..at + off + 2].copy_from_slice(&v.to_be_bytes());
            }
        };
        match proto {
            IPPROTO_TCP | IPPROTO_UDP => match self.rng.below(4) {
                0 | 1 => {
                    let port = self.pick(&[0u16, 22, 53, 80, 443, 4789, 8080, 0xffff]);
                    let port = if self.chance(3) {
                        self.rng.next_u64() as u16
                    } else {
                        port
                    };
                    field16(p, self.pick(&[0usize, 2]), port);
                }
                2 if proto == IPPROTO_TCP => {
                    if p.len() > at + 13 {
                        p[at + 13] = self.pick(&[0x02u8, 0x12, 0x10, 0x01, 0x04, 0x29, 0xff, 0]);
                    }
                }
                2 => field16(p, 4, self.pick(&INTERESTING_16)),
                _ if proto == IPPROTO_TCP => {
                    if p.len() > at + 12 {
                        p[at + 12] = self.pick(&[5u8, 0, 4, 6, 15]) << 4;
                    }
                }
                _ => field16(p, 6, self.pick(&INTERESTING_16)),
            },
            _ => {
                // ICMP and the rest: type and code.
                if p.len() > at + 1 {
                    p[at] = self.pick(&[0u8, 3, 8, 11, 128, 129, 133, 135, 255]);
                    p[at + 1] = self.pick(&[0u8, 1, 4]);
                }
            }
        }
    }

    /// Inserts an 8-byte extension header (hop-by-hop, routing, destination options or
    /// fragment) right after the IPv6 header, chaining it in.
    fn insert_ipv6_extension(&mut self, p: &mut Vec<u8>, layers: Layers) {
        let Some(Network::Ipv6 { at, .. }) = layers.network else {
            return self.mutate_network(p, layers);
        };
        let kind = self.pick(&[
            IPPROTO_HOPOPTS,
            IPPROTO_ROUTING,
            IPPROTO_DSTOPTS,
            IPPROTO_FRAGMENT,
        ]);
        let mut header = [0u8; 8];
        header[0] = p[at + 6];
        if kind != IPPROTO_FRAGMENT {
            // PadN filling the rest: a well-formed options header.
            header[2] = 1;
            header[3] = 4;
        }
        p[at + 6] = kind;
        p.splice(at + 40..at + 40, header);
    }

    fn toggle_vlan(&mut self, p: &mut Vec<u8>, layers: Layers) {
        if layers.ethertype_at > 12 && p.len() >= 16 && self.chance(2) {
            p.drain(12..16);
        } else if p.len() >= 14 {
            let tpid = self.pick(&[ETH_P_8021Q, ETH_P_8021AD]);
            let tci = self.rng.next_u64() as u16 & 0x0fff;
            let mut tag = [0u8; 4];
            tag[..2].copy_from_slice(&tpid.to_be_bytes());
            tag[2..].copy_from_slice(&tci.to_be_bytes());
            p.splice(12..12, tag);
        }
    }

    fn resize(&mut self, p: &mut Vec<u8>) {
        if self.chance(2) && p.len() > MIN_LEN {
            let keep = MIN_LEN + self.rng.below((p.len() - MIN_LEN) as u64) as usize;
            p.truncate(keep);
        } else {
            let grow = 1 + self.rng.below(64) as usize;
            let extra = self.rng.bytes(grow);
            p.extend_from_slice(&extra);
        }
    }

    fn splice(&mut self, p: &mut Vec<u8>, other: &[u8]) {
        if other.is_empty() || p.is_empty() {
            return;
        }
        let cut = self.rng.below(p.len() as u64) as usize;
        let from = self.rng.below(other.len() as u64) as usize;
        p.truncate(cut);
        p.extend_from_slice(&other[from..]);
    }

    fn random_bytes(&mut self, p: &mut [u8]) {
        if p.is_empty() {
            return;
        }
        let at = self.rng.below(p.len() as u64) as usize;
        let len = (1 + self.rng.below(8) as usize).min(p.len() - at);
        let bytes = self.rng.bytes(len);
        p[at..at + len].copy_from_slice(&bytes);
    }
}

/// Makes the IP length fields, the IPv4 header checksum and the TCP/UDP/ICMP checksums agree
/// with the bytes, where the headers are whole.
pub fn fix_lengths_and_checksums(p: &mut [u8]) {
    let layers = parse(p);
    let (pseudo, l4_len) = match layers.network {
        Some(Network::Ipv4 { at, header_len })
            if header_len >= 20 && p.len() >= at + header_len =>
        {
            let total = (p.len() - at).min(0xffff) as u16;
            p[at + 2..at + 4].copy_from_slice(&total.to_be_bytes());
            p[at + 10..at + 12].fill(0);
            let sum = checksum(&p[at..at + header_len], 0);
            p[at + 10..at + 12].copy_from_slice(&sum.to_be_bytes());
            (Some((at + 12, 4)), p.len() - at - header_len)
        }
        Some(Network::Ipv6 { at, .. }) => {
            let payload = (p.len() - at - 40).min(0xffff) as u16;
            p[at + 4..at + 6].copy_from_slice(&payload.to_be_bytes());
            (Some((at + 8, 16)), 0)
        }
        _ => (None, 0),
    };
    let (Some((addrs_at, addr_len)), Some((proto, l4))) = (pseudo, layers.transport) else {
        return;
    };
    let l4_len = if addr_len == 16 { p.len() - l4 } else { l4_len };
    let csum_off = match proto {
        IPPROTO_TCP if l4_len >= 20 => 16,
        IPPROTO_UDP if l4_len >= 8 => {
            p[l4 + 4..l4 + 6].copy_from_slice(&(l4_len.min(0xffff) as u16).to_be_bytes());
            6
        }
        IPPROTO_ICMP if l4_len >= 8 => 2,
        IPPROTO_ICMPV6 if l4_len >= 8 => 2,
        _ => return,
    };
    p[l4 + csum_off..l4 + csum_off + 2].fill(0);
    let initial = if proto == IPPROTO_ICMP {
        0
    } else {
        let addrs = &p[addrs_at..addrs_at + 2 * addr_len];
        let mut sum = 0u32;
        for pair in addrs.chunks(2) {
            sum += u32::from(u16::from_be_bytes([pair[0], pair[1]]));
        }
        sum + u32::from(proto) + l4_len as u32
    };
    let mut sum = checksum(&p[l4..], initial);
    if proto == IPPROTO_UDP && sum == 0 {
        sum = 0xffff;
    }
    p[l4 + csum_off..l4 + csum_off + 2].copy_from_slice(&sum.to_be_bytes());
}

/// Whether an IPv4 packet's header checksum is wrong (false when there is no whole IPv4
/// header).
pub fn bad_ipv4_checksum(p: &[u8]) -> bool {
    match parse(p).network {
        Some(Network::Ipv4 { at, header_len })
            if header_len >= 20 && p.len() >= at + header_len =>
        {
            checksum(&p[at..at + header_len], 0) != 0
        }
        _ => false,
    }
}

/// Whether a TCP or UDP checksum (over IPv4 or IPv6) is wrong; UDP over IPv4 with checksum 0
/// means "none" and is not wrong. False when the headers are not whole.
pub fn bad_l4_checksum(p: &[u8]) -> bool {
    let mut fixed = p.to_vec();
    let layers = parse(p);
    let Some((proto, l4)) = layers.transport else {
        return false;
    };
    if !matches!(proto, IPPROTO_TCP | IPPROTO_UDP) {
        return false;
    }
    let csum_off = if proto == IPPROTO_TCP { 16 } else { 6 };
    if p.len() < l4 + csum_off + 2 {
        return false;
    }
    let v4 = matches!(layers.network, Some(Network::Ipv4 { .. }));
    if proto == IPPROTO_UDP && v4 && p[l4 + 6..l4 + 8] == [0, 0] {
        return false;
    }
    fix_lengths_and_checksums(&mut fixed);
    fixed[l4 + csum_off..l4 + csum_off + 2] != p[l4 + csum_off..l4 + csum_off + 2]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::traffic::{Frame, Transport, addr};

    fn udp_v6() -> Vec<u8> {
        Frame::ipv6(
            addr::v6(1, 1),
            addr::v6(2, 2),
            Transport::Udp {
                sport: 1000,
                dport: 53,
                payload: vec![7; 12],
            },
        )
        .build()
    }

    #[test]
    fn parses_ipv6_extension_chains() {
        let mut p = udp_v6();
        let before = parse(&p);
        assert_eq!(before.transport, Some((IPPROTO_UDP, 14 + 40)));
        let mut m = Mutator::new(1);
        // Insert until a hop-by-hop header shows up first in the chain.
        for _ in 0..100 {
            let layers = parse(&p);
            m.insert_ipv6_extension(&mut p, layers);
            if p[14 + 6] == IPPROTO_HOPOPTS {
                break;
            }
        }
        assert_eq!(p[14 + 6], IPPROTO_HOPOPTS);
        let after = parse(&p);
        assert_eq!(after.transport.map(|t| t.0), Some(IPPROTO_UDP));
        assert!(after.transport.unwrap().1 > 14 + 40);
    }

    #[test]
    fn repaired_packets_have_good_checksums() {
        let mut p = udp_v6();
        assert!(!bad_l4_checksum(&p));
        p[60] ^= 0xff; // a payload byte
        assert!(bad_l4_checksum(&p));
        fix_lengths_and_checksums(&mut p);
        assert!(!bad_l4_checksum(&p));

        let mut v4 = Frame::ipv4(
            addr::v4([192, 0, 2], 1),
            addr::v4([198, 51, 100], 2),
            Transport::Tcp {
                sport: 1,
                dport: 80,
                seq: 5,
                flags: 0x02,
                payload: vec![1, 2, 3],
            },
        )
        .build();
        assert!(!bad_ipv4_checksum(&v4) && !bad_l4_checksum(&v4));
        v4[14 + 8] = 1; // TTL
        assert!(bad_ipv4_checksum(&v4));
        fix_lengths_and_checksums(&mut v4);
        assert!(!bad_ipv4_checksum(&v4) && !bad_l4_checksum(&v4));
    }

    #[test]
    fn mutants_are_deterministic_and_within_limits() {
        let seed = udp_v6();
        let run = |s| {
            let mut m = Mutator::new(s);
            (0..500).map(|_| m.mutate(&seed, &seed)).collect::<Vec<_>>()
        };
        let a = run(7);
        assert_eq!(a, run(7));
        assert_ne!(a, run(8));
        assert!(a.iter().all(|p| (MIN_LEN..=MAX_LEN).contains(&p.len())));
        // The mutator reaches the field values parsers branch on.
        assert!(a.iter().any(|p| parse(p).network.is_none()));
        assert!(
            a.iter()
                .any(|p| p.len() > 14 + 6 && p[12..14] == [0x86, 0xdd] && p[20] == 0)
        );
    }

    #[test]
    fn never_panics_on_any_shape() {
        let mut rng = Rng::new(3);
        let mut shapes = vec![vec![0u8; 14], vec![0x81; 14], udp_v6()];
        for _ in 0..64 {
            let len = 14 + rng.below(120) as usize;
            let mut p = rng.bytes(len);
            p[12..14].copy_from_slice(
                &[[0x08, 0x00], [0x86, 0xdd], [0x81, 0x00]][rng.below(3) as usize],
            );
            shapes.push(p);
        }
        for seed in 0..40 {
            let mut m = Mutator::new(seed);
            for (i, shape) in shapes.iter().enumerate() {
                let mut p = shape.clone();
                for _ in 0..20 {
                    p = m.mutate(&p, &shapes[(i + 1) % shapes.len()]);
                    assert!((MIN_LEN..=MAX_LEN).contains(&p.len()));
                    let _ = (bad_ipv4_checksum(&p), bad_l4_checksum(&p));
                }
            }
        }
    }
}
