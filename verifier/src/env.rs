//! The verifier environment (`struct bpf_verifier_env`): the program being verified, per-
//! instruction facts, subprograms, the log and the counters. Every check receives it.

use crate::log::Log;
use crate::prog_type::ProgTypeOps;
use crate::state::reg::RegState;
use crate::{Errno, ProgramInput, Reject};
use bpfemu_isa::{Insn, Program};

/// Facts about one instruction slot (`struct bpf_insn_aux_data`), filled by the checks before
/// exploration (prune points) and during it (what the fixups need).
#[derive(Clone, Debug, Default)]
pub struct InsnAux {
    /// Reached on some path (`seen`): unreachable instructions are dead code the fixups drop.
    pub seen: bool,
    /// A state checkpoint may be taken here (`prune_point`): jump targets and fall-throughs
    /// of conditional jumps, call returns.
    pub prune_point: bool,
    /// The target of a jump or a conditional jump's fall-through (`jmp_point`): the jump
    /// history records arrivals here.
    pub jmp_point: bool,
    /// A checkpoint must be taken here regardless of the heuristics (`force_checkpoint`):
    /// `may_goto`, iterator `next` calls, callback call sites.
    pub force_checkpoint: bool,
    /// A helper call that takes a callback (`calls_callback`).
    pub calls_callback: bool,
    /// The instruction's ctx access, for the ctx conversion in the fixups.
    pub ctx_access: Option<crate::prog_type::CtxAccess>,
    /// A slot the strict decoder refused, replaced by a placeholder: refused with the
    /// kernel's message when the walk reaches it ([`crate::check::check_reached`]).
    pub bad_insn: bool,
    /// A load/store through a pointer of this type (`ptr_type`); ctx loads are converted.
    pub ptr_type: Option<crate::state::RegType>,
    /// For helper calls with a map argument: the map of every path, `None` once two paths
    /// passed different maps (`map_ptr_state`, poisoned).
    pub map_index: Option<u32>,
    pub map_poisoned: bool,
    /// For `bpf_tail_call`: the key's constant value on every path (`map_key_state`).
    pub map_key: Option<u64>,
    pub map_key_poisoned: bool,
    /// Whether the 32-bit result of this ALU instruction must be zero-extended explicitly
    /// (`zext_dst`); x86 JITs do not need it, but the xlated dump shows no difference.
    pub zext_dst: bool,
    /// Whether an instruction's jump was taken on some path and not on another (for dead-code
    /// sanitation): bit 0 fall-through seen, bit 1 branch seen.
    pub edges_seen: u8,
}

/// One subprogram (`struct bpf_subprog_info`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SubprogInfo {
    /// First instruction.
    pub start: usize,
    /// The name from the object (`functions`) or BTF func_info, for messages.
    pub name: String,
    /// Largest stack depth seen (rounded up to 8 when exploration ends; the kernel prints it
    /// per subprogram in `stack depth A+B`).
    pub stack_depth: u32,
    /// Has a `bpf_tail_call`.
    pub has_tail_call: bool,
    /// Uses `ld_abs`/`ld_ind`.
    pub has_ld_abs: bool,
    /// A global function (BTF linkage global): verified once against its prototype.
    pub is_global: bool,
    /// Used as a callback (its address taken with `ld_imm64` BPF_PSEUDO_FUNC).
    pub is_cb: bool,
    /// Verified as an async callback (timer).
    pub is_async_cb: bool,
    /// Changes packet data (calls a helper that does), seen by its callers.
    pub changes_pkt_data: bool,
    /// May sleep.
    pub might_sleep: bool,
}

/// The environment.
pub struct Env<'a> {
    pub input: &'a ProgramInput<'a>,
    /// The decoded program (`ld_imm64` map references still in the loader's form).
    pub prog: Program,
    /// One entry per instruction slot.
    pub aux: Vec<InsnAux>,
    /// Subprograms in order of their first instruction; the entry first. Filled by
    /// [`crate::check::check_program`]; after it the last entry's end is the program's end.
    pub subprogs: Vec<SubprogInfo>,
    pub prog_type: &'static dyn ProgTypeOps,
    pub log: Log,
    /// The last id handed out (`id_gen`).
    pub id_gen: u32,
    /// The instruction being checked (`insn_idx`) and the one before it on this path.
    pub insn_idx: usize,
    pub prev_insn_idx: usize,
    /// Counters for the closing line.
    pub counters: Counters,
    /// Set when a helper that changes packet data was called anywhere (`changes_pkt_data`).
    pub seen_direct_write: bool,
}

/// Counters the closing `processed N insns ...` line reports.
#[derive(Clone, Debug, Default)]
pub struct Counters {
    pub insn_processed: u64,
    pub total_states: u64,
    pub peak_states: u64,
    pub max_states_per_insn: u32,
    pub mark_read: u64,
    pub prev_jmps_processed: u64,
    pub jmps_processed: u64,
    pub prev_insn_processed: u64,
}

impl<'a> Env<'a> {
    pub fn new(
        input: &'a ProgramInput<'a>,
        prog: Program,
        prog_type: &'static dyn ProgTypeOps,
        log: Log,
    ) -> Env<'a> {
        let len = prog.len();
        Env {
            input,
            prog,
            aux: vec![InsnAux::default(); len],
            subprogs: Vec::new(),
            prog_type,
            log,
            id_gen: 0,
            insn_idx: 0,
            prev_insn_idx: 0,
            counters: Counters::default(),
            seen_direct_write: false,
        }
    }

    /// A fresh id for null checks, packet ranges and references (`++env->id_gen`).
    pub fn new_id(&mut self) -> u32 {
        self.id_gen += 1;
        self.id_gen
    }

    /// The instruction starting at `pc`.
    pub fn insn(&self, pc: usize) -> Option<&Insn> {
        self.prog.insn(pc)
    }

    /// Number of instruction slots.
    pub fn len(&self) -> usize {
        self.prog.len()
    }

    pub fn is_empty(&self) -> bool {
        self.prog.is_empty()
    }

    /// The subprogram that contains `pc` (`find_containing_subprog`).
    pub fn subprog_of(&self, pc: usize) -> usize {
        match self.subprogs.binary_search_by(|s| s.start.cmp(&pc)) {
            Ok(i) => i,
            Err(i) => i.saturating_sub(1),
        }
    }

    /// The subprogram starting exactly at `pc` (`find_subprog`).
    pub fn subprog_at(&self, pc: usize) -> Option<usize> {
        self.subprogs.binary_search_by(|s| s.start.cmp(&pc)).ok()
    }

    /// A verbose line for the log (the kernel's `verbose()`), printed at levels 1 and 2.
    pub fn verbose(&mut self, text: &str) {
        self.log.verbose(text);
    }

    /// Logs `msg` and returns the rejection carrying it (`verbose(); return -EACCES;`).
    pub fn reject(&mut self, errno: Errno, msg: impl Into<String>) -> Reject {
        let msg = msg.into();
        self.log.verbose(&format!("{msg}\n"));
        Reject { errno, msg }
    }

    /// The kernel's description of a register for messages that print it whole.
    pub fn reg_text(&self, reg: &RegState) -> String {
        crate::log::reg_state_text(self, reg)
    }
}
