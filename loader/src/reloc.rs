//! From ELF functions to final instruction streams: recording each relocation against the
//! function it lies in (libbpf's `bpf_object__collect_prog_relos` and
//! `bpf_program__record_reloc`), appending called subprograms in libbpf's order with their
//! func_info and line_info (`bpf_object__reloc_code`, `bpf_object__append_subprog_code`,
//! `adjust_prog_btf_ext_info`), then rewriting map, data and extern references
//! (`bpf_object__relocate_data`).
//!
//! Subprogram order matters: a verifier log, an xlated dump and every instruction index a user
//! sees depend on it. libbpf appends a subprogram the first time a call to it is met while
//! walking the caller, recursing into it at once, so the order is depth-first by first call.

use crate::btf::{BtfExt, SectionRecords, TypeId};
use crate::elf::{
    ElfObject, R_BPF_64_32, R_BPF_64_64, STB_GLOBAL, STB_LOCAL, STB_WEAK, STT_FUNC, STT_SECTION,
    Symbol,
};
use crate::error::LoadError;
use crate::externs::{Extern, ExternKind};
use crate::maps::MapTable;
use crate::object::{Naming, PoisonCause, PoisonedCall, SourceLine};
use bpfemu_isa::RawInsn;
use std::collections::BTreeMap;

const INSN_SIZE: u64 = 8;
const CODE_CALL: u8 = 0x85;
const CODE_LD_IMM64: u8 = 0x18;
const PSEUDO_MAP_FD: u8 = 1;
const PSEUDO_MAP_VALUE: u8 = 2;
const PSEUDO_BTF_ID: u8 = 3;
const PSEUDO_FUNC: u8 = 4;
const PSEUDO_CALL: u8 = 1;
const PSEUDO_KFUNC_CALL: u8 = 2;
/// libbpf's marker for a call to an unresolved weak kfunc: an invalid helper id.
const POISON_CALL_KFUNC_BASE: i32 = 2_002_000_000;

/// A function symbol of an executable section: an entry program, or a subprogram when it is
/// in `.text` (libbpf's `struct bpf_program` before linking).
#[derive(Clone, Debug)]
pub struct Func {
    pub name: String,
    pub sec_idx: usize,
    pub sec_name: String,
    pub insn_off: usize,
    pub insn_cnt: usize,
    /// Relocations, function-relative instruction index, sorted.
    pub relos: Vec<Reloc>,
    /// Which convention made it a function (and, outside `.text`, a program).
    pub naming: Naming,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reloc {
    pub insn: usize,
    pub kind: RelocKind,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RelocKind {
    /// bpf-to-bpf call; the symbol's offset in `.text`.
    Call { sym_off: u64 },
    /// `ld_imm64` of a subprogram's address (a callback).
    SubprogAddr { sym_off: u64 },
    /// A declared map (`.maps` or legacy `maps`).
    Map { map: usize },
    /// An address in a global data map.
    Data { map: usize, sym_off: u64 },
    /// `ld_imm64` of an extern (kconfig value or ksym).
    ExternLd { ext: usize },
    /// A kfunc call.
    ExternCall { ext: usize },
}

/// Executable sections' code, by section index (CO-RE rewrites it in place before linking).
pub type SectionCode = BTreeMap<usize, Vec<RawInsn>>;

/// Every function of every executable section, sorted by section and offset (libbpf's
/// `bpf_object__add_programs` then `cmp_progs`), then each executable section no function
/// symbol names, whole (iproute2's convention, see [`Naming`]).
pub fn collect_functions(
    elf: &ElfObject<'_>,
    text_idx: Option<usize>,
) -> Result<Vec<Func>, LoadError> {
    let mut funcs = Vec::new();
    for sym in elf.symbols.iter().filter(|s| s.kind == STT_FUNC) {
        let Some(section) = elf
            .symbol_section(sym)
            .filter(|s| s.is_exec() && !s.data.is_empty())
        else {
            continue;
        };
        funcs.push(symbol_function(elf, section, sym, text_idx)?);
    }
    let whole = code_sections(elf).filter(|s| !funcs.iter().any(|f| f.sec_idx == s.index));
    let whole: Vec<Func> = whole.map(section_function).collect();
    funcs.extend(whole);
    funcs.sort_by_key(|f| (f.sec_idx, f.insn_off));
    Ok(funcs)
}

/// Executable sections with code.
fn code_sections<'e, 'a>(
    elf: &'e ElfObject<'a>,
) -> impl Iterator<Item = &'e crate::elf::Section<'a>> {
    elf.sections
        .iter()
        .filter(|s| s.is_exec() && !s.data.is_empty())
}

/// The function an `STT_FUNC` symbol names, checked as libbpf checks it. A static one outside
/// `.text`, which libbpf refuses, is a program as cilium/ebpf makes it.
fn symbol_function(
    elf: &ElfObject<'_>,
    section: &crate::elf::Section<'_>,
    sym: &Symbol,
    text_idx: Option<usize>,
) -> Result<Func, LoadError> {
    let bad = |message: &str| LoadError::Program {
        file: elf.file.clone(),
        section: section.name.clone(),
        program: sym.name.clone(),
        message: message.into(),
    };
    let end = sym
        .value
        .checked_add(sym.size)
        .ok_or_else(|| bad("size overflows"))?;
    if end > section.data.len() as u64 {
        return Err(bad("crosses the section boundary"));
    }
    if sym.size == 0 || !sym.size.is_multiple_of(INSN_SIZE) || !sym.value.is_multiple_of(INSN_SIZE)
    {
        return Err(bad(&format!(
            "corrupt: offset {}, size {}",
            sym.value, sym.size
        )));
    }
    let is_static = Some(section.index) != text_idx && sym.bind == STB_LOCAL;
    Ok(Func {
        name: sym.name.clone(),
        sec_idx: section.index,
        sec_name: section.name.clone(),
        insn_off: (sym.value / INSN_SIZE) as usize,
        insn_cnt: (sym.size / INSN_SIZE) as usize,
        relos: Vec::new(),
        naming: if is_static {
            Naming::StaticFunction
        } else {
            Naming::FunctionSymbol
        },
    })
}

/// A section no function symbol names, as one function named by the section: the whole
/// section is the program, as iproute2 loads it (`bpf_fetch_prog`). In `.text` it is the one
/// subprogram calls land in.
fn section_function(section: &crate::elf::Section<'_>) -> Func {
    Func {
        name: section.name.clone(),
        sec_idx: section.index,
        sec_name: section.name.clone(),
        insn_off: 0,
        insn_cnt: section.data.len() / INSN_SIZE as usize,
        relos: Vec::new(),
        naming: Naming::SectionWithoutSymbols,
    }
}

/// libbpf's `find_prog_by_sec_insn`.
pub fn func_at(funcs: &[Func], sec_idx: usize, insn: usize) -> Option<usize> {
    funcs
        .iter()
        .position(|f| f.sec_idx == sec_idx && insn >= f.insn_off && insn < f.insn_off + f.insn_cnt)
}

/// What relocation recording needs to know about the object.
pub struct RelocContext<'e, 'a> {
    pub elf: &'e ElfObject<'a>,
    pub text_idx: Option<usize>,
    pub maps: &'e MapTable,
    pub externs: &'e [Extern],
    /// Sections holding declared maps (`.maps`, legacy `maps`).
    pub map_sections: Vec<usize>,
}

/// Records the relocations of one `SHT_REL` section against an executable section.
pub fn collect_relos(
    ctx: &RelocContext<'_, '_>,
    rel_section: &crate::elf::Section<'_>,
    code: &mut SectionCode,
    funcs: &mut [Func],
) -> Result<(), LoadError> {
    let elf = ctx.elf;
    let target = rel_section.info as usize;
    let Some(insns) = code.get_mut(&target) else {
        return Ok(());
    };
    let target_name = elf.sections[target].name.clone();
    for rel in elf.rels(rel_section)? {
        let sym = elf.rel_symbol(&rel_section.name, &rel)?;
        let err = |message: String| LoadError::Relocation {
            file: elf.file.clone(),
            section: target_name.clone(),
            offset: rel.offset,
            message,
        };
        if sym.shndx as usize >= elf.sections.len() && sym.shndx < crate::elf::SHN_LORESERVE {
            return Err(err(format!(
                "symbol '{}' points to a section that does not exist",
                sym.name
            )));
        }
        if rel.offset % INSN_SIZE != 0 || rel.offset >= insns.len() as u64 * INSN_SIZE {
            return Err(err("offset is not an instruction in the section".into()));
        }
        let insn_idx = (rel.offset / INSN_SIZE) as usize;
        let Some(owner) = func_at(funcs, target, insn_idx) else {
            // libbpf: an overridden weak function; nothing to relocate.
            continue;
        };
        let kind = record(ctx, sym, rel.sym as usize, rel.kind, insn_idx, insns).map_err(err)?;
        if let RelocKind::SubprogAddr { .. } = kind {
            // libbpf marks these before linking so the linker recognises them.
            insns[insn_idx].src = PSEUDO_FUNC;
        }
        let func = &mut funcs[owner];
        func.relos.push(Reloc {
            insn: insn_idx - func.insn_off,
            kind,
        });
    }
    Ok(())
}

/// libbpf's `bpf_program__record_reloc`: what the relocation means, from the instruction and
/// the symbol.
fn record(
    ctx: &RelocContext<'_, '_>,
    sym: &Symbol,
    sym_idx: usize,
    rel_type: u32,
    insn_idx: usize,
    insns: &[RawInsn],
) -> Result<RelocKind, String> {
    let insn = insns[insn_idx];
    let name = ctx.elf.display_name(sym);
    let is_call = insn.code == CODE_CALL;
    if !is_call && insn.code != CODE_LD_IMM64 {
        return Err(format!(
            "relocation against '{name}' at instruction {insn_idx}, code {:#04x}, which is neither call nor ld_imm64",
            insn.code
        ));
    }
    if rel_type != R_BPF_64_64 && rel_type != R_BPF_64_32 {
        return Err(format!(
            "unexpected relocation type {rel_type} against '{name}'"
        ));
    }
    if !is_call && insn_idx + 1 >= insns.len() {
        return Err(format!(
            "ld_imm64 at instruction {insn_idx} is cut off by the section end"
        ));
    }
    if sym.is_extern() {
        let ext = ctx
            .externs
            .iter()
            .position(|e| e.sym_idx == sym_idx)
            .ok_or_else(|| format!("no extern for symbol '{name}'"))?;
        return Ok(if is_call {
            RelocKind::ExternCall { ext }
        } else {
            RelocKind::ExternLd { ext }
        });
    }
    if is_call {
        return record_call(ctx, sym, &name, insn);
    }
    if sym.shndx == 0 || sym.shndx >= crate::elf::SHN_LORESERVE {
        return Err(format!(
            "relocation against '{name}' in special section {:#x}; uninitialised global variable?",
            sym.shndx
        ));
    }
    if is_subprog_symbol(sym, ctx.text_idx) {
        if !sym.value.is_multiple_of(INSN_SIZE) || insn.imm % INSN_SIZE as i32 != 0 {
            return Err(format!(
                "bad subprogram address relocation against '{name}' at {}+{}",
                sym.value, insn.imm
            ));
        }
        return Ok(RelocKind::SubprogAddr { sym_off: sym.value });
    }
    record_data(ctx, sym, &name)
}

fn record_call(
    ctx: &RelocContext<'_, '_>,
    sym: &Symbol,
    name: &str,
    insn: RawInsn,
) -> Result<RelocKind, String> {
    if insn.src != PSEUDO_CALL {
        return Err(format!(
            "call to '{name}' is not a bpf-to-bpf call (src_reg {})",
            insn.src
        ));
    }
    if ctx.text_idx.is_none() || Some(sym.shndx as usize) != ctx.text_idx {
        let section = ctx
            .elf
            .symbol_section(sym)
            .map_or("<none>", |s| s.name.as_str());
        return Err(format!(
            "call to '{name}' in section '{section}'; subprograms must be in .text"
        ));
    }
    if !sym.value.is_multiple_of(INSN_SIZE) {
        return Err(format!(
            "call to '{name}' at unaligned offset {}",
            sym.value
        ));
    }
    Ok(RelocKind::Call { sym_off: sym.value })
}

/// libbpf's `sym_is_subprog`.
fn is_subprog_symbol(sym: &Symbol, text_idx: Option<usize>) -> bool {
    if Some(sym.shndx as usize) != text_idx {
        return false;
    }
    if sym.bind == STB_LOCAL && sym.kind == STT_SECTION {
        return true;
    }
    (sym.bind == STB_GLOBAL || sym.bind == STB_WEAK) && sym.kind == STT_FUNC
}

fn record_data(ctx: &RelocContext<'_, '_>, sym: &Symbol, name: &str) -> Result<RelocKind, String> {
    let sec_idx = sym.shndx as usize;
    let sec_name = &ctx.elf.sections[sec_idx].name;
    if ctx.maps.arena_section == Some(sec_idx) {
        let arena = ctx.maps.arena.as_ref().ok_or_else(|| {
            format!("'{name}' is an __arena variable, and the object declares no arena map")
        })?;
        return Ok(RelocKind::Data {
            map: arena.map,
            sym_off: sym.value,
        });
    }
    if ctx.map_sections.contains(&sec_idx) {
        let map = ctx.maps.declared_at(sec_idx, sym.value).ok_or_else(|| {
            format!(
                "no map at offset {} of section '{sec_name}' for '{name}'",
                sym.value
            )
        })?;
        return Ok(RelocKind::Map { map });
    }
    match ctx.maps.data_of(sec_idx) {
        Some(map) => Ok(RelocKind::Data {
            map,
            sym_off: sym.value,
        }),
        None => Err(format!(
            "'{name}' is in section '{sec_name}', which is neither maps nor global data"
        )),
    }
}

// ---------------------------------------------------------------------------------------------
// Linking.

/// One entry program, linked.
#[derive(Debug, Default)]
pub struct Linked {
    pub insns: Vec<RawInsn>,
    pub functions: Vec<(String, usize)>,
    pub func_info: Vec<(usize, TypeId)>,
    pub line_info: Vec<SourceLine>,
    pub warnings: Vec<String>,
    /// `ld_imm64`s naming a map (src 1 or 2) that no relocation filled: see
    /// [`crate::ProgramSpec::unrelocated_map_fds`].
    pub unrelocated_map_fds: Vec<usize>,
    /// See [`crate::ProgramSpec::poisoned_calls`].
    pub poisoned_calls: Vec<PoisonedCall>,
}

/// What linking reads.
pub struct LinkContext<'c> {
    pub file: &'c str,
    pub funcs: &'c [Func],
    pub code: &'c SectionCode,
    pub text_idx: Option<usize>,
    pub btf_ext: Option<&'c BtfExt>,
    pub maps: &'c MapTable,
    pub externs: &'c [Extern],
}

impl LinkContext<'_> {
    /// An executable section's name, from its functions (every such section has one).
    fn code_section_name(&self, sec: usize) -> &str {
        let func = self.funcs.iter().find(|f| f.sec_idx == sec);
        func.map_or(".text", |f| f.sec_name.as_str())
    }
}

/// Links the entry program `main`: appends the subprograms it reaches, fixes call offsets,
/// func/line info, then map and extern references.
pub fn link(ctx: &LinkContext<'_>, main: usize) -> Result<Linked, LoadError> {
    let mut linker = Linker {
        ctx,
        main,
        placed: vec![None; ctx.funcs.len()],
        relos: Vec::new(),
        func_info_ok: true,
        line_info_ok: true,
        out: Linked::default(),
    };
    linker.append(main);
    linker.reloc_code(main, 0)?;
    linker.relocate_data()?;
    // line_info stays in libbpf's order (each function's records as the file holds them, in
    // the order functions are appended): the kernel refuses records out of order, so sorting
    // them here would hide that.
    if ctx.funcs[main].naming == Naming::SectionWithoutSymbols {
        linker.drop_unfitting_func_info();
    }
    Ok(linker.out)
}

/// The `ld_imm64`s with a map's src (`BPF_PSEUDO_MAP_FD`, `BPF_PSEUDO_MAP_VALUE`) that no
/// relocation wrote: written by hand, their imm is a file descriptor as libbpf passes it on,
/// not the index of one of the object's maps.
fn unrelocated_map_refs(
    insns: &[RawInsn],
    relocated: &std::collections::BTreeSet<usize>,
) -> Vec<usize> {
    let mut out = Vec::new();
    let mut pc = 0;
    while pc < insns.len() {
        let insn = insns[pc];
        if insn.code == CODE_LD_IMM64 {
            if matches!(insn.src, PSEUDO_MAP_FD | PSEUDO_MAP_VALUE) && !relocated.contains(&pc) {
                out.push(pc);
            }
            pc += 2;
        } else {
            pc += 1;
        }
    }
    out
}

/// Where the kernel's `add_subprog_and_kfunc` starts subprograms in a final stream: 0 and
/// every target of a bpf-to-bpf call or function address.
fn subprogram_starts(insns: &[RawInsn]) -> std::collections::BTreeSet<i64> {
    let mut starts = std::collections::BTreeSet::from([0]);
    for (pc, insn) in insns.iter().enumerate() {
        let is_call = insn.code == CODE_CALL && insn.src == PSEUDO_CALL;
        let is_func_addr = insn.code == CODE_LD_IMM64 && insn.src == PSEUDO_FUNC;
        if is_call || is_func_addr {
            starts.insert(pc as i64 + 1 + i64::from(insn.imm));
        }
    }
    starts
}

struct Linker<'c, 'l> {
    ctx: &'l LinkContext<'c>,
    main: usize,
    /// Where each function starts in the output, once appended.
    placed: Vec<Option<usize>>,
    /// Relocations in output instruction indices.
    relos: Vec<(usize, RelocKind)>,
    func_info_ok: bool,
    line_info_ok: bool,
    out: Linked,
}

/// Guards against a malicious chain of subprograms exhausting the stack.
const MAX_CALL_DEPTH: usize = 4096;

impl Linker<'_, '_> {
    fn link_error(&self, insn: usize, message: String) -> LoadError {
        LoadError::Link {
            file: self.ctx.file.into(),
            program: self.ctx.funcs[self.main].name.clone(),
            insn,
            message,
        }
    }

    fn func_code(&self, f: usize) -> &[RawInsn] {
        let func = &self.ctx.funcs[f];
        &self.ctx.code[&func.sec_idx][func.insn_off..func.insn_off + func.insn_cnt]
    }

    /// libbpf's `bpf_object__append_subprog_code`.
    fn append(&mut self, f: usize) {
        let start = self.out.insns.len();
        self.placed[f] = Some(start);
        let code = self.func_code(f).to_vec();
        self.out.insns.extend(code);
        self.out
            .functions
            .push((self.ctx.funcs[f].name.clone(), start));
        let relos = self.ctx.funcs[f]
            .relos
            .iter()
            .map(|r| (start + r.insn, r.kind));
        self.relos.extend(relos);
        self.note_failed_core_relos(f, start);
    }

    /// The CO-RE relocations of function `f` (placed at `start`) that poisoned their
    /// instruction, which CO-RE patched in its section before linking.
    fn note_failed_core_relos(&mut self, f: usize, start: usize) {
        let func = &self.ctx.funcs[f];
        let Some(ext) = self.ctx.btf_ext else {
            return;
        };
        let Some(sec) = ext.core_relos.iter().find(|s| s.section == func.sec_name) else {
            return;
        };
        let span = func.insn_off..func.insn_off + func.insn_cnt;
        for relo in sec
            .records
            .iter()
            .filter(|r| span.contains(&(r.insn as usize)))
        {
            let at = start + relo.insn as usize - func.insn_off;
            if crate::core_relo::is_poisoned(&self.out.insns[at]) {
                self.out.poisoned_calls.push(PoisonedCall {
                    insn: at,
                    cause: PoisonCause::FailedCoreRelo(relo.clone()),
                });
            }
        }
    }

    /// libbpf's `bpf_object__reloc_code`.
    fn reloc_code(&mut self, f: usize, depth: usize) -> Result<(), LoadError> {
        let start = self.placed[f].expect("appended before relocation");
        if depth > MAX_CALL_DEPTH {
            return Err(self.link_error(start, "subprogram calls nest too deep".into()));
        }
        self.append_ext_info(f, start)?;
        let func = &self.ctx.funcs[f];
        for i in 0..func.insn_cnt {
            let at = start + i;
            let insn = self.out.insns[at];
            let is_call = insn.code == CODE_CALL && insn.src == PSEUDO_CALL;
            let is_func_addr = insn.code == CODE_LD_IMM64 && insn.src == PSEUDO_FUNC;
            if !is_call && !is_func_addr {
                continue;
            }
            let relo = func.relos.iter().find(|r| r.insn == i).map(|r| r.kind);
            let Some((sec, target)) = self.call_target(f, i, insn, relo)? else {
                continue;
            };
            let Some(sub) = func_at(self.ctx.funcs, sec, target) else {
                let name = self.ctx.code_section_name(sec);
                return Err(self.link_error(
                    at,
                    format!("call into {name} instruction {target}, where no function is"),
                ));
            };
            if self.placed[sub].is_none() {
                self.append(sub);
                self.reloc_code(sub, depth + 1)?;
            }
            let sub_start =
                self.placed[sub].expect("just appended") + self.offset_in_function(sub, target);
            let rel = sub_start as i64 - at as i64 - 1;
            self.out.insns[at].imm = i32::try_from(rel)
                .map_err(|_| self.link_error(at, "call offset overflows".into()))?;
        }
        Ok(())
    }

    /// Where a call lands inside the function `sub` that holds `target`. libbpf calls a
    /// function's start; a section taken whole keeps its inner calls where they point, as
    /// iproute2 loads the section unchanged.
    fn offset_in_function(&self, sub: usize, target: usize) -> usize {
        let func = &self.ctx.funcs[sub];
        match func.naming {
            Naming::SectionWithoutSymbols => target - func.insn_off,
            _ => 0,
        }
    }

    /// The section and instruction a call or callback address points to; `None` for kfunc
    /// calls. Relocated ones point into `.text` (checked when recorded); a call without a
    /// relocation is to a static function of the caller's own section. libbpf looks for that
    /// one in `.text` too, which is the caller's section whenever libbpf loads the object (it
    /// refuses static functions elsewhere, and makes no program of a section without one).
    fn call_target(
        &self,
        f: usize,
        i: usize,
        insn: RawInsn,
        relo: Option<RelocKind>,
    ) -> Result<Option<(usize, usize)>, LoadError> {
        let func = &self.ctx.funcs[f];
        let at = self.placed[f].unwrap_or(0) + i;
        let imm = i64::from(insn.imm);
        let text = self.ctx.text_idx.unwrap_or(0);
        let (sec, target) = match relo {
            Some(RelocKind::ExternCall { .. }) => return Ok(None),
            Some(RelocKind::Call { sym_off }) => {
                (text, sym_off as i64 / INSN_SIZE as i64 + imm + 1)
            }
            Some(RelocKind::SubprogAddr { sym_off }) => {
                (text, (sym_off as i64 + imm) / INSN_SIZE as i64)
            }
            Some(other) => {
                return Err(
                    self.link_error(at, format!("unexpected relocation {other:?} on a call"))
                );
            }
            None if insn.code == CODE_LD_IMM64 => {
                return Err(self.link_error(at, "subprogram address without a relocation".into()));
            }
            None => (func.sec_idx, (func.insn_off + i) as i64 + imm + 1),
        };
        let target = usize::try_from(target).map_err(|_| {
            self.link_error(
                at,
                format!("call target {target} is before the section start"),
            )
        })?;
        Ok(Some((sec, target)))
    }

    /// libbpf's `reloc_prog_func_and_line_info` for one function appended at `start`.
    fn append_ext_info(&mut self, f: usize, start: usize) -> Result<(), LoadError> {
        let Some(ext) = self.ctx.btf_ext else {
            return Ok(());
        };
        let func = &self.ctx.funcs[f];
        let is_main = f == self.main;
        if self.func_info_ok {
            let records = records_of(&ext.func_info, func, |r| r.insn);
            match records {
                Some(recs) => self.out.func_info.extend(
                    recs.iter()
                        .map(|r| (placed_insn(r.insn, func.insn_off, start), r.type_id)),
                ),
                None if is_main => {
                    self.func_info_ok = false;
                    self.out.warnings.push(format!(
                        "prog '{}': no .BTF.ext func_info; skipping it",
                        func.name
                    ));
                }
                None => {
                    return Err(self.link_error(
                        start,
                        format!("subprogram '{}' has no .BTF.ext func_info", func.name),
                    ));
                }
            }
        }
        if self.line_info_ok {
            let records = records_of(&ext.line_info, func, |r| r.insn);
            match records {
                Some(recs) => self.out.line_info.extend(recs.iter().map(|r| SourceLine {
                    insn: placed_insn(r.insn, func.insn_off, start),
                    file_name: r.file_name.clone(),
                    line_text: r.line_text.clone(),
                    line: r.line,
                    column: r.column,
                    file_name_off: r.file_name_off,
                    line_off: r.line_off,
                })),
                None if is_main => {
                    self.line_info_ok = false;
                    self.out.warnings.push(format!(
                        "prog '{}': no .BTF.ext line_info; skipping it",
                        func.name
                    ));
                }
                None => {
                    return Err(self.link_error(
                        start,
                        format!("subprogram '{}' has no .BTF.ext line_info", func.name),
                    ));
                }
            }
        }
        Ok(())
    }

    /// A section taken whole may hold several functions that no call makes subprograms, and
    /// then func_info has records where the kernel sees no subprogram, which it refuses before
    /// reading a single instruction. iproute2 loads such a section without func_info; so does
    /// bpfemu, saying so. (line_info is kept: it only names source lines.)
    fn drop_unfitting_func_info(&mut self) {
        let infos: std::collections::BTreeSet<i64> = self
            .out
            .func_info
            .iter()
            .map(|&(at, _)| at as i64)
            .collect();
        if self.out.func_info.is_empty() || infos == subprogram_starts(&self.out.insns) {
            return;
        }
        self.out.warnings.push(format!(
            "prog '{}': func_info names {} functions but the section's calls start {} \
             subprogram(s); loaded without func_info, as iproute2 loads a section",
            self.ctx.funcs[self.main].name,
            infos.len(),
            subprogram_starts(&self.out.insns).len()
        ));
        self.out.func_info.clear();
    }

    /// libbpf's `bpf_object__relocate_data`.
    fn relocate_data(&mut self) -> Result<(), LoadError> {
        let relos = std::mem::take(&mut self.relos);
        let relocated: std::collections::BTreeSet<usize> = relos.iter().map(|r| r.0).collect();
        for (at, kind) in relos {
            self.relocate_one(at, kind)?;
        }
        self.out.unrelocated_map_fds = unrelocated_map_refs(&self.out.insns, &relocated);
        Ok(())
    }

    fn relocate_one(&mut self, at: usize, kind: RelocKind) -> Result<(), LoadError> {
        let wide = matches!(kind, RelocKind::Data { .. } | RelocKind::ExternLd { .. });
        if wide && at + 1 >= self.out.insns.len() {
            return Err(self.link_error(at, "ld_imm64 is cut off by the program end".into()));
        }
        let insns = &mut self.out.insns;
        match kind {
            RelocKind::Map { map } => {
                insns[at].src = PSEUDO_MAP_FD;
                insns[at].imm = map as i32;
            }
            RelocKind::Data { map, sym_off } => {
                // Arena globals start where libbpf places them in the arena.
                let arena = self.ctx.maps.arena.as_ref().filter(|a| a.map == map);
                let base = arena.map_or(0, |a| a.offset);
                let off = sym_off.wrapping_add(base) as i32;
                insns[at + 1].imm = insns[at].imm.wrapping_add(off);
                insns[at].src = PSEUDO_MAP_VALUE;
                insns[at].imm = map as i32;
            }
            RelocKind::ExternLd { ext } => {
                let kconfig = self.ctx.maps.kconfig();
                let e = &self.ctx.externs[ext];
                match (&e.kind, kconfig) {
                    (ExternKind::Kconfig { data_off, .. }, Some(map)) => {
                        insns[at].src = PSEUDO_MAP_VALUE;
                        insns[at].imm = map as i32;
                        insns[at + 1].imm = *data_off as i32;
                    }
                    (
                        ExternKind::Ksym {
                            type_id,
                            target_id: Some(id),
                            ..
                        },
                        _,
                    ) if *type_id != 0 => {
                        insns[at].src = PSEUDO_BTF_ID;
                        insns[at].imm = *id as i32;
                        insns[at + 1].imm = 0;
                    }
                    (ExternKind::Ksym { .. }, _) => {
                        insns[at].imm = 0;
                        insns[at + 1].imm = 0;
                    }
                    (ExternKind::Kconfig { .. }, None) => {
                        return Err(self.link_error(
                            at,
                            format!("kconfig extern '{}' without a .kconfig map", e.name),
                        ));
                    }
                }
            }
            RelocKind::ExternCall { ext } => {
                let e = &self.ctx.externs[ext];
                match e.kind {
                    ExternKind::Ksym {
                        target_id: Some(id),
                        ..
                    } => {
                        insns[at].src = PSEUDO_KFUNC_CALL;
                        insns[at].imm = id as i32;
                        insns[at].off = 0;
                    }
                    _ => {
                        insns[at] =
                            RawInsn::new(CODE_CALL, 0, 0, 0, POISON_CALL_KFUNC_BASE + ext as i32);
                        self.out.poisoned_calls.push(PoisonedCall {
                            insn: at,
                            cause: PoisonCause::UnresolvedKfunc(e.name.clone()),
                        });
                    }
                }
            }
            RelocKind::Call { .. } | RelocKind::SubprogAddr { .. } => {}
        }
        Ok(())
    }
}

/// Where a record for section instruction `insn` of a function that starts at `func_start` in
/// its section lands once the function is placed at `placed`: libbpf adds the difference to
/// the record's u32, so a record before the function wraps around (and the kernel refuses it).
fn placed_insn(insn: u32, func_start: usize, placed: usize) -> usize {
    let adjust = (placed as u32).wrapping_sub(func_start as u32);
    insn.wrapping_add(adjust) as usize
}

/// The records of `func`'s section that fall inside it (libbpf's `adjust_prog_btf_ext_info`);
/// `None` when there are none.
fn records_of<'r, T>(
    sections: &'r [SectionRecords<T>],
    func: &Func,
    insn_of: impl Fn(&T) -> u32,
) -> Option<&'r [T]> {
    // libbpf's `adjust_prog_btf_ext_info`: from the first record inside the function to the
    // last one before the first record past its end, as one contiguous run (records before
    // the function that sit inside the run are kept too).
    let sec = sections.iter().find(|s| s.section == func.sec_name)?;
    let end = func.insn_off + func.insn_cnt;
    let mut run: Option<(usize, usize)> = None;
    for (i, r) in sec.records.iter().enumerate() {
        let insn = insn_of(r) as usize;
        if insn < func.insn_off {
            continue;
        }
        if insn >= end {
            break;
        }
        run = Some((run.map_or(i, |(first, _)| first), i));
    }
    let (first, last) = run?;
    Some(&sec.records[first..=last])
}
