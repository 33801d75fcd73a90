//! Per-instruction translation: one match arm per eBPF instruction, with the kernel's runtime
//! semantics (the same as the interpreter's, `bpfemu_vm::alu`): 32-bit results zero-extended,
//! `x / 0 = 0`, `x % 0 = x`, `x s/ -1 = -x`, `x s% -1 = 0`, shift amounts masked to the width.
//!
//! The driver ([`super::compile`]) hands each basic block here; what reaches the runtime goes
//! through the [`VmEnv`], the memory checks through [`super::bounds`] and the inlined
//! helpers through [`super::inline`] (both add methods to [`FuncTranslator`]).

use super::environ::VmEnv;
use crate::plan::{self, ArrayLookup, KnownArgs, Mode};
use crate::runtime::{self, FRAME_SLOT, MAY_GOTO_SLOT, STATUS_OK, STATUS_SPECIAL, offsets};
use bpfemu_isa::helpers::id::TAIL_CALL;
use bpfemu_isa::{
    AluOp, AtomicOp, ByteOrder, CallTarget, Insn, JmpCond, LdImm64Kind, Program, Reg, Size, Source,
    Width,
};
use bpfemu_vm::{Unsupported, VmError};
use cranelift_codegen::ir::{
    AtomicRmwOp, Block, BlockArg, FuncRef, InstBuilder, MemFlagsData, SigRef, StackSlot, Type,
    Value,
    condcodes::IntCC,
    types::{I8, I16, I32, I64},
};
use cranelift_frontend::{FunctionBuilder, Variable};
use std::collections::HashMap;

/// Slot size of the register array.
const SLOT: i32 = 8;

/// The CLIF type of an access of `size`.
pub fn mem_type(size: Size) -> Type {
    match size {
        Size::B => I8,
        Size::H => I16,
        Size::W => I32,
        Size::DW => I64,
    }
}

/// The state of one function's translation.
pub struct FuncTranslator<'f, 'e> {
    pub(crate) b: FunctionBuilder<'f>,
    pub(crate) env: VmEnv<'e>,
    pub(crate) mode: Mode,
    /// Index of the program in the set, and the program.
    pub(crate) prog_index: usize,
    pub(crate) prog: &'f Program,
    pub(crate) regs: [Variable; Reg::COUNT],
    pub(crate) may_goto: Variable,
    pub(crate) ctx: Value,
    /// The register array this function was called with (r0 goes back through it).
    pub(crate) in_regs: Value,
    /// The register array for calls this function makes.
    pub(crate) out_regs: StackSlot,
    /// The top of this function's own stack frame, and its bottom (`fp - STACK_SIZE`, which
    /// every checked access compares with).
    pub(crate) fp: Value,
    pub(crate) frame_bottom: Value,
    /// Blocks by the pc of their first instruction.
    pub(crate) blocks: HashMap<usize, Block>,
    /// Returns its status parameter: the run stopped.
    pub(crate) propagate: Block,
    /// Raises the budget error: parameters (block start pc, executed before the block).
    pub(crate) budget_block: Block,
    /// Functions a local call may target, by insn.
    pub(crate) callees: HashMap<usize, FuncRef>,
    /// The signature of compiled functions, for tail calls.
    pub(crate) jit_sig: SigRef,
    pub(crate) may_goto_loops: u64,
    /// Error blocks still to fill.
    pub(crate) pending_errors: Vec<(Block, VmError)>,
    /// Array maps whose lookups are inlined, by map handle.
    pub(crate) arrays: &'f HashMap<u64, ArrayLookup>,
    /// The constants r1-r5 hold here, as far as straight-line code shows.
    pub(crate) known: KnownArgs,
    /// Trusted code keeps the executed count in a variable (and the budget, loaded once)
    /// between calls into the runtime; checked code keeps it in the run context.
    pub(crate) count: Option<(Variable, Value)>,
    /// The 4-byte loads (by pc) that cannot read the ctx, so that trusted code reads host
    /// memory without testing the address (`ctx_loads`).
    pub(crate) host_word_loads: Vec<bool>,
}

/// Whether translation continues into the next slot.
pub(crate) enum Flow {
    /// The instruction falls through to `pc + slots`.
    Next,
    /// The instruction ended the block itself (a jump, an exit, an error).
    Ended,
}

impl FuncTranslator<'_, '_> {
    pub(crate) fn get(&mut self, r: Reg) -> Value {
        self.b.use_var(self.regs[r.index()])
    }

    fn set(&mut self, r: Reg, v: Value) {
        self.b.def_var(self.regs[r.index()], v);
    }

    fn konst(&mut self, v: u64) -> Value {
        self.b.ins().iconst(I64, v as i64)
    }

    /// Continues in `block`, whose predecessors are all emitted: sealing it now lets the SSA
    /// builder read variables through its predecessors instead of adding a block parameter
    /// for every variable used there (each of them a phi for the register allocator).
    pub(crate) fn enter(&mut self, block: Block) {
        self.b.seal_block(block);
        self.b.switch_to_block(block);
    }

    /// Counts the `count` instructions of the block starting at `start` against the budget,
    /// then branches to `body`, the block's code, or stops the run when the budget is out.
    ///
    /// Trusted code keeps the count in a variable: counted in the context, each block's
    /// count waited for the previous block's store (a chain through memory that cost
    /// p4_parser 40% of its time). Checked code, compiled without the optimiser and with
    /// many more blocks (every load ends one), keeps it in the context: a variable changed
    /// in every block needs a block parameter at every join, the register allocator's
    /// largest cost, and the runtime reads the context anyway.
    pub(crate) fn count_block(&mut self, start: usize, count: u64, body: Block) {
        let (before, budget) = match self.count {
            Some((var, budget)) => (self.b.use_var(var), budget),
            None => {
                let before = self.env.load_field(&mut self.b, offsets::EXECUTED);
                let budget = self.env.load_field(&mut self.b, offsets::BUDGET);
                (before, budget)
            }
        };
        let after = self.b.ins().iadd_imm_s(before, count as i64);
        match self.count {
            Some((var, _)) => self.b.def_var(var, after),
            None => self.env.store_field(&mut self.b, offsets::EXECUTED, after),
        }
        let over = self.b.ins().icmp(IntCC::UnsignedGreaterThan, after, budget);
        // The budget block's arguments are made in a cold block of this site, not on the
        // way into every block.
        let out_of_budget = self.b.create_block();
        self.b.set_cold_block(out_of_budget);
        self.b.ins().brif(over, out_of_budget, &[], body, &[]);
        self.enter(out_of_budget);
        let start = self.konst(start as u64);
        self.b.ins().jump(
            self.budget_block,
            &[BlockArg::Value(start), BlockArg::Value(before)],
        );
    }

    /// Stores the executed count kept in a variable into the run context, before code that
    /// reads it there (a compiled callee, the runtime after a return).
    pub(crate) fn store_count(&mut self) {
        if let Some((var, _)) = self.count {
            let n = self.b.use_var(var);
            self.env.store_field(&mut self.b, offsets::EXECUTED, n);
        }
    }

    /// Takes the executed count back from the run context after a compiled callee added to it.
    fn reload_count(&mut self) {
        if let Some((var, _)) = self.count {
            let n = self.env.load_field(&mut self.b, offsets::EXECUTED);
            self.b.def_var(var, n);
        }
    }

    /// Stops with a compile-time error, returning its status.
    fn fail(&mut self, error: VmError) -> Flow {
        let status = self.env.fail(&mut self.b, error);
        self.b.ins().return_(&[status]);
        Flow::Ended
    }

    /// Jumps to a status test: [`STATUS_OK`] continues in a new block, anything else returns.
    fn continue_if_ok(&mut self, status: Value) {
        let ok = self
            .b
            .ins()
            .icmp_imm_s(IntCC::Equal, status, STATUS_OK as i64);
        let next = self.b.create_block();
        self.b
            .ins()
            .brif(ok, next, &[], self.propagate, &[BlockArg::Value(status)]);
        self.enter(next);
    }

    /// The block of instruction `target`, or an error block when no instruction starts there
    /// (the interpreter's `jump_target`).
    fn target_block(&mut self, pc: usize, off: i64) -> Block {
        let target = pc as i64 + 1 + off;
        if let Some(&block) = usize::try_from(target)
            .ok()
            .and_then(|t| self.blocks.get(&t))
        {
            return block;
        }
        let len = self.prog.len();
        let error = match usize::try_from(target).ok().filter(|&t| t < len) {
            None => VmError::JumpOutOfProgram { pc, target, len },
            Some(index) => VmError::JumpIntoLdImm64 { pc, target: index },
        };
        self.error_block(error)
    }

    /// A block that stops the run with `error`; filled after the function's blocks
    /// ([`FuncTranslator::emit_error_blocks`]), as the builder fills one block at a time.
    fn error_block(&mut self, error: VmError) -> Block {
        let block = self.b.create_block();
        self.pending_errors.push((block, error));
        block
    }

    /// Fills the blocks [`FuncTranslator::error_block`] handed out.
    pub(crate) fn emit_error_blocks(&mut self) {
        for (block, error) in std::mem::take(&mut self.pending_errors) {
            self.enter(block);
            self.fail(error);
        }
    }

    /// The block that continues at `next`, or the fell-off-the-end error.
    pub(crate) fn next_block(&mut self, next: usize) -> Block {
        match self.blocks.get(&next) {
            Some(&block) => block,
            None => self.error_block(VmError::FellOffEnd {
                pc: self.prog.len().saturating_sub(1),
            }),
        }
    }

    /// Returns r0 through the register array.
    fn exit(&mut self) -> Flow {
        self.store_count();
        let r0 = self.get(Reg::R0);
        self.b
            .ins()
            .store(MemFlagsData::trusted(), r0, self.in_regs, 0);
        let ok = self.konst(STATUS_OK);
        self.b.ins().return_(&[ok]);
        Flow::Ended
    }

    /// Translates the instruction at `pc`.
    pub(crate) fn translate(&mut self, pc: usize, insn: Insn) -> Flow {
        let flow = self.translate_insn(pc, insn);
        self.known = self.known.after(&insn);
        flow
    }

    fn translate_insn(&mut self, pc: usize, insn: Insn) -> Flow {
        match insn {
            Insn::Alu {
                width,
                op,
                dst,
                src,
            } => {
                let v = self.alu(width, op, dst, src);
                self.set(dst, v);
            }
            Insn::Neg { width, dst } => {
                let x = self.get(dst);
                let v = match width {
                    Width::W64 => self.b.ins().ineg(x),
                    Width::W32 => {
                        let x = self.b.ins().ireduce(I32, x);
                        let n = self.b.ins().ineg(x);
                        self.b.ins().uextend(I64, n)
                    }
                };
                self.set(dst, v);
            }
            Insn::MovSx {
                width,
                dst,
                src,
                bits,
            } => {
                let x = self.get(src);
                let v = self.sign_extend(x, bits);
                let v = match width {
                    Width::W64 => v,
                    Width::W32 => self.zext32(v),
                };
                self.set(dst, v);
            }
            Insn::AddrSpaceCast { dst, src, imm } => {
                if imm != 1 {
                    return self.fail(VmError::Unsupported {
                        pc,
                        what: Unsupported::ArenaCast,
                    });
                }
                let x = self.get(src);
                let v = self.zext32(x);
                self.set(dst, v);
            }
            Insn::Endian { order, bits, dst } => {
                let x = self.get(dst);
                let v = self.endian(order, bits, x);
                self.set(dst, v);
            }
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
                let v = self.konst(Insn::imm64(imm, next_imm));
                self.set(dst, v);
            }
            Insn::LdAbs { size, imm } => {
                let offset = self.konst(imm as i64 as u64);
                return self.legacy_load(size, offset, pc);
            }
            Insn::LdInd { size, src, imm } => {
                let x = self.get(src);
                let offset = self.b.ins().iadd_imm_s(x, imm as i64);
                return self.legacy_load(size, offset, pc);
            }
            Insn::Load {
                size,
                sign_extend,
                dst,
                src,
                off,
            } => {
                let addr = self.address(src, off);
                let v = self.emit_load(addr, size, false, pc);
                let v = if sign_extend {
                    self.sign_extend(v, (size.bytes() * 8) as u8)
                } else {
                    v
                };
                self.set(dst, v);
            }
            Insn::Store {
                size,
                dst,
                off,
                imm,
            } => {
                let addr = self.address(dst, off);
                let v = self.konst(imm as i64 as u64);
                self.emit_store(addr, size, v, false, pc);
            }
            Insn::StoreReg {
                size,
                dst,
                src,
                off,
            } => {
                let addr = self.address(dst, off);
                let v = self.get(src);
                self.emit_store(addr, size, v, false, pc);
            }
            Insn::Atomic {
                size,
                op,
                dst,
                src,
                off,
            } => self.atomic(size, op, dst, src, off, pc),
            Insn::Ja { off, .. } => {
                let target = self.target_block(pc, off as i64);
                self.b.ins().jump(target, &[]);
                return Flow::Ended;
            }
            Insn::Jump {
                width,
                cond,
                dst,
                src,
                off,
            } => {
                let taken = self.condition(width, cond, dst, src);
                let target = self.target_block(pc, off as i64);
                let next = self.next_block(pc + 1);
                self.b.ins().brif(taken, target, &[], next, &[]);
                return Flow::Ended;
            }
            Insn::MayGoto { off } => {
                let left = self.b.use_var(self.may_goto);
                let target = self.target_block(pc, off as i64);
                let count_down = self.b.create_block();
                self.b.ins().brif(left, count_down, &[], target, &[]);
                self.enter(count_down);
                let left = self.b.ins().iadd_imm_s(left, -1);
                self.b.def_var(self.may_goto, left);
            }
            Insn::Call(CallTarget::Helper(id)) => return self.call_helper(id, pc),
            Insn::Call(CallTarget::Local(rel)) => return self.call_local(rel, pc),
            Insn::Call(CallTarget::Kfunc { btf_id, off }) => {
                return self.call_kfunc(btf_id, off, pc);
            }
            Insn::Exit => return self.exit(),
        }
        Flow::Next
    }

    fn address(&mut self, base: Reg, off: i16) -> Value {
        let x = self.get(base);
        if off == 0 {
            return x;
        }
        self.b.ins().iadd_imm_s(x, off as i64)
    }

    fn zext32(&mut self, v: Value) -> Value {
        let low = self.b.ins().ireduce(I32, v);
        self.b.ins().uextend(I64, low)
    }

    fn sign_extend(&mut self, v: Value, bits: u8) -> Value {
        let ty = match bits {
            8 => I8,
            16 => I16,
            32 => I32,
            _ => return v,
        };
        let low = self.b.ins().ireduce(ty, v);
        self.b.ins().sextend(I64, low)
    }

    fn endian(&mut self, order: ByteOrder, bits: u8, x: Value) -> Value {
        let ty = match bits {
            16 => I16,
            32 => I32,
            _ => I64,
        };
        let low = if ty == I64 {
            x
        } else {
            self.b.ins().ireduce(ty, x)
        };
        let swapped = match order {
            ByteOrder::ToLe => low,
            ByteOrder::ToBe | ByteOrder::Swap => self.b.ins().bswap(low),
        };
        if ty == I64 {
            swapped
        } else {
            self.b.ins().uextend(I64, swapped)
        }
    }

    /// The second operand at the operation's width: a 64-bit operation sees the immediate
    /// sign-extended, a 32-bit one its 32 bits.
    fn operand(&mut self, width: Width, src: Source) -> Value {
        match (width, src) {
            (Width::W64, Source::Reg(r)) => self.get(r),
            (Width::W64, Source::Imm(imm)) => self.konst(imm as i64 as u64),
            (Width::W32, Source::Reg(r)) => {
                let x = self.get(r);
                self.b.ins().ireduce(I32, x)
            }
            (Width::W32, Source::Imm(imm)) => self.b.ins().iconst(I32, imm as u32 as i64),
        }
    }

    fn alu(&mut self, width: Width, op: AluOp, dst: Reg, src: Source) -> Value {
        let ty = match width {
            Width::W64 => I64,
            Width::W32 => I32,
        };
        if let (AluOp::Mov, Source::Imm(imm)) = (op, src) {
            // The constant as the register holds it: no narrowing and widening to fold.
            return match width {
                Width::W64 => self.konst(imm as i64 as u64),
                Width::W32 => self.konst(imm as u32 as u64),
            };
        }
        let y = self.operand(width, src);
        let x = self.get(dst);
        let x = if ty == I32 {
            self.b.ins().ireduce(I32, x)
        } else {
            x
        };
        let ins = self.b.ins();
        let v = match op {
            AluOp::Add => ins.iadd(x, y),
            AluOp::Sub => ins.isub(x, y),
            AluOp::Mul => ins.imul(x, y),
            AluOp::Or => ins.bor(x, y),
            AluOp::And => ins.band(x, y),
            AluOp::Xor => ins.bxor(x, y),
            // CLIF shifts take the amount modulo the width, as x86-64 and the interpreter do.
            AluOp::Lsh => ins.ishl(x, y),
            AluOp::Rsh => ins.ushr(x, y),
            AluOp::Arsh => ins.sshr(x, y),
            AluOp::Mov => y,
            AluOp::Div | AluOp::Mod | AluOp::SDiv | AluOp::SMod => self.division(op, x, y),
        };
        if ty == I32 {
            self.b.ins().uextend(I64, v)
        } else {
            v
        }
    }

    /// Division and modulo as `do_misc_fixups` patches them: never a trap. The divisor is
    /// replaced by 1 where the result comes from the patch instead.
    fn division(&mut self, op: AluOp, x: Value, y: Value) -> Value {
        let ty = self.b.func.dfg.value_type(x);
        let zero = self.b.ins().icmp_imm_s(IntCC::Equal, y, 0);
        let minus_one = self.b.ins().icmp_imm_s(IntCC::Equal, y, -1);
        let one = self.b.ins().iconst(ty, 1);
        let zero_v = self.b.ins().iconst(ty, 0);
        match op {
            AluOp::Div => {
                let safe = self.b.ins().select(zero, one, y);
                let q = self.b.ins().udiv(x, safe);
                self.b.ins().select(zero, zero_v, q)
            }
            AluOp::Mod => {
                let safe = self.b.ins().select(zero, one, y);
                let r = self.b.ins().urem(x, safe);
                self.b.ins().select(zero, x, r)
            }
            AluOp::SDiv => {
                let special = self.b.ins().bor(zero, minus_one);
                let safe = self.b.ins().select(special, one, y);
                let q = self.b.ins().sdiv(x, safe);
                let neg = self.b.ins().ineg(x);
                let q = self.b.ins().select(minus_one, neg, q);
                self.b.ins().select(zero, zero_v, q)
            }
            _ => {
                let special = self.b.ins().bor(zero, minus_one);
                let safe = self.b.ins().select(special, one, y);
                let r = self.b.ins().srem(x, safe);
                let r = self.b.ins().select(minus_one, zero_v, r);
                self.b.ins().select(zero, x, r)
            }
        }
    }

    fn condition(&mut self, width: Width, cond: JmpCond, dst: Reg, src: Source) -> Value {
        let y = self.operand(width, src);
        let x = self.get(dst);
        let x = match width {
            Width::W64 => x,
            Width::W32 => self.b.ins().ireduce(I32, x),
        };
        let cc = match cond {
            JmpCond::Eq => IntCC::Equal,
            JmpCond::Ne => IntCC::NotEqual,
            JmpCond::Gt => IntCC::UnsignedGreaterThan,
            JmpCond::Ge => IntCC::UnsignedGreaterThanOrEqual,
            JmpCond::Lt => IntCC::UnsignedLessThan,
            JmpCond::Le => IntCC::UnsignedLessThanOrEqual,
            JmpCond::Sgt => IntCC::SignedGreaterThan,
            JmpCond::Sge => IntCC::SignedGreaterThanOrEqual,
            JmpCond::Slt => IntCC::SignedLessThan,
            JmpCond::Sle => IntCC::SignedLessThanOrEqual,
            JmpCond::Set => {
                let and = self.b.ins().band(x, y);
                return self.b.ins().icmp_imm_s(IntCC::NotEqual, and, 0);
            }
        };
        self.b.ins().icmp(cc, x, y)
    }

    fn atomic(&mut self, size: Size, op: AtomicOp, dst: Reg, src: Reg, off: i16, pc: usize) {
        match op {
            AtomicOp::LoadAcquire => {
                let addr = self.address(src, off);
                let v = self.emit_load(addr, size, true, pc);
                self.set(dst, v);
                return;
            }
            AtomicOp::StoreRelease => {
                let addr = self.address(dst, off);
                let v = self.get(src);
                self.emit_store(addr, size, v, true, pc);
                return;
            }
            _ => {}
        }
        let addr = self.address(dst, off);
        let n = size.bytes();
        self.emit_write_check(addr, n, pc);
        let ty = mem_type(size);
        let operand = self.get(src);
        let expected = self.get(Reg::R0);
        let join = self.b.create_block();
        let old = self.b.append_block_param(join, I64);
        let hardware = self.b.create_block();
        if self.mode == Mode::Checked {
            // A locked instruction on a misaligned address would split the bus lock.
            let low = self.b.ins().band_imm_s(addr, (n - 1) as i64);
            let aligned = self.b.ins().icmp_imm_s(IntCC::Equal, low, 0);
            let software = self.b.create_block();
            self.b.ins().brif(aligned, hardware, &[], software, &[]);
            self.enter(software);
            let op_size = runtime::pack_atomic(op, n);
            let status =
                self.env
                    .atomic_unaligned(&mut self.b, addr, op_size, operand, expected, pc);
            self.continue_if_ok(status);
            let v = self.env.scratch(&mut self.b);
            self.b.ins().jump(join, &[BlockArg::Value(v)]);
        } else {
            self.b.ins().jump(hardware, &[]);
        }
        self.enter(hardware);
        let narrow = |t: &mut Self, v: Value| {
            if ty == I64 {
                v
            } else {
                t.b.ins().ireduce(ty, v)
            }
        };
        let x = narrow(self, operand);
        let flags = self.atomic_flags();
        let raw = match op {
            AtomicOp::Cmpxchg => {
                let e = narrow(self, expected);
                self.b.ins().atomic_cas(flags, addr, e, x)
            }
            _ => {
                let rmw = match op {
                    AtomicOp::Add | AtomicOp::FetchAdd => AtomicRmwOp::Add,
                    AtomicOp::Or | AtomicOp::FetchOr => AtomicRmwOp::Or,
                    AtomicOp::And | AtomicOp::FetchAnd => AtomicRmwOp::And,
                    AtomicOp::Xor | AtomicOp::FetchXor => AtomicRmwOp::Xor,
                    _ => AtomicRmwOp::Xchg,
                };
                self.b.ins().atomic_rmw(ty, flags, rmw, addr, x)
            }
        };
        let v = if ty == I64 {
            raw
        } else {
            self.b.ins().uextend(I64, raw)
        };
        self.b.ins().jump(join, &[BlockArg::Value(v)]);
        self.enter(join);
        match op {
            AtomicOp::Cmpxchg => self.set(Reg::R0, old),
            _ if op.fetches() => self.set(src, old),
            _ => {}
        }
    }

    fn legacy_load(&mut self, size: Size, offset: Value, pc: usize) -> Flow {
        let status = self
            .env
            .legacy_load(&mut self.b, offset, size.bytes() as u64, pc);
        let ok = self
            .b
            .ins()
            .icmp_imm_s(IntCC::Equal, status, STATUS_OK as i64);
        let loaded = self.b.create_block();
        let other = self.b.create_block();
        self.b.ins().brif(ok, loaded, &[], other, &[]);
        // Outside the packet: r0 = 0 and the function returns.
        self.enter(other);
        let missed = self
            .b
            .ins()
            .icmp_imm_s(IntCC::Equal, status, STATUS_SPECIAL as i64);
        let miss = self.b.create_block();
        self.b.ins().brif(
            missed,
            miss,
            &[],
            self.propagate,
            &[BlockArg::Value(status)],
        );
        self.enter(miss);
        let zero = self.konst(0);
        self.set(Reg::R0, zero);
        self.exit();
        self.enter(loaded);
        let v = self.env.scratch(&mut self.b);
        self.set(Reg::R0, v);
        Flow::Next
    }

    fn out_regs_addr(&mut self) -> Value {
        self.b.ins().stack_addr(I64, self.out_regs, 0)
    }

    fn store_slot(&mut self, base: Value, slot: usize, v: Value) {
        self.b
            .ins()
            .store(MemFlagsData::trusted(), v, base, slot as i32 * SLOT);
    }

    fn call_helper(&mut self, id: i32, pc: usize) -> Flow {
        let r0 = match self.inline_helper(id, pc) {
            Some(r0) => r0,
            None if let Some(callback) = self.loop_callback(id) => {
                self.inline_bpf_loop(callback, pc)
            }
            None if id == TAIL_CALL && self.mode == Mode::Trusted => self.direct_tail_call(pc),
            None => match plan::direct_map_op(id, self.mode) {
                Some(op) => self.direct_map_op(op, id, pc),
                None => self.emit_helper_call(id, pc),
            },
        };
        self.set(Reg::R0, r0);
        Flow::Next
    }

    /// Calls the kfunc `btf_id` (module BTF `off`) through the runtime, as a helper that
    /// returns a value: r1-r5 passed (and left as they are), r0 set.
    fn call_kfunc(&mut self, btf_id: i32, off: i16, pc: usize) -> Flow {
        let out = self.out_regs_addr();
        for r in 1..=5 {
            let v = self.get(Reg::new(r).expect("r1-r5"));
            self.store_slot(out, r as usize, v);
        }
        let status = self.env.call_kfunc(&mut self.b, btf_id, off, out, pc);
        self.continue_if_ok(status);
        let r0 = self.env.scratch(&mut self.b);
        self.set(Reg::R0, r0);
        Flow::Next
    }

    /// Calls helper `id` through the runtime: r0, with the builder after the call (a tail
    /// call or an error leaves the function from inside).
    pub(crate) fn emit_helper_call(&mut self, id: i32, pc: usize) -> Value {
        let out = self.out_regs_addr();
        for r in 1..=5 {
            let v = self.get(Reg::new(r).expect("r1-r5"));
            self.store_slot(out, r as usize, v);
        }
        let status = self.env.call_helper(&mut self.b, id, out, pc);
        let ok = self
            .b
            .ins()
            .icmp_imm_s(IntCC::Equal, status, STATUS_OK as i64);
        let returned = self.b.create_block();
        let other = self.b.create_block();
        self.b.ins().brif(ok, returned, &[], other, &[]);
        self.enter(other);
        let tail = self
            .b
            .ins()
            .icmp_imm_s(IntCC::Equal, status, STATUS_SPECIAL as i64);
        let tail_call = self.b.create_block();
        self.b.ins().brif(
            tail,
            tail_call,
            &[],
            self.propagate,
            &[BlockArg::Value(status)],
        );
        self.enter(tail_call);
        let target = self.env.scratch(&mut self.b);
        self.emit_tail_jump(target);
        self.enter(returned);
        self.env.scratch(&mut self.b)
    }

    /// A tail call to the compiled program at `target`: it continues with these registers
    /// and this frame, and returns to this function's caller. Ends the block.
    pub(crate) fn emit_tail_jump(&mut self, target: Value) {
        for r in 0..Reg::COUNT {
            let v = self.b.use_var(self.regs[r]);
            self.store_slot(self.in_regs, r, v);
        }
        let left = self.b.use_var(self.may_goto);
        self.store_slot(self.in_regs, MAY_GOTO_SLOT, left);
        self.store_slot(self.in_regs, FRAME_SLOT, self.fp);
        self.store_count();
        let call = self
            .b
            .ins()
            .call_indirect(self.jit_sig, target, &[self.ctx, self.in_regs]);
        let status = self.b.inst_results(call)[0];
        self.b.ins().return_(&[status]);
    }

    /// A bpf-to-bpf call: a fresh frame, r1-r5 passed, r0 returned, r6-r9 kept (they are
    /// this function's variables).
    fn call_local(&mut self, rel: i32, pc: usize) -> Flow {
        let target = pc as i64 + 1 + rel as i64;
        let callee = usize::try_from(target)
            .ok()
            .and_then(|t| Some((t, *self.callees.get(&t)?)));
        let Some((target, callee)) = callee else {
            let block = self.target_block(pc, rel as i64);
            self.b.ins().jump(block, &[]);
            return Flow::Ended;
        };
        let args = [1, 2, 3, 4, 5].map(|r| self.get(Reg::new(r).expect("r1-r5")));
        let r0 = self.call_function(target, callee, args, pc);
        self.set(Reg::R0, r0);
        Flow::Next
    }

    /// Calls the function at `target` (`callee`) from the call at `pc` in a fresh frame, with
    /// r1-r5 = `args` and the callee's other registers zero: its r0.
    pub(crate) fn call_function(
        &mut self,
        target: usize,
        callee: FuncRef,
        args: [Value; 5],
        pc: usize,
    ) -> Value {
        let status = self.env.push_frame(&mut self.b, pc, target);
        self.continue_if_ok(status);
        let top = self.env.scratch(&mut self.b);
        let out = self.out_regs_addr();
        let zero = self.konst(0);
        for slot in [0, 6, 7, 8, 9] {
            self.store_slot(out, slot, zero);
        }
        for (slot, v) in (1..=5).zip(args) {
            self.store_slot(out, slot, v);
        }
        self.store_slot(out, Reg::R10.index(), top);
        let loops = self.konst(self.may_goto_loops);
        self.store_slot(out, MAY_GOTO_SLOT, loops);
        self.store_slot(out, FRAME_SLOT, top);
        self.store_count();
        let call = self.b.ins().call(callee, &[self.ctx, out]);
        let status = self.b.inst_results(call)[0];
        self.reload_count();
        self.continue_if_ok(status);
        self.env.pop_frame(&mut self.b);
        self.b.ins().load(I64, MemFlagsData::trusted(), out, 0)
    }
}
