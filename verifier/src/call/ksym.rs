//! Kernel symbols (`ld_imm64` with `src_reg` 3, BPF_PSEUDO_BTF_ID, `check_pseudo_btf_id`): a
//! VAR or FUNC of the running kernel's BTF, whose address `/proc/kallsyms` must know. A
//! function's address is read-only memory of size 0; a per-CPU variable is a per-CPU pointer
//! to its BTF type. (The vmlinux BTF of 6.18 holds no other variables.)

use crate::state::reg::{self, RegState, RegType};
use bpfemu_loader::btf::{Btf, BtfKind, TypeId};
use std::collections::HashSet;
use std::sync::OnceLock;

/// What the register loaded from a kernel symbol holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ksym {
    /// `PTR_TO_MEM | MEM_RDONLY` of `size` bytes.
    ReadOnlyMem { size: u32 },
    /// `PTR_TO_BTF_ID | MEM_PERCPU` of the variable's type.
    PerCpu { btf_id: TypeId },
}

/// A refusal: the errno the kernel gives and its message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KsymError {
    pub errno: i32,
    pub message: String,
}

const EINVAL: i32 = 22;
const ENOENT: i32 = 2;
const ENOTSUPP: i32 = 524;

fn error(errno: i32, message: String) -> KsymError {
    KsymError { errno, message }
}

/// Names `/proc/kallsyms` lists (`kallsyms_lookup_name` finds only those).
fn kallsyms() -> &'static HashSet<String> {
    static NAMES: OnceLock<HashSet<String>> = OnceLock::new();
    NAMES.get_or_init(|| {
        std::fs::read_to_string("/proc/kallsyms")
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.split_whitespace().nth(2).map(str::to_owned))
            .collect()
    })
}

/// `check_pseudo_btf_id` for `btf_id` with the module BTF fd `btf_fd` (0: vmlinux), in kernel
/// `version` (before 6.4 a symbol must be a variable).
pub fn check_pseudo_btf_id(
    vmlinux: Option<&Btf>,
    btf_id: i32,
    btf_fd: i32,
    version: bpfemu_isa::KernelVersion,
) -> Result<Ksym, KsymError> {
    if btf_fd != 0 {
        return Err(error(
            ENOTSUPP,
            "not yet supported: kernel symbol in module BTF".to_owned(),
        ));
    }
    let Some(btf) = vmlinux else {
        return Err(error(
            EINVAL,
            "kernel is missing BTF, make sure CONFIG_DEBUG_INFO_BTF=y is specified in Kconfig."
                .to_owned(),
        ));
    };
    let id = btf_id as u32 as TypeId;
    let Some(t) = btf.get(id) else {
        return Err(error(
            ENOENT,
            format!("ldimm64 insn specifies invalid btf_id {id}."),
        ));
    };
    let funcs = crate::profile::insns::has(version, crate::profile::insns::Feature::KsymFunctions);
    let var_type = match t.kind {
        BtfKind::Var { ty, .. } => Some(ty),
        BtfKind::Func { .. } if funcs => None,
        _ if funcs => {
            return Err(error(
                EINVAL,
                format!("pseudo btf_id {id} in ldimm64 isn't KIND_VAR or KIND_FUNC"),
            ));
        }
        _ => {
            return Err(error(
                EINVAL,
                format!("pseudo btf_id {id} in ldimm64 isn't KIND_VAR."),
            ));
        }
    };
    if !kallsyms().contains(&t.name) {
        return Err(error(
            ENOENT,
            format!(
                "ldimm64 failed to find the address for kernel symbol '{}'.",
                t.name
            ),
        ));
    }
    let Some(ty) = var_type else {
        return Ok(Ksym::ReadOnlyMem { size: 0 });
    };
    let percpu = btf.types.iter().any(|d| {
        d.name == ".data..percpu"
            && matches!(&d.kind, BtfKind::DataSec { vars, .. } if vars.iter().any(|v| v.ty == id))
    });
    if percpu {
        return Ok(Ksym::PerCpu { btf_id: ty });
    }
    Err(error(
        ENOTSUPP,
        format!("not yet supported: kernel variable '{}'", t.name),
    ))
}

/// The register an `ld_imm64` of the symbol loads.
pub fn ksym_reg(ksym: Ksym) -> RegState {
    match ksym {
        Ksym::ReadOnlyMem { size } => {
            let mut r = RegState::pointer(RegType::Mem);
            r.flags = reg::MEM_RDONLY;
            r.mem_size = size;
            r
        }
        Ksym::PerCpu { btf_id } => {
            let mut r = RegState::pointer(RegType::BtfId);
            r.flags = reg::MEM_PERCPU;
            r.btf_id = btf_id;
            r
        }
    }
}
