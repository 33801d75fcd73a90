//! Objects in iproute2's format (`struct bpf_elf_map` in `maps`, programs in `prog` and in
//! tail-call sections `ID/KEY`, a map-in-map by inner_id/inner_idx, pinning), loaded as
//! `ip link set dev DEV xdp obj FILE sec S` loads them, and judged against the kernel with
//! `bpfemu diff` (the kernel side loads the same maps, slots and programs through bpf()).
//! The `ip` of this machine (iproute2 6.1 over libbpf 1.x) cannot load such objects at all
//! ("legacy map definitions in 'maps' section are not supported by libbpf v1.0+"), hence
//! the raw-bpf() kernel side.
//!
//! The object is `tests/objects/iproute2_style.o` (source beside it). Kernel tests are
//! skipped with a message when bpf() is out of reach, unless `BPFEMU_REQUIRE_KERNEL=1`.

use bpfemu_kernel::kernel_or_skip;
use bpfemu_loader::{LoadOptions, MapOrigin};
use std::path::PathBuf;
use std::process::{Command, Output};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

const OBJECT: &str = "tests/objects/iproute2_style.o";

fn bpfemu(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_bpfemu"))
        .args(args)
        .current_dir(root())
        .output()
        .expect("bpfemu runs")
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// What iproute2 makes of the object: each map's extra fields, the map-in-map's inner
/// template and slot from inner_id / inner_idx, the prog array filled from the `1/0` and
/// `1/1` sections, every program typed by the command (XDP).
#[test]
fn iproute2_maps_and_sections_load_as_iproute2_loads_them() {
    let opts = LoadOptions {
        untyped_prog_type: Some(6),
        ..LoadOptions::default()
    };
    let obj = bpfemu_loader::load_file(&root().join(OBJECT), &opts).unwrap();
    let map = |name: &str| obj.maps.iter().find(|m| m.name == name).unwrap();
    let MapOrigin::Iproute2(counters) = map("counters").origin else {
        panic!("{:?}", map("counters").origin);
    };
    assert_eq!((counters.id, counters.pinning), (0, 2));
    assert_eq!(
        (map("counters").max_entries, map("counters").value_size),
        (4, 8)
    );
    let jmp = map("jmp_table");
    assert_eq!(
        jmp.init_slots,
        [(0, "even_proto".to_owned()), (1, "odd_proto".to_owned())]
    );
    let outer = map("outer");
    assert_eq!(outer.init_slots, [(3, "per_slot".to_owned())]);
    let inner = outer.inner.as_ref().unwrap();
    assert_eq!(
        (
            inner.map_type,
            inner.key_size,
            inner.value_size,
            inner.max_entries
        ),
        (2, 4, 8, 2)
    );
    let sections: Vec<(&str, &str, u32)> = obj
        .programs
        .iter()
        .map(|p| (p.name.as_str(), p.section.as_str(), p.prog_type))
        .collect();
    assert_eq!(
        sections,
        [
            ("entry", "prog", 6),
            ("even_proto", "1/0", 6),
            ("odd_proto", "1/1", 6)
        ]
    );
    assert_eq!(obj.license, "GPL");
    // Without a type from the command, libbpf's rule: no type for these sections.
    let untyped = bpfemu_loader::load_file(&root().join(OBJECT), &LoadOptions::default()).unwrap();
    assert!(untyped.programs.iter().all(|p| p.prog_type == 0));
}

/// `inspect` says what iproute2 asked for, pinning included, and that nothing is pinned.
#[test]
fn inspect_shows_iproute2_fields_and_pinning() {
    let out = bpfemu(&["inspect", OBJECT]);
    let shown = text(&out);
    assert_eq!(out.status.code(), Some(0), "{shown}");
    assert!(
        shown.contains("iproute2 maps, id 0, pinning global namespace (PIN_GLOBAL_NS): nothing to pin in bpfemu"),
        "{shown}"
    );
    assert!(shown.contains("iproute2 maps, id 2"), "{shown}");
    assert!(
        shown.contains("initial slots: [0]=even_proto [1]=odd_proto"),
        "{shown}"
    );
    let out = bpfemu(&["inspect", OBJECT, "--json"]);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let jmp = doc["maps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "jmp_table")
        .unwrap();
    assert_eq!(jmp["iproute2"]["id"], 1);
    assert_eq!(jmp["iproute2"]["pinning"], 1);
    assert_eq!(jmp["iproute2"]["pinned"], false);
}

/// The object against the kernel, program chosen by section as `ip ... sec prog` (and by
/// iproute2's default section without one): every packet and every map equal, and the tail
/// calls really ran (IPv4 and IPv6 pass through `1/0`, VLAN frames go back out through `1/1`).
#[test]
fn iproute2_object_diffs_clean_against_the_kernel() {
    if !kernel_or_skip("iproute2_object_diffs_clean_against_the_kernel") {
        return;
    }
    for (capture, action) in [("normal.pcap", "pass"), ("vlan.pcap", "tx")] {
        let cap = format!("examples/pcap/{capture}");
        for args in [vec!["--prog", "prog"], vec![]] {
            let mut argv = vec!["diff", OBJECT, cap.as_str(), "--json"];
            argv.extend(args.iter().copied());
            let out = bpfemu(&argv);
            assert_eq!(out.status.code(), Some(0), "{}", text(&out));
            let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            assert_eq!(report["summary"]["mismatches"], 0, "{report:#}");
            for name in ["counters", "per_slot"] {
                let m = report["maps"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|m| m["name"] == name)
                    .unwrap();
                assert_eq!(m["compared"], true, "{m:#}");
                assert_eq!(m["mismatches"].as_array().unwrap().len(), 0, "{m:#}");
                assert_eq!(m["kernel_entries"], m["equal_entries"], "{m:#}");
            }
        }
        let out = bpfemu(&["replay", OBJECT, &cap, "--prog", "prog", "--json"]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
        let shown = String::from_utf8_lossy(&out.stdout);
        assert!(
            shown.contains(&format!("\"action\":\"{action}\"")),
            "{shown}"
        );
    }
}
