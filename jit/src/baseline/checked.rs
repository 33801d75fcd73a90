//! Checked mode's memory accesses: every load, store and atomic validated against the live
//! regions with the strategy both tiers share ([`crate`]'s docs), so that checked baseline code faults
//! exactly where the interpreter (and Cranelift's checked code) does.
//!
//! Each access is one template with a small inline fast path and a cold stub after the
//! function's blocks:
//!
//! ```text
//! lea  t2, [base + off]               ; the address, kept in t2 for the access itself
//! lea  t1, [t2 + STACK_SIZE]
//! sub  t1, [rsp + FRAME_TOP]          ; t1 = addr - frame bottom
//! cmp  t1, STACK_SIZE - len
//! jbe  ok                             ; inside the function's own frame
//! mov  t1, t2
//! sub  t1, [ctx + READ_LO]            ; (WRITE_LO for a store)
//! cmp  t1, [ctx + READ_LEN]
//! jae  slow                           ; starts outside the cached region
//! add  t1, len
//! cmp  t1, [ctx + READ_LEN]
//! ja   slow                           ; ends outside it
//! ok:  the access through [t2]
//! ```
//!
//! The cached region's test takes two comparisons, as Cranelift's does: `off + len <= size`
//! alone would let an address up to `len` bytes below the region wrap into it, and
//! `off <= size - len` would wrap for a region shorter than the access.
//!
//! The stub (`slow`) is the runtime's full check: [`runtime::jit_read`], which answers a load
//! with its value (a converted ctx field's too) or faults, and [`runtime::jit_write_check`],
//! which validates a store or faults. A fault leaves the function with the runtime's status;
//! the error, with the instruction index, waits in the context as it does for Cranelift's
//! code. An aligned 4-byte load of the converted ctx is answered in the stub from the field
//! values before the runtime is asked, as Cranelift's checked code does inline (ctx loads are
//! few, and off the hot path of packet parsing). r0-r5 live in caller-saved registers: the
//! stub keeps them in the frame's save area across the call.
//!
//! A misaligned atomic read-modify-write goes to [`runtime::jit_atomic_unaligned`] (after the
//! write check, as in Cranelift's checked code): a locked instruction would split the bus
//! lock.

use super::memory::sz;
use super::x86::*;
use super::{Arg, CTX, FRAME_TOP, FnCompiler, T1, T2, entry, host};
use crate::runtime::{self, offsets, pack_access};
use bpfemu_isa::{AtomicOp, Reg, Size};
use bpfemu_vm::STACK_SIZE;

/// The out-of-line part of one checked access, emitted after the function's blocks.
pub(crate) enum Slow {
    /// A load that missed the fast path: the address in t2; `dst` gets the value and the
    /// code goes on at `done`.
    Read {
        label: Label,
        done: Label,
        size: Size,
        sign_extend: bool,
        dst: Reg,
        pc: usize,
    },
    /// A store (or atomic) that missed the fast path: the address in t2, computed again from
    /// `base + off` after the runtime's call, and the code goes on at `ok`.
    Write {
        label: Label,
        ok: Label,
        size: Size,
        base: Reg,
        off: i16,
        pc: usize,
    },
    /// A misaligned atomic, validated already: the address in t2; the old value goes where
    /// the operation puts it and the code goes on at `done`.
    UnalignedAtomic {
        label: Label,
        done: Label,
        size: Size,
        op: AtomicOp,
        src: Reg,
        pc: usize,
    },
}

impl FnCompiler<'_> {
    /// The fast path of an access of `len` bytes at t2: jumps to `ok` when it lies inside the
    /// function's own frame or the region last found for the same kind of access, to `slow`
    /// otherwise. Clobbers t1.
    fn fast_path(&mut self, len: usize, write: bool, ok: Label, slow: Label) {
        let (lo, size) = match write {
            false => (offsets::READ_LO, offsets::READ_LEN),
            true => (offsets::WRITE_LO, offsets::WRITE_LEN),
        };
        // The frame is the one the runtime made (FRAME_SLOT), whatever the program did to r10.
        self.a.lea(T1, mem(T2, STACK_SIZE as i32));
        self.a.arith_rm(Sz::Q, Arith::Sub, T1, mem(RSP, FRAME_TOP));
        self.a
            .arith_ri(Sz::Q, Arith::Cmp, T1, (STACK_SIZE - len) as i32);
        self.a.jcc(Cc::Be, ok);
        // The cached region: `len` 0 when there is none, which no offset is below.
        self.a.mov_rr(Sz::Q, T1, T2);
        self.a.arith_rm(Sz::Q, Arith::Sub, T1, mem(CTX, lo));
        self.a.arith_rm(Sz::Q, Arith::Cmp, T1, mem(CTX, size));
        self.a.jcc(Cc::Ae, slow);
        // `off + len` cannot wrap when `off < size`: regions are far below the top of memory.
        self.a.arith_ri(Sz::Q, Arith::Add, T1, len as i32);
        self.a.arith_rm(Sz::Q, Arith::Cmp, T1, mem(CTX, size));
        self.a.jcc(Cc::A, slow);
    }

    /// A checked `dst = *(size *)(src + off)`, zero- or sign-extended (a load-acquire is the
    /// same on x86).
    pub(crate) fn checked_load(
        &mut self,
        size: Size,
        sign_extend: bool,
        dst: Reg,
        src: Reg,
        off: i16,
        pc: usize,
    ) {
        let (ok, done, label) = (self.a.label(), self.a.label(), self.a.label());
        self.a.lea(T2, mem(host(src), off as i32));
        self.fast_path(size.bytes(), false, ok, label);
        self.a.bind(ok);
        let d = host(dst);
        if sign_extend {
            self.a.load_sx(sz(size), d, mem(T2, 0));
        } else {
            self.a.load_zx(sz(size), d, mem(T2, 0));
        }
        self.a.bind(done);
        self.push_slow(Slow::Read {
            label,
            done,
            size,
            sign_extend,
            dst,
            pc,
        });
    }

    /// Validates a write of `size` at `base + off`, leaving the address in t2.
    fn checked_write(&mut self, size: Size, base: Reg, off: i16, pc: usize) {
        let (ok, label) = (self.a.label(), self.a.label());
        self.a.lea(T2, mem(host(base), off as i32));
        self.fast_path(size.bytes(), true, ok, label);
        self.a.bind(ok);
        self.push_slow(Slow::Write {
            label,
            ok,
            size,
            base,
            off,
            pc,
        });
    }

    /// A checked `*(size *)(dst + off) = imm`.
    pub(crate) fn checked_store_imm(
        &mut self,
        size: Size,
        dst: Reg,
        off: i16,
        imm: i32,
        pc: usize,
    ) {
        self.checked_write(size, dst, off, pc);
        self.a.store_imm(sz(size), mem(T2, 0), imm);
    }

    /// A checked `*(size *)(dst + off) = src` (a store-release is the same on x86).
    pub(crate) fn checked_store(&mut self, size: Size, dst: Reg, src: Reg, off: i16, pc: usize) {
        self.checked_write(size, dst, off, pc);
        self.a.store(sz(size), mem(T2, 0), host(src));
    }

    /// A checked atomic: the write check, then the hardware's locked instruction at an
    /// aligned address or the runtime's at a misaligned one.
    pub(crate) fn checked_atomic(
        &mut self,
        size: Size,
        op: AtomicOp,
        dst: Reg,
        src: Reg,
        off: i16,
        pc: usize,
    ) {
        match op {
            AtomicOp::LoadAcquire => return self.checked_load(size, false, dst, src, off, pc),
            AtomicOp::StoreRelease => return self.checked_store(size, dst, src, off, pc),
            _ => {}
        }
        self.checked_write(size, dst, off, pc);
        let (done, label) = (self.a.label(), self.a.label());
        self.a.test_ri(Sz::Q, T2, size.bytes() as i32 - 1);
        self.a.jcc(Cc::Ne, label);
        self.a.mov_rr(Sz::Q, T1, T2);
        self.atomic_at_t1(size, op, host(src));
        self.a.bind(done);
        self.push_slow(Slow::UnalignedAtomic {
            label,
            done,
            size,
            op,
            src,
            pc,
        });
    }

    /// Emits the stub of one access (after the function's blocks).
    pub(crate) fn emit_slow(&mut self, slow: Slow) {
        match slow {
            Slow::Read {
                label,
                done,
                size,
                sign_extend,
                dst,
                pc,
            } => {
                self.a.bind(label);
                let d = host(dst);
                if size == Size::W {
                    self.ctx_field(d, sign_extend, done, true);
                }
                self.call_rt_or_leave(
                    entry!(runtime::jit_read),
                    &[Arg::Reg(T2), Arg::Imm(pack_access(pc, size.bytes()))],
                );
                // The value as the runtime read it (a ctx field's is 64 bits), then extended
                // as the interpreter extends it.
                self.a.load_zx(Sz::Q, d, mem(CTX, offsets::SCRATCH));
                if sign_extend && size != Size::DW {
                    self.a.movsx_rr(Sz::Q, sz(size), d, d);
                }
                self.a.jmp(done);
            }
            Slow::Write {
                label,
                ok,
                size,
                base,
                off,
                pc,
            } => {
                self.a.bind(label);
                self.call_rt_or_leave(
                    entry!(runtime::jit_write_check),
                    &[Arg::Reg(T2), Arg::Imm(pack_access(pc, size.bytes()))],
                );
                // t2 did not survive the call.
                self.a.lea(T2, mem(host(base), off as i32));
                self.a.jmp(ok);
            }
            Slow::UnalignedAtomic {
                label,
                done,
                size,
                op,
                src,
                pc,
            } => {
                self.a.bind(label);
                // The operand in t1: the argument registers are r1-r4's, which the moves into
                // them would overwrite. The expected value is r0's rax, which they do not.
                self.a.mov_rr(Sz::Q, T1, host(src));
                let op_size = runtime::pack_atomic(op, size.bytes());
                self.call_rt_or_leave(
                    entry!(runtime::jit_atomic_unaligned),
                    &[
                        Arg::Reg(T2),
                        Arg::Imm(op_size),
                        Arg::Reg(T1),
                        Arg::Reg(RAX),
                        Arg::Imm(pc as u64),
                    ],
                );
                let old = match op {
                    AtomicOp::Cmpxchg => Some(RAX),
                    _ if op.fetches() => Some(host(src)),
                    _ => None,
                };
                if let Some(r) = old {
                    self.a.load_zx(Sz::Q, r, mem(CTX, offsets::SCRATCH));
                }
                self.a.jmp(done);
            }
        }
    }

    /// Calls runtime entry point `f`, which may fault: r0-r5 kept in the save area across the
    /// call, and the function left with the status in rax unless it is OK (0).
    fn call_rt_or_leave(&mut self, f: u64, args: &[Arg]) {
        self.spill(0, 5);
        self.call_rt(f, args);
        self.a.test_rr(Sz::Q, RAX, RAX);
        self.a.jcc(Cc::Ne, self.epilogue);
        self.reload(0, 5);
    }
}
