//! The bodies of bpfemu's fuzz targets (parsers here; the verifier and the JIT in
//! [`engines`], over programs from [`program`]), kept in the judges' library (test code, not
//! the product's) so that the libFuzzer targets in `fuzz/` and the regression test over the
//! committed seeds (`tests/fuzz_regressions.rs`) run the same code. Each takes arbitrary bytes and must return without panicking, aborting or
//! allocating more than the input justifies; what it returns is only for the tests' eyes.

pub mod engines;
pub mod program;

use bpfemu::pcap::PcapReader;
use bpfemu_isa::{Program, RawInsn};
use bpfemu_loader::btf::{Btf, BtfExt};
use bpfemu_loader::{LoadOptions, Object};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// A target's body: whether the input got through (a test's concern only).
pub type Target = fn(&[u8]) -> bool;

/// Every target by name, as `fuzz/fuzz_targets/NAME.rs` and `fuzz/corpus/NAME/` name them.
pub const TARGETS: &[(&str, Target)] = &[
    ("elf_object", elf_object),
    ("btf", btf),
    ("pcap", pcap),
    ("map_json", map_json),
    ("asm_kernel", asm_kernel),
    ("asm_ubpf", asm_ubpf),
    ("decode", decode),
    ("verifier_soundness", engines::verifier_soundness),
    ("verifier_vs_kernel", engines::verifier_vs_kernel),
    ("jit_vs_interp", engines::jit_vs_interp),
    ("trusted_vs_interp", engines::trusted_vs_interp),
];

/// The body the committed corpus of target `name` is held to: the target's own, or where the
/// target samples its inputs for speed, the one that skips none.
pub fn regression_body(name: &str, target: Target) -> Target {
    match name {
        "verifier_vs_kernel" => engines::verifier_vs_kernel_every_program,
        _ => target,
    }
}

/// Load options that never reach outside the input: CO-RE and `.kconfig` against files that
/// do not exist, so an object needing them fails to load instead of reading the host's BTF.
fn isolated_load_options() -> LoadOptions {
    LoadOptions {
        kernel: bpfemu_loader::Kernel::with_btf_file("/nonexistent/fuzz/vmlinux"),
        kconfig: Some(PathBuf::from("/nonexistent/fuzz/config")),
        ..LoadOptions::default()
    }
}

/// An ELF object through the whole loader (sections, BTF, BTF.ext, maps, relocations).
/// Returns whether it loaded.
pub fn elf_object(data: &[u8]) -> bool {
    bpfemu_loader::load_bytes("fuzz.o", data, &isolated_load_options()).is_ok()
}

/// BTF, then BTF.ext against it: the first two bytes say where the BTF ends.
/// Returns whether both parsed.
pub fn btf(data: &[u8]) -> bool {
    let Some((split, rest)) = data.split_first_chunk::<2>() else {
        return false;
    };
    let split = (u16::from_le_bytes(*split) as usize).min(rest.len());
    let (btf_bytes, ext_bytes) = rest.split_at(split);
    match Btf::parse(btf_bytes) {
        Ok(btf) => BtfExt::parse(ext_bytes, &btf).is_ok(),
        Err(_) => false,
    }
}

/// A pcap or pcapng capture, read to its end or its first error. Returns whether every
/// record read cleanly.
pub fn pcap(data: &[u8]) -> bool {
    let reader = match PcapReader::from_reader(
        Path::new("fuzz.pcap"),
        std::io::Cursor::new(data.to_vec()),
    ) {
        Ok(reader) => reader,
        Err(_) => return false,
    };
    for packet in reader {
        if packet.is_err() {
            return false;
        }
    }
    true
}

/// The object whose maps `map_json` fills: the l4lb example, which has hash, array, per-CPU
/// and LRU maps typed by BTF (structs, arrays, unions of addresses).
fn map_json_object() -> Option<&'static Object> {
    static OBJECT: OnceLock<Option<Object>> = OnceLock::new();
    OBJECT
        .get_or_init(|| {
            let bytes = include_bytes!("../../../examples/xdp/build/l4lb.v3.o");
            bpfemu_loader::load_bytes("l4lb.v3.o", bytes, &isolated_load_options()).ok()
        })
        .as_ref()
}

/// A `--maps` file for the l4lb example. Returns whether it was accepted.
pub fn map_json(data: &[u8]) -> bool {
    let Some(object) = map_json_object() else {
        return false;
    };
    let Ok(doc) = serde_json::from_slice::<serde_json::Value>(data) else {
        return false;
    };
    bpfemu_loader::btf::json::parse_map_contents(&doc, &object.maps, object.btf.as_ref()).is_ok()
}

/// Kernel-syntax assembly, then decoding of what it assembled. Returns whether it assembled.
pub fn asm_kernel(data: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(data) else {
        return false;
    };
    match bpfemu_isa::asm::assemble_kernel(text) {
        Ok(raw) => {
            let _ = Program::decode(raw);
            true
        }
        Err(_) => false,
    }
}

/// bpf_conformance (uBPF) assembly, then decoding. Returns whether it assembled.
pub fn asm_ubpf(data: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(data) else {
        return false;
    };
    match bpfemu_isa::asm::assemble_ubpf(text) {
        Ok(raw) => {
            let _ = Program::decode(raw);
            true
        }
        Err(_) => false,
    }
}

/// Raw instruction bytes through the strict decoder; a decoded program must re-encode to the
/// same bytes and disassemble. Returns whether it decoded.
pub fn decode(data: &[u8]) -> bool {
    let Some(raw) = RawInsn::parse_all(&data[..data.len() / 8 * 8]) else {
        return false;
    };
    match Program::decode(raw.clone()) {
        Ok(program) => {
            let mut encoded = Vec::with_capacity(raw.len());
            for (_, insn) in program.iter() {
                insn.encode_into(&mut encoded);
            }
            assert_eq!(encoded, raw, "decode -> encode changed the bytes");
            let _ = bpfemu_isa::disasm::program_text(&program);
            true
        }
        Err(_) => false,
    }
}
