//! The value a relocation stands for, computed once from the local spec (what clang baked into
//! the instruction) and once from the target spec (what the instruction must now hold).
//!
//! A missing target spec (no candidate matched) yields 0 for the existence kinds and the type
//! kinds, and a poisoning request for the others: the instruction is then replaced by a call to
//! an invalid helper, which the verifier rejects only if it is reachable.

use super::spec::{Spec, is_enumval_based, is_field_based, is_type_based};
use super::{CoreFailure, CoreReloResult};
use crate::btf::{Btf, BtfKind, CoreReloKind, IntEncoding, TypeId};

/// Why a value could not be computed.
pub(crate) enum CalcError {
    /// No target: replace the instruction with an invalid call.
    Poison,
    Fail(CoreFailure),
}

impl From<CoreFailure> for CalcError {
    fn from(f: CoreFailure) -> Self {
        CalcError::Fail(f)
    }
}

/// One side's value for a field relocation.
#[derive(Default)]
struct FieldValue {
    val: u64,
    /// Size of the loaded/stored item (element size for arrays); 0 when not a plain field.
    mem_size: u32,
    /// The field's type (modifiers skipped), when `mem_size` is set.
    type_id: TypeId,
    /// Whether the instruction must already hold the local value.
    validate: bool,
}

/// Computes the relocation's original and new values.
pub(crate) fn calc_relo(
    kind: CoreReloKind,
    local: &Spec<'_>,
    targ: Option<&Spec<'_>>,
) -> Result<CoreReloResult, CoreFailure> {
    let mut res = CoreReloResult {
        validate: true,
        ..CoreReloResult::default()
    };
    let outcome = if is_field_based(kind) {
        calc_field_pair(kind, local, targ, &mut res)
    } else if is_type_based(kind) {
        calc_type(kind, Some(local)).and_then(|(orig, validate)| {
            res.orig_val = orig;
            res.validate = validate;
            res.new_val = calc_type(kind, targ)?.0;
            Ok(())
        })
    } else if is_enumval_based(kind) {
        calc_enumval(kind, Some(local)).and_then(|orig| {
            res.orig_val = orig;
            res.new_val = calc_enumval(kind, targ)?;
            Ok(())
        })
    } else {
        Err(CalcError::Fail(CoreFailure::Unsupported))
    };
    match outcome {
        Ok(()) => Ok(res),
        Err(CalcError::Poison) => Ok(CoreReloResult {
            poison: true,
            ..res
        }),
        Err(CalcError::Fail(f)) => Err(f),
    }
}

fn calc_field_pair(
    kind: CoreReloKind,
    local: &Spec<'_>,
    targ: Option<&Spec<'_>>,
    res: &mut CoreReloResult,
) -> Result<(), CalcError> {
    let orig = calc_field(kind, Some(local))?;
    res.orig_val = orig.val;
    res.validate = orig.validate;
    res.orig_sz = orig.mem_size;
    res.orig_type_id = orig.type_id;
    let new = calc_field(kind, targ)?;
    res.new_val = new.val;
    res.new_sz = new.mem_size;
    res.new_type_id = new.type_id;
    if res.orig_sz != res.new_sz {
        let targ_btf = targ.map(|s| s.btf);
        res.fail_memsz_adjust =
            !size_change_is_safe(local.btf, orig.type_id, targ_btf, new.type_id);
    }
    Ok(())
}

/// Loads and stores may change width only for pointers (a 32-bit kernel pointer) and unsigned
/// integers, where zero extension keeps the value.
fn size_change_is_safe(local: &Btf, lid: TypeId, targ: Option<&Btf>, tid: TypeId) -> bool {
    let lk = local.get(lid).map(|t| &t.kind);
    let tk = targ.and_then(|b| b.get(tid)).map(|t| &t.kind);
    match (lk, tk) {
        (Some(BtfKind::Ptr { .. }), Some(BtfKind::Ptr { .. })) => true,
        (Some(BtfKind::Int { encoding: a, .. }), Some(BtfKind::Int { encoding: b, .. })) => {
            !is_plain_signed(a) && !is_plain_signed(b)
        }
        _ => false,
    }
}

/// libbpf compares the whole encoding with `BTF_INT_SIGNED`, so a signed char counts as
/// not signed here.
fn is_plain_signed(e: &IntEncoding) -> bool {
    e.signed && !e.char && !e.bool
}

/// Strips arrays (and modifiers) to get the size of one element: what a load reads.
fn element_size(btf: &Btf, id: TypeId) -> Result<u32, CoreFailure> {
    let mut elem = btf
        .skip_mods_and_typedefs(id)
        .ok_or(CoreFailure::NoSuchType(id))?;
    for _ in 0..32 {
        match btf.get(elem).map(|t| &t.kind) {
            Some(BtfKind::Array { elem: e, .. }) => {
                elem = btf
                    .skip_mods_and_typedefs(*e)
                    .ok_or(CoreFailure::NoSuchType(*e))?;
            }
            _ => return btf.size_of(elem).ok_or(CoreFailure::NoSize(elem)),
        }
    }
    Err(CoreFailure::TooDeep)
}

fn calc_field(kind: CoreReloKind, spec: Option<&Spec<'_>>) -> Result<FieldValue, CalcError> {
    if kind == CoreReloKind::FieldExists {
        return Ok(FieldValue {
            val: spec.is_some() as u64,
            validate: true,
            ..FieldValue::default()
        });
    }
    let spec = spec.ok_or(CalcError::Poison)?;
    let acc = spec.acc.last().ok_or(CoreFailure::Unsupported)?;
    if acc.name.is_none() {
        return calc_element(kind, spec, acc.type_id);
    }
    let member = spec
        .btf
        .get(acc.type_id)
        .and_then(|t| t.kind.members().get(acc.idx as usize))
        .ok_or(CoreFailure::NoSuchType(acc.type_id))?;
    let field_type = spec
        .btf
        .skip_mods_and_typedefs(member.ty)
        .ok_or(CoreFailure::NoSuchType(member.ty))?;
    let layout = field_layout(spec, field_type, member.bitfield_size)?;
    let bitfield = member.bitfield_size > 0;
    let mut out = FieldValue {
        validate: !bitfield,
        ..FieldValue::default()
    };
    out.val = match kind {
        CoreReloKind::FieldByteOffset => {
            if !bitfield {
                out.mem_size = element_size(spec.btf, field_type)?;
                out.type_id = field_type;
            }
            u64::from(layout.byte_off)
        }
        CoreReloKind::FieldByteSize => u64::from(layout.byte_sz),
        CoreReloKind::FieldSigned => {
            out.validate = true;
            u64::from(is_signed(spec.btf, field_type))
        }
        CoreReloKind::FieldLshiftU64 => u64::from(64u32.wrapping_sub(layout.end_bit_in_load())),
        CoreReloKind::FieldRshiftU64 => {
            out.validate = true;
            u64::from(64u32.wrapping_sub(layout.bit_sz))
        }
        _ => return Err(CoreFailure::Unsupported.into()),
    };
    Ok(out)
}

/// An array element, or the root element itself (`0` access).
fn calc_element(
    kind: CoreReloKind,
    spec: &Spec<'_>,
    type_id: TypeId,
) -> Result<FieldValue, CalcError> {
    let mut out = FieldValue {
        validate: true,
        ..FieldValue::default()
    };
    match kind {
        CoreReloKind::FieldByteOffset => {
            out.val = u64::from(spec.bit_offset / 8);
            out.mem_size = element_size(spec.btf, type_id)?;
            out.type_id = type_id;
        }
        CoreReloKind::FieldByteSize => {
            out.val = u64::from(
                spec.btf
                    .size_of(type_id)
                    .ok_or(CoreFailure::NoSize(type_id))?,
            );
        }
        _ => return Err(CoreFailure::ArrayAccess.into()),
    }
    Ok(out)
}

/// Where a field lies, as the smallest aligned load that covers it.
struct FieldLayout {
    byte_off: u32,
    byte_sz: u32,
    bit_off: u32,
    bit_sz: u32,
}

impl FieldLayout {
    /// The bit just past the field, counted from the start of the load.
    fn end_bit_in_load(&self) -> u32 {
        self.bit_off
            .wrapping_add(self.bit_sz)
            .wrapping_sub(self.byte_off.wrapping_mul(8))
    }
}

fn field_layout(
    spec: &Spec<'_>,
    field_type: TypeId,
    bitfield_size: u32,
) -> Result<FieldLayout, CoreFailure> {
    let bit_off = spec.bit_offset;
    if bitfield_size == 0 {
        let byte_sz = spec
            .btf
            .size_of(field_type)
            .ok_or(CoreFailure::NoSize(field_type))?;
        return Ok(FieldLayout {
            byte_off: bit_off / 8,
            byte_sz,
            bit_off,
            bit_sz: byte_sz.wrapping_mul(8),
        });
    }
    // Start from the declared width of the bitfield's type and widen until one aligned load
    // covers every bit.
    let kind = spec.btf.get(field_type).map(|t| &t.kind);
    let mut byte_sz = kind
        .and_then(|k| k.declared_size())
        .filter(|&s| s > 0)
        .ok_or(CoreFailure::BadBitfield)?;
    let end = u64::from(bit_off) + u64::from(bitfield_size);
    let mut byte_off = bit_off / 8 / byte_sz * byte_sz;
    while end - u64::from(byte_off) * 8 > u64::from(byte_sz) * 8 {
        if byte_sz >= 8 {
            return Err(CoreFailure::BitfieldTooWide);
        }
        byte_sz *= 2;
        byte_off = bit_off / 8 / byte_sz * byte_sz;
    }
    Ok(FieldLayout {
        byte_off,
        byte_sz,
        bit_off,
        bit_sz: bitfield_size,
    })
}

fn is_signed(btf: &Btf, id: TypeId) -> bool {
    match btf.get(id).map(|t| &t.kind) {
        Some(BtfKind::Int { encoding, .. }) => encoding.signed,
        Some(BtfKind::Enum { signed, .. } | BtfKind::Enum64 { signed, .. }) => *signed,
        _ => false,
    }
}

/// Type relocations: the value, and whether the instruction must hold the local value.
fn calc_type(kind: CoreReloKind, spec: Option<&Spec<'_>>) -> Result<(u64, bool), CalcError> {
    let Some(spec) = spec else {
        return Ok((0, true));
    };
    Ok(match kind {
        // Type ids may be renumbered when objects are linked, so they are not checked.
        CoreReloKind::TypeIdTarget => (u64::from(spec.root_type_id), false),
        CoreReloKind::TypeExists | CoreReloKind::TypeMatches => (1, true),
        CoreReloKind::TypeSize => {
            let size = spec
                .btf
                .size_of(spec.root_type_id)
                .ok_or(CoreFailure::NoSize(spec.root_type_id))?;
            (u64::from(size), true)
        }
        _ => return Err(CoreFailure::Unsupported.into()),
    })
}

fn calc_enumval(kind: CoreReloKind, spec: Option<&Spec<'_>>) -> Result<u64, CalcError> {
    match kind {
        CoreReloKind::EnumvalExists => Ok(spec.is_some() as u64),
        CoreReloKind::EnumvalValue => {
            let spec = spec.ok_or(CalcError::Poison)?;
            let acc = &spec.acc[0];
            let kind = &spec
                .btf
                .get(acc.type_id)
                .ok_or(CoreFailure::NoSuchType(acc.type_id))?
                .kind;
            let value = kind
                .enum_values()
                .get(acc.idx as usize)
                .ok_or(CoreFailure::NoSuchType(acc.type_id))?
                .value;
            // A 32-bit enumerator is a signed 32-bit number to libbpf whatever the enum's
            // signedness, and is sign-extended.
            Ok(match kind {
                BtfKind::Enum { .. } => value as u32 as i32 as i64 as u64,
                _ => value,
            })
        }
        _ => Err(CoreFailure::Unsupported.into()),
    }
}
