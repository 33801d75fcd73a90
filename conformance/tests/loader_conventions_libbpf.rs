//! The loader conventions other than libbpf's (see `bpfemu_loader::Naming`) against libbpf 1.7
//! itself: libbpf refuses the objects bpfemu loads as cilium/ebpf and iproute2 load them, makes
//! no program of a section without function symbols, and the programs bpfemu makes of such
//! sections are exactly the streams libbpf prepares from the same object before stripping.
//!
//! The objects are the root crate's `tests/data/conventions/` (sources and build lines there).

use bpfemu_conformance::libbpf::{self, LibbpfError, LibbpfObject};
use bpfemu_loader::{LoadOptions, Naming};
use std::path::PathBuf;

fn object(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/data/conventions")
        .join(name)
}

/// What libbpf said when it refused to open `name`.
fn refusal(name: &str) -> String {
    match LibbpfObject::open_file(&object(name)) {
        Ok(_) => panic!("libbpf opened {name}"),
        Err(e @ LibbpfError::Open { .. }) => e.to_string(),
        Err(e) => panic!("{name}: {e}"),
    }
}

/// Static programs and an object without a symbol table: libbpf refuses both, bpfemu loads them.
#[test]
fn libbpf_refuses_what_bpfemu_loads_by_other_conventions() {
    let statics = refusal("static_programs.o");
    assert!(
        statics.contains("program 'long_enough' is static and not supported"),
        "{statics}"
    );
    let stripped = refusal("hand_written.o");
    assert!(
        stripped.contains("couldn't find symbol table"),
        "{stripped}"
    );
    for name in ["static_programs.o", "hand_written.o"] {
        let obj = bpfemu_loader::load_file(&object(name), &LoadOptions::default()).unwrap();
        assert!(
            obj.programs
                .iter()
                .all(|p| p.naming != Naming::FunctionSymbol),
            "{name}"
        );
    }
}

/// libbpf makes no entry program of the stripped sections; bpfemu makes one of each, equal to
/// the stream libbpf prepares from the object before stripping (the same maps, in the same
/// order, so map indices compare directly).
#[test]
fn stripped_sections_are_the_programs_libbpf_prepares_before_stripping() {
    if !libbpf::kernel_or_skip("stripped_sections_are_the_programs_libbpf_prepares") {
        return;
    }
    let mut stripped = LibbpfObject::open_file(&object("named_by_section.o")).unwrap();
    let entries: Vec<String> = stripped
        .prepare()
        .unwrap()
        .into_iter()
        .map(|p| p.name)
        .collect();
    assert!(
        !entries.iter().any(|n| n == "xdp" || n == "prog"),
        "{entries:?}"
    );
    let mut full = LibbpfObject::open_file(&object("named_by_section.full.o")).unwrap();
    let prepared = full.prepare().unwrap();
    let ours =
        bpfemu_loader::load_file(&object("named_by_section.o"), &LoadOptions::default()).unwrap();
    let sections: Vec<(&str, &str)> = prepared
        .iter()
        .map(|p| (p.name.as_str(), p.section.as_str()))
        .collect();
    assert_eq!(
        sections,
        [("count_protocols", "xdp"), ("drop_short", "prog")]
    );
    assert_eq!(ours.programs.len(), prepared.len());
    for (theirs, mine) in prepared.iter().zip(&ours.programs) {
        assert_eq!(mine.section, theirs.section);
        assert_eq!(mine.naming, Naming::SectionWithoutSymbols);
        assert_eq!(mine.insns, theirs.insns, "{}", mine.name);
    }
}
