#![no_main]
//! Fuzz target `asm_ubpf`: see `bpfemu::fuzzing::asm_ubpf`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    bpfemu::fuzzing::asm_ubpf(data);
});
