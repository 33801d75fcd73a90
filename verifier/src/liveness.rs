//! Register liveness: which registers a later instruction may read (`compute_live_registers`),
//! so that pruning compares only those. Stack slots are `stack_liveness`'s.

use crate::env::Env;
use bpfemu_isa::{AtomicOp, CallTarget, Insn, Source};
use bpfemu_loader::Kernel;

const CALLER_SAVED: u16 = 0b11_1111;

fn bit(r: bpfemu_isa::Reg) -> u16 {
    1 << r.index()
}

/// (use, def) of one instruction (`compute_insn_live_regs`); a kfunc's parameters are counted
/// in `kernel`'s BTF.
pub(crate) fn use_def(kernel: &Kernel, insn: &Insn) -> (u16, u16) {
    match *insn {
        Insn::LdImm64 { dst, .. } => (0, bit(dst)),
        Insn::LdAbs { .. } | Insn::LdInd { .. } => (0xffff, 0),
        Insn::Load { dst, src, .. } => (bit(src), bit(dst)),
        Insn::Store { dst, .. } => (bit(dst), 0),
        Insn::StoreReg { dst, src, .. } => (bit(dst) | bit(src), 0),
        Insn::Atomic { op, dst, src, .. } => match op {
            AtomicOp::Cmpxchg => (1 | bit(dst) | bit(src), 1),
            AtomicOp::LoadAcquire => (bit(src), bit(dst)),
            AtomicOp::StoreRelease => (bit(dst) | bit(src), 0),
            op if op.fetches() => (bit(dst) | bit(src), bit(src)),
            _ => (bit(dst) | bit(src), 0),
        },
        Insn::Endian { dst, .. } | Insn::Neg { dst, .. } => (bit(dst), bit(dst)),
        Insn::Alu {
            op: bpfemu_isa::AluOp::Mov,
            dst,
            src,
            ..
        } => match src {
            Source::Imm(_) => (0, bit(dst)),
            Source::Reg(s) => (bit(s), bit(dst)),
        },
        Insn::MovSx { dst, src, .. } | Insn::AddrSpaceCast { dst, src, .. } => (bit(src), bit(dst)),
        Insn::Alu { dst, src, .. } => match src {
            Source::Imm(_) => (bit(dst), bit(dst)),
            Source::Reg(s) => (bit(dst) | bit(s), bit(dst)),
        },
        Insn::Ja { .. } | Insn::MayGoto { .. } => (0, 0),
        Insn::Exit => (1, 0),
        Insn::Call(target) => {
            let params = match target {
                CallTarget::Helper(id) => crate::call::helper::helper_param_count(id),
                CallTarget::Kfunc { btf_id, off: 0 } => crate::call::kfunc::kfunc_param_count(
                    kernel.version(),
                    kernel.btf().ok(),
                    btf_id as u32,
                ),
                _ => None,
            };
            let uses = match params {
                Some(n) => ((1u16 << (n + 1)) - 1) & !1,
                None => CALLER_SAVED & !1,
            };
            (uses, CALLER_SAVED)
        }
        Insn::Jump { dst, src, .. } => match src {
            Source::Imm(_) => (bit(dst), 0),
            Source::Reg(s) => (bit(dst) | bit(s), 0),
        },
    }
}

/// Fills `env.live_regs` with the registers live before each instruction.
pub fn compute_live_registers(env: &mut Env<'_>) {
    let len = env.len();
    let insns: Vec<(usize, Insn)> = env.prog.iter().map(|(pc, i)| (pc, *i)).collect();
    let mut ud = vec![(0u16, 0u16); len];
    let mut succ: Vec<[Option<usize>; 2]> = vec![[None, None]; len];
    for (pc, insn) in &insns {
        ud[*pc] = use_def(env.input.kernel, insn);
        let next = pc + insn.slots();
        let target = |off: i64| {
            let t = *pc as i64 + 1 + off;
            (t >= 0 && (t as usize) < len).then_some(t as usize)
        };
        let fall = (next < len).then_some(next);
        succ[*pc] = match *insn {
            Insn::Exit => [None, None],
            Insn::Ja { off, .. } => [target(off as i64), None],
            Insn::Jump { off, .. } | Insn::MayGoto { off } => [fall, target(off as i64)],
            _ => [fall, None],
        };
    }
    let mut live = vec![0u16; len];
    let mut changed = true;
    while changed {
        changed = false;
        for (pc, _) in insns.iter().rev() {
            let out = succ[*pc]
                .iter()
                .flatten()
                .fold(0u16, |acc, s| acc | live[*s]);
            let (u, d) = ud[*pc];
            let new = u | (out & !d);
            if new != live[*pc] {
                live[*pc] = new;
                changed = true;
            }
        }
    }
    env.live_regs = live;
}
