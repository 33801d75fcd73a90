//! Stack slots (`struct bpf_stack_state`): 8-byte slots, each byte typed, with the register a
//! full or partial spill saved.

use super::reg::RegState;

/// What one byte of the stack holds (`enum bpf_stack_slot_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum SlotType {
    /// Never written (`?` in the log).
    #[default]
    Invalid,
    /// Part of a spilled register (`r`).
    Spill,
    /// Written with something unknown (`m`).
    Misc,
    /// Known zero (`0`).
    Zero,
    /// Part of a dynptr (`d`).
    Dynptr,
    /// Part of an open-coded iterator (`i`).
    Iter,
    /// Saved irq flags (`f`).
    IrqFlag,
}

impl SlotType {
    /// The character the log prints for it.
    pub fn log_char(self) -> char {
        match self {
            SlotType::Invalid => '?',
            SlotType::Spill => 'r',
            SlotType::Misc => 'm',
            SlotType::Zero => '0',
            SlotType::Dynptr => 'd',
            SlotType::Iter => 'i',
            SlotType::IrqFlag => 'f',
        }
    }
}

/// Bytes per stack slot.
pub const SLOT_SIZE: usize = 8;
/// The stack a frame may use (`MAX_BPF_STACK`).
pub const MAX_BPF_STACK: usize = 512;

/// One 8-byte slot, indexed as the kernel does: the byte at frame offset `off` (negative) is
/// `stack[(-off - 1) / 8].slot_type[(-off - 1) % 8]`, so `slot_type[0]` is the slot's highest
/// address and `slot_type[7]` its lowest (where an 8-byte spill starts).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct StackSlot {
    /// The register spilled here (meaningful when some byte is `Spill`).
    pub spilled_ptr: RegState,
    pub slot_type: [SlotType; SLOT_SIZE],
}

impl StackSlot {
    /// Whether the slot holds a spilled register in all 8 bytes (`is_spilled_reg`: the top byte
    /// is `Spill`).
    pub fn is_spilled_reg(&self) -> bool {
        self.slot_type[SLOT_SIZE - 1] == SlotType::Spill
    }

    /// Whether the spill is of a scalar (`is_spilled_scalar_reg`).
    pub fn is_spilled_scalar(&self) -> bool {
        self.is_spilled_reg() && self.spilled_ptr.is_scalar()
    }

    /// Every byte ever written becomes plain data (`STACK_MISC`), never-written ones stay
    /// `STACK_INVALID`: what is left of a spill, dynptr or iterator once part of it is
    /// overwritten or a helper writes over it.
    pub fn mark_written_misc(&mut self) {
        for t in self.slot_type.iter_mut() {
            if *t != SlotType::Invalid {
                *t = SlotType::Misc;
            }
        }
    }

    /// The log's text for the slot types, highest address first (`fp-8=mmmm????`).
    pub fn types_text(&self) -> String {
        self.slot_type.iter().map(|t| t.log_char()).collect()
    }
}
