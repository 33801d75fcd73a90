//! The BTF.ext data model: per-section func_info, line_info and CO-RE relocation records.
//!
//! The file stores instruction offsets in bytes from the start of the ELF section; the parser
//! converts them to instruction indices within that section.

use super::types::TypeId;

/// Records of one ELF section.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SectionRecords<T> {
    /// The ELF section the records describe (`xdp`, `.text`, ...).
    pub section: String,
    pub records: Vec<T>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BtfExt {
    pub func_info: Vec<SectionRecords<FuncInfo>>,
    pub line_info: Vec<SectionRecords<LineInfo>>,
    pub core_relos: Vec<SectionRecords<CoreRelo>>,
}

/// A function starts at `insn` and has the BTF FUNC type `type_id`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FuncInfo {
    pub insn: u32,
    pub type_id: TypeId,
}

/// The source line an instruction came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LineInfo {
    pub insn: u32,
    pub file_name: String,
    /// The source text of the line, as clang recorded it.
    pub line_text: String,
    pub line: u32,
    pub column: u32,
    /// The record's string offsets as the file holds them: libbpf passes them to the kernel
    /// unchecked, and `BPF_PROG_LOAD` refuses one outside the string section (the names
    /// above are then empty).
    pub file_name_off: u32,
    pub line_off: u32,
}

/// One CO-RE relocation: instruction, the local root type, the access string (`0:1:2`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CoreRelo {
    pub insn: u32,
    pub type_id: TypeId,
    pub access: String,
    pub kind: CoreReloKind,
}

/// `enum bpf_core_relo_kind`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CoreReloKind {
    FieldByteOffset,
    FieldByteSize,
    FieldExists,
    FieldSigned,
    FieldLshiftU64,
    FieldRshiftU64,
    TypeIdLocal,
    TypeIdTarget,
    TypeExists,
    TypeSize,
    EnumvalExists,
    EnumvalValue,
    TypeMatches,
}
