//! Control taint on the paths the run did not take.
//!
//! Once a branch depends on a tainted value, the kernel may have gone the other way. Whatever
//! the run does from there is tainted through [`TaintState::set_control`]; but what the *other*
//! path would have written leaves no trace in this run: a map counter incremented only when a
//! random draw says so is untouched here and incremented in the kernel. So, at the first
//! tainted branch of a run, every map the rest of the program could write on any path is
//! tainted for good: the values of each map reachable from here (through a map reference in
//! the code still reachable, or a pointer already held in a register or spilled on a stack),
//! and the key set of each referenced map when reachable code calls a helper that adds or
//! removes keys. Read-only maps stay clean: no path writes them.

use super::Machine;
use crate::memory::RegionKind;
use crate::taint::TaintSource;
use bpfemu_isa::{CallTarget, Insn, Program};
use std::collections::BTreeSet;

/// `bpf_tail_call`: any program of the set may run next.
const TAIL_CALL: i32 = bpfemu_isa::helpers::id::TAIL_CALL;
/// Helpers that call back into the program (`bpf_for_each_map_elem`, `bpf_timer_set_callback`,
/// `bpf_loop`, `bpf_user_ringbuf_drain`): any function of it may run.
const CALLBACK_HELPERS: &[i32] = &[164, 170, 181, 209];
/// Helpers that add or remove map keys: `bpf_map_update_elem`, `bpf_map_delete_elem`,
/// `bpf_map_push_elem`, `bpf_map_pop_elem`, `bpf_sk_storage_get` (with its create flag).
const KEY_SET_HELPERS: &[i32] = &[2, 3, 87, 88, 107];

/// What the code still reachable from a point can do, as far as map writes go.
#[derive(Default)]
struct Reachable {
    /// The 64-bit constants its `ld_imm64`s load (map handles, global data addresses).
    constants: BTreeSet<u64>,
    /// It stores to memory or calls a helper (either may write a map value).
    writes_memory: bool,
    /// It calls a helper that changes key sets.
    changes_keys: bool,
}

impl Machine<'_> {
    /// Sets the control taint; the first time in a run, also taints what the paths not taken
    /// could have written (see the module docs).
    pub(super) fn taint_control(&mut self, source: Option<TaintSource>) {
        let Some(source) = source else {
            return;
        };
        if self.taint.as_deref().is_none_or(|t| t.control().is_some()) {
            return;
        }
        self.taint_paths_not_taken(source);
        self.tstate().set_control(Some(source));
    }

    fn taint_paths_not_taken(&mut self, source: TaintSource) {
        let reachable = self.reachable_from_here();
        let mut candidates: Vec<u64> = reachable.constants.iter().copied().collect();
        candidates.extend(self.regs);
        for regs in self.saved_regs.iter() {
            candidates.extend(regs);
        }
        candidates.extend(self.spilled_words());
        let mut values: Vec<RegionKind> = Vec::new();
        let mut key_sets: BTreeSet<usize> = BTreeSet::new();
        for value in candidates {
            if let Some(region) = self.mem.region_at(value) {
                let kind = region.kind();
                if region.writable()
                    && matches!(
                        kind,
                        RegionKind::MapValue { .. } | RegionKind::Global { .. }
                    )
                {
                    push_new(&mut values, kind.clone());
                }
            } else if let Some(map) = self.helpers.writable_map_of_handle(value) {
                push_new(&mut values, map.values);
                key_sets.insert(map.index);
            }
        }
        let taint = self.tstate();
        if reachable.writes_memory {
            for kind in &values {
                taint.taint_region(kind, source);
            }
        }
        if reachable.changes_keys {
            for &map in &key_sets {
                taint.taint_key_set(map, source);
            }
        }
    }

    /// The 8-byte words of every live stack frame: where pointers and handles are spilled.
    fn spilled_words(&self) -> Vec<u64> {
        self.mem
            .regions()
            .filter(|r| matches!(r.kind(), RegionKind::Stack { .. }))
            .flat_map(|r| {
                r.extent_bytes()
                    .chunks_exact(8)
                    .map(|w| u64::from_le_bytes(w.try_into().expect("8 bytes")))
            })
            .collect()
    }

    /// The code that can still run in this run: from the current instruction, from each
    /// active call's return point, and every function of a program whose callbacks are
    /// pending or that a tail call could start.
    fn reachable_from_here(&self) -> Reachable {
        let mut starts = vec![(self.cur, self.pc)];
        starts.extend(
            self.frames
                .iter()
                .skip(1)
                .map(|f| (f.return_prog, f.return_pc)),
        );
        let mut whole: BTreeSet<usize> = BTreeSet::new();
        if self.frames.iter().any(|f| f.callback) || !self.loops.is_empty() {
            whole.insert(self.cur);
            whole.extend(self.loops.iter().map(|l| l.call_prog));
        }
        let mut seen: Vec<Vec<bool>> = self
            .progs
            .iter()
            .map(|p| vec![false; p.program().len()])
            .collect();
        let mut out = Reachable::default();
        let mut work = starts;
        loop {
            for prog in std::mem::take(&mut whole) {
                let len = self.progs[prog].program().len();
                work.extend((0..len).map(|pc| (prog, pc)));
            }
            let Some((prog, pc)) = work.pop() else {
                break;
            };
            let program = self.progs[prog].program();
            if pc >= program.len() || std::mem::replace(&mut seen[prog][pc], true) {
                continue;
            }
            let Some(insn) = program.insn(pc) else {
                continue;
            };
            match *insn {
                Insn::Call(CallTarget::Helper(TAIL_CALL)) => {
                    out.writes_memory = true;
                    whole.extend(0..self.progs.len());
                }
                Insn::Call(CallTarget::Helper(id)) => {
                    out.writes_memory = true;
                    out.changes_keys |= KEY_SET_HELPERS.contains(&id);
                    if CALLBACK_HELPERS.contains(&id) {
                        whole.insert(prog);
                    }
                }
                Insn::Call(CallTarget::Kfunc { .. }) => {
                    out.writes_memory = true;
                    out.changes_keys = true;
                }
                Insn::Store { .. } | Insn::StoreReg { .. } | Insn::Atomic { .. } => {
                    out.writes_memory = true;
                }
                Insn::LdImm64 { imm, next_imm, .. } => {
                    out.constants.insert(Insn::imm64(imm, next_imm));
                }
                _ => {}
            }
            work.extend(successors(program, pc, insn).into_iter().map(|s| (prog, s)));
        }
        out
    }
}

fn push_new(kinds: &mut Vec<RegionKind>, kind: RegionKind) {
    if !kinds.contains(&kind) {
        kinds.push(kind);
    }
}

/// The instructions that may run right after `insn` at `pc` in the same program (a local
/// call's callee included; returns are the callers' business).
fn successors(program: &Program, pc: usize, insn: &Insn) -> Vec<usize> {
    let next = pc + insn.slots();
    let relative = |off: i64| usize::try_from(pc as i64 + 1 + off).ok();
    let out = match *insn {
        Insn::Exit => vec![],
        Insn::Ja { off, .. } => relative(off as i64).into_iter().collect(),
        Insn::Jump { off, .. } | Insn::MayGoto { off } => {
            std::iter::once(next).chain(relative(off as i64)).collect()
        }
        Insn::Call(CallTarget::Local(off)) => {
            std::iter::once(next).chain(relative(off as i64)).collect()
        }
        _ => vec![next],
    };
    out.into_iter().filter(|&s| s < program.len()).collect()
}
