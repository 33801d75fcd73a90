//! Global functions (BTF linkage `global`): 6.18's `btf_prepare_func_args`, the call-site
//! check of `btf_check_func_arg_match`, and the entry state `do_check_common` gives a global
//! function when it verifies it on its own.
//!
//! A global function is verified once, after the main program, for any arguments its BTF
//! prototype allows: an integer or enum is an unknown scalar, a pointer to the program's
//! context type is the context, any other pointer is memory of the pointee's size that may be
//! NULL (`arg:nonnull` drops the NULL). Each call site only checks that its registers fit
//! that prototype, clobbers the caller-saved registers and gets an unknown scalar back.

use crate::Errno;
use crate::env::Env;
use crate::mem::{AccessType, check_helper_mem_access};
use crate::state::VerifierState;
use crate::state::reg::{PTR_MAYBE_NULL, RegState, RegType};
use bpfemu_isa::Reg;
use bpfemu_loader::btf::{Btf, BtfKind, Linkage, TypeId};

/// `MAX_BPF_FUNC_REG_ARGS`.
const MAX_ARGS: usize = 5;

/// A prototype the kernel does not support, or a caller's registers that do not fit it; the
/// reason is in the log already.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ArgsMismatch;

/// How a global function's argument enters it (`struct bpf_subprog_arg_info`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GlobalArg {
    /// `ARG_ANYTHING`: an integer or enum.
    Scalar,
    /// `ARG_PTR_TO_CTX`.
    Ctx,
    /// `ARG_PTR_TO_MEM`, `PTR_MAYBE_NULL` unless tagged `arg:nonnull`.
    Mem { size: u32, nullable: bool },
}

/// The FUNC type func_info gives subprogram `start`, and whether its linkage is global.
pub fn func_type(
    btf: Option<&Btf>,
    func_info: &[(usize, TypeId)],
    start: usize,
) -> Option<(TypeId, bool)> {
    let btf = btf?;
    let &(_, id) = func_info.iter().find(|(insn, _)| *insn == start)?;
    match btf.get(id)?.kind {
        BtfKind::Func { linkage, .. } => Some((id, linkage == Linkage::Global)),
        _ => None,
    }
}

/// The kernel's name of a BTF kind, as `btf_type_str` prints it.
fn kind_str(kind: &BtfKind) -> &'static str {
    match kind {
        BtfKind::Void => "UNKNOWN",
        BtfKind::Int { .. } => "INT",
        BtfKind::Ptr { .. } => "PTR",
        BtfKind::Array { .. } => "ARRAY",
        BtfKind::Struct { .. } => "STRUCT",
        BtfKind::Union { .. } => "UNION",
        BtfKind::Enum { .. } => "ENUM",
        BtfKind::Enum64 { .. } => "ENUM64",
        BtfKind::Fwd { .. } => "FWD",
        BtfKind::Typedef { .. } => "TYPEDEF",
        BtfKind::Volatile { .. } => "VOLATILE",
        BtfKind::Const { .. } => "CONST",
        BtfKind::Restrict { .. } => "RESTRICT",
        BtfKind::Func { .. } => "FUNC",
        BtfKind::FuncProto { .. } => "FUNC_PROTO",
        BtfKind::Var { .. } => "VAR",
        BtfKind::DataSec { .. } => "DATASEC",
        BtfKind::Float { .. } => "FLOAT",
        BtfKind::DeclTag { .. } => "DECL_TAG",
        BtfKind::TypeTag { .. } => "TYPE_TAG",
    }
}

/// Follows modifiers, typedefs among them, as `btf_type_is_modifier` loops do.
fn skip_modifiers(btf: &Btf, mut id: TypeId) -> TypeId {
    for _ in 0..32 {
        match btf.get(id).map(|t| &t.kind) {
            Some(
                BtfKind::Const { ty }
                | BtfKind::Volatile { ty }
                | BtfKind::Restrict { ty }
                | BtfKind::TypeTag { ty }
                | BtfKind::Typedef { ty },
            ) => id = *ty,
            _ => return id,
        }
    }
    id
}

fn is_scalar(kind: &BtfKind) -> bool {
    matches!(
        kind,
        BtfKind::Int { .. } | BtfKind::Enum { .. } | BtfKind::Enum64 { .. }
    )
}

/// The `arg:` decl tags on parameter `i` of FUNC `func`.
fn arg_tags(btf: &Btf, func: TypeId, i: usize) -> Vec<&str> {
    (0..btf.type_count() as TypeId)
        .filter_map(|id| btf.get(id))
        .filter(|t| {
            matches!(t.kind, BtfKind::DeclTag { ty, component_idx } if ty == func && component_idx == i as i32)
        })
        .filter_map(|t| t.name.strip_prefix("arg:"))
        .collect()
}

/// Whether `ptr` points to the program type's context struct (`btf_get_prog_ctx_type`: the
/// struct's name is the context's, or the kernel type it stands for).
fn points_to_ctx(env: &Env<'_>, btf: &Btf, ptr: TypeId) -> bool {
    let Some(BtfKind::Ptr { ty }) = btf.get(ptr).map(|t| &t.kind) else {
        return false;
    };
    let target = skip_modifiers(btf, *ty);
    let Some(t) = btf.get(target) else {
        return false;
    };
    matches!(t.kind, BtfKind::Struct { .. })
        && ctx_type_names(env.input.prog_type).contains(&t.name.as_str())
}

/// `btf_validate_prog_ctx_type` for an `arg:ctx` pointer `ptr`: it must point to nothing
/// (`void *`) or to the program type's own context struct (for XDP, `struct xdp_md`): what
/// another program type's context would be (`u64 *` of tracing programs, `struct
/// bpf_iter__task *`) is refused with the kernel's reason.
fn validate_ctx_arg(env: &Env<'_>, btf: &Btf, ptr: TypeId, arg: usize) -> Result<(), String> {
    let Some(BtfKind::Ptr { ty }) = btf.get(ptr).map(|t| &t.kind) else {
        return Ok(());
    };
    let target = skip_modifiers(btf, *ty);
    let Some(t) = btf.get(target).filter(|_| target != 0) else {
        return Ok(());
    };
    if t.name.is_empty() {
        return Err(format!("arg#{arg} type doesn't have a name\n"));
    }
    let Some(&ctx_name) = ctx_type_names(env.input.prog_type).first() else {
        return Err(format!("arg#{arg} should be void pointer\n"));
    };
    if matches!(t.kind, BtfKind::Struct { .. }) && t.name == ctx_name {
        return Ok(());
    }
    Err(format!("arg#{arg} should be `struct {ctx_name} *`\n"))
}

/// The names a program type's context struct goes by: the UAPI one, and the kernel type it
/// stands for (`btf_is_projection_of`).
fn ctx_type_names(prog_type: u32) -> &'static [&'static str] {
    match prog_type {
        bpfemu_isa::uapi::BPF_PROG_TYPE_XDP => &["xdp_md", "xdp_buff"],
        _ => &[],
    }
}

/// `btf_prepare_func_args` for subprogram `subprog`: its arguments, or the kernel's reason
/// why the prototype is not supported, logged for a global function; a static one is refused
/// without a word, and of pointers takes only the context.
pub fn prepare_func_args(
    env: &mut Env<'_>,
    subprog: usize,
) -> Result<Vec<GlobalArg>, ArgsMismatch> {
    if let Some(args) = &env.subprogs[subprog].global_args {
        return Ok(args.clone());
    }
    let is_global = env.subprogs[subprog].is_global;
    let (Some(func), Some(btf)) = (env.subprogs[subprog].func_type, env.input.btf) else {
        return Err(ArgsMismatch);
    };
    let name = btf.name_of(func).unwrap_or_default().to_owned();
    let Some(BtfKind::Func { proto, .. }) = btf.get(func).map(|t| &t.kind) else {
        env.verbose(&format!(
            "BTF of func#{subprog} doesn't point to KIND_FUNC\n"
        ));
        return Err(ArgsMismatch);
    };
    let Some(BtfKind::FuncProto { ret, params }) = btf.get(*proto).map(|t| &t.kind) else {
        env.verbose(&format!("Invalid type of function {name}()\n"));
        return Err(ArgsMismatch);
    };
    let refuse = |env: &mut Env<'_>, reason: String| {
        if is_global {
            env.verbose(&reason);
        }
        Err(ArgsMismatch)
    };
    if params.len() > MAX_ARGS {
        return refuse(
            env,
            format!(
                "Global function {name}() with {} > {MAX_ARGS} args. Buggy compiler.\n",
                params.len()
            ),
        );
    }
    let ret_kind = btf.get(skip_modifiers(btf, *ret)).map(|t| &t.kind);
    if !ret_kind.is_some_and(is_scalar) {
        return refuse(
            env,
            format!("Global function {name}() doesn't return scalar. Only those are supported.\n"),
        );
    }
    let mut args = Vec::new();
    for (i, param) in params.iter().enumerate() {
        let tags = arg_tags(btf, func, i);
        let t = skip_modifiers(btf, param.ty);
        let kind = btf.get(t).map_or(&BtfKind::Void, |t| &t.kind);
        let tagged_ctx = tags.contains(&"ctx");
        if matches!(kind, BtfKind::Ptr { .. }) && (tagged_ctx || points_to_ctx(env, btf, t)) {
            if tagged_ctx && tags.iter().any(|&tag| tag != "ctx") {
                return refuse(env, format!("arg#{i} has invalid combination of tags\n"));
            }
            if tagged_ctx && let Err(reason) = validate_ctx_arg(env, btf, t, i) {
                return refuse(env, reason);
            }
            args.push(GlobalArg::Ctx);
            continue;
        }
        if let (BtfKind::Ptr { ty }, true) = (kind, is_global) {
            let pointee = skip_modifiers(btf, *ty);
            let Some(size) = btf.size_of(pointee).filter(|_| pointee != 0) else {
                let pk = btf.get(pointee).map_or(&BtfKind::Void, |t| &t.kind);
                let pname = btf.name_of(pointee).unwrap_or_default();
                env.verbose(&format!(
                    "arg#{i} reference type('{} {pname}') size cannot be determined: -22\n",
                    kind_str(pk)
                ));
                return Err(ArgsMismatch);
            };
            args.push(GlobalArg::Mem {
                size,
                nullable: !tags.contains(&"nonnull"),
            });
            continue;
        }
        if is_scalar(kind) {
            args.push(GlobalArg::Scalar);
            continue;
        }
        return refuse(
            env,
            format!(
                "Arg#{i} type {} in {name}() is not supported yet.\n",
                kind_str(kind)
            ),
        );
    }
    env.subprogs[subprog].global_args = Some(args.clone());
    Ok(args)
}

/// `btf_check_func_arg_match` at a call of global subprogram `subprog`: the caller's R1-R5
/// against the prototype. `Err` when they do not fit (the reason is logged).
pub fn check_call_args(
    env: &mut Env<'_>,
    state: &mut VerifierState,
    subprog: usize,
) -> Result<(), ArgsMismatch> {
    // `btf_check_subprog_call`: a function whose BTF did not fit a call once is not checked
    // again (compilers drop unused arguments of static functions).
    if env.subprogs[subprog].unreliable {
        return Err(ArgsMismatch);
    }
    let checked = match_call_args(env, state, subprog);
    if checked.is_err() {
        env.subprogs[subprog].unreliable = true;
    }
    checked
}

fn match_call_args(
    env: &mut Env<'_>,
    state: &mut VerifierState,
    subprog: usize,
) -> Result<(), ArgsMismatch> {
    let args = prepare_func_args(env, subprog)?;
    for (i, arg) in args.iter().enumerate() {
        let regno = Reg::new(i as u8 + 1).expect("R1-R5");
        let reg = *state.reg(regno);
        match *arg {
            GlobalArg::Scalar => {
                if reg.ty != RegType::Scalar {
                    env.verbose(&format!("R{} is not a scalar\n", i + 1));
                    return Err(ArgsMismatch);
                }
            }
            GlobalArg::Ctx => {
                if reg.ty == RegType::Ctx
                    && (reg.off != 0 || !reg.var_off.is_const() || reg.var_off.value != 0)
                {
                    // `check_func_arg_reg_off`: the context must be unmodified.
                    let _ = env.reject(
                        Errno::Eacces,
                        format!(
                            "dereference of modified ctx ptr R{} off={} disallowed",
                            i + 1,
                            reg.off
                        ),
                    );
                    return Err(ArgsMismatch);
                }
                if reg.ty != RegType::Ctx {
                    env.verbose(&format!("arg#{i} expects pointer to ctx\n"));
                    return Err(ArgsMismatch);
                }
            }
            GlobalArg::Mem { size, nullable } => {
                check_mem_arg(env, state, regno, size)?;
                if !nullable && reg.flags & PTR_MAYBE_NULL != 0 {
                    env.verbose(&format!("arg#{i} is expected to be non-NULL\n"));
                    return Err(ArgsMismatch);
                }
            }
        }
    }
    Ok(())
}

/// `check_mem_reg`: a NULL constant passes; otherwise `size` bytes must be readable and
/// writable through the register, taken as not NULL for the check.
fn check_mem_arg(
    env: &mut Env<'_>,
    state: &mut VerifierState,
    regno: Reg,
    size: u32,
) -> Result<(), ArgsMismatch> {
    let reg = *state.reg(regno);
    if reg.ty == RegType::Scalar && reg.var_off.is_const() && reg.var_off.value == 0 {
        return Ok(());
    }
    let saved = reg;
    if reg.flags & PTR_MAYBE_NULL != 0 {
        let mut not_null = reg;
        crate::branch::mark_ptr_not_null_reg(env, &mut not_null);
        *state.reg_mut(regno) = not_null;
    }
    let checked = check_helper_mem_access(env, state, regno, size as i32, AccessType::Read, true)
        .and_then(|()| {
            check_helper_mem_access(env, state, regno, size as i32, AccessType::Write, true)
        });
    *state.reg_mut(regno) = saved;
    checked.map_err(|_| ArgsMismatch)
}

/// The registers a global function starts with (`do_check_common` for a subprogram).
pub fn entry_regs(env: &mut Env<'_>, state: &mut VerifierState, args: &[GlobalArg]) {
    for (i, arg) in args.iter().enumerate() {
        let regno = Reg::new(i as u8 + 1).expect("R1-R5");
        let reg = match *arg {
            GlobalArg::Scalar => RegState::unknown_scalar(),
            GlobalArg::Ctx => RegState::pointer(RegType::Ctx),
            GlobalArg::Mem { size, nullable } => {
                let mut r = RegState::pointer(RegType::Mem);
                r.mem_size = size;
                if nullable {
                    r.flags |= PTR_MAYBE_NULL;
                    env.id_gen += 1;
                    r.id = env.id_gen;
                }
                r
            }
        };
        *state.reg_mut(regno) = reg;
    }
}
