#![no_main]
//! Fuzz target `verifier_vs_kernel`: see `bpfemu::fuzzing::engines::verifier_vs_kernel`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    bpfemu::fuzzing::engines::verifier_vs_kernel(data);
});
