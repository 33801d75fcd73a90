//! Parses the running kernel's BTF and checks well-known layouts and type names.

mod core_util;

use bpfemu_loader::btf::{Btf, BtfKind, TypeId};
use core_util::{VMLINUX, vmlinux};

fn struct_id(btf: &Btf, name: &str) -> TypeId {
    btf.find_by_name_kind(name, |k| matches!(k, BtfKind::Struct { .. }))
        .unwrap_or_else(|| panic!("struct {name}"))
}

/// (name, bit offset, C type name) of each member.
fn members(btf: &Btf, id: TypeId) -> Vec<(String, u32, String)> {
    let kind = &btf.get(id).expect("type").kind;
    kind.members()
        .iter()
        .map(|m| (m.name.clone(), m.bit_offset, btf.type_name(m.ty)))
        .collect()
}

#[test]
fn type_count_matches_bpftool() {
    let Some(btf) = vmlinux() else { return };
    assert!(
        btf.type_count() > 10_000,
        "vmlinux has {} types",
        btf.type_count()
    );
    let Ok(out) = std::process::Command::new("bpftool")
        .args(["btf", "dump", "file", VMLINUX])
        .output()
    else {
        eprintln!("bpftool not found: not comparing the type count");
        return;
    };
    let text = String::from_utf8_lossy(&out.stdout);
    let bpftool_count = text.lines().filter(|l| l.starts_with('[')).count();
    assert_eq!(btf.type_count() - 1, bpftool_count, "types excluding void");
}

#[test]
fn ethhdr_layout() {
    let Some(btf) = vmlinux() else { return };
    let id = struct_id(&btf, "ethhdr");
    assert_eq!(btf.size_of(id), Some(14));
    assert_eq!(btf.type_name(id), "struct ethhdr");
    let m = members(&btf, id);
    assert_eq!(m[0], ("h_dest".into(), 0, "unsigned char[6]".into()));
    assert_eq!(m[1], ("h_source".into(), 48, "unsigned char[6]".into()));
    assert_eq!(m[2], ("h_proto".into(), 96, "__be16".into()));
}

#[test]
fn iphdr_layout_with_bitfields_and_anonymous_union() {
    let Some(btf) = vmlinux() else { return };
    let id = struct_id(&btf, "iphdr");
    assert_eq!(btf.size_of(id), Some(20));
    let kind = &btf.get(id).unwrap().kind;
    let ms = kind.members();
    let by_name = |n: &str| {
        ms.iter()
            .find(|m| m.name == n)
            .unwrap_or_else(|| panic!("member {n}"))
    };
    // Little-endian kernels put ihl in the low nibble of the first byte.
    assert_eq!(
        (by_name("ihl").bit_offset, by_name("ihl").bitfield_size),
        (0, 4)
    );
    assert_eq!(
        (
            by_name("version").bit_offset,
            by_name("version").bitfield_size
        ),
        (4, 4)
    );
    assert_eq!(by_name("ttl").bit_offset, 64);
    assert_eq!(by_name("protocol").bit_offset, 72);
    // saddr/daddr live in an anonymous union at byte 12.
    let anon = ms
        .iter()
        .find(|m| m.name.is_empty())
        .expect("anonymous member");
    assert_eq!(anon.bit_offset, 96);
    let union_id = btf.skip_mods_and_typedefs(anon.ty).unwrap();
    assert!(matches!(
        btf.get(union_id).unwrap().kind,
        BtfKind::Union { size: 8, .. }
    ));
}

#[test]
fn xdp_md_fields() {
    let Some(btf) = vmlinux() else { return };
    let id = struct_id(&btf, "xdp_md");
    assert_eq!(btf.size_of(id), Some(24));
    let names = [
        "data",
        "data_end",
        "data_meta",
        "ingress_ifindex",
        "rx_queue_index",
        "egress_ifindex",
    ];
    let got = members(&btf, id);
    for (i, name) in names.iter().enumerate() {
        assert_eq!(
            got[i],
            (name.to_string(), 32 * i as u32, "__u32".to_string())
        );
    }
    let u32_id = btf
        .find_by_name_kind("__u32", |k| matches!(k, BtfKind::Typedef { .. }))
        .unwrap();
    assert_eq!(btf.size_of(u32_id), Some(4));
    let resolved = btf.skip_mods_and_typedefs(u32_id).unwrap();
    assert_eq!(btf.type_name(resolved), "unsigned int");
}

#[test]
fn c_like_type_names() {
    let Some(btf) = vmlinux() else { return };
    let task = members(&btf, struct_id(&btf, "task_struct"));
    let comm = task.iter().find(|m| m.0 == "comm").expect("comm");
    assert_eq!(comm.2, "char[16]");
    let skb = members(&btf, struct_id(&btf, "sk_buff"));
    let dev = skb.iter().find(|m| m.0 == "sk").expect("sk");
    assert_eq!(dev.2, "struct sock *");
    let xdp_buff = members(&btf, struct_id(&btf, "xdp_buff"));
    let data = xdp_buff.iter().find(|m| m.0 == "data").expect("data");
    assert_eq!(data.2, "void *");
}

#[test]
fn every_kind_is_seen_in_vmlinux() {
    let Some(btf) = vmlinux() else { return };
    let mut seen = [false; 20];
    for t in &btf.types {
        seen[t.kind.kind_number() as usize] = true;
    }
    // Kinds a 6.x vmlinux always has (type/decl tags and enum64 depend on the config).
    for k in [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 13, 14, 15] {
        assert!(seen[k], "no type of kind {k}");
    }
}
