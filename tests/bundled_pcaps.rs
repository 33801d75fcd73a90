//! The committed captures in `examples/pcap/` are exactly what the generator writes, and read
//! back frame for frame (run `cargo run --example gen_pcaps` after changing the generator).

use bpfemu::pcap::PcapReader;
use bpfemu::traffic::{BUNDLED_EPOCH_NS, BUNDLED_GAP_NS, bundled};
use std::path::Path;

#[test]
fn committed_captures_match_the_generator() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/pcap");
    for (name, frames) in bundled() {
        let path = dir.join(name);
        let packets: Vec<_> = PcapReader::open(&path)
            .unwrap_or_else(|e| panic!("{e}"))
            .collect::<Result<_, _>>()
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(packets.len(), frames.len(), "{name}: frame count");
        for (i, (packet, frame)) in packets.iter().zip(&frames).enumerate() {
            assert_eq!(
                &packet.data, frame,
                "{name}: frame {i} differs; regenerate the captures"
            );
            assert_eq!(
                packet.ts_ns,
                BUNDLED_EPOCH_NS + i as u64 * BUNDLED_GAP_NS,
                "{name}: {i}"
            );
        }
    }
}
