//! Everything that leaves straight-line code: helper calls (with the kernel's inlined ones and
//! tail calls), kfunc calls, bpf-to-bpf calls into a kept frame, legacy packet loads and
//! exits. Calls into the runtime go through [`FnCompiler::call_rt`]; r1-r5 survive them (as
//! they do in the other tiers: the interpreter leaves them as they were), r0 gets the result.

use super::x86::*;
use super::{
    Arg, COUNT, CTX, FRAME_TOP, Flow, FnCompiler, IN_REGS, MAY_GOTO, OUT_REGS, REGS, SAVE, T1, T2,
    entry,
};
use crate::plan::{self, ArrayBase, ArrayLookup, FrameMode, InlineHelper, Mode};
use crate::runtime::{self, DIRECT_DECLINED, FRAME_SLOT, MAY_GOTO_SLOT, STATUS_SPECIAL, offsets};
use bpfemu_isa::helpers::id::MAP_LOOKUP_ELEM;
use bpfemu_isa::{CallTarget, Reg, Size};
use bpfemu_vm::MapOp;
use bpfemu_vm::{MAX_CALL_FRAMES, STACK_SIZE};

fn out_slot(i: usize) -> Mem {
    mem(RSP, OUT_REGS + i as i32 * 8)
}

impl FnCompiler<'_> {
    pub(crate) fn call(&mut self, target: CallTarget, pc: usize) -> Flow {
        match target {
            CallTarget::Helper(id) => self.call_helper(id, pc),
            CallTarget::Kfunc { btf_id, off } => self.call_kfunc(btf_id, off, pc),
            CallTarget::Local(rel) => return self.call_local(rel, pc),
        }
        Flow::Next
    }

    /// Returns r0 through the register array the function was called with.
    pub(crate) fn exit(&mut self) -> Flow {
        self.a.store(Sz::Q, mem(CTX, offsets::EXECUTED), COUNT);
        self.a.load_zx(Sz::Q, T2, mem(RSP, IN_REGS));
        self.a.store(Sz::Q, mem(T2, 0), RAX);
        self.a.mov_imm32(RAX, 0);
        self.a.jmp(self.epilogue);
        Flow::Ended
    }

    /// Leaves with the status in rax unless it is OK (0).
    fn propagate_unless_ok(&mut self) {
        self.a.test_rr(Sz::Q, RAX, RAX);
        self.a.jcc(Cc::Ne, self.epilogue);
    }

    fn store_args(&mut self) {
        for (i, &r) in REGS.iter().enumerate().take(6).skip(1) {
            self.a.store(Sz::Q, out_slot(i), r);
        }
    }

    fn load_args(&mut self) {
        for (i, &r) in REGS.iter().enumerate().take(6).skip(1) {
            self.a.load_zx(Sz::Q, r, out_slot(i));
        }
    }

    fn call_helper(&mut self, id: i32, pc: usize) {
        match plan::inline_helper(id, self.known.get(Reg::R1), self.arrays) {
            Some(InlineHelper::CpuId) => {
                let (slow, done) = (self.a.label(), self.a.label());
                self.a.load_zx(Sz::Q, T2, mem(CTX, offsets::CPU));
                self.a.arith_ri(Sz::Q, Arith::Cmp, T2, -1);
                self.a.jcc(Cc::E, slow);
                self.a.mov_rr(Sz::Q, RAX, T2);
                self.a.jmp(done);
                self.a.bind(slow);
                self.helper_through_runtime(id, pc);
                self.a.bind(done);
            }
            Some(InlineHelper::ArrayLookup(array)) => self.inline_array_lookup(array, pc),
            None => match plan::direct_map_op(id, self.mode) {
                Some(op) => self.direct_map_op(op, id, pc),
                None => self.helper_through_runtime(id, pc),
            },
        }
    }

    /// Map helper `op` (helper `id`) through its direct runtime entry: r1-r4 in the argument
    /// registers after the context, r0 in rax; the general call when the environment
    /// declines. r1-r5 come back from the out slots, as after any helper.
    fn direct_map_op(&mut self, op: MapOp, id: i32, pc: usize) {
        const ARGS: [R; 4] = [RSI, RDX, RCX, R8];
        self.store_args();
        for (i, &to) in ARGS.iter().enumerate().take(op.arity()) {
            self.a.load_zx(Sz::Q, to, out_slot(i + 1));
        }
        self.call_rt(runtime::map_op_entry(op) as u64, &[]);
        let (slow, done) = (self.a.label(), self.a.label());
        self.a.mov_imm64(T1, DIRECT_DECLINED);
        self.a.arith_rr(Sz::Q, Arith::Cmp, RAX, T1);
        self.a.jcc(Cc::E, slow);
        self.load_args();
        self.a.jmp(done);
        self.a.bind(slow);
        self.load_args();
        self.helper_through_runtime(id, pc);
        self.a.bind(done);
    }

    /// An array lookup as the kernel inlines it: r0 = the element of the u32 key at r2, or 0
    /// past the end; a per-CPU array on a CPU the helpers do not model asks the helper, and
    /// so does checked code whose key is not in the function's own frame.
    fn inline_array_lookup(&mut self, array: ArrayLookup, pc: usize) {
        let (slow, null, done) = (self.a.label(), self.a.label(), self.a.label());
        let key = REGS[Reg::R2.index()];
        let checked = self.mode == Mode::Checked;
        if checked {
            // The key is read inline only where it is surely readable, as in Cranelift's
            // checked code: anywhere else the helper reads it, and faults as the interpreter.
            self.a.lea(T1, mem(key, STACK_SIZE as i32));
            self.a.arith_rm(Sz::Q, Arith::Sub, T1, mem(RSP, FRAME_TOP));
            self.a
                .arith_ri(Sz::Q, Arith::Cmp, T1, (STACK_SIZE - 4) as i32);
            self.a.jcc(Cc::A, slow);
        }
        // `slow` also: a per-CPU array on a CPU the helpers do not model.
        match array.base {
            ArrayBase::Fixed(base) => self.a.mov_imm64(T1, base),
            ArrayBase::PerCpu { table, copies } => {
                self.a.load_zx(Sz::Q, T1, mem(CTX, offsets::CPU));
                self.a.mov_imm64(T2, copies);
                self.a.arith_rr(Sz::Q, Arith::Cmp, T1, T2);
                self.a.jcc(Cc::Ae, slow);
                self.a.mov_imm64(T2, table);
                self.a.load_zx(Sz::Q, T1, mem_index(T2, T1, 8, 0));
            }
        }
        self.a.load_zx(Sz::W, T2, mem(key, 0));
        self.a.mov_imm32(RAX, array.max_entries);
        self.a.arith_rr(Sz::Q, Arith::Cmp, T2, RAX);
        self.a.jcc(Cc::Ae, null);
        match i32::try_from(array.slot_size) {
            Ok(slot) => self.a.imul_rri(Sz::Q, T2, T2, slot),
            Err(_) => {
                self.a.mov_imm64(RAX, array.slot_size);
                self.a.imul_rr(Sz::Q, T2, RAX);
            }
        }
        self.a.lea(RAX, mem_index(T1, T2, 1, 0));
        self.a.jmp(done);
        self.a.bind(null);
        self.a.mov_imm32(RAX, 0);
        if checked || matches!(array.base, ArrayBase::PerCpu { .. }) {
            self.a.jmp(done);
            self.a.bind(slow);
            self.helper_through_runtime(MAP_LOOKUP_ELEM, pc);
        }
        self.a.bind(done);
    }

    /// Helper `id` through the runtime: r0 its result; a tail call continues in the target
    /// with this function's registers and frame, and returns to this function's caller.
    fn helper_through_runtime(&mut self, id: i32, pc: usize) {
        self.store_args();
        // r0 as it was, for a tail call.
        self.a.store(Sz::Q, mem(RSP, SAVE), RAX);
        self.a.mov_rr(Sz::Q, T1, RSP);
        self.call_rt(
            entry!(runtime::jit_helper),
            &[
                Arg::Imm(id as u32 as u64),
                Arg::Reg(T1),
                Arg::Imm(pc as u64),
            ],
        );
        let (returned, tail) = (self.a.label(), self.a.label());
        self.a.test_rr(Sz::Q, RAX, RAX);
        self.a.jcc(Cc::E, returned);
        self.a
            .arith_ri(Sz::Q, Arith::Cmp, RAX, STATUS_SPECIAL as i32);
        self.a.jcc(Cc::E, tail);
        self.a.jmp(self.epilogue);

        self.a.bind(tail);
        self.load_args();
        self.a.load_zx(Sz::Q, RAX, mem(RSP, SAVE));
        self.a.load_zx(Sz::Q, T1, mem(RSP, IN_REGS));
        for (i, &r) in REGS.iter().enumerate() {
            self.a.store(Sz::Q, mem(T1, i as i32 * 8), r);
        }
        self.a.load_zx(Sz::Q, T2, mem(RSP, MAY_GOTO));
        self.a.store(Sz::Q, mem(T1, MAY_GOTO_SLOT as i32 * 8), T2);
        self.a.load_zx(Sz::Q, T2, mem(RSP, FRAME_TOP));
        self.a.store(Sz::Q, mem(T1, FRAME_SLOT as i32 * 8), T2);
        self.a.load_zx(Sz::Q, T2, mem(CTX, offsets::SCRATCH));
        self.a.mov_rr(Sz::Q, RDI, CTX);
        self.a.mov_rr(Sz::Q, RSI, T1);
        self.a.call_r(T2);
        self.a.jmp(self.epilogue);

        self.a.bind(returned);
        self.load_args();
        self.a.load_zx(Sz::Q, RAX, mem(CTX, offsets::SCRATCH));
    }

    /// Kfunc `btf_id` of module BTF `off` through the runtime, as a helper that returns.
    fn call_kfunc(&mut self, btf_id: i32, off: i16, pc: usize) {
        self.store_args();
        self.a.mov_rr(Sz::Q, T1, RSP);
        self.call_rt(
            entry!(runtime::jit_kfunc),
            &[
                Arg::Imm(runtime::pack_kfunc(btf_id, off)),
                Arg::Reg(T1),
                Arg::Imm(pc as u64),
            ],
        );
        self.propagate_unless_ok();
        self.load_args();
        self.a.load_zx(Sz::Q, RAX, mem(CTX, offsets::SCRATCH));
    }

    /// A bpf-to-bpf call: the next depth's kept frame (zeroed where code may have written) in
    /// trusted code, a fresh frame from the runtime in checked code; r1-r5 passed, r0
    /// returned, r6-r9 kept (callee-saved), r1-r5 as they were.
    fn call_local(&mut self, rel: i32, pc: usize) -> Flow {
        let target = pc as i64 + 1 + rel as i64;
        let callee = usize::try_from(target)
            .ok()
            .and_then(|t| Some((t, *self.entries.get(&(self.prog_index, t))?)));
        let Some((target, callee)) = callee else {
            let label = self.target_label(pc, rel as i64);
            self.a.jmp(label);
            return Flow::Ended;
        };
        self.spill(1, 5);
        // The frame's top in T2.
        let (slow, have) = (self.a.label(), self.a.label());
        let per_call = self.frames.mode == FrameMode::PerCall;
        if self.frames.enters_inline() {
            self.a.load_zx(Sz::Q, T1, mem(CTX, offsets::DEPTH));
            self.a.arith_ri(Sz::Q, Arith::Add, T1, 1);
            self.a
                .arith_ri(Sz::Q, Arith::Cmp, T1, MAX_CALL_FRAMES as i32);
            self.a.jcc(Cc::Ae, slow);
            self.a
                .load_zx(Sz::Q, T2, mem_index(CTX, T1, 8, offsets::FRAME_TOPS));
            self.a.test_rr(Sz::Q, T2, T2);
            self.a.jcc(Cc::E, slow);
            for offset in self.frames.zeroed_words() {
                self.a.store_imm(Sz::Q, mem(T2, offset), 0);
            }
            self.a.store(Sz::Q, mem(CTX, offsets::DEPTH), T1);
            self.a.jmp(have);
        }
        self.a.bind(slow);
        self.call_rt(
            entry!(runtime::jit_push_frame),
            &[Arg::Imm(pc as u64), Arg::Imm(target as u64)],
        );
        self.propagate_unless_ok();
        self.a.load_zx(Sz::Q, T2, mem(CTX, offsets::SCRATCH));
        self.reload(1, 5);
        self.a.bind(have);

        self.a.store_imm(Sz::Q, out_slot(0), 0);
        for i in 6..=9 {
            self.a.store_imm(Sz::Q, out_slot(i), 0);
        }
        self.store_args();
        self.a.store(Sz::Q, out_slot(Reg::R10.index()), T2);
        self.a.store(Sz::Q, out_slot(FRAME_SLOT), T2);
        self.a.mov_imm64(T1, self.may_goto_loops);
        self.a.store(Sz::Q, out_slot(MAY_GOTO_SLOT), T1);
        self.a.store(Sz::Q, mem(CTX, offsets::EXECUTED), COUNT);
        self.a.mov_rr(Sz::Q, RDI, CTX);
        self.a.mov_rr(Sz::Q, RSI, RSP);
        self.a.call_label(callee);
        self.a.load_zx(Sz::Q, COUNT, mem(CTX, offsets::EXECUTED));
        self.propagate_unless_ok();
        if per_call {
            // The callee's frame leaves the memory ([`FrameMode::PerCall`]): an access to it
            // faults from now on. (A run that stopped leaves its frames to the runtime.)
            self.call_rt(entry!(runtime::jit_pop_frame), &[]);
        } else {
            // The frame stays for the next call at this depth.
            self.a
                .arith_mi(Sz::Q, Arith::Sub, mem(CTX, offsets::DEPTH), 1);
        }
        self.a.load_zx(Sz::Q, RAX, out_slot(0));
        self.reload(1, 5);
        Flow::Next
    }

    /// LD_ABS / LD_IND of `size` at the packet offset in T1: r0 the value; outside the
    /// packet r0 = 0 and the function returns.
    pub(crate) fn legacy_load(&mut self, size: Size, pc: usize) -> Flow {
        self.spill(1, 5);
        self.call_rt(
            entry!(runtime::jit_legacy_load),
            &[
                Arg::Reg(T1),
                Arg::Imm(size.bytes() as u64),
                Arg::Imm(pc as u64),
            ],
        );
        let (loaded, missed) = (self.a.label(), self.a.label());
        self.a.test_rr(Sz::Q, RAX, RAX);
        self.a.jcc(Cc::E, loaded);
        self.a
            .arith_ri(Sz::Q, Arith::Cmp, RAX, STATUS_SPECIAL as i32);
        self.a.jcc(Cc::E, missed);
        self.a.jmp(self.epilogue);
        self.a.bind(missed);
        self.a.mov_imm32(RAX, 0);
        self.exit();
        self.a.bind(loaded);
        self.reload(1, 5);
        self.a.load_zx(Sz::Q, RAX, mem(CTX, offsets::SCRATCH));
        Flow::Next
    }
}
