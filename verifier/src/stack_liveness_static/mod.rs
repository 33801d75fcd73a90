//! Stack slot liveness as 7.2 computes it (`kernel/bpf/liveness.c` of 7.2): a static pass
//! before the walk, where 6.18 recorded what the walk itself read ([`crate::stack_liveness`]).
//!
//! First a forward dataflow per subprogram finds which registers and spilled values point
//! into which frame's stack, and at which offsets ([`arg_track`]). Then every load, store and
//! helper argument through such a pointer records the 4-byte halves of slots it may read or
//! surely writes, and a backward fixed point turns those into the halves live before each
//! instruction. A subprogram called with stack pointers is analysed again for each call site
//! and depth (a *function instance* keyed by (call site, depth)), so that what it reads of
//! its callers' stacks becomes a read at the call; one called without is analysed once, on its
//! own.
//!
//! During the walk nothing is recorded: at each prune point the current state forgets its
//! dead registers and dead slot halves (`clean_verifier_state` called from
//! `is_state_visited`), so every checkpoint is born clean. Not modelled: the level-2 log of the
//! analysis, `STACK_POISON` (dead halves become `STACK_INVALID`, which pruning treats alike),
//! stack arguments (`r11`) and kfuncs of module BTF (their accesses are taken as unknown).

mod access;
mod arg_track;

use crate::env::Env;
use crate::state::VerifierState;
use crate::state::reg::RegState;
use crate::state::stack::{SLOT_SIZE, SlotType};
use arg_track::{ArgTrack, REGS, SPILL_SLOTS};
use bpfemu_isa::{CallTarget, Insn, LdImm64Kind};
use std::collections::HashMap;

/// One bit per 4-byte half of each of the 64 stack slots: bit `2*spi` is the half nearer the
/// frame pointer (`slot_type[0..4]`), bit `2*spi+1` the other.
type Halves = u128;
const ALL_HALVES: Halves = u128::MAX;
/// The analysis gives up past this many subprogram analyses (7.2's complexity limit).
const MAX_ANALYSES: usize = 10_000;
/// The deepest call chain the analysis follows (`MAX_CALL_FRAMES` of 7.2).
const MAX_DEPTH: usize = 16;

/// Whether this verification uses 7.2's static stack liveness.
pub fn enabled(env: &Env<'_>) -> bool {
    crate::behaviour::computes_stack_liveness_before_the_walk(env.input.kernel.version())
}

/// The marks of one instruction for one frame (`struct per_frame_masks`).
#[derive(Clone, Copy, Debug, Default)]
struct Masks {
    may_read: Halves,
    must_write: Halves,
    live_before: Halves,
}

/// One function under one (call site, depth) (`struct func_instance`).
#[derive(Debug, Clone)]
struct Instance {
    start: usize,
    len: usize,
    depth: usize,
    /// Per frame of the chain (0 the outermost), per instruction of the function; made when
    /// the frame is first marked.
    frames: Vec<Option<Vec<Masks>>>,
    /// A fixed point ran over it: a later analysis records apart and merges.
    analysed: bool,
}

impl Instance {
    fn new(start: usize, len: usize, depth: usize) -> Instance {
        Instance {
            start,
            len,
            depth,
            frames: vec![None; depth + 1],
            analysed: false,
        }
    }

    fn masks(&self, frame: usize, pc: usize) -> Option<&Masks> {
        self.frames
            .get(frame)?
            .as_ref()?
            .get(pc.checked_sub(self.start)?)
    }

    fn mark(&mut self, frame: usize, pc: usize, read: Halves, write: Halves) {
        let len = self.len;
        let Some(at) = pc.checked_sub(self.start).filter(|at| *at < len) else {
            return;
        };
        let Some(masks) = self.frames.get_mut(frame) else {
            return;
        };
        let m = &mut masks.get_or_insert_with(|| vec![Masks::default(); len])[at];
        m.may_read |= read;
        m.must_write |= write;
    }

    fn mark_read(&mut self, frame: usize, pc: usize, read: Halves) {
        self.mark(frame, pc, read, 0);
    }

    /// Every frame of the chain may be read whole at `pc`.
    fn mark_all_frames_read(&mut self, pc: usize) {
        for frame in 0..=self.depth {
            self.mark_read(frame, pc, ALL_HALVES);
        }
    }

    fn is_live_before(&self, pc: usize, frame: usize, half: usize) -> bool {
        self.masks(frame, pc)
            .is_some_and(|m| m.live_before & (1 << half) != 0)
    }

    /// Joins a later analysis of the same instance: reads add up, only writes made by both
    /// stay sure (`merge_instances`).
    fn merge(&mut self, later: Instance) {
        for (mine, theirs) in self.frames.iter_mut().zip(later.frames) {
            match (mine.as_mut(), theirs) {
                (Some(m), None) => m.iter_mut().for_each(|x| x.must_write = 0),
                (None, Some(mut t)) => {
                    t.iter_mut().for_each(|x| x.must_write = 0);
                    *mine = Some(t);
                }
                (Some(m), Some(t)) => {
                    for (a, b) in m.iter_mut().zip(t) {
                        a.may_read |= b.may_read;
                        a.must_write &= b.must_write;
                    }
                }
                (None, None) => {}
            }
        }
    }
}

/// The result of the analysis: every instance by (call site or first instruction, depth).
#[derive(Debug, Default)]
pub struct StaticStackLiveness {
    instances: HashMap<(usize, usize), Instance>,
}

/// Runs the analysis over the whole program (`bpf_compute_subprog_arg_access`); an error is
/// the kernel's refusal when the program needs too many analyses.
pub fn compute(env: &Env<'_>) -> Result<StaticStackLiveness, String> {
    let postorder: Vec<Vec<usize>> = (0..env.subprogs.len())
        .map(|sp| {
            crate::stack_liveness::postorder(env, env.subprogs[sp].start, env.subprog_end(sp))
        })
        .collect();
    let mut analysis = Analysis {
        env,
        consts: &env.const_regs,
        used_maps: used_maps(env),
        postorder,
        instances: HashMap::new(),
        at_in: vec![None; env.subprogs.len()],
        callsite_stack: HashMap::new(),
        analyses: 0,
    };
    for sp in analysis.topo_order().into_iter().rev() {
        if analysis.at_in[sp].is_some() && !env.subprogs[sp].is_global {
            continue;
        }
        let key = (env.subprogs[sp].start, 0);
        analysis.instance_entry(key, sp, 0);
        analysis.analyse(None, key, sp, &mut Vec::new())?;
    }
    Ok(StaticStackLiveness {
        instances: analysis.instances,
    })
}

/// The maps the program's instructions name (`used_maps`), by index in the object.
fn used_maps(env: &Env<'_>) -> Vec<u32> {
    let mut maps: Vec<u32> = env
        .prog
        .iter()
        .filter_map(|(_, insn)| match *insn {
            Insn::LdImm64 {
                kind:
                    LdImm64Kind::MapFd
                    | LdImm64Kind::MapIdx
                    | LdImm64Kind::MapValue
                    | LdImm64Kind::MapIdxValue,
                imm,
                ..
            } => Some(imm as u32),
            _ => None,
        })
        .collect();
    maps.sort_unstable();
    maps.dedup();
    maps
}

struct Analysis<'e, 'a> {
    env: &'e Env<'a>,
    /// Each subprogram's instructions in postorder (`insn_postorder`).
    postorder: Vec<Vec<usize>>,
    /// The constants before each instruction (7.2's `const_reg_*` of each instruction).
    consts: &'e crate::const_fold::ConstRegs,
    used_maps: Vec<u32>,
    instances: HashMap<(usize, usize), Instance>,
    /// The register facts of each subprogram's latest analysis (`info[subprog].at_in`).
    at_in: Vec<Option<Vec<[ArgTrack; REGS]>>>,
    /// The spills at each call instruction in its subprogram's latest analysis
    /// (`callsite_at_stack`).
    callsite_stack: HashMap<usize, Box<[ArgTrack; SPILL_SLOTS]>>,
    analyses: usize,
}

impl Analysis<'_, '_> {
    /// Subprograms callees first (`sort_subprogs_topo`): a depth-first walk from each
    /// subprogram in order along its calls and function addresses.
    fn topo_order(&self) -> Vec<usize> {
        let n = self.env.subprogs.len();
        let mut color = vec![0u8; n];
        let mut order = Vec::with_capacity(n);
        for root in 0..n {
            if color[root] != 0 {
                continue;
            }
            color[root] = 1;
            let mut stack = vec![root];
            while let Some(&cur) = stack.last() {
                let next = self.postorder[cur]
                    .iter()
                    .filter_map(|&pc| self.callee_of(pc))
                    .find(|&callee| color[callee] == 0);
                match next {
                    Some(callee) => {
                        color[callee] = 1;
                        stack.push(callee);
                    }
                    None => {
                        color[cur] = 2;
                        order.push(cur);
                        stack.pop();
                    }
                }
            }
        }
        order
    }

    /// The subprogram a bpf-to-bpf call or a function address at `pc` names.
    fn callee_of(&self, pc: usize) -> Option<usize> {
        let off = match *self.env.insn(pc)? {
            Insn::Call(CallTarget::Local(off)) => off,
            Insn::LdImm64 {
                kind: LdImm64Kind::Func,
                imm,
                ..
            } => imm,
            _ => return None,
        };
        let target = usize::try_from(pc as i64 + 1 + off as i64).ok()?;
        self.env.subprog_at(target)
    }

    fn instance_entry(&mut self, key: (usize, usize), sp: usize, depth: usize) {
        let start = self.env.subprogs[sp].start;
        let len = self.env.subprog_end(sp) - start;
        self.instances
            .entry(key)
            .or_insert_with(|| Instance::new(start, len, depth));
    }

    /// Analyses subprogram `sp` as instance `key` with the frame pointers its arguments carry,
    /// then its callees that receive some (`analyze_subprog`). `callsites[f]` is the call
    /// instruction of frame `f` on the way here.
    fn analyse(
        &mut self,
        entry: Option<[ArgTrack; REGS]>,
        key: (usize, usize),
        sp: usize,
        callsites: &mut Vec<usize>,
    ) -> Result<(), String> {
        self.analyses += 1;
        if self.analyses > MAX_ANALYSES {
            return Err(format!(
                "liveness analysis exceeded complexity limit ({} calls)",
                self.analyses
            ));
        }
        let depth = key.1;
        let (start, len) = {
            let inst = &self.instances[&key];
            (inst.start, inst.len)
        };
        let mut work = Instance::new(start, len, depth);
        self.compute_args(entry, &mut work, sp, callsites);
        for pc in self.postorder[sp].clone() {
            self.analyse_call(&mut work, sp, pc, callsites)?;
        }
        let inst = self.instances.get_mut(&key).expect("made by the caller");
        if inst.analysed {
            inst.merge(work);
        } else {
            *inst = work;
        }
        update_instance(self.env, inst, &self.postorder[sp]);
        Ok(())
    }

    /// The callee of the call at `pc`, analysed with the stack pointers it receives; what it
    /// reads of the frames up to this one becomes a read at the call.
    fn analyse_call(
        &mut self,
        work: &mut Instance,
        sp: usize,
        pc: usize,
        callsites: &mut Vec<usize>,
    ) -> Result<(), String> {
        let depth = work.depth;
        let at = self.at_in[sp].as_ref().expect("computed")[pc - work.start];
        let mut args = [ArgTrack::None; REGS];
        let callee = match self.env.insn(pc) {
            Some(Insn::Call(CallTarget::Local(_))) => {
                let Some(callee) = self.callee_of(pc) else {
                    return Ok(());
                };
                args[1..=5].copy_from_slice(&at[1..=5]);
                callee
            }
            Some(Insn::Call(CallTarget::Helper(id))) if self.env.aux[pc].calls_callback => {
                let Some((cb_reg, from, to)) = access::callback_registers(*id) else {
                    return Ok(());
                };
                let crate::const_fold::ConstReg::Subprog(callee) = self.consts[pc][cb_reg] else {
                    // Not one known callback: a stack pointer passed may be read anywhere.
                    if at[from] != ArgTrack::None {
                        work.mark_all_frames_read(pc);
                    }
                    return Ok(());
                };
                args[to] = at[from];
                callee
            }
            _ => return Ok(()),
        };
        if !args[1..=5].iter().any(ArgTrack::is_fp) || depth + 1 >= MAX_DEPTH {
            return Ok(());
        }
        let key = (pc, depth + 1);
        self.instance_entry(key, callee, depth + 1);
        callsites.truncate(depth);
        callsites.push(pc);
        self.analyse(Some(args), key, callee, callsites)?;
        let callee_inst = &self.instances[&key];
        for frame in 0..callee_inst.depth {
            if let Some(m) = callee_inst.masks(frame, callee_inst.start) {
                work.mark_read(frame, pc, m.live_before);
            }
        }
        Ok(())
    }

    /// The forward dataflow of one subprogram under its entry arguments, then the accesses
    /// each instruction makes through what it found (`compute_subprog_args`).
    fn compute_args(
        &mut self,
        entry: Option<[ArgTrack; REGS]>,
        work: &mut Instance,
        sp: usize,
        callsites: &[usize],
    ) {
        let (start, len, depth) = (work.start, work.len, work.depth);
        let mut regs_in = vec![[ArgTrack::Unvisited; REGS]; len];
        let mut stack_in = vec![[ArgTrack::Unvisited; SPILL_SLOTS]; len];
        regs_in[0] = [ArgTrack::None; REGS];
        regs_in[0][10] = ArgTrack::single(depth, 0);
        if let Some(args) = entry {
            regs_in[0][1..=5].copy_from_slice(&args[1..=5]);
        }
        stack_in[0] = [ArgTrack::None; SPILL_SLOTS];
        let parents: Vec<Option<&[ArgTrack; SPILL_SLOTS]>> = callsites
            .iter()
            .take(depth)
            .map(|pc| self.callsite_stack.get(pc).map(|b| &**b))
            .collect();
        let order = &self.postorder[sp];
        loop {
            let mut changed = false;
            for &pc in order.iter().rev() {
                let i = pc - start;
                if !regs_in[i][0].is_visited() && !regs_in[i][1].is_visited() {
                    continue;
                }
                let Some(insn) = self.env.insn(pc) else {
                    continue;
                };
                let (mut regs, mut stack) = (regs_in[i], stack_in[i]);
                arg_track::transfer(insn, &mut regs, &mut stack, depth, &parents);
                for s in crate::scc::successors(self.env, pc, insn) {
                    if !(start..start + len).contains(&s) {
                        continue;
                    }
                    changed |= join_all(&mut regs_in[s - start], &regs);
                    changed |= join_all(&mut stack_in[s - start], &stack);
                }
            }
            if !changed {
                break;
            }
        }
        for &pc in order.iter().rev() {
            let i = pc - start;
            self.record_accesses(work, pc, &regs_in[i]);
            if self.is_call_with_callee(pc) {
                self.callsite_stack.insert(pc, Box::new(stack_in[i]));
            }
        }
        self.at_in[sp] = Some(regs_in);
    }

    fn is_call_with_callee(&self, pc: usize) -> bool {
        matches!(self.env.insn(pc), Some(Insn::Call(CallTarget::Local(_))))
            || self.env.aux[pc].calls_callback
    }

    /// The stack the instruction at `pc` may read or surely writes through the pointers
    /// `regs` holds before it (`record_load_store_access`, `record_call_access`).
    fn record_accesses(&self, work: &mut Instance, pc: usize, regs: &[ArgTrack; REGS]) {
        let Some(insn) = self.env.insn(pc) else {
            return;
        };
        if let Some((ptr, off, bytes)) = access::load_store(insn, regs) {
            let resolved = access::with_offset(ptr, off);
            record_through(work, pc, &resolved, bytes);
        }
        if let Insn::Call(target) = *insn {
            self.record_call(work, pc, target, regs);
        }
    }

    fn record_call(
        &self,
        work: &mut Instance,
        pc: usize,
        target: CallTarget,
        regs: &[ArgTrack; REGS],
    ) {
        if matches!(target, CallTarget::Local(_)) {
            return;
        }
        let params = access::param_count(self.env, target).unwrap_or(5).min(5);
        for arg in 0..params {
            let at = regs[arg + 1];
            if !at.is_fp() {
                continue;
            }
            let bytes = match target {
                CallTarget::Helper(id) => {
                    access::helper_bytes(self.env, id, arg, &self.consts[pc], &self.used_maps)
                }
                CallTarget::Kfunc { btf_id, off: 0 } => {
                    access::kfunc_bytes(self.env, btf_id, arg, &self.consts[pc])
                }
                _ => access::UNKNOWN,
            };
            record_through(work, pc, &at, bytes);
        }
    }
}

fn join_all<const N: usize>(target: &mut [ArgTrack; N], out: &[ArgTrack; N]) -> bool {
    let mut changed = false;
    for (t, o) in target.iter_mut().zip(out) {
        let joined = arg_track::join(*t, *o);
        if joined != *t {
            *t = joined;
            changed = true;
        }
    }
    changed
}

/// An access of `bytes` (positive: read, negative: write, [`access::UNKNOWN`]: a read of
/// unknown length) through a pointer `at`, at `pc` (`record_stack_access`,
/// `record_imprecise`).
fn record_through(work: &mut Instance, pc: usize, at: &ArgTrack, bytes: i64) {
    if bytes == 0 {
        return;
    }
    match *at {
        ArgTrack::Fp { frame, .. } if frame as usize <= work.depth => {
            let frame = frame as usize;
            let offs = at.offsets();
            if offs.is_empty() {
                if bytes > 0 || bytes == access::UNKNOWN {
                    work.mark_read(frame, pc, ALL_HALVES);
                }
                return;
            }
            // A write at one of several offsets is sure of none.
            if bytes != access::UNKNOWN && bytes < 0 && offs.len() != 1 {
                return;
            }
            for &off in offs {
                let (read, write) = access::halves(off as i64, bytes);
                work.mark(frame, pc, read, write);
            }
        }
        ArgTrack::Imprecise(mask) => {
            for frame in (0..=work.depth).filter(|f| mask & (1 << f) != 0) {
                work.mark_read(frame, pc, ALL_HALVES);
            }
        }
        _ => {}
    }
}

/// The backward fixed point of `live_before` over one instance (`update_instance`).
fn update_instance(env: &Env<'_>, inst: &mut Instance, postorder: &[usize]) {
    inst.analysed = true;
    let start = inst.start;
    loop {
        let mut changed = false;
        for masks in inst.frames.iter_mut().flatten() {
            for &pc in postorder {
                let Some(insn) = env.insn(pc) else { continue };
                let succ = crate::scc::successors(env, pc, insn);
                if succ.is_empty() {
                    continue;
                }
                let after = succ
                    .iter()
                    .filter_map(|s| masks.get(s.checked_sub(start)?))
                    .fold(0, |acc, m| acc | m.live_before);
                let m = &mut masks[pc - start];
                let before = (after & !m.must_write) | m.may_read;
                if before != m.live_before {
                    m.live_before = before;
                    changed = true;
                }
            }
        }
        if !changed {
            return;
        }
    }
}

/// The instances of each frame of a state, for the liveness questions about it
/// (`bpf_live_stack_query_init`).
struct Query<'s> {
    instances: Vec<Option<&'s Instance>>,
    /// `callsites[i]`: the instruction that called frame `i + 1`.
    callsites: Vec<usize>,
    insn_idx: usize,
}

impl<'s> Query<'s> {
    fn new(env: &Env<'_>, sl: &'s StaticStackLiveness, st: &VerifierState) -> Query<'s> {
        let instances = (0..st.frames.len())
            .map(|frame| lookup_instance(env, sl, st, frame))
            .collect();
        let callsites = st.frames[1..].iter().map(|f| f.callsite).collect();
        Query {
            instances,
            callsites,
            insn_idx: st.insn_idx,
        }
    }

    /// Whether half `half` of frame `frameno`'s stack may still be read: before the current
    /// instruction in the innermost frame, or after (before, for a callback, which may run
    /// again) the call of each outer frame (`bpf_stack_slot_alive`). Frames the instances do
    /// not cover are alive.
    fn slot_alive(&self, env: &Env<'_>, frameno: usize, half: usize) -> bool {
        let curframe = self.instances.len() - 1;
        let Some(cur) = self.instances[curframe] else {
            return true;
        };
        let rel = frameno as i64 + cur.depth as i64 - curframe as i64;
        if rel >= 0
            && rel as usize <= cur.depth
            && cur.is_live_before(self.insn_idx, rel as usize, half)
        {
            return true;
        }
        for i in frameno..curframe {
            let Some(inst) = self.instances[i] else {
                return true;
            };
            let rel = frameno as i64 + inst.depth as i64 - i as i64;
            if rel < 0 || rel as usize > inst.depth {
                return true;
            }
            let callsite = self.callsites[i];
            let at = if env.aux[callsite].calls_callback {
                callsite
            } else {
                callsite + 1
            };
            if inst.is_live_before(at, rel as usize, half) {
                return true;
            }
        }
        false
    }
}

/// The instance frame `frame` of `st` runs in: the one of its call site at its depth, else
/// at a lower depth, else the function's own (`lookup_instance`).
fn lookup_instance<'s>(
    env: &Env<'_>,
    sl: &'s StaticStackLiveness,
    st: &VerifierState,
    frame: usize,
) -> Option<&'s Instance> {
    let start = env.subprogs[st.frames[frame].subprogno as usize].start;
    let callsite = if frame > 0 {
        st.frames[frame].callsite
    } else {
        start
    };
    (0..=frame).rev().find_map(|depth| {
        let key = if depth > 0 { callsite } else { start };
        sl.instances.get(&(key, depth))
    })
}

/// The current state forgets its dead registers and dead slot halves (`clean_verifier_state`
/// at each prune point).
pub fn clean_current(env: &Env<'_>, sl: &StaticStackLiveness, st: &mut VerifierState) {
    let query = Query::new(env, sl, st);
    let live: Vec<(u16, Vec<(bool, bool)>)> = (0..st.frames.len())
        .map(|i| {
            let ip = crate::prune::frame_insn_idx(st, i);
            let regs = env.live_regs.get(ip).copied().unwrap_or(u16::MAX);
            let halves = (0..st.frames[i].allocated_stack() / SLOT_SIZE)
                .map(|spi| {
                    (
                        query.slot_alive(env, i, 2 * spi),
                        query.slot_alive(env, i, 2 * spi + 1),
                    )
                })
                .collect();
            (regs, halves)
        })
        .collect();
    for (frame, (regs, halves)) in st.frames.iter_mut().zip(live) {
        for r in (0..10).filter(|r| regs & (1 << r) == 0) {
            frame.regs[r] = RegState::not_init();
        }
        for (slot, (lo, hi)) in frame.stack.iter_mut().zip(halves) {
            clean_slot(slot, lo, hi);
        }
    }
}

/// One slot with its dead halves forgotten (`__clean_func_state`). Dynptrs, iterators and
/// irq flags stay whole (their checks need them); a spilled pointer whose far half is dead
/// stays (a partial fill must still be refused); a spilled scalar whose far half is dead
/// becomes plain bytes in the near half, unless it is a zero, which precision would need.
fn clean_slot(slot: &mut crate::state::stack::StackSlot, lo_live: bool, hi_live: bool) {
    if lo_live && hi_live {
        return;
    }
    let top = slot.slot_type[SLOT_SIZE - 1];
    if matches!(top, SlotType::Dynptr | SlotType::Iter | SlotType::IrqFlag) {
        return;
    }
    if !hi_live {
        if lo_live && top == SlotType::Spill {
            let spill = &slot.spilled_ptr;
            if !spill.is_scalar() || spill.is_const_scalar(0) {
                return;
            }
            for t in &mut slot.slot_type[..SLOT_SIZE / 2] {
                if *t == SlotType::Spill {
                    *t = SlotType::Misc;
                }
            }
        }
        slot.spilled_ptr = RegState::not_init();
    }
    let from = if lo_live { SLOT_SIZE / 2 } else { 0 };
    let to = if hi_live { SLOT_SIZE / 2 } else { SLOT_SIZE };
    slot.slot_type[from..to].fill(SlotType::Invalid);
}

#[cfg(test)]
mod tests {
    use super::access::halves;

    #[test]
    fn halves_of_reads_and_writes() {
        // fp-8, 8 bytes: both halves of slot 0.
        assert_eq!(halves(-8, 8), (0b11, 0));
        assert_eq!(halves(-8, -8), (0, 0b11));
        // fp-4, 4 bytes: the near half only.
        assert_eq!(halves(-4, -4), (0, 0b01));
        // fp-12, 8 bytes read: the far half of slot 0 and the near half of slot 1; a write
        // there covers neither slot whole but both halves.
        assert_eq!(halves(-12, 8), (0b110, 0));
        assert_eq!(halves(-12, -8), (0, 0b110));
        // A 2-byte write covers no half.
        assert_eq!(halves(-8, -2), (0, 0));
    }
}
