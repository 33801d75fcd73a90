//! Objects a kfunc or helper keeps in the program's stack slots (dynptrs, open-coded iterators,
//! saved irq flags): where an argument names them (`stack_slot_obj_get_spi`) and the write that
//! creates them, checked as the program's own 8-byte stores would be.

use crate::Reject;
use crate::env::Env;
use crate::mem::{AccessType, check_mem_access};
use crate::state::VerifierState;
use crate::state::reg::RegState;
use crate::state::stack::SLOT_SIZE;
use bpfemu_isa::{Reg, Size};

/// The outcome of `stack_slot_obj_get_spi`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SlotIndex {
    /// The object's first (highest) slot.
    At(usize),
    /// Past the allocated stack (`-ERANGE`): a call that creates the object allocates it.
    NotAllocated,
    /// Not a place the object can be (the reason is logged).
    Invalid,
}

impl SlotIndex {
    /// `self`, or `Invalid` when `ok` is false.
    pub fn filter(self, ok: bool) -> SlotIndex {
        if ok { self } else { SlotIndex::Invalid }
    }
}

/// `stack_slot_obj_get_spi`: the first slot of the `nr_slots`-slot object of kind `kind`
/// (`iter`, `irq_flag`) that the stack pointer `reg` names.
pub fn stack_slot_obj_spi(
    env: &mut Env<'_>,
    state: &VerifierState,
    reg: &RegState,
    kind: &str,
    nr_slots: usize,
) -> SlotIndex {
    if !reg.var_off.is_const() {
        env.verbose(&format!("{kind} has to be at a constant offset\n"));
        return SlotIndex::Invalid;
    }
    let off = reg.off as i64 + reg.var_off.value as i64;
    // The kernel's `(-off - 1) / BPF_REG_SIZE` truncates toward zero.
    let spi = (-off - 1) / SLOT_SIZE as i64;
    if off % SLOT_SIZE as i64 != 0 || spi + 1 < nr_slots as i64 {
        env.verbose(&format!("cannot pass in {kind} at an offset={off}\n"));
        return SlotIndex::Invalid;
    }
    let allocated = state.frames[reg.frameno as usize].stack.len() as i64;
    if spi - nr_slots as i64 + 1 < 0 || spi >= allocated {
        return SlotIndex::NotAllocated;
    }
    SlotIndex::At(spi as usize)
}

/// The write that creates an object of `nr_slots` slots at the stack pointer in `regno`: one
/// 8-byte store per slot, which also allocates the stack it needs.
pub fn check_stack_obj_write(
    env: &mut Env<'_>,
    state: &mut VerifierState,
    regno: Reg,
    nr_slots: usize,
) -> Result<(), Reject> {
    for i in 0..nr_slots {
        let off = (i * SLOT_SIZE) as i32;
        check_mem_access(
            env,
            state,
            regno,
            off,
            Size::DW,
            AccessType::Write,
            None,
            false,
            false,
        )?;
    }
    Ok(())
}
