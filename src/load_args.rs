//! The flags every command that loads an object shares (`--map-size`, `--btf`), and the
//! [`LoadOptions`] they stand for.

use bpfemu_loader::{Kernel, LoadOptions};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::OnceLock;

/// How an object is loaded.
#[derive(clap::Args, Debug, Default)]
pub struct LoadArgs {
    /// max_entries for a map declared with 0, `NAME=N` (repeatable).
    #[arg(long = "map-size", value_name = "NAME=N", value_parser = parse_map_size)]
    pub map_sizes: Vec<(String, u32)>,
    /// The kernel's BTF: CO-RE, ksyms, the verifier's kfunc checks and the kfuncs the
    /// runtime calls follow it (default: /sys/kernel/btf/vmlinux).
    #[arg(long, value_name = "FILE")]
    pub btf: Option<PathBuf>,
    /// The kernel `btf` stands for, built on first use and shared by every load of the
    /// command, so its BTF is read at most once.
    #[arg(skip)]
    kernel: OnceLock<Kernel>,
}

impl LoadArgs {
    /// The options a command loads its objects with.
    pub fn options(&self) -> LoadOptions {
        let kernel = self.kernel.get_or_init(|| {
            self.btf
                .as_ref()
                .map_or_else(Kernel::running, Kernel::with_btf_file)
        });
        LoadOptions {
            kernel: kernel.clone(),
            map_sizes: self.map_sizes.iter().cloned().collect::<BTreeMap<_, _>>(),
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
