//! The xlated program of every example program (`examples/xdp/build/*.v3.o`) against the
//! kernel's (`xlated_prog_insns` of the program libbpf loaded): equal instruction for
//! instruction once addresses are normalised (helper and kfunc call immediates, `ld_imm64`
//! map and global-data references, the per-CPU address of an inlined processor id), except
//! for the programs named in `DIFFERENT` with the reason.
//!
//! Skipped with a message when bpf() is out of reach, unless `BPFEMU_REQUIRE_KERNEL=1`.

use bpfemu_conformance::libbpf::{LibbpfObject, LogOptions, kernel_or_skip};
use bpfemu_isa::RawInsn;
use bpfemu_kernel::{BPF_LOG_LEVEL1, prog_xlated};
use bpfemu_verifier::{Options, ProgramInput, verify};
use std::path::Path;

/// Programs whose xlated form bpfemu does not produce yet, and why.
const DIFFERENT: &[(&str, &str)] = &[(
    "bpf_loop.v3/xdp_ipv6_exthdr",
    "the kernel inlines bpf_loop with a constant callback (optimize_bpf_loop); bpfemu does not yet",
)];

fn normalise(insns: &[RawInsn]) -> Vec<RawInsn> {
    let mut out = insns.to_vec();
    for i in 0..out.len() {
        let insn = out[i];
        if insn.code == 0x85 && matches!(insn.src, 0 | 2) {
            out[i].imm = 0;
        }
        if insn.code == 0x18 && matches!(insn.src, 1..=3) && i + 1 < out.len() {
            out[i].imm = 0;
            out[i + 1].imm = 0;
        }
        let percpu_next = out
            .get(i + 1)
            .is_some_and(|n| n.code == 0xbf && n.off == -1);
        if insn.code == 0xb7 && percpu_next {
            out[i].imm = 0;
        }
    }
    out
}

fn first_difference(a: &[RawInsn], b: &[RawInsn]) -> String {
    let at = a
        .iter()
        .zip(b)
        .position(|(x, y)| x != y)
        .unwrap_or(a.len().min(b.len()));
    format!(
        "{} vs {} insns, first difference at {at}: kernel {:?}, bpfemu {:?}",
        a.len(),
        b.len(),
        a.get(at).map(|x| format!("{:016x}", x.to_u64())),
        b.get(at).map(|x| format!("{:016x}", x.to_u64()))
    )
}

/// Loads each object in `paths` with libbpf and compares the xlated form of each program
/// bpfemu accepts with the kernel's: how many were compared, and the differences.
fn compare_objects(paths: &[std::path::PathBuf]) -> (usize, Vec<String>) {
    let mut failures = Vec::new();
    let mut compared = 0;
    for path in paths {
        let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
        let Ok(mut kobj) = LibbpfObject::open_file(path) else {
            continue;
        };
        let outcome = kobj.load(&LogOptions {
            level: BPF_LOG_LEVEL1,
            size: 1 << 20,
        });
        if outcome.result.is_err() {
            continue;
        }
        let obj = bpfemu_loader::load_file(path, &Default::default()).expect("loads");
        for prog in &obj.programs {
            let name = format!("{stem}/{}", prog.name);
            let Some(fd) = kobj.program_fd(&prog.name) else {
                continue;
            };
            let theirs = normalise(&prog_xlated(fd).expect("xlated"));
            let verdict = verify(&ProgramInput::new(&obj, prog), &Options::default());
            let Some(x) = verdict.xlated() else {
                continue;
            };
            let ours = normalise(&x.insns);
            compared += 1;
            let known = DIFFERENT.iter().find(|(n, _)| *n == name);
            match (ours == theirs, known) {
                (true, None) | (false, Some(_)) => {}
                (false, None) => {
                    failures.push(format!("{name}: {}", first_difference(&theirs, &ours)))
                }
                (true, Some(_)) => failures.push(format!("{name}: listed in DIFFERENT but equal")),
            }
        }
    }
    (compared, failures)
}

#[test]
fn corpus_xlated_matches_the_kernel() {
    if !kernel_or_skip("corpus_xlated_matches_the_kernel") {
        return;
    }
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/xdp/build");
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .expect("the corpus is built")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.to_string_lossy().ends_with(".v3.o"))
        .collect();
    paths.sort();
    let (compared, failures) = compare_objects(&paths);
    println!("{compared} programs compared");
    assert!(compared >= 10, "only {compared} programs compared");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Loads through socket pointers (`struct bpf_sock` fields whole and narrow, an XSKMAP's
/// `struct bpf_xdp_sock`), rewritten into the kernel's `struct sock` and `struct xdp_sock`.
#[test]
fn socket_loads_xlated_match_the_kernel() {
    if !kernel_or_skip("socket_loads_xlated_match_the_kernel") {
        return;
    }
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data/sockets");
    let paths = ["sk_lookup.o", "xsk_queue.o"].map(|f| dir.join(f));
    let (compared, failures) = compare_objects(&paths);
    assert_eq!(compared, 2, "both programs are accepted and compared");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
