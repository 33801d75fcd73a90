#![no_main]
//! Fuzz target `map_json`: see `bpfemu::fuzzing::map_json`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    bpfemu::fuzzing::map_json(data);
});
