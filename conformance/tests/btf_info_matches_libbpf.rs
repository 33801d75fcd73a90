//! The func_info and line_info records bpfemu's loader gives each program (which `verify`
//! checks as `BPF_PROG_LOAD` would and the kernel door sends) against the records libbpf 1.7
//! holds after `bpf_object__prepare`, which are the ones it sends: same records, same order.
//! Objects: the XDP corpus and, when built, the kernel's verifier selftests
//! (`/tmp/bpfemu-selftests/build/obj`, or `BPFEMU_SELFTESTS_OBJ`).

use bpfemu_conformance::libbpf::{self, LibbpfObject};
use bpfemu_loader::{LoadOptions, ProgramSpec};
use std::path::{Path, PathBuf};

fn objects_in(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut objects: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "o"))
        .filter(|p| !p.to_string_lossy().contains("legacy_maps."))
        .collect();
    objects.sort();
    objects
}

/// bpfemu's records in the uapi form libbpf holds them.
fn bpfemu_records(prog: &ProgramSpec) -> (Vec<(u32, u32)>, Vec<[u32; 4]>) {
    let funcs = prog
        .func_info
        .iter()
        .map(|&(insn, ty)| (insn as u32, ty))
        .collect();
    let lines = prog
        .line_info
        .iter()
        .map(|l| {
            let line_col = (l.line << 10) | (l.column & 0x3ff);
            [l.insn as u32, l.file_name_off, l.line_off, line_col]
        })
        .collect();
    (funcs, lines)
}

/// The differences for one object; `None` when either loader does not take it.
fn compare(path: &Path) -> Option<Vec<String>> {
    let ours = bpfemu_loader::load_file(path, &LoadOptions::default()).ok()?;
    let mut theirs = LibbpfObject::open_file(path).ok()?;
    let prepared = theirs.prepare().ok()?;
    let mut differ = Vec::new();
    for p in &prepared {
        let Some(our) = ours.programs.iter().find(|o| o.name == p.name) else {
            continue;
        };
        let (funcs, lines) = bpfemu_records(our);
        if funcs != p.func_info {
            differ.push(format!(
                "{} {}: func_info bpfemu {funcs:?}, libbpf {:?}",
                path.display(),
                p.name,
                p.func_info
            ));
        }
        if lines != p.line_info {
            let first = lines.iter().zip(&p.line_info).position(|(a, b)| a != b);
            differ.push(format!(
                "{} {}: line_info differs ({} vs {} records, first difference at {first:?})",
                path.display(),
                p.name,
                lines.len(),
                p.line_info.len()
            ));
        }
    }
    Some(differ)
}

#[test]
fn func_and_line_info_equal_libbpfs() {
    if !libbpf::kernel_or_skip("func_and_line_info_equal_libbpfs") {
        return;
    }
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/xdp/build");
    let selftests = std::env::var("BPFEMU_SELFTESTS_OBJ")
        .unwrap_or_else(|_| "/tmp/bpfemu-selftests/build/obj".into());
    let mut compared = 0;
    let mut differ = Vec::new();
    for path in objects_in(&corpus)
        .iter()
        .chain(&objects_in(Path::new(&selftests)))
    {
        if let Some(found) = compare(path) {
            compared += 1;
            differ.extend(found);
        }
    }
    eprintln!("{compared} objects compared");
    assert!(
        compared >= objects_in(&corpus).len() / 2,
        "too few objects compared"
    );
    assert!(differ.is_empty(), "{}", differ.join("\n"));
}
