//! Helper errors a program never looks at: the watch behind `bpfemu fuzz`'s "ignored helper
//! error" findings.
//!
//! When a helper returns `-errno` (a value in -4095..=-1), the registers that hold it, or
//! hold something computed from it, are followed instruction by instruction. The error counts
//! as *examined* as soon as the program could react to it: a conditional jump reads one of
//! those registers, one is stored to memory or handed to a call, or the program returns it.
//! It counts as *ignored* when the last register holding it is overwritten first, or the run
//! ends with it unread. Storing counts as examined (the program may test the copy later), so
//! the watch errs towards silence: an ignored error is one the program provably never read.
//!
//! Only the interpreter's general path feeds the watch, the one that records coverage.

use bpfemu_isa::{AluOp, CallTarget, Insn, Reg, Source};

/// Helpers whose negative return is not an error the program must handle: a failed tail call
/// falls through to the next instruction, which *is* its error path.
const NOT_ERRORS: &[i32] = &[12];

/// An error a helper returned that the program never examined.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct IgnoredError {
    /// The program (index in the runtime's set) and slot of the call.
    pub prog: usize,
    pub pc: usize,
    pub helper: i32,
    /// The errno (positive).
    pub errno: i64,
}

/// One error being followed: where it came from, the registers holding it in the running
/// frame (bit n: rn), and r6-r9 of each caller frame (outermost first).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Pending {
    origin: IgnoredError,
    regs: u16,
    callers: Vec<u16>,
}

impl Pending {
    fn held(&self) -> bool {
        self.regs != 0 || self.callers.iter().any(|r| *r != 0)
    }
}

const ARGS: u16 = 0b11_1110;
const CALLER_SAVED: u16 = 0b11_1111;
const CALLEE_SAVED: u16 = 0b11_1100_0000;

/// The state of the watch during one run, and what it found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ErrorWatch {
    pending: Vec<Pending>,
    /// bpf-to-bpf calls in progress.
    depth: usize,
    ignored: Vec<IgnoredError>,
}

fn bit(reg: Reg) -> u16 {
    1 << reg.number()
}

impl ErrorWatch {
    /// Errors the runs since the last [`ErrorWatch::clear`] left unexamined, in the order
    /// they were dropped.
    pub fn ignored(&self) -> &[IgnoredError] {
        &self.ignored
    }

    pub fn clear(&mut self) {
        self.pending.clear();
        self.depth = 0;
        self.ignored.clear();
    }

    /// A helper call at `prog`/`pc` returned `r0`.
    pub(crate) fn helper_returned(&mut self, prog: usize, pc: usize, helper: i32, r0: u64) {
        let value = r0 as i64;
        if !(-4095..=-1).contains(&value) || NOT_ERRORS.contains(&helper) {
            return;
        }
        self.pending.push(Pending {
            origin: IgnoredError {
                prog,
                pc,
                helper,
                errno: -value,
            },
            regs: 1,
            callers: vec![0; self.depth],
        });
    }

    /// A new frame starts: a bpf-to-bpf call or a helper's callback. The callee may not read
    /// r6-r9, which are the caller's again at the callee's exit, nor r0-r5 other than its
    /// arguments (already counted as read by the call).
    pub(crate) fn frame_entered(&mut self) {
        self.depth += 1;
        for p in &mut self.pending {
            p.callers.push(p.regs & CALLEE_SAVED);
            p.regs = 0;
        }
    }

    /// `insn` is about to run.
    pub(crate) fn before(&mut self, insn: &Insn) {
        if self.pending.is_empty() {
            match insn {
                Insn::Call(CallTarget::Local(_)) => self.depth += 1,
                Insn::Exit => self.depth = self.depth.saturating_sub(1),
                _ => {}
            }
            return;
        }
        match *insn {
            Insn::Alu { op, dst, src, .. } => {
                let replaces = op == AluOp::Mov;
                match src {
                    Source::Reg(s) => self.derive(dst, bit(s), replaces),
                    Source::Imm(_) => self.derive(dst, 0, replaces),
                }
            }
            Insn::MovSx { dst, src, .. } | Insn::AddrSpaceCast { dst, src, .. } => {
                self.derive(dst, bit(src), true)
            }
            Insn::Neg { .. } | Insn::Endian { .. } => {}
            Insn::LdImm64 { dst, .. } | Insn::Load { dst, .. } => self.overwrite(bit(dst)),
            Insn::LdAbs { .. } => self.overwrite(CALLER_SAVED),
            Insn::LdInd { src, .. } => {
                self.examine(bit(src));
                self.overwrite(CALLER_SAVED);
            }
            Insn::Store { .. } | Insn::Ja { .. } | Insn::MayGoto { .. } => {}
            Insn::StoreReg { src, .. } => self.examine(bit(src)),
            Insn::Atomic { dst, src, .. } => self.examine(bit(src) | bit(dst)),
            Insn::Jump { dst, src, .. } => {
                let src = match src {
                    Source::Reg(s) => bit(s),
                    Source::Imm(_) => 0,
                };
                self.examine(bit(dst) | src);
            }
            Insn::Call(target) => {
                self.examine(ARGS);
                if let CallTarget::Local(_) = target {
                    self.frame_entered();
                } else {
                    self.overwrite(CALLER_SAVED);
                }
            }
            Insn::Exit => self.exit(),
        }
    }

    /// The run ended: whatever is still held was never read.
    pub(crate) fn run_ended(&mut self) {
        let left = std::mem::take(&mut self.pending);
        self.ignored.extend(left.into_iter().map(|p| p.origin));
        self.depth = 0;
    }

    /// Returning r0 hands the error on: to the calling function, which carries it on in its
    /// own r0, or to the kernel or a loop helper, which read it.
    fn exit(&mut self) {
        if self.depth == 0 {
            self.examine(1);
            return;
        }
        self.depth -= 1;
        for p in &mut self.pending {
            let restored = p.callers.pop().unwrap_or(0);
            p.regs = (p.regs & 1) | restored;
        }
        self.drop_unheld();
    }

    /// `dst` gets a value computed from `src` (and from `dst` unless `replaces`).
    fn derive(&mut self, dst: Reg, src: u16, replaces: bool) {
        let d = bit(dst);
        for p in &mut self.pending {
            let from_dst = !replaces && p.regs & d != 0;
            if p.regs & src != 0 || from_dst {
                p.regs |= d;
            } else {
                p.regs &= !d;
            }
        }
        self.drop_unheld();
    }

    fn overwrite(&mut self, regs: u16) {
        for p in &mut self.pending {
            p.regs &= !regs;
        }
        self.drop_unheld();
    }

    /// The program could act on whatever these registers hold.
    fn examine(&mut self, regs: u16) {
        self.pending.retain(|p| p.regs & regs == 0);
    }

    /// Errors held in no register of any frame were lost unread.
    fn drop_unheld(&mut self) {
        let ignored = &mut self.ignored;
        self.pending.retain(|p| {
            let held = p.held();
            if !held {
                ignored.push(p.origin.clone());
            }
            held
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bpfemu_isa::{JmpCond, Size, Width};

    const E2BIG: u64 = (-7i64) as u64;

    fn mov(dst: Reg, src: Source) -> Insn {
        Insn::Alu {
            width: Width::W64,
            op: AluOp::Mov,
            dst,
            src,
        }
    }

    /// A watch that has just seen helper 2 (map_update_elem) at slot 5 return -E2BIG.
    fn after_failed_update() -> ErrorWatch {
        let mut w = ErrorWatch::default();
        w.before(&Insn::Call(CallTarget::Helper(2)));
        w.helper_returned(0, 5, 2, E2BIG);
        w
    }

    fn ignored_sites(w: &ErrorWatch) -> Vec<(usize, i32, i64)> {
        w.ignored()
            .iter()
            .map(|e| (e.pc, e.helper, e.errno))
            .collect()
    }

    #[test]
    fn overwriting_the_only_copy_ignores_the_error() {
        let mut w = after_failed_update();
        w.before(&mov(Reg::R0, Source::Imm(2)));
        assert_eq!(ignored_sites(&w), [(5, 2, 7)]);
    }

    #[test]
    fn a_branch_on_a_derived_copy_examines_it() {
        let mut w = after_failed_update();
        w.before(&mov(Reg::R6, Source::Reg(Reg::R0)));
        w.before(&Insn::Alu {
            width: Width::W64,
            op: AluOp::Lsh,
            dst: Reg::R6,
            src: Source::Imm(32),
        });
        w.before(&mov(Reg::R0, Source::Imm(0)));
        w.before(&Insn::Jump {
            width: Width::W64,
            cond: JmpCond::Ne,
            dst: Reg::R6,
            src: Source::Imm(0),
            off: 1,
        });
        w.before(&mov(Reg::R6, Source::Imm(0)));
        w.run_ended();
        assert!(w.ignored().is_empty());
    }

    #[test]
    fn returning_storing_or_passing_the_error_examines_it() {
        let mut returned = after_failed_update();
        returned.before(&Insn::Exit);
        returned.run_ended();
        let mut stored = after_failed_update();
        stored.before(&Insn::StoreReg {
            size: Size::DW,
            dst: Reg::R10,
            src: Reg::R0,
            off: -8,
        });
        stored.before(&mov(Reg::R0, Source::Imm(2)));
        let mut passed = after_failed_update();
        passed.before(&mov(Reg::R1, Source::Reg(Reg::R0)));
        passed.before(&Insn::Call(CallTarget::Helper(6)));
        for w in [returned, stored, passed] {
            assert!(w.ignored().is_empty(), "{w:?}");
        }
    }

    #[test]
    fn the_end_of_a_run_ignores_what_is_still_unread() {
        let mut w = after_failed_update();
        w.before(&mov(Reg::R7, Source::Reg(Reg::R0)));
        w.before(&mov(Reg::R0, Source::Imm(1)));
        w.before(&Insn::Exit);
        assert!(w.ignored().is_empty());
        w.run_ended();
        assert_eq!(ignored_sites(&w), [(5, 2, 7)]);
    }

    #[test]
    fn a_callee_cannot_lose_the_callers_r6_to_r9() {
        let mut w = after_failed_update();
        w.before(&mov(Reg::R6, Source::Reg(Reg::R0)));
        w.before(&Insn::Call(CallTarget::Local(3)));
        // The callee writes r6 (its own) and returns; the caller's r6 still holds the error.
        w.before(&mov(Reg::R6, Source::Imm(0)));
        w.before(&Insn::Exit);
        assert!(w.ignored().is_empty());
        w.before(&Insn::Jump {
            width: Width::W32,
            cond: JmpCond::Sgt,
            dst: Reg::R6,
            src: Source::Imm(0),
            off: 1,
        });
        w.run_ended();
        assert!(w.ignored().is_empty());
    }

    #[test]
    fn only_negative_errnos_of_error_returning_helpers_count() {
        let mut w = ErrorWatch::default();
        w.helper_returned(0, 1, 2, 0); // success
        w.helper_returned(0, 2, 5, 1 << 40); // a clock
        w.helper_returned(0, 3, 12, (-2i64) as u64); // a failed tail call falls through
        w.helper_returned(0, 4, 2, (-4096i64) as u64); // not an errno
        w.run_ended();
        assert!(w.ignored().is_empty());
    }
}
