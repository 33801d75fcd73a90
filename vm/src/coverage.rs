//! What a run reached, instruction by instruction: the coverage that guides `bpfemu fuzz` and
//! its report by source line.
//!
//! Per program of a set and per instruction slot, three bits: the instruction ran, a
//! conditional jump there was taken, it fell through. Branch edges are those two bits; a new
//! bit anywhere is new coverage. Bits only accumulate: [`Coverage::merge_new`] tells what a run
//! added to a running total.

use crate::error_watch::ErrorWatch;
pub use crate::error_watch::IgnoredError;

/// The instruction ran.
pub const RAN: u8 = 1;
/// A conditional jump (or `may_goto`) jumped.
pub const TAKEN: u8 = 2;
/// A conditional jump (or `may_goto`) fell through.
pub const FELL_THROUGH: u8 = 4;

/// Coverage bits of a program set, one byte per instruction slot, and the helper errors the
/// runs left unexamined (`ErrorWatch`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Coverage {
    programs: Vec<Vec<u8>>,
    errors: ErrorWatch,
}

impl Coverage {
    /// Empty coverage for programs of these lengths (in slots).
    pub fn new(lengths: impl IntoIterator<Item = usize>) -> Coverage {
        Coverage {
            programs: lengths.into_iter().map(|len| vec![0; len]).collect(),
            errors: ErrorWatch::default(),
        }
    }

    #[inline]
    pub(crate) fn mark(&mut self, prog: usize, pc: usize, bits: u8) {
        if let Some(slot) = self.programs.get_mut(prog).and_then(|p| p.get_mut(pc)) {
            *slot |= bits;
        }
    }

    /// The bits of slot `pc` of program `prog` (0 outside the set).
    pub fn bits(&self, prog: usize, pc: usize) -> u8 {
        self.programs
            .get(prog)
            .and_then(|p| p.get(pc))
            .copied()
            .unwrap_or(0)
    }

    /// The bits of every slot of program `prog`.
    pub fn program(&self, prog: usize) -> &[u8] {
        self.programs.get(prog).map_or(&[], Vec::as_slice)
    }

    /// Clears every bit and the errors watched, keeping the shape.
    pub fn clear(&mut self) {
        for p in &mut self.programs {
            p.fill(0);
        }
        self.errors.clear();
    }

    /// Helper errors the runs since the last [`Coverage::clear`] never examined.
    pub fn ignored_errors(&self) -> &[IgnoredError] {
        self.errors.ignored()
    }

    pub(crate) fn errors_mut(&mut self) -> &mut ErrorWatch {
        &mut self.errors
    }

    /// Adds `run`'s bits to `self`; returns how many bits were new.
    pub fn merge_new(&mut self, run: &Coverage) -> usize {
        let mut new = 0;
        for (total, run) in self.programs.iter_mut().zip(&run.programs) {
            for (t, r) in total.iter_mut().zip(run) {
                let added = r & !*t;
                if added != 0 {
                    new += added.count_ones() as usize;
                    *t |= added;
                }
            }
        }
        new
    }

    /// How many bits are set in all: instructions reached plus branch directions taken.
    pub fn count(&self) -> usize {
        self.programs
            .iter()
            .flatten()
            .map(|b| b.count_ones() as usize)
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_counts_only_new_bits() {
        let mut total = Coverage::new([4, 2]);
        let mut run = Coverage::new([4, 2]);
        run.mark(0, 1, RAN | TAKEN);
        run.mark(1, 1, RAN);
        run.mark(7, 0, RAN); // outside the set: ignored
        assert_eq!(total.merge_new(&run), 3);
        assert_eq!(total.merge_new(&run), 0);
        run.mark(0, 1, FELL_THROUGH);
        assert_eq!(total.merge_new(&run), 1);
        assert_eq!(total.bits(0, 1), RAN | TAKEN | FELL_THROUGH);
        assert_eq!(total.count(), 4);
        run.clear();
        assert_eq!(run.count(), 0);
    }
}
