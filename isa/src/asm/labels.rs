//! The output of either dialect: instruction slots plus labels, resolved in a second pass so a
//! jump may name a label defined further down.

use super::AsmError;
use crate::insn::RawInsn;
use std::collections::HashMap;

/// Which field of the referring instruction receives the pc-relative distance to a label.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TargetField {
    /// The 16-bit `off` (conditional jumps, `ja`, `may_goto`).
    Off,
    /// The 32-bit `imm` (`gotol`/`ja32`, local calls).
    Imm,
}

/// Where a jump goes, as written: a label or a distance relative to the next instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Target<'a> {
    Label(&'a str),
    Relative(i32),
}

/// A label reference waiting for the label's slot to be known.
struct Fixup {
    slot: usize,
    label: String,
    field: TargetField,
    line: usize,
    column: usize,
}

/// Slots assembled so far, the labels seen and the references still to patch.
#[derive(Default)]
pub(crate) struct Assembly {
    slots: Vec<RawInsn>,
    labels: HashMap<String, usize>,
    /// Labels a dialect defines by itself (uBPF: `exit` at the first exit); a label the
    /// program writes takes precedence.
    implicit_labels: HashMap<String, usize>,
    fixups: Vec<Fixup>,
}

impl Assembly {
    /// The slot index the next instruction will occupy.
    pub fn next_slot(&self) -> usize {
        self.slots.len()
    }

    pub fn define_label(&mut self, name: &str, line: usize, column: usize) -> Result<(), AsmError> {
        let slot = self.next_slot();
        if let Some(previous) = self.labels.insert(name.to_owned(), slot) {
            return Err(AsmError::new(
                line,
                column,
                format!("duplicate label `{name}` (already defined at instruction {previous})"),
            ));
        }
        Ok(())
    }

    /// Defines `name` at the next slot unless an implicit definition exists already.
    pub fn define_implicit_label(&mut self, name: &str) {
        let slot = self.next_slot();
        self.implicit_labels.entry(name.to_owned()).or_insert(slot);
    }

    /// Appends the slots of one instruction (after [`Assembly::refer_to_label`] when it jumps
    /// to a label; the distance is patched in by [`Assembly::finish`]).
    pub fn push(&mut self, slots: &[RawInsn]) {
        self.slots.extend_from_slice(slots);
    }

    /// Records that the instruction about to be pushed refers to `label`.
    pub fn refer_to_label(&mut self, label: &str, field: TargetField, line: usize, column: usize) {
        self.fixups.push(Fixup {
            slot: self.next_slot(),
            label: label.to_owned(),
            field,
            line,
            column,
        });
    }

    /// Resolves every label reference and returns the slots.
    pub fn finish(mut self) -> Result<Vec<RawInsn>, AsmError> {
        for fixup in std::mem::take(&mut self.fixups) {
            self.patch(&fixup)?;
        }
        Ok(self.slots)
    }

    fn patch(&mut self, fixup: &Fixup) -> Result<(), AsmError> {
        let target = self
            .labels
            .get(&fixup.label)
            .or_else(|| self.implicit_labels.get(&fixup.label))
            .copied()
            .ok_or_else(|| {
                AsmError::new(
                    fixup.line,
                    fixup.column,
                    format!("unknown label `{}`", fixup.label),
                )
            })?;
        let distance = target as i64 - fixup.slot as i64 - 1;
        let out_of_range = || {
            AsmError::new(
                fixup.line,
                fixup.column,
                format!(
                    "label `{}` is {distance} instructions away, out of range for the offset",
                    fixup.label
                ),
            )
        };
        let slot = &mut self.slots[fixup.slot];
        match fixup.field {
            TargetField::Off => slot.off = i16::try_from(distance).map_err(|_| out_of_range())?,
            TargetField::Imm => slot.imm = i32::try_from(distance).map_err(|_| out_of_range())?,
        }
        Ok(())
    }
}
