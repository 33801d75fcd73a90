//! When a local type and a target type count as "the same" for CO-RE: the three relations
//! libbpf uses (field compatibility, type compatibility, type matching) and flavor-stripped
//! "essential" names.
//!
//! All walks are depth-limited (32 hops, as libbpf), so a reference cycle in a malformed blob
//! is an error rather than a hang.

use super::CoreFailure;
use crate::btf::{Btf, BtfKind, TypeId};

const MAX_DEPTH: usize = 32;

/// The name without its flavor: `sk_buff___local` -> `sk_buff`. A flavor starts at the last
/// `___` that has a non-underscore character on both sides.
pub(crate) fn essential_name(name: &str) -> &str {
    let b = name.as_bytes();
    let cut = (0..b.len().saturating_sub(4))
        .rev()
        .find(|&i| b[i] != b'_' && &b[i + 1..i + 4] == b"___" && b[i + 4] != b'_');
    cut.map_or(name, |i| &name[..i + 1])
}

/// Same kind, except that enum and enum64 are interchangeable.
pub(crate) fn kinds_compat(a: &BtfKind, b: &BtfKind) -> bool {
    a.kind_number() == b.kind_number() || (a.is_any_enum() && b.is_any_enum())
}

fn kind_of(btf: &Btf, id: TypeId) -> Result<&BtfKind, CoreFailure> {
    btf.get(id)
        .map(|t| &t.kind)
        .ok_or(CoreFailure::NoSuchType(id))
}

/// Skips modifiers and typedefs, returning the id and its kind.
fn resolve(btf: &Btf, id: TypeId) -> Result<(TypeId, &BtfKind), CoreFailure> {
    let id = btf
        .skip_mods_and_typedefs(id)
        .ok_or(CoreFailure::NoSuchType(id))?;
    Ok((id, kind_of(btf, id)?))
}

fn int_bit_offset(kind: &BtfKind) -> u8 {
    if let BtfKind::Int { bit_offset, .. } = kind {
        *bit_offset
    } else {
        0
    }
}

/// Type compatibility, for type-based relocations whose root names already matched: kinds
/// must agree; ints, enums, composites and forward declarations are compatible whatever their
/// contents; pointers and arrays recurse; function prototypes compare arity and each type.
pub(crate) fn types_are_compat(
    local: &Btf,
    mut lid: TypeId,
    targ: &Btf,
    mut tid: TypeId,
    level: i32,
) -> Result<bool, CoreFailure> {
    if !kinds_compat(kind_of(local, lid)?, kind_of(targ, tid)?) {
        return Ok(false);
    }
    for _ in 0..MAX_DEPTH {
        let (_, lk) = resolve(local, lid)?;
        let (_, tk) = resolve(targ, tid)?;
        if !kinds_compat(lk, tk) {
            return Ok(false);
        }
        (lid, tid) = match (lk, tk) {
            (BtfKind::Int { .. }, _) => {
                return Ok(int_bit_offset(lk) == 0 && int_bit_offset(tk) == 0);
            }
            (BtfKind::Ptr { ty: a }, BtfKind::Ptr { ty: b }) => (*a, *b),
            (BtfKind::Array { elem: a, .. }, BtfKind::Array { elem: b, .. }) => (*a, *b),
            (
                BtfKind::FuncProto {
                    ret: lr,
                    params: lp,
                },
                BtfKind::FuncProto {
                    ret: tr,
                    params: tp,
                },
            ) => {
                if lp.len() != tp.len() {
                    return Ok(false);
                }
                for (a, b) in lp.iter().zip(tp) {
                    if level <= 0 {
                        return Err(CoreFailure::TooDeep);
                    }
                    let (a, b) = (skip_or_self(local, a.ty), skip_or_self(targ, b.ty));
                    if !types_are_compat(local, a, targ, b, level - 1)? {
                        return Ok(false);
                    }
                }
                (skip_or_self(local, *lr), skip_or_self(targ, *tr))
            }
            (
                BtfKind::Void
                | BtfKind::Struct { .. }
                | BtfKind::Union { .. }
                | BtfKind::Fwd { .. },
                _,
            ) => return Ok(true),
            (k, _) if k.is_any_enum() => return Ok(true),
            _ => return Ok(false),
        };
    }
    Err(CoreFailure::TooDeep)
}

fn skip_or_self(btf: &Btf, id: TypeId) -> TypeId {
    btf.skip_mods_and_typedefs(id).unwrap_or(id)
}

/// Field compatibility, for the type of a matched member: any two composites; pointers,
/// floats; enums and forward declarations whose essential names agree (or one is anonymous);
/// ints that are not old-style bitfields; arrays whose elements are compatible.
pub(crate) fn fields_are_compat(
    local: &Btf,
    mut lid: TypeId,
    targ: &Btf,
    mut tid: TypeId,
) -> Result<bool, CoreFailure> {
    for _ in 0..MAX_DEPTH {
        let (l, lk) = resolve(local, lid)?;
        let (t, tk) = resolve(targ, tid)?;
        if lk.is_composite() && tk.is_composite() {
            return Ok(true);
        }
        if !kinds_compat(lk, tk) {
            return Ok(false);
        }
        (lid, tid) = match (lk, tk) {
            (BtfKind::Ptr { .. } | BtfKind::Float { .. }, _) => return Ok(true),
            (BtfKind::Int { .. }, _) => {
                return Ok(int_bit_offset(lk) == 0 && int_bit_offset(tk) == 0);
            }
            (BtfKind::Array { elem: a, .. }, BtfKind::Array { elem: b, .. }) => (*a, *b),
            (BtfKind::Fwd { .. } | BtfKind::Enum { .. } | BtfKind::Enum64 { .. }, _) => {
                let ln = essential_name(local.name_of(l).unwrap_or(""));
                let tn = essential_name(targ.name_of(t).unwrap_or(""));
                return Ok(ln.is_empty() || tn.is_empty() || ln == tn);
            }
            _ => return Ok(false),
        };
    }
    Err(CoreFailure::TooDeep)
}

/// Names agree after stripping flavors; an anonymous target only matches an anonymous local.
fn names_match(local: &str, targ: &str) -> bool {
    if targ.is_empty() {
        return local.is_empty();
    }
    essential_name(local) == essential_name(targ)
}

/// The stricter "type matches" relation of `bpf_core_type_matches()`: same kinds (a struct or
/// union behind a pointer may match a forward declaration), ints of equal size and
/// signedness, enums whose every local enumerator exists by name in a same-size target,
/// composites whose every local member has a matching target member, arrays of equal length,
/// prototypes with matching parameters and return type.
pub(crate) fn types_match(
    local: &Btf,
    mut lid: TypeId,
    targ: &Btf,
    mut tid: TypeId,
    mut behind_ptr: bool,
    level: i32,
) -> Result<bool, CoreFailure> {
    if level <= 0 {
        return Err(CoreFailure::TooDeep);
    }
    for _ in 0..MAX_DEPTH {
        let (l, lk) = resolve(local, lid)?;
        let (t, tk) = resolve(targ, tid)?;
        if !names_match(
            local.name_of(l).unwrap_or(""),
            targ.name_of(t).unwrap_or(""),
        ) {
            return Ok(false);
        }
        (lid, tid) = match (lk, tk) {
            (BtfKind::Ptr { ty: a }, BtfKind::Ptr { ty: b }) => {
                behind_ptr = true;
                (*a, *b)
            }
            (
                BtfKind::Array {
                    elem: a, len: la, ..
                },
                BtfKind::Array {
                    elem: b, len: lb, ..
                },
            ) => {
                if la != lb {
                    return Ok(false);
                }
                (*a, *b)
            }
            (
                BtfKind::FuncProto {
                    ret: lr,
                    params: lp,
                },
                BtfKind::FuncProto {
                    ret: tr,
                    params: tp,
                },
            ) => {
                if lp.len() != tp.len() {
                    return Ok(false);
                }
                for (a, b) in lp.iter().zip(tp) {
                    if !types_match(local, a.ty, targ, b.ty, behind_ptr, level - 1)? {
                        return Ok(false);
                    }
                }
                (*lr, *tr)
            }
            _ => return leaf_types_match(local, lk, targ, tk, behind_ptr, level),
        };
    }
    Err(CoreFailure::TooDeep)
}

/// `types_match` for kinds that end the walk.
fn leaf_types_match(
    local: &Btf,
    lk: &BtfKind,
    targ: &Btf,
    tk: &BtfKind,
    behind_ptr: bool,
    level: i32,
) -> Result<bool, CoreFailure> {
    Ok(match (lk, tk) {
        (BtfKind::Void, _) => matches!(tk, BtfKind::Void),
        (BtfKind::Fwd { union: lf }, BtfKind::Fwd { union: tf }) => lf == tf,
        (BtfKind::Fwd { union: lf }, _) => {
            behind_ptr
                && ((matches!(tk, BtfKind::Struct { .. }) && !lf)
                    || (matches!(tk, BtfKind::Union { .. }) && *lf))
        }
        (l, t) if l.is_any_enum() => t.is_any_enum() && enums_match(l, t),
        (l, t) if l.is_composite() => {
            if l.kind_number() == t.kind_number() {
                behind_ptr || composites_match(local, l, targ, t, behind_ptr, level)?
            } else if let BtfKind::Fwd { union: tf } = t {
                behind_ptr && matches!(l, BtfKind::Union { .. }) == *tf
            } else {
                false
            }
        }
        (
            BtfKind::Int {
                size: ls,
                encoding: le,
                ..
            },
            BtfKind::Int {
                size: ts,
                encoding: te,
                ..
            },
        ) => ls == ts && le.signed == te.signed,
        _ => false,
    })
}

fn enums_match(lk: &BtfKind, tk: &BtfKind) -> bool {
    let (lv, tv) = (lk.enum_values(), tk.enum_values());
    lk.declared_size() == tk.declared_size()
        && lv.len() <= tv.len()
        && lv
            .iter()
            .all(|l| tv.iter().any(|t| names_match(&l.name, &t.name)))
}

fn composites_match(
    local: &Btf,
    lk: &BtfKind,
    targ: &Btf,
    tk: &BtfKind,
    behind_ptr: bool,
    level: i32,
) -> Result<bool, CoreFailure> {
    let (lm, tm) = (lk.members(), tk.members());
    if lm.len() > tm.len() {
        return Ok(false);
    }
    for l in lm {
        let mut matched = false;
        for t in tm.iter().filter(|t| names_match(&l.name, &t.name)) {
            if types_match(local, l.ty, targ, t.ty, behind_ptr, level - 1)? {
                matched = true;
                break;
            }
        }
        if !matched {
            return Ok(false);
        }
    }
    Ok(true)
}
