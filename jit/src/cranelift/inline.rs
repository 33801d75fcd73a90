//! Cranelift's fast paths of the helper calls the plan inlines ([`crate::plan::inline_helper`],
//! where the kernel inlines them): `bpf_map_lookup_elem` on an array and
//! `bpf_get_smp_processor_id`. Each fast path keeps the helper call as its slow path, for what
//! it does not cover: a key outside the function's own stack frame in checked mode (the helper
//! reports a bad key as the interpreter does), and helpers that model no CPU.
//!
//! Trusted code calls the other map helpers directly ([`crate::plan::direct_map_op`]), with
//! the general call as the slow path of what the environment declines.

use super::translate::FuncTranslator;
use crate::plan::{self, ArrayBase, ArrayLookup, InlineHelper, Mode};
use crate::runtime::{DIRECT_DECLINED, offsets};
use bpfemu_isa::Reg;
use bpfemu_isa::helpers::id::{GET_SMP_PROCESSOR_ID, MAP_LOOKUP_ELEM, TAIL_CALL};
use bpfemu_isa::uapi::Errno;
use bpfemu_vm::MapOp;
use bpfemu_vm::xdp::helpers::misc::BPF_LOOP_MAX;
use cranelift_codegen::ir::{
    BlockArg, FuncRef, InstBuilder, MemFlagsData, Value,
    condcodes::IntCC,
    types::{I32, I64},
};

/// `bpf_loop`'s inline E2BIG: `-E2BIG` by a 32-bit move, zero-extended.
const E2BIG_32: i64 = (-Errno::E2BIG.0) as u32 as i64;

impl FuncTranslator<'_, '_> {
    /// r0 of helper `id` through its fast path, when it has one here; the builder continues
    /// after it.
    pub(crate) fn inline_helper(&mut self, id: i32, pc: usize) -> Option<Value> {
        Some(
            match plan::inline_helper(id, self.known.get(Reg::R1), self.arrays)? {
                InlineHelper::CpuId => self.inline_cpu_id(pc),
                InlineHelper::ArrayLookup(array) => self.inline_array_lookup(array, pc),
            },
        )
    }

    /// The entry and function of the callback of a `bpf_loop` call run as a loop here
    /// ([`plan::loop_callback`]).
    pub(crate) fn loop_callback(&mut self, id: i32) -> Option<(usize, FuncRef)> {
        let entry = plan::loop_callback(id, self.known, self.prog_index, self.mode)?;
        Some((entry, *self.callees.get(&entry)?))
    }

    /// `bpf_loop(nr, callback, ctx, 0)` as the kernel's inline form: E2BIG (a 32-bit move)
    /// for more than `BPF_LOOP_MAX` loops by all 64 bits of r1, else the callback called with
    /// (index, ctx) until it returns nonzero or `nr` calls were made; r0 = the calls made.
    pub(crate) fn inline_bpf_loop(
        &mut self,
        (entry, callee): (usize, FuncRef),
        pc: usize,
    ) -> Value {
        let nr = self.get(Reg::R1);
        let loop_ctx = self.get(Reg::R3);
        let head = self.b.create_block();
        let index = self.b.append_block_param(head, I64);
        let body = self.b.create_block();
        let join = self.b.create_block();
        let r0 = self.b.append_block_param(join, I64);
        let too_many = self
            .b
            .ins()
            .icmp_imm_s(IntCC::UnsignedGreaterThan, nr, BPF_LOOP_MAX as i64);
        let e2big = self.b.ins().iconst(I64, E2BIG_32);
        let zero = self.b.ins().iconst(I64, 0);
        self.b.ins().brif(
            too_many,
            join,
            &[BlockArg::Value(e2big)],
            head,
            &[BlockArg::Value(zero)],
        );
        // The head is sealed once the loop's back edge is in.
        self.b.switch_to_block(head);
        let done = self
            .b
            .ins()
            .icmp(IntCC::UnsignedGreaterThanOrEqual, index, nr);
        self.b
            .ins()
            .brif(done, join, &[BlockArg::Value(index)], body, &[]);
        self.enter(body);
        let zero = self.b.ins().iconst(I64, 0);
        let args = [index, loop_ctx, zero, zero, zero];
        let returned = self.call_function(entry, callee, args, pc);
        let calls = self.b.ins().iadd_imm_s(index, 1);
        let stop = self.b.ins().icmp_imm_s(IntCC::NotEqual, returned, 0);
        self.b.ins().brif(
            stop,
            join,
            &[BlockArg::Value(calls)],
            head,
            &[BlockArg::Value(calls)],
        );
        self.b.seal_block(head);
        self.enter(join);
        r0
    }

    /// The run's CPU, or `u64::MAX` when the helpers model none.
    fn run_cpu(&mut self) -> Value {
        self.env.load_field(&mut self.b, offsets::CPU)
    }

    fn inline_cpu_id(&mut self, pc: usize) -> Value {
        let cpu = self.run_cpu();
        let known = self
            .b
            .ins()
            .icmp_imm_s(IntCC::NotEqual, cpu, u64::MAX as i64);
        let fast = self.b.create_block();
        self.with_slow_path(known, fast, GET_SMP_PROCESSOR_ID, pc, |_| cpu)
    }

    fn inline_array_lookup(&mut self, array: ArrayLookup, pc: usize) -> Value {
        let key_addr = self.b.use_var(self.regs[Reg::R2.index()]);
        // The key must be readable: proven by the verifier in trusted mode, in the function's
        // own frame for the checked fast path.
        let key_ok = match self.mode {
            Mode::Trusted => None,
            Mode::Checked => Some(self.in_own_frame(key_addr, 4)),
        };
        let (base, fast_ok) = match array.base {
            ArrayBase::Fixed(_) => (None, key_ok),
            ArrayBase::PerCpu { table, copies } => {
                let cpu = self.run_cpu();
                let cpu_ok = self
                    .b
                    .ins()
                    .icmp_imm_s(IntCC::UnsignedLessThan, cpu, copies as i64);
                let ok = match key_ok {
                    Some(key_ok) => self.b.ins().band(key_ok, cpu_ok),
                    None => cpu_ok,
                };
                (Some((table, cpu)), Some(ok))
            }
        };
        let emit_fast = |t: &mut Self| {
            let index = t.b.ins().load(I32, MemFlagsData::new(), key_addr, 0);
            let index = t.b.ins().uextend(I64, index);
            let base = match (array.base, base) {
                (ArrayBase::Fixed(base), _) => t.b.ins().iconst(I64, base as i64),
                (_, Some((table, cpu))) => {
                    let slot = t.b.ins().imul_imm_u(cpu, 8);
                    let entry = t.b.ins().iadd_imm_s(slot, table as i64);
                    t.b.ins().load(I64, MemFlagsData::trusted(), entry, 0)
                }
                _ => unreachable!("a per-CPU base comes with its table"),
            };
            let offset = t.b.ins().imul_imm_u(index, array.slot_size as i64);
            let addr = t.b.ins().iadd(base, offset);
            let in_bounds =
                t.b.ins()
                    .icmp_imm_s(IntCC::UnsignedLessThan, index, array.max_entries as i64);
            let null = t.b.ins().iconst(I64, 0);
            t.b.ins().select(in_bounds, addr, null)
        };
        match fast_ok {
            // A plain array in trusted mode: nothing left for the helper.
            None => emit_fast(self),
            Some(ok) => {
                let fast = self.b.create_block();
                self.with_slow_path(ok, fast, MAP_LOOKUP_ELEM, pc, emit_fast)
            }
        }
    }

    /// Map helper `op` (helper `id`) through its direct runtime entry: r1-r4 in, r0 out; the
    /// general call when the environment declines.
    pub(crate) fn direct_map_op(&mut self, op: MapOp, id: i32, pc: usize) -> Value {
        let args: Vec<Value> = (1..=op.arity() as u8)
            .map(|r| self.get(Reg::new(r).expect("r1-r4")))
            .collect();
        let r0 = self.env.call_map_op(&mut self.b, op, &args);
        let answered = self
            .b
            .ins()
            .icmp_imm_s(IntCC::NotEqual, r0, DIRECT_DECLINED as i64);
        let fast = self.b.create_block();
        self.with_slow_path(answered, fast, id, pc, |_| r0)
    }

    /// `bpf_tail_call` in trusted code, made as the kernel's JIT makes it: the runtime says
    /// where it goes (`jit_tail_call`, no register array, no status) and the jump is made
    /// here; a fall-through leaves r0 0, as the helper does; the general call when the
    /// runtime declines.
    pub(crate) fn direct_tail_call(&mut self, pc: usize) -> Value {
        let prog_array = self.get(Reg::R2);
        let index = self.get(Reg::R3);
        let target = self.env.call_tail_call(&mut self.b, prog_array, index);
        let answered = self
            .b
            .ins()
            .icmp_imm_s(IntCC::NotEqual, target, DIRECT_DECLINED as i64);
        let fast = self.b.create_block();
        self.with_slow_path(answered, fast, TAIL_CALL, pc, |t| {
            let goes = t.b.ins().icmp_imm_s(IntCC::NotEqual, target, 0);
            let jump = t.b.create_block();
            let falls = t.b.create_block();
            t.b.ins().brif(goes, jump, &[], falls, &[]);
            t.enter(jump);
            t.emit_tail_jump(target);
            t.enter(falls);
            t.b.ins().iconst(I64, 0)
        })
    }

    /// `if cond { fast(self) } else { the helper call }`, joined: r0 of whichever ran.
    fn with_slow_path(
        &mut self,
        cond: Value,
        fast: cranelift_codegen::ir::Block,
        id: i32,
        pc: usize,
        emit_fast: impl FnOnce(&mut Self) -> Value,
    ) -> Value {
        let slow = self.b.create_block();
        let join = self.b.create_block();
        let r0 = self.b.append_block_param(join, I64);
        self.b.ins().brif(cond, fast, &[], slow, &[]);
        self.b.set_cold_block(slow);
        self.enter(fast);
        let v = emit_fast(self);
        self.b.ins().jump(join, &[BlockArg::Value(v)]);
        self.enter(slow);
        let v = self.emit_helper_call(id, pc);
        self.b.ins().jump(join, &[BlockArg::Value(v)]);
        self.enter(join);
        r0
    }
}
