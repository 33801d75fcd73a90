//! Helper calls (`check_helper_call`): the 6.18 prototype of every helper XDP may call, argument
//! checks (types, map key/value sizes, constant or bounded sizes, flags), map/helper
//! compatibility, R0's type, clobbered registers, packet pointers dropped after helpers that
//! change packet data, and references for ring buffer records.

use crate::env::Env;
use crate::state::VerifierState;
use crate::{Errno, Reject};

/// Checks `call func_id` at `pc` against the helper's prototype and applies its effects to
/// `state`: R1-R5 clobbered, R0 set, packet pointers invalidated when it changes packet data,
/// references acquired or released, callback frames pushed (the walk continues at the
/// callback's start when `state.frames` grew).
pub fn check_helper_call(
    env: &mut Env<'_>,
    state: &mut VerifierState,
    pc: usize,
    func_id: i32,
) -> Result<(), Reject> {
    let _ = (state, pc);
    Err(env.reject(
        Errno::Einval,
        format!("not yet supported: helper call {func_id}"),
    ))
}

/// Number of arguments of helper `func_id` by its prototype (the kernel's call summary for
/// register liveness); `None` when unknown, which counts all of R1-R5 as read.
pub fn helper_param_count(func_id: i32) -> Option<usize> {
    let _ = func_id;
    None
}
