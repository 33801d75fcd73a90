//! Helper calls (`check_helper_call`): the 6.18 prototype of every helper XDP may call
//! ([`super::proto`]), argument checks in the kernel's order (`check_func_arg`: initialised,
//! packet access, register type against the argument's compatible types, offsets, then what
//! the argument type asks: map key and value sizes, memory and its size register, constant
//! allocation sizes, callbacks), map/helper compatibility both ways, R0's type, clobbered
//! R1-R5, packet pointers dropped after helpers that change packet data, and references for
//! ring buffer records.

use super::callback::{CallbackKind, callback_args, enter_callback, push_callback_call};
use super::proto::{
    self, ArgBase, ArgType, FuncProto, MEM_ALIGNED, MEM_FIXED_SIZE, MEM_RDONLY, MEM_UNINIT,
    MEM_WRITE, PTR_MAYBE_NULL, RetType, helper_display_name, xdp_proto,
};
use crate::env::Env;
use crate::mem::{AccessType, check_helper_mem_access, check_mem_size_reg};
use crate::precision::mark_chain_precision;
use crate::state::reg::{self, RegState, RegType};
use crate::state::stack::{SLOT_SIZE, SlotType};
use crate::state::{RefKind, Tnum, VerifierState};
use crate::{Errno, Reject};
use bpfemu_isa::helpers::id;
use bpfemu_isa::uapi::*;
use bpfemu_isa::{KernelVersion, Reg};

/// `MAX_ERRNO`: the most negative error a helper returns.
const MAX_ERRNO: i64 = 4095;

/// What the argument checks learn for the rest of the call (`struct bpf_call_arg_meta`).
#[derive(Clone, Debug, Default)]
struct CallMeta {
    /// The map argument's index in the program's maps.
    map: Option<u32>,
    map_uid: u32,
    /// Whether the helper may read packet memory.
    pkt_access: bool,
    /// The register an `OBJ_RELEASE` argument is in.
    release_regno: Option<u8>,
    ref_obj_id: u32,
    /// `ARG_CONST_ALLOC_SIZE_OR_ZERO`: the allocation's size.
    mem_size: u64,
    /// `ARG_CONST_SIZE*`: the size register's `umax`, for return refinement.
    msize_max_value: u64,
    /// The callback subprogram of an `ARG_PTR_TO_FUNC`.
    subprogno: Option<u32>,
    /// The constant key of an array lookup (`const_map_key`), when known.
    const_map_key: Option<u64>,
    /// The reference of the dynptr argument, for the slices of `bpf_dynptr_data`.
    dynptr_ref_obj_id: u32,
}

/// Number of arguments of helper `func_id` by its prototype (the kernel's call summary for
/// register liveness); `None` when XDP may not call it, which counts all of R1-R5 as read.
pub fn helper_param_count(func_id: i32) -> Option<usize> {
    xdp_proto(func_id).map(FuncProto::arg_count)
}

/// Runs a memory argument's check with the kernel's `raw_mode` set when the argument `mem` is
/// written before it is read (`MEM_UNINIT`): its stack bytes then count as no read.
fn in_raw_mode<T>(
    env: &mut Env<'_>,
    mem: ArgType,
    check: impl FnOnce(&mut Env<'_>) -> Result<T, Reject>,
) -> Result<T, Reject> {
    env.raw_mode_arg = mem.flags & MEM_UNINIT != 0;
    let checked = check(env);
    env.raw_mode_arg = false;
    checked
}

/// Checks `call func_id` at `pc` against the helper's prototype and applies its effects to
/// `state`: R1-R5 clobbered, R0 set, packet pointers invalidated when it changes packet data,
/// references acquired or released, callback frames pushed (the walk continues at the
/// callback's start when `state.frames` grew).
/// `can_elide_value_nullness`: an array lookup by a constant key in range cannot miss, so
/// its result needs no NULL check; not in an inner map template marked `BPF_F_INNER_MAP`,
/// which stands for arrays of any size (the key proves nothing about the one found).
fn can_elide_value_nullness(map: &bpfemu_loader::MapSpec) -> bool {
    map.map_flags & bpfemu_isa::uapi::BPF_F_INNER_MAP == 0
        && matches!(map.map_type, BPF_MAP_TYPE_ARRAY | BPF_MAP_TYPE_PERCPU_ARRAY)
}

pub fn check_helper_call(
    env: &mut Env<'_>,
    state: &mut VerifierState,
    pc: usize,
    func_id: i32,
) -> Result<(), Reject> {
    // The helpers there are and those XDP may call are the kernel version's.
    if let Some(refusal) = crate::profile::helpers::refusal(env.input.kernel.version(), func_id) {
        return Err(env.reject(Errno::Einval, refusal));
    }
    let Some(proto) = proto::xdp_proto_of(env.input.kernel.version(), func_id) else {
        return Err(env.reject(Errno::Efault, "verifier bug: a helper without prototype"));
    };
    let proto = &proto;
    if proto.gpl_only && !env.input.gpl_compatible {
        return Err(env.reject(
            Errno::Einval,
            "cannot call GPL-restricted function from non-GPL compatible program",
        ));
    }
    if proto.might_sleep {
        let msg = if crate::behaviour::words_sleeping_calls_by_context(env.input.kernel.version()) {
            format!(
                "sleepable helper {}#{func_id} in {}",
                helper_display_name(func_id),
                non_sleepable_context(state)
            )
        } else {
            "helper call might sleep in a non-sleepable prog".to_owned()
        };
        return Err(env.reject(Errno::Einval, msg));
    }
    let mut meta = CallMeta {
        pkt_access: proto.pkt_access,
        ..CallMeta::default()
    };
    for arg in 0..5 {
        check_func_arg(env, state, proto, arg, &mut meta)?;
    }
    record_func_map(env, state, pc, func_id, &meta)?;
    if func_id == proto::TAIL_CALL && !is_prog_array(env, meta.map) {
        // 6.18's message has no newline: the log runs on into its closing line.
        let (msg, end) =
            match crate::behaviour::words_tail_call_map_check(env.input.kernel.version()) {
                true => ("expected prog array map for tail call", ""),
                false => ("kernel subsystem misconfigured verifier", "\n"),
            };
        env.log.verbose(&format!("{msg}{end}"));
        return Err(Reject {
            errno: Errno::Einval,
            msg: msg.to_owned(),
            logged: true,
        });
    }
    release_argument(env, state, proto, &meta)?;
    let callback_now = special_cases(env, state, pc, proto, &meta)?;
    state.clobber_caller_saved();
    set_return_value(env, state, pc, proto, &meta)?;
    check_map_func_compatibility(env, meta.map, func_id)?;
    let tail_call_forgets = func_id == crate::call::proto::TAIL_CALL
        && crate::behaviour::forgets_packets_at_every_tail_call(env.input.kernel.version());
    if proto.changes_pkt_data() || tail_call_forgets {
        state.invalidate_packet_pointers();
        env.seen_direct_write = true;
    }
    // The caller's frame has the call's effects; the walk goes on in the callback.
    if let Some((subprog, args)) = callback_now {
        enter_callback(env, state, pc, subprog, args)?;
    }
    Ok(())
}

fn is_prog_array(env: &Env<'_>, map: Option<u32>) -> bool {
    map.and_then(|m| env.map(m))
        .is_some_and(|spec| spec.map_type == BPF_MAP_TYPE_PROG_ARRAY)
}

fn reg_of(arg: usize) -> Reg {
    Reg::new(arg as u8 + 1).expect("R1-R5")
}

/// `check_func_arg` for argument `arg` (0-based; the register is `arg + 1`).
fn check_func_arg(
    env: &mut Env<'_>,
    state: &mut VerifierState,
    proto: &FuncProto,
    arg: usize,
    meta: &mut CallMeta,
) -> Result<(), Reject> {
    let mut arg_type = proto.args[arg];
    if arg_type.base == ArgBase::DontCare {
        return Ok(());
    }
    let regno = arg + 1;
    let r = reg_of(arg);
    let reg = *state.reg(r);
    if reg.ty == RegType::NotInit {
        return Err(env.reject(Errno::Eacces, format!("R{regno} !read_ok")));
    }
    if arg_type.base == ArgBase::Anything {
        // Root may pass pointers as plain numbers: no "leaks addr" check.
        return Ok(());
    }
    if reg.is_pkt_pointer() && !meta.pkt_access {
        return Err(env.reject(Errno::Eacces, "helper access to the packet is not allowed"));
    }
    if arg_type.base == ArgBase::PtrToMapValue {
        resolve_map_arg_type(env, meta, proto.id, &mut arg_type)?;
    }
    let null = reg.is_const_scalar(0);
    if !(null && arg_type.may_be_null()) {
        check_reg_type(env, &reg, regno, arg_type)?;
        check_func_arg_reg_off(env, &reg, regno, arg_type)?;
    }
    let version = env.input.kernel.version();
    if arg_type.is_release()
        && arg_type.base == ArgBase::PtrToDynptr
        && crate::behaviour::releases_dynptrs_as_dynptr_args(version)
    {
        // The dynptr's own checks (initialised, of the argument's kind, not a caller's) say
        // what may be released.
        meta.release_regno = Some(regno as u8);
    } else if arg_type.is_release() && arg_type.base == ArgBase::PtrToDynptr {
        if reg.ty != RegType::Stack {
            return Err(env.reject(Errno::Einval, "cannot release unowned const bpf_dynptr"));
        }
        if super::dynptr::dynptr_ref_obj_id(env, state, &reg) == 0 {
            return Err(env.reject(
                Errno::Einval,
                format!("arg {regno} is an unacquired reference"),
            ));
        }
        meta.release_regno = Some(regno as u8);
    } else if arg_type.is_release() {
        if reg.ref_obj_id == 0 && !null {
            let words = match crate::behaviour::names_call_args_by_register(version) {
                true => format!(
                    "release helper {} expects referenced PTR_TO_BTF_ID passed to R{regno}",
                    proto.name()
                ),
                false => format!("R{regno} must be referenced when passed to release function"),
            };
            return Err(env.reject(Errno::Einval, words));
        }
        meta.release_regno = Some(regno as u8);
    }
    if reg.ref_obj_id != 0 && arg_type.base != ArgBase::KptrXchgDest {
        if meta.ref_obj_id != 0 {
            return Err(env.reject(
                Errno::Eacces,
                format!(
                    "more than one arg with ref_obj_id R{regno} {} {}",
                    meta.ref_obj_id, reg.ref_obj_id
                ),
            ));
        }
        meta.ref_obj_id = reg.ref_obj_id;
    }
    check_arg_by_type(env, state, proto, arg, arg_type, meta)
}

/// The part of `check_func_arg` that depends on the argument's base type.
fn check_arg_by_type(
    env: &mut Env<'_>,
    state: &mut VerifierState,
    proto: &FuncProto,
    arg: usize,
    arg_type: ArgType,
    meta: &mut CallMeta,
) -> Result<(), Reject> {
    let regno = arg + 1;
    let r = reg_of(arg);
    let reg = *state.reg(r);
    match arg_type.base {
        ArgBase::ConstMapPtr => {
            // bpf_timer_init's map must be the timer's (an inner map: the same one).
            if meta.map.is_some() && (meta.map != reg.map || meta.map_uid != reg.map_uid) {
                return Err(env.reject(
                    Errno::Einval,
                    format!(
                        "timer pointer in R1 map_uid={} doesn't match map pointer in R2 map_uid={}",
                        meta.map_uid, reg.map_uid
                    ),
                ));
            }
            meta.map = reg.map;
            meta.map_uid = reg.map_uid;
        }
        ArgBase::PtrToMapKey => {
            let key_size = map_spec(env, meta, "key")?.key_size;
            check_helper_mem_access(env, state, r, key_size as i32, AccessType::Read, false)?;
            if crate::behaviour::elides_array_lookup_nullness(env.input.kernel.version())
                && can_elide_value_nullness(map_spec(env, meta, "key")?)
            {
                meta.const_map_key = constant_map_key(env, state, &reg, key_size)?;
            }
        }
        ArgBase::PtrToMapValue => {
            if arg_type.may_be_null() && reg.is_const_scalar(0) {
                return Ok(());
            }
            let value_size = map_spec(env, meta, "value")?.value_size;
            let access = if arg_type.flags & MEM_WRITE != 0 {
                AccessType::Write
            } else {
                AccessType::Read
            };
            in_raw_mode(env, arg_type, |env| {
                check_helper_mem_access(env, state, r, value_size as i32, access, false)
            })?;
        }
        ArgBase::PtrToFunc => meta.subprogno = Some(reg.subprogno),
        ArgBase::PtrToMem if arg_type.flags & MEM_FIXED_SIZE != 0 => {
            let access = if arg_type.flags & MEM_WRITE != 0 {
                AccessType::Write
            } else {
                AccessType::Read
            };
            in_raw_mode(env, arg_type, |env| {
                check_helper_mem_access(env, state, r, arg_type.size as i32, access, false)
            })?;
            if arg_type.flags & MEM_ALIGNED != 0 {
                check_ptr_alignment(env, &reg, arg_type.size)?;
            }
        }
        ArgBase::ConstSize | ArgBase::ConstSizeOrZero => {
            let zero_ok = arg_type.base == ArgBase::ConstSizeOrZero;
            let prev = proto.args[arg - 1];
            let access = if prev.flags & (MEM_WRITE | MEM_UNINIT) != 0 {
                AccessType::Write
            } else {
                AccessType::Read
            };
            meta.msize_max_value = reg.umax_value;
            in_raw_mode(env, prev, |env| {
                check_mem_size_reg(env, state, reg_of(arg - 1), r, access, zero_ok)
            })?;
            if prev.flags & MEM_UNINIT != 0 && reg.var_off.is_const() {
                let mem = *state.reg(reg_of(arg - 1));
                crate::mem::scratch_stack_bytes(env, &mem, reg.var_off.value);
            }
        }
        ArgBase::ConstAllocSizeOrZero => {
            if !reg.var_off.is_const() {
                return Err(env.reject(Errno::Eacces, format!("R{regno} is not a known constant'")));
            }
            meta.mem_size = reg.var_off.value;
            mark_chain_precision(env, state, r)?;
        }
        ArgBase::PtrToSpinLock => {
            let is_lock = proto.id == proto::SPIN_LOCK;
            let pc = env.insn_idx;
            super::lock::process_spin_lock(env, state, regno as u8, is_lock, pc)?;
        }
        ArgBase::PtrToTimer => {
            let map =
                super::map_field::check_map_field_pointer(env, &reg, regno as u8, "bpf_timer")?;
            meta.map = Some(map);
            meta.map_uid = reg.map_uid;
        }
        ArgBase::PtrToConstStr => super::const_str::check_reg_const_str(env, &reg, regno as u8)?,
        ArgBase::PtrToDynptr => {
            let pc = env.insn_idx;
            super::dynptr::process_dynptr_func(env, state, regno as u8, arg_type, pc)?;
            meta.dynptr_ref_obj_id = super::dynptr::slice_ref_obj_id(state, &reg);
        }
        ArgBase::KptrXchgDest | ArgBase::PtrToPercpuBtfId => {
            return Err(env.reject(
                Errno::Enotsupp,
                format!(
                    "not yet supported: {:?} argument of {}",
                    arg_type.base,
                    helper_display_name(proto.id)
                ),
            ));
        }
        _ => {}
    }
    Ok(())
}

/// The map spec the call's map argument named; the kernel calls a missing one a verifier bug.
fn map_spec<'e>(
    env: &'e mut Env<'_>,
    meta: &CallMeta,
    what: &str,
) -> Result<&'e bpfemu_loader::MapSpec, Reject> {
    match meta.map.and_then(|m| env.map(m)) {
        Some(spec) => Ok(spec),
        None => Err(env.reject(
            Errno::Efault,
            format!("verifier bug: invalid map_ptr to access map->{what}"),
        )),
    }
}

/// `resolve_map_arg_type`: a bloom filter's peek fills nothing the program passes in.
fn resolve_map_arg_type(
    env: &mut Env<'_>,
    meta: &CallMeta,
    func_id: i32,
    arg_type: &mut ArgType,
) -> Result<(), Reject> {
    let mt = map_spec(env, meta, "type")?.map_type;
    match mt {
        BPF_MAP_TYPE_SOCKMAP | BPF_MAP_TYPE_SOCKHASH => {
            if arg_type.flags == 0 {
                *arg_type = ArgType::new(ArgBase::PtrToBtfIdSockCommon);
            } else {
                return Err(env.reject(Errno::Einval, "invalid arg_type for sockmap/sockhash"));
            }
        }
        BPF_MAP_TYPE_BLOOM_FILTER if func_id == proto::MAP_PEEK_ELEM => {
            arg_type.flags |= MEM_UNINIT;
        }
        _ => {}
    }
    Ok(())
}

/// The register types an argument type accepts (`compatible_reg_types`), as the kernel prints
/// them and, for the ones bpfemu's registers can hold, the type and flags that match.
fn compatible_types(
    base: ArgBase,
    kernel: KernelVersion,
) -> &'static [(&'static str, Option<(RegType, u32)>)] {
    const MEM: &[(&str, Option<(RegType, u32)>)] = &[
        ("fp", Some((RegType::Stack, 0))),
        ("pkt", Some((RegType::Packet, 0))),
        ("pkt_meta", Some((RegType::PacketMeta, 0))),
        ("map_key", Some((RegType::MapKey, 0))),
        ("map_value", Some((RegType::MapValue, 0))),
        ("mem", Some((RegType::Mem, 0))),
        ("ringbuf_mem", Some((RegType::Mem, reg::MEM_RINGBUF))),
        ("buf", None),
        ("trusted_ptr_", Some((RegType::BtfId, reg::PTR_TRUSTED))),
    ];
    const MEM_OR_CTX: &[(&str, Option<(RegType, u32)>)] = &[
        ("fp", Some((RegType::Stack, 0))),
        ("pkt", Some((RegType::Packet, 0))),
        ("pkt_meta", Some((RegType::PacketMeta, 0))),
        ("map_key", Some((RegType::MapKey, 0))),
        ("map_value", Some((RegType::MapValue, 0))),
        ("mem", Some((RegType::Mem, 0))),
        ("ringbuf_mem", Some((RegType::Mem, reg::MEM_RINGBUF))),
        ("buf", None),
        ("trusted_ptr_", Some((RegType::BtfId, reg::PTR_TRUSTED))),
        ("ctx", Some((RegType::Ctx, 0))),
    ];
    const SOCK_COMMON_BTF: &[(&str, Option<(RegType, u32)>)] = &[
        ("sock_common", Some((RegType::SockCommon, 0))),
        ("sock", Some((RegType::Socket, 0))),
        ("tcp_sock", Some((RegType::TcpSock, 0))),
        ("xdp_sock", Some((RegType::XdpSock, 0))),
        ("ptr_", Some((RegType::BtfId, 0))),
        ("trusted_ptr_", Some((RegType::BtfId, reg::PTR_TRUSTED))),
    ];
    const SOCK: &[(&str, Option<(RegType, u32)>)] = &[
        ("sock_common", Some((RegType::SockCommon, 0))),
        ("sock", Some((RegType::Socket, 0))),
        ("tcp_sock", Some((RegType::TcpSock, 0))),
        ("xdp_sock", Some((RegType::XdpSock, 0))),
    ];
    const BTF_PTR: &[(&str, Option<(RegType, u32)>)] = &[
        ("ptr_", Some((RegType::BtfId, 0))),
        ("trusted_ptr_", Some((RegType::BtfId, reg::PTR_TRUSTED))),
        ("rcu_ptr_", Some((RegType::BtfId, reg::MEM_RCU))),
    ];
    const PERCPU_BTF: &[(&str, Option<(RegType, u32)>)] = &[
        ("percpu_ptr_", Some((RegType::BtfId, reg::MEM_PERCPU))),
        (
            "percpu_rcu_ptr_",
            Some((RegType::BtfId, reg::MEM_PERCPU | reg::MEM_RCU)),
        ),
        (
            "percpu_trusted_ptr_",
            Some((RegType::BtfId, reg::MEM_PERCPU | reg::PTR_TRUSTED)),
        ),
    ];
    const SPIN_LOCK: &[(&str, Option<(RegType, u32)>)] = &[
        ("map_value", Some((RegType::MapValue, 0))),
        ("ptr_", Some((RegType::BtfId, reg::MEM_ALLOC))),
    ];
    const SCALAR: &[(&str, Option<(RegType, u32)>)] = &[("scalar", Some((RegType::Scalar, 0)))];
    const CTX: &[(&str, Option<(RegType, u32)>)] = &[("ctx", Some((RegType::Ctx, 0)))];
    const RINGBUF: &[(&str, Option<(RegType, u32)>)] =
        &[("ringbuf_mem", Some((RegType::Mem, reg::MEM_RINGBUF)))];
    const MAP_PTR: &[(&str, Option<(RegType, u32)>)] =
        &[("map_ptr", Some((RegType::ConstPtrToMap, 0)))];
    const FUNC: &[(&str, Option<(RegType, u32)>)] = &[("func", Some((RegType::Func, 0)))];
    const STACK: &[(&str, Option<(RegType, u32)>)] = &[("fp", Some((RegType::Stack, 0)))];
    const MAP_VALUE: &[(&str, Option<(RegType, u32)>)] =
        &[("map_value", Some((RegType::MapValue, 0)))];
    const DYNPTR: &[(&str, Option<(RegType, u32)>)] = &[
        ("fp", Some((RegType::Stack, 0))),
        ("dynptr_ptr", Some((RegType::ConstPtrToDynptr, 0))),
    ];
    // 5.10's and 6.1's lists: no map keys in 5.10, ring buffer records in their words, and
    // the read-only and read-write buffers of iterators (which XDP never holds).
    const MEM_5_10: &[(&str, Option<(RegType, u32)>)] = &[
        ("fp", Some((RegType::Stack, 0))),
        ("pkt", Some((RegType::Packet, 0))),
        ("pkt_meta", Some((RegType::PacketMeta, 0))),
        ("map_value", Some((RegType::MapValue, 0))),
        ("mem", Some((RegType::Mem, 0))),
        ("rdonly_buf", None),
        ("rdwr_buf", None),
    ];
    const MEM_6_1: &[(&str, Option<(RegType, u32)>)] = &[
        ("fp", Some((RegType::Stack, 0))),
        ("pkt", Some((RegType::Packet, 0))),
        ("pkt_meta", Some((RegType::PacketMeta, 0))),
        ("map_key", Some((RegType::MapKey, 0))),
        ("map_value", Some((RegType::MapValue, 0))),
        ("mem", Some((RegType::Mem, 0))),
        ("alloc_mem", Some((RegType::Mem, reg::MEM_RINGBUF))),
        ("buf", None),
    ];
    // Map keys and values: no other memory before 6.2 (a ring buffer record is not a key).
    const MAP_KEY_VALUE_5_10: &[(&str, Option<(RegType, u32)>)] = &[
        ("fp", Some((RegType::Stack, 0))),
        ("pkt", Some((RegType::Packet, 0))),
        ("pkt_meta", Some((RegType::PacketMeta, 0))),
        ("map_value", Some((RegType::MapValue, 0))),
    ];
    const MAP_KEY_VALUE_6_1: &[(&str, Option<(RegType, u32)>)] = &[
        ("fp", Some((RegType::Stack, 0))),
        ("pkt", Some((RegType::Packet, 0))),
        ("pkt_meta", Some((RegType::PacketMeta, 0))),
        ("map_key", Some((RegType::MapKey, 0))),
        ("map_value", Some((RegType::MapValue, 0))),
    ];
    // Before 6.2 no pointer is trusted: the BTF arguments take plain BTF pointers, the
    // later lists without their trusted (and RCU) entries.
    const SOCK_COMMON_BTF_6_1: &[(&str, Option<(RegType, u32)>)] =
        SOCK_COMMON_BTF.split_at(SOCK_COMMON_BTF.len() - 1).0;
    const BTF_PTR_6_1: &[(&str, Option<(RegType, u32)>)] = BTF_PTR.split_at(1).0;
    const RINGBUF_5_10: &[(&str, Option<(RegType, u32)>)] = &[("mem", Some((RegType::Mem, 0)))];
    const RINGBUF_6_1: &[(&str, Option<(RegType, u32)>)] =
        &[("alloc_mem", Some((RegType::Mem, reg::MEM_RINGBUF)))];
    match base {
        ArgBase::PtrToMapKey | ArgBase::PtrToMapValue if kernel == KernelVersion::V5_10 => {
            MAP_KEY_VALUE_5_10
        }
        ArgBase::PtrToMapKey | ArgBase::PtrToMapValue if kernel == KernelVersion::V6_1 => {
            MAP_KEY_VALUE_6_1
        }
        ArgBase::PtrToMem if kernel == KernelVersion::V5_10 => MEM_5_10,
        ArgBase::PtrToMem if kernel == KernelVersion::V6_1 => MEM_6_1,
        ArgBase::PtrToRingbufMem if kernel == KernelVersion::V5_10 => RINGBUF_5_10,
        ArgBase::PtrToRingbufMem if kernel == KernelVersion::V6_1 => RINGBUF_6_1,
        ArgBase::PtrToMapKey | ArgBase::PtrToMapValue | ArgBase::PtrToMem => {
            if crate::behaviour::passes_ctx_as_helper_memory(kernel) {
                MEM_OR_CTX
            } else {
                MEM
            }
        }
        ArgBase::ConstSize | ArgBase::ConstSizeOrZero | ArgBase::ConstAllocSizeOrZero => SCALAR,
        ArgBase::ConstMapPtr => MAP_PTR,
        ArgBase::PtrToCtx => CTX,
        ArgBase::PtrToSockCommon => SOCK,
        ArgBase::PtrToBtfIdSockCommon if kernel <= KernelVersion::V6_1 => SOCK_COMMON_BTF_6_1,
        ArgBase::PtrToBtfIdSockCommon => SOCK_COMMON_BTF,
        ArgBase::PtrToBtfId if kernel <= KernelVersion::V6_1 => BTF_PTR_6_1,
        ArgBase::PtrToBtfId => BTF_PTR,
        // Allocated objects (bpf_obj_new) arrived in 6.2: before, a lock or a kptr lives in a
        // map value only, and the refusal names that one type.
        ArgBase::PtrToSpinLock | ArgBase::KptrXchgDest if kernel <= KernelVersion::V6_1 => {
            MAP_VALUE
        }
        ArgBase::PtrToSpinLock | ArgBase::KptrXchgDest => SPIN_LOCK,
        ArgBase::PtrToRingbufMem => RINGBUF,
        ArgBase::PtrToPercpuBtfId => PERCPU_BTF,
        ArgBase::PtrToFunc => FUNC,
        ArgBase::PtrToStack => STACK,
        ArgBase::PtrToConstStr | ArgBase::PtrToTimer => MAP_VALUE,
        ArgBase::PtrToDynptr => DYNPTR,
        ArgBase::DontCare | ArgBase::Anything => &[],
    }
}

/// The flag bits that take part in the type comparison (`enum bpf_reg_type` flags bpfemu's
/// registers carry).
const TYPE_FLAGS: u32 = reg::PTR_MAYBE_NULL
    | reg::MEM_RDONLY
    | reg::MEM_RINGBUF
    | reg::MEM_ALLOC
    | reg::PTR_TRUSTED
    | reg::PTR_UNTRUSTED
    | reg::MEM_RCU
    | reg::MEM_PERCPU;

/// `check_reg_type`: the register's type, with the flags the argument tolerates folded away,
/// must be one of the argument's compatible types.
pub(crate) fn check_reg_type(
    env: &mut Env<'_>,
    reg: &RegState,
    regno: usize,
    arg_type: ArgType,
) -> Result<(), Reject> {
    let version = env.input.kernel.version();
    let compatible = compatible_types(arg_type.base, version);
    let mut flags = reg.flags & TYPE_FLAGS;
    // 5.10 has no flag for a ring buffer record: it is memory like any other.
    if version == KernelVersion::V5_10 {
        flags &= !reg::MEM_RINGBUF;
    }
    // Nor has any kernel before 6.2 a trusted pointer: a BTF pointer is one.
    if version <= KernelVersion::V6_1 {
        flags &= !reg::PTR_TRUSTED;
    }
    if arg_type.flags & MEM_RDONLY != 0 {
        flags &= !reg::MEM_RDONLY;
    }
    if arg_type.flags & PTR_MAYBE_NULL != 0 {
        flags &= !reg::PTR_MAYBE_NULL;
    }
    let found = compatible.iter().any(|(_, m)| *m == Some((reg.ty, flags)));
    if found && reg.ty == RegType::BtfId && arg_type.base == ArgBase::PtrToBtfIdSockCommon {
        return check_sock_common_btf(env, reg, regno);
    }
    if found {
        return Ok(());
    }
    let expected: Vec<&str> = compatible.iter().map(|(n, _)| *n).collect();
    Err(env.reject(
        Errno::Eacces,
        format!(
            "R{regno} type={} expected={}",
            kernel_type_str(reg, version),
            expected.join(", ")
        ),
    ))
}

/// The `PTR_TO_BTF_ID` case of `check_reg_type` for `ARG_PTR_TO_BTF_ID_SOCK_COMMON`: the
/// struct must start with a `struct sock_common` (`btf_struct_ids_match`, not strict: the one
/// release function taking it, `bpf_sk_release`, accepts every socket kind).
fn check_sock_common_btf(env: &mut Env<'_>, reg: &RegState, regno: usize) -> Result<(), Reject> {
    use bpfemu_loader::btf::BtfKind;
    let Some(btf) = env.input.vmlinux_btf() else {
        return Err(env.reject(
            Errno::Enotsupp,
            "not yet supported: ptr_ argument without vmlinux BTF",
        ));
    };
    let want = btf.find_by_name_kind("sock_common", |k| matches!(k, BtfKind::Struct { .. }));
    if want.is_some_and(|w| super::kernel_objects::struct_ids_match(btf, reg.btf_id, w, false)) {
        return Ok(());
    }
    let have = btf.name_of(reg.btf_id).unwrap_or_default().to_owned();
    Err(env.reject(
        Errno::Eacces,
        format!("R{regno} is of type {have} but sock_common is expected"),
    ))
}

/// The kernel's `reg_type_str` for a register in an argument message.
fn kernel_type_str(reg: &RegState, version: KernelVersion) -> String {
    if reg.ty == RegType::NotInit {
        return "?".to_owned();
    }
    if reg.ty == RegType::Scalar && !crate::behaviour::names_scalars_scalar(version) {
        return "inv".to_owned();
    }
    // MEM_ALLOC has no prefix in the kernel's text.
    reg::reg_type_str(reg.ty, reg.flags & !reg::MEM_ALLOC, version)
}

/// `update_loop_inline_state`: a `bpf_loop` call site stays fit for inlining while every visit
/// passes flags known to be zero (which then become precise) and the same callback.
fn update_loop_inline_state(
    env: &mut Env<'_>,
    state: &mut VerifierState,
    pc: usize,
    subprog: usize,
) -> Result<(), Reject> {
    let fit = match env.aux[pc].loop_inline {
        Some((false, _)) => return Ok(()),
        Some((true, callback)) => callback == subprog,
        None => true,
    };
    let flags = state.reg(Reg::R4);
    let flags_zero =
        flags.ty == RegType::Scalar && flags.var_off.is_const() && flags.var_off.value == 0;
    if flags_zero {
        mark_chain_precision(env, state, Reg::R4)?;
    }
    env.aux[pc].loop_inline = Some((fit && flags_zero, subprog));
    Ok(())
}

/// Why a call that may sleep may not sleep here (7.x's `non_sleepable_context_description`:
/// the innermost reason first; an XDP program itself never sleeps).
pub(crate) fn non_sleepable_context(state: &VerifierState) -> &'static str {
    if state.active_rcu_lock > 0 {
        "rcu_read_lock region"
    } else if state.active_preempt_locks > 0 {
        "non-preemptible region"
    } else if state.active_irq_id != 0 {
        "IRQ-disabled region"
    } else if state.active_locks > 0 {
        "lock region"
    } else {
        "non-sleepable prog"
    }
}

/// `check_func_arg_reg_off`: which pointers may carry an offset into a helper.
pub(crate) fn check_func_arg_reg_off(
    env: &mut Env<'_>,
    reg: &RegState,
    regno: usize,
    arg_type: ArgType,
) -> Result<(), Reject> {
    // A released dynptr is named by the stack slots it sits in, at any offset.
    if arg_type.is_release() && !(arg_type.base == ArgBase::PtrToDynptr && reg.ty == RegType::Stack)
    {
        let version = env.input.kernel.version();
        // 6.1 checks a released kernel object's offset alone, in shorter words; other memory
        // (a ring buffer record) as any pointer that must not have moved.
        if !crate::behaviour::checks_release_offsets_of_every_type(version) {
            // 5.10 does not look at a released ring buffer record's offset at all.
            if version == KernelVersion::V5_10 && reg.ty == RegType::Mem {
                return Ok(());
            }
            if reg.ty == RegType::BtfId && reg.off != 0 {
                return Err(env.reject(
                    Errno::Einval,
                    format!("R{regno} must have zero offset when passed to release func"),
                ));
            }
            return check_ptr_off_reg(env, reg, regno);
        }
        if reg.off != 0 {
            return Err(env.reject(
                Errno::Einval,
                format!(
                    "R{regno} must have zero offset when passed to release func or trusted arg to kfunc"
                ),
            ));
        }
        return check_ptr_off_reg(env, reg, regno);
    }
    match reg.ty {
        RegType::Stack
        | RegType::Packet
        | RegType::PacketMeta
        | RegType::MapKey
        | RegType::MapValue
        | RegType::Mem
        | RegType::Arena
        | RegType::Scalar => Ok(()),
        // A kernel object may be passed at a fixed offset into it (a member), unless it may be
        // NULL or is untrusted; never at a variable one.
        RegType::BtfId => {
            let fixed_off_ok = [0, reg::PTR_TRUSTED, reg::MEM_RCU].contains(&reg.flags)
                || reg.flags & reg::MEM_ALLOC != 0
                    && reg.flags & !(reg::MEM_ALLOC | reg::MEM_RCU) == 0;
            check_ptr_off(env, reg, regno, fixed_off_ok)
        }
        _ => check_ptr_off_reg(env, reg, regno),
    }
}

/// `__check_ptr_off_reg` with no fixed offset allowed.
fn check_ptr_off_reg(env: &mut Env<'_>, reg: &RegState, regno: usize) -> Result<(), Reject> {
    check_ptr_off(env, reg, regno, false)
}

/// `__check_ptr_off_reg`: no negative offset, a fixed one only when `fixed_off_ok`, no
/// variable one.
fn check_ptr_off(
    env: &mut Env<'_>,
    reg: &RegState,
    regno: usize,
    fixed_off_ok: bool,
) -> Result<(), Reject> {
    let ty = kernel_type_str(reg, env.input.kernel.version());
    // 7.x has one offset, and looks at whether it is known before its sign or size.
    if crate::behaviour::words_pointer_offset_as_one(env.input.kernel.version())
        && !reg.var_off.is_const()
    {
        let whole = reg.var_off.add(Tnum::constant(reg.off as i64 as u64));
        return Err(env.reject(
            Errno::Eacces,
            format!("variable {ty} access var_off={} disallowed", whole.text()),
        ));
    }
    if reg.off < 0
        && crate::behaviour::words_negative_pointer_offsets_apart(env.input.kernel.version())
    {
        return Err(env.reject(
            Errno::Eacces,
            format!(
                "negative offset {ty} ptr R{regno} off={} disallowed",
                reg.off
            ),
        ));
    }
    if !fixed_off_ok && reg.off != 0 {
        return Err(env.reject(
            Errno::Eacces,
            format!(
                "dereference of modified {ty} ptr R{regno} off={} disallowed",
                reg.off
            ),
        ));
    }
    if !reg.var_off.is_const() || reg.var_off.value != 0 {
        return Err(env.reject(
            Errno::Eacces,
            format!(
                "variable {ty} access var_off={} disallowed",
                reg.var_off.text()
            ),
        ));
    }
    Ok(())
}

/// `check_ptr_alignment` for a fixed-size aligned argument (strict, as helper memory is).
fn check_ptr_alignment(env: &mut Env<'_>, reg: &RegState, size: u32) -> Result<(), Reject> {
    if size == 1 {
        return Ok(());
    }
    let (desc, ip_align) = match reg.ty {
        RegType::Packet | RegType::PacketMeta => ("packet ", 2),
        RegType::MapKey => ("key ", 0),
        RegType::MapValue => ("value ", 0),
        RegType::Ctx => ("context ", 0),
        RegType::Stack => ("stack ", 0),
        _ => ("", 0),
    };
    let off = reg
        .var_off
        .add(Tnum::constant((ip_align + reg.off as i64) as u64));
    if off.is_aligned(size as u64) {
        return Ok(());
    }
    let offsets = crate::mem::misaligned_offsets(env, reg, 0);
    let msg = if ip_align != 0 {
        format!("misaligned packet access off {ip_align}+{offsets} size {size}")
    } else {
        format!("misaligned {desc}access off {offsets} size {size}")
    };
    Err(env.reject(Errno::Eacces, msg))
}

/// `get_constant_map_key`: the key's value when it sits on the stack as zeros or as a spilled
/// constant of exactly the key's size.
fn constant_map_key(
    env: &mut Env<'_>,
    state: &mut VerifierState,
    key: &RegState,
    key_size: u32,
) -> Result<Option<u64>, Reject> {
    if key.ty != RegType::Stack || !key.var_off.is_const() {
        return Ok(None);
    }
    let stack_off = key.off as i64 + key.var_off.value as i64;
    let slot = -stack_off - 1;
    if slot < 0 {
        return Ok(None);
    }
    let (spi, off) = ((slot as usize) / SLOT_SIZE, (slot as usize) % SLOT_SIZE);
    let frame = &state.frames[key.frameno as usize];
    let Some(stack_slot) = frame.stack.get(spi).copied() else {
        return Ok(None);
    };
    let zeros = (0..=off)
        .rev()
        .take_while(|&i| stack_slot.slot_type[i] == SlotType::Zero)
        .count();
    if zeros >= key_size as usize {
        return Ok(Some(0));
    }
    if !stack_slot.is_spilled_scalar() {
        return Ok(None);
    }
    let spilled = (0..=off)
        .rev()
        .take_while(|&i| stack_slot.slot_type[i] == SlotType::Spill)
        .count();
    if spilled != key_size as usize || !stack_slot.spilled_ptr.var_off.is_const() {
        return Ok(None);
    }
    // The lookup relies on the constant: it must not be pruned away.
    crate::precision::mark_stack_slot_precision(env, state, key.frameno as usize, spi)?;
    Ok(Some(stack_slot.spilled_ptr.var_off.value))
}

/// `record_func_map` / `record_func_key`: the map (and tail call key) every path passes here,
/// poisoned when paths differ, for the fixups.
fn record_func_map(
    env: &mut Env<'_>,
    state: &mut VerifierState,
    pc: usize,
    func_id: i32,
    meta: &CallMeta,
) -> Result<(), Reject> {
    let Some(map) = meta.map else { return Ok(()) };
    let aux = &mut env.aux[pc];
    match aux.map_index {
        None if !aux.map_poisoned => aux.map_index = Some(map),
        Some(m) if m != map => {
            aux.map_index = None;
            aux.map_poisoned = true;
        }
        _ => {}
    }
    if func_id != proto::TAIL_CALL {
        return Ok(());
    }
    // `record_func_key`: a constant index inside the array is the direct jump the kernel
    // patches in, so it must not be pruned away (precise); anything else poisons the site.
    let key = *state.reg(Reg::R3);
    let max_entries = env.map(map).map_or(0, |m| m.max_entries) as u64;
    let value =
        (key.var_off.is_const() && key.var_off.value < max_entries).then_some(key.var_off.value);
    if value.is_some() {
        mark_chain_precision(env, state, Reg::R3)?;
    }
    let aux = &mut env.aux[pc];
    match (aux.map_key, value) {
        _ if aux.map_key_poisoned => {}
        (None, Some(v)) => aux.map_key = Some(v),
        (Some(k), Some(v)) if k == v => {}
        _ => {
            aux.map_key = None;
            aux.map_key_poisoned = true;
        }
    }
    Ok(())
}

/// Drops the reference an `OBJ_RELEASE` argument carried, and every register that held it.
fn release_argument(
    env: &mut Env<'_>,
    state: &mut VerifierState,
    proto: &FuncProto,
    meta: &CallMeta,
) -> Result<(), Reject> {
    let Some(regno) = meta.release_regno else {
        return Ok(());
    };
    let r = Reg::new(regno).expect("argument register");
    let is_dynptr = proto.args[regno as usize - 1].base == ArgBase::PtrToDynptr;
    let released = if is_dynptr {
        let reg = *state.reg(r);
        super::dynptr::unmark_stack_slots_dynptr(env, state, &reg)?
    } else if meta.ref_obj_id != 0 {
        release_reference(state, meta.ref_obj_id)
    } else {
        state.reg(r).is_const_scalar(0)
    };
    if released {
        return Ok(());
    }
    Err(env.reject(
        Errno::Einval,
        format!(
            "func {}#{} reference has not been acquired before",
            helper_display_name(proto.id),
            proto.id
        ),
    ))
}

/// `release_reference`: forget the reference and make every pointer carrying it unusable.
pub(crate) fn release_reference(state: &mut VerifierState, ref_obj_id: u32) -> bool {
    if !state.release_reference_state(ref_obj_id) {
        return false;
    }
    for frame in &mut state.frames {
        for reg in frame.regs.iter_mut() {
            if reg.ref_obj_id == ref_obj_id {
                *reg = RegState::unknown_scalar();
            }
        }
        for slot in frame.stack.iter_mut() {
            if slot.is_spilled_reg() && slot.spilled_ptr.ref_obj_id == ref_obj_id {
                slot.spilled_ptr = RegState::unknown_scalar();
            }
        }
    }
    true
}

/// The per-helper steps of `check_helper_call` between the arguments and the return value.
fn special_cases(
    env: &mut Env<'_>,
    state: &mut VerifierState,
    pc: usize,
    proto: &FuncProto,
    meta: &CallMeta,
) -> Result<Option<CallbackNow>, Reject> {
    let mut callback_now = None;
    match proto.id {
        proto::TAIL_CALL => {
            if let Some(r) = state.refs.iter().find(|r| r.kind == RefKind::Ptr) {
                let (id, insn) = (r.id, r.insn_idx);
                env.verbose(&format!("Unreleased reference id={id} alloc_insn={insn}\n"));
                return Err(env.reject(Errno::Einval, "tail_call would lead to reference leak"));
            }
        }
        proto::LOOP => {
            let subprog = callback_subprog(env, meta)?;
            update_loop_inline_state(env, state, pc, subprog)?;
            if !iterates_callbacks(env) {
                let args = callback_args(env, state, subprog, CallbackKind::Loop);
                return Ok(Some((subprog, args)));
            }
            mark_chain_precision(env, state, Reg::R1)?;
            let limit = state.reg(Reg::R1).umax_value;
            if (state.cur().callback_depth as u64) < limit {
                push_callback_call(env, state, pc, subprog, CallbackKind::Loop)?;
            } else {
                state.cur_mut().callback_depth = 0;
                if env.log.level2() {
                    let frame = state.curframe();
                    env.verbose(&format!("frame{frame} bpf_loop iteration limit reached\n"));
                }
            }
        }
        proto::FOR_EACH_MAP_ELEM => {
            let subprog = callback_subprog(env, meta)?;
            let map = meta.map.unwrap_or(0);
            callback_now = sync_callback(
                env,
                state,
                pc,
                subprog,
                CallbackKind::ForEachMapElem { map },
            )?;
        }
        proto::DYNPTR_FROM_MEM => {
            let data = *state.reg(Reg::R1);
            if data.ty != RegType::MapValue {
                return Err(env.reject(
                    Errno::Eacces,
                    format!(
                        "Unsupported reg type {} for bpf_dynptr_from_mem data",
                        kernel_type_str(&data, env.input.kernel.version())
                    ),
                ));
            }
        }
        proto::SNPRINTF => {
            let (fmt, data_len) = (*state.reg(Reg::R3), *state.reg(Reg::R5));
            super::const_str::check_snprintf_format(env, &fmt, &data_len)?;
        }
        proto::TIMER_SET_CALLBACK => {
            let subprog = callback_subprog(env, meta)?;
            let map = meta.map.unwrap_or(0);
            super::callback::push_async_callback(env, pc, subprog, map)?;
        }
        proto::USER_RINGBUF_DRAIN => {
            let subprog = callback_subprog(env, meta)?;
            callback_now = sync_callback(env, state, pc, subprog, CallbackKind::UserRingbufDrain)?;
        }
        id::FIND_VMA => {
            let subprog = callback_subprog(env, meta)?;
            let vma = env.input.vmlinux_btf().and_then(|btf| {
                btf.find_by_name_kind("vm_area_struct", |k| {
                    matches!(k, bpfemu_loader::btf::BtfKind::Struct { .. })
                })
            });
            let Some(vma) = vma else {
                return Err(env.reject(
                    Errno::Enotsupp,
                    "not yet supported: bpf_find_vma without the kernel's BTF",
                ));
            };
            callback_now = sync_callback(env, state, pc, subprog, CallbackKind::FindVma { vma })?;
        }
        _ => {}
    }
    Ok(callback_now)
}

/// A callback to enter at once, after the helper call's effects: its subprogram and R1-R5.
type CallbackNow = (usize, [RegState; 5]);

fn iterates_callbacks(env: &Env<'_>) -> bool {
    crate::behaviour::iterates_sync_callbacks(env.input.kernel.version())
}

/// A synchronous callback: queued as a loop at the call, or entered once after the call on
/// kernels before 6.7 ([`crate::behaviour::iterates_sync_callbacks`]).
fn sync_callback(
    env: &mut Env<'_>,
    state: &mut VerifierState,
    pc: usize,
    subprog: usize,
    kind: CallbackKind,
) -> Result<Option<CallbackNow>, Reject> {
    if iterates_callbacks(env) {
        push_callback_call(env, state, pc, subprog, kind)?;
        return Ok(None);
    }
    Ok(Some((subprog, callback_args(env, state, subprog, kind))))
}

fn callback_subprog(env: &mut Env<'_>, meta: &CallMeta) -> Result<usize, Reject> {
    match meta.subprogno {
        Some(s) => Ok(s as usize),
        None => Err(env.reject(Errno::Efault, "verifier bug: callback without subprog")),
    }
}

/// R0 after the call, as the prototype's return type makes it; fresh ids for what may be
/// NULL, references for what the helper acquires, bounds refined for helpers whose result the
/// kernel knows more of (`do_refine_retval_range`).
fn set_return_value(
    env: &mut Env<'_>,
    state: &mut VerifierState,
    pc: usize,
    proto: &FuncProto,
    meta: &CallMeta,
) -> Result<(), Reject> {
    let mut r0 = match proto.ret {
        RetType::Integer => RegState::unknown_scalar(),
        RetType::Void => RegState::not_init(),
        RetType::MapValueOrNull => {
            let map = meta.map.ok_or_else(|| {
                env.reject(Errno::Efault, "verifier bug: unexpected null map_ptr")
            })?;
            let Some(spec) = env.map(map) else {
                return Err(env.reject(Errno::Efault, "verifier bug: unexpected null map_ptr"));
            };
            let mut flags = reg::PTR_MAYBE_NULL;
            let elide = proto.id == proto::MAP_LOOKUP_ELEM
                && can_elide_value_nullness(spec)
                && meta
                    .const_map_key
                    .is_some_and(|k| k < spec.max_entries as u64);
            if elide {
                flags = 0;
            }
            // A value that cannot be NULL still needs an id when it holds a lock: the lock
            // is named by the pointer's id.
            let lock_id = elide && env.map_has_spin_lock(map);
            let mut r = RegState::pointer(RegType::MapValue);
            r.flags = flags;
            r.map = Some(map);
            r.map_uid = meta.map_uid;
            if lock_id {
                r.id = env.new_id();
            }
            r
        }
        RetType::BtfIdOrNull if sock_cast_target(proto.id).is_some() => {
            sock_cast_result(env, proto.id, meta)?
        }
        RetType::SocketOrNull => sock_or_null(RegType::Socket),
        RetType::SockCommonOrNull => sock_or_null(RegType::SockCommon),
        RetType::RingbufMemOrNull => {
            let mut r = RegState::pointer(RegType::Mem);
            r.flags = reg::MEM_RINGBUF | reg::PTR_MAYBE_NULL;
            r.mem_size = meta.mem_size as u32;
            r
        }
        RetType::DynptrMemOrNull => {
            // A slice of the dynptr's memory: released with the dynptr's reference.
            let mut r = RegState::pointer(RegType::Mem);
            r.flags = reg::PTR_MAYBE_NULL;
            r.mem_size = meta.mem_size as u32;
            r.ref_obj_id = meta.dynptr_ref_obj_id;
            r
        }
        // `RET_PTR_TO_BTF_ID_TRUSTED` (bpf_get_current_task_btf): a trusted pointer to the
        // helper's `ret_btf_id`, here the running task.
        RetType::BtfIdTrusted if proto.id == id::GET_CURRENT_TASK_BTF => {
            let task = env.input.vmlinux_btf().and_then(|btf| {
                btf.find_by_name_kind("task_struct", |k| {
                    matches!(k, bpfemu_loader::btf::BtfKind::Struct { .. })
                })
            });
            let Some(task) = task else {
                return Err(env.reject(
                    Errno::Enotsupp,
                    "not yet supported: bpf_get_current_task_btf without the kernel's BTF",
                ));
            };
            let mut r = RegState::pointer(RegType::BtfId);
            r.btf_id = task;
            r.flags = reg::PTR_TRUSTED;
            r
        }
        other => {
            return Err(env.reject(
                Errno::Enotsupp,
                format!(
                    "not yet supported: return type {other:?} of {}",
                    helper_display_name(proto.id)
                ),
            ));
        }
    };
    if r0.flags & reg::PTR_MAYBE_NULL != 0 {
        r0.id = env.new_id();
    }
    // `is_acquire_function`: a lookup in a SOCKMAP or SOCKHASH takes a socket reference.
    let sock_map_lookup = proto.id == proto::MAP_LOOKUP_ELEM
        && meta.map.and_then(|m| env.map(m)).is_some_and(|spec| {
            matches!(
                spec.map_type,
                bpfemu_isa::uapi::BPF_MAP_TYPE_SOCKMAP | bpfemu_isa::uapi::BPF_MAP_TYPE_SOCKHASH
            )
        });
    if proto.acquires() || sock_map_lookup {
        let id = env.new_id();
        state.acquire_reference(RefKind::Ptr, id, pc);
        r0.id = id;
        r0.ref_obj_id = id;
    }
    refine_return_range(proto, meta, &mut r0);
    if fork_referenced_cast(env, state, pc, proto.id, meta) {
        r0.flags &= !reg::PTR_MAYBE_NULL;
        r0.id = meta.ref_obj_id;
    }
    *state.reg_mut(Reg::R0) = r0;
    Ok(())
}

/// 7.2's cast of a referenced socket (`is_ptr_cast_function`): the result shares the
/// socket's reference, so it cannot also carry the NULL check's id; the NULL result is
/// queued as a path of its own (R0 the scalar 0) and the walk goes on with a non-NULL
/// pointer. True when the path was queued.
fn fork_referenced_cast(
    env: &mut Env<'_>,
    state: &VerifierState,
    pc: usize,
    func_id: i32,
    meta: &CallMeta,
) -> bool {
    let referenced = meta.ref_obj_id != 0 && state.refs.iter().any(|r| r.id == meta.ref_obj_id);
    let cast = sock_cast_target(func_id).is_some_and(|(_, keeps_ref)| keeps_ref);
    let forks = crate::behaviour::forks_null_of_referenced_casts(env.input.kernel.version());
    if !(cast && referenced && forks) {
        return false;
    }
    let mut null_path = state.clone();
    *null_path.reg_mut(Reg::R0) = RegState::known(0);
    env.pending.push((null_path, pc + 1, pc));
    true
}

/// `RET_PTR_TO_SOCKET_OR_NULL` / `RET_PTR_TO_SOCK_COMMON_OR_NULL`: the socket a lookup found,
/// or NULL (the reference the lookup acquires is added by the caller).
fn sock_or_null(ty: RegType) -> RegState {
    let mut r = RegState::pointer(ty);
    r.flags = reg::PTR_MAYBE_NULL;
    r
}

/// The struct a `bpf_skc_to_*` cast returns (its `ret_btf_id`), and whether the result keeps
/// the argument's reference (`is_ptr_cast_function`; `bpf_skc_to_unix_sock` is not one).
fn sock_cast_target(func_id: i32) -> Option<(&'static str, bool)> {
    Some(match func_id {
        id::SKC_TO_TCP6_SOCK => ("tcp6_sock", true),
        id::SKC_TO_TCP_SOCK => ("tcp_sock", true),
        id::SKC_TO_TCP_TIMEWAIT_SOCK => ("tcp_timewait_sock", true),
        id::SKC_TO_TCP_REQUEST_SOCK => ("tcp_request_sock", true),
        id::SKC_TO_UDP6_SOCK => ("udp6_sock", true),
        id::SKC_TO_MPTCP_SOCK => ("mptcp_sock", true),
        id::SKC_TO_UNIX_SOCK => ("unix_sock", false),
        _ => return None,
    })
}

/// `RET_PTR_TO_BTF_ID_OR_NULL` of a socket cast: an untrusted pointer to the kernel struct,
/// NULL when the socket is not of that kind; a cast of a referenced socket carries the
/// reference, so that releasing either releases both.
fn sock_cast_result(env: &mut Env<'_>, func_id: i32, meta: &CallMeta) -> Result<RegState, Reject> {
    let (name, keeps_ref) = sock_cast_target(func_id).expect("a socket cast");
    let found = env.input.vmlinux_btf().and_then(|btf| {
        btf.find_by_name_kind(name, |k| {
            matches!(k, bpfemu_loader::btf::BtfKind::Struct { .. })
        })
    });
    let Some(btf_id) = found else {
        return Err(env.reject(
            Errno::Enotsupp,
            format!("not yet supported: {name} without vmlinux BTF"),
        ));
    };
    let mut r = RegState::pointer(RegType::BtfId);
    r.flags = reg::PTR_MAYBE_NULL;
    r.btf_id = btf_id;
    if keeps_ref {
        r.ref_obj_id = meta.ref_obj_id;
    }
    Ok(r)
}

/// `do_refine_retval_range`.
fn refine_return_range(proto: &FuncProto, meta: &CallMeta, r0: &mut RegState) {
    match proto.id {
        // bpf_probe_read_{user,kernel}_str and bpf_get_task_stack return at most the size.
        114 | 115 | 141 => {
            r0.smax_value = meta.msize_max_value as i64;
            r0.s32_max_value = meta.msize_max_value as i32;
            r0.smin_value = -MAX_ERRNO;
            r0.s32_min_value = -MAX_ERRNO as i32;
            r0.bounds_sync();
        }
        proto::GET_SMP_PROCESSOR_ID => {
            let max = nr_cpu_ids().saturating_sub(1);
            r0.umax_value = max as u64;
            r0.u32_max_value = max;
            r0.smax_value = max as i64;
            r0.s32_max_value = max as i32;
            r0.umin_value = 0;
            r0.u32_min_value = 0;
            r0.smin_value = 0;
            r0.s32_min_value = 0;
            r0.bounds_sync();
        }
        _ => {}
    }
}

/// `nr_cpu_ids` of the kernel this runs on (`/sys/devices/system/cpu/possible`), 1 when it
/// cannot be read: the bound `bpf_get_smp_processor_id` refines R0 to.
fn nr_cpu_ids() -> u32 {
    static IDS: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *IDS.get_or_init(|| {
        std::fs::read_to_string("/sys/devices/system/cpu/possible")
            .ok()
            .and_then(|s| {
                s.trim()
                    .split(',')
                    .filter_map(|part| part.rsplit('-').next()?.parse::<u32>().ok())
                    .max()
            })
            .map_or(1, |last| last + 1)
    })
}

/// `check_map_func_compatibility`: which helpers a map type allows, and which map types a
/// helper takes.
fn check_map_func_compatibility(
    env: &mut Env<'_>,
    map: Option<u32>,
    func_id: i32,
) -> Result<(), Reject> {
    let Some(map) = map else { return Ok(()) };
    let Some(mt) = env.map(map).map(|m| m.map_type) else {
        return Ok(());
    };
    let map_allows = match mt {
        BPF_MAP_TYPE_PROG_ARRAY => func_id == id::TAIL_CALL,
        BPF_MAP_TYPE_PERF_EVENT_ARRAY => matches!(
            func_id,
            id::PERF_EVENT_READ
                | id::PERF_EVENT_OUTPUT
                | id::PERF_EVENT_READ_VALUE
                | id::SKB_OUTPUT
                | id::XDP_OUTPUT
        ),
        BPF_MAP_TYPE_RINGBUF => matches!(
            func_id,
            id::RINGBUF_OUTPUT
                | id::RINGBUF_RESERVE
                | id::RINGBUF_QUERY
                | id::RINGBUF_RESERVE_DYNPTR
                | id::RINGBUF_SUBMIT_DYNPTR
                | id::RINGBUF_DISCARD_DYNPTR
        ),
        BPF_MAP_TYPE_USER_RINGBUF => func_id == id::USER_RINGBUF_DRAIN,
        BPF_MAP_TYPE_STACK_TRACE => func_id == id::GET_STACKID,
        BPF_MAP_TYPE_CGROUP_ARRAY => matches!(
            func_id,
            id::SKB_UNDER_CGROUP | id::CURRENT_TASK_UNDER_CGROUP
        ),
        BPF_MAP_TYPE_CGROUP_STORAGE | BPF_MAP_TYPE_PERCPU_CGROUP_STORAGE => {
            func_id == id::GET_LOCAL_STORAGE
        }
        BPF_MAP_TYPE_DEVMAP | BPF_MAP_TYPE_DEVMAP_HASH | BPF_MAP_TYPE_XSKMAP => {
            matches!(func_id, id::REDIRECT_MAP | id::MAP_LOOKUP_ELEM)
        }
        BPF_MAP_TYPE_CPUMAP => func_id == id::REDIRECT_MAP,
        BPF_MAP_TYPE_ARRAY_OF_MAPS | BPF_MAP_TYPE_HASH_OF_MAPS => func_id == id::MAP_LOOKUP_ELEM,
        // XDP may not update sock maps (`may_update_sockmap`).
        // `may_update_sockmap`: XDP is among the program types that may update and delete
        // (no locked socket is within its reach).
        BPF_MAP_TYPE_SOCKMAP => matches!(
            func_id,
            id::SK_REDIRECT_MAP
                | id::SOCK_MAP_UPDATE
                | id::MSG_REDIRECT_MAP
                | id::SK_SELECT_REUSEPORT
                | id::MAP_LOOKUP_ELEM
                | id::MAP_UPDATE_ELEM
                | id::MAP_DELETE_ELEM
        ),
        BPF_MAP_TYPE_SOCKHASH => matches!(
            func_id,
            id::SOCK_HASH_UPDATE
                | id::MSG_REDIRECT_HASH
                | id::SK_REDIRECT_HASH
                | id::SK_SELECT_REUSEPORT
                | id::MAP_LOOKUP_ELEM
                | id::MAP_UPDATE_ELEM
                | id::MAP_DELETE_ELEM
        ),
        BPF_MAP_TYPE_REUSEPORT_SOCKARRAY => func_id == id::SK_SELECT_REUSEPORT,
        BPF_MAP_TYPE_QUEUE | BPF_MAP_TYPE_STACK => {
            matches!(func_id, id::MAP_PUSH_ELEM..=id::MAP_PEEK_ELEM)
        }
        BPF_MAP_TYPE_SK_STORAGE => matches!(
            func_id,
            id::SK_STORAGE_GET | id::SK_STORAGE_DELETE | id::KPTR_XCHG
        ),
        BPF_MAP_TYPE_INODE_STORAGE => matches!(
            func_id,
            id::INODE_STORAGE_GET | id::INODE_STORAGE_DELETE | id::KPTR_XCHG
        ),
        BPF_MAP_TYPE_TASK_STORAGE => matches!(
            func_id,
            id::TASK_STORAGE_GET | id::TASK_STORAGE_DELETE | id::KPTR_XCHG
        ),
        BPF_MAP_TYPE_CGRP_STORAGE => matches!(
            func_id,
            id::CGRP_STORAGE_GET | id::CGRP_STORAGE_DELETE | id::KPTR_XCHG
        ),
        BPF_MAP_TYPE_BLOOM_FILTER => matches!(func_id, id::MAP_PEEK_ELEM | id::MAP_PUSH_ELEM),
        _ => true,
    };
    let func_allows = match func_id {
        id::TAIL_CALL => mt == BPF_MAP_TYPE_PROG_ARRAY,
        id::PERF_EVENT_READ
        | id::PERF_EVENT_OUTPUT
        | id::PERF_EVENT_READ_VALUE
        | id::SKB_OUTPUT
        | id::XDP_OUTPUT => mt == BPF_MAP_TYPE_PERF_EVENT_ARRAY,
        id::RINGBUF_OUTPUT
        | id::RINGBUF_RESERVE
        | id::RINGBUF_QUERY
        | id::RINGBUF_RESERVE_DYNPTR
        | id::RINGBUF_SUBMIT_DYNPTR
        | id::RINGBUF_DISCARD_DYNPTR => mt == BPF_MAP_TYPE_RINGBUF,
        id::USER_RINGBUF_DRAIN => mt == BPF_MAP_TYPE_USER_RINGBUF,
        id::GET_STACKID => mt == BPF_MAP_TYPE_STACK_TRACE,
        id::SKB_UNDER_CGROUP | id::CURRENT_TASK_UNDER_CGROUP => mt == BPF_MAP_TYPE_CGROUP_ARRAY,
        id::REDIRECT_MAP => matches!(
            mt,
            BPF_MAP_TYPE_DEVMAP
                | BPF_MAP_TYPE_DEVMAP_HASH
                | BPF_MAP_TYPE_CPUMAP
                | BPF_MAP_TYPE_XSKMAP
        ),
        id::MAP_POP_ELEM => matches!(mt, BPF_MAP_TYPE_QUEUE | BPF_MAP_TYPE_STACK),
        id::MAP_PEEK_ELEM | id::MAP_PUSH_ELEM => matches!(
            mt,
            BPF_MAP_TYPE_QUEUE | BPF_MAP_TYPE_STACK | BPF_MAP_TYPE_BLOOM_FILTER
        ),
        id::MAP_LOOKUP_PERCPU_ELEM => {
            matches!(
                mt,
                BPF_MAP_TYPE_PERCPU_ARRAY | BPF_MAP_TYPE_PERCPU_HASH | BPF_MAP_TYPE_LRU_PERCPU_HASH
            )
        }
        id::SK_STORAGE_GET | id::SK_STORAGE_DELETE => mt == BPF_MAP_TYPE_SK_STORAGE,
        id::INODE_STORAGE_GET | id::INODE_STORAGE_DELETE => mt == BPF_MAP_TYPE_INODE_STORAGE,
        id::TASK_STORAGE_GET | id::TASK_STORAGE_DELETE => mt == BPF_MAP_TYPE_TASK_STORAGE,
        id::CGRP_STORAGE_GET | id::CGRP_STORAGE_DELETE => mt == BPF_MAP_TYPE_CGRP_STORAGE,
        _ => true,
    };
    if map_allows && func_allows {
        if func_id == id::TAIL_CALL && env.subprogs.len() > 1 && env.input.func_info.is_empty() {
            return Err(env.reject(
                Errno::Einval,
                "mixing of tail_calls and bpf-to-bpf calls is not supported",
            ));
        }
        return Ok(());
    }
    Err(env.reject(
        Errno::Einval,
        format!(
            "cannot pass map_type {mt} into func {}#{func_id}",
            helper_display_name(func_id)
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compatible_lists_print_as_the_kernel_does() {
        let names = |b| {
            compatible_types(b, KernelVersion::V6_18)
                .iter()
                .map(|(n, _)| *n)
                .collect::<Vec<_>>()
                .join(", ")
        };
        // The lists the kernel printed for a scalar passed to each (measured on 6.18).
        assert_eq!(
            names(ArgBase::PtrToMem),
            "fp, pkt, pkt_meta, map_key, map_value, mem, ringbuf_mem, buf, trusted_ptr_"
        );
        assert_eq!(
            names(ArgBase::PtrToBtfIdSockCommon),
            "sock_common, sock, tcp_sock, xdp_sock, ptr_, trusted_ptr_"
        );
        assert_eq!(
            names(ArgBase::PtrToSockCommon),
            "sock_common, sock, tcp_sock, xdp_sock"
        );
        assert_eq!(names(ArgBase::PtrToSpinLock), "map_value, ptr_");
        assert_eq!(
            names(ArgBase::PtrToPercpuBtfId),
            "percpu_ptr_, percpu_rcu_ptr_, percpu_trusted_ptr_"
        );
        assert_eq!(names(ArgBase::PtrToDynptr), "fp, dynptr_ptr");
        assert_eq!(names(ArgBase::PtrToBtfId), "ptr_, trusted_ptr_, rcu_ptr_");
    }

    #[test]
    fn memory_arguments_take_a_ctx_from_7_2_on() {
        let names = |k| {
            compatible_types(ArgBase::PtrToMem, k)
                .iter()
                .map(|(n, _)| *n)
                .collect::<Vec<_>>()
                .join(", ")
        };
        // The list 7.2 printed for a scalar passed as memory (verifier_helper_access_var_len).
        assert_eq!(
            names(KernelVersion::V7_2),
            "fp, pkt, pkt_meta, map_key, map_value, mem, ringbuf_mem, buf, trusted_ptr_, ctx"
        );
        assert!(!names(KernelVersion::V6_18).contains("ctx"));
    }

    #[test]
    fn param_counts_follow_the_prototypes() {
        assert_eq!(helper_param_count(1), Some(2));
        assert_eq!(helper_param_count(5), Some(0));
        assert_eq!(helper_param_count(25), Some(5));
        assert_eq!(helper_param_count(9), None);
    }
}
