//! [`KernelVersion`]: the Linux kernels bpfemu answers as.
//!
//! bpfemu models one verifier, 6.18's, and answers for other kernels through profiles: data
//! where what differs is data (the helpers a version has, the instructions it decodes) and a
//! few named behaviour switches where it is code. This is the list of those kernels, said once:
//! every crate that asks "which kernel" asks with this type.

use std::fmt;

/// A kernel bpfemu has a profile of. The order is the kernels' release order, so
/// `version >= KernelVersion::V6_12` reads as "6.12 or later".
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum KernelVersion {
    /// Debian 11 (bullseye).
    V5_10,
    /// Debian 12 (bookworm).
    V6_1,
    /// Debian 12 backports.
    V6_12,
    /// The kernel bpfemu's verifier is modelled on.
    V6_18,
    /// Debian 14 (forky).
    V7_2,
}

impl KernelVersion {
    /// Every profile, oldest first.
    pub const ALL: [KernelVersion; 5] = [
        KernelVersion::V5_10,
        KernelVersion::V6_1,
        KernelVersion::V6_12,
        KernelVersion::V6_18,
        KernelVersion::V7_2,
    ];

    /// The kernel answered for when none is named and the running one has no profile.
    pub const DEFAULT: KernelVersion = KernelVersion::V6_18;

    /// `major.minor`, as `uname -r` begins.
    pub fn name(self) -> &'static str {
        match self {
            KernelVersion::V5_10 => "5.10",
            KernelVersion::V6_1 => "6.1",
            KernelVersion::V6_12 => "6.12",
            KernelVersion::V6_18 => "6.18",
            KernelVersion::V7_2 => "7.2",
        }
    }

    /// The profile of a release string (`uname -r`: `6.1.0-47-cloud-amd64`, `6.18.44`): its
    /// `major.minor` must be one of [`KernelVersion::ALL`].
    pub fn of_release(release: &str) -> Option<KernelVersion> {
        let mut parts = release.split(|c: char| !c.is_ascii_digit());
        let major = parts.next()?;
        let minor = parts.next()?;
        KernelVersion::ALL
            .into_iter()
            .find(|v| v.name() == format!("{major}.{minor}"))
    }

    /// The running kernel's profile, if it has one.
    pub fn running() -> Option<KernelVersion> {
        let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").ok()?;
        KernelVersion::of_release(release.trim())
    }
}

impl fmt::Display for KernelVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Where the kernels bpfemu fetches are kept (each one's image and BTF): `$BPFEMU_KERNELS`,
/// else `$XDG_CACHE_HOME/bpfemu/kernels`, else `~/.cache/bpfemu/kernels`.
pub fn kernel_cache_dir() -> std::path::PathBuf {
    use std::path::PathBuf;
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    if let Some(dir) = var("BPFEMU_KERNELS") {
        return PathBuf::from(dir);
    }
    let cache = var("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| var("HOME").map(|home| PathBuf::from(home).join(".cache")))
        .unwrap_or_else(|| std::env::temp_dir().join("cache"));
    cache.join("bpfemu").join("kernels")
}

/// Why a `--kernel` value names no profile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownKernel(pub String);

impl fmt::Display for UnknownKernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let known: Vec<&str> = KernelVersion::ALL.iter().map(|v| v.name()).collect();
        write!(
            f,
            "no profile of kernel '{}' (bpfemu answers as {})",
            self.0,
            known.join(", ")
        )
    }
}

impl std::error::Error for UnknownKernel {}

impl std::str::FromStr for KernelVersion {
    type Err = UnknownKernel;

    /// `5.10`, `v6.1`, or a full release (`6.12.95+deb12-cloud-amd64`) of a profiled kernel.
    fn from_str(text: &str) -> Result<KernelVersion, UnknownKernel> {
        let trimmed = text.trim();
        let bare = trimmed.strip_prefix('v').unwrap_or(trimmed);
        let exact = KernelVersion::ALL.into_iter().find(|v| v.name() == bare);
        let release = bare
            .starts_with(|c: char| c.is_ascii_digit())
            .then(|| KernelVersion::of_release(bare))
            .flatten()
            // `6.1` is not `6.12`: a release must continue past its minor with a separator.
            .filter(|v| {
                let rest = &bare[v.name().len()..];
                rest.is_empty() || rest.starts_with(['.', '-', '+'])
            });
        exact
            .or(release)
            .ok_or_else(|| UnknownKernel(text.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_releases_parse_to_their_profile() {
        for v in KernelVersion::ALL {
            assert_eq!(v.name().parse::<KernelVersion>(), Ok(v));
            assert_eq!(format!("v{v}").parse::<KernelVersion>(), Ok(v));
        }
        let v = |s: &str| s.parse::<KernelVersion>();
        assert_eq!(v("6.1.0-47-cloud-amd64"), Ok(KernelVersion::V6_1));
        assert_eq!(v("6.12.95+deb12-cloud-amd64"), Ok(KernelVersion::V6_12));
        assert_eq!(v("6.18.44"), Ok(KernelVersion::V6_18));
        assert_eq!(v("5.10.0-32-cloud-amd64"), Ok(KernelVersion::V5_10));
        for unknown in ["6.2", "6.10", "6.181", "5", "", "latest", "6.1x"] {
            assert!(v(unknown).is_err(), "{unknown}");
        }
        let err = v("4.19").unwrap_err().to_string();
        assert_eq!(
            err,
            "no profile of kernel '4.19' (bpfemu answers as 5.10, 6.1, 6.12, 6.18, 7.2)"
        );
    }

    #[test]
    fn versions_order_as_released() {
        assert!(KernelVersion::V5_10 < KernelVersion::V6_1);
        assert!(KernelVersion::V6_12 < KernelVersion::V6_18);
        assert!(KernelVersion::V7_2 > KernelVersion::DEFAULT);
        assert_eq!(
            KernelVersion::of_release("6.12"),
            Some(KernelVersion::V6_12)
        );
        assert_eq!(KernelVersion::of_release("6.13.1"), None);
    }
}
