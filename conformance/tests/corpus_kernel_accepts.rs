//! Every object of the XDP corpus (`examples/xdp/build/*.o`, built at -mcpu v2/v3/v4) loads
//! through libbpf 1.7 into the running kernel, and the verifier accepts every program: the
//! corpus is only a fair test of bpfemu's verifier if the kernel agrees it is valid.
//!
//! `legacy_maps.*` is the exception by design: libbpf 1.x refuses the pre-1.0 `maps` section
//! while opening, and that refusal (with its message) is what is checked.

use bpfemu_conformance::libbpf::{self, LibbpfError, LibbpfObject, LogOptions};
use std::path::{Path, PathBuf};

const LEGACY_MESSAGE: &str =
    "legacy map definitions in 'maps' section are not supported by libbpf v1.0+";

fn corpus() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/xdp/build");
    let dir = dir.canonicalize().unwrap_or(dir);
    let mut objects: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "o"))
        .collect();
    objects.sort();
    assert!(!objects.is_empty(), "no objects in {}", dir.display());
    objects
}

fn is_legacy(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with("legacy_maps."))
}

/// Loads one object; `Err` describes what failed, with the verifier log tail.
fn load(path: &Path) -> Result<usize, String> {
    let mut obj = LibbpfObject::open_file(path).map_err(|e| e.to_string())?;
    let outcome = obj.load(&LogOptions::default());
    if let Err(errno) = outcome.result {
        return Err(format!("errno {errno}\n{}", outcome.failure_tail(30)));
    }
    if outcome.programs.is_empty() || outcome.programs.iter().any(|p| !p.loaded) {
        return Err(format!(
            "not every program loaded\n{}",
            outcome.failure_tail(30)
        ));
    }
    for p in &outcome.programs {
        assert!(
            obj.program_fd(&p.name).is_some(),
            "{}: {} has no fd",
            path.display(),
            p.name
        );
    }
    Ok(outcome.programs.len())
}

fn check_legacy_refused(path: &Path) -> Result<(), String> {
    match LibbpfObject::open_file(path) {
        Ok(_) => Err("libbpf opened a legacy `maps` object".into()),
        Err(LibbpfError::Open {
            errno, messages, ..
        }) => {
            let said = messages.iter().any(|m| m.text.contains(LEGACY_MESSAGE));
            if errno == libc::EOPNOTSUPP && said {
                Ok(())
            } else {
                Err(format!("refused differently: errno {errno}, {messages:?}"))
            }
        }
        Err(e) => Err(format!("unexpected error: {e}")),
    }
}

#[test]
fn every_corpus_object_is_accepted_by_the_kernel() {
    if !libbpf::kernel_or_skip("corpus_kernel_accepts") {
        return;
    }
    let mut failures = Vec::new();
    let (mut objects, mut programs, mut legacy) = (0, 0, 0);
    for path in corpus() {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let result = if is_legacy(&path) {
            check_legacy_refused(&path).map(|()| legacy += 1)
        } else {
            load(&path).map(|n| {
                objects += 1;
                programs += n;
            })
        };
        if let Err(why) = result {
            failures.push(format!("== {name}: {why}"));
        }
    }
    eprintln!(
        "{objects} objects loaded, {programs} programs accepted, {legacy} legacy objects refused as expected"
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
