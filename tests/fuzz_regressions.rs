//! The fuzz targets' bodies (`bpfemu_conformance::fuzz_targets`) over the committed corpus:
//! every input that once found a bug (`fuzz/corpus/TARGET/`) must now run clean, and the inputs
//! the targets are seeded with must get past the first check, so that a target that rejects
//! everything early (and so fuzzes nothing) fails here.

use bpfemu_conformance::fuzz_targets::{self, TARGETS};
use std::path::{Path, PathBuf};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn files_in(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

#[test]
fn committed_corpus_runs_clean() {
    let mut failures = Vec::new();
    let mut ran = 0;
    for &(name, target) in TARGETS {
        let target = fuzz_targets::regression_body(name, target);
        for file in files_in(&root().join("fuzz/corpus").join(name)) {
            let data = std::fs::read(&file).unwrap();
            ran += 1;
            if std::panic::catch_unwind(|| target(&data)).is_err() {
                failures.push(file.display().to_string());
            }
        }
    }
    assert!(failures.is_empty(), "inputs that still fail: {failures:?}");
    assert!(ran > 0, "the committed corpus is empty");
}

#[test]
fn every_target_has_a_fuzz_binary() {
    for (name, _) in TARGETS {
        let path = root().join("fuzz/fuzz_targets").join(format!("{name}.rs"));
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(
            text.contains(&format!("::{name}(data)")),
            "{} does not call its body",
            path.display()
        );
    }
}

#[test]
fn example_objects_load() {
    let objects = files_in(&root().join("examples/xdp/build"));
    assert!(objects.len() > 40);
    for path in objects {
        let name = path.file_name().unwrap().to_str().unwrap();
        // legacy_maps and core_ctx need what the isolated target refuses on purpose: the
        // host's vmlinux BTF for CO-RE.
        if name.starts_with("core_ctx") {
            continue;
        }
        let data = std::fs::read(&path).unwrap();
        assert!(fuzz_targets::elf_object(&data), "{name} does not load");
    }
}

#[test]
fn bundled_captures_read_cleanly() {
    for path in files_in(&root().join("examples/pcap")) {
        let data = std::fs::read(&path).unwrap();
        // malformed.pcap holds malformed packets in a well-formed capture.
        assert!(fuzz_targets::pcap(&data), "{}", path.display());
    }
}

#[test]
fn example_map_file_is_accepted() {
    let data = std::fs::read(root().join("examples/maps/l4lb.json")).unwrap();
    assert!(fuzz_targets::map_json(&data));
    assert!(!fuzz_targets::map_json(b"{\"no_such_map\": []}"));
}

#[test]
fn assemblers_and_decoder_accept_real_programs() {
    assert!(fuzz_targets::asm_kernel(b"r0 = 2\nexit\n"));
    assert!(fuzz_targets::asm_ubpf(b"mov %r0, 2\nexit\n"));
    assert!(!fuzz_targets::asm_kernel(b"r11 = 2\n"));
    let object = std::fs::read(root().join("examples/xdp/build/reflector.v4.o")).unwrap();
    let loaded = bpfemu_loader::load_bytes("r.o", &object, &Default::default()).unwrap();
    let bytes: Vec<u8> = loaded.programs[0]
        .insns
        .iter()
        .flat_map(|r| r.to_bytes())
        .collect();
    assert!(fuzz_targets::decode(&bytes));
    assert!(!fuzz_targets::decode(&[0xff; 8]));
}

#[test]
fn btf_target_reaches_the_ext_parser() {
    // Two bytes of split, then the l4lb object's .BTF and .BTF.ext would be ideal; the
    // loader exposes them parsed, so check the split logic on the empty and short cases.
    assert!(!fuzz_targets::btf(&[]));
    assert!(!fuzz_targets::btf(&[0, 0]));
}

/// The btf target's seeds are real BTF and BTF.ext (from the example objects: a little-endian
/// u16 length of the BTF, the BTF, then the BTF.ext), and they parse: the target starts deep in
/// the parser rather than at its first check.
#[test]
fn btf_seeds_are_real_btf_that_parses() {
    let seeds: Vec<PathBuf> = files_in(&root().join("fuzz/corpus/btf"))
        .into_iter()
        .filter(|p| std::fs::metadata(p).unwrap().len() > 64)
        .collect();
    assert!(seeds.len() >= 10, "{seeds:?}");
    for seed in seeds {
        let data = std::fs::read(&seed).unwrap();
        assert!(
            fuzz_targets::btf(&data),
            "{} does not parse",
            seed.display()
        );
    }
}

/// elf_object's campaign found a 12 KB object whose `.bss` header claims 4 GiB: the loader
/// allocated it. The kernel refuses array values over INT_MAX bytes (E2BIG), and so does the
/// loader now, before allocating anything.
#[test]
fn a_huge_bss_is_refused_as_the_kernel_refuses_it() {
    let data = std::fs::read(root().join("fuzz/corpus/elf_object/oom-bss-4gib")).unwrap();
    assert!(data.len() < 16 * 1024);
    let err = bpfemu_loader::load_bytes("huge-bss.o", &data, &Default::default())
        .expect_err("refused")
        .to_string();
    assert!(
        err.contains(
            "bytes: the kernel's array maps hold values of at most 2147483647 bytes (E2BIG)"
        ),
        "{err}"
    );
    assert!(err.starts_with("huge-bss.o"), "{err}");
}
