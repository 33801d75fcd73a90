//! The BTF fix-ups libbpf makes before using an object's BTF (`btf_fixup_datasec`, and the
//! `.kconfig` layout of `bpf_object__collect_externs`): clang leaves DATASEC sizes and variable
//! offsets at 0, so they come from the ELF sections and symbols; hidden globals become static;
//! variables are sorted by offset. Map order, map lookup by offset and `BPF_F_MMAPABLE` all
//! depend on this, so it runs before maps are built.

use crate::btf::{Btf, BtfKind, Linkage};
use crate::elf::{ElfObject, STB_GLOBAL, STB_WEAK, STT_OBJECT, STV_HIDDEN, STV_INTERNAL, Symbol};
use crate::error::LoadError;
use crate::externs::{Extern, ExternKind};

/// Fixes every DATASEC of `btf` against the ELF.
pub fn fixup_datasecs(
    btf: &mut Btf,
    elf: &ElfObject<'_>,
    externs: &[Extern],
) -> Result<(), LoadError> {
    for id in 1..btf.types.len() {
        let name = btf.types[id].name.clone();
        if !matches!(btf.types[id].kind, BtfKind::DataSec { .. }) {
            continue;
        }
        match name.as_str() {
            ".kconfig" => layout_kconfig(btf, id, externs),
            ".ksyms" => layout_ksyms(btf, id),
            _ => fixup_one(btf, id, &name, elf)?,
        }
        if let BtfKind::DataSec { vars, .. } = &mut btf.types[id].kind {
            vars.sort_by_key(|v| v.offset);
        }
    }
    Ok(())
}

/// The `.ksyms` DATASEC as `bpf_object__collect_externs` leaves it for the kernel, which
/// accepts no extern in it: every entry becomes a 4-byte global variable at its index times 4;
/// a kfunc's entry becomes the shared variable `dummy_ksym` (added once), the kfunc itself a
/// global function whose unnamed parameters take that name (the kernel wants them named);
/// a kernel variable's entry keeps its VAR, made global and of a 4-byte int type.
fn layout_ksyms(btf: &mut Btf, id: usize) {
    let BtfKind::DataSec { vars, .. } = &btf.types[id].kind else {
        return;
    };
    let vars = vars.clone();
    let is_func = |btf: &Btf, ty: u32| {
        matches!(
            btf.types.get(ty as usize).map(|t| &t.kind),
            Some(BtfKind::Func { .. })
        )
    };
    let int_id = btf
        .types
        .iter()
        .position(|t| matches!(t.kind, BtfKind::Int { bits: 32, .. }))
        .unwrap_or(0) as u32;
    let dummy = vars.iter().any(|v| is_func(btf, v.ty)).then(|| {
        btf.types.push(crate::btf::BtfType {
            name: "dummy_ksym".to_owned(),
            kind: BtfKind::Var {
                ty: int_id,
                linkage: Linkage::Global,
            },
        });
        (btf.types.len() - 1) as u32
    });
    let mut laid_out = Vec::with_capacity(vars.len());
    for (i, v) in vars.iter().enumerate() {
        let mut v = *v;
        // (Malformed type ids were refused when the BTF was parsed; `get` keeps this total.)
        let kind = btf.types.get(v.ty as usize).map(|t| t.kind.clone());
        match kind {
            Some(BtfKind::Func { proto, .. }) => {
                if let Some(BtfKind::FuncProto { params, .. }) =
                    btf.types.get_mut(proto as usize).map(|t| &mut t.kind)
                {
                    for p in params.iter_mut().filter(|p| p.ty != 0 && p.name.is_empty()) {
                        p.name = "dummy_ksym".to_owned();
                    }
                }
                if let BtfKind::Func { linkage, .. } = &mut btf.types[v.ty as usize].kind {
                    *linkage = Linkage::Global;
                }
                v.ty = dummy.unwrap_or(v.ty);
            }
            Some(BtfKind::Var { .. }) => {
                btf.types[v.ty as usize].kind = BtfKind::Var {
                    ty: int_id,
                    linkage: Linkage::Global,
                };
            }
            _ => {}
        }
        v.offset = (i * 4) as u32;
        v.size = 4;
        laid_out.push(v);
    }
    if let BtfKind::DataSec { size, vars } = &mut btf.types[id].kind {
        *size = (laid_out.len() * 4) as u32;
        *vars = laid_out;
    }
}

fn fixup_one(btf: &mut Btf, id: usize, name: &str, elf: &ElfObject<'_>) -> Result<(), LoadError> {
    let BtfKind::DataSec { size, vars } = &btf.types[id].kind else {
        return Ok(());
    };
    let mut fix_offsets = false;
    let mut new_size = *size;
    if new_size == 0 {
        let section_size = elf
            .sections
            .iter()
            .find(|s| s.name == name)
            .map_or(0, |s| s.size);
        new_size = u32::try_from(section_size).unwrap_or(0);
        if new_size == 0 {
            return Err(LoadError::Elf {
                file: elf.file.clone(),
                message: format!("BTF DATASEC '{name}' has no ELF section to take its size from"),
            });
        }
        fix_offsets = true;
    }
    let mut updates = Vec::new();
    for (i, v) in vars.iter().enumerate() {
        let var = btf.types.get(v.ty as usize);
        let Some(BtfKind::Var { linkage, .. }) = var.map(|t| &t.kind) else {
            return Err(LoadError::Elf {
                file: elf.file.clone(),
                message: format!("BTF DATASEC '{name}' holds a non-VAR type [{}]", v.ty),
            });
        };
        if matches!(linkage, Linkage::Static | Linkage::Extern) {
            continue;
        }
        let var_name = var.map_or("", |t| t.name.as_str());
        let sym = variable_symbol(elf, var_name).ok_or_else(|| LoadError::Elf {
            file: elf.file.clone(),
            message: format!("BTF DATASEC '{name}': no ELF symbol for variable '{var_name}'"),
        })?;
        updates.push((
            i,
            v.ty,
            sym.value,
            matches!(sym.visibility, STV_HIDDEN | STV_INTERNAL),
        ));
    }
    for (i, var_id, offset, hidden) in updates {
        if let BtfKind::DataSec { size, vars } = &mut btf.types[id].kind {
            *size = new_size;
            if fix_offsets {
                vars[i].offset = u32::try_from(offset).unwrap_or(u32::MAX);
            }
        }
        if hidden && let BtfKind::Var { linkage, .. } = &mut btf.types[var_id as usize].kind {
            *linkage = Linkage::Static;
        }
    }
    if let BtfKind::DataSec { size, .. } = &mut btf.types[id].kind {
        *size = new_size;
    }
    Ok(())
}

/// libbpf's `find_elf_var_sym`: a global or weak object symbol of that name.
fn variable_symbol<'e>(elf: &'e ElfObject<'_>, name: &str) -> Option<&'e Symbol> {
    elf.symbols.iter().find(|s| {
        s.kind == STT_OBJECT && (s.bind == STB_GLOBAL || s.bind == STB_WEAK) && s.name == name
    })
}

/// `.kconfig` variables get the offsets the loader laid out, and become allocated globals.
fn layout_kconfig(btf: &mut Btf, id: usize, externs: &[Extern]) {
    let BtfKind::DataSec { vars, .. } = &btf.types[id].kind else {
        return;
    };
    let mut end = 0;
    let mut updates = Vec::new();
    for (i, v) in vars.iter().enumerate() {
        let name = btf.types.get(v.ty as usize).map_or("", |t| t.name.as_str());
        if let Some(ExternKind::Kconfig { data_off, size, .. }) =
            externs.iter().find(|e| e.name == name).map(|e| &e.kind)
        {
            updates.push((i, v.ty, *data_off));
            end = end.max(data_off + size);
        }
    }
    for (i, var_id, offset) in updates {
        if let BtfKind::DataSec { vars, .. } = &mut btf.types[id].kind {
            vars[i].offset = offset;
        }
        if let BtfKind::Var { linkage, .. } = &mut btf.types[var_id as usize].kind {
            *linkage = Linkage::Global;
        }
    }
    if let BtfKind::DataSec { size, .. } = &mut btf.types[id].kind {
        *size = end;
    }
}
