//! `bpf_spin_lock` / `bpf_spin_unlock` arguments (`process_spin_lock`): the lock is the map
//! value's `struct bpf_spin_lock`, located through the map's BTF, at a constant offset; the
//! held lock is a reference of kind [`RefKind::Lock`] tied to the pointer's id and the map, so
//! that only the same lock unlocks it. The rules around a held lock (no helper calls, no exit
//! from the main program) are checked where the calls and exits are.

use crate::env::Env;
use crate::log::kernel_map_name;
use crate::state::reg::RegType;
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
    if !reg.var_off.is_const() {
        return Err(env.reject(
            Errno::Einval,
            format!(
                "R{regno} doesn't have constant offset. {LOCK_STR}_lock has to be at the constant offset"
            ),
        ));
    }
    // Only map values reach here in XDP: allocated objects (`ptr_` with MEM_ALLOC) come from
    // bpf_obj_new, a kfunc.
    let (RegType::MapValue, Some(map)) = (reg.ty, reg.map) else {
        return Err(env.reject(
            Errno::Enotsupp,
            "not yet supported: bpf_spin_lock in an allocated object",
        ));
    };
    let spec = env.map(map);
    let name = spec.map_or("", |s| kernel_map_name(&s.name)).to_owned();
    let has_btf = spec.is_some_and(|s| s.value_type.is_some()) && env.input.btf.is_some();
    if !has_btf {
        return Err(env.reject(
            Errno::Einval,
            format!("map '{name}' has to have BTF in order to use {LOCK_STR}_lock"),
        ));
    }
    let lock_off = env
        .map_special_fields(map)
        .iter()
        .find(|f| f.kind == "bpf_spin_lock")
        .map(|f| f.offset);
    let Some(lock_off) = lock_off else {
        return Err(env.reject(
            Errno::Einval,
            format!("map '{name}' has no valid {LOCK_STR}_lock"),
        ));
    };
    let off = reg.var_off.value as i64 + reg.off as i64;
    if off != lock_off as i64 {
        return Err(env.reject(
            Errno::Einval,
            format!("off {off} doesn't point to 'struct {LOCK_STR}_lock' that is at {lock_off}"),
        ));
    }
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
