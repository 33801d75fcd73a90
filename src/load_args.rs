//! The flags every command that loads an object shares (`--map-size`, `--btf`, `--kernel`),
//! and the [`LoadOptions`] they stand for.

use bpfemu_isa::KernelVersion;
use bpfemu_loader::{Kernel, LoadOptions};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::OnceLock;

/// How an object is loaded, whatever the kernel: `--map-size`, `--btf`. (`bpfemu test`
/// takes these alone: its `--kernel` runs the tests in the running kernel too.)
#[derive(clap::Args, Debug, Default)]
pub struct ObjectArgs {
    /// max_entries for a map declared with 0, `NAME=N` (repeatable).
    #[arg(long = "map-size", value_name = "NAME=N", value_parser = parse_map_size)]
    pub map_sizes: Vec<(String, u32)>,
    /// The kernel's BTF: CO-RE, ksyms, the verifier's kfunc checks and the kfuncs the
    /// runtime calls follow it (default: /sys/kernel/btf/vmlinux).
    #[arg(long, value_name = "FILE")]
    pub btf: Option<PathBuf>,
}

/// How an object is loaded, and the kernels it is judged as.
#[derive(clap::Args, Debug, Default)]
pub struct LoadArgs {
    #[command(flatten)]
    pub object: ObjectArgs,
    /// The kernel to answer as: 5.10, 6.1, 6.12, 6.18 or 7.2 (`verify` takes several,
    /// separated by commas). Default: the running kernel when bpfemu has its profile, else
    /// 6.18.
    #[arg(long, value_name = "VERSION", value_delimiter = ',')]
    pub kernel: Vec<KernelVersion>,
    /// The kernels the flags stand for, built on first use and shared by every load of the
    /// command, so each one's BTF is read at most once.
    #[arg(skip)]
    kernels: OnceLock<Vec<Kernel>>,
}

impl From<ObjectArgs> for LoadArgs {
    /// The default kernel.
    fn from(object: ObjectArgs) -> LoadArgs {
        LoadArgs {
            object,
            ..LoadArgs::default()
        }
    }
}

impl LoadArgs {
    /// The options a command that answers for one kernel loads its objects with: the
    /// kernel named (the first, for a command that takes only one) or the default.
    pub fn options(&self) -> LoadOptions {
        self.options_for(&self.kernels()[0])
    }

    /// The kernels named, without repeats, in the order given; the default kernel when none is.
    pub fn kernels(&self) -> &[Kernel] {
        self.kernels.get_or_init(|| {
            if self.kernel.is_empty() {
                return vec![
                    self.object
                        .btf
                        .as_ref()
                        .map_or_else(Kernel::running, Kernel::with_btf_file),
                ];
            }
            let mut seen = Vec::new();
            for v in &self.kernel {
                if !seen.contains(v) {
                    seen.push(*v);
                }
            }
            seen.into_iter()
                .map(|v| Kernel::named(v, self.object.btf.clone()))
                .collect()
        })
    }

    /// Refuses several kernels for a command that answers for one.
    pub fn one_kernel(&self, command: &str) -> anyhow::Result<()> {
        match self.kernels().len() {
            1 => Ok(()),
            _ => anyhow::bail!(
                "--kernel: `bpfemu {command}` answers for one kernel; only `verify` takes several"
            ),
        }
    }

    /// The options to load objects with as `kernel`.
    pub fn options_for(&self, kernel: &Kernel) -> LoadOptions {
        LoadOptions {
            kernel: kernel.clone(),
            map_sizes: self
                .object
                .map_sizes
                .iter()
                .cloned()
                .collect::<BTreeMap<_, _>>(),
            kconfig: None,
            // bpfemu's commands run XDP programs: a section that names no type (iproute2's
            // `prog`, its tail-call sections) is XDP, as under `ip link set dev DEV xdp obj`.
            untyped_prog_type: Some(bpfemu_isa::uapi::BPF_PROG_TYPE_XDP),
        }
    }
}

fn parse_map_size(arg: &str) -> Result<(String, u32), String> {
    let (name, n) = arg.split_once('=').ok_or("expected NAME=N")?;
    let n = n.parse().map_err(|_| format!("'{n}' is not a number"))?;
    Ok((name.to_string(), n))
}
