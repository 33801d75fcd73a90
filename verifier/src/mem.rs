//! Loads, stores and atomics (`check_mem_access`, `check_atomic`) on the stack, the packet, map
//! values and keys, the ctx (through [`crate::prog_type`]) and memory regions; and the memory
//! arguments of helpers (`check_helper_mem_access`, `check_mem_size_reg`).

use crate::alu::{
    assign_scalar_id_before_mov, check_reg_read, check_reg_write, coerce_reg_to_size,
    coerce_reg_to_size_sx, reg_width,
};
use crate::btf_access;
use crate::env::Env;
use crate::log::reg_type_name;
use crate::precision::mark_chain_precision;
use crate::state::reg::{
    BPF_MAX_VAR_OFF, MEM_RDONLY, PTR_MAYBE_NULL, PTR_UNTRUSTED, RegState, RegType,
};
use crate::state::stack::{MAX_BPF_STACK, SLOT_SIZE, SlotType, StackSlot};
use crate::state::{FuncState, VerifierState};
use crate::{Errno, Reject};
use bpfemu_isa::{AtomicOp, Insn, Reg, Size};
use bpfemu_loader::MapOrigin;

/// Whether an access reads or writes memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AccessType {
    Read,
    /// A write; for a helper's memory argument (`MEM_UNINIT`) uninitialised stack is allowed
    /// and becomes written.
    Write,
}

use bpfemu_isa::uapi::BPF_F_RDONLY_PROG;
/// `BPF_F_WRONLY_PROG`.
const BPF_F_WRONLY_PROG: u32 = 1 << 8;

/// A load, store or atomic instruction (`check_load_mem`, `check_store_reg`, the `BPF_ST`
/// case, `check_atomic`).
pub fn check_mem_insn(
    env: &mut Env<'_>,
    state: &mut VerifierState,
    insn: &Insn,
) -> Result<(), Reject> {
    match *insn {
        Insn::Load {
            size,
            sign_extend,
            dst,
            src,
            off,
        } => {
            check_reg_read(env, state, src)?;
            check_reg_write(env, dst)?;
            let ty = state.reg(src).ty;
            check_mem_access(
                env,
                state,
                src,
                off as i32,
                size,
                AccessType::Read,
                Some(dst),
                false,
                sign_extend,
            )?;
            save_aux_ptr_type(env, ty)
        }
        Insn::StoreReg {
            size,
            dst,
            src,
            off,
        } => {
            check_reg_read(env, state, src)?;
            check_reg_read(env, state, dst)?;
            let ty = state.reg(dst).ty;
            check_mem_access(
                env,
                state,
                dst,
                off as i32,
                size,
                AccessType::Write,
                Some(src),
                false,
                false,
            )?;
            save_aux_ptr_type(env, ty)
        }
        Insn::Store { size, dst, off, .. } => {
            check_reg_read(env, state, dst)?;
            let ty = state.reg(dst).ty;
            let version = env.input.kernel.version();
            if ty == RegType::Ctx && !crate::behaviour::stores_immediates_into_ctx(version) {
                let name = crate::state::reg::reg_type_str(ty, state.reg(dst).flags, version);
                return Err(env.reject(
                    Errno::Eacces,
                    format!("BPF_ST stores into R{} {name} is not allowed", dst.number()),
                ));
            }
            check_mem_access(
                env,
                state,
                dst,
                off as i32,
                size,
                AccessType::Write,
                None,
                false,
                false,
            )?;
            save_aux_ptr_type(env, ty)
        }
        Insn::Atomic {
            size,
            op,
            dst,
            src,
            off,
        } => check_atomic(env, state, size, op, dst, src, off),
        _ => Ok(()),
    }
}

/// `save_aux_ptr_type`: one instruction may not access ctx on one path and other memory on
/// another (the ctx conversion rewrites it).
fn save_aux_ptr_type(env: &mut Env<'_>, ty: RegType) -> Result<(), Reject> {
    let idx = env.insn_idx;
    let mismatch_ok = |t: RegType| {
        !matches!(
            t,
            RegType::Ctx
                | RegType::Socket
                | RegType::SockCommon
                | RegType::TcpSock
                | RegType::XdpSock
                | RegType::BtfId
                | RegType::Arena
        )
    };
    match env.aux[idx].ptr_type {
        None => env.aux[idx].ptr_type = Some(ty),
        Some(prev) if prev != ty && (!mismatch_ok(ty) || !mismatch_ok(prev)) => {
            return Err(env.reject(
                Errno::Einval,
                "same insn cannot be used with different pointers",
            ));
        }
        _ => {}
    }
    Ok(())
}

/// `atomic_ptr_type_ok`: no atomic access goes through a ctx, packet or socket pointer (their
/// accesses are rewritten or bounded in ways an atomic instruction cannot be).
fn refuse_atomic_through(
    env: &mut Env<'_>,
    state: &VerifierState,
    reg: Reg,
    what: &str,
) -> Result<(), Reject> {
    let ptr = *state.reg(reg);
    let refused = matches!(ptr.ty, RegType::Ctx | RegType::Packet | RegType::PacketMeta)
        || ptr.is_sk_pointer();
    if !refused {
        return Ok(());
    }
    let name = reg_type_name(env, &ptr);
    // Before 5.12's atomics the one atomic instruction was BPF_XADD, and its check says so.
    let insn = match crate::profile::insns::has(
        env.input.kernel.version(),
        crate::profile::insns::Feature::AtomicOps,
    ) {
        true => "BPF_ATOMIC",
        false => "BPF_XADD",
    };
    Err(env.reject(
        Errno::Eacces,
        format!("{insn} {what} R{} {name} is not allowed", reg.number()),
    ))
}

#[allow(clippy::too_many_arguments)]
fn check_atomic(
    env: &mut Env<'_>,
    state: &mut VerifierState,
    size: Size,
    op: AtomicOp,
    dst: Reg,
    src: Reg,
    off: i16,
) -> Result<(), Reject> {
    match op {
        // `check_atomic_load`/`check_atomic_store`: the access as a plain load or store,
        // then the pointer's type (as it stands after the access).
        AtomicOp::LoadAcquire => {
            let type_first = crate::profile::insns::has(
                env.input.kernel.version(),
                crate::profile::insns::Feature::AtomicLoadTypeFirst,
            );
            if type_first {
                refuse_atomic_through(env, state, src, "loads from")?;
            }
            check_mem_insn(
                env,
                state,
                &Insn::Load {
                    size,
                    sign_extend: false,
                    dst,
                    src,
                    off,
                },
            )?;
            return refuse_atomic_through(env, state, src, "loads from");
        }
        AtomicOp::StoreRelease => {
            check_mem_insn(
                env,
                state,
                &Insn::StoreReg {
                    size,
                    dst,
                    src,
                    off,
                },
            )?;
            return refuse_atomic_through(env, state, dst, "stores into");
        }
        _ => {}
    }
    if !matches!(size, Size::W | Size::DW) {
        return Err(env.reject(Errno::Einval, "invalid atomic operand size"));
    }
    check_reg_read(env, state, src)?;
    check_reg_read(env, state, dst)?;
    if op == AtomicOp::Cmpxchg {
        check_reg_read(env, state, Reg::R0)?;
    }
    refuse_atomic_through(env, state, dst, "stores into")?;
    let load_reg = if op.fetches() {
        let r = if op == AtomicOp::Cmpxchg {
            Reg::R0
        } else {
            src
        };
        check_reg_write(env, r)?;
        *state.reg_mut(r) = RegState::unknown_scalar();
        Some(r)
    } else {
        None
    };
    check_mem_access(
        env,
        state,
        dst,
        off as i32,
        size,
        AccessType::Read,
        None,
        true,
        false,
    )?;
    if let Some(r) = load_reg {
        check_mem_access(
            env,
            state,
            dst,
            off as i32,
            size,
            AccessType::Read,
            Some(r),
            true,
            false,
        )?;
    }
    check_mem_access(
        env,
        state,
        dst,
        off as i32,
        size,
        AccessType::Write,
        None,
        true,
        false,
    )
}

/// `check_mem_access`: `size` bytes at `off` from the pointer in `regno`; a read loads into
/// `value_regno`, a write stores from it (`None`: an immediate store or no register).
#[allow(clippy::too_many_arguments)]
pub fn check_mem_access(
    env: &mut Env<'_>,
    state: &mut VerifierState,
    regno: Reg,
    off: i32,
    size: Size,
    access: AccessType,
    value_regno: Option<Reg>,
    strict_alignment_once: bool,
    is_ldsx: bool,
) -> Result<(), Reject> {
    let size_bytes = size.bytes() as i32;
    let reg = *state.reg(regno);
    check_ptr_alignment(env, &reg, off, size_bytes, strict_alignment_once)?;
    let off = off + reg.off;
    let r = regno.number();
    match reg.ty {
        RegType::MapKey if reg.flags & PTR_MAYBE_NULL == 0 => {
            if access == AccessType::Write {
                return Err(env.reject(
                    Errno::Eacces,
                    format!("write to change key R{r} not allowed"),
                ));
            }
            let key_size = reg.map.and_then(|m| env.map(m)).map_or(0, |m| m.key_size);
            check_mem_region_access(env, &reg, r, off, size_bytes, key_size, false)?;
            if let Some(v) = value_regno {
                *state.reg_mut(v) = RegState::unknown_scalar();
            }
        }
        RegType::MapValue if reg.flags & PTR_MAYBE_NULL == 0 => {
            check_map_access_type(env, &reg, off, size_bytes, access)?;
            check_map_access(env, &reg, r, off, size_bytes, false)?;
            if access == AccessType::Read
                && let Some(v) = value_regno
            {
                let value = read_only_map_value(env, &reg, off, size_bytes, is_ldsx);
                *state.reg_mut(v) = match value {
                    Some(val) => RegState::known(val),
                    None => RegState::unknown_scalar(),
                };
            }
        }
        RegType::Mem if reg.flags & PTR_MAYBE_NULL == 0 => {
            let rdonly = reg.flags & MEM_RDONLY != 0;
            if access == AccessType::Write && rdonly {
                let name = reg_type_name(env, &reg);
                return Err(env.reject(Errno::Eacces, format!("R{r} cannot write into {name}")));
            }
            if !(rdonly && reg.flags & PTR_UNTRUSTED != 0) {
                check_mem_region_access(env, &reg, r, off, size_bytes, reg.mem_size, false)?;
            } else {
                // Untrusted memory is read as the kernel probes it: it lies in the kernel.
                env.aux[env.insn_idx].reads_kernel_memory = true;
            }
            if let Some(v) = value_regno
                && (access == AccessType::Read || rdonly)
            {
                *state.reg_mut(v) = RegState::unknown_scalar();
            }
        }
        RegType::Ctx => {
            check_ptr_off_reg(env, &reg, r)?;
            let write = access == AccessType::Write;
            let ctx = env
                .prog_type
                .ctx_access(
                    off,
                    size_bytes as u32,
                    write,
                    env.input.expected_attach_type,
                )
                // A sign-extending load of a pointer field is refused like a bad offset
                // (measured on 6.18: ldxsw of data, data_end or data_meta).
                .filter(|c| !is_ldsx || c.reg_type == RegType::Scalar);
            let Some(ctx) = ctx else {
                crate::log::print_source_line(env, env.insn_idx);
                return Err(env.reject(
                    Errno::Eacces,
                    format!("invalid bpf_context access off={off} size={size_bytes}"),
                ));
            };
            let idx = env.insn_idx;
            env.aux[idx].ctx_access = Some(ctx);
            if access == AccessType::Read
                && let Some(v) = value_regno
            {
                *state.reg_mut(v) = if ctx.reg_type == RegType::Scalar {
                    RegState::unknown_scalar()
                } else {
                    RegState::pointer(ctx.reg_type)
                };
            }
        }
        RegType::Stack => {
            if access == AccessType::Read {
                refuse_read_below_allocated(env, state, &reg, r, off, size_bytes, false)?;
            }
            let extra = stack_access_words(env, access, false);
            check_stack_access_within_bounds(env, state, &reg, r, off, size_bytes, extra)?;
            check_stack_access(env, state, &reg, off, size_bytes, access, value_regno)?;
        }
        RegType::Packet | RegType::PacketMeta => {
            if access == AccessType::Write && !env.prog_type.may_write_packet() {
                return Err(env.reject(Errno::Eacces, "cannot write into packet"));
            }
            check_packet_access(env, &reg, r, off, size_bytes, false)?;
            if access == AccessType::Read
                && let Some(v) = value_regno
            {
                *state.reg_mut(v) = RegState::unknown_scalar();
            }
        }
        RegType::ConstPtrToMap => {
            let write = access != AccessType::Read;
            let loaded = btf_access::check_ptr_to_map_access(env, &reg, r, off, size_bytes, write)?;
            env.aux[env.insn_idx].reads_kernel_memory = true;
            if let Some(v) = value_regno {
                *state.reg_mut(v) = loaded_reg(loaded);
            }
        }
        RegType::BtfId if reg.flags & PTR_MAYBE_NULL == 0 => {
            let write = access != AccessType::Read;
            let loaded = btf_access::check_ptr_to_btf_access(env, &reg, r, off, size_bytes, write)?;
            env.aux[env.insn_idx].reads_kernel_memory = true;
            // A store's value register is the source, not something loaded.
            if let Some(v) = value_regno.filter(|_| !write) {
                *state.reg_mut(v) = loaded_reg(loaded);
            }
        }
        RegType::Arena => {
            if access == AccessType::Read
                && let Some(v) = value_regno
            {
                *state.reg_mut(v) = RegState::unknown_scalar();
            }
        }
        _ if reg.is_sk_pointer() => {
            if access == AccessType::Write {
                let name = reg_type_name(env, &reg);
                return Err(env.reject(Errno::Eacces, format!("R{r} cannot write into {name}")));
            }
            crate::sock::check_sock_access(env, &reg, r, off, size_bytes)?;
            if let Some(v) = value_regno {
                *state.reg_mut(v) = RegState::unknown_scalar();
            }
        }
        _ => {
            let name = reg_type_name(env, &reg);
            return Err(env.reject(Errno::Eacces, format!("R{r} invalid mem access '{name}'")));
        }
    }
    if let Some(v) = value_regno
        && access == AccessType::Read
        && size_bytes < 8
        && state.reg(v).ty == RegType::Scalar
    {
        let dst = state.reg_mut(v);
        if is_ldsx {
            coerce_reg_to_size_sx(dst, size_bytes as u32);
        } else {
            coerce_reg_to_size(dst, size_bytes as u32);
        }
    }
    Ok(())
}

/// `mark_btf_ld_reg`: the register a load through a kernel structure gives.
fn loaded_reg(loaded: btf_access::Loaded) -> RegState {
    match loaded {
        btf_access::Loaded::Scalar => RegState::unknown_scalar(),
        btf_access::Loaded::BtfId { id, flags } => {
            let mut r = RegState::pointer(RegType::BtfId);
            r.btf_id = id;
            r.flags = flags;
            r
        }
        btf_access::Loaded::UntrustedMem => {
            let mut r = RegState::pointer(RegType::Mem);
            r.flags = MEM_RDONLY | PTR_UNTRUSTED;
            r.mem_size = 0;
            r
        }
    }
}

/// A frozen read-only map (`.rodata`): its initial contents are known constants.
fn read_only_map_value(
    env: &Env<'_>,
    reg: &RegState,
    off: i32,
    size: i32,
    is_ldsx: bool,
) -> Option<u64> {
    if !reg.var_off.is_const() {
        return None;
    }
    let off = i32::try_from(off as i64 + reg.var_off.value as i64).ok()?;
    read_only_map_bytes(env, reg.map?, off, size, is_ldsx)
}

/// The `size` bytes at `off` in the value of map `index` when it is a frozen read-only map
/// (`bpf_map_direct_read`), sign-extended for a sign-extending load.
pub fn read_only_map_bytes(
    env: &Env<'_>,
    index: u32,
    off: i32,
    size: i32,
    is_ldsx: bool,
) -> Option<u64> {
    let map = env.map(index)?;
    if map.map_flags & BPF_F_RDONLY_PROG == 0
        || !matches!(
            map.origin,
            MapOrigin::GlobalData { .. } | MapOrigin::Kconfig
        )
    {
        return None;
    }
    let data = map.initial.as_ref()?;
    let start = usize::try_from(off).ok()?;
    let bytes = data.get(start..start + size as usize)?;
    let mut buf = [0u8; 8];
    buf[..bytes.len()].copy_from_slice(bytes);
    let v = u64::from_le_bytes(buf);
    Some(if is_ldsx {
        match size {
            1 => v as i8 as i64 as u64,
            2 => v as i16 as i64 as u64,
            4 => v as i32 as i64 as u64,
            _ => v,
        }
    } else {
        v
    })
}

/// `check_ptr_alignment`: only stack accesses (and atomics) must be aligned for root.
fn check_ptr_alignment(
    env: &mut Env<'_>,
    reg: &RegState,
    off: i32,
    size: i32,
    strict_once: bool,
) -> Result<(), Reject> {
    let mut strict = strict_once;
    let desc = match reg.ty {
        RegType::Packet | RegType::PacketMeta => {
            if !strict || size == 1 {
                return Ok(());
            }
            let t = reg.var_off.add(crate::state::Tnum::constant(
                (2 + reg.off as i64 + off as i64) as u64,
            ));
            if !t.is_aligned(size as u64) {
                return Err(env.reject(
                    Errno::Eacces,
                    format!(
                        "misaligned packet access off 2+{} size {size}",
                        misaligned_offsets(env, reg, off)
                    ),
                ));
            }
            return Ok(());
        }
        RegType::MapKey => "key ",
        RegType::MapValue => "value ",
        RegType::Ctx => "context ",
        RegType::Stack => {
            strict = true;
            "stack "
        }
        RegType::Arena => return Ok(()),
        RegType::Socket => "sock ",
        RegType::SockCommon => "sock_common ",
        RegType::TcpSock => "tcp_sock ",
        RegType::XdpSock => "xdp_sock ",
        _ => "",
    };
    if !strict || size == 1 {
        return Ok(());
    }
    let t = reg.var_off.add(crate::state::Tnum::constant(
        (reg.off as i64 + off as i64) as u64,
    ));
    if !t.is_aligned(size as u64) {
        return Err(env.reject(
            Errno::Eacces,
            format!(
                "misaligned {desc}access off {} size {size}",
                misaligned_offsets(env, reg, off)
            ),
        ));
    }
    Ok(())
}

/// The offsets of a misaligned access message: `VAR_OFF+REG_OFF+OFF`, the var_off as
/// `tnum_strn` prints it; 7.x has no fixed offset apart from var_off: `VAR_OFF+OFF`.
pub(crate) fn misaligned_offsets(env: &Env<'_>, reg: &RegState, off: i32) -> String {
    let version = env.input.kernel.version();
    if crate::behaviour::words_pointer_offset_as_one(version) {
        let var_off = reg
            .var_off
            .add(crate::state::Tnum::constant(reg.off as i64 as u64));
        return format!("{}+{off}", var_off.text());
    }
    let var_off = match crate::behaviour::prints_constant_var_off_as_number(version) {
        true => reg.var_off.text(),
        false => reg.var_off.pair_text(),
    };
    format!("{var_off}+{}+{off}", reg.off)
}

/// `__check_ptr_off_reg` for ctx: only the unmodified pointer may be dereferenced.
fn check_ptr_off_reg(env: &mut Env<'_>, reg: &RegState, r: u8) -> Result<(), Reject> {
    let name = reg_type_name(env, reg);
    if reg.off < 0
        && crate::behaviour::words_negative_pointer_offsets_apart(env.input.kernel.version())
    {
        return Err(env.reject(
            Errno::Eacces,
            format!("negative offset {name} ptr R{r} off={} disallowed", reg.off),
        ));
    }
    if reg.off != 0 {
        return Err(env.reject(
            Errno::Eacces,
            format!(
                "dereference of modified {name} ptr R{r} off={} disallowed",
                reg.off
            ),
        ));
    }
    if !reg.var_off.is_const() || reg.var_off.value != 0 {
        return Err(env.reject(
            Errno::Eacces,
            format!(
                "variable {name} access var_off={} disallowed",
                reg.var_off.text()
            ),
        ));
    }
    Ok(())
}

/// `__check_mem_access`: `[off, off + size)` within `mem_size`; logs the type's message.
fn check_mem_bytes(
    env: &mut Env<'_>,
    reg: &RegState,
    r: u8,
    off: i64,
    size: i32,
    mem_size: u32,
    zero_ok: bool,
) -> Result<(), Reject> {
    let size_ok = size > 0 || (size == 0 && zero_ok);
    if off >= 0 && size_ok && off + size as i64 <= mem_size as i64 {
        return Ok(());
    }
    let off = off as i32;
    let msg = match reg.ty {
        RegType::MapKey => {
            format!("invalid access to map key, key_size={mem_size} off={off} size={size}")
        }
        RegType::MapValue => {
            format!("invalid access to map value, value_size={mem_size} off={off} size={size}")
        }
        RegType::Packet | RegType::PacketMeta | RegType::PacketEnd => format!(
            "invalid access to packet, off={off} size={size}, R{r}(id={},off={off},r={mem_size})",
            reg.id
        ),
        _ => format!("invalid access to memory, mem_size={mem_size} off={off} size={size}"),
    };
    env.verbose(&format!("{msg}\n"));
    Err(Reject {
        errno: Errno::Eacces,
        msg,
        logged: true,
    })
}

/// Whether the smallest offset is negative in the kernel's sense: 6.18 asks of the variable
/// part alone (its fixed offset is in `off`), 7.x of the pointer's one offset, fixed part
/// included (`behaviour::words_pointer_offset_as_one`). Either way such an access fails; the
/// answer picks the words.
fn min_offset_is_negative(env: &Env<'_>, reg: &RegState, off: i32) -> bool {
    let (smin, off) = if crate::behaviour::words_pointer_offset_as_one(env.input.kernel.version()) {
        let whole = reg.smin_value.checked_add(reg.off as i64);
        (whole.unwrap_or(i64::MIN), off as i64 - reg.off as i64)
    } else {
        (reg.smin_value, off as i64)
    };
    let sum = smin.wrapping_add(off);
    smin < 0 && (smin == i64::MIN || sum != sum as i32 as i64 || sum < 0)
}

/// `check_mem_region_access`: the whole variable range of the pointer must fit.
fn check_mem_region_access(
    env: &mut Env<'_>,
    reg: &RegState,
    r: u8,
    off: i32,
    size: i32,
    mem_size: u32,
    zero_ok: bool,
) -> Result<(), Reject> {
    let smin = reg.smin_value;
    if min_offset_is_negative(env, reg, off) {
        return Err(env.reject(
            Errno::Eacces,
            format!("R{r} min value is negative, either use unsigned index or do a if (index >=0) check."),
        ));
    }
    if check_mem_bytes(
        env,
        reg,
        r,
        smin.wrapping_add(off as i64) as i32 as i64,
        size,
        mem_size,
        zero_ok,
    )
    .is_err()
    {
        return Err(env.reject(
            Errno::Eacces,
            format!("R{r} min value is outside of the allowed memory range"),
        ));
    }
    if reg.umax_value >= BPF_MAX_VAR_OFF as u64 {
        return Err(env.reject(
            Errno::Eacces,
            format!("R{r} unbounded memory access, make sure to bounds check any such access"),
        ));
    }
    if check_mem_bytes(
        env,
        reg,
        r,
        (reg.umax_value as i64 + off as i64) as i32 as i64,
        size,
        mem_size,
        zero_ok,
    )
    .is_err()
    {
        return Err(env.reject(
            Errno::Eacces,
            format!("R{r} max value is outside of the allowed memory range"),
        ));
    }
    Ok(())
}

/// `check_map_access_type`: read-only and write-only maps.
fn check_map_access_type(
    env: &mut Env<'_>,
    reg: &RegState,
    off: i32,
    size: i32,
    access: AccessType,
) -> Result<(), Reject> {
    let Some(map) = reg.map.and_then(|m| env.map(m)) else {
        return Ok(());
    };
    let vs = map.value_size;
    if access == AccessType::Write && map.map_flags & BPF_F_RDONLY_PROG != 0 {
        return Err(env.reject(
            Errno::Eacces,
            format!("write into map forbidden, value_size={vs} off={off} size={size}"),
        ));
    }
    if access == AccessType::Read && map.map_flags & BPF_F_WRONLY_PROG != 0 {
        return Err(env.reject(
            Errno::Eacces,
            format!("read from map forbidden, value_size={vs} off={off} size={size}"),
        ));
    }
    Ok(())
}

/// `check_map_access`: bounds, and special fields (spin locks, timers) that loads and stores
/// may not touch.
pub fn check_map_access(
    env: &mut Env<'_>,
    reg: &RegState,
    r: u8,
    off: i32,
    size: i32,
    zero_ok: bool,
) -> Result<(), Reject> {
    let Some(map) = reg.map.and_then(|m| env.map(m)) else {
        return Ok(());
    };
    check_mem_region_access(env, reg, r, off, size, map.value_size, zero_ok)?;
    for field in env.map_special_fields(reg.map.unwrap_or(0)) {
        let p = field.offset as i64;
        if reg.smin_value + (off as i64) < p + field.size as i64
            && p < reg.umax_value as i64 + off as i64 + size as i64
        {
            return Err(env.reject(
                Errno::Eacces,
                format!("{} cannot be accessed directly by load/store", field.kind),
            ));
        }
    }
    Ok(())
}

/// `check_packet_access`.
pub fn check_packet_access(
    env: &mut Env<'_>,
    reg: &RegState,
    r: u8,
    off: i32,
    size: i32,
    zero_ok: bool,
) -> Result<(), Reject> {
    let negative = format!(
        "R{r} min value is negative, either use unsigned index or do a if (index >=0) check."
    );
    // 7.x looks at the range first, then at the lowest address of its folded bounds (the fixed
    // offset inside them): a pointer moved below the packet's start is "negative" there.
    if crate::behaviour::words_packet_access_as_region(env.input.kernel.version()) {
        if reg.range < 0 {
            return Err(env.reject(
                Errno::Eacces,
                format!("R{r} offset is outside of the packet"),
            ));
        }
        let folded_min = reg.smin_value.saturating_add(reg.off as i64);
        let lowest = folded_min.saturating_add((off - reg.off) as i64);
        if folded_min < 0
            && (folded_min == i64::MIN || lowest != lowest as i32 as i64 || lowest < 0)
        {
            return Err(env.reject(Errno::Eacces, negative));
        }
    }
    if reg.smin_value < 0 {
        return Err(env.reject(Errno::Eacces, negative));
    }
    let fits = reg.range >= 0
        && check_mem_bytes(env, reg, r, off as i64, size, reg.range as u32, zero_ok).is_ok();
    if !fits {
        let words = match reg.range >= 0
            && crate::behaviour::words_packet_access_as_region(env.input.kernel.version())
        {
            true => packet_region_words(reg, off, size),
            false => "offset is outside of the packet",
        };
        return Err(env.reject(Errno::Eacces, format!("R{r} {words}")));
    }
    Ok(())
}

/// Which end of a refused packet access 7.x names. Its pointers hold the fixed offset inside
/// their bounds, and a pointer checked against `pkt_end` gets the range up to its own
/// maximum (6.18: up to its fixed offset): both 6.18 terms grow by the variable part's umax,
/// which the pointers of one id share (a range of 0, none proven since the variable part was
/// added, stays 0). 7.x checks the lowest address first, then the highest; the verdict is
/// 6.18's either way (the highest fits exactly when the fixed offset does).
fn packet_region_words(reg: &RegState, off: i32, size: i32) -> &'static str {
    let reach = match reg.range {
        0 => 0,
        r => r as i64 + reg.umax_value as i64,
    };
    let lowest = reg.smin_value + off as i64;
    if lowest < 0 || lowest + size as i64 > reach {
        "min value is outside of the allowed memory range"
    } else {
        "max value is outside of the allowed memory range"
    }
}

/// The frame a stack pointer points into.
fn stack_frame(state: &VerifierState, reg: &RegState) -> usize {
    (reg.frameno as usize).min(state.frames.len() - 1)
}

/// How a refusal of a stack access names it: by its direction, or, for a helper's access in
/// the kernels before [`crate::behaviour::words_helper_stack_access_by_direction`], as an
/// indirect access.
fn stack_access_words(env: &Env<'_>, access: AccessType, by_helper: bool) -> &'static str {
    let kernel = env.input.kernel.version();
    if by_helper && !crate::behaviour::words_helper_stack_access_by_direction(kernel) {
        " indirect access to"
    } else if access == AccessType::Read {
        " read from"
    } else {
        " write to"
    }
}

/// `check_stack_access_within_bounds` (root may read uninitialised stack, so reads and
/// writes share the 512-byte window), growing the frame's stack as the kernel does.
/// `extra` is [`stack_access_words`]'s.
fn check_stack_access_within_bounds(
    env: &mut Env<'_>,
    state: &mut VerifierState,
    reg: &RegState,
    r: u8,
    off: i32,
    size: i32,
    extra: &str,
) -> Result<(), Reject> {
    if !reg.var_off.is_const()
        && (reg.smax_value >= BPF_MAX_VAR_OFF || reg.smin_value <= -BPF_MAX_VAR_OFF)
    {
        return Err(env.reject(
            Errno::Eacces,
            format!("invalid unbounded variable-offset{extra} stack R{r}"),
        ));
    }
    let (min_off, last_start) = stack_starts(reg, off);
    let max_off = last_start + size as i64;
    let bad = min_off < -(MAX_BPF_STACK as i64) || min_off > -1 || max_off > 0 || size < 0;
    if bad {
        let msg = if reg.var_off.is_const() {
            format!("invalid{extra} stack R{r} off={off} size={size}")
        } else if crate::behaviour::words_variable_stack_offsets_with_fixed_part(
            env.input.kernel.version(),
        ) {
            format!(
                "invalid variable-offset{extra} stack R{r} var_off={} off={off} size={size}",
                reg.var_off.text()
            )
        } else {
            format!(
                "invalid variable-offset{extra} stack R{r} var_off={} size={size}",
                reg.var_off.text()
            )
        };
        return Err(env.reject(Errno::Eacces, msg));
    }
    let f = stack_frame(state, reg);
    grow_stack(env, &mut state.frames[f], (-min_off) as usize);
    Ok(())
}

/// `grow_stack_state`: the frame's stack and its subprogram's depth.
pub fn grow_stack(env: &mut Env<'_>, frame: &mut FuncState, size: usize) {
    let size = size.div_ceil(SLOT_SIZE) * SLOT_SIZE;
    if frame.allocated_stack() >= size {
        return;
    }
    frame.grow_stack(size);
    if let Some(sp) = env.subprogs.get_mut(frame.subprogno as usize) {
        sp.stack_depth = sp.stack_depth.max(size as u32);
    }
}

fn spi_of(off: i64) -> (usize, usize) {
    let slot = (-off - 1) as usize;
    (slot / SLOT_SIZE, slot % SLOT_SIZE)
}

/// The bytes of the stack from frame offset `from` up to (not including) `to`, each as its
/// offset, its slot and its index in the slot: the one walk every byte-wise check shares.
fn stack_bytes(from: i64, to: i64) -> impl Iterator<Item = (i64, usize, usize)> {
    (from..to).map(|off| {
        let (spi, idx) = spi_of(off);
        (off, spi, idx)
    })
}

/// The first and last frame offset an access at `reg + off` may start at: one offset when
/// the pointer's offset is known, else the signed range shifted (the caller has checked that
/// the range is bounded).
fn stack_starts(reg: &RegState, off: i32) -> (i64, i64) {
    if reg.var_off.is_const() {
        let start = reg.var_off.value as i64 + off as i64;
        (start, start)
    } else {
        (reg.smin_value + off as i64, reg.smax_value + off as i64)
    }
}

/// A read reaching below the stack its frame has allocated, in the kernels where only writes
/// grow it ([`crate::behaviour::reads_grow_the_stack`]): refused there, a load in the words
/// of the bounds check ("invalid read from stack R10 off=-8 size=8"), a helper's read in
/// those of the initialised-range check ("invalid indirect read from stack R2 off -8+0 size
/// 8", the deepest byte being the first it looks at).
fn refuse_read_below_allocated(
    env: &mut Env<'_>,
    state: &VerifierState,
    reg: &RegState,
    r: u8,
    off: i32,
    size: i32,
    by_helper: bool,
) -> Result<(), Reject> {
    if crate::behaviour::reads_grow_the_stack(env.input.kernel.version()) {
        return Ok(());
    }
    let frame = &state.frames[stack_frame(state, reg)];
    let (min_off, last_start) = stack_starts(reg, off);
    if min_off >= -(frame.allocated_stack() as i64) {
        return Ok(());
    }
    // Outside the 512-byte window the bounds check, which the kernel runs first, refuses it
    // in its own words (a helper's: "invalid indirect access to stack R2 off=-59664 size=16").
    if min_off < -(MAX_BPF_STACK as i64) || last_start + size as i64 > 0 {
        return Ok(());
    }
    let msg = match (by_helper, reg.var_off.is_const()) {
        (false, true) => format!("invalid read from stack R{r} off={off} size={size}"),
        // Only 5.10 and 6.1 get here, whose words have no fixed offset.
        (false, false) => format!(
            "invalid variable-offset read from stack R{r} var_off={} size={size}",
            reg.var_off.text()
        ),
        (true, true) => {
            format!("invalid indirect read from stack R{r} off {min_off}+0 size {size}")
        }
        (true, false) => format!(
            "invalid indirect read from stack R{r} var_off {}+0 size {size}",
            reg.var_off.text()
        ),
    };
    Err(env.reject(Errno::Eacces, msg))
}

/// The stack read or write of a load or store (`check_stack_read` / `check_stack_write`),
/// inside the frame's bounds: at a known offset it is a fill or spill of one slot; at a
/// variable one, every byte it may touch is checked or marked.
fn check_stack_access(
    env: &mut Env<'_>,
    state: &mut VerifierState,
    reg: &RegState,
    off: i32,
    size: i32,
    access: AccessType,
    value: Option<Reg>,
) -> Result<(), Reject> {
    let f = stack_frame(state, reg);
    let (min, max) = stack_starts(reg, off);
    match (access, reg.var_off.is_const()) {
        (AccessType::Read, true) => read_fixed(env, state, f, min, size, value),
        (AccessType::Read, false) => {
            check_stack_range_initialized(env, state, reg, 0, (min, max), size, false)?;
            if let Some(d) = value {
                mark_reg_stack_read(env, state, f, min, max + size as i64, d);
            }
            crate::fastcall::check_contract(env, &state.frames[f], min);
            Ok(())
        }
        (AccessType::Write, true) => write_fixed(env, state, f, min, size, value),
        (AccessType::Write, false) => write_var(env, state, f, min, max + size as i64, value),
    }
}

/// `check_stack_read_fixed_off`.
fn read_fixed(
    env: &mut Env<'_>,
    state: &mut VerifierState,
    f: usize,
    off: i64,
    size: i32,
    dst: Option<Reg>,
) -> Result<(), Reject> {
    let (spi, _) = spi_of(off);
    env.log.scratch_stack(spi);
    crate::fastcall::check_contract(env, &state.frames[f], off);
    crate::stack_liveness::mark_read(env, state, f, 1 << spi);
    let slot = state.frames[f].stack[spi];
    let stype = slot.slot_type;
    if slot.is_spilled_reg() {
        let spill_size = 1 + stype[..SLOT_SIZE - 1]
            .iter()
            .rev()
            .take_while(|t| **t == SlotType::Spill)
            .count();
        if size as usize != SLOT_SIZE || spill_size != SLOT_SIZE {
            if slot.spilled_ptr.ty != RegType::Scalar {
                crate::log::print_source_line(env, env.insn_idx);
                return Err(env.reject(Errno::Eacces, "invalid size of register fill"));
            }
            let Some(d) = dst else {
                return Ok(());
            };
            if !crate::behaviour::narrows_spilled_scalar_fills(env.input.kernel.version()) {
                let fill = UnnarrowedFill {
                    f,
                    off,
                    size,
                    spill_size,
                };
                return fill_part_of_spill_unnarrowed(env, state, slot, fill, d);
            }
            if size as usize <= spill_size && off % SLOT_SIZE as i64 == 0 {
                let mut spilled = slot.spilled_ptr;
                if size == 4 && spill_size == 4 && reg_width(&spilled) <= 32 {
                    assign_scalar_id_before_mov(env, &mut spilled);
                    state.frames[f].stack[spi].spilled_ptr = spilled;
                }
                let mut r = spilled;
                if reg_width(&spilled) > size as u32 * 8 {
                    r.id = 0;
                }
                *state.reg_mut(d) = r;
                push_stack_access(env, state, f, spi);
            } else {
                let (mut spill_cnt, mut zero_cnt) = (0, 0);
                for (at, _, idx) in stack_bytes(off, off + size as i64) {
                    let i = at - off;
                    match stype[idx] {
                        SlotType::Spill => spill_cnt += 1,
                        SlotType::Zero => zero_cnt += 1,
                        SlotType::Misc | SlotType::Invalid => {}
                        _ => return Err(invalid_stack_read(env, off, i, size)),
                    }
                }
                let zero_spill = spill_cnt == size && slot.spilled_ptr.var_off.equals_const(0);
                *state.reg_mut(d) = if zero_spill || zero_cnt == size {
                    RegState::known(0)
                } else {
                    RegState::unknown_scalar()
                };
                if zero_spill {
                    push_stack_access(env, state, f, spi);
                }
            }
        } else if let Some(d) = dst {
            let mut spilled = slot.spilled_ptr;
            assign_scalar_id_before_mov(env, &mut spilled);
            state.frames[f].stack[spi].spilled_ptr = spilled;
            *state.reg_mut(d) = spilled;
            push_stack_access(env, state, f, spi);
        }
        return Ok(());
    }
    for (at, _, idx) in stack_bytes(off, off + size as i64) {
        if !matches!(
            stype[idx],
            SlotType::Misc | SlotType::Zero | SlotType::Invalid
        ) {
            return Err(invalid_stack_read(env, off, at - off, size));
        }
    }
    if let Some(d) = dst {
        mark_reg_stack_read(env, state, f, off, off + size as i64, d);
    }
    Ok(())
}

/// Where a fill reads: the frame, the offset, its size and the spill's.
struct UnnarrowedFill {
    f: usize,
    off: i64,
    size: i32,
    spill_size: usize,
}

/// A fill of part of a spilled scalar, or of a spill narrower than 8 bytes, before
/// [`crate::behaviour::narrows_spilled_scalar_fills`]: the spill itself when the fill is its
/// exact size at the slot's start, else an unknown scalar from bytes that are each spilled,
/// written or (for root) uninitialised; a known zero byte is refused there.
fn fill_part_of_spill_unnarrowed(
    env: &mut Env<'_>,
    state: &mut VerifierState,
    slot: StackSlot,
    fill: UnnarrowedFill,
    dst: Reg,
) -> Result<(), Reject> {
    let UnnarrowedFill {
        f,
        off,
        size,
        spill_size,
    } = fill;
    if off % SLOT_SIZE as i64 == 0 && size as usize == spill_size {
        *state.reg_mut(dst) = slot.spilled_ptr;
        push_stack_access(env, state, f, spi_of(off).0);
        return Ok(());
    }
    for (at, _, idx) in stack_bytes(off, off + size as i64) {
        if !matches!(
            slot.slot_type[idx],
            SlotType::Spill | SlotType::Misc | SlotType::Invalid
        ) {
            return Err(invalid_stack_read(env, off, at - off, size));
        }
    }
    *state.reg_mut(dst) = RegState::unknown_scalar();
    Ok(())
}

fn invalid_stack_read(env: &mut Env<'_>, off: i64, i: i64, size: i32) -> Reject {
    env.reject(
        Errno::Eacces,
        format!("invalid read from stack off {off}+{i} size {size}"),
    )
}

/// `mark_reg_stack_read`: zeros read from `STACK_ZERO` bytes stay a known zero.
fn mark_reg_stack_read(
    env: &mut Env<'_>,
    state: &mut VerifierState,
    f: usize,
    min: i64,
    max: i64,
    dst: Reg,
) {
    let mut zeros = 0;
    for (_, spi, idx) in stack_bytes(min, max) {
        env.log.scratch_stack(spi);
        if state.frames[f].stack[spi].slot_type[idx] != SlotType::Zero {
            break;
        }
        zeros += 1;
    }
    *state.reg_mut(dst) = if zeros == max - min {
        RegState::known(0)
    } else {
        RegState::unknown_scalar()
    };
}

/// The immediate a `BPF_ST` store at the current instruction writes (`None` for a register
/// store).
fn store_imm(env: &Env<'_>) -> Option<i32> {
    match env.insn(env.insn_idx) {
        Some(Insn::Store { imm, .. }) => Some(*imm),
        _ => None,
    }
}

/// `check_stack_write_fixed_off`.
fn write_fixed(
    env: &mut Env<'_>,
    state: &mut VerifierState,
    f: usize,
    off: i64,
    size: i32,
    value: Option<Reg>,
) -> Result<(), Reject> {
    let (spi, _) = spi_of(off);
    env.log.scratch_stack(spi);
    crate::call::dynptr::destroy_if_dynptr_stack_slot(env, state, f, spi)?;
    crate::fastcall::check_contract(env, &state.frames[f], off);
    // Only a whole aligned slot is surely written: a partial write leaves the rest live.
    if off % SLOT_SIZE as i64 == 0 && size as usize == SLOT_SIZE {
        crate::stack_liveness::mark_write(env, state, f, 1 << spi);
    }
    let cur = state.curframe();
    let imm = store_imm(env);
    let aligned = off % SLOT_SIZE as i64 == 0;
    let mut vreg = value.map(|v| *state.reg(v));
    let spills_any_scalar =
        crate::behaviour::spills_zero_and_unbounded_scalars(env.input.kernel.version());
    if let (Some(v), Some(r)) = (value, vreg.as_mut())
        && aligned
        && r.ty == RegType::Scalar
        && (spills_any_scalar || (!is_unbounded_scalar(r) && !r.is_const_scalar(0)))
    {
        let fits = reg_width(r) <= 8 * size as u32;
        if fits && spills_any_scalar {
            assign_scalar_id_before_mov(env, r);
            *state.reg_mut(v) = *r;
        }
        save_register_state(&mut state.frames[f], spi, r, size, spills_any_scalar);
        if !fits {
            state.frames[f].stack[spi].spilled_ptr.id = 0;
        }
        push_stack_access(env, state, f, spi);
        return Ok(());
    }
    if vreg.is_none()
        && aligned
        && let Some(imm) = imm
        && (spills_any_scalar || imm != 0)
    {
        let r = RegState::known(imm as i64 as u64);
        save_register_state(&mut state.frames[f], spi, &r, size, spills_any_scalar);
        push_stack_access(env, state, f, spi);
        return Ok(());
    }
    if let Some(r) = vreg.filter(|r| r.is_spillable()) {
        if size as usize != SLOT_SIZE {
            crate::log::print_source_line(env, env.insn_idx);
            return Err(env.reject(Errno::Eacces, "invalid size of register spill"));
        }
        if f != cur && r.ty == RegType::Stack {
            return Err(env.reject(
                Errno::Einval,
                "cannot spill pointers to stack into stack frame of the caller",
            ));
        }
        save_register_state(&mut state.frames[f], spi, &r, size, spills_any_scalar);
        push_stack_access(env, state, f, spi);
        return Ok(());
    }
    let zero = vreg.map_or(imm == Some(0), |r| r.is_const_scalar(0));
    if zero && let Some(v) = value {
        mark_chain_precision(env, state, v)?;
    }
    let slot = &mut state.frames[f].stack[spi];
    scrub_special_slot(slot);
    slot.spilled_ptr = RegState::not_init();
    let ty = if zero { SlotType::Zero } else { SlotType::Misc };
    for (_, _, idx) in stack_bytes(off, off + size as i64) {
        slot.slot_type[idx] = ty;
    }
    Ok(())
}

/// Records a spill or fill of slot `spi` of frame `f` in the jump history, for backtracking.
fn push_stack_access(env: &mut Env<'_>, state: &mut VerifierState, f: usize, spi: usize) {
    use crate::state::frame::{INSN_F_SPI_SHIFT, INSN_F_STACK_ACCESS};
    let flags = INSN_F_STACK_ACCESS | ((spi as u32) << INSN_F_SPI_SHIFT) | f as u32;
    crate::explore::push_jmp_history(env, state, flags);
}

/// `save_register_state`: the bytes of the slot the spill leaves become plain data, keeping
/// zeros when `keep_zero` (see [`crate::behaviour::spills_zero_and_unbounded_scalars`]).
fn save_register_state(
    frame: &mut FuncState,
    spi: usize,
    reg: &RegState,
    size: i32,
    keep_zero: bool,
) {
    let slot = &mut frame.stack[spi];
    slot.spilled_ptr = *reg;
    let size = size as usize;
    for i in (SLOT_SIZE - size..SLOT_SIZE).rev() {
        slot.slot_type[i] = SlotType::Spill;
    }
    for t in slot.slot_type[..SLOT_SIZE - size].iter_mut() {
        let kept = *t == SlotType::Invalid || (keep_zero && *t == SlotType::Zero);
        if !kept {
            *t = SlotType::Misc;
        }
    }
}

/// `__is_scalar_unbounded`: a scalar nothing is known of.
fn is_unbounded_scalar(r: &RegState) -> bool {
    let unknown = RegState::unknown_scalar();
    r.var_off == unknown.var_off
        && (r.smin_value, r.smax_value, r.umin_value, r.umax_value)
            == (
                unknown.smin_value,
                unknown.smax_value,
                unknown.umin_value,
                unknown.umax_value,
            )
        && (
            r.s32_min_value,
            r.s32_max_value,
            r.u32_min_value,
            r.u32_max_value,
        ) == (
            unknown.s32_min_value,
            unknown.s32_max_value,
            unknown.u32_min_value,
            unknown.u32_max_value,
        )
}

/// `scrub_special_slot`: a write into a slot ends the spilled register (or dynptr, iterator,
/// irq flag) there, and the rest of the slot becomes plain data.
fn scrub_special_slot(slot: &mut crate::state::StackSlot) {
    slot.spilled_ptr.ty = RegType::NotInit;
    if matches!(
        slot.slot_type[SLOT_SIZE - 1],
        SlotType::Spill | SlotType::Dynptr | SlotType::Iter | SlotType::IrqFlag
    ) {
        slot.mark_written_misc();
    }
}

/// `check_stack_write_var_off`.
fn write_var(
    env: &mut Env<'_>,
    state: &mut VerifierState,
    f: usize,
    min: i64,
    max: i64,
    value: Option<Reg>,
) -> Result<(), Reject> {
    crate::fastcall::check_contract(env, &state.frames[f], min);
    let imm = store_imm(env);
    let writing_zero = match value {
        Some(v) => state.reg(v).is_const_scalar(0),
        None => imm == Some(0),
    };
    let mut zero_used = false;
    let scrubs = crate::behaviour::scrubs_spills_under_var_off_writes(env.input.kernel.version());
    for (_, spi, idx) in stack_bytes(min, max) {
        env.log.scratch_stack(spi);
        let slot = &mut state.frames[f].stack[spi];
        let t = slot.slot_type[idx];
        if !scrubs {
            // The register is gone, the bytes this write cannot reach still say spill: a fill
            // of the slot then finds no scalar ("invalid size of register fill").
            slot.spilled_ptr.ty = RegType::NotInit;
            slot.slot_type[idx] = match writing_zero && t == SlotType::Zero {
                true => {
                    zero_used = true;
                    SlotType::Zero
                }
                false => SlotType::Misc,
            };
            continue;
        }
        if writing_zero
            && t == SlotType::Spill
            && slot.is_spilled_scalar()
            && slot.spilled_ptr.var_off.equals_const(0)
        {
            zero_used = true;
            continue;
        }
        // The spill is gone as a whole, also the bytes this write may not reach (a fill
        // would otherwise see spill bytes with no register: the running kernel has the fix).
        scrub_special_slot(slot);
        let mut new = SlotType::Misc;
        if writing_zero && t == SlotType::Zero {
            new = SlotType::Zero;
            zero_used = true;
        }
        slot.slot_type[idx] = new;
    }
    if zero_used && let Some(v) = value {
        mark_chain_precision(env, state, v)?;
    }
    Ok(())
}

/// `check_stack_range_initialized` for root: every byte must be plain data, zero,
/// uninitialised (root may read it) or part of a spilled register; `clobber` (a helper
/// writes the memory) turns them into unknown data.
fn check_stack_range_initialized(
    env: &mut Env<'_>,
    state: &mut VerifierState,
    reg: &RegState,
    r: u8,
    (min_off, max_off): (i64, i64),
    access_size: i32,
    clobber: bool,
) -> Result<(), Reject> {
    let f = stack_frame(state, reg);
    // A helper's raw-mode argument (`MEM_UNINIT`, at a constant offset) is written byte by
    // byte after the call's checks and read by no one here.
    let reads = !(clobber && env.raw_mode_arg && reg.var_off.is_const());
    if !reads {
        // The kernel writes it byte by byte as stores, each checked against the fastcall area.
        crate::fastcall::check_contract(env, &state.frames[f], min_off);
    }
    for (i, spi, idx) in stack_bytes(min_off, max_off + access_size as i64) {
        if spi >= state.frames[f].stack.len() {
            return Err(env.reject(Errno::Efault, "allocated_stack too small"));
        }
        if reads && spi < 64 {
            let readable = {
                let slot = &state.frames[f].stack[spi];
                matches!(
                    slot.slot_type[idx],
                    SlotType::Misc | SlotType::Zero | SlotType::Invalid
                ) || slot.is_spilled_reg()
            };
            if readable {
                crate::stack_liveness::mark_read(env, state, f, 1 << spi);
            }
        }
        let frame = &mut state.frames[f];
        let slot = &mut frame.stack[spi];
        match slot.slot_type[idx] {
            SlotType::Misc => {}
            SlotType::Zero | SlotType::Invalid => {
                if clobber {
                    slot.slot_type[idx] = SlotType::Misc;
                }
            }
            _ if slot.is_spilled_reg() => {
                if clobber {
                    slot.spilled_ptr = RegState::unknown_scalar();
                    slot.mark_written_misc();
                }
            }
            SlotType::Dynptr if clobber => {
                return Err(env.reject(
                    Errno::Eacces,
                    format!("potential write to dynptr at off={i} disallowed"),
                ));
            }
            _ => {
                let msg = if reg.var_off.is_const() {
                    format!(
                        "invalid read from stack R{r} off {min_off}+{} size {access_size}",
                        i - min_off
                    )
                } else {
                    format!(
                        "invalid read from stack R{r} var_off {}+{} size {access_size}",
                        reg.var_off.text(),
                        i - min_off
                    )
                };
                return Err(env.reject(Errno::Eacces, msg));
            }
        }
    }
    Ok(())
}

/// A helper's memory argument: `access_size` bytes at the pointer in `regno`
/// (`check_helper_mem_access`). A write (`MEM_UNINIT` arguments, raw mode) may cover
/// uninitialised stack, which becomes written.
pub fn check_helper_mem_access(
    env: &mut Env<'_>,
    state: &mut VerifierState,
    regno: Reg,
    access_size: i32,
    access: AccessType,
    zero_size_allowed: bool,
) -> Result<(), Reject> {
    let reg = *state.reg(regno);
    let r = regno.number();
    match reg.ty {
        RegType::Packet | RegType::PacketMeta => {
            check_packet_access(env, &reg, r, reg.off, access_size, zero_size_allowed)
        }
        RegType::MapKey if reg.flags & PTR_MAYBE_NULL == 0 => {
            if access == AccessType::Write {
                let name = reg_type_name(env, &reg);
                return Err(env.reject(Errno::Eacces, format!("R{r} cannot write into {name}")));
            }
            let key_size = reg.map.and_then(|m| env.map(m)).map_or(0, |m| m.key_size);
            check_mem_region_access(env, &reg, r, reg.off, access_size, key_size, false)
        }
        RegType::MapValue if reg.flags & PTR_MAYBE_NULL == 0 => {
            check_map_access_type(env, &reg, reg.off, access_size, access)?;
            check_map_access(env, &reg, r, reg.off, access_size, zero_size_allowed)
        }
        RegType::Mem if reg.flags & PTR_MAYBE_NULL == 0 => {
            if reg.flags & MEM_RDONLY != 0 && access == AccessType::Write {
                let name = reg_type_name(env, &reg);
                return Err(env.reject(Errno::Eacces, format!("R{r} cannot write into {name}")));
            }
            check_mem_region_access(
                env,
                &reg,
                r,
                reg.off,
                access_size,
                reg.mem_size,
                zero_size_allowed,
            )
        }
        RegType::Stack => {
            if access_size == 0 && !zero_size_allowed {
                return Err(env.reject(Errno::Eacces, "invalid zero-sized read"));
            }
            if access == AccessType::Read {
                refuse_read_below_allocated(env, state, &reg, r, reg.off, access_size, true)?;
            }
            check_stack_access_within_bounds(
                env,
                state,
                &reg,
                r,
                reg.off,
                access_size,
                stack_access_words(env, access, true),
            )?;
            let (min, max) = stack_starts(&reg, reg.off);
            let clobber = access == AccessType::Write
                || crate::behaviour::clobbers_stack_on_helper_reads(env.input.kernel.version());
            check_stack_range_initialized(env, state, &reg, r, (min, max), access_size, clobber)
        }
        _ => {
            if zero_size_allowed && access_size == 0 && reg.is_const_scalar(0) {
                return Ok(());
            }
            let name = reg_type_name(env, &reg);
            Err(env.reject(Errno::Eacces, format!("R{r} type={name} expected=fp")))
        }
    }
}

/// Marks the stack slots `size` bytes at the stack pointer `reg` cover as scratched for the
/// log: the kernel writes a raw-mode (`MEM_UNINIT`) helper argument byte by byte after the
/// call's checks, and each write scratches its slot.
pub fn scratch_stack_bytes(env: &mut Env<'_>, reg: &RegState, size: u64) {
    if reg.ty != RegType::Stack || size == 0 || !env.log.enabled() {
        return;
    }
    let (min, max) = stack_starts(reg, reg.off);
    let mut i = min;
    while i < max.saturating_add(size as i64) && i < 0 {
        env.log.scratch_stack(spi_of(i).0);
        i += 1;
    }
}

/// A helper's memory argument whose size is in a register (`ARG_CONST_SIZE[_OR_ZERO]`):
/// checks the size's bounds and the memory at `mem_regno` (`check_mem_size_reg`).
pub fn check_mem_size_reg(
    env: &mut Env<'_>,
    state: &mut VerifierState,
    mem_regno: Reg,
    size_regno: Reg,
    access: AccessType,
    zero_size_allowed: bool,
) -> Result<(), Reject> {
    let reg = *state.reg(size_regno);
    let r = size_regno.number();
    let access = if reg.var_off.is_const() {
        access
    } else {
        AccessType::Read
    };
    if reg.smin_value < 0 {
        return Err(env.reject(
            Errno::Eacces,
            format!("R{r} min value is negative, either use unsigned or 'var &= const'"),
        ));
    }
    let by_range = crate::behaviour::refuses_zero_size_by_its_range(env.input.kernel.version());
    if reg.umin_value == 0 && !by_range {
        // The memory's own check of an access of zero bytes decides, in its own words.
        check_helper_mem_access(env, state, mem_regno, 0, access, zero_size_allowed)?;
    }
    if reg.umin_value == 0 && !zero_size_allowed && by_range {
        return Err(env.reject(
            Errno::Eacces,
            format!(
                "R{r} invalid zero-sized read: u64=[{},{}]",
                reg.umin_value as i64, reg.umax_value as i64
            ),
        ));
    }
    // BPF_MAX_VAR_SIZ
    if reg.umax_value >= 1 << 29 {
        return Err(env.reject(
            Errno::Eacces,
            format!("R{r} unbounded memory access, use 'var &= const' or 'if (var < const)'"),
        ));
    }
    check_helper_mem_access(
        env,
        state,
        mem_regno,
        reg.umax_value as i32,
        access,
        zero_size_allowed,
    )?;
    mark_chain_precision(env, state, size_regno)
}
