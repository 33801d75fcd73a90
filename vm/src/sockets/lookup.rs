//! The kernel's socket lookups as `sk_lookup` (net/core/filter.c) runs them: TCP's
//! established then listening hash tables, UDP's scored search (see the module docs).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::{AF_INET, Protocol, Socket, SocketTable, TUPLE_IPV4, TUPLE_IPV6};

/// A `struct bpf_sock_tuple` read: remote end (`saddr`, `sport`), local end (`daddr`,
/// `dport`), ports in host order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tuple {
    pub saddr: IpAddr,
    pub sport: u16,
    pub daddr: IpAddr,
    pub dport: u16,
}

impl Tuple {
    /// The tuple in `bytes`, whose length (12 or 36) says the family; `None` for another.
    pub fn parse(bytes: &[u8]) -> Option<Tuple> {
        let port = |at: usize| u16::from_be_bytes([bytes[at], bytes[at + 1]]);
        match bytes.len() as u32 {
            TUPLE_IPV4 => {
                let addr = |at: usize| -> Option<IpAddr> {
                    Some(IpAddr::V4(Ipv4Addr::from(
                        <[u8; 4]>::try_from(&bytes[at..at + 4]).ok()?,
                    )))
                };
                Some(Tuple {
                    saddr: addr(0)?,
                    daddr: addr(4)?,
                    sport: port(8),
                    dport: port(10),
                })
            }
            TUPLE_IPV6 => {
                let addr = |at: usize| -> Option<IpAddr> {
                    Some(IpAddr::V6(Ipv6Addr::from(
                        <[u8; 16]>::try_from(&bytes[at..at + 16]).ok()?,
                    )))
                };
                Some(Tuple {
                    saddr: addr(0)?,
                    daddr: addr(16)?,
                    sport: port(32),
                    dport: port(34),
                })
            }
            _ => None,
        }
    }
}

/// `inet_sk_bound_dev_eq` without an L3 master device: an unbound socket takes every device.
fn device_matches(sk: &Socket, dif: u32) -> bool {
    sk.bound_dev_if == 0 || sk.bound_dev_if == dif
}

/// The best-scoring socket (`None` for a negative score); on a tie the one listed last.
fn best<'a>(
    sockets: impl Iterator<Item = (usize, &'a Socket)>,
    score: impl Fn(&Socket) -> Option<u32>,
) -> Option<usize> {
    sockets
        .filter_map(|(i, sk)| Some((score(sk)?, i)))
        .max()
        .map(|(_, i)| i)
}

impl SocketTable {
    /// The socket a lookup of `tuple` for `protocol` finds on a packet received on device
    /// `dif`: its index in the table.
    pub fn lookup(&self, protocol: Protocol, tuple: &Tuple, dif: u32) -> Option<usize> {
        let sockets = || {
            self.sockets
                .iter()
                .enumerate()
                .filter(move |(_, sk)| sk.protocol == protocol)
        };
        match protocol {
            Protocol::Tcp => best(sockets(), |sk| established(sk, tuple, dif).then_some(0))
                .or_else(|| {
                    bound_then_wildcard(tuple, |daddr| {
                        best(sockets(), |sk| listener_score(sk, tuple, daddr, dif))
                    })
                }),
            Protocol::Udp => bound_then_wildcard(tuple, |daddr| {
                best(sockets(), |sk| udp_score(sk, tuple, daddr, dif))
            }),
        }
    }
}

/// The kernel's two passes over the hash slot of the local address, then of the wildcard
/// address of the tuple's family.
fn bound_then_wildcard(tuple: &Tuple, pass: impl Fn(IpAddr) -> Option<usize>) -> Option<usize> {
    let wildcard = match tuple.daddr {
        IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
    };
    pass(tuple.daddr).or_else(|| pass(wildcard))
}

/// `inet_match`/`inet6_match`: a connected TCP socket with the tuple's four-tuple, in the
/// tuple family's table (IPv4-mapped IPv6 sockets live in the IPv4 one).
fn established(sk: &Socket, tuple: &Tuple, dif: u32) -> bool {
    let Some(remote) = sk.remote.filter(|_| !sk.listening) else {
        return false;
    };
    let addresses = match (tuple.saddr, tuple.daddr) {
        (IpAddr::V4(saddr), IpAddr::V4(daddr)) => {
            in_ipv4_tables(sk) && sk.rcv_saddr4() == daddr && sk.daddr4() == saddr
        }
        (IpAddr::V6(saddr), IpAddr::V6(daddr)) => {
            !in_ipv4_tables(sk) && sk.rcv_saddr6() == daddr && sk.daddr6() == saddr
        }
        _ => false,
    };
    addresses
        && sk.local.port() == tuple.dport
        && remote.port() == tuple.sport
        && device_matches(sk, dif)
}

/// IPv4 sockets, and IPv6 ones bound to an IPv4-mapped address, are hashed by their IPv4
/// view.
fn in_ipv4_tables(sk: &Socket) -> bool {
    sk.family() == AF_INET || sk.local_mapped()
}

/// `compute_score` of inet_hashtables.c (IPv4) and inet6_hashtables.c (IPv6) for a listener
/// bound to `daddr` (the tuple's local address, or the wildcard in the second pass).
fn listener_score(sk: &Socket, tuple: &Tuple, daddr: IpAddr, dif: u32) -> Option<u32> {
    if !sk.listening || sk.local.port() != tuple.dport || !device_matches(sk, dif) {
        return None;
    }
    let device = if sk.bound_dev_if != 0 { 2 } else { 1 };
    match daddr {
        IpAddr::V4(daddr) => (!sk.ipv6_only() && sk.rcv_saddr4() == daddr)
            .then_some(device + u32::from(sk.family() == AF_INET)),
        IpAddr::V6(daddr) => (sk.family() != AF_INET && sk.rcv_saddr6() == daddr).then_some(device),
    }
}

/// `compute_score` of udp.c (IPv4) and ipv6/udp.c for a socket bound to `daddr`.
fn udp_score(sk: &Socket, tuple: &Tuple, daddr: IpAddr, dif: u32) -> Option<u32> {
    if sk.local.port() != tuple.dport || !device_matches(sk, dif) {
        return None;
    }
    let connected = sk.remote.is_some();
    if connected && sk.dport() != tuple.sport {
        return None;
    }
    let (base, step) = match (daddr, tuple.saddr) {
        (IpAddr::V4(daddr), IpAddr::V4(saddr)) => {
            if sk.ipv6_only() || sk.rcv_saddr4() != daddr {
                return None;
            }
            let peer = sk.daddr4();
            if !peer.is_unspecified() && peer != saddr {
                return None;
            }
            let peer_score = if peer.is_unspecified() { 0 } else { 4 };
            (u32::from(sk.family() == AF_INET) + 1 + peer_score, 4)
        }
        (IpAddr::V6(daddr), IpAddr::V6(saddr)) => {
            if sk.family() == AF_INET || sk.rcv_saddr6() != daddr {
                return None;
            }
            let peer = sk.daddr6();
            if !peer.is_unspecified() && peer != saddr {
                return None;
            }
            (u32::from(!peer.is_unspecified()), 1)
        }
        _ => return None,
    };
    let port_score = if connected { step } else { 0 };
    let device_score = if sk.bound_dev_if != 0 { step } else { 0 };
    Some(base + port_score + device_score)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(text: &str) -> SocketTable {
        SocketTable::from_json_str("t.json", text).unwrap()
    }

    fn v4(s: [u8; 4], sport: u16, d: [u8; 4], dport: u16) -> Tuple {
        Tuple {
            saddr: IpAddr::V4(s.into()),
            sport,
            daddr: IpAddr::V4(d.into()),
            dport,
        }
    }

    #[test]
    fn tuple_sizes_say_the_family() {
        assert!(Tuple::parse(&[0; 12]).unwrap().saddr.is_ipv4());
        assert!(Tuple::parse(&[0; 36]).unwrap().saddr.is_ipv6());
        assert_eq!(Tuple::parse(&[0; 13]), None);
    }

    #[test]
    fn established_before_listener_and_ipv4_before_dual_stack() {
        let t = table(
            r#"{"sockets": [
                {"protocol": "tcp", "state": "listen", "local": "[::]:80"},
                {"protocol": "tcp", "state": "listen", "local": "0.0.0.0:80"},
                {"protocol": "tcp", "state": "established", "local": "127.0.0.1:80",
                 "remote": "127.0.0.1:4000", "accepted": true}
            ]}"#,
        );
        let lo = [127, 0, 0, 1];
        assert_eq!(t.lookup(Protocol::Tcp, &v4(lo, 4000, lo, 80), 1), Some(2));
        assert_eq!(t.lookup(Protocol::Tcp, &v4(lo, 4001, lo, 80), 1), Some(1));
        assert_eq!(t.lookup(Protocol::Udp, &v4(lo, 4001, lo, 80), 1), None);
    }
}
