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
//! With `--log`, each line also has `log`: the kernel's whole level-1 log of the probe.
//! With `--bpfemu VERSION` (5.10, 6.1, 6.12, 6.18, 7.2), bpfemu judges instead, answering as
//! that kernel, in the same terms (`scripts/rawtable_vs_vms.sh` compares the two).
//! A probe whose maps the kernel refuses is a rejection whose error names the map and errno,
//! as a loader would report it. A file that cannot be read, or a probe that cannot be
//! assembled (a kernel name this kernel's BTF lacks), is named on stderr and skipped; the exit
//! code is then 2.

// The probe format and the kernel's side are the probe test's own modules, shared as they are
// (`kernel_side` names the format `super::probe`: both sit at the crate's root here).
#[allow(dead_code)]
#[path = "../tests/common/bpfemu_side.rs"]
mod bpfemu_side;
#[allow(dead_code)]
#[path = "../tests/common/kernel_side.rs"]
mod kernel_side;
#[allow(dead_code)]
#[path = "../tests/common/probe.rs"]
mod probe;

use bpfemu_isa::KernelVersion;
use kernel_side::Judgement;
use probe::Probe;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

fn main() -> ExitCode {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let with_log = args.iter().any(|a| a == "--log");
    args.retain(|a| a != "--log");
    let bpfemu_version = match take_bpfemu_version(&mut args) {
        Ok(v) => v,
        Err(why) => {
            eprintln!("probe_verdicts: {why}");
            return ExitCode::from(2);
        }
    };
    if args.is_empty() {
        eprintln!("usage: probe_verdicts [--log] [--bpfemu VERSION] PROBE_FILE_OR_DIR...");
        return ExitCode::from(2);
    }
    // Kernel names (`kfunc[..]`, `ksym[..]`) take the ids of the kernel judged, as they do
    // when this judge runs inside that kernel's VM: its own BTF, where it was fetched.
    if let Some(version) = bpfemu_version {
        let btf = bpfemu_loader::kernel::profile_btf_path(version);
        if btf.is_file() {
            probe::resolve_names_in(btf);
        }
    }
    let mut probes = Vec::new();
    let mut unreadable = false;
    for file in args.iter().flat_map(|a| probe_files(Path::new(a))) {
        // A probe this kernel cannot assemble (a kfunc its BTF lacks) is said and skipped, so
        // that it does not cost the verdicts of the others.
        match file.and_then(|f| load(&f)) {
            Ok(found) => {
                for probe in found {
                    match probe {
                        Ok(p) => probes.push(p),
                        Err(e) => {
                            eprintln!("probe_verdicts: {e}");
                            unreadable = true;
                        }
                    }
                }
            }
            Err(e) => {
                eprintln!("probe_verdicts: {e}");
                unreadable = true;
            }
        }
    }
    let mut out = std::io::stdout().lock();
    for p in &probes {
        let judgement = match bpfemu_version {
            Some(version) => bpfemu_side::judge_as(p, version),
            None => judge(p),
        };
        let mut line = json_line(&p.name, &judgement);
        if with_log && bpfemu_version.is_none() {
            let log = kernel_side::log_of(p, 1).unwrap_or_else(|refused| refused);
            line.insert_str(line.len() - 1, &format!(",\"log\":{}", json_string(&log)));
        }
        // A closed stdout (`| head`) ends the run quietly.
        if writeln!(out, "{line}").is_err() {
            break;
        }
    }
    match unreadable {
        true => ExitCode::from(2),
        false => ExitCode::SUCCESS,
    }
}

/// `--bpfemu VERSION` taken out of `args`: the kernel bpfemu answers as, if any.
fn take_bpfemu_version(args: &mut Vec<String>) -> Result<Option<KernelVersion>, String> {
    let Some(at) = args.iter().position(|a| a == "--bpfemu") else {
        return Ok(None);
    };
    let name = args
        .get(at + 1)
        .cloned()
        .ok_or("--bpfemu needs a version")?;
    args.drain(at..at + 2);
    KernelVersion::ALL
        .into_iter()
        .find(|v| v.name() == name)
        .map(Some)
        .ok_or_else(|| format!("--bpfemu: no kernel {name} (5.10, 6.1, 6.12, 6.18 or 7.2)"))
}

/// The kernel's verdict on `p`. Maps the kernel refuses, or probe BTF it refuses (the shared
/// kernel side panics on that, a broken probe on the host; here an older kernel's answer),
/// are rejections whose error says so.
fn judge(p: &Probe) -> Judgement {
    let refused = |message: String| Judgement {
        accepted: false,
        message: Some(message),
        processed: None,
    };
    match std::panic::catch_unwind(|| kernel_side::judge(p)) {
        Ok(Ok(judgement)) if judgement.accepted => judgement,
        // The error is read from the level-1 log: 7.x ends a statistics-only log with
        // its own summary line, where older kernels end it with the error.
        Ok(Ok(judgement)) => Judgement {
            message: kernel_side::log_of(p, 1)
                .ok()
                .and_then(|log| kernel_side::judgement_from_log(&log, false).message)
                .or(judgement.message),
            ..judgement
        },
        Ok(Err(refusal)) => refused(refusal),
        Err(panic) => refused(
            panic
                .downcast_ref::<String>()
                .cloned()
                .unwrap_or_else(|| "the kernel side panicked".to_owned()),
        ),
    }
}

/// The `*.probes` files of a directory (sorted), or the file itself.
fn probe_files(path: &Path) -> Vec<Result<PathBuf, String>> {
    if !path.is_dir() {
        return vec![Ok(path.to_path_buf())];
    }
    let entries = match std::fs::read_dir(path) {
        Ok(entries) => entries,
        Err(e) => return vec![Err(format!("{}: {e}", path.display()))],
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "probes"))
        .collect();
    files.sort();
    files.into_iter().map(Ok).collect()
}

/// The probes of one file.
/// The probes of one file, each assembled or refused on its own.
fn load(path: &Path) -> Result<Vec<Result<Probe, String>>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let rule = path.file_stem().and_then(|s| s.to_str()).unwrap_or("?");
    let each = probe::parse_each(rule, &path.display().to_string(), &text);
    let each = each.map_err(|e| e.to_string())?;
    Ok(each
        .into_iter()
        .map(|p| p.map_err(|e| e.to_string()))
        .collect())
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
