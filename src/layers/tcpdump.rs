//! The one line `tcpdump -n -e -t` prints for a frame, for `bpfemu run`: the Ethernet header
//! and tags, then IPv4/IPv6 with TCP, UDP, ICMP or ICMPv6, or ARP, in tcpdump 4.99's words
//! (checked against the real tcpdump by `tests/run_cli.rs`). tcpdump decodes many
//! application protocols by port (DNS on 53, ...); this line stops at the transport layer
//! (`UDP, length N`), as tcpdump prints ports it does not decode; TCP options are not
//! shown (tcpdump prints them as `options [...]`), nor relative sequence numbers (a lone
//! packet has none).

use super::dissect::*;
use super::{Field, Layer};

/// The line, without a timestamp (`-t`).
pub fn line(frame: &[u8]) -> String {
    let layers = dissect(frame);
    let mut out = String::new();
    let get = |layer: &Layer, f: &str| layer.get(f).map(Field::to_string).unwrap_or_default();
    let num = |layer: &Layer, f: &str| layer.get(f).and_then(Field::number).unwrap_or(0);
    let mut iter = layers.iter().peekable();
    let Some(eth) = iter.next().filter(|l| l.name == "eth") else {
        return format!("[|ether], length {}", frame.len());
    };
    out += &format!(
        "{} > {}, {}, length {}: ",
        get(eth, "src"),
        get(eth, "dst"),
        ethertype(num(eth, "type")),
        frame.len()
    );
    let mut last_type = num(eth, "type");
    while let Some(tag) = iter.next_if(|l| l.name.starts_with("vlan")) {
        out += &format!(
            "vlan {}, p {}, {}, ",
            num(tag, "vid"),
            num(tag, "pcp"),
            ethertype(num(tag, "type"))
        );
        last_type = num(tag, "type");
    }
    let Some(l3) = iter.next() else {
        return out.trim_end_matches(' ').to_owned();
    };
    let rest: Vec<&Layer> = iter.collect();
    let payload_len = rest
        .iter()
        .find(|l| l.name == "payload")
        .map_or(0, |l| num(l, "len"));
    match l3.name.as_str() {
        "ipv4" => out += &ipv4(l3, &rest),
        "ipv6" => out += &ipv6(l3, &rest),
        "arp" => {
            let op = match num(l3, "op") {
                1 => format!("Request who-has {} tell {}", get(l3, "tpa"), get(l3, "spa")),
                2 => format!("Reply {} is-at {}", get(l3, "spa"), get(l3, "sha")),
                n => format!("ARP op {n}"),
            };
            out += &format!("{op}, length {}", 28 + payload_len);
        }
        _ if last_type == 0 => {}
        _ => {}
    }
    out.trim_end_matches([' ', ',', ':']).to_owned()
}

/// `ethertype IPv4 (0x0800)`.
fn ethertype(t: u64) -> String {
    let name = match t as u16 {
        ETH_P_IP => "IPv4",
        ETH_P_IPV6 => "IPv6",
        ETH_P_ARP => "ARP",
        ETH_P_8021Q => "802.1Q",
        ETH_P_8021AD => "802.1Q-QinQ",
        _ => "Unknown",
    };
    format!("ethertype {name} (0x{t:04x})")
}

fn ipv4(ip: &Layer, rest: &[&Layer]) -> String {
    let src = ip.get("src").map(Field::to_string).unwrap_or_default();
    let dst = ip.get("dst").map(Field::to_string).unwrap_or_default();
    let len = ip.get("len").and_then(Field::number).unwrap_or(0);
    let ihl = ip.get("ihl").and_then(Field::number).unwrap_or(5) * 4;
    let l4_len = len.saturating_sub(ihl);
    let offset = ip.get("frag_offset").and_then(Field::number).unwrap_or(0);
    if offset != 0 {
        return format!(
            "{src} > {dst}: ip-proto-{}",
            ip.get("proto").and_then(Field::number).unwrap_or(0)
        );
    }
    transport(Some((&src, &dst)), rest, l4_len, false).unwrap_or_else(|| {
        format!(
            "{src} > {dst}: ip-proto-{} {l4_len}",
            ip.get("proto").and_then(Field::number).unwrap_or(0)
        )
    })
}

fn ipv6(ip: &Layer, rest: &[&Layer]) -> String {
    let src = ip.get("src").map(Field::to_string).unwrap_or_default();
    let dst = ip.get("dst").map(Field::to_string).unwrap_or_default();
    let plen = ip.get("plen").and_then(Field::number).unwrap_or(0);
    // Each extension header is named before the transport layer (which then prints its
    // ports without the addresses), and counts against the payload length.
    let mut names = String::new();
    let mut left = plen;
    let mut l4 = Vec::new();
    for l in rest {
        let n = |f: &str| l.get(f).and_then(Field::number).unwrap_or(0);
        match l.name.as_str() {
            "hop" | "dstopts" | "routing" => {
                left = left.saturating_sub((n("len") + 1) * 8);
                names += match l.name.as_str() {
                    "hop" => "HBH ",
                    "dstopts" => "DSTOPT ",
                    _ => "srcrt ",
                };
            }
            "fragment" => {
                left = left.saturating_sub(8);
                names += &format!("frag ({}|{left}) ", n("offset") * 8);
            }
            _ => l4.push(*l),
        }
    }
    let next = ip.get("next").and_then(Field::number).unwrap_or(0);
    if names.is_empty() {
        return transport(Some((&src, &dst)), &l4, left, true)
            .unwrap_or_else(|| format!("{src} > {dst}: ip-proto-{next} {plen}"));
    }
    // After extension headers: ports without addresses (`1000 > 2000: UDP, ...`).
    let inner = transport(None, &l4, left, true).unwrap_or_default();
    format!("{src} > {dst}: {names}{inner}")
}

/// The transport layer's words; `addrs` prefixes the ports (or the ICMP line) with the
/// addresses, as tcpdump does unless extension headers came between.
fn transport(
    addrs: Option<(&str, &str)>,
    rest: &[&Layer],
    l4_len: u64,
    v6: bool,
) -> Option<String> {
    let l4 = rest.first()?;
    let n = |f: &str| l4.get(f).and_then(Field::number).unwrap_or(0);
    let ports = || match addrs {
        Some((src, dst)) => format!("{src}.{} > {dst}.{}: ", n("sport"), n("dport")),
        None => format!("{} > {}: ", n("sport"), n("dport")),
    };
    let hosts = match addrs {
        Some((src, dst)) => format!("{src} > {dst}: "),
        None => String::new(),
    };
    let echo = |request: u64, reply: u64| match (n("type"), l4.get("id")) {
        (t, Some(_)) if t == request => format!("echo request, id {}, seq {}", n("id"), n("seq")),
        (t, Some(_)) if t == reply => format!("echo reply, id {}, seq {}", n("id"), n("seq")),
        (t, _) => format!("type-#{t}"),
    };
    match l4.name.as_str() {
        "udp" => Some(format!(
            "{}UDP, length {}",
            ports(),
            n("len").saturating_sub(8)
        )),
        "tcp" => {
            let flags = l4.get("flags").map(Field::to_string).unwrap_or_default();
            let data = l4_len.saturating_sub(n("doff") * 4);
            let seq = match data {
                0 => format!("seq {}", n("seq")),
                d => format!("seq {}:{}", n("seq"), n("seq") + d),
            };
            let ack = match flags.contains('.') {
                true => format!(", ack {}", n("ack")),
                false => String::new(),
            };
            Some(format!(
                "{}Flags [{flags}], {seq}{ack}, win {}, length {data}",
                ports(),
                n("window")
            ))
        }
        "icmp" if !v6 => Some(format!("{hosts}ICMP {}, length {l4_len}", echo(8, 0))),
        "icmpv6" if v6 => Some(format!("{hosts}ICMP6, {}, length {l4_len}", echo(128, 129))),
        _ => None,
    }
}
