//! Pruning fidelity: for every program of the example corpus (`examples/xdp/build/*.o`) the
//! number of instructions bpfemu's walk processes equals the running kernel's
//! (`processed N insns`), except for the programs listed in `COUNTS_DIFFER` with the reason;
//! those must still differ, so the list shrinks as pruning gets closer to 6.18's.
//!
//! Skipped with a message when bpf() is out of reach, unless `BPFEMU_REQUIRE_KERNEL=1`.

mod common;

use bpfemu_conformance::libbpf::{LibbpfObject, LogOptions, kernel_or_skip};
use bpfemu_kernel::BPF_LOG_STATS;
use bpfemu_loader::{LoadOptions, load_file};
use bpfemu_verifier::{Options, ProgramInput, verify};
use common::kernel_side::judgement_from_log;
use std::path::{Path, PathBuf};

/// Programs (`OBJECT/PROGRAM`) whose count differs from the kernel's, and why.
const COUNTS_DIFFER: &[(&str, &str)] = &[];

fn corpus() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/xdp/build");
    let mut objects: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("the corpus is built")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "o"))
        .filter(|p| !p.to_string_lossy().contains("legacy_maps"))
        .collect();
    objects.sort();
    objects
}

#[test]
fn corpus_processed_counts_match_the_kernel() {
    if !kernel_or_skip("corpus_processed_counts_match_the_kernel") {
        return;
    }
    let mut problems = Vec::new();
    let (mut equal, mut total) = (0, 0);
    for path in corpus() {
        let stem = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or("?")
            .to_string();
        let mut kobj = LibbpfObject::open_file(&path).unwrap_or_else(|e| panic!("{e}"));
        let outcome = kobj.load(&LogOptions {
            level: BPF_LOG_STATS,
            size: 16 << 20,
        });
        let obj = load_file(&path, &LoadOptions::default()).unwrap_or_else(|e| panic!("{e}"));
        for prog in &obj.programs {
            let name = format!("{stem}/{}", prog.name);
            let Some(klog) = outcome.programs.iter().find(|p| p.name == prog.name) else {
                continue;
            };
            let kernel = judgement_from_log(&klog.log, klog.loaded).processed;
            let ours = verify(&ProgramInput::new(&obj, prog), &Options::default());
            let ours = Some(ours.stats.processed_insns);
            total += 1;
            let listed = COUNTS_DIFFER.iter().any(|(n, _)| *n == name);
            println!("{name:<40} kernel {kernel:>8?} bpfemu {ours:>8?}");
            match (kernel == ours, listed) {
                (true, false) => equal += 1,
                (false, true) => {}
                (true, true) => problems.push(format!("{name}: listed, but the counts agree now")),
                (false, false) => problems.push(format!(
                    "{name}: kernel processed {kernel:?}, bpfemu {ours:?}"
                )),
            }
        }
    }
    println!("processed counts equal for {equal} of {total} programs");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
