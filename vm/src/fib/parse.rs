//! Reading JSON entries, shared by the `--fib` file and `ip -j` output: located errors, typed
//! field access, the scalar syntaxes (MACs, prefixes, tables, scopes, ports), and the route and
//! rule parsers both formats use.

use serde_json::{Map, Value};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::*;

/// Where an entry sits in its input, for error messages.
#[derive(Clone, Copy)]
pub(crate) struct Loc<'a> {
    pub(crate) path: &'a str,
    pub(crate) list: &'a str,
    pub(crate) index: usize,
}

impl Loc<'_> {
    pub(crate) fn err(&self, field: &str, message: impl Into<String>) -> FibError {
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

pub(crate) fn top_err(path: &str, place: &str, message: impl Into<String>) -> FibError {
    FibError::Field {
        path: path.to_string(),
        place: place.to_string(),
        message: message.into(),
    }
}

pub(crate) fn parse_json(path: &str, text: &str) -> Result<Value, FibError> {
    serde_json::from_str(text).map_err(|e| FibError::Json {
        path: path.to_string(),
        message: e.to_string(),
    })
}

/// An entry's fields, with typed accessors that report the entry and field on error.
pub(crate) struct Entry<'a> {
    pub(crate) loc: Loc<'a>,
    pub(crate) obj: &'a Map<String, Value>,
}

impl<'a> Entry<'a> {
    pub(crate) fn new(loc: Loc<'a>, v: &'a Value) -> Result<Entry<'a>, FibError> {
        match v.as_object() {
            Some(obj) => Ok(Entry { loc, obj }),
            None => Err(loc.err("", "expected an object")),
        }
    }

    pub(crate) fn check_known(&self, known: &[&str]) -> Result<(), FibError> {
        for key in self.obj.keys() {
            if !known.contains(&key.as_str()) {
                return Err(self
                    .loc
                    .err(key, format!("unknown field (known: {})", known.join(", "))));
            }
        }
        Ok(())
    }

    pub(crate) fn reject(&self, unsupported: &[&str]) -> Result<(), FibError> {
        for key in unsupported {
            if self.obj.contains_key(*key) {
                return Err(self.loc.err(key, "not supported by bpfemu's FIB model"));
            }
        }
        Ok(())
    }

    pub(crate) fn get(&self, field: &str) -> Option<&'a Value> {
        self.obj.get(field).filter(|v| !v.is_null())
    }

    pub(crate) fn has(&self, field: &str) -> bool {
        self.obj.contains_key(field)
    }

    pub(crate) fn str(&self, field: &str) -> Result<Option<&'a str>, FibError> {
        match self.get(field) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(v) => Err(self.loc.err(field, format!("expected a string, found {v}"))),
        }
    }

    pub(crate) fn req_str(&self, field: &str) -> Result<&'a str, FibError> {
        self.str(field)?
            .ok_or_else(|| self.loc.err(field, "missing"))
    }

    pub(crate) fn bool(&self, field: &str) -> Result<Option<bool>, FibError> {
        match self.get(field) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(v) => Err(self
                .loc
                .err(field, format!("expected true or false, found {v}"))),
        }
    }

    /// A number, or a string holding a decimal or `0x` hex number.
    pub(crate) fn u32(&self, field: &str) -> Result<Option<u32>, FibError> {
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
    pub(crate) fn table(&self) -> Result<Option<u32>, FibError> {
        match self.get("table") {
            None => Ok(None),
            Some(Value::String(s)) => parse_table(s)
                .map(Some)
                .ok_or_else(|| self.loc.err("table", format!("unknown table {s:?}"))),
            Some(_) => self.req_u32("table").map(Some),
        }
    }

    /// A `scope` field: a name (`host`, `link`, `universe`, ...) or a number below 256.
    pub(crate) fn scope(&self) -> Result<Option<u8>, FibError> {
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

    pub(crate) fn req_u32(&self, field: &str) -> Result<u32, FibError> {
        self.u32(field)?
            .ok_or_else(|| self.loc.err(field, "missing"))
    }

    pub(crate) fn ip(&self, field: &str) -> Result<Option<IpAddr>, FibError> {
        match self.str(field)? {
            None => Ok(None),
            Some(s) => s
                .parse()
                .map(Some)
                .map_err(|_| self.loc.err(field, format!("invalid IP address {s:?}"))),
        }
    }

    pub(crate) fn mac(&self, field: &str) -> Result<Option<[u8; 6]>, FibError> {
        match self.str(field)? {
            None => Ok(None),
            Some(s) => parse_mac(s)
                .map(Some)
                .ok_or_else(|| self.loc.err(field, format!("invalid MAC address {s:?}"))),
        }
    }

    pub(crate) fn prefix(&self, field: &str, text: &str) -> Result<Prefix, FibError> {
        parse_prefix(text).ok_or_else(|| self.loc.err(field, format!("invalid prefix {text:?}")))
    }

    pub(crate) fn list(&self, field: &str) -> Result<&'a [Value], FibError> {
        match self.get(field) {
            None => Ok(&[]),
            Some(Value::Array(a)) => Ok(a),
            Some(v) => Err(self.loc.err(field, format!("expected a list, found {v}"))),
        }
    }
}

pub(crate) fn parse_uint(s: &str) -> Option<u64> {
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => s.parse().ok(),
    }
}

pub(crate) fn parse_mac(s: &str) -> Option<[u8; 6]> {
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
pub(crate) fn parse_prefix(s: &str) -> Option<Prefix> {
    let (addr, len) = match s.split_once('/') {
        Some((a, l)) => (a.parse::<IpAddr>().ok()?, Some(l.parse::<u8>().ok()?)),
        None => (s.parse::<IpAddr>().ok()?, None),
    };
    let max = if addr.is_ipv4() { 32 } else { 128 };
    let len = len.unwrap_or(max);
    (len <= max).then_some(Prefix { addr, len })
}

pub(crate) fn parse_table(s: &str) -> Option<u32> {
    match s {
        "main" => Some(RT_TABLE_MAIN),
        "local" => Some(RT_TABLE_LOCAL),
        "default" => Some(RT_TABLE_DEFAULT),
        _ => parse_uint(s).and_then(|n| u32::try_from(n).ok()),
    }
}

pub(crate) fn parse_scope(s: &str) -> Option<u8> {
    match s {
        "global" | "universe" => Some(RT_SCOPE_UNIVERSE),
        "site" => Some(RT_SCOPE_SITE),
        "link" => Some(RT_SCOPE_LINK),
        "host" => Some(RT_SCOPE_HOST),
        "nowhere" => Some(RT_SCOPE_NOWHERE),
        _ => s.parse().ok(),
    }
}

pub(crate) fn parse_port_range(v: &Value) -> Option<(u16, u16)> {
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

pub(crate) fn parse_ipproto(v: &Value) -> Option<u8> {
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

pub(crate) fn custom_rules(rules: Vec<Rule>, defaults: Vec<Rule>) -> Option<Vec<Rule>> {
    (!rules.is_empty() && rules != defaults).then_some(rules)
}

pub(crate) fn resolve_dev(e: &Entry<'_>, field: &str, fib: &Fib) -> Result<Option<u32>, FibError> {
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

/// Which of the two formats a route entry is in.
#[derive(Clone, Copy)]
pub(crate) enum RouteSyntax {
    /// The `--fib` file: fields named for people, omitted ones filled in as `ip route add`
    /// would (the gateway's subnet names the device, local routes get host scope, ...).
    File,
    /// `ip -j -4/-6 route show`: what the kernel holds, as printed; an omitted field is zero
    /// and the family is the command's.
    Iproute { v6: bool },
}

/// The fields of a route in the `--fib` file.
const FILE_ROUTE_FIELDS: &[&str] = &[
    "dst", "type", "via", "dev", "metric", "table", "src", "scope", "mtu", "mtu_lock", "encap",
    "dead",
];

/// What `ip -j` may print on a route that the model has no room for.
const IPROUTE_UNMODELLED: &[&str] = &["nhid", "from", "tos", "dsfield"];

/// A route from either format.
///
/// The steps run in the order each format has always read its fields, so that an entry with
/// several faults still names the same one: the file reads `dst` before `type` and the gateway
/// before the destination (a `default` route takes its family from the gateway), `ip -j` the
/// other way round.
pub(crate) fn parse_route(
    e: &Entry<'_>,
    fib: &Fib,
    syntax: RouteSyntax,
) -> Result<Route, FibError> {
    let file = matches!(syntax, RouteSyntax::File);
    let (kind, dst_text) = if file {
        e.check_known(FILE_ROUTE_FIELDS)?;
        let dst_text = e.req_str("dst")?;
        (route_type(e, "unknown")?, dst_text)
    } else {
        e.reject(IPROUTE_UNMODELLED)?;
        let kind = route_type(e, "unsupported")?;
        (kind, e.req_str("dst")?)
    };
    // Multipath (`ip -j` only): the first nexthop (see the module docs). A file route is its
    // own nexthop.
    let first_nexthop;
    let (dst, nh, gateway) = match syntax {
        RouteSyntax::File => {
            let gateway = e.ip("via")?;
            let v6 = gateway.is_some_and(|g| g.is_ipv6()) && !e.has("family");
            (route_dst(e, dst_text, v6)?, e, gateway)
        }
        RouteSyntax::Iproute { v6 } => {
            let dst = route_dst(e, dst_text, v6)?;
            let nh = match e.list("nexthops")?.first() {
                Some(first) => {
                    first_nexthop = Entry::new(e.loc, first)?;
                    &first_nexthop
                }
                None => e,
            };
            (dst, nh, iproute_gateway(e, nh)?)
        }
    };
    let dev = if file {
        file_route_dev(e, fib, kind, gateway)?
    } else {
        match nh.str("dev")? {
            None => None,
            Some(name) => Some(
                fib.interface_by_name(name)
                    .ok_or_else(|| e.loc.err("dev", format!("no interface named {name:?}")))?
                    .ifindex,
            ),
        }
    };
    // The file's consistency checks; the kernel has made them for what `ip -j` prints.
    let file_prefsrc = if file {
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
        prefsrc
    } else {
        None
    };
    let (nh_flags, metrics_mtu) = if file {
        (Vec::new(), (0, false))
    } else {
        let flags: Vec<&str> = nh.list("flags")?.iter().filter_map(Value::as_str).collect();
        (flags, iproute_mtu(e)?)
    };
    let table = e.table()?.unwrap_or(RT_TABLE_MAIN);
    // Omitted scope and metric: the file gets what `ip route add` would choose, `ip -j` omits
    // the kernel's zero.
    let default_scope = match kind {
        _ if !file => RT_SCOPE_UNIVERSE,
        RouteType::Local => RT_SCOPE_HOST,
        RouteType::Broadcast => RT_SCOPE_LINK,
        RouteType::Unicast if gateway.is_none() && dst.is_ipv4() => RT_SCOPE_LINK,
        _ => RT_SCOPE_UNIVERSE,
    };
    let scope = e.scope()?.unwrap_or(default_scope);
    let default_metric = if file && !dst.is_ipv4() { 1024 } else { 0 };
    let metric = e.u32("metric")?.unwrap_or(default_metric);
    let (prefsrc, mtu, mtu_lock, encap, dead) = if file {
        (
            file_prefsrc,
            e.u32("mtu")?.unwrap_or(0),
            e.bool("mtu_lock")?.unwrap_or(false),
            e.bool("encap")?.unwrap_or(false),
            e.bool("dead")?.unwrap_or(false),
        )
    } else {
        let (mtu, mtu_lock) = metrics_mtu;
        (
            e.ip("prefsrc")?,
            mtu,
            mtu_lock,
            nh.has("encap") || e.has("encap"),
            nh_flags.contains(&"dead"),
        )
    };
    Ok(Route {
        table,
        dst,
        kind,
        gateway,
        dev,
        metric,
        prefsrc,
        scope,
        mtu,
        mtu_lock,
        encap,
        dead,
    })
}

/// The `type` field (unicast when omitted); `adjective` says why another is refused.
pub(crate) fn route_type(e: &Entry<'_>, adjective: &str) -> Result<RouteType, FibError> {
    match e.str("type")? {
        None => Ok(RouteType::Unicast),
        Some(s) => RouteType::parse(s)
            .ok_or_else(|| e.loc.err("type", format!("{adjective} route type {s:?}"))),
    }
}

/// The destination: `default` is the family's zero-length prefix.
pub(crate) fn route_dst(e: &Entry<'_>, text: &str, v6: bool) -> Result<Prefix, FibError> {
    if text != "default" {
        return e.prefix("dst", text);
    }
    let any = if v6 {
        IpAddr::V6(Ipv6Addr::UNSPECIFIED)
    } else {
        IpAddr::V4(Ipv4Addr::UNSPECIFIED)
    };
    Ok(Prefix::new(any, 0))
}

/// The gateway `ip -j` prints: `gateway`, or `via.host` for an IPv4 route through an IPv6
/// gateway.
pub(crate) fn iproute_gateway(e: &Entry<'_>, nh: &Entry<'_>) -> Result<Option<IpAddr>, FibError> {
    if let Some(g) = nh.ip("gateway")? {
        return Ok(Some(g));
    }
    let Some(Value::Object(via)) = nh.get("via") else {
        return Ok(None);
    };
    match via.get("host").and_then(Value::as_str) {
        Some(h) => Ok(Some(h.parse().map_err(|_| {
            e.loc.err("via.host", format!("invalid IP address {h:?}"))
        })?)),
        None => Ok(None),
    }
}

/// The MTU metric and whether it is locked, from `ip -j`'s `metrics` list.
pub(crate) fn iproute_mtu(e: &Entry<'_>) -> Result<(u32, bool), FibError> {
    let (mut mtu, mut mtu_lock) = (0, false);
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
    Ok((mtu, mtu_lock))
}

/// A file route's device: `dev` as given, else the interface with an address in the
/// gateway's subnet; only reject routes (blackhole, ...) may have none.
pub(crate) fn file_route_dev(
    e: &Entry<'_>,
    fib: &Fib,
    kind: RouteType,
    gateway: Option<IpAddr>,
) -> Result<Option<u32>, FibError> {
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
    Ok(dev)
}

/// A rule from either format; the family when the entry pins one.
pub(crate) fn parse_rule_common(
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
