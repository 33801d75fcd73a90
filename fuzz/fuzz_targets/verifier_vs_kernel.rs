#![no_main]
//! Fuzz target `verifier_vs_kernel`: see `bpfemu_conformance::fuzz_targets::engines::verifier_vs_kernel`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    bpfemu_conformance::fuzz_targets::engines::verifier_vs_kernel(data);
});
