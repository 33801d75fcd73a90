//! Stack slot liveness as 6.18 computes it (`kernel/bpf/liveness.c`): from the accesses the
//! walk itself makes, per call chain, not from a static reading of the program.
//!
//! Every instruction the walk checks records, for the call chain it runs in (the call sites
//! leading to its function, then that function's first instruction), which 8-byte slots of
//! each frame it may read and which it surely writes: reads join across visits (union),
//! writes meet (intersection). When a path ends, or a function returns, a fixed point over
//! the function's instructions turns those marks into the slots live before each instruction
//! (`live_before`), and what a callee reads or surely writes of its callers' stacks is added
//! to the call instruction of the caller's chain. A checkpoint whose paths are all finished is
//! then cleaned of the slots no later instruction reads (`clean_live_states`), which is what
//! lets a later state with different dead slots be pruned against it.
//!
//! The level-2 log carries the analysis' trace (`(0) frame 0 insn 12 +live -8`, `(0) live
//! stack update done in 2 iterations`), as 6.18's does. The older kernels, whose slots carried
//! read marks up each state's parent chain, are answered with the same analysis, which gives
//! their tables' verdicts and counts (`behaviour::prints_stack_liveness_trace`). 7.2 computes
//! the liveness before the walk instead ([`crate::stack_liveness_static`]); then the walk
//! records nothing here.

use crate::env::Env;
use crate::state::VerifierState;
use crate::state::frame::MAX_CALL_FRAMES;
use crate::state::reg::RegState;
use crate::state::stack::{SLOT_SIZE, SlotType};
use std::collections::HashMap;

/// The marks of one instruction for one frame (`struct per_frame_masks`), a bit per slot.
#[derive(Clone, Copy, Debug, Default)]
struct Masks {
    may_read: u64,
    must_write: u64,
    /// Written by this instruction or surely by every path after it, within the function.
    must_write_acc: u64,
    live_before: u64,
}

/// The marks of one function under one call chain (`struct func_instance`).
#[derive(Debug)]
struct Instance {
    /// The call instructions of the outer frames, then this function's first instruction.
    callsites: Vec<u32>,
    /// The first instruction of each frame's function.
    starts: Vec<u32>,
    len: usize,
    /// Per frame of the chain (0 is the outermost), per instruction of this function.
    frames: Vec<Option<Vec<Masks>>>,
    /// Whether the instruction's `must_write` was set once (later visits intersect).
    must_write_seen: Vec<bool>,
    updated: bool,
    must_write_dropped: bool,
}

impl Instance {
    fn depth(&self) -> usize {
        self.callsites.len() - 1
    }

    fn start(&self) -> usize {
        self.starts[self.depth()] as usize
    }

    fn masks(&self, frame: usize, pc: usize) -> Option<&Masks> {
        self.frames[frame]
            .as_ref()?
            .get(pc.checked_sub(self.start())?)
    }

    fn masks_mut(&mut self, frame: usize, pc: usize) -> Option<&mut Masks> {
        let at = pc.checked_sub(self.start())?;
        let len = self.len;
        self.frames[frame]
            .get_or_insert_with(|| vec![Masks::default(); len])
            .get_mut(at)
    }

    fn chain_text(&self) -> String {
        let sites: Vec<String> = self.callsites.iter().map(u32::to_string).collect();
        format!("({})", sites.join(","))
    }
}

/// The analysis of one verification (`struct bpf_liveness`).
#[derive(Debug, Default)]
pub struct StackLiveness {
    instances: Vec<Instance>,
    /// Each instance's place in `instances`, by its call chain.
    index: HashMap<Vec<u32>, usize>,
    /// The instance of the state being walked, when known (`cur_instance`).
    cur: Option<usize>,
    /// The instruction whose writes `write_acc` gathers, per frame.
    write_insn: usize,
    write_acc: [u64; MAX_CALL_FRAMES],
    /// Each function's instructions in the order the fixed point visits them.
    postorder: HashMap<usize, Vec<usize>>,
}

/// The call chain of frame `frame` of `st` (`compute_callchain`): its key and the first
/// instruction of every frame's function up to it.
fn callchain(env: &Env<'_>, st: &VerifierState, frame: usize) -> (Vec<u32>, Vec<u32>) {
    let starts: Vec<u32> = st.frames[..=frame]
        .iter()
        .map(|f| env.subprogs[f.subprogno as usize].start as u32)
        .collect();
    let mut sites: Vec<u32> = st.frames[1..=frame]
        .iter()
        .map(|f| f.callsite as u32)
        .collect();
    sites.push(starts[frame]);
    (sites, starts)
}

/// Finds or makes the instance of `key` (`__lookup_instance`); its place in `instances`.
fn instance(env: &Env<'_>, sl: &mut StackLiveness, key: Vec<u32>, starts: Vec<u32>) -> usize {
    if let Some(&at) = sl.index.get(&key) {
        return at;
    }
    let start = *starts.last().expect("a chain has a function") as usize;
    let sp = env.subprog_of(start);
    let end = env.subprog_end(sp);
    let len = end.saturating_sub(start);
    let at = sl.instances.len();
    sl.index.insert(key.clone(), at);
    sl.instances.push(Instance {
        frames: vec![None; key.len()],
        callsites: key,
        starts,
        len,
        must_write_seen: vec![false; len],
        updated: false,
        must_write_dropped: false,
    });
    at
}

fn with<R>(env: &mut Env<'_>, f: impl FnOnce(&mut Env<'_>, &mut StackLiveness) -> R) -> R {
    let mut sl = std::mem::take(&mut env.stack_liveness);
    let r = f(env, &mut sl);
    env.stack_liveness = sl;
    r
}

/// The instance of the state being walked (`ensure_cur_instance`).
fn ensure_cur(env: &Env<'_>, sl: &mut StackLiveness, st: &VerifierState) -> usize {
    if let Some(at) = sl.cur {
        return at;
    }
    let (key, starts) = callchain(env, st, st.curframe());
    let at = instance(env, sl, key, starts);
    sl.cur = Some(at);
    at
}

/// The liveness bit of stack slot `spi` (`fp-8` is bit 0; none past a frame's 64 slots).
pub fn slot_bit(spi: usize) -> u64 {
    if spi < 64 { 1 << spi } else { 0 }
}

/// Whether the walk records accesses: not when the liveness was computed before it
/// ([`crate::stack_liveness_static`]).
fn recording(env: &Env<'_>) -> bool {
    env.stack_liveness_static.is_none()
}

/// Before an instruction is checked: its writes are gathered from nothing
/// (`bpf_reset_stack_write_marks`).
pub fn begin_insn(env: &mut Env<'_>, st: &VerifierState, pc: usize) {
    if !recording(env) {
        return;
    }
    with(env, |env, sl| {
        ensure_cur(env, sl, st);
        sl.write_insn = pc;
        sl.write_acc = [0; MAX_CALL_FRAMES];
    });
}

/// The instruction being checked may read slots `mask` of frame `frame` (`bpf_mark_stack_read`).
pub fn mark_read(env: &mut Env<'_>, st: &VerifierState, frame: usize, mask: u64) {
    if crate::read_marks::enabled(env) {
        crate::read_marks::slots_read(env, st, frame, mask);
    }
    if !recording(env) {
        return;
    }
    let pc = env.insn_idx;
    with(env, |env, sl| {
        let at = ensure_cur(env, sl, st);
        add_read(&mut sl.instances[at], frame, pc, mask);
    });
}

fn add_read(inst: &mut Instance, frame: usize, pc: usize, mask: u64) {
    if frame >= inst.frames.len() {
        return;
    }
    let Some(m) = inst.masks_mut(frame, pc) else {
        return;
    };
    let read = m.may_read | mask;
    if read != m.may_read && (read | m.live_before) != m.live_before {
        inst.updated = true;
    }
    if let Some(m) = inst.masks_mut(frame, pc) {
        m.may_read = read;
    }
}

/// The instruction being checked writes all 8 bytes of slots `mask` of frame `frame`
/// (`bpf_mark_stack_write`).
pub fn mark_write(env: &mut Env<'_>, st: &mut VerifierState, frame: usize, mask: u64) {
    if crate::read_marks::enabled(env) {
        crate::read_marks::slots_written(st, frame, mask);
    }
    if frame < MAX_CALL_FRAMES {
        env.stack_liveness.write_acc[frame] |= mask;
    }
}

/// The walk left the chain it was in (a call into a function): the next mark looks it up
/// again (`bpf_reset_live_stack_callchain`).
pub fn leave_callchain(env: &mut Env<'_>) {
    env.stack_liveness.cur = None;
}

/// After an instruction was checked: its writes join what earlier visits wrote
/// (`bpf_commit_stack_write_marks`); skipped when the instruction changed the chain.
pub fn commit_insn(env: &mut Env<'_>) {
    if !recording(env) {
        return;
    }
    with(env, |_, sl| {
        let Some(at) = sl.cur else { return };
        let (pc, acc) = (sl.write_insn, sl.write_acc);
        commit_writes(&mut sl.instances[at], pc, &acc);
    });
}

fn commit_writes(inst: &mut Instance, pc: usize, acc: &[u64; MAX_CALL_FRAMES]) {
    let Some(at) = pc.checked_sub(inst.start()).filter(|at| *at < inst.len) else {
        return;
    };
    let seen = inst.must_write_seen[at];
    for (frame, &written) in acc.iter().enumerate().take(inst.frames.len()) {
        if written == 0 && !seen {
            continue;
        }
        let Some(m) = inst.masks_mut(frame, pc) else {
            continue;
        };
        let old = m.must_write;
        let new = if seen { written & old } else { written };
        m.must_write = new;
        if old != new {
            inst.updated = true;
        }
        if old & !new != 0 {
            inst.must_write_dropped = true;
        }
    }
    inst.must_write_seen[at] = true;
}

/// Brings the live slots of every chain of `st` up to date, the innermost first, so that
/// what a callee reads reaches its caller (`bpf_update_live_stack`). Called when a path ends
/// and when a function returns.
pub fn update(env: &mut Env<'_>, st: &VerifierState) {
    if !recording(env) {
        return;
    }
    with(env, |env, sl| {
        sl.cur = None;
        for frame in (0..=st.curframe()).rev() {
            let (key, starts) = callchain(env, st, frame);
            let at = instance(env, sl, key, starts);
            if sl.instances[at].updated {
                update_instance(env, sl, at);
                let inst = &mut sl.instances[at];
                inst.updated = false;
                inst.must_write_dropped = false;
            }
        }
    });
}

/// The function's instructions in the order the kernel's `compute_postorder` lists them: a
/// depth-first walk from the first instruction that pushes every undiscovered successor at
/// once (so the jump target is explored before the fall-through), listing an instruction
/// when it is on top again after its successors.
pub(crate) fn postorder(env: &Env<'_>, start: usize, end: usize) -> Vec<usize> {
    let mut order = Vec::new();
    if start >= end {
        return order;
    }
    let (mut discovered, mut explored) = (vec![false; end - start], vec![false; end - start]);
    let mut stack = vec![start];
    discovered[0] = true;
    while let Some(&top) = stack.last() {
        if explored[top - start] {
            order.push(top);
            stack.pop();
            continue;
        }
        if let Some(insn) = env.insn(top) {
            for s in crate::scc::successors(env, top, insn) {
                if (start..end).contains(&s) && !discovered[s - start] {
                    discovered[s - start] = true;
                    stack.push(s);
                }
            }
        }
        explored[top - start] = true;
    }
    order
}

/// The fixed point of `live_before` and `must_write_acc` over one instance
/// (`update_instance`), then its marks on its caller's call instruction.
fn update_instance(env: &mut Env<'_>, sl: &mut StackLiveness, at: usize) {
    let start = sl.instances[at].start();
    let len = sl.instances[at].len;
    let order = sl
        .postorder
        .entry(start)
        .or_insert_with(|| postorder(env, start, start + len))
        .clone();
    let inst = &mut sl.instances[at];
    if inst.must_write_dropped {
        for masks in inst.frames.iter_mut().flatten() {
            for m in masks.iter_mut() {
                m.must_write_acc = 0;
            }
        }
    }
    let mut rounds = 0;
    loop {
        rounds += 1;
        let mut changed = false;
        for frame in 0..inst.frames.len() {
            if inst.frames[frame].is_none() {
                continue;
            }
            for &pc in &order {
                changed |= update_insn(env, inst, frame, pc);
            }
        }
        if !changed {
            break;
        }
    }
    if prints_trace(env) {
        let text = format!(
            "{} live stack update done in {rounds} iterations\n",
            inst.chain_text()
        );
        env.log.verbose(&text);
    }
    if inst.depth() > 0 {
        propagate_to_caller(env, sl, at);
    }
}

/// One step of the fixed point at `pc` (`update_insn`); true when it changed something.
fn update_insn(env: &mut Env<'_>, inst: &mut Instance, frame: usize, pc: usize) -> bool {
    let Some(insn) = env.insn(pc) else {
        return false;
    };
    let succ = crate::scc::successors(env, pc, insn);
    if succ.is_empty() {
        return false;
    }
    let mut after = 0u64;
    let mut written_after = u64::MAX;
    for s in succ {
        let m = inst.masks(frame, s).copied().unwrap_or_default();
        after |= m.live_before;
        written_after &= m.must_write_acc;
    }
    let Some(m) = inst.masks(frame, pc).copied() else {
        return false;
    };
    let before = (after & !m.must_write) | m.may_read;
    let written = written_after | m.must_write;
    let changed = before != m.live_before || written != m.must_write_acc;
    if prints_trace(env)
        && (m.may_read != 0 || m.must_write != 0 || pc == inst.start() || env.aux[pc].prune_point)
    {
        log_change(env, inst, "live", frame, pc, m.live_before, before);
        log_change(env, inst, "written", frame, pc, m.must_write_acc, written);
    }
    if let Some(m) = inst.masks_mut(frame, pc) {
        m.live_before = before;
        m.must_write_acc = written;
    }
    changed
}

/// Whether the level-2 log shows the analysis (6.18 on).
fn prints_trace(env: &Env<'_>) -> bool {
    env.log.level2() && crate::behaviour::prints_stack_liveness_trace(env.input.kernel.version())
}

/// `(chain) frame F insn N +what SLOTS -what SLOTS` for the bits that changed.
fn log_change(
    env: &mut Env<'_>,
    inst: &Instance,
    what: &str,
    frame: usize,
    pc: usize,
    old: u64,
    new: u64,
) {
    let changed = old ^ new;
    if changed == 0 {
        return;
    }
    let mut line = format!("{} frame {frame} insn {pc} ", inst.chain_text());
    let (ones, zeros) = (new & changed, !new & changed);
    if ones != 0 {
        line += &format!("+{what} {} ", slots_text(ones));
    }
    if zeros != 0 {
        line += &format!("-{what} {}", slots_text(zeros));
    }
    line.push('\n');
    env.log.verbose(&line);
}

/// `bpf_fmt_stack_mask`: each slot by its offset, `-8,-16`.
fn slots_text(mask: u64) -> String {
    (0..64)
        .filter(|i| mask & (1 << i) != 0)
        .map(|i| (-(i + 1) * 8).to_string())
        .collect::<Vec<_>>()
        .join(",")
}

/// What the callee reads of its callers' frames before writing, and what it surely writes,
/// become marks of the call instruction in the caller's chain (`propagate_to_outer_instance`).
fn propagate_to_caller(env: &Env<'_>, sl: &mut StackLiveness, at: usize) {
    let inst = &sl.instances[at];
    let depth = inst.depth();
    let callsite = inst.callsites[depth - 1] as usize;
    let entry = inst.start();
    let mut outer_key: Vec<u32> = inst.callsites[..depth].to_vec();
    let outer_starts: Vec<u32> = inst.starts[..depth].to_vec();
    outer_key[depth - 1] = outer_starts[depth - 1];
    let marks: Vec<(usize, Masks)> = (0..depth)
        .filter_map(|frame| inst.masks(frame, entry).map(|m| (frame, *m)))
        .collect();
    let outer = instance(env, sl, outer_key, outer_starts);
    let outer = &mut sl.instances[outer];
    let mut acc = [0u64; MAX_CALL_FRAMES];
    for (frame, m) in marks {
        acc[frame] |= m.must_write_acc;
        add_read(outer, frame, callsite, m.live_before);
    }
    commit_writes(outer, callsite, &acc);
}

/// Whether slot `spi` of frame `frameno` of the checkpoint `st` may be read later
/// (`bpf_stack_slot_alive`): before the checkpoint's instruction in its own chain, or after
/// the call of each caller frame from `frameno` on (before it, when it calls a callback,
/// which may run again).
fn slot_alive(
    env: &Env<'_>,
    sl: &StackLiveness,
    st: &VerifierState,
    frameno: usize,
    spi: usize,
) -> bool {
    let cur = st.curframe();
    let bit = 1u64 << spi;
    let live_at = |frame_of_chain: usize, pc: usize| {
        let (key, _) = callchain(env, st, frame_of_chain);
        sl.index
            .get(&key)
            .and_then(|&at| sl.instances[at].masks(frameno, pc))
            .is_some_and(|m| m.live_before & bit != 0)
    };
    if live_at(cur, st.insn_idx) {
        return true;
    }
    (frameno..cur).any(|i| {
        let callsite = st.frames[i + 1].callsite;
        let at = if env.aux[callsite].calls_callback {
            callsite
        } else {
            callsite + 1
        };
        live_at(i, at)
    })
}

/// `clean_verifier_state`: the registers and stack slots of the checkpoint no later
/// instruction reads are forgotten, so that states differing only there prune.
pub fn clean_state(env: &mut Env<'_>, checkpoint: usize) {
    let st = &env.explored[checkpoint].state;
    // Per frame: its live registers and its live slots, read before anything is forgotten.
    let live: Vec<(u16, u64)> = (0..st.frames.len())
        .map(|i| {
            let ip = crate::prune::frame_insn_idx(st, i);
            let regs = env.live_regs.get(ip).copied().unwrap_or(u16::MAX);
            let slots = (0..st.frames[i].allocated_stack() / SLOT_SIZE)
                .filter(|&spi| spi >= 64 || slot_alive(env, &env.stack_liveness, st, i, spi))
                .fold(0u64, |m, spi| m | slot_bit(spi));
            (regs, slots)
        })
        .collect();
    let st = &mut env.explored[checkpoint].state;
    for (frame, (regs, slots)) in st.frames.iter_mut().zip(live) {
        for r in (0..10).filter(|r| regs & (1 << r) == 0) {
            frame.regs[r] = RegState::not_init();
        }
        let allocated = frame.allocated_stack() / SLOT_SIZE;
        for spi in (0..allocated.min(64)).filter(|&spi| slots & slot_bit(spi) == 0) {
            let slot = &mut frame.stack[spi];
            slot.spilled_ptr = RegState::not_init();
            slot.slot_type = [SlotType::Invalid; SLOT_SIZE];
        }
    }
}
