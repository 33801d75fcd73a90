//! `bpfemu verify`: bpfemu's verifier over every program of an object, with the kernel's
//! verdicts and messages, placed the way compilers place errors (`file.c:42:5: error: ...`) so
//! editors and CI annotate the line.

use bpfemu_isa::disasm::log_line;
use bpfemu_isa::uapi::{BPF_PROG_TYPE_XDP, prog_type_short_name};
use bpfemu_isa::{Insn, RawInsn};
use bpfemu_loader::{Kernel, Object, ProgramSpec, SourceLine, libbpf_log};
use bpfemu_verifier::explain::Explanation;
use bpfemu_verifier::{Options, Outcome, ProgramInput, Rejection, Verdict, verify};
use serde_json::{Value, json};
use std::fmt::Write;

pub mod batch;
pub mod ci;
pub mod command;
pub mod compare;
pub mod kinds;
pub mod matrix;
pub mod sarif;
pub mod table;

/// One program's verification.
pub struct ProgramVerdict<'a> {
    pub program: &'a ProgramSpec,
    pub verdict: Verdict,
    /// The kernel it was judged by (its BTF names kfunc calls in messages).
    pub kernel: &'a Kernel,
    /// Why it was rejected (the kernel's lines, the notes, the path), when it was.
    pub explanation: Option<Explanation>,
}

impl ProgramVerdict<'_> {
    pub fn accepted(&self) -> bool {
        self.verdict.is_accepted()
    }

    /// The word for the verdict: accepted, rejected, or undecided where the program uses
    /// something bpfemu's verifier does not check yet (the kernel may accept it).
    pub fn word(&self) -> &'static str {
        if self.accepted() {
            "accepted"
        } else if self.verdict.is_undecided() {
            "undecided"
        } else {
            "rejected"
        }
    }
}

/// What `bpfemu verify` found in an object.
pub struct Report<'a> {
    pub verdicts: Vec<ProgramVerdict<'a>>,
    /// Programs of other types than XDP, which bpfemu's verifier does not judge (a tracepoint
    /// or tc program beside the XDP one is common): named, neither accepted nor rejected.
    pub not_verified: Vec<&'a ProgramSpec>,
}

/// Whether bpfemu's verifier judges programs of `program`'s type.
pub fn is_verified_type(program: &ProgramSpec) -> bool {
    program.prog_type == BPF_PROG_TYPE_XDP
}

/// Why `program` is not verified, for the reports.
pub fn not_verified_reason(program: &ProgramSpec) -> String {
    let kind = prog_type_short_name(program.prog_type)
        .unwrap_or_else(|| format!("type {}", program.prog_type));
    format!("not verified: bpfemu's verifier judges XDP programs, and this is a {kind} program")
}

/// Verifies the programs of `obj`: only `only` when given, a function name or, as the other
/// commands' `--prog` takes it, a section name (every program of that section); `None` from
/// a name that is neither.
pub fn verify_object<'a>(
    obj: &'a Object,
    only: Option<&str>,
    log_level: u32,
) -> Option<Report<'a>> {
    let by_function = |name: &str| obj.programs.iter().any(|p| p.name == name);
    let selected: Vec<&ProgramSpec> = obj
        .programs
        .iter()
        .filter(|p| match only {
            None => true,
            Some(name) if by_function(name) => p.name == name,
            Some(section) => p.section == section,
        })
        .collect();
    if only.is_some() && selected.is_empty() {
        return None;
    }
    let opts = Options {
        log_level,
        ..Options::default()
    };
    let (xdp, other): (Vec<&ProgramSpec>, Vec<&ProgramSpec>) =
        selected.into_iter().partition(|p| is_verified_type(p));
    let judge = ObjectJudge::new(obj);
    Some(Report {
        verdicts: xdp
            .into_iter()
            .map(|program| {
                let (verdict, explanation) = judge.judge_explained(program, &opts);
                ProgramVerdict {
                    program,
                    verdict,
                    kernel: &obj.kernel,
                    explanation,
                }
            })
            .collect(),
        not_verified: other,
    })
}

/// Judges `program` of `obj` as loading the object into 6.18 with libbpf 1.7 would: libbpf
/// creates every map before it loads any program, so a map the kernel refuses fails every
/// program of the object; then the verifier. Every command that judges a program
/// (`verify`, the way in that runs one, `diff --verifier`) judges it here, through
/// [`ObjectJudge`] when it judges several programs of one object.
pub fn judge(obj: &Object, program: &ProgramSpec, opts: &Options) -> Verdict {
    ObjectJudge::new(obj).judge(program, opts)
}

/// The part of the load path that is the object's, not a program's (the maps libbpf
/// creates, or the map the kernel refuses), worked out once for all its programs.
pub struct ObjectJudge<'a> {
    obj: &'a Object,
    maps: Result<Vec<bpfemu_loader::MapSpec>, Rejection>,
    /// The object's BTF as the kernel keeps it: `None` when `BPF_BTF_LOAD` refuses it, and
    /// libbpf then loads the maps and programs without it.
    btf: Option<&'a bpfemu_loader::btf::Btf>,
    /// Why the kernel refuses the object's BTF, said beside a rejection.
    btf_refusal: Option<String>,
}

impl<'a> ObjectJudge<'a> {
    pub fn new(obj: &'a Object) -> ObjectJudge<'a> {
        let btf_refusal = obj.btf.as_ref().and_then(|btf| btf.kernel_refusal());
        let btf = obj.btf.as_ref().filter(|_| btf_refusal.is_none());
        let created = bpfemu_verifier::maps_created::maps_as_created(&obj.maps, btf);
        let maps = match map_creation_refusal(obj, &created) {
            Some(rejection) => Err(rejection),
            None => Ok(created),
        };
        ObjectJudge {
            obj,
            maps,
            btf,
            btf_refusal,
        }
    }

    /// The verdict on `program`, one of the object's programs.
    pub fn judge(&self, program: &ProgramSpec, opts: &Options) -> Verdict {
        self.judge_with(program, opts, false).0
    }

    /// [`ObjectJudge::judge`], with the explanation of a rejection in the verifier's walk.
    pub fn judge_explained(
        &self,
        program: &ProgramSpec,
        opts: &Options,
    ) -> (Verdict, Option<Explanation>) {
        self.judge_with(program, opts, true)
    }

    fn judge_with(
        &self,
        program: &ProgramSpec,
        opts: &Options,
        explained: bool,
    ) -> (Verdict, Option<Explanation>) {
        match &self.maps {
            Err(rejection) => (
                Verdict {
                    outcome: Outcome::Rejected(rejection.clone()),
                    log: String::new(),
                    stats: Default::default(),
                },
                None,
            ),
            Ok(maps) => {
                let mut input = ProgramInput {
                    maps,
                    ..ProgramInput::new(self.obj, program)
                };
                if self.btf.is_none() {
                    // No BTF in the kernel: libbpf sends no func_info or line_info either.
                    input.btf = None;
                    input.func_info = &[];
                    input.line_info = &[];
                }
                let mut verdict = libbpf_fixup(self.obj, program, verify(&input, opts));
                if let (Outcome::Rejected(r), Some(why)) = (&mut verdict.outcome, &self.btf_refusal)
                {
                    r.note.get_or_insert_with(|| {
                        format!(
                            "BPF_BTF_LOAD refuses the object's BTF (type {why}): libbpf loads \
                             the maps and programs without it"
                        )
                    });
                }
                let explanation = (explained && !verdict.is_accepted() && !verdict.is_undecided())
                    .then(|| bpfemu_verifier::explain(&input, opts, &verdict))
                    .flatten();
                (verdict, explanation)
            }
        }
    }
}

/// The verdict as a libbpf user reads it: libbpf rewrites the verifier's complaint about an
/// instruction it poisoned into the cause (`bpfemu_loader::libbpf_log`).
fn libbpf_fixup(obj: &Object, program: &ProgramSpec, mut verdict: Verdict) -> Verdict {
    let Outcome::Rejected(rejection) = &mut verdict.outcome else {
        return verdict;
    };
    let Some(insn) = rejection.insn else {
        return verdict;
    };
    if let Some(line) = libbpf_log::error_line(obj, program, insn, &rejection.message) {
        rejection.message = line;
    }
    if let Some(log) = libbpf_log::fixup_log(obj, program, &verdict.log) {
        verdict.log = log;
    }
    verdict
}

/// The first map (in the object's order, as libbpf creates them; an inner map's template
/// before its outer map) that `BPF_MAP_CREATE` refuses, or that libbpf fails after creating
/// it (`created`: the maps as created), as libbpf reports it.
fn map_creation_refusal(obj: &Object, created: &[bpfemu_loader::MapSpec]) -> Option<Rejection> {
    let env = bpfemu_vm::maps::MapEnv::default();
    obj.maps.iter().zip(created).find_map(|(map, as_created)| {
        let spec = crate::vm_runtime::vm_spec(obj, map);
        let inner = spec.inner.as_deref();
        let mmap_refused = || {
            bpfemu_verifier::maps_created::mmap_refused(as_created, obj.btf.as_ref()).then_some((
                bpfemu_isa::uapi::Errno(524),
                "created, but libbpf maps a global data map with a non-static variable into \
                 memory, and the kernel refuses to mmap() one holding a bpf_spin_lock, \
                 bpf_timer or another special field: make those variables static or __hidden",
            ))
        };
        // A type the kernel version lacks is refused before anything else of the map.
        let version = obj.kernel.version();
        let type_refusal = |m: &bpfemu_vm::maps::MapSpec| {
            bpfemu_verifier::profile::maps::creation_refusal(version, m.map_type)
        };
        let (errno, why) = inner
            .and_then(type_refusal)
            .or_else(|| type_refusal(&spec))
            .map(|(errno, why)| (errno, std::borrow::Cow::Owned(why)))
            .or_else(|| {
                inner
                    .and_then(|inner| bpfemu_vm::maps::kernel_refusal(inner, &env))
                    .or_else(|| bpfemu_vm::maps::kernel_refusal(&spec, &env))
                    .or_else(mmap_refused)
                    .map(|(errno, why)| (errno, std::borrow::Cow::Borrowed(why)))
            })?;
        let errno_name = errno
            .name()
            .map_or_else(|| errno.0.to_string(), str::to_owned);
        Some(Rejection {
            // libbpf's line: the kernel logs nothing when it refuses a map.
            message: format!("map '{}': failed to create: -{errno_name}", map.name),
            insn: None,
            source: None,
            errno: bpfemu_verifier::Errno::from_load_code(errno.0),
            logged: true,
            note: Some(if why.starts_with("created, but") {
                format!("map '{}' is {why}", map.name)
            } else {
                format!("BPF_MAP_CREATE refuses map '{}': {why}", map.name)
            }),
        })
    })
}

/// The instruction at `pc` as the kernel's log prints it (`12: (71) r0 = *(u8 *)(r2 +14)`).
pub fn insn_line(kernel: &Kernel, insns: &[RawInsn], pc: usize) -> Option<String> {
    let (insn, _) = Insn::decode(insns, pc).ok()?;
    let raw = insns.get(pc)?;
    // A kfunc call is named as the kernel's log names it (`call bpf_throw#65988`).
    Some(bpfemu_verifier::explore::kfunc_named(
        kernel,
        raw,
        log_line(pc, raw.code, &insn),
    ))
}

/// The error in the compilers' form: the source line with a caret under the column, the
/// instruction, the kernel's lines that qualify the verdict, and the notes on its cause.
pub fn error_text(object: &str, v: &ProgramVerdict<'_>) -> String {
    let Some(r) = v.verdict.rejection() else {
        return String::new();
    };
    let mut out = String::new();
    let source = r
        .source
        .clone()
        .or_else(|| r.insn.and_then(|pc| source_of(&v.program.line_info, pc)));
    match &source {
        Some(src) => {
            writeln!(out, "{}: error: {}", place(src), r.message).expect("string");
            out.push_str(&crate::explain::quote(src));
        }
        None => {
            writeln!(out, "{object}: error: {}: {}", v.program.name, r.message).expect("string")
        }
    }
    if let Some(line) = r
        .insn
        .and_then(|pc| insn_line(v.kernel, &v.program.insns, pc))
    {
        writeln!(out, "  insn {line}").expect("string");
    }
    if let Some(note) = &r.note {
        writeln!(out, "  note: {note}").expect("string");
    }
    if let Some(explanation) = &v.explanation {
        out.push_str(&crate::explain::diagnostics(object, explanation));
    }
    out
}

/// The source line that covers instruction `pc`: the last line_info entry at or before it.
pub fn source_of(line_info: &[SourceLine], pc: usize) -> Option<SourceLine> {
    line_info.iter().rev().find(|l| l.insn <= pc).cloned()
}

use crate::explain::place;

/// The JSON report: `programs` verified, `not_verified` the others.
pub fn to_json(object: &str, report: &Report<'_>, with_log: bool, explain: bool) -> Value {
    let programs: Vec<Value> = report
        .verdicts
        .iter()
        .map(|v| {
            let s = &v.verdict.stats;
            let mut p = json!({
                "name": v.program.name,
                "section": v.program.section,
                "accepted": v.accepted(),
                "verdict": v.word(),
                "processed_insns": s.processed_insns,
                "total_states": s.total_states,
                "peak_states": s.peak_states,
                "time_us": s.time.as_micros() as u64,
            });
            if let Some(r) = v.verdict.rejection() {
                p["message"] = json!(r.message);
                p["note"] = json!(r.note);
                p["insn"] = json!(r.insn);
                p["insn_text"] = json!(r.insn.and_then(|pc| insn_line(
                    v.kernel,
                    &v.program.insns,
                    pc
                )));
                let source = r
                    .source
                    .clone()
                    .or_else(|| r.insn.and_then(|pc| source_of(&v.program.line_info, pc)));
                p["source"] = json!(source.as_ref().map(|src| json!({
                    "file": src.file_name,
                    "line": src.line,
                    "column": src.column,
                    "text": src.line_text.trim(),
                })));
                if let Some(explanation) = &v.explanation {
                    p["explanation"] = crate::explain::to_json(explanation, explain);
                }
            }
            if with_log {
                p["log"] = json!(v.verdict.log);
            }
            p
        })
        .collect();
    let not_verified: Vec<Value> = report
        .not_verified
        .iter()
        .map(|p| json!({"name": p.name, "section": p.section, "reason": not_verified_reason(p)}))
        .collect();
    json!({ "object": object, "programs": programs, "not_verified": not_verified })
}
