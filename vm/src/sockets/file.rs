//! The `--sockets` file format (see the module docs), read with the FIB file's located
//! JSON entries.

use serde_json::Value;
use std::net::SocketAddr;

use super::{Protocol, Socket, SocketTable, SocketsError};
use crate::fib::parse::{Entry, Loc, parse_json, top_err};

const FIELDS: &[&str] = &[
    "protocol",
    "state",
    "local",
    "remote",
    "accepted",
    "v6only",
    "dev",
    "mark",
    "priority",
    "rx_queue_mapping",
];

impl SocketTable {
    /// Parses a socket table; `path` only names the input in errors.
    pub fn from_json_str(path: &str, text: &str) -> Result<SocketTable, SocketsError> {
        let root = parse_json(path, text)?;
        let Some(obj) = root.as_object() else {
            return Err(top_err(path, "(top level)", "expected an object"));
        };
        if let Some(key) = obj.keys().find(|k| k.as_str() != "sockets") {
            return Err(top_err(path, key, "unknown field (known: sockets)"));
        }
        let list: &[Value] = match obj.get("sockets") {
            None | Some(Value::Null) => &[],
            Some(Value::Array(a)) => a,
            Some(_) => return Err(top_err(path, "sockets", "expected a list")),
        };
        let mut table = SocketTable::default();
        for (index, v) in list.iter().enumerate() {
            let loc = Loc {
                path,
                list: "sockets",
                index,
            };
            table.sockets.push(parse_socket(&Entry::new(loc, v)?)?);
        }
        Ok(table)
    }
}

fn parse_socket(e: &Entry<'_>) -> Result<Socket, SocketsError> {
    e.check_known(FIELDS)?;
    let protocol = match e.req_str("protocol")? {
        "tcp" => Protocol::Tcp,
        "udp" => Protocol::Udp,
        other => {
            return Err(e.loc.err(
                "protocol",
                format!("unknown protocol {other:?} (known: tcp, udp)"),
            ));
        }
    };
    let local = socket_addr(e, "local")?.ok_or_else(|| e.loc.err("local", "missing"))?;
    let remote = socket_addr(e, "remote")?;
    let listening = state(e, protocol, remote.is_some())?;
    if let Some(remote) = remote {
        if remote.is_ipv4() != local.is_ipv4() {
            return Err(e.loc.err("remote", "not in the family of `local`"));
        }
        if local.ip().is_unspecified() || local.port() == 0 {
            return Err(e.loc.err(
                "local",
                "a connected socket's local address and port are the ones it is bound to, \
                 not the wildcard",
            ));
        }
        if remote.ip().is_unspecified() || remote.port() == 0 {
            return Err(e.loc.err("remote", "not a peer's address and port"));
        }
    }
    let accepted = e.bool("accepted")?.unwrap_or(false);
    if accepted && (protocol != Protocol::Tcp || listening) {
        return Err(e
            .loc
            .err("accepted", "only an established TCP socket is accepted"));
    }
    let v6only = e.bool("v6only")?.unwrap_or(false);
    if v6only && local.is_ipv4() {
        return Err(e.loc.err("v6only", "an IPv4 socket"));
    }
    let rx_queue_mapping = match e.get("rx_queue_mapping") {
        None => -1,
        Some(v) => v
            .as_i64()
            .and_then(|n| i32::try_from(n).ok())
            .filter(|n| (-1..0xffff).contains(n))
            .ok_or_else(|| {
                e.loc.err(
                    "rx_queue_mapping",
                    format!("expected -1 or a queue below 65535, found {v}"),
                )
            })?,
    };
    Ok(Socket {
        protocol,
        listening,
        local,
        remote,
        accepted,
        v6only,
        bound_dev_if: e.u32("dev")?.unwrap_or(0),
        mark: e.u32("mark")?.unwrap_or(0),
        priority: e.u32("priority")?.unwrap_or(0),
        rx_queue_mapping,
    })
}

/// Whether the socket listens, from `state` (checked against the protocol and `remote`).
fn state(e: &Entry<'_>, protocol: Protocol, connected: bool) -> Result<bool, SocketsError> {
    let state = e.str("state")?;
    match (protocol, state) {
        (Protocol::Tcp, Some("listen")) if !connected => Ok(true),
        (Protocol::Tcp, Some("listen")) => Err(e.loc.err("remote", "a listener has no peer")),
        (Protocol::Tcp, Some("established")) if connected => Ok(false),
        (Protocol::Tcp, Some("established")) => Err(e
            .loc
            .err("remote", "missing (an established socket has a peer)")),
        (Protocol::Tcp, None) => Err(e.loc.err("state", "missing (listen or established)")),
        (Protocol::Udp, None) => Ok(false),
        (Protocol::Udp, Some("connected")) if connected => Ok(false),
        (Protocol::Udp, Some("unconnected")) if !connected => Ok(false),
        (Protocol::Udp, Some(s @ ("connected" | "unconnected"))) => Err(e
            .loc
            .err("state", format!("{s:?} does not agree with `remote`"))),
        (_, Some(other)) => Err(e.loc.err(
            "state",
            format!(
                "unknown state {other:?} (known: {})",
                match protocol {
                    Protocol::Tcp => "listen, established",
                    Protocol::Udp => "unconnected, connected",
                }
            ),
        )),
    }
}

/// `ADDR:PORT` or `[ADDR6]:PORT`.
fn socket_addr(e: &Entry<'_>, field: &str) -> Result<Option<SocketAddr>, SocketsError> {
    let Some(text) = e.str(field)? else {
        return Ok(None);
    };
    text.parse().map(Some).map_err(|_| {
        e.loc.err(
            field,
            format!("expected ADDR:PORT or [ADDR6]:PORT, found {text:?}"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<SocketTable, String> {
        SocketTable::from_json_str("s.json", text).map_err(|e| e.to_string())
    }

    #[test]
    fn errors_name_the_entry_and_field() {
        let bad = [
            (r#"{"socket": []}"#, "s.json: socket: unknown field"),
            (
                r#"{"sockets": [{"protocol": "sctp", "local": "1.2.3.4:5"}]}"#,
                "s.json: sockets[0].protocol: unknown protocol",
            ),
            (
                r#"{"sockets": [{"protocol": "udp", "local": "1.2.3.4"}]}"#,
                "s.json: sockets[0].local: expected ADDR:PORT",
            ),
            (
                r#"{"sockets": [{"protocol": "tcp", "local": "1.2.3.4:5"}]}"#,
                "s.json: sockets[0].state: missing",
            ),
            (
                r#"{"sockets": [{"protocol": "tcp", "state": "established",
                    "local": "0.0.0.0:5", "remote": "1.2.3.4:6"}]}"#,
                "s.json: sockets[0].local: a connected socket",
            ),
            (
                r#"{"sockets": [{"protocol": "udp", "local": "1.2.3.4:5",
                    "remote": "[::1]:6"}]}"#,
                "s.json: sockets[0].remote: not in the family",
            ),
            (
                r#"{"sockets": [{"protocol": "udp", "local": "1.2.3.4:5", "port": 1}]}"#,
                "s.json: sockets[0].port: unknown field",
            ),
        ];
        for (text, start) in bad {
            let err = parse(text).unwrap_err();
            assert!(err.starts_with(start), "{text}: {err}");
        }
    }

    #[test]
    fn defaults_and_fields() {
        let table = parse(
            r#"{"sockets": [{"protocol": "udp", "local": "[::1]:53", "dev": 1, "mark": 7}]}"#,
        )
        .unwrap();
        let s = &table.sockets[0];
        assert_eq!((s.bound_dev_if, s.mark, s.rx_queue_mapping), (1, 7, -1));
        assert!(s.ipv6_only() && !s.listening && s.remote.is_none());
    }
}
