//! The verifier environment (`struct bpf_verifier_env`): the program being verified, per-
//! instruction facts, subprograms, the log and the counters. Every check receives it.

use crate::log::Log;
use crate::prog_type::ProgTypeOps;
use crate::state::reg::RegState;
use crate::{Errno, ProgramInput, Reject};
use bpfemu_isa::{Insn, Program};
use bpfemu_loader::MapSpec;

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
    /// The target of a jump or a call (`jump_target`): unlike `jmp_point`, not the
    /// instruction after a call.
    pub jump_target: bool,
    /// A checkpoint must be taken here regardless of the heuristics (`force_checkpoint`):
    /// `may_goto`, iterator `next` calls, callback call sites.
    pub force_checkpoint: bool,
    /// A helper call that takes a callback (`calls_callback`).
    pub calls_callback: bool,
    /// The instruction's ctx access, for the ctx conversion in the fixups.
    pub ctx_access: Option<crate::prog_type::CtxAccess>,
    /// The `ctx_field_size` a load through a socket pointer recorded (0: the field is read
    /// whole only), for the conversion of its narrow loads in the fixups.
    pub sock_field_size: u32,
    /// A slot the strict decoder refused, replaced by a placeholder: refused with the
    /// kernel's message when the walk reaches it ([`crate::check::check_reached`]).
    pub bad_insn: bool,
    /// A load/store through a pointer of this type (`ptr_type`); ctx loads are converted.
    pub ptr_type: Option<crate::state::RegType>,
    /// A load from kernel memory: a map's kernel structure, a `ptr_` or untrusted pointer
    /// read out of one (which bpfemu's runtimes do not emulate).
    pub reads_kernel_memory: bool,
    /// For helper calls with a map argument: the map of every path, `None` once two paths
    /// passed different maps (`map_ptr_state`, poisoned).
    pub map_index: Option<u32>,
    pub map_poisoned: bool,
    /// For `bpf_tail_call`: the key's constant value on every path (`map_key_state`).
    pub map_key: Option<u64>,
    pub map_key_poisoned: bool,
    /// For `bpf_loop` calls (`loop_inline_state`): whether every visit so far passed zero
    /// flags and the same callback (the kernel inlines the loop then), and that callback.
    pub loop_inline: Option<(bool, usize)>,
    /// Whether the 32-bit result of this ALU instruction must be zero-extended explicitly
    /// (`zext_dst`); x86 JITs do not need it, but the xlated dump shows no difference.
    pub zext_dst: bool,
    /// Whether an instruction's jump was taken on some path and not on another (for dead-code
    /// sanitation): bit 0 fall-through seen, bit 1 branch seen.
    pub edges_seen: u8,
    /// The kernel's flaw the walk followed here (see [`crate::Xlated::kernel_flaws`]).
    pub kernel_flaw: Option<crate::KernelFlaw>,
    /// A spill or fill of a `bpf_fastcall` pair (`fastcall_pattern`).
    pub fastcall_pattern: bool,
    /// For a call: how many pairs around it the fixups remove (`fastcall_spills_num`).
    pub fastcall_spills: u8,
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
    /// Its BTF FUNC type (global functions).
    pub func_type: Option<bpfemu_loader::btf::TypeId>,
    /// Its arguments once `btf_prepare_func_args` read them (global functions).
    pub global_args: Option<Vec<crate::call::global::GlobalArg>>,
    /// Why `btf_prepare_func_args` refused its prototype, as logged (global functions).
    pub args_refusal: Option<String>,
    /// A call to it was seen (`called`): a global function is verified only then.
    pub called: bool,
    /// Verified on its own already (global functions).
    pub verified: bool,
    /// Its stack grew by the slots of an inlined `bpf_loop` already.
    pub loop_stack_added: bool,
    /// Its BTF prototype did not fit a call (`func_info_aux.unreliable`): no more checks.
    pub unreliable: bool,
    /// Used as a callback (its address taken with `ld_imm64` BPF_PSEUDO_FUNC).
    pub is_cb: bool,
    /// Verified as an async callback (timer).
    pub is_async_cb: bool,
    /// Changes packet data (calls a helper that does), seen by its callers.
    pub changes_pkt_data: bool,
    /// May sleep.
    pub might_sleep: bool,
    /// The top of its `bpf_fastcall` pairs' stack area (`fastcall_stack_off`; 0 for none,
    /// `i16::MIN` once something else touched the area).
    pub fastcall_stack_off: i16,
    /// A pair around a call this kernel does not inline keeps the area's slots
    /// (`keep_fastcall_stack`).
    pub keep_fastcall_stack: bool,
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
    /// The line_info entry printed last (`prev_linfo`).
    pub last_linfo: Option<usize>,
    /// Checkpoints (`struct bpf_verifier_state_list`), referenced by index from
    /// `VerifierState::parent` and from the per-bucket lists.
    pub explored: Vec<Explored>,
    /// Hash buckets of checkpoint indices, newest last (`explored_states`).
    pub buckets: Vec<Vec<usize>>,
    /// Registers live before each instruction (`live_regs_before`), a bit per register.
    pub live_regs: Vec<u16>,
    /// Stack slot liveness from the walk's own accesses (6.18's `liveness.c`).
    pub stack_liveness: crate::stack_liveness::StackLiveness,
    /// Stack slot liveness computed before the walk (7.2's `liveness.c`), when the kernel
    /// has it ([`crate::stack_liveness_static::enabled`]).
    pub stack_liveness_static: Option<crate::stack_liveness_static::StaticStackLiveness>,
    /// The registers' constants before each instruction, found before the walk (7.2's
    /// `const_fold.c`); empty for the kernels without it.
    pub const_regs: crate::const_fold::ConstRegs,
    /// The helper argument being checked is written before it is read (`MEM_UNINIT`, the
    /// kernel's `raw_mode`): its stack bytes are not read.
    pub raw_mode_arg: bool,
    /// Checkpoints in the lists plus evicted ones still referenced (for `peak_states`).
    pub states_alive: u64,
    /// The history entry pushed for the current instruction (`cur_hist_ent`).
    pub cur_hist_ent: bool,
    /// Branches a check pushed during the current instruction (`push_stack` from inside a
    /// helper call: callbacks), as (state, instruction, previous instruction); the walk
    /// moves them onto its stack after the instruction.
    pub pending: Vec<(crate::state::VerifierState, usize, usize)>,
    /// The loop (strongly connected component) of each instruction, 0 for none (`scc`).
    pub scc: Vec<u32>,
    /// Loops being explored on some path, per call chain (`struct bpf_scc_info`).
    pub scc_visits: Vec<crate::loops::SccVisit>,
    /// Back-edges recorded and not yet propagated (`num_backedges`), for `peak_states`.
    pub num_backedges: u64,
    /// A `bpf_throw` was reached (`seen_exception`).
    pub seen_exception: bool,
    /// The program uses an arena map (`prog->aux->arena`): only then may it cast pointers
    /// into the arena's address space.
    pub has_arena: bool,
    /// The record of the current path, kept only when an explanation is asked for.
    pub trace: Option<Box<crate::trace::Trace>>,
}

/// A checkpoint.
#[derive(Clone, Debug)]
pub struct Explored {
    pub state: crate::state::VerifierState,
    /// Paths from this checkpoint not yet finished (`branches`).
    pub branches: u32,
    pub hit_cnt: u32,
    pub miss_cnt: u32,
    /// Evicted from its bucket.
    pub evicted: bool,
    /// Its dead registers and stack slots were forgotten (`cleaned`).
    pub cleaned: bool,
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
            last_linfo: None,
            explored: Vec::new(),
            buckets: vec![Vec::new(); len.max(1)],
            live_regs: vec![u16::MAX; len],
            stack_liveness: Default::default(),
            stack_liveness_static: None,
            const_regs: Vec::new(),
            raw_mode_arg: false,
            states_alive: 0,
            cur_hist_ent: false,
            pending: Vec::new(),
            scc: vec![0; len],
            scc_visits: Vec::new(),
            num_backedges: 0,
            seen_exception: false,
            has_arena: false,
            trace: None,
        }
    }

    /// `update_peak_states`: checkpoints and back-edges held at once.
    pub fn update_peak_states(&mut self) {
        let held = self.states_alive + self.num_backedges;
        self.counters.peak_states = self.counters.peak_states.max(held);
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

    /// The first instruction after subprogram `sp` (the program's end for the last).
    pub fn subprog_end(&self, sp: usize) -> usize {
        self.subprogs.get(sp + 1).map_or(self.len(), |s| s.start)
    }

    /// The subprogram starting exactly at `pc` (`find_subprog`).
    pub fn subprog_at(&self, pc: usize) -> Option<usize> {
        self.subprogs.binary_search_by(|s| s.start.cmp(&pc)).ok()
    }

    /// The map a register's `map` names: an index into the object's maps, or, from
    /// `maps.len()` on, the inner-map template of map `index - maps.len()` (what a lookup in a
    /// map-in-map yields).
    pub fn map(&self, index: u32) -> Option<&'a MapSpec> {
        let maps = self.input.maps;
        let i = index as usize;
        if i < maps.len() {
            return maps.get(i);
        }
        maps.get(i - maps.len())?.inner.as_deref()
    }

    /// The special fields of a map's value type that loads and stores may not touch
    /// (`bpf_spin_lock`, `bpf_timer`, ...), found in its BTF as the kernel's
    /// `btf_parse_fields` finds them.
    pub fn map_special_fields(&self, index: u32) -> Vec<SpecialField> {
        let (Some(map), Some(btf)) = (self.map(index), self.input.btf) else {
            return Vec::new();
        };
        let version = self.input.kernel.version();
        let mut fields = map
            .value_type
            .map_or_else(Vec::new, |ty| special_fields_of(btf, ty));
        fields.retain(|f| special_field_known(f.kind, version));
        fields
    }

    /// Whether the map's value holds a `bpf_spin_lock` (its pointers keep their id after a
    /// null check, for `bpf_spin_lock` to pair lock and unlock).
    pub fn map_has_spin_lock(&self, index: u32) -> bool {
        self.map_special_fields(index)
            .iter()
            .any(|f| f.kind.ends_with("spin_lock"))
    }

    /// The register-state index of the inner-map template of map `outer`.
    pub fn inner_map_index(&self, outer: u32) -> u32 {
        self.input.maps.len() as u32 + outer
    }

    /// A verbose line for the log (the kernel's `verbose()`), printed at levels 1 and 2.
    pub fn verbose(&mut self, text: &str) {
        self.log.verbose(text);
    }

    /// Logs `msg` and returns the rejection carrying it (`verbose(); return -EACCES;`).
    pub fn reject(&mut self, errno: Errno, msg: impl Into<String>) -> Reject {
        let msg = msg.into();
        self.log.verbose(&format!("{msg}\n"));
        Reject {
            errno,
            msg,
            logged: true,
        }
    }

    /// The kernel's description of a register for messages that print it whole.
    pub fn reg_text(&self, reg: &RegState) -> String {
        crate::log::reg_state_text(self, reg)
    }
}

/// The special fields of BTF type `ty` (a map's value), as `btf_parse_fields` finds them.
pub fn special_fields_of(
    btf: &bpfemu_loader::btf::Btf,
    ty: bpfemu_loader::btf::TypeId,
) -> Vec<SpecialField> {
    let mut out = Vec::new();
    collect_special_fields(btf, ty, 0, &mut out, 0);
    out
}

/// A special field inside a map value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpecialField {
    /// The kernel's name for it (`bpf_spin_lock`, `bpf_timer`, ...).
    pub kind: &'static str,
    pub offset: u32,
    pub size: u32,
}

const SPECIAL_FIELDS: [(&str, u32); 6] = [
    ("bpf_spin_lock", 4),
    ("bpf_res_spin_lock", 8),
    ("bpf_timer", 16),
    ("bpf_wq", 32),
    ("bpf_task_work", 8),
    ("bpf_list_head", 16),
];

/// Whether `kernel` knows a special field of this kind: to an older one the type is plain
/// bytes, which loads and stores may touch (a `struct bpf_timer` in 5.10's map values).
fn special_field_known(kind: &str, kernel: bpfemu_isa::KernelVersion) -> bool {
    use bpfemu_isa::KernelVersion::*;
    let since = match kind {
        "bpf_spin_lock" => V5_10,
        "bpf_timer" => V6_1,
        "bpf_list_head" | "bpf_wq" => V6_12,
        _ => V6_18,
    };
    kernel >= since
}

fn collect_special_fields(
    btf: &bpfemu_loader::btf::Btf,
    ty: bpfemu_loader::btf::TypeId,
    base: u32,
    out: &mut Vec<SpecialField>,
    depth: u32,
) {
    if depth > 8 {
        return;
    }
    let Some(id) = btf.skip_mods_and_typedefs(ty) else {
        return;
    };
    let Some(t) = btf.get(id) else {
        return;
    };
    if let Some(&(kind, size)) = SPECIAL_FIELDS.iter().find(|(n, _)| *n == t.name)
        && t.kind.is_composite()
    {
        out.push(SpecialField {
            kind,
            offset: base,
            size,
        });
        return;
    }
    if t.kind.is_composite() {
        for m in t.kind.members() {
            collect_special_fields(btf, m.ty, base + m.bit_offset / 8, out, depth + 1);
        }
    }
    // A global data map's value is its section (`btf_find_datasec_var`): each variable's
    // type at the variable's offset, as `private(X) struct bpf_spin_lock lock;` declares one.
    if let bpfemu_loader::btf::BtfKind::DataSec { vars, .. } = &t.kind {
        for v in vars {
            if let Some(bpfemu_loader::btf::BtfKind::Var { ty, .. }) =
                btf.get(v.ty).map(|t| &t.kind)
            {
                collect_special_fields(btf, *ty, base + v.offset, out, depth + 1);
            }
        }
    }
}
