#![no_main]
//! Fuzz target `map_json`: see `bpfemu_conformance::fuzz_targets::map_json`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    bpfemu_conformance::fuzz_targets::map_json(data);
});
