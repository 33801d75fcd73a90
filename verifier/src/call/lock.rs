//! `bpf_spin_lock` / `bpf_spin_unlock` arguments (`process_spin_lock`): the lock is the map
//! value's `struct bpf_spin_lock`, located through the map's BTF, at a constant offset; the
//! held lock is a reference of kind [`RefKind::Lock`] tied to the pointer's id and the map, so
//! that only the same lock unlocks it. The rules around a held lock (no helper calls, no exit
//! from the main program) are checked where the calls and exits are.

use super::map_field::check_map_field_pointer;
use crate::env::Env;
use crate::state::{RefKind, VerifierState};
use crate::{Errno, Reject};
use bpfemu_isa::Reg;

/// The kernel's name for the lock kind in its messages (`lock_str`).
const LOCK_STR: &str = "bpf_spin";

/// Checks the lock argument in `regno` of `bpf_spin_lock` (`is_lock`) or `bpf_spin_unlock` at
/// `pc`, and takes or drops the lock in `state`.
pub fn process_spin_lock(
    env: &mut Env<'_>,
    state: &mut VerifierState,
    regno: u8,
    is_lock: bool,
    pc: usize,
) -> Result<(), Reject> {
    let reg = *state.reg(Reg::new(regno).expect("argument register"));
    let map = check_map_field_pointer(env, &reg, regno, "bpf_spin_lock")?;
    if is_lock {
        take(env, state, reg.id, map, pc)
    } else {
        release(env, state, reg.id, map)
    }
}

fn take(
    env: &mut Env<'_>,
    state: &mut VerifierState,
    id: u32,
    map: u32,
    pc: usize,
) -> Result<(), Reject> {
    if state.refs.iter().any(|r| r.kind == RefKind::Lock) {
        return Err(env.reject(Errno::Einval, "Locking two bpf_spin_locks are not allowed"));
    }
    // 5.10 and 6.1 hold the lock as the pointer's id alone: through a pointer without one (a
    // timer callback's map value) the lock is not held for the verifier.
    if id == 0 && !crate::behaviour::tracks_locks_by_object(env.input.kernel.version()) {
        return Ok(());
    }
    state.acquire_lock(id, map, pc);
    Ok(())
}

fn release(env: &mut Env<'_>, state: &mut VerifierState, id: u32, map: u32) -> Result<(), Reject> {
    if state.active_locks == 0 {
        return Err(env.reject(
            Errno::Einval,
            format!("{LOCK_STR}_unlock without taking a lock"),
        ));
    }
    let held = state
        .refs
        .iter()
        .any(|r| r.kind == RefKind::Lock && r.id == id && r.ptr == map);
    if !held {
        return Err(env.reject(
            Errno::Einval,
            format!("{LOCK_STR}_unlock of different lock"),
        ));
    }
    if state.active_lock() != Some((id, map)) {
        return Err(env.reject(
            Errno::Einval,
            format!("{LOCK_STR}_unlock cannot be out of order"),
        ));
    }
    state.release_lock(id, map);
    Ok(())
}
