#![no_main]
//! Fuzz target `pcap`: see `bpfemu::fuzzing::pcap`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    bpfemu::fuzzing::pcap(data);
});
