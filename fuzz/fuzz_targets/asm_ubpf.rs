#![no_main]
//! Fuzz target `asm_ubpf`: see `bpfemu_conformance::fuzz_targets::asm_ubpf`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    bpfemu_conformance::fuzz_targets::asm_ubpf(data);
});
