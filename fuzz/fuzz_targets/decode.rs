#![no_main]
//! Fuzz target `decode`: see `bpfemu_conformance::fuzz_targets::decode`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    bpfemu_conformance::fuzz_targets::decode(data);
});
