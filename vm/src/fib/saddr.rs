//! Source address selection for `BPF_FIB_LOOKUP_SRC`: `inet_select_addr` (IPv4) and the
//! RFC 6724 rules of `ipv6_dev_get_saddr` (IPv6).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::*;

impl Fib {
    /// `inet_select_addr(dev, dst, scope)`.
    pub(super) fn inet_select_addr(
        &self,
        dev: &Interface,
        dst: Option<Ipv4Addr>,
        scope: u8,
    ) -> Ipv4Addr {
        let v4 = |i: &'_ Interface| -> Vec<IfAddr> {
            i.addrs
                .iter()
                .filter(|a| a.addr.is_ipv4() && !a.secondary)
                .cloned()
                .collect()
        };
        let mut found: Option<IpAddr> = None;
        for a in v4(dev) {
            if a.scope.min(RT_SCOPE_HOST) > scope {
                continue;
            }
            if dst.is_none_or(|d| Prefix::new(a.addr, a.prefix_len).contains(IpAddr::V4(d))) {
                found = Some(a.addr);
                break;
            }
            found.get_or_insert(a.addr);
        }
        if found.is_none() {
            found = self.interfaces.iter().find_map(|i| {
                v4(i)
                    .into_iter()
                    .find(|a| a.scope.min(RT_SCOPE_HOST) <= scope && a.scope != RT_SCOPE_LINK)
                    .map(|a| a.addr)
            });
        }
        match found {
            Some(IpAddr::V4(a)) => a,
            _ => Ipv4Addr::UNSPECIFIED,
        }
    }

    /// `ipv6_dev_get_saddr` for a destination of global scope: the RFC 6724 rules over every
    /// interface's addresses, ties going to the first (interfaces in ifindex order, addresses in
    /// list order).
    pub(super) fn ipv6_dev_get_saddr(&self, dst_ifindex: u32, daddr: Ipv6Addr) -> Option<Ipv6Addr> {
        let dst_scope = v6_src_scope(daddr);
        let dst_label = v6_label(daddr);
        let mut best: Option<([i32; 9], Ipv6Addr)> = None;
        for iface in &self.interfaces {
            for a in &iface.addrs {
                let IpAddr::V6(addr) = a.addr else { continue };
                if a.tentative || addr.is_unspecified() || addr.is_multicast() {
                    continue;
                }
                let scope = v6_src_scope(addr);
                let scope_rule = if scope >= dst_scope {
                    -scope
                } else {
                    scope - 128
                };
                let score = [
                    1,
                    (addr == daddr) as i32,
                    scope_rule,
                    (addr.is_loopback() || is_v4_mapped(addr) || !a.deprecated) as i32,
                    (iface.ifindex == dst_ifindex) as i32,
                    (v6_label(addr) == dst_label) as i32,
                    (!a.temporary) as i32,
                    (is_orchid(addr) == is_orchid(daddr)) as i32,
                    common_prefix(addr, daddr).min(u32::from(a.prefix_len)) as i32,
                ];
                if best.is_none_or(|(b, _)| score > b) {
                    best = Some((score, addr));
                }
            }
        }
        best.map(|(_, a)| a)
    }
}

pub(super) fn is_v4_mapped(a: Ipv6Addr) -> bool {
    (u128::from(a) >> 32) == 0xffff
}

pub(super) fn is_orchid(a: Ipv6Addr) -> bool {
    Prefix::new(IpAddr::V6("2001:10::".parse().expect("literal")), 28).contains(IpAddr::V6(a))
}

/// `__ipv6_addr_src_scope` for unicast addresses.
pub(super) fn v6_src_scope(a: Ipv6Addr) -> i32 {
    let s0 = a.segments()[0];
    if a.is_loopback() || (s0 & 0xffc0) == 0xfe80 {
        0x2
    } else if (s0 & 0xffc0) == 0xfec0 {
        0x5
    } else if a.is_multicast() {
        i32::from(a.octets()[1] & 0xf)
    } else {
        0xe
    }
}

/// The default policy table of net/ipv6/addrlabel.c.
pub(super) fn v6_label(a: Ipv6Addr) -> u32 {
    const TABLE: &[(&str, u8, u32)] = &[
        ("::1", 128, 0),
        ("::", 96, 3),
        ("::ffff:0:0", 96, 4),
        ("2001::", 32, 6),
        ("2001:10::", 28, 7),
        ("2002::", 16, 2),
        ("3ffe::", 16, 12),
        ("fec0::", 10, 11),
        ("fc00::", 7, 5),
        ("::", 0, 1),
    ];
    let mut best: Option<(u8, u32)> = None;
    for &(p, len, label) in TABLE {
        let prefix = Prefix::new(IpAddr::V6(p.parse().expect("literal")), len);
        if prefix.contains(IpAddr::V6(a)) && best.is_none_or(|(l, _)| len > l) {
            best = Some((len, label));
        }
    }
    best.map_or(1, |(_, l)| l)
}

pub(super) fn common_prefix(a: Ipv6Addr, b: Ipv6Addr) -> u32 {
    (u128::from(a) ^ u128::from(b)).leading_zeros()
}
