//! [`Kernel`]: the kernel a program is loaded into and judged by, as one explicit value.

use crate::btf::{Btf, BtfKind};
use bpfemu_isa::{KernelVersion, RawInsn};
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

/// `/sys/kernel/btf/vmlinux`: the running kernel's BTF, the one used unless told otherwise.
pub const VMLINUX_BTF: &str = "/sys/kernel/btf/vmlinux";

/// The kernel a program is loaded into and judged by: the loader resolves `__ksym` externs and
/// CO-RE relocations against it, the verifier checks kfunc calls, kernel variables and `ptr_`
/// accesses against it, and the runtime names the kfuncs a program calls from it. One value is
/// built per run (the CLI's `--btf` or the running kernel) and handed to each of them, so they
/// all agree on the same kernel.
///
/// It is a kernel version, whose profile says what that kernel accepts (the verifier reads it
/// through [`Kernel::version`]), and that kernel's BTF (vmlinux): a file read and parsed at
/// most once per value, and only when something asks for it (most objects never need it;
/// parsing costs milliseconds).
///
/// Clones share the value (and its parsed BTF): it is cheap to pass around and to keep in an
/// [`Object`](crate::Object).
#[derive(Clone)]
pub struct Kernel {
    inner: Arc<Inner>,
}

struct Inner {
    /// Which kernel it is, and how that was decided.
    version: KernelVersion,
    choice: VersionChoice,
    /// Where its BTF is read from (and what messages call it).
    btf_path: PathBuf,
    /// The BTF once asked for, or why it cannot be had; the file is read once either way.
    btf: OnceLock<Result<Btf, KernelBtfError>>,
}

/// Why a kernel's BTF cannot be had: the file, and what went wrong reading or parsing it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}: {message}", path.display())]
pub struct KernelBtfError {
    pub path: PathBuf,
    pub message: String,
}

/// How a [`Kernel`]'s version was decided: what `verify` says beside its answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum VersionChoice {
    /// Named by the user (`--kernel`).
    Named,
    /// The running kernel, which has a profile.
    Running,
    /// The default, because the running kernel (its release given, when it could be read) has
    /// no profile.
    Fallback { running: Option<String> },
}

impl Kernel {
    /// The running kernel: its BTF is [`VMLINUX_BTF`]; its version the running one's when
    /// bpfemu has a profile of it, else [`KernelVersion::DEFAULT`].
    pub fn running() -> Kernel {
        Kernel::with_btf_file(VMLINUX_BTF)
    }

    /// The running kernel's version (as [`Kernel::running`]) with the BTF at `path` (`--btf
    /// FILE`), read when first needed.
    pub fn with_btf_file(path: impl Into<PathBuf>) -> Kernel {
        let (version, choice) = running_version();
        Kernel::build(version, choice, path.into())
    }

    /// Kernel `version` as the user named it. Its BTF is `btf` when given; else the running
    /// kernel's when it is that version, else the profile's file in the kernel cache
    /// ([`profile_btf_path`]).
    pub fn named(version: KernelVersion, btf: Option<PathBuf>) -> Kernel {
        let btf = btf.unwrap_or_else(|| match KernelVersion::running() == Some(version) {
            true => PathBuf::from(VMLINUX_BTF),
            false => profile_btf_path(version),
        });
        Kernel::build(version, VersionChoice::Named, btf)
    }

    fn build(version: KernelVersion, choice: VersionChoice, btf_path: PathBuf) -> Kernel {
        Kernel {
            inner: Arc::new(Inner {
                version,
                choice,
                btf_path,
                btf: OnceLock::new(),
            }),
        }
    }

    /// The kernel it answers as.
    pub fn version(&self) -> KernelVersion {
        self.inner.version
    }

    /// How [`Kernel::version`] was decided.
    pub fn version_choice(&self) -> &VersionChoice {
        &self.inner.choice
    }

    /// The version and why it is that one, as `verify` prints it: `6.18 (the running
    /// kernel)`, `6.1`, `6.18 (the running kernel, 6.5.0, has no profile)`.
    pub fn describe(&self) -> String {
        let version = self.version();
        match &self.inner.choice {
            VersionChoice::Named => version.to_string(),
            VersionChoice::Running => format!("{version} (the running kernel)"),
            VersionChoice::Fallback { running: Some(r) } => {
                format!("{version} (the running kernel, {r}, has no profile)")
            }
            VersionChoice::Fallback { running: None } => {
                format!("{version} (the running kernel is unknown)")
            }
        }
    }

    /// A kernel whose BTF is given, already parsed; `path` is what messages call it.
    pub fn with_btf(path: impl Into<PathBuf>, btf: Btf) -> Kernel {
        let kernel = Kernel::with_btf_file(path);
        let _ = kernel.inner.btf.set(Ok(btf));
        kernel
    }

    /// Its BTF's file.
    pub fn btf_path(&self) -> &Path {
        &self.inner.btf_path
    }

    /// Its BTF, read and parsed on the first call (by any clone of this value); the error
    /// names the file.
    pub fn btf(&self) -> Result<&Btf, KernelBtfError> {
        self.inner
            .btf
            .get_or_init(|| read_btf(&self.inner.btf_path).map_err(|e| self.fetch_hint(e)))
            .as_ref()
            .map_err(Clone::clone)
    }

    /// A profile's BTF that is not in the kernel cache says how to get it there.
    fn fetch_hint(&self, error: KernelBtfError) -> KernelBtfError {
        let version = self.inner.version;
        if error.path != profile_btf_path(version) || error.path.exists() {
            return error;
        }
        KernelBtfError {
            message: format!(
                "{version}'s BTF is not fetched (`bpfemu kernels fetch {version}` reads it once from that kernel booted under QEMU; or give one with --btf)"
            ),
            ..error
        }
    }

    /// Whether its BTF has been read already (by a call of [`Kernel::btf`]).
    pub fn btf_is_loaded(&self) -> bool {
        self.inner.btf.get().is_some()
    }

    /// The names of the vmlinux kfuncs `programs` call (`call` with `src_reg` 2 and `off` 0),
    /// by BTF id: what a runtime needs to run them, without reading BTF itself. Ids that name
    /// no function are left out (the runtime refuses those calls). The BTF is read only when
    /// a program calls a kfunc.
    pub fn kfunc_names<'a>(
        &self,
        programs: impl IntoIterator<Item = &'a [RawInsn]>,
    ) -> Result<BTreeMap<i32, String>, KernelBtfError> {
        let mut names = BTreeMap::new();
        for insns in programs {
            let mut pc = 0;
            while pc < insns.len() {
                let insn = insns[pc];
                // The second slot of an ld_imm64 is data, not an instruction.
                pc += if insn.code == 0x18 { 2 } else { 1 };
                if insn.code != 0x85 || insn.src != 2 || insn.off != 0 {
                    continue;
                }
                let func = u32::try_from(insn.imm)
                    .ok()
                    .and_then(|id| self.btf().map(|btf| btf.get(id)).transpose())
                    .transpose()?
                    .filter(|t| matches!(t.kind, BtfKind::Func { .. }));
                if let Some(func) = func {
                    names.insert(insn.imm, func.name.clone());
                }
            }
        }
        Ok(names)
    }
}

impl fmt::Debug for Kernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Kernel")
            .field("version", &self.inner.version)
            .field("btf_path", &self.inner.btf_path)
            .field("btf_loaded", &self.btf_is_loaded())
            .finish()
    }
}

/// The running kernel's version and how it was decided.
fn running_version() -> (KernelVersion, VersionChoice) {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .ok()
        .map(|r| r.trim().to_owned());
    match release.as_deref().and_then(KernelVersion::of_release) {
        Some(v) => (v, VersionChoice::Running),
        None => (
            KernelVersion::DEFAULT,
            VersionChoice::Fallback { running: release },
        ),
    }
}

/// The BTF of a profiled kernel in the kernel cache: `CACHE/VERSION/vmlinux.btf`.
pub fn profile_btf_path(version: KernelVersion) -> PathBuf {
    bpfemu_isa::kernel_version::kernel_cache_dir()
        .join(version.name())
        .join("vmlinux.btf")
}

fn read_btf(path: &Path) -> Result<Btf, KernelBtfError> {
    let error = |message: String| KernelBtfError {
        path: path.to_path_buf(),
        message,
    };
    let bytes = std::fs::read(path).map_err(|e| error(e.to_string()))?;
    Btf::parse_kernel(&bytes).map_err(|e| error(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::btf::{BtfType, Linkage, TypeId};

    /// A BTF of one function, `f`, at id 2 (its prototype at 1).
    fn one_function() -> Btf {
        Btf {
            types: vec![
                BtfType {
                    name: String::new(),
                    kind: BtfKind::Void,
                },
                BtfType {
                    name: String::new(),
                    kind: BtfKind::FuncProto {
                        ret: 0,
                        params: Vec::new(),
                    },
                },
                BtfType {
                    name: "f".into(),
                    kind: BtfKind::Func {
                        proto: 1 as TypeId,
                        linkage: Linkage::Global,
                    },
                },
            ],
            ..Btf::default()
        }
    }

    fn call(src: u8, imm: i32) -> RawInsn {
        RawInsn::new(0x85, 0, src, 0, imm)
    }

    #[test]
    fn its_btf_is_read_only_when_asked_for() {
        let kernel = Kernel::with_btf_file("/nonexistent/vmlinux");
        assert!(!kernel.btf_is_loaded());
        // Programs without kfunc calls need no BTF: the missing file goes unnoticed.
        let helper_only = [call(0, 7), RawInsn::new(0x95, 0, 0, 0, 0)];
        assert_eq!(kernel.kfunc_names([&helper_only[..]]), Ok(BTreeMap::new()));
        assert!(!kernel.btf_is_loaded());
        assert!(kernel.btf().is_err());
        assert!(kernel.btf_is_loaded(), "the failure is kept too");
    }

    #[test]
    fn the_error_names_the_file() {
        let err = Kernel::with_btf_file("/nonexistent/vmlinux")
            .btf()
            .unwrap_err();
        assert_eq!(err.path, Path::new("/nonexistent/vmlinux"));
        assert!(
            err.to_string().starts_with("/nonexistent/vmlinux: "),
            "{err}"
        );
        let dir = std::env::temp_dir().join(format!("bpfemu-kernel-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let garbage = dir.join("not-btf");
        std::fs::write(&garbage, b"not BTF at all").unwrap();
        let err = Kernel::with_btf_file(&garbage).btf().unwrap_err();
        assert!(
            err.to_string()
                .starts_with(&format!("{}: ", garbage.display())),
            "{err}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn clones_share_one_read() {
        let kernel = Kernel::with_btf("test", one_function());
        let clone = kernel.clone();
        assert!(std::ptr::eq(kernel.btf().unwrap(), clone.btf().unwrap()));
    }

    #[test]
    fn kfunc_names_name_the_functions_called() {
        let kernel = Kernel::with_btf("test", one_function());
        let insns = [
            call(2, 2),
            // ld_imm64 whose second slot looks like a kfunc call: not one.
            RawInsn::new(0x18, 1, 0, 0, 0),
            call(2, 1),
            call(2, 1), // a prototype, not a function: left out
            call(2, 99),
            RawInsn::new(0x85, 0, 2, 3, 2), // a module's kfunc: not vmlinux's
        ];
        assert_eq!(
            kernel.kfunc_names([&insns[..]]),
            Ok(BTreeMap::from([(2, "f".to_string())]))
        );
    }
}
