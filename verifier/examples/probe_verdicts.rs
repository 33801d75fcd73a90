//! The running kernel's verdict on probe files, one JSON line per probe: what a kernel booted
//! in a VM says, for comparing bpfemu's profile of that kernel with the kernel itself.
//!
//! ```text
//! cargo run -p bpfemu-verifier --example probe_verdicts -- verifier/probes/kernels.probes
//! probe_verdicts DIR_OR_FILE...
//! ```
//!
//! Each line: `{"name":…,"accepted":…,"error":…,"processed_insns":…}` (`error` the log's final
//! line for a rejection, else null; `processed_insns` null when the verifier never said it).
//! A probe whose maps the kernel refuses is a rejection whose error names the map and errno,
//! as a loader would report it. Exit 2 when an argument cannot be read or parsed.

// The probe format and the kernel's side are the probe test's own modules, shared as they are
// (`kernel_side` names the format `super::probe`: both sit at the crate's root here).
#[allow(dead_code)]
#[path = "../tests/common/kernel_side.rs"]
mod kernel_side;
#[allow(dead_code)]
#[path = "../tests/common/probe.rs"]
mod probe;

use kernel_side::Judgement;
use probe::Probe;
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.is_empty() {
        eprintln!("usage: probe_verdicts PROBE_FILE_OR_DIR...");
        return ExitCode::from(2);
    }
    let mut probes = Vec::new();
    for arg in &args {
        match load(Path::new(arg)) {
            Ok(found) => probes.extend(found),
            Err(e) => {
                eprintln!("probe_verdicts: {e}");
                return ExitCode::from(2);
            }
        }
    }
    let mut out = std::io::stdout().lock();
    for p in &probes {
        let judgement = kernel_side::judge(p).unwrap_or_else(|refused| Judgement {
            accepted: false,
            message: Some(refused),
            processed: None,
        });
        // A closed stdout (`| head`) ends the run quietly.
        if writeln!(out, "{}", json_line(&p.name, &judgement)).is_err() {
            break;
        }
    }
    ExitCode::SUCCESS
}

/// The probes of one file, or of every `*.probes` file in a directory.
fn load(path: &Path) -> Result<Vec<Probe>, String> {
    if path.is_dir() {
        return probe::load_all(path).map_err(|e| e.to_string());
    }
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let rule = path.file_stem().and_then(|s| s.to_str()).unwrap_or("?");
    probe::parse_file(rule, &path.display().to_string(), &text).map_err(|e| e.to_string())
}

fn json_line(name: &str, j: &Judgement) -> String {
    let error = j.message.as_deref().map_or("null".to_owned(), json_string);
    let processed = j.processed.map_or("null".to_owned(), |n| n.to_string());
    format!(
        "{{\"name\":{},\"accepted\":{},\"error\":{error},\"processed_insns\":{processed}}}",
        json_string(name),
        j.accepted
    )
}

/// A JSON string literal: quotes, backslashes and control characters escaped.
fn json_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}
