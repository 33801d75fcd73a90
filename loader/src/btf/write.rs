//! Encoding a [`Btf`] back into a raw blob, as the kernel's `BPF_BTF_LOAD` takes it.
//!
//! The loader fixes an object's BTF up the way libbpf does (DATASEC sizes and offsets, hidden
//! globals made static); the kernel must see the fixed-up types, so the parsed model is written
//! out again rather than the ELF's `.BTF` bytes. Type ids stay the same (map and func_info
//! records refer to them), and the original string section comes first, unchanged, so every
//! offset into it (names, BTF.ext line records) keeps its meaning.
//!
//! [`Btf::to_kernel_bytes`] also makes the edits libbpf makes for the kernel's sake: extern
//! variables become global (the kernel knows no extern VAR or FUNC linkage) and DATASEC entries
//! that are not variables (extern functions in `.ksyms`) are dropped.

use super::types::*;
use std::collections::HashMap;

/// A blob and the offsets of the strings in its string section.
#[derive(Clone, Debug)]
pub struct EncodedBtf {
    pub bytes: Vec<u8>,
    offsets: HashMap<String, u32>,
}

impl EncodedBtf {
    /// The offset of `s` in the string section, when it is there.
    pub fn string_offset(&self, s: &str) -> Option<u32> {
        self.offsets.get(s).copied()
    }
}

/// The string section being built: the original bytes, then any name they do not hold.
struct Strings {
    bytes: Vec<u8>,
    offsets: HashMap<String, u32>,
}

impl Strings {
    fn new(original: &[u8]) -> Strings {
        let mut bytes = original.to_vec();
        if bytes.first() != Some(&0) {
            bytes.insert(0, 0);
        }
        if bytes.last() != Some(&0) {
            bytes.push(0);
        }
        let mut offsets = HashMap::new();
        let mut start = 0;
        for (i, &b) in bytes.iter().enumerate() {
            if b == 0 {
                let s = String::from_utf8_lossy(&bytes[start..i]).into_owned();
                offsets.entry(s).or_insert(start as u32);
                start = i + 1;
            }
        }
        Strings { bytes, offsets }
    }

    fn add(&mut self, s: &str) -> u32 {
        if let Some(&off) = self.offsets.get(s) {
            return off;
        }
        let off = self.bytes.len() as u32;
        self.bytes.extend_from_slice(s.as_bytes());
        self.bytes.push(0);
        self.offsets.insert(s.to_owned(), off);
        off
    }
}

fn info(kind: u32, vlen: usize, kind_flag: bool) -> u32 {
    (u32::from(kind_flag) << 31) | (kind << 24) | (vlen as u32 & 0xffff)
}

fn func_linkage(l: Linkage) -> usize {
    var_linkage(l) as usize
}

/// Extern becomes global as libbpf's extern fix-up makes it; an unknown value goes as it is.
fn var_linkage(l: Linkage) -> u32 {
    match l {
        Linkage::Static => 0,
        Linkage::Global | Linkage::Extern => 1,
        Linkage::Unknown(raw) => raw,
    }
}

impl Btf {
    /// The blob the kernel loads (see the module docs for the edits).
    pub fn to_kernel_bytes(&self) -> EncodedBtf {
        let mut strings = Strings::new(&self.strings);
        let mut types: Vec<u32> = Vec::new();
        for t in self.types.iter().skip(1) {
            let name = strings.add(&t.name);
            self.encode_type(t, name, &mut strings, &mut types);
        }
        let type_len = types.len() as u32 * 4;
        let mut bytes = Vec::with_capacity(24 + type_len as usize + strings.bytes.len());
        bytes.extend_from_slice(&0xeb9fu16.to_le_bytes());
        bytes.push(1); // version
        bytes.push(0); // flags
        for v in [24u32, 0, type_len, type_len, strings.bytes.len() as u32] {
            bytes.extend_from_slice(&v.to_le_bytes());
        }
        for w in types {
            bytes.extend_from_slice(&w.to_le_bytes());
        }
        bytes.extend_from_slice(&strings.bytes);
        EncodedBtf {
            bytes,
            offsets: strings.offsets,
        }
    }

    fn encode_type(&self, t: &BtfType, name: u32, strings: &mut Strings, out: &mut Vec<u32>) {
        use BtfKind as K;
        match &t.kind {
            K::Void => out.extend([0, info(10, 0, false), 0]), // never written: id 0
            K::Int {
                size,
                encoding,
                bit_offset,
                bits,
            } => {
                let enc = u32::from(encoding.signed)
                    | (u32::from(encoding.char) << 1)
                    | (u32::from(encoding.bool) << 2);
                out.extend([name, info(1, 0, false), *size]);
                out.push((enc << 24) | (u32::from(*bit_offset) << 16) | u32::from(*bits));
            }
            K::Ptr { ty } => out.extend([name, info(2, 0, false), *ty]),
            K::Array { elem, index, len } => {
                out.extend([name, info(3, 0, false), 0, *elem, *index, *len])
            }
            K::Struct { size, members } | K::Union { size, members } => {
                let kind = if matches!(t.kind, K::Struct { .. }) {
                    4
                } else {
                    5
                };
                let bitfields = members.iter().any(|m| m.bitfield_size > 0);
                out.extend([name, info(kind, members.len(), bitfields), *size]);
                for m in members {
                    let off = if bitfields {
                        (m.bitfield_size << 24) | m.bit_offset
                    } else {
                        m.bit_offset
                    };
                    out.extend([strings.add(&m.name), m.ty, off]);
                }
            }
            K::Enum {
                size,
                signed,
                values,
            } => {
                out.extend([name, info(6, values.len(), *signed), *size]);
                for v in values {
                    out.extend([strings.add(&v.name), v.value as u32]);
                }
            }
            K::Enum64 {
                size,
                signed,
                values,
            } => {
                out.extend([name, info(19, values.len(), *signed), *size]);
                for v in values {
                    out.extend([strings.add(&v.name), v.value as u32, (v.value >> 32) as u32]);
                }
            }
            K::Fwd { union } => out.extend([name, info(7, 0, *union), 0]),
            K::Typedef { ty } => out.extend([name, info(8, 0, false), *ty]),
            K::Volatile { ty } => out.extend([name, info(9, 0, false), *ty]),
            K::Const { ty } => out.extend([name, info(10, 0, false), *ty]),
            K::Restrict { ty } => out.extend([name, info(11, 0, false), *ty]),
            K::Func { proto, linkage } => {
                out.extend([name, info(12, func_linkage(*linkage), false), *proto])
            }
            K::FuncProto { ret, params } => {
                out.extend([name, info(13, params.len(), false), *ret]);
                for p in params {
                    out.extend([strings.add(&p.name), p.ty]);
                }
            }
            K::Var { ty, linkage } => {
                out.extend([name, info(14, 0, false), *ty, var_linkage(*linkage)])
            }
            K::DataSec { size, vars } => {
                let vars: Vec<&VarSecInfo> = vars
                    .iter()
                    .filter(|v| matches!(self.get(v.ty).map(|t| &t.kind), Some(K::Var { .. })))
                    .collect();
                if vars.is_empty() || *size == 0 {
                    // Nothing the kernel would accept is left (a `.ksyms` of functions):
                    // an anonymous `const void` keeps the ids in place.
                    out.extend([0, info(10, 0, false), 0]);
                    return;
                }
                out.extend([name, info(15, vars.len(), false), *size]);
                for v in vars {
                    out.extend([v.ty, v.offset, v.size]);
                }
            }
            K::Float { size } => out.extend([name, info(16, 0, false), *size]),
            K::DeclTag { ty, component_idx } => {
                out.extend([name, info(17, 0, false), *ty, *component_idx as u32])
            }
            K::TypeTag { ty } => out.extend([name, info(18, 0, false), *ty]),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoding_round_trips_through_the_parser() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../examples/xdp/build/spin_lock.v3.o");
        let obj = crate::load_file(&path, &crate::LoadOptions::default()).unwrap();
        let btf = obj.btf.expect("BTF");
        let encoded = btf.to_kernel_bytes();
        let back = Btf::parse(&encoded.bytes).unwrap();
        assert_eq!(back.types, btf.types);
        assert_eq!(&back.strings[..btf.strings.len()], &btf.strings[..]);
        assert!(encoded.string_offset("bpf_spin_lock").is_some());
    }
}
