#![no_main]
//! Fuzz target `trusted_vs_interp`: see `bpfemu::fuzzing::engines::trusted_vs_interp`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    bpfemu::fuzzing::engines::trusted_vs_interp(data);
});
