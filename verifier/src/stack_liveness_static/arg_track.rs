//! Which frame's stack a register or a spilled value may point into (7.2's `struct arg_track`
//! and `arg_track_xfer`): the forward half of the static stack liveness. A value derived from
//! a frame pointer is tracked as that frame and up to four offsets; joins and arithmetic
//! lose the offsets first, then the frame (a mask of the frames it may be).

use crate::const_fold::atomic_load_reg;
use bpfemu_isa::{AluOp, AtomicOp, ByteOrder, Insn, Size, Source, Width};

pub(super) const MAX_OFFSETS: usize = 4;
/// The callee's stack slots a spill is tracked in (fp-8 to fp-512).
pub(super) const SPILL_SLOTS: usize = 64;
/// R0-R10.
pub(super) const REGS: usize = 11;
const FP: usize = 10;

/// What a value may point to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum ArgTrack {
    /// The dataflow has not reached the instruction yet.
    Unvisited,
    /// Not derived from any frame pointer.
    None,
    /// Derived from the frame pointer of one of the frames in the mask, offset unknown.
    Imprecise(u16),
    /// Derived from frame `frame`'s pointer, at one of `offs[..cnt]` (sorted, unused entries
    /// zero), or at an unknown offset when `cnt` is 0.
    Fp {
        frame: u8,
        cnt: u8,
        offs: [i16; MAX_OFFSETS],
    },
}

impl ArgTrack {
    pub(super) fn single(frame: usize, off: i16) -> ArgTrack {
        let mut offs = [0; MAX_OFFSETS];
        offs[0] = off;
        ArgTrack::Fp {
            frame: frame as u8,
            cnt: 1,
            offs,
        }
    }

    fn any_offset(frame: u8) -> ArgTrack {
        ArgTrack::Fp {
            frame,
            cnt: 0,
            offs: [0; MAX_OFFSETS],
        }
    }

    pub(super) fn is_visited(&self) -> bool {
        *self != ArgTrack::Unvisited
    }

    /// Whether the value may point into some frame's stack (`arg_is_fp`).
    pub(super) fn is_fp(&self) -> bool {
        matches!(self, ArgTrack::Fp { .. } | ArgTrack::Imprecise(_))
    }

    /// The offsets, when known (an empty slice when the frame is known and they are not).
    pub(super) fn offsets(&self) -> &[i16] {
        match self {
            ArgTrack::Fp { cnt, offs, .. } => &offs[..*cnt as usize],
            _ => &[],
        }
    }

    /// The frames this value may point into, as a mask (`arg_join_imprecise`'s view).
    fn frame_mask(&self) -> u16 {
        match *self {
            ArgTrack::Fp { frame, .. } => 1 << frame,
            ArgTrack::Imprecise(mask) => mask,
            _ => 0,
        }
    }

    /// The same frame with its offsets forgotten; other values unchanged.
    fn without_offsets(self) -> ArgTrack {
        match self {
            ArgTrack::Fp { frame, .. } => ArgTrack::any_offset(frame),
            other => other,
        }
    }

    /// Every offset moved by `delta`; an overflow forgets them (`arg_padd`).
    fn moved_by(self, delta: i64) -> ArgTrack {
        let ArgTrack::Fp {
            frame,
            cnt,
            mut offs,
        } = self
        else {
            return self;
        };
        for off in &mut offs[..cnt as usize] {
            match add_offset(*off, delta) {
                Some(moved) => *off = moved,
                None => return ArgTrack::any_offset(frame),
            }
        }
        ArgTrack::Fp { frame, cnt, offs }
    }
}

/// `off + delta` as a 16-bit offset, `None` when it does not fit (`arg_add`).
pub(super) fn add_offset(off: i16, delta: i64) -> Option<i16> {
    let d = i16::try_from(delta).ok()?;
    off.checked_add(d)
}

/// The sorted union of two offset sets of one frame; more than four forgets them
/// (`arg_merge_offsets`).
fn merge_offsets(frame: u8, a: &[i16], b: &[i16]) -> ArgTrack {
    let mut all: Vec<i16> = a.iter().chain(b).copied().collect();
    all.sort_unstable();
    all.dedup();
    if all.len() > MAX_OFFSETS {
        return ArgTrack::any_offset(frame);
    }
    let mut offs = [0; MAX_OFFSETS];
    offs[..all.len()].copy_from_slice(&all);
    ArgTrack::Fp {
        frame,
        cnt: all.len() as u8,
        offs,
    }
}

/// The value at a merge point of two paths (`__arg_track_join`).
pub(super) fn join(a: ArgTrack, b: ArgTrack) -> ArgTrack {
    use ArgTrack::*;
    match (a, b) {
        (_, Unvisited) => a,
        (Unvisited, _) => b,
        (Fp { frame: fa, .. }, Fp { frame: fb, .. }) if fa == fb => {
            if a.offsets().is_empty() || b.offsets().is_empty() {
                ArgTrack::any_offset(fa)
            } else {
                merge_offsets(fa, a.offsets(), b.offsets())
            }
        }
        (None, None) => a,
        // A pointer on one path only keeps its slot read but never surely written: a fake
        // fp+0 joins a single offset.
        (Fp { frame, .. }, None) | (None, Fp { frame, .. }) => {
            let fp = if a == None { b } else { a };
            if fp.offsets().len() == 1 {
                merge_offsets(frame, fp.offsets(), &[0])
            } else {
                fp
            }
        }
        _ => Imprecise(a.frame_mask() | b.frame_mask()),
    }
}

/// `dst op= src` for a 64-bit operation that is not a move (`arg_track_alu64`).
fn alu64(dst: ArgTrack, src: ArgTrack) -> ArgTrack {
    use ArgTrack::*;
    match (dst, src) {
        (Fp { frame, .. }, None) => ArgTrack::any_offset(frame),
        (Fp { frame: fd, .. }, Fp { frame: fs, .. }) if fd == fs => ArgTrack::any_offset(fd),
        (None, Fp { frame, .. }) => ArgTrack::any_offset(frame),
        (None, None) => None,
        _ => Imprecise(dst.frame_mask() | src.frame_mask()),
    }
}

/// The tracked slot of a byte offset from a frame pointer: fp-8 is 0; `None` when not an
/// aligned offset of the 512-byte stack (`fp_off_to_slot`).
fn fp_off_to_slot(off: i16) -> Option<usize> {
    if off >= 0 || (off as i32) < -((SPILL_SLOTS * 8) as i32) || off % 8 != 0 {
        return Option::None;
    }
    Some((-(off as i32) / 8 - 1) as usize)
}

/// Whether the register may point into the current frame (`can_be_local_fp`).
fn can_be_local_fp(depth: usize, reg: usize, at: &ArgTrack) -> bool {
    reg == FP || at.frame_mask() & (1 << depth) != 0
}

/// The value an 8-byte load through `regs[reg] + off` restores from the spills in `stack`,
/// the stack of frame `depth` (`fill_from_stack`).
fn fill_from_stack(
    regs: &[ArgTrack; REGS],
    reg: usize,
    off: i16,
    stack: &[ArgTrack; SPILL_SLOTS],
    depth: usize,
) -> ArgTrack {
    let imprecise = ArgTrack::Imprecise(((1u32 << (depth + 1)) - 1) as u16);
    if reg == FP {
        return fp_off_to_slot(off).map_or(imprecise, |slot| stack[slot]);
    }
    let offs = regs[reg].offsets();
    if offs.is_empty() {
        return imprecise;
    }
    let mut result = ArgTrack::None;
    for &base in offs {
        let Some(slot) = add_offset(base, off as i64).and_then(fp_off_to_slot) else {
            return imprecise;
        };
        result = join(result, stack[slot]);
    }
    result
}

/// A store of `val` (`size` bytes) through `regs[reg] + off` into the current frame's
/// spills: one known slot takes it, several candidates join it, an unknown offset joins it
/// into every slot; a narrower store leaves no pointer behind (`spill_to_stack`).
fn spill_to_stack(
    regs: &[ArgTrack; REGS],
    reg: usize,
    off: i16,
    stack: &mut [ArgTrack; SPILL_SLOTS],
    val: ArgTrack,
    size: usize,
) {
    let new = if size == 8 { val } else { ArgTrack::None };
    if reg == FP {
        if let Some(slot) = fp_off_to_slot(off) {
            stack[slot] = new;
        }
        return;
    }
    let offs = regs[reg].offsets();
    if offs.is_empty() {
        for slot in stack.iter_mut() {
            *slot = join(*slot, new);
        }
        return;
    }
    for &base in offs {
        let Some(slot) = add_offset(base, off as i64).and_then(fp_off_to_slot) else {
            continue;
        };
        stack[slot] = if offs.len() == 1 {
            new
        } else {
            join(stack[slot], new)
        };
    }
}

/// The slots overlapping `[off, off + size)` hold no pointer after a store that is not a
/// spill; with several candidate offsets they may still (`clear_overlapping_stack_slots`).
/// `cnt` 0 means the offset is unknown: every slot may be overwritten.
fn clear_overlapping(stack: &mut [ArgTrack; SPILL_SLOTS], off: i32, size: usize, cnt: usize) {
    for (i, slot) in stack.iter_mut().enumerate() {
        let start = -(((i + 1) * 8) as i32);
        let overlaps = start < off + size as i32 && start + 8 > off;
        if cnt == 0 || (overlaps && cnt != 1) {
            *slot = join(*slot, ArgTrack::None);
        } else if overlaps {
            *slot = ArgTrack::None;
        }
    }
}

/// `clear_stack_for_all_offs`: a non-spill store through `regs[reg] + off`.
fn clear_for_all_offsets(
    regs: &[ArgTrack; REGS],
    reg: usize,
    off: i16,
    stack: &mut [ArgTrack; SPILL_SLOTS],
    size: usize,
) {
    if reg == FP {
        clear_overlapping(stack, off as i32, size, 1);
        return;
    }
    let offs = regs[reg].offsets();
    if offs.is_empty() {
        clear_overlapping(stack, 0, size, 0);
        return;
    }
    for &base in offs {
        match add_offset(base, off as i64) {
            Some(at) => clear_overlapping(stack, at as i32, size, offs.len()),
            Option::None => {
                clear_overlapping(stack, 0, size, 0);
                break;
            }
        }
    }
}

/// Where the instruction's frame pointers go (`arg_track_xfer`): `regs` and `stack` (the
/// current frame's spills) are updated in place. `parent_stacks[f]` is frame `f`'s spills at
/// its call, for loads through a caller's stack pointer.
pub(super) fn transfer(
    insn: &Insn,
    regs: &mut [ArgTrack; REGS],
    stack: &mut [ArgTrack; SPILL_SLOTS],
    depth: usize,
    parent_stacks: &[Option<&[ArgTrack; SPILL_SLOTS]>],
) {
    use ArgTrack::None;
    match *insn {
        Insn::Alu {
            width: Width::W64,
            op,
            dst,
            src,
        } => {
            let d = dst.index();
            regs[d] = match (op, src) {
                (AluOp::Mov, Source::Imm(_)) => None,
                (AluOp::Mov, Source::Reg(s)) => regs[s.index()],
                (AluOp::Add, Source::Imm(imm)) => regs[d].moved_by(imm as i64),
                (AluOp::Sub, Source::Imm(imm)) => regs[d].moved_by(-(imm as i64)),
                (_, Source::Imm(_)) => regs[d].without_offsets(),
                (_, Source::Reg(s)) => alu64(regs[d], regs[s.index()]),
            };
        }
        Insn::Neg {
            width: Width::W64,
            dst,
        }
        | Insn::Endian {
            order: ByteOrder::Swap,
            dst,
            ..
        } => {
            regs[dst.index()] = regs[dst.index()].without_offsets();
        }
        // 32-bit results, sign-extending moves and address space casts are no pointers.
        Insn::Alu { dst, .. }
        | Insn::Neg { dst, .. }
        | Insn::Endian { dst, .. }
        | Insn::MovSx { dst, .. }
        | Insn::AddrSpaceCast { dst, .. }
        | Insn::LdImm64 { dst, .. } => regs[dst.index()] = None,
        // Neither helpers nor subprograms can make a frame pointer out of a stack slot, so the
        // spills stay; the argument registers are gone.
        Insn::Call(_) => regs[..6].fill(None),
        Insn::Load {
            size,
            sign_extend,
            dst,
            src,
            off,
        } => {
            let s = src.index();
            let spill_sized = size == Size::DW && !sign_extend;
            regs[dst.index()] = match regs[s] {
                _ if spill_sized && can_be_local_fp(depth, s, &regs[s]) => {
                    fill_from_stack(regs, s, off, stack, depth)
                }
                ArgTrack::Fp { frame, .. } if spill_sized && (frame as usize) < depth => {
                    match parent_stacks.get(frame as usize).copied().flatten() {
                        Some(parent) => fill_from_stack(regs, s, off, parent, frame as usize),
                        Option::None => ArgTrack::Imprecise(((1u32 << (frame + 1)) - 1) as u16),
                    }
                }
                ArgTrack::Imprecise(mask)
                    if spill_sized && mask & (1 << depth) == 0 && mask != 0 =>
                {
                    regs[s]
                }
                _ => None,
            };
        }
        Insn::StoreReg {
            size,
            dst,
            src,
            off,
        } => {
            let d = dst.index();
            if can_be_local_fp(depth, d, &regs[d]) {
                let val = regs[src.index()];
                spill_to_stack(regs, d, off, stack, val, size.bytes());
            }
        }
        Insn::Atomic {
            size,
            op,
            dst,
            src,
            off,
        } => {
            let d = dst.index();
            if can_be_local_fp(depth, d, &regs[d]) && op != AtomicOp::LoadAcquire {
                clear_for_all_offsets(regs, d, off, stack, size.bytes());
            }
            if let Some(r) = atomic_load_reg(op, d, src.index()) {
                regs[r] = None;
            }
        }
        Insn::Store { size, dst, off, .. } => {
            let d = dst.index();
            if can_be_local_fp(depth, d, &regs[d]) {
                clear_for_all_offsets(regs, d, off, stack, size.bytes());
            }
        }
        _ => {}
    }
}
