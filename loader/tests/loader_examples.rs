//! The loader against real clang output: the example corpus (`examples/xdp/build`) and the
//! loader's own `tests/data/features.o` (kconfig, kfuncs, map-in-map, custom data sections,
//! callbacks, several programs per section). Expected values were checked against
//! `bpftool prog load` + `bpftool prog dump xlated` / `bpftool map` on Linux 6.18.

use bpfemu_isa::uapi::*;
use bpfemu_loader::{LoadError, LoadOptions, MapOrigin, Object, load_bytes, load_file};
use std::path::{Path, PathBuf};

fn example(name: &str) -> Option<Object> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples/xdp/build")
        .join(name);
    if !path.exists() {
        eprintln!("skipping: {} is not built", path.display());
        return None;
    }
    Some(load_file(&path, &LoadOptions::default()).expect("example loads"))
}

fn features_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/features.o")
}

fn features() -> Object {
    let mut opts = LoadOptions::default();
    opts.map_sizes.insert("sized".into(), 16);
    load_file(&features_path(), &opts).expect("features.o loads")
}

#[test]
fn subprograms_are_appended_in_first_call_order() {
    let Some(obj) = example("subprogs.v3.o") else {
        return;
    };
    let prog = &obj.programs[0];
    assert_eq!(prog.name, "xdp_subprogs");
    assert_eq!(prog.prog_type, BPF_PROG_TYPE_XDP);
    assert_eq!(prog.expected_attach_type, Some(BPF_XDP));
    let names: Vec<&str> = prog.functions.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "xdp_subprogs",
            "frame_is_ip",
            "parse_pkt",
            "port_class",
            "account"
        ]
    );
    // Each bpf-to-bpf call lands on its function's first instruction.
    for (pc, insn) in prog.insns.iter().enumerate() {
        if insn.code == 0x85 && insn.src == 1 {
            let target = (pc as i64 + 1 + i64::from(insn.imm)) as usize;
            assert!(
                prog.functions.iter().any(|(_, at)| *at == target),
                "call at {pc}"
            );
        }
    }
    // func_info: one record per function, at its start.
    let starts: Vec<usize> = prog.functions.iter().map(|(_, at)| *at).collect();
    let info: Vec<usize> = prog.func_info.iter().map(|(at, _)| *at).collect();
    assert_eq!(info, starts);
    // line_info is sorted and starts with the entry's signature line.
    assert!(prog.line_info.windows(2).all(|w| w[0].insn <= w[1].insn));
    assert_eq!(prog.line_info[0].insn, 0);
    assert!(
        prog.line_info[0]
            .line_text
            .contains("xdp_subprogs(struct xdp_md *ctx)")
    );
}

#[test]
fn global_data_becomes_array_maps_with_libbpf_names() {
    let Some(obj) = example("globals.v3.o") else {
        return;
    };
    let names: Vec<&str> = obj.maps.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(names, ["globals.rodata", "globals.data", "globals.bss"]);
    let rodata = &obj.maps[0];
    assert_eq!(rodata.map_type, BPF_MAP_TYPE_ARRAY);
    assert_eq!((rodata.key_size, rodata.max_entries), (4, 1));
    assert_eq!(rodata.map_flags, BPF_F_RDONLY_PROG | BPF_F_MMAPABLE);
    assert_eq!(obj.maps[1].map_flags, BPF_F_MMAPABLE);
    let bss = &obj.maps[2];
    assert_eq!(
        bss.initial.as_deref(),
        Some(&vec![0u8; bss.value_size as usize][..])
    );
    assert!(matches!(&bss.origin, MapOrigin::GlobalData { section } if section == ".bss"));
    // Every global access is a map-value ld_imm64 inside its section.
    let prog = &obj.programs[0];
    let mut seen = 0;
    for (pc, insn) in prog.insns.iter().enumerate() {
        if insn.code == 0x18 && insn.src == 2 {
            let map = &obj.maps[insn.imm as usize];
            let off = prog.insns[pc + 1].imm as u32;
            assert!(off < map.value_size, "offset {off} in {}", map.name);
            seen += 1;
        }
    }
    assert_eq!(seen, 9);
}

#[test]
fn several_programs_per_section_and_prog_array_slots() {
    let Some(obj) = example("tailcall.v3.o") else {
        return;
    };
    let names: Vec<&str> = obj.programs.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["xdp_stage_ipv4", "xdp_stage_ipv6", "xdp_entry"]);
    let stages = &obj.maps[0];
    assert_eq!(stages.map_type, BPF_MAP_TYPE_PROG_ARRAY);
    assert_eq!(stages.value_size, 4);
    assert_eq!(
        stages.init_slots,
        [
            (0, "xdp_stage_ipv4".to_string()),
            (1, "xdp_stage_ipv6".to_string())
        ]
    );
}

#[test]
fn legacy_maps_and_section_names_load_with_warnings() {
    let Some(obj) = example("legacy_maps.v3.o") else {
        return;
    };
    assert_eq!(obj.programs[0].section, "xdp_prog");
    assert_eq!(obj.programs[0].prog_type, BPF_PROG_TYPE_XDP);
    assert!(obj.maps.iter().all(|m| m.origin == MapOrigin::Legacy));
    assert_eq!(obj.maps[0].name, "rxcnt");
    assert_eq!(obj.maps[0].map_type, BPF_MAP_TYPE_PERCPU_ARRAY);
    assert_eq!((obj.maps[0].key_size, obj.maps[0].value_size), (4, 8));
    assert!(
        obj.warnings
            .iter()
            .any(|w| w.contains("legacy map definitions"))
    );
    assert!(obj.warnings.iter().any(|w| w.contains("xdp_prog")));
}

#[test]
fn btf_map_definitions_carry_types_and_sizes() {
    let Some(obj) = example("ddos_filter.v3.o") else {
        return;
    };
    let trie = &obj.maps[0];
    assert_eq!(trie.name, "blocklist_v4");
    assert_eq!(trie.map_type, BPF_MAP_TYPE_LPM_TRIE);
    assert_eq!(trie.map_flags, 1);
    let btf = obj.btf.as_ref().expect("BTF");
    assert_eq!(
        btf.type_name(trie.key_type.expect("key type")),
        "struct lpm_v4_key"
    );
    let Some(rb) = example("ringbuf_events.v3.o") else {
        return;
    };
    let events = rb
        .maps
        .iter()
        .find(|m| m.name == "events")
        .expect("ringbuf");
    assert_eq!(events.map_type, BPF_MAP_TYPE_RINGBUF);
    assert_eq!(events.max_entries % 4096, 0);
}

#[test]
fn callbacks_are_pseudo_func_loads() {
    let Some(obj) = example("bpf_loop.v3.o") else {
        return;
    };
    let prog = &obj.programs[0];
    let (pc, insn) = prog
        .insns
        .iter()
        .enumerate()
        .find(|(_, i)| i.code == 0x18 && i.src == 4)
        .expect("a callback address");
    let target = (pc as i64 + 1 + i64::from(insn.imm)) as usize;
    assert_eq!(prog.functions[1], ("walk_one".to_string(), target));
}

#[test]
fn features_object_programs_and_subprogram_copies() {
    let obj = features();
    let first = &obj.programs[0];
    assert_eq!(first.section, "xdp.frags");
    assert_eq!(first.prog_flags, BPF_F_XDP_HAS_FRAGS);
    let order = |p: &bpfemu_loader::ProgramSpec| {
        p.functions
            .iter()
            .map(|(n, _)| n.clone())
            .collect::<Vec<_>>()
    };
    // Each program gets its own copy of the subprograms it reaches, in its own order.
    assert_eq!(order(first), ["first", "loop_cb", "twice", "add_one"]);
    assert_eq!(order(&obj.programs[1]), ["second", "add_one", "twice"]);
}

#[test]
fn features_object_maps() {
    let obj = features();
    let outer = obj.maps.iter().find(|m| m.name == "outer").expect("outer");
    assert_eq!(outer.map_type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
    assert_eq!(
        outer.init_slots,
        [(0, "inner_a".to_string()), (2, "inner_b".to_string())]
    );
    let inner = outer.inner.as_deref().expect("inner template");
    assert_eq!(inner.name, "outer.inner");
    assert_eq!(
        (inner.map_type, inner.value_size, inner.max_entries),
        (BPF_MAP_TYPE_ARRAY, 8, 4)
    );
    assert_eq!(
        obj.maps
            .iter()
            .find(|m| m.name == "sized")
            .map(|m| m.max_entries),
        Some(16)
    );
    let custom = obj
        .maps
        .iter()
        .find(|m| m.name == ".data.custom")
        .expect("custom data");
    assert_eq!(custom.initial.as_deref(), Some(&7u32.to_le_bytes()[..]));
    let kconfig = obj
        .maps
        .iter()
        .find(|m| m.origin == MapOrigin::Kconfig)
        .expect("kconfig");
    assert_eq!(kconfig.name, "feature.kconfig");
    assert_eq!(kconfig.value_size, 5);
    assert_eq!(kconfig.map_flags, BPF_F_RDONLY_PROG | BPF_F_MMAPABLE);
    let data = kconfig.initial.as_deref().expect("values");
    let version = u32::from_le_bytes(data[..4].try_into().unwrap());
    assert!(version >= 6 << 16, "LINUX_KERNEL_VERSION {version:#x}");
}

#[test]
fn kconfig_file_and_kfuncs_resolve() {
    let dir = std::env::temp_dir().join(format!("bpfemu-loader-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("config");
    std::fs::write(&config, "# comment\nCONFIG_BPF_SYSCALL=y\n").unwrap();
    let mut opts = LoadOptions::default();
    opts.map_sizes.insert("sized".into(), 16);
    opts.kconfig = Some(config);
    let obj = load_file(&features_path(), &opts).expect("loads");
    let kconfig = obj
        .maps
        .iter()
        .find(|m| m.origin == MapOrigin::Kconfig)
        .unwrap();
    assert_eq!(
        kconfig.initial.as_ref().unwrap()[4],
        1,
        "CONFIG_BPF_SYSCALL=y"
    );
    // With the kernel's BTF present, the kfunc call carries its BTF id.
    if Path::new("/sys/kernel/btf/vmlinux").exists() {
        let call = obj.programs[0]
            .insns
            .iter()
            .find(|i| i.code == 0x85 && i.src == 2)
            .expect("kfunc call");
        assert!(call.imm > 0);
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn zero_sized_map_without_a_size_is_an_error_naming_it() {
    let err = load_file(&features_path(), &LoadOptions::default()).unwrap_err();
    assert!(
        matches!(&err, LoadError::MapSize { maps, .. } if maps == &["sized"]),
        "{err}"
    );
    assert!(err.to_string().contains("--map-size sized=N"));
}

#[test]
fn non_bpf_and_corrupt_inputs_are_clear_errors() {
    let data = std::fs::read(features_path()).unwrap();
    let err = load_bytes("x.o", b"not an elf", &LoadOptions::default()).unwrap_err();
    assert!(matches!(err, LoadError::Elf { .. }), "{err}");
    let mut x86 = data.clone();
    x86[18] = 62; // e_machine = EM_X86_64
    let err = load_bytes("x.o", &x86, &LoadOptions::default()).unwrap_err();
    assert!(matches!(err, LoadError::NotBpf { .. }), "{err}");
    assert!(err.to_string().starts_with("x.o: "));
    let err = load_bytes("x.o", &data[..data.len() / 3], &LoadOptions::default()).unwrap_err();
    assert!(err.to_string().starts_with("x.o: "), "{err}");
}

#[test]
fn every_example_loads() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/xdp/build");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.extension().is_some_and(|e| e == "o") {
            let obj = load_file(&path, &LoadOptions::default());
            let obj = obj.unwrap_or_else(|e| panic!("{e}"));
            assert!(!obj.programs.is_empty(), "{}", path.display());
        }
    }
}

/// libbpf 1.7 refuses a kfunc whose declared prototype is not compatible with the kernel's
/// (a forward declaration where vmlinux has a struct), naming both prototypes' ids; so does
/// bpfemu, against the running kernel's BTF.
#[test]
fn a_kfunc_declared_with_other_kinds_of_types_is_refused_as_libbpf_does() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/ksym_types.o");
    if !Path::new("/sys/kernel/btf/vmlinux").exists() {
        eprintln!("skipping: no vmlinux BTF");
        return;
    }
    let err = load_file(&path, &LoadOptions::default()).expect_err("refused");
    let text = err.to_string();
    assert!(
        text.contains("extern 'bpf_key_put': func_proto [8] incompatible with vmlinux ["),
        "{text}"
    );
    assert!(matches!(err, LoadError::Extern { .. }), "{err:?}");
}
