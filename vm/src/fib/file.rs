//! The `--fib` file format (see the module docs): interfaces, routes, neighbours and rules as
//! people write them.

use serde_json::Value;
use std::net::IpAddr;

use super::parse::*;
use super::*;

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
            let route = parse_route(&e, &fib, RouteSyntax::File)?;
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
}

pub(super) fn parse_user_interface(e: &Entry<'_>) -> Result<Interface, FibError> {
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

pub(super) fn parse_user_rule(e: &Entry<'_>) -> Result<(Option<u8>, Rule), FibError> {
    e.check_known(&[
        "family", "priority", "action", "table", "from", "to", "iif", "oif", "fwmark", "fwmask",
        "ipproto", "sport", "dport", "not",
    ])?;
    parse_rule_common(e, "from", "to")
}
