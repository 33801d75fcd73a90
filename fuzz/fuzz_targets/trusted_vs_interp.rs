#![no_main]
//! Fuzz target `trusted_vs_interp`: see `bpfemu_conformance::fuzz_targets::engines::trusted_vs_interp`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    bpfemu_conformance::fuzz_targets::engines::trusted_vs_interp(data);
});
