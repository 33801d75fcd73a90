//! Loads, stores and atomics, straight to host memory (trusted code: the verifier proved every
//! access safe). A 4-byte load that may read the converted ctx tests its address against the
//! ctx region and reads the field's 64-bit value from the runtime's field values there
//! ([`crate`]'s docs say why; `ctx_loads.rs` finds the loads that skip the test).
//! Atomic read-modify-writes are the hardware's locked instructions; the fetching `or`,
//! `and` and `xor`, which x86 has no instruction for, are `cmpxchg` loops.

use super::x86::*;
use super::{COUNT, CTX, FnCompiler, SAVE, T1, T2, host};
use crate::runtime::offsets;
use bpfemu_isa::{AtomicOp, Reg, Size};

/// The operand size of an access of `size`.
pub(crate) fn sz(size: Size) -> Sz {
    match size {
        Size::B => Sz::B,
        Size::H => Sz::H,
        Size::W => Sz::W,
        Size::DW => Sz::Q,
    }
}

impl FnCompiler<'_> {
    /// `dst = *(size *)(src + off)`, zero- or sign-extended; `acquire` for a load-acquire
    /// (a plain load on x86, whose loads all acquire).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn load(
        &mut self,
        size: Size,
        sign_extend: bool,
        dst: Reg,
        src: Reg,
        off: i16,
        acquire: bool,
        pc: usize,
    ) {
        let (d, s) = (host(dst), host(src));
        let direct = size != Size::W || (!acquire && self.host_word_loads[pc]);
        if direct {
            self.host_load(size, sign_extend, d, mem(s, off as i32));
            return;
        }
        // The verifier allows only aligned ctx loads: no alignment test.
        let done = self.a.label();
        self.a.lea(T2, mem(s, off as i32));
        self.ctx_field(d, sign_extend, done, false);
        self.host_load(size, sign_extend, d, mem(T2, 0));
        self.a.bind(done);
    }

    /// A 4-byte load from the address in t2 when it is in the converted ctx (and 4-aligned,
    /// when `aligned_only`): `d` gets the field's value from the field values and the code
    /// goes on at `done`; any other address falls through, t2 intact.
    pub(crate) fn ctx_field(&mut self, d: R, sign_extend: bool, done: Label, aligned_only: bool) {
        let other = self.a.label();
        self.a.mov_rr(Sz::Q, T1, T2);
        self.a
            .arith_rm(Sz::Q, Arith::Sub, T1, mem(CTX, offsets::CTX_BASE));
        self.a
            .arith_rm(Sz::Q, Arith::Cmp, T1, mem(CTX, offsets::CTX_LEN));
        self.a.jcc(Cc::Ae, other);
        if aligned_only {
            self.a.test_ri(Sz::Q, T1, 3);
            self.a.jcc(Cc::Ne, other);
        }
        // Field `off / 4` is the u64 at `values + 8 * (off / 4)`. t2 is not needed past here:
        // the field's value is final.
        self.a.load_zx(Sz::Q, T2, mem(CTX, offsets::CTX_VALUES));
        self.a.load_zx(Sz::Q, d, mem_index(T2, T1, 2, 0));
        if sign_extend {
            self.a.movsx_rr(Sz::Q, Sz::W, d, d);
        }
        self.a.jmp(done);
        self.a.bind(other);
    }

    fn host_load(&mut self, size: Size, sign_extend: bool, d: R, m: Mem) {
        if sign_extend {
            self.a.load_sx(sz(size), d, m);
        } else {
            self.a.load_zx(sz(size), d, m);
        }
    }

    pub(crate) fn atomic(
        &mut self,
        size: Size,
        op: AtomicOp,
        dst: Reg,
        src: Reg,
        off: i16,
        pc: usize,
    ) {
        let s = host(src);
        match op {
            AtomicOp::LoadAcquire => return self.load(size, false, dst, src, off, true, pc),
            AtomicOp::StoreRelease => {
                // x86 stores are release stores.
                self.a.store(sz(size), mem(host(dst), off as i32), s);
                return;
            }
            _ => {}
        }
        self.a.lea(T1, mem(host(dst), off as i32));
        self.atomic_at_t1(size, op, s);
    }

    /// The read-modify-write `op` of `size` at the address in t1 with operand `s`, on the
    /// hardware's locked instructions (the address is aligned).
    pub(crate) fn atomic_at_t1(&mut self, size: Size, op: AtomicOp, s: R) {
        let w = sz(size);
        let at = mem(T1, 0);
        match op {
            AtomicOp::Add => self.a.lock_arith_mr(w, Arith::Add, at, s),
            AtomicOp::Or => self.a.lock_arith_mr(w, Arith::Or, at, s),
            AtomicOp::And => self.a.lock_arith_mr(w, Arith::And, at, s),
            AtomicOp::Xor => self.a.lock_arith_mr(w, Arith::Xor, at, s),
            AtomicOp::FetchAdd => {
                self.a.mov_rr(Sz::Q, T2, s);
                self.a.lock_xadd(w, at, T2);
                self.a.mov_rr(w, s, T2);
            }
            AtomicOp::Xchg => {
                self.a.mov_rr(Sz::Q, T2, s);
                self.a.xchg_mr(w, at, T2);
                self.a.mov_rr(w, s, T2);
            }
            AtomicOp::Cmpxchg => {
                // r0 (rax) is the expected value and receives the old one, zero-extended.
                self.a.lock_cmpxchg(w, at, s);
                if w == Sz::W {
                    self.a.mov_rr(Sz::W, RAX, RAX);
                }
            }
            AtomicOp::FetchOr | AtomicOp::FetchAnd | AtomicOp::FetchXor => {
                let a = match op {
                    AtomicOp::FetchOr => Arith::Or,
                    AtomicOp::FetchAnd => Arith::And,
                    _ => Arith::Xor,
                };
                // A cmpxchg loop: the old value in rax (r0, kept in the save area), the
                // operand in the count's register (the count waits in the context).
                self.a.store(Sz::Q, mem(RSP, SAVE), RAX);
                self.a.store(Sz::Q, mem(CTX, offsets::EXECUTED), COUNT);
                self.a.mov_rr(Sz::Q, COUNT, s);
                self.a.load_zx(w, RAX, at);
                let again = self.a.label();
                self.a.bind(again);
                self.a.mov_rr(Sz::Q, T2, RAX);
                self.a.arith_rr(w, a, T2, COUNT);
                self.a.lock_cmpxchg(w, at, T2);
                self.a.jcc(Cc::Ne, again);
                self.a.mov_rr(w, T2, RAX);
                self.a.load_zx(Sz::Q, RAX, mem(RSP, SAVE));
                self.a.load_zx(Sz::Q, COUNT, mem(CTX, offsets::EXECUTED));
                self.a.mov_rr(Sz::Q, s, T2);
            }
            AtomicOp::LoadAcquire | AtomicOp::StoreRelease => {
                unreachable!("callers treat them as a load and a store")
            }
        }
    }
}
