//! Precision backtracking (`mark_chain_precision`, `backtrack_insn`): scalars whose exact value
//! decided safety are marked precise back through the path, in the checkpoints the path
//! descends from, so that pruning compares them exactly there.

use crate::Reject;
use crate::env::Env;
use crate::state::VerifierState;
use crate::state::frame::{
    INSN_F_DST_REG_STACK, INSN_F_FRAMENO_MASK, INSN_F_SPI_MASK, INSN_F_SPI_SHIFT,
    INSN_F_SRC_REG_STACK, INSN_F_STACK_ACCESS, JmpHistoryEntry, LinkedRegs, MAX_CALL_FRAMES,
};
use crate::state::reg::RegType;
use bpfemu_isa::{AtomicOp, CallTarget, Insn, Reg, Source};

const ARGS: u16 = 0b11_1110;

/// What is still looked for (`struct backtrack_state`).
#[derive(Default)]
struct Backtrack {
    frame: usize,
    regs: [u16; MAX_CALL_FRAMES],
    stack: [u64; MAX_CALL_FRAMES],
}

impl Backtrack {
    /// The registers looked for in frame `fr`, as the kernel's log names them: `r0,r3`.
    fn regs_text(&self, fr: usize) -> String {
        (0..16)
            .filter(|r| self.regs[fr] & (1 << r) != 0)
            .map(|r| format!("r{r}"))
            .collect::<Vec<_>>()
            .join(",")
    }
    /// The stack slots looked for in frame `fr`: `-8,-16`.
    fn stack_text(&self, fr: usize) -> String {
        (0..64)
            .filter(|s| self.stack[fr] & (1 << s) != 0)
            .map(|s| (-(s + 1) * 8).to_string())
            .collect::<Vec<_>>()
            .join(",")
    }
    fn empty(&self) -> bool {
        self.regs.iter().all(|r| *r == 0) && self.stack.iter().all(|s| *s == 0)
    }
    fn set(&mut self, r: Reg) {
        self.regs[self.frame] |= 1 << r.index();
    }
    fn clear(&mut self, r: Reg) {
        self.regs[self.frame] &= !(1 << r.index());
    }
    fn is_set(&self, r: Reg) -> bool {
        self.regs[self.frame] & (1 << r.index()) != 0
    }
}

/// Why backtracking gave up: everything becomes precise.
struct NotSupported;

/// Marks the scalar in `regno` precise, and everything its value came from.
pub fn mark_chain_precision(
    env: &mut Env<'_>,
    state: &mut VerifierState,
    regno: Reg,
) -> Result<(), Reject> {
    if state.reg(regno).ty != RegType::Scalar {
        return Ok(());
    }
    let mut bt = Backtrack {
        frame: state.curframe(),
        ..Backtrack::default()
    };
    bt.set(regno);
    run(env, state, bt);
    Ok(())
}

/// Marks the scalar spilled in stack slot `spi` of frame `frameno` precise, and everything its
/// value came from (`bt_set_frame_slot` + `mark_chain_precision_batch`).
pub fn mark_stack_slot_precision(
    env: &mut Env<'_>,
    state: &mut VerifierState,
    frameno: usize,
    spi: usize,
) -> Result<(), Reject> {
    if spi >= 64 || frameno >= MAX_CALL_FRAMES {
        return Ok(());
    }
    let mut bt = Backtrack {
        frame: state.curframe(),
        ..Backtrack::default()
    };
    bt.stack[frameno] |= 1 << spi;
    run(env, state, bt);
    Ok(())
}

/// `propagate_precision`: after pruning against `old`, what `old` needed precise is needed on
/// the current path too. Returns whether a checkpoint got a new precision mark (`changed`).
pub fn propagate_precision(
    env: &mut Env<'_>,
    old: &VerifierState,
    state: &mut VerifierState,
) -> bool {
    let mut bt = Backtrack {
        frame: state.curframe(),
        ..Backtrack::default()
    };
    let read_marks = crate::read_marks::enabled(env);
    for (fi, frame) in old.frames.iter().enumerate().rev() {
        // Only what the checkpoint's paths read: its read marks before 6.15, the registers
        // live at its instruction after (its dead slots are cleaned already).
        let live = if read_marks {
            crate::read_marks::regs_read(old, fi)
        } else {
            env.live_regs
                .get(crate::prune::frame_insn_idx(old, fi))
                .copied()
                .unwrap_or(u16::MAX)
        };
        let mut named = Vec::new();
        for (r, reg) in frame.regs.iter().enumerate().take(10) {
            if reg.ty == RegType::Scalar && reg.precise && live & (1 << r) != 0 {
                bt.regs[fi] |= 1 << r;
                named.push(format!("r{r}"));
            }
        }
        for (spi, slot) in frame.stack.iter().enumerate().take(64) {
            if slot.is_spilled_reg()
                && slot.spilled_ptr.ty == RegType::Scalar
                && slot.spilled_ptr.precise
                && (!read_marks || crate::read_marks::slot_was_read(frame, spi))
            {
                bt.stack[fi] |= 1 << spi;
                named.push(format!("fp{}", -(spi as i64 + 1) * 8));
            }
        }
        if env.log.level2() && !named.is_empty() {
            env.verbose(&format!("frame {fi}: propagating {}\n", named.join(",")));
        }
    }
    if bt.empty() {
        return false;
    }
    run(env, state, bt)
}

/// Backtracks what `bt` looks for from the current instruction of `state` through its
/// checkpoints; returns whether a checkpoint got a new precision mark.
fn run(env: &mut Env<'_>, state: &mut VerifierState, mut bt: Backtrack) -> bool {
    let mut changed = false;
    let mut last_idx = state.insn_idx as i64;
    let mut first_idx = state.first_insn_idx;
    let mut subseq_idx: i64 = -1;
    let mut skip_first = true;
    let mut history: Vec<JmpHistoryEntry> = state.jmp_history.clone();
    let mut parent = state.parent;
    // The state the walk is in: the live one, then the checkpoints it descends from.
    let mut at: Option<usize> = None;
    loop {
        if env.log.level2() {
            env.verbose(&format!(
                "mark_precise: frame{}: last_idx {last_idx} first_idx {first_idx} subseq_idx {subseq_idx} \n",
                bt.frame
            ));
        }
        if last_idx < 0 {
            // The entry of a global function: only its arguments may be looked for, and
            // they become precise there.
            let st = match at {
                None => &mut *state,
                Some(p) => &mut env.explored[p].state,
            };
            if st.frames.len() == 1
                && st.frames[0].subprogno > 0
                && bt.stack[0] == 0
                && bt.regs[0] & !ARGS == 0
            {
                for r in 1..=5 {
                    let reg = &mut st.frames[0].regs[r];
                    if bt.regs[0] & (1 << r) != 0 && reg.ty == RegType::Scalar {
                        reg.precise = true;
                    }
                }
                return changed;
            }
            mark_all_scalars_precise(env, state);
            return changed;
        }
        if backtrack_state(
            env,
            &mut bt,
            &mut history,
            last_idx,
            first_idx,
            &mut subseq_idx,
            &mut skip_first,
        )
        .is_err()
        {
            give_up(env, state, at);
            return changed;
        }
        if bt.empty() {
            return changed;
        }
        let Some(p) = parent else {
            break;
        };
        changed |= mark_in_checkpoint(env, p, &mut bt);
        at = Some(p);
        if bt.empty() {
            return changed;
        }
        let st = &env.explored[p].state;
        subseq_idx = first_idx as i64;
        last_idx = st.last_insn_idx as i64;
        first_idx = st.first_insn_idx;
        history = st.jmp_history.clone();
        parent = st.parent;
    }
    if !bt.empty() {
        mark_all_scalars_precise(env, state);
    }
    changed
}

/// Walks one state's stretch backwards from `last_idx` to `first_idx`.
#[allow(clippy::too_many_arguments)]
fn backtrack_state(
    env: &mut Env<'_>,
    bt: &mut Backtrack,
    history: &mut Vec<JmpHistoryEntry>,
    last_idx: i64,
    first_idx: usize,
    subseq_idx: &mut i64,
    skip_first: &mut bool,
) -> Result<(), NotSupported> {
    if last_idx < 0 {
        return Ok(());
    }
    let mut i = last_idx as usize;
    loop {
        if *skip_first {
            *skip_first = false;
        } else {
            let hist = history.last().filter(|h| h.idx == i).copied();
            if env.log.level2() {
                log_before(env, bt, i);
            }
            backtrack_insn(env, i, *subseq_idx, hist, bt)?;
        }
        if bt.empty() {
            return Ok(());
        }
        *subseq_idx = i as i64;
        match prev_insn_idx(first_idx, history, i) {
            Some(p) => i = p,
            None => return Ok(()),
        }
    }
}

/// `get_prev_insn_idx`.
fn prev_insn_idx(first_idx: usize, history: &mut Vec<JmpHistoryEntry>, i: usize) -> Option<usize> {
    let cnt = history.len();
    if i == first_idx {
        if cnt == 0 {
            return None;
        }
        if cnt == 1 && history[0].idx == i {
            return None;
        }
    }
    if let Some(h) = history.last().copied()
        && h.idx == i
    {
        history.pop();
        return Some(h.prev_idx);
    }
    i.checked_sub(1)
}

/// `mark_precise: frame0: regs=r2 stack= before 3: (b7) r2 = 0`.
fn log_before(env: &mut Env<'_>, bt: &Backtrack, idx: usize) {
    let Some(insn) = env.insn(idx).copied() else {
        return;
    };
    let raw = env.prog.raw()[idx];
    let line = crate::explore::kfunc_named(
        env.input.kernel,
        &raw,
        bpfemu_isa::disasm::log_line(idx, raw.code, &insn),
    );
    let mut text = format!(
        "mark_precise: frame{}: regs={} stack={} before {line}",
        bt.frame,
        bt.regs_text(bt.frame),
        bt.stack_text(bt.frame)
    );
    if !text.ends_with('\n') {
        text.push('\n');
    }
    env.verbose(&text);
}

/// Marks what is still looked for in checkpoint `p`; what is already precise there, or not a
/// scalar, needs no further walk.
fn mark_in_checkpoint(env: &mut Env<'_>, p: usize, bt: &mut Backtrack) -> bool {
    let mut changed = false;
    let frames = bt.frame.min(env.explored[p].state.frames.len() - 1);
    for fr in (0..=frames).rev() {
        changed |= mark_frame_in_checkpoint(env, p, fr, bt);
        if env.log.level2() {
            let st = &env.explored[p].state;
            let text = crate::log::frame_state_text(env, st, &st.frames[fr], true);
            let line = format!(
                "mark_precise: frame{fr}: parent state regs={} stack={}: {text}\n",
                bt.regs_text(fr),
                bt.stack_text(fr)
            );
            env.verbose(&line);
        }
    }
    changed
}

/// [`mark_in_checkpoint`] for one frame.
fn mark_frame_in_checkpoint(env: &mut Env<'_>, p: usize, fr: usize, bt: &mut Backtrack) -> bool {
    let mut changed = false;
    let frame = &mut env.explored[p].state.frames[fr];
    for r in 0..16 {
        if bt.regs[fr] & (1 << r) == 0 {
            continue;
        }
        let reg = &mut frame.regs[r];
        if reg.ty != RegType::Scalar || reg.precise {
            bt.regs[fr] &= !(1 << r);
        } else {
            reg.precise = true;
            changed = true;
        }
    }
    for spi in 0..64 {
        if bt.stack[fr] & (1 << spi) == 0 {
            continue;
        }
        let Some(slot) = frame.stack.get_mut(spi) else {
            bt.stack[fr] &= !(1 << spi);
            continue;
        };
        if !slot.is_spilled_scalar() || slot.spilled_ptr.precise {
            bt.stack[fr] &= !(1 << spi);
        } else {
            slot.spilled_ptr.precise = true;
            changed = true;
        }
    }
    changed
}

/// `mark_all_scalars_precise`: the fallback when backtracking cannot follow the value.
pub(crate) fn mark_all_scalars_precise(env: &mut Env<'_>, state: &VerifierState) {
    give_up(env, state, None);
}

/// The fallback of a backtracking walk that failed in checkpoint `at` (None: in the live
/// state). From 6.4 every checkpoint above the live state is marked; before, those above the
/// one the walk had reached, so that checkpoint keeps the marks it had (`mark_all_scalars_precise`
/// called with the walk's `st`).
fn give_up(env: &mut Env<'_>, state: &VerifierState, at: Option<usize>) {
    if env.log.level2() {
        env.verbose(&format!(
            "mark_precise: frame{}: falling back to forcing all scalars precise\n",
            state.curframe()
        ));
    }
    let kernel = env.input.kernel.version();
    let from = match at {
        Some(p) if !crate::behaviour::backtracks_precision_through_calls(kernel) => p,
        _ => return mark_all_scalars_precise_above(env, state.parent),
    };
    let above = env.explored[from].state.parent;
    mark_all_scalars_precise_above(env, above);
}

/// Every scalar, in registers and spilled, of checkpoint `parent` and those it descends from.
fn mark_all_scalars_precise_above(env: &mut Env<'_>, mut parent: Option<usize>) {
    while let Some(p) = parent {
        let st = &mut env.explored[p].state;
        for frame in st.frames.iter_mut() {
            for reg in frame.regs.iter_mut() {
                if reg.ty == RegType::Scalar {
                    reg.precise = true;
                }
            }
            for slot in frame.stack.iter_mut() {
                if slot.is_spilled_scalar() {
                    slot.spilled_ptr.precise = true;
                }
            }
        }
        parent = st.parent;
    }
}

/// `bt_sync_linked_regs`: when one scalar of the set a jump refined together is looked for,
/// all of them are.
fn bt_sync_linked_regs(bt: &mut Backtrack, hist: Option<JmpHistoryEntry>) {
    let Some(h) = hist.filter(|h| h.linked_regs != 0) else {
        return;
    };
    let set = LinkedRegs::unpack(h.linked_regs);
    let tracked = |bt: &Backtrack, e: &crate::state::frame::LinkedReg| {
        if e.is_reg {
            bt.regs[e.frameno] & (1 << e.index) != 0
        } else {
            bt.stack[e.frameno] & (1 << e.index) != 0
        }
    };
    if !set.entries.iter().any(|e| tracked(bt, e)) {
        return;
    }
    for e in &set.entries {
        if e.is_reg {
            bt.regs[e.frameno] |= 1 << e.index;
        } else {
            bt.stack[e.frameno] |= 1 << e.index;
        }
    }
}

fn stack_slot(flags: u32) -> (usize, usize) {
    (
        (flags & INSN_F_FRAMENO_MASK) as usize,
        ((flags >> INSN_F_SPI_SHIFT) & INSN_F_SPI_MASK) as usize,
    )
}

/// `backtrack_insn`: what instruction `idx` says about where the tracked values came from.
fn backtrack_insn(
    env: &Env<'_>,
    idx: usize,
    subseq_idx: i64,
    hist: Option<JmpHistoryEntry>,
    bt: &mut Backtrack,
) -> Result<(), NotSupported> {
    let Some(insn) = env.insn(idx).copied() else {
        return Ok(());
    };
    let flags = hist.map_or(0, |h| h.flags);
    // Scalars a jump refined together are precise together.
    bt_sync_linked_regs(bt, hist);
    let through_calls =
        crate::behaviour::backtracks_precision_through_calls(env.input.kernel.version());
    match insn {
        // Before 6.4 backtracking stops at any call of a subprogram or of a helper that calls
        // one, and at any exit, and every scalar above becomes precise.
        Insn::Call(CallTarget::Local(_)) | Insn::Exit if !through_calls => {
            return Err(NotSupported);
        }
        Insn::Call(_) if env.aux[idx].calls_callback && !through_calls => {
            return Err(NotSupported);
        }
        Insn::Alu { op, dst, src, .. } => {
            if !bt.is_set(dst) {
                return Ok(());
            }
            if op == bpfemu_isa::AluOp::Mov {
                bt.clear(dst);
                if let Source::Reg(s) = src
                    && s != Reg::R10
                {
                    bt.set(s);
                }
            } else if let Source::Reg(s) = src
                && s != Reg::R10
            {
                bt.set(s);
            }
        }
        Insn::MovSx { dst, src, .. } => {
            if bt.is_set(dst) {
                bt.clear(dst);
                if src != Reg::R10 {
                    bt.set(src);
                }
            }
        }
        Insn::AddrSpaceCast { dst, .. } => {
            if bt.is_set(dst) {
                bt.clear(dst);
            }
        }
        Insn::Neg { .. } | Insn::Endian { .. } => {}
        Insn::Load { dst, .. }
        | Insn::Atomic {
            op: AtomicOp::LoadAcquire,
            dst,
            ..
        } => {
            if !bt.is_set(dst) {
                return Ok(());
            }
            bt.clear(dst);
            if flags & INSN_F_STACK_ACCESS != 0 {
                let (fr, spi) = stack_slot(flags);
                bt.stack[fr] |= 1 << spi;
            }
        }
        Insn::Store { dst, .. } | Insn::StoreReg { dst, .. } | Insn::Atomic { dst, .. } => {
            if bt.is_set(dst) {
                return Err(NotSupported);
            }
            if flags & INSN_F_STACK_ACCESS == 0 {
                return Ok(());
            }
            let (fr, spi) = stack_slot(flags);
            if bt.stack[fr] & (1 << spi) == 0 {
                return Ok(());
            }
            bt.stack[fr] &= !(1 << spi);
            if let Insn::StoreReg { src, .. } = insn {
                bt.set(src);
            }
        }
        Insn::Call(CallTarget::Local(rel)) => {
            let target = (idx as i64 + 1 + rel as i64) as usize;
            let global = env
                .subprog_at(target)
                .is_some_and(|s| env.subprogs[s].is_global);
            if global {
                bt.clear(Reg::R0);
                return Ok(());
            }
            if bt.regs[bt.frame] & !ARGS != 0 || bt.stack[bt.frame] != 0 {
                return Err(NotSupported);
            }
            if bt.frame == 0 {
                return Err(NotSupported);
            }
            let args = bt.regs[bt.frame] & ARGS;
            bt.regs[bt.frame] = 0;
            bt.frame -= 1;
            bt.regs[bt.frame] |= args;
        }
        Insn::Call(_) if env.aux[idx].calls_callback && idx as i64 != subseq_idx - 1 => {
            if bt.regs[bt.frame] & !ARGS != 0 || bt.stack[bt.frame] != 0 {
                return Err(NotSupported);
            }
            if bt.frame == 0 {
                return Err(NotSupported);
            }
            bt.regs[bt.frame] = 0;
            bt.frame -= 1;
        }
        Insn::Call(target) => {
            if matches!(target, CallTarget::Kfunc { btf_id: 0, .. }) {
                return Err(NotSupported);
            }
            bt.clear(Reg::R0);
            if bt.regs[bt.frame] & ARGS != 0 {
                return Err(NotSupported);
            }
            // A tail call the walk took as a return to the caller (the next instruction is
            // not the one after it): backtracking goes on in the callee's frame, as past an
            // exit.
            let tail_call_exit = matches!(target, CallTarget::Helper(id) if id == crate::call::proto::TAIL_CALL)
                && subseq_idx - idx as i64 != 1;
            if tail_call_exit {
                if bt.frame + 1 >= MAX_CALL_FRAMES {
                    return Err(NotSupported);
                }
                bt.frame += 1;
            }
        }
        Insn::Exit => {
            if subseq_idx >= 0
                && env
                    .aux
                    .get(subseq_idx as usize)
                    .is_some_and(|a| a.calls_callback)
            {
                bt.regs[bt.frame] &= !ARGS;
            }
            if bt.regs[bt.frame] & ARGS != 0 {
                return Err(NotSupported);
            }
            let r0_precise = subseq_idx >= 1
                && matches!(
                    env.insn(subseq_idx as usize - 1),
                    Some(Insn::Call(CallTarget::Local(_)))
                )
                && bt.is_set(Reg::R0);
            bt.clear(Reg::R0);
            if bt.frame + 1 >= MAX_CALL_FRAMES {
                return Err(NotSupported);
            }
            bt.frame += 1;
            if r0_precise {
                bt.set(Reg::R0);
            }
        }
        Insn::Jump { dst, src, .. } => {
            if let Source::Reg(s) = src {
                if !bt.is_set(dst) && !bt.is_set(s) {
                    return Ok(());
                }
                if flags & INSN_F_SRC_REG_STACK == 0 {
                    bt.set(s);
                }
                if flags & INSN_F_DST_REG_STACK == 0 {
                    bt.set(dst);
                }
                bt_sync_linked_regs(bt, hist);
            }
        }
        Insn::LdImm64 { dst, .. } => {
            if bt.is_set(dst) {
                bt.clear(dst);
            }
        }
        Insn::LdAbs { .. } | Insn::LdInd { .. } => {
            if bt.is_set(Reg::R0) {
                return Err(NotSupported);
            }
        }
        Insn::Ja { .. } | Insn::MayGoto { .. } => {}
    }
    Ok(())
}
