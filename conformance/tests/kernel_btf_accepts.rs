//! The BTF bpfemu's loader hands the kernel (an object's BTF after libbpf's fix-ups: DATASEC
//! sizes and offsets, `.kconfig` layout, `.ksyms` externs turned into variables) loads into the
//! running kernel for every object of the corpus and the test data, as libbpf's does. A
//! refused BTF silently costs `bpfemu diff` its kernel side of maps with spin locks, timers or
//! kptrs and of global functions (they are then created and loaded without BTF).
//!
//! Skipped with a message when bpf() is out of reach, unless `BPFEMU_REQUIRE_KERNEL=1`.

use bpfemu_conformance::libbpf::kernel_or_skip;
use bpfemu_kernel as kernel;
use std::path::{Path, PathBuf};

fn objects() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut objects: Vec<PathBuf> = ["examples/xdp/build", "tests/data/verify", "tests/data/iter"]
        .iter()
        .flat_map(|dir| std::fs::read_dir(root.join(dir)).expect("test objects"))
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "o"))
        .collect();
    objects.sort();
    objects
}

#[test]
fn the_kernel_accepts_the_btf_bpfemu_gives_it() {
    if !kernel_or_skip("the_kernel_accepts_the_btf_bpfemu_gives_it") {
        return;
    }
    let mut refused = Vec::new();
    let mut loaded = 0;
    for path in objects() {
        // Objects the loader refuses (legacy map sections) have their own tests.
        let Ok(obj) = bpfemu_loader::load_file(&path, &Default::default()) else {
            continue;
        };
        let Some(btf) = &obj.btf else { continue };
        match kernel::btf_load(&btf.to_kernel_bytes().bytes) {
            Ok(_) => loaded += 1,
            Err((errno, log)) => refused.push(format!(
                "{}: errno {errno}: {}",
                path.display(),
                log.lines().last().unwrap_or_default()
            )),
        }
    }
    assert!(loaded >= 60, "{loaded} objects with BTF");
    assert!(refused.is_empty(), "{}", refused.join("\n"));
}
