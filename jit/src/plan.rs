//! What both tiers decide about a program set before either emits code: the tier-neutral
//! layer (as wasmtime's `environ` crate is to its compilers). Nothing here knows Cranelift or
//! x86-64; both tiers read it, so that they agree on everything but the code itself:
//!
//! - the set's plan ([`SetPlan`]): the inlined arrays, the per-CPU tables they read, how
//!   call frames come and go and what of them is zeroed;
//! - the functions and their basic blocks ([`find_entries`], [`Cfg`]): the same blocks in
//!   both tiers, so that the instruction budget stops a run at the same place;
//! - the helper calls compiled code does itself ([`inline_helper`], after the kernel's policy
//!   in [`bpfemu_isa::inline_policy`]), with what straight-line code knows of r1
//!   ([`KnownArgs`]).

use bpfemu_isa::inline_policy::{self, InlinedHelper};
use bpfemu_isa::{AluOp, CallTarget, Insn, LdImm64Kind, Program, Reg, Source, Width};
use bpfemu_vm::MapOp;
use bpfemu_vm::STACK_SIZE;
use bpfemu_vm::interp::decode_code_addr;
use bpfemu_vm::maps::InlineArray;
use std::collections::{BTreeSet, HashMap};

/// How compiled code reaches memory.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Mode {
    /// Every access validated against the live regions, as the interpreter does.
    #[default]
    Checked,
    /// Direct host memory: only for programs a verifier accepted.
    Trusted,
}

/// How the frames of bpf-to-bpf calls and callbacks come and go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameMode {
    /// Each call adds a frame to the memory and removes it on return, as the interpreter
    /// does: an access to the frame of a call that returned faults (checked code).
    PerCall,
    /// A depth's frame, added at the first call at that depth, stays in the memory until the
    /// batch of runs ends, and a call only zeroes the bytes code may have written there and
    /// moves the depth: trusted code, whose accesses the verifier proved stay in live frames,
    /// does it inline, without a call into the runtime.
    Kept,
}

/// The most frame bytes a [`FrameMode::Kept`] call zeroes inline, one 8-byte store each: the
/// stores are emitted at every call site, so a program that may write more of its frames
/// asks the runtime at each call instead, which zeroes them in a loop.
pub const INLINE_ZERO_MAX: usize = 128;

/// How one program set's calls get their frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FramePlan {
    pub mode: FrameMode,
    /// The lowest frame byte code or the helpers it calls may write: what a call zeroes.
    pub zero_from: usize,
}

impl FramePlan {
    /// Whether a call enters its kept frame inline, zeroing it there, rather than asking
    /// the runtime: kept frames whose written part is short enough ([`INLINE_ZERO_MAX`]).
    pub fn enters_inline(self) -> bool {
        self.mode == FrameMode::Kept && STACK_SIZE - self.zero_from <= INLINE_ZERO_MAX
    }

    /// The offsets from a frame's top of the 8-byte words a call entering the frame inline
    /// zeroes.
    pub fn zeroed_words(self) -> impl Iterator<Item = i32> {
        (self.zero_from / 8 * 8..STACK_SIZE)
            .step_by(8)
            .map(|byte| byte as i32 - STACK_SIZE as i32)
    }
}

/// What both tiers derive from a program set before they emit code.
pub(crate) struct SetPlan {
    /// The inlined array lookups, by map handle.
    pub(crate) arrays: HashMap<u64, ArrayLookup>,
    pub(crate) cpu_tables: CpuTables,
    /// The lowest frame byte the code may write directly (what a parked frame zeroes).
    pub(crate) written_from: usize,
    /// Trusted code enters and leaves call frames inline, zeroing what the verifier's bound
    /// allows the frame's code and the helpers it calls to write (the memory sees helpers'
    /// writes, inline code does not), or the whole frame without a bound; checked code asks
    /// the runtime for a frame per call, so that an access to a returned call's frame faults.
    pub(crate) frames: FramePlan,
}

impl SetPlan {
    /// The plan for `progs` in `mode`; `stack_bound` counts for trusted code only.
    pub(crate) fn new(
        progs: &[Program],
        mode: Mode,
        arrays: &[(u64, InlineArray)],
        stack_bound: Option<u32>,
    ) -> SetPlan {
        let mut cpu_tables = CpuTables::default();
        let arrays = arrays
            .iter()
            .map(|(handle, array)| (*handle, cpu_tables.describe(array)))
            .collect();
        let bound_bottom = stack_bound
            .filter(|_| mode == Mode::Trusted)
            .map(|bound| STACK_SIZE.saturating_sub(bound as usize));
        let frame_mode = match mode {
            Mode::Trusted => FrameMode::Kept,
            Mode::Checked => FrameMode::PerCall,
        };
        SetPlan {
            arrays,
            cpu_tables,
            written_from: stack_written_from(progs).max(bound_bottom.unwrap_or(0)),
            frames: FramePlan {
                mode: frame_mode,
                zero_from: bound_bottom.unwrap_or(0),
            },
        }
    }
}

/// The lowest stack byte (region offset) the programs' code may store to directly: stores and
/// atomics at a constant offset from r10 write from `STACK_SIZE + off`; one through any other
/// register may write anywhere (a pointer into the frame), so the whole frame counts.
pub(crate) fn stack_written_from(progs: &[Program]) -> usize {
    let stack = STACK_SIZE as i64;
    let lowest = progs
        .iter()
        .flat_map(|prog| prog.iter())
        .filter_map(|(_, insn)| match *insn {
            Insn::Store { dst, off, .. }
            | Insn::StoreReg { dst, off, .. }
            | Insn::Atomic { dst, off, .. } => Some(if dst == Reg::R10 {
                (stack + off as i64).clamp(0, stack)
            } else {
                0
            }),
            _ => None,
        })
        .min()
        .unwrap_or(stack);
    lowest as usize
}

/// An array map whose lookups compiled code does itself.
#[derive(Clone, Copy, Debug)]
pub struct ArrayLookup {
    pub max_entries: u32,
    pub slot_size: u64,
    pub base: ArrayBase,
}

/// Where element 0 is.
#[derive(Clone, Copy, Debug)]
pub enum ArrayBase {
    /// A plain array: one copy.
    Fixed(u64),
    /// A per-CPU array: `table` is the address of `copies` base addresses, one per CPU.
    PerCpu { table: u64, copies: u64 },
}

/// The per-CPU base tables of a program set's per-CPU arrays: they live as long as the code
/// that reads them (boxed slices never move).
#[derive(Default)]
pub struct CpuTables(Vec<Box<[u64]>>);

impl CpuTables {
    /// The lookup description of `array`, keeping its per-CPU table here.
    pub fn describe(&mut self, array: &InlineArray) -> ArrayLookup {
        let base = if array.percpu {
            let table: Box<[u64]> = array.bases.clone().into_boxed_slice();
            let base = ArrayBase::PerCpu {
                table: table.as_ptr() as u64,
                copies: table.len() as u64,
            };
            self.0.push(table);
            base
        } else {
            ArrayBase::Fixed(array.bases.first().copied().unwrap_or(0))
        };
        ArrayLookup {
            max_entries: array.max_entries,
            slot_size: array.slot_size,
            base,
        }
    }
}

/// A helper call compiled code does itself, with the helper call kept as the slow path of
/// what its fast path does not cover (a key outside the function's own frame in checked mode,
/// helpers that model no CPU).
#[derive(Clone, Copy, Debug)]
pub(crate) enum InlineHelper {
    /// `bpf_get_smp_processor_id`: the run's CPU.
    CpuId,
    /// `bpf_map_lookup_elem` on an array: the kernel's `array_map_gen_lookup` (a bounds check
    /// on the u32 key, then `base + index * round_up(value_size, 8)`, on the running CPU's
    /// copy for a per-CPU array).
    ArrayLookup(ArrayLookup),
}

/// How helper `id` is done when r1 is known to hold `known_r1`: inline where the kernel
/// inlines it ([`inline_policy`]) and the inline code makes no call, that is when the map in
/// r1 is one of the set's inlined `arrays` (the vm hands over only maps of call-free kinds).
/// The kernel inlines a lookup when every path to the call holds the same map in r1; the
/// tiers know the map when the `ld_imm64` that loads it sits in the same straight-line code
/// as the call ([`r1_after`]), which is how compilers emit it.
pub(crate) fn inline_helper(
    id: i32,
    known_r1: Option<u64>,
    arrays: &HashMap<u64, ArrayLookup>,
) -> Option<InlineHelper> {
    match inline_policy::inlined_helper(id)? {
        InlinedHelper::CpuId => Some(InlineHelper::CpuId),
        InlinedHelper::MapLookup => arrays
            .get(&known_r1?)
            .map(|array| InlineHelper::ArrayLookup(*array)),
    }
}

/// The callback (its entry pc in program `prog`) of a `bpf_loop` call that trusted code runs
/// as a loop of calls, as the kernel's `optimize_bpf_loop` rewrites it (`inline_bpf_loop`):
/// where the verifier proved the flags zero and the callback the same at every visit of the
/// call. The tiers know both when straight-line code before the call sets them
/// ([`KnownArgs`]), which is how compilers emit the call. The loop's semantics (the 64-bit
/// limit test, the 32-bit E2BIG) are the helper's own when its flags are zero, so the slower
/// call elsewhere gives the same answers.
pub(crate) fn loop_callback(id: i32, known: KnownArgs, prog: usize, mode: Mode) -> Option<usize> {
    if id != bpfemu_isa::helpers::id::LOOP || mode != Mode::Trusted || known.get(Reg::R4) != Some(0)
    {
        return None;
    }
    let (callback_prog, entry) = decode_code_addr(known.get(Reg::R2)?)?;
    (callback_prog == prog).then_some(entry)
}

/// The map helpers trusted code calls directly ([`crate::runtime::map_op_entry`]) when it
/// does not inline them: lookups, updates and deletes, the calls map-heavy programs make on
/// every packet. Checked code makes the general call, which also words a bad argument.
pub(crate) fn direct_map_op(id: i32, mode: Mode) -> Option<MapOp> {
    MapOp::of_helper(id).filter(|_| mode == Mode::Trusted)
}

/// The constants r1-r5 hold, as far as straight-line code since their `ld_imm64` or `mov`
/// shows (what lets a map lookup right after its map's `ld_imm64` be inlined, and a
/// `bpf_loop` whose callback and zero flags are set just before it run as a loop).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct KnownArgs([Option<u64>; 5]);

impl KnownArgs {
    /// What is known after `insn`: a constant load or move into r1-r5 sets its register,
    /// anything else that may write one forgets it.
    pub(crate) fn after(self, insn: &Insn) -> KnownArgs {
        let mut known = self;
        for r in 1..=5u8 {
            let reg = Reg::new(r).expect("r1-r5");
            let slot = &mut known.0[r as usize - 1];
            *slot = match *insn {
                Insn::LdImm64 {
                    dst,
                    kind: LdImm64Kind::Imm,
                    imm,
                    next_imm,
                } if dst == reg => Some(Insn::imm64(imm, next_imm)),
                Insn::Alu {
                    width,
                    op: AluOp::Mov,
                    dst,
                    src: Source::Imm(imm),
                } if dst == reg => Some(match width {
                    Width::W64 => imm as i64 as u64,
                    Width::W32 => imm as u32 as u64,
                }),
                _ if may_write(insn, reg) => None,
                _ => *slot,
            };
        }
        known
    }

    /// The constant in argument register `r` (r1-r5), if known.
    pub(crate) fn get(self, r: Reg) -> Option<u64> {
        let i = r.index().checked_sub(1)?;
        self.0.get(i).copied().flatten()
    }
}

/// Whether `insn` may change register `r` (conservatively: calls, exits and legacy packet
/// loads count as writing every register).
fn may_write(insn: &Insn, r: Reg) -> bool {
    match *insn {
        Insn::Alu { dst, .. }
        | Insn::Neg { dst, .. }
        | Insn::MovSx { dst, .. }
        | Insn::AddrSpaceCast { dst, .. }
        | Insn::Endian { dst, .. }
        | Insn::LdImm64 { dst, .. }
        | Insn::Load { dst, .. } => dst == r,
        Insn::Atomic { src, dst, .. } => src == r || dst == r || r == Reg::R0,
        Insn::Store { .. }
        | Insn::StoreReg { .. }
        | Insn::Ja { .. }
        | Insn::Jump { .. }
        | Insn::MayGoto { .. } => false,
        Insn::LdAbs { .. } | Insn::LdInd { .. } | Insn::Call(_) | Insn::Exit => true,
    }
}

/// The pc `off` reaches from `pc`, when an instruction starts there.
pub(crate) fn jump_target(prog: &Program, pc: usize, off: i64) -> Option<usize> {
    let t = usize::try_from(pc as i64 + 1 + off).ok()?;
    prog.insn(t).map(|_| t)
}

/// Every function entry of the set, sorted: instruction 0 of each program, the target of
/// every bpf-to-bpf call, every callback whose code address an `ld_imm64` loads.
pub(crate) fn find_entries(progs: &[Program]) -> Vec<(usize, usize)> {
    let mut entries: BTreeSet<(usize, usize)> = (0..progs.len()).map(|p| (p, 0)).collect();
    for (p, prog) in progs.iter().enumerate() {
        for (pc, insn) in prog.iter() {
            match *insn {
                Insn::Call(CallTarget::Local(rel)) => {
                    if let Some(t) = jump_target(prog, pc, rel as i64) {
                        entries.insert((p, t));
                    }
                }
                Insn::LdImm64 {
                    kind: LdImm64Kind::Imm,
                    imm,
                    next_imm,
                    ..
                } => {
                    if let Some((q, t)) = decode_code_addr(Insn::imm64(imm, next_imm))
                        && progs.get(q).is_some_and(|q| q.insn(t).is_some())
                    {
                        entries.insert((q, t));
                    }
                }
                _ => {}
            }
        }
    }
    entries.into_iter().collect()
}

/// Whether the run may stop at this instruction or it has effects beyond registers, so that
/// it must end its block: a budget that runs out inside a block then stops it before any
/// effect the interpreter would not have had.
pub(crate) fn ends_block(insn: &Insn, mode: Mode) -> bool {
    match insn {
        Insn::Ja { .. }
        | Insn::Jump { .. }
        | Insn::MayGoto { .. }
        | Insn::Call(_)
        | Insn::Exit
        | Insn::LdAbs { .. }
        | Insn::LdInd { .. } => true,
        Insn::LdImm64 { kind, .. } => *kind != LdImm64Kind::Imm,
        Insn::AddrSpaceCast { imm, .. } => *imm != 1,
        // A write is an effect the budget must not skip; a load only stops a checked run.
        Insn::Store { .. } | Insn::StoreReg { .. } | Insn::Atomic { .. } => true,
        Insn::Load { .. } => mode == Mode::Checked,
        _ => false,
    }
}

/// The instructions that may run right after `insn` at `pc` within its function (calls
/// return to the next one).
pub(crate) fn successors<'p>(
    prog: &'p Program,
    pc: usize,
    insn: &Insn,
) -> impl Iterator<Item = usize> + use<'p> {
    let next = pc + insn.slots();
    let (jump, fall) = match *insn {
        Insn::Ja { off, .. } => (jump_target(prog, pc, off as i64), None),
        Insn::Jump { off, .. } | Insn::MayGoto { off } => {
            (jump_target(prog, pc, off as i64), Some(next))
        }
        Insn::Exit => (None, None),
        Insn::LdImm64 { kind, .. } if kind != LdImm64Kind::Imm => (None, None),
        Insn::AddrSpaceCast { imm, .. } if imm != 1 => (None, None),
        _ => (None, Some(next)),
    };
    [jump, fall]
        .into_iter()
        .flatten()
        .filter(move |&s| prog.insn(s).is_some())
}

/// The shape of one function: its instructions and basic blocks, flags by pc (one past the
/// end included, where a block that falls off the program would continue). Blocks end at
/// anything that jumps, calls, exits or may stop the run ([`ends_block`]), so that the budget
/// is counted once per block yet stops the run exactly where the interpreter stops it.
pub(crate) struct Cfg {
    /// The function's first instruction.
    pub(crate) entry: usize,
    /// The instructions reachable from the entry without calls.
    reached: Vec<bool>,
    /// The block leaders among them: the entry, and what may run after an instruction that
    /// ends a block.
    leader: Vec<bool>,
    /// The leaders some jump reaches.
    jump_target: Vec<bool>,
    /// The leaders a jump from the same or a later instruction reaches: the only ones whose
    /// predecessors are not all emitted when code, in pc order, reaches them.
    loop_head: Vec<bool>,
}

impl Cfg {
    pub(crate) fn of(prog: &Program, entry: usize, mode: Mode) -> Cfg {
        let n = prog.len() + 1;
        let mut cfg = Cfg {
            entry,
            reached: vec![false; n],
            leader: vec![false; n],
            jump_target: vec![false; n],
            loop_head: vec![false; n],
        };
        cfg.leader[entry] = true;
        let mut work = vec![entry];
        while let Some(pc) = work.pop() {
            if std::mem::replace(&mut cfg.reached[pc], true) {
                continue;
            }
            let insn = *prog.insn(pc).expect("only instruction starts are reached");
            let jump = match insn {
                Insn::Ja { off, .. } => Some(off as i64),
                Insn::Jump { off, .. } | Insn::MayGoto { off } => Some(off as i64),
                _ => None,
            };
            if let Some(t) = jump.and_then(|off| jump_target(prog, pc, off)) {
                cfg.jump_target[t] = true;
                cfg.loop_head[t] |= t <= pc;
            }
            let ends = ends_block(&insn, mode);
            for s in successors(prog, pc, &insn) {
                cfg.leader[s] |= ends;
                if !cfg.reached[s] {
                    work.push(s);
                }
            }
        }
        for (leader, &reached) in cfg.leader.iter_mut().zip(&cfg.reached) {
            *leader &= reached;
        }
        cfg
    }

    fn flag(flags: &[bool], pc: usize) -> bool {
        flags.get(pc).copied().unwrap_or(false)
    }

    pub(crate) fn reached(&self, pc: usize) -> bool {
        Self::flag(&self.reached, pc)
    }

    pub(crate) fn is_leader(&self, pc: usize) -> bool {
        Self::flag(&self.leader, pc)
    }

    pub(crate) fn is_jump_target(&self, pc: usize) -> bool {
        Self::flag(&self.jump_target, pc)
    }

    pub(crate) fn is_loop_head(&self, pc: usize) -> bool {
        Self::flag(&self.loop_head, pc)
    }

    /// The block leaders, in pc order.
    pub(crate) fn leaders(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.leader.len()).filter(|&pc| self.leader[pc])
    }

    /// The instructions of the block that starts at `leader`: up to one that ends it, or up
    /// to the next leader.
    pub(crate) fn block<'p>(
        &'p self,
        prog: &'p Program,
        leader: usize,
        mode: Mode,
    ) -> impl Iterator<Item = (usize, Insn)> + Clone + 'p {
        let mut pc = Some(leader);
        std::iter::from_fn(move || {
            let at = pc?;
            let insn = *prog.insn(at).expect("reached");
            let next = at + insn.slots();
            pc = (!ends_block(&insn, mode) && !self.is_leader(next) && self.reached(next))
                .then_some(next);
            Some((at, insn))
        })
    }
}
