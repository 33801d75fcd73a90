#![no_main]
//! Fuzz target `verifier_soundness`: see `bpfemu::fuzzing::engines::verifier_soundness`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    bpfemu::fuzzing::engines::verifier_soundness(data);
});
