//! Loads, stores and atomics (`check_mem_access`, `check_atomic`) on the stack, the packet, map
//! values and keys, the ctx (through [`crate::prog_type`]) and memory regions; and the memory
//! arguments of helpers (`check_helper_mem_access`, `check_mem_size_reg`).

use crate::env::Env;
use crate::state::VerifierState;
use crate::{Errno, Reject};
use bpfemu_isa::Reg;

/// Whether an access reads or writes memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AccessType {
    Read,
    /// A write; for a helper's memory argument (`MEM_UNINIT`) uninitialised stack is allowed
    /// and becomes written.
    Write,
}

/// A helper's memory argument: `access_size` bytes at the pointer in `regno`
/// (`check_helper_mem_access`).
pub fn check_helper_mem_access(
    env: &mut Env<'_>,
    state: &mut VerifierState,
    regno: Reg,
    access_size: i32,
    access: AccessType,
    zero_size_allowed: bool,
) -> Result<(), Reject> {
    let _ = (state, regno, access_size, access, zero_size_allowed);
    Err(env.reject(Errno::Einval, "not yet supported: helper memory arguments"))
}

/// A helper's memory argument whose size is in a register (`ARG_CONST_SIZE[_OR_ZERO]`):
/// checks the size's bounds and the memory at `mem_regno` (`check_mem_size_reg`).
pub fn check_mem_size_reg(
    env: &mut Env<'_>,
    state: &mut VerifierState,
    mem_regno: Reg,
    size_regno: Reg,
    access: AccessType,
    zero_size_allowed: bool,
) -> Result<(), Reject> {
    let _ = (state, mem_regno, size_regno, access, zero_size_allowed);
    Err(env.reject(
        Errno::Einval,
        "not yet supported: helper memory size arguments",
    ))
}
