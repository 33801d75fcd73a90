//! Callbacks (`push_callback_call` and the `set_*_callback_state` functions): `bpf_loop`,
//! `bpf_for_each_map_elem`, `bpf_timer_set_callback`; the callee frame's arguments and R0's
//! range at its exit.

use crate::env::Env;
use crate::state::VerifierState;
use crate::{Errno, Reject};

/// Which helper calls the callback; decides the callee's arguments and return range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallbackKind {
    /// `bpf_loop(nr, cb, ctx, flags)`: `cb(u64 index, void *ctx)`, returns 0 or 1.
    Loop,
    /// `bpf_for_each_map_elem(map, cb, ctx, flags)`: `cb(map, key, value, ctx)`, returns 0/1.
    ForEachMapElem { map: u32 },
    /// `bpf_timer_set_callback(timer, cb)`: `cb(map, key, value)`, async.
    Timer { map: u32 },
    /// `bpf_user_ringbuf_drain` and the like: `cb(dynptr, ctx)`.
    Other,
}

/// Pushes the callback frame for the helper call at `pc` whose callback is subprogram
/// `subprog`; the walk continues at the callback's first instruction.
pub fn push_callback_call(
    env: &mut Env<'_>,
    state: &mut VerifierState,
    pc: usize,
    subprog: usize,
    kind: CallbackKind,
) -> Result<(), Reject> {
    let _ = (state, pc, subprog, kind);
    Err(env.reject(Errno::Einval, "not yet supported: callbacks"))
}
