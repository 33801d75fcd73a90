//! Scalar transfer functions (`adjust_scalar_min_max_vals`, `check_alu_op`): every ALU and
//! ALU64 operation on tnums and signed/unsigned 32/64-bit bounds, moves, sign extension, byte
//! swaps, and the register checks around them.

use crate::env::Env;
use crate::precision::mark_chain_precision;
use crate::ptr_alu::adjust_ptr_min_max_vals;
use crate::state::reg::{BPF_ADD_CONST, BPF_ADD_CONST32, BPF_ADD_CONST64, RegState, RegType};
use crate::state::width::{BoundWidth, Bounds, Int, W32, W64};
use crate::state::{Tnum, VerifierState};
use crate::{Errno, Reject};
use bpfemu_isa::{AluOp, Insn, KernelVersion, Reg, Source, Width};

/// `check_reg_arg(SRC_OP)`: the register must have been written.
pub fn check_reg_read(env: &mut Env<'_>, state: &VerifierState, reg: Reg) -> Result<(), Reject> {
    env.log.scratch_reg(reg);
    if state.reg(reg).ty == RegType::NotInit {
        return Err(env.reject(Errno::Eacces, format!("R{} !read_ok", reg.number())));
    }
    Ok(())
}

/// `check_reg_arg(DST_OP_NO_MARK)`: the frame pointer may not be written.
pub fn check_reg_write(env: &mut Env<'_>, reg: Reg) -> Result<(), Reject> {
    env.log.scratch_reg(reg);
    if reg == Reg::R10 {
        return Err(env.reject(Errno::Eacces, "frame pointer is read only"));
    }
    Ok(())
}

/// `assign_scalar_id_before_mov`: a scalar about to be copied gets an id so that the copies'
/// ranges stay linked.
pub fn assign_scalar_id_before_mov(env: &mut Env<'_>, reg: &mut RegState) {
    if reg.ty != RegType::Scalar {
        return;
    }
    if reg.id & BPF_ADD_CONST != 0 {
        reg.id = 0;
        reg.off = 0;
    }
    if reg.id == 0 && !reg.var_off.is_const() {
        reg.id = env.new_id();
    }
}

/// Bits a scalar's value may occupy (`get_reg_width`).
pub fn reg_width(reg: &RegState) -> u32 {
    64 - reg.umax_value.leading_zeros()
}

/// An ALU or ALU64 instruction (`check_alu_op`).
pub fn check_alu(env: &mut Env<'_>, state: &mut VerifierState, insn: &Insn) -> Result<(), Reject> {
    match *insn {
        Insn::Alu {
            width,
            op: AluOp::Mov,
            dst,
            src,
        } => check_mov(env, state, width, dst, src, 0),
        Insn::MovSx {
            width,
            dst,
            src,
            bits,
        } => check_mov(env, state, width, dst, Source::Reg(src), bits),
        Insn::Alu {
            width,
            op,
            dst,
            src,
        } => check_binary(env, state, width, op, dst, src),
        Insn::Neg { width, dst } => {
            check_reg_read(env, state, dst)?;
            check_reg_write(env, dst)?;
            let tracked =
                crate::behaviour::tracks_negation_and_byte_swaps(env.input.kernel.version());
            let reg = state.reg_mut(dst);
            if reg.ty == RegType::Scalar && tracked {
                let old = *reg;
                let mut r = *reg;
                r.set_known(0);
                scalar_sub::<W32>(&mut r, &old);
                scalar_sub::<W64>(&mut r, &old);
                r.var_off = old.var_off.neg();
                finish_scalar(&mut r, width);
                *state.reg_mut(dst) = r;
            } else {
                *state.reg_mut(dst) = RegState::unknown_scalar();
            }
            Ok(())
        }
        Insn::Endian { order, bits, dst } => {
            check_reg_read(env, state, dst)?;
            check_reg_write(env, dst)?;
            let reg = *state.reg(dst);
            let tracked =
                crate::behaviour::tracks_negation_and_byte_swaps(env.input.kernel.version());
            *state.reg_mut(dst) = if reg.ty == RegType::Scalar && tracked {
                byte_order(&reg, order, bits as u32)
            } else {
                RegState::unknown_scalar()
            };
            Ok(())
        }
        Insn::AddrSpaceCast { dst, src, imm } => {
            if !env.has_arena {
                return Err(env.reject(
                    Errno::Einval,
                    "addr_space_cast insn can only be used in a program that has an associated arena",
                ));
            }
            check_reg_read(env, state, src)?;
            check_reg_write(env, dst)?;
            *state.reg_mut(dst) = if imm == 1 {
                arena_pointer()
            } else {
                RegState::unknown_scalar()
            };
            Ok(())
        }
        _ => Ok(()),
    }
}

/// A byte swap or truncation on a scalar: the tnum follows the bytes exactly (on a
/// little-endian host `to_le` only truncates), the ranges come from it.
fn byte_order(reg: &RegState, order: bpfemu_isa::ByteOrder, bits: u32) -> RegState {
    let truncated = reg.var_off.cast(bits / 8);
    let var_off = match order {
        bpfemu_isa::ByteOrder::ToLe => truncated,
        _ => truncated.bswap(bits),
    };
    let mut r = RegState::unknown_scalar();
    r.var_off = var_off;
    r.bounds_sync();
    r
}

fn check_mov(
    env: &mut Env<'_>,
    state: &mut VerifierState,
    width: Width,
    dst: Reg,
    src: Source,
    sx_bits: u8,
) -> Result<(), Reject> {
    let src_reg = match src {
        Source::Reg(s) => {
            check_reg_read(env, state, s)?;
            Some(s)
        }
        Source::Imm(_) => None,
    };
    check_reg_write(env, dst)?;
    let Some(s) = src_reg else {
        let Source::Imm(imm) = src else {
            unreachable!("immediate source")
        };
        let value = match width {
            Width::W64 => imm as i64 as u64,
            Width::W32 => imm as u32 as u64,
        };
        *state.reg_mut(dst) = RegState::known(value);
        return Ok(());
    };
    let mut src_state = *state.reg(s);
    let result = match width {
        Width::W64 if sx_bits == 0 => {
            assign_scalar_id_before_mov(env, &mut src_state);
            *state.reg_mut(s) = src_state;
            let mut d = src_state;
            d.subreg_def = 0;
            d
        }
        Width::W64 => {
            if src_state.ty == RegType::Scalar {
                let no_sext = src_state.umax_value < (1u64 << (sx_bits - 1));
                let mut d = copy_scalar(env, state, s, no_sext);
                coerce_reg_to_size_sx(&mut d, sx_bits as u32 / 8);
                d
            } else {
                RegState::unknown_scalar()
            }
        }
        Width::W32 => {
            let links = crate::behaviour::links_scalars_by_delta(env.input.kernel.version());
            let mut d = if src_state.ty == RegType::Scalar {
                if sx_bits == 0 {
                    copy_scalar(env, state, s, links && reg_width(&src_state) <= 32)
                } else {
                    let no_sext = src_state.umax_value < (1u64 << (sx_bits - 1));
                    let mut d = copy_scalar(env, state, s, no_sext);
                    coerce_subreg_to_size_sx(&mut d, sx_bits as u32 / 8);
                    d
                }
            } else {
                RegState::unknown_scalar()
            };
            d.zext_32_to_64();
            d.bounds_sync();
            d
        }
    };
    *state.reg_mut(dst) = result;
    Ok(())
}

/// The copy a narrowing or sign-extending move makes of the scalar in `src`: when the value
/// is unchanged by it (`keeps_value`), the copy stays linked to the source (an id is given
/// first, and the source keeps it); otherwise the copy is a new, unlinked value.
fn copy_scalar(
    env: &mut Env<'_>,
    state: &mut VerifierState,
    src: Reg,
    keeps_value: bool,
) -> RegState {
    let mut src_state = *state.reg(src);
    if keeps_value {
        assign_scalar_id_before_mov(env, &mut src_state);
        *state.reg_mut(src) = src_state;
    }
    let mut d = src_state;
    if !keeps_value {
        d.id = 0;
    }
    d
}

fn check_binary(
    env: &mut Env<'_>,
    state: &mut VerifierState,
    width: Width,
    op: AluOp,
    dst: Reg,
    src: Source,
) -> Result<(), Reject> {
    if let Source::Reg(s) = src {
        check_reg_read(env, state, s)?;
    }
    check_reg_read(env, state, dst)?;
    if let Source::Imm(imm) = src {
        if matches!(op, AluOp::Div | AluOp::SDiv | AluOp::Mod | AluOp::SMod) && imm == 0 {
            return Err(env.reject(Errno::Einval, "div by zero"));
        }
        let size = if width == Width::W64 { 64 } else { 32 };
        if matches!(op, AluOp::Lsh | AluOp::Rsh | AluOp::Arsh) && (imm < 0 || imm >= size) {
            return Err(env.reject(Errno::Einval, format!("invalid shift {imm}")));
        }
    }
    check_reg_write(env, dst)?;
    adjust_reg_min_max_vals(env, state, width, op, dst, src)
}

/// An arena pointer: a 32-bit offset into the arena, whose value the verifier does not track
/// (every access through it is checked at run time).
fn arena_pointer() -> RegState {
    let mut r = RegState::unknown_scalar();
    r.ty = RegType::Arena;
    r
}

/// `adjust_reg_min_max_vals`: dispatches pointer and scalar arithmetic.
fn adjust_reg_min_max_vals(
    env: &mut Env<'_>,
    state: &mut VerifierState,
    width: Width,
    op: AluOp,
    dst: Reg,
    src: Source,
) -> Result<(), Reject> {
    let dst_reg = *state.reg(dst);
    let src_reg = match src {
        Source::Reg(s) => *state.reg(s),
        Source::Imm(imm) => RegState::known(imm as i64 as u64),
    };
    // Any operation, of either width, with an arena pointer on either side gives an arena
    // pointer (what the running 6.18 does: `12 ^ arena`, `ctx + arena`, `fp - arena` are
    // all arena pointers, see `probes/arena.probes`).
    if dst_reg.ty == RegType::Arena {
        return Ok(());
    }
    if src_reg.ty == RegType::Arena {
        *state.reg_mut(dst) = arena_pointer();
        return Ok(());
    }
    if let Source::Reg(s) = src {
        if src_reg.ty != RegType::Scalar {
            if dst_reg.ty != RegType::Scalar {
                if op == AluOp::Sub {
                    *state.reg_mut(dst) = RegState::unknown_scalar();
                    return Ok(());
                }
                return Err(env.reject(
                    Errno::Eacces,
                    format!(
                        "R{} pointer {} pointer prohibited",
                        dst.number(),
                        op_name(op)
                    ),
                ));
            }
            mark_chain_precision(env, state, dst)?;
            return adjust_ptr_min_max_vals(env, state, width, op, dst, &src_reg, &dst_reg, true);
        } else if dst_reg.ty != RegType::Scalar {
            mark_chain_precision(env, state, s)?;
            return adjust_ptr_min_max_vals(env, state, width, op, dst, &dst_reg, &src_reg, false);
        } else if dst_reg.precise {
            mark_chain_precision(env, state, s)?;
        }
    } else if dst_reg.ty != RegType::Scalar {
        return adjust_ptr_min_max_vals(env, state, width, op, dst, &dst_reg, &src_reg, false);
    }
    let kernel = env.input.kernel.version();
    if !crate::behaviour::bounds_bitwise_ops_of_unknown_scalars(kernel)
        && matches!(op, AluOp::Or | AluOp::Xor | AluOp::Mul)
        && !is_const_of_width(&src_reg, width)
    {
        *state.reg_mut(dst) = RegState::unknown_scalar();
        return Ok(());
    }
    if crate::behaviour::forks_zero_or_minus_one_scalars(kernel)
        && matches!(op, AluOp::And | AluOp::Or)
        && src_reg.var_off.is_const()
    {
        maybe_fork_scalars(env, state, dst);
    }
    let mut d = *state.reg(dst);
    let wide_before = d.umax_value > u32::MAX as u64;
    adjust_scalar_min_max_vals(&mut d, &src_reg, op, width, kernel);
    if crate::behaviour::links_scalars_by_delta(kernel) {
        let every_delta = crate::behaviour::links_by_subtraction_and_32_bit_adds(kernel);
        let clears_delta = crate::behaviour::clears_delta_with_scalar_id(kernel);
        let self_op = src == Source::Reg(dst);
        if self_op && clears_delta {
            // `r6 += r6`: no constant was added to a copy.
            d.id = 0;
            d.off = 0;
        } else {
            // Debian's 6.12 read the constant from the register after the operation, which
            // is the result when the source is the destination.
            let added = if self_op { d } else { src_reg };
            link_add_const(
                &mut d,
                &added,
                op,
                width,
                wide_before,
                every_delta,
                clears_delta,
            );
        }
    } else {
        d.id = 0;
        d.off = 0;
    }
    *state.reg_mut(dst) = d;
    Ok(())
}

/// `maybe_fork_scalars` (6.18 stable): a scalar that is 0 or -1 (what `x s>>= 63` leaves, as
/// LLVM writes selects) masked or or-ed with a constant is explored as both values, so that
/// `(x s>> 63) & K` is K or 0 instead of anything in [0, K]. The path with 0 is queued to run
/// the instruction again; this one goes on with -1. The 64-bit range decides first, else
/// the 32-bit one (then only the low half is made known).
fn maybe_fork_scalars(env: &mut Env<'_>, state: &mut VerifierState, dst: Reg) {
    let d = state.reg(dst);
    let low_half_only = if d.smin_value == -1 && d.smax_value == 0 {
        false
    } else if d.s32_min_value == -1 && d.s32_max_value == 0 {
        true
    } else {
        return;
    };
    let mut zero = state.clone();
    let (queued, this) = (zero.reg_mut(dst), state.reg_mut(dst));
    if low_half_only {
        W32::mark_known(queued, 0);
        W32::mark_known(this, u32::MAX as u64);
    } else {
        for (r, value) in [(queued, 0), (this, u64::MAX)] {
            r.set_known(value);
            r.id = 0;
            r.ref_obj_id = 0;
            r.off = 0;
        }
    }
    env.pending.push((zero, env.insn_idx, env.insn_idx));
}

/// After `rX += const` or `rX -= const` (64- or 32-bit) on a linked scalar, remember the
/// constant so that branch refinement can update the copy (`BPF_ADD_CONST64`/`32`); any other
/// operation, or a second constant, breaks the link.
///
/// A 32-bit link only ties values that fit 32 bits: once the operation zero-extends a copy of
/// a wider value (`wide_before`), what bounds one says nothing of the other.
fn link_add_const(
    d: &mut RegState,
    src: &RegState,
    op: AluOp,
    width: Width,
    wide_before: bool,
    every_delta: bool,
    clears_delta: bool,
) {
    let alu32 = width == Width::W32;
    let src_const = if alu32 {
        src.var_off.subreg().is_const()
    } else {
        src.var_off.is_const()
    };
    let unlink = |d: &mut RegState| {
        if clears_delta {
            d.off = 0;
        }
        d.id = 0;
    };
    // The delta goes with the id: a stale one would follow the register into the next id
    // `assign_scalar_id_before_mov` gives it and skew `sync_linked_regs` (as it does in
    // Debian's 6.12: `clears_delta` false).
    if !matches!(op, AluOp::Add | AluOp::Sub) || d.id == 0 || !src_const {
        return unlink(d);
    }
    let val = if alu32 {
        src.var_off.value as u32 as u64
    } else {
        src.var_off.value
    };
    if (!alu32 && i32::try_from(val as i64).is_err()) || (alu32 && wide_before) {
        return unlink(d);
    }
    // 6.12 links a 64-bit add of a constant up to S32_MAX only (a negative one unlinks).
    if !every_delta && (op != AluOp::Add || alu32 || val > i32::MAX as u64) {
        return unlink(d);
    }
    let mut off = val as i32;
    if op == AluOp::Sub {
        if off == i32::MIN {
            return unlink(d);
        }
        off = -off;
    }
    if d.id & BPF_ADD_CONST != 0 {
        return unlink(d);
    }
    d.id |= if alu32 {
        BPF_ADD_CONST32
    } else {
        BPF_ADD_CONST64
    };
    d.off = off;
}

/// The kernel's name of an ALU operation in messages (`bpf_alu_string`).
pub fn op_name(op: AluOp) -> &'static str {
    match op {
        AluOp::Add => "+=",
        AluOp::Sub => "-=",
        AluOp::Mul => "*=",
        AluOp::Div | AluOp::SDiv => "/=",
        AluOp::Or => "|=",
        AluOp::And => "&=",
        AluOp::Lsh => "<<=",
        AluOp::Rsh => ">>=",
        AluOp::Mod | AluOp::SMod => "%=",
        AluOp::Xor => "^=",
        AluOp::Mov => "=",
        AluOp::Arsh => "s>>=",
    }
}

/// Whether `src` is a constant in the operation's width (`src_is_const`).
fn is_const_of_width(src: &RegState, width: Width) -> bool {
    if width == Width::W64 {
        W64::is_const(src)
    } else {
        W32::is_const(src)
    }
}

/// `is_safe_to_compute_dst_reg_range`.
fn safe_to_compute(src: &RegState, op: AluOp, width: Width, kernel: KernelVersion) -> bool {
    let bits: u64 = if width == Width::W64 { 64 } else { 32 };
    let src_is_const = is_const_of_width(src, width);
    match op {
        AluOp::Add | AluOp::Sub | AluOp::And | AluOp::Xor | AluOp::Or | AluOp::Mul => true,
        AluOp::Lsh | AluOp::Rsh | AluOp::Arsh => src_is_const && src.umax_value < bits,
        AluOp::Div | AluOp::SDiv | AluOp::Mod | AluOp::SMod => {
            src_is_const && crate::behaviour::bounds_div_mod_by_constant(kernel)
        }
        _ => false,
    }
}

/// `adjust_scalar_min_max_vals` for two scalars, as `kernel` computes them.
pub fn adjust_scalar_min_max_vals(
    d: &mut RegState,
    s: &RegState,
    op: AluOp,
    width: Width,
    kernel: KernelVersion,
) {
    if !safe_to_compute(s, op, width, kernel) {
        *d = RegState::unknown_scalar();
        return;
    }
    let alu32 = width == Width::W32;
    match op {
        AluOp::Add => {
            scalar_add::<W32>(d, s);
            scalar_add::<W64>(d, s);
            d.var_off = d.var_off.add(s.var_off);
        }
        AluOp::Sub => {
            scalar_sub::<W32>(d, s);
            scalar_sub::<W64>(d, s);
            d.var_off = d.var_off.sub(s.var_off);
        }
        AluOp::Mul => {
            d.var_off = match crate::behaviour::multiplies_tnums_by_union(kernel) {
                true => d.var_off.mul(s.var_off),
                false => d.var_off.mul_before_6_18(s.var_off),
            };
            scalar_mul::<W32>(d, s);
            scalar_mul::<W64>(d, s);
        }
        AluOp::And => {
            d.var_off = d.var_off.and(s.var_off);
            scalar_and::<W32>(d, s);
            scalar_and::<W64>(d, s);
        }
        AluOp::Or => {
            d.var_off = d.var_off.or(s.var_off);
            scalar_or::<W32>(d, s);
            scalar_or::<W64>(d, s);
        }
        AluOp::Xor => {
            d.var_off = d.var_off.xor(s.var_off);
            scalar_xor::<W32>(d, s);
            scalar_xor::<W64>(d, s);
        }
        AluOp::Lsh => {
            if alu32 {
                scalar32_lsh(d, s)
            } else {
                scalar64_lsh(d, s, kernel)
            }
        }
        AluOp::Rsh => {
            if alu32 {
                scalar32_rsh(d, s)
            } else {
                scalar64_rsh(d, s)
            }
        }
        AluOp::Arsh => {
            if alu32 {
                scalar32_arsh(d, s)
            } else {
                scalar64_arsh(d, s)
            }
        }
        AluOp::Div | AluOp::SDiv | AluOp::Mod | AluOp::SMod => {
            crate::div_mod::div_mod_by_constant(d, s, op, width)
        }
        _ => {}
    }
    finish_scalar(d, width);
}

fn finish_scalar(d: &mut RegState, width: Width) {
    if width == Width::W32 {
        d.zext_32_to_64();
    }
    d.bounds_sync();
}

/// `scalar32_min_max_add` / `scalar_min_max_add`: a signed overflow at either end loses the
/// signed range; the unsigned one is lost only when the maximum wraps and the minimum does
/// not (both wrapping keeps a valid, shifted range).
fn scalar_add<W: BoundWidth>(d: &mut RegState, s: &RegState) {
    let (mut a, b) = (W::get(d), W::get(s));
    let (smin, o1) = a.smin.overflowing_add(b.smin);
    let (smax, o2) = a.smax.overflowing_add(b.smax);
    (a.smin, a.smax) = if o1 || o2 {
        (W::S::MIN, W::S::MAX)
    } else {
        (smin, smax)
    };
    let (umin, min_ovf) = a.umin.overflowing_add(b.umin);
    let (umax, max_ovf) = a.umax.overflowing_add(b.umax);
    (a.umin, a.umax) = if !min_ovf && max_ovf {
        (W::U::MIN, W::U::MAX)
    } else {
        (umin, umax)
    };
    W::set(d, a);
}

/// `scalar32_min_max_sub` / `scalar_min_max_sub`: as for add, with the other operand's
/// opposite ends.
pub(crate) fn scalar_sub<W: BoundWidth>(d: &mut RegState, s: &RegState) {
    let (mut a, b) = (W::get(d), W::get(s));
    let (smin, o1) = a.smin.overflowing_sub(b.smax);
    let (smax, o2) = a.smax.overflowing_sub(b.smin);
    (a.smin, a.smax) = if o1 || o2 {
        (W::S::MIN, W::S::MAX)
    } else {
        (smin, smax)
    };
    let (umin, min_under) = a.umin.overflowing_sub(b.umax);
    let (umax, max_under) = a.umax.overflowing_sub(b.umin);
    (a.umin, a.umax) = if min_under && !max_under {
        (W::U::MIN, W::U::MAX)
    } else {
        (umin, umax)
    };
    W::set(d, a);
}

/// Adds a known constant to a scalar's bounds and tnum (`sync_linked_regs`' delta).
pub(crate) fn add_const(d: &mut RegState, delta: i64) {
    let k = RegState::known(delta as u64);
    scalar_add::<W32>(d, &k);
    scalar_add::<W64>(d, &k);
    d.var_off = d.var_off.add(k.var_off);
}

/// `scalar32_min_max_mul` / `scalar_min_max_mul`: the unsigned range from the products of
/// the ends, the signed one from the smallest and largest of the four cross products; any
/// overflow loses the range.
fn scalar_mul<W: BoundWidth>(d: &mut RegState, s: &RegState) {
    let (mut a, b) = (W::get(d), W::get(s));
    (a.umin, a.umax) = match (a.umin.checked_mul(b.umin), a.umax.checked_mul(b.umax)) {
        (Some(lo), Some(hi)) => (lo, hi),
        _ => (W::U::MIN, W::U::MAX),
    };
    let prods = [
        a.smin.checked_mul(b.smin),
        a.smin.checked_mul(b.smax),
        a.smax.checked_mul(b.smin),
        a.smax.checked_mul(b.smax),
    ];
    (a.smin, a.smax) = match prods {
        [Some(p0), Some(p1), Some(p2), Some(p3)] => {
            (p0.min(p1).min(p2).min(p3), p0.max(p1).max(p2).max(p3))
        }
        _ => (W::S::MIN, W::S::MAX),
    };
    W::set(d, a);
}

/// The signed range from the unsigned one when it does not cross the sign boundary, else
/// unbounded: what the kernel's bitwise operations do after setting the unsigned range.
fn signed_from_unsigned<W: BoundWidth>(d: &mut RegState) {
    let mut b = W::get(d);
    (b.smin, b.smax) = if W::signed(b.umin) <= W::signed(b.umax) {
        (W::signed(b.umin), W::signed(b.umax))
    } else {
        (W::S::MIN, W::S::MAX)
    };
    W::set(d, b);
}

/// The common shape of and/or/xor once the tnum is computed: two constants give a constant;
/// otherwise the unsigned range `umin..=umax` chosen by the operation, the signed range from
/// it, and (64 bits) what the tnum adds.
fn bitwise_bounds<W: BoundWidth>(
    d: &mut RegState,
    s: &RegState,
    range: impl FnOnce(Bounds<W::U, W::S>, Bounds<W::U, W::S>, Tnum) -> (W::U, W::U),
) {
    let t = W::tnum(d);
    if W::tnum(s).is_const() && t.is_const() {
        W::mark_known(d, t.value);
        return;
    }
    let mut b = W::get(d);
    (b.umin, b.umax) = range(b, W::get(s), t);
    W::set(d, b);
    signed_from_unsigned::<W>(d);
    W::after_bitwise(d);
}

/// `scalar32_min_max_and` / `scalar_min_max_and`: at least the known bits, at most the
/// smaller maximum.
fn scalar_and<W: BoundWidth>(d: &mut RegState, s: &RegState) {
    bitwise_bounds::<W>(d, s, |a, b, t| (W::trunc_u(t.value), a.umax.min(b.umax)));
}

/// `scalar32_min_max_or` / `scalar_min_max_or`: at least the larger minimum, at most every
/// possible bit set.
fn scalar_or<W: BoundWidth>(d: &mut RegState, s: &RegState) {
    bitwise_bounds::<W>(d, s, |a, b, t| {
        (a.umin.max(b.umin), W::trunc_u(t.value | t.mask))
    });
}

/// `scalar32_min_max_xor` / `scalar_min_max_xor`: exactly what the tnum allows.
fn scalar_xor<W: BoundWidth>(d: &mut RegState, s: &RegState) {
    bitwise_bounds::<W>(d, s, |_, _, t| {
        (W::trunc_u(t.value), W::trunc_u(t.value | t.mask))
    });
}

fn lsh32_bounds(d: &mut RegState, umin: u64, umax: u64) {
    d.s32_min_value = i32::MIN;
    d.s32_max_value = i32::MAX;
    if umax > 31 || d.u32_max_value as u64 > 1u64 << (31 - umax) {
        d.u32_min_value = 0;
        d.u32_max_value = u32::MAX;
    } else {
        d.u32_min_value <<= umin;
        d.u32_max_value <<= umax;
    }
}

fn scalar32_lsh(d: &mut RegState, s: &RegState) {
    let (umin, umax) = (s.u32_min_value as u64, s.u32_max_value as u64);
    let subreg = d.var_off.subreg();
    lsh32_bounds(d, umin, umax);
    d.var_off = subreg.lshift(umin as u32).subreg();
    d.mark_64_unbounded();
    d.update_32_bounds();
}

fn scalar64_lsh(d: &mut RegState, s: &RegState, kernel: KernelVersion) {
    let (umin, umax) = (s.umin_value, s.umax_value);
    // `<< 32` (half of the compilers' sign extension) keeps the order of the 32-bit signed
    // range, negative bounds included (6.18 stable): no value changes sign. 5.10 keeps a
    // signed bound only when it is not negative.
    let keeps =
        |bound: i32| bound >= 0 || crate::behaviour::shifts_negative_s32_bounds_by_32(kernel);
    if umin == 32 && umax == 32 {
        d.smax_value = match keeps(d.s32_max_value) {
            true => (d.s32_max_value as i64) << 32,
            false => i64::MAX,
        };
        d.smin_value = match keeps(d.s32_min_value) {
            true => (d.s32_min_value as i64) << 32,
            false => i64::MIN,
        };
    } else {
        d.smax_value = i64::MAX;
        d.smin_value = i64::MIN;
    }
    if d.umax_value > 1u64 << (63 - umax) {
        d.umin_value = 0;
        d.umax_value = u64::MAX;
    } else {
        d.umin_value <<= umin;
        d.umax_value <<= umax;
    }
    lsh32_bounds(d, umin, umax);
    d.var_off = d.var_off.lshift(umin as u32);
    d.update_bounds();
}

fn scalar32_rsh(d: &mut RegState, s: &RegState) {
    let subreg = d.var_off.subreg();
    let (umin, umax) = (s.u32_min_value, s.u32_max_value);
    d.s32_min_value = i32::MIN;
    d.s32_max_value = i32::MAX;
    d.var_off = subreg.rshift(umin);
    d.u32_min_value >>= umax;
    d.u32_max_value >>= umin;
    d.mark_64_unbounded();
    d.update_32_bounds();
}

fn scalar64_rsh(d: &mut RegState, s: &RegState) {
    let (umin, umax) = (s.umin_value, s.umax_value);
    d.smin_value = i64::MIN;
    d.smax_value = i64::MAX;
    d.var_off = d.var_off.rshift(umin as u32);
    d.umin_value >>= umax;
    d.umax_value >>= umin;
    d.mark_32_unbounded();
    d.update_bounds();
}

fn scalar32_arsh(d: &mut RegState, s: &RegState) {
    let umin = s.u32_min_value;
    d.s32_min_value >>= umin;
    d.s32_max_value >>= umin;
    d.var_off = d.var_off.subreg().arshift(umin, 32);
    d.u32_min_value = 0;
    d.u32_max_value = u32::MAX;
    d.mark_64_unbounded();
    d.update_32_bounds();
}

fn scalar64_arsh(d: &mut RegState, s: &RegState) {
    let umin = s.umin_value as u32;
    d.smin_value >>= umin;
    d.smax_value >>= umin;
    d.var_off = d.var_off.arshift(umin, 64);
    d.umin_value = 0;
    d.umax_value = u64::MAX;
    d.mark_32_unbounded();
    d.update_bounds();
}

/// `coerce_reg_to_size`: the low `size` bytes, zero-extended (loads, 32-bit results).
pub fn coerce_reg_to_size(reg: &mut RegState, size: u32) {
    reg.var_off = reg.var_off.cast(size);
    let mask = if size >= 8 {
        u64::MAX
    } else {
        (1u64 << (size * 8)) - 1
    };
    if reg.umin_value & !mask == reg.umax_value & !mask {
        reg.umin_value &= mask;
        reg.umax_value &= mask;
    } else {
        reg.umin_value = 0;
        reg.umax_value = mask;
    }
    reg.smin_value = reg.umin_value as i64;
    reg.smax_value = reg.umax_value as i64;
    if size < 4 {
        reg.mark_32_unbounded();
    }
    reg.bounds_sync();
}

fn sext_bounds(size: u32) -> (i64, i64) {
    match size {
        1 => (i8::MIN as i64, i8::MAX as i64),
        2 => (i16::MIN as i64, i16::MAX as i64),
        _ => (i32::MIN as i64, i32::MAX as i64),
    }
}

fn sext(value: u64, size: u32) -> i64 {
    match size {
        1 => value as i8 as i64,
        2 => value as i16 as i64,
        _ => value as i32 as i64,
    }
}

/// `coerce_reg_to_size_sx`: the low `size` bytes, sign-extended to 64 bits.
pub fn coerce_reg_to_size_sx(reg: &mut RegState, size: u32) {
    if reg.var_off.is_const() {
        let v = sext(reg.var_off.value, size) as u64;
        reg.set_known(v);
        return;
    }
    let bits = size * 8;
    let top_smax = ((reg.smax_value as u64) >> bits) << bits;
    let top_smin = ((reg.smin_value as u64) >> bits) << bits;
    if top_smax == top_smin {
        let a = sext(reg.smax_value as u64, size);
        let b = sext(reg.smin_value as u64, size);
        let (lo, hi) = (a.min(b), a.max(b));
        if (hi >= 0) == (lo >= 0) {
            reg.smin_value = lo;
            reg.s32_min_value = lo as i32;
            reg.smax_value = hi;
            reg.s32_max_value = hi as i32;
            reg.umin_value = lo as u64;
            reg.u32_min_value = lo as u32;
            reg.umax_value = hi as u64;
            reg.u32_max_value = hi as u32;
            reg.var_off = Tnum::range(lo as u64, hi as u64);
            return;
        }
    }
    let (min, max) = sext_bounds(size);
    reg.smin_value = min;
    reg.s32_min_value = min as i32;
    reg.smax_value = max;
    reg.s32_max_value = max as i32;
    reg.umin_value = 0;
    reg.u32_min_value = 0;
    reg.umax_value = u64::MAX;
    reg.u32_max_value = u32::MAX;
    reg.var_off = Tnum::UNKNOWN;
}

/// `coerce_subreg_to_size_sx`: the low `size` bytes sign-extended to 32 bits.
pub fn coerce_subreg_to_size_sx(reg: &mut RegState, size: u32) {
    if reg.var_off.is_const() {
        let v = sext(reg.var_off.value, size) as u64;
        reg.var_off = Tnum::constant(v);
        reg.s32_min_value = v as i32;
        reg.s32_max_value = v as i32;
        reg.u32_min_value = v as u32;
        reg.u32_max_value = v as u32;
        return;
    }
    let bits = size * 8;
    let top_smax = ((reg.s32_max_value as u32) >> bits) << bits;
    let top_smin = ((reg.s32_min_value as u32) >> bits) << bits;
    if top_smax == top_smin {
        let a = sext(reg.s32_max_value as u32 as u64, size) as i32;
        let b = sext(reg.s32_min_value as u32 as u64, size) as i32;
        let (lo, hi) = (a.min(b), a.max(b));
        if (lo >= 0) == (hi >= 0) {
            reg.s32_min_value = lo;
            reg.s32_max_value = hi;
            reg.u32_min_value = lo as u32;
            reg.u32_max_value = hi as u32;
            reg.var_off = Tnum::range(lo as i64 as u64, hi as i64 as u64).subreg();
            return;
        }
    }
    let (min, max) = sext_bounds(size);
    reg.s32_min_value = min as i32;
    reg.s32_max_value = max as i32;
    reg.u32_min_value = 0;
    reg.u32_max_value = u32::MAX;
    reg.var_off = Tnum::UNKNOWN.subreg();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn add_of_bounded_scalars_adds_ranges() {
        let mut a = RegState::unknown_scalar();
        a.umax_value = 10;
        a.bounds_sync();
        let b = RegState::known(5);
        adjust_scalar_min_max_vals(&mut a, &b, AluOp::Add, Width::W64, KernelVersion::V6_18);
        assert_eq!((a.umin_value, a.umax_value), (5, 15));
    }

    #[test]
    fn and_with_mask_bounds_value() {
        let mut a = RegState::unknown_scalar();
        adjust_scalar_min_max_vals(
            &mut a,
            &RegState::known(0xff),
            AluOp::And,
            Width::W64,
            KernelVersion::V6_18,
        );
        assert_eq!((a.umin_value, a.umax_value), (0, 255));
        assert_eq!(a.var_off, Tnum::new(0, 0xff));
    }

    #[test]
    fn alu32_zero_extends() {
        let mut a = RegState::known(u64::MAX);
        adjust_scalar_min_max_vals(
            &mut a,
            &RegState::known(1),
            AluOp::Add,
            Width::W32,
            KernelVersion::V6_18,
        );
        assert!(a.is_const_scalar(0));
    }
}
