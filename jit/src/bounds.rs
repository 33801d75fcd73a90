//! The memory-check strategy, apart from the opcodes: how a load or store reaches host memory
//! in each [`Mode`].
//!
//! - **Checked**: an access that lies wholly inside the function's own stack frame is done
//!   inline (the frame is a region of the vm's memory whose bounds the function knows); any
//!   other access is first validated by the runtime against the live regions, which reports a
//!   fault exactly as the interpreter does, or answers a converted ctx field with its value.
//! - **Trusted**: the verifier has proven every access safe, so loads and stores go straight
//!   to host memory. The one exception is a 4-byte load inside the converted ctx region
//!   (`struct xdp_md`), whose value is a 64-bit field the runtime supplies, until the verifier's
//!   xlated program rewrites ctx loads itself.

use crate::Mode;
use crate::environ::RuntimeEnv;
use crate::runtime::{STATUS_OK, STATUS_SPECIAL};
use crate::translate::FuncTranslator;
use bpfemu_isa::Size;
use bpfemu_vm::STACK_SIZE;
use cranelift_codegen::ir::{
    BlockArg, InstBuilder, MemFlagsData, Type, Value,
    condcodes::IntCC,
    types::{I8, I16, I32, I64},
};

/// The CLIF type of an access of `size`.
pub fn mem_type(size: Size) -> Type {
    match size {
        Size::B => I8,
        Size::H => I16,
        Size::W => I32,
        Size::DW => I64,
    }
}

fn host_flags() -> MemFlagsData {
    MemFlagsData::new()
}

impl<E: RuntimeEnv> FuncTranslator<'_, '_, E> {
    /// True when `[addr, addr + len)` lies inside this function's stack frame.
    pub(crate) fn in_own_frame(&mut self, addr: Value, len: usize) -> Value {
        let lo = self.b.ins().iadd_imm_s(self.fp, -(STACK_SIZE as i64));
        let off = self.b.ins().isub(addr, lo);
        self.b.ins().icmp_imm_s(
            IntCC::UnsignedLessThanOrEqual,
            off,
            (STACK_SIZE - len) as i64,
        )
    }

    /// A load of `size` at `addr`, zero-extended to 64 bits (or the 64-bit value of a
    /// converted ctx field). `acquire` makes it a load-acquire.
    pub(crate) fn emit_load(&mut self, addr: Value, size: Size, acquire: bool, pc: usize) -> Value {
        let len = size.bytes();
        let host = self.b.create_block();
        let slow = self.b.create_block();
        let join = self.b.create_block();
        let value = self.b.append_block_param(join, I64);
        match self.mode {
            Mode::Checked => {
                let fast = self.in_own_frame(addr, len);
                self.b.ins().brif(fast, host, &[], slow, &[]);
            }
            Mode::Trusted if size == Size::W => {
                let off = self.b.ins().isub(addr, self.ctx_base);
                let in_ctx = self
                    .b
                    .ins()
                    .icmp(IntCC::UnsignedLessThan, off, self.ctx_len);
                self.b.ins().brif(in_ctx, slow, &[], host, &[]);
            }
            Mode::Trusted => {
                self.b.ins().jump(host, &[]);
            }
        }
        // The runtime's check: a fault, plain memory, or a ctx field's value.
        self.b.switch_to_block(slow);
        self.sync_executed();
        let status = self
            .env
            .check_access(&mut self.b, addr, len as u64, false, pc);
        let ok = self
            .b
            .ins()
            .icmp_imm_s(IntCC::Equal, status, STATUS_OK as i64);
        let not_ok = self.b.create_block();
        self.b.ins().brif(ok, host, &[], not_ok, &[]);
        self.b.switch_to_block(not_ok);
        let special = self
            .b
            .ins()
            .icmp_imm_s(IntCC::Equal, status, STATUS_SPECIAL as i64);
        let ctx_value = self.b.create_block();
        let propagate = self.propagate;
        self.b.ins().brif(
            special,
            ctx_value,
            &[],
            propagate,
            &[BlockArg::Value(status)],
        );
        self.b.switch_to_block(ctx_value);
        let v = self.env.scratch(&mut self.b);
        self.b.ins().jump(join, &[BlockArg::Value(v)]);
        // The host access.
        self.b.switch_to_block(host);
        let ty = mem_type(size);
        let raw = if acquire {
            self.b.ins().atomic_load(ty, host_flags(), addr)
        } else {
            self.b.ins().load(ty, host_flags(), addr, 0)
        };
        let v = if ty == I64 {
            raw
        } else {
            self.b.ins().uextend(I64, raw)
        };
        self.b.ins().jump(join, &[BlockArg::Value(v)]);
        self.b.switch_to_block(join);
        value
    }

    /// Makes sure `[addr, addr + len)` may be written; in checked mode a fault stops the run.
    pub(crate) fn emit_write_check(&mut self, addr: Value, len: usize, pc: usize) {
        if self.mode == Mode::Trusted {
            return;
        }
        let ok = self.b.create_block();
        let slow = self.b.create_block();
        let fast = self.in_own_frame(addr, len);
        self.b.ins().brif(fast, ok, &[], slow, &[]);
        self.b.switch_to_block(slow);
        self.sync_executed();
        let status = self
            .env
            .check_access(&mut self.b, addr, len as u64, true, pc);
        let passed = self
            .b
            .ins()
            .icmp_imm_s(IntCC::Equal, status, STATUS_OK as i64);
        let propagate = self.propagate;
        self.b
            .ins()
            .brif(passed, ok, &[], propagate, &[BlockArg::Value(status)]);
        self.b.switch_to_block(ok);
    }

    /// A store of the low `size` bytes of `value` (64-bit) at `addr`.
    pub(crate) fn emit_store(
        &mut self,
        addr: Value,
        size: Size,
        value: Value,
        release: bool,
        pc: usize,
    ) {
        self.emit_write_check(addr, size.bytes(), pc);
        let ty = mem_type(size);
        let v = if ty == I64 {
            value
        } else {
            self.b.ins().ireduce(ty, value)
        };
        if release {
            self.b.ins().atomic_store(host_flags(), v, addr);
        } else {
            self.b.ins().store(host_flags(), v, addr, 0);
        }
    }

    /// Flags of host accesses the atomic translation uses.
    pub(crate) fn atomic_flags(&self) -> MemFlagsData {
        host_flags()
    }
}
