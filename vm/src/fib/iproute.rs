//! `ip -j` output: a live router's interfaces, routes, neighbours, rules and forwarding
//! switches, snapshotted.

use serde_json::Value;

use super::parse::*;
use super::*;

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

pub(super) fn json_list<'a>(path: &str, v: &'a Value) -> Result<&'a [Value], FibError> {
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
                fib.routes
                    .push(parse_route(&e, &fib, RouteSyntax::Iproute { v6 })?);
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
