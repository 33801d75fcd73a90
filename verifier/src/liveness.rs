//! Liveness: which registers a later instruction may read (`compute_live_registers`), so that
//! pruning compares only those. Stack slots are all treated as live (more conservative than
//! 6.18's static stack liveness: fewer prunes, never a wrong one).

use crate::env::Env;
use bpfemu_isa::{AtomicOp, CallTarget, Insn, LdImm64Kind, Source};
use bpfemu_loader::Kernel;
use bpfemu_loader::btf::Btf;

const CALLER_SAVED: u16 = 0b11_1111;

fn bit(r: bpfemu_isa::Reg) -> u16 {
    1 << r.index()
}

/// (use, def) of one instruction (`compute_insn_live_regs`); a kfunc's parameters are counted
/// in `kernel`'s BTF.
fn use_def(kernel: &Kernel, insn: &Insn) -> (u16, u16) {
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

/// What the forward pass knows of a register: whether it points into its own frame's stack,
/// and, when it does not, a constant or a map it surely holds (what sizes a helper's memory
/// arguments).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fp {
    /// Not a pointer to this frame's stack.
    No,
    /// A known constant (not a stack pointer).
    Const(u64),
    /// Map number N of the program (`ld_imm64` of a map).
    Map(u32),
    /// May point into a caller's stack: a subprogram's argument, or what was loaded through
    /// one or computed from one.
    Arg,
    /// `r10 + off`.
    At(i64),
    /// Somewhere in this frame's stack.
    Any,
}

impl Fp {
    fn is_stack(self) -> bool {
        matches!(self, Fp::At(_) | Fp::Any)
    }
}

fn join(a: Fp, b: Fp) -> Fp {
    if a == b {
        a
    } else if a.is_stack() || b.is_stack() {
        Fp::Any
    } else if a == Fp::Arg || b == Fp::Arg {
        Fp::Arg
    } else {
        Fp::No
    }
}

const ALL_SLOTS: u64 = u64::MAX;

/// The 8-byte slots `[off, off + size)` covers, a bit per slot (`fp-8` is bit 0).
fn slots(off: i64, size: i64) -> u64 {
    let mut bits = 0;
    for o in off..off + size {
        if (-512..0).contains(&o) {
            bits |= 1 << ((-o - 1) / 8);
        }
    }
    bits
}

/// Fills `env.live_stack` with the stack slots of its own frame that an instruction or a later
/// one may read (the kernel's static stack liveness, simplified): reads through `r10 + const`
/// read their slots, a read at an unknown stack offset or a call that gets a stack pointer
/// reads every slot, a full aligned 8-byte store kills its slot. A program that stores a stack
/// pointer anywhere keeps every slot live.
pub fn compute_live_stack(env: &mut Env<'_>) {
    let len = env.len();
    env.live_stack = vec![ALL_SLOTS; len];
    let insns: Vec<(usize, Insn)> = env.prog.iter().map(|(pc, i)| (pc, *i)).collect();
    let mut succ: Vec<[Option<usize>; 2]> = vec![[None, None]; len];
    for (pc, insn) in &insns {
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
    // Forward: which registers, and which spilled slots, point into the frame's own stack.
    let mut regs: Vec<Option<Frame>> = vec![None; len];
    let mut work: Vec<usize> = Vec::new();
    for (i, s) in env.subprogs.iter().enumerate() {
        let mut entry = Frame {
            r: [Fp::No; 11],
            s: [Fp::No; 64],
        };
        entry.r[10] = Fp::At(0);
        if i > 0 {
            for r in 1..=5 {
                entry.r[r] = Fp::Arg;
            }
        }
        if s.start < len {
            regs[s.start] = Some(entry);
            work.push(s.start);
        }
    }
    let insn_at: std::collections::HashMap<usize, Insn> = insns.iter().copied().collect();
    while let Some(pc) = work.pop() {
        let Some(mut f) = regs[pc] else { continue };
        let Some(insn) = insn_at.get(&pc) else {
            continue;
        };
        // A stack pointer that leaves the stack may come back through any load: give up.
        if !spill_transfer(insn, &mut f) {
            return;
        }
        // A load's destination is already set: `spill_transfer` gave it what its slot held
        // (a reloaded stack pointer), which a second transfer would forget.
        if !matches!(insn, Insn::Load { .. }) {
            transfer(insn, &mut f.r);
        }
        for s in succ[pc].iter().flatten() {
            let merged = match regs[*s] {
                None => f,
                Some(old) => old.join(&f),
            };
            if regs[*s] != Some(merged) {
                regs[*s] = Some(merged);
                work.push(*s);
            }
        }
    }
    let regs: Vec<Option<[Fp; 11]>> = regs.iter().map(|f| f.map(|f| f.r)).collect();
    let mut use_kill = vec![(ALL_SLOTS, 0u64); len];
    for (pc, insn) in &insns {
        let Some(r) = regs[*pc] else {
            use_kill[*pc] = (0, 0);
            continue;
        };
        let at = |reg: bpfemu_isa::Reg, off: i16, size: usize| match r[reg.index()] {
            Fp::At(c) => slots(c + off as i64, size as i64),
            Fp::Any => ALL_SLOTS,
            _ => 0,
        };
        use_kill[*pc] = match *insn {
            Insn::Load { src, off, size, .. } => (at(src, off, size.bytes()), 0),
            Insn::Atomic { dst, off, size, .. } => (at(dst, off, size.bytes()), 0),
            Insn::Store { dst, off, size, .. } | Insn::StoreReg { dst, off, size, .. } => {
                match r[dst.index()] {
                    Fp::At(c) if size.bytes() == 8 && (c + off as i64) % 8 == 0 => {
                        (0, slots(c + off as i64, 8))
                    }
                    _ => (0, 0),
                }
            }
            Insn::Call(CallTarget::Helper(id)) => (helper_stack_reads(env, id, &r), 0),
            Insn::Call(CallTarget::Kfunc { btf_id, off: 0 })
                if crate::call::iter::iter_op_of_call(env.input.vmlinux_btf(), btf_id)
                    .is_some() =>
            {
                iter_stack_use_kill(env.input.vmlinux_btf(), btf_id, &r)
            }
            Insn::Call(_) => {
                let any = (1..=5).any(|i| r[i].is_stack());
                (if any { ALL_SLOTS } else { 0 }, 0)
            }
            Insn::LdAbs { .. } | Insn::LdInd { .. } => (ALL_SLOTS, 0),
            _ => (0, 0),
        };
    }
    let mut live = vec![0u64; len];
    let mut changed = true;
    while changed {
        changed = false;
        for (pc, _) in insns.iter().rev() {
            let out = succ[*pc]
                .iter()
                .flatten()
                .fold(0u64, |acc, s| acc | live[*s]);
            let (u, k) = use_kill[*pc];
            let new = u | (out & !k);
            if new != live[*pc] {
                live[*pc] = new;
                changed = true;
            }
        }
    }
    env.live_stack = live;
}

/// The forward pass's knowledge at one instruction: registers and the frame's 64 slots.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Frame {
    r: [Fp; 11],
    /// What an aligned 8-byte spill left in slot `i` (`fp-8*(i+1)`).
    s: [Fp; 64],
}

impl Frame {
    fn join(&self, other: &Frame) -> Frame {
        let mut out = *self;
        for i in 0..11 {
            out.r[i] = join(self.r[i], other.r[i]);
        }
        for i in 0..64 {
            out.s[i] = join(self.s[i], other.s[i]);
        }
        out
    }

    /// The slot an aligned 8-byte access at `reg + off` names, when it names one.
    fn slot(&self, reg: bpfemu_isa::Reg, off: i16) -> Option<usize> {
        match self.r[reg.index()] {
            Fp::At(c) => {
                let o = c + off as i64;
                ((-512..0).contains(&o) && o % 8 == 0).then(|| ((-o - 1) / 8) as usize)
            }
            _ => None,
        }
    }
}

/// Spills and fills of stack pointers through the frame's own stack; `false` when a stack
/// pointer goes anywhere the pass cannot follow (other memory, a partial or unknown slot).
fn spill_transfer(insn: &Insn, f: &mut Frame) -> bool {
    match *insn {
        Insn::StoreReg {
            dst,
            src,
            off,
            size,
            ..
        } => {
            let value = f.r[src.index()];
            match (f.slot(dst, off), size.bytes()) {
                (Some(i), 8) => f.s[i] = value,
                // Only a full 8-byte spill keeps a pointer a pointer: a narrower store of one
                // is refused on the stack ("invalid size of register spill") and leaves bytes
                // elsewhere, so nothing loads it back as a stack pointer.
                (_, 8) if value.is_stack() || value == Fp::Arg => return false,
                _ => clobber(f, dst, off, size.bytes()),
            }
        }
        Insn::Store { dst, off, size, .. } => clobber(f, dst, off, size.bytes()),
        Insn::Atomic {
            dst,
            src,
            off,
            size,
            ..
        } => {
            if f.r[src.index()].is_stack() || f.r[src.index()] == Fp::Arg {
                return false;
            }
            clobber(f, dst, off, size.bytes());
        }
        Insn::Load {
            dst,
            src,
            off,
            size,
            ..
        } => {
            let from = f.r[src.index()];
            let value = match (f.slot(src, off), size.bytes()) {
                (Some(i), 8) => f.s[i],
                (Some(i), _) if f.s[i].is_stack() => return false,
                _ if from == Fp::Any && f.s.iter().any(|v| v.is_stack()) => return false,
                _ if from == Fp::Arg => Fp::Arg,
                _ => Fp::No,
            };
            // `transfer` sets the destination to `No`; what the slot held comes back after.
            transfer(insn, &mut f.r);
            f.r[dst.index()] = value;
        }
        Insn::Call(target) if (1..=5).any(|i| f.r[i].is_stack()) && writes_through(target) => {
            // The callee may write anything into the frame it was given, pointers included.
            f.s = [Fp::Any; 64];
        }
        _ => {}
    }
    true
}

/// Calls whose code may store a pointer into the memory a stack-pointer argument names, out
/// of this pass's sight: kfuncs. (A subprogram or callback that stores a pointer through its
/// arguments makes the whole pass give up, see [`Fp::Arg`].)
fn writes_through(target: CallTarget) -> bool {
    matches!(target, CallTarget::Kfunc { .. })
}

/// A store of a non-pointer at `dst + off`: the slots it touches hold no stack pointer any
/// more where the offset is known; where it is not, any slot may have changed.
fn clobber(f: &mut Frame, dst: bpfemu_isa::Reg, off: i16, size: usize) {
    match f.r[dst.index()] {
        Fp::At(c) => {
            let start = c + off as i64;
            for o in start..start + size as i64 {
                if (-512..0).contains(&o) {
                    f.s[((-o - 1) / 8) as usize] = Fp::No;
                }
            }
        }
        Fp::Any => {
            for v in f.s.iter_mut() {
                *v = join(*v, Fp::No);
            }
        }
        _ => {}
    }
}

/// The slots a helper call reads through its stack-pointer arguments: what its prototype's
/// memory arguments cover (a map's key or value, a fixed size, a constant size in the next
/// register), as the kernel's checks read them; every slot when a size is not known here.
fn helper_stack_reads(env: &Env<'_>, id: i32, r: &[Fp; 11]) -> u64 {
    use crate::call::proto::{ArgBase, MEM_FIXED_SIZE, MEM_UNINIT, xdp_proto};
    if !(1..=5).any(|i| r[i].is_stack()) {
        return 0;
    }
    let Some(proto) = xdp_proto(id) else {
        return ALL_SLOTS;
    };
    let map = match r[1] {
        Fp::Map(m) => env.map(m),
        _ => None,
    };
    let mut reads = 0;
    // Registers past the prototype's arguments are not read by the helper.
    for (i, arg) in proto.args.iter().enumerate().take(proto.arg_count()) {
        let Fp::At(off) = r[i + 1] else {
            if r[i + 1].is_stack() {
                return ALL_SLOTS;
            }
            continue;
        };
        let next_const = match r.get(i + 2) {
            Some(Fp::Const(c)) => Some(*c as i64),
            _ => None,
        };
        let size = match arg.base {
            // Written, not read (raw mode).
            _ if arg.flags & MEM_UNINIT != 0 => Some(0),
            ArgBase::PtrToMapKey => map.map(|m| m.key_size as i64),
            ArgBase::PtrToMapValue => map.map(|m| m.value_size as i64),
            ArgBase::PtrToMem if arg.flags & MEM_FIXED_SIZE != 0 => Some(arg.size as i64),
            ArgBase::PtrToMem if proto.args.get(i + 1).is_some_and(|a| a.is_mem_size()) => {
                next_const
            }
            _ => None,
        };
        match size {
            Some(size) => reads |= slots(off, size.max(0)),
            None => return ALL_SLOTS,
        }
    }
    reads
}

/// What an iterator kfunc does to the iterator's slots R1 names: `new` writes them, `next`
/// and `destroy` read them (as the kernel's `mark_iter_read`); every slot when R1 is not a
/// known place on this frame's stack.
fn iter_stack_use_kill(vmlinux: Option<&Btf>, btf_id: i32, r: &[Fp; 11]) -> (u64, u64) {
    use crate::call::iter::{IterOp, iter_op_of_call, iter_struct};
    let size = vmlinux.and_then(|btf| {
        let params = crate::call::kfunc::func_params(btf, btf_id as u32)?;
        iter_struct(btf, params).map(|(_, nr_slots)| (nr_slots * 8) as i64)
    });
    let (Fp::At(off), Some(size)) = (r[1], size) else {
        return if r[1].is_stack() {
            (ALL_SLOTS, 0)
        } else {
            (0, 0)
        };
    };
    match iter_op_of_call(vmlinux, btf_id) {
        Some(IterOp::New) if off % 8 == 0 => (0, slots(off, size)),
        Some(IterOp::New) => (0, 0),
        _ => (slots(off, size), 0),
    }
}

fn transfer(insn: &Insn, r: &mut [Fp; 11]) {
    use bpfemu_isa::{AluOp, Width};
    match *insn {
        Insn::Alu {
            width: Width::W64,
            op: AluOp::Mov,
            dst,
            src,
        } => {
            r[dst.index()] = match src {
                Source::Reg(s) => r[s.index()],
                Source::Imm(k) => Fp::Const(k as i64 as u64),
            }
        }
        Insn::Alu {
            width: Width::W32,
            op: AluOp::Mov,
            dst,
            src: Source::Imm(k),
        } => r[dst.index()] = Fp::Const(k as u32 as u64),
        Insn::LdImm64 {
            dst,
            kind,
            imm,
            next_imm,
        } => {
            r[dst.index()] = match kind {
                LdImm64Kind::Imm => Fp::Const(Insn::imm64(imm, next_imm)),
                LdImm64Kind::MapFd | LdImm64Kind::MapIdx => Fp::Map(imm as u32),
                _ => Fp::No,
            }
        }
        Insn::Alu {
            width: Width::W64,
            op: op @ (AluOp::Add | AluOp::Sub),
            dst,
            src,
        } => {
            let d = r[dst.index()];
            r[dst.index()] = match (d, src) {
                (Fp::At(c), Source::Imm(k)) => Fp::At(if op == AluOp::Add {
                    c + k as i64
                } else {
                    c - k as i64
                }),
                (d, Source::Reg(s))
                    if !d.is_stack() && op == AluOp::Add && r[s.index()].is_stack() =>
                {
                    Fp::Any
                }
                (Fp::Arg, _) => Fp::Arg,
                (_, Source::Reg(s)) if r[s.index()] == Fp::Arg => Fp::Arg,
                (d, _) if !d.is_stack() => Fp::No,
                _ => Fp::Any,
            }
        }
        Insn::Alu { dst, .. }
        | Insn::Neg { dst, .. }
        | Insn::MovSx { dst, .. }
        | Insn::AddrSpaceCast { dst, .. }
        | Insn::Endian { dst, .. }
        | Insn::Load { dst, .. } => r[dst.index()] = Fp::No,
        Insn::Atomic { op, src, .. } => {
            if op == AtomicOp::Cmpxchg {
                r[0] = Fp::No;
            } else if op.fetches() || op == AtomicOp::LoadAcquire {
                r[src.index()] = Fp::No;
            }
        }
        Insn::Call(_) => {
            for reg in r.iter_mut().take(6) {
                *reg = Fp::No;
            }
        }
        Insn::LdAbs { .. } | Insn::LdInd { .. } => {
            for reg in r.iter_mut().take(6) {
                *reg = Fp::No;
            }
        }
        _ => {}
    }
}
