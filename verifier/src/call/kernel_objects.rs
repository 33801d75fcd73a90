//! kfuncs that hand out or take kernel objects, and the sections they may need: task and cgroup
//! references (`bpf_task_from_pid`, `bpf_task_acquire`, `bpf_task_release`, the cgroup
//! counterparts), the kernel's own view of the context (`bpf_cast_to_kern_ctx`), read-only
//! casts (`bpf_rdonly_cast`), and RCU read and non-preemptible sections
//! (`bpf_rcu_read_lock/unlock`, `bpf_preempt_disable/enable`).
//!
//! Their pointer arguments are checked as `check_kfunc_args` checks `KF_ARG_PTR_TO_BTF_ID`:
//! a NULL or maybe-NULL pointer is refused to a trusted or RCU kfunc, only a `PTR_TO_BTF_ID`
//! of the struct the prototype names is taken, a referenced or trusted one (or an RCU one
//! where the kfunc allows it); a release kfunc drops the reference its argument holds. What
//! they return is a `PTR_TO_BTF_ID` of the prototype's struct, acquired (a reference to release)
//! and maybe NULL where the kfunc says so. Loads through those pointers are
//! [`crate::btf_access`]'s.

use super::kfunc::{check_ctx_arg, check_kfunc_arg};
use super::stack_obj::{SlotIndex, check_stack_obj_write, stack_slot_obj_spi};
use crate::env::Env;
use crate::state::VerifierState;
use crate::state::frame::RefKind;
use crate::state::reg::{self, RegState, RegType, reg_type_str};
use crate::state::stack::{SLOT_SIZE, SlotType};
use crate::{Errno, Reject};
use bpfemu_isa::Reg;
use bpfemu_loader::btf::{Btf, BtfKind, Param, TypeId};

/// `KF_ACQUIRE`: the returned object holds a reference the program must release.
const ACQUIRE: u32 = 1 << 0;
/// `KF_RELEASE`: the call drops the reference its argument holds.
const RELEASE: u32 = 1 << 1;
/// `KF_RET_NULL`: the result may be NULL.
const RET_NULL: u32 = 1 << 2;
/// `KF_TRUSTED_ARGS`: pointer arguments must be referenced or trusted, and not NULL.
const TRUSTED_ARGS: u32 = 1 << 3;
/// `KF_RCU`: pointer arguments may be RCU-protected rather than trusted.
const RCU: u32 = 1 << 4;
/// The result is an untrusted pointer (`bpf_get_kmem_cache`'s special case).
const UNTRUSTED_RESULT: u32 = 1 << 5;

/// The object kfuncs bpfemu checks, with their 6.18 flags (`BTF_ID_FLAGS` in
/// `kernel/bpf/helpers.c`).
const OBJECT_KFUNCS: &[(&str, u32)] = &[
    ("bpf_task_from_pid", ACQUIRE | RET_NULL),
    ("bpf_task_from_vpid", ACQUIRE | RET_NULL),
    ("bpf_task_acquire", ACQUIRE | RCU | RET_NULL),
    ("bpf_task_release", RELEASE),
    ("bpf_cgroup_from_id", ACQUIRE | RET_NULL),
    ("bpf_cgroup_acquire", ACQUIRE | RCU | RET_NULL),
    ("bpf_cgroup_ancestor", ACQUIRE | RCU | RET_NULL),
    ("bpf_cgroup_release", RELEASE),
    ("bpf_task_under_cgroup", RCU),
    ("bpf_task_get_cgroup1", ACQUIRE | RCU | RET_NULL),
    ("bpf_send_signal_task", TRUSTED_ARGS),
    ("bpf_get_kmem_cache", UNTRUSTED_RESULT),
    ("bpf_map_sum_elem_count", TRUSTED_ARGS),
    // net/xfrm/xfrm_state_bpf.c
    ("bpf_xdp_get_xfrm_state", ACQUIRE | RET_NULL),
    ("bpf_xdp_xfrm_state_release", RELEASE),
    // net/netfilter/nf_conntrack_bpf.c (the skb ones take an __sk_buff XDP has none of)
    ("bpf_skb_ct_lookup", ACQUIRE | RET_NULL),
    ("bpf_skb_ct_alloc", ACQUIRE | RET_NULL),
    ("bpf_xdp_ct_lookup", ACQUIRE | RET_NULL),
    ("bpf_xdp_ct_alloc", ACQUIRE | RET_NULL),
    ("bpf_ct_insert_entry", ACQUIRE | RET_NULL | RELEASE),
    ("bpf_ct_release", RELEASE),
    ("bpf_ct_set_timeout", TRUSTED_ARGS),
    ("bpf_ct_change_timeout", TRUSTED_ARGS),
    ("bpf_ct_set_status", TRUSTED_ARGS),
    ("bpf_ct_change_status", TRUSTED_ARGS),
    // the key kfuncs (`key_sig_kfunc_set`) XDP may call: a system keyring by id, and its
    // release (bpf_lookup_user_key and bpf_verify_pkcs7_signature sleep)
    ("bpf_lookup_system_key", ACQUIRE | RET_NULL),
    ("bpf_key_put", RELEASE),
];

/// The kfuncs this module checks.
pub fn handles(name: &str) -> bool {
    OBJECT_KFUNCS.iter().any(|(n, _)| *n == name)
        || matches!(
            name,
            "bpf_cast_to_kern_ctx"
                | "bpf_rdonly_cast"
                | "bpf_rcu_read_lock"
                | "bpf_rcu_read_unlock"
                | "bpf_preempt_disable"
                | "bpf_preempt_enable"
                | "bpf_local_irq_save"
                | "bpf_local_irq_restore"
        )
}

/// Checks a call of the kfunc `name` ([`handles`]) with prototype `params`, returning `ret`.
pub fn check_call(
    env: &mut Env<'_>,
    state: &mut VerifierState,
    btf: &Btf,
    name: &str,
    params: &[Param],
    ret: TypeId,
    pc: usize,
) -> Result<(), Reject> {
    match name {
        "bpf_rcu_read_lock"
        | "bpf_rcu_read_unlock"
        | "bpf_preempt_disable"
        | "bpf_preempt_enable" => {
            enter_or_leave_section(env, state, name)?;
            state.clobber_caller_saved();
            *state.reg_mut(Reg::R0) = RegState::not_init();
            Ok(())
        }
        "bpf_cast_to_kern_ctx" => cast_to_kern_ctx(env, state, btf),
        "bpf_local_irq_save" | "bpf_local_irq_restore" => {
            irq_flag(env, state, name == "bpf_local_irq_save", pc)?;
            state.clobber_caller_saved();
            *state.reg_mut(Reg::R0) = RegState::not_init();
            Ok(())
        }
        "bpf_rdonly_cast" => rdonly_cast(env, state, btf, name, params),
        _ => {
            let flags = OBJECT_KFUNCS
                .iter()
                .find(|(n, _)| *n == name)
                .map_or(0, |&(_, f)| f);
            object_call(env, state, btf, name, flags, params, ret, pc)
        }
    }
}

/// The RCU and preemption bookkeeping of `check_kfunc_call`.
fn enter_or_leave_section(
    env: &mut Env<'_>,
    state: &mut VerifierState,
    name: &str,
) -> Result<(), Reject> {
    match name {
        "bpf_rcu_read_lock"
            if crate::behaviour::nests_rcu_read_locks(env.input.kernel.version()) =>
        {
            state.active_rcu_lock += 1;
            Ok(())
        }
        "bpf_rcu_read_lock" if state.active_rcu_lock > 0 => Err(env.reject(
            Errno::Einval,
            format!("nested rcu read lock (kernel function {name})"),
        )),
        "bpf_rcu_read_lock" => {
            state.active_rcu_lock = 1;
            Ok(())
        }
        "bpf_rcu_read_unlock" if state.active_rcu_lock == 0 => Err(env.reject(
            Errno::Einval,
            format!("unmatched rcu read unlock (kernel function {name})"),
        )),
        "bpf_rcu_read_unlock" if state.active_rcu_lock > 1 => {
            // An inner section's end (7.2 nests them): the outer one still protects.
            state.active_rcu_lock -= 1;
            Ok(())
        }
        "bpf_rcu_read_unlock" => {
            // RCU-protected pointers outlive the section only as untrusted ones.
            state.for_each_reg_mut(|r| {
                if r.flags & reg::MEM_RCU != 0 {
                    r.flags &= !(reg::MEM_RCU | reg::PTR_MAYBE_NULL);
                    r.flags |= reg::PTR_UNTRUSTED;
                }
            });
            state.active_rcu_lock = 0;
            Ok(())
        }
        "bpf_preempt_disable" => {
            state.active_preempt_locks += 1;
            Ok(())
        }
        _ if state.active_preempt_locks == 0 => Err(env.reject(
            Errno::Einval,
            format!("unmatched attempt to enable preemption (kernel function {name})"),
        )),
        _ => {
            state.active_preempt_locks -= 1;
            Ok(())
        }
    }
}

/// `process_irq_flag` for `bpf_local_irq_save(flags)` (`save`) and `bpf_local_irq_restore`:
/// the flags live in one stack slot typed `STACK_IRQ_FLAG` that holds an irq reference; irq
/// states are restored in the reverse order of their saves.
fn irq_flag(
    env: &mut Env<'_>,
    state: &mut VerifierState,
    save: bool,
    pc: usize,
) -> Result<(), Reject> {
    let reg = *state.reg(Reg::R1);
    if reg.ty != RegType::Stack {
        return Err(env.reject(Errno::Einval, "arg#0 doesn't point to an irq flag on stack"));
    }
    let frame = reg.frameno as usize;
    let spi = stack_slot_obj_spi(env, state, &reg, "irq_flag", 1);
    if save {
        let uninit = match spi {
            SlotIndex::NotAllocated => true,
            SlotIndex::Invalid => false,
            SlotIndex::At(spi) => !state.frames[frame].stack[spi]
                .slot_type
                .contains(&SlotType::IrqFlag),
        };
        if !uninit {
            let arg = super::call_arg_name(env, 0, "arg#0".into());
            return Err(env.reject(
                Errno::Einval,
                format!("expected uninitialized irq flag as {arg}"),
            ));
        }
        check_stack_obj_write(env, state, Reg::R1, 1)?;
        let SlotIndex::At(spi) = stack_slot_obj_spi(env, state, &reg, "irq_flag", 1) else {
            return Err(env.reject(Errno::Efault, "verifier bug: irq flag slot not allocated"));
        };
        let id = env.new_id();
        state.acquire_reference(RefKind::Irq, id, pc);
        state.active_irq_id = id;
        let slot = &mut state.frames[frame].stack[spi];
        let mut st = RegState::pointer(RegType::Stack);
        st.ref_obj_id = id;
        slot.spilled_ptr = st;
        slot.slot_type = [SlotType::IrqFlag; SLOT_SIZE];
        env.log.scratch_stack(spi);
        crate::stack_liveness::mark_write(env, state, frame, crate::stack_liveness::slot_bit(spi));
        return Ok(());
    }
    let spi = match spi {
        SlotIndex::At(spi)
            if state.frames[frame].stack[spi]
                .slot_type
                .iter()
                .all(|&t| t == SlotType::IrqFlag)
                && state.frames[frame].stack[spi].spilled_ptr.ref_obj_id != 0 =>
        {
            spi
        }
        _ => {
            let name = super::call_arg_name(env, 0, "arg#0".into());
            let msg = format!("expected an initialized irq flag as {name}");
            return Err(env.reject(Errno::Einval, msg));
        }
    };
    let bit = crate::stack_liveness::slot_bit(spi);
    crate::stack_liveness::mark_read(env, state, frame, bit);
    let id = state.frames[frame].stack[spi].spilled_ptr.ref_obj_id;
    if id != state.active_irq_id {
        let active = state.active_irq_id;
        let at = state
            .refs
            .iter()
            .find(|r| r.id == active)
            .map_or(0, |r| r.insn_idx);
        return Err(env.reject(
            Errno::Einval,
            format!("cannot restore irq state out of order, expected id={active} acquired at insn_idx={at}"),
        ));
    }
    state.release_reference_state(id);
    // The irq state saved before it is the active one again.
    state.active_irq_id = state
        .refs
        .iter()
        .rev()
        .find(|r| r.kind == RefKind::Irq)
        .map_or(0, |r| r.id);
    let slot = &mut state.frames[frame].stack[spi];
    slot.spilled_ptr = RegState::not_init();
    slot.slot_type = [SlotType::Invalid; SLOT_SIZE];
    env.log.scratch_stack(spi);
    crate::stack_liveness::mark_write(env, state, frame, bit);
    Ok(())
}

/// `bpf_cast_to_kern_ctx(ctx)`: the unmodified context becomes a trusted `struct xdp_buff *`.
fn cast_to_kern_ctx(env: &mut Env<'_>, state: &mut VerifierState, btf: &Btf) -> Result<(), Reject> {
    check_ctx_arg(env, state.reg(Reg::R1), 0)?;
    let Some(xdp_buff) = btf.find_by_name_kind("xdp_buff", |k| matches!(k, BtfKind::Struct { .. }))
    else {
        return Err(env.reject(Errno::Einval, "vmlinux BTF has no struct xdp_buff"));
    };
    state.clobber_caller_saved();
    let mut r0 = RegState::pointer(RegType::BtfId);
    r0.btf_id = xdp_buff;
    r0.flags = reg::PTR_TRUSTED;
    *state.reg_mut(Reg::R0) = r0;
    Ok(())
}

/// `bpf_rdonly_cast(obj, btf_id__k)`: any value becomes an untrusted pointer to the struct
/// `btf_id` names (read with probe-read semantics), or to untrusted read-only memory for `void`.
fn rdonly_cast(
    env: &mut Env<'_>,
    state: &mut VerifierState,
    btf: &Btf,
    name: &str,
    params: &[Param],
) -> Result<(), Reject> {
    // The object (`obj__ign`) may be anything.
    if let Some(p) = params.get(1) {
        check_kfunc_arg(env, state, btf, name, 1, p)?;
    }
    let r2 = *state.reg(Reg::R2);
    if !r2.var_off.is_const() {
        return Err(env.reject(Errno::Einval, "R2 must be a known constant"));
    }
    // A constant argument (`__k`) is made precise: the kfunc's result depends on its value.
    crate::precision::mark_chain_precision(env, state, Reg::R2)?;
    let id = r2.var_off.value;
    let target = u32::try_from(id).ok().and_then(|id| {
        if id == 0 {
            return Some((0, true));
        }
        btf.get(id)
            // `btf_type_is_struct`: a union is one too.
            .map(|t| {
                (
                    id,
                    matches!(t.kind, BtfKind::Struct { .. } | BtfKind::Union { .. }),
                )
            })
    });
    // 6.12 casts to structs only, and says so of any other id, known or not.
    let to_struct = matches!(target, Some((id, true)) if id != 0);
    if !to_struct && !crate::behaviour::casts_rdonly_to_void(env.input.kernel.version()) {
        return Err(env.reject(
            Errno::Einval,
            format!("kfunc {name} type ID argument must be of a struct"),
        ));
    }
    let mut r0 = match target {
        None => {
            return Err(env.reject(
                Errno::Einval,
                format!("Unknown type ID {} passed to kfunc {name}", id as i64),
            ));
        }
        Some((0, _)) => {
            let mut r = RegState::pointer(RegType::Mem);
            r.flags = reg::MEM_RDONLY | reg::PTR_UNTRUSTED;
            r
        }
        Some((id, true)) => {
            let mut r = RegState::pointer(RegType::BtfId);
            r.btf_id = id;
            r.flags = reg::PTR_UNTRUSTED;
            r
        }
        Some(_) => {
            return Err(env.reject(
                Errno::Einval,
                format!("kfunc {name} type ID argument must be of a struct or void"),
            ));
        }
    };
    r0.id = 0;
    state.clobber_caller_saved();
    *state.reg_mut(Reg::R0) = r0;
    Ok(())
}

/// A task or cgroup kfunc: its arguments, the release, the returned object.
#[allow(clippy::too_many_arguments)]
fn object_call(
    env: &mut Env<'_>,
    state: &mut VerifierState,
    btf: &Btf,
    name: &str,
    flags: u32,
    params: &[Param],
    ret: TypeId,
    pc: usize,
) -> Result<(), Reject> {
    let mut release_ref = 0;
    let mut i = 0;
    while i < params.len() {
        let param = &params[i];
        let sized = params.get(i + 1).is_some_and(|p| p.name.ends_with("__sz"));
        match struct_pointee(btf, param.ty) {
            // A buffer and its size (`KF_ARG_PTR_TO_MEM_SIZE`); the size is not looked at again.
            _ if sized => {
                check_mem_size_pair(env, state, i)?;
                i += 1;
            }
            Some(pointee) if !is_ctx_struct(btf, pointee) => {
                if let Some(r) = check_object_arg(env, state, btf, name, flags, i, pointee)? {
                    release_ref = r;
                }
            }
            _ => check_kfunc_arg(env, state, btf, name, i, param)?,
        }
        i += 1;
    }
    if flags & RELEASE != 0 {
        if release_ref == 0 {
            return Err(env.reject(
                Errno::Einval,
                format!("release kernel function {name} expects refcounted PTR_TO_BTF_ID"),
            ));
        }
        if !super::helper::release_reference(state, release_ref) {
            return Err(env.reject(
                Errno::Einval,
                format!(
                    "kfunc {name}#{} reference has not been acquired before",
                    env.insn_idx
                ),
            ));
        }
    }
    state.clobber_caller_saved();
    let Some(pointee) = struct_pointee(btf, ret) else {
        // void or a scalar (`bpf_task_under_cgroup`'s long).
        *state.reg_mut(Reg::R0) = match btf.skip_mods_and_typedefs(ret) {
            Some(0) | None => RegState::not_init(),
            Some(_) => RegState::unknown_scalar(),
        };
        return Ok(());
    };
    let mut r0 = RegState::pointer(RegType::BtfId);
    r0.btf_id = pointee;
    if flags & UNTRUSTED_RESULT != 0 {
        r0.flags |= reg::PTR_UNTRUSTED;
    }
    if flags & RET_NULL != 0 {
        r0.flags |= reg::PTR_MAYBE_NULL;
        r0.id = env.new_id();
    }
    if flags & ACQUIRE != 0 {
        let id = env.new_id();
        state.acquire_reference(RefKind::Ptr, id, pc);
        if flags & RET_NULL != 0 {
            r0.id = id;
        }
        r0.ref_obj_id = id;
    }
    *state.reg_mut(Reg::R0) = r0;
    Ok(())
}

/// Whether `id` is the program's context struct (`struct xdp_md`), a `KF_ARG_PTR_TO_CTX`.
fn is_ctx_struct(btf: &Btf, id: TypeId) -> bool {
    btf.get(id).is_some_and(|t| t.name == "xdp_md")
}

/// `KF_ARG_PTR_TO_MEM_SIZE`: the memory argument `i` and its size argument `i + 1`, read and
/// written as helpers' memory and size pairs are (`check_kfunc_mem_size_reg`).
fn check_mem_size_pair(
    env: &mut Env<'_>,
    state: &mut VerifierState,
    i: usize,
) -> Result<(), Reject> {
    let mem = Reg::new(i as u8 + 1).expect("argument register");
    let size = Reg::new(i as u8 + 2).expect("argument register");
    let saved = *state.reg(mem);
    // `check_func_arg_reg_off`: what is not a memory pointer must sit at a constant offset.
    let memory = matches!(
        saved.ty,
        RegType::Stack
            | RegType::Packet
            | RegType::PacketMeta
            | RegType::MapKey
            | RegType::MapValue
            | RegType::Mem
    );
    if !memory && !saved.var_off.is_const() {
        let ty = reg_type_str(saved.ty, saved.flags, env.input.kernel.version());
        return Err(env.reject(
            Errno::Eacces,
            format!(
                "variable {ty} access var_off={} disallowed",
                saved.var_off.text()
            ),
        ));
    }
    // A maybe-NULL buffer is checked as if it were not NULL.
    state.reg_mut(mem).flags &= !reg::PTR_MAYBE_NULL;
    let checked =
        crate::mem::check_mem_size_reg(env, state, mem, size, crate::mem::AccessType::Read, true)
            .and_then(|()| {
                crate::mem::check_mem_size_reg(
                    env,
                    state,
                    mem,
                    size,
                    crate::mem::AccessType::Write,
                    true,
                )
            });
    *state.reg_mut(mem) = saved;
    let (mem_arg, len_arg) = (
        super::call_arg_name(env, i, format!("arg#{i}")),
        super::call_arg_name(env, i + 1, format!("arg#{}", i + 1)),
    );
    checked.map_err(|e| {
        env.reject(
            e.errno,
            format!("{mem_arg} {len_arg} memory, len pair leads to invalid memory access"),
        )
    })
}

/// `btf_struct_ids_match`: `have` is `want`, or (not strict) holds it as its first member at
/// offset 0, at any depth.
pub(crate) fn struct_ids_match(btf: &Btf, mut have: TypeId, want: TypeId, strict: bool) -> bool {
    loop {
        if have == want {
            return true;
        }
        if strict {
            return false;
        }
        let first = match btf.get(have).map(|t| &t.kind) {
            Some(BtfKind::Struct { members, .. }) => members.first().filter(|m| m.bit_offset == 0),
            _ => None,
        };
        match first.and_then(|m| btf.skip_mods_and_typedefs(m.ty)) {
            Some(next)
                if matches!(btf.get(next).map(|t| &t.kind), Some(BtfKind::Struct { .. })) =>
            {
                have = next
            }
            _ => return false,
        }
    }
}

/// A name without its `___flavour` suffix (`bpf_core_essential_name_len`).
fn essential_name(name: &str) -> &str {
    name.find("___").map_or(name, |at| &name[..at])
}

/// `__btf_type_is_scalar_struct`: whether struct `id` is made of scalars (nested structs and
/// arrays of scalars included, three levels deep at most).
fn is_scalar_struct(env: &mut Env<'_>, btf: &Btf, id: TypeId, depth: u32) -> bool {
    let Some(BtfKind::Struct { members, .. } | BtfKind::Union { members, .. }) =
        btf.get(id).map(|t| t.kind.clone())
    else {
        return false;
    };
    let is_scalar = |id: TypeId| {
        matches!(
            btf.get(id).map(|t| &t.kind),
            Some(BtfKind::Int { .. } | BtfKind::Enum { .. } | BtfKind::Enum64 { .. })
        )
    };
    for m in members {
        let Some(ty) = btf.skip_mods_and_typedefs(m.ty) else {
            return false;
        };
        match btf.get(ty).map(|t| &t.kind) {
            Some(BtfKind::Struct { .. } | BtfKind::Union { .. }) => {
                if depth >= 3 {
                    env.verbose("max struct nesting depth exceeded\n");
                    return false;
                }
                if !is_scalar_struct(env, btf, ty, depth + 1) {
                    return false;
                }
            }
            Some(BtfKind::Array { elem, len, .. }) => {
                let elem = btf.skip_mods_and_typedefs(*elem).unwrap_or(0);
                if *len == 0 || !is_scalar(elem) {
                    return false;
                }
            }
            _ if is_scalar(ty) => {}
            _ => return false,
        }
    }
    true
}

/// The struct a pointer type points to, when it does.
fn struct_pointee(btf: &Btf, ty: TypeId) -> Option<TypeId> {
    let ptr = btf.skip_mods_and_typedefs(ty)?;
    let BtfKind::Ptr { ty: pointee } = btf.get(ptr)?.kind else {
        return None;
    };
    let id = btf.skip_mods_and_typedefs(pointee)?;
    matches!(btf.get(id)?.kind, BtfKind::Struct { .. }).then_some(id)
}

/// A `KF_ARG_PTR_TO_BTF_ID` argument `i` of a struct `pointee`; returns the reference a release
/// kfunc drops with it.
fn check_object_arg(
    env: &mut Env<'_>,
    state: &mut VerifierState,
    btf: &Btf,
    name: &str,
    flags: u32,
    i: usize,
    pointee: TypeId,
) -> Result<Option<u32>, Reject> {
    let regno = i + 1;
    let reg = *state.reg(Reg::new(regno as u8).expect("argument register"));
    // Release kfuncs take trusted arguments.
    let trusted_or_rcu = flags & (RELEASE | RCU | TRUSTED_ARGS) != 0;
    if trusted_or_rcu && (reg.is_const_scalar(0) || reg.flags & reg::PTR_MAYBE_NULL != 0) {
        return Err(env.reject(
            Errno::Eacces,
            format!(
                "Possibly NULL pointer passed to trusted {}",
                super::call_arg_name(env, i, format!("arg{i}"))
            ),
        ));
    }
    let struct_name = btf.get(pointee).map_or("", |t| t.name.as_str()).to_owned();
    // A map pointer is a trusted `struct bpf_map` (`reg2btf_ids[CONST_PTR_TO_MAP]`).
    if reg.ty == RegType::ConstPtrToMap && struct_name == "bpf_map" {
        return Ok(None);
    }
    if reg.ty != RegType::BtfId {
        // Anything else would be memory of a struct made of scalars; these structs are not
        // (the walk logs where it gives up, as the kernel's does).
        is_scalar_struct(env, btf, pointee, 0);
        let arg = super::call_arg_name(env, i, format!("arg#{i}"));
        return Err(env.reject(
            Errno::Einval,
            format!(
                "{arg} pointer type STRUCT {struct_name} must point to scalar, or struct with scalar"
            ),
        ));
    }
    let trusted = reg.ref_obj_id != 0
        || (reg.flags & (reg::PTR_TRUSTED | reg::MEM_ALLOC) != 0
            && reg.flags & !(reg::PTR_TRUSTED | reg::MEM_ALLOC) == 0);
    if trusted_or_rcu && !trusted {
        if flags & RCU == 0 {
            return Err(env.reject(
                Errno::Einval,
                format!("R{regno} must be referenced or trusted"),
            ));
        }
        if reg.flags & reg::MEM_RCU == 0 {
            return Err(env.reject(Errno::Einval, format!("R{regno} must be a rcu pointer")));
        }
    }
    if reg.off != 0 || !reg.var_off.is_const() || reg.var_off.value != 0 {
        let what = if flags & RELEASE != 0 && reg.ref_obj_id != 0 {
            format!(
                "R{regno} must have zero offset when passed to release func or trusted arg to kfunc"
            )
        } else {
            format!("R{regno} has non-zero offset")
        };
        return Err(env.reject(Errno::Einval, what));
    }
    // Releasing needs the exact type, and so does a flavour of the same struct
    // (`nf_conn___init` is no `nf_conn`: `btf_type_ids_nocast_alias`).
    let have_name = btf.get(reg.btf_id).map_or("", |t| t.name.as_str());
    let strict = (flags & RELEASE != 0 && reg.ref_obj_id != 0)
        || essential_name(have_name) == essential_name(&struct_name);
    if !struct_ids_match(btf, reg.btf_id, pointee, strict) {
        let got = btf
            .get(reg.btf_id)
            .map_or("", |t| t.name.as_str())
            .to_owned();
        let arg = super::call_arg_name(env, i, format!("args#{i}"));
        return Err(env.reject(
            Errno::Einval,
            format!(
                "kernel function {name} {arg} expected pointer to STRUCT {struct_name} but R{regno} has a pointer to STRUCT {got}"
            ),
        ));
    }
    Ok((flags & RELEASE != 0 && reg.ref_obj_id != 0).then_some(reg.ref_obj_id))
}
