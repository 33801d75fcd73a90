//! What loading produces: an [`Object`] with its programs (final instruction streams), map
//! specs, global data, BTF and source lines.
//!
//! Map references stay in the kernel's form: an `ld_imm64` with src_reg `BPF_PSEUDO_MAP_FD`
//! (the map itself) or `BPF_PSEUDO_MAP_VALUE` (an address in its value, offset in the second
//! slot's imm), but where the kernel would hold a map fd, `imm` holds the index of the map in
//! [`Object::maps`].

use crate::btf::{Btf, BtfExt, TypeId};
use bpfemu_isa::RawInsn;

#[derive(Clone, Debug)]
pub struct Object {
    /// File name the object was read from (for messages).
    pub name: String,
    pub programs: Vec<ProgramSpec>,
    pub maps: Vec<MapSpec>,
    pub btf: Option<Btf>,
    pub btf_ext: Option<BtfExt>,
    /// The `license` section's string.
    pub license: String,
    /// The legacy `version` section's value, if any.
    pub kern_version: Option<u32>,
    /// Things a user should know that did not stop the load (legacy section names, ...).
    pub warnings: Vec<String>,
}

/// A program ready to verify: subprograms appended as libbpf appends them.
#[derive(Clone, Debug)]
pub struct ProgramSpec {
    /// The entry function's name.
    pub name: String,
    /// The ELF section it came from (`xdp`, `xdp.frags`, `tc`, ...).
    pub section: String,
    /// `enum bpf_prog_type` value.
    pub prog_type: u32,
    /// `enum bpf_attach_type` value, when the section implies one.
    pub expected_attach_type: Option<u32>,
    /// `BPF_F_*` load flags the section implies (e.g. `BPF_F_XDP_HAS_FRAGS` for `xdp.frags`).
    pub prog_flags: u32,
    pub insns: Vec<RawInsn>,
    /// Functions in the final stream: name and first instruction (the entry first).
    pub functions: Vec<(String, usize)>,
    /// func_info for the final stream: (instruction, BTF FUNC type id).
    pub func_info: Vec<(usize, TypeId)>,
    /// line_info for the final stream, sorted by instruction.
    pub line_info: Vec<SourceLine>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceLine {
    pub insn: usize,
    pub file_name: String,
    pub line_text: String,
    pub line: u32,
    pub column: u32,
}

/// Where a map comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MapOrigin {
    /// A BTF-defined map in `.maps`.
    BtfDefined,
    /// A `struct bpf_map_def` in the legacy `maps` section.
    Legacy,
    /// A global data section (`.data`, `.rodata`, `.bss`, `.rodata.str1.1`, `.data.*`, ...)
    /// turned into a one-element array; `initial` holds its contents.
    GlobalData { section: String },
    /// The `.kconfig` externs.
    Kconfig,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MapSpec {
    /// The name libbpf gives it (global data maps: libbpf's `<obj prefix>.data` naming).
    pub name: String,
    /// `enum bpf_map_type` value.
    pub map_type: u32,
    pub key_size: u32,
    pub value_size: u32,
    pub max_entries: u32,
    pub map_flags: u32,
    pub numa_node: u32,
    /// `LIBBPF_PIN_*`.
    pub pinning: u32,
    /// `map_extra` (bloom filter hash count, arena address, ...).
    pub map_extra: u64,
    pub key_type: Option<TypeId>,
    pub value_type: Option<TypeId>,
    /// The inner map template of a map-in-map.
    pub inner: Option<Box<MapSpec>>,
    /// Initial slots of a map-in-map or prog array: (index, name of the map or program).
    pub init_slots: Vec<(u32, String)>,
    /// Initial contents of a global data map.
    pub initial: Option<Vec<u8>>,
    pub origin: MapOrigin,
}
