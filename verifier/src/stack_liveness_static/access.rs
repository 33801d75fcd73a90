//! How many bytes of the stack an instruction touches through a pointer (7.2's
//! `record_load_store_access` and `bpf_helper_stack_access_bytes`), and in which 4-byte halves.

use super::Halves;
use super::arg_track::{ArgTrack, REGS, add_offset};
use crate::call::proto::{ArgBase, MEM_FIXED_SIZE, MEM_UNINIT};
use crate::const_fold::{ConstReg, small_const};
use crate::env::Env;
use bpfemu_isa::helpers::id;
use bpfemu_isa::{AtomicOp, CallTarget, Insn};
use bpfemu_loader::btf::BtfKind;

/// An access whose length is unknown: it may read from its offset up to the frame pointer.
pub(super) const UNKNOWN: i64 = i64::MIN;
const HALF_SLOT: i64 = 4;
const HALVES: i64 = 128;
const MAX_BPF_STACK: i64 = 512;
const DYNPTR_SIZE: i64 = 16;

/// The pointer, the instruction's offset and the bytes a load or store accesses (positive:
/// read, negative: written whole).
pub(super) fn load_store(insn: &Insn, regs: &[ArgTrack; REGS]) -> Option<(ArgTrack, i16, i64)> {
    let bytes = |size: bpfemu_isa::Size| size.bytes() as i64;
    match *insn {
        Insn::Load { size, src, off, .. } => Some((regs[src.index()], off, bytes(size))),
        Insn::StoreReg { size, dst, off, .. } | Insn::Store { size, dst, off, .. } => {
            Some((regs[dst.index()], off, -bytes(size)))
        }
        Insn::Atomic {
            size,
            op,
            dst,
            src,
            off,
        } => Some(match op {
            AtomicOp::StoreRelease => (regs[dst.index()], off, -bytes(size)),
            AtomicOp::LoadAcquire => (regs[src.index()], off, bytes(size)),
            _ => (regs[dst.index()], off, bytes(size)),
        }),
        _ => None,
    }
}

/// The pointer with the instruction's offset folded into its known offsets; an overflow
/// forgets them.
pub(super) fn with_offset(ptr: ArgTrack, off: i16) -> ArgTrack {
    let ArgTrack::Fp {
        frame,
        cnt,
        mut offs,
    } = ptr
    else {
        return ptr;
    };
    for o in &mut offs[..cnt as usize] {
        match add_offset(*o, off as i64) {
            Some(moved) => *o = moved,
            None => {
                return ArgTrack::Fp {
                    frame,
                    cnt: 0,
                    offs: [0; super::arg_track::MAX_OFFSETS],
                };
            }
        }
    }
    ArgTrack::Fp { frame, cnt, offs }
}

/// The halves `[lo, hi]` (clamped to the stack).
fn range(lo: i64, hi: i64) -> Halves {
    (lo.max(0)..=hi.min(HALVES - 1)).fold(0, |m, h| m | 1 << h)
}

/// The halves an access of `bytes` at `fp_off` may read and surely writes
/// (`record_stack_access_off`): a read marks every half it touches, a write only the halves
/// it covers whole; at or above the frame pointer nothing (the walk refuses it).
pub(super) fn halves(fp_off: i64, bytes: i64) -> (Halves, Halves) {
    if fp_off >= 0 {
        return (0, 0);
    }
    let below = -fp_off;
    if bytes == UNKNOWN {
        return (range(0, (below - 1) / HALF_SLOT), 0);
    }
    if bytes > 0 {
        let hi = (below - 1) / HALF_SLOT;
        let lo = ((below - bytes) / HALF_SLOT).max(0);
        return (range(lo, hi), 0);
    }
    let hi = below / HALF_SLOT - 1;
    let lo = ((below + bytes + HALF_SLOT - 1) / HALF_SLOT).max(0);
    if lo <= hi { (0, range(lo, hi)) } else { (0, 0) }
}

/// The registers of a helper that runs a callback: the callback's, the caller's context
/// argument, and the callback register that receives it (`find_callback_subprog`).
pub(super) fn callback_registers(helper: i32) -> Option<(usize, usize, usize)> {
    match helper {
        id::LOOP | id::USER_RINGBUF_DRAIN => Some((2, 3, 2)),
        id::FOR_EACH_MAP_ELEM => Some((2, 3, 4)),
        id::FIND_VMA => Some((3, 4, 3)),
        _ => None,
    }
}

/// The arguments a helper or kfunc takes (the kernel's call summary), `None` when unknown.
pub(super) fn param_count(env: &Env<'_>, target: CallTarget) -> Option<usize> {
    match target {
        CallTarget::Helper(id) => crate::call::helper::helper_param_count(id),
        CallTarget::Kfunc { btf_id, off: 0 } => crate::call::kfunc::kfunc_param_count(
            env.input.kernel.version(),
            env.input.kernel.btf().ok(),
            btf_id as u32,
        ),
        _ => None,
    }
}

/// The bytes helper `helper` accesses through argument `arg` (0 for R1), from its prototype
/// and the constants before the call (`bpf_helper_stack_access_bytes`): positive read,
/// negative written, 0 none, [`UNKNOWN`].
pub(super) fn helper_bytes(
    env: &Env<'_>,
    helper: i32,
    arg: usize,
    consts: &[ConstReg; REGS],
    used_maps: &[u32],
) -> i64 {
    let Some(proto) = crate::call::proto::xdp_proto_of(env.input.kernel.version(), helper) else {
        return UNKNOWN;
    };
    let at = proto.args[arg];
    let size = match at.base {
        ArgBase::PtrToMapKey | ArgBase::PtrToMapValue => {
            let is_key = at.base == ArgBase::PtrToMapKey;
            let map = proto.args[..arg]
                .iter()
                .position(|a| a.base == ArgBase::ConstMapPtr)
                .and_then(|i| match consts[i + 1] {
                    ConstReg::MapPtr(m) => env.input.maps.get(m as usize),
                    _ => None,
                });
            match map {
                Some(m) => i64::from(if is_key { m.key_size } else { m.value_size }),
                None => match largest_map_size(env, used_maps, is_key) {
                    0 => return UNKNOWN,
                    size => size,
                },
            }
        }
        ArgBase::PtrToMem if at.flags & MEM_FIXED_SIZE != 0 => i64::from(at.size),
        ArgBase::PtrToMem => {
            let sized = proto
                .args
                .get(arg + 1)
                .is_some_and(|a| matches!(a.base, ArgBase::ConstSize | ArgBase::ConstSizeOrZero));
            if !sized {
                return UNKNOWN;
            }
            match small_const(consts, arg + 2) {
                Some(size) => i64::from(size),
                // Sizes that differ between paths: at most the whole stack is read.
                None if at.flags & MEM_UNINIT != 0 => return 0,
                None => return MAX_BPF_STACK,
            }
        }
        ArgBase::PtrToDynptr => DYNPTR_SIZE,
        // Only callback helpers take one; the callback's accesses are its own analysis'.
        ArgBase::PtrToStack => return 0,
        _ => return UNKNOWN,
    };
    if at.flags & MEM_UNINIT != 0 {
        -size
    } else {
        size
    }
}

/// The largest key or value of the maps the program uses, inner maps' too.
fn largest_map_size(env: &Env<'_>, used_maps: &[u32], is_key: bool) -> i64 {
    let size = |m: &bpfemu_loader::MapSpec| if is_key { m.key_size } else { m.value_size };
    used_maps
        .iter()
        .filter_map(|&i| env.input.maps.get(i as usize))
        .flat_map(|m| std::iter::once(size(m)).chain(m.inner.as_deref().map(size)))
        .max()
        .map_or(0, i64::from)
}

/// The bytes kfunc `btf_id` (of vmlinux) accesses through argument `arg`, from its BTF
/// prototype (`bpf_kfunc_stack_access_bytes`): a dynptr is 16 bytes, memory sized by the next
/// argument (`__sz`, `__szk`) that argument's constant (else the whole stack), other memory
/// its pointee's size; an iterator's constructor (`KF_ITER_NEW`) and an `__uninit` argument
/// write it. A non-pointer accesses nothing.
pub(super) fn kfunc_bytes(
    env: &Env<'_>,
    btf_id: i32,
    arg: usize,
    consts: &[ConstReg; REGS],
) -> i64 {
    let target = CallTarget::Kfunc { btf_id, off: 0 };
    let (Some(_), Ok(btf)) = (param_count(env, target), env.input.kernel.btf()) else {
        return UNKNOWN;
    };
    let id = btf_id as u32;
    let Some(params) = crate::call::kfunc::func_params(btf, id) else {
        return UNKNOWN;
    };
    let Some(param) = params.get(arg) else {
        return 0;
    };
    let pointer = btf
        .skip_mods_and_typedefs(param.ty)
        .and_then(|t| btf.get(t));
    let Some(BtfKind::Ptr { ty: pointee }) = pointer.map(|t| &t.kind) else {
        return 0;
    };
    let sized_by_next = params
        .get(arg + 1)
        .is_some_and(|p| p.name.ends_with("__sz") || p.name.ends_with("__szk"));
    let size = if crate::call::kfunc::points_to_struct(btf, param.ty, "bpf_dynptr") {
        DYNPTR_SIZE
    } else if sized_by_next {
        match small_const(consts, arg + 2) {
            Some(size) => i64::from(size),
            None => return MAX_BPF_STACK,
        }
    } else {
        match btf
            .skip_mods_and_typedefs(*pointee)
            .and_then(|t| btf.size_of(t))
        {
            Some(size) => i64::from(size),
            None => return UNKNOWN,
        }
    };
    let iter_new = arg == 0
        && crate::call::iter::iter_op_of_call(Some(btf), btf_id)
            == Some(crate::call::iter::IterOp::New);
    if iter_new || param.name.ends_with("__uninit") {
        -size
    } else {
        size
    }
}
