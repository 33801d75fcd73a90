//! Regenerates the bundled captures in `examples/pcap/` (deterministic: the same bytes on
//! every machine). A test checks that the committed files equal a fresh generation.
//!
//! ```sh
//! cargo run --example gen_pcaps
//! ```

fn main() -> std::io::Result<()> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/pcap");
    bpfemu::traffic::write_bundled(&dir)?;
    println!("wrote the bundled captures to {}", dir.display());
    Ok(())
}
