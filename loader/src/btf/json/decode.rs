//! JSON -> bytes: the inverse of [`super::value_to_json`], lenient where a person writes JSON
//! by hand (see the parent module), strict where a value would be silently changed.

use super::encode::{elem_size, is_char_elem, kind_of, unsupported};
use super::error::{JsonError, Problem, field_path, short};
use crate::btf::{Btf, BtfKind, EnumValue, IntEncoding, Member, TypeId, VarSecInfo};
use serde_json::{Map, Value};

/// The bytes of an object of type `ty` described by `v` (as [`super::value_to_json`] prints it,
/// or the lenient forms). Everything the JSON does not set is zero.
pub fn value_from_json(btf: &Btf, ty: TypeId, v: &Value) -> Result<Vec<u8>, JsonError> {
    let size = btf.size_of(ty).ok_or_else(|| {
        JsonError::at(
            "",
            Problem::BadBtf(format!("{} has no size", btf.type_name(ty))),
        )
    })?;
    let mut dec = Decoder {
        btf,
        out: vec![0; size as usize],
        label: None,
    };
    dec.value(ty, 0, v, "", 0)?;
    Ok(dec.out)
}

/// Raw bytes in bpftool's hex forms: `"0a0b0c"`, `"0a 0b 0c"`, `"0x0a 0x0b"` (an optional
/// leading `hex` word, as on bpftool's command line, is allowed).
pub fn parse_hex(s: &str) -> Result<Vec<u8>, JsonError> {
    let bad = |why: &str| {
        JsonError::at(
            "",
            Problem::BadHex {
                text: s.to_string(),
                why: why.to_string(),
            },
        )
    };
    let mut words: Vec<&str> = s.split_whitespace().collect();
    if words.first() == Some(&"hex") {
        words.remove(0);
    }
    let strip = |w: &'_ str| -> String {
        w.strip_prefix("0x")
            .or_else(|| w.strip_prefix("0X"))
            .unwrap_or(w)
            .to_string()
    };
    let digits: Vec<String> = match words.as_slice() {
        [one] => {
            let one = strip(one);
            if one.len() % 2 != 0 {
                return Err(bad("an odd number of hex digits"));
            }
            one.as_bytes()
                .chunks(2)
                .map(|c| String::from_utf8_lossy(c).into_owned())
                .collect()
        }
        many => many.iter().map(|w| strip(w)).collect(),
    };
    digits
        .iter()
        .map(|d| match d.len() {
            1 | 2 => u8::from_str_radix(d, 16).map_err(|_| bad(&format!("`{d}` is not hex"))),
            _ => Err(bad(&format!("`{d}` is more than one byte"))),
        })
        .collect()
}

struct Decoder<'a> {
    btf: &'a Btf,
    out: Vec<u8>,
    /// The typedef the current scalar was declared with (`__be16`), for messages.
    label: Option<TypeId>,
}

/// An integer as written: sign, magnitude, and whether it was hex (hex denotes raw bits).
#[derive(Clone, Copy)]
struct Parsed {
    neg: bool,
    mag: u128,
    hex: bool,
}

impl Decoder<'_> {
    fn value(
        &mut self,
        ty: TypeId,
        pos: u64,
        v: &Value,
        path: &str,
        depth: u32,
    ) -> Result<(), JsonError> {
        match kind_of(self.btf, ty, path, depth)? {
            BtfKind::Int {
                encoding,
                bit_offset,
                bits,
                ..
            } => self.int(ty, *encoding, pos + u64::from(*bit_offset), *bits, v, path),
            BtfKind::Ptr { .. } => {
                let raw = self.number(ty, 64, false, v, path)?;
                self.put(ty, pos, 64, raw, path)
            }
            BtfKind::Array { elem, len, .. } => self.array(ty, *elem, *len, pos, v, path, depth),
            BtfKind::Struct { members, .. } | BtfKind::Union { members, .. } => {
                self.composite(ty, members, pos, v, path, depth)
            }
            BtfKind::Enum { size, values, .. } | BtfKind::Enum64 { size, values, .. } => {
                let raw = self.enumerator(ty, *size * 8, values, v, path)?;
                self.put(ty, pos, *size * 8, raw, path)
            }
            BtfKind::Float { size } => self.float(ty, *size, pos, v, path),
            BtfKind::Var { ty: inner, .. } => {
                let name = self.btf.name_of(ty).unwrap_or_default().to_string();
                let obj = expect_object(v, &format!("an object {{\"{name}\": ...}}"), path)?;
                for (k, x) in obj {
                    if *k != name {
                        return Err(unknown_field(self.btf, ty, k, path));
                    }
                    self.value(*inner, pos, x, &field_path(path, &name), depth + 1)?;
                }
                Ok(())
            }
            BtfKind::DataSec { vars, .. } => self.datasec(ty, vars, pos, v, path, depth),
            BtfKind::Typedef { ty: inner } => {
                self.label.get_or_insert(ty);
                self.value(*inner, pos, v, path, depth + 1)
            }
            BtfKind::Const { ty: inner }
            | BtfKind::Volatile { ty: inner }
            | BtfKind::Restrict { ty: inner }
            | BtfKind::TypeTag { ty: inner } => self.value(*inner, pos, v, path, depth + 1),
            _ => Err(unsupported(self.btf, ty, path)),
        }
    }

    fn int(
        &mut self,
        ty: TypeId,
        enc: IntEncoding,
        pos: u64,
        bits: u8,
        v: &Value,
        path: &str,
    ) -> Result<(), JsonError> {
        let whole = pos.is_multiple_of(8) && bits.is_multiple_of(8) && bits != 128;
        let raw = match v {
            Value::Bool(b) if enc.bool && whole => u128::from(*b),
            Value::String(s) if enc.char && whole && s.chars().count() == 1 => {
                let c = s.chars().next().unwrap_or_default();
                u8::try_from(c).map(u128::from).map_err(|_| {
                    JsonError::at(
                        path,
                        Problem::DoesNotFit {
                            value: format!("{c:?}"),
                            ty: self.shown(ty),
                        },
                    )
                })?
            }
            _ if enc.bool && whole => self.number(ty, 8, false, v, path).and_then(|n| match n {
                0 | 1 => Ok(n),
                _ => Err(expected("true or false", v, path)),
            })?,
            _ => self.number(ty, u32::from(bits), enc.signed, v, path)?,
        };
        let width = if enc.bool || enc.char {
            8
        } else {
            u32::from(bits)
        };
        self.put(ty, pos, width, raw, path)
    }

    fn bitfield(&mut self, m: &Member, pos: u64, v: &Value, path: &str) -> Result<(), JsonError> {
        let signed = match self
            .btf
            .skip_mods_and_typedefs(m.ty)
            .and_then(|t| self.btf.get(t))
        {
            Some(t) => match &t.kind {
                BtfKind::Int { encoding, .. } => encoding.signed,
                BtfKind::Enum { signed, .. } | BtfKind::Enum64 { signed, .. } => *signed,
                _ => false,
            },
            None => false,
        };
        let p = parse_int(v, path)?;
        let raw = fit(p, m.bitfield_size, signed, !signed || p.hex).ok_or_else(|| {
            let ty = format!("{}:{}", self.btf.type_name(m.ty), m.bitfield_size);
            JsonError::at(
                path,
                Problem::DoesNotFit {
                    value: render(p),
                    ty,
                },
            )
        })?;
        self.put(
            m.ty,
            pos + u64::from(m.bit_offset),
            m.bitfield_size,
            raw,
            path,
        )
    }

    /// An integer of `bits` bits: JSON numbers within the type's range, hex strings as bits.
    fn number(
        &self,
        ty: TypeId,
        bits: u32,
        signed: bool,
        v: &Value,
        path: &str,
    ) -> Result<u128, JsonError> {
        let p = parse_int(v, path)?;
        fit(p, bits, signed, !signed || p.hex).ok_or_else(|| {
            JsonError::at(
                path,
                Problem::DoesNotFit {
                    value: render(p),
                    ty: self.shown(ty),
                },
            )
        })
    }

    /// An enumerator name, or a number (bpftool prints unknown values signed, so both signed
    /// and unsigned ranges are accepted).
    fn enumerator(
        &self,
        ty: TypeId,
        bits: u32,
        values: &[EnumValue],
        v: &Value,
        path: &str,
    ) -> Result<u128, JsonError> {
        if let Value::String(s) = v {
            if let Some(e) = values.iter().find(|e| e.name == *s) {
                return Ok(u128::from(e.value) & mask(bits));
            }
            if parse_int(v, path).is_err() {
                let ty = self.btf.type_name(ty);
                return Err(JsonError::at(
                    path,
                    Problem::UnknownEnumerator {
                        name: s.clone(),
                        ty,
                    },
                ));
            }
        }
        let p = parse_int(v, path)?;
        fit(p, bits, true, true).ok_or_else(|| {
            JsonError::at(
                path,
                Problem::DoesNotFit {
                    value: render(p),
                    ty: self.shown(ty),
                },
            )
        })
    }

    fn float(
        &mut self,
        ty: TypeId,
        size: u32,
        pos: u64,
        v: &Value,
        path: &str,
    ) -> Result<(), JsonError> {
        let raw = match (v, size) {
            (Value::Number(n), 4 | 8) => {
                let x = n.as_f64().ok_or_else(|| expected("a number", v, path))?;
                if size == 4 {
                    u128::from((x as f32).to_bits())
                } else {
                    u128::from(x.to_bits())
                }
            }
            _ => self.number(ty, size * 8, false, v, path)?,
        };
        self.put(ty, pos, size * 8, raw, path)
    }

    #[allow(clippy::too_many_arguments)]
    fn array(
        &mut self,
        ty: TypeId,
        elem: TypeId,
        len: u32,
        pos: u64,
        v: &Value,
        path: &str,
        depth: u32,
    ) -> Result<(), JsonError> {
        match v {
            Value::String(s) if is_char_elem(self.btf, elem) => self.string(ty, s, len, pos, path),
            Value::Array(items) if items.len() == len as usize => {
                let esize = elem_size(self.btf, elem, path)?;
                for (i, item) in items.iter().enumerate() {
                    let p = format!("{path}[{i}]");
                    self.label = None;
                    self.value(elem, pos + i as u64 * esize * 8, item, &p, depth + 1)?;
                }
                Ok(())
            }
            Value::Array(items) => Err(JsonError::at(
                path,
                Problem::ArrayLength {
                    expected: len,
                    got: items.len(),
                },
            )),
            _ => Err(expected(&format!("an array of {len} elements"), v, path)),
        }
    }

    /// A `char` array given as a string: its bytes (characters up to U+00FF), zero after.
    fn string(
        &mut self,
        ty: TypeId,
        s: &str,
        len: u32,
        pos: u64,
        path: &str,
    ) -> Result<(), JsonError> {
        let bytes = s
            .chars()
            .map(|c| u8::try_from(c).ok())
            .collect::<Option<Vec<u8>>>()
            .ok_or_else(|| expected("characters up to U+00FF", &Value::from(s), path))?;
        if bytes.len() > len as usize {
            let ty = self.btf.type_name(ty);
            return Err(JsonError::at(
                path,
                Problem::StringTooLong {
                    len: bytes.len(),
                    ty,
                },
            ));
        }
        for (i, b) in bytes.iter().enumerate() {
            self.put(ty, pos + i as u64 * 8, 8, u128::from(*b), path)?;
        }
        Ok(())
    }

    /// Members are written in declaration order (anonymous ones too); omitted ones stay zero.
    fn composite(
        &mut self,
        ty: TypeId,
        members: &[Member],
        pos: u64,
        v: &Value,
        path: &str,
        depth: u32,
    ) -> Result<(), JsonError> {
        let obj = expect_object(v, &format!("an object ({})", self.btf.type_name(ty)), path)?;
        if let Some(k) = obj.keys().find(|k| !members.iter().any(|m| m.name == **k)) {
            return Err(unknown_field(self.btf, ty, k, path));
        }
        let anon = match obj.get("") {
            Some(x) => self.split_anonymous(ty, members, x, path)?,
            None => vec![None; members.len()],
        };
        for (m, part) in members.iter().zip(&anon) {
            let (x, mpath) = if m.name.is_empty() {
                (part.as_ref(), path.to_string())
            } else {
                (obj.get(&m.name), field_path(path, &m.name))
            };
            if let Some(x) = x {
                self.member(m, pos, x, &mpath, depth)?;
            }
        }
        Ok(())
    }

    fn member(
        &mut self,
        m: &Member,
        pos: u64,
        v: &Value,
        path: &str,
        depth: u32,
    ) -> Result<(), JsonError> {
        self.label = None;
        if m.bitfield_size > 0 {
            self.bitfield(m, pos, v, path)
        } else {
            self.value(m.ty, pos + u64::from(m.bit_offset), v, path, depth + 1)
        }
    }

    /// What the `""` key gives each member: all of it to the one anonymous member, or with
    /// several (merged, see module docs) each field to the anonymous member that has it.
    fn split_anonymous(
        &self,
        ty: TypeId,
        members: &[Member],
        v: &Value,
        path: &str,
    ) -> Result<Vec<Option<Value>>, JsonError> {
        let mut parts = vec![None; members.len()];
        let anon: Vec<usize> = (0..members.len())
            .filter(|&i| members[i].name.is_empty())
            .collect();
        if let [one] = anon.as_slice() {
            parts[*one] = Some(v.clone());
            return Ok(parts);
        }
        let obj = expect_object(v, "an object (anonymous members)", path)?;
        for (k, x) in obj {
            let owner = anon.iter().find(|&&i| self.has_member(members[i].ty, k));
            let i = *owner.ok_or_else(|| unknown_field(self.btf, ty, k, path))?;
            let part = parts[i].get_or_insert_with(|| Value::Object(Map::new()));
            if let Value::Object(o) = part {
                o.insert(k.clone(), x.clone());
            }
        }
        Ok(parts)
    }

    fn has_member(&self, ty: TypeId, name: &str) -> bool {
        let resolved = self
            .btf
            .skip_mods_and_typedefs(ty)
            .and_then(|t| self.btf.get(t));
        resolved.is_some_and(|t| t.kind.members().iter().any(|m| m.name == name))
    }

    /// `{".bss": [{"var": v}, ...]}` as bpftool prints it, or `{".bss": {"var": v, ...}}`.
    fn datasec(
        &mut self,
        ty: TypeId,
        vars: &[VarSecInfo],
        pos: u64,
        v: &Value,
        path: &str,
        depth: u32,
    ) -> Result<(), JsonError> {
        let section = self.btf.name_of(ty).unwrap_or_default().to_string();
        let want = format!("an object {{\"{section}\": [{{\"VAR\": value}}, ...]}}");
        let obj = expect_object(v, &want, path)?;
        let (Some(inner), 1) = (obj.get(&section), obj.len()) else {
            return Err(expected(&want, v, path));
        };
        let spath = field_path(path, &section);
        let pairs: Vec<(String, &Value, String)> = match inner {
            Value::Array(items) => {
                let mut pairs = Vec::new();
                for (i, item) in items.iter().enumerate() {
                    let ipath = format!("{spath}[{i}]");
                    for (k, x) in expect_object(item, "an object {\"VAR\": value}", &ipath)? {
                        pairs.push((k.clone(), x, field_path(&ipath, k)));
                    }
                }
                pairs
            }
            Value::Object(o) => o
                .iter()
                .map(|(k, x)| (k.clone(), x, field_path(&spath, k)))
                .collect(),
            _ => return Err(expected(&want, v, path)),
        };
        for (name, x, vpath) in pairs {
            let var = vars
                .iter()
                .find(|s| self.btf.name_of(s.ty) == Some(name.as_str()));
            let var = var.ok_or_else(|| {
                JsonError::at(
                    &vpath,
                    Problem::UnknownVariable {
                        var: name.clone(),
                        section: section.clone(),
                    },
                )
            })?;
            self.label = None;
            let inner_ty = match kind_of(self.btf, var.ty, &vpath, depth)? {
                BtfKind::Var { ty, .. } => *ty,
                _ => var.ty,
            };
            self.value(
                inner_ty,
                pos + u64::from(var.offset) * 8,
                x,
                &vpath,
                depth + 1,
            )?;
        }
        Ok(())
    }

    /// The type as declared where the value sits (`__be16`, not `unsigned short`).
    fn shown(&self, ty: TypeId) -> String {
        self.btf.type_name(self.label.unwrap_or(ty))
    }

    fn put(
        &mut self,
        ty: TypeId,
        pos: u64,
        n: u32,
        val: u128,
        path: &str,
    ) -> Result<(), JsonError> {
        let end = pos + u64::from(n);
        if n > 128 || end > self.out.len() as u64 * 8 {
            let ty = self.btf.type_name(ty);
            return Err(JsonError::at(
                path,
                Problem::Truncated {
                    ty,
                    len: self.out.len(),
                    start: pos,
                    end,
                },
            ));
        }
        for i in 0..u64::from(n) {
            let (byte, bit) = (((pos + i) / 8) as usize, (pos + i) % 8);
            if (val >> i) & 1 == 1 {
                self.out[byte] |= 1 << bit;
            } else {
                self.out[byte] &= !(1 << bit);
            }
        }
        Ok(())
    }
}

/// A JSON number, or a string: decimal, `0x` hex, either with a leading `-`.
fn parse_int(v: &Value, path: &str) -> Result<Parsed, JsonError> {
    match v {
        Value::Number(n) => {
            if let Some(u) = n.as_u64() {
                Ok(Parsed {
                    neg: false,
                    mag: u128::from(u),
                    hex: false,
                })
            } else if let Some(i) = n.as_i64() {
                Ok(Parsed {
                    neg: true,
                    mag: u128::from(i.unsigned_abs()),
                    hex: false,
                })
            } else {
                Err(expected("an integer", v, path))
            }
        }
        Value::String(s) => {
            let t = s.trim();
            let (neg, t) = t.strip_prefix('-').map_or((false, t), |r| (true, r));
            let (hex, digits) = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
                Some(d) => (true, d),
                None => (false, t),
            };
            let mag = u128::from_str_radix(digits, if hex { 16 } else { 10 })
                .map_err(|_| expected("an integer (a number or a \"0x..\" string)", v, path))?;
            Ok(Parsed {
                neg: neg && mag != 0,
                mag,
                hex,
            })
        }
        _ => Err(expected("an integer", v, path)),
    }
}

/// The `bits`-bit pattern for `p`: negatives need `signed`; positives up to the signed
/// maximum, or the unsigned one with `high`.
fn fit(p: Parsed, bits: u32, signed: bool, high: bool) -> Option<u128> {
    let half = 1u128.checked_shl(bits.saturating_sub(1)).unwrap_or(0);
    if p.neg {
        return (signed && bits > 0 && p.mag <= half).then(|| p.mag.wrapping_neg() & mask(bits));
    }
    let max = if high || !signed {
        mask(bits)
    } else {
        half.wrapping_sub(1)
    };
    (p.mag <= max).then_some(p.mag)
}

fn mask(bits: u32) -> u128 {
    if bits >= 128 {
        u128::MAX
    } else {
        (1u128 << bits) - 1
    }
}

fn render(p: Parsed) -> String {
    match (p.neg, p.hex) {
        (false, false) => p.mag.to_string(),
        (true, false) => format!("-{}", p.mag),
        (false, true) => format!("{:#x}", p.mag),
        (true, true) => format!("-{:#x}", p.mag),
    }
}

fn expect_object<'v>(
    v: &'v Value,
    what: &str,
    path: &str,
) -> Result<&'v Map<String, Value>, JsonError> {
    v.as_object().ok_or_else(|| expected(what, v, path))
}

fn expected(what: &str, got: &Value, path: &str) -> JsonError {
    JsonError::at(
        path,
        Problem::Expected {
            expected: what.to_string(),
            got: short(got),
        },
    )
}

fn unknown_field(btf: &Btf, ty: TypeId, field: &str, path: &str) -> JsonError {
    JsonError::at(
        path,
        Problem::UnknownField {
            field: field.to_string(),
            ty: btf.type_name(ty),
        },
    )
}
