//! `verifier/probes/KNOWN_DIFFERENCES`: the programs on which bpfemu's verifier is known to
//! disagree with the kernel, one per line as `NAME  reason`. Lines starting with `#` are comments. The tests
//! honour it both ways: an unlisted difference fails, and so does a listed program that now
//! agrees, so the list only shrinks when the verifier really improves.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub fn known_differences_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("probes/KNOWN_DIFFERENCES")
}

/// The sections of the file other than the probes': a probe's name has none of these
/// prefixes. `selftest/OBJECT/PROGRAM` entries are the kernel's verifier selftests, read by
/// `scripts/verifier_selftests.py`; `kernel/VERSION/...` entries other kernels booted, read by
/// the root crate's `tests/kernels_vs_vms.rs`.
pub const OTHER_SECTIONS: &[&str] = &["corpus/", "random/", "selftest/", "kernel/"];

/// The listed names whose prefix is `prefix` (e.g. `corpus/`) and none of `exclude`, with
/// their reasons.
pub fn load(prefix: &str, exclude: &[&str]) -> BTreeMap<String, String> {
    let path = known_differences_path();
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    let mut out = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (name, reason) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
        if !name.starts_with(prefix) || exclude.iter().any(|p| name.starts_with(p)) {
            continue;
        }
        let reason = reason.trim();
        assert!(
            !reason.is_empty(),
            "{}:{}: `{name}` needs a one-line reason",
            path.display(),
            i + 1
        );
        assert!(
            out.insert(name.to_owned(), reason.to_owned()).is_none(),
            "{}:{}: `{name}` is listed twice",
            path.display(),
            i + 1
        );
    }
    out
}

/// Checks the observed differences (name -> description) against the listed ones over the
/// `names` that were compared; returns the complaints (empty when the list is honest).
pub fn check(
    listed: &BTreeMap<String, String>,
    differing: &BTreeMap<String, String>,
    names: &[String],
) -> Vec<String> {
    let mut complaints = Vec::new();
    for (name, what) in differing {
        if !listed.contains_key(name) {
            complaints.push(format!(
                "{name}: differs from the kernel and is not listed: {what}"
            ));
        }
    }
    for name in listed.keys() {
        if !names.contains(name) {
            complaints.push(format!("{name}: listed, but no such program was compared"));
        } else if !differing.contains_key(name) {
            complaints.push(format!(
                "{name}: listed, but now agrees with the kernel: remove it from the list"
            ));
        }
    }
    complaints
}

/// Set to rewrite the list from what a run observed (after a verifier change).
const UPDATE_VAR: &str = "BPFEMU_UPDATE_KNOWN_DIFFERENCES";

pub const UPDATE_HINT: &str = "When the verifier improved, rerun with \
     BPFEMU_UPDATE_KNOWN_DIFFERENCES=1 to drop the entries that now agree (and to list new \
     differences, whose reasons you then write), and commit the list.";

pub fn update_requested() -> bool {
    std::env::var(UPDATE_VAR).is_ok_and(|v| v == "1")
}

/// Rewrites the entries under `prefix` (the run compared `names`): entries that still differ
/// keep their reason, new differences get the observed verdicts as a placeholder reason, entries
/// for programs not compared this run are kept; the other sections of the file stay as they are.
pub fn rewrite(
    prefix: &str,
    exclude: &[&str],
    differing: &BTreeMap<String, String>,
    names: &[String],
) {
    let path = known_differences_path();
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    let listed = load(prefix, exclude);
    let mine =
        |name: &str| name.starts_with(prefix) && !exclude.iter().any(|p| name.starts_with(p));
    let mut out = String::new();
    for line in text.lines() {
        let name = Some(line.trim())
            .filter(|l| !l.starts_with('#'))
            .and_then(|l| l.split_whitespace().next());
        match name {
            Some(name) if mine(name) => {}
            _ => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    let mut entries: BTreeMap<&str, String> = BTreeMap::new();
    for (name, reason) in &listed {
        if !names.contains(name) || differing.contains_key(name) {
            entries.insert(name, reason.clone());
        }
    }
    for (name, what) in differing {
        entries.entry(name).or_insert_with(|| what.clone());
    }
    for (name, reason) in entries {
        out.push_str(&format!("{name}  {reason}\n"));
    }
    std::fs::write(&path, out).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}
