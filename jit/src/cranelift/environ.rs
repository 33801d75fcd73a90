//! The environment: the only door from translated code to the runtime.
//!
//! The translator ([`super::translate`]) knows the eBPF instruction set and nothing of how
//! memory, helpers, frames or errors are kept; whenever an instruction needs the runtime, it
//! asks the [`VmEnv`] to emit the code that reaches it (as wasmtime's translator asks its
//! `FuncEnvironment`): calls into the entry points of [`crate::runtime`] over the vm's
//! [`Memory`](bpfemu_vm::Memory) and [`Helpers`](bpfemu_vm::Helpers). There is one runtime,
//! so it is a concrete type, not a trait the translator is generic over.

use crate::plan::{FrameMode, FramePlan};
use crate::runtime::{self, offsets};
use bpfemu_vm::{MAX_CALL_FRAMES, STACK_SIZE, VmError};
use cranelift_codegen::ir::{
    AbiParam, BlockArg, InstBuilder, MemFlagsData, SigRef, Signature, Value, condcodes::IntCC,
    types::I64,
};
use cranelift_codegen::isa::CallConv;
use cranelift_frontend::{FunctionBuilder, Variable};

/// The vm's environment: what translated code needs from the runtime. Every method emits code
/// at the builder's current position; the ones that return a status leave its test to the
/// translator ([`runtime::STATUS_OK`], [`runtime::STATUS_FAIL`], [`runtime::STATUS_SPECIAL`]).
/// One per compiled function (signatures are per function); the compile-time errors collect
/// across functions.
pub struct VmEnv<'a> {
    ctx: Value,
    sigs: Vec<(usize, SigRef)>,
    call_conv: CallConv,
    pub(crate) static_errors: &'a mut Vec<VmError>,
    /// The variable that holds the executed count while the function runs, when it is kept
    /// in a register ([`VmEnv::keep_count_in`]): stored into the context before every call
    /// into the runtime (which reads it, and may run callbacks that add to it) and loaded
    /// back after.
    count: Option<Variable>,
    /// How calls get their frames, and what of them a call zeroes.
    frames: FramePlan,
}

impl<'a> VmEnv<'a> {
    /// `ctx` is the function's run-context parameter.
    pub fn new(ctx: Value, call_conv: CallConv, static_errors: &'a mut Vec<VmError>) -> Self {
        VmEnv {
            ctx,
            sigs: Vec::new(),
            call_conv,
            static_errors,
            count: None,
            frames: FramePlan {
                mode: FrameMode::PerCall,
                zero_from: STACK_SIZE,
            },
        }
    }

    /// Calls get their frames as `frames` says.
    pub fn with_frames(self, frames: FramePlan) -> Self {
        VmEnv { frames, ..self }
    }

    /// [`FrameMode::Kept`]'s call, inline: one depth deeper into the frame kept there,
    /// zeroed where code may have written; the runtime only when that depth has no frame
    /// yet, or is too deep. The status is [`runtime::STATUS_OK`] or the runtime's.
    fn enter_kept_frame(&mut self, b: &mut FunctionBuilder, pc: usize, target: usize) -> Value {
        let flags = MemFlagsData::trusted();
        let depth = self.load_field(b, offsets::DEPTH);
        let deeper = b.ins().iadd_imm_s(depth, 1);
        let in_range = b
            .ins()
            .icmp_imm_u(IntCC::UnsignedLessThan, deeper, MAX_CALL_FRAMES as i64);
        let (lookup, kept, slow, join) = (
            b.create_block(),
            b.create_block(),
            b.create_block(),
            b.create_block(),
        );
        b.append_block_param(kept, I64);
        b.append_block_param(join, I64);
        b.ins().brif(in_range, lookup, &[], slow, &[]);
        b.seal_block(lookup);
        b.switch_to_block(lookup);
        let index = b.ins().ishl_imm_u(deeper, 3);
        let slot = b.ins().iadd(self.ctx, index);
        let top = b.ins().load(I64, flags, slot, offsets::FRAME_TOPS);
        b.ins().brif(top, kept, &[BlockArg::Value(top)], slow, &[]);
        b.seal_block(kept);
        b.seal_block(slow);

        b.switch_to_block(kept);
        let top = b.block_params(kept)[0];
        let zero = b.ins().iconst(I64, 0);
        for offset in self.frames.zeroed_words() {
            b.ins().store(flags, zero, top, offset);
        }
        self.store_field(b, offsets::DEPTH, deeper);
        self.store_field(b, offsets::SCRATCH, top);
        b.ins().jump(join, &[BlockArg::Value(zero)]);

        b.switch_to_block(slow);
        let args = [Self::konst(b, pc as u64), Self::konst(b, target as u64)];
        let status = self.call(
            b,
            runtime::jit_push_frame as *const () as usize,
            &args,
            true,
        );
        b.ins().jump(join, &[BlockArg::Value(status)]);
        b.seal_block(join);
        b.switch_to_block(join);
        b.block_params(join)[0]
    }

    /// From now on the executed count lives in `count` between calls into the runtime.
    pub fn keep_count_in(&mut self, count: Variable) {
        self.count = Some(count);
    }

    /// Calls an entry point at `addr` taking the context and `args` (all 64-bit); `ret`
    /// says whether it returns a status.
    fn call(&mut self, b: &mut FunctionBuilder, addr: usize, args: &[Value], ret: bool) -> Value {
        let arity = args.len() * 2 + usize::from(ret);
        let sig = match self.sigs.iter().find(|(a, _)| *a == arity) {
            Some(&(_, sig)) => sig,
            None => {
                let mut s = Signature::new(self.call_conv);
                s.params.push(AbiParam::new(I64));
                s.params.extend(args.iter().map(|_| AbiParam::new(I64)));
                if ret {
                    s.returns.push(AbiParam::new(I64));
                }
                let sig = b.import_signature(s);
                self.sigs.push((arity, sig));
                sig
            }
        };
        let callee = b.ins().iconst(I64, addr as i64);
        let mut all = Vec::with_capacity(args.len() + 1);
        all.push(self.ctx);
        all.extend_from_slice(args);
        if let Some(count) = self.count {
            let n = b.use_var(count);
            self.store_field(b, offsets::EXECUTED, n);
        }
        let call = b.ins().call_indirect(sig, callee, &all);
        let result = match b.inst_results(call).first() {
            Some(&v) => v,
            None => b.ins().iconst(I64, 0),
        };
        if let Some(count) = self.count {
            let n = self.load_field(b, offsets::EXECUTED);
            b.def_var(count, n);
        }
        result
    }

    fn konst(b: &mut FunctionBuilder, v: u64) -> Value {
        b.ins().iconst(I64, v as i64)
    }
}

impl VmEnv<'_> {
    /// Reads `len` bytes at `addr` through the runtime's checks (plain memory or a converted
    /// ctx field's value), leaving the value for [`VmEnv::scratch`].
    pub(crate) fn checked_read(
        &mut self,
        b: &mut FunctionBuilder,
        addr: Value,
        len: usize,
        pc: usize,
    ) -> Value {
        let args = [addr, Self::konst(b, runtime::pack_access(pc, len))];
        self.call(b, runtime::jit_read as *const () as usize, &args, true)
    }

    /// Validates a write of `len` bytes at `addr`.
    pub(crate) fn check_write(
        &mut self,
        b: &mut FunctionBuilder,
        addr: Value,
        len: usize,
        pc: usize,
    ) -> Value {
        let args = [addr, Self::konst(b, runtime::pack_access(pc, len))];
        self.call(
            b,
            runtime::jit_write_check as *const () as usize,
            &args,
            true,
        )
    }

    /// An atomic read-modify-write the hardware cannot do atomically (a misaligned address);
    /// the old value is left in scratch.
    pub(crate) fn atomic_unaligned(
        &mut self,
        b: &mut FunctionBuilder,
        addr: Value,
        op_size: u64,
        operand: Value,
        expected: Value,
        pc: usize,
    ) -> Value {
        let args = [
            addr,
            Self::konst(b, op_size),
            operand,
            expected,
            Self::konst(b, pc as u64),
        ];
        self.call(
            b,
            runtime::jit_atomic_unaligned as *const () as usize,
            &args,
            true,
        )
    }

    /// Calls helper `id` with r1-r5 in the register array at `regs`.
    pub(crate) fn call_helper(
        &mut self,
        b: &mut FunctionBuilder,
        id: i32,
        regs: Value,
        pc: usize,
    ) -> Value {
        let args = [
            Self::konst(b, id as u32 as u64),
            regs,
            Self::konst(b, pc as u64),
        ];
        self.call(b, runtime::jit_helper as *const () as usize, &args, true)
    }

    /// Calls map operation `op` directly ([`runtime::map_op_entry`]) with its arguments:
    /// r0 or [`runtime::DIRECT_DECLINED`].
    pub(crate) fn call_map_op(
        &mut self,
        b: &mut FunctionBuilder,
        op: bpfemu_vm::MapOp,
        args: &[Value],
    ) -> Value {
        self.call(b, runtime::map_op_entry(op), args, true)
    }

    /// Asks where `bpf_tail_call(ctx, prog_array, index)` goes ([`runtime::jit_tail_call`]):
    /// an entry, 0, or [`runtime::DIRECT_DECLINED`].
    pub(crate) fn call_tail_call(
        &mut self,
        b: &mut FunctionBuilder,
        prog_array: Value,
        index: Value,
    ) -> Value {
        let entry = runtime::jit_tail_call as *const () as usize;
        self.call(b, entry, &[prog_array, index], true)
    }

    /// Calls the kfunc `btf_id` of module BTF `off` with r1-r5 in the register array at
    /// `regs` (r0 in scratch).
    pub(crate) fn call_kfunc(
        &mut self,
        b: &mut FunctionBuilder,
        btf_id: i32,
        off: i16,
        regs: Value,
        pc: usize,
    ) -> Value {
        let args = [
            Self::konst(b, runtime::pack_kfunc(btf_id, off)),
            regs,
            Self::konst(b, pc as u64),
        ];
        self.call(b, runtime::jit_kfunc as *const () as usize, &args, true)
    }

    /// Adds the stack frame of a call from `pc` to `target` (its r10 in scratch).
    pub(crate) fn push_frame(
        &mut self,
        b: &mut FunctionBuilder,
        pc: usize,
        target: usize,
    ) -> Value {
        if self.frames.enters_inline() {
            return self.enter_kept_frame(b, pc, target);
        }
        let args = [Self::konst(b, pc as u64), Self::konst(b, target as u64)];
        self.call(
            b,
            runtime::jit_push_frame as *const () as usize,
            &args,
            true,
        )
    }

    /// Removes the innermost stack frame.
    pub(crate) fn pop_frame(&mut self, b: &mut FunctionBuilder) {
        if self.frames.mode == FrameMode::Kept {
            // The frame stays for the next call at this depth.
            let depth = self.load_field(b, offsets::DEPTH);
            let shallower = b.ins().iadd_imm_s(depth, -1);
            self.store_field(b, offsets::DEPTH, shallower);
            return;
        }
        self.call(b, runtime::jit_pop_frame as *const () as usize, &[], false);
    }

    /// Stops the run with `error`, known at compile time.
    pub(crate) fn fail(&mut self, b: &mut FunctionBuilder, error: VmError) -> Value {
        let index = self.static_errors.len() as u64;
        self.static_errors.push(error);
        let args = [Self::konst(b, index)];
        self.call(b, runtime::jit_fail as *const () as usize, &args, true)
    }

    /// Stops the run: the budget ran out in the block at `start` of program `prog`.
    pub(crate) fn budget_exhausted(
        &mut self,
        b: &mut FunctionBuilder,
        prog: usize,
        start: Value,
    ) -> Value {
        let args = [Self::konst(b, prog as u64), start];
        self.call(
            b,
            runtime::jit_budget_exhausted as *const () as usize,
            &args,
            true,
        )
    }

    /// LD_ABS/LD_IND of `len` bytes at packet offset `offset`.
    pub(crate) fn legacy_load(
        &mut self,
        b: &mut FunctionBuilder,
        offset: Value,
        len: u64,
        pc: usize,
    ) -> Value {
        let args = [offset, Self::konst(b, len), Self::konst(b, pc as u64)];
        self.call(
            b,
            runtime::jit_legacy_load as *const () as usize,
            &args,
            true,
        )
    }

    /// The value the last entry point left.
    pub(crate) fn scratch(&mut self, b: &mut FunctionBuilder) -> Value {
        self.load_field(b, offsets::SCRATCH)
    }

    /// Loads / stores a run-context field (`offsets`).
    pub(crate) fn load_field(&mut self, b: &mut FunctionBuilder, offset: i32) -> Value {
        b.ins().load(I64, MemFlagsData::trusted(), self.ctx, offset)
    }

    pub(crate) fn store_field(&mut self, b: &mut FunctionBuilder, offset: i32, value: Value) {
        b.ins()
            .store(MemFlagsData::trusted(), value, self.ctx, offset);
    }
}
