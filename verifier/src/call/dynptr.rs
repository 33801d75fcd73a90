//! Dynptrs on the stack (`process_dynptr_func`, `mark_stack_slots_dynptr`,
//! `unmark_stack_slots_dynptr`, `destroy_if_dynptr_stack_slot`): a `struct bpf_dynptr` takes two
//! stack slots typed [`SlotType::Dynptr`]; the first slot's saved register carries the
//! dynptr's kind and id, both carry the reference of a ring buffer dynptr, which must be
//! submitted or discarded.
//!
//! A dynptr slot's `spilled_ptr` keeps the kernel's `dynptr.type` and `dynptr.first_slot` in
//! flag bits above [`reg::FLAG_FIRST_UNUSED`], its `id` and `ref_obj_id` as the kernel does.

use super::proto::{
    ArgType, DYNPTR_TYPE_LOCAL, DYNPTR_TYPE_RINGBUF, DYNPTR_TYPE_XDP, MEM_RDONLY, MEM_UNINIT,
};
use crate::env::Env;
use crate::state::reg::{self, RegState, RegType};
use crate::state::stack::{SLOT_SIZE, SlotType};
use crate::state::{RefKind, VerifierState};
use crate::{Errno, Reject};
use bpfemu_isa::Reg;

/// `BPF_DYNPTR_TYPE_LOCAL` in a dynptr slot's flags.
pub const SLOT_LOCAL: u32 = reg::FLAG_FIRST_UNUSED;
/// `BPF_DYNPTR_TYPE_RINGBUF` in a dynptr slot's flags.
pub const SLOT_RINGBUF: u32 = reg::FLAG_FIRST_UNUSED << 1;
/// `dynptr.first_slot`.
pub const SLOT_FIRST: u32 = reg::FLAG_FIRST_UNUSED << 2;
/// `BPF_DYNPTR_TYPE_XDP` in a dynptr slot's flags.
pub const SLOT_XDP: u32 = reg::FLAG_FIRST_UNUSED << 3;
/// The kind bits.
const SLOT_KINDS: u32 = SLOT_LOCAL | SLOT_RINGBUF | SLOT_XDP;
/// Slots a dynptr takes (`BPF_DYNPTR_NR_SLOTS`).
const NR_SLOTS: usize = 2;

/// The slot kind an argument type names (`arg_to_dynptr_type`), 0 for "any".
fn kind_of_arg(arg: ArgType) -> u32 {
    if arg.flags & DYNPTR_TYPE_LOCAL != 0 {
        SLOT_LOCAL
    } else if arg.flags & DYNPTR_TYPE_RINGBUF != 0 {
        SLOT_RINGBUF
    } else if arg.flags & DYNPTR_TYPE_XDP != 0 {
        SLOT_XDP
    } else {
        0
    }
}

/// `dynptr_type_str` of a dynptr slot's flags.
pub fn slot_kind_name(flags: u32) -> &'static str {
    kind_name(flags & SLOT_KINDS)
}

/// `dynptr_type_str`.
fn kind_name(kind: u32) -> &'static str {
    match kind {
        SLOT_LOCAL => "local",
        SLOT_RINGBUF => "ringbuf",
        SLOT_XDP => "xdp",
        _ => "<invalid>",
    }
}

/// The stack slot of the dynptr `reg` points at (`dynptr_get_spi`): `Ok(Err(()))` when the
/// slots are not allocated yet (`-ERANGE`).
fn dynptr_spi(
    env: &mut Env<'_>,
    state: &VerifierState,
    reg: &RegState,
) -> Result<Result<usize, ()>, Reject> {
    if !reg.var_off.is_const() {
        return Err(env.reject(Errno::Einval, "dynptr has to be at a constant offset"));
    }
    let off = reg.off as i64 + reg.var_off.value as i64;
    let spi = (-off - 1).div_euclid(SLOT_SIZE as i64);
    if off % SLOT_SIZE as i64 != 0 || spi + 1 < NR_SLOTS as i64 {
        return Err(env.reject(
            Errno::Einval,
            format!("cannot pass in dynptr at an offset={off}"),
        ));
    }
    let frame = &state.frames[reg.frameno as usize];
    if spi as usize >= frame.stack.len() {
        return Ok(Err(()));
    }
    Ok(Ok(spi as usize))
}

/// `process_dynptr_func` for argument register `regno` of the call at `pc`.
pub fn process_dynptr_func(
    env: &mut Env<'_>,
    state: &mut VerifierState,
    regno: u8,
    arg: ArgType,
    pc: usize,
) -> Result<(), Reject> {
    let r = Reg::new(regno).expect("argument register");
    let reg = *state.reg(r);
    if reg.ty == RegType::ConstPtrToDynptr {
        return process_const_dynptr(env, &reg, regno, arg);
    }
    if reg.ty != RegType::Stack {
        let arg = super::call_arg_name(env, regno as usize - 1, format!("arg#{}", regno - 1));
        return Err(env.reject(
            Errno::Einval,
            format!("{arg} expected pointer to stack or const struct bpf_dynptr"),
        ));
    }
    if arg.flags & MEM_UNINIT != 0 {
        // Slots not allocated yet are fine: the writes below allocate them.
        let Ok(slots) = dynptr_spi(env, state, &reg) else {
            return Err(env.reject(Errno::Einval, "Dynptr has to be an uninitialized dynptr"));
        };
        if let Ok(spi) = slots
            && !crate::behaviour::overwrites_dynptrs_in_place(env.input.kernel.version())
            && holds_dynptr_bytes(state, &reg, spi)
        {
            return Err(env.reject(Errno::Einval, "Dynptr has to be an uninitialized dynptr"));
        }
        super::stack_obj::check_stack_obj_write(env, state, r, NR_SLOTS)?;
        return mark_stack_slots_dynptr(env, state, &reg, kind_of_arg(arg), pc);
    }
    let spi = match dynptr_spi(env, state, &reg) {
        Ok(Ok(spi)) if is_initialised(state, &reg, spi) => spi,
        _ => {
            // 6.1 numbers the arguments from 1, 7.2 names the register.
            let version = env.input.kernel.version();
            let arg = if crate::behaviour::names_call_args_by_register(version) {
                format!("R{regno}")
            } else if crate::behaviour::numbers_dynptr_args_from_zero(version) {
                format!("arg #{}", regno - 1)
            } else {
                format!("arg #{regno}")
            };
            return Err(env.reject(
                Errno::Einval,
                format!("Expected an initialized dynptr as {arg}"),
            ));
        }
    };
    // Reading the dynptr marks its slots for the log (the kernel prints it after the call).
    env.log.scratch_stack(spi);
    env.log.scratch_stack(spi - 1);
    let both = both_slots(spi);
    crate::stack_liveness::mark_read(env, state, reg.frameno as usize, both);
    let flags = state.frames[reg.frameno as usize].stack[spi]
        .spilled_ptr
        .flags;
    check_dynptr_kind(env, flags, arg, regno)
}

/// Whether either slot a dynptr at `spi` would take holds part of a dynptr already (6.1's
/// `is_dynptr_reg_valid_uninit`).
fn holds_dynptr_bytes(state: &VerifierState, reg: &RegState, spi: usize) -> bool {
    let stack = &state.frames[reg.frameno as usize].stack;
    [spi, spi.wrapping_sub(1)]
        .iter()
        .filter_map(|&s| stack.get(s))
        .any(|slot| slot.slot_type.contains(&SlotType::Dynptr))
}

/// `is_dynptr_type_expected`: the dynptr's kind (in `flags`) is the one the argument names,
/// if it names one.
fn check_dynptr_kind(env: &mut Env<'_>, flags: u32, arg: ArgType, regno: u8) -> Result<(), Reject> {
    let expected = kind_of_arg(arg);
    if expected != 0 && flags & SLOT_KINDS != expected {
        let arg = super::call_arg_name(env, regno as usize - 1, format!("arg #{}", regno - 1));
        return Err(env.reject(
            Errno::Einval,
            format!("Expected a dynptr of type {} as {arg}", kind_name(expected)),
        ));
    }
    Ok(())
}

/// `process_dynptr_func` for a `CONST_PTR_TO_DYNPTR`: always an initialised dynptr, which
/// only a read-only argument may take.
fn process_const_dynptr(
    env: &mut Env<'_>,
    reg: &RegState,
    regno: u8,
    arg: ArgType,
) -> Result<(), Reject> {
    if arg.flags & MEM_UNINIT != 0 {
        return Err(env.reject(Errno::Einval, "Dynptr has to be an uninitialized dynptr"));
    }
    if crate::behaviour::releases_dynptrs_as_dynptr_args(env.input.kernel.version()) {
        // 7.2 lets any helper take a caller's dynptr (the memory's own flags say whether it
        // may be written), but none release it.
        if arg.is_release() {
            return Err(env.reject(Errno::Einval, "CONST_PTR_TO_DYNPTR cannot be released"));
        }
        return check_dynptr_kind(env, reg.flags, arg, regno);
    }
    if arg.flags & MEM_RDONLY == 0 {
        return Err(env.reject(
            Errno::Einval,
            "cannot pass pointer to const bpf_dynptr, the helper mutates it",
        ));
    }
    check_dynptr_kind(env, reg.flags, arg, regno)
}

/// The register a global function receives for a `struct bpf_dynptr *` argument (the
/// kernel's `__mark_dynptr_reg` of a local dynptr): the caller's dynptr, which it may read
/// through but not change.
pub fn const_dynptr_reg(id: u32) -> RegState {
    let mut r = RegState::pointer(RegType::ConstPtrToDynptr);
    r.flags = SLOT_LOCAL | SLOT_FIRST;
    r.id = id;
    r
}

/// The register describing the dynptr `reg` points at: the saved register of its first stack
/// slot, or `reg` itself for a `CONST_PTR_TO_DYNPTR`.
fn described_by(state: &VerifierState, reg: &RegState) -> Option<RegState> {
    if reg.ty == RegType::ConstPtrToDynptr {
        return Some(*reg);
    }
    let off = reg.off as i64 + reg.var_off.value as i64;
    let spi = usize::try_from((-off - 1) / SLOT_SIZE as i64).ok()?;
    Some(
        state
            .frames
            .get(reg.frameno as usize)?
            .stack
            .get(spi)?
            .spilled_ptr,
    )
}

/// `is_dynptr_reg_valid_init` for a stack pointer whose slot is `spi`.
fn is_initialised(state: &VerifierState, reg: &RegState, spi: usize) -> bool {
    let stack = &state.frames[reg.frameno as usize].stack;
    spi >= 1
        && stack[spi].spilled_ptr.flags & SLOT_FIRST != 0
        && stack[spi].slot_type.iter().all(|&t| t == SlotType::Dynptr)
        && stack[spi - 1]
            .slot_type
            .iter()
            .all(|&t| t == SlotType::Dynptr)
}

/// `mark_stack_slots_dynptr`: the two slots become a dynptr of `kind`; a ring buffer dynptr
/// takes a reference acquired at `pc`.
fn mark_stack_slots_dynptr(
    env: &mut Env<'_>,
    state: &mut VerifierState,
    reg: &RegState,
    kind: u32,
    pc: usize,
) -> Result<(), Reject> {
    let Ok(Ok(spi)) = dynptr_spi(env, state, reg) else {
        return Err(env.reject(Errno::Efault, "verifier bug: dynptr slots not allocated"));
    };
    let f = reg.frameno as usize;
    destroy_if_dynptr_stack_slot(env, state, f, spi)?;
    destroy_if_dynptr_stack_slot(env, state, f, spi - 1)?;
    let id = env.new_id();
    let ref_obj_id = if kind == SLOT_RINGBUF {
        let ref_id = env.new_id();
        state.acquire_reference(RefKind::Ptr, ref_id, pc)
    } else {
        0
    };
    crate::stack_liveness::mark_write(env, state, f, both_slots(spi));
    let stack = &mut state.frames[f].stack;
    for (slot, first) in [(spi, true), (spi - 1, false)] {
        let mut r = RegState::not_init();
        r.flags = kind | if first { SLOT_FIRST } else { 0 };
        r.id = id;
        r.ref_obj_id = ref_obj_id;
        stack[slot].spilled_ptr = r;
        stack[slot].slot_type = [SlotType::Dynptr; SLOT_SIZE];
    }
    Ok(())
}

/// `destroy_if_dynptr_stack_slot`: a write into slot `spi` of frame `f` ends the dynptr there
/// (both its slots become invalid); a referenced one may not be overwritten.
pub fn destroy_if_dynptr_stack_slot(
    env: &mut Env<'_>,
    state: &mut VerifierState,
    f: usize,
    spi: usize,
) -> Result<(), Reject> {
    let stack = &mut state.frames[f].stack;
    if stack
        .get(spi)
        .is_none_or(|s| s.slot_type[0] != SlotType::Dynptr)
    {
        return Ok(());
    }
    let first = if stack[spi].spilled_ptr.flags & SLOT_FIRST != 0 {
        spi
    } else {
        spi + 1
    };
    if first >= stack.len() || first < 1 {
        return Ok(());
    }
    if stack[first].spilled_ptr.flags & SLOT_RINGBUF != 0 {
        return Err(env.reject(Errno::Einval, "cannot overwrite referenced dynptr"));
    }
    invalidate(stack, first);
    crate::stack_liveness::mark_write(env, state, f, both_slots(first));
    Ok(())
}

/// The liveness bits of a dynptr's two slots, `spi` and the one below it.
fn both_slots(spi: usize) -> u64 {
    use crate::stack_liveness::slot_bit;
    slot_bit(spi) | spi.checked_sub(1).map_or(0, slot_bit)
}

fn invalidate(stack: &mut [crate::state::StackSlot], first: usize) {
    for slot in [first, first - 1] {
        stack[slot].slot_type = [SlotType::Invalid; SLOT_SIZE];
        stack[slot].spilled_ptr = RegState::not_init();
    }
}

/// The reference a released dynptr argument carries (for `arg N is an unacquired reference`),
/// 0 when it carries none.
pub fn dynptr_ref_obj_id(env: &mut Env<'_>, state: &VerifierState, reg: &RegState) -> u32 {
    if reg.ty == RegType::ConstPtrToDynptr {
        return reg.ref_obj_id;
    }
    match dynptr_spi(env, state, reg) {
        Ok(Ok(spi)) if reg.ty == RegType::Stack => {
            state.frames[reg.frameno as usize].stack[spi]
                .spilled_ptr
                .ref_obj_id
        }
        _ => 0,
    }
}

/// `unmark_stack_slots_dynptr`: submitting or discarding a ring buffer dynptr releases its
/// reference, every slice and clone of it.
pub fn unmark_stack_slots_dynptr(
    env: &mut Env<'_>,
    state: &mut VerifierState,
    reg: &RegState,
) -> Result<bool, Reject> {
    let Ok(Ok(spi)) = dynptr_spi(env, state, reg) else {
        return Ok(false);
    };
    let f = reg.frameno as usize;
    let slot = state.frames[f].stack[spi].spilled_ptr;
    if slot.flags & SLOT_RINGBUF == 0 {
        invalidate(&mut state.frames[f].stack, spi);
        crate::stack_liveness::mark_write(env, state, f, both_slots(spi));
        return Ok(true);
    }
    let ref_obj_id = slot.ref_obj_id;
    if !super::helper::release_reference(state, ref_obj_id) {
        return Ok(false);
    }
    for f in 0..state.frames.len() {
        for i in 1..state.frames[f].stack.len() {
            let s = state.frames[f].stack[i].spilled_ptr;
            if s.ref_obj_id == ref_obj_id && s.flags & SLOT_FIRST != 0 {
                invalidate(&mut state.frames[f].stack, i);
                crate::stack_liveness::mark_write(env, state, f, both_slots(i));
            }
        }
    }
    Ok(true)
}

/// The `ref_obj_id` of the dynptr an argument points at, for the slices `bpf_dynptr_data`
/// returns (`dynptr_ref_obj_id`).
pub fn slice_ref_obj_id(state: &VerifierState, reg: &RegState) -> u32 {
    described_by(state, reg).map_or(0, |d| d.ref_obj_id)
}

/// The `DYNPTR_TYPE_*` argument flag of the dynptr `reg` points at, for a clone of it; `None`
/// for a ring buffer dynptr (a clone shares its reference, which bpfemu does not model).
pub fn arg_kind_of(state: &VerifierState, reg: &RegState) -> Option<u32> {
    match described_by(state, reg)?.flags & SLOT_KINDS {
        SLOT_LOCAL => Some(DYNPTR_TYPE_LOCAL),
        SLOT_XDP => Some(DYNPTR_TYPE_XDP),
        _ => None,
    }
}

/// Whether the dynptr an argument points at is an XDP one (its slices point into the packet).
pub fn is_xdp_dynptr(state: &VerifierState, reg: &RegState) -> bool {
    described_by(state, reg).is_some_and(|d| d.flags & SLOT_XDP != 0)
}
