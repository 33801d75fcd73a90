//! The load pipeline, in libbpf's order: open (sections, BTF, functions, externs, maps), collect
//! relocations, size maps, resolve externs, CO-RE, then link each entry program
//! (`bpf_object_open` + `bpf_object__relocate`, without the syscalls).

use crate::LoadOptions;
use crate::btf::{Btf, BtfExt};
use crate::elf::{ElfObject, SHT_LLVM_ADDRSIG, SHT_REL, SHT_STRTAB};
use crate::error::LoadError;
use crate::externs::{self, Extern, TargetBtf};
use crate::maps::{self, MapTable};
use crate::object::{Naming, Object, ProgramSpec};
use crate::reloc::{self, Func, LinkContext, RelocContext, SectionCode};
use crate::section::{self, Match};
use bpfemu_isa::RawInsn;

/// Where the special sections are (libbpf's `bpf_object__elf_collect`).
#[derive(Debug, Default)]
struct Layout {
    license: String,
    kern_version: Option<u32>,
    legacy_maps: Option<usize>,
    btf_maps: Option<usize>,
    btf: Option<usize>,
    btf_ext: Option<usize>,
    text: Option<usize>,
}

pub fn load(file: &str, data: &[u8], opts: &LoadOptions) -> Result<Object, LoadError> {
    let elf = ElfObject::parse(file, data)?;
    let layout = scan(&elf)?;
    let mut warnings = Vec::new();
    let mut btf = parse_btf(&elf, &layout, &mut warnings)?;
    let btf_ext = parse_btf_ext(&elf, &layout, btf.as_ref(), &mut warnings)?;

    let mut funcs = reloc::collect_functions(&elf, layout.text)?;
    warnings.extend(convention_warnings(&funcs, layout.text));
    let mut code = section_code(&elf)?;
    let mut externs = externs::collect(&elf, btf.as_ref())?;
    if let Some(btf) = btf.as_mut() {
        crate::btf_fixup::fixup_datasecs(btf, &elf, &externs)?;
    }
    let mut table = build_maps(&elf, &layout, btf.as_ref(), &externs, &mut warnings)?;
    let cilium_convention = funcs.iter().any(|f| f.naming == Naming::StaticFunction);
    warnings.extend(maps::check_pinning(
        file,
        &mut table.specs,
        cilium_convention,
    )?);

    collect_all_relos(
        &elf,
        &layout,
        btf.as_ref(),
        &externs,
        &mut table,
        &mut code,
        &mut funcs,
    )?;
    let possible_cpus = possible_cpus;
    warnings.extend(maps::apply_map_sizes(
        file,
        &mut table.specs,
        &opts.map_sizes,
        possible_cpus,
    )?);
    maps::check_storage_btf(file, &table.specs)?;

    let mut target = TargetBtf::new(file, &opts.kernel);
    warnings.extend(externs::resolve(
        file,
        &mut externs,
        &mut table,
        opts.kconfig.as_deref(),
        btf.as_ref(),
        &mut target,
    )?);
    if let (Some(local), Some(ext)) = (btf.as_ref(), btf_ext.as_ref()) {
        apply_core(&elf, local, ext, &mut code, &mut target)?;
    }

    let ctx = LinkContext {
        file,
        funcs: &funcs,
        code: &code,
        text_idx: layout.text,
        btf_ext: btf_ext.as_ref(),
        maps: &table,
        externs: &externs,
    };
    let programs = link_programs(&ctx, opts.untyped_prog_type, &mut warnings)?;
    crate::iproute2::fill_tail_calls(&mut table.specs, &programs);
    Ok(Object {
        name: file.into(),
        programs,
        maps: table.specs,
        arena: table.arena,
        btf,
        btf_ext,
        license: layout.license,
        kern_version: layout.kern_version,
        warnings,
        kernel: opts.kernel.clone(),
    })
}

/// Programs made by a convention other than libbpf's, one warning per convention: which
/// loader they follow, and that libbpf would not load them so.
fn convention_warnings(funcs: &[reloc::Func], text_idx: Option<usize>) -> Vec<String> {
    let named = |naming: Naming| -> Vec<String> {
        let entries = funcs.iter().filter(|f| Some(f.sec_idx) != text_idx);
        let of_kind = entries.filter(|f| f.naming == naming);
        of_kind.map(|f| format!("'{}'", f.name)).collect()
    };
    let mut warnings = Vec::new();
    let sections = named(Naming::SectionWithoutSymbols);
    if !sections.is_empty() {
        let (noun, verb) = if sections.len() == 1 {
            ("section", "holds")
        } else {
            ("sections", "hold")
        };
        warnings.push(format!(
            "{noun} {} {verb} code but no function symbol: each is one program named by its \
             section, as iproute2 loads it (libbpf makes no program of such code; was the \
             object stripped, or built by an old compiler?)",
            sections.join(", ")
        ));
    }
    let statics = named(Naming::StaticFunction);
    if !statics.is_empty() {
        warnings.push(format!(
            "programs {} are static functions: loaded as cilium/ebpf loads them (libbpf 1.7 \
             refuses the object: program is static and not supported)",
            statics.join(", ")
        ));
    }
    warnings
}

/// libbpf's `ignore_elf_section`.
fn ignored(section: &crate::elf::Section<'_>) -> bool {
    let name = section.name.as_str();
    if section.sh_type == SHT_STRTAB || section.sh_type == SHT_LLVM_ADDRSIG {
        return true;
    }
    if name.starts_with(".debug_") {
        return true;
    }
    match name.strip_prefix(".rel") {
        Some(rest) => rest.starts_with(".debug_") || rest == ".BTF" || rest == ".BTF.ext",
        None => false,
    }
}

fn scan(elf: &ElfObject<'_>) -> Result<Layout, LoadError> {
    let mut layout = Layout::default();
    for s in elf.sections.iter().skip(1).filter(|s| !ignored(s)) {
        match s.name.as_str() {
            // libbpf keeps the first 63 bytes (`char license[64]`) and hands those over.
            "license" => layout.license = c_string(&s.data[..s.data.len().min(63)]),
            "version" => layout.kern_version = Some(version(elf, s.data)?),
            "maps" => layout.legacy_maps = Some(s.index),
            ".maps" => layout.btf_maps = Some(s.index),
            ".BTF" => layout.btf = Some(s.index),
            ".BTF.ext" => layout.btf_ext = Some(s.index),
            ".text" if s.is_exec() && !s.data.is_empty() => layout.text = Some(s.index),
            _ => {}
        }
    }
    Ok(layout)
}

fn c_string(data: &[u8]) -> String {
    let end = data.iter().position(|&b| b == 0).unwrap_or(data.len());
    String::from_utf8_lossy(&data[..end]).into_owned()
}

fn version(elf: &ElfObject<'_>, data: &[u8]) -> Result<u32, LoadError> {
    let bytes: [u8; 4] = data.try_into().map_err(|_| LoadError::Elf {
        file: elf.file.clone(),
        message: format!("section 'version' is {} bytes, not 4", data.len()),
    })?;
    Ok(u32::from_le_bytes(bytes))
}

/// The object's `.BTF`, as libbpf 1.7 opens it: one it cannot parse fails the open when the
/// object needs BTF (`libbpf_needs_btf`: BTF-defined maps or externs; "BTF is required, but is
/// missing or corrupted"), and is otherwise dropped with a warning, `.BTF.ext` with it.
fn parse_btf(
    elf: &ElfObject<'_>,
    layout: &Layout,
    warnings: &mut Vec<String>,
) -> Result<Option<Btf>, LoadError> {
    let Some(idx) = layout.btf else {
        return Ok(None);
    };
    let error = match Btf::parse(elf.sections[idx].data) {
        Ok(btf) => return Ok(Some(btf)),
        Err(e) => e,
    };
    // The parser refuses what libbpf's `btf_parse` refuses (layout, strings, kinds, type
    // ids) and no more: what only the kernel refuses is `Btf::kernel_refusal`'s.
    if needs_btf(elf, layout) {
        return Err(LoadError::Btf {
            file: elf.file.clone(),
            section: ".BTF",
            source: Box::new(error),
        });
    }
    warnings.push(format!(
        "section '.BTF': {error}; ignored, as libbpf ignores it when nothing needs BTF \
         (programs and maps load without BTF)"
    ));
    Ok(None)
}

/// libbpf's `libbpf_needs_btf` for an XDP object: BTF-defined maps or externs.
fn needs_btf(elf: &ElfObject<'_>, layout: &Layout) -> bool {
    layout.btf_maps.is_some() || elf.symbols.iter().any(|s| s.is_extern())
}

/// The object's `.BTF.ext`, as libbpf 1.7 opens it: one it cannot parse is dropped with a
/// warning (the programs then load without func_info and line_info) unless the object needs
/// BTF (`libbpf_needs_btf`: BTF-defined maps or externs), which fails the open.
fn parse_btf_ext(
    elf: &ElfObject<'_>,
    layout: &Layout,
    btf: Option<&Btf>,
    warnings: &mut Vec<String>,
) -> Result<Option<BtfExt>, LoadError> {
    let (Some(idx), Some(btf)) = (layout.btf_ext, btf) else {
        return Ok(None);
    };
    let error = match BtfExt::parse(elf.sections[idx].data, btf) {
        Ok(ext) => return Ok(Some(ext)),
        Err(e) => e,
    };
    if needs_btf(elf, layout) {
        return Err(LoadError::Btf {
            file: elf.file.clone(),
            section: ".BTF.ext",
            source: Box::new(error),
        });
    }
    warnings.push(format!(
        "section '.BTF.ext': {error}; ignored, as libbpf ignores it (programs load without \
         func_info and line_info)"
    ));
    Ok(None)
}

fn section_code(elf: &ElfObject<'_>) -> Result<SectionCode, LoadError> {
    let mut code = SectionCode::new();
    for s in elf
        .sections
        .iter()
        .filter(|s| s.is_exec() && !s.data.is_empty())
    {
        let insns = RawInsn::parse_all(s.data).ok_or_else(|| LoadError::Program {
            file: elf.file.clone(),
            section: s.name.clone(),
            program: "*".into(),
            message: format!("section size {} is not a multiple of 8", s.data.len()),
        })?;
        code.insert(s.index, insns);
    }
    Ok(code)
}

/// libbpf's `bpf_object__init_maps` order (legacy maps first, as libbpf 0.x), then `.kconfig`.
fn build_maps(
    elf: &ElfObject<'_>,
    layout: &Layout,
    btf: Option<&Btf>,
    externs: &[Extern],
    warnings: &mut Vec<String>,
) -> Result<MapTable, LoadError> {
    let mut table = MapTable::default();
    let obj_name = maps::object_name(&elf.file);
    if let Some(idx) = layout.legacy_maps {
        maps::legacy_maps(elf, &elf.sections[idx], btf, &mut table)?;
        let iproute2 = table
            .specs
            .iter()
            .any(|m| matches!(m.origin, crate::object::MapOrigin::Iproute2(_)));
        warnings.push(if iproute2 {
            "iproute2 map definitions (struct bpf_elf_map) in section 'maps': loaded as iproute2 \
             loads them; libbpf 1.x refuses them"
                .into()
        } else {
            "legacy map definitions in section 'maps': libbpf 1.x refuses them; use BTF-defined \
             maps in '.maps'"
                .into()
        });
    }
    if let Some(idx) = layout.btf_maps {
        maps::btf_maps(elf, &elf.sections[idx], btf, &mut table)?;
    }
    crate::arena::find(elf, layout.btf_maps.is_some(), &mut table)?;
    maps::data_maps(elf, &obj_name, btf, &mut table)?;
    externs::kconfig_map(&obj_name, externs, btf, &mut table, elf.symtab_index);
    Ok(table)
}

/// libbpf's `bpf_object__collect_relos`: program sections' relocations, then `.maps` slots.
fn collect_all_relos(
    elf: &ElfObject<'_>,
    layout: &Layout,
    btf: Option<&Btf>,
    externs: &[Extern],
    table: &mut MapTable,
    code: &mut SectionCode,
    funcs: &mut [Func],
) -> Result<(), LoadError> {
    let rel_sections = || {
        elf.sections
            .iter()
            .filter(|s| s.sh_type == SHT_REL && !ignored(s))
    };
    let ctx = RelocContext {
        elf,
        text_idx: layout.text,
        maps: table,
        externs,
        map_sections: layout
            .legacy_maps
            .into_iter()
            .chain(layout.btf_maps)
            .collect(),
    };
    for rel in rel_sections() {
        if code.contains_key(&(rel.info as usize)) {
            reloc::collect_relos(&ctx, rel, code, funcs)?;
        }
    }
    for f in funcs.iter_mut() {
        f.relos.sort_by_key(|r| r.insn);
    }
    let entries: Vec<_> = funcs
        .iter()
        .filter(|f| Some(f.sec_idx) != layout.text)
        .map(|f| (f.name.clone(), f.sec_idx, (f.insn_off * 8) as u64))
        .collect();
    for rel in rel_sections() {
        if layout.btf_maps == Some(rel.info as usize)
            && let Some(btf) = btf
        {
            maps::collect_map_slots(elf, rel, btf, table, &entries)?;
        }
    }
    Ok(())
}

/// The number of possible CPUs (`/sys/devices/system/cpu/possible`, e.g. `0-3`), as libbpf
/// counts them for perf event arrays.
fn possible_cpus() -> u32 {
    let text = std::fs::read_to_string("/sys/devices/system/cpu/possible").unwrap_or_default();
    let count: u32 = text
        .trim()
        .split(',')
        .filter_map(|range| {
            let (lo, hi) = range.split_once('-').unwrap_or((range, range));
            Some(hi.parse::<u32>().ok()? - lo.parse::<u32>().ok()? + 1)
        })
        .sum();
    count.max(1)
}

/// CO-RE per ELF section, before linking, so every copy of a subprogram gets the same fix.
fn apply_core(
    elf: &ElfObject<'_>,
    local: &Btf,
    ext: &BtfExt,
    code: &mut SectionCode,
    target: &mut TargetBtf<'_>,
) -> Result<(), LoadError> {
    for sec in ext.core_relos.iter().filter(|s| !s.records.is_empty()) {
        let Some(idx) = elf.sections.iter().position(|s| s.name == sec.section) else {
            continue;
        };
        let Some(insns) = code.get_mut(&idx) else {
            continue;
        };
        let target_btf = target.get()?;
        crate::core_relo::relocate(insns, &sec.records, local, target_btf).map_err(|e| {
            LoadError::Core {
                file: elf.file.clone(),
                section: sec.section.clone(),
                source: Box::new(e),
            }
        })?;
    }
    Ok(())
}

fn link_programs(
    ctx: &LinkContext<'_>,
    untyped_prog_type: Option<u32>,
    warnings: &mut Vec<String>,
) -> Result<Vec<ProgramSpec>, LoadError> {
    let mut programs = Vec::new();
    for (i, func) in ctx.funcs.iter().enumerate() {
        if Some(func.sec_idx) == ctx.text_idx {
            continue;
        }
        let section = func
            .sec_name
            .strip_prefix('?')
            .unwrap_or(&func.sec_name)
            .to_string();
        let kind = match section::classify(&func.sec_name) {
            Some(Match::Exact(k)) => Some(k),
            Some(Match::Legacy(k, why)) => {
                if !warnings.contains(&why) {
                    warnings.push(why);
                }
                Some(k)
            }
            None => match untyped_prog_type {
                Some(prog_type) => {
                    warnings.push(format!(
                        "prog '{}': section '{}' names no program type; loaded as {}, the \
                         type the command gives it (as `ip link set dev DEV xdp obj FILE sec \
                         {}` does)",
                        func.name,
                        func.sec_name,
                        bpfemu_isa::uapi::prog_type_name(prog_type).unwrap_or("?"),
                        func.sec_name
                    ));
                    Some(section::SectionKind {
                        prog_type,
                        expected_attach_type: None,
                        prog_flags: 0,
                    })
                }
                None => {
                    warnings.push(format!(
                        "prog '{}': unrecognized section name '{}'; program type left \
                         unspecified",
                        func.name, func.sec_name
                    ));
                    None
                }
            },
        };
        let linked = reloc::link(ctx, i)?;
        warnings.extend(linked.warnings);
        programs.push(ProgramSpec {
            name: func.name.clone(),
            section,
            prog_type: kind.map_or(0, |k| k.prog_type),
            expected_attach_type: kind.and_then(|k| k.expected_attach_type),
            prog_flags: kind.map_or(0, |k| k.prog_flags),
            insns: with_exit_offsets_cleared(linked.insns),
            functions: linked.functions,
            func_info: linked.func_info,
            line_info: linked.line_info,
            naming: func.naming,
            unrelocated_map_fds: linked.unrelocated_map_fds,
            poisoned_calls: linked.poisoned_calls,
        });
    }
    Ok(programs)
}

/// An `exit`'s `off` field is not looked at by 6.18: its verifier's reserved-field check names
/// dst, src and imm only, and its interpreter and JIT ignore it. Cleared here, an exit with a
/// stray offset loads (as in the kernel) and every later stage decodes one kind of exit.
fn with_exit_offsets_cleared(mut insns: Vec<RawInsn>) -> Vec<RawInsn> {
    const JMP_EXIT: u8 = 0x95;
    let mut pc = 0;
    while pc < insns.len() {
        let is_ld_imm64 = insns[pc].code == 0x18;
        if insns[pc].code == JMP_EXIT {
            insns[pc].off = 0;
        }
        pc += if is_ld_imm64 { 2 } else { 1 };
    }
    insns
}
