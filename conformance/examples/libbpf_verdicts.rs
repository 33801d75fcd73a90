//! The running kernel's verdict on every program of an object, as libbpf 1.7 loads it: each
//! program on its own (the others' autoload off), verifier log level 1 with statistics. One
//! JSON object per line: `program`, `accepted`, `error` (the log's last meaningful line, or
//! libbpf's last warning when the kernel logged nothing), `processed_insns`.
//!
//! A program in a pre-1.0 XDP section (`SEC("xdp_vlan01")`, which libbpf 1.x cannot type) is
//! loaded as XDP.
//!
//! The verdict is the kernel's answer to the program's own `BPF_PROG_LOAD`: a program the
//! kernel accepted counts as accepted even when libbpf fails the object afterwards (a prog
//! array whose initial slots name programs this run does not load) and so closes its fd.
//!
//! A judge for `scripts/verifier_selftests.sh --libbpf`, beside `bpfemu diff --verifier`, which
//! loads through bpfemu's own loader. Needs root.
//!
//!     cargo build -p bpfemu-conformance --example libbpf_verdicts
//!     target/debug/examples/libbpf_verdicts OBJ [--log2]
//!
//! `--log2` also prints each program's level-2 log (every state) to standard error, to read
//! the kernel's register states beside bpfemu's `verify --log-level 2`.

use bpfemu_conformance::libbpf::{Level, LibbpfObject, LogOptions};
use std::path::Path;

fn main() {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: libbpf_verdicts OBJ [--log2]");
        std::process::exit(2);
    };
    let log2 = std::env::args().nth(2).as_deref() == Some("--log2");
    let path = Path::new(&path);
    let names: Vec<String> = match LibbpfObject::open_file(path) {
        Ok(obj) => obj.programs().into_iter().map(|p| p.name).collect(),
        Err(e) => {
            eprintln!(
                "libbpf_verdicts: {}: libbpf cannot open it: {e}",
                path.display()
            );
            std::process::exit(2);
        }
    };
    for name in &names {
        let line = match judge(path, name, &names, log2) {
            Ok(v) => v,
            Err(e) => serde_json::json!({"program": name, "accepted": false, "error": e}),
        };
        println!("{line}");
    }
}

/// An XDP program whose section libbpf 1.x cannot type (`SEC("xdp_vlan01")`, a pre-1.0
/// name) is loaded as XDP, as iproute2 and xdp-loader load it and as `bpfemu verify` judges
/// it (with a warning): the question is the kernel's verdict, not libbpf's naming rules.
fn set_type_of_pre_1_0_xdp_sections(obj: &mut LibbpfObject) -> Result<(), String> {
    const BPF_PROG_TYPE_UNSPEC: u32 = 0;
    const BPF_PROG_TYPE_XDP: u32 = 6;
    for p in obj.programs() {
        if p.prog_type == BPF_PROG_TYPE_UNSPEC && p.section.starts_with("xdp") {
            obj.set_program_type(&p.name, BPF_PROG_TYPE_XDP, 0)
                .map_err(|e| format!("libbpf: {e}"))?;
        }
    }
    Ok(())
}

/// The largest log buffer tried: a level-2 log of a program near the 1M-instruction limit
/// runs to hundreds of MiB.
const LOG_MAX: usize = 1 << 30;

fn judge(path: &Path, name: &str, all: &[String], log2: bool) -> Result<serde_json::Value, String> {
    let mut options = LogOptions::default();
    if log2 {
        options.level |= bpfemu_kernel::BPF_LOG_LEVEL2;
    }
    // The kernel fails a load whose log overflows the buffer with ENOSPC, which is no verdict:
    // load again with a larger one.
    let out = loop {
        let mut obj = LibbpfObject::open_file(path).map_err(|e| format!("libbpf: {e}"))?;
        for other in all.iter().filter(|n| *n != name) {
            obj.set_autoload(other, false)
                .map_err(|e| format!("libbpf: {e}"))?;
        }
        set_type_of_pre_1_0_xdp_sections(&mut obj)?;
        let out = obj.load(&options);
        if out.result != Err(libc::ENOSPC) || options.size >= LOG_MAX {
            break out;
        }
        options.size *= 4;
    };
    let log = out
        .programs
        .iter()
        .find(|p| p.name == name)
        .map(|p| (p.loaded, p.log.clone()));
    let (loaded, log) = log.unwrap_or((false, String::new()));
    if log2 {
        eprintln!("=== {name}\n{log}");
    }
    // libbpf 1.7 warns "prog 'NAME': BPF program load failed: ..." when the kernel refuses the
    // program, and "prog 'NAME': failed to load: ..." when it or libbpf refused it.
    let refused = out.messages.iter().any(|m| {
        m.level == Level::Warn
            && (m
                .text
                .contains(&format!("prog '{name}': BPF program load failed"))
                || m.text.contains(&format!("prog '{name}': failed to load")))
    });
    let verified = log
        .lines()
        .any(|l| l.starts_with("processed ") && l.contains(" insns"));
    let loaded = loaded || (verified && !refused);
    let warning = out
        .messages
        .iter()
        .rev()
        .find(|m| m.level == Level::Warn)
        .map(|m| m.text.trim().to_owned());
    let error = (!loaded).then(|| {
        if log.trim().is_empty() {
            format!(
                "libbpf: {}",
                warning.unwrap_or_else(|| "load failed".into())
            )
        } else {
            bpfemu_kernel::verifier_error_line(&log)
        }
    });
    let processed = log
        .lines()
        .rev()
        .find(|l| l.starts_with("processed ") && l.contains(" insns"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse::<u64>().ok());
    Ok(serde_json::json!({
        "program": name,
        "accepted": loaded,
        "error": error,
        "processed_insns": processed,
    }))
}
