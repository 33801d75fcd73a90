//! Open-coded iterators (`bpf_iter_<type>_new/next/destroy`, the kfuncs behind libbpf's
//! `bpf_for` and `bpf_repeat`): `process_iter_arg`, `mark_stack_slots_iter`,
//! `process_iter_next_call`.
//!
//! The iterator is a struct on the program's stack whose slots become `STACK_ITER`; `new`
//! takes uninitialised slots and acquires a reference, `destroy` releases it. `next` is a
//! forced checkpoint where the walk forks: the current path goes on with the iterator drained
//! and R0 = NULL, and a queued path with the iterator active one level deeper and R0 the
//! element, a read-only `int` (for `bpf_iter_num`). The loop converges when an active state
//! at `next` is within an earlier one (see `is_state_visited`).

use super::stack_obj::{SlotIndex, check_stack_obj_write, stack_slot_obj_spi};
use crate::env::Env;
use crate::state::VerifierState;
use crate::state::reg::{self, IterState, RegState, RegType};
use crate::state::stack::{SLOT_SIZE, SlotType};
use crate::{Errno, Reject};
use bpfemu_isa::Reg;
use bpfemu_loader::btf::{Btf, BtfKind, Param, TypeId};

/// What an iterator kfunc does to its iterator (`KF_ITER_NEW`, `KF_ITER_NEXT`,
/// `KF_ITER_DESTROY`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IterOp {
    New,
    Next,
    Destroy,
}

/// The iterator kfuncs bpfemu checks, with what each does.
const ITER_KFUNCS: &[(&str, IterOp)] = &[
    ("bpf_iter_num_new", IterOp::New),
    ("bpf_iter_num_next", IterOp::Next),
    ("bpf_iter_num_destroy", IterOp::Destroy),
    ("bpf_iter_bits_new", IterOp::New),
    ("bpf_iter_bits_next", IterOp::Next),
    ("bpf_iter_bits_destroy", IterOp::Destroy),
];

/// The iterator operation of the kfunc `name`, if it is one bpfemu checks.
pub fn iter_op(name: &str) -> Option<IterOp> {
    ITER_KFUNCS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|&(_, op)| op)
}

/// The iterator operation of the kfunc call `btf_id` (vmlinux), for the passes before the walk.
pub fn iter_op_of_call(vmlinux: Option<&Btf>, btf_id: i32) -> Option<IterOp> {
    let btf = vmlinux?;
    iter_op(&btf.get(btf_id as TypeId)?.name)
}

/// The log's name of an iterator type (`iter_type_str`): `num` for `struct bpf_iter_num`.
pub fn type_name(vmlinux: Option<&Btf>, btf_id: u32) -> String {
    let name = vmlinux
        .and_then(|btf| btf.get(btf_id))
        .map_or("", |t| t.name.as_str());
    name.strip_prefix("bpf_iter_").unwrap_or(name).to_owned()
}

/// The iterator struct an iterator kfunc's first parameter points to: its type id and the
/// number of stack slots it takes.
pub fn iter_struct(btf: &Btf, params: &[Param]) -> Option<(TypeId, usize)> {
    let ptr = btf.skip_mods_and_typedefs(params.first()?.ty)?;
    let BtfKind::Ptr { ty } = btf.get(ptr)?.kind else {
        return None;
    };
    let id = btf.skip_mods_and_typedefs(ty)?;
    let size = btf.size_of(id)? as usize;
    Some((id, size / SLOT_SIZE))
}

/// Checks a call of the iterator kfunc `name` at `pc` and gives R0 its value; `next` also
/// queues the path on which the iterator yields.
pub fn check_iter_call(
    env: &mut Env<'_>,
    state: &mut VerifierState,
    btf: &Btf,
    name: &str,
    op: IterOp,
    params: &[Param],
    pc: usize,
) -> Result<(), Reject> {
    let Some((type_id, nr_slots)) = iter_struct(btf, params) else {
        return Err(env.reject(
            Errno::Einval,
            format!("kernel function {name} has an unexpected prototype"),
        ));
    };
    let iter_ref = process_iter_arg(env, state, op, type_id, nr_slots, pc)?;
    for (i, param) in params.iter().enumerate().skip(1) {
        super::kfunc::check_kfunc_arg(env, state, btf, name, i, param)?;
    }
    state.clobber_caller_saved();
    match op {
        IterOp::New => *state.reg_mut(Reg::R0) = RegState::unknown_scalar(),
        IterOp::Destroy => *state.reg_mut(Reg::R0) = RegState::not_init(),
        IterOp::Next => {
            let mut r0 = RegState::pointer(RegType::Mem);
            r0.flags = reg::MEM_RDONLY | reg::PTR_MAYBE_NULL;
            r0.mem_size = 4;
            r0.ref_obj_id = iter_ref.ref_obj_id;
            r0.id = env.new_id();
            *state.reg_mut(Reg::R0) = r0;
            process_iter_next_call(env, state, iter_ref, pc)?;
        }
    }
    Ok(())
}

/// Where an initialised iterator argument lives.
#[derive(Clone, Copy, Debug)]
struct IterRef {
    frame: usize,
    spi: usize,
    ref_obj_id: u32,
}

/// `process_iter_arg` for R1.
fn process_iter_arg(
    env: &mut Env<'_>,
    state: &mut VerifierState,
    op: IterOp,
    type_id: TypeId,
    nr_slots: usize,
    pc: usize,
) -> Result<IterRef, Reject> {
    let reg = *state.reg(Reg::R1);
    if reg.ty != RegType::Stack {
        return Err(env.reject(
            Errno::Einval,
            "arg#0 expected pointer to an iterator on stack",
        ));
    }
    let kind = type_name(env.input.vmlinux_btf(), type_id);
    let frame = reg.frameno as usize;
    let spi = stack_slot_obj_spi(env, state, &reg, "iter", nr_slots);
    if op == IterOp::New {
        let uninit = match spi {
            SlotIndex::NotAllocated => true,
            SlotIndex::Invalid => false,
            SlotIndex::At(spi) => (0..nr_slots).all(|i| {
                !state.frames[frame].stack[spi - i]
                    .slot_type
                    .contains(&SlotType::Iter)
            }),
        };
        if !uninit {
            let arg = super::call_arg_name(env, 0, "arg #0".into());
            return Err(env.reject(
                Errno::Einval,
                format!("expected uninitialized iter_{kind} as {arg}"),
            ));
        }
        check_stack_obj_write(env, state, Reg::R1, nr_slots)?;
        let SlotIndex::At(spi) = stack_slot_obj_spi(env, state, &reg, "iter", nr_slots) else {
            return Err(env.reject(Errno::Efault, "verifier bug: iterator slots not allocated"));
        };
        let ref_obj_id = env.new_id();
        state.acquire_reference(crate::state::frame::RefKind::Ptr, ref_obj_id, pc);
        for i in 0..nr_slots {
            let slot = &mut state.frames[frame].stack[spi - i];
            let mut st = RegState::pointer(RegType::Stack);
            st.ref_obj_id = if i == 0 { ref_obj_id } else { 0 };
            st.btf_id = type_id;
            st.iter_state = IterState::Active;
            slot.spilled_ptr = st;
            slot.slot_type = [SlotType::Iter; SLOT_SIZE];
            env.log.scratch_stack(spi - i);
            crate::stack_liveness::mark_write(
                env,
                state,
                frame,
                crate::stack_liveness::slot_bit(spi - i),
            );
        }
        return Ok(IterRef {
            frame,
            spi,
            ref_obj_id,
        });
    }
    let valid = match spi {
        SlotIndex::At(spi) => is_valid_init(state, frame, spi, type_id, nr_slots),
        _ => false,
    };
    let SlotIndex::At(spi) = spi.filter(valid) else {
        return Err(env.reject(
            Errno::Einval,
            format!(
                "expected an initialized iter_{kind} as {}",
                super::call_arg_name(env, 0, "arg #0".into())
            ),
        ));
    };
    let ref_obj_id = state.frames[frame].stack[spi].spilled_ptr.ref_obj_id;
    for i in 0..nr_slots {
        env.log.scratch_stack(spi - i);
        crate::stack_liveness::mark_read(
            env,
            state,
            frame,
            crate::stack_liveness::slot_bit(spi - i),
        );
    }
    if op == IterOp::Destroy {
        super::helper::release_reference(state, ref_obj_id);
        for i in 0..nr_slots {
            let slot = &mut state.frames[frame].stack[spi - i];
            slot.spilled_ptr = RegState::not_init();
            slot.slot_type = [SlotType::Invalid; SLOT_SIZE];
            crate::stack_liveness::mark_write(
                env,
                state,
                frame,
                crate::stack_liveness::slot_bit(spi - i),
            );
        }
    }
    Ok(IterRef {
        frame,
        spi,
        ref_obj_id,
    })
}

/// `is_iter_reg_valid_init`: every slot an iterator of this type, the first holding its
/// reference.
fn is_valid_init(
    state: &VerifierState,
    frame: usize,
    spi: usize,
    type_id: TypeId,
    nr_slots: usize,
) -> bool {
    (0..nr_slots).all(|i| {
        let slot = &state.frames[frame].stack[spi - i];
        let st = &slot.spilled_ptr;
        (st.ref_obj_id != 0) == (i == 0)
            && st.btf_id == type_id
            && slot.slot_type.iter().all(|&t| t == SlotType::Iter)
    })
}

/// `process_iter_next_call`: an active iterator forks a queued path on which it yields (one
/// level deeper, R0 not NULL, imprecise scalars that changed since the previous iteration
/// widened), and the current path sees it drained with R0 = 0.
fn process_iter_next_call(
    env: &mut Env<'_>,
    state: &mut VerifierState,
    iter: IterRef,
    pc: usize,
) -> Result<(), Reject> {
    let slot_state = state.frames[iter.frame].stack[iter.spi]
        .spilled_ptr
        .iter_state;
    if slot_state == IterState::Active {
        let Some(parent) = state
            .parent
            .filter(|&p| env.explored[p].state.insn_idx == pc)
        else {
            return Err(env.reject(
                Errno::Efault,
                "verifier bug: bad parent state for iter next call",
            ));
        };
        let mut queued = state.clone();
        let slot = &mut queued.frames[iter.frame].stack[iter.spi].spilled_ptr;
        slot.iter_state = IterState::Active;
        slot.iter_depth += 1;
        if let Some(prev) = crate::explore::find_prev_entry(env, parent, pc) {
            let old = env.explored[prev].state.clone();
            crate::explore::widen_imprecise_scalars(env, &old, &mut queued);
        }
        queued.reg_mut(Reg::R0).flags &= !reg::PTR_MAYBE_NULL;
        env.pending.push((queued, pc + 1, pc));
    }
    state.frames[iter.frame].stack[iter.spi]
        .spilled_ptr
        .iter_state = IterState::Drained;
    *state.reg_mut(Reg::R0) = RegState::known(0);
    Ok(())
}

/// Whether the iterator R1 points to at a `next` call is active (the loop check of
/// `is_state_visited`); the state is known valid there.
pub fn next_arg_is_active(state: &VerifierState) -> bool {
    let reg = state.reg(Reg::R1);
    if reg.ty != RegType::Stack {
        return false;
    }
    let off = reg.off as i64 + reg.var_off.value as i64;
    let spi = (-off - 1) / SLOT_SIZE as i64;
    usize::try_from(spi)
        .ok()
        .and_then(|spi| state.frames.get(reg.frameno as usize)?.stack.get(spi))
        .is_some_and(|s| s.spilled_ptr.iter_state == IterState::Active)
}

/// `iter_active_depths_differ`: an active iterator one state has at another depth than the
/// other means the loop made progress (no infinite loop).
pub fn active_depths_differ(old: &VerifierState, cur: &VerifierState) -> bool {
    old.frames.iter().zip(&cur.frames).any(|(fo, fc)| {
        fo.stack.iter().enumerate().any(|(i, slot)| {
            slot.slot_type[SLOT_SIZE - 1] == SlotType::Iter
                && slot.spilled_ptr.iter_state == IterState::Active
                && fc
                    .stack
                    .get(i)
                    .is_none_or(|c| c.spilled_ptr.iter_depth != slot.spilled_ptr.iter_depth)
        })
    })
}
