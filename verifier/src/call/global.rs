//! Global functions (BTF linkage `global`): 6.18's `btf_prepare_func_args`, the call-site
//! check of `btf_check_func_arg_match`, and the entry state `do_check_common` gives a global
//! function when it verifies it on its own.
//!
//! A global function is verified once, after the main program, for any arguments its BTF
//! prototype allows: an integer or enum is an unknown scalar, a pointer to the program's
//! context type (or tagged `arg:ctx`) is the context, a `struct bpf_dynptr *` a read-only
//! dynptr, a pointer tagged `arg:trusted` a trusted kernel object of the pointee's name (NULL
//! too with `arg:nullable`), one tagged `arg:untrusted` an untrusted kernel object (or
//! read-only memory of size 0 for `void *` and integers), `arg:arena` an arena pointer or
//! scalar, and any other pointer memory of the pointee's size that may be NULL (`arg:nonnull`
//! drops the NULL). Each call site only checks that its registers fit that prototype,
//! clobbers the caller-saved registers and gets an unknown scalar back.

use crate::Errno;
use crate::btf_access::struct_ids_match_at;
use crate::call::dynptr::{const_dynptr_reg, process_dynptr_func};
use crate::call::helper::{check_func_arg_reg_off, check_reg_type};
use crate::call::proto::{ArgBase, ArgType};
use crate::env::Env;
use crate::mem::{AccessType, check_helper_mem_access};
use crate::profile;
use crate::state::VerifierState;
use crate::state::reg::{
    MEM_RDONLY, PTR_MAYBE_NULL, PTR_TRUSTED, PTR_UNTRUSTED, RegState, RegType,
};
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
    /// `ARG_PTR_TO_MEM | MEM_RDONLY | PTR_UNTRUSTED` of size 0 (`arg:untrusted` on `void *`
    /// or a pointer to an integer or enum): the caller may pass anything.
    UntrustedMem,
    /// `ARG_PTR_TO_BTF_ID` to vmlinux type `btf_id`: `PTR_TRUSTED` (`arg:trusted`, with
    /// `PTR_MAYBE_NULL` when also `arg:nullable`) or `PTR_UNTRUSTED` (`arg:untrusted`, which
    /// takes anything).
    BtfId { btf_id: TypeId, flags: u32 },
    /// `ARG_PTR_TO_ARENA` (`arg:arena`): an arena pointer or a scalar.
    Arena,
    /// `ARG_PTR_TO_DYNPTR | MEM_RDONLY` (a `struct bpf_dynptr *`): an initialised dynptr,
    /// which the function receives read-only.
    Dynptr,
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

/// The `arg:` decl tags a parameter may carry (`enum btf_arg_tag`).
mod tag {
    pub const CTX: u32 = 1 << 0;
    pub const NONNULL: u32 = 1 << 1;
    pub const TRUSTED: u32 = 1 << 2;
    pub const UNTRUSTED: u32 = 1 << 3;
    pub const NULLABLE: u32 = 1 << 4;
    pub const ARENA: u32 = 1 << 5;

    /// The bit of tag `arg:name`, if the kernel knows it.
    pub fn bit(name: &str) -> Option<u32> {
        Some(match name {
            "ctx" => CTX,
            "trusted" => TRUSTED,
            "untrusted" => UNTRUSTED,
            "nonnull" => NONNULL,
            "nullable" => NULLABLE,
            "arena" => ARENA,
            _ => return None,
        })
    }
}

/// The `arg:` decl tags on parameter `i` of FUNC `func`, as a set of `tag` bits. A static
/// function may carry none, and an unknown tag is refused: both are logged whatever the
/// linkage.
fn arg_tags(
    env: &mut Env<'_>,
    btf: &Btf,
    func: TypeId,
    i: usize,
    is_global: bool,
) -> Result<u32, ArgsMismatch> {
    if !profile::global_funcs::reads_arg_tags(env.input.kernel.version()) {
        return Ok(0);
    }
    let names = (0..btf.type_count() as TypeId)
        .filter_map(|id| btf.get(id))
        .filter(|t| {
            matches!(t.kind, BtfKind::DeclTag { ty, component_idx } if ty == func && component_idx == i as i32)
        })
        .filter_map(|t| t.name.strip_prefix("arg:"));
    let mut tags = 0;
    for name in names {
        if !is_global {
            env.verbose(&format!(
                "arg#{i} type tag is not supported in static functions\n"
            ));
            return Err(ArgsMismatch);
        }
        let Some(bit) = tag::bit(name) else {
            env.verbose(&format!("arg#{i} has unsupported set of tags\n"));
            return Err(ArgsMismatch);
        };
        tags |= bit;
    }
    Ok(tags)
}

/// Why one parameter is refused: `Some` is the reason still to log (for a global function),
/// `None` says it is logged already.
type ArgRefusal = Option<String>;

/// One parameter of type `ty` with `tags` (the loop body of `btf_prepare_func_args`): the
/// context, a dynptr, a kernel object (`arg:trusted`, `arg:untrusted`), arena memory, memory of
/// the pointee's size (global functions), or a scalar.
fn prepare_arg(
    env: &mut Env<'_>,
    btf: &Btf,
    (ty, i): (TypeId, usize),
    fname: &str,
    tags: u32,
    is_global: bool,
) -> Result<GlobalArg, ArgRefusal> {
    let t = skip_modifiers(btf, ty);
    let kind = btf.get(t).map_or(&BtfKind::Void, |t| &t.kind);
    let BtfKind::Ptr { ty: pointee } = *kind else {
        if tags != 0 {
            return Err(Some(format!(
                "arg#{i} has pointer tag, but is not a pointer type\n"
            )));
        }
        if is_scalar(kind) {
            return Ok(GlobalArg::Scalar);
        }
        return Err(Some(format!(
            "Arg#{i} type {} in {}() is not supported yet.\n",
            kind_str(kind),
            fname
        )));
    };
    if tags & tag::CTX != 0 || points_to_ctx(env, btf, t) {
        if tags & !tag::CTX != 0 {
            return Err(Some(format!("arg#{i} has invalid combination of tags\n")));
        }
        if tags & tag::CTX != 0 {
            validate_ctx_arg(env, btf, t, i).map_err(Some)?;
        }
        return Ok(GlobalArg::Ctx);
    }
    if !profile::global_funcs::takes_memory_pointers(env.input.kernel.version()) {
        return Err(Some(format!(
            "Arg#{i} type {} in {}() is not supported yet.\n",
            kind_str(kind),
            fname
        )));
    }
    if is_dynptr_ptr(btf, pointee) {
        if tags != 0 {
            return Err(Some(format!("arg#{i} has invalid combination of tags\n")));
        }
        return Ok(GlobalArg::Dynptr);
    }
    if tags & tag::TRUSTED != 0 {
        if tags & tag::NONNULL != 0 {
            return Err(Some(format!("arg#{i} has invalid combination of tags\n")));
        }
        let btf_id = kernel_type_of(env, btf, pointee, i)?;
        let nullable = if tags & tag::NULLABLE != 0 {
            PTR_MAYBE_NULL
        } else {
            0
        };
        return Ok(GlobalArg::BtfId {
            btf_id,
            flags: PTR_TRUSTED | nullable,
        });
    }
    if tags & tag::UNTRUSTED != 0 {
        return untrusted_arg(env, btf, pointee, i, tags);
    }
    if tags & tag::ARENA != 0 {
        if tags & !tag::ARENA != 0 {
            return Err(Some(format!(
                "arg#{i} arena cannot be combined with any other tags\n"
            )));
        }
        return Ok(GlobalArg::Arena);
    }
    if !is_global {
        return Err(Some(format!(
            "Arg#{i} type {} in {}() is not supported yet.\n",
            kind_str(kind),
            fname
        )));
    }
    if tags & tag::NULLABLE != 0 {
        return Err(Some(format!("arg#{i} has invalid combination of tags\n")));
    }
    let pointee = skip_modifiers(btf, pointee);
    let Some(size) = btf.size_of(pointee).filter(|_| pointee != 0) else {
        let pk = btf.get(pointee).map_or(&BtfKind::Void, |t| &t.kind);
        let pname = btf.name_of(pointee).unwrap_or_default();
        env.verbose(&format!(
            "arg#{i} reference type('{} {pname}') size cannot be determined: -22\n",
            kind_str(pk)
        ));
        return Err(None);
    };
    Ok(GlobalArg::Mem {
        size,
        nullable: tags & tag::NONNULL == 0,
    })
}

/// `btf_is_dynptr_ptr`: the pointee is `struct bpf_dynptr`, defined or only declared.
fn is_dynptr_ptr(btf: &Btf, pointee: TypeId) -> bool {
    let target = skip_modifiers(btf, pointee);
    btf.get(target).is_some_and(|t| {
        matches!(
            t.kind,
            BtfKind::Struct { .. } | BtfKind::Fwd { union: false }
        ) && t.name == "bpf_dynptr"
    })
}

/// `arg:untrusted` (alone): read-only memory of size 0 for `void *` and pointers to integers
/// or enums, else an untrusted pointer to the kernel struct of the pointee's name.
fn untrusted_arg(
    env: &mut Env<'_>,
    btf: &Btf,
    pointee: TypeId,
    i: usize,
    tags: u32,
) -> Result<GlobalArg, ArgRefusal> {
    if tags & !tag::UNTRUSTED != 0 {
        return Err(Some(format!(
            "arg#{i} untrusted cannot be combined with any other tags\n"
        )));
    }
    let target = skip_modifiers(btf, pointee);
    if target == 0 || btf.get(target).is_some_and(|t| is_primitive(&t.kind)) {
        return Ok(GlobalArg::UntrustedMem);
    }
    let btf_id = kernel_type_of(env, btf, pointee, i)?;
    let vmlinux = env.input.vmlinux_btf().ok_or(None)?;
    let kind = vmlinux.get(btf_id).map_or(&BtfKind::Void, |t| &t.kind);
    if !matches!(kind, BtfKind::Struct { .. } | BtfKind::Union { .. }) {
        // The kernel names the parameter's pointer type here, which has no name.
        return Err(Some(format!(
            "arg#{i} has type {} '', but only struct or primitive types are allowed\n",
            kind_str(kind)
        )));
    }
    Ok(GlobalArg::BtfId {
        btf_id,
        flags: PTR_UNTRUSTED,
    })
}

/// `btf_type_is_primitive`: an integer of whole bytes at bit offset 0, or an enum.
fn is_primitive(kind: &BtfKind) -> bool {
    match *kind {
        BtfKind::Int {
            bit_offset, bits, ..
        } => bit_offset == 0 && bits % 8 == 0 && matches!(bits / 8, 1 | 2 | 4 | 8 | 16),
        BtfKind::Enum { .. } | BtfKind::Enum64 { .. } => true,
        _ => false,
    }
}

/// `btf_get_ptr_to_btf_id`: the one vmlinux type of the pointee's kind whose name is the
/// pointee's without its `___flavour` suffix.
fn kernel_type_of(
    env: &mut Env<'_>,
    btf: &Btf,
    pointee: TypeId,
    i: usize,
) -> Result<TypeId, ArgRefusal> {
    let local = skip_modifiers(btf, pointee);
    let (kind, name) = btf
        .get(local)
        .filter(|_| local != 0)
        .map_or((&BtfKind::Void, ""), |t| (&t.kind, t.name.as_str()));
    let what = format!("arg#{i} reference type('{} {name}')", kind_str(kind));
    if name.is_empty() {
        return Err(Some(format!("{what} candidate matching error: -22\n")));
    }
    let Some(vmlinux) = env.input.vmlinux_btf() else {
        return Err(Some(format!("{what} has no matches\n")));
    };
    let essential = essential_name(name);
    let number = kind.kind_number();
    let mut cands = (1..vmlinux.type_count() as TypeId).filter(|&id| {
        vmlinux
            .get(id)
            .is_some_and(|t| t.kind.kind_number() == number && essential_name(&t.name) == essential)
    });
    match (cands.next(), cands.next()) {
        (Some(id), None) => Ok(id),
        (None, _) => Err(Some(format!("{what} has no matches\n"))),
        (Some(_), Some(_)) => Err(Some(format!("{what} is ambiguous\n"))),
    }
}

/// A name without its `___flavour` suffix (`bpf_core_essential_name_len`).
fn essential_name(name: &str) -> &str {
    name.find("___").map_or(name, |at| &name[..at])
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
            env.subprogs[subprog].args_refusal = Some(reason.trim_end().to_owned());
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
        let tags = arg_tags(env, btf, func, i, is_global)?;
        match prepare_arg(env, btf, (param.ty, i), &name, tags, is_global) {
            Ok(arg) => args.push(arg),
            Err(Some(reason)) => return refuse(env, reason),
            Err(None) => return Err(ArgsMismatch),
        }
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
                    let arg = super::call_arg_name(env, i, format!("arg#{i}"));
                    env.verbose(&format!("{arg} expects pointer to ctx\n"));
                    return Err(ArgsMismatch);
                }
            }
            // Anything may be passed as untrusted: it is read-only and read with probe
            // semantics.
            GlobalArg::UntrustedMem => {}
            GlobalArg::BtfId { flags, .. } if flags & PTR_UNTRUSTED != 0 => {}
            GlobalArg::BtfId { btf_id, flags } => check_btf_id_arg(env, &reg, i, btf_id, flags)?,
            GlobalArg::Arena => {
                if !matches!(reg.ty, RegType::Arena | RegType::Scalar) {
                    env.verbose(&format!(
                        "R{} is not a pointer to arena or scalar.\n",
                        i + 1
                    ));
                    return Err(ArgsMismatch);
                }
            }
            GlobalArg::Dynptr => {
                let dynptr = ArgType::with(ArgBase::PtrToDynptr, MEM_RDONLY);
                check_func_arg_reg_off(env, &reg, i + 1, ArgType::new(ArgBase::PtrToDynptr))
                    .and_then(|()| process_dynptr_func(env, state, i as u8 + 1, dynptr, 0))
                    .map_err(|_| ArgsMismatch)?;
            }
            GlobalArg::Mem { size, nullable } => {
                let dont_care = ArgType::new(ArgBase::DontCare);
                check_func_arg_reg_off(env, &reg, i + 1, dont_care).map_err(|_| ArgsMismatch)?;
                check_mem_arg(env, state, regno, size)?;
                check_mem_arg_as_7_2(env, &reg, i, subprog, nullable)?;
                if !nullable && reg.flags & PTR_MAYBE_NULL != 0 {
                    let arg = super::call_arg_name(env, i, format!("arg#{i}"));
                    env.verbose(&format!("{arg} is expected to be non-NULL\n"));
                    return Err(ArgsMismatch);
                }
            }
        }
    }
    Ok(())
}

/// What 7.2 refuses of a memory argument that 6.18 takes
/// ([`crate::behaviour::refuses_null_and_stale_packet_global_args`]): a packet pointer (or a
/// slice of a packet dynptr) when the function may change packet data, and a NULL constant
/// when the argument is not nullable.
fn check_mem_arg_as_7_2(
    env: &mut Env<'_>,
    reg: &RegState,
    i: usize,
    subprog: usize,
    nullable: bool,
) -> Result<(), ArgsMismatch> {
    if !crate::behaviour::refuses_null_and_stale_packet_global_args(env.input.kernel.version()) {
        if !nullable && reg.is_const_scalar(0) {
            env.aux[env.insn_idx].kernel_flaw = Some(crate::KernelFlaw::NullForNonNullArgument);
        }
        return Ok(());
    }
    let packet_slice = reg.ty == RegType::Mem && reg.flags & crate::state::reg::MEM_PKT_SLICE != 0;
    if (reg.is_pkt_pointer_any() || packet_slice) && env.subprogs[subprog].changes_pkt_data {
        env.verbose(&format!(
            "R{} is a packet pointer, but func#{subprog} may change packet data\n",
            i + 1
        ));
        return Err(ArgsMismatch);
    }
    if !nullable && reg.is_const_scalar(0) {
        env.verbose(&format!("R{} is expected to be non-NULL\n", i + 1));
        return Err(ArgsMismatch);
    }
    Ok(())
}

/// A trusted kernel object argument (`ARG_PTR_TO_BTF_ID | PTR_TRUSTED`): NULL when the
/// argument is nullable, else a kernel pointer (`check_reg_type`) holding a `btf_id` at its
/// offset, which may be fixed but not variable (`check_func_arg_reg_off`).
fn check_btf_id_arg(
    env: &mut Env<'_>,
    reg: &RegState,
    i: usize,
    btf_id: TypeId,
    flags: u32,
) -> Result<(), ArgsMismatch> {
    let nullable = flags & PTR_MAYBE_NULL;
    if nullable != 0 && reg.is_const_scalar(0) {
        return Ok(());
    }
    let arg_type = ArgType::with(ArgBase::PtrToBtfId, nullable);
    check_reg_type(env, reg, i + 1, arg_type).map_err(|_| ArgsMismatch)?;
    let vmlinux = env.input.vmlinux_btf().ok_or(ArgsMismatch)?;
    let off = u32::try_from(reg.off).unwrap_or(u32::MAX);
    if !struct_ids_match_at(vmlinux, reg.btf_id, off, btf_id) {
        let have = vmlinux.name_of(reg.btf_id).unwrap_or_default().to_owned();
        let want = vmlinux.name_of(btf_id).unwrap_or_default().to_owned();
        env.verbose(&format!(
            "R{} is of type {have} but {want} is expected\n",
            i + 1
        ));
        return Err(ArgsMismatch);
    }
    check_func_arg_reg_off(env, reg, i + 1, arg_type).map_err(|_| ArgsMismatch)
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
            GlobalArg::UntrustedMem => {
                let mut r = RegState::pointer(RegType::Mem);
                r.flags = MEM_RDONLY | PTR_UNTRUSTED;
                r
            }
            GlobalArg::BtfId { btf_id, flags } => {
                let mut r = RegState::pointer(RegType::BtfId);
                r.flags = flags;
                r.btf_id = btf_id;
                env.id_gen += 1;
                r.id = env.id_gen;
                r
            }
            // The caller may pass an arena pointer or a scalar.
            GlobalArg::Arena => RegState::unknown_scalar(),
            // Whatever the caller's dynptr, the function takes it as a local one.
            GlobalArg::Dynptr => {
                env.id_gen += 1;
                const_dynptr_reg(env.id_gen)
            }
        };
        *state.reg_mut(regno) = reg;
    }
}
