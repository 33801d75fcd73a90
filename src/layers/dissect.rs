//! A frame read into layers: Ethernet, 802.1Q/802.1ad tags, ARP, IPv4, IPv6 and its extension
//! headers, TCP, UDP, ICMP, ICMPv6, and what follows as `payload`. What cannot be read (a
//! header cut short, an unknown protocol) ends the walk: the rest is payload.

use super::{Field, Layer, mac_text};
use std::net::{Ipv4Addr, Ipv6Addr};

pub use super::proto::{
    ETH_P_8021AD, ETH_P_8021Q, ETH_P_ARP, ETH_P_IP, ETH_P_IPV6, IPPROTO_ICMP, IPPROTO_ICMPV6,
    IPPROTO_TCP, IPPROTO_UDP, NEXTHDR_DEST, NEXTHDR_FRAGMENT, NEXTHDR_HOP, NEXTHDR_ROUTING,
};

/// The layers of `frame`, outermost first. A frame too short for Ethernet is all payload.
pub fn dissect(frame: &[u8]) -> Vec<Layer> {
    let mut walk = Walk {
        bytes: frame,
        at: 0,
        layers: Vec::new(),
    };
    walk.ethernet();
    if walk.at < frame.len() {
        let rest = &frame[walk.at..];
        walk.layers.push(Layer {
            name: "payload".into(),
            fields: vec![
                ("len", Field::Num(rest.len() as u64)),
                ("data", Field::Text(crate::replay::hex(rest))),
            ],
        });
    }
    walk.layers
}

/// The value of `layer.field` in `layers` (`vlan2` is the second tag).
pub fn lookup<'a>(layers: &'a [Layer], layer: &str, field: &str) -> Option<&'a Field> {
    layers.iter().find(|l| l.name == layer)?.get(field)
}

struct Walk<'a> {
    bytes: &'a [u8],
    at: usize,
    layers: Vec<Layer>,
}

fn be16(b: &[u8]) -> u64 {
    u64::from(u16::from_be_bytes([b[0], b[1]]))
}

fn be32(b: &[u8]) -> u64 {
    u64::from(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

impl<'a> Walk<'a> {
    /// The next `n` bytes, or `None` (nothing consumed) when the frame is shorter.
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let out = self.bytes.get(self.at..self.at + n)?;
        self.at += n;
        Some(out)
    }

    fn push(&mut self, name: &str, fields: Vec<(&'static str, Field)>) {
        self.layers.push(Layer {
            name: name.into(),
            fields,
        });
    }

    fn ethernet(&mut self) {
        let Some(h) = self.take(14) else { return };
        let mut ethertype = be16(&h[12..]) as u16;
        self.push(
            "eth",
            vec![
                ("dst", Field::Text(mac_text(&h[0..6]))),
                ("src", Field::Text(mac_text(&h[6..12]))),
                ("type", Field::Hex(u64::from(ethertype), 4)),
            ],
        );
        let mut tags = 0;
        while matches!(ethertype, ETH_P_8021Q | ETH_P_8021AD) && tags < 2 {
            let Some(t) = self.take(4) else { return };
            let tci = be16(t);
            ethertype = be16(&t[2..]) as u16;
            tags += 1;
            let name = if tags == 1 { "vlan" } else { "vlan2" };
            self.push(
                name,
                vec![
                    ("pcp", Field::Num(tci >> 13)),
                    ("dei", Field::Num((tci >> 12) & 1)),
                    ("vid", Field::Num(tci & 0xfff)),
                    ("type", Field::Hex(u64::from(ethertype), 4)),
                ],
            );
        }
        match ethertype {
            ETH_P_IP => self.ipv4(),
            ETH_P_IPV6 => self.ipv6(),
            ETH_P_ARP => self.arp(),
            _ => {}
        }
    }

    fn arp(&mut self) {
        let Some(a) = self.take(28) else { return };
        self.push(
            "arp",
            vec![
                ("op", Field::Num(be16(&a[6..]))),
                ("sha", Field::Text(mac_text(&a[8..14]))),
                ("spa", Field::Text(ip4(&a[14..18]))),
                ("tha", Field::Text(mac_text(&a[18..24]))),
                ("tpa", Field::Text(ip4(&a[24..28]))),
            ],
        );
    }

    fn ipv4(&mut self) {
        let start = self.at;
        let Some(h) = self.bytes.get(start..start + 20) else {
            return;
        };
        let ihl = usize::from(h[0] & 0xf) * 4;
        if ihl < 20 || self.bytes.len() < start + ihl {
            return;
        }
        self.at = start + ihl;
        let flags_frag = be16(&h[6..]);
        let mut fields = vec![
            ("version", Field::Num(u64::from(h[0] >> 4))),
            ("ihl", Field::Num(u64::from(h[0] & 0xf))),
            ("tos", Field::Hex(u64::from(h[1]), 2)),
            ("len", Field::Num(be16(&h[2..]))),
            ("id", Field::Num(be16(&h[4..]))),
            ("df", Field::Num((flags_frag >> 14) & 1)),
            ("mf", Field::Num((flags_frag >> 13) & 1)),
            ("frag_offset", Field::Num(flags_frag & 0x1fff)),
            ("ttl", Field::Num(u64::from(h[8]))),
            ("proto", Field::Num(u64::from(h[9]))),
            ("checksum", Field::Hex(be16(&h[10..]), 4)),
            ("src", Field::Text(ip4(&h[12..16]))),
            ("dst", Field::Text(ip4(&h[16..20]))),
        ];
        if ihl > 20 {
            let options = &self.bytes[start + 20..start + ihl];
            fields.push(("options", Field::Text(crate::replay::hex(options))));
        }
        self.push("ipv4", fields);
        // A later fragment has no transport header.
        if flags_frag & 0x1fff == 0 {
            self.transport(h[9], false);
        }
    }

    fn ipv6(&mut self) {
        let Some(h) = self.take(40) else { return };
        let word = be32(h);
        self.push(
            "ipv6",
            vec![
                ("version", Field::Num(word >> 28)),
                ("tc", Field::Hex((word >> 20) & 0xff, 2)),
                ("flow", Field::Hex(word & 0xf_ffff, 5)),
                ("plen", Field::Num(be16(&h[4..]))),
                ("next", Field::Num(u64::from(h[6]))),
                ("hlim", Field::Num(u64::from(h[7]))),
                ("src", Field::Text(ip6(&h[8..24]))),
                ("dst", Field::Text(ip6(&h[24..40]))),
            ],
        );
        let mut next = h[6];
        loop {
            next = match next {
                NEXTHDR_HOP | NEXTHDR_DEST | NEXTHDR_ROUTING => match self.extension(next) {
                    Some(n) => n,
                    None => return,
                },
                NEXTHDR_FRAGMENT => {
                    let Some(f) = self.take(8) else { return };
                    let off = be16(&f[2..]);
                    self.push(
                        "fragment",
                        vec![
                            ("next", Field::Num(u64::from(f[0]))),
                            ("offset", Field::Num(off >> 3)),
                            ("more", Field::Num(off & 1)),
                            ("id", Field::Hex(be32(&f[4..]), 8)),
                        ],
                    );
                    if off >> 3 != 0 {
                        return;
                    }
                    f[0]
                }
                other => return self.transport(other, true),
            };
        }
    }

    /// A hop-by-hop, routing or destination options header; its next header.
    fn extension(&mut self, kind: u8) -> Option<u8> {
        let head = self.bytes.get(self.at..self.at + 2)?;
        let len = (usize::from(head[1]) + 1) * 8;
        let e = self.take(len)?;
        let mut fields = vec![
            ("next", Field::Num(u64::from(e[0]))),
            ("len", Field::Num(u64::from(e[1]))),
        ];
        let name = match kind {
            NEXTHDR_HOP => "hop",
            NEXTHDR_DEST => "dstopts",
            _ => {
                fields.push(("type", Field::Num(u64::from(e[2]))));
                fields.push(("segments_left", Field::Num(u64::from(e[3]))));
                "routing"
            }
        };
        let data_from = if kind == NEXTHDR_ROUTING { 4 } else { 2 };
        fields.push(("data", Field::Text(crate::replay::hex(&e[data_from..]))));
        self.push(name, fields);
        Some(e[0])
    }

    fn transport(&mut self, proto: u8, v6: bool) {
        match proto {
            IPPROTO_TCP => self.tcp(),
            IPPROTO_UDP => {
                let Some(u) = self.take(8) else { return };
                self.push(
                    "udp",
                    vec![
                        ("sport", Field::Num(be16(u))),
                        ("dport", Field::Num(be16(&u[2..]))),
                        ("len", Field::Num(be16(&u[4..]))),
                        ("checksum", Field::Hex(be16(&u[6..]), 4)),
                    ],
                );
            }
            IPPROTO_ICMP if !v6 => self.icmp("icmp", &[0, 8]),
            IPPROTO_ICMPV6 if v6 => self.icmp("icmpv6", &[128, 129]),
            _ => {}
        }
    }

    fn tcp(&mut self) {
        let start = self.at;
        let Some(t) = self.bytes.get(start..start + 20) else {
            return;
        };
        let doff = usize::from(t[12] >> 4) * 4;
        if doff < 20 || self.bytes.len() < start + doff {
            return;
        }
        self.at = start + doff;
        let mut fields = vec![
            ("sport", Field::Num(be16(t))),
            ("dport", Field::Num(be16(&t[2..]))),
            ("seq", Field::Num(be32(&t[4..]))),
            ("ack", Field::Num(be32(&t[8..]))),
            ("doff", Field::Num(u64::from(t[12] >> 4))),
            ("flags", Field::Text(tcp_flags_text(t[13]))),
            ("window", Field::Num(be16(&t[14..]))),
            ("checksum", Field::Hex(be16(&t[16..]), 4)),
            ("urg", Field::Num(be16(&t[18..]))),
        ];
        if doff > 20 {
            let options = &self.bytes[start + 20..start + doff];
            fields.push(("options", Field::Text(crate::replay::hex(options))));
        }
        self.push("tcp", fields);
    }

    /// ICMP or ICMPv6: type, code, checksum; the identifier and sequence of an echo.
    fn icmp(&mut self, name: &str, echo_types: &[u8]) {
        let Some(i) = self.take(4) else { return };
        let mut fields = vec![
            ("type", Field::Num(u64::from(i[0]))),
            ("code", Field::Num(u64::from(i[1]))),
            ("checksum", Field::Hex(be16(&i[2..]), 4)),
        ];
        if echo_types.contains(&i[0])
            && let Some(e) = self.take(4)
        {
            fields.push(("id", Field::Num(be16(e))));
            fields.push(("seq", Field::Num(be16(&e[2..]))));
        }
        self.push(name, fields);
    }
}

fn ip4(b: &[u8]) -> String {
    Ipv4Addr::new(b[0], b[1], b[2], b[3]).to_string()
}

fn ip6(b: &[u8]) -> String {
    let octets: [u8; 16] = b.try_into().expect("16 bytes");
    Ipv6Addr::from(octets).to_string()
}

/// TCP flags in the letters tcpdump uses (`S`, `S.`, `FP.`): F S R P U, `.` for ACK, E W.
pub fn tcp_flags_text(flags: u8) -> String {
    const LETTERS: [(u8, char); 8] = [
        (0x01, 'F'),
        (0x02, 'S'),
        (0x04, 'R'),
        (0x08, 'P'),
        (0x20, 'U'),
        (0x40, 'E'),
        (0x80, 'W'),
        (0x10, '.'),
    ];
    let text: String = LETTERS
        .iter()
        .filter(|(bit, _)| flags & bit != 0)
        .map(|(_, c)| *c)
        .collect();
    if text.is_empty() { "none".into() } else { text }
}

/// [`tcp_flags_text`] read back: letters in any order (`A` is accepted for ACK too).
pub fn tcp_flags_value(text: &str) -> Option<u8> {
    if text == "none" {
        return Some(0);
    }
    text.chars().try_fold(0u8, |acc, c| {
        let bit = match c {
            'F' => 0x01,
            'S' => 0x02,
            'R' => 0x04,
            'P' => 0x08,
            '.' | 'A' => 0x10,
            'U' => 0x20,
            'E' => 0x40,
            'W' => 0x80,
            _ => return None,
        };
        Some(acc | bit)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_round_trip() {
        for f in 0..=255u8 {
            assert_eq!(tcp_flags_value(&tcp_flags_text(f)), Some(f));
        }
        assert_eq!(tcp_flags_value("SA"), Some(0x12));
        assert_eq!(tcp_flags_value("X"), None);
    }

    #[test]
    fn a_short_frame_is_all_payload() {
        let layers = dissect(&[1, 2, 3]);
        assert_eq!(layers.len(), 1);
        assert_eq!(layers[0].name, "payload");
    }
}
