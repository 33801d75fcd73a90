//! The example corpus (`examples/xdp/build/*.o`, and `tests/data/verify/*.o`) against the running kernel: every program is
//! loaded by libbpf into the kernel and by bpfemu's loader into bpfemu's verifier; verdicts and
//! final error lines must be equal except for the programs listed (as `corpus/OBJECT/PROGRAM`)
//! in `verifier/probes/KNOWN_DIFFERENCES`, which must still differ. Prints both
//! processed-instruction counts and the shares.
//!
//! Skipped with a message when bpf() is out of reach, unless `BPFEMU_REQUIRE_KERNEL=1`.

mod common;

use bpfemu_conformance::libbpf::{LibbpfObject, LoadOutcome, LogOptions, kernel_or_skip};
use bpfemu_kernel::BPF_LOG_STATS;
use bpfemu_verifier::{Options, ProgramInput, verify};
use common::kernel_side::{Judgement, judgement_from_log};
use common::report::Tally;
use common::{bpfemu_side, known};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The example corpus and the CLI's test objects (which include programs the kernel rejects).
fn corpus_objects() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut objects: Vec<PathBuf> = ["examples/xdp/build", "tests/data/verify"]
        .iter()
        .flat_map(|dir| std::fs::read_dir(root.join(dir)).expect("the objects are built"))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "o"))
        .collect();
    objects.sort();
    objects
}

const LOG: LogOptions = LogOptions {
    level: BPF_LOG_STATS,
    size: 16 << 20,
};

/// The kernel's verdict on every program of the object, by program name; `Err` when libbpf
/// cannot open the object (legacy `maps` sections: libbpf 1.x refuses them). When the object as
/// a whole fails, each program is loaded alone so that one rejection hides no other verdict.
fn kernel_verdicts(path: &Path) -> Result<BTreeMap<String, Judgement>, String> {
    let open = || LibbpfObject::open_file(path).unwrap_or_else(|e| panic!("{e}"));
    let mut obj = LibbpfObject::open_file(path).map_err(|e| e.to_string())?;
    let programs: Vec<String> = obj
        .programs()
        .into_iter()
        .filter(|p| p.autoload)
        .map(|p| p.name)
        .collect();
    let outcome = obj.load(&LOG);
    if outcome.result.is_ok() {
        return Ok(verdicts_of(&outcome));
    }
    drop(obj);
    let mut out = BTreeMap::new();
    for name in &programs {
        let mut one = open();
        for other in programs.iter().filter(|o| *o != name) {
            one.set_autoload(other, false).expect("autoload");
        }
        let outcome = one.load(&LOG);
        let verdict = verdicts_of(&outcome)
            .remove(name)
            .unwrap_or_else(|| Judgement {
                accepted: false,
                message: Some(format!("libbpf failed before the kernel: {outcome:?}")),
                processed: None,
            });
        out.insert(name.clone(), verdict);
    }
    Ok(out)
}

fn verdicts_of(outcome: &LoadOutcome) -> BTreeMap<String, Judgement> {
    outcome
        .programs
        .iter()
        .map(|p| (p.name.clone(), judgement_from_log(&p.log, p.loaded)))
        .collect()
}

#[test]
fn corpus_verdicts_match_the_kernel() {
    if !kernel_or_skip("corpus_verdicts_match_the_kernel") {
        return;
    }
    let mut tally = Tally::default();
    let mut names = Vec::new();
    let mut not_compared = Vec::new();
    for path in corpus_objects() {
        let stem = path
            .file_stem()
            .and_then(|s| s.to_str())
            .expect("utf-8 name");
        let obj = bpfemu_loader::load_file(&path, &Default::default())
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let kernel = match kernel_verdicts(&path) {
            Ok(k) => k,
            Err(e) => {
                not_compared.push(format!("{stem}: {e}"));
                continue;
            }
        };
        for prog in &obj.programs {
            let name = format!("corpus/{stem}/{}", prog.name);
            let Some(k) = kernel.get(&prog.name) else {
                panic!("{name}: libbpf did not load this program");
            };
            let verdict = verify(&ProgramInput::new(&obj, prog), &Options::default());
            tally.record(&name, k, &bpfemu_side::judgement(&verdict));
            names.push(name);
        }
    }
    println!("{:<64} {:>7} {:>7}", "program", "kernel", "bpfemu");
    for row in &tally.rows {
        println!("{row}");
    }
    println!("{}", tally.summary("example corpus"));
    for n in &not_compared {
        println!("not compared (the kernel cannot be asked through libbpf): {n}");
    }
    assert!(not_compared.len() <= 3, "too many objects not compared");
    if known::update_requested() {
        known::rewrite("corpus/", &[], &tally.differing, &names);
        return;
    }
    let complaints = known::check(&known::load("corpus/", &[]), &tally.differing, &names);
    assert!(
        complaints.is_empty(),
        "{} problems with {}:\n{}\n{}",
        complaints.len(),
        known::known_differences_path().display(),
        complaints.join("\n"),
        known::UPDATE_HINT
    );
}
