//! The path being walked, recorded for explanations: which instructions the current path ran
//! and what each did to the registers of its frame. Only a walk asked to trace keeps one
//! (`explain`, after a rejection); the verifier's own walk keeps none and pays one branch
//! per instruction for the option.
//!
//! The record follows the walk as the level-1 log does: when a pushed branch is popped, the
//! record goes back to where it was when the branch was pushed, so at a rejection it holds
//! exactly the rejected path. Each step keeps only the registers it changed, and only steps
//! processed after [`Trace::changes_from`] keep even those (the window: the end of a long path,
//! where the rejection is), so the record stays small however long the path.

use crate::state::VerifierState;
use crate::state::reg::RegState;
use bpfemu_isa::Reg;

/// The registers of one frame.
pub type Regs = [RegState; Reg::COUNT];

/// One instruction of the path.
#[derive(Clone, Copy, Debug)]
pub struct Step {
    pub pc: u32,
    /// The frame current after the instruction (0: the walk's entry function).
    pub frame: u32,
    /// Where this step's changes start in [`Trace::changes`].
    first_change: u32,
}

/// A register as an instruction left it.
#[derive(Clone, Copy, Debug)]
pub struct Change {
    pub reg: u8,
    pub after: RegState,
}

/// Where the record stood when a branch was pushed (one per pending branch).
#[derive(Clone, Debug)]
struct Mark {
    steps: usize,
    changes: usize,
    last: Vec<Regs>,
}

/// What the walk was doing when it rejected the program.
#[derive(Clone, Debug)]
pub struct Failure {
    pub pc: usize,
    /// The state as the failing instruction found it (registers of the record's last step,
    /// the stack as the state holds it).
    pub state: VerifierState,
    /// The log text the failing instruction wrote (level 1 and up), its final line the
    /// rejection's message.
    pub log_text: String,
}

/// The record of the current path.
#[derive(Clone, Debug, Default)]
pub struct Trace {
    pub steps: Vec<Step>,
    pub changes: Vec<Change>,
    /// The registers of every frame as the last step left them.
    last: Vec<Regs>,
    marks: Vec<Mark>,
    /// Where the window of recorded changes starts: the step, and every frame's registers
    /// before it.
    window: Option<(usize, Vec<Regs>)>,
    /// Instructions processed before this count keep no changes.
    pub changes_from: u64,
    processed: u64,
    /// How many times the walk processed each instruction, on any path.
    pub visits: Vec<u32>,
    pub failure: Option<Failure>,
}

/// Equal for an explanation: liveness and precision marks are the walk's bookkeeping, not
/// what a register holds.
pub fn same_value(a: &RegState, b: &RegState) -> bool {
    let strip = |r: &RegState| RegState {
        precise: false,
        subreg_def: 0,
        ..*r
    };
    strip(a) == strip(b)
}

impl Trace {
    /// A record for a program of `len` instructions, keeping the changes of the
    /// instructions processed after the first `changes_from`.
    pub fn new(len: usize, changes_from: u64) -> Trace {
        Trace {
            visits: vec![0; len],
            changes_from,
            ..Trace::default()
        }
    }

    /// A walk starts (the main program, or a global function walked on its own).
    pub fn start(&mut self, state: &VerifierState) {
        self.steps.clear();
        self.changes.clear();
        self.marks.clear();
        self.failure = None;
        self.last = state.frames.iter().map(|f| f.regs).collect();
        self.window = None;
        self.open_window();
    }

    /// Starts the window of recorded changes once past [`Trace::changes_from`].
    fn open_window(&mut self) {
        if self.window.is_none() && self.processed >= self.changes_from {
            self.window = Some((self.steps.len(), self.last.clone()));
        }
    }

    /// The first step that keeps its changes (all steps, when the window opened at once).
    pub fn window_start(&self) -> usize {
        self.window.as_ref().map_or(self.steps.len(), |w| w.0)
    }

    /// The instruction at `pc` was processed (counted even when pruned).
    pub fn visit(&mut self, pc: usize) {
        self.processed += 1;
        if let Some(v) = self.visits.get_mut(pc) {
            *v = v.saturating_add(1);
        }
    }

    /// Instruction `pc` completed on the current path, leaving `state`.
    pub fn step(&mut self, pc: usize, state: &VerifierState) {
        let frame = state.curframe();
        self.open_window();
        let recording = self.window.is_some();
        // A frame left since is forgotten; a frame entered since starts unwritten in the
        // record, so the arguments it received show as changes.
        self.last
            .resize(state.frames.len(), [RegState::not_init(); Reg::COUNT]);
        let first_change = self.changes.len() as u32;
        let before = &mut self.last[frame];
        for (i, (old, new)) in before.iter_mut().zip(state.cur().regs.iter()).enumerate() {
            if recording && !same_value(old, new) {
                self.changes.push(Change {
                    reg: i as u8,
                    after: *new,
                });
            }
            *old = *new;
        }
        self.steps.push(Step {
            pc: pc as u32,
            frame: frame as u32,
            first_change,
        });
    }

    /// A branch is pushed: a pop comes back to this point.
    pub fn mark(&mut self) {
        self.marks.push(Mark {
            steps: self.steps.len(),
            changes: self.changes.len(),
            last: self.last.clone(),
        });
    }

    /// The latest pushed branch is popped: the path is the one up to its push, then the
    /// branching instruction `prev` with the popped state after it.
    pub fn pop(&mut self, prev: usize, state: &VerifierState) {
        let Some(mark) = self.marks.pop() else {
            return;
        };
        self.steps.truncate(mark.steps);
        self.changes.truncate(mark.changes);
        // A window that started on the path given up starts again where this one resumes.
        if self.window.as_ref().is_some_and(|w| w.0 > mark.steps) {
            self.window = Some((mark.steps, mark.last.clone()));
        }
        self.last = mark.last;
        self.step(prev, state);
    }

    /// The walk rejects the program at `pc` with `state`.
    pub fn fail(&mut self, pc: usize, state: &VerifierState, log_text: String) {
        let mut state = state.clone();
        // The registers as the failing instruction found them (it may have changed some
        // before it refused).
        if let Some(regs) = self.last.get(state.curframe()) {
            state.cur_mut().regs = *regs;
        }
        self.failure = Some(Failure {
            pc,
            state,
            log_text,
        });
    }

    /// The changes step `i` made.
    pub fn changes_of(&self, i: usize) -> &[Change] {
        let start = self.steps[i].first_change as usize;
        let end = self
            .steps
            .get(i + 1)
            .map_or(self.changes.len(), |s| s.first_change as usize);
        &self.changes[start..end]
    }

    /// Register `reg` of frame `frame` as step `i` left it, when step `i` changed it.
    pub fn change(&self, i: usize, reg: usize) -> Option<&RegState> {
        self.changes_of(i)
            .iter()
            .find(|c| c.reg as usize == reg)
            .map(|c| &c.after)
    }

    /// Register `reg` as it was before step `i`, in the frame step `i` ran in: the latest
    /// change before it in that frame's life, else as the window found it.
    pub fn before(&self, i: usize, reg: usize) -> RegState {
        let frame = self.frame_before(i);
        let Some((start, at_start)) = &self.window else {
            return RegState::not_init();
        };
        for j in (*start..i).rev() {
            let s = self.steps[j];
            if (s.frame as usize) < frame {
                // The frame did not exist before this step: arguments arrive at the call.
                return RegState::not_init();
            }
            if s.frame as usize == frame
                && let Some(r) = self.change(j, reg)
            {
                return *r;
            }
        }
        at_start
            .get(frame)
            .map_or_else(RegState::not_init, |regs| regs[reg])
    }

    /// The frame current before step `i` ran.
    pub fn frame_before(&self, i: usize) -> usize {
        match i {
            0 => 0,
            _ => self.steps[i - 1].frame as usize,
        }
    }
}
