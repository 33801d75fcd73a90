//! State equivalence (`states_equal`, `regsafe`, `stacksafe`, `refsafe`): when a state reached
//! at a prune point is covered by one already explored, the path stops there.

use crate::env::Env;
use crate::state::reg::{BPF_ADD_CONST, RegState, RegType};
use crate::state::stack::{SLOT_SIZE, SlotType, StackSlot};
use crate::state::{FuncState, RefKind, VerifierState};

/// How strictly to compare (`enum exact_level`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exact {
    /// Pruning: the old state covers the new one.
    NotExact,
    /// Loop detection: the states are the same.
    Exact,
    /// Loop convergence (`may_goto`): ranges must be within the old ones even for scalars
    /// not marked precise.
    RangeWithin,
}

/// The id correspondence built during one comparison (`struct bpf_idmap`).
pub struct IdMap {
    map: Vec<(u32, u32)>,
    tmp_id_gen: u32,
    /// `behaviour::prunes_linked_scalars_against_independent_ones` for the kernel compared as.
    independent_old_scalars: bool,
}

impl IdMap {
    pub fn new(id_gen: u32, kernel: bpfemu_isa::KernelVersion) -> IdMap {
        IdMap {
            map: Vec::new(),
            tmp_id_gen: id_gen,
            independent_old_scalars:
                crate::behaviour::prunes_linked_scalars_against_independent_ones(kernel),
        }
    }

    /// `check_ids`.
    fn check(&mut self, old: u32, cur: u32) -> bool {
        if (old == 0) != (cur == 0) {
            return false;
        }
        if old == 0 {
            return true;
        }
        for &(o, c) in &self.map {
            if o == old {
                return c == cur;
            }
            if c == cur {
                return false;
            }
        }
        self.map.push((old, cur));
        true
    }

    /// `check_scalar_ids`.
    fn check_scalar(&mut self, old: u32, cur: u32) -> bool {
        if old == 0 {
            return true;
        }
        let cur = if cur != 0 {
            cur
        } else {
            self.tmp_id_gen += 1;
            self.tmp_id_gen
        };
        self.check(old, cur)
    }
}

fn range_within(old: &RegState, cur: &RegState) -> bool {
    old.umin_value <= cur.umin_value
        && old.umax_value >= cur.umax_value
        && old.smin_value <= cur.smin_value
        && old.smax_value >= cur.smax_value
        && old.u32_min_value <= cur.u32_min_value
        && old.u32_max_value >= cur.u32_max_value
        && old.s32_min_value <= cur.s32_min_value
        && old.s32_max_value >= cur.s32_max_value
}

/// Type, fixed offset and per-type data (the kernel's memcmp up to `var_off`).
fn same_head(a: &RegState, b: &RegState) -> bool {
    a.ty == b.ty
        && a.flags == b.flags
        && a.off == b.off
        && a.map == b.map
        && a.map_uid == b.map_uid
        && a.range == b.range
        && a.mem_size == b.mem_size
        && a.btf_id == b.btf_id
        && a.subprogno == b.subprogno
}

fn same_bounds(a: &RegState, b: &RegState) -> bool {
    a.var_off == b.var_off
        && a.smin_value == b.smin_value
        && a.smax_value == b.smax_value
        && a.umin_value == b.umin_value
        && a.umax_value == b.umax_value
        && a.s32_min_value == b.s32_min_value
        && a.s32_max_value == b.s32_max_value
        && a.u32_min_value == b.u32_min_value
        && a.u32_max_value == b.u32_max_value
}

/// `regs_exact`.
fn regs_exact(old: &RegState, cur: &RegState, idmap: &mut IdMap) -> bool {
    same_head(old, cur)
        && same_bounds(old, cur)
        && idmap.check(old.id, cur.id)
        && idmap.check(old.ref_obj_id, cur.ref_obj_id)
}

/// `regsafe`: whatever was safe with `old` is safe with `cur`.
pub fn regsafe(old: &RegState, cur: &RegState, idmap: &mut IdMap, exact: Exact) -> bool {
    if exact == Exact::Exact {
        return regs_exact(old, cur, idmap);
    }
    if old.ty == RegType::NotInit && (exact == Exact::NotExact || cur.ty == RegType::NotInit) {
        return true;
    }
    if old.ty != cur.ty || old.flags != cur.flags {
        return false;
    }
    match old.ty {
        RegType::Scalar => {
            if !old.precise && exact == Exact::NotExact {
                return true;
            }
            // An old register with no id was independent: whatever links the current one
            // only adds constraints (when the kernel knows it).
            let old_linked = old.id != 0 || !idmap.independent_old_scalars;
            if old_linked && (old.id & BPF_ADD_CONST) != (cur.id & BPF_ADD_CONST) {
                return false;
            }
            if old.id & BPF_ADD_CONST != 0 && old.off != cur.off {
                return false;
            }
            range_within(old, cur)
                && old.var_off.is_superset_of(cur.var_off)
                && idmap.check_scalar(old.id, cur.id)
        }
        RegType::MapKey | RegType::MapValue | RegType::Mem => {
            same_head(old, cur)
                && range_within(old, cur)
                && old.var_off.is_superset_of(cur.var_off)
                && idmap.check(old.id, cur.id)
                && idmap.check(old.ref_obj_id, cur.ref_obj_id)
        }
        RegType::Packet | RegType::PacketMeta => {
            if old.range < 0 || cur.range < 0 {
                if old.range != cur.range {
                    return false;
                }
            } else if old.range > cur.range {
                return false;
            }
            old.off == cur.off
                && idmap.check(old.id, cur.id)
                && range_within(old, cur)
                && old.var_off.is_superset_of(cur.var_off)
        }
        RegType::Stack => regs_exact(old, cur, idmap) && old.frameno == cur.frameno,
        RegType::Arena => true,
        _ => regs_exact(old, cur, idmap),
    }
}

fn all_misc(slot: &StackSlot) -> bool {
    slot.slot_type
        .iter()
        .all(|t| matches!(t, SlotType::Misc | SlotType::Invalid))
}

/// `scalar_reg_for_stack`: a 64-bit scalar spill, or all-unknown bytes as an unbounded scalar.
fn scalar_for_stack(slot: &StackSlot) -> Option<RegState> {
    if slot.slot_type[0] == SlotType::Spill && slot.spilled_ptr.ty == RegType::Scalar {
        return Some(slot.spilled_ptr);
    }
    all_misc(slot).then(RegState::unknown_scalar)
}

/// `stacksafe`.
fn stacksafe(
    old: &FuncState,
    cur: &FuncState,
    idmap: &mut IdMap,
    exact: Exact,
    scalars_as_registers: bool,
    skip_unread: bool,
) -> bool {
    let old_len = old.allocated_stack();
    let cur_len = cur.allocated_stack();
    let mut i = 0;
    while i < old_len {
        let spi = i / SLOT_SIZE;
        let idx = i % SLOT_SIZE;
        let ot = old.stack[spi].slot_type[idx];
        if exact == Exact::Exact && (i >= cur_len || ot != cur.stack[spi].slot_type[idx]) {
            return false;
        }
        if skip_unread && !crate::read_marks::slot_was_read(old, spi) {
            i = (spi + 1) * SLOT_SIZE;
            continue;
        }
        if ot == SlotType::Invalid || ot == SlotType::Misc {
            i += 1;
            continue;
        }
        if i >= cur_len {
            return false;
        }
        let (os, cs) = (&old.stack[spi], &cur.stack[spi]);
        if scalars_as_registers
            && let (Some(o), Some(c)) = (scalar_for_stack(os), scalar_for_stack(cs))
        {
            if !regsafe(&o, &c, idmap, exact) {
                return false;
            }
            i = (spi + 1) * SLOT_SIZE;
            continue;
        }
        let ct = cs.slot_type[idx];
        if ot == SlotType::Misc && ct == SlotType::Zero {
            i += 1;
            continue;
        }
        if ot != ct {
            return false;
        }
        if idx != SLOT_SIZE - 1 {
            i += 1;
            continue;
        }
        match os.slot_type[SLOT_SIZE - 1] {
            SlotType::Spill => {
                if !regsafe(&os.spilled_ptr, &cs.spilled_ptr, idmap, exact) {
                    return false;
                }
            }
            SlotType::Misc | SlotType::Zero | SlotType::Invalid => {}
            SlotType::Dynptr => {
                let (o, c) = (&os.spilled_ptr, &cs.spilled_ptr);
                if o.flags != c.flags || !idmap.check(o.ref_obj_id, c.ref_obj_id) {
                    return false;
                }
            }
            SlotType::IrqFlag => {
                if !idmap.check(os.spilled_ptr.ref_obj_id, cs.spilled_ptr.ref_obj_id) {
                    return false;
                }
            }
            // The depth is left out: it grows every iteration and would keep the loop from
            // converging.
            SlotType::Iter => {
                let (o, c) = (&os.spilled_ptr, &cs.spilled_ptr);
                if o.btf_id != c.btf_id
                    || o.iter_state != c.iter_state
                    || !idmap.check(o.ref_obj_id, c.ref_obj_id)
                {
                    return false;
                }
            }
        }
        i += 1;
    }
    true
}

/// The instruction whose live registers apply to frame `i` of `st`: the state's own for the
/// innermost frame, the call site for the callers (`frame_insn_idx`).
pub fn frame_insn_idx(st: &VerifierState, i: usize) -> usize {
    if i == st.curframe() {
        st.insn_idx
    } else {
        st.frames[i + 1].callsite
    }
}

/// `states_equal`.
pub fn states_equal(env: &Env<'_>, old: &VerifierState, cur: &VerifierState, exact: Exact) -> bool {
    if old.frames.len() != cur.frames.len() {
        return false;
    }
    let mut idmap = IdMap::new(env.id_gen, env.input.kernel.version());
    if old.speculative && !cur.speculative {
        return false;
    }
    if old.refs.len() != cur.refs.len()
        || old.active_locks != cur.active_locks
        || old.active_rcu_lock != cur.active_rcu_lock
        || old.active_preempt_locks != cur.active_preempt_locks
    {
        return false;
    }
    if !idmap.check(old.active_irq_id, cur.active_irq_id) {
        return false;
    }
    let kernel = env.input.kernel.version();
    let map_lock_ids = crate::behaviour::maps_lock_ids_in_states_equal(kernel);
    let scalars_as_registers = crate::behaviour::compares_stack_scalars_as_registers(kernel);
    let read_marks = crate::read_marks::enabled(env);
    for (o, c) in old.refs.iter().zip(&cur.refs) {
        let same_id = if o.kind == RefKind::Lock && !map_lock_ids {
            o.id == c.id
        } else {
            idmap.check(o.id, c.id)
        };
        if o.kind != c.kind || !same_id || o.ptr != c.ptr {
            return false;
        }
    }
    for i in 0..old.frames.len() {
        let (of, cf) = (&old.frames[i], &cur.frames[i]);
        if of.callsite != cf.callsite || of.callback_depth > cf.callback_depth {
            return false;
        }
        let live = if read_marks {
            // `regsafe`: what the checkpoint's paths never read is no matter, unless the
            // comparison is exact.
            if exact == Exact::NotExact {
                crate::read_marks::regs_read(old, i)
            } else {
                u16::MAX
            }
        } else {
            env.live_regs
                .get(frame_insn_idx(old, i))
                .copied()
                .unwrap_or(u16::MAX)
        };
        for r in 0..bpfemu_isa::Reg::COUNT {
            if live & (1 << r) != 0 && !regsafe(&of.regs[r], &cf.regs[r], &mut idmap, exact) {
                return false;
            }
        }
        // From 6.18 dead slots were cleaned from the checkpoint (`clean_live_states`); before,
        // the slots' read marks say which matter.
        let skip_unread = read_marks && exact == Exact::NotExact;
        if !stacksafe(of, cf, &mut idmap, exact, scalars_as_registers, skip_unread) {
            return false;
        }
    }
    true
}

/// `states_maybe_looping`: the innermost frames' registers are identical.
pub fn states_maybe_looping(old: &VerifierState, cur: &VerifierState) -> bool {
    if old.frames.len() != cur.frames.len() {
        return false;
    }
    let (of, cf) = (old.cur(), cur.cur());
    of.regs.iter().zip(&cf.regs).all(|(a, b)| {
        same_head(a, b)
            && same_bounds(a, b)
            && a.id == b.id
            && a.ref_obj_id == b.ref_obj_id
            && a.frameno == b.frameno
    })
}
