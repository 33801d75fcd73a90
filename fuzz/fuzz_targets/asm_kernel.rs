#![no_main]
//! Fuzz target `asm_kernel`: see `bpfemu_conformance::fuzz_targets::asm_kernel`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    bpfemu_conformance::fuzz_targets::asm_kernel(data);
});
