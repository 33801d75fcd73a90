//! The socket helpers XDP may call: `bpf_sk_lookup_tcp`, `bpf_sk_lookup_udp`,
//! `bpf_skc_lookup_tcp` and `bpf_sk_release` (net/core/filter.c).
//!
//! A lookup searches the run's [`SocketTable`] (`--sockets`; without one, the sockets of a
//! fresh network namespace, where nothing is bound, as `bpfemu diff` runs the kernel side),
//! as the kernel searches the namespace of the receiving device. A socket found is answered
//! by the address of its `struct bpf_sock` ([`SocketRegions`]): one read-only region per
//! socket, made with the runtime, so the same socket is the same pointer from lookup to
//! lookup, as in the kernel. The table holds no request or time-wait sockets, so
//! `bpf_skc_lookup_tcp` answers as `bpf_sk_lookup_tcp` does.

use super::{HelperResult, XdpEnv, ret};
use crate::memory::{Memory, RegionKind};
use crate::sockets::{Protocol, SocketTable, TUPLE_IPV4, TUPLE_IPV6, Tuple};

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
