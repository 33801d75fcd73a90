//! bpf-to-bpf calls (`check_func_call`, `prepare_func_exit`): static subprograms are verified
//! per call site in a new frame; global ones once against their BTF prototype.

use crate::env::Env;
use crate::state::VerifierState;
use crate::{Errno, Reject};

/// Checks `call pc+rel` at `pc`; returns the instruction the walk continues at.
pub fn check_func_call(
    env: &mut Env<'_>,
    state: &mut VerifierState,
    pc: usize,
    rel: i32,
) -> Result<usize, Reject> {
    let _ = (state, pc, rel);
    Err(env.reject(Errno::Einval, "not yet supported: bpf-to-bpf calls"))
}

/// `exit` from a subprogram or callback frame: pops the frame, returns where the walk continues.
pub fn prepare_func_exit(env: &mut Env<'_>, state: &mut VerifierState) -> Result<usize, Reject> {
    let _ = state;
    Err(env.reject(Errno::Einval, "not yet supported: subprogram exit"))
}
