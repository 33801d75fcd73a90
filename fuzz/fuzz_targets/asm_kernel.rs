#![no_main]
//! Fuzz target `asm_kernel`: see `bpfemu::fuzzing::asm_kernel`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    bpfemu::fuzzing::asm_kernel(data);
});
