//! A frame built from layers given by name, as a test file gives them: every field has a
//! default, and lengths (`ipv4.len`, `ipv4.ihl`, `ipv6.plen`, `udp.len`, `tcp.doff`, extension
//! header lengths), next-protocol fields (`eth.type`, `vlan.type`, `ipv4.proto`, `ipv6.next`)
//! and checksums (IPv4 header, TCP, UDP, ICMP, ICMPv6) are filled in unless given, so that a
//! test can give a wrong checksum on purpose.
//!
//! The layers come as a JSON object (a test file's TOML table read as JSON): `eth`, `vlan`,
//! `vlan2`, `ipv4` or `ipv6` (with `ext`, a list of extension headers), `tcp`, `udp`, `icmp`
//! or `icmpv6`, `payload` (hex) or `payload_text`. Field names are the ones
//! [`super::dissect`] reports, so what a test builds and what it expects read alike.

use super::dissect::*;
use crate::traffic::checksum;
use serde_json::{Map, Value};
use std::net::{Ipv4Addr, Ipv6Addr};

/// The keys a packet given by layers may hold.
const LAYER_KEYS: &[&str] = &[
    "eth",
    "vlan",
    "vlan2",
    "ipv4",
    "ipv6",
    "tcp",
    "udp",
    "icmp",
    "icmpv6",
    "payload",
    "payload_text",
];

/// The frame's bytes, or what is wrong with the layers (naming the field).
pub fn build(spec: &Map<String, Value>) -> Result<Vec<u8>, String> {
    if let Some(key) = spec.keys().find(|k| !LAYER_KEYS.contains(&k.as_str())) {
        return Err(format!(
            "unknown layer `{key}` (layers: {})",
            LAYER_KEYS.join(", ")
        ));
    }
    let payload = payload(spec)?;
    let l4 = ["tcp", "udp", "icmp", "icmpv6"]
        .iter()
        .filter(|k| spec.contains_key(**k))
        .collect::<Vec<_>>();
    if l4.len() > 1 {
        return Err(format!("one transport layer at most, got {l4:?}"));
    }
    let (l3_type, l3) = match (spec.get("ipv4"), spec.get("ipv6")) {
        (Some(_), Some(_)) => return Err("give ipv4 or ipv6, not both".into()),
        (Some(ip), None) => (ETH_P_IP, ipv4(&Fields::new("ipv4", ip)?, spec, &payload)?),
        (None, Some(ip)) => (ETH_P_IPV6, ipv6(&Fields::new("ipv6", ip)?, spec, &payload)?),
        (None, None) if l4.is_empty() => (0, payload),
        (None, None) => return Err(format!("`{}` needs ipv4 or ipv6", l4[0])),
    };
    let mut frame = ethernet(spec, l3_type)?;
    frame.extend(l3);
    Ok(frame)
}

/// A layer's fields, each read once: what is left unread at the end is a typo.
struct Fields<'a> {
    layer: &'static str,
    map: &'a Map<String, Value>,
    known: &'static [&'static str],
}

impl<'a> Fields<'a> {
    fn new(layer: &'static str, v: &'a Value) -> Result<Fields<'a>, String> {
        let map = v
            .as_object()
            .ok_or_else(|| format!("`{layer}` must be a table of fields"))?;
        let known = known_fields(layer);
        if let Some(k) = map.keys().find(|k| !known.contains(&k.as_str())) {
            return Err(format!(
                "{layer}: unknown field `{k}` (fields: {})",
                known.join(", ")
            ));
        }
        Ok(Fields { layer, map, known })
    }

    fn given(&self, name: &str) -> bool {
        debug_assert!(self.known.contains(&name), "{name}");
        self.map.contains_key(name)
    }

    /// A number no larger than `max`: an integer, or a string in hex (`0x..`) or decimal.
    fn num(&self, name: &str, default: u64, max: u64) -> Result<u64, String> {
        let Some(v) = self.map.get(name) else {
            return Ok(default);
        };
        let n = match v {
            Value::Number(n) => n.as_u64(),
            Value::Bool(b) => Some(u64::from(*b)),
            Value::String(s) => parse_number(s),
            _ => None,
        };
        match n {
            Some(n) if n <= max => Ok(n),
            _ => Err(format!(
                "{}.{name}: expected a number up to {max}, got {v}",
                self.layer
            )),
        }
    }

    fn opt_num(&self, name: &str, max: u64) -> Result<Option<u64>, String> {
        match self.given(name) {
            true => self.num(name, 0, max).map(Some),
            false => Ok(None),
        }
    }

    fn text(&self, name: &str) -> Result<Option<&'a str>, String> {
        match self.map.get(name) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(v) => Err(format!("{}.{name}: expected a string, got {v}", self.layer)),
        }
    }

    fn hex(&self, name: &str) -> Result<Vec<u8>, String> {
        match self.text(name)? {
            None => Ok(Vec::new()),
            Some(s) => parse_hex(s).map_err(|e| format!("{}.{name}: {e}", self.layer)),
        }
    }

    fn parsed<T: std::str::FromStr>(
        &self,
        name: &str,
        default: T,
        what: &str,
    ) -> Result<T, String> {
        match self.text(name)? {
            None => Ok(default),
            Some(s) => s
                .parse()
                .map_err(|_| format!("{}.{name}: `{s}` is not {what}", self.layer)),
        }
    }

    fn mac(&self, name: &str, default: [u8; 6]) -> Result<[u8; 6], String> {
        match self.text(name)? {
            None => Ok(default),
            Some(s) => parse_mac(s)
                .ok_or_else(|| format!("{}.{name}: `{s}` is not a MAC address", self.layer)),
        }
    }
}

/// The fields a layer takes (the names [`super::dissect`] gives them).
fn known_fields(layer: &str) -> &'static [&'static str] {
    match layer {
        "eth" => &["dst", "src", "type"],
        "vlan" | "vlan2" => &["tpid", "pcp", "dei", "vid", "type"],
        "ipv4" => &[
            "version",
            "ihl",
            "tos",
            "len",
            "id",
            "df",
            "mf",
            "frag_offset",
            "ttl",
            "proto",
            "checksum",
            "src",
            "dst",
            "options",
        ],
        "ipv6" => &[
            "version", "tc", "flow", "plen", "next", "hlim", "src", "dst", "ext",
        ],
        "ext" => &[
            "kind",
            "next",
            "len",
            "type",
            "segments_left",
            "data",
            "offset",
            "more",
            "id",
        ],
        "tcp" => &[
            "sport", "dport", "seq", "ack", "doff", "flags", "window", "checksum", "urg", "options",
        ],
        "udp" => &["sport", "dport", "len", "checksum"],
        "icmp" | "icmpv6" => &["type", "code", "checksum", "id", "seq"],
        _ => &[],
    }
}

/// `0x..` hex or decimal.
pub fn parse_number(s: &str) -> Option<u64> {
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => s.parse().ok(),
    }
}

/// Hex bytes; spaces and colons between bytes are allowed.
pub fn parse_hex(s: &str) -> Result<Vec<u8>, String> {
    let digits: Vec<u8> = s
        .bytes()
        .filter(|b| !b.is_ascii_whitespace() && *b != b':')
        .collect();
    if !digits.len().is_multiple_of(2) {
        return Err(format!("odd number of hex digits ({})", digits.len()));
    }
    digits
        .chunks(2)
        .enumerate()
        .map(|(i, pair)| {
            let text = std::str::from_utf8(pair).unwrap_or("??");
            u8::from_str_radix(text, 16).map_err(|_| format!("`{text}` at byte {i} is not hex"))
        })
        .collect()
}

pub fn parse_mac(s: &str) -> Option<[u8; 6]> {
    let parts: Vec<&str> = s.split([':', '-']).collect();
    if parts.len() != 6 {
        return None;
    }
    let mut mac = [0u8; 6];
    for (b, p) in mac.iter_mut().zip(parts) {
        if p.is_empty() || p.len() > 2 {
            return None;
        }
        *b = u8::from_str_radix(p, 16).ok()?;
    }
    Some(mac)
}

fn payload(spec: &Map<String, Value>) -> Result<Vec<u8>, String> {
    match (spec.get("payload"), spec.get("payload_text")) {
        (Some(_), Some(_)) => Err("give payload or payload_text, not both".into()),
        (Some(Value::String(h)), None) => parse_hex(h).map_err(|e| format!("payload: {e}")),
        (None, Some(Value::String(t))) => Ok(t.as_bytes().to_vec()),
        (None, None) => Ok(Vec::new()),
        _ => Err("payload (hex) and payload_text are strings".into()),
    }
}

/// The defaults: documentation addresses, locally administered MACs.
const MAC_SRC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x0a];
const MAC_DST: [u8; 6] = [0x02, 0, 0, 0, 0, 0x0b];
const V4_SRC: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 1);
const V4_DST: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);
const V6_SRC: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 1, 0, 0, 0, 0, 1);
const V6_DST: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 2, 0, 0, 0, 0, 1);

fn ethernet(spec: &Map<String, Value>, l3_type: u16) -> Result<Vec<u8>, String> {
    let empty = Value::Object(Map::new());
    let eth = Fields::new("eth", spec.get("eth").unwrap_or(&empty))?;
    let tags: Vec<(&'static str, Fields)> =
        [("vlan", spec.get("vlan")), ("vlan2", spec.get("vlan2"))]
            .into_iter()
            .filter_map(|(name, v)| v.map(|v| Fields::new(name, v).map(|f| (name, f))))
            .collect::<Result<_, _>>()?;
    if tags.len() == 1 && tags[0].0 == "vlan2" {
        return Err("vlan2 is the inner tag: give vlan too".into());
    }
    // The type each header announces: the next tag's TPID, or the network layer's.
    let double = tags.len() == 2;
    let tpid = |i: usize, f: &Fields| {
        let default = if double && i == 0 {
            ETH_P_8021AD
        } else {
            ETH_P_8021Q
        };
        f.num("tpid", u64::from(default), 0xffff)
    };
    let mut types = Vec::new();
    for (i, (_, f)) in tags.iter().enumerate() {
        types.push(tpid(i, f)?);
    }
    types.push(u64::from(l3_type));
    let mut out = Vec::new();
    out.extend_from_slice(&eth.mac("dst", MAC_DST)?);
    out.extend_from_slice(&eth.mac("src", MAC_SRC)?);
    out.extend_from_slice(&(eth.num("type", types[0], 0xffff)? as u16).to_be_bytes());
    for (i, (_, f)) in tags.iter().enumerate() {
        let tci =
            (f.num("pcp", 0, 7)? << 13) | (f.num("dei", 0, 1)? << 12) | f.num("vid", 0, 0xfff)?;
        out.extend_from_slice(&(tci as u16).to_be_bytes());
        out.extend_from_slice(&(f.num("type", types[i + 1], 0xffff)? as u16).to_be_bytes());
    }
    Ok(out)
}

/// The transport layer's protocol number and bytes (checksummed with `pseudo`, the
/// pseudo-header's sum over source and destination, or without one for ICMP).
fn transport(
    spec: &Map<String, Value>,
    payload: &[u8],
    pseudo: impl Fn(u8, usize) -> u32,
) -> Result<Option<(u8, Vec<u8>)>, String> {
    let (name, v) = match ["tcp", "udp", "icmp", "icmpv6"]
        .iter()
        .find_map(|k| spec.get(*k).map(|v| (*k, v)))
    {
        Some(found) => found,
        None => return Ok(None),
    };
    let layer = match name {
        "tcp" => "tcp",
        "udp" => "udp",
        "icmp" => "icmp",
        _ => "icmpv6",
    };
    let f = Fields::new(layer, v)?;
    let (proto, mut seg, at) = match name {
        "tcp" => {
            let mut options = f.hex("options")?;
            options.resize(options.len().div_ceil(4) * 4, 0);
            let doff = f.num("doff", (20 + options.len() as u64) / 4, 15)?;
            let flags = match f.map.get("flags") {
                Some(Value::String(s)) => super::dissect::tcp_flags_value(s).ok_or_else(|| {
                    format!("tcp.flags: `{s}` is not flags (letters FSRPUEW and . or A for ACK)")
                })?,
                Some(_) => f.num("flags", 0, 0xff)? as u8,
                None => 0x02,
            };
            let mut s = Vec::new();
            s.extend_from_slice(&(f.num("sport", 40000, 0xffff)? as u16).to_be_bytes());
            s.extend_from_slice(&(f.num("dport", 80, 0xffff)? as u16).to_be_bytes());
            s.extend_from_slice(&(f.num("seq", 0, u64::from(u32::MAX))? as u32).to_be_bytes());
            s.extend_from_slice(&(f.num("ack", 0, u64::from(u32::MAX))? as u32).to_be_bytes());
            s.extend_from_slice(&[(doff as u8) << 4, flags]);
            s.extend_from_slice(&(f.num("window", 64240, 0xffff)? as u16).to_be_bytes());
            s.extend_from_slice(&[0, 0]);
            s.extend_from_slice(&(f.num("urg", 0, 0xffff)? as u16).to_be_bytes());
            s.extend_from_slice(&options);
            (IPPROTO_TCP, s, 16)
        }
        "udp" => {
            let len = f.num("len", 8 + payload.len() as u64, 0xffff)?;
            let mut s = Vec::new();
            s.extend_from_slice(&(f.num("sport", 40000, 0xffff)? as u16).to_be_bytes());
            s.extend_from_slice(&(f.num("dport", 53, 0xffff)? as u16).to_be_bytes());
            s.extend_from_slice(&(len as u16).to_be_bytes());
            s.extend_from_slice(&[0, 0]);
            (IPPROTO_UDP, s, 6)
        }
        _ => {
            let v6 = name == "icmpv6";
            let echo = if v6 { 128 } else { 8 };
            let mut s = vec![
                f.num("type", echo, 0xff)? as u8,
                f.num("code", 0, 0xff)? as u8,
                0,
                0,
            ];
            s.extend_from_slice(&(f.num("id", 0, 0xffff)? as u16).to_be_bytes());
            s.extend_from_slice(&(f.num("seq", 0, 0xffff)? as u16).to_be_bytes());
            (if v6 { IPPROTO_ICMPV6 } else { IPPROTO_ICMP }, s, 2)
        }
    };
    seg.extend_from_slice(payload);
    let sum = match f.opt_num("checksum", 0xffff)? {
        Some(given) => given as u16,
        None => {
            let start = if proto == IPPROTO_ICMP {
                0
            } else {
                pseudo(proto, seg.len())
            };
            let sum = checksum(&seg, start);
            // UDP sends a computed zero as all ones (zero means "no checksum").
            if proto == IPPROTO_UDP && sum == 0 {
                0xffff
            } else {
                sum
            }
        }
    };
    seg[at..at + 2].copy_from_slice(&sum.to_be_bytes());
    Ok(Some((proto, seg)))
}

fn pseudo_sum(src: &[u8], dst: &[u8], proto: u8, len: usize) -> u32 {
    let words = src.chunks(2).chain(dst.chunks(2));
    let sum: u32 = words
        .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
        .sum();
    sum + u32::from(proto) + len as u32
}

fn ipv4(ip: &Fields, spec: &Map<String, Value>, payload: &[u8]) -> Result<Vec<u8>, String> {
    let src: Ipv4Addr = ip.parsed("src", V4_SRC, "an IPv4 address")?;
    let dst: Ipv4Addr = ip.parsed("dst", V4_DST, "an IPv4 address")?;
    let pseudo = |proto, len| pseudo_sum(&src.octets(), &dst.octets(), proto, len);
    let (proto, body) = match transport(spec, payload, pseudo)? {
        Some((proto, seg)) => (proto, seg),
        None => (ip.num("proto", 255, 0xff)? as u8, payload.to_vec()),
    };
    let mut options = ip.hex("options")?;
    options.resize(options.len().div_ceil(4) * 4, 0);
    let ihl = ip.num("ihl", (20 + options.len() as u64) / 4, 15)?;
    let len = ip.num("len", 20 + options.len() as u64 + body.len() as u64, 0xffff)?;
    let flags = (ip.num("df", 1, 1)? << 14)
        | (ip.num("mf", 0, 1)? << 13)
        | ip.num("frag_offset", 0, 0x1fff)?;
    let mut h = vec![
        ((ip.num("version", 4, 15)? as u8) << 4) | ihl as u8,
        ip.num("tos", 0, 0xff)? as u8,
    ];
    h.extend_from_slice(&(len as u16).to_be_bytes());
    h.extend_from_slice(&(ip.num("id", 0, 0xffff)? as u16).to_be_bytes());
    h.extend_from_slice(&(flags as u16).to_be_bytes());
    h.extend_from_slice(&[
        ip.num("ttl", 64, 0xff)? as u8,
        ip.num("proto", u64::from(proto), 0xff)? as u8,
        0,
        0,
    ]);
    h.extend_from_slice(&src.octets());
    h.extend_from_slice(&dst.octets());
    h.extend_from_slice(&options);
    let sum = match ip.opt_num("checksum", 0xffff)? {
        Some(given) => given as u16,
        None => checksum(&h, 0),
    };
    h[10..12].copy_from_slice(&sum.to_be_bytes());
    h.extend(body);
    Ok(h)
}

fn ipv6(ip: &Fields, spec: &Map<String, Value>, payload: &[u8]) -> Result<Vec<u8>, String> {
    let src: Ipv6Addr = ip.parsed("src", V6_SRC, "an IPv6 address")?;
    let dst: Ipv6Addr = ip.parsed("dst", V6_DST, "an IPv6 address")?;
    let exts = match ip.map.get("ext") {
        None => Vec::new(),
        Some(Value::Array(list)) => list
            .iter()
            .map(|e| Fields::new("ext", e))
            .collect::<Result<Vec<_>, _>>()?,
        Some(_) => return Err("ipv6.ext: expected a list of extension headers".into()),
    };
    let final_dst = final_destination(&exts, dst)?;
    let pseudo = |proto, len| pseudo_sum(&src.octets(), &final_dst.octets(), proto, len);
    let (proto, body) = match transport(spec, payload, pseudo)? {
        Some((proto, seg)) => (proto, seg),
        None => (59, payload.to_vec()), // no next header
    };
    let kinds = exts
        .iter()
        .map(|e| match e.text("kind")? {
            Some("hop") => Ok(NEXTHDR_HOP),
            Some("routing") => Ok(NEXTHDR_ROUTING),
            Some("fragment") => Ok(NEXTHDR_FRAGMENT),
            Some("dstopts") => Ok(NEXTHDR_DEST),
            other => Err(format!(
                "ipv6.ext: kind must be hop, routing, fragment or dstopts, got {other:?}"
            )),
        })
        .collect::<Result<Vec<u8>, _>>()?;
    let mut chain = Vec::new();
    for (i, (e, kind)) in exts.iter().zip(&kinds).enumerate() {
        let next = kinds.get(i + 1).copied().unwrap_or(proto);
        chain.extend(extension(e, *kind, next)?);
    }
    let next = kinds.first().copied().unwrap_or(proto);
    let plen = ip.num("plen", (chain.len() + body.len()) as u64, 0xffff)?;
    let word = (ip.num("version", 6, 15)? << 28)
        | (ip.num("tc", 0, 0xff)? << 20)
        | ip.num("flow", 0, 0xf_ffff)?;
    let mut h = (word as u32).to_be_bytes().to_vec();
    h.extend_from_slice(&(plen as u16).to_be_bytes());
    h.extend_from_slice(&[
        ip.num("next", u64::from(next), 0xff)? as u8,
        ip.num("hlim", 64, 0xff)? as u8,
    ]);
    h.extend_from_slice(&src.octets());
    h.extend_from_slice(&dst.octets());
    h.extend(chain);
    h.extend(body);
    Ok(h)
}

/// The destination of the transport checksum's pseudo-header: the final one, where a Routing
/// header has segments left to visit (RFC 8200, 8.1), else the header's own. Type 0 lists
/// the addresses to visit in order, the last being the final one; type 2 (mobility) and 4
/// (segment routing, which lists them backwards) put it first, after 4 bytes.
fn final_destination(exts: &[Fields], dst: Ipv6Addr) -> Result<Ipv6Addr, String> {
    for e in exts {
        if e.text("kind")? != Some("routing") || e.num("segments_left", 0, 0xff)? == 0 {
            continue;
        }
        let data = e.hex("data")?;
        let at = match e.num("type", 0, 0xff)? {
            0 if data.len() >= 20 => 4 + (data.len() - 4) / 16 * 16 - 16,
            2 | 4 if data.len() >= 20 => 4,
            _ => continue,
        };
        let octets: [u8; 16] = data[at..at + 16].try_into().expect("16 bytes");
        return Ok(Ipv6Addr::from(octets));
    }
    Ok(dst)
}

/// One extension header, its length filled in and options padded (PadN) to 8 bytes.
fn extension(e: &Fields, kind: u8, next: u8) -> Result<Vec<u8>, String> {
    let next = e.num("next", u64::from(next), 0xff)? as u8;
    if kind == NEXTHDR_FRAGMENT {
        let off = (e.num("offset", 0, 0x1fff)? << 3) | e.num("more", 0, 1)?;
        let mut h = vec![next, 0];
        h.extend_from_slice(&(off as u16).to_be_bytes());
        h.extend_from_slice(&(e.num("id", 0, u64::from(u32::MAX))? as u32).to_be_bytes());
        return Ok(h);
    }
    let mut body = Vec::new();
    if kind == NEXTHDR_ROUTING {
        body.push(e.num("type", 0, 0xff)? as u8);
        body.push(e.num("segments_left", 0, 0xff)? as u8);
    }
    body.extend(e.hex("data")?);
    let pad = (8 - (body.len() + 2) % 8) % 8;
    match pad {
        0 => {}
        1 => body.push(0), // Pad1
        n => {
            body.extend_from_slice(&[1, (n - 2) as u8]); // PadN
            body.resize(body.len() + n - 2, 0);
        }
    }
    let len = e.num("len", ((body.len() + 2) / 8 - 1) as u64, 0xff)?;
    let mut h = vec![next, len as u8];
    h.extend(body);
    Ok(h)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layers::dissect::{dissect, lookup};
    use serde_json::json;

    fn built(v: Value) -> Vec<u8> {
        build(v.as_object().unwrap()).unwrap()
    }

    #[test]
    fn given_fields_come_back_from_the_dissector() {
        let frame = built(json!({
            "vlan": {"vid": 10, "pcp": 3},
            "ipv4": {"ttl": 7, "src": "10.0.0.1"},
            "udp": {"dport": 4789},
            "payload_text": "hi"
        }));
        let layers = dissect(&frame);
        let get = |l, f| lookup(&layers, l, f).unwrap().to_string();
        assert_eq!(get("eth", "type"), "0x8100");
        assert_eq!(get("vlan", "vid"), "10");
        assert_eq!(get("vlan", "pcp"), "3");
        assert_eq!(get("ipv4", "ttl"), "7");
        assert_eq!(get("ipv4", "len"), "30");
        assert_eq!(get("udp", "len"), "10");
        assert_eq!(get("payload", "data"), "6869");
    }

    #[test]
    fn unknown_fields_and_layers_are_refused() {
        let err = build(json!({"ipv4": {"tll": 3}}).as_object().unwrap()).unwrap_err();
        assert!(err.contains("ipv4: unknown field `tll`"), "{err}");
        let err = build(json!({"ip": {}}).as_object().unwrap()).unwrap_err();
        assert!(err.contains("unknown layer `ip`"), "{err}");
    }

    #[test]
    fn extension_headers_are_padded_to_eight_bytes() {
        let frame = built(json!({
            "ipv6": {"ext": [{"kind": "hop", "data": "0502"}, {"kind": "fragment", "id": 7}]},
            "udp": {}
        }));
        let layers = dissect(&frame);
        let names: Vec<&str> = layers.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(names, ["eth", "ipv6", "hop", "fragment", "udp"]);
        assert_eq!(lookup(&layers, "ipv6", "plen").unwrap().to_string(), "24");
    }
}
