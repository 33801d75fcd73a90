//! `bpfemu verify OBJ...`: many objects (directories walked), each loaded, judged and dropped
//! in turn, so memory follows the largest object, not the count. What each program gave is
//! kept as owned results for the reports that need them all (the table, CSV, SARIF, JUnit).

use super::kinds::{self, Kind};
use super::table::{Row, RowVerdict, Stat};
use super::{ProgramVerdict, Report, error_text, source_of, to_json, verify_object};
use bpfemu_loader::{LoadOptions, Object, SourceLine};
use bpfemu_verifier::Stats;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// One judged program, kept after its object is dropped.
#[derive(Clone, Debug)]
pub struct ProgramResult {
    /// The object's path as given, or as found under a directory given.
    pub file: String,
    pub name: String,
    pub section: String,
    pub verdict: RowVerdict,
    pub stats: Stats,
    pub rejection: Option<Placed>,
    /// The log (at the level asked) and the placed error, as the text report prints them.
    pub text: String,
    /// The program's JSON document, with its object's path.
    pub json: Value,
}

/// A rejection and where it points.
#[derive(Clone, Debug)]
pub struct Placed {
    pub message: String,
    pub kind: &'static Kind,
    pub insn: Option<usize>,
    pub source: Option<SourceLine>,
    /// The source file as a path from the working directory, where it could be found there or
    /// beside the object (what SARIF and annotations need to point into a repository).
    pub source_path: Option<String>,
    /// The whole error as the text report prints it (placed line, source, insn, notes).
    pub error_text: String,
}

/// An object that could not be judged (bad input).
#[derive(Clone, Debug)]
pub struct ObjectFailure {
    pub file: String,
    pub error: String,
}

/// A program of another type than XDP: named, not judged.
#[derive(Clone, Debug)]
pub struct NotVerified {
    pub file: String,
    pub name: String,
    pub section: String,
    pub reason: String,
}

/// Everything a run of `verify` found.
#[derive(Debug, Default)]
pub struct Batch {
    /// Objects in the order judged.
    pub objects: Vec<String>,
    pub programs: Vec<ProgramResult>,
    pub not_verified: Vec<NotVerified>,
    pub failures: Vec<ObjectFailure>,
}

impl Batch {
    pub fn count(&self, verdict: RowVerdict) -> usize {
        self.programs
            .iter()
            .filter(|p| p.verdict == verdict)
            .count()
    }

    /// 1 when a program is rejected; 2 when an object could not be judged, a program is
    /// undecided, or nothing at all was judged (a pass that checked nothing is no pass);
    /// else 0.
    pub fn exit_code(&self) -> u8 {
        if self.count(RowVerdict::Rejected) > 0 {
            1
        } else if !self.failures.is_empty()
            || self.count(RowVerdict::Undecided) > 0
            || self.programs.is_empty()
        {
            2
        } else {
            0
        }
    }

    /// The rows of the table and CSV.
    pub fn rows(&self) -> Vec<Row> {
        self.programs.iter().map(ProgramResult::row).collect()
    }

    /// The summary line.
    pub fn summary(&self) -> String {
        let mut out = format!(
            "{} programs: {} accepted, {} rejected",
            self.programs.len() + self.not_verified.len(),
            self.count(RowVerdict::Accepted),
            self.count(RowVerdict::Rejected)
        );
        let undecided = self.count(RowVerdict::Undecided);
        if undecided > 0 {
            out += &format!(", {undecided} undecided (bpfemu does not check what they use yet)");
        }
        if !self.not_verified.is_empty() {
            out += &format!(", {} not verified (not XDP)", self.not_verified.len());
        }
        if self.objects.len() + self.failures.len() > 1 {
            out += &format!(" in {} objects", self.objects.len());
            if !self.failures.is_empty() {
                out += &format!(", {} objects not loaded", self.failures.len());
            }
        }
        out
    }
}

impl ProgramResult {
    pub fn row(&self) -> Row {
        let s = &self.stats;
        let as_i64 = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        let values = BTreeMap::from([
            (Stat::Duration, as_i64(s.time.as_micros() as u64)),
            (Stat::TotalInsns, as_i64(s.processed_insns)),
            (Stat::TotalStates, as_i64(s.total_states)),
            (Stat::PeakStates, as_i64(s.peak_states)),
            (Stat::MaxStatesPerInsn, i64::from(s.max_states_per_insn)),
            (Stat::MarkRead, as_i64(s.mark_read)),
            // veristat's stack depth: the sum over subprograms of `stack depth A+B+...`.
            (
                Stat::StackDepth,
                s.stack_depth.iter().map(|d| i64::from(*d)).sum(),
            ),
        ]);
        Row {
            file: self.file.clone(),
            program: self.name.clone(),
            verdict: Some(self.verdict),
            values,
        }
    }
}

/// The objects `paths` name: files as given; directories walked for `.o` files that are BPF
/// objects (a build directory holds host objects too), in name order.
pub fn collect_objects(paths: &[PathBuf]) -> Vec<Result<PathBuf, ObjectFailure>> {
    let mut found = Vec::new();
    for path in paths {
        if path.is_dir() {
            walk(path, &mut found);
        } else {
            found.push(Ok(path.clone()));
        }
    }
    found
}

fn walk(dir: &Path, found: &mut Vec<Result<PathBuf, ObjectFailure>>) {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) => {
            found.push(Err(ObjectFailure {
                file: dir.display().to_string(),
                error: format!(
                    "{}: cannot read the directory: {}",
                    dir.display(),
                    crate::replay::io_reason(&e)
                ),
            }));
            return;
        }
    };
    let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    for path in paths {
        // A link to a directory is not followed: a cycle would never end.
        let is_link = path.symlink_metadata().is_ok_and(|m| m.is_symlink());
        if path.is_dir() && !is_link {
            walk(&path, found);
        } else if path.extension().is_some_and(|e| e == "o") && is_bpf_elf(&path) {
            found.push(Ok(path));
        }
    }
}

/// Whether `path` starts as a 64-bit ELF for the BPF machine (EM_BPF).
fn is_bpf_elf(path: &Path) -> bool {
    use std::io::Read;
    const EM_BPF: u16 = 247;
    let mut head = [0u8; 20];
    let Ok(mut file) = std::fs::File::open(path) else {
        return false;
    };
    if file.read_exact(&mut head).is_err() || &head[..4] != b"\x7fELF" {
        return false;
    }
    let machine = match head[5] {
        1 => u16::from_le_bytes([head[18], head[19]]),
        _ => u16::from_be_bytes([head[18], head[19]]),
    };
    machine == EM_BPF
}

/// What sees each object's report while the object is still loaded (the HTML report).
pub type Visitor<'v> = dyn FnMut(&str, &Object, &Report<'_>) -> anyhow::Result<()> + 'v;

/// Judges one loaded object into `batch`, shows it to `visit`; `None` when `only` names none
/// of its programs.
pub fn add_object(
    batch: &mut Batch,
    file: &str,
    object: &Object,
    only: Option<&str>,
    log_level: u32,
    explain: bool,
    visit: &mut Visitor<'_>,
) -> anyhow::Result<Option<()>> {
    let Some(report) = verify_object(object, only, log_level) else {
        return Ok(None);
    };
    batch.objects.push(file.to_owned());
    add_report(batch, file, &report, log_level > 0, explain);
    visit(file, object, &report)?;
    Ok(Some(()))
}

fn add_report(batch: &mut Batch, file: &str, report: &Report<'_>, with_log: bool, explain: bool) {
    let doc = to_json(file, report, with_log, explain);
    let docs = doc["programs"].as_array().cloned().unwrap_or_default();
    for (v, mut json) in report.verdicts.iter().zip(docs) {
        json["object"] = Value::from(file);
        batch.programs.push(program_result(file, v, json, explain));
    }
    for p in &report.not_verified {
        batch.not_verified.push(NotVerified {
            file: file.to_owned(),
            name: p.name.clone(),
            section: p.section.clone(),
            reason: super::not_verified_reason(p),
        });
    }
}

fn program_result(file: &str, v: &ProgramVerdict<'_>, json: Value, explain: bool) -> ProgramResult {
    let verdict = match v.word() {
        "accepted" => RowVerdict::Accepted,
        "undecided" => RowVerdict::Undecided,
        _ => RowVerdict::Rejected,
    };
    let error = error_text(file, v);
    let rejection = v.verdict.rejection().map(|r| {
        let source = r
            .source
            .clone()
            .or_else(|| r.insn.and_then(|pc| source_of(&v.program.line_info, pc)));
        let source_path = source
            .as_ref()
            .and_then(|s| resolve_source(Path::new(file), &s.file_name));
        Placed {
            message: r.message.clone(),
            kind: kinds::classify(&r.message),
            insn: r.insn,
            source,
            source_path,
            error_text: error.clone(),
        }
    });
    let mut text = v.verdict.log.clone();
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    text += &error;
    if let Some(explanation) = v.explanation.as_ref().filter(|_| explain) {
        text += &crate::explain::path_text(explanation);
    }
    ProgramResult {
        file: file.to_owned(),
        name: v.program.name.clone(),
        section: v.program.section.clone(),
        verdict,
        stats: v.verdict.stats.clone(),
        rejection,
        text,
        json,
    }
}

/// The source file line_info names, as a path from the working directory: clang records
/// the name it was given (`./x.c` from the source's directory, `src/x.c` from a project's
/// root, or an absolute path), so it is looked for from here, then beside the object.
/// `None` when it is in neither place (a viewer cannot open it either).
pub fn resolve_source(object: &Path, name: &str) -> Option<String> {
    let name = Path::new(name);
    let cwd = std::env::current_dir().ok()?;
    let candidates = if name.is_absolute() {
        vec![name.to_path_buf()]
    } else {
        let beside = object.parent().map(|dir| dir.join(name));
        [Some(name.to_path_buf()), beside]
            .into_iter()
            .flatten()
            .collect()
    };
    let found = candidates.into_iter().find(|p| p.is_file())?;
    let absolute = if found.is_absolute() {
        found
    } else {
        cwd.join(found)
    };
    let relative = absolute.strip_prefix(&cwd).ok()?;
    Some(normalise(relative))
}

/// `a/./b/../c` as `a/c`, with `/` separators.
fn normalise(path: &Path) -> String {
    use std::path::Component;
    let mut parts: Vec<String> = Vec::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                parts.pop();
            }
            Component::Normal(p) => parts.push(p.to_string_lossy().into_owned()),
            Component::RootDir | Component::Prefix(_) => {}
        }
    }
    parts.join("/")
}

/// Loads and judges every object of `paths` into a batch; `visit` sees each object's report
/// while it is loaded, `on_object` the batch after each (so text can stream). Load errors
/// are kept as failures, not returned: the other objects are still judged, as veristat goes
/// on past a file it cannot open. The loader's warnings go to standard error when `warn`.
#[allow(clippy::too_many_arguments)]
pub fn verify_paths(
    paths: &[PathBuf],
    only: Option<&str>,
    log_level: u32,
    explain: bool,
    warn: bool,
    load: &LoadOptions,
    visit: &mut Visitor<'_>,
    mut on_object: impl FnMut(&Batch, usize),
) -> anyhow::Result<Batch> {
    let mut batch = Batch::default();
    let mut named = false;
    for found in collect_objects(paths) {
        let path = match found {
            Ok(path) => path,
            Err(failure) => {
                batch.failures.push(failure);
                continue;
            }
        };
        let file = path.display().to_string();
        let object = match bpfemu_loader::load_file(&path, load) {
            Ok(object) => object,
            Err(e) => {
                batch.failures.push(ObjectFailure {
                    file: file.clone(),
                    error: e.to_string(),
                });
                continue;
            }
        };
        if warn {
            crate::replay::print_warnings(&path, &object);
        }
        let before = batch.programs.len();
        if object.programs.is_empty() {
            batch.failures.push(ObjectFailure {
                error: format!("{file}: the object holds no program"),
                file,
            });
            continue;
        }
        if add_object(&mut batch, &file, &object, only, log_level, explain, visit)?.is_some() {
            named = true;
            on_object(&batch, before);
        }
    }
    if let (Some(name), false) = (only, named) {
        let what = match paths {
            [one] => one.display().to_string(),
            _ => "any object given".to_owned(),
        };
        if batch.failures.is_empty() {
            anyhow::bail!("{what}: no program named '{name}'");
        }
    }
    Ok(batch)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_normalised() {
        assert_eq!(normalise(Path::new("./a/./b/../c.c")), "a/c.c");
    }

    #[test]
    fn a_directory_yields_its_bpf_objects_only() {
        let dir = std::env::temp_dir().join(format!("bpfemu-walk-{}", std::process::id()));
        let sub = dir.join("sub");
        std::fs::create_dir_all(&sub).unwrap();
        let mut bpf = vec![0u8; 64];
        bpf[..4].copy_from_slice(b"\x7fELF");
        bpf[5] = 1;
        bpf[18] = 247;
        std::fs::write(sub.join("prog.o"), &bpf).unwrap();
        let mut host = bpf.clone();
        host[18] = 62; // x86-64
        std::fs::write(dir.join("main.o"), &host).unwrap();
        std::fs::write(dir.join("notes.txt"), b"x").unwrap();
        let found: Vec<PathBuf> = collect_objects(std::slice::from_ref(&dir))
            .into_iter()
            .map(|r| r.unwrap())
            .collect();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(found, [sub.join("prog.o")]);
    }
}
