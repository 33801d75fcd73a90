//! Bytes -> JSON, as bpftool's BTF dumper prints them in JSON mode (see the parent module for
//! the rules and where we differ).

use super::error::{JsonError, Problem, field_path};
use crate::btf::{Btf, BtfKind, IntEncoding, Member, TypeId, VarSecInfo};
use serde_json::{Map, Value};

/// Deeper nesting than this is taken as a type cycle in malformed BTF.
pub(super) const MAX_DEPTH: u32 = 64;

/// Formats `bytes` (an object of type `ty`) as bpftool's `-j map dump` prints it in
/// `"formatted"`. `bytes` must hold at least the type's size.
pub fn value_to_json(btf: &Btf, ty: TypeId, bytes: &[u8]) -> Result<Value, JsonError> {
    Encoder { btf, data: bytes }.value(ty, 0, "", 0)
}

struct Encoder<'a> {
    btf: &'a Btf,
    data: &'a [u8],
}

impl Encoder<'_> {
    /// The value of type `ty` starting at bit `pos` of the data.
    fn value(&self, ty: TypeId, pos: u64, path: &str, depth: u32) -> Result<Value, JsonError> {
        let t = kind_of(self.btf, ty, path, depth)?;
        match t {
            BtfKind::Int {
                encoding,
                bit_offset,
                bits,
                ..
            } => self.int(ty, *encoding, pos + u64::from(*bit_offset), *bits, path),
            BtfKind::Ptr { .. } => Ok(Value::from(self.bits(ty, pos, 64, path)? as u64)),
            BtfKind::Array { elem, len, .. } => self.array(ty, *elem, *len, pos, path, depth),
            BtfKind::Struct { members, .. } | BtfKind::Union { members, .. } => {
                self.composite(members, pos, path, depth)
            }
            BtfKind::Enum { size, values, .. } => {
                let raw = self.signed(ty, pos, *size, path)?;
                let name = values
                    .iter()
                    .find(|v| i64::from(v.value as u32 as i32) == raw);
                Ok(name.map_or(Value::from(raw), |v| Value::from(v.name.clone())))
            }
            BtfKind::Enum64 { size, values, .. } => {
                let raw = self.bits(ty, pos, (*size).min(8) * 8, path)? as u64;
                let name = values.iter().find(|v| v.value == raw);
                Ok(name.map_or(Value::from(raw as i64), |v| Value::from(v.name.clone())))
            }
            BtfKind::Float { size } => self.float(ty, *size, pos, path),
            BtfKind::Var { ty: inner, .. } => {
                let name = self.btf.name_of(ty).unwrap_or_default().to_string();
                let v = self.value(*inner, pos, &field_path(path, &name), depth + 1)?;
                Ok(Value::Object(Map::from_iter([(name, v)])))
            }
            BtfKind::DataSec { vars, .. } => self.datasec(ty, vars, pos, path, depth),
            BtfKind::Typedef { ty: inner }
            | BtfKind::Const { ty: inner }
            | BtfKind::Volatile { ty: inner }
            | BtfKind::Restrict { ty: inner }
            | BtfKind::TypeTag { ty: inner } => self.value(*inner, pos, path, depth + 1),
            _ => Err(unsupported(self.btf, ty, path)),
        }
    }

    /// bpftool prints whole 8/16/32/64-bit ints as numbers and everything else (bitfields,
    /// odd widths, 128 bits) as the hex of the raw bits.
    fn int(
        &self,
        ty: TypeId,
        enc: IntEncoding,
        pos: u64,
        bits: u8,
        path: &str,
    ) -> Result<Value, JsonError> {
        let whole = pos.is_multiple_of(8) && bits.is_multiple_of(8) && bits != 128;
        if enc.bool && whole {
            return Ok(Value::Bool(self.bits(ty, pos, 8, path)? != 0));
        }
        if enc.char && whole {
            let byte = self.bits(ty, pos, 8, path)? as u8;
            return Ok(Value::from(char::from(byte).to_string()));
        }
        match bits {
            8 | 16 | 32 | 64 if whole => {
                let raw = self.bits(ty, pos, u32::from(bits), path)?;
                Ok(if enc.signed {
                    Value::from(sign_extend(raw, u32::from(bits)) as i64)
                } else {
                    Value::from(raw as u64)
                })
            }
            _ => Ok(hex_value(self.bits(ty, pos, u32::from(bits), path)?)),
        }
    }

    /// A field at a bit offset with a bitfield width: always the hex of its bits.
    fn bitfield(&self, m: &Member, pos: u64, path: &str) -> Result<Value, JsonError> {
        let raw = self.bits(m.ty, pos + u64::from(m.bit_offset), m.bitfield_size, path)?;
        Ok(hex_value(raw))
    }

    fn array(
        &self,
        ty: TypeId,
        elem: TypeId,
        len: u32,
        pos: u64,
        path: &str,
        depth: u32,
    ) -> Result<Value, JsonError> {
        if is_char_elem(self.btf, elem)
            && pos.is_multiple_of(8)
            && let Some(s) = self.c_string(ty, pos, len, path)?
        {
            return Ok(Value::from(s));
        }
        let esize = elem_size(self.btf, elem, path)?;
        let items = (0..u64::from(len))
            .map(|i| {
                let p = format!("{path}[{i}]");
                self.value(elem, pos + i * esize * 8, &p, depth + 1)
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Value::Array(items))
    }

    /// bpftool's test for "looks like a string": printable ASCII up to a NUL inside the array.
    fn c_string(
        &self,
        ty: TypeId,
        pos: u64,
        len: u32,
        path: &str,
    ) -> Result<Option<String>, JsonError> {
        let start = (pos / 8) as usize;
        let end = start + len as usize;
        let bytes = self.data.get(start..end).ok_or_else(|| {
            truncated(self.btf, ty, self.data.len(), pos, u64::from(len) * 8, path)
        })?;
        let Some(nul) = bytes.iter().position(|&b| b == 0) else {
            return Ok(None);
        };
        let text = &bytes[..nul];
        Ok(text
            .iter()
            .all(|b| (0x20..0x7f).contains(b))
            .then(|| text.iter().map(|&b| char::from(b)).collect()))
    }

    fn composite(
        &self,
        members: &[Member],
        pos: u64,
        path: &str,
        depth: u32,
    ) -> Result<Value, JsonError> {
        let mut obj = Map::new();
        for m in members {
            let mpath = if m.name.is_empty() {
                path.to_string()
            } else {
                field_path(path, &m.name)
            };
            let v = if m.bitfield_size > 0 {
                self.bitfield(m, pos, &mpath)?
            } else {
                self.value(m.ty, pos + u64::from(m.bit_offset), &mpath, depth + 1)?
            };
            insert_member(&mut obj, &m.name, v);
        }
        Ok(Value::Object(obj))
    }

    fn datasec(
        &self,
        ty: TypeId,
        vars: &[VarSecInfo],
        pos: u64,
        path: &str,
        depth: u32,
    ) -> Result<Value, JsonError> {
        let items = vars
            .iter()
            .map(|v| self.value(v.ty, pos + u64::from(v.offset) * 8, path, depth + 1))
            .collect::<Result<Vec<_>, _>>()?;
        let name = self.btf.name_of(ty).unwrap_or_default().to_string();
        Ok(Value::Object(Map::from_iter([(name, Value::Array(items))])))
    }

    fn float(&self, ty: TypeId, size: u32, pos: u64, path: &str) -> Result<Value, JsonError> {
        if size > 16 {
            return Err(unsupported(self.btf, ty, path));
        }
        let raw = self.bits(ty, pos, size * 8, path)?;
        let number = match size {
            4 => Some(f64::from(f32::from_bits(raw as u32))),
            8 => Some(f64::from_bits(raw as u64)),
            _ => None,
        };
        // A number only when reading it back gives the same bits; else the bits in hex.
        let exact = number.and_then(|x| {
            let v = serde_json::Number::from_f64(x)?;
            let back: f64 = v.to_string().parse().ok()?;
            let same = if size == 4 {
                (back as f32).to_bits() == raw as u32
            } else {
                back.to_bits() == raw as u64
            };
            same.then_some(Value::Number(v))
        });
        Ok(exact.unwrap_or_else(|| hex_value(raw)))
    }

    /// `size` bytes at `pos` read as a sign-extended integer (bpftool's enum read).
    fn signed(&self, ty: TypeId, pos: u64, size: u32, path: &str) -> Result<i64, JsonError> {
        if !matches!(size, 1 | 2 | 4 | 8) {
            return Err(JsonError::at(
                path,
                Problem::BadBtf(format!("{} has size {size}", self.btf.type_name(ty))),
            ));
        }
        let raw = self.bits(ty, pos, size * 8, path)?;
        Ok(sign_extend(raw, size * 8) as i64)
    }

    fn bits(&self, ty: TypeId, pos: u64, n: u32, path: &str) -> Result<u128, JsonError> {
        get_bits(self.data, pos, n)
            .ok_or_else(|| truncated(self.btf, ty, self.data.len(), pos, u64::from(n), path))
    }
}

/// Several anonymous members share the `""` key: their fields are merged (see module docs).
fn insert_member(obj: &mut Map<String, Value>, name: &str, v: Value) {
    if name.is_empty()
        && let (Some(Value::Object(prev)), Value::Object(new)) = (obj.get_mut(""), &v)
    {
        prev.extend(new.clone());
        return;
    }
    obj.insert(name.to_string(), v);
}

/// `n` (<= 128) bits at bit `pos`, little-endian bit order (as the BPF target lays out
/// bitfields); `None` past the end of `data`.
pub(super) fn get_bits(data: &[u8], pos: u64, n: u32) -> Option<u128> {
    let end = pos.checked_add(u64::from(n))?;
    if n > 128 || end > data.len() as u64 * 8 {
        return None;
    }
    if pos.is_multiple_of(8) && n.is_multiple_of(8) {
        let start = (pos / 8) as usize;
        let bytes = &data[start..start + (n / 8) as usize];
        return Some(
            bytes
                .iter()
                .rev()
                .fold(0u128, |acc, &b| (acc << 8) | u128::from(b)),
        );
    }
    Some((0..u64::from(n)).fold(0u128, |acc, i| {
        let bit = (data[((pos + i) / 8) as usize] >> ((pos + i) % 8)) & 1;
        acc | (u128::from(bit) << i)
    }))
}

pub(super) fn sign_extend(raw: u128, bits: u32) -> i128 {
    if bits == 0 || bits >= 128 {
        return raw as i128;
    }
    let shift = 128 - bits;
    ((raw << shift) as i128) >> shift
}

fn hex_value(raw: u128) -> Value {
    Value::from(format!("{raw:#x}"))
}

/// Whether an array of `elem` can be a string: a 1-byte int with the CHAR encoding or named
/// `char`, looking through const/volatile/restrict but not typedefs (bpftool's rule).
pub(super) fn is_char_elem(btf: &Btf, mut elem: TypeId) -> bool {
    for _ in 0..MAX_DEPTH {
        match btf.get(elem).map(|t| (&t.kind, t.name.as_str())) {
            Some((
                BtfKind::Int {
                    size: 1, encoding, ..
                },
                name,
            )) => {
                return encoding.char || name == "char";
            }
            Some((kind, _)) if kind.is_modifier() => match kind.referenced() {
                Some(inner) => elem = inner,
                None => return false,
            },
            _ => return false,
        }
    }
    false
}

/// The kind of `ty`, or an error naming the bad id / the cycle.
pub(super) fn kind_of<'b>(
    btf: &'b Btf,
    ty: TypeId,
    path: &str,
    depth: u32,
) -> Result<&'b BtfKind, JsonError> {
    if depth > MAX_DEPTH {
        return Err(JsonError::at(
            path,
            Problem::BadBtf(format!("types nest deeper than {MAX_DEPTH}")),
        ));
    }
    btf.get(ty)
        .map(|t| &t.kind)
        .ok_or_else(|| JsonError::at(path, Problem::BadBtf(format!("no type with id {ty}"))))
}

pub(super) fn elem_size(btf: &Btf, elem: TypeId, path: &str) -> Result<u64, JsonError> {
    btf.size_of(elem).map(u64::from).ok_or_else(|| {
        JsonError::at(
            path,
            Problem::BadBtf(format!("{} has no size", btf.type_name(elem))),
        )
    })
}

pub(super) fn unsupported(btf: &Btf, ty: TypeId, path: &str) -> JsonError {
    JsonError::at(path, Problem::Unsupported(btf.type_name(ty)))
}

fn truncated(btf: &Btf, ty: TypeId, len: usize, start: u64, n: u64, path: &str) -> JsonError {
    JsonError::at(
        path,
        Problem::Truncated {
            ty: btf.type_name(ty),
            len,
            start,
            end: start + n,
        },
    )
}
