//! Parsing the `.BTF.ext` ELF section into [`BtfExt`].
//!
//! The blob is a header and up to three subsections (func_info, line_info, CO-RE relocations).
//! Each subsection starts with its record size, then repeats `{section name, record count,
//! records}`. Like libbpf, a record size larger than the one this code knows is honoured (the
//! unknown tail of each record is skipped), so objects from a newer compiler still load. Names
//! are offsets into the *BTF* string table, hence the `&Btf` argument.

use super::error::BtfError;
use super::ext::*;
use super::reader::{Cursor, detect_endianness, string_at};
use super::types::{Btf, TypeId};

const BLOB: &str = ".BTF.ext";
/// Header length up to and including `line_info_len`.
const MIN_HEADER_LEN: u32 = 24;
/// Header length when it also describes CO-RE relocations.
const CORE_HEADER_LEN: u32 = 32;
const INSN_SIZE: u32 = 8;

/// One subsection's location, as the header gives it.
struct Subsection {
    name: &'static str,
    off: u32,
    len: u32,
    /// The size of the record this parser knows (`bpf_func_info` etc.).
    min_rec_size: u32,
}

/// What a record parser gets: a cursor over exactly one record and the BTF for names.
struct RecordCtx<'a, 'b> {
    cur: Cursor<'a>,
    btf: &'b Btf,
    subsection: &'static str,
}

impl BtfExt {
    /// Parses a `.BTF.ext` blob whose strings and type ids refer to `btf`.
    pub fn parse(data: &[u8], btf: &Btf) -> Result<BtfExt, BtfError> {
        let endian = detect_endianness(data, BLOB)?;
        let mut cur = Cursor::new(data, endian, BLOB);
        let (hdr_len, func, line, core) = read_header(&mut cur)?;
        let body = |s: &Subsection| section_cursor(&cur, data.len(), hdr_len, s);
        let mut ext = BtfExt::default();
        if let Some(c) = body(&func)? {
            ext.func_info = parse_subsection(c, &func, btf, parse_func_info)?;
        }
        if let Some(c) = body(&line)? {
            ext.line_info = parse_subsection(c, &line, btf, parse_line_info)?;
        }
        if let Some(core) = core
            && let Some(c) = body(&core)?
        {
            ext.core_relos = parse_subsection(c, &core, btf, parse_core_relo)?;
        }
        Ok(ext)
    }
}

fn bad_ext<T>(subsection: &'static str, offset: usize, what: String) -> Result<T, BtfError> {
    Err(BtfError::BadExt {
        subsection,
        offset,
        what,
    })
}

/// Reads the header: its length and the func_info, line_info and (if present) core_relo ranges.
type Header = (u32, Subsection, Subsection, Option<Subsection>);

fn read_header(cur: &mut Cursor<'_>) -> Result<Header, BtfError> {
    cur.need(MIN_HEADER_LEN as usize, "header")?;
    cur.u16("magic")?;
    let version = cur.u8("version")?;
    if version != 1 {
        return Err(BtfError::BadVersion {
            blob: BLOB,
            version,
        });
    }
    let flags = cur.u8("flags")?;
    if flags != 0 {
        // libbpf knows no .BTF.ext flag.
        return bad_ext("header", 3, format!("unsupported flags {flags:#x}"));
    }
    let hdr_len = cur.u32("hdr_len")?;
    if hdr_len < MIN_HEADER_LEN {
        return bad_ext(
            "header",
            4,
            format!("hdr_len {hdr_len} is smaller than {MIN_HEADER_LEN}"),
        );
    }
    let blob_len = cur.pos() + cur.remaining();
    if hdr_len as usize >= blob_len {
        return bad_ext(
            "header",
            4,
            format!("hdr_len {hdr_len} leaves no data in the {blob_len}-byte blob"),
        );
    }
    let mut sub = |name, min_rec_size| -> Result<Subsection, BtfError> {
        Ok(Subsection {
            name,
            off: cur.u32("subsection offset")?,
            len: cur.u32("subsection length")?,
            min_rec_size,
        })
    };
    let func = sub("func_info", 8)?;
    let line = sub("line_info", 16)?;
    let core = if hdr_len >= CORE_HEADER_LEN {
        Some(sub("core_relo", 16)?)
    } else {
        None
    };
    Ok((hdr_len, func, line, core))
}

/// A cursor over one subsection, `None` when it is empty.
fn section_cursor<'a>(
    cur: &Cursor<'a>,
    data_len: usize,
    hdr_len: u32,
    s: &Subsection,
) -> Result<Option<Cursor<'a>>, BtfError> {
    if s.len == 0 {
        return Ok(None);
    }
    if !s.off.is_multiple_of(4) {
        return bad_ext(
            s.name,
            0,
            format!("subsection offset {} is not 4-byte aligned", s.off),
        );
    }
    let start = u64::from(hdr_len) + u64::from(s.off);
    let end = start + u64::from(s.len);
    if end > data_len as u64 {
        return bad_ext(
            s.name,
            start as usize,
            format!("subsection [{start}, {end}) extends past the {data_len}-byte blob"),
        );
    }
    Ok(Some(cur.range(start as usize, end as usize)))
}

/// Parses one subsection: record size, then per-ELF-section groups of records.
fn parse_subsection<T>(
    mut cur: Cursor<'_>,
    s: &Subsection,
    btf: &Btf,
    parse_record: fn(&mut RecordCtx<'_, '_>) -> Result<T, BtfError>,
) -> Result<Vec<SectionRecords<T>>, BtfError> {
    let rec_size = read_record_size(&mut cur, s)?;
    if cur.is_empty() {
        return bad_ext(s.name, cur.pos(), "no records after the record size".into());
    }
    let mut groups = Vec::new();
    while !cur.is_empty() {
        let at = cur.pos();
        cur.need(8, "BTF.ext section header")?;
        let name_off = cur.u32("section name offset")?;
        let count = cur.u32("record count")?;
        // libbpf maps a group to its ELF section by name; a name outside the strings (or
        // empty) maps to none, and the group is never used.
        let section = string_at(&btf.strings, name_off).unwrap_or_default();
        if count == 0 {
            return bad_ext(s.name, at, format!("section '{section}' has zero records"));
        }
        let total = u64::from(count) * u64::from(rec_size);
        if total > cur.remaining() as u64 {
            return bad_ext(
                s.name,
                at,
                format!("section '{section}': {count} records of {rec_size} bytes do not fit"),
            );
        }
        let mut records = Vec::with_capacity(count as usize);
        for _ in 0..count {
            let mut ctx = RecordCtx {
                cur: cur.range(cur.pos(), cur.pos() + rec_size as usize),
                btf,
                subsection: s.name,
            };
            records.push(parse_record(&mut ctx)?);
            cur.skip(rec_size as usize, "record")?;
        }
        if !section.is_empty() {
            groups.push(SectionRecords { section, records });
        }
    }
    Ok(groups)
}

/// Reads a subsection's record size: at least the known record, a multiple of 4.
fn read_record_size(cur: &mut Cursor<'_>, s: &Subsection) -> Result<u32, BtfError> {
    let at = cur.pos();
    let rec_size = cur.u32("record size")?;
    if rec_size < s.min_rec_size || !rec_size.is_multiple_of(4) {
        return bad_ext(
            s.name,
            at,
            format!(
                "invalid record size {rec_size} (need a multiple of 4, at least {})",
                s.min_rec_size
            ),
        );
    }
    Ok(rec_size)
}

fn ext_string(
    btf: &Btf,
    str_off: u32,
    subsection: &'static str,
    at: usize,
) -> Result<String, BtfError> {
    string_at(&btf.strings, str_off).ok_or_else(|| BtfError::StringOffset {
        blob: BLOB,
        context: format!("{subsection} record"),
        offset: at,
        str_off,
        str_len: btf.strings.len(),
    })
}

impl RecordCtx<'_, '_> {
    /// Reads a byte offset into the section's code and turns it into an instruction index,
    /// rounding down as libbpf does (it checks no alignment; the kernel judges the result).
    fn insn(&mut self) -> Result<u32, BtfError> {
        Ok(self.cur.u32("instruction offset")? / INSN_SIZE)
    }

    fn string(&mut self, what: &'static str) -> Result<String, BtfError> {
        let at = self.cur.pos();
        let off = self.cur.u32(what)?;
        ext_string(self.btf, off, self.subsection, at)
    }

    /// Reads a string offset and the string there, empty when the offset is outside the
    /// string section (libbpf passes line_info on unchecked; the kernel refuses it).
    fn lenient_string(&mut self, what: &'static str) -> Result<(u32, String), BtfError> {
        let off = self.cur.u32(what)?;
        Ok((off, string_at(&self.btf.strings, off).unwrap_or_default()))
    }

    /// Reads a type id that must exist in the BTF.
    fn type_id(&mut self) -> Result<TypeId, BtfError> {
        let at = self.cur.pos();
        let id = self.cur.u32("type id")?;
        if id as usize >= self.btf.types.len() {
            return bad_ext(
                self.subsection,
                at,
                format!(
                    "type id {id} does not exist (BTF has {} types)",
                    self.btf.types.len()
                ),
            );
        }
        Ok(id)
    }
}

/// A func_info record as libbpf passes it on: its type id is the kernel's to check.
fn parse_func_info(ctx: &mut RecordCtx<'_, '_>) -> Result<FuncInfo, BtfError> {
    Ok(FuncInfo {
        insn: ctx.insn()?,
        type_id: ctx.cur.u32("type id")?,
    })
}

fn parse_line_info(ctx: &mut RecordCtx<'_, '_>) -> Result<LineInfo, BtfError> {
    let insn = ctx.insn()?;
    let (file_name_off, file_name) = ctx.lenient_string("file name offset")?;
    let (line_off, line_text) = ctx.lenient_string("line offset")?;
    let line_col = ctx.cur.u32("line/column")?;
    // The kernel packs the line number above a 10-bit column.
    Ok(LineInfo {
        insn,
        file_name,
        line_text,
        line: line_col >> 10,
        column: line_col & 0x3ff,
        file_name_off,
        line_off,
    })
}

fn parse_core_relo(ctx: &mut RecordCtx<'_, '_>) -> Result<CoreRelo, BtfError> {
    let insn = ctx.insn()?;
    let type_id = ctx.type_id()?;
    let access = ctx.string("access string offset")?;
    let at = ctx.cur.pos();
    let raw = ctx.cur.u32("relocation kind")?;
    let Some(kind) = CoreReloKind::from_raw(raw) else {
        return bad_ext(
            ctx.subsection,
            at,
            format!("unknown CO-RE relocation kind {raw}"),
        );
    };
    Ok(CoreRelo {
        insn,
        type_id,
        access,
        kind,
    })
}

impl CoreReloKind {
    /// Every kind, in `enum bpf_core_relo_kind` order (the index is the raw value).
    pub const ALL: [CoreReloKind; 13] = [
        CoreReloKind::FieldByteOffset,
        CoreReloKind::FieldByteSize,
        CoreReloKind::FieldExists,
        CoreReloKind::FieldSigned,
        CoreReloKind::FieldLshiftU64,
        CoreReloKind::FieldRshiftU64,
        CoreReloKind::TypeIdLocal,
        CoreReloKind::TypeIdTarget,
        CoreReloKind::TypeExists,
        CoreReloKind::TypeSize,
        CoreReloKind::EnumvalExists,
        CoreReloKind::EnumvalValue,
        CoreReloKind::TypeMatches,
    ];

    /// The kind for a raw `enum bpf_core_relo_kind` value.
    pub fn from_raw(raw: u32) -> Option<CoreReloKind> {
        Self::ALL.get(raw as usize).copied()
    }

    /// The raw `enum bpf_core_relo_kind` value.
    pub fn to_raw(self) -> u32 {
        Self::ALL.iter().position(|&k| k == self).unwrap_or(0) as u32
    }

    /// libbpf's short name for the kind, as its debug log prints it.
    pub fn libbpf_name(self) -> &'static str {
        const NAMES: [&str; 13] = [
            "byte_off",
            "byte_sz",
            "field_exists",
            "signed",
            "lshift_u64",
            "rshift_u64",
            "local_type_id",
            "target_type_id",
            "type_exists",
            "type_size",
            "enumval_exists",
            "enumval_value",
            "type_matches",
        ];
        NAMES[self.to_raw() as usize]
    }
}
