//! Strongly connected components of the control-flow graph (6.18's `compute_scc`): every
//! instruction in a loop gets the number of its loop (1, 2, ... in the order the depth-first
//! walk closes them); an instruction in no loop gets 0. The level-2 log shows the number
//! beside each instruction in its `Live regs before insn:` listing.

use crate::env::Env;
use bpfemu_isa::Insn;

/// `insn_successors`: the fall-through first, then the jump target.
pub(crate) fn successors(env: &Env<'_>, pc: usize, insn: &Insn) -> Vec<usize> {
    let len = env.len();
    let next = pc + insn.slots();
    let target = |off: i64| {
        let t = pc as i64 + 1 + off;
        (t >= 0 && (t as usize) < len).then_some(t as usize)
    };
    let fall = (next < len).then_some(next);
    let pair = match *insn {
        Insn::Exit => [None, None],
        Insn::Ja { off, .. } => [target(off as i64), None],
        Insn::Jump { off, .. } | Insn::MayGoto { off } => [fall, target(off as i64)],
        _ => [fall, None],
    };
    pair.into_iter().flatten().collect()
}

/// The loop number of every instruction, by Tarjan's algorithm without recursion, visiting
/// roots in instruction order as the kernel does (so that the numbers are the kernel's).
pub fn compute_scc(env: &Env<'_>) -> Vec<u32> {
    const NOT_ON_STACK: u32 = u32::MAX;
    let len = env.len();
    let insns: Vec<Option<Insn>> = (0..len).map(|pc| env.insn(pc).copied()).collect();
    let succ: Vec<Vec<usize>> = (0..len)
        .map(|pc| insns[pc].map_or_else(Vec::new, |i| successors(env, pc, &i)))
        .collect();
    let mut scc = vec![0u32; len];
    let mut pre = vec![0u32; len];
    let mut low = vec![0u32; len];
    let mut stack: Vec<usize> = Vec::new();
    let (mut next_pre, mut next_scc) = (1u32, 1u32);
    for root in 0..len {
        if pre[root] != 0 || insns[root].is_none() {
            continue;
        }
        let mut dfs = vec![root];
        'walk: while let Some(&w) = dfs.last() {
            if pre[w] == 0 {
                pre[w] = next_pre;
                low[w] = next_pre;
                next_pre += 1;
                stack.push(w);
            }
            for &s in &succ[w] {
                if pre[s] != 0 {
                    low[w] = low[w].min(low[s]);
                } else {
                    dfs.push(s);
                    continue 'walk;
                }
            }
            if low[w] < pre[w] {
                dfs.pop();
                continue;
            }
            let in_loop = stack.last() != Some(&w) || succ[w].contains(&w);
            while let Some(t) = stack.pop() {
                low[t] = NOT_ON_STACK;
                if in_loop {
                    scc[t] = next_scc;
                }
                if t == w {
                    break;
                }
            }
            if in_loop {
                next_scc += 1;
            }
            dfs.pop();
        }
    }
    scc
}
