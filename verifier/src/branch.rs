//! Conditional jumps (`check_cond_jmp_op`): branches decided by known bounds, refinement of both
//! edges, register-register comparisons, packet pointer comparisons that grow the proven
//! range, null checks that mark every copy with the same id.

use crate::Reject;
use crate::alu::{add_const, check_reg_read};
use crate::env::Env;
use crate::precision::mark_chain_precision;
use crate::state::frame::{LinkedReg, LinkedRegs};
use crate::state::reg::{
    AT_PKT_END, BEYOND_PKT_END, BPF_ADD_CONST, BPF_ADD_CONST32, MAX_PACKET_OFF, PTR_MAYBE_NULL,
    PTR_TRUSTED, PTR_UNTRUSTED, RegState, RegType,
};
use crate::state::width::{BoundWidth, Int, W32, W64};
use crate::state::{Tnum, VerifierState};
use bpfemu_isa::{JmpCond, Reg, Source, Width};

/// What a conditional jump leaves to explore.
pub enum Branch {
    /// Only the jump is possible.
    Taken,
    /// Only the fall-through is possible.
    NotTaken,
    /// Both: the current state continues with the fall-through; this state takes the jump.
    Both(Box<VerifierState>),
}

/// The opcode with the operands swapped (`flip_opcode`).
fn flip(c: JmpCond) -> JmpCond {
    match c {
        JmpCond::Gt => JmpCond::Lt,
        JmpCond::Lt => JmpCond::Gt,
        JmpCond::Ge => JmpCond::Le,
        JmpCond::Le => JmpCond::Ge,
        JmpCond::Sgt => JmpCond::Slt,
        JmpCond::Slt => JmpCond::Sgt,
        JmpCond::Sge => JmpCond::Sle,
        JmpCond::Sle => JmpCond::Sge,
        c => c,
    }
}

/// A condition and its negation (`rev_opcode`); `JSET`'s negation is "no bit set".
#[derive(Clone, Copy, PartialEq, Eq)]
enum Cond {
    Is(JmpCond),
    NotSet,
}

fn rev(c: JmpCond) -> Cond {
    Cond::Is(match c {
        JmpCond::Eq => JmpCond::Ne,
        JmpCond::Ne => JmpCond::Eq,
        JmpCond::Gt => JmpCond::Le,
        JmpCond::Le => JmpCond::Gt,
        JmpCond::Ge => JmpCond::Lt,
        JmpCond::Lt => JmpCond::Ge,
        JmpCond::Sgt => JmpCond::Sle,
        JmpCond::Sle => JmpCond::Sgt,
        JmpCond::Sge => JmpCond::Slt,
        JmpCond::Slt => JmpCond::Sge,
        JmpCond::Set => return Cond::NotSet,
    })
}

fn is_reg_const(r: &RegState, jmp32: bool) -> bool {
    r.ty == RegType::Scalar
        && if jmp32 {
            r.var_off.subreg().is_const()
        } else {
            r.var_off.is_const()
        }
}

fn const_value(r: &RegState, jmp32: bool) -> u64 {
    if jmp32 {
        r.var_off.subreg().value
    } else {
        r.var_off.value
    }
}

/// `reg_not_null`.
fn reg_not_null(r: &RegState) -> bool {
    if r.flags & PTR_MAYBE_NULL != 0 {
        return false;
    }
    match r.ty {
        RegType::MapValue
        | RegType::MapKey
        | RegType::ConstPtrToMap
        | RegType::Socket
        | RegType::SockCommon
        | RegType::TcpSock => true,
        // `is_trusted_reg`: a referenced pointer is trusted whatever its flags.
        RegType::BtfId => r.ref_obj_id != 0 || r.flags & PTR_TRUSTED != 0,
        RegType::Mem => r.flags & PTR_UNTRUSTED == 0,
        _ => false,
    }
}

/// `is_branch_taken`: 1 taken, 0 not taken, -1 unknown.
fn is_branch_taken(r1: &RegState, r2: &RegState, cond: Cond, jmp32: bool) -> i32 {
    let Cond::Is(c) = cond else {
        return match is_branch_taken(r1, r2, Cond::Is(JmpCond::Set), jmp32) {
            -1 => -1,
            v => 1 - v,
        };
    };
    if r1.is_pkt_pointer_any() && r2.is_pkt_pointer_any() && !jmp32 {
        return pkt_ptr_branch_taken(r1, r2, c);
    }
    if r1.is_pointer() || r2.is_pointer() {
        let (mut a, mut b, mut c) = (r1, r2, c);
        if !is_reg_const(b, jmp32) {
            c = flip(c);
            std::mem::swap(&mut a, &mut b);
        }
        if !is_reg_const(b, jmp32) || !reg_not_null(a) || const_value(b, jmp32) != 0 {
            return -1;
        }
        return match c {
            JmpCond::Eq => 0,
            JmpCond::Ne => 1,
            _ => -1,
        };
    }
    scalar_branch_taken(r1, r2, c, jmp32)
}

/// `is_branch_taken` before Linux 6.8 ([`crate::behaviour::compares_register_ranges`]): a
/// jump is decided only against a constant source; `==` and `!=` only when the destination is
/// a constant too; a pointer only against zero, when its type is never NULL.
fn is_branch_taken_against_const(dst: &RegState, src: &RegState, cond: Cond, jmp32: bool) -> i32 {
    if src.ty != RegType::Scalar || !is_reg_const(src, jmp32) {
        if let Cond::Is(c) = cond
            && dst.is_pkt_pointer_any()
            && src.is_pkt_pointer_any()
            && !jmp32
        {
            return pkt_ptr_branch_taken(dst, src, c);
        }
        return -1;
    }
    if dst.is_pointer() {
        let never_null = dst.flags == 0
            && matches!(
                dst.ty,
                RegType::MapValue
                    | RegType::MapKey
                    | RegType::Socket
                    | RegType::SockCommon
                    | RegType::TcpSock
            );
        if !never_null || const_value(src, jmp32) != 0 {
            return -1;
        }
        return match cond {
            Cond::Is(JmpCond::Eq) => 0,
            Cond::Is(JmpCond::Ne) => 1,
            _ => -1,
        };
    }
    if matches!(cond, Cond::Is(JmpCond::Eq | JmpCond::Ne)) && !is_reg_const(dst, jmp32) {
        return -1;
    }
    is_branch_taken(dst, src, cond, jmp32)
}

fn pkt_ptr_branch_taken(dst: &RegState, src: &RegState, c: JmpCond) -> i32 {
    let (pkt, c) = if src.ty == RegType::PacketEnd {
        (dst, c)
    } else if dst.ty == RegType::PacketEnd {
        (src, flip(c))
    } else {
        return -1;
    };
    if pkt.range >= 0 {
        return -1;
    }
    match c {
        JmpCond::Le | JmpCond::Gt if pkt.range == BEYOND_PKT_END => (c == JmpCond::Gt) as i32,
        JmpCond::Lt | JmpCond::Ge if pkt.range == BEYOND_PKT_END || pkt.range == AT_PKT_END => {
            (c == JmpCond::Ge) as i32
        }
        _ => -1,
    }
}

/// `is_scalar_branch_taken`.
fn scalar_branch_taken(r1: &RegState, r2: &RegState, c: JmpCond, jmp32: bool) -> i32 {
    let sub = |r: &RegState| {
        if jmp32 {
            (
                r.var_off.subreg(),
                r.u32_min_value as u64,
                r.u32_max_value as u64,
                r.s32_min_value as i64,
                r.s32_max_value as i64,
            )
        } else {
            (
                r.var_off,
                r.umin_value,
                r.umax_value,
                r.smin_value,
                r.smax_value,
            )
        }
    };
    let (t1, umin1, umax1, smin1, smax1) = sub(r1);
    let (t2, umin2, umax2, smin2, smax2) = sub(r2);
    let disjoint = || {
        umin1 > umax2
            || umax1 < umin2
            || smin1 > smax2
            || smax1 < smin2
            || (!jmp32
                && (r1.u32_min_value > r2.u32_max_value
                    || r1.u32_max_value < r2.u32_min_value
                    || r1.s32_min_value > r2.s32_max_value
                    || r1.s32_max_value < r2.s32_min_value))
    };
    match c {
        JmpCond::Eq => {
            if t1.is_const() && t2.is_const() {
                return (t1.value == t2.value) as i32;
            }
            // 6.18: known bits that disagree (an odd value against 12) settle it too.
            if !t1.overlaps(t2) || disjoint() {
                return 0;
            }
        }
        JmpCond::Ne => {
            if t1.is_const() && t2.is_const() {
                return (t1.value != t2.value) as i32;
            }
            if !t1.overlaps(t2) || disjoint() {
                return 1;
            }
        }
        JmpCond::Set => {
            let (t1, t2, c2) = if is_reg_const(r2, jmp32) {
                (t1, t2, r2)
            } else {
                (t2, t1, r1)
            };
            if !is_reg_const(c2, jmp32) {
                return -1;
            }
            if (!t1.mask & t1.value) & t2.value != 0 {
                return 1;
            }
            if (t1.mask | t1.value) & t2.value == 0 {
                return 0;
            }
        }
        JmpCond::Gt => return decide(umin1 > umax2, umax1 <= umin2),
        JmpCond::Sgt => return decide(smin1 > smax2, smax1 <= smin2),
        JmpCond::Lt => return decide(umax1 < umin2, umin1 >= umax2),
        JmpCond::Slt => return decide(smax1 < smin2, smin1 >= smax2),
        JmpCond::Ge => return decide(umin1 >= umax2, umax1 < umin2),
        JmpCond::Sge => return decide(smin1 >= smax2, smax1 < smin2),
        JmpCond::Le => return decide(umax1 <= umin2, umin1 > umax2),
        JmpCond::Sle => return decide(smax1 <= smin2, smin1 > smax2),
    }
    -1
}

fn decide(yes: bool, no: bool) -> i32 {
    if yes {
        1
    } else if no {
        0
    } else {
        -1
    }
}

/// `regs_refine_cond_op`: what `r1 cond r2` being true says about both, in the width the
/// jump compares.
fn refine(r1: &mut RegState, r2: &mut RegState, cond: Cond, jmp32: bool) {
    if jmp32 {
        refine_width::<W32>(r1, r2, cond)
    } else {
        refine_width::<W64>(r1, r2, cond)
    }
}

/// A scalar whose value in width `W` is one known constant (`is_reg_const`).
fn is_const_in<W: BoundWidth>(r: &RegState) -> bool {
    r.ty == RegType::Scalar && W::tnum(r).is_const()
}

/// Of `r1` and `r2`, the one to refine and the constant it is compared with, when one of
/// them is a constant in width `W` (`r2` preferred, as the kernel's `is_reg_const(reg2)`).
fn against_const<'a, W: BoundWidth>(
    r1: &'a mut RegState,
    r2: &'a mut RegState,
) -> Option<(&'a mut RegState, u64)> {
    let (a, b) = if is_const_in::<W>(r2) {
        (r1, r2)
    } else {
        (r2, r1)
    };
    is_const_in::<W>(b).then(|| (a, W::tnum(b).value))
}

/// [`refine`] at one width: every comparison refines the same fields of that width, so each
/// is written once. `>`/`>=` are turned into `<`/`<=` with the operands swapped, so the
/// ordering comparisons are `Le`, `Lt`, `Sle` and `Slt` only.
fn refine_width<W: BoundWidth>(r1: &mut RegState, r2: &mut RegState, cond: Cond) {
    let (r1, r2, c) = match cond {
        Cond::NotSet => {
            let Some((a, val)) = against_const::<W>(r1, r2) else {
                return;
            };
            a.mark_unbounded();
            W::set_tnum(a, W::tnum(a).and(Tnum::constant(!val)));
            return;
        }
        Cond::Is(c @ (JmpCond::Ge | JmpCond::Gt | JmpCond::Sge | JmpCond::Sgt)) => {
            (r2, r1, flip(c))
        }
        Cond::Is(c) => (r1, r2, c),
    };
    match c {
        JmpCond::Ne => {
            // Only an end of the range equal to the constant can be cut off.
            let Some((a, val)) = against_const::<W>(r1, r2) else {
                return;
            };
            let (mut x, u, s) = (W::get(a), W::trunc_u(val), W::trunc_s(val));
            if x.umin == u {
                x.umin = x.umin.wrapping_add(W::U::ONE);
            }
            if x.umax == u {
                x.umax = x.umax.wrapping_sub(W::U::ONE);
            }
            if x.smin == s {
                x.smin = x.smin.wrapping_add(W::S::ONE);
            }
            if x.smax == s {
                x.smax = x.smax.wrapping_sub(W::S::ONE);
            }
            W::set(a, x);
        }
        JmpCond::Set => {
            // A single tested bit is known set.
            let Some((a, val)) = against_const::<W>(r1, r2) else {
                return;
            };
            if val.is_power_of_two() {
                W::set_tnum(a, W::tnum(a).or(Tnum::constant(val)));
            }
        }
        JmpCond::Eq => {
            let (mut a, b) = (W::get(r1), W::get(r2));
            a.umin = a.umin.max(b.umin);
            a.umax = a.umax.min(b.umax);
            a.smin = a.smin.max(b.smin);
            a.smax = a.smax.min(b.smax);
            W::set(r1, a);
            W::set(r2, a);
            let t = W::tnum(r1).intersect(W::tnum(r2));
            W::set_tnum(r1, t);
            W::set_tnum(r2, t);
        }
        JmpCond::Le | JmpCond::Lt | JmpCond::Sle | JmpCond::Slt => {
            // r1 <= r2 (strictly: r1 <= r2 - 1): r1's maximum is at most r2's, r2's minimum
            // at least r1's.
            let (mut a, mut b) = (W::get(r1), W::get(r2));
            match c {
                JmpCond::Le => {
                    a.umax = a.umax.min(b.umax);
                    b.umin = a.umin.max(b.umin);
                }
                JmpCond::Lt => {
                    a.umax = a.umax.min(b.umax.wrapping_sub(W::U::ONE));
                    b.umin = a.umin.wrapping_add(W::U::ONE).max(b.umin);
                }
                JmpCond::Sle => {
                    a.smax = a.smax.min(b.smax);
                    b.smin = a.smin.max(b.smin);
                }
                _ => {
                    a.smax = a.smax.min(b.smax.wrapping_sub(W::S::ONE));
                    b.smin = a.smin.wrapping_add(W::S::ONE).max(b.smin);
                }
            }
            W::set(r1, a);
            W::set(r2, b);
        }
        _ => {}
    }
}

/// `reg_set_min_max` on one edge: refines `dst` and `src` (a copy for immediates).
/// `two_ranges`: [`crate::behaviour::compares_register_ranges`].
fn set_min_max(dst: &mut RegState, src: &mut RegState, cond: Cond, jmp32: bool, two_ranges: bool) {
    if dst.ty != RegType::Scalar || src.ty != RegType::Scalar {
        return;
    }
    if !two_ranges && !refined_before_6_8(dst, src, cond, jmp32) {
        return;
    }
    let marked_known = !two_ranges
        && cond == Cond::Is(JmpCond::Eq)
        && match jmp32 {
            true => mark_equal_known::<W32>(dst, src),
            false => mark_equal_known::<W64>(dst, src),
        };
    if !marked_known {
        refine(dst, src, cond, jmp32);
    }
    dst.sync_after_compare(jmp32);
    src.sync_after_compare(jmp32);
}

/// Before 6.8, the `==` edge of a comparison with a constant makes the other register that
/// constant (`___mark_reg_known`; `__mark_reg32_known` for the low half after a 32-bit one:
/// [`BoundWidth::mark_known`]),
/// whatever its tnum said: a path 6.18 finds impossible (`r |= 1; if r == 12`) is walked with
/// the constant. False when neither side is a constant.
fn mark_equal_known<W: BoundWidth>(dst: &mut RegState, src: &mut RegState) -> bool {
    let Some((reg, val)) = against_const::<W>(dst, src) else {
        return false;
    };
    W::mark_known(reg, val);
    true
}

/// Whether a kernel before 6.8 learnt anything on this edge: from a comparison with a
/// constant (either side) except `!=`, and from two unknown registers only when a 64-bit
/// comparison says they are equal (`reg_combine_min_max`).
fn refined_before_6_8(dst: &RegState, src: &RegState, cond: Cond, jmp32: bool) -> bool {
    let against_const = is_reg_const(src, jmp32) || is_reg_const(dst, jmp32);
    match cond {
        Cond::Is(JmpCond::Ne) => false,
        Cond::Is(JmpCond::Eq) => against_const || !jmp32,
        _ => against_const,
    }
}

/// `collect_linked_regs`: the scalars sharing `id` that may still be read (registers live
/// before the jump in each frame, and spilled slots), at most
/// [`crate::behaviour::linked_regs_max`]; past that, a
/// scalar loses its id (it is no longer tied to the others).
fn collect_linked_regs(env: &Env<'_>, state: &mut VerifierState, id: u32, set: &mut LinkedRegs) {
    let id = id & !BPF_ADD_CONST;
    // Before the delta links, every copy takes the range, live or not, however many.
    let version = env.input.kernel.version();
    let bounded = crate::behaviour::links_scalars_by_delta(version);
    let max = match bounded {
        true => crate::behaviour::linked_regs_max(version),
        false => usize::MAX,
    };
    for fi in (0..state.frames.len()).rev() {
        let live = match bounded {
            true => env
                .live_regs
                .get(crate::prune::frame_insn_idx(state, fi))
                .copied()
                .unwrap_or(u16::MAX),
            false => u16::MAX,
        };
        let frame = &mut state.frames[fi];
        for (r, reg) in frame.regs.iter_mut().enumerate().take(10) {
            if live & (1 << r) != 0 {
                add_linked_reg(set, reg, id, fi, true, r, max);
            }
        }
        for (spi, slot) in frame.stack.iter_mut().enumerate() {
            if slot.is_spilled_reg() {
                add_linked_reg(set, &mut slot.spilled_ptr, id, fi, false, spi, max);
            }
        }
    }
}

fn add_linked_reg(
    set: &mut LinkedRegs,
    reg: &mut RegState,
    id: u32,
    frameno: usize,
    is_reg: bool,
    index: usize,
    max: usize,
) {
    if reg.ty != RegType::Scalar || (reg.id & !BPF_ADD_CONST) != id {
        return;
    }
    if set.entries.len() < max {
        set.entries.push(LinkedReg {
            frameno,
            is_reg,
            index,
        });
    } else {
        reg.id = 0;
    }
}

/// `sync_linked_regs`: the scalars of `set` sharing `known`'s id get its refined range (plus
/// their delta); `known` sits at register `at` of its frame.
fn sync_linked_regs(
    state: &mut VerifierState,
    known: &RegState,
    set: &LinkedRegs,
    at: (usize, Reg),
) {
    let id = known.id & !BPF_ADD_CONST;
    for e in &set.entries {
        if e.is_reg && e.frameno == at.0 && e.index == at.1.index() {
            continue;
        }
        let Some(frame) = state.frames.get_mut(e.frameno) else {
            continue;
        };
        let reg = if e.is_reg {
            &mut frame.regs[e.index]
        } else {
            match frame.stack.get_mut(e.index) {
                Some(slot) => &mut slot.spilled_ptr,
                None => continue,
            }
        };
        if reg.ty != RegType::Scalar || (reg.id & !BPF_ADD_CONST) != id {
            continue;
        }
        // A 32-bit link and a 64-bit one say nothing about each other.
        if (reg.id ^ known.id) & BPF_ADD_CONST == BPF_ADD_CONST {
            continue;
        }
        let both_plain = reg.id & BPF_ADD_CONST == 0 && known.id & BPF_ADD_CONST == 0;
        if both_plain || reg.off == known.off {
            let subreg_def = reg.subreg_def;
            *reg = *known;
            reg.subreg_def = subreg_def;
        } else {
            let (subreg_def, off, own_id) = (reg.subreg_def, reg.off, reg.id);
            let delta = reg.off as i64 - known.off as i64;
            *reg = *known;
            reg.off = off;
            reg.id = own_id;
            reg.subreg_def = subreg_def;
            add_const(reg, delta);
            if (reg.id | known.id) & BPF_ADD_CONST32 != 0 {
                reg.zext_32_to_64();
            }
            reg.bounds_sync();
        }
    }
}

/// `find_good_pkt_pointers`: every packet pointer with `dst`'s id may now access `range` bytes.
fn find_good_pkt_pointers(state: &mut VerifierState, dst: &RegState, right_open: bool) {
    if dst.off < 0 || (dst.off == 0 && right_open) {
        return;
    }
    if dst.umax_value > MAX_PACKET_OFF || dst.umax_value + dst.off as u64 > MAX_PACKET_OFF {
        return;
    }
    let mut new_range = dst.off;
    if right_open {
        new_range += 1;
    }
    for_each_reg(state, |reg| {
        if reg.ty == dst.ty && reg.id == dst.id {
            reg.range = reg.range.max(new_range);
        }
    });
}

/// `mark_pkt_end`: the pointer is known to be at or beyond the packet's end.
fn mark_pkt_end(state: &mut VerifierState, reg: Reg, range_open: bool) {
    let r = state.reg_mut(reg);
    if r.ty != RegType::Packet {
        return;
    }
    r.range = if range_open {
        BEYOND_PKT_END
    } else {
        AT_PKT_END
    };
}

/// Every register and spilled register of every frame (`bpf_for_each_reg_in_vstate`).
pub fn for_each_reg(state: &mut VerifierState, mut f: impl FnMut(&mut RegState)) {
    for frame in state.frames.iter_mut() {
        for reg in frame.regs.iter_mut() {
            f(reg);
        }
        for slot in frame.stack.iter_mut() {
            if slot.is_spilled_reg() {
                f(&mut slot.spilled_ptr);
            }
        }
    }
}

fn init_pkt_pointer(r: &RegState, ty: RegType) -> bool {
    r.ty == ty && r.id == 0 && r.off == 0 && r.var_off.equals_const(0)
}

/// `try_match_pkt_pointers`: comparisons of packet pointers with `pkt_end` (or of meta with
/// data) that prove bytes accessible on one edge.
fn try_match_pkt_pointers(
    cond: JmpCond,
    dst: Reg,
    src: Reg,
    this: &mut VerifierState,
    other: &mut VerifierState,
) -> bool {
    let d = *this.reg(dst);
    let s = *this.reg(src);
    let left = (d.ty == RegType::Packet && s.ty == RegType::PacketEnd)
        || (d.ty == RegType::PacketMeta && init_pkt_pointer(&s, RegType::Packet));
    let right = (d.ty == RegType::PacketEnd && s.ty == RegType::Packet)
        || (init_pkt_pointer(&d, RegType::Packet) && s.ty == RegType::PacketMeta);
    match (cond, left, right) {
        (JmpCond::Gt, true, _) => {
            find_good_pkt_pointers(this, &d, false);
            mark_pkt_end(other, dst, true);
        }
        (JmpCond::Gt, _, true) => {
            find_good_pkt_pointers(other, &s, true);
            mark_pkt_end(this, src, false);
        }
        (JmpCond::Lt, true, _) => {
            find_good_pkt_pointers(other, &d, true);
            mark_pkt_end(this, dst, false);
        }
        (JmpCond::Lt, _, true) => {
            find_good_pkt_pointers(this, &s, false);
            mark_pkt_end(other, src, true);
        }
        (JmpCond::Ge, true, _) => {
            find_good_pkt_pointers(this, &d, true);
            mark_pkt_end(other, dst, false);
        }
        (JmpCond::Ge, _, true) => {
            find_good_pkt_pointers(other, &s, false);
            mark_pkt_end(this, src, true);
        }
        (JmpCond::Le, true, _) => {
            find_good_pkt_pointers(other, &d, false);
            mark_pkt_end(this, dst, true);
        }
        (JmpCond::Le, _, true) => {
            find_good_pkt_pointers(this, &s, true);
            mark_pkt_end(other, src, false);
        }
        _ => return false,
    }
    true
}

/// `mark_ptr_or_null_regs`: after `if rX == 0`, every pointer with rX's id becomes null (a
/// zero scalar) on one edge and non-null on the other.
fn mark_ptr_or_null_regs(env: &Env<'_>, state: &mut VerifierState, regno: Reg, is_null: bool) {
    let reg = *state.reg(regno);
    let id = reg.id;
    if reg.ref_obj_id != 0 && reg.ref_obj_id == id && is_null {
        state.release_reference_state(id);
    }
    for_each_reg(state, |r| {
        if r.flags & PTR_MAYBE_NULL == 0 || r.id != id || id == 0 {
            return;
        }
        if r.smin_value != 0 || r.smax_value != 0 || !r.var_off.equals_const(0) || r.off != 0 {
            return;
        }
        if is_null {
            *r = RegState::known(0);
            return;
        }
        mark_ptr_not_null_reg(env, r);
        if !(r.ty == RegType::MapValue && r.map.is_some_and(|m| env.map_has_spin_lock(m))) {
            r.id = 0;
        }
    });
}

/// `mark_ptr_not_null_reg`: a map-in-map lookup yields the inner map; a lookup in an
/// XSKMAP yields its `struct bpf_xdp_sock`, one in a SOCKMAP or SOCKHASH its socket.
pub fn mark_ptr_not_null_reg(env: &Env<'_>, r: &mut RegState) {
    use bpfemu_isa::uapi::{BPF_MAP_TYPE_SOCKHASH, BPF_MAP_TYPE_SOCKMAP, BPF_MAP_TYPE_XSKMAP};
    if r.ty == RegType::MapValue
        && let Some(m) = r.map
        && let Some(spec) = env.map(m)
    {
        if spec.inner.is_some() && (m as usize) < env.input.maps.len() {
            r.ty = RegType::ConstPtrToMap;
            r.map = Some(env.inner_map_index(m));
        } else if spec.map_type == BPF_MAP_TYPE_XSKMAP {
            r.ty = RegType::XdpSock;
        } else if matches!(spec.map_type, BPF_MAP_TYPE_SOCKMAP | BPF_MAP_TYPE_SOCKHASH) {
            r.ty = RegType::Socket;
        }
    }
    r.flags &= !PTR_MAYBE_NULL;
}

/// A conditional jump at `env.insn_idx` (`check_cond_jmp_op`).
pub fn check_cond_jmp(
    env: &mut Env<'_>,
    state: &mut VerifierState,
    width: Width,
    cond: JmpCond,
    dst: Reg,
    src: Source,
) -> Result<Branch, Reject> {
    let jmp32 = width == Width::W32;
    let kernel = env.input.kernel.version();
    let dst_first = crate::behaviour::reads_jump_dst_before_its_fields(kernel);
    if dst_first {
        check_reg_read(env, state, dst)?;
    }
    let src_reg = match src {
        Source::Reg(s) => {
            check_reg_read(env, state, s)?;
            *state.reg(s)
        }
        Source::Imm(imm) => RegState::known(imm as i64 as u64),
    };
    if !dst_first {
        check_reg_read(env, state, dst)?;
    }
    let dst_reg = *state.reg(dst);
    let two_ranges = crate::behaviour::compares_register_ranges(kernel);
    let pred = if two_ranges {
        is_branch_taken(&dst_reg, &src_reg, Cond::Is(cond), jmp32)
    } else {
        is_branch_taken_against_const(&dst_reg, &src_reg, Cond::Is(cond), jmp32)
    };
    if pred >= 0 {
        if !dst_reg.is_pointer() {
            mark_chain_precision(env, state, dst)?;
        }
        if let Source::Reg(s) = src
            && !src_reg.is_pointer()
        {
            mark_chain_precision(env, state, s)?;
        }
        let pc = env.insn_idx;
        crate::log::print_insn_state(env, state, pc);
        return Ok(if pred == 1 {
            Branch::Taken
        } else {
            Branch::NotTaken
        });
    }
    // Collected before the branch is copied, so that both edges share the history entry.
    let mut linked = LinkedRegs::default();
    if let Source::Reg(_) = src
        && src_reg.ty == RegType::Scalar
        && src_reg.id != 0
    {
        collect_linked_regs(env, state, src_reg.id, &mut linked);
    }
    if dst_reg.ty == RegType::Scalar && dst_reg.id != 0 {
        collect_linked_regs(env, state, dst_reg.id, &mut linked);
    }
    if linked.entries.len() > 1 && crate::behaviour::links_scalars_by_delta(kernel) {
        crate::explore::push_jmp_history_linked(env, state, 0, linked.pack());
    }
    let mut other = Box::new(state.clone());
    match src {
        Source::Reg(s) if s != dst => {
            let mut od = *other.reg(dst);
            let mut os = *other.reg(s);
            set_min_max(&mut od, &mut os, Cond::Is(cond), jmp32, two_ranges);
            *other.reg_mut(dst) = od;
            *other.reg_mut(s) = os;
            let mut td = dst_reg;
            let mut ts = src_reg;
            set_min_max(&mut td, &mut ts, rev(cond), jmp32, two_ranges);
            *state.reg_mut(dst) = td;
            *state.reg_mut(s) = ts;
        }
        Source::Reg(_) => {}
        Source::Imm(_) => {
            let mut od = *other.reg(dst);
            let mut fake = src_reg;
            set_min_max(&mut od, &mut fake, Cond::Is(cond), jmp32, two_ranges);
            *other.reg_mut(dst) = od;
            let mut td = dst_reg;
            let mut fake = src_reg;
            set_min_max(&mut td, &mut fake, rev(cond), jmp32, two_ranges);
            *state.reg_mut(dst) = td;
        }
    }
    let frame = state.curframe();
    if let Source::Reg(s) = src {
        let sr = *state.reg(s);
        if sr.ty == RegType::Scalar && sr.id != 0 {
            sync_linked_regs(state, &sr, &linked, (frame, s));
            let osr = *other.reg(s);
            sync_linked_regs(&mut other, &osr, &linked, (frame, s));
        }
    }
    let dr = *state.reg(dst);
    if dr.ty == RegType::Scalar && dr.id != 0 {
        sync_linked_regs(state, &dr, &linked, (frame, dst));
        let odr = *other.reg(dst);
        sync_linked_regs(&mut other, &odr, &linked, (frame, dst));
    }
    if let Source::Reg(s) = src
        && !jmp32
        && crate::behaviour::infers_non_null_from_pointer_equality(kernel)
        && src_reg.is_pointer()
        && dst_reg.is_pointer()
        && src_reg.maybe_null() != dst_reg.maybe_null()
        && src_reg.ty != RegType::BtfId
        && dst_reg.ty != RegType::BtfId
    {
        let target: Option<&mut VerifierState> = match cond {
            JmpCond::Eq => Some(&mut other),
            JmpCond::Ne => Some(state),
            _ => None,
        };
        if let Some(t) = target {
            let which = if src_reg.maybe_null() { s } else { dst };
            let mut r = *t.reg(which);
            mark_ptr_not_null_reg(env, &mut r);
            *t.reg_mut(which) = r;
        }
    }
    let against_null_register = matches!(src, Source::Reg(_))
        && src_reg.is_const_scalar(0)
        && crate::behaviour::infers_null_from_a_null_register(env.input.kernel.version());
    let is_null_check = !jmp32
        && (matches!(src, Source::Imm(0)) || against_null_register)
        && matches!(cond, JmpCond::Eq | JmpCond::Ne)
        && dst_reg.maybe_null();
    if is_null_check {
        if let Source::Reg(s) = src {
            // The zero is this path's: it must stay zero in any state pruned against this one.
            mark_chain_precision(env, state, s)?;
        }
        mark_ptr_or_null_regs(env, state, dst, cond == JmpCond::Ne);
        mark_ptr_or_null_regs(env, &mut other, dst, cond == JmpCond::Eq);
    } else if let Source::Reg(s) = src
        && !jmp32
    {
        try_match_pkt_pointers(cond, dst, s, state, &mut other);
    }
    let pc = env.insn_idx;
    crate::log::print_insn_state(env, state, pc);
    Ok(Branch::Both(other))
}
