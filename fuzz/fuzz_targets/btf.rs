#![no_main]
//! Fuzz target `btf`: see `bpfemu::fuzzing::btf`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    bpfemu::fuzzing::btf(data);
});
