#![no_main]
//! Fuzz target `btf`: see `bpfemu_conformance::fuzz_targets::btf`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    bpfemu_conformance::fuzz_targets::btf(data);
});
