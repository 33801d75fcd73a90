//! The socket helpers XDP may call: `bpf_sk_lookup_tcp`, `bpf_sk_lookup_udp`,
//! `bpf_skc_lookup_tcp` and `bpf_sk_release` (net/core/filter.c).
//!
//! A run has no sockets: `BPF_PROG_TEST_RUN` runs the program in the network namespace the
//! kernel side of `diff` builds (the loopback, or the interfaces of `--fib`), where nothing
//! listens, and no other namespace has an id there. So every lookup finds nothing and returns
//! NULL, the kernel's answer for bad arguments too; the program's NULL path runs and
//! `bpf_sk_release` is never reached with a socket.

use super::{HelperResult, XdpEnv, ret};
use crate::memory::Memory;

/// `sizeof(tuple->ipv4)`: addresses and ports of IPv4.
const TUPLE_IPV4: u32 = 12;
/// `sizeof(tuple->ipv6)`.
const TUPLE_IPV6: u32 = 36;

/// `__bpf_skc_lookup` as XDP calls it (`tuple`, `len`, `netns_id`, `flags` in r2-r5): NULL
/// for a size that is neither tuple's and for nonzero flags, before the tuple is read; a
/// negative `netns_id` searches the caller's namespace (the tuple is read: a bad one faults
/// in checked mode as it would in the kernel), any other names a namespace by id, of which
/// the run's namespace knows none.
fn lookup(a: [u64; 5], mem: &Memory) -> HelperResult {
    let (tuple, len, netns_id, flags) = (a[1], a[2] as u32, a[3] as u32, a[4]);
    if len != TUPLE_IPV4 && len != TUPLE_IPV6 {
        return ret(0);
    }
    if flags != 0 {
        return ret(0);
    }
    if (netns_id as i32) < 0 {
        mem.slice(tuple, len as usize)?;
    }
    ret(0)
}

/// `bpf_xdp_sk_lookup_tcp(ctx, tuple, len, netns_id, flags)`: no TCP socket is found.
pub fn sk_lookup_tcp(_env: &mut XdpEnv<'_>, a: [u64; 5], mem: &mut Memory) -> HelperResult {
    lookup(a, mem)
}

/// `bpf_xdp_sk_lookup_udp(ctx, tuple, len, netns_id, flags)`: no UDP socket is found.
pub fn sk_lookup_udp(_env: &mut XdpEnv<'_>, a: [u64; 5], mem: &mut Memory) -> HelperResult {
    lookup(a, mem)
}

/// `bpf_xdp_skc_lookup_tcp(ctx, tuple, len, netns_id, flags)`: no TCP socket (of any state)
/// is found.
pub fn skc_lookup_tcp(_env: &mut XdpEnv<'_>, a: [u64; 5], mem: &mut Memory) -> HelperResult {
    lookup(a, mem)
}

/// `bpf_sk_release(sk)`: drops the reference a lookup took and returns 0. The verifier lets
/// only a socket a lookup returned reach it, and no lookup returns one here.
pub fn sk_release(_env: &mut XdpEnv<'_>, _a: [u64; 5], _mem: &mut Memory) -> HelperResult {
    ret(0)
}
