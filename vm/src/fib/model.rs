//! The table model: prefixes, routes, interfaces with their addresses, policy rules, and the
//! routes the kernel adds for addresses.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::*;

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

pub(super) fn mask32(len: u8) -> u32 {
    if len == 0 {
        0
    } else {
        u32::MAX << (32 - len.min(32))
    }
}

pub(super) fn mask128(len: u8) -> u128 {
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
    pub(super) fn parse(s: &str) -> Option<RouteType> {
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
    pub(super) fn v4_error(self) -> Option<i32> {
        match self {
            RouteType::Blackhole => Some(E_INVAL),
            RouteType::Unreachable => Some(E_HOSTUNREACH),
            RouteType::Prohibit => Some(E_ACCES),
            RouteType::Throw => Some(E_AGAIN),
            _ => None,
        }
    }

    pub(super) fn is_reject(self) -> bool {
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
    pub(super) fn table(priority: u32, table: u32) -> Rule {
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

impl Fib {
    /// The routes the kernel adds for the addresses of up interfaces: local (and IPv4
    /// broadcast) routes in table local, connected prefixes in main.
    pub(super) fn add_address_routes(&mut self) {
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
