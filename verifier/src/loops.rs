//! Loop visits (6.18's `struct bpf_scc_visit`): while a path is inside a loop that is not fully
//! explored, checkpoints of that loop lack the read and precision marks of the paths still to
//! come, so they are compared with `RangeWithin` instead of pruning on imprecise scalars, and a
//! state that converges on one (a back-edge) is kept. When the loop's entry checkpoint has no
//! branch left, the loop is done: the precision of each back-edge's covering checkpoint is
//! propagated into the back-edge's path until nothing changes.
//!
//! A loop is named by its call chain: the call sites of the frames outside any loop and the
//! number of the innermost loop (`compute_scc_callchain`), printed as `(callsite,...,scc)` in
//! the level-2 log's `SCC enter`, `SCC backedge` and `SCC exit` lines.

use crate::env::Env;
use crate::prune::frame_insn_idx;
use crate::state::VerifierState;

/// `MAX_BACKEDGE_ITERS`: rounds of back-edge propagation before everything is made precise.
const MAX_BACKEDGE_ITERS: usize = 64;

/// The loop a state is in, with the call sites that lead to it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Callchain {
    callsites: Vec<usize>,
    scc: u32,
}

impl Callchain {
    /// `format_callchain`. The kernel stops at the first call site 0, as if it were the end of
    /// the chain: a call at instruction 0 is not printed.
    fn text(&self) -> String {
        let mut out = String::from("(");
        for c in self.callsites.iter().take_while(|&&c| c != 0) {
            out.push_str(&format!("{c},"));
        }
        out.push_str(&format!("{})", self.scc));
        out
    }
}

/// One loop being explored.
#[derive(Clone, Debug)]
pub struct SccVisit {
    chain: Callchain,
    /// The checkpoint through which the walk entered the loop (`entry_state`).
    entry: Option<usize>,
    backedges: Vec<Backedge>,
}

/// A state pruned inside the loop by a checkpoint of the loop (`struct bpf_scc_backedge`).
#[derive(Clone, Debug)]
pub struct Backedge {
    state: VerifierState,
    /// The checkpoint that covered it (`equal_state`).
    equal_state: usize,
}

/// `compute_scc_callchain`: `None` when the state's innermost frame is in no loop.
fn callchain(env: &Env<'_>, st: &VerifierState) -> Option<Callchain> {
    let mut callsites = Vec::new();
    for i in 0..st.frames.len() {
        let pc = frame_insn_idx(st, i);
        let scc = env.scc.get(pc).copied().unwrap_or(0);
        if scc != 0 {
            return Some(Callchain { callsites, scc });
        }
        if i == st.curframe() {
            return None;
        }
        callsites.push(pc);
    }
    None
}

fn visit_of(env: &Env<'_>, chain: &Callchain) -> Option<usize> {
    env.scc_visits.iter().position(|v| v.chain == *chain)
}

/// `maybe_enter_scc`: a new checkpoint inside a loop not being explored yet enters it.
pub fn maybe_enter_scc(env: &mut Env<'_>, checkpoint: usize) {
    let Some(chain) = callchain(env, &env.explored[checkpoint].state) else {
        return;
    };
    let v = match visit_of(env, &chain) {
        Some(v) => v,
        None => {
            env.scc_visits.push(SccVisit {
                chain,
                entry: None,
                backedges: Vec::new(),
            });
            env.scc_visits.len() - 1
        }
    };
    if env.scc_visits[v].entry.is_none() {
        env.scc_visits[v].entry = Some(checkpoint);
        if env.log.level2() {
            let text = format!("SCC enter {}\n", env.scc_visits[v].chain.text());
            env.verbose(&text);
        }
    }
}

/// `maybe_exit_scc`: the loop's entry checkpoint has no branch left, so every path through
/// the loop is explored; its back-edges get their precision.
pub fn maybe_exit_scc(env: &mut Env<'_>, checkpoint: usize) {
    let Some(chain) = callchain(env, &env.explored[checkpoint].state) else {
        return;
    };
    let Some(v) = visit_of(env, &chain) else {
        return;
    };
    if env.scc_visits[v].entry != Some(checkpoint) {
        return;
    }
    if env.log.level2() {
        let text = format!("SCC exit {}\n", chain.text());
        env.verbose(&text);
    }
    env.scc_visits[v].entry = None;
    let backedges = std::mem::take(&mut env.scc_visits[v].backedges);
    env.num_backedges -= backedges.len() as u64;
    env.update_peak_states();
    propagate_backedges(env, backedges);
}

/// `add_scc_backedge`: `cur` was pruned by checkpoint `equal_state` of a loop in exploration.
pub fn add_backedge(env: &mut Env<'_>, equal_state: usize, cur: &VerifierState) {
    let Some(chain) = callchain(env, &env.explored[equal_state].state) else {
        return;
    };
    let Some(v) = visit_of(env, &chain) else {
        return;
    };
    if env.log.level2() {
        let text = format!("SCC backedge {}\n", chain.text());
        env.verbose(&text);
    }
    env.scc_visits[v].backedges.push(Backedge {
        state: cur.clone(),
        equal_state,
    });
    env.num_backedges += 1;
    env.update_peak_states();
}

/// `incomplete_read_marks`: checkpoint `st` is in a loop whose exploration has back-edges
/// pending, so its marks do not yet say everything the loop reads.
pub fn incomplete_read_marks(env: &Env<'_>, st: &VerifierState) -> bool {
    if !crate::behaviour::distrusts_checkpoints_in_unfinished_loops(env.input.kernel.version()) {
        return false;
    }
    callchain(env, st)
        .and_then(|chain| visit_of(env, &chain))
        .is_some_and(|v| !env.scc_visits[v].backedges.is_empty())
}

/// `propagate_backedges`: the precision each covering checkpoint has is backtracked along its
/// back-edge's path, round after round while a round marks something new.
fn propagate_backedges(env: &mut Env<'_>, mut backedges: Vec<Backedge>) {
    for round in 0.. {
        if round > MAX_BACKEDGE_ITERS {
            if env.log.level2() {
                env.verbose("propagate_backedges: too many iterations\n");
            }
            for b in &backedges {
                crate::precision::mark_all_scalars_precise(env, &b.state);
            }
            return;
        }
        let mut changed = false;
        for b in backedges.iter_mut() {
            let old = env.explored[b.equal_state].state.clone();
            changed |= crate::precision::propagate_precision(env, &old, &mut b.state);
        }
        if !changed {
            return;
        }
    }
}
