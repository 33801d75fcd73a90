//! The ELF layer: sections, symbols and relocations of a BPF object, read through the `object`
//! crate and copied into plain structs.
//!
//! Everything past this module works on section indices, symbol indices and byte slices, never
//! on `object` types, so the libbpf-shaped logic above it reads like libbpf and a corrupt header
//! is caught here, once, as a [`LoadError`].

use crate::error::LoadError;
use object::LittleEndian as LE;
use object::elf;
use object::read::elf::{FileHeader, SectionHeader, Sym};

/// `EM_BPF`.
const EM_BPF: u16 = 247;
/// `EM_NONE`.
const EM_NONE: u16 = 0;
pub const SHT_PROGBITS: u32 = 1;
pub const SHT_STRTAB: u32 = 3;
pub const SHT_NOBITS: u32 = 8;
pub const SHT_REL: u32 = 9;
pub const SHT_LLVM_ADDRSIG: u32 = 0x6fff_4c03;
pub const SHF_EXECINSTR: u64 = 0x4;
pub const STT_NOTYPE: u8 = 0;
pub const STT_FUNC: u8 = 2;
pub const STT_SECTION: u8 = 3;
pub const STB_LOCAL: u8 = 0;
pub const STB_GLOBAL: u8 = 1;
pub const STB_WEAK: u8 = 2;
pub const STV_INTERNAL: u8 = 1;
pub const STV_HIDDEN: u8 = 2;
pub const STT_OBJECT: u8 = 1;
pub const SHN_UNDEF: u16 = 0;
pub const SHN_LORESERVE: u16 = 0xff00;
/// `R_BPF_64_64`: the 64-bit immediate of `ld_imm64`.
pub const R_BPF_64_64: u32 = 1;
/// `R_BPF_64_32`: the immediate of a call instruction.
pub const R_BPF_64_32: u32 = 10;

/// One section, header fields already in host order.
#[derive(Debug)]
pub struct Section<'a> {
    pub index: usize,
    pub name: String,
    pub sh_type: u32,
    pub flags: u64,
    pub size: u64,
    /// Contents; empty for `SHT_NOBITS`.
    pub data: &'a [u8],
    pub info: u32,
    pub entsize: u64,
}

impl Section<'_> {
    pub fn is_exec(&self) -> bool {
        self.sh_type == SHT_PROGBITS && self.flags & SHF_EXECINSTR != 0
    }
}

/// One symbol-table entry.
#[derive(Clone, Debug)]
pub struct Symbol {
    pub name: String,
    /// Raw `st_shndx` (0 undefined, >= 0xff00 special).
    pub shndx: u16,
    pub value: u64,
    pub size: u64,
    pub kind: u8,
    pub bind: u8,
    pub visibility: u8,
}

impl Symbol {
    /// libbpf's `sym_is_extern`: an undefined, untyped global or weak symbol.
    pub fn is_extern(&self) -> bool {
        self.shndx == SHN_UNDEF
            && (self.bind == STB_GLOBAL || self.bind == STB_WEAK)
            && self.kind == STT_NOTYPE
    }
}

/// One `Elf64_Rel`.
#[derive(Clone, Copy, Debug)]
pub struct Rel {
    pub offset: u64,
    pub sym: u32,
    pub kind: u32,
}

/// A parsed BPF ELF object.
#[derive(Debug)]
pub struct ElfObject<'a> {
    pub file: String,
    /// Indexed by section index; entry 0 is the null section.
    pub sections: Vec<Section<'a>>,
    /// Indexed by symbol index; entry 0 is the null symbol.
    pub symbols: Vec<Symbol>,
    /// The symbol table's section index; 0 when there is none (a stripped object).
    pub symtab_index: usize,
}

impl<'a> ElfObject<'a> {
    /// Parses `data`, checking it is a 64-bit little-endian `EM_BPF` object with a symbol table.
    pub fn parse(file: &str, data: &'a [u8]) -> Result<Self, LoadError> {
        check_ident(file, data)?;
        let corrupt = |e: object::Error| elf_error(file, e.to_string());
        let header = elf::FileHeader64::<LE>::parse(data).map_err(corrupt)?;
        let machine = header.e_machine(LE).0;
        // Old LLVM versions wrote EM_NONE; libbpf accepts both.
        if machine != EM_BPF && machine != EM_NONE {
            return Err(LoadError::NotBpf {
                file: file.into(),
                message: format!("e_machine is {machine}, not EM_BPF (247) or EM_NONE (0)"),
            });
        }
        let table = header.sections(LE, data).map_err(corrupt)?;
        let mut sections = Vec::with_capacity(table.len());
        for (index, sh) in table.enumerate() {
            let name = table.section_name(LE, sh).map_err(corrupt)?;
            let sh_type = sh.sh_type(LE).0;
            let contents = if sh_type == SHT_NOBITS {
                &[][..]
            } else {
                sh.data(LE, data).map_err(corrupt)?
            };
            sections.push(Section {
                index: index.0,
                name: String::from_utf8_lossy(name).into_owned(),
                sh_type,
                flags: sh.sh_flags(LE).0,
                size: sh.sh_size(LE),
                data: contents,
                info: sh.sh_info(LE),
                entsize: sh.sh_entsize(LE),
            });
        }
        let symtab = table.symbols(LE, data, elf::SHT_SYMTAB).map_err(corrupt)?;
        // No symbol table (0): libbpf refuses the object, iproute2 loads each executable
        // section whole; the loader decides.
        let symtab_index = symtab.section().0;
        let mut symbols = Vec::with_capacity(symtab.symbols().len());
        for sym in symtab.symbols() {
            let name = sym.name(LE, symtab.strings()).map_err(corrupt)?;
            symbols.push(Symbol {
                name: String::from_utf8_lossy(name).into_owned(),
                shndx: sym.st_shndx(LE).0,
                value: sym.st_value(LE),
                size: sym.st_size(LE),
                kind: sym.st_type().0,
                bind: sym.st_bind().0,
                visibility: sym.st_visibility().0,
            });
        }
        Ok(ElfObject {
            file: file.into(),
            sections,
            symbols,
            symtab_index,
        })
    }

    /// The relocations of a `SHT_REL` section.
    pub fn rels(&self, rel_section: &Section<'_>) -> Result<Vec<Rel>, LoadError> {
        const REL_SIZE: usize = 16;
        if rel_section.entsize != REL_SIZE as u64
            || !rel_section.data.len().is_multiple_of(REL_SIZE)
        {
            return Err(elf_error(
                &self.file,
                format!(
                    "relocation section '{}' has a bad entry size",
                    rel_section.name
                ),
            ));
        }
        Ok(rel_section
            .data
            .chunks_exact(REL_SIZE)
            .map(|c| {
                let offset = u64::from_le_bytes(c[0..8].try_into().expect("8 bytes"));
                let info = u64::from_le_bytes(c[8..16].try_into().expect("8 bytes"));
                Rel {
                    offset,
                    sym: (info >> 32) as u32,
                    kind: info as u32,
                }
            })
            .collect())
    }

    /// The symbol a relocation names, or an error naming the relocation.
    pub fn rel_symbol(&self, section: &str, rel: &Rel) -> Result<&Symbol, LoadError> {
        self.symbols
            .get(rel.sym as usize)
            .ok_or_else(|| LoadError::Relocation {
                file: self.file.clone(),
                section: section.into(),
                offset: rel.offset,
                message: format!("symbol #{} does not exist", rel.sym),
            })
    }

    /// The section a symbol lives in, if it is a regular one.
    pub fn symbol_section(&self, sym: &Symbol) -> Option<&Section<'a>> {
        if sym.shndx == SHN_UNDEF || sym.shndx >= SHN_LORESERVE {
            return None;
        }
        self.sections.get(sym.shndx as usize)
    }

    /// A symbol's name for messages: relocations against static functions and data point at
    /// the section symbol, whose name is empty, so name the section instead.
    pub fn display_name(&self, sym: &Symbol) -> String {
        if sym.kind == STT_SECTION && sym.name.is_empty() {
            self.symbol_section(sym)
                .map_or_else(|| "<?>".into(), |s| s.name.clone())
        } else {
            sym.name.clone()
        }
    }
}

fn elf_error(file: &str, message: String) -> LoadError {
    LoadError::Elf {
        file: file.into(),
        message,
    }
}

/// Class and byte order come before anything `object` would parse, so that a big-endian or
/// 32-bit object gets a message saying so rather than a generic parse failure.
fn check_ident(file: &str, data: &[u8]) -> Result<(), LoadError> {
    if data.len() < 16 || &data[..4] != b"\x7fELF" {
        return Err(elf_error(file, "no ELF header".into()));
    }
    let not_bpf = |message: &str| LoadError::NotBpf {
        file: file.into(),
        message: message.into(),
    };
    match (data[4], data[5]) {
        (2, 1) => Ok(()),
        (2, _) => Err(not_bpf(
            "big-endian ELF; BPF objects here are little-endian",
        )),
        _ => Err(not_bpf("32-bit ELF; BPF objects are ELF64")),
    }
}
