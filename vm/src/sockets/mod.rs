//! The sockets behind `bpf_sk_lookup_tcp`, `bpf_sk_lookup_udp` and `bpf_skc_lookup_tcp`
//! (net/core/filter.c: `__bpf_skc_lookup`, `__bpf_sk_lookup`, `sk_lookup`), with the
//! semantics of Linux 6.18 for XDP.
//!
//! A [`SocketTable`] is the sockets of the network namespace the program runs in (for
//! `BPF_PROG_TEST_RUN`, the caller's: the test device is its loopback). A lookup finds a
//! socket as the kernel's hash tables do ([`SocketTable::lookup`]), and the program then
//! reads the socket's `struct bpf_sock` ([`Socket::bpf_sock`]).
//!
//! # Lookup semantics
//! - The tuple's size says the family (12 bytes IPv4, 36 bytes IPv6; any other size finds
//!   nothing); `saddr`/`sport` are the remote end, `daddr`/`dport` the local one.
//! - TCP: a connected socket whose four-tuple is the tuple's first (`__inet_lookup_established`;
//!   an IPv4 tuple finds IPv4 sockets and IPv6 sockets whose addresses are IPv4-mapped, an
//!   IPv6 tuple the other IPv6 sockets), else the best listener on the port
//!   (`compute_score`): one bound to `daddr` before one bound to the wildcard address; among
//!   them a socket bound to the receiving device scores higher, and for IPv4 an IPv4 socket
//!   higher than a dual-stack IPv6 one. IPv6-only sockets (`v6only`, or bound to an IPv6
//!   address that is not IPv4-mapped) never answer IPv4 tuples.
//! - UDP: the best socket bound to the port (`compute_score` of `udp.c`), `daddr` before the
//!   wildcard; a connected socket must match the remote end too and scores higher.
//! - A socket bound to a device (`bound_dev_if`) answers only packets received on it.
//! - Equal scores: the socket listed last wins (the kernel puts the newest socket at the
//!   head of its hash chains; the kernel's tie-break on the CPU a socket last received on is
//!   not modelled).
//!
//! # Not modelled
//! Request sockets (`TCP_NEW_SYN_RECV`: `bpf_skc_lookup_tcp` would return them where
//! `bpf_sk_lookup_tcp` returns their listener), time-wait sockets (which only
//! `bpf_skc_lookup_tcp` returns), `SO_REUSEPORT` groups (the kernel picks a member by a
//! hash with a per-boot secret), sockets of other namespaces (a `netns_id` other than
//! `BPF_F_CURRENT_NETNS` finds nothing, as in a namespace that has given no other namespace an
//! id).
//!
//! The image [`Socket::bpf_sock`] answers every load the verifier lets through as the
//! kernel's rewritten load of `struct sock` does: the narrow-readable fields are read at their
//! first byte only (an address at any byte), and a kernel field narrower than its `bpf_sock`
//! field reads as zero-extended.
//!
//! # File format (`--sockets FILE`)
//! A JSON object with the list `sockets`:
//!
//! ```json
//! {
//!   "sockets": [
//!     {"protocol": "tcp", "state": "listen", "local": "0.0.0.0:80"},
//!     {"protocol": "tcp", "state": "listen", "local": "[::]:443", "v6only": true},
//!     {"protocol": "tcp", "state": "established", "local": "127.0.0.1:80",
//!      "remote": "127.0.0.1:40000", "accepted": true},
//!     {"protocol": "tcp", "state": "established", "local": "127.0.0.1:40000",
//!      "remote": "127.0.0.1:80"},
//!     {"protocol": "udp", "local": "127.0.0.1:53", "mark": 7, "priority": 3},
//!     {"protocol": "udp", "local": "[::1]:5353", "remote": "[::1]:9000", "dev": 1}
//!   ]
//! }
//! ```
//!
//! - `protocol`: `tcp` or `udp` (required).
//! - `state`: for TCP `listen` or `established` (required); UDP sockets are connected when
//!   they have a `remote`, and `state` may be omitted (or `unconnected`/`connected`).
//! - `local`: the bound address and port, `ADDR:PORT` or `[ADDR6]:PORT` (required); the
//!   family is the address's. `remote`: the peer of an established or connected socket, in
//!   the same family; such a socket's `local` address is not the wildcard.
//! - `accepted`: an established TCP socket that a listener accepted (rather than one that
//!   connected). For IPv6 it decides the IPv4 view of the addresses the kernel keeps
//!   (`LOOPBACK4_IPV6`, 127.0.0.6, for both ends of an accepted socket).
//! - `v6only` (`IPV6_V6ONLY`; false), `dev` (`SO_BINDTODEVICE`, an ifindex; 0), `mark`
//!   (`SO_MARK`; 0), `priority` (`SO_PRIORITY`; 0), `rx_queue_mapping` (the receive queue
//!   the socket recorded from the packets it received, -1 for none: the default, which is
//!   right for a socket that has received nothing; a connected socket's depends on the
//!   device its packets came through, and the kernel's loopback leaves varied values).
//!
//! Unknown fields are errors, and every error names the file, the entry and the field, e.g.
//! `sockets.json: sockets[2].local: expected ADDR:PORT, found "127.0.0.1"`.

mod file;
mod lookup;

pub use lookup::Tuple;

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

pub use crate::fib::FibError as SocketsError;

/// `sizeof(struct bpf_sock)` (include/uapi/linux/bpf.h).
pub const BPF_SOCK_SIZE: usize = 80;
/// `sizeof(bpf_sock_tuple.ipv4)`: saddr, daddr, sport, dport.
pub const TUPLE_IPV4: u32 = 12;
/// `sizeof(bpf_sock_tuple.ipv6)`.
pub const TUPLE_IPV6: u32 = 36;

pub const AF_INET: u32 = 2;
pub const AF_INET6: u32 = 10;
pub const SOCK_STREAM: u32 = 1;
pub const SOCK_DGRAM: u32 = 2;
pub const IPPROTO_TCP: u32 = 6;
pub const IPPROTO_UDP: u32 = 17;
/// `TCP_ESTABLISHED`, also a connected UDP socket's state.
pub const TCP_ESTABLISHED: u32 = 1;
/// `TCP_CLOSE`: an unconnected UDP socket's state.
pub const TCP_CLOSE: u32 = 7;
pub const TCP_LISTEN: u32 = 10;

/// The IPv4 address the kernel gives the IPv4 view of an IPv6 socket bound to an address with
/// no IPv4 equivalent (`LOOPBACK4_IPV6`, include/net/ipv6.h).
pub const LOOPBACK4_IPV6: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 6);

/// A socket's transport protocol.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    Tcp,
    Udp,
}

/// One socket of the namespace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Socket {
    pub protocol: Protocol,
    /// A TCP listener (else established, or a UDP socket).
    pub listening: bool,
    /// The bound address and port.
    pub local: SocketAddr,
    /// The peer of an established TCP or a connected UDP socket.
    pub remote: Option<SocketAddr>,
    /// An established TCP socket a listener accepted.
    pub accepted: bool,
    /// `IPV6_V6ONLY` as set before binding.
    pub v6only: bool,
    /// `SO_BINDTODEVICE`'s ifindex, 0 for none.
    pub bound_dev_if: u32,
    pub mark: u32,
    pub priority: u32,
    /// `sk_rx_queue_mapping` as `bpf_sock` shows it: -1 when none was recorded.
    pub rx_queue_mapping: i32,
}

/// The sockets a run's lookups search, in the order they were created.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SocketTable {
    pub sockets: Vec<Socket>,
}

/// An address's IPv4 equivalent when it is IPv4-mapped.
fn mapped_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    ip.to_ipv4_mapped()
}

impl Socket {
    pub fn family(&self) -> u32 {
        match self.local {
            SocketAddr::V4(_) => AF_INET,
            SocketAddr::V6(_) => AF_INET6,
        }
    }

    /// The local address is IPv4-mapped (an IPv6 socket in the IPv4 tables).
    fn local_mapped(&self) -> bool {
        matches!(self.local.ip(), IpAddr::V6(ip) if mapped_v4(ip).is_some())
    }

    /// `ipv6_only_sock`: set by `IPV6_V6ONLY`, and by binding to an IPv6 address that is
    /// neither the wildcard nor IPv4-mapped (`__inet6_bind`).
    pub fn ipv6_only(&self) -> bool {
        match self.local.ip() {
            IpAddr::V4(_) => false,
            IpAddr::V6(ip) => self.v6only || (!ip.is_unspecified() && mapped_v4(ip).is_none()),
        }
    }

    /// `sk_rcv_saddr`: the IPv4 view of the local address.
    pub fn rcv_saddr4(&self) -> Ipv4Addr {
        match self.local.ip() {
            IpAddr::V4(ip) => ip,
            IpAddr::V6(ip) if ip.is_unspecified() => Ipv4Addr::UNSPECIFIED,
            IpAddr::V6(ip) => mapped_v4(ip).unwrap_or(LOOPBACK4_IPV6),
        }
    }

    /// `sk_daddr`: the IPv4 view of the peer (unset for an IPv6 socket that connected to an
    /// IPv6 address; `LOOPBACK4_IPV6` for one a listener accepted from one).
    pub fn daddr4(&self) -> Ipv4Addr {
        match self.remote.map(|r| r.ip()) {
            None => Ipv4Addr::UNSPECIFIED,
            Some(IpAddr::V4(ip)) => ip,
            Some(IpAddr::V6(ip)) => match mapped_v4(ip) {
                Some(v4) => v4,
                None if self.accepted => LOOPBACK4_IPV6,
                None => Ipv4Addr::UNSPECIFIED,
            },
        }
    }

    /// An IPv4 TCP socket that connected or was accepted: its addresses were set through
    /// `sk_rcv_saddr_set`/`sk_daddr_set`, which write their IPv4-mapped IPv6 forms too (a
    /// bound IPv4 socket's and a UDP one's IPv6 fields stay zero).
    fn v4_connection(&self) -> bool {
        self.family() == AF_INET && self.protocol == Protocol::Tcp && !self.listening
    }

    /// `sk_v6_rcv_saddr`.
    pub fn rcv_saddr6(&self) -> Ipv6Addr {
        match self.local.ip() {
            IpAddr::V4(ip) if self.v4_connection() => ip.to_ipv6_mapped(),
            IpAddr::V4(_) => Ipv6Addr::UNSPECIFIED,
            IpAddr::V6(ip) => ip,
        }
    }

    /// `sk_v6_daddr`.
    pub fn daddr6(&self) -> Ipv6Addr {
        match self.remote.map(|r| r.ip()) {
            Some(IpAddr::V4(ip)) if self.v4_connection() => ip.to_ipv6_mapped(),
            Some(IpAddr::V6(ip)) => ip,
            _ => Ipv6Addr::UNSPECIFIED,
        }
    }

    /// The peer's port, 0 when unconnected.
    pub fn dport(&self) -> u16 {
        self.remote.map_or(0, |r| r.port())
    }

    /// `sk_state`.
    pub fn state(&self) -> u32 {
        match (self.protocol, self.listening, self.remote) {
            (Protocol::Tcp, true, _) => TCP_LISTEN,
            (Protocol::Tcp, false, _) | (Protocol::Udp, _, Some(_)) => TCP_ESTABLISHED,
            (Protocol::Udp, _, None) => TCP_CLOSE,
        }
    }

    /// The socket as a program reads it: `struct bpf_sock`, addresses and `dst_port` in
    /// network order, `src_port` in host order.
    pub fn bpf_sock(&self) -> [u8; BPF_SOCK_SIZE] {
        let (sock_type, protocol) = match self.protocol {
            Protocol::Tcp => (SOCK_STREAM, IPPROTO_TCP),
            Protocol::Udp => (SOCK_DGRAM, IPPROTO_UDP),
        };
        let mut out = [0u8; BPF_SOCK_SIZE];
        let mut put = |off: usize, bytes: &[u8]| out[off..off + bytes.len()].copy_from_slice(bytes);
        put(0, &self.bound_dev_if.to_ne_bytes());
        put(4, &self.family().to_ne_bytes());
        put(8, &sock_type.to_ne_bytes());
        put(12, &protocol.to_ne_bytes());
        put(16, &self.mark.to_ne_bytes());
        put(20, &self.priority.to_ne_bytes());
        put(24, &self.rcv_saddr4().octets());
        put(28, &self.rcv_saddr6().octets());
        put(44, &u32::from(self.local.port()).to_ne_bytes());
        put(48, &self.dport().to_be_bytes());
        put(52, &self.daddr4().octets());
        put(56, &self.daddr6().octets());
        put(72, &self.state().to_ne_bytes());
        put(76, &self.rx_queue_mapping.to_ne_bytes());
        out
    }
}

impl SocketTable {
    /// Reads a socket table file (see the module docs for the format).
    pub fn from_json_file(path: &std::path::Path) -> Result<SocketTable, SocketsError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| SocketsError::Io {
            path: shown.clone(),
            source,
        })?;
        SocketTable::from_json_str(&shown, &text)
    }
}
