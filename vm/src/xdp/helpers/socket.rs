//! The socket helpers XDP may call: `bpf_sk_lookup_tcp`, `bpf_sk_lookup_udp`,
//! `bpf_skc_lookup_tcp`, `bpf_sk_release` and `bpf_tcp_check_syncookie` (net/core/filter.c).
//! `bpf_tcp_gen_syncookie` is not run: the cookie it returns hashes a secret of the kernel's.
//!
//! A lookup searches the run's [`SocketTable`] (`--sockets`; without one, the sockets of a
//! fresh network namespace, where nothing is bound, as `bpfemu diff` runs the kernel side),
//! as the kernel searches the namespace of the receiving device. A socket found is answered
//! by the address of its `struct bpf_sock` ([`SocketRegions`]): one read-only region per
//! socket, made with the runtime, so the same socket is the same pointer from lookup to
//! lookup, as in the kernel. The table holds no request or time-wait sockets, so
//! `bpf_skc_lookup_tcp` answers as `bpf_sk_lookup_tcp` does.

use super::{HelperResult, XdpEnv, ret};
use crate::maps::Errno;
use crate::memory::{Memory, RegionKind};
use crate::sockets::{Protocol, Socket, SocketTable, TUPLE_IPV4, TUPLE_IPV6, Tuple};

/// The sockets of a runtime and where each one's `struct bpf_sock` is.
#[derive(Debug, Default)]
pub struct SocketRegions {
    table: SocketTable,
    /// By socket index: the address of its `struct bpf_sock`.
    addrs: Vec<u64>,
}

impl SocketRegions {
    /// One read-only region per socket of `table`, holding its `struct bpf_sock`.
    pub fn new(table: SocketTable, mem: &mut Memory) -> SocketRegions {
        let addrs = table
            .sockets
            .iter()
            .enumerate()
            .map(|(i, sk)| {
                let kind = RegionKind::Other {
                    name: format!("socket {i}"),
                };
                let id = mem.add_copy(kind, &sk.bpf_sock(), false);
                mem.region(id).expect("just added").base()
            })
            .collect();
        SocketRegions { table, addrs }
    }

    /// The socket whose `struct bpf_sock` is at `addr` (what a lookup returned).
    fn socket_at(&self, addr: u64) -> Option<&Socket> {
        let index = self.addrs.iter().position(|&a| a == addr)?;
        self.table.sockets.get(index)
    }
}

/// `__bpf_sk_lookup` as XDP calls it (`tuple`, `len`, `netns_id`, `flags` in r2-r5): NULL
/// for a size that is neither tuple's and for nonzero flags, before the tuple is read; a
/// negative `netns_id` (`BPF_F_CURRENT_NETNS`) searches the receiving device's namespace (the
/// tuple is read: a bad one faults in checked mode as it would in the kernel), any other
/// names a namespace by id, of which the run's namespace knows none.
fn lookup(env: &XdpEnv<'_>, a: [u64; 5], mem: &Memory, protocol: Protocol) -> HelperResult {
    let (tuple, len, netns_id, flags) = (a[1], a[2] as u32, a[3] as u32, a[4]);
    if len != TUPLE_IPV4 && len != TUPLE_IPV6 {
        return ret(0);
    }
    if flags != 0 || (netns_id as i32) >= 0 {
        return ret(0);
    }
    let bytes = mem.slice(tuple, len as usize)?;
    let tuple = Tuple::parse(bytes).expect("a tuple's size");
    let sockets = env.sockets;
    let found = sockets
        .table
        .lookup(protocol, &tuple, env.frame.ingress_ifindex());
    ret(found.map_or(0, |i| sockets.addrs[i]))
}

/// `bpf_xdp_sk_lookup_tcp(ctx, tuple, len, netns_id, flags)`: an established TCP socket of
/// the tuple, else the best listener on its local port.
pub fn sk_lookup_tcp(env: &mut XdpEnv<'_>, a: [u64; 5], mem: &mut Memory) -> HelperResult {
    lookup(env, a, mem, Protocol::Tcp)
}

/// `bpf_xdp_sk_lookup_udp(ctx, tuple, len, netns_id, flags)`: the best UDP socket.
pub fn sk_lookup_udp(env: &mut XdpEnv<'_>, a: [u64; 5], mem: &mut Memory) -> HelperResult {
    lookup(env, a, mem, Protocol::Udp)
}

/// `bpf_xdp_skc_lookup_tcp(ctx, tuple, len, netns_id, flags)`: a TCP socket of any state;
/// the table's sockets are all full ones, so the answer is `bpf_sk_lookup_tcp`'s.
pub fn skc_lookup_tcp(env: &mut XdpEnv<'_>, a: [u64; 5], mem: &mut Memory) -> HelperResult {
    lookup(env, a, mem, Protocol::Tcp)
}

/// `bpf_sk_release(sk)`: drops the reference a lookup took and returns 0. The table's
/// sockets live as long as the runtime, so there is nothing to drop.
pub fn sk_release(_env: &mut XdpEnv<'_>, _a: [u64; 5], _mem: &mut Memory) -> HelperResult {
    ret(0)
}

/// `sizeof(struct tcphdr)` and `sizeof(struct iphdr)`.
const TCPHDR_LEN: u32 = 20;
const IPHDR_LEN: u32 = 20;
/// The flags byte of a TCP header and the flags the helper looks at.
const TCP_FLAGS: usize = 13;
const TCP_SYN: u8 = 0x02;
const TCP_RST: u8 = 0x04;
const TCP_ACK: u8 = 0x10;

/// `bpf_tcp_check_syncookie(sk, iph, iph_len, th, th_len)`: whether the ACK in `th` carries a
/// valid SYN cookie for listener `sk`. `-EINVAL` for a short TCP header, a socket that is not
/// a TCP listener or a short IP header, `-ENOENT` for a segment that is not a bare ACK; and
/// `-ENOENT` for every bare ACK, because the kernel checks a cookie only when the listener's
/// SYN queue overflowed within the last two minutes (`tcp_synq_no_recent_overflow`), which a
/// table's listener never did. (The kernel's test compares its jiffies with a listener's zero
/// overflow stamp: in the two minutes after the 32-bit jiffies wrap, the first about five
/// minutes after boot and then every 49.7 days at HZ=1000, it would go on to validate the
/// cookie, which depends on the kernel's secret.) `net.ipv4.tcp_syncookies` is taken as its
/// default of a new namespace, 1.
pub fn tcp_check_syncookie(env: &mut XdpEnv<'_>, a: [u64; 5], mem: &mut Memory) -> HelperResult {
    let [sk, _iph, iph_len, th, th_len] = a;
    let (iph_len, th_len) = (iph_len as u32, th_len as u32);
    // A pointer that is no socket of the table only reaches here unverified.
    let Some(sk) = env.sockets.socket_at(sk) else {
        return ret(Errno::EINVAL.as_ret());
    };
    if th_len < TCPHDR_LEN || !(sk.protocol == Protocol::Tcp && sk.listening) {
        return ret(Errno::EINVAL.as_ret());
    }
    let flags = mem.slice(th, th_len as usize)?[TCP_FLAGS];
    if flags & TCP_ACK == 0 || flags & (TCP_RST | TCP_SYN) != 0 {
        return ret(Errno::ENOENT.as_ret());
    }
    if iph_len < IPHDR_LEN {
        return ret(Errno::EINVAL.as_ret());
    }
    ret(Errno::ENOENT.as_ret())
}
