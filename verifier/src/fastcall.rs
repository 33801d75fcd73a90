//! `bpf_fastcall` (6.12 on): a call to a helper or kfunc the kernel inlines clobbers fewer
//! registers than the ABI says, so clang may keep a value across it in R1-R5 by spilling it
//! just before the call and filling it just after. The verifier finds such spill/fill pairs
//! before the walk (`mark_fastcall_patterns`), forgets them when anything else touches their
//! stack area (`check_fastcall_stack_contract`), and after an accepted walk removes them from
//! the program the kernel runs and takes their slots off the subprogram's stack depth
//! (`remove_fastcall_spills_fills`), before the combined stack check.

use crate::env::Env;
use crate::state::FuncState;
use bpfemu_isa::{CallTarget, Insn, Reg, Size};

/// R0-R5, as a bit per register.
const CALLER_SAVED: u32 = 0b11_1111;

/// What a call clobbers under the fastcall contract (`bpf_get_call_summary`): its result and
/// its arguments; and whether this kernel inlines it (only then are its pairs removed).
struct CallSummary {
    clobbered: u32,
    fastcall: bool,
}

fn summary(env: &Env<'_>, insn: &Insn) -> Option<CallSummary> {
    let (params, is_void, fastcall) = match *insn {
        Insn::Call(CallTarget::Helper(id)) => {
            let proto = crate::call::proto::xdp_proto(id)?;
            let inlined = bpfemu_isa::inline_policy::inlined_helper(id).is_some();
            let allow = id == bpfemu_isa::helpers::id::GET_SMP_PROCESSOR_ID;
            let is_void = proto.ret == crate::call::proto::RetType::Void;
            (proto.arg_count(), is_void, allow && inlined)
        }
        Insn::Call(CallTarget::Kfunc { btf_id, off: 0 }) => {
            let btf = env.input.vmlinux_btf()?;
            let id = u32::try_from(btf_id).ok()?;
            // Only a kfunc XDP may call has a summary (`bpf_fetch_kfunc_arg_meta`).
            let params =
                crate::call::kfunc::kfunc_param_count(env.input.kernel.version(), Some(btf), id)?;
            let (_, ret) = crate::call::kfunc::func_proto(btf, id)?;
            let name = btf.name_of(id)?;
            let fastcall = matches!(name, "bpf_cast_to_kern_ctx" | "bpf_rdonly_cast");
            (params, ret == 0, fastcall)
        }
        _ => return None,
    };
    let from = if is_void { 1 } else { 0 };
    let clobbered = (from..=params.min(5)).fold(0, |m, r| m | (1 << r));
    Some(CallSummary {
        clobbered,
        fastcall,
    })
}

/// `mark_fastcall_patterns`: for each subprogram, the pairs around each call, at the bottom
/// of the subprogram's stack (from its lowest 8-byte spill offset up).
pub fn mark_patterns(env: &mut Env<'_>) {
    if !crate::behaviour::removes_fastcall_spills(env.input.kernel.version()) {
        return;
    }
    for sp in 0..env.subprogs.len() {
        let start = env.subprogs[sp].start;
        let end = env.subprog_end(sp);
        let lowest = (start..end)
            .filter_map(|pc| match env.insn(pc) {
                Some(Insn::StoreReg {
                    dst: Reg::R10,
                    off,
                    size: Size::DW,
                    ..
                }) => Some(*off),
                _ => None,
            })
            .fold(0i16, i16::min);
        for pc in start..end {
            if matches!(env.insn(pc), Some(Insn::Call(_))) {
                mark_pattern_at(env, sp, pc, lowest);
            }
        }
    }
}

/// `mark_fastcall_pattern_for_call`: spill `i` before the call and fill `i` after it, of the
/// same register, one the call leaves alone, at `lowest + 8 * (i - 1)`.
fn mark_pattern_at(env: &mut Env<'_>, sp: usize, pc: usize, lowest: i16) {
    let Some(call) = env.insn(pc).copied() else {
        return;
    };
    let Some(cs) = summary(env, &call) else {
        return;
    };
    let mut expected = !cs.clobbered & CALLER_SAVED;
    let mut off = lowest;
    let mut pairs = 0;
    for i in 1..=6usize {
        if i > pc || pc + i >= env.len() {
            break;
        }
        if env.aux[pc - i + 1].jump_target || env.aux[pc + i].jump_target {
            break;
        }
        let (Some(raw_st), Some(raw_ld)) = (env.prog.raw().get(pc - i), env.prog.raw().get(pc + i))
        else {
            break;
        };
        // STX|MEM|DW to r10 and LDX|MEM|DW from r10, of one register at the expected offset.
        let spill = raw_st.code == 0x7b && raw_st.dst == 10;
        let fill = raw_ld.code == 0x79 && raw_ld.src == 10;
        if !spill || !fill || raw_st.src != raw_ld.dst {
            break;
        }
        let reg = raw_st.src;
        if expected & (1 << reg) == 0 || raw_st.off != off || raw_ld.off != off {
            break;
        }
        expected &= !(1 << reg);
        env.aux[pc - i].fastcall_pattern = true;
        env.aux[pc + i].fastcall_pattern = true;
        pairs = i;
        off = off.saturating_add(8);
    }
    if pairs == 0 {
        return;
    }
    if cs.fastcall {
        env.aux[pc].fastcall_spills = pairs as u8;
    } else {
        env.subprogs[sp].keep_fastcall_stack = true;
    }
    let s = &mut env.subprogs[sp];
    s.fastcall_stack_off = s.fastcall_stack_off.min(off);
}

/// `check_fastcall_stack_contract`: an access at `off` of `frame`'s stack below its
/// subprogram's fastcall area's top, by the current instruction outside every pair, means the
/// pairs' slots hold something else: none of the subprogram's pairs is removed.
pub fn check_contract(env: &mut Env<'_>, frame: &FuncState, off: i64) {
    let (sp, pc) = (frame.subprogno as usize, env.insn_idx);
    let Some(s) = env.subprogs.get(sp) else {
        return;
    };
    if i64::from(s.fastcall_stack_off) <= off || env.aux.get(pc).is_some_and(|a| a.fastcall_pattern)
    {
        return;
    }
    let start = s.start;
    let end = env.subprog_end(sp);
    env.subprogs[sp].fastcall_stack_off = i16::MIN;
    for a in &mut env.aux[start..end] {
        a.fastcall_spills = 0;
        a.fastcall_pattern = false;
    }
}

/// `remove_fastcall_spills_fills`, its stack part: a subprogram some of whose pairs go loses
/// their slots from its depth, unless a pair around a call this kernel does not inline keeps
/// them. (The xlated program drops the pairs themselves, `fixup`.)
pub fn shrink_stack_depths(env: &mut Env<'_>) {
    for sp in 0..env.subprogs.len() {
        let start = env.subprogs[sp].start;
        let end = env.subprog_end(sp);
        let removed = env.aux[start..end].iter().any(|a| a.fastcall_spills > 0);
        let s = &mut env.subprogs[sp];
        if removed && !s.keep_fastcall_stack {
            s.stack_depth = u32::from(s.fastcall_stack_off.unsigned_abs());
        }
    }
}
