#![no_main]
//! Fuzz target `verifier_soundness`: see `bpfemu_conformance::fuzz_targets::engines::verifier_soundness`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    bpfemu_conformance::fuzz_targets::engines::verifier_soundness(data);
});
