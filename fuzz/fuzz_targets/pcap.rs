#![no_main]
//! Fuzz target `pcap`: see `bpfemu_conformance::fuzz_targets::pcap`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    bpfemu_conformance::fuzz_targets::pcap(data);
});
