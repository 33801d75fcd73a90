//! Pointer arithmetic (`adjust_ptr_min_max_vals`): which operations on which pointer types the
//! kernel allows, the fixed and variable offsets that result, and its refusals.

use crate::alu::op_name;
use crate::env::Env;
use crate::log::reg_type_name;
use crate::state::VerifierState;
use crate::state::reg::{BPF_MAX_VAR_OFF, PTR_MAYBE_NULL, PTR_UNTRUSTED, RegState, RegType};
use crate::{Errno, Reject};
use bpfemu_isa::{AluOp, Reg, Width};

/// `ptr op scalar` (or `scalar += ptr` when `scalar_is_dst`) into `dst`.
#[allow(clippy::too_many_arguments)]
pub fn adjust_ptr_min_max_vals(
    env: &mut Env<'_>,
    state: &mut VerifierState,
    width: Width,
    op: AluOp,
    dst: Reg,
    ptr: &RegState,
    off: &RegState,
    scalar_is_dst: bool,
) -> Result<(), Reject> {
    let d = dst.number();
    let known = off.var_off.is_const();
    let (smin_val, smax_val, umin_val, umax_val) = (
        off.smin_value,
        off.smax_value,
        off.umin_value,
        off.umax_value,
    );
    if (known && (smin_val != smax_val || umin_val != umax_val))
        || smin_val > smax_val
        || umin_val > umax_val
    {
        *state.reg_mut(dst) = RegState::unknown_scalar();
        return Ok(());
    }
    if width == Width::W32 {
        if op == AluOp::Sub {
            *state.reg_mut(dst) = RegState::unknown_scalar();
            return Ok(());
        }
        return Err(env.reject(
            Errno::Eacces,
            format!("R{d} 32-bit pointer arithmetic prohibited"),
        ));
    }
    let type_name = reg_type_name(env, ptr);
    if ptr.flags & PTR_MAYBE_NULL != 0 {
        // 5.10 asks for the null check of a map value only.
        let hint = match ptr.ty == RegType::MapValue
            || crate::behaviour::words_every_nullable_pointer_arith(env.input.kernel.version())
        {
            true => ", null-check it first",
            false => "",
        };
        return Err(env.reject(
            Errno::Eacces,
            format!("R{d} pointer arithmetic on {type_name} prohibited{hint}"),
        ));
    }
    if ptr.ty == RegType::Mem && ptr.flags & PTR_UNTRUSTED != 0 {
        return Ok(());
    }
    let allowed = match ptr.ty {
        RegType::Ctx
        | RegType::MapValue
        | RegType::MapKey
        | RegType::Stack
        | RegType::PacketMeta
        | RegType::Packet
        | RegType::BtfId
        | RegType::Mem
        | RegType::Func
        | RegType::ConstPtrToDynptr => true,
        RegType::ConstPtrToMap => known && smin_val == 0 && op == AluOp::Add,
        _ => false,
    };
    if !allowed {
        return Err(env.reject(
            Errno::Eacces,
            format!("R{d} pointer arithmetic on {type_name} prohibited"),
        ));
    }
    let mut r = *state.reg(dst);
    r.ty = ptr.ty;
    r.flags = ptr.flags;
    r.id = ptr.id;
    check_reg_sane_offset(env, off, &type_name)?;
    check_reg_sane_offset(env, ptr, &type_name)?;
    r.mark_32_unbounded();
    let (smin_ptr, smax_ptr, umin_ptr, umax_ptr) = (
        ptr.smin_value,
        ptr.smax_value,
        ptr.umin_value,
        ptr.umax_value,
    );
    match op {
        AluOp::Add => {
            let fixed = ptr.off as i64 + smin_val;
            if known && fixed == fixed as i32 as i64 {
                copy_ptr_data(&mut r, ptr);
                r.smin_value = smin_ptr;
                r.smax_value = smax_ptr;
                r.umin_value = umin_ptr;
                r.umax_value = umax_ptr;
                r.var_off = ptr.var_off;
                r.off = fixed as i32;
            } else {
                match (
                    smin_ptr.checked_add(smin_val),
                    smax_ptr.checked_add(smax_val),
                ) {
                    (Some(a), Some(b)) => {
                        r.smin_value = a;
                        r.smax_value = b;
                    }
                    _ => {
                        r.smin_value = i64::MIN;
                        r.smax_value = i64::MAX;
                    }
                }
                match (
                    umin_ptr.checked_add(umin_val),
                    umax_ptr.checked_add(umax_val),
                ) {
                    (Some(a), Some(b)) => {
                        r.umin_value = a;
                        r.umax_value = b;
                    }
                    _ => {
                        r.umin_value = 0;
                        r.umax_value = u64::MAX;
                    }
                }
                r.var_off = ptr.var_off.add(off.var_off);
                copy_ptr_data(&mut r, ptr);
                r.off = ptr.off;
                if ptr.is_pkt_pointer() {
                    r.id = env.new_id();
                    r.range = 0;
                }
            }
        }
        AluOp::Sub => {
            if scalar_is_dst {
                return Err(env.reject(
                    Errno::Eacces,
                    format!("R{d} tried to subtract pointer from scalar"),
                ));
            }
            if ptr.ty == RegType::Stack {
                return Err(env.reject(
                    Errno::Eacces,
                    format!("R{d} subtraction from stack pointer prohibited"),
                ));
            }
            let fixed = ptr.off as i64 - smin_val;
            if known && fixed == fixed as i32 as i64 {
                copy_ptr_data(&mut r, ptr);
                r.smin_value = smin_ptr;
                r.smax_value = smax_ptr;
                r.umin_value = umin_ptr;
                r.umax_value = umax_ptr;
                r.var_off = ptr.var_off;
                r.id = ptr.id;
                r.off = fixed as i32;
            } else {
                match (
                    smin_ptr.checked_sub(smax_val),
                    smax_ptr.checked_sub(smin_val),
                ) {
                    (Some(a), Some(b)) => {
                        r.smin_value = a;
                        r.smax_value = b;
                    }
                    _ => {
                        r.smin_value = i64::MIN;
                        r.smax_value = i64::MAX;
                    }
                }
                if umin_ptr < umax_val {
                    r.umin_value = 0;
                    r.umax_value = u64::MAX;
                } else {
                    r.umin_value = umin_ptr - umax_val;
                    r.umax_value = umax_ptr.wrapping_sub(umin_val);
                }
                r.var_off = ptr.var_off.sub(off.var_off);
                copy_ptr_data(&mut r, ptr);
                r.off = ptr.off;
                if ptr.is_pkt_pointer() {
                    r.id = env.new_id();
                    if smin_val < 0 {
                        r.range = 0;
                    }
                }
            }
        }
        AluOp::And | AluOp::Or | AluOp::Xor => {
            return Err(env.reject(
                Errno::Eacces,
                format!(
                    "R{d} bitwise operator {} on pointer prohibited",
                    op_name(op)
                ),
            ));
        }
        _ => {
            return Err(env.reject(
                Errno::Eacces,
                format!(
                    "R{d} pointer arithmetic with {} operator prohibited",
                    op_name(op)
                ),
            ));
        }
    }
    // `scalar += fp`: the kernel copies the pointer's type and data into the scalar's
    // register, but before 7.2 not its frame number, which stays the scalar's.
    if scalar_is_dst
        && !crate::behaviour::carries_frameno_into_scalar_plus_pointer(env.input.kernel.version())
    {
        r.frameno = state.reg(dst).frameno;
        if r.ty == RegType::Stack && r.frameno != ptr.frameno {
            env.aux[env.insn_idx].kernel_flaw = Some(crate::KernelFlaw::MisframedStackPointer);
        }
    }
    check_reg_sane_offset(env, &r, &type_name)?;
    r.bounds_sync();
    *state.reg_mut(dst) = r;
    Ok(())
}

/// The per-type data a pointer carries (the kernel's `raw` union).
fn copy_ptr_data(r: &mut RegState, ptr: &RegState) {
    r.map = ptr.map;
    r.map_uid = ptr.map_uid;
    r.range = ptr.range;
    r.mem_size = ptr.mem_size;
    r.btf_id = ptr.btf_id;
    r.subprogno = ptr.subprogno;
    r.frameno = ptr.frameno;
    r.ref_obj_id = ptr.ref_obj_id;
}

/// `check_reg_sane_offset`.
fn check_reg_sane_offset(env: &mut Env<'_>, reg: &RegState, type_name: &str) -> Result<(), Reject> {
    let known = reg.var_off.is_const();
    let val = reg.var_off.value as i64;
    let smin = reg.smin_value;
    if known && (val >= BPF_MAX_VAR_OFF || val <= -BPF_MAX_VAR_OFF) {
        return Err(env.reject(
            Errno::Einval,
            format!("math between {type_name} pointer and {val} is not allowed"),
        ));
    }
    if reg.off as i64 >= BPF_MAX_VAR_OFF || reg.off as i64 <= -BPF_MAX_VAR_OFF {
        return Err(env.reject(
            Errno::Einval,
            format!("{type_name} pointer offset {} is not allowed", reg.off),
        ));
    }
    if smin == i64::MIN {
        return Err(env.reject(
            Errno::Einval,
            format!(
                "math between {type_name} pointer and register with unbounded min value is not allowed"
            ),
        ));
    }
    if smin >= BPF_MAX_VAR_OFF || smin <= -BPF_MAX_VAR_OFF {
        return Err(env.reject(
            Errno::Einval,
            format!("value {smin} makes {type_name} pointer be out of bounds"),
        ));
    }
    Ok(())
}
