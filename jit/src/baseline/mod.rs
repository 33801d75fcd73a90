//! The baseline tier: programs compiled straight to x86-64 machine code, one template per
//! eBPF instruction, as the kernel's own JIT does. Trusted code reaches memory directly;
//! checked code validates every access (`checked.rs`) and gets a frame per call from the
//! runtime ([`FrameMode::PerCall`](crate::plan::FrameMode::PerCall)), as Cranelift's checked
//! code does. It compiles much faster than Cranelift (no IR, no register allocation, no
//! optimiser) into code that runs over the same runtime ([`crate::runtime`]) with the same
//! contract: the same [`JitFn`] signature, run context, statuses, entry points and exact
//! budget.
//!
//! One file per concern:
//! - this file: the driver (functions, blocks, the budget count, prologue and epilogue, the
//!   cold stubs);
//! - [`x86`]: the instruction encoder;
//! - `alu.rs`: arithmetic, moves, sign extension, byte swaps, division;
//! - `jumps.rs`: conditional and unconditional jumps, `may_goto`;
//! - `memory.rs`: trusted loads, stores (the ctx test of 4-byte loads) and atomics;
//! - `checked.rs`: checked loads, stores and atomics: the inline region tests and the cold
//!   stubs that call the runtime's checks;
//! - `calls.rs`: helpers (inlined ones, tail calls), kfuncs, bpf-to-bpf calls, legacy packet
//!   loads, exits.
//!
//! What to compile comes from the shared [`crate::plan`] (the functions, their blocks, the
//! inlined helpers, the frames), never from the Cranelift tier.
//!
//! ## Registers
//!
//! eBPF registers live in host registers the whole time (the kernel's mapping): r0 `rax`,
//! r1 `rdi`, r2 `rsi`, r3 `rdx`, r4 `rcx`, r5 `r8`, r6 `rbx`, r7 `r13`, r8 `r14`, r9 `r15`,
//! r10 `rbp`. `r12` holds the run context, `r9` the executed count (stored into the context
//! before every call out and loaded back after), `r10` and `r11` are scratch. r0-r5 are
//! caller-saved: code that calls the runtime keeps them in the frame's save area.
//!
//! ## Frame
//!
//! `[rsp, rsp + 104)`: the register array of calls this function makes (13 slots); then the
//! register array it was called with, the frame top, the `may_goto` count and the save area
//! of r0-r5.

mod alu;
mod calls;
mod checked;
mod jumps;
mod memory;
pub mod x86;

use crate::code_memory::CodeMemory;
use crate::ctx_loads;
use crate::plan::{
    ArrayLookup, Cfg, FramePlan, KnownArgs, Mode, SetPlan, find_entries, successors,
};
use crate::runtime::{self, Code, Compiled, JitFn, REG_SLOTS, Shared, offsets};
use bpfemu_isa::{Insn, LdImm64Kind, Program, Reg};
use bpfemu_vm::maps::InlineArray;
use bpfemu_vm::{Options, VmError};
use std::collections::HashMap;
use x86::*;

/// The host register of each eBPF register.
pub(crate) const REGS: [R; Reg::COUNT] = [RAX, RDI, RSI, RDX, RCX, R8, RBX, R13, R14, R15, RBP];
/// The run context.
pub(crate) const CTX: R = R12;
/// The executed count.
pub(crate) const COUNT: R = R9;
/// Scratch registers.
pub(crate) const T1: R = R10;
pub(crate) const T2: R = R11;

/// Frame slots (offsets from `rsp`).
pub(crate) const OUT_REGS: i32 = 0;
pub(crate) const IN_REGS: i32 = REG_SLOTS as i32 * 8;
pub(crate) const FRAME_TOP: i32 = IN_REGS + 8;
pub(crate) const MAY_GOTO: i32 = FRAME_TOP + 8;
pub(crate) const SAVE: i32 = MAY_GOTO + 8;
/// The frame's size: after the return address and six pushes, a multiple of 16 keeps calls
/// aligned.
const FRAME_SIZE: i32 = (SAVE + 6 * 8 + 8) / 16 * 16 + 8;
const _: () = assert!((8 + 6 * 8 + FRAME_SIZE) % 16 == 0 && FRAME_SIZE >= SAVE + 48);

/// The callee-saved registers the prologue pushes.
const PUSHED: [R; 6] = [RBP, RBX, R12, R13, R14, R15];

pub(crate) fn host(r: Reg) -> R {
    REGS[r.index()]
}

/// The address of a runtime entry point.
macro_rules! entry {
    ($f:path) => {
        $f as *const () as usize as u64
    };
}
pub(crate) use entry;

/// Compiles `progs` into native code for `mode`; lookups in `arrays` (by map handle) are
/// inlined. `stack_bound` (the verifier's bound on any function's frame, [`SetPlan::new`])
/// counts for trusted code only: nobody verified checked mode's programs.
pub fn compile(
    progs: &[Program],
    mode: Mode,
    options: Options,
    arrays: &[(u64, InlineArray)],
    stack_bound: Option<u32>,
) -> Result<Compiled, VmError> {
    let SetPlan {
        arrays,
        cpu_tables,
        written_from,
        frames,
    } = SetPlan::new(progs, mode, arrays, stack_bound);
    let entries = find_entries(progs);
    let mut a = Asm::new();
    a.buf
        .reserve(progs.iter().map(|p| p.len()).sum::<usize>() * 16 + 256);
    let labels: HashMap<(usize, usize), Label> = entries.iter().map(|&k| (k, a.label())).collect();
    let mut static_errors = Vec::new();
    for &(prog, pc) in &entries {
        a.bind(labels[&(prog, pc)]);
        let f = FnCompiler {
            a: &mut a,
            mode,
            prog: &progs[prog],
            prog_index: prog,
            blocks: Vec::new(),
            epilogue: Label(0),
            cold: Vec::new(),
            static_errors: &mut static_errors,
            entries: &labels,
            arrays: &arrays,
            known: KnownArgs::default(),
            host_word_loads: Vec::new(),
            may_goto_loops: options.may_goto_loops,
            frames,
        };
        f.compile(pc);
    }
    if !a.resolve() {
        return Err(compile_error("a jump to an unbound label"));
    }
    let code = CodeMemory::new(&a.buf).map_err(compile_error)?;
    let mut entries: Vec<_> = labels
        .iter()
        .map(|(&key, &label)| {
            let offset = a.offset_of(label).expect("every entry is bound") as usize;
            // SAFETY: the offset is inside the code, where a function compiled with the
            // JitFn signature starts.
            (key, unsafe {
                std::mem::transmute::<*const u8, JitFn>(code.as_ptr().add(offset))
            })
        })
        .collect();
    entries.sort_unstable_by_key(|(key, _)| *key);
    let shared = Shared {
        programs: progs.to_vec(),
        entries,
        static_errors,
        may_goto_loops: options.may_goto_loops,
        stack_written_from: written_from,
        cpu_tables,
        frame_mode: frames.mode,
    };
    Ok(Compiled::new(
        Code::Native(code),
        shared,
        options.insn_budget,
    ))
}

fn compile_error(e: impl std::fmt::Display) -> VmError {
    VmError::Compile {
        pc: 0,
        message: e.to_string(),
    }
}

/// Whether translation goes on into the next instruction.
pub(crate) enum Flow {
    Next,
    Ended,
}

/// Code emitted after a function's blocks, off the hot path.
enum Cold {
    /// The budget ran out at the block starting at `start`, of `count` instructions.
    Budget {
        label: Label,
        start: usize,
        count: u64,
    },
    /// A compile-time error, raised by index.
    Fail { label: Label, index: usize },
    /// The runtime's check of a checked access.
    Access(checked::Slow),
}

/// The state of one function's compilation.
pub(crate) struct FnCompiler<'a> {
    pub(crate) a: &'a mut Asm,
    /// Checked code validates every access and gets a frame per call from the runtime.
    pub(crate) mode: Mode,
    pub(crate) prog: &'a Program,
    pub(crate) prog_index: usize,
    /// The label of each block leader, by pc.
    blocks: Vec<Option<Label>>,
    /// Returns the status in `rax`.
    pub(crate) epilogue: Label,
    cold: Vec<Cold>,
    static_errors: &'a mut Vec<VmError>,
    /// Every function of the set.
    pub(crate) entries: &'a HashMap<(usize, usize), Label>,
    pub(crate) arrays: &'a HashMap<u64, ArrayLookup>,
    /// The constant r1 holds, when straight-line code since an `ld_imm64` says so.
    pub(crate) known: KnownArgs,
    pub(crate) host_word_loads: Vec<bool>,
    pub(crate) may_goto_loops: u64,
    /// How calls get their frames, and what of them a call zeroes.
    pub(crate) frames: FramePlan,
}

impl FnCompiler<'_> {
    fn compile(mut self, entry: usize) {
        let cfg = Cfg::of(self.prog, entry, self.mode);
        let prog = self.prog;
        // Checked code tests every 4-byte load against the ctx (in its cold stub).
        if self.mode == Mode::Trusted {
            self.host_word_loads = ctx_loads::host_word_loads(
                prog,
                entry,
                |pc| cfg.reached(pc),
                |pc, insn| successors(prog, pc, insn),
            );
        }
        self.blocks = vec![None; prog.len() + 1];
        let leaders: Vec<usize> = cfg.leaders().collect();
        for &pc in &leaders {
            self.blocks[pc] = Some(self.a.label());
        }
        self.epilogue = self.a.label();
        self.prologue();
        // Blocks go in pc order, and a loop may jump back before the entry.
        if leaders.first() != Some(&entry) {
            let label = self.blocks[entry].expect("the entry leads a block");
            self.a.jmp(label);
        }
        for (i, &leader) in leaders.iter().enumerate() {
            if leader == entry || cfg.is_jump_target(leader) {
                self.known = KnownArgs::default();
            }
            let next_leader = leaders.get(i + 1).copied();
            self.block(&cfg, leader, next_leader);
        }
        self.emit_cold();
        self.a.bind(self.epilogue);
        self.a.arith_ri(Sz::Q, Arith::Add, RSP, FRAME_SIZE);
        for &r in PUSHED.iter().rev() {
            self.a.pop(r);
        }
        self.a.ret();
    }

    fn prologue(&mut self) {
        for r in PUSHED {
            self.a.push(r);
        }
        self.a.arith_ri(Sz::Q, Arith::Sub, RSP, FRAME_SIZE);
        self.a.mov_rr(Sz::Q, CTX, RDI);
        self.a.store(Sz::Q, mem(RSP, IN_REGS), RSI);
        let slot = |i: usize| mem(RSI, i as i32 * 8);
        self.a.load_zx(Sz::Q, T1, slot(runtime::MAY_GOTO_SLOT));
        self.a.store(Sz::Q, mem(RSP, MAY_GOTO), T1);
        self.a.load_zx(Sz::Q, T1, slot(runtime::FRAME_SLOT));
        self.a.store(Sz::Q, mem(RSP, FRAME_TOP), T1);
        self.a.load_zx(Sz::Q, COUNT, mem(CTX, offsets::EXECUTED));
        // r2 lives in rsi, the array's pointer: loaded last.
        for (i, &r) in REGS.iter().enumerate() {
            if r != RSI {
                self.a.load_zx(Sz::Q, r, slot(i));
            }
        }
        self.a.load_zx(Sz::Q, RSI, slot(Reg::R2.index()));
    }

    /// One basic block: the budget test for its instructions, then each of them.
    fn block(&mut self, cfg: &Cfg, leader: usize, next_leader: Option<usize>) {
        let insns = cfg.block(self.prog, leader, self.mode);
        let label = self.blocks[leader].expect("a leader has a label");
        self.a.bind(label);
        self.count(leader, insns.clone().count() as u64);
        let mut last = (leader, Insn::Exit);
        for (pc, insn) in insns {
            last = (pc, insn);
            let flow = self.insn(pc, insn);
            self.known = self.known.after(&insn);
            if let Flow::Ended = flow {
                return;
            }
        }
        let (pc, insn) = last;
        let next = pc + insn.slots();
        if next_leader == Some(next) {
            return;
        }
        let target = self.next_label(next);
        self.a.jmp(target);
    }

    /// Counts `n` instructions of the block at `start`; the run stops when they pass the
    /// budget.
    fn count(&mut self, start: usize, n: u64) {
        let label = self.a.label();
        self.a.arith_ri(Sz::Q, Arith::Add, COUNT, n as i32);
        self.a
            .arith_rm(Sz::Q, Arith::Cmp, COUNT, mem(CTX, offsets::BUDGET));
        self.a.jcc(Cc::A, label);
        self.cold.push(Cold::Budget {
            label,
            start,
            count: n,
        });
    }

    fn emit_cold(&mut self) {
        for cold in std::mem::take(&mut self.cold) {
            match cold {
                Cold::Budget {
                    label,
                    start,
                    count,
                } => {
                    self.a.bind(label);
                    // The count before the block is what the runtime reads.
                    self.a.arith_ri(Sz::Q, Arith::Sub, COUNT, count as i32);
                    self.call_rt(
                        entry!(runtime::jit_budget_exhausted),
                        &[Arg::Imm(self.prog_index as u64), Arg::Imm(start as u64)],
                    );
                    self.a.jmp(self.epilogue);
                }
                Cold::Fail { label, index } => {
                    self.a.bind(label);
                    self.call_rt(entry!(runtime::jit_fail), &[Arg::Imm(index as u64)]);
                    self.a.jmp(self.epilogue);
                }
                Cold::Access(slow) => self.emit_slow(slow),
            }
        }
    }

    /// Queues the stub of a checked access.
    pub(crate) fn push_slow(&mut self, slow: checked::Slow) {
        self.cold.push(Cold::Access(slow));
    }

    /// A label that stops the run with `error`.
    pub(crate) fn fail_label(&mut self, error: VmError) -> Label {
        let index = self.static_errors.len();
        self.static_errors.push(error);
        let label = self.a.label();
        self.cold.push(Cold::Fail { label, index });
        label
    }

    /// Stops the run with `error` here.
    pub(crate) fn fail(&mut self, error: VmError) -> Flow {
        let label = self.fail_label(error);
        self.a.jmp(label);
        Flow::Ended
    }

    /// The block that continues at `next`, or the fell-off-the-end error.
    fn next_label(&mut self, next: usize) -> Label {
        match self.blocks.get(next).copied().flatten() {
            Some(label) => label,
            None => self.fail_label(VmError::FellOffEnd {
                pc: self.prog.len().saturating_sub(1),
            }),
        }
    }

    /// The block of the instruction `off` after `pc`, or the interpreter's error when no
    /// instruction starts there.
    pub(crate) fn target_label(&mut self, pc: usize, off: i64) -> Label {
        let target = pc as i64 + 1 + off;
        if let Some(label) = usize::try_from(target)
            .ok()
            .and_then(|t| self.blocks.get(t).copied().flatten())
        {
            return label;
        }
        let len = self.prog.len();
        let error = match usize::try_from(target).ok().filter(|&t| t < len) {
            None => VmError::JumpOutOfProgram { pc, target, len },
            Some(index) => VmError::JumpIntoLdImm64 { pc, target: index },
        };
        self.fail_label(error)
    }

    /// Calls a runtime entry point with the context and `args`; the count is stored before
    /// and loaded back after. The status is in `rax`; r0-r5 are lost.
    pub(crate) fn call_rt(&mut self, f: u64, args: &[Arg]) {
        const ARGS: [R; 5] = [RSI, RDX, RCX, R8, R9];
        self.a.store(Sz::Q, mem(CTX, offsets::EXECUTED), COUNT);
        self.a.mov_rr(Sz::Q, RDI, CTX);
        for (&arg, &to) in args.iter().zip(ARGS.iter()) {
            match arg {
                Arg::Imm(v) => self.a.mov_imm64(to, v),
                Arg::Reg(r) => self.a.mov_rr(Sz::Q, to, r),
            }
        }
        self.a.call_abs(f, RAX);
        self.a.load_zx(Sz::Q, COUNT, mem(CTX, offsets::EXECUTED));
    }

    /// Keeps r`from`..=r`to` (of r0-r5) in the save area.
    pub(crate) fn spill(&mut self, from: usize, to: usize) {
        for (i, &r) in REGS.iter().enumerate().take(to + 1).skip(from) {
            self.a.store(Sz::Q, mem(RSP, SAVE + i as i32 * 8), r);
        }
    }

    /// Takes r`from`..=r`to` back from the save area.
    pub(crate) fn reload(&mut self, from: usize, to: usize) {
        for (i, &r) in REGS.iter().enumerate().take(to + 1).skip(from) {
            self.a.load_zx(Sz::Q, r, mem(RSP, SAVE + i as i32 * 8));
        }
    }

    /// Compiles the instruction at `pc`.
    fn insn(&mut self, pc: usize, insn: Insn) -> Flow {
        use bpfemu_vm::Unsupported;
        match insn {
            Insn::Alu {
                width,
                op,
                dst,
                src,
            } => self.alu(width, op, host(dst), src),
            Insn::Neg { width, dst } => self.a.neg(alu::size(width), host(dst)),
            Insn::MovSx {
                width,
                dst,
                src,
                bits,
            } => self.movsx(width, host(dst), host(src), bits),
            Insn::AddrSpaceCast { dst, src, imm } => {
                if imm != 1 {
                    return self.fail(VmError::Unsupported {
                        pc,
                        what: Unsupported::ArenaCast,
                    });
                }
                self.a.mov_rr(Sz::W, host(dst), host(src));
            }
            Insn::Endian { order, bits, dst } => self.endian(order, bits, host(dst)),
            Insn::LdImm64 {
                dst,
                kind,
                imm,
                next_imm,
            } => {
                if kind != LdImm64Kind::Imm {
                    return self.fail(VmError::Unsupported {
                        pc,
                        what: Unsupported::PseudoLdImm64(kind),
                    });
                }
                self.a.mov_imm64(host(dst), Insn::imm64(imm, next_imm));
            }
            Insn::LdAbs { size, imm } => {
                self.a.mov_imm64(T1, imm as i64 as u64);
                return self.legacy_load(size, pc);
            }
            Insn::LdInd { size, src, imm } => {
                self.a.mov_rr(Sz::Q, T1, host(src));
                self.a.arith_ri(Sz::Q, Arith::Add, T1, imm);
                return self.legacy_load(size, pc);
            }
            Insn::Load {
                size,
                sign_extend,
                dst,
                src,
                off,
            } => match self.mode {
                Mode::Trusted => self.load(size, sign_extend, dst, src, off, false, pc),
                Mode::Checked => self.checked_load(size, sign_extend, dst, src, off, pc),
            },
            Insn::Store {
                size,
                dst,
                off,
                imm,
            } => match self.mode {
                Mode::Trusted => {
                    self.a
                        .store_imm(memory::sz(size), mem(host(dst), off as i32), imm)
                }
                Mode::Checked => self.checked_store_imm(size, dst, off, imm, pc),
            },
            Insn::StoreReg {
                size,
                dst,
                src,
                off,
            } => match self.mode {
                Mode::Trusted => {
                    self.a
                        .store(memory::sz(size), mem(host(dst), off as i32), host(src))
                }
                Mode::Checked => self.checked_store(size, dst, src, off, pc),
            },
            Insn::Atomic {
                size,
                op,
                dst,
                src,
                off,
            } => match self.mode {
                Mode::Trusted => self.atomic(size, op, dst, src, off, pc),
                Mode::Checked => self.checked_atomic(size, op, dst, src, off, pc),
            },
            Insn::Ja { off, .. } => {
                let target = self.target_label(pc, off as i64);
                self.a.jmp(target);
                return Flow::Ended;
            }
            Insn::Jump {
                width,
                cond,
                dst,
                src,
                off,
            } => self.jump(width, cond, host(dst), src, pc, off),
            Insn::MayGoto { off } => self.may_goto(pc, off),
            Insn::Call(target) => return self.call(target, pc),
            Insn::Exit => return self.exit(),
        }
        Flow::Next
    }
}

/// An argument of a runtime call: a constant or a scratch register (never one the argument
/// registers overwrite).
#[derive(Clone, Copy)]
pub(crate) enum Arg {
    Imm(u64),
    Reg(R),
}
