//! Expectations against what came out, each difference said by layer and field
//! (`ipv4.ttl: expected 63, got 64`), map entry and field, or record, never only as a hex
//! dump.

use super::spec::{Expect, Output};
use crate::layers::build::{parse_hex, parse_mac, parse_number};
use crate::layers::dissect::{dissect, tcp_flags_value};
use crate::layers::{Field, Layer};
use crate::mapio::{RawMaps, describe_entry};
use bpfemu_loader::Object;
use bpfemu_loader::btf::json::{self, MapValue};
use serde_json::Value;

/// What one packet gave.
#[derive(Clone, Debug)]
pub struct PacketOut {
    pub action: String,
    /// The frame after any metadata.
    pub frame: Vec<u8>,
    /// The metadata in front of it.
    pub meta: Vec<u8>,
    /// `None` where the side cannot say (the kernel's test run).
    pub redirect: Option<String>,
}

/// What a test's packets gave, on one side (bpfemu or the kernel).
#[derive(Clone, Debug)]
pub struct Observed {
    pub packets: Vec<PacketOut>,
    /// The maps after the last packet (per-CPU values as the syscall side has them).
    pub maps: RawMaps,
    pub records: Vec<String>,
    /// `None` where the side cannot say (the kernel's trace pipe is not read).
    pub printk: Option<Vec<String>>,
}

/// Every difference between `expect` and `got`.
pub fn check(expect: &Expect, got: &Observed, object: &Object) -> Vec<String> {
    let mut problems = Vec::new();
    let many = got.packets.len() > 1;
    let label = |i: usize| {
        if many {
            format!("packet {i}: ")
        } else {
            String::new()
        }
    };
    if let Some(actions) = &expect.action {
        if actions.len() != 1 && actions.len() != got.packets.len() {
            problems.push(format!(
                "action: {} actions expected, the test runs {} packets",
                actions.len(),
                got.packets.len()
            ));
        } else {
            for (i, p) in got.packets.iter().enumerate() {
                let want = &actions[if actions.len() == 1 { 0 } else { i }];
                if *want != p.action {
                    problems.push(format!(
                        "{}action: expected {want}, got {}",
                        label(i),
                        p.action
                    ));
                }
            }
        }
    }
    if let Some(output) = &expect.output {
        for (i, p) in got.packets.iter().enumerate() {
            let diffs = match output {
                Output::Bytes(want) => frame_diff(want, &p.frame),
                Output::Fields(fields) => field_diff(fields, &p.frame),
            };
            problems.extend(diffs.into_iter().map(|d| format!("{}{d}", label(i))));
        }
    }
    if let Some(want) = &expect.meta {
        for (i, p) in got.packets.iter().enumerate() {
            if *want != p.meta {
                problems.push(format!(
                    "{}meta: expected {}, got {}",
                    label(i),
                    crate::replay::hex(want),
                    crate::replay::hex(&p.meta)
                ));
            }
        }
    }
    if let Some(want) = &expect.redirect {
        for (i, p) in got.packets.iter().enumerate() {
            if let Some(redirect) = &p.redirect
                && redirect != want
            {
                problems.push(format!(
                    "{}redirect: expected {want}, got {redirect}",
                    label(i)
                ));
            }
        }
    }
    if let Some(maps) = &expect.maps {
        problems.extend(maps_diff(maps, &got.maps, object));
    }
    if let Some(want) = &expect.records {
        problems.extend(list_diff("records", want, &got.records, record_matches));
    }
    if let (Some(want), Some(printk)) = (&expect.printk, &got.printk) {
        problems.extend(list_diff("printk", want, printk, |w, g| w == g));
    }
    problems
}

/// Whether a record matches its expectation: `?` in the expected hex stands for any digit
/// (a clock value the kernel's run cannot reproduce).
pub fn record_matches(want: &str, got: &str) -> bool {
    want.len() == got.len()
        && want
            .bytes()
            .zip(got.bytes())
            .all(|(w, g)| w == g || w == b'?')
}

/// Two lists of lines, entry by entry.
fn list_diff(
    what: &str,
    want: &[String],
    got: &[String],
    matches: fn(&str, &str) -> bool,
) -> Vec<String> {
    let mut out = Vec::new();
    if want.len() != got.len() {
        out.push(format!(
            "{what}: expected {} lines, got {}",
            want.len(),
            got.len()
        ));
    }
    for i in 0..want.len().max(got.len()) {
        match (want.get(i), got.get(i)) {
            (Some(w), Some(g)) if !matches(w, g) => {
                out.push(format!("{what}[{i}]: expected {w:?}, got {g:?}"))
            }
            (Some(w), None) => out.push(format!("{what}[{i}]: expected {w:?}, got nothing")),
            (None, Some(g)) => out.push(format!("{what}[{i}]: not expected: {g:?}")),
            _ => {}
        }
    }
    out
}

/// Expected bytes against the frame that came out: the length, then layer by layer and field
/// by field; the first differing byte when no field shows the difference.
pub fn frame_diff(want: &[u8], got: &[u8]) -> Vec<String> {
    if want == got {
        return Vec::new();
    }
    let mut out = Vec::new();
    if want.len() != got.len() {
        out.push(format!(
            "length: expected {} bytes, got {}",
            want.len(),
            got.len()
        ));
    }
    let (w, g) = (dissect(want), dissect(got));
    for layer in &w {
        let Some(other) = g.iter().find(|l| l.name == layer.name) else {
            out.push(format!(
                "{}: expected this layer, the packet has none",
                layer.name
            ));
            continue;
        };
        for (field, value) in &layer.fields {
            match other.get(field) {
                Some(v) if v == value => {}
                Some(v) => out.push(format!("{}.{field}: expected {value}, got {v}", layer.name)),
                None => out.push(format!(
                    "{}.{field}: expected {value}, got nothing",
                    layer.name
                )),
            }
        }
    }
    for layer in g.iter().filter(|l| !w.iter().any(|x| x.name == l.name)) {
        out.push(format!("{}: a layer not expected", layer.name));
    }
    if out.iter().all(|d| d.starts_with("length:")) {
        let at = want
            .iter()
            .zip(got)
            .position(|(a, b)| a != b)
            .unwrap_or(want.len().min(got.len()));
        out.push(format!("bytes differ from offset {at}"));
    }
    out
}

/// Expected fields (`ipv4 = { ttl = 63 }`) against the frame's dissection.
pub fn field_diff(fields: &serde_json::Map<String, Value>, got: &[u8]) -> Vec<String> {
    let layers = dissect(got);
    let mut out = Vec::new();
    for (layer, want) in fields {
        let Some(found) = layers.iter().find(|l| l.name == *layer) else {
            let names: Vec<&str> = layers.iter().map(|l| l.name.as_str()).collect();
            out.push(format!(
                "{layer}: expected this layer, the packet has {}",
                names.join(", ")
            ));
            continue;
        };
        for (field, value) in want.as_object().into_iter().flatten() {
            match found.get(field) {
                None => out.push(format!(
                    "{layer}.{field}: no such field (fields: {})",
                    field_names(found)
                )),
                Some(actual) if !field_equals(field, value, actual) => out.push(format!(
                    "{layer}.{field}: expected {}, got {actual}",
                    show(value)
                )),
                Some(_) => {}
            }
        }
    }
    out
}

fn field_names(layer: &Layer) -> String {
    layer
        .fields
        .iter()
        .map(|(n, _)| *n)
        .collect::<Vec<_>>()
        .join(", ")
}

fn show(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Whether a value written in a test file means the field's value: numbers in any base,
/// addresses in any spelling, TCP flags in any order, hex in any case.
pub fn field_equals(field: &str, want: &Value, got: &Field) -> bool {
    match got {
        Field::Num(n) | Field::Hex(n, _) => match want {
            Value::Number(w) => w.as_u64() == Some(*n),
            Value::Bool(b) => u64::from(*b) == *n,
            Value::String(s) => parse_number(s) == Some(*n),
            _ => false,
        },
        Field::Text(text) => {
            let Value::String(w) = want else {
                return false;
            };
            if field == "flags" {
                return tcp_flags_value(w).is_some() && tcp_flags_value(w) == tcp_flags_value(text);
            }
            if let (Some(a), Some(b)) = (parse_mac(w), parse_mac(text)) {
                return a == b;
            }
            if let (Ok(a), Ok(b)) = (
                w.parse::<std::net::IpAddr>(),
                text.parse::<std::net::IpAddr>(),
            ) {
                return a == b;
            }
            match (parse_hex(w), parse_hex(text)) {
                (Ok(a), Ok(b)) => a == b,
                _ => w == text,
            }
        }
    }
}

/// Expected map entries against the maps after the run, field by field of the typed values.
fn maps_diff(expected: &Value, got: &RawMaps, object: &Object) -> Vec<String> {
    let contents = match json::parse_map_contents(expected, &object.maps, object.btf.as_ref()) {
        Ok(c) => c,
        Err(e) => return vec![format!("expect.maps: {e}")],
    };
    let mut out = Vec::new();
    for map in &contents {
        let spec = object
            .maps
            .iter()
            .find(|m| m.name == map.name)
            .expect("parsed against them");
        let per_cpu = json::is_per_cpu(spec.map_type);
        let size = spec.value_size as usize;
        let slot = size.div_ceil(8) * 8;
        for entry in &map.entries {
            let describe =
                |value: &[u8]| typed_value(object, &map.name, &entry.key, value, per_cpu);
            let key_text = typed_key(object, &map.name, &entry.key);
            let at = format!("maps.{}{key_text}", map.name);
            let Some(actual) = got.get(&map.name).and_then(|m| m.get(&entry.key)) else {
                out.push(format!("{at}: expected an entry, the map has none"));
                continue;
            };
            // Per-CPU values: one value is CPU 0's (the CPU a test runs on); a list, each CPU's.
            let pairs: Vec<(Option<usize>, &[u8], &[u8])> = match (&entry.value, per_cpu) {
                (MapValue::Single(v), false) => vec![(None, v, actual)],
                (MapValue::Single(v), true) => vec![(None, v, cpu_slot(actual, 0, slot, size))],
                (MapValue::PerCpu(vs), _) => vs
                    .iter()
                    .enumerate()
                    .map(|(cpu, v)| (Some(cpu), v.as_slice(), cpu_slot(actual, cpu, slot, size)))
                    .collect(),
            };
            for (cpu, want, have) in pairs {
                if want == have {
                    continue;
                }
                let at = match cpu {
                    Some(c) => format!("{at} cpu {c}"),
                    None => at.clone(),
                };
                let diffs = json_diff("", &describe(want), &describe(have));
                if diffs.is_empty() {
                    out.push(format!(
                        "{at}: expected {}, got {}",
                        crate::replay::hex(want),
                        crate::replay::hex(have)
                    ));
                }
                out.extend(diffs.into_iter().map(|d| format!("{at}{d}")));
            }
        }
    }
    out
}

fn cpu_slot(bytes: &[u8], cpu: usize, slot: usize, size: usize) -> &[u8] {
    bytes.get(cpu * slot..cpu * slot + size).unwrap_or(&[])
}

/// `[KEY]` as bpftool's formatted JSON shows the key (nothing for global data).
fn typed_key(object: &Object, map: &str, key: &[u8]) -> String {
    let text = describe_entry(object, map, key, &[]);
    match serde_json::from_str::<Value>(&text)
        .ok()
        .and_then(|v| v.get("key").cloned())
    {
        Some(k) => format!("[{}]", show(&k)),
        None if map.starts_with('.') => String::new(),
        None => format!("[{}]", crate::replay::hex(key)),
    }
}

/// A value typed by BTF (a per-CPU map's value as one CPU's).
fn typed_value(object: &Object, map: &str, key: &[u8], value: &[u8], per_cpu: bool) -> Value {
    let text = describe_entry(object, map, key, value);
    let doc: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
    let v = match per_cpu {
        true => doc.pointer("/values/0/value").cloned(),
        false => doc.get("value").cloned(),
    };
    v.unwrap_or(Value::String(crate::replay::hex(value)))
}

/// Field paths where two JSON values differ: `.packets: expected 2, got 1`.
pub fn json_diff(path: &str, want: &Value, got: &Value) -> Vec<String> {
    match (want, got) {
        (Value::Object(w), Value::Object(g)) => {
            let mut out = Vec::new();
            for (k, wv) in w {
                let p = if k.is_empty() {
                    path.to_owned()
                } else {
                    format!("{path}.{k}")
                };
                match g.get(k) {
                    Some(gv) => out.extend(json_diff(&p, wv, gv)),
                    None => out.push(format!("{p}: expected {}, got nothing", show(wv))),
                }
            }
            out
        }
        (Value::Array(w), Value::Array(g)) if w.len() == g.len() => w
            .iter()
            .zip(g)
            .enumerate()
            .flat_map(|(i, (wv, gv))| json_diff(&format!("{path}[{i}]"), wv, gv))
            .collect(),
        _ if want == got => Vec::new(),
        _ => vec![format!(
            "{path}: expected {}, got {}",
            show(want),
            show(got)
        )],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn frames_differ_by_field() {
        let spec = json!({"ipv4": {"ttl": 64}, "udp": {"dport": 53}});
        let a = crate::layers::build::build(spec.as_object().unwrap()).unwrap();
        let spec = json!({"ipv4": {"ttl": 63}, "udp": {"dport": 53}});
        let b = crate::layers::build::build(spec.as_object().unwrap()).unwrap();
        let d = frame_diff(&b, &a);
        assert!(
            d.contains(&"ipv4.ttl: expected 63, got 64".to_owned()),
            "{d:?}"
        );
        assert!(
            d.iter()
                .any(|l| l.starts_with("ipv4.checksum: expected 0x")),
            "{d:?}"
        );
        assert!(frame_diff(&a, &a).is_empty());
    }

    #[test]
    fn fields_compare_in_any_spelling() {
        assert!(field_equals(
            "src",
            &json!("02:00:00:00:00:0A"),
            &Field::Text("02:00:00:00:00:0a".into())
        ));
        assert!(field_equals(
            "dst",
            &json!("2001:db8::0:1"),
            &Field::Text("2001:db8::1".into())
        ));
        assert!(field_equals(
            "type",
            &json!("0x0800"),
            &Field::Hex(0x800, 4)
        ));
        assert!(field_equals(
            "flags",
            &json!("AS"),
            &Field::Text("S.".into())
        ));
        assert!(!field_equals("ttl", &json!(63), &Field::Num(64)));
    }
}
