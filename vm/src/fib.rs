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

use serde_json::{Map, Value};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

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
// The model

/// An address prefix; `len` is at most 32 (IPv4) or 128 (IPv6).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Prefix {
    pub addr: IpAddr,
    pub len: u8,
}

impl Prefix {
    pub fn new(addr: IpAddr, len: u8) -> Prefix {
        Prefix { addr, len }
    }

    /// Whether `ip` (of the same family) lies in the prefix.
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.addr, ip) {
            (IpAddr::V4(a), IpAddr::V4(b)) => {
                let mask = mask32(self.len);
                (u32::from(a) ^ u32::from(b)) & mask == 0
            }
            (IpAddr::V6(a), IpAddr::V6(b)) => {
                let mask = mask128(self.len);
                (u128::from(a) ^ u128::from(b)) & mask == 0
            }
            _ => false,
        }
    }

    pub fn is_ipv4(&self) -> bool {
        self.addr.is_ipv4()
    }
}

fn mask32(len: u8) -> u32 {
    if len == 0 {
        0
    } else {
        u32::MAX << (32 - len.min(32))
    }
}

fn mask128(len: u8) -> u128 {
    if len == 0 {
        0
    } else {
        u128::MAX << (128 - len.min(128))
    }
}

/// Route types (`RTN_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RouteType {
    Unicast,
    Local,
    Broadcast,
    Anycast,
    Multicast,
    Blackhole,
    Unreachable,
    Prohibit,
    Throw,
}

impl RouteType {
    fn parse(s: &str) -> Option<RouteType> {
        Some(match s {
            "unicast" => RouteType::Unicast,
            "local" => RouteType::Local,
            "broadcast" => RouteType::Broadcast,
            "anycast" => RouteType::Anycast,
            "multicast" => RouteType::Multicast,
            "blackhole" => RouteType::Blackhole,
            "unreachable" => RouteType::Unreachable,
            "prohibit" => RouteType::Prohibit,
            "throw" => RouteType::Throw,
            _ => return None,
        })
    }

    /// `fib_props[type].error`: what an IPv4 table lookup returns on reaching this route.
    fn v4_error(self) -> Option<i32> {
        match self {
            RouteType::Blackhole => Some(E_INVAL),
            RouteType::Unreachable => Some(E_HOSTUNREACH),
            RouteType::Prohibit => Some(E_ACCES),
            RouteType::Throw => Some(E_AGAIN),
            _ => None,
        }
    }

    fn is_reject(self) -> bool {
        self.v4_error().is_some()
    }
}

/// One route.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Route {
    pub table: u32,
    pub dst: Prefix,
    pub kind: RouteType,
    pub gateway: Option<IpAddr>,
    /// Output device (ifindex).
    pub dev: Option<u32>,
    /// IPv4 priority / IPv6 metric.
    pub metric: u32,
    pub prefsrc: Option<IpAddr>,
    pub scope: u8,
    /// The MTU metric (0: none); used only when `mtu_lock`.
    pub mtu: u32,
    pub mtu_lock: bool,
    /// A lightweight-tunnel encapsulation is attached.
    pub encap: bool,
    /// The nexthop is dead (RTNH_F_DEAD).
    pub dead: bool,
}

/// Neighbour states (`NUD_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NudState {
    Incomplete,
    Reachable,
    Stale,
    Delay,
    Probe,
    Failed,
    Noarp,
    Permanent,
    None,
}

impl NudState {
    fn parse(s: &str) -> Option<NudState> {
        Some(match s.to_ascii_lowercase().as_str() {
            "incomplete" => NudState::Incomplete,
            "reachable" => NudState::Reachable,
            "stale" => NudState::Stale,
            "delay" => NudState::Delay,
            "probe" => NudState::Probe,
            "failed" => NudState::Failed,
            "noarp" => NudState::Noarp,
            "permanent" => NudState::Permanent,
            "none" => NudState::None,
            _ => return None,
        })
    }

    /// `NUD_VALID`.
    pub fn is_valid(self) -> bool {
        matches!(
            self,
            NudState::Permanent
                | NudState::Noarp
                | NudState::Reachable
                | NudState::Probe
                | NudState::Stale
                | NudState::Delay
        )
    }
}

/// One neighbour entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Neighbour {
    pub ip: IpAddr,
    pub mac: [u8; 6],
    pub dev: u32,
    pub state: NudState,
}

/// An address on an interface.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IfAddr {
    pub addr: IpAddr,
    pub prefix_len: u8,
    /// IPv4: `RT_SCOPE_*` (global 0, link 253, host 254). Unused for IPv6 (derived from the
    /// address).
    pub scope: u8,
    pub secondary: bool,
    pub tentative: bool,
    pub deprecated: bool,
    pub temporary: bool,
}

/// One interface.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Interface {
    pub ifindex: u32,
    pub name: String,
    pub mac: [u8; 6],
    pub mtu: u32,
    /// The IPv6 MTU (`conf.mtu6`); `mtu` when `None`.
    pub mtu6: Option<u32>,
    pub up: bool,
    /// `net.ipv4.conf.<dev>.forwarding`.
    pub forwarding_v4: bool,
    /// `net.ipv6.conf.<dev>.forwarding` (false also when IPv6 is off on the device).
    pub forwarding_v6: bool,
    /// Addresses in the kernel's list order (`ip addr` order).
    pub addrs: Vec<IfAddr>,
}

/// What a rule does when it matches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RuleAction {
    Table(u32),
    Blackhole,
    Unreachable,
    Prohibit,
}

/// One policy routing rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    pub priority: u32,
    pub invert: bool,
    pub src: Option<Prefix>,
    pub dst: Option<Prefix>,
    pub iif: Option<String>,
    pub oif: Option<String>,
    pub fwmark: u32,
    pub fwmask: u32,
    pub ipproto: Option<u8>,
    pub sport: Option<(u16, u16)>,
    pub dport: Option<(u16, u16)>,
    pub action: RuleAction,
}

impl Rule {
    fn table(priority: u32, table: u32) -> Rule {
        Rule {
            priority,
            invert: false,
            src: None,
            dst: None,
            iif: None,
            oif: None,
            fwmark: 0,
            fwmask: 0,
            ipproto: None,
            sport: None,
            dport: None,
            action: RuleAction::Table(table),
        }
    }
}

/// The kernel's IPv4 rules in a new namespace.
pub fn default_rules_v4() -> Vec<Rule> {
    vec![
        Rule::table(0, RT_TABLE_LOCAL),
        Rule::table(32766, RT_TABLE_MAIN),
        Rule::table(32767, RT_TABLE_DEFAULT),
    ]
}

/// The kernel's IPv6 rules in a new namespace.
pub fn default_rules_v6() -> Vec<Rule> {
    vec![
        Rule::table(0, RT_TABLE_LOCAL),
        Rule::table(32766, RT_TABLE_MAIN),
    ]
}

/// A network namespace's routing state.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Fib {
    pub interfaces: Vec<Interface>,
    pub routes: Vec<Route>,
    pub neighbours: Vec<Neighbour>,
    /// Custom IPv4 rules; `None`: the default rules, with local and main merged.
    pub rules_v4: Option<Vec<Rule>>,
    /// Custom IPv6 rules; `None`: the default rules.
    pub rules_v6: Option<Vec<Rule>>,
}

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

/// Where an entry sits in its input, for error messages.
#[derive(Clone, Copy)]
struct Loc<'a> {
    path: &'a str,
    list: &'a str,
    index: usize,
}

impl Loc<'_> {
    fn err(&self, field: &str, message: impl Into<String>) -> FibError {
        let place = if field.is_empty() {
            format!("{}[{}]", self.list, self.index)
        } else {
            format!("{}[{}].{}", self.list, self.index, field)
        };
        FibError::Field {
            path: self.path.to_string(),
            place,
            message: message.into(),
        }
    }
}

fn top_err(path: &str, place: &str, message: impl Into<String>) -> FibError {
    FibError::Field {
        path: path.to_string(),
        place: place.to_string(),
        message: message.into(),
    }
}

fn parse_json(path: &str, text: &str) -> Result<Value, FibError> {
    serde_json::from_str(text).map_err(|e| FibError::Json {
        path: path.to_string(),
        message: e.to_string(),
    })
}

/// An entry's fields, with typed accessors that report the entry and field on error.
struct Entry<'a> {
    loc: Loc<'a>,
    obj: &'a Map<String, Value>,
}

impl<'a> Entry<'a> {
    fn new(loc: Loc<'a>, v: &'a Value) -> Result<Entry<'a>, FibError> {
        match v.as_object() {
            Some(obj) => Ok(Entry { loc, obj }),
            None => Err(loc.err("", "expected an object")),
        }
    }

    fn check_known(&self, known: &[&str]) -> Result<(), FibError> {
        for key in self.obj.keys() {
            if !known.contains(&key.as_str()) {
                return Err(self
                    .loc
                    .err(key, format!("unknown field (known: {})", known.join(", "))));
            }
        }
        Ok(())
    }

    fn reject(&self, unsupported: &[&str]) -> Result<(), FibError> {
        for key in unsupported {
            if self.obj.contains_key(*key) {
                return Err(self.loc.err(key, "not supported by bpfemu's FIB model"));
            }
        }
        Ok(())
    }

    fn get(&self, field: &str) -> Option<&'a Value> {
        self.obj.get(field).filter(|v| !v.is_null())
    }

    fn has(&self, field: &str) -> bool {
        self.obj.contains_key(field)
    }

    fn str(&self, field: &str) -> Result<Option<&'a str>, FibError> {
        match self.get(field) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(v) => Err(self.loc.err(field, format!("expected a string, found {v}"))),
        }
    }

    fn req_str(&self, field: &str) -> Result<&'a str, FibError> {
        self.str(field)?
            .ok_or_else(|| self.loc.err(field, "missing"))
    }

    fn bool(&self, field: &str) -> Result<Option<bool>, FibError> {
        match self.get(field) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(v) => Err(self
                .loc
                .err(field, format!("expected true or false, found {v}"))),
        }
    }

    /// A number, or a string holding a decimal or `0x` hex number.
    fn u32(&self, field: &str) -> Result<Option<u32>, FibError> {
        let Some(v) = self.get(field) else {
            return Ok(None);
        };
        let n = match v {
            Value::Number(n) => n.as_u64(),
            Value::String(s) => parse_uint(s),
            _ => None,
        };
        match n.and_then(|n| u32::try_from(n).ok()) {
            Some(n) => Ok(Some(n)),
            None => Err(self.loc.err(
                field,
                format!("expected a 32-bit unsigned number, found {v}"),
            )),
        }
    }

    /// A `table` field: a name (`main`, `local`, `default`) or a number; `None` when absent.
    fn table(&self) -> Result<Option<u32>, FibError> {
        match self.get("table") {
            None => Ok(None),
            Some(Value::String(s)) => parse_table(s)
                .map(Some)
                .ok_or_else(|| self.loc.err("table", format!("unknown table {s:?}"))),
            Some(_) => self.req_u32("table").map(Some),
        }
    }

    /// A `scope` field: a name (`host`, `link`, `universe`, ...) or a number below 256.
    fn scope(&self) -> Result<Option<u8>, FibError> {
        match self.get("scope") {
            None => Ok(None),
            Some(Value::String(s)) => parse_scope(s)
                .map(Some)
                .ok_or_else(|| self.loc.err("scope", format!("unknown scope {s:?}"))),
            Some(_) => u8::try_from(self.req_u32("scope")?)
                .map(Some)
                .map_err(|_| self.loc.err("scope", "out of range")),
        }
    }

    fn req_u32(&self, field: &str) -> Result<u32, FibError> {
        self.u32(field)?
            .ok_or_else(|| self.loc.err(field, "missing"))
    }

    fn ip(&self, field: &str) -> Result<Option<IpAddr>, FibError> {
        match self.str(field)? {
            None => Ok(None),
            Some(s) => s
                .parse()
                .map(Some)
                .map_err(|_| self.loc.err(field, format!("invalid IP address {s:?}"))),
        }
    }

    fn mac(&self, field: &str) -> Result<Option<[u8; 6]>, FibError> {
        match self.str(field)? {
            None => Ok(None),
            Some(s) => parse_mac(s)
                .map(Some)
                .ok_or_else(|| self.loc.err(field, format!("invalid MAC address {s:?}"))),
        }
    }

    fn prefix(&self, field: &str, text: &str) -> Result<Prefix, FibError> {
        parse_prefix(text).ok_or_else(|| self.loc.err(field, format!("invalid prefix {text:?}")))
    }

    fn list(&self, field: &str) -> Result<&'a [Value], FibError> {
        match self.get(field) {
            None => Ok(&[]),
            Some(Value::Array(a)) => Ok(a),
            Some(v) => Err(self.loc.err(field, format!("expected a list, found {v}"))),
        }
    }
}

fn parse_uint(s: &str) -> Option<u64> {
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => s.parse().ok(),
    }
}

fn parse_mac(s: &str) -> Option<[u8; 6]> {
    let mut mac = [0u8; 6];
    let mut parts = s.split(':');
    for b in &mut mac {
        let p = parts.next()?;
        if p.is_empty() || p.len() > 2 {
            return None;
        }
        *b = u8::from_str_radix(p, 16).ok()?;
    }
    parts.next().is_none().then_some(mac)
}

/// `a.b.c.d/len`, `x::y/len`, a bare address (host prefix).
fn parse_prefix(s: &str) -> Option<Prefix> {
    let (addr, len) = match s.split_once('/') {
        Some((a, l)) => (a.parse::<IpAddr>().ok()?, Some(l.parse::<u8>().ok()?)),
        None => (s.parse::<IpAddr>().ok()?, None),
    };
    let max = if addr.is_ipv4() { 32 } else { 128 };
    let len = len.unwrap_or(max);
    (len <= max).then_some(Prefix { addr, len })
}

fn parse_table(s: &str) -> Option<u32> {
    match s {
        "main" => Some(RT_TABLE_MAIN),
        "local" => Some(RT_TABLE_LOCAL),
        "default" => Some(RT_TABLE_DEFAULT),
        _ => parse_uint(s).and_then(|n| u32::try_from(n).ok()),
    }
}

fn parse_scope(s: &str) -> Option<u8> {
    match s {
        "global" | "universe" => Some(RT_SCOPE_UNIVERSE),
        "site" => Some(RT_SCOPE_SITE),
        "link" => Some(RT_SCOPE_LINK),
        "host" => Some(RT_SCOPE_HOST),
        "nowhere" => Some(RT_SCOPE_NOWHERE),
        _ => s.parse().ok(),
    }
}

fn parse_port_range(v: &Value) -> Option<(u16, u16)> {
    match v {
        Value::Number(n) => {
            let p = u16::try_from(n.as_u64()?).ok()?;
            Some((p, p))
        }
        Value::String(s) => match s.split_once('-') {
            Some((a, b)) => Some((a.parse().ok()?, b.parse().ok()?)),
            None => {
                let p = s.parse().ok()?;
                Some((p, p))
            }
        },
        _ => None,
    }
}

fn parse_ipproto(v: &Value) -> Option<u8> {
    match v {
        Value::Number(n) => u8::try_from(n.as_u64()?).ok(),
        Value::String(s) => match s.as_str() {
            "icmp" => Some(1),
            "tcp" => Some(6),
            "udp" => Some(17),
            "ipv6-icmp" | "icmpv6" => Some(58),
            "sctp" => Some(132),
            "udplite" => Some(136),
            _ => parse_uint(s).and_then(|n| u8::try_from(n).ok()),
        },
        _ => None,
    }
}

// ---------------------------------------------------------------------------------------------
// The user file format

impl Fib {
    /// Reads a FIB description file (see the module docs for the format).
    pub fn from_json_file(path: &std::path::Path) -> Result<Fib, FibError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| FibError::Io {
            path: shown.clone(),
            source,
        })?;
        Fib::from_json_str(&shown, &text)
    }

    /// Parses a FIB description; `path` only names the input in errors.
    pub fn from_json_str(path: &str, text: &str) -> Result<Fib, FibError> {
        let root = parse_json(path, text)?;
        let Some(obj) = root.as_object() else {
            return Err(top_err(path, "(top level)", "expected an object"));
        };
        const TOP: &[&str] = &["interfaces", "routes", "neighbours", "rules", "auto_routes"];
        for key in obj.keys() {
            if !TOP.contains(&key.as_str()) {
                return Err(top_err(
                    path,
                    key,
                    format!("unknown field (known: {})", TOP.join(", ")),
                ));
            }
        }
        let list = |name: &str| -> Result<&[Value], FibError> {
            match obj.get(name) {
                None | Some(Value::Null) => Ok(&[]),
                Some(Value::Array(a)) => Ok(a),
                Some(_) => Err(top_err(path, name, "expected a list")),
            }
        };
        let auto_routes = match obj.get("auto_routes") {
            None => true,
            Some(Value::Bool(b)) => *b,
            Some(_) => return Err(top_err(path, "auto_routes", "expected true or false")),
        };

        let mut fib = Fib::default();
        for (index, v) in list("interfaces")?.iter().enumerate() {
            let e = Entry::new(
                Loc {
                    path,
                    list: "interfaces",
                    index,
                },
                v,
            )?;
            let iface = parse_user_interface(&e)?;
            if fib.interfaces.iter().any(|i| i.ifindex == iface.ifindex) {
                return Err(e
                    .loc
                    .err("ifindex", format!("duplicate ifindex {}", iface.ifindex)));
            }
            if fib.interfaces.iter().any(|i| i.name == iface.name) {
                return Err(e
                    .loc
                    .err("name", format!("duplicate name {:?}", iface.name)));
            }
            fib.interfaces.push(iface);
        }
        fib.interfaces.sort_by_key(|i| i.ifindex);
        if auto_routes {
            fib.add_address_routes();
        }
        for (index, v) in list("routes")?.iter().enumerate() {
            let e = Entry::new(
                Loc {
                    path,
                    list: "routes",
                    index,
                },
                v,
            )?;
            let route = parse_user_route(&e, &fib)?;
            fib.routes.push(route);
        }
        for (index, v) in list("neighbours")?.iter().enumerate() {
            let e = Entry::new(
                Loc {
                    path,
                    list: "neighbours",
                    index,
                },
                v,
            )?;
            e.check_known(&["ip", "mac", "dev", "state"])?;
            let ip = e.ip("ip")?.ok_or_else(|| e.loc.err("ip", "missing"))?;
            let dev = resolve_dev(&e, "dev", &fib)?.ok_or_else(|| e.loc.err("dev", "missing"))?;
            let state = match e.str("state")? {
                None => NudState::Permanent,
                Some(s) => NudState::parse(s)
                    .ok_or_else(|| e.loc.err("state", format!("unknown neighbour state {s:?}")))?,
            };
            let mac = match e.mac("mac")? {
                Some(m) => m,
                None if state.is_valid() => return Err(e.loc.err("mac", "missing")),
                None => [0; 6],
            };
            fib.neighbours.push(Neighbour {
                ip,
                mac,
                dev,
                state,
            });
        }
        let mut v4 = Vec::new();
        let mut v6 = Vec::new();
        for (index, v) in list("rules")?.iter().enumerate() {
            let e = Entry::new(
                Loc {
                    path,
                    list: "rules",
                    index,
                },
                v,
            )?;
            let (family, rule) = parse_user_rule(&e)?;
            if family != Some(AF_INET6) {
                v4.push(rule.clone());
            }
            if family != Some(AF_INET) {
                v6.push(rule);
            }
        }
        fib.rules_v4 = custom_rules(v4, default_rules_v4());
        fib.rules_v6 = custom_rules(v6, default_rules_v6());
        Ok(fib)
    }

    /// The routes the kernel adds for the addresses of up interfaces: local (and IPv4
    /// broadcast) routes in table local, connected prefixes in main.
    fn add_address_routes(&mut self) {
        let mut routes = Vec::new();
        for iface in self.interfaces.iter().filter(|i| i.up) {
            let lo = iface.name == "lo";
            for a in &iface.addrs {
                let base = Route {
                    table: RT_TABLE_LOCAL,
                    dst: Prefix::new(a.addr, if a.addr.is_ipv4() { 32 } else { 128 }),
                    kind: RouteType::Local,
                    gateway: None,
                    dev: Some(iface.ifindex),
                    metric: 0,
                    prefsrc: None,
                    scope: RT_SCOPE_HOST,
                    mtu: 0,
                    mtu_lock: false,
                    encap: false,
                    dead: false,
                };
                match a.addr {
                    IpAddr::V4(v4) => {
                        let primary = iface
                            .addrs
                            .iter()
                            .find(|p| {
                                p.addr.is_ipv4()
                                    && !p.secondary
                                    && Prefix::new(p.addr, p.prefix_len).contains(a.addr)
                            })
                            .map_or(a.addr, |p| p.addr);
                        routes.push(Route {
                            prefsrc: Some(primary),
                            ..base.clone()
                        });
                        if a.secondary {
                            continue;
                        }
                        let net = u32::from(v4) & mask32(a.prefix_len);
                        if a.prefix_len < 32 {
                            routes.push(Route {
                                table: if lo { RT_TABLE_LOCAL } else { RT_TABLE_MAIN },
                                dst: Prefix::new(IpAddr::V4(Ipv4Addr::from(net)), a.prefix_len),
                                kind: if lo {
                                    RouteType::Local
                                } else {
                                    RouteType::Unicast
                                },
                                prefsrc: Some(a.addr),
                                scope: if lo { RT_SCOPE_HOST } else { RT_SCOPE_LINK },
                                ..base.clone()
                            });
                        }
                        if a.prefix_len < 31 {
                            let bcast = net | !mask32(a.prefix_len);
                            routes.push(Route {
                                dst: Prefix::new(IpAddr::V4(Ipv4Addr::from(bcast)), 32),
                                kind: RouteType::Broadcast,
                                prefsrc: Some(a.addr),
                                scope: RT_SCOPE_LINK,
                                ..base.clone()
                            });
                        }
                    }
                    IpAddr::V6(v6) => {
                        routes.push(base.clone());
                        if a.prefix_len < 128 {
                            let net = u128::from(v6) & mask128(a.prefix_len);
                            routes.push(Route {
                                table: RT_TABLE_MAIN,
                                dst: Prefix::new(IpAddr::V6(Ipv6Addr::from(net)), a.prefix_len),
                                kind: RouteType::Unicast,
                                metric: 256,
                                scope: RT_SCOPE_UNIVERSE,
                                ..base.clone()
                            });
                        }
                    }
                }
            }
        }
        self.routes.extend(routes);
    }

    /// The routing state of a network namespace just created: the loopback device alone
    /// (ifindex 1, MTU 65536, down, no addresses, forwarding off), no routes, no neighbours,
    /// the default rules. What bpfemu answers from when no FIB is given, and where `diff`
    /// runs the kernel side then.
    pub fn fresh_netns() -> Fib {
        Fib {
            interfaces: vec![Interface {
                ifindex: 1,
                name: "lo".into(),
                mac: [0; 6],
                mtu: 65536,
                mtu6: None,
                up: false,
                forwarding_v4: false,
                forwarding_v6: false,
                addrs: Vec::new(),
            }],
            ..Fib::default()
        }
    }

    pub fn interface(&self, ifindex: u32) -> Option<&Interface> {
        self.interfaces.iter().find(|i| i.ifindex == ifindex)
    }

    pub fn interface_by_name(&self, name: &str) -> Option<&Interface> {
        self.interfaces.iter().find(|i| i.name == name)
    }
}

fn custom_rules(rules: Vec<Rule>, defaults: Vec<Rule>) -> Option<Vec<Rule>> {
    (!rules.is_empty() && rules != defaults).then_some(rules)
}

fn resolve_dev(e: &Entry<'_>, field: &str, fib: &Fib) -> Result<Option<u32>, FibError> {
    match e.get(field) {
        None => Ok(None),
        Some(Value::String(name)) => fib
            .interface_by_name(name)
            .map(|i| Some(i.ifindex))
            .ok_or_else(|| e.loc.err(field, format!("no interface named {name:?}"))),
        Some(Value::Number(n)) => match n.as_u64().and_then(|n| u32::try_from(n).ok()) {
            Some(ifindex) if fib.interface(ifindex).is_some() => Ok(Some(ifindex)),
            _ => Err(e.loc.err(field, format!("no interface with ifindex {n}"))),
        },
        Some(v) => Err(e
            .loc
            .err(field, format!("expected an ifindex or a name, found {v}"))),
    }
}

fn parse_user_interface(e: &Entry<'_>) -> Result<Interface, FibError> {
    e.check_known(&[
        "ifindex",
        "name",
        "mac",
        "mtu",
        "mtu6",
        "up",
        "forwarding",
        "forwarding_v4",
        "forwarding_v6",
        "addrs",
    ])?;
    let ifindex = e.req_u32("ifindex")?;
    if ifindex == 0 {
        return Err(e.loc.err("ifindex", "must be positive"));
    }
    let forwarding = e.bool("forwarding")?.unwrap_or(true);
    let mut iface = Interface {
        ifindex,
        name: e
            .str("name")?
            .map_or_else(|| format!("if{ifindex}"), str::to_string),
        mac: e.mac("mac")?.unwrap_or([0; 6]),
        mtu: e.u32("mtu")?.unwrap_or(1500),
        mtu6: e.u32("mtu6")?,
        up: e.bool("up")?.unwrap_or(true),
        forwarding_v4: e.bool("forwarding_v4")?.unwrap_or(forwarding),
        forwarding_v6: e.bool("forwarding_v6")?.unwrap_or(forwarding),
        addrs: Vec::new(),
    };
    for (i, v) in e.list("addrs")?.iter().enumerate() {
        let field = format!("addrs[{i}]");
        let (text, obj) = match v {
            Value::String(s) => (s.as_str(), None),
            Value::Object(o) => match o.get("addr") {
                Some(Value::String(s)) => (s.as_str(), Some(o)),
                _ => return Err(e.loc.err(&field, "expected an \"addr\" string")),
            },
            _ => return Err(e.loc.err(&field, "expected \"addr/len\" or an object")),
        };
        let p = parse_prefix(text)
            .ok_or_else(|| e.loc.err(&field, format!("invalid address {text:?}")))?;
        let flag = |name: &str| -> Result<bool, FibError> {
            match obj.and_then(|o| o.get(name)) {
                None => Ok(false),
                Some(Value::Bool(b)) => Ok(*b),
                Some(_) => Err(e
                    .loc
                    .err(&format!("{field}.{name}"), "expected true or false")),
            }
        };
        let default_scope = match p.addr {
            IpAddr::V4(a) if a.is_loopback() => RT_SCOPE_HOST,
            _ => RT_SCOPE_UNIVERSE,
        };
        let scope = match obj.and_then(|o| o.get("scope")) {
            None => default_scope,
            Some(Value::String(s)) => parse_scope(s).ok_or_else(|| {
                e.loc
                    .err(&format!("{field}.scope"), format!("unknown scope {s:?}"))
            })?,
            Some(_) => return Err(e.loc.err(&format!("{field}.scope"), "expected a string")),
        };
        // The kernel makes an IPv4 address secondary when a primary of the same subnet exists.
        let auto_secondary = p.is_ipv4()
            && iface.addrs.iter().any(|a| {
                !a.secondary
                    && a.addr.is_ipv4()
                    && a.prefix_len == p.len
                    && Prefix::new(a.addr, a.prefix_len).contains(p.addr)
            });
        iface.addrs.push(IfAddr {
            addr: p.addr,
            prefix_len: p.len,
            scope,
            secondary: flag("secondary")? || auto_secondary,
            tentative: flag("tentative")?,
            deprecated: flag("deprecated")?,
            temporary: flag("temporary")?,
        });
    }
    Ok(iface)
}

fn parse_user_route(e: &Entry<'_>, fib: &Fib) -> Result<Route, FibError> {
    e.check_known(&[
        "dst", "type", "via", "dev", "metric", "table", "src", "scope", "mtu", "mtu_lock", "encap",
        "dead",
    ])?;
    let dst_text = e.req_str("dst")?;
    let kind = match e.str("type")? {
        None => RouteType::Unicast,
        Some(s) => RouteType::parse(s)
            .ok_or_else(|| e.loc.err("type", format!("unknown route type {s:?}")))?,
    };
    let gateway = e.ip("via")?;
    let dst = if dst_text == "default" {
        let v6 = gateway.is_some_and(|g| g.is_ipv6()) && !e.has("family");
        Prefix::new(
            if v6 {
                IpAddr::V6(Ipv6Addr::UNSPECIFIED)
            } else {
                IpAddr::V4(Ipv4Addr::UNSPECIFIED)
            },
            0,
        )
    } else {
        e.prefix("dst", dst_text)?
    };
    let mut dev = resolve_dev(e, "dev", fib)?;
    if dev.is_none()
        && let Some(gw) = gateway
    {
        dev = fib
            .interfaces
            .iter()
            .find(|i| {
                i.addrs
                    .iter()
                    .any(|a| Prefix::new(a.addr, a.prefix_len).contains(gw))
            })
            .map(|i| i.ifindex);
        if dev.is_none() {
            return Err(e.loc.err(
                "via",
                format!("no interface has an address in the subnet of {gw}; give \"dev\""),
            ));
        }
    }
    if !kind.is_reject() && dev.is_none() {
        return Err(e
            .loc
            .err("dev", "a route of this type needs \"dev\" or \"via\""));
    }
    if let Some(gw) = gateway
        && gw.is_ipv4()
        && !dst.is_ipv4()
    {
        return Err(e.loc.err("via", "an IPv6 route needs an IPv6 gateway"));
    }
    let prefsrc = e.ip("src")?;
    if let Some(src) = prefsrc
        && src.is_ipv4() != dst.is_ipv4()
    {
        return Err(e.loc.err("src", "not of the destination's family"));
    }
    let table = e.table()?.unwrap_or(RT_TABLE_MAIN);
    let default_scope = match kind {
        RouteType::Local => RT_SCOPE_HOST,
        RouteType::Broadcast => RT_SCOPE_LINK,
        RouteType::Unicast if gateway.is_none() && dst.is_ipv4() => RT_SCOPE_LINK,
        _ => RT_SCOPE_UNIVERSE,
    };
    let scope = e.scope()?.unwrap_or(default_scope);
    Ok(Route {
        table,
        dst,
        kind,
        gateway,
        dev,
        metric: e
            .u32("metric")?
            .unwrap_or(if dst.is_ipv4() { 0 } else { 1024 }),
        prefsrc,
        scope,
        mtu: e.u32("mtu")?.unwrap_or(0),
        mtu_lock: e.bool("mtu_lock")?.unwrap_or(false),
        encap: e.bool("encap")?.unwrap_or(false),
        dead: e.bool("dead")?.unwrap_or(false),
    })
}

/// A rule from either format; the family when the entry pins one.
fn parse_rule_common(
    e: &Entry<'_>,
    src_key: &str,
    dst_key: &str,
) -> Result<(Option<u8>, Rule), FibError> {
    let mut family = match e.str("family")? {
        None => None,
        Some("inet") => Some(AF_INET),
        Some("inet6") => Some(AF_INET6),
        Some(s) => {
            return Err(e.loc.err(
                "family",
                format!("expected \"inet\" or \"inet6\", found {s:?}"),
            ));
        }
    };
    let mut prefix = |key: &str, len_key: &str| -> Result<Option<Prefix>, FibError> {
        let Some(text) = e.str(key)? else {
            return Ok(None);
        };
        if text == "all" {
            return Ok(None);
        }
        let mut p = e.prefix(key, text)?;
        if let Some(len) = e.u32(len_key)? {
            p.len = u8::try_from(len).map_err(|_| e.loc.err(len_key, "out of range"))?;
        }
        let f = if p.is_ipv4() { AF_INET } else { AF_INET6 };
        if family.is_some_and(|x| x != f) {
            return Err(e.loc.err(key, "not of the rule's family"));
        }
        family = Some(f);
        Ok(Some(p))
    };
    let src = prefix(src_key, "srclen")?;
    let dst = prefix(dst_key, "dstlen")?;
    let priority = e.req_u32("priority")?;
    let action = match e.str("action")? {
        None | Some("table") | Some("lookup") | Some("to_tbl") => {
            let table = e.table()?.ok_or_else(|| e.loc.err("table", "missing"))?;
            RuleAction::Table(if table == 0 { RT_TABLE_MAIN } else { table })
        }
        Some("blackhole") => RuleAction::Blackhole,
        Some("unreachable") => RuleAction::Unreachable,
        Some("prohibit") => RuleAction::Prohibit,
        Some(s) => {
            return Err(e
                .loc
                .err("action", format!("unsupported rule action {s:?}")));
        }
    };
    let fwmark = e.u32("fwmark")?;
    let fwmask = e.u32("fwmask")?;
    let port = |key: &str| -> Result<Option<(u16, u16)>, FibError> {
        match e.get(key) {
            None => Ok(None),
            Some(v) => parse_port_range(v)
                .map(Some)
                .ok_or_else(|| e.loc.err(key, format!("invalid port or range {v}"))),
        }
    };
    let ipproto = match e.get("ipproto") {
        None => None,
        Some(v) => Some(
            parse_ipproto(v)
                .ok_or_else(|| e.loc.err("ipproto", format!("unknown protocol {v}")))?,
        ),
    };
    Ok((
        family,
        Rule {
            priority,
            invert: e.has("not") && e.obj.get("not") != Some(&Value::Bool(false)),
            src,
            dst,
            iif: e.str("iif")?.map(str::to_string),
            oif: e.str("oif")?.map(str::to_string),
            fwmark: fwmark.unwrap_or(0),
            fwmask: fwmask.unwrap_or(if fwmark.is_some() { u32::MAX } else { 0 }),
            ipproto,
            sport: port("sport")?,
            dport: port("dport")?,
            action,
        },
    ))
}

fn parse_user_rule(e: &Entry<'_>) -> Result<(Option<u8>, Rule), FibError> {
    e.check_known(&[
        "family", "priority", "action", "table", "from", "to", "iif", "oif", "fwmark", "fwmask",
        "ipproto", "sport", "dport", "not",
    ])?;
    parse_rule_common(e, "from", "to")
}

// ---------------------------------------------------------------------------------------------
// `ip -j` output

/// The `ip -j` output [`Fib::from_iproute_json`] reads. Each field is the JSON text of one
/// command.
#[derive(Clone, Copy, Debug, Default)]
pub struct IprouteJson<'a> {
    /// `ip -j addr show` (or `ip -j link show`, which has no addresses).
    pub links: &'a str,
    /// `ip -j -4 route show table all`.
    pub routes_v4: &'a str,
    /// `ip -j -6 route show table all`.
    pub routes_v6: &'a str,
    /// `ip -j neigh show nud all` (both families).
    pub neighbours: &'a str,
    /// `ip -j -4 rule show`; `None`: the default rules.
    pub rules_v4: Option<&'a str>,
    /// `ip -j -6 rule show`; `None`: the default rules.
    pub rules_v6: Option<&'a str>,
    /// `ip -j netconf show` (both families): per-interface forwarding. `None`: forwarding is
    /// on everywhere.
    pub netconf: Option<&'a str>,
}

const CMD_LINKS: &str = "ip -j addr show";
const CMD_ROUTES_V4: &str = "ip -j -4 route show table all";
const CMD_ROUTES_V6: &str = "ip -j -6 route show table all";
const CMD_NEIGH: &str = "ip -j neigh show nud all";
const CMD_RULES_V4: &str = "ip -j -4 rule show";
const CMD_RULES_V6: &str = "ip -j -6 rule show";
const CMD_NETCONF: &str = "ip -j netconf show";

fn json_list<'a>(path: &str, v: &'a Value) -> Result<&'a [Value], FibError> {
    match v {
        Value::Array(a) => Ok(a),
        _ => Err(top_err(path, "(top level)", "expected a list")),
    }
}

impl Fib {
    /// Builds the model from `ip -j` output, so that a real router can be snapshotted.
    pub fn from_iproute_json(dump: &IprouteJson<'_>) -> Result<Fib, FibError> {
        let mut fib = Fib::default();

        let links = parse_json(CMD_LINKS, dump.links)?;
        for (index, v) in json_list(CMD_LINKS, &links)?.iter().enumerate() {
            let e = Entry::new(
                Loc {
                    path: CMD_LINKS,
                    list: "links",
                    index,
                },
                v,
            )?;
            let ifindex = e.req_u32("ifindex")?;
            let name = e.req_str("ifname")?.to_string();
            let flags: Vec<&str> = e.list("flags")?.iter().filter_map(Value::as_str).collect();
            // Tunnels print an IP address here; only a 6-byte address is a MAC.
            let mac = e.str("address")?.and_then(parse_mac).unwrap_or([0; 6]);
            let mut iface = Interface {
                ifindex,
                name,
                mac,
                mtu: e.u32("mtu")?.unwrap_or(1500),
                mtu6: None,
                up: flags.contains(&"UP"),
                forwarding_v4: dump.netconf.is_none(),
                forwarding_v6: dump.netconf.is_none(),
                addrs: Vec::new(),
            };
            for (i, a) in e.list("addr_info")?.iter().enumerate() {
                let ae = Entry::new(
                    Loc {
                        path: CMD_LINKS,
                        list: "links",
                        index,
                    },
                    a,
                )?;
                let field = |f: &str| format!("addr_info[{i}].{f}");
                let Some(family) = ae.str("family")? else {
                    continue;
                };
                if family != "inet" && family != "inet6" {
                    continue;
                }
                let addr = ae
                    .ip("local")
                    .map_err(|_| e.loc.err(&field("local"), "invalid IP address"))?
                    .ok_or_else(|| e.loc.err(&field("local"), "missing"))?;
                let prefix_len = ae
                    .u32("prefixlen")?
                    .and_then(|n| u8::try_from(n).ok())
                    .ok_or_else(|| e.loc.err(&field("prefixlen"), "missing or invalid"))?;
                let scope = match ae.get("scope") {
                    None => RT_SCOPE_UNIVERSE,
                    Some(Value::String(s)) => parse_scope(s).ok_or_else(|| {
                        e.loc.err(&field("scope"), format!("unknown scope {s:?}"))
                    })?,
                    Some(Value::Number(n)) => {
                        n.as_u64().and_then(|n| u8::try_from(n).ok()).unwrap_or(0)
                    }
                    Some(_) => return Err(e.loc.err(&field("scope"), "expected a string")),
                };
                let flag = |f: &str| ae.obj.get(f).is_some_and(|v| v != &Value::Bool(false));
                iface.addrs.push(IfAddr {
                    addr,
                    prefix_len,
                    scope,
                    secondary: flag("secondary"),
                    tentative: flag("tentative") || flag("dadfailed"),
                    deprecated: flag("deprecated"),
                    temporary: flag("temporary"),
                });
            }
            fib.interfaces.push(iface);
        }
        fib.interfaces.sort_by_key(|i| i.ifindex);

        if let Some(text) = dump.netconf {
            let v = parse_json(CMD_NETCONF, text)?;
            for (index, entry) in json_list(CMD_NETCONF, &v)?.iter().enumerate() {
                let e = Entry::new(
                    Loc {
                        path: CMD_NETCONF,
                        list: "netconf",
                        index,
                    },
                    entry,
                )?;
                let Some(name) = e.str("interface")? else {
                    continue;
                };
                let forwarding = match e.get("forwarding") {
                    Some(Value::Bool(b)) => *b,
                    Some(Value::String(s)) => s == "on",
                    Some(Value::Number(n)) => n.as_u64() != Some(0),
                    _ => false,
                };
                let family = e.str("family")?.unwrap_or("");
                if let Some(iface) = fib.interfaces.iter_mut().find(|i| i.name == name) {
                    match family {
                        "inet" => iface.forwarding_v4 = forwarding,
                        "inet6" => iface.forwarding_v6 = forwarding,
                        _ => {}
                    }
                }
            }
        }

        for (cmd, text, v6) in [
            (CMD_ROUTES_V4, dump.routes_v4, false),
            (CMD_ROUTES_V6, dump.routes_v6, true),
        ] {
            let v = parse_json(cmd, text)?;
            for (index, entry) in json_list(cmd, &v)?.iter().enumerate() {
                let e = Entry::new(
                    Loc {
                        path: cmd,
                        list: "routes",
                        index,
                    },
                    entry,
                )?;
                fib.routes.push(parse_ip_route(&e, &fib, v6)?);
            }
        }

        let v = parse_json(CMD_NEIGH, dump.neighbours)?;
        for (index, entry) in json_list(CMD_NEIGH, &v)?.iter().enumerate() {
            let e = Entry::new(
                Loc {
                    path: CMD_NEIGH,
                    list: "neighbours",
                    index,
                },
                entry,
            )?;
            let ip = e.ip("dst")?.ok_or_else(|| e.loc.err("dst", "missing"))?;
            let Some(dev_name) = e.str("dev")? else {
                continue;
            };
            let dev = fib
                .interface_by_name(dev_name)
                .ok_or_else(|| e.loc.err("dev", format!("no interface named {dev_name:?}")))?
                .ifindex;
            let states = e.list("state")?;
            let mut state = NudState::None;
            for s in states.iter().filter_map(Value::as_str) {
                if let Some(st) = NudState::parse(s) {
                    // Several bits may be printed; any valid one makes the entry valid.
                    if st.is_valid() || state == NudState::None {
                        state = st;
                    }
                }
            }
            let mac = e.str("lladdr")?.and_then(parse_mac).unwrap_or([0; 6]);
            fib.neighbours.push(Neighbour {
                ip,
                mac,
                dev,
                state,
            });
        }

        for (cmd, text, v6) in [
            (CMD_RULES_V4, dump.rules_v4, false),
            (CMD_RULES_V6, dump.rules_v6, true),
        ] {
            let Some(text) = text else { continue };
            let v = parse_json(cmd, text)?;
            let mut rules = Vec::new();
            for (index, entry) in json_list(cmd, &v)?.iter().enumerate() {
                let e = Entry::new(
                    Loc {
                        path: cmd,
                        list: "rules",
                        index,
                    },
                    entry,
                )?;
                e.reject(&[
                    "tos",
                    "dsfield",
                    "uidrange",
                    "suppress_prefixlen",
                    "suppress_ifgroup",
                    "l3mdev",
                    "tun_id",
                    "goto",
                    "flowlabel",
                ])?;
                let (_, rule) = parse_rule_common(&e, "src", "dst")?;
                rules.push(rule);
            }
            if v6 {
                fib.rules_v6 = custom_rules(rules, default_rules_v6());
            } else {
                fib.rules_v4 = custom_rules(rules, default_rules_v4());
            }
        }
        Ok(fib)
    }

    /// Snapshots a live namespace (`None`: the current one) by running `ip -j`.
    pub fn from_system(netns: Option<&str>) -> Result<Fib, FibError> {
        let run = |cmd: &str| -> Result<String, FibError> {
            let mut args: Vec<&str> = Vec::new();
            if let Some(ns) = netns {
                args.extend(["-n", ns]);
            }
            args.extend(cmd.split_whitespace().skip(1));
            let shown = format!("ip {}", args.join(" "));
            let out = std::process::Command::new("ip")
                .args(&args)
                .output()
                .map_err(|e| FibError::Command {
                    command: shown.clone(),
                    message: e.to_string(),
                })?;
            if !out.status.success() {
                return Err(FibError::Command {
                    command: shown,
                    message: String::from_utf8_lossy(&out.stderr).trim().to_string(),
                });
            }
            let text = String::from_utf8_lossy(&out.stdout).trim().to_string();
            Ok(if text.is_empty() {
                "[]".to_string()
            } else {
                text
            })
        };
        let links = run(CMD_LINKS)?;
        let routes_v4 = run(CMD_ROUTES_V4)?;
        let routes_v6 = run(CMD_ROUTES_V6)?;
        let neighbours = run(CMD_NEIGH)?;
        let rules_v4 = run(CMD_RULES_V4)?;
        let rules_v6 = run(CMD_RULES_V6)?;
        let netconf = run(CMD_NETCONF)?;
        Fib::from_iproute_json(&IprouteJson {
            links: &links,
            routes_v4: &routes_v4,
            routes_v6: &routes_v6,
            neighbours: &neighbours,
            rules_v4: Some(&rules_v4),
            rules_v6: Some(&rules_v6),
            netconf: Some(&netconf),
        })
    }
}

fn parse_ip_route(e: &Entry<'_>, fib: &Fib, v6: bool) -> Result<Route, FibError> {
    e.reject(&["nhid", "from", "tos", "dsfield"])?;
    let kind = match e.str("type")? {
        None => RouteType::Unicast,
        Some(s) => RouteType::parse(s)
            .ok_or_else(|| e.loc.err("type", format!("unsupported route type {s:?}")))?,
    };
    let dst_text = e.req_str("dst")?;
    let dst = if dst_text == "default" {
        Prefix::new(
            if v6 {
                IpAddr::V6(Ipv6Addr::UNSPECIFIED)
            } else {
                IpAddr::V4(Ipv4Addr::UNSPECIFIED)
            },
            0,
        )
    } else {
        e.prefix("dst", dst_text)?
    };
    // Multipath: the first nexthop (see the module docs).
    let nh_entry;
    let nh: &Entry<'_> = match e.list("nexthops")?.first() {
        Some(first) => {
            nh_entry = Entry::new(e.loc, first)?;
            &nh_entry
        }
        None => e,
    };
    let gateway = match nh.ip("gateway")? {
        Some(g) => Some(g),
        None => match nh.get("via") {
            Some(Value::Object(via)) => match via.get("host").and_then(Value::as_str) {
                Some(h) => Some(
                    h.parse()
                        .map_err(|_| e.loc.err("via.host", format!("invalid IP address {h:?}")))?,
                ),
                None => None,
            },
            _ => None,
        },
    };
    let dev = match nh.str("dev")? {
        None => None,
        Some(name) => Some(
            fib.interface_by_name(name)
                .ok_or_else(|| e.loc.err("dev", format!("no interface named {name:?}")))?
                .ifindex,
        ),
    };
    let flags: Vec<&str> = nh.list("flags")?.iter().filter_map(Value::as_str).collect();
    let mut mtu = 0;
    let mut mtu_lock = false;
    for m in e.list("metrics")? {
        if let Some(obj) = m.as_object() {
            if let Some(n) = obj.get("mtu").and_then(Value::as_u64) {
                mtu = n as u32;
            }
            if let Some(Value::Array(locks)) = obj.get("lock")
                && locks.iter().any(|l| l.as_str() == Some("mtu"))
            {
                mtu_lock = true;
            }
        }
    }
    let table = e.table()?.unwrap_or(RT_TABLE_MAIN);
    let scope = e.scope()?.unwrap_or(RT_SCOPE_UNIVERSE);
    Ok(Route {
        table,
        dst,
        kind,
        gateway,
        dev,
        metric: e.u32("metric")?.unwrap_or(0),
        prefsrc: e.ip("prefsrc")?,
        scope,
        mtu,
        mtu_lock,
        encap: nh.has("encap") || e.has("encap"),
        dead: flags.contains(&"dead"),
    })
}

// ---------------------------------------------------------------------------------------------
// The helper

fn rd_u16(p: &[u8; 64], off: usize) -> u16 {
    u16::from_ne_bytes([p[off], p[off + 1]])
}

fn rd_u32(p: &[u8; 64], off: usize) -> u32 {
    u32::from_ne_bytes(p[off..off + 4].try_into().expect("4 bytes"))
}

fn wr_u16(p: &mut [u8; 64], off: usize, v: u16) {
    p[off..off + 2].copy_from_slice(&v.to_ne_bytes());
}

fn wr_u32(p: &mut [u8; 64], off: usize, v: u32) {
    p[off..off + 4].copy_from_slice(&v.to_ne_bytes());
}

fn rd_v4(p: &[u8; 64], off: usize) -> Ipv4Addr {
    Ipv4Addr::new(p[off], p[off + 1], p[off + 2], p[off + 3])
}

fn rd_v6(p: &[u8; 64], off: usize) -> Ipv6Addr {
    let b: [u8; 16] = p[off..off + 16].try_into().expect("16 bytes");
    Ipv6Addr::from(b)
}

/// The flow a lookup matches rules against (`struct flowi4`/`flowi6`).
struct Flow {
    iif: u32,
    oif: u32,
    daddr: IpAddr,
    saddr: IpAddr,
    proto: u8,
    /// Host order.
    sport: u16,
    dport: u16,
    mark: u32,
}

impl Flow {
    /// The flow of a lookup from the params struct: with `BPF_FIB_LOOKUP_OUTPUT` the given
    /// interface is the output one (input: loopback), else the input one.
    fn from_params(p: &[u8; 64], flags: u32, ifindex: u32, daddr: IpAddr, saddr: IpAddr) -> Flow {
        let (iif, oif) = if flags & BPF_FIB_LOOKUP_OUTPUT != 0 {
            (1, ifindex)
        } else {
            (ifindex, 0)
        };
        let mark = if flags & BPF_FIB_LOOKUP_MARK != 0 {
            rd_u32(p, offsets::MARK)
        } else {
            0
        };
        Flow {
            iif,
            oif,
            daddr,
            saddr,
            proto: p[offsets::L4_PROTOCOL],
            sport: u16::from_be_bytes([p[offsets::SPORT], p[offsets::SPORT + 1]]),
            dport: u16::from_be_bytes([p[offsets::DPORT], p[offsets::DPORT + 1]]),
            mark,
        }
    }
}

/// `bpf_xdp_fib_lookup`: runs the lookup on the raw `struct bpf_fib_lookup` in `params` and
/// returns what the helper returns (a `BPF_FIB_LKUP_RET_*` code or a negative errno), leaving
/// `params` as the kernel leaves it. `plen` is the helper's size argument; `ingress_ifindex` is
/// the receiving interface, which only selects the namespace — the model is one namespace.
pub fn fib_lookup(
    fib: &Fib,
    params: &mut [u8; 64],
    plen: u32,
    flags: u32,
    ingress_ifindex: u32,
) -> i64 {
    let _ = ingress_ifindex;
    if plen < BPF_FIB_LOOKUP_SIZE {
        return -EINVAL;
    }
    if flags & !BPF_FIB_LOOKUP_MASK != 0 {
        return -EINVAL;
    }
    match params[offsets::FAMILY] {
        AF_INET => fib.lookup_v4(params, flags),
        AF_INET6 => fib.lookup_v6(params, flags),
        _ => -EAFNOSUPPORT,
    }
}

/// The tables one IPv4 lookup searches: one, or main and local merged.
#[derive(Clone, Copy)]
struct TableSet([u32; 2]);

impl TableSet {
    const MAIN_AND_LOCAL: TableSet = TableSet([RT_TABLE_MAIN, RT_TABLE_LOCAL]);

    fn one(table: u32) -> TableSet {
        TableSet([table, table])
    }

    fn contains(self, table: u32) -> bool {
        self.0.contains(&table)
    }
}

/// `bpf_fib_set_fwd_params`.
/// The table a `BPF_FIB_LOOKUP_DIRECT` lookup uses: `tbid` with `BPF_FIB_LOOKUP_TBID` (the
/// field is cleared, as the kernel does), else main.
fn take_tbid(p: &mut [u8; 64], flags: u32) -> u32 {
    if flags & BPF_FIB_LOOKUP_TBID == 0 {
        return RT_TABLE_MAIN;
    }
    let tbid = rd_u32(p, offsets::TBID);
    wr_u32(p, offsets::TBID, 0);
    tbid
}

/// `BPF_FIB_LKUP_RET_FRAG_NEEDED`, with `mtu_result` set, when `tot_len` exceeds `mtu`.
fn frag_needed(p: &mut [u8; 64], mtu: u32) -> Option<i64> {
    if u32::from(rd_u16(p, offsets::TOT_LEN)) <= mtu {
        return None;
    }
    wr_u16(p, offsets::MTU_RESULT, mtu as u16);
    Some(BPF_FIB_LKUP_RET_FRAG_NEEDED)
}

fn set_fwd_params(p: &mut [u8; 64], mtu: u32) -> i64 {
    wr_u16(p, offsets::H_VLAN_TCI, 0);
    wr_u16(p, offsets::H_VLAN_PROTO, 0);
    if mtu != 0 {
        wr_u16(p, offsets::MTU_RESULT, mtu as u16);
    }
    BPF_FIB_LKUP_RET_SUCCESS
}

impl Fib {
    /// Writes the next hop's MAC and the egress interface's into `p`; false when the next
    /// hop has no valid neighbour entry.
    fn fill_macs(&self, p: &mut [u8; 64], nh_dev: &Interface, next_hop: IpAddr) -> bool {
        match self.neighbour(nh_dev.ifindex, next_hop) {
            Some(n) if n.state.is_valid() => {
                p[offsets::DMAC..offsets::DMAC + 6].copy_from_slice(&n.mac);
                p[offsets::SMAC..offsets::SMAC + 6].copy_from_slice(&nh_dev.mac);
                true
            }
            _ => false,
        }
    }

    fn neighbour(&self, dev: u32, ip: IpAddr) -> Option<&Neighbour> {
        self.neighbours.iter().find(|n| n.dev == dev && n.ip == ip)
    }

    fn has_table(&self, table: u32, v4: bool) -> bool {
        table == RT_TABLE_MAIN
            || table == RT_TABLE_LOCAL
            || self
                .routes
                .iter()
                .any(|r| r.table == table && r.dst.is_ipv4() == v4)
    }

    /// The tables an IPv4 lookup in `tbid` searches (`fib_get_table`); `None`: no such table.
    fn tables_v4(&self, tbid: u32) -> Option<TableSet> {
        let tbid = if tbid == 0 { RT_TABLE_MAIN } else { tbid };
        if !self.has_table(tbid, true) {
            return None;
        }
        // Until the first custom rule the local table is an alias of main's trie.
        if self.rules_v4.is_none() && (tbid == RT_TABLE_MAIN || tbid == RT_TABLE_LOCAL) {
            return Some(TableSet::MAIN_AND_LOCAL);
        }
        Some(TableSet::one(tbid))
    }

    fn nexthop_live(&self, r: &Route) -> bool {
        !r.dead && r.dev.and_then(|d| self.interface(d)).is_some_and(|i| i.up)
    }

    /// `fib_table_lookup`: the routes whose prefix holds the address, most specific first
    /// (then the lowest metric, then the order given), up to the first usable one. Taken in
    /// that order one by one rather than sorted into a list: a lookup runs per packet, and
    /// the first candidate nearly always answers.
    fn table_lookup_v4(&self, tables: TableSet, flow: &Flow) -> Result<&Route, i32> {
        let rank = |(i, r): (usize, &Route)| (std::cmp::Reverse(r.dst.len), r.metric, i);
        let mut tried = None;
        loop {
            let next = self
                .routes
                .iter()
                .enumerate()
                .filter(|(_, r)| {
                    r.dst.is_ipv4() && tables.contains(r.table) && r.dst.contains(flow.daddr)
                })
                .map(|candidate| (rank(candidate), candidate.1))
                .filter(|(key, _)| tried.is_none_or(|last| *key > last))
                .min_by_key(|(key, _)| *key);
            let Some((key, r)) = next else {
                return Err(E_AGAIN);
            };
            tried = Some(key);
            if let Some(err) = r.kind.v4_error() {
                return Err(err);
            }
            if !self.nexthop_live(r) {
                continue;
            }
            if flow.oif != 0 && r.dev != Some(flow.oif) {
                continue;
            }
            return Ok(r);
        }
    }

    fn rule_matches(&self, rule: &Rule, flow: &Flow) -> bool {
        let ifindex_of = |name: &str| -> Option<u32> {
            self.interface_by_name(name)
                .map(|i| i.ifindex)
                .or((name == "lo").then_some(1))
        };
        let m = (|| {
            if let Some(name) = &rule.iif
                && ifindex_of(name) != Some(flow.iif)
            {
                return false;
            }
            if let Some(name) = &rule.oif
                && ifindex_of(name) != Some(flow.oif)
            {
                return false;
            }
            if (rule.fwmark ^ flow.mark) & rule.fwmask != 0 {
                return false;
            }
            if rule.src.is_some_and(|p| !p.contains(flow.saddr)) {
                return false;
            }
            if rule.dst.is_some_and(|p| !p.contains(flow.daddr)) {
                return false;
            }
            if rule.ipproto.is_some_and(|p| p != flow.proto) {
                return false;
            }
            if rule
                .sport
                .is_some_and(|(lo, hi)| flow.sport < lo || flow.sport > hi)
            {
                return false;
            }
            if rule
                .dport
                .is_some_and(|(lo, hi)| flow.dport < lo || flow.dport > hi)
            {
                return false;
            }
            true
        })();
        m != rule.invert
    }

    fn sorted_rules(rules: &[Rule]) -> Vec<&Rule> {
        let mut sorted: Vec<&Rule> = rules.iter().collect();
        sorted.sort_by_key(|r| r.priority);
        sorted
    }

    /// `fib_lookup`: through the rules, or main+local then default without custom rules.
    fn fib_lookup_v4(&self, flow: &Flow) -> Result<&Route, i32> {
        let Some(rules) = &self.rules_v4 else {
            let mut res = self.table_lookup_v4(TableSet::MAIN_AND_LOCAL, flow);
            if res.is_err() && self.has_table(RT_TABLE_DEFAULT, true) {
                res = self.table_lookup_v4(TableSet::one(RT_TABLE_DEFAULT), flow);
            }
            return res.map_err(|e| if e == E_AGAIN { E_NETUNREACH } else { e });
        };
        for rule in Self::sorted_rules(rules) {
            if !self.rule_matches(rule, flow) {
                continue;
            }
            match rule.action {
                RuleAction::Table(t) => {
                    if let Some(tables) = self.tables_v4(t) {
                        match self.table_lookup_v4(tables, flow) {
                            Err(E_AGAIN) => continue,
                            res => return res,
                        }
                    }
                }
                RuleAction::Blackhole => return Err(E_INVAL),
                RuleAction::Unreachable => return Err(E_NETUNREACH),
                RuleAction::Prohibit => return Err(E_ACCES),
            }
        }
        Err(E_NETUNREACH)
    }

    fn lookup_v4(&self, p: &mut [u8; 64], flags: u32) -> i64 {
        let ifindex = rd_u32(p, offsets::IFINDEX);
        let Some(dev) = self.interface(ifindex) else {
            return -ENODEV;
        };
        if !dev.forwarding_v4 {
            return BPF_FIB_LKUP_RET_FWD_DISABLED;
        }
        let daddr = rd_v4(p, offsets::DST);
        let saddr = rd_v4(p, offsets::SRC);
        let flow = Flow::from_params(p, flags, ifindex, IpAddr::V4(daddr), IpAddr::V4(saddr));
        let res = if flags & BPF_FIB_LOOKUP_DIRECT != 0 {
            match self.tables_v4(take_tbid(p, flags)) {
                None => return BPF_FIB_LKUP_RET_NOT_FWDED,
                Some(tables) => self.table_lookup_v4(tables, &flow),
            }
        } else {
            self.fib_lookup_v4(&flow)
        };
        let route = match res {
            Ok(r) => r,
            Err(E_INVAL) => return BPF_FIB_LKUP_RET_BLACKHOLE,
            Err(E_HOSTUNREACH) => return BPF_FIB_LKUP_RET_UNREACHABLE,
            Err(E_ACCES) => return BPF_FIB_LKUP_RET_PROHIBIT,
            Err(_) => return BPF_FIB_LKUP_RET_NOT_FWDED,
        };
        if route.kind != RouteType::Unicast {
            return BPF_FIB_LKUP_RET_NOT_FWDED;
        }
        let Some(nh_dev) = route.dev.and_then(|d| self.interface(d)) else {
            return BPF_FIB_LKUP_RET_NOT_FWDED;
        };
        // ip_mtu_from_fib_result
        let mtu = if route.mtu_lock && route.mtu != 0 {
            route.mtu
        } else {
            nh_dev.mtu.min(IP_MAX_MTU)
        };
        if let Some(ret) = frag_needed(p, mtu) {
            return ret;
        }
        if route.encap {
            return BPF_FIB_LKUP_RET_UNSUPP_LWT;
        }
        wr_u32(p, offsets::RT_METRIC, route.metric);
        wr_u32(p, offsets::IFINDEX, nh_dev.ifindex);
        if flags & BPF_FIB_LOOKUP_SRC != 0 {
            let src = match route.prefsrc {
                Some(IpAddr::V4(s)) => s,
                _ => {
                    let gw = match route.gateway {
                        Some(IpAddr::V4(g)) => Some(g),
                        _ => None,
                    };
                    self.inet_select_addr(nh_dev, gw, route.scope)
                }
            };
            p[offsets::SRC..offsets::SRC + 4].copy_from_slice(&src.octets());
        }
        let key = match route.gateway {
            Some(IpAddr::V4(g)) => {
                p[offsets::DST..offsets::DST + 4].copy_from_slice(&g.octets());
                IpAddr::V4(g)
            }
            Some(IpAddr::V6(g)) => {
                p[offsets::FAMILY] = AF_INET6;
                p[offsets::DST..offsets::DST + 16].copy_from_slice(&g.octets());
                IpAddr::V6(g)
            }
            None => IpAddr::V4(daddr),
        };
        if flags & BPF_FIB_LOOKUP_SKIP_NEIGH == 0 && !self.fill_macs(p, nh_dev, key) {
            return BPF_FIB_LKUP_RET_NO_NEIGH;
        }
        set_fwd_params(p, mtu)
    }

    /// `inet_select_addr(dev, dst, scope)`.
    fn inet_select_addr(&self, dev: &Interface, dst: Option<Ipv4Addr>, scope: u8) -> Ipv4Addr {
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

    /// `fib6_table_lookup` in one table.
    fn table_lookup_v6(&self, table: u32, oif: u32, daddr: IpAddr) -> Option<&Route> {
        let mut candidates: Vec<&Route> = self
            .routes
            .iter()
            .filter(|r| !r.dst.is_ipv4() && r.table == table && r.dst.contains(daddr))
            .collect();
        candidates.sort_by_key(|r| (std::cmp::Reverse(r.dst.len), r.metric));
        let live = |r: &Route| {
            if r.kind.is_reject() {
                !r.dead
            } else {
                self.nexthop_live(r)
            }
        };
        let score = |r: &Route| if oif == 0 || r.dev == Some(oif) { 2 } else { 0 };
        fn best<'r>(
            routes: &[&'r Route],
            live: &dyn Fn(&Route) -> bool,
            score: &dyn Fn(&Route) -> u8,
        ) -> Option<&'r Route> {
            let mut best: Option<&'r Route> = None;
            for r in routes.iter().copied().filter(|r| live(r)) {
                if best.is_none_or(|b| score(r) > score(b)) {
                    best = Some(r);
                }
            }
            best
        }
        for group in candidates.chunk_by(|a, b| a.dst.len == b.dst.len) {
            // find_rr_leaf: the routes of the lowest metric first, then all the others.
            let split = group
                .iter()
                .position(|r| r.metric != group[0].metric)
                .unwrap_or(group.len());
            if let Some(r) = best(&group[..split], &live, &score)
                .or_else(|| best(&group[split..], &live, &score))
            {
                return Some(r);
            }
        }
        None
    }

    /// `fib6_lookup`.
    fn fib_lookup_v6(&self, oif: u32, flow: &Flow) -> Result<Option<&Route>, i32> {
        let Some(rules) = &self.rules_v6 else {
            return Ok(self
                .table_lookup_v6(RT_TABLE_LOCAL, oif, flow.daddr)
                .or_else(|| self.table_lookup_v6(RT_TABLE_MAIN, oif, flow.daddr)));
        };
        for rule in Self::sorted_rules(rules) {
            if !self.rule_matches(rule, flow) {
                continue;
            }
            match rule.action {
                RuleAction::Table(t) => {
                    if self.has_table(t, false)
                        && let Some(r) = self.table_lookup_v6(t, oif, flow.daddr)
                    {
                        return Ok(Some(r));
                    }
                }
                RuleAction::Blackhole => return Err(E_INVAL),
                RuleAction::Unreachable => return Err(E_NETUNREACH),
                RuleAction::Prohibit => return Err(E_ACCES),
            }
        }
        Ok(None)
    }

    fn lookup_v6(&self, p: &mut [u8; 64], flags: u32) -> i64 {
        let dst = rd_v6(p, offsets::DST);
        let src = rd_v6(p, offsets::SRC);
        if v6_need_strict(dst) || v6_need_strict(src) {
            return BPF_FIB_LKUP_RET_NOT_FWDED;
        }
        let ifindex = rd_u32(p, offsets::IFINDEX);
        let Some(dev) = self.interface(ifindex) else {
            return -ENODEV;
        };
        if !dev.forwarding_v6 {
            return BPF_FIB_LKUP_RET_FWD_DISABLED;
        }
        // The IPv6 table lookups always take the given interface as oif; the flow's oif
        // (for rules) is set only with BPF_FIB_LOOKUP_OUTPUT, as for IPv4.
        let oif = ifindex;
        let flow = Flow::from_params(p, flags, ifindex, IpAddr::V6(dst), IpAddr::V6(src));
        let res = if flags & BPF_FIB_LOOKUP_DIRECT != 0 {
            let tbid = take_tbid(p, flags);
            let tbid = if tbid == 0 { RT_TABLE_MAIN } else { tbid };
            if !self.has_table(tbid, false) {
                return BPF_FIB_LKUP_RET_NOT_FWDED;
            }
            Ok(self.table_lookup_v6(tbid, oif, flow.daddr))
        } else {
            self.fib_lookup_v6(oif, &flow)
        };
        let route = match res {
            Ok(Some(r)) => r,
            _ => return BPF_FIB_LKUP_RET_NOT_FWDED,
        };
        match route.kind {
            RouteType::Unicast => {}
            RouteType::Blackhole => return BPF_FIB_LKUP_RET_BLACKHOLE,
            RouteType::Unreachable => return BPF_FIB_LKUP_RET_UNREACHABLE,
            RouteType::Prohibit => return BPF_FIB_LKUP_RET_PROHIBIT,
            _ => return BPF_FIB_LKUP_RET_NOT_FWDED,
        }
        let Some(nh_dev) = route.dev.and_then(|d| self.interface(d)) else {
            return BPF_FIB_LKUP_RET_NOT_FWDED;
        };
        // ip6_mtu_from_fib6
        let mtu = if route.mtu_lock && route.mtu != 0 {
            route.mtu
        } else {
            nh_dev
                .mtu6
                .unwrap_or(nh_dev.mtu)
                .clamp(IPV6_MIN_MTU, IP6_MAX_MTU)
        };
        if let Some(ret) = frag_needed(p, mtu) {
            return ret;
        }
        if route.encap {
            return BPF_FIB_LKUP_RET_UNSUPP_LWT;
        }
        let mut next = dst;
        if let Some(IpAddr::V6(g)) = route.gateway {
            p[offsets::DST..offsets::DST + 16].copy_from_slice(&g.octets());
            next = g;
        }
        wr_u32(p, offsets::RT_METRIC, route.metric);
        wr_u32(p, offsets::IFINDEX, nh_dev.ifindex);
        if flags & BPF_FIB_LOOKUP_SRC != 0 {
            let chosen = match route.prefsrc {
                Some(IpAddr::V6(s)) => Some(s),
                _ => self.ipv6_dev_get_saddr(nh_dev.ifindex, dst),
            };
            match chosen {
                Some(s) => p[offsets::SRC..offsets::SRC + 16].copy_from_slice(&s.octets()),
                None => return BPF_FIB_LKUP_RET_NO_SRC_ADDR,
            }
        }
        if flags & BPF_FIB_LOOKUP_SKIP_NEIGH == 0 && !self.fill_macs(p, nh_dev, IpAddr::V6(next)) {
            return BPF_FIB_LKUP_RET_NO_NEIGH;
        }
        set_fwd_params(p, mtu)
    }

    /// `ipv6_dev_get_saddr` for a destination of global scope: the RFC 6724 rules over every
    /// interface's addresses, ties going to the first (interfaces in ifindex order, addresses in
    /// list order).
    fn ipv6_dev_get_saddr(&self, dst_ifindex: u32, daddr: Ipv6Addr) -> Option<Ipv6Addr> {
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

/// `rt6_need_strict`: multicast, link-local or loopback.
fn v6_need_strict(a: Ipv6Addr) -> bool {
    a.is_multicast() || a.is_loopback() || (a.segments()[0] & 0xffc0) == 0xfe80
}

fn is_v4_mapped(a: Ipv6Addr) -> bool {
    (u128::from(a) >> 32) == 0xffff
}

fn is_orchid(a: Ipv6Addr) -> bool {
    Prefix::new(IpAddr::V6("2001:10::".parse().expect("literal")), 28).contains(IpAddr::V6(a))
}

/// `__ipv6_addr_src_scope` for unicast addresses.
fn v6_src_scope(a: Ipv6Addr) -> i32 {
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
fn v6_label(a: Ipv6Addr) -> u32 {
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

fn common_prefix(a: Ipv6Addr, b: Ipv6Addr) -> u32 {
    (u128::from(a) ^ u128::from(b)).leading_zeros()
}
