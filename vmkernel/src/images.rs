//! The kernels bpfemu is judged against, as Debian packages them (cloud flavour, which builds
//! in what bpf() needs), and a cache of their images.
//!
//! [`fetch`] downloads a package with `apt-get download`, keeps the vmlinuz and deletes the
//! rest (a kernel package with its modules is 100-200 MB unpacked). The cache is shared by
//! concurrent processes: each downloads into its own scratch directory and renames the image
//! into place, an atomic step, so a reader sees a whole image or none.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Where a package keeps its vmlinuz.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VmlinuzPlace {
    /// `boot/vmlinuz-RELEASE` (linux-image-* packages).
    Boot,
    /// `usr/lib/modules/RELEASE/vmlinuz` (forky's linux-binary-* packages).
    Modules,
}

/// One kernel: its version as bpfemu names it, and where apt finds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KernelImage {
    /// `5.10`, `6.1`, ...
    pub version: &'static str,
    /// What `uname -r` prints on it.
    pub release: &'static str,
    pub package: &'static str,
    /// The Debian suite that has the package.
    pub suite: &'static str,
    pub place: VmlinuzPlace,
}

/// The four kernels issue 23 names besides the host's 6.18.
pub const KERNELS: [KernelImage; 4] = [
    KernelImage {
        version: "5.10",
        release: "5.10.0-32-cloud-amd64",
        package: "linux-image-5.10.0-32-cloud-amd64",
        suite: "bullseye",
        place: VmlinuzPlace::Boot,
    },
    KernelImage {
        version: "6.1",
        release: "6.1.0-47-cloud-amd64",
        package: "linux-image-6.1.0-47-cloud-amd64",
        suite: "bookworm",
        place: VmlinuzPlace::Boot,
    },
    KernelImage {
        version: "6.12",
        release: "6.12.95+deb12-cloud-amd64",
        package: "linux-image-6.12.95+deb12-cloud-amd64",
        suite: "bookworm-backports",
        place: VmlinuzPlace::Boot,
    },
    KernelImage {
        version: "7.2",
        release: "7.2.12+deb14-cloud-amd64",
        package: "linux-binary-7.2.12+deb14-cloud-amd64",
        suite: "forky",
        place: VmlinuzPlace::Modules,
    },
];

/// The kernel of this version, if it is one of [`KERNELS`].
pub fn kernel(version: &str) -> Option<&'static KernelImage> {
    KERNELS.iter().find(|k| k.version == version)
}

/// Why an image could not be had.
#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    #[error(
        "{package}: apt cannot find it: the suite {suite} is not in apt's sources{hint} (see scripts/kernel_apt_sources.sh)"
    )]
    SuiteMissing {
        package: String,
        suite: String,
        hint: &'static str,
    },
    #[error("{package}: {step}: {reason}")]
    Step {
        package: String,
        step: &'static str,
        reason: String,
    },
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
}

impl KernelImage {
    /// The vmlinuz's member inside the package's data archive.
    pub fn member(&self) -> String {
        match self.place {
            VmlinuzPlace::Boot => format!("./boot/vmlinuz-{}", self.release),
            VmlinuzPlace::Modules => format!("./usr/lib/modules/{}/vmlinuz", self.release),
        }
    }

    /// Where the image lives in `cache`.
    pub fn cached(&self, cache: &Path) -> PathBuf {
        cache.join(format!("vmlinuz-{}", self.release))
    }
}

/// The cache: `$BPFEMU_KERNELS`, else `$XDG_CACHE_HOME/bpfemu/kernels`, else
/// `~/.cache/bpfemu/kernels`.
pub fn cache_dir() -> PathBuf {
    bpfemu_isa::kernel_version::kernel_cache_dir()
}

/// The kernel's vmlinuz in `cache`, downloaded first when it is not there yet.
pub fn fetch(kernel: &KernelImage, cache: &Path) -> Result<PathBuf, ImageError> {
    let target = kernel.cached(cache);
    if target.is_file() {
        return Ok(target);
    }
    std::fs::create_dir_all(cache).map_err(io_at(cache))?;
    let scratch = Scratch::new(cache, kernel)?;
    download(kernel, &scratch.0)?;
    let deb = find_deb(kernel, &scratch.0)?;
    extract_vmlinuz(kernel, &deb, &scratch.0)?;
    let extracted = scratch.0.join(kernel.member());
    // Same file system: the rename is atomic, and a concurrent fetch's rename of the same
    // bytes over it is harmless.
    std::fs::rename(&extracted, &target).map_err(io_at(&target))?;
    Ok(target)
}

fn io_at(path: &Path) -> impl FnOnce(std::io::Error) -> ImageError + '_ {
    move |source| ImageError::Io {
        path: path.display().to_string(),
        source,
    }
}

/// A scratch directory beside the cache's images, removed (with the .deb) when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(cache: &Path, kernel: &KernelImage) -> Result<Self, ImageError> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or_default();
        let name = format!(".{}.{}-{nanos}", kernel.version, std::process::id());
        let path = cache.join(name);
        std::fs::create_dir_all(&path).map_err(io_at(&path))?;
        Ok(Self(path))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn download(kernel: &KernelImage, dir: &Path) -> Result<(), ImageError> {
    let output = Command::new("apt-get")
        .args(["download", "-q", kernel.package])
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| step_error(kernel, "apt-get download", e.to_string()))?;
    if output.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    let unknown = stderr.contains("Unable to locate package")
        || stderr.contains("has no installation candidate")
        || stderr.contains("Can't select candidate version")
        || stderr.contains("Can't select version");
    if unknown {
        let hint = if suite_in_sources(kernel.suite) {
            ", or its package lists are stale (apt-get update)"
        } else {
            ""
        };
        return Err(ImageError::SuiteMissing {
            package: kernel.package.into(),
            suite: kernel.suite.into(),
            hint,
        });
    }
    let last = stderr
        .lines()
        .rfind(|l| l.starts_with("E:"))
        .unwrap_or(stderr.trim());
    Err(step_error(kernel, "apt-get download", last.to_owned()))
}

/// Whether apt knows the suite at all (`apt-cache policy` lists a release `n=SUITE`).
fn suite_in_sources(suite: &str) -> bool {
    Command::new("apt-cache")
        .arg("policy")
        .stderr(Stdio::null())
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).contains(&format!("n={suite},")))
        .unwrap_or(false)
}

fn find_deb(kernel: &KernelImage, dir: &Path) -> Result<PathBuf, ImageError> {
    let entries = std::fs::read_dir(dir).map_err(io_at(dir))?;
    entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "deb"))
        .ok_or_else(|| step_error(kernel, "apt-get download", "no .deb appeared".into()))
}

/// Unpacks only the vmlinuz: `dpkg-deb --fsys-tarfile DEB | tar -x MEMBER`.
fn extract_vmlinuz(kernel: &KernelImage, deb: &Path, dir: &Path) -> Result<(), ImageError> {
    let mut dpkg = Command::new("dpkg-deb")
        .arg("--fsys-tarfile")
        .arg(deb)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| step_error(kernel, "dpkg-deb", e.to_string()))?;
    let tarball = dpkg
        .stdout
        .take()
        .ok_or_else(|| step_error(kernel, "dpkg-deb", "no output pipe".into()))?;
    let tar = Command::new("tar")
        .args(["-x", "-f", "-", "-C"])
        .arg(dir)
        .arg(kernel.member())
        .stdin(tarball)
        .output()
        .map_err(|e| step_error(kernel, "tar", e.to_string()))?;
    let dpkg = dpkg
        .wait_with_output()
        .map_err(|e| step_error(kernel, "dpkg-deb", e.to_string()))?;
    if !dpkg.status.success() {
        let why = String::from_utf8_lossy(&dpkg.stderr).trim().to_owned();
        return Err(step_error(kernel, "dpkg-deb --fsys-tarfile", why));
    }
    if !tar.status.success() {
        let why = String::from_utf8_lossy(&tar.stderr).trim().to_owned();
        return Err(step_error(kernel, "tar", why));
    }
    Ok(())
}

fn step_error(kernel: &KernelImage, step: &'static str, reason: String) -> ImageError {
    ImageError::Step {
        package: kernel.package.into(),
        step,
        reason,
    }
}
