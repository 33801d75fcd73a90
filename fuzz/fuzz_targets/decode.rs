#![no_main]
//! Fuzz target `decode`: see `bpfemu::fuzzing::decode`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    bpfemu::fuzzing::decode(data);
});
