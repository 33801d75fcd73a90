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
//!     target/debug/examples/libbpf_verdicts OBJ [--log2] [--map-size NAME=N]...
//!
//! `--map-size NAME=N` sizes a map the object declares with `max_entries` 0 (xdp-tools size
//! theirs at run time), as `bpfemu verify --map-size` does.
//!
//! `--log2` also prints each program's level-2 log (every state) to standard error, to read
//! the kernel's register states beside bpfemu's `verify --log-level 2`.

use bpfemu_conformance::libbpf::{Level, LibbpfObject, LogOptions};
use std::io::Write;
use std::path::Path;

/// What the command line asks beside the object.
#[derive(Default)]
struct Options {
    log2: bool,
    /// `max_entries` for maps declared with 0 (`--map-size NAME=N`), as a loader sizes them.
    map_sizes: Vec<(String, u32)>,
}

fn parse_options(args: &[String]) -> Result<Options, String> {
    let mut options = Options::default();
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--log2" => options.log2 = true,
            "--map-size" => {
                let spec = args.next().ok_or("--map-size needs NAME=N")?;
                let (name, n) = spec
                    .split_once('=')
                    .and_then(|(name, n)| Some((name, n.parse::<u32>().ok()?)))
                    .ok_or_else(|| format!("--map-size {spec}: expected NAME=N"))?;
                options.map_sizes.push((name.to_owned(), n));
            }
            other => return Err(format!("unknown option {other}")),
        }
    }
    Ok(options)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(path) = args.first() else {
        eprintln!("usage: libbpf_verdicts OBJ [--log2] [--map-size NAME=N]...");
        std::process::exit(2);
    };
    let options = match parse_options(&args[1..]) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("libbpf_verdicts: {e}");
            std::process::exit(2);
        }
    };
    let path = Path::new(path);
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
    let mut out = std::io::stdout().lock();
    for name in &names {
        let line = match judge(path, name, &names, &options) {
            Ok(v) => v,
            Err(e) => serde_json::json!({"program": name, "accepted": false, "error": e}),
        };
        // A reader that stopped reading (`| head`) ends the run.
        if writeln!(out, "{line}").is_err() {
            return;
        }
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

/// Gives each map named in `sizes` that the object declares with `max_entries` 0 its size;
/// names the object does not have, or maps it sizes itself, are left alone (one list serves
/// a directory of objects).
fn size_maps(obj: &mut LibbpfObject, sizes: &[(String, u32)]) -> Result<(), String> {
    for m in obj.maps() {
        let size = sizes.iter().find(|(name, _)| *name == m.name);
        if let Some((name, n)) = size.filter(|_| m.max_entries == 0) {
            obj.set_max_entries(name, *n)
                .map_err(|e| format!("libbpf: {e}"))?;
        }
    }
    Ok(())
}

/// The largest log buffer tried: a level-2 log of a program near the 1M-instruction limit
/// runs to hundreds of MiB.
const LOG_MAX: usize = 1 << 30;

fn judge(
    path: &Path,
    name: &str,
    all: &[String],
    opts: &Options,
) -> Result<serde_json::Value, String> {
    let log2 = opts.log2;
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
        size_maps(&mut obj, &opts.map_sizes)?;
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
