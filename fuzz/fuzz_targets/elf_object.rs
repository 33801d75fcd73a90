#![no_main]
//! Fuzz target `elf_object`: see `bpfemu_conformance::fuzz_targets::elf_object`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    bpfemu_conformance::fuzz_targets::elf_object(data);
});
