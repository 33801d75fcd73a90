//! Which registers hold a constant before each instruction, found before the walk (7.2's
//! `const_fold.c`, `bpf_compute_const_regs`). The static stack liveness reads the constants to
//! size a helper's stack access (a constant size register, the map whose key or value a
//! pointer points to) and to know the callback a `bpf_loop`-like helper runs. Not modelled:
//! 7.2's rewrite of the conditional jumps these constants decide into plain jumps
//! (`bpf_prune_dead_branches`), which removes their dead edges from the liveness.
//!
//! A forward dataflow over the whole program in reverse postorder: each subprogram starts with
//! every register unknown, a join of two different facts is unknown; a load from a frozen
//! read-only map (`.rodata`) at a known place is its constant.

use crate::env::Env;
use bpfemu_isa::{AluOp, AtomicOp, Insn, LdImm64Kind, Size, Source, Width};

/// What is known of one register at one instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConstReg {
    /// The instruction was not reached yet by the dataflow.
    Unvisited,
    Unknown,
    Const(u64),
    /// A map's address (its index in the object's maps).
    MapPtr(u32),
    /// An address inside a map's value: the map and the offset.
    MapValue(u32, u64),
    /// A subprogram's address (its index).
    Subprog(usize),
}

/// The registers R0-R10 before each instruction slot.
pub type ConstRegs = Vec<[ConstReg; 11]>;

/// The constants before every instruction (`Unvisited` where the dataflow never arrives).
pub fn compute(env: &Env<'_>) -> ConstRegs {
    let postorder: Vec<usize> = (0..env.subprogs.len())
        .flat_map(|sp| {
            let start = env.subprogs[sp].start;
            crate::stack_liveness::postorder(env, start, env.subprog_end(sp))
        })
        .collect();
    let mut before = vec![[ConstReg::Unvisited; 11]; env.len()];
    for sp in &env.subprogs {
        if sp.start < before.len() {
            before[sp.start] = [ConstReg::Unknown; 11];
        }
    }
    loop {
        let mut changed = false;
        for &pc in postorder.iter().rev() {
            let Some(insn) = env.insn(pc) else { continue };
            let mut out = before[pc];
            transfer(env, pc, insn, &mut out);
            for s in crate::scc::successors(env, pc, insn) {
                changed |= join_into(&mut before[s], &out);
            }
        }
        if !changed {
            return before;
        }
    }
}

/// The 32-bit constant a register holds before an instruction, as 7.2 keeps it
/// (`const_reg_mask`/`const_reg_vals`: wider constants are not kept).
pub fn small_const(regs: &[ConstReg; 11], reg: usize) -> Option<u32> {
    match regs[reg] {
        ConstReg::Const(v) if v == v as u32 as u64 => Some(v as u32),
        _ => None,
    }
}

fn join_into(target: &mut [ConstReg; 11], out: &[ConstReg; 11]) -> bool {
    let mut changed = false;
    for (old, new) in target.iter_mut().zip(out) {
        match *old {
            ConstReg::Unvisited if *new != ConstReg::Unvisited => {
                *old = *new;
                changed = true;
            }
            ConstReg::Unvisited | ConstReg::Unknown => {}
            _ if old != new => {
                *old = ConstReg::Unknown;
                changed = true;
            }
            _ => {}
        }
    }
    changed
}

fn transfer(env: &Env<'_>, pc: usize, insn: &Insn, regs: &mut [ConstReg; 11]) {
    use ConstReg::*;
    match *insn {
        Insn::Alu {
            width,
            op,
            dst,
            src,
        } => {
            let d = dst.index();
            let src_val = match src {
                Source::Reg(s) => regs[s.index()],
                Source::Imm(imm) => Const(imm as i64 as u64),
            };
            regs[d] = alu(op, regs[d], src_val, matches!(src, Source::Imm(_)));
            if width == Width::W32 {
                regs[d] = match regs[d] {
                    Const(v) => Const(v as u32 as u64),
                    _ => Unknown,
                };
            }
        }
        Insn::MovSx {
            width,
            dst,
            src,
            bits,
        } => {
            regs[dst.index()] = match regs[src.index()] {
                Const(v) => {
                    let shift = 64 - bits as u32;
                    let v = ((v << shift) as i64 >> shift) as u64;
                    if width == Width::W32 {
                        Const(v as u32 as u64)
                    } else {
                        Const(v)
                    }
                }
                _ => Unknown,
            };
        }
        Insn::Neg { dst, .. } | Insn::Endian { dst, .. } | Insn::AddrSpaceCast { dst, .. } => {
            regs[dst.index()] = Unknown;
        }
        Insn::LdImm64 {
            dst,
            kind,
            imm,
            next_imm,
        } => {
            regs[dst.index()] = ld_imm64(env, pc, kind, imm, next_imm);
        }
        Insn::LdAbs { .. } | Insn::LdInd { .. } | Insn::Call(_) => {
            regs[..6].fill(Unknown);
        }
        Insn::Load {
            size,
            sign_extend,
            dst,
            src,
            off,
        } => {
            regs[dst.index()] = match regs[src.index()] {
                MapValue(map, at) => {
                    read_only_value(env, map, at as i64 + off as i64, size, sign_extend)
                }
                _ => Unknown,
            };
        }
        Insn::Atomic { op, dst, src, .. } => {
            if let Some(r) = atomic_load_reg(op, dst.index(), src.index()) {
                regs[r] = Unknown;
            }
        }
        _ => {}
    }
}

/// One ALU operation on what is known of its operands (`const_reg_xfer`): moves, constant
/// additions and subtractions (also inside a map value), and ANDs that make a zero.
fn alu(op: AluOp, dst: ConstReg, src: ConstReg, imm: bool) -> ConstReg {
    use ConstReg::*;
    match (op, dst, src) {
        (AluOp::Mov, _, _) => src,
        (AluOp::Add, Const(d), Const(s)) if imm => Const(d.wrapping_add(s)),
        (AluOp::Add, MapValue(m, d), Const(s)) if imm => MapValue(m, d.wrapping_add(s)),
        (AluOp::Sub, Const(d), Const(s)) if imm => Const(d.wrapping_sub(s)),
        (AluOp::Sub, MapValue(m, d), Const(s)) if imm => MapValue(m, d.wrapping_sub(s)),
        (AluOp::And, Const(d), Const(s)) => Const(d & s),
        (AluOp::And, _, Const(0)) => Const(0),
        (AluOp::And, Const(0), _) if !imm => Const(0),
        _ => Unknown,
    }
}

/// The constant a load of `size` bytes at `off` in the value of a frozen read-only map reads.
fn read_only_value(env: &Env<'_>, map: u32, off: i64, size: Size, sign_extend: bool) -> ConstReg {
    let Ok(off) = i32::try_from(off) else {
        return ConstReg::Unknown;
    };
    crate::mem::read_only_map_bytes(env, map, off, size.bytes() as i32, sign_extend)
        .map_or(ConstReg::Unknown, ConstReg::Const)
}

fn ld_imm64(env: &Env<'_>, pc: usize, kind: LdImm64Kind, imm: i32, next_imm: i32) -> ConstReg {
    match kind {
        LdImm64Kind::Imm => ConstReg::Const(Insn::imm64(imm, next_imm)),
        LdImm64Kind::MapFd | LdImm64Kind::MapIdx => ConstReg::MapPtr(imm as u32),
        LdImm64Kind::MapValue | LdImm64Kind::MapIdxValue => {
            ConstReg::MapValue(imm as u32, next_imm as u32 as u64)
        }
        LdImm64Kind::Func => (pc as i64 + 1 + imm as i64)
            .try_into()
            .ok()
            .and_then(|target| env.subprog_at(target))
            .map_or(ConstReg::Unknown, ConstReg::Subprog),
        _ => ConstReg::Unknown,
    }
}

/// The register an atomic instruction loads into (`bpf_atomic_load_reg`), if any.
pub fn atomic_load_reg(op: AtomicOp, dst: usize, src: usize) -> Option<usize> {
    match op {
        AtomicOp::Cmpxchg => Some(0),
        AtomicOp::LoadAcquire => Some(dst),
        AtomicOp::FetchAdd
        | AtomicOp::FetchOr
        | AtomicOp::FetchAnd
        | AtomicOp::FetchXor
        | AtomicOp::Xchg => Some(src),
        _ => None,
    }
}
