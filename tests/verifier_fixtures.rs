//! Verdicts the kernel's own selftests found bpfemu getting wrong, kept as small C objects in
//! `tests/data/verifier/` (each source says what it holds and how it was built): every
//! program of each must get the running kernel's verdict and final error line from bpfemu,
//! and each object holds a program the kernel rejects and one it accepts, so the comparison
//! is never vacuous. Skipped when bpf() is out of reach, unless `BPFEMU_REQUIRE_KERNEL=1`.

#[allow(dead_code)]
mod cli_support;

#[test]
fn every_fixture_gets_the_kernels_verdicts() {
    if !cli_support::kernel_or_skip("every_fixture_gets_the_kernels_verdicts") {
        return;
    }
    let dir = cli_support::root().join("tests/data/verifier");
    let mut objects: Vec<_> = std::fs::read_dir(&dir)
        .expect("tests/data/verifier")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "o"))
        .collect();
    objects.sort();
    assert!(!objects.is_empty(), "no fixtures in {}", dir.display());
    let load = bpfemu::load_args::LoadArgs::default().options();
    let mut failures = Vec::new();
    for object in &objects {
        let verdicts = bpfemu::diff::verify_in_kernel(object, &load).expect("loads");
        let name = object.file_name().expect("name").to_string_lossy();
        for v in verdicts.iter().filter(|v| !v.agree) {
            failures.push(format!(
                "{name} {}: kernel {:?}, bpfemu {:?}",
                v.program, v.kernel.error, v.bpfemu.error
            ));
        }
        let kernel_accepts = |a: bool| verdicts.iter().any(|v| v.kernel.accepted == a);
        assert!(
            kernel_accepts(true) && kernel_accepts(false),
            "{name}: a fixture holds a program the kernel accepts and one it rejects"
        );
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
