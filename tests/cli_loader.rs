//! `bpfemu inspect` and `bpfemu disasm` on every object of the example corpus, and their answer
//! to bad input.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn bpfemu(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_bpfemu"))
        .args(args)
        .output()
        .expect("bpfemu runs")
}

fn corpus() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/xdp/build");
    let mut objects: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("corpus built")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "o"))
        .collect();
    objects.sort();
    assert!(objects.len() >= 54, "only {} corpus objects", objects.len());
    objects
}

#[test]
fn inspect_and_disasm_every_corpus_object() {
    for object in corpus() {
        let path = object.to_str().unwrap();
        let out = bpfemu(&["inspect", "--json", path]);
        assert!(
            out.status.success(),
            "{path}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("inspect JSON");
        let programs = doc["programs"].as_array().expect("programs");
        assert!(!programs.is_empty(), "{path}: no programs");

        let out = bpfemu(&["disasm", path]);
        assert!(
            out.status.success(),
            "{path}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8(out.stdout).unwrap();
        // Every instruction of every program is printed once as `N: (op) text`; an ld_imm64
        // takes two slots and one line.
        for program in programs {
            let name = program["name"].as_str().unwrap();
            assert!(
                text.contains(&format!("{name} (section ")),
                "{path}: no {name} header"
            );
        }
        let listed = text.lines().filter(|l| is_insn_line(l)).count();
        let slots: u64 = programs.iter().map(|p| p["insns"].as_u64().unwrap()).sum();
        assert!(
            listed > 0 && listed as u64 <= slots,
            "{path}: {listed} lines for {slots} slots"
        );
        assert!(text.contains("\n; "), "{path}: no source lines");
    }
}

fn is_insn_line(line: &str) -> bool {
    let trimmed = line.trim_start();
    trimmed
        .split_once(": (")
        .is_some_and(|(n, _)| n.chars().all(|c| c.is_ascii_digit()))
}

#[test]
fn bad_objects_are_clear_errors_with_exit_two() {
    let dir = std::env::temp_dir().join(format!("bpfemu-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let garbage = dir.join("garbage.o");
    std::fs::write(&garbage, b"not an object").unwrap();
    let real = std::fs::read(&corpus()[0]).unwrap();
    let truncated = dir.join("truncated.o");
    std::fs::write(&truncated, &real[..200]).unwrap();
    for (path, words) in [(&garbage, "no ELF header"), (&truncated, "corrupt ELF")] {
        for command in ["inspect", "disasm"] {
            let out = bpfemu(&[command, path.to_str().unwrap()]);
            assert_eq!(out.status.code(), Some(2), "{command} {}", path.display());
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(
                err.contains(path.to_str().unwrap()) && err.contains(words),
                "{err}"
            );
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn disasm_xlated_shows_the_rewritten_program() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let obj = root.join("examples/xdp/build/tailcall.v3.o");
    let out = bpfemu(&[
        "disasm",
        "--xlated",
        "--prog",
        "xdp_stage_ipv4",
        obj.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    // xdp_md->data becomes a load of xdp_buff->data; the per-CPU array lookup is inlined.
    assert!(text.contains("r8 = *(u64 *)(r1 +0)"), "{text}");
    assert!(text.contains("r0 = &(void __percpu *)(r0)"), "{text}");
    assert!(!text.contains("call bpf_map_lookup_elem"), "{text}");
    // A program the verifier rejects has no xlated form.
    let bad = root.join("tests/data/verify/unchecked_read.o");
    let out = bpfemu(&["disasm", "--xlated", bad.to_str().unwrap()]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("rejected by the verifier"), "{err}");
}
