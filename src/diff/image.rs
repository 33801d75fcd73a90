//! `diff --verifier --kernel-image VMLINUZ`: the same comparison of verdicts as against the
//! running kernel, with another kernel as the judge. The image boots under QEMU
//! (bpfemu_vmkernel) with bpfemu itself as `/init`; its `kernel-verdicts` job loads every
//! program there, and the same boot hands back the kernel's BTF, so that bpfemu answers as
//! that kernel's version with that kernel's types.

use super::*;
use bpfemu_isa::KernelVersion;
use bpfemu_loader::Kernel;
use bpfemu_vmkernel::bzimage::{self, BzImageError};
use bpfemu_vmkernel::{JobStatus, Vm, VmError};
use std::time::Duration;

/// Where the kernel's BTF is read in the guest.
const GUEST_BTF: &str = "/sys/kernel/btf/vmlinux";
/// Where the object is put in the guest.
const GUEST_OBJECT: &str = "/objects/object.o";
/// A TCG boot takes seconds; a large object's verification in the guest a little more.
const BOOT_TIMEOUT: Duration = Duration::from_secs(300);

/// Why a kernel image could not judge the object.
#[derive(Debug, thiserror::Error)]
pub enum ImageDiffError {
    #[error(transparent)]
    Header(#[from] BzImageError),
    #[error(
        "{path}: kernel {release} has no bpfemu profile (it answers as {known}); name the one to answer as with --kernel VERSION"
    )]
    NoProfile {
        path: String,
        release: String,
        known: String,
    },
    #[error("{path}: --kernel: one image is one kernel; name one version")]
    SeveralKernels { path: String },
    #[error("{path}: booting it: {source}")]
    Boot { path: String, source: VmError },
    #[error("{path}: the guest's kernel-verdicts {status}: {stderr}")]
    Job {
        path: String,
        status: String,
        stderr: String,
    },
    #[error("{path}: the guest's kernel-verdicts line {line}: {reason}")]
    Garbled {
        path: String,
        line: usize,
        reason: String,
    },
    #[error("{path}: cannot save its BTF to {saved}: {source}")]
    SaveBtf {
        path: String,
        saved: String,
        source: std::io::Error,
    },
    #[error(transparent)]
    Diff(#[from] DiffError),
}

/// The kernel an image holds: its release (from the boot header) and the profile bpfemu
/// answers as: `named` when given, else the release's.
pub fn image_kernel(
    image: &Path,
    named: Option<KernelVersion>,
) -> Result<(String, KernelVersion), ImageDiffError> {
    let release = bzimage::release_of(image)?;
    let version = named
        .or_else(|| KernelVersion::of_release(&release))
        .ok_or_else(|| ImageDiffError::NoProfile {
            path: image.display().to_string(),
            known: KernelVersion::ALL.map(KernelVersion::name).join(", "),
            release: release.clone(),
        })?;
    Ok((release, version))
}

/// A comparison against a booted image.
#[derive(Clone, Debug, Serialize)]
pub struct ImageVerdicts {
    /// What `uname -r` said in the guest.
    pub release: String,
    /// The profile bpfemu answered as.
    pub answered_as: String,
    pub programs: Vec<ProgramVerdict>,
}

/// `diff --verifier --kernel-image`: the profile `image` names (or the one `--kernel` names,
/// at most one), then [`verify_in_image`].
pub fn compare_with_image(
    image: &Path,
    kernels: &[KernelVersion],
    object: &Path,
    map_sizes: &[(String, u32)],
    btf: Option<&Path>,
) -> Result<ImageVerdicts, ImageDiffError> {
    if kernels.len() > 1 {
        return Err(ImageDiffError::SeveralKernels {
            path: image.display().to_string(),
        });
    }
    let (_, version) = image_kernel(image, kernels.first().copied())?;
    verify_in_image(image, version, object, map_sizes, btf)
}

/// Boots `image` once to judge every program of `object`, then judges them with bpfemu as
/// `version`; `map_sizes` are `--map-size` values, given to both sides. `btf`: the user's
/// `--btf`, else the guest's own.
pub fn verify_in_image(
    image: &Path,
    version: KernelVersion,
    object: &Path,
    map_sizes: &[(String, u32)],
    btf: Option<&Path>,
) -> Result<ImageVerdicts, ImageDiffError> {
    let guest = boot_and_judge(image, object, map_sizes)?;
    let saved_btf = match btf {
        Some(_) => None,
        None => guest
            .btf
            .as_deref()
            .map(|b| TempBtf::save(image, b))
            .transpose()?,
    };
    let btf = btf
        .map(Path::to_path_buf)
        .or_else(|| saved_btf.as_ref().map(|t| t.0.clone()));
    let load = LoadOptions {
        kernel: Kernel::named(version, btf),
        map_sizes: map_sizes.iter().cloned().collect(),
        kconfig: None,
        untyped_prog_type: Some(BPF_PROG_TYPE_XDP),
    };
    let loaded = bpfemu_loader::load_file(object, &load).map_err(|e| DiffError::Load {
        path: object.display().to_string(),
        message: e.to_string(),
    })?;
    let judge = crate::verify::ObjectJudge::new(&loaded);
    let programs = loaded
        .programs
        .iter()
        .map(|p| {
            let kernel = guest_verdict(&guest.verdicts, &p.name);
            let bpfemu = BpfemuVerdict::of(&judge, p);
            ProgramVerdict {
                program: p.name.clone(),
                section: p.section.clone(),
                agree: bpfemu.agrees_with(&kernel),
                kernel,
                bpfemu,
            }
        })
        .collect();
    Ok(ImageVerdicts {
        release: guest.release,
        answered_as: version.name().to_owned(),
        programs,
    })
}

/// The guest's verdict on `program`; a program it did not report is a rejection saying so.
fn guest_verdict(verdicts: &[KernelProgramVerdict], program: &str) -> KernelVerdict {
    verdicts
        .iter()
        .find(|v| v.program == program)
        .map(|v| v.kernel.clone())
        .unwrap_or_else(|| KernelVerdict {
            accepted: false,
            error: Some("the booted kernel reported no verdict on it".to_owned()),
            processed_insns: None,
            verification_time_usec: None,
            stats: None,
        })
}

/// What one boot brought back.
struct GuestJudgement {
    release: String,
    verdicts: Vec<KernelProgramVerdict>,
    btf: Option<Vec<u8>>,
}

fn boot_and_judge(
    image: &Path,
    object: &Path,
    map_sizes: &[(String, u32)],
) -> Result<GuestJudgement, ImageDiffError> {
    let path = image.display().to_string();
    let bytes = std::fs::read(object).map_err(|e| DiffError::Load {
        path: object.display().to_string(),
        message: e.to_string(),
    })?;
    let init = std::env::current_exe().map_err(|e| ImageDiffError::Boot {
        path: path.clone(),
        source: VmError::Io {
            path: "bpfemu's own executable (the guest's init)".to_owned(),
            source: e,
        },
    })?;
    let mut job = vec![
        "/init".to_owned(),
        "kernel-verdicts".to_owned(),
        GUEST_OBJECT.to_owned(),
    ];
    for (name, n) in map_sizes {
        job.extend(["--map-size".to_owned(), format!("{name}={n}")]);
    }
    let results = Vm::new(image, &init)
        .with_file(GUEST_OBJECT, bytes)
        .job(job)
        .fetch_file(GUEST_BTF)
        .timeout(BOOT_TIMEOUT)
        .run()
        .map_err(|source| ImageDiffError::Boot {
            path: path.clone(),
            source,
        })?;
    let job = results.jobs.first().ok_or_else(|| ImageDiffError::Job {
        path: path.clone(),
        status: "job did not run".to_owned(),
        stderr: String::new(),
    })?;
    if job.status != JobStatus::Exited(0) {
        let stderr = String::from_utf8_lossy(&job.stderr);
        return Err(ImageDiffError::Job {
            path,
            status: format!("ended {:?}", job.status),
            stderr: stderr.trim().replace('\n', "; "),
        });
    }
    let verdicts = parse_guest_lines(&path, &job.stdout)?;
    let btf = match results.files.get(GUEST_BTF) {
        Some(Ok(bytes)) => Some(bytes.clone()),
        _ => None,
    };
    Ok(GuestJudgement {
        release: results.release,
        verdicts,
        btf,
    })
}

fn parse_guest_lines(
    path: &str,
    stdout: &[u8],
) -> Result<Vec<KernelProgramVerdict>, ImageDiffError> {
    String::from_utf8_lossy(stdout)
        .lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(i, line)| {
            serde_json::from_str(line).map_err(|e| ImageDiffError::Garbled {
                path: path.to_owned(),
                line: i + 1,
                reason: e.to_string(),
            })
        })
        .collect()
}

/// The guest's BTF in a file of its own while bpfemu reads it, removed after.
struct TempBtf(PathBuf);

impl TempBtf {
    fn save(image: &Path, bytes: &[u8]) -> Result<TempBtf, ImageDiffError> {
        let path = std::env::temp_dir().join(format!("bpfemu-image-btf.{}", std::process::id()));
        std::fs::write(&path, bytes).map_err(|source| ImageDiffError::SaveBtf {
            path: image.display().to_string(),
            saved: path.display().to_string(),
            source,
        })?;
        Ok(TempBtf(path))
    }
}

impl Drop for TempBtf {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}
