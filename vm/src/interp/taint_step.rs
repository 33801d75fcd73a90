//! The interpreter's taint tracking (see [`crate::taint`]): what each instruction does to the
//! taint of registers, memory and control, computed from the machine's state before the
//! instruction runs; helper calls are followed on both sides of the call.

use super::Machine;
use crate::helpers::HelperOutcome;
use crate::taint::{Footprint, TaintSource, TaintState, is_source, join};
use bpfemu_isa::{AluOp, AtomicOp, Insn, Reg, Source};

/// What a helper call's taint needs from before the call, for after it.
pub(super) struct PendingHelper {
    id: i32,
    footprint: Footprint,
    /// Argument registers' taint, joined with control.
    args: Option<TaintSource>,
    /// The taint of what the helper reads (registers, bytes, key sets).
    input: Option<TaintSource>,
    /// For a map update: what the stored value's taint is made of.
    update: Option<PendingUpdate>,
}

/// A map update's key (to find the stored value after the call), the key's taint, and the
/// taint of each byte of the value the program passed.
struct PendingUpdate {
    key: Vec<u8>,
    key_taint: Option<TaintSource>,
    value: Vec<Option<TaintSource>>,
}

impl Machine<'_> {
    pub(super) fn tstate(&mut self) -> &mut TaintState {
        self.taint.as_deref_mut().expect("tracking taint")
    }

    fn treg(&self, r: Reg) -> Option<TaintSource> {
        self.taint.as_deref().and_then(|t| t.reg(r.index()))
    }

    fn source_taint(&self, src: Source) -> Option<TaintSource> {
        match src {
            Source::Reg(r) => self.treg(r),
            Source::Imm(_) => None,
        }
    }

    /// The taint of the `len` bytes at `addr`.
    fn tmem(&self, addr: u64, len: usize) -> Option<TaintSource> {
        self.taint
            .as_deref()
            .and_then(|t| t.mem(self.mem, addr, len))
    }

    /// Taint effects of every instruction but calls and exits (handled where they run).
    pub(super) fn taint_before(&mut self, insn: &Insn) {
        match *insn {
            Insn::Alu { op, dst, src, .. } => {
                let operand = self.source_taint(src);
                let taint = if op == AluOp::Mov {
                    operand
                } else {
                    join(self.treg(dst), operand)
                };
                self.tstate().set_reg(dst.index(), taint);
            }
            Insn::Neg { dst, .. } | Insn::Endian { dst, .. } => {
                let t = self.treg(dst);
                self.tstate().set_reg(dst.index(), t);
            }
            Insn::MovSx { dst, src, .. } | Insn::AddrSpaceCast { dst, src, .. } => {
                let t = self.treg(src);
                self.tstate().set_reg(dst.index(), t);
            }
            Insn::LdImm64 { dst, .. } => self.tstate().set_reg(dst.index(), None),
            Insn::LdAbs { size, imm } => self.taint_legacy_load(size.bytes(), imm as u64, None),
            Insn::LdInd { size, src, imm } => {
                let offset = self.reg(src).wrapping_add(imm as i64 as u64);
                let t = self.treg(src);
                self.taint_legacy_load(size.bytes(), offset, t);
            }
            Insn::Load {
                size,
                dst,
                src,
                off,
                ..
            } => self.taint_load(size.bytes(), dst, src, off),
            Insn::Store { size, dst, off, .. } => self.taint_store(size.bytes(), dst, off, None),
            Insn::StoreReg {
                size,
                dst,
                src,
                off,
            } => {
                let value = self.treg(src);
                self.taint_store(size.bytes(), dst, off, value);
            }
            Insn::Atomic {
                size,
                op,
                dst,
                src,
                off,
            } => match op {
                AtomicOp::LoadAcquire => self.taint_load(size.bytes(), dst, src, off),
                AtomicOp::StoreRelease => {
                    let value = self.treg(src);
                    self.taint_store(size.bytes(), dst, off, value);
                }
                _ => self.taint_atomic(size.bytes(), op, dst, src, off),
            },
            Insn::Jump { dst, src, .. } => {
                let t = join(self.treg(dst), self.source_taint(src));
                self.taint_control(t);
            }
            Insn::Ja { .. } | Insn::MayGoto { .. } | Insn::Call(_) | Insn::Exit => {}
        }
    }

    fn taint_legacy_load(&mut self, n: usize, offset: u64, index: Option<TaintSource>) {
        let bytes = self
            .mem
            .packet()
            .map(|p| p.base().wrapping_add(offset as i32 as i64 as u64))
            .and_then(|addr| self.tmem(addr, n));
        let packet = self.taint.as_deref().and_then(TaintState::packet);
        self.tstate().set_reg(0, join(join(bytes, index), packet));
    }

    fn taint_load(&mut self, n: usize, dst: Reg, src: Reg, off: i16) {
        let addr = self.reg(src).wrapping_add(off as i64 as u64);
        let t = join(self.treg(src), self.tmem(addr, n));
        self.tstate().set_reg(dst.index(), t);
    }

    fn taint_store(&mut self, n: usize, dst: Reg, off: i16, value: Option<TaintSource>) {
        let addr = self.reg(dst).wrapping_add(off as i64 as u64);
        let address = self.treg(dst);
        let mem = &*self.mem;
        let taint = self.taint.as_deref_mut().expect("tracking taint");
        taint.store(mem, addr, n, value, address);
    }

    fn taint_atomic(&mut self, n: usize, op: AtomicOp, dst: Reg, src: Reg, off: i16) {
        let addr = self.reg(dst).wrapping_add(off as i64 as u64);
        let mut t = join(self.treg(src), self.tmem(addr, n));
        if op == AtomicOp::Cmpxchg {
            t = join(t, self.treg(Reg::R0));
        }
        let address = self.treg(dst);
        let mem = &*self.mem;
        let taint = self.taint.as_deref_mut().expect("tracking taint");
        taint.store(mem, addr, n, t, address);
        let fetched = join(t, address);
        if op == AtomicOp::Cmpxchg {
            taint.set_reg(0, fetched);
        } else if op.fetches() {
            taint.set_reg(src.index(), fetched);
        }
    }

    /// Before a helper call: its footprint, and the taint of what it reads.
    pub(super) fn taint_before_helper(&mut self, id: i32, args: [u64; 5]) -> PendingHelper {
        let footprint = self.helpers.footprint(id, args, self.mem);
        self.taint_before_call(id, footprint)
    }

    /// Before a kfunc call: as before a helper's, from the kfunc's footprint (no kfunc is a
    /// taint source; the pending call carries helper id 0, which names none).
    pub(super) fn taint_before_kfunc(
        &mut self,
        btf_id: i32,
        off: i16,
        args: [u64; 5],
    ) -> PendingHelper {
        let footprint = self.helpers.kfunc_footprint(btf_id, off, args, self.mem);
        self.taint_before_call(0, footprint)
    }

    fn taint_before_call(&mut self, id: i32, footprint: Footprint) -> PendingHelper {
        let taint = self.taint.as_deref().expect("tracking taint");
        let regs = (1..=5).fold(None, |acc, r| join(acc, taint.reg(r)));
        let args_taint = join(regs, taint.control());
        let mem = &*self.mem;
        let bytes = |(addr, len): (u64, usize)| taint.mem(mem, addr, len);
        let mut update = None;
        let input = match &footprint {
            Footprint::Memory { reads, .. } => {
                reads.iter().fold(args_taint, |acc, &r| join(acc, bytes(r)))
            }
            Footprint::MapLookup { map, key } | Footprint::MapDelete { map, key } => {
                join(join(args_taint, bytes(*key)), taint.key_set(*map))
            }
            Footprint::MapUpdate { map, key, value } => {
                let key_taint = join(args_taint, bytes(*key));
                let key_bytes = mem
                    .slice(key.0, key.1)
                    .map(<[u8]>::to_vec)
                    .unwrap_or_default();
                let value_taints = (0..value.1 as u64)
                    .map(|i| taint.mem(mem, value.0.wrapping_add(i), 1))
                    .collect();
                update = Some(PendingUpdate {
                    key: key_bytes,
                    key_taint,
                    value: value_taints,
                });
                join(key_taint, taint.key_set(*map))
            }
            _ => args_taint,
        };
        PendingHelper {
            id,
            footprint,
            args: args_taint,
            input,
            update,
        }
    }

    /// After a helper call: the result's taint, and what the helper wrote.
    pub(super) fn taint_after_helper(&mut self, pending: PendingHelper, outcome: &HelperOutcome) {
        let (prog, pc) = (self.cur, self.pc);
        let value_addr = match (&pending.footprint, &pending.update) {
            (Footprint::MapUpdate { map, .. }, Some(update)) => {
                self.helpers.value_addr(*map, &update.key, self.mem)
            }
            _ => None,
        };
        // Set after the call's own effects, so that they are in place when the paths not
        // taken are tainted.
        let mut control = None;
        let taint = self.taint.as_deref_mut().expect("tracking taint");
        let input = pending.input;
        match &pending.footprint {
            Footprint::Memory { writes, .. } => {
                // Bytes written from tainted inputs become tainted; clean inputs leave them as
                // they were (the exact bytes written are not known).
                if let Some(t) = input {
                    for &(addr, len) in writes {
                        taint.set_bytes(addr, len, Some(t));
                    }
                }
            }
            Footprint::MapUpdate { map, .. } | Footprint::MapDelete { map, .. } => {
                let key_taint = match &pending.update {
                    Some(update) => update.key_taint,
                    None => input,
                };
                if let Some(t) = key_taint {
                    taint.taint_key_set(*map, t);
                }
                if let (Some(addr), Some(update)) = (value_addr, &pending.update) {
                    let extra = join(update.key_taint, pending.args);
                    for (i, t) in update.value.iter().enumerate() {
                        taint.set_bytes(addr.wrapping_add(i as u64), 1, join(*t, extra));
                    }
                }
            }
            Footprint::PacketBounds => {
                if let Some(t) = input {
                    taint.taint_packet(t);
                }
            }
            Footprint::TailCall | Footprint::Unknown => control = input,
            Footprint::Args | Footprint::MapLookup { .. } => {}
        }
        // Records of bpf_perf_event_output, bpf_ringbuf_output and bpf_ringbuf_submit.
        if matches!(pending.id, 25 | 130 | 132)
            && let Some(t) = input
        {
            taint.taint_events(t);
        }
        if matches!(outcome, HelperOutcome::Callbacks(_)) {
            control = control.or(input);
        }
        let result = if is_source(pending.id) {
            Some(TaintSource {
                helper: pending.id,
                prog,
                pc,
            })
        } else {
            input
        };
        self.taint_control(control);
        if let HelperOutcome::Return(_) = outcome {
            self.tstate().set_reg(0, result);
        }
    }
}
