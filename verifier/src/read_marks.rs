//! The read marks of the kernels before 6.15 (`REG_LIVE_READ`, `REG_LIVE_WRITTEN`,
//! `REG_LIVE_DONE`): which registers and stack slots of a checkpoint some later instruction on
//! some path from it read, learnt from the walk itself.
//!
//! Every register and slot of the state being walked links to the same place in the checkpoint
//! it descends from (its parent). A read marks that place, and the parent's parent, up the
//! chain until a state that wrote the place itself since its own checkpoint (a write screens
//! the reads below it from the states above). Pruning compares only what a checkpoint saw
//! read (`regsafe`, `stacksafe` with `NOT_EXACT`), a pruned path hands its reads on as if it
//! had gone the checkpoint's way (`propagate_liveness`), and a checkpoint whose paths are all
//! done forgets what nobody read (`clean_verifier_state`).
//!
//! 6.15 replaced the registers' marks with a static analysis (`liveness::compute_live_registers`)
//! and 6.18 the slots' with `stack_liveness`; the pruning those kernels do is not the same
//! (katran's balancer: 20,633 instructions on 5.10 and 6.1, 64,088 on 6.18).
//!
//! Marks sit beside the registers and slots (`FuncState::marks`), not in them, because they
//! belong to the place: the kernel's `copy_register_state` keeps the destination's marks when
//! a value moves, and only frame set-up copies a register with its marks (a callee's R1-R5 are
//! the caller's, a caller's R0 is the callee's).

use crate::env::Env;
use crate::state::reg::RegState;
use crate::state::stack::{SLOT_SIZE, SlotType};
use crate::state::{FuncState, VerifierState};
use bpfemu_isa::{CallTarget, Insn};

/// Some later instruction read it (`REG_LIVE_READ64`; the 32-bit read mark only saves the
/// JIT a zero extension, and pruning tests either).
pub const READ: u8 = 1;
/// Written since the state's checkpoint: its reads below do not reach the checkpoint.
pub const WRITTEN: u8 = 2;

/// A register or slot in an explored checkpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Place {
    state: u32,
    frame: u8,
    at: Spot,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Spot {
    Reg(u8),
    Slot(u16),
}

/// One register's or slot's marks and the place in the parent checkpoint it reads through.
#[derive(Clone, Copy, Debug, Default)]
pub struct Mark {
    pub live: u8,
    parent: Option<Place>,
}

/// The marks of one frame: its registers and its slots (slot `i` is `fp-8*(i+1)`; slots past
/// the end have no parent and no marks yet).
#[derive(Clone, Debug, Default)]
pub struct ReadMarks {
    regs: [Mark; 11],
    slots: Vec<Mark>,
}

/// Bookkeeping, not state: two frames equal in every register and slot are equal whatever
/// their marks (the kernel's `regs_exact` stops before `parent` and `live` too).
impl PartialEq for ReadMarks {
    fn eq(&self, _: &ReadMarks) -> bool {
        true
    }
}
impl Eq for ReadMarks {}

impl ReadMarks {
    pub fn reg(&self, r: usize) -> Mark {
        self.regs[r]
    }

    pub fn slot(&self, spi: usize) -> Mark {
        self.slots.get(spi).copied().unwrap_or_default()
    }

    fn slot_mut(&mut self, spi: usize) -> &mut Mark {
        if spi >= self.slots.len() {
            self.slots.resize(spi + 1, Mark::default());
        }
        &mut self.slots[spi]
    }

    fn mark_mut(&mut self, at: Spot) -> &mut Mark {
        match at {
            Spot::Reg(r) => &mut self.regs[r as usize],
            Spot::Slot(spi) => self.slot_mut(spi as usize),
        }
    }
}

/// Whether `env`'s kernel keeps read marks per state.
pub fn enabled(env: &Env<'_>) -> bool {
    crate::behaviour::keeps_read_marks_per_state(env.input.kernel.version())
}

/// `mark_reg_read`: marks the chain above `from` read, up to a state that wrote the place.
fn mark_chain_read(env: &mut Env<'_>, from: Mark) {
    let (mut live, mut parent) = (from.live, from.parent);
    let mut walked = 0;
    while let Some(p) = parent {
        if live & WRITTEN != 0 {
            break;
        }
        let mark = env.explored[p.state as usize].state.frames[p.frame as usize]
            .marks
            .mark_mut(p.at);
        if mark.live & READ != 0 {
            break;
        }
        mark.live |= READ;
        (live, parent) = (mark.live, mark.parent);
        walked += 1;
    }
    env.counters.mark_read = env.counters.mark_read.max(walked);
}

/// The instruction at hand reads register `r` of the current frame.
fn reg_read(env: &mut Env<'_>, state: &VerifierState, r: usize) {
    // R10 is read-only: its value never depends on a path.
    if r < 10 {
        mark_chain_read(env, state.cur().marks.reg(r));
    }
}

/// The instruction at hand reads stack slots `mask` of frame `frame` (`fp-8` is bit 0).
pub fn slots_read(env: &mut Env<'_>, state: &VerifierState, frame: usize, mask: u64) {
    let Some(f) = state.frames.get(frame) else {
        return;
    };
    for spi in (0..64).filter(|spi| mask & (1 << spi) != 0) {
        mark_chain_read(env, f.marks.slot(spi));
    }
}

/// The instruction at hand writes all 8 bytes of stack slots `mask` of frame `frame`.
pub fn slots_written(state: &mut VerifierState, frame: usize, mask: u64) {
    let Some(f) = state.frames.get_mut(frame) else {
        return;
    };
    for spi in (0..64).filter(|spi| mask & (1 << spi) != 0) {
        f.marks.slot_mut(spi).live |= WRITTEN;
    }
}

/// The registers an instruction reads (`check_reg_arg(SRC_OP)` and the helper and kfunc
/// arguments), before it is checked; returns those it writes, for [`after_insn`]. A bpf-to-bpf
/// call reads nothing itself (the callee reads its R1-R5 through the caller's marks); an `exit`
/// reads R0 when it leaves the program (or a callback, whose value is checked), not when a
/// subprogram returns it to its caller.
pub fn before_insn(env: &mut Env<'_>, state: &VerifierState, insn: &Insn) -> u16 {
    let (used, defined) = crate::liveness::use_def(env.input.kernel, insn);
    let used = match insn {
        Insn::Call(CallTarget::Local(_)) => 0,
        Insn::Exit if state.frames.len() > 1 && !state.cur().in_callback_fn => 0,
        _ => used,
    };
    for r in (0..10).filter(|r| used & (1 << r) != 0) {
        reg_read(env, state, r);
    }
    defined
}

/// The instruction wrote registers `defined` (`check_reg_arg(DST_OP)`, a call's R0-R5), in the
/// frame it ran in (`frame`: a call has pushed the callee's since).
pub fn after_insn(state: &mut VerifierState, frame: usize, defined: u16) {
    let Some(f) = state.frames.get_mut(frame) else {
        return;
    };
    for r in (0..10).filter(|r| defined & (1 << r) != 0) {
        f.marks.regs[r].live |= WRITTEN;
    }
}

/// `set_callee_state`: the callee's R1-R5 are the caller's, marks and parents with them.
pub fn enter_callee(state: &mut VerifierState) {
    let n = state.frames.len();
    if n < 2 {
        return;
    }
    let caller = state.frames[n - 2].marks.regs;
    let callee = &mut state.frames[n - 1].marks;
    *callee = ReadMarks::default();
    callee.regs[1..=5].copy_from_slice(&caller[1..=5]);
}

/// `prepare_func_exit`: the caller's R0 is the callee's, marks and parent with it.
pub fn return_r0(state: &mut VerifierState) {
    let n = state.frames.len();
    if n >= 2 {
        state.frames[n - 2].marks.regs[0] = state.frames[n - 1].marks.regs[0];
    }
}

/// `is_state_visited` after taking checkpoint `checkpoint` of `state`: the state reads through
/// it from now on, and has written nothing since. Callers' R0-R5 keep their parents (they were
/// written at the call; R0 comes back with the callee's chain).
pub fn link_to_checkpoint(state: &mut VerifierState, checkpoint: usize) {
    let cur = state.curframe();
    for (j, frame) in state.frames.iter_mut().enumerate() {
        let first = if j < cur { 6 } else { 0 };
        let place = |at| Place {
            state: checkpoint as u32,
            frame: j as u8,
            at,
        };
        for r in first..10 {
            frame.marks.regs[r].parent = Some(place(Spot::Reg(r as u8)));
        }
        for mark in &mut frame.marks.regs[..10] {
            mark.live = 0;
        }
        let slots = frame.stack.len();
        frame.marks.slots.resize(slots, Mark::default());
        for (spi, mark) in frame.marks.slots.iter_mut().enumerate() {
            *mark = Mark {
                live: 0,
                parent: Some(place(Spot::Slot(spi as u16))),
            };
        }
    }
}

/// `propagate_liveness`: the pruned path would have read what checkpoint `old` saw read; those
/// reads go up the pruned path's own chain.
pub fn propagate_to_pruned(env: &mut Env<'_>, old: usize, cur: &VerifierState) {
    let old_state = &env.explored[old].state;
    let cur_frame = cur.curframe();
    let mut reads = Vec::new();
    for (j, (of, cf)) in old_state.frames.iter().zip(&cur.frames).enumerate() {
        let first = if j < cur_frame { 6 } else { 0 };
        for r in (first..10).filter(|&r| of.marks.reg(r).live & READ != 0) {
            reads.push(cf.marks.reg(r));
        }
        let slots = of.stack.len().min(cf.stack.len());
        for spi in (0..slots).filter(|&spi| of.marks.slot(spi).live & READ != 0) {
            reads.push(cf.marks.slot(spi));
        }
    }
    for mark in reads {
        mark_chain_read(env, mark);
    }
}

/// `clean_verifier_state`: checkpoint `checkpoint`'s paths are all done, so what none of them
/// read is forgotten. The caller cleans each checkpoint once (`Explored::cleaned`, the
/// kernel's `REG_LIVE_DONE`).
pub fn clean(env: &mut Env<'_>, checkpoint: usize) {
    for frame in &mut env.explored[checkpoint].state.frames {
        clean_frame(frame);
    }
}

fn clean_frame(frame: &mut FuncState) {
    for r in 0..10 {
        if frame.marks.regs[r].live & READ == 0 {
            frame.regs[r] = RegState::not_init();
        }
    }
    for spi in 0..frame.stack.len() {
        if !slot_was_read(frame, spi) {
            let slot = &mut frame.stack[spi];
            slot.spilled_ptr = RegState::not_init();
            slot.slot_type = [SlotType::Invalid; SLOT_SIZE];
        }
    }
}

/// The registers of frame `frame` of checkpoint state `st` read after it, as a mask.
pub fn regs_read(st: &VerifierState, frame: usize) -> u16 {
    let marks = &st.frames[frame].marks;
    (0..10)
        .filter(|&r| marks.reg(r).live & READ != 0)
        .fold(0, |m, r| m | 1 << r)
}

/// Whether slot `spi` of frame `frame` of checkpoint state `st` was read after it.
pub fn slot_was_read(frame: &FuncState, spi: usize) -> bool {
    frame.marks.slot(spi).live & READ != 0
}
