//! The helper: `bpf_fib_lookup` on the raw params struct, the IPv4 trie walk with policy rules,
//! the IPv6 table lookup, MTU and the return paths.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::*;

pub(super) fn rd_u16(p: &[u8; 64], off: usize) -> u16 {
    u16::from_ne_bytes([p[off], p[off + 1]])
}

pub(super) fn rd_u32(p: &[u8; 64], off: usize) -> u32 {
    u32::from_ne_bytes(p[off..off + 4].try_into().expect("4 bytes"))
}

pub(super) fn wr_u16(p: &mut [u8; 64], off: usize, v: u16) {
    p[off..off + 2].copy_from_slice(&v.to_ne_bytes());
}

pub(super) fn wr_u32(p: &mut [u8; 64], off: usize, v: u32) {
    p[off..off + 4].copy_from_slice(&v.to_ne_bytes());
}

pub(super) fn rd_v4(p: &[u8; 64], off: usize) -> Ipv4Addr {
    Ipv4Addr::new(p[off], p[off + 1], p[off + 2], p[off + 3])
}

pub(super) fn rd_v6(p: &[u8; 64], off: usize) -> Ipv6Addr {
    let b: [u8; 16] = p[off..off + 16].try_into().expect("16 bytes");
    Ipv6Addr::from(b)
}

/// The flow a lookup matches rules against (`struct flowi4`/`flowi6`).
pub(super) struct Flow {
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
    pub(super) fn from_params(
        p: &[u8; 64],
        flags: u32,
        ifindex: u32,
        daddr: IpAddr,
        saddr: IpAddr,
    ) -> Flow {
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
pub(super) struct TableSet([u32; 2]);

impl TableSet {
    const MAIN_AND_LOCAL: TableSet = TableSet([RT_TABLE_MAIN, RT_TABLE_LOCAL]);

    pub(super) fn one(table: u32) -> TableSet {
        TableSet([table, table])
    }

    pub(super) fn contains(self, table: u32) -> bool {
        self.0.contains(&table)
    }
}

/// `bpf_fib_set_fwd_params`.
/// The table a `BPF_FIB_LOOKUP_DIRECT` lookup uses: `tbid` with `BPF_FIB_LOOKUP_TBID` (the
/// field is cleared, as the kernel does), else main.
pub(super) fn take_tbid(p: &mut [u8; 64], flags: u32) -> u32 {
    if flags & BPF_FIB_LOOKUP_TBID == 0 {
        return RT_TABLE_MAIN;
    }
    let tbid = rd_u32(p, offsets::TBID);
    wr_u32(p, offsets::TBID, 0);
    tbid
}

/// `BPF_FIB_LKUP_RET_FRAG_NEEDED`, with `mtu_result` set, when `tot_len` exceeds `mtu`.
pub(super) fn frag_needed(p: &mut [u8; 64], mtu: u32) -> Option<i64> {
    if u32::from(rd_u16(p, offsets::TOT_LEN)) <= mtu {
        return None;
    }
    wr_u16(p, offsets::MTU_RESULT, mtu as u16);
    Some(BPF_FIB_LKUP_RET_FRAG_NEEDED)
}

pub(super) fn set_fwd_params(p: &mut [u8; 64], mtu: u32) -> i64 {
    wr_u16(p, offsets::H_VLAN_TCI, 0);
    wr_u16(p, offsets::H_VLAN_PROTO, 0);
    if mtu != 0 {
        wr_u16(p, offsets::MTU_RESULT, mtu as u16);
    }
    BPF_FIB_LKUP_RET_SUCCESS
}

impl Fib {
    pub(super) fn has_table(&self, table: u32, v4: bool) -> bool {
        table == RT_TABLE_MAIN
            || table == RT_TABLE_LOCAL
            || self
                .routes
                .iter()
                .any(|r| r.table == table && r.dst.is_ipv4() == v4)
    }

    /// The tables an IPv4 lookup in `tbid` searches (`fib_get_table`); `None`: no such table.
    pub(super) fn tables_v4(&self, tbid: u32) -> Option<TableSet> {
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

    pub(super) fn nexthop_live(&self, r: &Route) -> bool {
        !r.dead && r.dev.and_then(|d| self.interface(d)).is_some_and(|i| i.up)
    }

    /// `fib_table_lookup`: the routes whose prefix holds the address, most specific first
    /// (then the lowest metric, then the order given), up to the first usable one. Taken in
    /// that order one by one rather than sorted into a list: a lookup runs per packet, and
    /// the first candidate nearly always answers.
    pub(super) fn table_lookup_v4(&self, tables: TableSet, flow: &Flow) -> Result<&Route, i32> {
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

    pub(super) fn rule_matches(&self, rule: &Rule, flow: &Flow) -> bool {
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

    pub(super) fn sorted_rules(rules: &[Rule]) -> Vec<&Rule> {
        let mut sorted: Vec<&Rule> = rules.iter().collect();
        sorted.sort_by_key(|r| r.priority);
        sorted
    }

    /// `fib_lookup`: through the rules, or main+local then default without custom rules.
    pub(super) fn fib_lookup_v4(&self, flow: &Flow) -> Result<&Route, i32> {
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

    pub(super) fn lookup_v4(&self, p: &mut [u8; 64], flags: u32) -> i64 {
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
    /// `fib6_table_lookup` in one table.
    pub(super) fn table_lookup_v6(&self, table: u32, oif: u32, daddr: IpAddr) -> Option<&Route> {
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
    pub(super) fn fib_lookup_v6(&self, oif: u32, flow: &Flow) -> Result<Option<&Route>, i32> {
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

    pub(super) fn lookup_v6(&self, p: &mut [u8; 64], flags: u32) -> i64 {
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
}

/// `rt6_need_strict`: multicast, link-local or loopback.
pub(super) fn v6_need_strict(a: Ipv6Addr) -> bool {
    a.is_multicast() || a.is_loopback() || (a.segments()[0] & 0xffc0) == 0xfe80
}
