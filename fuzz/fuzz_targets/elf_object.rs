#![no_main]
//! Fuzz target `elf_object`: see `bpfemu::fuzzing::elf_object`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    bpfemu::fuzzing::elf_object(data);
});
