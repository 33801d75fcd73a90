//! Verdicts compared (`diff --verifier`): every program loaded into the kernel, its verdict
//! and final error line beside bpfemu's verifier's.

use super::*;

// ---------------------------------------------------------------------------------------------
// Verifier verdicts

/// The kernel's verdict on one program.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct KernelVerdict {
    pub accepted: bool,
    /// The kernel's error line for a rejection (or why the load could not happen).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// `processed N insns` from the statistics line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub processed_insns: Option<u64>,
    /// `verification time N usec`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verification_time_usec: Option<u64>,
    /// The full statistics line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stats: Option<String>,
}

/// One program's line of `bpfemu diff --verifier`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ProgramVerdict {
    pub program: String,
    pub section: String,
    pub kernel: KernelVerdict,
    /// bpfemu's verifier on the same program.
    pub bpfemu: BpfemuVerdict,
    /// Same verdict, and for a rejection the same error line.
    pub agree: bool,
}

/// bpfemu's verdict on one program.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct BpfemuVerdict {
    /// False for programs bpfemu's verifier does not judge (not XDP): then nothing else
    /// counts, and the program is left out of the agreement.
    pub verified: bool,
    pub accepted: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub processed_insns: u64,
    pub verification_time_usec: u64,
}

impl BpfemuVerdict {
    /// bpfemu's verifier on program `p` of the object `judge` judges.
    pub fn of(
        judge: &crate::verify::ObjectJudge<'_>,
        p: &bpfemu_loader::ProgramSpec,
    ) -> BpfemuVerdict {
        use bpfemu_verifier::Options;
        if !crate::verify::is_verified_type(p) {
            return BpfemuVerdict {
                verified: false,
                accepted: false,
                error: Some(crate::verify::not_verified_reason(p)),
                processed_insns: 0,
                verification_time_usec: 0,
            };
        }
        let v = judge.judge(p, &Options::default());
        BpfemuVerdict {
            verified: true,
            accepted: v.is_accepted(),
            // Compared with the kernel's last meaningful log line: where the kernel logs no
            // reason, bpfemu's log gives that line too.
            error: v.rejection().map(|r| {
                r.kernel_error_line()
                    .map_or_else(|| verifier_error_line(&v.log), str::to_owned)
            }),
            processed_insns: v.stats.processed_insns,
            verification_time_usec: v.stats.time.as_micros() as u64,
        }
    }

    /// Whether the kernel said the same: verdict, and error line for a rejection.
    pub fn agrees_with(&self, kernel: &KernelVerdict) -> bool {
        !self.verified
            || self.accepted == kernel.accepted && (self.accepted || self.error == kernel.error)
    }
}

/// Parses a verifier log (level 1 with `BPF_LOG_STATS`).
pub fn parse_verifier_log(log: &str, loaded: bool) -> KernelVerdict {
    let stats = log
        .lines()
        .rev()
        .find(|l| l.starts_with("processed ") && l.contains(" insns"))
        .map(str::to_owned);
    let processed_insns = stats
        .as_deref()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse().ok());
    let verification_time_usec = log
        .lines()
        .rev()
        .find_map(|l| l.trim().strip_prefix("verification time "))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok());
    KernelVerdict {
        accepted: loaded,
        error: (!loaded).then(|| verifier_error_line(log)),
        processed_insns,
        verification_time_usec,
        stats,
    }
}

/// Loads every program of the object in the kernel, each on its own with the maps and programs
/// it needs (raw bpf(), log level 1 with statistics; the log grows until it fits), and reports
/// each verdict: one rejection does not hide the others'.
pub fn verify_in_kernel(path: &Path, load: &LoadOptions) -> Result<Vec<ProgramVerdict>, DiffError> {
    let object = load_for_kernel(path, load)?;
    let judge = crate::verify::ObjectJudge::new(&object);
    let mut out = Vec::new();
    for p in &object.programs {
        let kernel = kernel_verdict(&object, p);
        let bpfemu = BpfemuVerdict::of(&judge, p);
        out.push(ProgramVerdict {
            program: p.name.clone(),
            section: p.section.clone(),
            agree: bpfemu.agrees_with(&kernel),
            kernel,
            bpfemu,
        });
    }
    Ok(out)
}

/// The kernel's side of [`verify_in_kernel`] alone, each program's verdict as the running
/// kernel gives it: what a VM's guest job reports for `diff --verifier` against another kernel
/// (the hidden `bpfemu kernel-verdicts`).
pub fn kernel_verdicts(
    path: &Path,
    load: &LoadOptions,
) -> Result<Vec<KernelProgramVerdict>, DiffError> {
    let object = load_for_kernel(path, load)?;
    let verdicts = object.programs.iter().map(|p| KernelProgramVerdict {
        program: p.name.clone(),
        section: p.section.clone(),
        kernel: kernel_verdict(&object, p),
    });
    Ok(verdicts.collect())
}

/// One program's verdict from the kernel alone.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct KernelProgramVerdict {
    pub program: String,
    pub section: String,
    pub kernel: KernelVerdict,
}

fn load_for_kernel(path: &Path, load: &LoadOptions) -> Result<bpfemu_loader::Object, DiffError> {
    kernel_ready().map_err(DiffError::KernelUnavailable)?;
    bpfemu_loader::load_file(path, load).map_err(|e| DiffError::Load {
        path: path.display().to_string(),
        message: e.to_string(),
    })
}

/// The kernel's verdict on one program of the object, loaded with what it needs: first with
/// the statistics alone, as veristat loads (a level-1 log prints every instruction the
/// verifier walks, which costs the kernel several times its verification time on big
/// programs), then, for a rejection, again with the level-1 log that words it.
fn kernel_verdict(object: &bpfemu_loader::Object, p: &bpfemu_loader::ProgramSpec) -> KernelVerdict {
    let stats_only = KernelLoadOptions {
        log_level: kbpf::BPF_LOG_STATS,
        log_size: 1 << 16,
        initial: InitialEntries::new(),
    };
    if let Ok(k) = KernelObject::load(object, &p.name, &stats_only) {
        return parse_verifier_log(k.log(), true);
    }
    let opts = KernelLoadOptions {
        log_level: kbpf::BPF_LOG_LEVEL1 | kbpf::BPF_LOG_STATS,
        log_size: 16 << 20,
        initial: InitialEntries::new(),
    };
    match KernelObject::load(object, &p.name, &opts) {
        Ok(k) => parse_verifier_log(k.log(), true),
        Err(KernelObjectError::ProgLoad { log, errno, .. }) => {
            // The log as libbpf hands it to its user, as bpfemu's verdict is given.
            let log = bpfemu_loader::libbpf_log::fixup_log(object, p, &log).unwrap_or(log);
            let mut v = parse_verifier_log(&log, false);
            if log.trim().is_empty() {
                v.error = Some(format!("the kernel refuses it ({})", Errno(errno)));
            }
            v
        }
        // As libbpf says it, and `bpfemu verify` after it: the kernel logs nothing.
        Err(KernelObjectError::MapCreate { map, errno, .. }) => KernelVerdict {
            accepted: false,
            error: Some(format!(
                "map '{map}': failed to create: -{}",
                Errno(errno)
                    .name()
                    .map_or_else(|| errno.to_string(), str::to_owned)
            )),
            processed_insns: None,
            verification_time_usec: None,
            stats: None,
        },
        Err(e) => KernelVerdict {
            accepted: false,
            error: Some(e.to_string()),
            processed_insns: None,
            verification_time_usec: None,
            stats: None,
        },
    }
}

/// The `--verifier` table.
pub fn format_verdicts(object: &str, verdicts: &[ProgramVerdict]) -> String {
    let mut out = format!("{object}\n");
    let width = verdicts
        .iter()
        .map(|v| v.program.len())
        .max()
        .unwrap_or(0)
        .max(7);
    writeln!(
        out,
        "{:<width$}  {:<8}  {:>10}  {:>10}  {:<8}  {:>10}  {:>10}  {:<5}  kernel error",
        "program", "kernel", "insns", "time (us)", "bpfemu", "insns", "time (us)", "same"
    )
    .expect("string");
    let verdict = |accepted: bool| if accepted { "accepted" } else { "rejected" };
    for v in verdicts {
        let num = |n: Option<u64>| n.map_or("-".to_owned(), |n| n.to_string());
        let ours = |n: u64| {
            if v.bpfemu.verified {
                n.to_string()
            } else {
                "-".into()
            }
        };
        writeln!(
            out,
            "{:<width$}  {:<8}  {:>10}  {:>10}  {:<8}  {:>10}  {:>10}  {:<5}  {}",
            v.program,
            verdict(v.kernel.accepted),
            num(v.kernel.processed_insns),
            num(v.kernel.verification_time_usec),
            if v.bpfemu.verified {
                verdict(v.bpfemu.accepted)
            } else {
                "-"
            },
            ours(v.bpfemu.processed_insns),
            ours(v.bpfemu.verification_time_usec),
            match (v.bpfemu.verified, v.agree) {
                (false, _) => "-",
                (true, true) => "yes",
                (true, false) => "NO",
            },
            v.kernel.error.as_deref().unwrap_or("")
        )
        .expect("string");
        if !v.bpfemu.verified {
            writeln!(
                out,
                "{:<width$}  bpfemu: {}",
                "",
                v.bpfemu.error.as_deref().unwrap_or("")
            )
            .expect("string");
        } else if !v.agree && v.bpfemu.error.is_some() {
            writeln!(
                out,
                "{:<width$}  bpfemu error: {}",
                "",
                v.bpfemu.error.as_deref().unwrap_or("")
            )
            .expect("string");
        }
    }
    let accepted = verdicts.iter().filter(|v| v.kernel.accepted).count();
    let verified = verdicts.iter().filter(|v| v.bpfemu.verified);
    write!(
        out,
        "{} programs: {accepted} accepted, {} rejected by the kernel; bpfemu agrees on {}",
        verdicts.len(),
        verdicts.len() - accepted,
        verified.clone().filter(|v| v.agree).count()
    )
    .expect("string");
    let others = verdicts.len() - verified.count();
    if others > 0 {
        write!(out, " ({others} not verified: not XDP)").expect("string");
    }
    out.push('\n');
    out
}
