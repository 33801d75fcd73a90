//! Parsing a raw BTF blob (the `.BTF` ELF section, or `/sys/kernel/btf/vmlinux`) into [`Btf`].
//!
//! The blob is a header, a type section (variable-size records, type ids counted from 1 in
//! order) and a string section that names refer into by byte offset. Both byte orders are
//! accepted (the magic says which). Every read is bounds-checked: malformed input is a
//! [`BtfError`] naming the byte offset and type id, never a panic. Type references are checked
//! after all types are read, because BTF allows a type to refer to one defined later.

use super::error::BtfError;
use super::kernel_meta::{self, RawType};
use super::reader::{Cursor, detect_endianness, string_at};
use super::types::*;

const BLOB: &str = "BTF";
/// The size of `struct btf_header` version 1.
const HEADER_LEN: u32 = 24;
/// libbpf's cap on string offsets (names are addressed with 24 bits in some places).
const MAX_STR_LEN: u32 = 0x00ff_ffff;

/// Kind numbers of `BTF_INFO_KIND`.
mod kind {
    pub const INT: u32 = 1;
    pub const PTR: u32 = 2;
    pub const ARRAY: u32 = 3;
    pub const STRUCT: u32 = 4;
    pub const UNION: u32 = 5;
    pub const ENUM: u32 = 6;
    pub const FWD: u32 = 7;
    pub const TYPEDEF: u32 = 8;
    pub const VOLATILE: u32 = 9;
    pub const CONST: u32 = 10;
    pub const RESTRICT: u32 = 11;
    pub const FUNC: u32 = 12;
    pub const FUNC_PROTO: u32 = 13;
    pub const VAR: u32 = 14;
    pub const DATASEC: u32 = 15;
    pub const FLOAT: u32 = 16;
    pub const DECL_TAG: u32 = 17;
    pub const TYPE_TAG: u32 = 18;
    pub const ENUM64: u32 = 19;
}

/// The decoded common prefix of every type record (`struct btf_type`).
struct Header {
    id: TypeId,
    offset: usize,
    name: String,
    kind: u32,
    vlen: usize,
    kflag: bool,
    /// `size` or `type`, depending on the kind.
    size_or_type: u32,
}

/// The parts of the blob the type parser needs.
struct Sections<'a> {
    types: Cursor<'a>,
    strings: &'a [u8],
    /// The header's flags, which the kernel refuses unless zero.
    flags_refusal: Option<String>,
}

/// Whether a parse also judges the blob as `BPF_BTF_LOAD` would ([`Btf::raw_refusal`]).
#[derive(Clone, Copy, PartialEq, Eq)]
enum LoadModel {
    Judge,
    Skip,
}

impl Btf {
    /// Parses a complete (non-split) BTF blob, judging it as `BPF_BTF_LOAD` would.
    pub fn parse(data: &[u8]) -> Result<Btf, BtfError> {
        Btf::parse_with(data, LoadModel::Judge)
    }

    /// Parses a kernel's own BTF (vmlinux), which no one loads with `BPF_BTF_LOAD`: the same
    /// types, without the load model's work on each of its 100,000-odd types, so that a
    /// program that needs the kernel's types does not pay for that too.
    pub fn parse_kernel(data: &[u8]) -> Result<Btf, BtfError> {
        Btf::parse_with(data, LoadModel::Skip)
    }

    fn parse_with(data: &[u8], model: LoadModel) -> Result<Btf, BtfError> {
        let endian = detect_endianness(data, BLOB)?;
        let sections = read_header(Cursor::new(data, endian, BLOB), data)?;
        let mut types = vec![BtfType {
            name: String::new(),
            kind: BtfKind::Void,
        }];
        let mut offsets = vec![0usize];
        let mut raw_refusal = sections.flags_refusal.clone();
        let mut cur = sections.types;
        while !cur.is_empty() {
            let id = TypeId::try_from(types.len()).map_err(|_| BtfError::BadType {
                type_id: TypeId::MAX,
                offset: cur.pos(),
                what: "too many types".into(),
            })?;
            offsets.push(cur.pos());
            let (t, refusal) = parse_type(&mut cur, &sections, id, model)?;
            raw_refusal = raw_refusal.or(refusal);
            types.push(t);
        }
        let btf = Btf {
            types,
            strings: sections.strings.to_vec(),
            raw_refusal,
        };
        validate_refs(&btf, &offsets)?;
        Ok(btf)
    }
}

/// Reads and checks the header; returns cursors over the two sections.
fn read_header<'a>(mut cur: Cursor<'a>, data: &'a [u8]) -> Result<Sections<'a>, BtfError> {
    cur.need(HEADER_LEN as usize, "header")?;
    cur.u16("magic")?;
    let version = cur.u8("version")?;
    if version != 1 {
        return Err(BtfError::BadVersion {
            blob: BLOB,
            version,
        });
    }
    let flags = cur.u8("flags")?;
    let hdr_len = cur.u32("hdr_len")?;
    let fields = [
        cur.u32("type_off")?,
        cur.u32("type_len")?,
        cur.u32("str_off")?,
        cur.u32("str_len")?,
    ];
    let [type_off, type_len, str_off, str_len] = fields;
    if hdr_len < HEADER_LEN {
        return bad_header(
            4,
            format!("hdr_len {hdr_len} is smaller than the {HEADER_LEN}-byte header"),
        );
    }
    if !type_off.is_multiple_of(4) {
        return bad_header(
            8,
            format!("type section offset {type_off} is not 4-byte aligned"),
        );
    }
    let (ts, te) = section_range(data, hdr_len, type_off, type_len, 8, "type section")?;
    let (ss, se) = section_range(data, hdr_len, str_off, str_len, 16, "string section")?;
    check_string_section(&data[ss..se], ss, str_len)?;
    Ok(Sections {
        types: cur.range(ts, te),
        strings: &data[ss..se],
        flags_refusal: (flags != 0).then(|| format!("Unsupported flags {flags:#x}")),
    })
}

fn bad_header<T>(offset: usize, what: String) -> Result<T, BtfError> {
    Err(BtfError::BadHeader {
        blob: BLOB,
        offset,
        what,
    })
}

/// The absolute byte range of a section; it must lie inside the blob.
fn section_range(
    data: &[u8],
    hdr_len: u32,
    off: u32,
    len: u32,
    field_at: usize,
    what: &str,
) -> Result<(usize, usize), BtfError> {
    let start = u64::from(hdr_len) + u64::from(off);
    let end = start + u64::from(len);
    if end > data.len() as u64 {
        return bad_header(
            field_at,
            format!(
                "{what} [{start}, {end}) extends past the end of the {}-byte blob",
                data.len()
            ),
        );
    }
    Ok((start as usize, end as usize))
}

/// A string section starts with the empty string and ends with a NUL, as libbpf requires.
fn check_string_section(strings: &[u8], start: usize, str_len: u32) -> Result<(), BtfError> {
    if str_len > MAX_STR_LEN {
        return bad_header(
            20,
            format!("string section of {str_len} bytes is too large"),
        );
    }
    match (strings.first(), strings.last()) {
        (Some(0), Some(0)) => Ok(()),
        (None, _) => bad_header(20, "empty string section".into()),
        (Some(_), _) if strings[0] != 0 => {
            bad_header(start, "string section does not start with NUL".into())
        }
        _ => bad_header(
            start + strings.len() - 1,
            "string section does not end with NUL".into(),
        ),
    }
}

/// One type, and the first rule of `BPF_BTF_LOAD` it breaks (see [`super::kernel_meta`]).
fn parse_type(
    cur: &mut Cursor<'_>,
    sec: &Sections<'_>,
    id: TypeId,
    model: LoadModel,
) -> Result<(BtfType, Option<String>), BtfError> {
    let offset = cur.pos();
    cur.need(12, "type header")?;
    let name_off = cur.u32("type name_off")?;
    let info = cur.u32("type info")?;
    let size_or_type = cur.u32("type size/type")?;
    let name = string_or_err(sec, name_off, offset, || format!("type [{id}] name"))?;
    let hdr = Header {
        id,
        offset,
        name,
        kind: (info >> 24) & 0x1f,
        vlen: (info & 0xffff) as usize,
        kflag: info >> 31 == 1,
        size_or_type,
    };
    // The INT data word is the first word after the header (read again by `parse_int`).
    let int_word = if hdr.kind == kind::INT {
        cur.range(cur.pos(), cur.pos() + 4)
            .u32("INT encoding")
            .unwrap_or(0)
    } else {
        0
    };
    let body = cur.pos();
    let kind = parse_kind(cur, sec, &hdr)?;
    if model == LoadModel::Skip {
        return Ok((
            BtfType {
                name: hdr.name,
                kind,
            },
            None,
        ));
    }
    let raw = RawType {
        id,
        info,
        name_off,
        strings: sec.strings,
        size_or_type,
        int_word,
        record_names: record_names(&cur.range(body, cur.pos()), &hdr),
    };
    let refusal = kernel_meta::refusal(&raw, &kind);
    Ok((
        BtfType {
            name: hdr.name,
            kind,
        },
        refusal,
    ))
}

/// The name offsets of a type's members, enumerators or parameters (each record starts with
/// one), re-read from the records `body` spans.
fn record_names(body: &Cursor<'_>, h: &Header) -> Vec<u32> {
    let size = match h.kind {
        kind::STRUCT | kind::UNION | kind::ENUM64 => 12,
        kind::ENUM | kind::FUNC_PROTO => 8,
        _ => return Vec::new(),
    };
    let mut cur = *body;
    (0..h.vlen)
        .map_while(|_| {
            let name_off = cur.u32("record name_off").ok()?;
            cur.skip(size - 4, "record").ok()?;
            Some(name_off)
        })
        .collect()
}

/// Resolves a name offset or reports it with `context` ("type [5] name").
fn string_or_err(
    sec: &Sections<'_>,
    str_off: u32,
    offset: usize,
    context: impl FnOnce() -> String,
) -> Result<String, BtfError> {
    string_at(sec.strings, str_off).ok_or_else(|| BtfError::StringOffset {
        blob: BLOB,
        context: context(),
        offset,
        str_off,
        str_len: sec.strings.len(),
    })
}

/// Parses the kind-specific data that follows the common header.
fn parse_kind(cur: &mut Cursor<'_>, sec: &Sections<'_>, h: &Header) -> Result<BtfKind, BtfError> {
    let t = h.size_or_type;
    Ok(match h.kind {
        kind::INT => parse_int(cur, h)?,
        kind::PTR => BtfKind::Ptr { ty: t },
        kind::ARRAY => parse_array(cur)?,
        kind::STRUCT => BtfKind::Struct {
            size: t,
            members: parse_members(cur, sec, h)?,
        },
        kind::UNION => BtfKind::Union {
            size: t,
            members: parse_members(cur, sec, h)?,
        },
        kind::ENUM => BtfKind::Enum {
            size: t,
            signed: h.kflag,
            values: parse_enum32(cur, sec, h)?,
        },
        kind::ENUM64 => BtfKind::Enum64 {
            size: t,
            signed: h.kflag,
            values: parse_enum64(cur, sec, h)?,
        },
        kind::FWD => BtfKind::Fwd { union: h.kflag },
        kind::TYPEDEF => BtfKind::Typedef { ty: t },
        kind::VOLATILE => BtfKind::Volatile { ty: t },
        kind::CONST => BtfKind::Const { ty: t },
        kind::RESTRICT => BtfKind::Restrict { ty: t },
        kind::TYPE_TAG => BtfKind::TypeTag { ty: t },
        kind::FUNC => BtfKind::Func {
            proto: t,
            linkage: linkage(h.vlen as u32),
        },
        kind::FUNC_PROTO => BtfKind::FuncProto {
            ret: t,
            params: parse_params(cur, sec, h)?,
        },
        kind::VAR => BtfKind::Var {
            ty: t,
            linkage: linkage(cur.u32("VAR linkage")?),
        },
        kind::DATASEC => BtfKind::DataSec {
            size: t,
            vars: parse_datasec(cur, h)?,
        },
        kind::FLOAT => BtfKind::Float { size: t },
        kind::DECL_TAG => BtfKind::DeclTag {
            ty: t,
            component_idx: cur.u32("DECL_TAG component_idx")? as i32,
        },
        other => {
            return Err(BtfError::UnknownKind {
                type_id: h.id,
                offset: h.offset,
                kind: other,
            });
        }
    })
}

fn parse_int(cur: &mut Cursor<'_>, h: &Header) -> Result<BtfKind, BtfError> {
    let word = cur.u32("INT encoding")?;
    let enc = (word >> 24) & 0x0f;
    let bit_offset = ((word >> 16) & 0xff) as u8;
    let bits = (word & 0xff) as u8;
    let encoding = IntEncoding {
        signed: enc & 1 != 0,
        char: enc & 2 != 0,
        bool: enc & 4 != 0,
    };
    Ok(BtfKind::Int {
        size: h.size_or_type,
        encoding,
        bit_offset,
        bits,
    })
}

fn parse_array(cur: &mut Cursor<'_>) -> Result<BtfKind, BtfError> {
    cur.need(12, "ARRAY data")?;
    let elem = cur.u32("ARRAY type")?;
    let index = cur.u32("ARRAY index_type")?;
    let len = cur.u32("ARRAY nelems")?;
    Ok(BtfKind::Array { elem, index, len })
}

/// Checks that `vlen` records of `size` bytes fit before reading them, so a huge vlen in a
/// corrupt blob fails at once instead of allocating.
fn need_records(
    cur: &Cursor<'_>,
    h: &Header,
    size: usize,
    what: &'static str,
) -> Result<(), BtfError> {
    cur.need(h.vlen * size, what)
}

fn parse_members(
    cur: &mut Cursor<'_>,
    sec: &Sections<'_>,
    h: &Header,
) -> Result<Vec<Member>, BtfError> {
    need_records(cur, h, 12, "members")?;
    let mut members = Vec::with_capacity(h.vlen);
    for i in 0..h.vlen {
        let at = cur.pos();
        let name_off = cur.u32("member name_off")?;
        let ty = cur.u32("member type")?;
        let offset = cur.u32("member offset")?;
        let name = string_or_err(sec, name_off, at, || {
            format!("type [{}] member #{i} name", h.id)
        })?;
        // With kind_flag set, the offset word packs the bitfield width in its top byte.
        let (bit_offset, bitfield_size) = if h.kflag {
            (offset & 0x00ff_ffff, offset >> 24)
        } else {
            (offset, 0)
        };
        members.push(Member {
            name,
            ty,
            bit_offset,
            bitfield_size,
        });
    }
    Ok(members)
}

fn parse_enum32(
    cur: &mut Cursor<'_>,
    sec: &Sections<'_>,
    h: &Header,
) -> Result<Vec<EnumValue>, BtfError> {
    need_records(cur, h, 8, "enumerators")?;
    let mut values = Vec::with_capacity(h.vlen);
    for i in 0..h.vlen {
        let at = cur.pos();
        let name_off = cur.u32("enumerator name_off")?;
        let raw = cur.u32("enumerator value")?;
        let name = string_or_err(sec, name_off, at, || {
            format!("type [{}] enumerator #{i} name", h.id)
        })?;
        // Widen as the enum's signedness says, so `value` is the number the C source wrote.
        let value = if h.kflag {
            raw as i32 as i64 as u64
        } else {
            u64::from(raw)
        };
        values.push(EnumValue { name, value });
    }
    Ok(values)
}

fn parse_enum64(
    cur: &mut Cursor<'_>,
    sec: &Sections<'_>,
    h: &Header,
) -> Result<Vec<EnumValue>, BtfError> {
    need_records(cur, h, 12, "enumerators")?;
    let mut values = Vec::with_capacity(h.vlen);
    for i in 0..h.vlen {
        let at = cur.pos();
        let name_off = cur.u32("enumerator name_off")?;
        let lo = cur.u32("enumerator val_lo32")?;
        let hi = cur.u32("enumerator val_hi32")?;
        let name = string_or_err(sec, name_off, at, || {
            format!("type [{}] enumerator #{i} name", h.id)
        })?;
        values.push(EnumValue {
            name,
            value: (u64::from(hi) << 32) | u64::from(lo),
        });
    }
    Ok(values)
}

fn parse_params(
    cur: &mut Cursor<'_>,
    sec: &Sections<'_>,
    h: &Header,
) -> Result<Vec<Param>, BtfError> {
    need_records(cur, h, 8, "parameters")?;
    let mut params = Vec::with_capacity(h.vlen);
    for i in 0..h.vlen {
        let at = cur.pos();
        let name_off = cur.u32("param name_off")?;
        let ty = cur.u32("param type")?;
        let name = string_or_err(sec, name_off, at, || {
            format!("type [{}] param #{i} name", h.id)
        })?;
        params.push(Param { name, ty });
    }
    Ok(params)
}

fn parse_datasec(cur: &mut Cursor<'_>, h: &Header) -> Result<Vec<VarSecInfo>, BtfError> {
    need_records(cur, h, 12, "DATASEC variables")?;
    let mut vars = Vec::with_capacity(h.vlen);
    for _ in 0..h.vlen {
        let ty = cur.u32("DATASEC var type")?;
        let offset = cur.u32("DATASEC var offset")?;
        let size = cur.u32("DATASEC var size")?;
        vars.push(VarSecInfo { ty, offset, size });
    }
    Ok(vars)
}

fn linkage(raw: u32) -> Linkage {
    match raw {
        0 => Linkage::Static,
        1 => Linkage::Global,
        2 => Linkage::Extern,
        other => Linkage::Unknown(other),
    }
}

const RETURN_TYPE: &str = "return type";

/// Every type id a type refers to, with the role it plays (for messages).
pub(crate) fn type_refs(kind: &BtfKind) -> Vec<(&'static str, TypeId)> {
    match kind {
        BtfKind::Void | BtfKind::Int { .. } | BtfKind::Fwd { .. } | BtfKind::Float { .. } => vec![],
        BtfKind::Enum { .. } | BtfKind::Enum64 { .. } => vec![],
        BtfKind::Ptr { ty }
        | BtfKind::Typedef { ty }
        | BtfKind::Volatile { ty }
        | BtfKind::Const { ty }
        | BtfKind::Restrict { ty }
        | BtfKind::TypeTag { ty }
        | BtfKind::Var { ty, .. }
        | BtfKind::DeclTag { ty, .. } => vec![("referenced type", *ty)],
        BtfKind::Array { elem, index, .. } => {
            vec![("array element", *elem), ("array index", *index)]
        }
        BtfKind::Struct { members, .. } | BtfKind::Union { members, .. } => {
            members.iter().map(|m| ("member type", m.ty)).collect()
        }
        BtfKind::Func { proto, .. } => vec![("function prototype", *proto)],
        BtfKind::FuncProto { ret, params } => {
            let mut refs = vec![(RETURN_TYPE, *ret)];
            refs.extend(params.iter().map(|p| ("parameter type", p.ty)));
            refs
        }
        BtfKind::DataSec { vars, .. } => vars.iter().map(|v| ("DATASEC variable", v.ty)).collect(),
    }
}

/// Checks that every referenced type id exists, as libbpf's `btf_validate_type` does: a
/// prototype's return type is not checked there (the kernel refuses it at load, "Invalid
/// return type", and libbpf goes on without BTF).
fn validate_refs(btf: &Btf, offsets: &[usize]) -> Result<(), BtfError> {
    let last_id = (btf.types.len() - 1) as TypeId;
    for (id, ty) in btf.types.iter().enumerate() {
        for (role, bad_id) in type_refs(&ty.kind) {
            if bad_id > last_id && role != RETURN_TYPE {
                return Err(BtfError::BadTypeRef {
                    type_id: id as TypeId,
                    offset: offsets[id],
                    role,
                    bad_id,
                    last_id,
                });
            }
        }
        if let BtfKind::Func { proto, .. } = ty.kind
            && !matches!(
                btf.get(proto).map(|t| &t.kind),
                Some(BtfKind::FuncProto { .. })
            )
        {
            return Err(BtfError::FuncNotProto {
                type_id: id as TypeId,
                offset: offsets[id],
                proto,
            });
        }
    }
    Ok(())
}
