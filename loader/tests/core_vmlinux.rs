//! Relocates tests/data/core_fields.o against the running kernel's BTF and checks the patched
//! instructions: against values read from vmlinux BTF directly, and (when bpftool is
//! available) against what libbpf's own debug log says it patched.

mod core_util;

use bpfemu_isa::RawInsn;
use bpfemu_loader::btf::{Btf, BtfKind, CoreReloKind};
use bpfemu_loader::core_relo::{CoreRelocator, POISON_HELPER_ID, relocate};
use core_util::{TestObject, data_path, load_object, vmlinux};
use std::collections::BTreeMap;

/// The `xdp` section relocated against vmlinux, and the original.
fn relocated(obj: &TestObject, target: &Btf) -> (Vec<RawInsn>, Vec<RawInsn>) {
    let orig = obj.sections["xdp"].clone();
    let mut insns = orig.clone();
    let relos = &obj
        .ext
        .core_relos
        .iter()
        .find(|s| s.section == "xdp")
        .expect("xdp relos")
        .records;
    relocate(&mut insns, relos, &obj.btf, target).expect("relocate");
    (insns, orig)
}

fn member_byte_offset(btf: &Btf, strukt: &str, path: &[&str]) -> u32 {
    let mut id = btf
        .find_by_name_kind(strukt, |k| matches!(k, BtfKind::Struct { .. }))
        .unwrap();
    let mut bits = 0;
    for name in path {
        let kind = &btf
            .get(btf.skip_mods_and_typedefs(id).unwrap())
            .unwrap()
            .kind;
        let m = kind.members().iter().find(|m| &m.name == name).unwrap();
        bits += m.bit_offset;
        id = m.ty;
    }
    bits / 8
}

#[test]
fn field_offsets_follow_the_kernel() {
    let Some(vmlinux) = vmlinux() else { return };
    let obj = load_object("core_fields.o");
    let (insns, orig) = relocated(&obj, &vmlinux);
    // insn 2: skb->len, insn 6: skb->mark (inside anonymous unions in the kernel).
    assert_eq!(orig[2].off, 4);
    assert_eq!(
        insns[2].off as u32,
        member_byte_offset(&vmlinux, "sk_buff", &["len"])
    );
    assert_ne!(insns[6].off, 0, "mark moved");
    // insn 8: ip->daddr, found through the kernel's anonymous union.
    assert_eq!((orig[8].off, insns[8].off), (8, 16));
    // iphdr.version: clang's local bitfield byte size is 4; libbpf picks the smallest
    // covering load, 1 byte.
    assert_eq!((orig[14].imm, insns[14].imm), (4, 1));
    assert_eq!(insns[64].imm, 0, "field_exists(no_such_field_in_kernel)");
    assert_eq!(insns[66].imm, 1, "field_exists(len)");
}

#[test]
fn type_and_enum_relocations() {
    let Some(vmlinux) = vmlinux() else { return };
    let obj = load_object("core_fields.o");
    let (insns, _) = relocated(&obj, &vmlinux);
    let base = 74; // the `types` program's first instruction in the section
    let ethhdr = vmlinux
        .find_by_name_kind("ethhdr", |k| matches!(k, BtfKind::Struct { .. }))
        .unwrap();
    assert_eq!(insns[base].imm, 1, "type_exists(ethhdr)");
    assert_eq!(insns[base + 4].imm, 0, "type_exists(no_such_struct)");
    assert_eq!(insns[base + 6].imm, 14, "type_size(ethhdr)");
    assert_eq!(insns[base + 8].imm, 20, "type_size(iphdr)");
    assert_eq!(
        insns[base + 10].imm as u32,
        ethhdr,
        "type_id_kernel(ethhdr)"
    );
    assert_eq!(insns[base + 24].imm, 2, "enum_value(XDP_PASS)");
    assert_eq!(
        insns[base + 21].imm,
        0,
        "enum_value_exists(XDP_NOT_AN_ACTION)"
    );
}

#[test]
fn unresolvable_relocations_are_poisoned() {
    let Some(vmlinux) = vmlinux() else { return };
    let obj = load_object("core_fields.o");
    let (insns, _) = relocated(&obj, &vmlinux);
    let poison = RawInsn::new(0x85, 0, 0, 0, POISON_HELPER_ID);
    assert_eq!(insns[103 + 1], poison, "load of a missing field");
    assert_eq!(insns[103 + 5], poison, "ld_imm64 of a missing enumerator");
    assert_eq!(insns[103 + 6], poison, "second slot of that ld_imm64");
    assert_eq!(POISON_HELPER_ID, 195896080);
}

#[test]
fn every_relocation_kind_in_the_object_resolves() {
    let Some(vmlinux) = vmlinux() else { return };
    let obj = load_object("core_fields.o");
    let relos = &obj.ext.core_relos[0].records;
    let mut relocator = CoreRelocator::new(&obj.btf, &vmlinux);
    let mut kinds = std::collections::HashSet::new();
    for (i, r) in relos.iter().enumerate() {
        relocator.resolve(i, r).unwrap_or_else(|e| panic!("{e}"));
        kinds.insert(r.kind);
    }
    assert_eq!(
        kinds.len(),
        CoreReloKind::ALL.len(),
        "the test object uses every kind: {kinds:?}"
    );
}

/// Parses libbpf's debug lines `prog 'P': relo #N: patched insn #I (...) X -> Y` and
/// `substituting insn #I w/ invalid insn`, mapping program-relative insns to section ones.
fn libbpf_patches(log: &str) -> BTreeMap<usize, String> {
    let mut prog_start = BTreeMap::new();
    let mut out = BTreeMap::new();
    for line in log.lines() {
        if let Some(rest) = line.split("found program '").nth(1) {
            let name = rest.split('\'').next().unwrap().to_string();
            let off: usize = rest
                .split("at insn offset ")
                .nth(1)
                .unwrap()
                .split(' ')
                .next()
                .unwrap()
                .parse()
                .unwrap();
            prog_start.insert(name, off);
        }
        let Some(prog) = line
            .split("prog '")
            .nth(1)
            .map(|r| r.split('\'').next().unwrap())
        else {
            continue;
        };
        let Some(&start) = prog_start.get(prog) else {
            continue;
        };
        let insn_of = |s: &str| -> usize {
            s.split("insn #")
                .nth(1)
                .unwrap()
                .split(' ')
                .next()
                .unwrap()
                .parse()
                .unwrap()
        };
        if line.contains("patched insn #") {
            let value = line.rsplit("-> ").next().unwrap().trim().to_string();
            let key = start + insn_of(line);
            out.insert(key, value);
        } else if line.contains("substituting insn #") {
            out.insert(start + insn_of(line), "poison".into());
        }
    }
    out
}

#[test]
fn same_patches_as_libbpf() {
    let Some(vmlinux) = vmlinux() else { return };
    let obj_path = data_path("core_fields.o");
    let Ok(out) = std::process::Command::new("bpftool")
        .args([
            "-d",
            "prog",
            "loadall",
            obj_path.to_str().unwrap(),
            "/sys/fs/bpf/bpfemu_core_test_nonexistent",
        ])
        .output()
    else {
        eprintln!("skipping: bpftool not available");
        return;
    };
    let expected = libbpf_patches(&String::from_utf8_lossy(&out.stderr));
    if expected.is_empty() {
        eprintln!("skipping: libbpf printed no CO-RE patches (no privileges?)");
        return;
    }
    let obj = load_object("core_fields.o");
    let (insns, _) = relocated(&obj, &vmlinux);
    for (&idx, value) in &expected {
        let insn = insns[idx];
        let ours = if insn.code == 0x85 && insn.imm == POISON_HELPER_ID {
            "poison".to_string()
        } else if insn.code == 0x18 {
            ((insn.imm as u32 as u64) | ((insns[idx + 1].imm as u32 as u64) << 32)).to_string()
        } else if matches!(insn.code & 7, 1..=3) {
            insn.off.to_string()
        } else {
            insn.imm.to_string()
        };
        assert_eq!(&ours, value, "insn #{idx}");
    }
}
