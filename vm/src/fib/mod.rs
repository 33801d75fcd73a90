//! The routing and neighbour model behind `bpf_fib_lookup` (helper 69), with the semantics of
//! Linux 6.18 (`bpf_xdp_fib_lookup`, `bpf_ipv4_fib_lookup` and `bpf_ipv6_fib_lookup` in
//! net/core/filter.c).
//!
//! A [`Fib`] is one network namespace as the helper sees it: interfaces (ifindex, name, MAC,
//! MTU, up, per-interface forwarding for IPv4 and IPv6, addresses), routes in numbered tables
//! (unicast, local, broadcast, anycast, multicast, blackhole, unreachable, prohibit, throw;
//! gateway, output device, metric, preferred source, scope, MTU metric), neighbours (IP ->
//! MAC with a NUD state, per device) and policy rules. [`fib_lookup`] runs the helper on the raw
//! 64 bytes of a `struct bpf_fib_lookup`, reading and writing the fields the kernel reads and
//! writes on each return path.
//!
//! # Lookup semantics
//! - IPv4 tables are searched like the kernel's trie: the longest matching prefix first, then
//!   ascending metric, then file order; a blackhole/unreachable/prohibit/throw route answers at
//!   once (`-EINVAL`/`-EHOSTUNREACH`/`-EACCES`/`-EAGAIN` inside the kernel), a route whose
//!   nexthop is dead (device down or missing, `dead` flag) or, with `BPF_FIB_LOOKUP_OUTPUT`,
//!   leaves through another device is skipped and the search backtracks to shorter prefixes.
//!   Without custom rules the local and main tables are one merged trie (as the kernel keeps
//!   them until the first `ip rule add`), with the `default` table (253) as fallback.
//! - IPv6 tables pick the longest prefix, then the lowest-metric group of live routes, the first
//!   one whose device is the lookup's ifindex winning over the others (`rt6_score_route`); the
//!   local table is searched before main. Link-local, loopback and multicast addresses are never
//!   forwarded.
//! - Rules (`ip rule`) match on iif/oif, fwmark/mask, from/to prefixes, ipproto, sport/dport and
//!   `not`; actions are a table lookup, blackhole, unreachable or prohibit.
//! - MTU: the route's MTU metric only when it is locked (`mtu lock`), otherwise the device MTU
//!   (IPv4: at most 65535; IPv6: at least 1280, at most 65575). `tot_len` above it returns
//!   `BPF_FIB_LKUP_RET_FRAG_NEEDED` with the MTU in `mtu_result`.
//! - `BPF_FIB_LOOKUP_SRC`: the route's preferred source, else `inet_select_addr` (IPv4) or the
//!   RFC 6724 rules of `ipv6_dev_get_saddr` (IPv6) over the interfaces' addresses.
//!
//! # Not modelled
//! Multipath routes use their first nexthop (the kernel hashes the flow with a per-boot random
//! seed, so no offline model can agree); no VRFs (l3mdev), nexthop objects, source-specific IPv6
//! routes, route TOS/DSCP selectors, PMTU exceptions or `ip_forward_use_pmtu`; lightweight
//! tunnels only as a flag (`encap`) that yields `BPF_FIB_LKUP_RET_UNSUPP_LWT`.
//!
//! # File format (`--fib FILE`)
//! A JSON object with the lists `interfaces`, `routes`, `neighbours` and optionally `rules`:
//!
//! ```json
//! {
//!   "interfaces": [
//!     {"ifindex": 1, "name": "lo", "mac": "00:00:00:00:00:00", "mtu": 65536,
//!      "addrs": ["127.0.0.1/8", "::1/128"]},
//!     {"ifindex": 2, "name": "eth0", "mac": "02:00:00:00:00:01", "mtu": 1500,
//!      "addrs": ["192.0.2.10/24", "2001:db8::10/64"]},
//!     {"ifindex": 3, "name": "eth1", "mac": "02:00:00:00:00:02", "mtu": 1400,
//!      "forwarding_v6": false, "addrs": ["198.51.100.1/24"]}
//!   ],
//!   "routes": [
//!     {"dst": "10.0.0.0/8", "via": "192.0.2.1", "dev": 2},
//!     {"dst": "10.1.0.0/16", "via": "198.51.100.7", "dev": "eth1", "metric": 10},
//!     {"dst": "172.16.0.0/12", "via": "192.0.2.1", "table": 100, "src": "192.0.2.10"},
//!     {"dst": "default", "type": "blackhole"},
//!     {"dst": "2001:db8:1::/48", "via": "2001:db8::1"}
//!   ],
//!   "neighbours": [
//!     {"ip": "192.0.2.1", "mac": "02:00:00:00:00:fe", "dev": 2},
//!     {"ip": "2001:db8::1", "mac": "02:00:00:00:00:fe", "dev": "eth0", "state": "stale"}
//!   ],
//!   "rules": [
//!     {"family": "inet", "priority": 0, "table": "local"},
//!     {"family": "inet", "priority": 100, "fwmark": 5, "table": 100},
//!     {"family": "inet", "priority": 32766, "table": "main"}
//!   ]
//! }
//! ```
//!
//! - `interfaces[]`: `ifindex` (required), `name`, `mac`, `mtu` (1500), `mtu6` (IPv6 MTU, the
//!   `mtu` by default), `up` (true), `forwarding` (both families, true), `forwarding_v4`,
//!   `forwarding_v6`, `addrs` (strings `"addr/len"` or objects with `addr`, `scope`,
//!   `secondary`, `tentative`, `deprecated`, `temporary`). As the kernel does, every address on
//!   an up interface adds its routes: `local` (and IPv4 `broadcast`) routes in table `local`
//!   and the connected prefix in `main` (IPv6 metric 256). Set the top-level
//!   `"auto_routes": false` to list them yourself.
//! - `routes[]`: `dst` (`"default"` or a prefix; a bare address is a host route), `type`
//!   (`unicast`, `local`, `broadcast`, `anycast`, `multicast`, `blackhole`, `unreachable`,
//!   `prohibit`, `throw`), `via` (gateway; an IPv4 route may use an IPv6 gateway), `dev`
//!   (ifindex or name; found from the gateway's connected subnet when omitted), `metric` (IPv4
//!   0, IPv6 1024), `table` (number or `main`/`local`/`default`; `main`), `src` (preferred
//!   source), `scope` (`global`, `link`, `host` or a number; `link` for a unicast route without
//!   gateway, `host` for local routes), `mtu`, `mtu_lock`, `encap` (a lightweight tunnel),
//!   `dead`.
//! - `neighbours[]`: `ip`, `mac`, `dev`, `state` (`permanent` by default; `noarp`,
//!   `reachable`, `stale`, `delay` and `probe` are valid too, `incomplete`, `failed` and `none`
//!   are not).
//! - `rules[]`: `family` (`inet`/`inet6`; both when omitted and no prefix says otherwise),
//!   `priority`, `action` (`table`, `blackhole`, `unreachable`, `prohibit`), `table`, `from`,
//!   `to`, `iif`, `oif`, `fwmark`, `fwmask`, `ipproto`, `sport`, `dport` (`N` or `"N-M"`),
//!   `not`. Rules given for a family replace that family's default rules (`local` at 0, `main`
//!   at 32766 and, for IPv4, `default` at 32767).
//!
//! Unknown fields are errors, and every error names the file, the entry and the field, e.g.
//! `router.json: routes[3].via: invalid IP address "10.0.0"`.
//!
//! [`Fib::from_iproute_json`] builds the same model from `ip -j` output, and
//! [`Fib::from_system`] runs `ip` to snapshot a live namespace.
//!
//! # Layout
//! - `model`: prefixes, routes, interfaces, rules, the [`Fib`] and the routes addresses add.
//! - `neigh`: neighbours and the MACs the helper writes from them.
//! - `parse`: JSON entries with located errors, and the one route parser and rule parser both
//!   input formats share (`parse_route` takes the format as a `RouteSyntax`).
//! - `file`: the `--fib` file format; `iproute`: `ip -j` output and live snapshots.
//! - `lookup`: the helper itself; `saddr`: source address selection for `BPF_FIB_LOOKUP_SRC`.
//!
//! ```
//! use bpfemu_vm::fib::{self, Fib};
//! let fib = Fib::from_json_str("example.json", r#"{
//!     "interfaces": [{"ifindex": 2, "name": "eth0", "mac": "02:00:00:00:00:01",
//!                     "addrs": ["192.0.2.10/24"]}],
//!     "routes": [{"dst": "10.0.0.0/8", "via": "192.0.2.1"}],
//!     "neighbours": [{"ip": "192.0.2.1", "mac": "02:00:00:00:00:fe", "dev": 2}]
//! }"#).unwrap();
//! let mut params = [0u8; 64];
//! params[0] = fib::AF_INET;
//! params[8..12].copy_from_slice(&2u32.to_ne_bytes()); // ifindex
//! params[32..36].copy_from_slice(&[10, 1, 2, 3]);     // ipv4_dst
//! assert_eq!(fib::fib_lookup(&fib, &mut params, 64, 0, 2), fib::BPF_FIB_LKUP_RET_SUCCESS);
//! assert_eq!(&params[32..36], &[192, 0, 2, 1]);        // the gateway
//! assert_eq!(&params[58..64], &[2, 0, 0, 0, 0, 0xfe]); // its MAC
//! ```

mod file;
mod iproute;
mod lookup;
mod model;
mod neigh;
pub(crate) mod parse;
mod saddr;

pub use iproute::IprouteJson;
pub use lookup::fib_lookup;
pub use model::{
    Fib, IfAddr, Interface, Prefix, Route, RouteType, Rule, RuleAction, default_rules_v4,
    default_rules_v6,
};
pub use neigh::{Neighbour, NudState};

// ---------------------------------------------------------------------------------------------
// uapi constants

/// `BPF_FIB_LOOKUP_*` flags.
pub const BPF_FIB_LOOKUP_DIRECT: u32 = 1 << 0;
pub const BPF_FIB_LOOKUP_OUTPUT: u32 = 1 << 1;
pub const BPF_FIB_LOOKUP_SKIP_NEIGH: u32 = 1 << 2;
pub const BPF_FIB_LOOKUP_TBID: u32 = 1 << 3;
pub const BPF_FIB_LOOKUP_SRC: u32 = 1 << 4;
pub const BPF_FIB_LOOKUP_MARK: u32 = 1 << 5;
/// Every flag Linux 6.18 accepts; others make the helper return `-EINVAL`.
pub const BPF_FIB_LOOKUP_MASK: u32 = BPF_FIB_LOOKUP_DIRECT
    | BPF_FIB_LOOKUP_OUTPUT
    | BPF_FIB_LOOKUP_SKIP_NEIGH
    | BPF_FIB_LOOKUP_TBID
    | BPF_FIB_LOOKUP_SRC
    | BPF_FIB_LOOKUP_MARK;

/// `BPF_FIB_LKUP_RET_*` return codes.
pub const BPF_FIB_LKUP_RET_SUCCESS: i64 = 0;
pub const BPF_FIB_LKUP_RET_BLACKHOLE: i64 = 1;
pub const BPF_FIB_LKUP_RET_UNREACHABLE: i64 = 2;
pub const BPF_FIB_LKUP_RET_PROHIBIT: i64 = 3;
pub const BPF_FIB_LKUP_RET_NOT_FWDED: i64 = 4;
pub const BPF_FIB_LKUP_RET_FWD_DISABLED: i64 = 5;
pub const BPF_FIB_LKUP_RET_UNSUPP_LWT: i64 = 6;
pub const BPF_FIB_LKUP_RET_NO_NEIGH: i64 = 7;
pub const BPF_FIB_LKUP_RET_FRAG_NEEDED: i64 = 8;
pub const BPF_FIB_LKUP_RET_NO_SRC_ADDR: i64 = 9;

pub const AF_INET: u8 = 2;
pub const AF_INET6: u8 = 10;

/// `sizeof(struct bpf_fib_lookup)`.
pub const BPF_FIB_LOOKUP_SIZE: u32 = 64;

/// Field offsets in `struct bpf_fib_lookup` (include/uapi/linux/bpf.h).
pub mod offsets {
    pub const FAMILY: usize = 0;
    pub const L4_PROTOCOL: usize = 1;
    /// `__be16`.
    pub const SPORT: usize = 2;
    /// `__be16`.
    pub const DPORT: usize = 4;
    /// `__u16` in host order; union with `mtu_result`.
    pub const TOT_LEN: usize = 6;
    pub const MTU_RESULT: usize = 6;
    pub const IFINDEX: usize = 8;
    /// `tos` (u8), `flowinfo` (`__be32`) and `rt_metric` (u32) share these 4 bytes.
    pub const TOS: usize = 12;
    pub const FLOWINFO: usize = 12;
    pub const RT_METRIC: usize = 12;
    /// `ipv4_src` (4 bytes) / `ipv6_src` (16 bytes), network order.
    pub const SRC: usize = 16;
    /// `ipv4_dst` / `ipv6_dst`, network order.
    pub const DST: usize = 32;
    /// `h_vlan_proto` and `h_vlan_TCI` (`__be16` each) share these 4 bytes with `tbid`.
    pub const H_VLAN_PROTO: usize = 48;
    pub const H_VLAN_TCI: usize = 50;
    pub const TBID: usize = 48;
    /// `mark` (input, u32) shares its bytes with `smac`.
    pub const MARK: usize = 52;
    pub const SMAC: usize = 52;
    pub const DMAC: usize = 58;
}

/// Routing table ids.
pub const RT_TABLE_DEFAULT: u32 = 253;
pub const RT_TABLE_MAIN: u32 = 254;
pub const RT_TABLE_LOCAL: u32 = 255;

/// Route and IPv4 address scopes (`enum rt_scope_t`).
pub const RT_SCOPE_UNIVERSE: u8 = 0;
pub const RT_SCOPE_SITE: u8 = 200;
pub const RT_SCOPE_LINK: u8 = 253;
pub const RT_SCOPE_HOST: u8 = 254;
pub const RT_SCOPE_NOWHERE: u8 = 255;

const EINVAL: i64 = 22;
const ENODEV: i64 = 19;
const EAFNOSUPPORT: i64 = 97;

// The errors of the kernel's table lookups, mapped to return codes by the helper.
const E_AGAIN: i32 = 11;
const E_ACCES: i32 = 13;
const E_INVAL: i32 = 22;
const E_NETUNREACH: i32 = 101;
const E_HOSTUNREACH: i32 = 113;

const IP_MAX_MTU: u32 = 0xffff;
const IPV6_MIN_MTU: u32 = 1280;
const IP6_MAX_MTU: u32 = 0xffff + 40;

// ---------------------------------------------------------------------------------------------
// Errors

/// Why a FIB description could not be read.
#[derive(Debug, thiserror::Error)]
pub enum FibError {
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}: invalid JSON: {message}")]
    Json { path: String, message: String },
    #[error("{path}: {place}: {message}")]
    Field {
        path: String,
        /// The entry and field, e.g. `routes[3].via`.
        place: String,
        message: String,
    },
    #[error("`{command}` failed: {message}")]
    Command { command: String, message: String },
}
