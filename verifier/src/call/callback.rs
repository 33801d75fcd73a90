//! Callbacks (`push_callback_call` and the `set_*_callback_state` functions): `bpf_loop`,
//! `bpf_for_each_map_elem`, `bpf_timer_set_callback`; the callee frame's arguments and R0's
//! range at its exit.
//!
//! As in the kernel, the callback body is a branch of its own: a copy of the state at the
//! call with the callback's frame pushed is queued, and the current path goes on after the
//! helper call. At the callback's `exit` the walk returns to the helper call, which queues
//! the next iteration until the states converge (pruning) or the iteration count runs out.

use crate::Reject;
use crate::call::subprog::setup_func_entry;
use crate::env::Env;
use crate::state::VerifierState;
use crate::state::reg::{RegState, RegType};
use bpfemu_isa::Reg;

/// Which helper calls the callback; decides the callee's arguments and return range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallbackKind {
    /// `bpf_loop(nr, cb, ctx, flags)`: `cb(u64 index, void *ctx)`, returns 0 or 1.
    Loop,
    /// `bpf_for_each_map_elem(map, cb, ctx, flags)`: `cb(map, key, value, ctx)`, returns 0/1.
    ForEachMapElem { map: u32 },
    /// `bpf_find_vma(task, addr, cb, ctx, flags)`: `cb(task, vma, ctx)`, returns 0 or 1;
    /// `vma` is the kernel's `struct vm_area_struct` (its BTF id).
    FindVma { vma: u32 },
    /// `bpf_user_ringbuf_drain(map, cb, ctx, flags)`: `cb(const struct bpf_dynptr *, ctx)`,
    /// returns 0 or 1; the dynptr is a local one the callback may only read.
    UserRingbufDrain,
}

/// Helper ids whose callback runs synchronously (`is_sync_callback_calling_function`).
pub const SYNC_CALLBACK_HELPERS: [i32; 4] = [164, 180, 181, 209];

/// Queues the callback body of the helper call at `pc` (subprogram `subprog`) as a branch
/// (`push_callback_call`); the current path continues after the call.
pub fn push_callback_call(
    env: &mut Env<'_>,
    state: &mut VerifierState,
    pc: usize,
    subprog: usize,
    kind: CallbackKind,
) -> Result<(), Reject> {
    let args = callback_args(env, state, subprog, kind);
    let mut cb = state.clone();
    enter_callback(env, &mut cb, pc, subprog, args)?;
    cb.callback_unroll_depth += 1;
    let caller = cb.curframe() - 1;
    cb.frames[caller].callback_depth += 1;
    state.cur_mut().callback_depth = 0;
    let start = env.subprogs[subprog].start;
    env.pending.push((cb, start, pc));
    Ok(())
}

/// The callback's R1-R5 (the `set_*_callback_state` functions), read from the caller's
/// registers at the call, before the helper call clobbers them.
pub fn callback_args(
    env: &mut Env<'_>,
    state: &VerifierState,
    subprog: usize,
    kind: CallbackKind,
) -> [RegState; 5] {
    if let Some(s) = env.subprogs.get_mut(subprog) {
        s.is_cb = true;
    }
    match kind {
        CallbackKind::Loop => {
            let caller = state.cur();
            [
                RegState::unknown_scalar(),
                caller.regs[3],
                RegState::not_init(),
                RegState::not_init(),
                RegState::not_init(),
            ]
        }
        CallbackKind::ForEachMapElem { map } => {
            let with_map = |ty| {
                let mut r = RegState::pointer(ty);
                r.map = Some(map);
                r
            };
            [
                with_map(RegType::ConstPtrToMap),
                with_map(RegType::MapKey),
                with_map(RegType::MapValue),
                state.cur().regs[3],
                RegState::not_init(),
            ]
        }
        CallbackKind::FindVma { vma } => {
            let caller = state.cur();
            let mut vma_ptr = RegState::pointer(RegType::BtfId);
            vma_ptr.btf_id = vma;
            [
                caller.regs[1],
                vma_ptr,
                caller.regs[4],
                RegState::not_init(),
                RegState::not_init(),
            ]
        }
        CallbackKind::UserRingbufDrain => [
            crate::call::dynptr::const_dynptr_reg(env.new_id()),
            state.cur().regs[3],
            RegState::not_init(),
            RegState::not_init(),
            RegState::not_init(),
        ],
    }
}

/// Pushes the callback's frame on `state` with its arguments `args` (`setup_func_entry` with
/// a `set_*_callback_state`): the walk of `state` goes on in the callback.
pub fn enter_callback(
    env: &mut Env<'_>,
    state: &mut VerifierState,
    pc: usize,
    subprog: usize,
    args: [RegState; 5],
) -> Result<(), Reject> {
    setup_func_entry(env, state, subprog, pc)?;
    let callee = state.cur_mut();
    for (i, r) in args.into_iter().enumerate() {
        callee.regs[i + 1] = r;
    }
    callee.in_callback_fn = true;
    callee.callback_ret_range = (0, 1);
    Ok(())
}

/// Queues the body of a timer callback (subprogram `subprog`, set at the call at `pc` on a timer
/// of map `map`) as a path of its own (`push_async_cb` with `set_timer_callback_state`): it runs
/// later, from nothing of the caller's state, so it starts from a fresh state with one frame
/// holding `cb(map, key, value)` and must return 0.
pub fn push_async_callback(
    env: &mut Env<'_>,
    pc: usize,
    subprog: usize,
    map: u32,
) -> Result<(), Reject> {
    if let Some(s) = env.subprogs.get_mut(subprog) {
        s.is_cb = true;
        s.is_async_cb = true;
    }
    let mut cb = VerifierState::new();
    let frame = cb.cur_mut();
    frame.subprogno = subprog as u32;
    let with_map = |ty| {
        let mut r = RegState::pointer(ty);
        r.map = Some(map);
        r
    };
    frame.regs[Reg::R1.index()] = with_map(RegType::ConstPtrToMap);
    frame.regs[Reg::R2.index()] = with_map(RegType::MapKey);
    frame.regs[Reg::R3.index()] = with_map(RegType::MapValue);
    frame.regs[Reg::R10.index()] = RegState::pointer(RegType::Stack);
    frame.in_async_callback_fn = true;
    frame.callback_ret_range = (0, 0);
    cb.insn_idx = env.subprogs[subprog].start;
    cb.first_insn_idx = cb.insn_idx;
    let start = env.subprogs[subprog].start;
    env.pending.push((cb, start, pc));
    Ok(())
}
