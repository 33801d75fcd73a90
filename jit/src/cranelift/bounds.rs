//! The memory-check strategy, apart from the opcodes: how a load or store reaches host memory
//! in each [`Mode`].
//!
//! - **Checked**: an access that lies wholly inside the function's own stack frame is done
//!   inline (the frame is a region of the vm's memory whose bounds the function knows), and
//!   so is one inside the region the runtime found for the last checked read (or write): the
//!   packet a parser walks, the map value a program updates. Any other load is done by the
//!   runtime, which reports a fault exactly as the interpreter does or answers with the value
//!   (a converted ctx field's too, never cached), and any other store is first validated by
//!   it. The runtime forgets the cached regions whenever regions may change (helpers, kfuncs,
//!   calls and returns), so a cached hit is always an access the full check allows. These
//!   slow paths are cold blocks of one call and one status test.
//! - **Trusted**: the verifier has proven every access safe, so loads and stores go straight
//!   to host memory. The one exception is a 4-byte load inside the converted ctx region
//!   (`struct xdp_md`), whose value is a 64-bit field: it is read from the field values the
//!   runtime keeps (their address is in the run context), as the kernel's converted load
//!   reads `xdp_buff`. A 4-byte load whose base register cannot hold a ctx pointer
//!   (`ctx_loads.rs`) skips that test.

use super::translate::{FuncTranslator, mem_type};
use crate::plan::Mode;
use crate::runtime::{STATUS_OK, offsets};
use bpfemu_isa::Size;
use bpfemu_vm::STACK_SIZE;
use cranelift_codegen::ir::{
    Block, BlockArg, InstBuilder, MemFlagsData, Value, condcodes::IntCC, types::I64,
};

// The checks branch on the status itself: any status but OK stops the run.
const _: () = assert!(STATUS_OK == 0);

fn host_flags() -> MemFlagsData {
    MemFlagsData::new()
}

impl FuncTranslator<'_, '_> {
    /// True when `[addr, addr + len)` lies inside this function's stack frame.
    pub(crate) fn in_own_frame(&mut self, addr: Value, len: usize) -> Value {
        let off = self.b.ins().isub(addr, self.frame_bottom);
        self.b.ins().icmp_imm_s(
            IntCC::UnsignedLessThanOrEqual,
            off,
            (STACK_SIZE - len) as i64,
        )
    }

    /// True when `[addr, addr + len)` lies inside the region the runtime last found for a
    /// checked read (`lo_field`, `len_field`: [`offsets::READ_LO`] and `READ_LEN`) or write
    /// (`WRITE_LO`, `WRITE_LEN`). The runtime empties both whenever regions may change (a
    /// helper, a kfunc, a call or return), so a hit is an access the full check would allow.
    fn in_cached_region(
        &mut self,
        addr: Value,
        len: usize,
        lo_field: i32,
        len_field: i32,
    ) -> Value {
        let lo = self.env.load_field(&mut self.b, lo_field);
        let size = self.env.load_field(&mut self.b, len_field);
        let off = self.b.ins().isub(addr, lo);
        // `off + len` cannot wrap when `off < size`: regions are far below the top of memory.
        let starts_inside = self.b.ins().icmp(IntCC::UnsignedLessThan, off, size);
        let end = self.b.ins().iadd_imm_s(off, len as i64);
        let ends_inside = self.b.ins().icmp(IntCC::UnsignedLessThanOrEqual, end, size);
        self.b.ins().band(starts_inside, ends_inside)
    }

    /// A checked access that may go straight to host memory: inside the function's own frame,
    /// else inside the region last found for the same kind of access. Branches to `hit` or
    /// `miss`.
    fn branch_on_fast_path(
        &mut self,
        addr: Value,
        len: usize,
        write: bool,
        hit: Block,
        miss: Block,
    ) {
        let second = self.b.create_block();
        let own = self.in_own_frame(addr, len);
        self.b.ins().brif(own, hit, &[], second, &[]);
        self.enter(second);
        let cached = match write {
            false => self.in_cached_region(addr, len, offsets::READ_LO, offsets::READ_LEN),
            true => self.in_cached_region(addr, len, offsets::WRITE_LO, offsets::WRITE_LEN),
        };
        self.b.ins().brif(cached, hit, &[], miss, &[]);
    }

    /// A load of `size` at `addr`, zero-extended to 64 bits (or the 64-bit value of a
    /// converted ctx field). `acquire` makes it a load-acquire.
    pub(crate) fn emit_load(&mut self, addr: Value, size: Size, acquire: bool, pc: usize) -> Value {
        match self.mode {
            // Only a 4-byte load may read a converted ctx field.
            Mode::Trusted if size != Size::W || self.host_word_loads.get(pc) == Some(&true) => {
                self.host_load(addr, size, acquire)
            }
            Mode::Trusted => self.trusted_word_load(addr, acquire),
            Mode::Checked => self.checked_load(addr, size, acquire, pc),
        }
    }

    /// A trusted 4-byte load: a converted ctx field's 64-bit value when `addr` is in the ctx
    /// (the verifier allows only aligned 4-byte loads of its fields there), read straight
    /// from the field values, else host memory.
    fn trusted_word_load(&mut self, addr: Value, acquire: bool) -> Value {
        let ctx_base = self.env.load_field(&mut self.b, offsets::CTX_BASE);
        let ctx_len = self.env.load_field(&mut self.b, offsets::CTX_LEN);
        let off = self.b.ins().isub(addr, ctx_base);
        let outside = self
            .b
            .ins()
            .icmp(IntCC::UnsignedGreaterThanOrEqual, off, ctx_len);
        let host = self.b.create_block();
        let field = self.b.create_block();
        let join = self.b.create_block();
        let value = self.b.append_block_param(join, I64);
        self.b.ins().brif(outside, host, &[], field, &[]);
        // Field `off / 4` is the u64 at `values + 8 * (off / 4)`, and `off` is a multiple of 4.
        self.enter(field);
        let values = self.env.load_field(&mut self.b, offsets::CTX_VALUES);
        let scaled = self.b.ins().iadd(off, off);
        let at = self.b.ins().iadd(values, scaled);
        let v = self.b.ins().load(I64, host_flags(), at, 0);
        self.b.ins().jump(join, &[BlockArg::Value(v)]);
        self.enter(host);
        let v = self.host_load(addr, Size::W, acquire);
        self.b.ins().jump(join, &[BlockArg::Value(v)]);
        self.enter(join);
        value
    }

    /// A checked load: inline inside the function's own frame or the region the last checked
    /// read found, else the runtime's read.
    fn checked_load(&mut self, addr: Value, size: Size, acquire: bool, pc: usize) -> Value {
        let len = size.bytes();
        let host = self.b.create_block();
        let slow = self.b.create_block();
        let join = self.b.create_block();
        let value = self.b.append_block_param(join, I64);
        if size == Size::W {
            // A 4-byte load may be a converted ctx field's: read from the field values when it
            // is an aligned one (anything else in the ctx faults, in the runtime).
            let ctx_field = self.b.create_block();
            self.branch_on_fast_path(addr, len, false, host, ctx_field);
            self.enter(ctx_field);
            let v = self.checked_ctx_field(addr, slow);
            self.b.ins().jump(join, &[BlockArg::Value(v)]);
        } else {
            self.branch_on_fast_path(addr, len, false, host, slow);
        }
        self.b.set_cold_block(slow);
        // The runtime's read: a fault, or the value (of memory or of a ctx field). The value is
        // taken before the status test, so that a successful read goes straight to the join.
        self.enter(slow);
        let status = self.env.checked_read(&mut self.b, addr, len, pc);
        let v = self.env.scratch(&mut self.b);
        let propagate = self.propagate;
        self.b.ins().brif(
            status,
            propagate,
            &[BlockArg::Value(status)],
            join,
            &[BlockArg::Value(v)],
        );
        // The host access.
        self.enter(host);
        let v = self.host_load(addr, size, acquire);
        self.b.ins().jump(join, &[BlockArg::Value(v)]);
        self.enter(join);
        value
    }

    /// The value of the converted ctx field at `addr` when `addr` is an aligned field of the
    /// ctx region (the only 4-byte loads the ctx answers), else a branch to `other`.
    fn checked_ctx_field(&mut self, addr: Value, other: Block) -> Value {
        let ctx_base = self.env.load_field(&mut self.b, offsets::CTX_BASE);
        let ctx_len = self.env.load_field(&mut self.b, offsets::CTX_LEN);
        let off = self.b.ins().isub(addr, ctx_base);
        let inside = self.b.ins().icmp(IntCC::UnsignedLessThan, off, ctx_len);
        let misaligned = self.b.ins().band_imm_s(off, 3);
        let aligned = self.b.ins().icmp_imm_s(IntCC::Equal, misaligned, 0);
        let field_ok = self.b.ins().band(inside, aligned);
        let field = self.b.create_block();
        self.b.ins().brif(field_ok, field, &[], other, &[]);
        self.enter(field);
        // Field `off / 4` is the u64 at `values + 8 * (off / 4)`.
        let values = self.env.load_field(&mut self.b, offsets::CTX_VALUES);
        let scaled = self.b.ins().iadd(off, off);
        let at = self.b.ins().iadd(values, scaled);
        self.b.ins().load(I64, host_flags(), at, 0)
    }

    /// The load itself, zero-extended to 64 bits.
    fn host_load(&mut self, addr: Value, size: Size, acquire: bool) -> Value {
        let ty = mem_type(size);
        let raw = if acquire {
            self.b.ins().atomic_load(ty, host_flags(), addr)
        } else {
            self.b.ins().load(ty, host_flags(), addr, 0)
        };
        if ty == I64 {
            raw
        } else {
            self.b.ins().uextend(I64, raw)
        }
    }

    /// Makes sure `[addr, addr + len)` may be written; in checked mode a fault stops the run.
    pub(crate) fn emit_write_check(&mut self, addr: Value, len: usize, pc: usize) {
        if self.mode == Mode::Trusted {
            return;
        }
        let ok = self.b.create_block();
        let slow = self.b.create_block();
        self.branch_on_fast_path(addr, len, true, ok, slow);
        self.b.set_cold_block(slow);
        self.enter(slow);
        let status = self.env.check_write(&mut self.b, addr, len, pc);
        let propagate = self.propagate;
        self.b
            .ins()
            .brif(status, propagate, &[BlockArg::Value(status)], ok, &[]);
        self.enter(ok);
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
