//! kfunc calls (`check_kfunc_call`): the kernel functions XDP may call, by BTF id against the
//! vmlinux BTF of the kernel the program is loaded into ([`crate::ProgramInput::kernel`]). The arguments are checked from the
//! function's BTF prototype as `check_kfunc_args` does: scalars, the program's context
//! (`struct xdp_md *`), and pointers to scalars as memory of the pointee's size.
//!
//! Before the walk every kfunc call is looked up (`add_kfunc_call`): an id that is no function
//! is refused, and so are the XDP metadata kfuncs (`bpf_xdp_metadata_rx_timestamp`, `_rx_hash`,
//! `_rx_vlan_tag`) unless the program is device-bound (`BPF_F_XDP_DEV_BOUND_ONLY`), as in
//! 6.18. Their arguments are then checked as below; the kernel comparison covers only the
//! refusal (a device-bound load needs a device). `bpf_dynptr_from_xdp` makes an XDP dynptr of
//! its `ptr__uninit` argument; the numeric iterator is checked in [`super::iter`]. Other kfuncs
//! XDP may call ([`super::kfunc_sets`]) answer "not yet supported"; other kernel functions are
//! refused as the kernel refuses them. Every pointer argument is checked for NULL before its
//! type ("Possibly NULL pointer passed to trusted argN"): the running 6.18 kernel (6.18.44)
//! treats every kfunc's pointer arguments as trusted, unless named `__nullable` or `__opt`.

use super::dynptr::process_dynptr_func;
use super::proto::{ArgBase, ArgType, DYNPTR_TYPE_XDP, MEM_RDONLY, MEM_UNINIT};
use crate::env::Env;
use crate::mem::{AccessType, check_helper_mem_access, check_mem_size_reg};
use crate::profile::kfuncs;
use crate::state::VerifierState;
use crate::state::reg::{self, RegState, RegType};
use crate::{Errno, Reject};
use bpfemu_isa::{KernelVersion, Reg};
use bpfemu_loader::btf::{Btf, BtfKind, Param, TypeId};

/// The kfuncs bpfemu checks here, all in the kfunc sets 6.18 gives XDP ([`kfunc_sets`]);
/// iterators ([`super::iter`]) and kernel objects ([`super::kernel_objects`]) name theirs.
const SUPPORTED: &[&str] = &[
    "bpf_xdp_metadata_rx_timestamp",
    "bpf_xdp_metadata_rx_hash",
    "bpf_xdp_metadata_rx_vlan_tag",
    "bpf_dynptr_from_xdp",
    "bpf_dynptr_slice",
    "bpf_dynptr_slice_rdwr",
    "bpf_dynptr_size",
    "bpf_dynptr_is_null",
    "bpf_dynptr_is_rdonly",
    "bpf_dynptr_adjust",
    "bpf_dynptr_clone",
    "bpf_dynptr_copy",
    "bpf_dynptr_memset",
    "bpf_xdp_pull_data",
    "bpf_strcasecmp",
    "bpf_strchr",
    "bpf_strchrnul",
    "bpf_strcmp",
    "bpf_strcspn",
    "bpf_strlen",
    "bpf_strnchr",
    "bpf_strnlen",
    "bpf_strnstr",
    "bpf_strrchr",
    "bpf_strspn",
    "bpf_strstr",
    "bpf_throw",
];

/// `BPF_F_XDP_DEV_BOUND_ONLY`: the program is bound to one device (with its metadata kfuncs).
const BPF_F_XDP_DEV_BOUND_ONLY: u32 = 1 << 6;

/// `add_kfunc_call` for every kfunc call of the program, before the walk: the program's
/// license must be GPL-compatible, the id must name a function of vmlinux BTF, and the
/// metadata kfuncs need a device-bound program.
pub fn add_kfunc_calls(input: &crate::ProgramInput<'_>) -> Result<(), crate::check::CheckError> {
    const EINVAL: i32 = 22;
    let error = |message: String| crate::check::CheckError::new(EINVAL, None, message);
    let mut pc = 0;
    while pc < input.insns.len() {
        let insn = input.insns[pc];
        pc += if insn.code == 0x18 { 2 } else { 1 };
        let is_kfunc_call = insn.code == 0x85 && insn.src == 2 && insn.off == 0;
        // Checked at the first kfunc call (of vmlinux or a module), before its id is looked up.
        if insn.code == 0x85 && insn.src == 2 && !input.gpl_compatible {
            return Err(error(
                "cannot call kernel function from non-GPL compatible program".to_owned(),
            ));
        }
        // vmlinux BTF is read only for programs that call kfuncs.
        let Some(btf) = is_kfunc_call.then(|| input.vmlinux_btf()).flatten() else {
            continue;
        };
        let func = btf
            .get(insn.imm as TypeId)
            .filter(|t| matches!(t.kind, BtfKind::Func { .. }));
        let Some(func) = func else {
            return Err(error(format!(
                "kernel btf_id {} is not a function",
                insn.imm
            )));
        };
        let dev_bound = input.prog_flags & BPF_F_XDP_DEV_BOUND_ONLY != 0;
        if func.name.starts_with("bpf_xdp_metadata_") && !dev_bound {
            return Err(error(
                "metadata kfuncs require device-bound program".to_owned(),
            ));
        }
    }
    Ok(())
}

/// Whether the kfunc `btf_id` of vmlinux moves the packet (`is_kfunc_pkt_changing`).
pub fn changes_pkt_data(input: &crate::ProgramInput<'_>, btf_id: i32) -> bool {
    input
        .vmlinux_btf()
        .and_then(|btf| btf.get(btf_id as TypeId))
        .is_some_and(|f| moves_the_packet(&f.name))
}

/// The kfuncs after which pointers into the packet are gone (6.18: `bpf_xdp_pull_data`).
fn moves_the_packet(name: &str) -> bool {
    name == "bpf_xdp_pull_data"
}

/// Checks a call of the kfunc `btf_id` (module BTF `off`, 0 for vmlinux) at `pc`.
pub fn check_kfunc_call(
    env: &mut Env<'_>,
    state: &mut VerifierState,
    pc: usize,
    btf_id: i32,
    off: i16,
) -> Result<(), Reject> {
    if off != 0 {
        return Err(env.reject(
            Errno::Enotsupp,
            format!("not yet supported: kfunc {btf_id} in module BTF {off}"),
        ));
    }
    let Some(btf) = env.input.vmlinux_btf() else {
        return Err(env.reject(
            Errno::Enotsupp,
            format!(
                "not yet supported: kfunc call without {}",
                env.input.kernel.btf_path().display()
            ),
        ));
    };
    let func = btf
        .get(btf_id as TypeId)
        .filter(|t| matches!(t.kind, BtfKind::Func { .. }));
    let Some(func) = func else {
        return Err(env.reject(
            Errno::Einval,
            format!("kernel btf_id {btf_id} is not a function"),
        ));
    };
    let name = func.name.as_str();
    let kernel = env.input.kernel.version();
    if !kfuncs::xdp_may_call(kernel, name) {
        return Err(env.reject(
            Errno::Eacces,
            format!("calling kernel function {name} is not allowed"),
        ));
    }
    if kfuncs::is_sleepable(kernel, name) {
        return Err(env.reject(
            Errno::Eacces,
            format!("program must be sleepable to call sleepable kfunc {name}"),
        ));
    }
    // What a compiler emits for `__builtin_trap()`, mostly where it proved a variable read
    // before it is set: the kernel refuses it wherever it is reached (check_kfunc_call).
    if name == "__bpf_trap" {
        return Err(env.reject(
            Errno::Efault,
            "unexpected __bpf_trap() due to uninitialized variable?",
        ));
    }
    let checked = SUPPORTED.contains(&name)
        || super::iter::iter_op(name).is_some()
        || super::kernel_objects::handles(name);
    if !checked {
        return Err(env.reject(Errno::Enotsupp, format!("not yet supported: kfunc {name}")));
    }
    let BtfKind::Func { proto, .. } = func.kind else {
        unreachable!("filtered to functions above")
    };
    let Some(BtfKind::FuncProto { params, ret }) = btf.get(proto).map(|t| &t.kind) else {
        return Err(env.reject(
            Errno::Einval,
            format!("kernel function {name} has no prototype"),
        ));
    };
    if crate::behaviour::trusts_every_kfunc_pointer_arg(kernel) {
        refuse_null_pointer_args(env, state, btf, params)?;
    }
    if super::kernel_objects::handles(name) {
        return super::kernel_objects::check_call(env, state, btf, name, params, *ret, pc);
    }
    if let Some(op) = super::iter::iter_op(name) {
        return super::iter::check_iter_call(env, state, btf, name, op, params, pc);
    }
    if name.starts_with("bpf_dynptr_slice") {
        return check_dynptr_slice(env, state, btf, name, params);
    }
    for (i, param) in params.iter().enumerate() {
        check_kfunc_arg(env, state, btf, name, i, param)?;
    }
    state.clobber_caller_saved();
    *state.reg_mut(Reg::R0) = RegState::unknown_scalar();
    if moves_the_packet(name) {
        state.invalidate_packet_pointers();
        env.seen_direct_write = true;
    }
    Ok(())
}

/// `check_kfunc_args`' NULL rule as the running 6.18 kernel has it: every kfunc takes trusted
/// pointer arguments (the `KF_TRUSTED_ARGS` default), so a pointer argument that is NULL (a
/// scalar known to be 0) or maybe NULL is refused before anything else is checked of it,
/// unless its name marks it optional (`__nullable`, `__opt`). Arguments named `__ign` and
/// scalar ones are not pointers to the verifier.
///
/// The kernel applies the rule argument by argument, after the checks of the arguments before;
/// here it runs over all of them first, which gives the same answer unless an earlier argument
/// has an error of another kind.
fn refuse_null_pointer_args(
    env: &mut Env<'_>,
    state: &VerifierState,
    btf: &Btf,
    params: &[Param],
) -> Result<(), Reject> {
    for (i, param) in params.iter().enumerate().take(5) {
        let is_pointer = btf
            .skip_mods_and_typedefs(param.ty)
            .and_then(|id| btf.get(id))
            .is_some_and(|t| matches!(t.kind, BtfKind::Ptr { .. }));
        let optional = ["__nullable", "__opt", "__ign"]
            .iter()
            .any(|suffix| param.name.ends_with(suffix));
        if !is_pointer || optional {
            continue;
        }
        let reg = state.reg(Reg::new(i as u8 + 1).expect("argument register"));
        if reg.is_const_scalar(0) || reg.flags & reg::PTR_MAYBE_NULL != 0 {
            return Err(env.reject(
                Errno::Eacces,
                format!(
                    "Possibly NULL pointer passed to trusted {}",
                    super::call_arg_name(env, i, format!("arg{i}"))
                ),
            ));
        }
    }
    Ok(())
}

/// One argument (`check_kfunc_args` for the argument kinds the supported kfuncs have).
pub(super) fn check_kfunc_arg(
    env: &mut Env<'_>,
    state: &mut VerifierState,
    btf: &Btf,
    func: &str,
    i: usize,
    param: &Param,
) -> Result<(), Reject> {
    let regno = i + 1;
    let r = Reg::new(regno as u8).expect("argument register");
    // Arguments named `__ign` are not checked at all (the string kfuncs read them as unsafe
    // pointers themselves).
    if param.name.ends_with("__ign") {
        return Ok(());
    }
    // No `!read_ok` first: the kernel checks each argument's type, and an uninitialised
    // register is just of the wrong one ("R2 is not a scalar").
    let reg = *state.reg(r);
    let t = btf
        .skip_mods_and_typedefs(param.ty)
        .and_then(|id| btf.get(id));
    let pointee = match t.map(|t| &t.kind) {
        Some(BtfKind::Ptr { ty }) => *ty,
        Some(BtfKind::Int { .. } | BtfKind::Enum { .. } | BtfKind::Enum64 { .. }) => {
            if reg.ty != RegType::Scalar {
                return Err(env.reject(Errno::Einval, format!("R{regno} is not a scalar")));
            }
            return Ok(());
        }
        _ => {
            return Err(env.reject(
                Errno::Enotsupp,
                format!("not yet supported: argument {i} of kernel function {func}"),
            ));
        }
    };
    if points_to_struct(btf, param.ty, "bpf_dynptr") {
        return check_dynptr_arg(env, state, func, regno as u8, param);
    }
    let pointee_id = btf.skip_mods_and_typedefs(pointee).unwrap_or(0);
    let pointee_t = btf.get(pointee_id);
    if pointee_t.is_some_and(|t| t.name == "xdp_md" && matches!(t.kind, BtfKind::Struct { .. })) {
        return check_ctx_arg(env, &reg, i);
    }
    let scalar = pointee_t.is_some_and(|t| {
        matches!(
            t.kind,
            BtfKind::Int { .. } | BtfKind::Enum { .. } | BtfKind::Enum64 { .. }
        )
    });
    let Some(size) = btf.size_of(pointee_id).filter(|_| scalar) else {
        return Err(env.reject(
            Errno::Enotsupp,
            format!("not yet supported: argument {i} of kernel function {func}"),
        ));
    };
    check_helper_mem_access(env, state, r, size as i32, AccessType::Read, true)?;
    check_helper_mem_access(env, state, r, size as i32, AccessType::Write, true)
}

/// A `KF_ARG_PTR_TO_CTX` argument `i`: the program's context, unmodified.
pub(super) fn check_ctx_arg(env: &mut Env<'_>, reg: &RegState, i: usize) -> Result<(), Reject> {
    if reg.ty != RegType::Ctx {
        let ty = crate::state::reg::reg_type_str(reg.ty, reg.flags, env.input.kernel.version());
        return Err(env.reject(
            Errno::Einval,
            format!("arg#{i} expected pointer to ctx, but got {ty}"),
        ));
    }
    if reg.off != 0 || !reg.var_off.is_const() || reg.var_off.value != 0 {
        return Err(env.reject(
            Errno::Eacces,
            format!(
                "dereference of modified ctx ptr R{} off={} disallowed",
                i + 1,
                reg.off
            ),
        ));
    }
    Ok(())
}

/// Whether `ty` is a pointer to the struct `name`.
pub(crate) fn points_to_struct(btf: &Btf, ty: TypeId, name: &str) -> bool {
    let t = btf.skip_mods_and_typedefs(ty).and_then(|id| btf.get(id));
    let Some(BtfKind::Ptr { ty: pointee }) = t.map(|t| &t.kind) else {
        return false;
    };
    let pointee = btf
        .skip_mods_and_typedefs(*pointee)
        .and_then(|id| btf.get(id));
    pointee.is_some_and(|p| p.name == name && matches!(p.kind, BtfKind::Struct { .. }))
}

/// A `struct bpf_dynptr *` argument (`KF_ARG_PTR_TO_DYNPTR`): a parameter named `__uninit`
/// is filled by the call, and `bpf_dynptr_from_xdp` makes an XDP dynptr of it.
fn check_dynptr_arg(
    env: &mut Env<'_>,
    state: &mut VerifierState,
    func: &str,
    regno: u8,
    param: &Param,
) -> Result<(), Reject> {
    let mut flags = 0;
    // A dynptr a global function received is read-only.
    if state.reg(Reg::new(regno).expect("argument register")).ty == RegType::ConstPtrToDynptr {
        flags |= MEM_RDONLY;
    }
    if param.name.ends_with("__uninit") {
        flags |= MEM_UNINIT;
    }
    if func == "bpf_dynptr_from_xdp" {
        flags |= DYNPTR_TYPE_XDP;
    }
    // A clone is a dynptr of the kind of the one it clones (R1, checked before it).
    if func == "bpf_dynptr_clone" && flags & MEM_UNINIT != 0 {
        let source = *state.reg(Reg::R1);
        match super::dynptr::arg_kind_of(state, &source) {
            Some(kind) => flags |= kind,
            None => {
                return Err(env.reject(
                    Errno::Enotsupp,
                    "not yet supported: bpf_dynptr_clone of a referenced dynptr",
                ));
            }
        }
    }
    let arg = ArgType::with(ArgBase::PtrToDynptr, flags);
    let pc = env.insn_idx;
    process_dynptr_func(env, state, regno, arg, pc)
}

/// `bpf_dynptr_slice(p, offset, buffer__opt, buffer__szk)` and `_rdwr`: the dynptr, a scalar
/// offset, an optional buffer whose size is the known constant that follows
/// (`KF_ARG_PTR_TO_MEM_SIZE`); R0 is memory of that size or NULL (`KF_RET_NULL`), read-only for
/// `bpf_dynptr_slice`, and for an XDP dynptr a slice of the packet.
fn check_dynptr_slice(
    env: &mut Env<'_>,
    state: &mut VerifierState,
    btf: &Btf,
    name: &str,
    params: &[Param],
) -> Result<(), Reject> {
    let [dynptr, offset, _buffer, _size] = params else {
        return Err(env.reject(
            Errno::Einval,
            format!("kernel function {name} has an unexpected prototype"),
        ));
    };
    check_kfunc_arg(env, state, btf, name, 0, dynptr)?;
    check_kfunc_arg(env, state, btf, name, 1, offset)?;
    for regno in [3u8, 4] {
        if state.reg(Reg::new(regno).expect("argument register")).ty == RegType::NotInit {
            return Err(env.reject(Errno::Eacces, format!("R{regno} !read_ok")));
        }
    }
    let buffer_is_null = state.reg(Reg::R3).is_const_scalar(0);
    if !buffer_is_null {
        let checked = check_mem_size_reg(env, state, Reg::R3, Reg::R4, AccessType::Read, true)
            .and_then(|()| {
                check_mem_size_reg(env, state, Reg::R3, Reg::R4, AccessType::Write, true)
            });
        if let Err(e) = checked {
            let (mem_arg, len_arg) = (
                super::call_arg_name(env, 2, "arg#2".into()),
                super::call_arg_name(env, 3, "arg#3".into()),
            );
            return Err(env.reject(
                e.errno,
                format!("{mem_arg} {len_arg} memory, len pair leads to invalid memory access"),
            ));
        }
    }
    let size_reg = *state.reg(Reg::R4);
    if !size_reg.var_off.is_const() {
        return Err(env.reject(Errno::Einval, "R4 must be a known constant"));
    }
    let dynptr_reg = *state.reg(Reg::R1);
    let packet = super::dynptr::is_xdp_dynptr(state, &dynptr_reg);
    let ref_obj_id = super::dynptr::slice_ref_obj_id(state, &dynptr_reg);
    state.clobber_caller_saved();
    let mut r0 = RegState::pointer(RegType::Mem);
    r0.mem_size = size_reg.var_off.value as u32;
    r0.flags = reg::PTR_MAYBE_NULL;
    if name == "bpf_dynptr_slice" {
        r0.flags |= reg::MEM_RDONLY;
    }
    if packet {
        r0.flags |= reg::MEM_PKT_SLICE;
    }
    r0.ref_obj_id = ref_obj_id;
    r0.id = env.new_id();
    *state.reg_mut(Reg::R0) = r0;
    Ok(())
}

/// How many parameters the vmlinux kfunc `btf_id` takes (for the liveness of its argument
/// registers, as `get_call_summary` counts them); `None` when vmlinux BTF does not say.
pub fn kfunc_param_count(
    kernel: KernelVersion,
    vmlinux: Option<&Btf>,
    btf_id: TypeId,
) -> Option<usize> {
    let btf = vmlinux?;
    // A kfunc the program type may not call is not looked up: all five argument registers.
    if !kfuncs::xdp_may_call(kernel, &btf.get(btf_id)?.name) {
        return None;
    }
    func_params(btf, btf_id).map(<[Param]>::len)
}

/// Whether the call of vmlinux kfunc `btf_id` (module `off`) is `bpf_throw`.
pub fn is_throw(vmlinux: Option<&Btf>, btf_id: i32, off: i16) -> bool {
    off == 0
        && vmlinux
            .and_then(|btf| btf.name_of(btf_id as TypeId))
            .is_some_and(|name| name == "bpf_throw")
}

/// The parameters of the function `btf_id` of `btf`.
pub fn func_params(btf: &Btf, btf_id: TypeId) -> Option<&[Param]> {
    func_proto(btf, btf_id).map(|(params, _)| params)
}

/// The parameters and return type of the function `btf_id` of `btf`.
pub fn func_proto(btf: &Btf, btf_id: TypeId) -> Option<(&[Param], TypeId)> {
    let BtfKind::Func { proto, .. } = btf.get(btf_id)?.kind else {
        return None;
    };
    match &btf.get(proto)?.kind {
        BtfKind::FuncProto { params, ret } => Some((params, *ret)),
        _ => None,
    }
}
