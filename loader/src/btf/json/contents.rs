//! Whole map contents: the `--maps` document (typed bpftool-shaped entries or raw hex pairs)
//! and the `--dump-maps` writer (bpftool's `-j map dump` entries, keyed by map name).

use super::decode::{parse_hex, value_from_json};
use super::encode::value_to_json;
use super::error::{JsonError, Problem, field_path, short};
use crate::btf::{Btf, TypeId};
use crate::object::{MapOrigin, MapSpec};
use bpfemu_isa::uapi::{
    BPF_MAP_TYPE_LRU_PERCPU_HASH, BPF_MAP_TYPE_PERCPU_ARRAY,
    BPF_MAP_TYPE_PERCPU_CGROUP_STORAGE_DEPRECATED, BPF_MAP_TYPE_PERCPU_HASH,
};
use serde_json::{Map, Value};

/// A value of one entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MapValue {
    /// The value of a map that is not per-CPU; for a per-CPU map read from `--maps`, the value
    /// every CPU gets (what `bpftool map update` does with one value).
    Single(Vec<u8>),
    /// One value per CPU, CPU 0 first.
    PerCpu(Vec<Vec<u8>>),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MapEntry {
    pub key: Vec<u8>,
    pub value: MapValue,
}

/// The entries of one map, named as [`MapSpec::name`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MapContents {
    pub name: String,
    pub entries: Vec<MapEntry>,
}

/// The map types whose lookups return one value per possible CPU (bpftool's list).
pub fn is_per_cpu(map_type: u32) -> bool {
    matches!(
        map_type,
        BPF_MAP_TYPE_PERCPU_HASH
            | BPF_MAP_TYPE_PERCPU_ARRAY
            | BPF_MAP_TYPE_LRU_PERCPU_HASH
            | BPF_MAP_TYPE_PERCPU_CGROUP_STORAGE_DEPRECATED
    )
}

/// One entry as `bpftool -j map dump` prints it: `"key"` and `"value"` (per-CPU maps:
/// `"values": [{"cpu": N, "value": ...}]`) as arrays of `"0x.."` byte strings, then, when the
/// map has a BTF value type, `"formatted"` with the same shape typed by BTF (without `"key"`
/// when the key has no BTF type, as for global data maps).
pub fn entry_to_json(
    spec: &MapSpec,
    btf: Option<&Btf>,
    entry: &MapEntry,
) -> Result<Value, JsonError> {
    entry_json(spec, btf, entry).map_err(|e| e.in_map(&spec.name))
}

fn entry_json(spec: &MapSpec, btf: Option<&Btf>, entry: &MapEntry) -> Result<Value, JsonError> {
    check_size("key", spec.key_size, &entry.key, ".key")?;
    let mut out = Map::new();
    out.insert("key".into(), hex_array(&entry.key));
    match (&entry.value, is_per_cpu(spec.map_type)) {
        (MapValue::Single(v), false) => {
            check_size("value", spec.value_size, v, ".value")?;
            out.insert("value".into(), hex_array(v));
        }
        (MapValue::PerCpu(values), true) => {
            for (cpu, v) in values.iter().enumerate() {
                check_size(
                    "value",
                    spec.value_size,
                    v,
                    &format!(".values[{cpu}].value"),
                )?;
            }
            out.insert("values".into(), per_cpu(values, |v| Ok(hex_array(v)))?);
        }
        (_, per_cpu) => return Err(shape_error(per_cpu)),
    }
    if let (Some(btf), Some(_)) = (btf, spec.value_type) {
        out.insert("formatted".into(), formatted(spec, btf, entry)?);
    }
    Ok(Value::Object(out))
}

/// The `--dump-maps` document: `{"MAP": [entry, ...], ...}` with [`entry_to_json`] entries.
pub fn dump_map_contents(
    contents: &[MapContents],
    maps: &[MapSpec],
    btf: Option<&Btf>,
) -> Result<Value, JsonError> {
    let mut doc = Map::new();
    for c in contents {
        let spec = maps
            .iter()
            .find(|m| m.name == c.name)
            .ok_or_else(|| unknown_map(&c.name, maps))?;
        let entries = c
            .entries
            .iter()
            .enumerate()
            .map(|(i, e)| {
                let prefix = format!("{}[{i}]", field_path("", &c.name));
                entry_to_json(spec, btf, e).map_err(|err| err.under(&prefix).in_map(&c.name))
            })
            .collect::<Result<Vec<_>, _>>()?;
        doc.insert(c.name.clone(), Value::Array(entries));
    }
    Ok(Value::Object(doc))
}

/// Reads a `--maps` document: an object keyed by map name (global data maps also by section
/// name, `.bss`), each a list of entries, each either a raw pair `["KEY_HEX", "VALUE_HEX"]`
/// (per-CPU maps: the value hex, or a list of one hex per CPU) or an object as
/// [`entry_to_json`] writes it. In an object entry:
/// - `"key"`/`"value"` given as arrays of exactly key_size/value_size `"0x.."` strings are raw
///   bytes (bpftool's hex); otherwise they are typed by the map's BTF (without BTF for that
///   side: a hex string);
/// - when raw bytes and `"formatted"` are both present, `"formatted"` must show those bytes
///   (so an edit to only one of them is reported rather than ignored); `"formatted"` alone is
///   read as the typed form;
/// - per-CPU maps take `"values": [{"cpu": N, "value": ..}]` (or a list of values), or one
///   `"value"` for every CPU; a global data map's `"key"` may be left out (it is 0).
pub fn parse_map_contents(
    doc: &Value,
    maps: &[MapSpec],
    btf: Option<&Btf>,
) -> Result<Vec<MapContents>, JsonError> {
    let obj = doc.as_object().ok_or_else(|| {
        JsonError::at(
            "",
            Problem::Expected {
                expected: "an object keyed by map name".into(),
                got: short(doc),
            },
        )
    })?;
    obj.iter()
        .map(|(name, entries)| {
            let spec = find_map(name, maps).ok_or_else(|| unknown_map(name, maps))?;
            let path = field_path("", name);
            parse_entries(spec, btf, entries, &path).map_err(|e| e.in_map(&spec.name))
        })
        .collect()
}

fn parse_entries(
    spec: &MapSpec,
    btf: Option<&Btf>,
    v: &Value,
    path: &str,
) -> Result<MapContents, JsonError> {
    let items = v.as_array().ok_or_else(|| {
        JsonError::at(
            path,
            Problem::Expected {
                expected: "a list of entries".into(),
                got: short(v),
            },
        )
    })?;
    let entries = items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let p = format!("{path}[{i}]");
            match item {
                Value::Array(pair) => raw_pair(spec, pair, &p),
                Value::Object(o) => object_entry(spec, btf, o, &p),
                _ => Err(JsonError::at(
                    &p,
                    Problem::Expected {
                        expected:
                            "[\"KEY_HEX\", \"VALUE_HEX\"] or an object with \"key\" and \"value\""
                                .into(),
                        got: short(item),
                    },
                )),
            }
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(MapContents {
        name: spec.name.clone(),
        entries,
    })
}

fn raw_pair(spec: &MapSpec, pair: &[Value], path: &str) -> Result<MapEntry, JsonError> {
    let [k, v] = pair else {
        return Err(JsonError::at(
            path,
            Problem::Shape(format!(
                "a raw entry is [\"KEY_HEX\", \"VALUE_HEX\"], got {} elements",
                pair.len()
            )),
        ));
    };
    let key = hex_string(k, &format!("{path}[0]"))?;
    check_size("key", spec.key_size, &key, &format!("{path}[0]"))?;
    let vpath = format!("{path}[1]");
    let value = match v {
        Value::Array(list) if is_per_cpu(spec.map_type) => {
            let values = list
                .iter()
                .enumerate()
                .map(|(c, x)| sized_hex(x, spec.value_size, &format!("{vpath}[{c}]")))
                .collect::<Result<Vec<_>, _>>()?;
            MapValue::PerCpu(values)
        }
        _ => MapValue::Single(sized_hex(v, spec.value_size, &vpath)?),
    };
    Ok(MapEntry { key, value })
}

fn object_entry(
    spec: &MapSpec,
    btf: Option<&Btf>,
    o: &Map<String, Value>,
    path: &str,
) -> Result<MapEntry, JsonError> {
    if let Some(k) = o
        .keys()
        .find(|k| !matches!(k.as_str(), "key" | "value" | "values" | "formatted"))
    {
        return Err(JsonError::at(
            path,
            Problem::UnknownField {
                field: k.clone(),
                ty: "a map entry (key, value, values, formatted)".into(),
            },
        ));
    }
    let formatted = o.get("formatted");
    if let Some(f) = formatted.filter(|f| !f.is_object()) {
        return Err(JsonError::at(
            &format!("{path}.formatted"),
            Problem::Expected {
                expected: "an object".into(),
                got: short(f),
            },
        ));
    }
    let has_raw = o.contains_key("value") || o.contains_key("values");
    // `formatted` alone is the typed form; next to raw bytes it is only checked.
    let src = if has_raw {
        o
    } else {
        formatted.and_then(Value::as_object).unwrap_or(o)
    };
    let spath = if has_raw || formatted.is_none() {
        path.to_string()
    } else {
        format!("{path}.formatted")
    };
    let entry = MapEntry {
        key: key_bytes(spec, btf, src.get("key"), &spath)?,
        value: value_bytes(spec, btf, src, &spath)?,
    };
    if let (true, Some(f), Some(btf)) = (has_raw, formatted, btf) {
        check_formatted(spec, btf, &entry, f, path)?;
    }
    Ok(entry)
}

fn key_bytes(
    spec: &MapSpec,
    btf: Option<&Btf>,
    k: Option<&Value>,
    path: &str,
) -> Result<Vec<u8>, JsonError> {
    match k {
        Some(k) => side(
            spec.key_type,
            btf,
            "key",
            spec.key_size,
            k,
            &format!("{path}.key"),
        ),
        None if matches!(spec.origin, MapOrigin::GlobalData { .. }) => {
            Ok(vec![0; spec.key_size as usize])
        }
        None => Err(JsonError::at(
            path,
            Problem::Shape("the entry has no \"key\"".into()),
        )),
    }
}

fn value_bytes(
    spec: &MapSpec,
    btf: Option<&Btf>,
    o: &Map<String, Value>,
    path: &str,
) -> Result<MapValue, JsonError> {
    let one = |v: &Value, p: &str| side(spec.value_type, btf, "value", spec.value_size, v, p);
    match (o.get("value"), o.get("values")) {
        (Some(v), None) => Ok(MapValue::Single(one(v, &format!("{path}.value"))?)),
        (None, Some(vs)) if is_per_cpu(spec.map_type) => {
            let vpath = format!("{path}.values");
            let list = vs.as_array().ok_or_else(|| {
                JsonError::at(
                    &vpath,
                    Problem::Expected {
                        expected: "a list of per-CPU values".into(),
                        got: short(vs),
                    },
                )
            })?;
            let mut values = vec![None; list.len()];
            for (i, item) in list.iter().enumerate() {
                let (cpu, v, p) = per_cpu_item(item, i, &vpath)?;
                let slot = values.get_mut(cpu).ok_or_else(|| {
                    JsonError::at(
                        &p,
                        Problem::Shape(format!(
                            "cpu {cpu} out of range: {} values given",
                            list.len()
                        )),
                    )
                })?;
                *slot = Some(one(v, &p)?);
            }
            let values = values
                .into_iter()
                .enumerate()
                .map(|(c, v)| {
                    v.ok_or_else(|| {
                        JsonError::at(&vpath, Problem::Shape(format!("no value for cpu {c}")))
                    })
                })
                .collect::<Result<_, _>>()?;
            Ok(MapValue::PerCpu(values))
        }
        (None, Some(_)) => Err(JsonError::at(
            path,
            Problem::Shape("\"values\" is for per-CPU maps; use \"value\"".into()),
        )),
        (Some(_), Some(_)) => Err(JsonError::at(
            path,
            Problem::Shape("both \"value\" and \"values\"".into()),
        )),
        (None, None) => Err(JsonError::at(
            path,
            Problem::Shape("the entry has no \"value\"".into()),
        )),
    }
}

/// `{"cpu": N, "value": V}` (bpftool) or a bare value (CPU = its position).
fn per_cpu_item<'v>(
    item: &'v Value,
    i: usize,
    path: &str,
) -> Result<(usize, &'v Value, String), JsonError> {
    let p = format!("{path}[{i}]");
    match item.as_object().filter(|o| o.contains_key("cpu")) {
        Some(o) => {
            let cpu = o.get("cpu").and_then(Value::as_u64).ok_or_else(|| {
                JsonError::at(
                    &format!("{p}.cpu"),
                    Problem::Expected {
                        expected: "a CPU number".into(),
                        got: short(&o["cpu"]),
                    },
                )
            })?;
            let v = o
                .get("value")
                .ok_or_else(|| JsonError::at(&p, Problem::Shape("no \"value\"".into())))?;
            Ok((cpu as usize, v, format!("{p}.value")))
        }
        None => Ok((i, item, p)),
    }
}

/// A key or a value: bpftool's raw hex array, typed JSON, or (without BTF) a hex string.
fn side(
    ty: Option<TypeId>,
    btf: Option<&Btf>,
    what: &'static str,
    size: u32,
    v: &Value,
    path: &str,
) -> Result<Vec<u8>, JsonError> {
    let bytes = match (raw_byte_array(v), ty.zip(btf)) {
        (Some(bytes), _) => bytes,
        (None, Some((ty, btf))) => value_from_json(btf, ty, v).map_err(|e| e.under(path))?,
        (None, None) => hex_string(v, path)?,
    };
    check_size(what, size, &bytes, path)?;
    Ok(bytes)
}

fn check_formatted(
    spec: &MapSpec,
    btf: &Btf,
    entry: &MapEntry,
    given: &Value,
    path: &str,
) -> Result<(), JsonError> {
    let shown = formatted(spec, btf, entry)?;
    let (Some(shown), Some(given)) = (shown.as_object(), given.as_object()) else {
        return Ok(());
    };
    for (what, v) in given {
        if shown.get(what) != Some(v) {
            let hex = shown.get(what).map_or("nothing".into(), Value::to_string);
            let what = match what.as_str() {
                "key" => "key",
                "value" => "value",
                _ => "values",
            };
            return Err(JsonError::at(
                &format!("{path}.formatted"),
                Problem::FormattedMismatch {
                    what,
                    formatted: v.to_string(),
                    hex,
                },
            ));
        }
    }
    Ok(())
}

/// bpftool's `"formatted"` object for an entry.
fn formatted(spec: &MapSpec, btf: &Btf, entry: &MapEntry) -> Result<Value, JsonError> {
    let mut f = Map::new();
    if let Some(kt) = spec.key_type {
        f.insert(
            "key".into(),
            value_to_json(btf, kt, &entry.key).map_err(|e| e.under(".formatted.key"))?,
        );
    }
    let Some(vt) = spec.value_type else {
        return Ok(Value::Object(f));
    };
    match &entry.value {
        MapValue::Single(v) => {
            f.insert(
                "value".into(),
                value_to_json(btf, vt, v).map_err(|e| e.under(".formatted.value"))?,
            );
        }
        MapValue::PerCpu(values) => {
            let vs = per_cpu(values, |v| {
                value_to_json(btf, vt, v).map_err(|e| e.under(".formatted.values"))
            })?;
            f.insert("values".into(), vs);
        }
    }
    Ok(Value::Object(f))
}

fn per_cpu(
    values: &[Vec<u8>],
    show: impl Fn(&[u8]) -> Result<Value, JsonError>,
) -> Result<Value, JsonError> {
    let items = values
        .iter()
        .enumerate()
        .map(|(cpu, v)| {
            Ok(Value::Object(Map::from_iter([
                ("cpu".to_string(), Value::from(cpu)),
                ("value".to_string(), show(v)?),
            ])))
        })
        .collect::<Result<Vec<_>, JsonError>>()?;
    Ok(Value::Array(items))
}

/// bpftool's raw bytes: `["0x0a", "0x0b"]`.
fn hex_array(bytes: &[u8]) -> Value {
    Value::Array(
        bytes
            .iter()
            .map(|b| Value::from(format!("0x{b:02x}")))
            .collect(),
    )
}

/// An array of exactly `size` `"0x.."` byte strings, as bpftool prints raw bytes.
/// bpftool's raw form of a key or value: an array of byte strings (`["0x0a", "0x00"]`; a
/// string without `0x` is decimal, as bpftool's command line reads it), of any length so that a
/// wrong length is reported as a size. `None` for anything else (a typed value).
fn raw_byte_array(v: &Value) -> Option<Vec<u8>> {
    let items = v.as_array().filter(|a| !a.is_empty())?;
    items
        .iter()
        .map(|x| {
            let s = x.as_str()?;
            match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
                Some(d) if d.len() <= 2 => u8::from_str_radix(d, 16).ok(),
                Some(_) => None,
                None => s.parse().ok(),
            }
        })
        .collect()
}

fn hex_string(v: &Value, path: &str) -> Result<Vec<u8>, JsonError> {
    match v {
        Value::String(s) => parse_hex(s).map_err(|e| e.under(path)),
        _ => Err(JsonError::at(
            path,
            Problem::Expected {
                expected: "a hex string (the map has no BTF type for it)".into(),
                got: short(v),
            },
        )),
    }
}

fn sized_hex(v: &Value, size: u32, path: &str) -> Result<Vec<u8>, JsonError> {
    let bytes = hex_string(v, path)?;
    check_size("value", size, &bytes, path)?;
    Ok(bytes)
}

fn check_size(
    what: &'static str,
    expected: u32,
    bytes: &[u8],
    path: &str,
) -> Result<(), JsonError> {
    if bytes.len() == expected as usize {
        Ok(())
    } else {
        Err(JsonError::at(
            path,
            Problem::Size {
                what,
                expected,
                got: bytes.len(),
            },
        ))
    }
}

fn shape_error(per_cpu: bool) -> JsonError {
    let msg = if per_cpu {
        "a per-CPU map needs one value per CPU"
    } else {
        "per-CPU values for a map that is not per-CPU"
    };
    JsonError::at("", Problem::Shape(msg.into()))
}

fn find_map<'m>(name: &str, maps: &'m [MapSpec]) -> Option<&'m MapSpec> {
    maps.iter().find(|m| m.name == name).or_else(|| {
        maps.iter()
            .find(|m| matches!(&m.origin, MapOrigin::GlobalData { section } if section == name))
    })
}

fn unknown_map(name: &str, maps: &[MapSpec]) -> JsonError {
    let mut known: Vec<String> = maps.iter().map(|m| m.name.clone()).collect();
    known.extend(maps.iter().filter_map(|m| match &m.origin {
        MapOrigin::GlobalData { section } => Some(section.clone()),
        _ => None,
    }));
    JsonError::at(
        "",
        Problem::UnknownMap {
            name: name.to_string(),
            known: known.join(", "),
        },
    )
}
