//! What loading produces: an [`Object`] with its programs (final instruction streams), map
//! specs, global data, BTF and source lines.
//!
//! Map references stay in the kernel's form: an `ld_imm64` with src_reg `BPF_PSEUDO_MAP_FD`
//! (the map itself) or `BPF_PSEUDO_MAP_VALUE` (an address in its value, offset in the second
//! slot's imm), but where the kernel would hold a map fd, `imm` holds the index of the map in
//! [`Object::maps`].

use crate::btf::{Btf, BtfExt, TypeId};
use crate::kernel::{Kernel, KernelBtfError};
use bpfemu_isa::RawInsn;
use std::collections::BTreeMap;

#[derive(Clone, Debug)]
pub struct Object {
    /// File name the object was read from (for messages).
    pub name: String,
    pub programs: Vec<ProgramSpec>,
    pub maps: Vec<MapSpec>,
    /// The `__arena` globals: where in which arena map, and their initial bytes.
    pub arena: Option<crate::arena::ArenaGlobals>,
    pub btf: Option<Btf>,
    pub btf_ext: Option<BtfExt>,
    /// The `license` section's string.
    pub license: String,
    /// The legacy `version` section's value, if any.
    pub kern_version: Option<u32>,
    /// Things a user should know that did not stop the load (legacy section names, ...).
    pub warnings: Vec<String>,
    /// The kernel it was loaded into ([`crate::LoadOptions::kernel`]), which its programs are
    /// judged by and whose BTF ids its kfunc calls hold.
    pub kernel: Kernel,
}

impl Object {
    /// The program `wanted` names: the one with that function name, else the first in the
    /// section of that name, as `ip link set dev DEV xdp obj FILE sec S` picks it.
    pub fn find_program(&self, wanted: &str) -> Option<&ProgramSpec> {
        let programs = &self.programs;
        programs
            .iter()
            .find(|p| p.name == wanted)
            .or_else(|| programs.iter().find(|p| p.section == wanted))
    }

    /// The names of the kfuncs its programs call, by BTF id, from its kernel's BTF (see
    /// [`Kernel::kfunc_names`]): what a runtime needs to run them.
    pub fn kfunc_names(&self) -> Result<BTreeMap<i32, String>, KernelBtfError> {
        self.kernel
            .kfunc_names(self.programs.iter().map(|p| p.insns.as_slice()))
    }

    /// Of `candidates` (program names, several), the one `ip link set dev DEV xdp obj FILE`
    /// loads without `sec`: the first in iproute2's default section, `prog`.
    pub fn iproute2_default<'a>(&self, candidates: &[&'a str]) -> Option<&'a str> {
        let default = self
            .programs
            .iter()
            .find(|p| p.section == crate::iproute2::DEFAULT_SECTION)?;
        candidates.iter().copied().find(|c| *c == default.name)
    }
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
    /// line_info for the final stream, in the order libbpf sends it (by instruction unless the
    /// object's records are out of order, which the kernel refuses).
    pub line_info: Vec<SourceLine>,
    /// Which loader convention made a program of this code, and so named it.
    pub naming: Naming,
    /// Instructions whose `ld_imm64` names a map by a file descriptor written in the
    /// object (no relocation made it one of [`Object::maps`]): their imm is that fd, passed
    /// to the kernel as it stands (it names no map of the load: `fd N is not pointing to
    /// valid bpf_map`).
    pub unrelocated_map_fds: Vec<usize>,
    /// Instructions libbpf turned into a call that cannot verify (an unresolved weak kfunc, a
    /// CO-RE relocation with no target): should the verifier reach one, libbpf rewrites its
    /// complaint into the cause (see `crate::libbpf_log`).
    pub poisoned_calls: Vec<PoisonedCall>,
}

/// An instruction libbpf poisoned, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PoisonedCall {
    pub insn: usize,
    pub cause: PoisonCause,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PoisonCause {
    /// A call to a weak kfunc the kernel does not have: its extern's name.
    UnresolvedKfunc(String),
    /// A CO-RE relocation that found no target (the object's own record).
    FailedCoreRelo(crate::btf::CoreRelo),
}

/// The loader conventions that say where a program is in an object and what it is called.
/// Loaders agree on objects built with global function symbols and differ on the rest:
/// bpfemu takes each object as the loader that accepts it would.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Naming {
    /// A global (or weak) `STT_FUNC` symbol outside `.text`, named by it: libbpf's rule, which
    /// every loader shares.
    #[default]
    FunctionSymbol,
    /// An executable section with code but no function symbol, taken whole and named by the
    /// section: iproute2's legacy loader and the kernel's old `samples/bpf` loader (stripped or
    /// hand-written objects, or ones built without BTF by old compilers). libbpf makes no
    /// program of such code.
    SectionWithoutSymbols,
    /// A local (`static`) `STT_FUNC` symbol outside `.text`, named by it: cilium/ebpf loads
    /// every function of a program section as a program; libbpf refuses the object.
    StaticFunction,
}

impl Naming {
    /// A short stable key (`inspect --json`).
    pub fn key(self) -> &'static str {
        match self {
            Naming::FunctionSymbol => "function_symbol",
            Naming::SectionWithoutSymbols => "section_without_symbols",
            Naming::StaticFunction => "static_function",
        }
    }

    /// What a person reads (`inspect`).
    pub fn describe(self) -> &'static str {
        match self {
            Naming::FunctionSymbol => "named by its function symbol (libbpf)",
            Naming::SectionWithoutSymbols => {
                "a section without symbols, named by its section (iproute2)"
            }
            Naming::StaticFunction => "static function (as cilium/ebpf loads it)",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceLine {
    pub insn: usize,
    pub file_name: String,
    pub line_text: String,
    pub line: u32,
    pub column: u32,
    /// The record's string offsets into the object's BTF strings, as libbpf sends them
    /// (see [`crate::btf::LineInfo`]).
    pub file_name_off: u32,
    pub line_off: u32,
}

/// Where a map comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MapOrigin {
    /// A BTF-defined map in `.maps`.
    BtfDefined,
    /// A `struct bpf_map_def` in the legacy `maps` section.
    Legacy,
    /// iproute2's `struct bpf_elf_map` in the `maps` section: `struct bpf_map_def` followed by
    /// iproute2's own fields (see [`crate::iproute2`]).
    Iproute2(ElfMapFields),
    /// A global data section (`.data`, `.rodata`, `.bss`, `.rodata.str1.1`, `.data.*`, ...)
    /// turned into a one-element array; `initial` holds its contents.
    GlobalData { section: String },
    /// The `.kconfig` externs.
    Kconfig,
}

/// The fields iproute2's `struct bpf_elf_map` has past libbpf's `struct bpf_map_def`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ElfMapFields {
    /// The map's id inside the object: map-in-maps name their inner map by it, tail-call
    /// sections `ID/KEY` their prog array.
    pub id: u32,
    /// `PIN_NONE` (0), `PIN_OBJECT_NS` (1), `PIN_GLOBAL_NS` (2), or an id from
    /// `/etc/iproute2/bpf_pinning`.
    pub pinning: u32,
    /// For a map-in-map: the id of the map that is its inner template.
    pub inner_id: u32,
    /// For a map with an id: the slot it takes in every map-in-map whose `inner_id` is that id
    /// (`u32::MAX`, iproute2's -1: none).
    pub inner_idx: u32,
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
