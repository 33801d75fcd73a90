//! `--record-type MAP=TYPE`: the records a ring buffer or perf event array received, shown
//! typed by a type of the object's BTF, as bpftool shows a map value (`"formatted"`).
//!
//! Nothing in an object ties a record to a type: `bpf_ringbuf_reserve` and
//! `bpf_perf_event_output` take a size, and the map definition has no value type. So the user
//! names the type, as they do when they decode records in their own loader. clang puts in BTF
//! only the types that globals, maps and functions use; a type used only inside a function
//! (the usual `struct event *e = bpf_ringbuf_reserve(...)`) is absent, and the error says how to
//! keep it (the `unused` global pointer libbpf-based tools declare for the same reason).

use anyhow::{Result, bail};
use bpfemu_loader::Object;
use bpfemu_loader::btf::json::value_to_json;
use bpfemu_loader::btf::{Btf, BtfKind, TypeId};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

use bpfemu_isa::uapi::{BPF_MAP_TYPE_PERF_EVENT_ARRAY, BPF_MAP_TYPE_RINGBUF};

/// Parses `MAP=TYPE` (the type as C spells it: `struct event`, `union u`, a typedef's name).
pub fn parse_record_type(s: &str) -> Result<(String, String), String> {
    let (map, ty) = s
        .split_once('=')
        .ok_or_else(|| format!("`{s}` is not MAP=TYPE (e.g. events='struct event')"))?;
    let (map, ty) = (
        map.trim(),
        ty.split_whitespace().collect::<Vec<_>>().join(" "),
    );
    if map.is_empty() || ty.is_empty() {
        return Err(format!(
            "`{s}` is not MAP=TYPE (e.g. events='struct event')"
        ));
    }
    Ok((map.to_owned(), ty))
}

/// The record types of one object, by map name.
#[derive(Default)]
pub struct RecordTypes {
    btf: Option<Btf>,
    by_map: BTreeMap<String, Typed>,
}

struct Typed {
    ty: TypeId,
    size: usize,
}

impl RecordTypes {
    /// Resolves each `(MAP, TYPE)` against the object: the map must exist and receive records,
    /// the type must be in the object's BTF.
    pub fn resolve(object: &Object, path: &Path, wanted: &[(String, String)]) -> Result<Self> {
        let mut out = RecordTypes::default();
        if wanted.is_empty() {
            return Ok(out);
        }
        let file = path.display();
        let Some(btf) = &object.btf else {
            bail!("--record-type: {file} has no BTF (build it with clang -g)");
        };
        for (map, name) in wanted {
            let option = format!("--record-type {map}='{name}'");
            let Some(spec) = object.maps.iter().find(|m| &m.name == map) else {
                bail!("{option}: {file} has no map {map}");
            };
            if !matches!(
                spec.map_type,
                BPF_MAP_TYPE_RINGBUF | BPF_MAP_TYPE_PERF_EVENT_ARRAY
            ) {
                bail!("{option}: map {map} of {file} is not a ring buffer or a perf event array");
            }
            let Some(ty) = find_type(btf, name) else {
                let ident = name.rsplit(' ').next().unwrap_or(name);
                bail!(
                    "{option}: {file}'s BTF has no {name} (clang keeps only the types that \
                     globals, maps and functions use; declare `{name} *unused_{ident} \
                     __attribute__((unused));` to keep it)"
                );
            };
            let Some(size) = btf.size_of(ty).filter(|&s| s > 0) else {
                bail!("{option}: {name} has no size");
            };
            out.by_map.insert(
                map.clone(),
                Typed {
                    ty,
                    size: size as usize,
                },
            );
        }
        out.btf = Some(btf.clone());
        Ok(out)
    }

    /// A record of `map` typed, when the user gave its type and the record holds one (a longer
    /// record's first bytes are shown typed: variable-length records end in a buffer).
    pub fn formatted(&self, map: &str, data: &[u8]) -> Option<Value> {
        let typed = self.by_map.get(map)?;
        let btf = self.btf.as_ref()?;
        if data.len() < typed.size {
            return None;
        }
        value_to_json(btf, typed.ty, &data[..typed.size]).ok()
    }

    /// Adds `"formatted"` to an event's JSON (`{"map": .., "data": ..}`) when it can be typed.
    pub fn decorate(&self, event: &mut Value, map: &str, data: &[u8]) {
        if let Some(v) = self.formatted(map, data) {
            event["formatted"] = v;
        }
    }

    pub fn is_empty(&self) -> bool {
        self.by_map.is_empty()
    }
}

/// A type by its C spelling: `struct X`, `union X`, `enum X`, or a bare name (a typedef first,
/// then any named struct, union, enum or integer).
fn find_type(btf: &Btf, spelled: &str) -> Option<TypeId> {
    let (tag, name) = match spelled.split_once(' ') {
        Some((tag @ ("struct" | "union" | "enum"), name)) => (Some(tag), name),
        _ => (None, spelled),
    };
    match tag {
        Some("struct") => btf.find_by_name_kind(name, |k| matches!(k, BtfKind::Struct { .. })),
        Some("union") => btf.find_by_name_kind(name, |k| matches!(k, BtfKind::Union { .. })),
        Some(_) => btf.find_by_name_kind(name, |k| {
            matches!(k, BtfKind::Enum { .. } | BtfKind::Enum64 { .. })
        }),
        None => btf
            .find_by_name_kind(name, |k| matches!(k, BtfKind::Typedef { .. }))
            .or_else(|| {
                btf.find_by_name_kind(name, |k| {
                    matches!(
                        k,
                        BtfKind::Struct { .. }
                            | BtfKind::Union { .. }
                            | BtfKind::Enum { .. }
                            | BtfKind::Enum64 { .. }
                            | BtfKind::Int { .. }
                    )
                })
            }),
    }
}

#[cfg(test)]
mod tests {
    use super::parse_record_type;

    #[test]
    fn map_and_type_are_split_at_the_first_equals_sign() {
        assert_eq!(
            parse_record_type("events=struct  event"),
            Ok(("events".into(), "struct event".into()))
        );
        assert_eq!(
            parse_record_type("rb=__u64"),
            Ok(("rb".into(), "__u64".into()))
        );
        assert!(parse_record_type("events").is_err());
        assert!(parse_record_type("=struct x").is_err());
        assert!(parse_record_type("rb=").is_err());
    }
}
