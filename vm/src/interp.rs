//! The reference interpreter: runs a decoded [`Program`] with the kernel's semantics over
//! checked [`Memory`].
//!
//! The hot loop runs a pre-decoded form of the program ([`PreparedProgram`]: every ALU
//! operation, jump, load and store specialised once to a code of its own, jump targets
//! resolved, a region hint per memory instruction, the budget charged per straight-line run
//! rather than per instruction) and hands everything else to the general path over the
//! decoded [`Insn`]; nothing is allocated per instruction, and calls reuse stack frames kept
//! by the memory. Coverage and taint tracking run every instruction through the general path.
//!
//! [`Interpreter::run_set`] runs one program of a set, so that a helper can switch programs
//! (a tail call, [`HelperOutcome::TailCall`]) or call functions anywhere in the set by their
//! code address ([`code_addr`]; callbacks of `bpf_loop` and `bpf_for_each_map_elem`,
//! [`HelperOutcome::Callbacks`]).

mod decoded;
mod paths_not_taken;
mod taint_step;

pub use decoded::PreparedProgram;

use crate::alu;
use crate::atomic;
use crate::coverage::{Coverage, FELL_THROUGH, RAN, TAKEN};
use crate::error::{MAX_CALL_FRAMES, Unsupported, VmError, kfunc_error};
use crate::helpers::{CallbackDriver, CallbackStep, HelperError, HelperOutcome, Helpers};
use crate::memory::{MemFault, Memory, RegionId, STACK_SIZE};
use crate::taint::TaintState;
use bpfemu_isa::{
    AluOp, AtomicOp, ByteOrder, CallTarget, Insn, JmpCond, LdImm64Kind, Program, Reg, Size, Source,
    Width,
};
use decoded::{Code, Op, with_specialised_codes};

/// The kernel's `BPF_MAX_LOOPS`: how many times `may_goto` falls through in one frame before
/// it starts jumping.
pub const BPF_MAX_LOOPS: u64 = 8 * 1024 * 1024;

/// Register slots of the machine: r0-r10, padded to 16 so that the fast loop's register
/// numbers (`decoded::Slot`, below 16) index without a bounds check.
const REG_SLOTS: usize = 16;

/// Default limit on executed instructions per run.
pub const DEFAULT_INSN_BUDGET: u64 = 1 << 24;

/// Code addresses (what `ld_imm64 src=BPF_PSEUDO_FUNC` loads once a program is prepared) live in
/// the kernel half of the address space, where no region is: a program can pass one to a
/// helper, never dereference it.
pub const CODE_ADDR_BASE: u64 = 0xffff_a000_0000_0000;
/// Bits of a code address that hold the instruction index (the kernel allows 1M instructions).
const CODE_PC_BITS: u32 = 24;

/// The code address of instruction `pc` of program `prog` of a program set.
pub fn code_addr(prog: usize, pc: usize) -> u64 {
    CODE_ADDR_BASE | ((prog as u64) << CODE_PC_BITS) | pc as u64
}

/// The (program, instruction) a code address names, if it is one.
pub fn decode_code_addr(addr: u64) -> Option<(usize, usize)> {
    let rest = addr.checked_sub(CODE_ADDR_BASE)?;
    let prog = rest >> CODE_PC_BITS;
    (prog < 1 << 20).then_some((prog as usize, (rest & ((1 << CODE_PC_BITS) - 1)) as usize))
}

/// Run limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options {
    /// The run fails with [`VmError::BudgetExceeded`] instead of executing more instructions.
    pub insn_budget: u64,
    /// Fall-throughs each frame's `may_goto` allows before jumping ([`BPF_MAX_LOOPS`]).
    pub may_goto_loops: u64,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            insn_budget: DEFAULT_INSN_BUDGET,
            may_goto_loops: BPF_MAX_LOOPS,
        }
    }
}

/// The reference interpreter. Reusable across runs; it keeps its call-frame vector.
#[derive(Clone, Debug, Default)]
pub struct Interpreter {
    options: Options,
    frames: Vec<Frame>,
    /// The caller's registers of every frame but the entry function's, innermost last.
    saved_regs: Vec<[u64; REG_SLOTS]>,
    executed: u64,
    /// When set, every run adds what it reached (see [`Coverage`]).
    coverage: Option<Coverage>,
    /// When set, every run tracks taint (see [`crate::taint`]).
    taint: Option<TaintState>,
    /// Whether a run's entry frame stays live in the memory for the next run
    /// ([`Interpreter::keep_frames`]).
    keep_frames: bool,
    /// The entry frame (its id and top) the last run left live.
    kept_entry: Option<(RegionId, u64)>,
}

/// One active call: its stack region, its `may_goto` count, and (for callees) where to
/// return. A callee's caller registers are kept apart (`Machine::saved_regs`), so that the
/// entry frame every run pushes is small.
#[derive(Clone, Debug)]
struct Frame {
    /// `None` for the entry function of a set no program of which names r10: nothing can
    /// reach its frame, so it gets none (see [`PreparedProgram`]'s `names_r10`).
    stack: Option<RegionId>,
    may_goto_left: u64,
    return_pc: usize,
    /// The program (in the set) to return to.
    return_prog: usize,
    /// A callback of a helper's loop: its exit goes back to the loop, not to `return_pc`.
    callback: bool,
}

/// A helper's callback loop in progress: where the helper was called, and the loop.
struct PendingLoop {
    driver: CallbackDriver,
    helper: i32,
    call_pc: usize,
    call_prog: usize,
}

impl Interpreter {
    pub fn new(options: Options) -> Interpreter {
        Interpreter {
            options,
            frames: Vec::with_capacity(MAX_CALL_FRAMES),
            saved_regs: Vec::new(),
            executed: 0,
            coverage: None,
            taint: None,
            keep_frames: false,
            kept_entry: None,
        }
    }

    /// Leaves a run's entry stack frame live in the memory after the run (the regions do not
    /// change twice on every packet), for the next run on the same memory to take back, zeroed
    /// where the last one wrote: the same bytes as a parked frame brought back. Runs that
    /// record coverage or taint (which look at the regions) park it first. For a caller that
    /// runs this interpreter alone on one memory; it parks the frame
    /// ([`Interpreter::release_frames`]) before anything else pushes a stack frame there.
    pub fn keep_frames(&mut self) {
        self.keep_frames = true;
    }

    /// Parks the entry frame [`Interpreter::keep_frames`] left live in `mem`, as after a run
    /// without it; keeping goes on from the next run.
    #[inline]
    pub fn release_frames(&mut self, mem: &mut Memory) {
        if let Some((stack, _)) = self.kept_entry.take() {
            mem.remove_stack_frame_at(0, stack);
        }
    }

    /// Starts (`Some`) or stops (`None`) taint tracking (see [`crate::taint`]); the state
    /// carries map values' taint from one run to the next.
    pub fn set_taint(&mut self, taint: Option<TaintState>) {
        self.taint = taint;
    }

    /// The taint state after the last run (`None` when not tracking).
    pub fn taint(&self) -> Option<&TaintState> {
        self.taint.as_ref()
    }

    /// Starts (`Some`) or stops (`None`) recording coverage into `coverage`, whose shape must
    /// be that of the program sets run.
    pub fn set_coverage(&mut self, coverage: Option<Coverage>) {
        self.coverage = coverage;
    }

    /// The coverage recorded since [`Interpreter::set_coverage`].
    pub fn coverage_mut(&mut self) -> Option<&mut Coverage> {
        self.coverage.as_mut()
    }

    pub fn options(&self) -> &Options {
        &self.options
    }

    /// How many instructions the last run executed (never more than the budget).
    pub fn executed(&self) -> u64 {
        self.executed
    }

    /// Runs `prog` from insn 0 with r1-r5 = `args` and returns r0 at the entry function's exit.
    ///
    /// Stack frames are added to `mem` for the run and removed again, whatever the outcome.
    pub fn run(
        &mut self,
        prog: &Program,
        args: [u64; 5],
        mem: &mut Memory,
        helpers: &mut dyn Helpers,
    ) -> Result<u64, VmError> {
        self.run_set(std::slice::from_ref(prog), 0, args, mem, helpers)
    }

    /// Runs program `entry` of `progs` like [`Interpreter::run`]; tail calls and callbacks may
    /// continue in any program of the set. Prepares the programs for this run only: to run
    /// them often, prepare them once and use [`Interpreter::run_prepared`].
    ///
    /// # Panics
    /// When `entry` is not an index into `progs`.
    pub fn run_set(
        &mut self,
        progs: &[Program],
        entry: usize,
        args: [u64; 5],
        mem: &mut Memory,
        helpers: &mut dyn Helpers,
    ) -> Result<u64, VmError> {
        let prepared: Vec<PreparedProgram> =
            progs.iter().cloned().map(PreparedProgram::new).collect();
        self.run_prepared(&prepared, entry, args, mem, helpers)
    }

    /// [`Interpreter::run_set`] over programs prepared once.
    ///
    /// # Panics
    /// When `entry` is not an index into `progs`.
    pub fn run_prepared(
        &mut self,
        progs: &[PreparedProgram],
        entry: usize,
        args: [u64; 5],
        mem: &mut Memory,
        helpers: &mut dyn Helpers,
    ) -> Result<u64, VmError> {
        // The machine borrows the frame vectors rather than taking them: a vector moved in and
        // out whole is copied with wide loads over the narrow stores that just set its length
        // (a store-forwarding stall each way, on every run).
        let Interpreter {
            options,
            frames,
            saved_regs,
            executed,
            coverage,
            taint,
            keep_frames,
            kept_entry,
        } = self;
        frames.clear();
        saved_regs.clear();
        // A set that never names r10 runs without an entry frame (see `names_r10`).
        let frameless = !progs.iter().any(|p| p.names_r10);
        let keep = *keep_frames && coverage.is_none() && taint.is_none() && !frameless;
        // The entry frame the last run left live, cleaned in place where that run wrote (the
        // memory saw every write): what parking it and bringing it back would leave.
        let entry_frame = match kept_entry.take() {
            Some((stack, top)) if keep && mem.clean_stack_frame_at(0, stack, STACK_SIZE) => {
                Some((stack, top))
            }
            Some((stack, _)) => {
                mem.remove_stack_frame_at(0, stack);
                None
            }
            None => None,
        };
        if let Some(taint) = taint.as_mut() {
            taint.begin_run(mem);
        }
        let mut machine = Machine {
            progs,
            cur: entry,
            prog: progs[entry].program(),
            mem,
            helpers,
            options: *options,
            frames,
            saved_regs,
            loops: Vec::new(),
            regs: [0; REG_SLOTS],
            pc: 0,
            executed: 0,
            coverage: coverage.as_mut(),
            taint: taint.as_mut(),
        };
        let entry_top = machine.start(args, frameless, entry_frame);
        // The error comes back boxed (the result fits two registers), and is unboxed only
        // once the machine is cleaned up: a whole `Result<u64, VmError>` kept across the
        // cleanup was copied into the caller's slot with wide loads over the loop's narrow
        // stores (a store-forwarding stall on every run).
        let result = machine.run_loop();
        if let Some(coverage) = machine.coverage.as_deref_mut() {
            coverage.errors_mut().run_ended();
        }
        for (depth, frame) in machine.frames.iter().enumerate() {
            let Some(stack) = frame.stack else {
                continue;
            };
            if depth == 0 && keep {
                *kept_entry = Some((stack, entry_top));
            } else {
                machine.mem.remove_stack_frame_at(depth, stack);
            }
        }
        machine.frames.clear();
        *executed = machine.executed;
        result.map_err(|e| *e)
    }
}

/// The state of one run.
struct Machine<'a> {
    progs: &'a [PreparedProgram],
    /// Index in `progs` of the running program, `prog`.
    cur: usize,
    prog: &'a Program,
    mem: &'a mut Memory,
    helpers: &'a mut dyn Helpers,
    options: Options,
    frames: &'a mut Vec<Frame>,
    /// The caller registers of `frames[1..]`, in order.
    saved_regs: &'a mut Vec<[u64; REG_SLOTS]>,
    loops: Vec<PendingLoop>,
    regs: [u64; REG_SLOTS],
    pc: usize,
    executed: u64,
    coverage: Option<&'a mut Coverage>,
    taint: Option<&'a mut TaintState>,
}

/// What an instruction leaves to the loop.
enum Step {
    Continue,
    Done(u64),
}

/// Why the fast loop stopped, at which slot.
enum Leave {
    /// The entry function exited with this r0.
    Done(u64),
    /// The instruction at the slot is the general path's (already counted).
    General(usize),
    /// What is left of the budget does not cover the run at the slot: its instructions go
    /// through the general path, counted one by one.
    Counted(usize),
    /// The memory access at the slot faulted.
    Fault(usize, Box<MemFault>),
}

/// The `match` of the fast loop over `$code`: arms for the specialised ALU and jump codes
/// (run with the reference semantics of [`alu`], the operation a constant), then `$other`.
/// A jump's outcome goes to the loop's `take_jump!`.
macro_rules! match_code {
    (
        ($code:expr, $op:ident, $regs:ident, $d:ident, $s:ident, $pc:ident, { $($other:tt)* })
        alu { $($alu:ident => $ai64:ident $ar64:ident $ai32:ident $ar32:ident;
            $mi64:ident $mr64:ident $mi32:ident $mr32:ident,)* }
        jump { $($cond:ident => $ji64:ident $jr64:ident $ji32:ident $jr32:ident;
            $aji64:ident $ajr64:ident,)* }
    ) => {
        match $code {
            $(
                Code::$ai64 => $regs[$d] = alu::alu64(AluOp::$alu, $regs[$d], $op.imm64()),
                Code::$ar64 => $regs[$d] = alu::alu64(AluOp::$alu, $regs[$d], $regs[$s]),
                Code::$ai32 => {
                    $regs[$d] = alu::alu32(AluOp::$alu, $regs[$d] as u32, $op.imm32()) as u64
                }
                Code::$ar32 => {
                    $regs[$d] =
                        alu::alu32(AluOp::$alu, $regs[$d] as u32, $regs[$s] as u32) as u64
                }
                // A fused move and operation: both, in order (the operation may read its
                // destination through `src2`), and past the second slot.
                Code::$mi64 => {
                    $regs[$d] = alu::alu64(AluOp::Mov, $regs[$d], $regs[$s]);
                    $regs[$d] = alu::alu64(AluOp::$alu, $regs[$d], $op.imm64());
                    $pc += 1;
                }
                Code::$mr64 => {
                    $regs[$d] = alu::alu64(AluOp::Mov, $regs[$d], $regs[$s]);
                    let src2 = $regs[$op.src2.index()];
                    $regs[$d] = alu::alu64(AluOp::$alu, $regs[$d], src2);
                    $pc += 1;
                }
                Code::$mi32 => {
                    $regs[$d] = alu::alu32(AluOp::Mov, $regs[$d] as u32, $regs[$s] as u32) as u64;
                    $regs[$d] = alu::alu32(AluOp::$alu, $regs[$d] as u32, $op.imm32()) as u64;
                    $pc += 1;
                }
                Code::$mr32 => {
                    $regs[$d] = alu::alu32(AluOp::Mov, $regs[$d] as u32, $regs[$s] as u32) as u64;
                    let src2 = $regs[$op.src2.index()] as u32;
                    $regs[$d] = alu::alu32(AluOp::$alu, $regs[$d] as u32, src2) as u64;
                    $pc += 1;
                }
            )*
            $(
                Code::$ji64 => {
                    let taken = alu::cond64(JmpCond::$cond, $regs[$d], $op.imm64());
                    take_jump!(taken);
                }
                Code::$jr64 => {
                    let taken = alu::cond64(JmpCond::$cond, $regs[$d], $regs[$s]);
                    take_jump!(taken);
                }
                Code::$ji32 => {
                    let taken = alu::cond32(JmpCond::$cond, $regs[$d] as u32, $op.imm32());
                    take_jump!(taken);
                }
                Code::$jr32 => {
                    let taken =
                        alu::cond32(JmpCond::$cond, $regs[$d] as u32, $regs[$s] as u32);
                    take_jump!(taken);
                }
                // A fused add and jump: the add, then the jump from its own slot.
                Code::$aji64 => {
                    $regs[$d] = alu::alu64(AluOp::Add, $regs[$d], $op.imm64());
                    $pc += 1;
                    let taken = alu::cond64(JmpCond::$cond, $regs[$d], $op.off as i64 as u64);
                    take_jump!(taken);
                }
                Code::$ajr64 => {
                    $regs[$d] = alu::alu64(AluOp::Add, $regs[$d], $op.imm64());
                    $pc += 1;
                    let taken = alu::cond64(JmpCond::$cond, $regs[$d], $regs[$s]);
                    take_jump!(taken);
                }
            )*
            $($other)*
        }
    };
}

impl Machine<'_> {
    /// Sets r1-r5 and enters the entry function: in `frame` (a live entry frame, its id and
    /// top), without one when `frameless`, or in a new one; gives the entry frame's top.
    fn start(&mut self, args: [u64; 5], frameless: bool, frame: Option<(RegionId, u64)>) -> u64 {
        self.regs[1..6].copy_from_slice(&args);
        match frame {
            Some((stack, top)) => self.enter_frame(Some(stack), top, 0, 0),
            None if frameless => self.enter_frame(None, 0, 0, 0),
            None => self.push_frame(0, 0),
        }
        self.regs[10]
    }

    /// Inlined into [`Interpreter::run_prepared`], so that the machine is a local there whose
    /// fields (memory, programs, frames) live in registers rather than behind `self`.
    #[inline(always)]
    fn run_loop(&mut self) -> Result<u64, Box<VmError>> {
        let budget = self.options.insn_budget;
        // A local counter, so that the hot loop keeps it in a register.
        let mut executed = 0u64;
        let result = loop {
            // Coverage marks every instruction: the general path does; the fast one does not.
            let step = if self.coverage.is_some() || self.taint.is_some() {
                self.run_general(&mut executed, budget)
            } else {
                // (Re)entered whenever the general path may have changed program or pc.
                self.run_fast(&mut executed, budget)
            };
            match step {
                Ok(None) => {}
                Ok(Some(r0)) => break Ok(r0),
                Err(e) => break Err(Box::new(e)),
            }
        };
        self.executed = executed;
        result
    }

    /// Runs one instruction through the general path, marking coverage.
    fn run_general(&mut self, executed: &mut u64, budget: u64) -> Result<Option<u64>, VmError> {
        let insn = self.fetch()?;
        if *executed == budget {
            return Err(VmError::BudgetExceeded {
                pc: self.pc,
                budget,
            });
        }
        *executed += 1;
        if let Some(coverage) = self.coverage.as_deref_mut() {
            coverage.mark(self.cur, self.pc, RAN);
            coverage.errors_mut().before(&insn);
        }
        if self.taint.is_some() {
            self.taint_before(&insn);
        }
        Ok(match self.step(insn)? {
            Step::Continue => None,
            Step::Done(r0) => Some(r0),
        })
    }

    /// Runs the pre-decoded ops of the current program until an instruction needs the
    /// general path, which runs it here too: `Some(r0)` when the entry function exited,
    /// `None` to go on (maybe in another program).
    ///
    /// The budget is charged a run at a time (see [`PreparedProgram`]): on entering a run the
    /// whole of it is charged, and a run that stops early (a memory fault) gives back what it
    /// did not execute, so `executed` is exact whenever the loop stops. A run longer than
    /// what is left of the budget goes through the general path one instruction at a time,
    /// which stops at the exact instruction that exceeds it.
    #[inline(always)]
    fn run_fast(&mut self, executed: &mut u64, budget: u64) -> Result<Option<u64>, VmError> {
        // Signed, so that a jump's charge is one addition and a sign test; a budget beyond
        // i64::MAX instructions is as good as unlimited.
        let start = i64::try_from(budget - *executed).unwrap_or(i64::MAX);
        let mut fuel = start;
        let leave = self.run_ops(&mut fuel);
        *executed += (start - fuel) as u64;
        match leave {
            Leave::Done(r0) => Ok(Some(r0)),
            Leave::General(pc) => {
                self.pc = pc;
                let insn = self.fetch()?;
                match self.step(insn)? {
                    Step::Continue => Ok(None),
                    Step::Done(r0) => Ok(Some(r0)),
                }
            }
            Leave::Counted(pc) => {
                self.pc = pc;
                self.run_general(executed, budget)
            }
            Leave::Fault(pc, fault) => Err(VmError::Memory { pc, fault }),
        }
    }

    /// The fast loop itself; see [`Machine::run_fast`]. `fuel` is what is left of the budget.
    #[inline(always)]
    fn run_ops(&mut self, fuel: &mut i64) -> Leave {
        let progs = self.progs;
        let prepared = &progs[self.cur];
        let (ops, runs, hints) = (&prepared.ops[..], &prepared.runs[..], &prepared.hints[..]);
        let taken_cost = &prepared.taken_cost[..];
        let mut pc = self.pc;
        let run = runs[pc] as i64;
        if run > *fuel {
            return Leave::Counted(pc);
        }
        *fuel -= run;
        loop {
            let op: Op = ops[pc];
            let (d, s) = (op.dst.index(), op.src.index());
            let regs = &mut self.regs;
            // A faulting access gives back the rest of its run, which did not execute.
            macro_rules! faulted {
                ($fault:expr) => {{
                    *fuel += runs[pc] as i64 - 1;
                    return Leave::Fault(pc, Box::new($fault));
                }};
            }
            macro_rules! load {
                ($n:expr, $extend:expr) => {
                    match self.mem.read_hinted(
                        regs[s].wrapping_add(op.off as i64 as u64),
                        $n,
                        &hints[pc],
                    ) {
                        Ok(v) => regs[d] = $extend(v),
                        Err(fault) => faulted!(fault),
                    }
                };
            }
            // A run goes on past a jump not taken; a jump taken gives back the rest of
            // its run and enters the target's, which what is left must cover. (Two
            // different paths keep this a branch, which the processor predicts, rather
            // than a select the next dispatch would wait on.)
            macro_rules! take_jump {
                ($taken:expr) => {
                    if $taken {
                        let target = op.target as usize;
                        let left = *fuel + taken_cost[pc];
                        if left < 0 {
                            *fuel += runs[pc] as i64 - 1;
                            return Leave::Counted(target);
                        }
                        *fuel = left;
                        pc = target;
                        continue;
                    }
                };
            }
            macro_rules! store {
                ($n:expr, $value:expr) => {
                    let addr = regs[d].wrapping_add(op.off as i64 as u64);
                    if let Err(fault) = self.mem.write_hinted(addr, $n, $value, &hints[pc]) {
                        faulted!(fault);
                    }
                };
            }
            with_specialised_codes!(match_code!(op.code, op, regs, d, s, pc, {
                Code::LdImm64 => {
                    regs[d] = op.wide_imm();
                    // Past the second slot with the `pc += 1` below: one shared step
                    // for every op keeps the loop's tail a single add.
                    pc += 1;
                }
                Code::LdxB => load!(1, |v| v),
                Code::LdxH => load!(2, |v| v),
                Code::LdxW => load!(4, |v| v),
                Code::LdxDw => load!(8, |v| v),
                Code::LdxSB => load!(1, |v| alu::sign_extend(v, 8)),
                Code::LdxSH => load!(2, |v| alu::sign_extend(v, 16)),
                Code::LdxSW => load!(4, |v| alu::sign_extend(v, 32)),
                Code::StB => { store!(1, op.imm64()); }
                Code::StH => { store!(2, op.imm64()); }
                Code::StW => { store!(4, op.imm64()); }
                Code::StDw => { store!(8, op.imm64()); }
                Code::StxB => { store!(1, regs[s]); }
                Code::StxH => { store!(2, regs[s]); }
                Code::StxW => { store!(4, regs[s]); }
                Code::StxDw => { store!(8, regs[s]); }
                Code::Neg64 => regs[d] = regs[d].wrapping_neg(),
                Code::Neg32 => regs[d] = (regs[d] as u32).wrapping_neg() as u64,
                Code::MovSx64 => regs[d] = alu::sign_extend(regs[s], op.imm as u8),
                Code::MovSx32 => {
                    regs[d] = alu::sign_extend(regs[s], op.imm as u8) as u32 as u64
                }
                Code::Be16 => regs[d] = alu::endian(ByteOrder::ToBe, 16, regs[d]),
                Code::Be32 => regs[d] = alu::endian(ByteOrder::ToBe, 32, regs[d]),
                Code::Be64 => regs[d] = alu::endian(ByteOrder::ToBe, 64, regs[d]),
                Code::Le16 => regs[d] = alu::endian(ByteOrder::ToLe, 16, regs[d]),
                Code::Le32 => regs[d] = alu::endian(ByteOrder::ToLe, 32, regs[d]),
                Code::Le64 => regs[d] = alu::endian(ByteOrder::ToLe, 64, regs[d]),
                Code::Ja => take_jump!(true),
                // Fused pairs of a byte-wise field: both, in order, past the second slot. A
                // faulting load is the fused op's own slot, and the shift did not run.
                Code::LdxBLsh32Imm => {
                    load!(1, |v| v);
                    regs[d] = alu::alu32(AluOp::Lsh, regs[d] as u32, op.imm32()) as u64;
                    pc += 1;
                }
                Code::LdxBLsh64Imm => {
                    load!(1, |v| v);
                    regs[d] = alu::alu64(AluOp::Lsh, regs[d], op.imm64());
                    pc += 1;
                }
                Code::Lsh32ImmOr32Reg => {
                    regs[d] = alu::alu32(AluOp::Lsh, regs[d] as u32, op.imm32()) as u64;
                    let src2 = regs[op.src2.index()] as u32;
                    regs[d] = alu::alu32(AluOp::Or, regs[d] as u32, src2) as u64;
                    pc += 1;
                }
                Code::Lsh64ImmOr64Reg => {
                    regs[d] = alu::alu64(AluOp::Lsh, regs[d], op.imm64());
                    let src2 = regs[op.src2.index()];
                    regs[d] = alu::alu64(AluOp::Or, regs[d], src2);
                    pc += 1;
                }
                // The entry function's exit ends the run without the general path.
                Code::Exit if self.frames.len() == 1 => {
                    self.pc = pc;
                    return Leave::Done(self.regs[0]);
                }
                Code::Exit | Code::General | Code::End => return Leave::General(pc),
            }));
            pc += 1;
        }
    }

    /// The instruction at `pc`. Jumps are validated when taken, so the only way to reach a
    /// slot without an instruction is to fall through past the last one.
    fn fetch(&self) -> Result<Insn, VmError> {
        self.prog
            .insn(self.pc)
            .copied()
            .ok_or_else(|| VmError::FellOffEnd {
                pc: self.prog.len().saturating_sub(1),
            })
    }

    fn step(&mut self, insn: Insn) -> Result<Step, VmError> {
        match insn {
            Insn::Alu {
                width,
                op,
                dst,
                src,
            } => {
                let value = match width {
                    Width::W64 => alu::alu64(op, self.reg(dst), self.operand64(src)),
                    Width::W32 => alu::alu32(op, self.reg(dst) as u32, self.operand32(src)) as u64,
                };
                self.set_next(dst, value);
            }
            Insn::Neg { width, dst } => {
                let value = match width {
                    Width::W64 => self.reg(dst).wrapping_neg(),
                    Width::W32 => (self.reg(dst) as u32).wrapping_neg() as u64,
                };
                self.set_next(dst, value);
            }
            Insn::MovSx {
                width,
                dst,
                src,
                bits,
            } => {
                let value = alu::sign_extend(self.reg(src), bits);
                let value = match width {
                    Width::W64 => value,
                    Width::W32 => value as u32 as u64,
                };
                self.set_next(dst, value);
            }
            Insn::AddrSpaceCast { dst, src, imm } => self.addr_space_cast(dst, src, imm)?,
            Insn::Endian { order, bits, dst } => {
                self.set_next(dst, alu::endian(order, bits, self.reg(dst)));
            }
            Insn::LdImm64 {
                dst,
                kind,
                imm,
                next_imm,
            } => self.ld_imm64(dst, kind, imm, next_imm)?,
            Insn::LdAbs { size, imm } => return self.legacy_load(size, imm as u64),
            Insn::LdInd { size, src, imm } => {
                let offset = self.reg(src).wrapping_add(imm as i64 as u64);
                return self.legacy_load(size, offset);
            }
            Insn::Load {
                size,
                sign_extend,
                dst,
                src,
                off,
            } => self.load(size, sign_extend, dst, src, off)?,
            Insn::Store {
                size,
                dst,
                off,
                imm,
            } => self.store(size, dst, off, imm as i64 as u64)?,
            Insn::StoreReg {
                size,
                dst,
                src,
                off,
            } => self.store(size, dst, off, self.reg(src))?,
            Insn::Atomic {
                size,
                op,
                dst,
                src,
                off,
            } => self.atomic(size, op, dst, src, off)?,
            Insn::Ja { off, .. } => self.pc = self.jump_target(off as i64)?,
            Insn::Jump {
                width,
                cond,
                dst,
                src,
                off,
            } => self.cond_jump(width, cond, dst, src, off)?,
            Insn::MayGoto { off } => self.may_goto(off)?,
            Insn::Call(target) => self.call(target)?,
            Insn::Exit => return self.exit(),
        }
        Ok(Step::Continue)
    }

    fn reg(&self, reg: Reg) -> u64 {
        self.regs[reg.index()]
    }

    /// Writes `dst` and moves to the next slot.
    fn set_next(&mut self, dst: Reg, value: u64) {
        self.regs[dst.index()] = value;
        self.pc += 1;
    }

    /// A 64-bit operand: immediates are sign-extended, as the kernel's `(s64) IMM` does.
    fn operand64(&self, src: Source) -> u64 {
        match src {
            Source::Reg(r) => self.reg(r),
            Source::Imm(imm) => imm as i64 as u64,
        }
    }

    fn operand32(&self, src: Source) -> u32 {
        match src {
            Source::Reg(r) => self.reg(r) as u32,
            Source::Imm(imm) => imm as u32,
        }
    }

    fn fault(&self, fault: MemFault) -> VmError {
        VmError::Memory {
            pc: self.pc,
            fault: Box::new(fault),
        }
    }

    /// `addr_space_cast`: a cast out of the arena (imm 1) is a 32-bit move, which is what
    /// `do_misc_fixups` turns it into; a cast into the arena needs an arena.
    fn addr_space_cast(&mut self, dst: Reg, src: Reg, imm: i32) -> Result<(), VmError> {
        if imm != 1 {
            return Err(VmError::Unsupported {
                pc: self.pc,
                what: Unsupported::ArenaCast,
            });
        }
        self.set_next(dst, self.reg(src) as u32 as u64);
        Ok(())
    }

    fn ld_imm64(
        &mut self,
        dst: Reg,
        kind: LdImm64Kind,
        imm: i32,
        next_imm: i32,
    ) -> Result<(), VmError> {
        if kind != LdImm64Kind::Imm {
            return Err(VmError::Unsupported {
                pc: self.pc,
                what: Unsupported::PseudoLdImm64(kind),
            });
        }
        self.regs[dst.index()] = Insn::imm64(imm, next_imm);
        self.pc += 2;
        Ok(())
    }

    /// LD_ABS / LD_IND as the kernel runs them after `bpf_gen_ld_abs` (net/core/filter.c):
    /// the offset is passed to the load helper as an `int`, the value is read in network byte
    /// order, and a load outside the packet (or at a negative offset) sets r0 = 0 and exits the
    /// current function. r1-r5 are left as they are.
    fn legacy_load(&mut self, size: Size, offset: u64) -> Result<Step, VmError> {
        let packet = self
            .mem
            .packet()
            .ok_or(VmError::NoPacket { pc: self.pc })?
            .bytes();
        let n = size.bytes();
        let value = usize::try_from(offset as i32)
            .ok()
            .and_then(|start| packet.get(start..start.checked_add(n)?))
            .map(|bytes| bytes.iter().fold(0u64, |acc, &b| (acc << 8) | b as u64));
        match value {
            Some(value) => {
                self.set_next(Reg::R0, value);
                Ok(Step::Continue)
            }
            None => {
                self.regs[0] = 0;
                self.exit()
            }
        }
    }

    fn load(
        &mut self,
        size: Size,
        sign_extend: bool,
        dst: Reg,
        src: Reg,
        off: i16,
    ) -> Result<(), VmError> {
        let addr = self.reg(src).wrapping_add(off as i64 as u64);
        let n = size.bytes();
        let value = self.mem.read(addr, n).map_err(|f| self.fault(f))?;
        let value = if sign_extend {
            alu::sign_extend(value, (n * 8) as u8)
        } else {
            value
        };
        self.set_next(dst, value);
        Ok(())
    }

    fn store(&mut self, size: Size, dst: Reg, off: i16, value: u64) -> Result<(), VmError> {
        let addr = self.reg(dst).wrapping_add(off as i64 as u64);
        self.mem
            .write(addr, size.bytes(), value)
            .map_err(|f| self.fault(f))?;
        self.pc += 1;
        Ok(())
    }

    /// Atomic operations. Read-modify-write forms need a writable region even when they end up
    /// not writing (a failed cmpxchg), as the hardware instruction does.
    fn atomic(
        &mut self,
        size: Size,
        op: AtomicOp,
        dst: Reg,
        src: Reg,
        off: i16,
    ) -> Result<(), VmError> {
        let n = size.bytes();
        match op {
            AtomicOp::LoadAcquire => return self.load(size, false, dst, src, off),
            AtomicOp::StoreRelease => return self.store(size, dst, off, self.reg(src)),
            _ => {}
        }
        let addr = self.reg(dst).wrapping_add(off as i64 as u64);
        let (pc, operand, expected) = (self.pc, self.reg(src), self.regs[0]);
        let slot = self
            .mem
            .slice_mut(addr, n)
            .map_err(|fault| VmError::Memory {
                pc,
                fault: Box::new(fault),
            })?;
        let old = atomic::update(slot, op, operand, expected);
        // The fetched value is the old memory word, zero-extended for 32-bit forms.
        if let Some(to) = atomic::old_value_to(op, src) {
            self.regs[to.index()] = old;
        }
        self.pc += 1;
        Ok(())
    }

    /// The pc that `off` reaches from the current instruction, checked to hold an instruction.
    fn jump_target(&self, off: i64) -> Result<usize, VmError> {
        let target = self.pc as i64 + 1 + off;
        let len = self.prog.len();
        let index =
            usize::try_from(target)
                .ok()
                .filter(|&t| t < len)
                .ok_or(VmError::JumpOutOfProgram {
                    pc: self.pc,
                    target,
                    len,
                })?;
        match self.prog.insn(index) {
            Some(_) => Ok(index),
            None => Err(VmError::JumpIntoLdImm64 {
                pc: self.pc,
                target: index,
            }),
        }
    }

    fn cond_jump(
        &mut self,
        width: Width,
        cond: JmpCond,
        dst: Reg,
        src: Source,
        off: i16,
    ) -> Result<(), VmError> {
        let taken = match width {
            Width::W64 => alu::cond64(cond, self.reg(dst), self.operand64(src)),
            Width::W32 => alu::cond32(cond, self.reg(dst) as u32, self.operand32(src)),
        };
        self.mark_branch(taken);
        self.pc = if taken {
            self.jump_target(off as i64)?
        } else {
            self.pc + 1
        };
        Ok(())
    }

    fn mark_branch(&mut self, taken: bool) {
        if let Some(coverage) = self.coverage.as_deref_mut() {
            coverage.mark(self.cur, self.pc, if taken { TAKEN } else { FELL_THROUGH });
        }
    }

    /// `may_goto` with the count semantics of `do_misc_fixups` (one counter per frame, set at
    /// frame entry; falls through while it is non-zero, decrementing it, then always jumps).
    /// On x86-64 Linux 6.18 replaces the count with a 250 ms time slice
    /// (`bpf_check_timed_may_goto`); a time limit would make runs irreproducible, so we keep
    /// the deterministic count.
    fn may_goto(&mut self, off: i16) -> Result<(), VmError> {
        let frame = self
            .frames
            .last_mut()
            .expect("a frame is active while running");
        let taken = frame.may_goto_left == 0;
        self.mark_branch(taken);
        let frame = self
            .frames
            .last_mut()
            .expect("a frame is active while running");
        if taken {
            self.pc = self.jump_target(off as i64)?;
        } else {
            frame.may_goto_left -= 1;
            self.pc += 1;
        }
        Ok(())
    }

    fn call(&mut self, target: CallTarget) -> Result<(), VmError> {
        match target {
            CallTarget::Helper(id) => self.call_helper(id),
            CallTarget::Local(rel) => self.call_local(rel),
            CallTarget::Kfunc { btf_id, off } => self.call_kfunc(btf_id, off),
        }
    }

    /// A kfunc call: through the environment, like a helper's; r1-r5 are left as they are.
    fn call_kfunc(&mut self, btf_id: i32, off: i16) -> Result<(), VmError> {
        let mut args = [0u64; 5];
        args.copy_from_slice(&self.regs[1..6]);
        let pc = self.pc;
        let pending = self
            .taint
            .is_some()
            .then(|| self.taint_before_kfunc(btf_id, off, args));
        let r0 = match self.helpers.call_kfunc(btf_id, off, args, self.mem) {
            Ok(r0) => r0,
            Err(e) => return Err(kfunc_error(pc, btf_id, off, &*self.helpers, e)),
        };
        if let Some(pending) = pending {
            self.taint_after_helper(pending, &HelperOutcome::Return(r0));
        }
        self.set_next(Reg::R0, r0);
        Ok(())
    }

    fn call_helper(&mut self, id: i32) -> Result<(), VmError> {
        let mut args = [0u64; 5];
        args.copy_from_slice(&self.regs[1..6]);
        let pc = self.pc;
        let pending = self
            .taint
            .is_some()
            .then(|| self.taint_before_helper(id, args));
        let outcome = self
            .helpers
            .call_outcome(id, args, self.mem)
            .map_err(|e| helper_error(pc, id, e))?;
        if let Some(pending) = pending {
            self.taint_after_helper(pending, &outcome);
        }
        match outcome {
            HelperOutcome::Return(r0) => {
                if let Some(coverage) = self.coverage.as_deref_mut() {
                    coverage.errors_mut().helper_returned(self.cur, pc, id, r0);
                }
                self.set_next(Reg::R0, r0)
            }
            HelperOutcome::TailCall(prog) => self.tail_call(id, prog)?,
            HelperOutcome::Callbacks(driver) => {
                self.loops.push(PendingLoop {
                    driver,
                    helper: id,
                    call_pc: pc,
                    call_prog: self.cur,
                });
                self.advance_loop(None)?;
            }
        }
        Ok(())
    }

    /// Continues the function at the first instruction of program `prog`: the kernel's tail
    /// call keeps the registers and the stack frame (the verifier has made sure the target
    /// reads neither before writing), and the frame's exit returns where it would have.
    fn tail_call(&mut self, id: i32, prog: usize) -> Result<(), VmError> {
        let target = self
            .progs
            .get(prog)
            .map(PreparedProgram::program)
            .ok_or_else(|| {
                helper_error(
                    self.pc,
                    id,
                    HelperError::Failed(format!(
                        "tail call to program {prog}, which is not loaded"
                    )),
                )
            })?;
        self.cur = prog;
        self.prog = target;
        self.pc = 0;
        Ok(())
    }

    /// Asks the innermost callback loop what next (`last`: the r0 of the callback that just
    /// returned) and either enters the callback or finishes the helper call.
    fn advance_loop(&mut self, last: Option<u64>) -> Result<(), VmError> {
        let pending = self.loops.last_mut().expect("a loop is active");
        let (pc, id) = (pending.call_pc, pending.helper);
        let step = pending
            .driver
            .next(last, self.mem)
            .map_err(|e| helper_error(pc, id, e))?;
        match step {
            CallbackStep::Call { target, args } => self.enter_callback(target, args),
            CallbackStep::Done(r0) => {
                let done = self.loops.pop().expect("checked above");
                self.switch_to(done.call_prog);
                self.pc = done.call_pc;
                self.set_next(Reg::R0, r0);
                if let Some(taint) = self.taint.as_deref_mut() {
                    taint.set_reg(0, None);
                }
                Ok(())
            }
        }
    }

    /// Calls the callback at code address `target` in a fresh frame, as the kernel calls a
    /// callback: r1-r5 = `args`, the other registers of the caller kept for its return.
    fn enter_callback(&mut self, target: u64, args: [u64; 5]) -> Result<(), VmError> {
        let pending = self.loops.last().expect("a loop is active");
        let (pc, id, call_prog) = (pending.call_pc, pending.helper, pending.call_prog);
        let (prog, entry) = decode_code_addr(target)
            .filter(|&(p, e)| {
                self.progs
                    .get(p)
                    .is_some_and(|p| p.program().insn(e).is_some())
            })
            .ok_or_else(|| {
                helper_error(
                    pc,
                    id,
                    HelperError::Failed(format!("callback {target:#x} is not a function")),
                )
            })?;
        if self.frames.len() == MAX_CALL_FRAMES {
            return Err(VmError::CallDepthExceeded { pc, target: entry });
        }
        self.saved_regs.push(self.regs);
        self.push_frame(pc, entry);
        if let Some(coverage) = self.coverage.as_deref_mut() {
            coverage.errors_mut().frame_entered();
        }
        let frame = self.frames.last_mut().expect("just pushed");
        frame.callback = true;
        frame.return_prog = call_prog;
        self.switch_to(prog);
        self.regs = [0; REG_SLOTS];
        self.regs[1..6].copy_from_slice(&args);
        if let Some(taint) = self.taint.as_deref_mut() {
            taint.push_call();
            taint.enter([None; 5]);
        }
        self.regs[10] = frame_stack(self.frames)
            .and_then(|stack| self.mem.region(stack))
            .expect("a callback's frame is pushed for it and live")
            .end();
        Ok(())
    }

    fn switch_to(&mut self, prog: usize) {
        self.cur = prog;
        self.prog = self.progs[prog].program();
    }

    /// A bpf-to-bpf call: the callee gets r1-r5, a fresh zeroed stack frame with r10 at its
    /// top, and zero in r0 and r6-r9. Like core.c, which runs a callee with its own register
    /// array, every caller register except r0 is as before when the callee returns.
    fn call_local(&mut self, rel: i32) -> Result<(), VmError> {
        let target = self.jump_target(rel as i64)?;
        if self.frames.len() == MAX_CALL_FRAMES {
            return Err(VmError::CallDepthExceeded {
                pc: self.pc,
                target,
            });
        }
        self.saved_regs.push(self.regs);
        self.push_frame(self.pc + 1, target);
        self.regs[0] = 0;
        self.regs[6..10].fill(0);
        if let Some(taint) = self.taint.as_deref_mut() {
            let args = std::array::from_fn(|i| taint.reg(i + 1));
            taint.push_call();
            taint.enter(args);
        }
        Ok(())
    }

    /// Adds a frame whose stack becomes r10, and continues at `entry`.
    fn push_frame(&mut self, return_pc: usize, entry: usize) {
        let depth = self.frames.len();
        let (stack, top) = self.mem.push_stack_frame(depth);
        self.enter_frame(Some(stack), top, return_pc, entry);
    }

    /// Adds a frame over the live stack region `stack` (whose top is `top`; none for a
    /// frameless entry), and continues at `entry`.
    #[inline]
    fn enter_frame(&mut self, stack: Option<RegionId>, top: u64, return_pc: usize, entry: usize) {
        self.frames.push(Frame {
            stack,
            may_goto_left: self.options.may_goto_loops,
            return_pc,
            return_prog: self.cur,
            callback: false,
        });
        self.regs[10] = top;
        self.pc = entry;
    }

    /// Returns from the current function; `Done` when it is the entry function. A callback's
    /// return goes back to its loop.
    fn exit(&mut self) -> Result<Step, VmError> {
        if self.frames.len() == 1 {
            return Ok(Step::Done(self.regs[0]));
        }
        let frame = self.frames.pop().expect("checked above");
        if let Some(stack) = frame.stack {
            self.mem.remove_stack_frame_at(self.frames.len(), stack);
        }
        // A callback's result steers its loop: a tainted one taints control.
        if frame.callback {
            let r0 = self.taint.as_deref().and_then(|t| t.reg(0));
            self.taint_control(r0);
        }
        if let Some(taint) = self.taint.as_deref_mut() {
            taint.pop_call(!frame.callback);
        }
        let r0 = self.regs[0];
        self.regs = self.saved_regs.pop().expect("a callee's caller registers");
        self.switch_to(frame.return_prog);
        if frame.callback {
            self.advance_loop(Some(r0))?;
            return Ok(Step::Continue);
        }
        self.regs[0] = r0;
        self.pc = frame.return_pc;
        Ok(Step::Continue)
    }
}

fn frame_stack(frames: &[Frame]) -> Option<RegionId> {
    frames.last().expect("a frame is active").stack
}

fn helper_error(pc: usize, id: i32, e: HelperError) -> VmError {
    match e {
        HelperError::Unknown(_) => VmError::UnknownHelper { pc, id },
        source => VmError::Helper { pc, id, source },
    }
}
