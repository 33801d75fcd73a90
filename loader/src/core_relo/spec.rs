//! Access specs: the parsed form of a relocation's access string (`0:1:2`) against the local
//! BTF, and the matching of such a spec against one candidate type of the target BTF.
//!
//! A spec keeps two views, as libbpf does: `raw` has one entry per access-string element
//! (including hops through anonymous members), `acc` only the meaningful ones (the root
//! element, named fields, array indices), which are what must match by name in the target.

use super::CoreFailure;
use super::compat::{essential_name, fields_are_compat, types_are_compat, types_match};
use crate::btf::{Btf, BtfKind, CoreRelo, CoreReloKind, TypeId};

/// libbpf's `BPF_CORE_SPEC_MAX_LEN`: deepest nesting an access string may have.
const MAX_SPEC_LEN: usize = 64;

/// One meaningful step of an access: a named member (`name` set), or an array element / the
/// root element (`name` unset). `type_id` is the composite holding the member, or the element
/// type for array steps.
#[derive(Clone, Debug)]
pub(crate) struct Accessor<'a> {
    pub type_id: TypeId,
    pub idx: u32,
    pub name: Option<&'a str>,
}

#[derive(Clone, Debug)]
pub(crate) struct Spec<'a> {
    pub btf: &'a Btf,
    pub root_type_id: TypeId,
    pub raw: Vec<u32>,
    pub acc: Vec<Accessor<'a>>,
    /// Offset of the accessed field from the root pointer, in bits.
    pub bit_offset: u32,
}

pub(crate) fn is_field_based(kind: CoreReloKind) -> bool {
    use CoreReloKind::*;
    matches!(
        kind,
        FieldByteOffset
            | FieldByteSize
            | FieldExists
            | FieldSigned
            | FieldLshiftU64
            | FieldRshiftU64
    )
}

pub(crate) fn is_type_based(kind: CoreReloKind) -> bool {
    use CoreReloKind::*;
    matches!(
        kind,
        TypeIdLocal | TypeIdTarget | TypeExists | TypeMatches | TypeSize
    )
}

pub(crate) fn is_enumval_based(kind: CoreReloKind) -> bool {
    matches!(
        kind,
        CoreReloKind::EnumvalExists | CoreReloKind::EnumvalValue
    )
}

impl<'a> Spec<'a> {
    fn empty(btf: &'a Btf, root_type_id: TypeId) -> Self {
        Spec {
            btf,
            root_type_id,
            raw: Vec::new(),
            acc: Vec::new(),
            bit_offset: 0,
        }
    }

    fn push_raw(&mut self, idx: u32) -> Result<(), CoreFailure> {
        if self.raw.len() == MAX_SPEC_LEN {
            return Err(CoreFailure::TooDeep);
        }
        self.raw.push(idx);
        Ok(())
    }

    /// Adds `idx` elements of `type_id` to the bit offset (array and root steps).
    fn add_elements(&mut self, idx: u32, type_id: TypeId) -> Result<(), CoreFailure> {
        let size = self
            .btf
            .size_of(type_id)
            .ok_or(CoreFailure::NoSize(type_id))?;
        let bits = (u64::from(idx) * u64::from(size) * 8) as u32;
        self.bit_offset = self.bit_offset.wrapping_add(bits);
        Ok(())
    }
}

/// Splits `0:1:2` into numbers. Empty elements, signs and junk are errors.
fn parse_access(access: &str) -> Result<Vec<u32>, CoreFailure> {
    let bad = |why: &str| CoreFailure::BadAccess(why.to_string());
    if access.is_empty() || access.starts_with(':') {
        return Err(bad("empty or starts with ':'"));
    }
    let mut raw = Vec::new();
    for part in access.split(':') {
        let idx: u32 = part
            .parse()
            .map_err(|_| bad("not a list of numbers separated by ':'"))?;
        if idx > i32::MAX as u32 {
            return Err(bad("index out of range"));
        }
        if raw.len() == MAX_SPEC_LEN {
            return Err(CoreFailure::TooDeep);
        }
        raw.push(idx);
    }
    Ok(raw)
}

/// Parses a relocation's access string against the local BTF, computing the local bit offset.
pub(crate) fn parse_spec<'a>(btf: &'a Btf, relo: &CoreRelo) -> Result<Spec<'a>, CoreFailure> {
    let mut spec = Spec::empty(btf, relo.type_id);
    if is_type_based(relo.kind) {
        if relo.access != "0" {
            return Err(CoreFailure::BadAccess(
                "type relocations take the access string \"0\"".into(),
            ));
        }
        return Ok(spec);
    }
    spec.raw = parse_access(&relo.access)?;
    let id = btf
        .skip_mods_and_typedefs(relo.type_id)
        .ok_or(CoreFailure::NoSuchType(relo.type_id))?;
    let first = spec.raw[0];
    if is_enumval_based(relo.kind) {
        let values = btf
            .get(id)
            .map(|t| &t.kind)
            .filter(|k| k.is_any_enum())
            .map(|k| k.enum_values());
        let value = values
            .filter(|_| spec.raw.len() == 1)
            .and_then(|v| v.get(first as usize));
        let value =
            value.ok_or_else(|| CoreFailure::BadAccess("not an enumerator of an enum".into()))?;
        spec.acc.push(Accessor {
            type_id: id,
            idx: first,
            name: Some(&value.name),
        });
        return Ok(spec);
    }
    spec.acc.push(Accessor {
        type_id: id,
        idx: first,
        name: None,
    });
    spec.add_elements(first, id)?;
    let raw = spec.raw.clone();
    raw[1..]
        .iter()
        .try_fold(id, |id, &idx| parse_step(&mut spec, id, idx))?;
    Ok(spec)
}

/// One access-string element below the root: a member of a struct/union or an array index.
/// Returns the type the next element applies to.
fn parse_step(spec: &mut Spec<'_>, id: TypeId, idx: u32) -> Result<TypeId, CoreFailure> {
    let btf = spec.btf;
    let id = btf
        .skip_mods_and_typedefs(id)
        .ok_or(CoreFailure::NoSuchType(id))?;
    match &btf.get(id).ok_or(CoreFailure::NoSuchType(id))?.kind {
        k if k.is_composite() => {
            let m = k.members().get(idx as usize).ok_or_else(|| {
                CoreFailure::BadAccess(format!("member index {idx} out of range for type [{id}]"))
            })?;
            spec.bit_offset = spec.bit_offset.wrapping_add(m.bit_offset);
            if !m.name.is_empty() {
                spec.acc.push(Accessor {
                    type_id: id,
                    idx,
                    name: Some(&m.name),
                });
            }
            Ok(m.ty)
        }
        BtfKind::Array { elem, len, .. } => {
            let elem = btf
                .skip_mods_and_typedefs(*elem)
                .ok_or(CoreFailure::NoSuchType(*elem))?;
            if !is_flex_array(btf, spec.acc.last(), *len) && idx >= *len {
                return Err(CoreFailure::BadAccess(format!(
                    "index {idx} out of bounds of array [{id}]"
                )));
            }
            spec.acc.push(Accessor {
                type_id: elem,
                idx,
                name: None,
            });
            spec.add_elements(idx, elem)?;
            Ok(elem)
        }
        other => Err(CoreFailure::BadAccess(format!(
            "steps into type [{id}] of kind {}",
            other.kind_name()
        ))),
    }
}

/// A zero-length array that is the last member of the struct the previous accessor named:
/// any index into it is allowed.
fn is_flex_array(btf: &Btf, prev: Option<&Accessor<'_>>, len: u32) -> bool {
    let Some(prev) = prev.filter(|a| a.name.is_some() && len == 0) else {
        return false;
    };
    let vlen = btf.get(prev.type_id).map_or(0, |t| t.kind.members().len());
    vlen.checked_sub(1) == Some(prev.idx as usize)
}

/// Matches a local spec against candidate `targ_id`: `Ok(None)` when it does not match,
/// the target spec when it does.
pub(crate) fn spec_match<'a>(
    local: &Spec<'_>,
    kind: CoreReloKind,
    targ_btf: &'a Btf,
    targ_id: TypeId,
) -> Result<Option<Spec<'a>>, CoreFailure> {
    let spec = Spec::empty(targ_btf, targ_id);
    if is_type_based(kind) {
        let ok = if kind == CoreReloKind::TypeMatches {
            types_match(local.btf, local.root_type_id, targ_btf, targ_id, false, 32)?
        } else {
            types_are_compat(local.btf, local.root_type_id, targ_btf, targ_id, 32)?
        };
        return Ok(ok.then_some(spec));
    }
    if is_enumval_based(kind) {
        return Ok(match_enumval(local, spec, targ_id));
    }
    match_fields(local, spec, targ_id)
}

/// Finds the local enumerator (by essential name) in the candidate enum.
fn match_enumval<'a>(local: &Spec<'_>, mut spec: Spec<'a>, targ_id: TypeId) -> Option<Spec<'a>> {
    let btf = spec.btf;
    let targ_id = btf.skip_mods_and_typedefs(targ_id)?;
    let kind = &btf.get(targ_id)?.kind;
    if !kind.is_any_enum() {
        return None;
    }
    let local_name = essential_name(local.acc[0].name.unwrap_or(""));
    let (i, value) = kind
        .enum_values()
        .iter()
        .enumerate()
        .find(|(_, v)| essential_name(&v.name) == local_name)?;
    spec.acc.push(Accessor {
        type_id: targ_id,
        idx: i as u32,
        name: Some(&value.name),
    });
    spec.raw.push(i as u32);
    Some(spec)
}

/// Walks the local accessors through the candidate: named fields by name (looking inside
/// anonymous members), array steps within the target's bounds.
fn match_fields<'a>(
    local: &Spec<'_>,
    mut spec: Spec<'a>,
    mut targ_id: TypeId,
) -> Result<Option<Spec<'a>>, CoreFailure> {
    let btf = spec.btf;
    for (i, local_acc) in local.acc.iter().enumerate() {
        targ_id = btf
            .skip_mods_and_typedefs(targ_id)
            .ok_or(CoreFailure::NoSuchType(targ_id))?;
        if local_acc.name.is_some() {
            match match_member(local.btf, local_acc, btf, targ_id, &mut spec)? {
                Some(next) => targ_id = next,
                None => return Ok(None),
            }
            continue;
        }
        if i > 0 {
            let Some(BtfKind::Array { elem, len, .. }) = btf.get(targ_id).map(|t| &t.kind) else {
                return Ok(None);
            };
            if !is_flex_array(btf, spec.acc.get(i - 1), *len) && local_acc.idx >= *len {
                return Ok(None);
            }
            targ_id = btf
                .skip_mods_and_typedefs(*elem)
                .ok_or(CoreFailure::NoSuchType(*elem))?;
        }
        spec.push_raw(local_acc.idx)?;
        spec.acc.push(Accessor {
            type_id: targ_id,
            idx: local_acc.idx,
            name: None,
        });
        spec.add_elements(local_acc.idx, targ_id)?;
    }
    Ok(Some(spec))
}

/// Finds the member named like the local accessor's in target composite `targ_id`, searching
/// anonymous members recursively. On success returns the member's type, with the target spec
/// extended by the path to it.
fn match_member<'a>(
    local_btf: &Btf,
    local_acc: &Accessor<'_>,
    targ_btf: &'a Btf,
    targ_id: TypeId,
    spec: &mut Spec<'a>,
) -> Result<Option<TypeId>, CoreFailure> {
    let targ_id = targ_btf
        .skip_mods_and_typedefs(targ_id)
        .ok_or(CoreFailure::NoSuchType(targ_id))?;
    let targ_kind = &targ_btf
        .get(targ_id)
        .ok_or(CoreFailure::NoSuchType(targ_id))?
        .kind;
    if !targ_kind.is_composite() {
        return Ok(None);
    }
    let local_member = local_btf
        .get(local_acc.type_id)
        .and_then(|t| t.kind.members().get(local_acc.idx as usize))
        .ok_or(CoreFailure::NoSuchType(local_acc.type_id))?;
    for (i, m) in targ_kind.members().iter().enumerate() {
        spec.push_raw(i as u32)?;
        spec.bit_offset = spec.bit_offset.wrapping_add(m.bit_offset);
        if m.name.is_empty() {
            if let Some(found) = match_member(local_btf, local_acc, targ_btf, m.ty, spec)? {
                return Ok(Some(found));
            }
        } else if m.name == local_member.name {
            // A same-named member ends the search, compatible or not; like libbpf, the raw
            // path is left as is when it is not (the whole candidate is then rejected).
            if !fields_are_compat(local_btf, local_member.ty, targ_btf, m.ty)? {
                return Ok(None);
            }
            spec.acc.push(Accessor {
                type_id: targ_id,
                idx: i as u32,
                name: Some(&m.name),
            });
            return Ok(Some(m.ty));
        }
        spec.bit_offset = spec.bit_offset.wrapping_sub(m.bit_offset);
        spec.raw.pop();
    }
    Ok(None)
}

/// The relocation kind as libbpf names it in messages (`byte_off`, `rshift_u64`, ...).
pub(crate) fn kind_name(kind: CoreReloKind) -> &'static str {
    use CoreReloKind::*;
    match kind {
        FieldByteOffset => "byte_off",
        FieldByteSize => "byte_sz",
        FieldExists => "field_exists",
        FieldSigned => "signed",
        FieldLshiftU64 => "lshift_u64",
        FieldRshiftU64 => "rshift_u64",
        TypeIdLocal => "local_type_id",
        TypeIdTarget => "target_type_id",
        TypeExists => "type_exists",
        TypeMatches => "type_matches",
        TypeSize => "type_size",
        EnumvalExists => "enumval_exists",
        EnumvalValue => "enumval_value",
    }
}

impl Spec<'_> {
    /// The spec as libbpf writes it in its messages (`bpf_core_format_spec`):
    /// `<byte_off> [7] struct iphdr.saddr (0:9 @ offset 12)`.
    pub(crate) fn describe(&self, kind: CoreReloKind) -> String {
        let root = self.btf.get(self.root_type_id);
        let kind_str = root.map_or("void", |t| t.kind.kind_name());
        let name = root.map_or("", |t| t.name.as_str());
        let name = if name.is_empty() { "<anon>" } else { name };
        let mut out = format!(
            "<{}> [{}] {kind_str} {name}",
            kind_name(kind),
            self.root_type_id
        );
        if is_enumval_based(kind) {
            out.push_str(&self.describe_enumerator());
        } else if is_field_based(kind) {
            self.describe_access(&mut out);
        }
        out
    }

    fn describe_enumerator(&self) -> String {
        let Some(acc) = self.acc.first() else {
            return String::new();
        };
        let Some(t) = self.btf.get(acc.type_id) else {
            return String::new();
        };
        let Some(value) = t.kind.enum_values().get(acc.idx as usize) else {
            return String::new();
        };
        let bits = value.value;
        let shown = match t.kind {
            BtfKind::Enum { signed: true, .. } => (bits as i32).to_string(),
            BtfKind::Enum { .. } => (bits as u32).to_string(),
            BtfKind::Enum64 { signed: true, .. } => (bits as i64).to_string(),
            _ => bits.to_string(),
        };
        format!("::{} = {shown}", value.name)
    }

    fn describe_access(&self, out: &mut String) {
        use std::fmt::Write;
        for (i, acc) in self.acc.iter().enumerate() {
            match acc.name {
                Some(name) => write!(out, ".{name}").expect("string"),
                None if i > 0 || acc.idx > 0 => write!(out, "[{}]", acc.idx).expect("string"),
                None => {}
            }
        }
        let raw: Vec<String> = self.raw.iter().map(u32::to_string).collect();
        write!(out, " ({}", raw.join(":")).expect("string");
        let (byte, bit) = (self.bit_offset / 8, self.bit_offset % 8);
        if bit == 0 {
            write!(out, " @ offset {byte})").expect("string");
        } else {
            write!(out, " @ offset {byte}.{bit})").expect("string");
        }
    }
}
