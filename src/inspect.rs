//! `bpfemu inspect`: what the loader made of an object, for a person (text) or a script
//! (`--json`): programs, maps with their BTF key/value types, global data, and every reference
//! relocation left in the code (maps, global data, subprograms, kfuncs, ksyms).

use bpfemu_isa::uapi::{attach_type_name, map_type_name, map_type_short_name, prog_type_name};
use bpfemu_loader::btf::{Btf, TypeId};
use bpfemu_loader::{MapOrigin, MapSpec, Object, ProgramSpec};
use serde_json::{Value, json};
use std::fmt::Write;

/// One reference in a program's final instruction stream.
struct Reference {
    insn: usize,
    what: String,
}

/// The JSON document.
pub fn to_json(obj: &Object) -> Value {
    json!({
        "file": obj.name,
        "license": obj.license,
        "kern_version": obj.kern_version,
        "programs": obj.programs.iter().map(|p| program_json(obj, p)).collect::<Vec<_>>(),
        "maps": obj.maps.iter().map(|m| map_json(obj.btf.as_ref(), m)).collect::<Vec<_>>(),
        "data_sections": data_sections(obj).iter().map(|(section, size, map)| {
            json!({ "section": section, "size": size, "map": map })
        }).collect::<Vec<_>>(),
        "warnings": obj.warnings,
    })
}

fn program_json(obj: &Object, p: &ProgramSpec) -> Value {
    json!({
        "name": p.name,
        "section": p.section,
        "type": prog_type_name(p.prog_type),
        "type_id": p.prog_type,
        "expected_attach_type": p.expected_attach_type.and_then(attach_type_name),
        "prog_flags": p.prog_flags,
        "naming": p.naming.key(),
        "naming_convention": p.naming.describe(),
        "insns": p.insns.len(),
        "functions": p.functions.iter().map(|(n, at)| json!({ "name": n, "insn": at })).collect::<Vec<_>>(),
        "func_info": p.func_info.len(),
        "line_info": p.line_info.len(),
        "relocations": references(obj, p).iter().map(|r| json!({ "insn": r.insn, "target": r.what })).collect::<Vec<_>>(),
    })
}

fn map_json(btf: Option<&Btf>, m: &MapSpec) -> Value {
    json!({
        "name": m.name,
        "type": map_type_name(m.map_type),
        "type_short": map_type_short_name(m.map_type),
        "type_id": m.map_type,
        "key_size": m.key_size,
        "value_size": m.value_size,
        "key_type": m.key_type.map(|t| type_name(btf, t)),
        "value_type": m.value_type.map(|t| type_name(btf, t)),
        "max_entries": m.max_entries,
        "map_flags": m.map_flags,
        "numa_node": m.numa_node,
        "pinning": m.pinning,
        "map_extra": m.map_extra,
        "origin": origin(&m.origin),
        "inner": m.inner.as_deref().map(|i| map_json(btf, i)),
        "init_slots": m.init_slots.iter().map(|(i, n)| json!({ "index": i, "target": n })).collect::<Vec<_>>(),
        "iproute2": match m.origin {
            MapOrigin::Iproute2(f) => json!({
                "id": f.id,
                "pinning": f.pinning,
                "pinning_meaning": bpfemu_loader::iproute2::pinning_name(f.pinning),
                "inner_id": f.inner_id,
                "inner_idx": f.inner_idx,
                "pinned": false,
            }),
            _ => Value::Null,
        },
    })
}

/// The human-readable report.
pub fn to_text(obj: &Object) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "file: {}", obj.name);
    let _ = writeln!(out, "license: {}", obj.license);
    if let Some(v) = obj.kern_version {
        let _ = writeln!(out, "kern_version: {v:#x}");
    }
    let _ = writeln!(out, "\nprograms:");
    for p in &obj.programs {
        program_text(&mut out, p);
    }
    let _ = writeln!(out, "\nmaps:");
    for m in &obj.maps {
        map_text(&mut out, obj.btf.as_ref(), m, "  ");
    }
    let sections = data_sections(obj);
    if !sections.is_empty() {
        let _ = writeln!(out, "\ndata sections:");
        for (section, size, map) in sections {
            let _ = writeln!(out, "  {section:<20} {size:>6} bytes  map {map}");
        }
    }
    let _ = writeln!(out, "\nrelocations:");
    for p in &obj.programs {
        let refs = references(obj, p);
        let _ = writeln!(out, "  {} ({} references)", p.name, refs.len());
        for r in refs {
            let _ = writeln!(out, "    insn {:>5}: {}", r.insn, r.what);
        }
    }
    if !obj.warnings.is_empty() {
        let _ = writeln!(out, "\nwarnings:");
        for w in &obj.warnings {
            let _ = writeln!(out, "  {w}");
        }
    }
    out
}

fn program_text(out: &mut String, p: &ProgramSpec) {
    let ty = prog_type_name(p.prog_type).unwrap_or("unknown");
    let _ = write!(
        out,
        "  {:<24} section {:<16} type {ty:<22} insns {:>5}",
        p.name,
        p.section,
        p.insns.len()
    );
    if let Some(a) = p.expected_attach_type {
        let _ = write!(out, "  attach {}", attach_type_name(a).unwrap_or("unknown"));
    }
    if p.prog_flags != 0 {
        let _ = write!(out, "  flags {:#x}", p.prog_flags);
    }
    let _ = writeln!(out);
    let _ = writeln!(out, "    convention: {}", p.naming.describe());
    if p.functions.len() > 1 {
        let subs: Vec<String> = p.functions[1..]
            .iter()
            .map(|(n, at)| format!("{n}@{at}"))
            .collect();
        let _ = writeln!(out, "    subprograms: {}", subs.join(", "));
    }
}

fn map_text(out: &mut String, btf: Option<&Btf>, m: &MapSpec, indent: &str) {
    let ty = map_type_name(m.map_type).unwrap_or("unknown");
    let key = describe(btf, m.key_type, m.key_size);
    let value = describe(btf, m.value_type, m.value_size);
    let _ = write!(
        out,
        "{indent}{:<20} {ty:<28} key {key:<24} value {value:<28} max_entries {:<8} flags {:#x}  [{}]",
        m.name,
        m.max_entries,
        m.map_flags,
        origin(&m.origin)
    );
    if m.pinning != 0 {
        let _ = write!(out, " pinned by name");
    }
    let _ = writeln!(out);
    if !m.init_slots.is_empty() {
        let slots: Vec<String> = m
            .init_slots
            .iter()
            .map(|(i, n)| format!("[{i}]={n}"))
            .collect();
        let _ = writeln!(out, "{indent}  initial slots: {}", slots.join(" "));
    }
    if let Some(inner) = &m.inner {
        map_text(out, btf, inner, &format!("{indent}  inner: "));
    }
}

/// `struct flow_key (16 bytes)` or `16 bytes`.
fn describe(btf: Option<&Btf>, ty: Option<TypeId>, size: u32) -> String {
    match ty {
        Some(t) => format!("{} ({size}B)", type_name(btf, t)),
        None => format!("{size}B"),
    }
}

fn type_name(btf: Option<&Btf>, ty: TypeId) -> String {
    btf.map_or_else(|| format!("[{ty}]"), |b| b.type_name(ty))
}

fn origin(o: &MapOrigin) -> String {
    match o {
        MapOrigin::BtfDefined => ".maps".into(),
        MapOrigin::Legacy => "legacy maps".into(),
        MapOrigin::Iproute2(f) => {
            let mut text = format!("iproute2 maps, id {}", f.id);
            if f.inner_id != 0 {
                let _ = write!(text, ", inner_id {}", f.inner_id);
            }
            if f.pinning != 0 {
                let _ = write!(
                    text,
                    ", pinning {}: nothing to pin in bpfemu",
                    bpfemu_loader::iproute2::pinning_name(f.pinning)
                );
            }
            text
        }
        MapOrigin::GlobalData { section } => format!("data {section}"),
        MapOrigin::Kconfig => ".kconfig".into(),
    }
}

/// Each global data section: its name, size and the map holding it (the `__arena` globals'
/// map is the arena, with the offset libbpf places them at).
fn data_sections(obj: &Object) -> Vec<(String, u32, String)> {
    let data = obj.maps.iter().filter_map(|m| match &m.origin {
        MapOrigin::GlobalData { section } => Some((section.clone(), m.value_size, m.name.clone())),
        _ => None,
    });
    let arena = obj.arena.as_ref().map(|a| {
        let map = obj.maps.get(a.map).map_or("?", |m| m.name.as_str());
        (
            bpfemu_loader::arena::ARENA_SECTION.to_owned(),
            a.data.len() as u32,
            format!("{map} (arena) at offset {}", a.offset),
        )
    });
    data.chain(arena).collect()
}

/// Whether map `imm` holds the object's `__arena` globals.
fn arena_map(obj: &Object, imm: i32) -> bool {
    obj.arena
        .as_ref()
        .is_some_and(|a| usize::try_from(imm) == Ok(a.map))
}

/// Map, data, subprogram and kernel references in the final stream.
fn references(obj: &Object, p: &ProgramSpec) -> Vec<Reference> {
    let map_name = |imm: i32| {
        usize::try_from(imm)
            .ok()
            .and_then(|i| obj.maps.get(i))
            .map_or_else(|| format!("#{imm}"), |m| m.name.clone())
    };
    let func_at = |target: i64| {
        p.functions
            .iter()
            .find(|(_, at)| *at as i64 == target)
            .map_or_else(|| format!("insn {target}"), |(n, _)| n.clone())
    };
    let mut refs = Vec::new();
    let mut pc = 0;
    while pc < p.insns.len() {
        let insn = p.insns[pc];
        let target = pc as i64 + 1 + i64::from(insn.imm);
        let next_imm = p.insns.get(pc + 1).map_or(0, |n| n.imm);
        let what = match (insn.code, insn.src) {
            (0x18, 1) => Some(format!("map {}", map_name(insn.imm))),
            (0x18, 2) if arena_map(obj, insn.imm) => Some(format!(
                "__arena global: arena {}+{next_imm}",
                map_name(insn.imm)
            )),
            (0x18, 2) => Some(format!("map value {}+{next_imm}", map_name(insn.imm))),
            (0x18, 3) => Some(format!("kernel variable, BTF id {}", insn.imm)),
            (0x18, 4) => Some(format!("address of subprogram {}", func_at(target))),
            (0x85, 1) => Some(format!("call subprogram {}", func_at(target))),
            (0x85, 2) => Some(format!("call kfunc, BTF id {}", insn.imm)),
            _ => None,
        };
        if let Some(what) = what {
            refs.push(Reference { insn: pc, what });
        }
        pc += if insn.code == 0x18 { 2 } else { 1 };
    }
    refs
}
