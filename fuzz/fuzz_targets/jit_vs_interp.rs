#![no_main]
//! Fuzz target `jit_vs_interp`: see `bpfemu::fuzzing::engines::jit_vs_interp`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    bpfemu::fuzzing::engines::jit_vs_interp(data);
});
