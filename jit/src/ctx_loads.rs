//! Which 4-byte loads of trusted code cannot read the ctx.
//!
//! Trusted code reads a converted ctx field (`struct xdp_md`, whose fields are 64-bit values
//! underneath) with a 4-byte load, so every 4-byte load tests at run time whether its address
//! lies in the ctx region ([`crate`]'s docs): three blocks and a join for each, which cost
//! compile time and run time alike. A verified program can reach the ctx only through a
//! pointer that started as a function's argument (r1 of an entry, the arguments of a
//! subprogram or a callback) and was copied, offset or spilled to the stack and filled back
//! (an 8-byte load). Anything else in a register is a scalar or a pointer of another kind
//! (the frame, the packet, a map value, a constant), and a load through it goes straight to
//! host memory.
//!
//! The analysis is a forward data flow over one function: for each instruction, the set of
//! registers that *may* hold a ctx pointer, joined (by union) where paths meet. It is only
//! sound for programs a verifier accepted, as trusted code is.

use bpfemu_isa::{AluOp, AtomicOp, CallTarget, Insn, Program, Reg, Size, Source, Width};

/// Registers that may hold a ctx pointer, one bit each.
type MaybeCtx = u16;

const fn bit(r: Reg) -> MaybeCtx {
    1 << r.index()
}

/// r1-r5: what a call leaves undefined.
const ARGS: MaybeCtx = 0b11_1110;

/// Whether each pc is a 4-byte load (`Insn::Load` of `Size::W`) of the function that starts
/// at `entry` (its instructions are the `reached` ones) whose base register cannot hold a ctx
/// pointer there. `successors(pc, insn)` gives the instructions that may run after `pc`
/// within the function (instruction starts of the program). Dense vectors by pc, not maps:
/// the baseline compiler runs this for every function, and maps were a third of its time.
pub(crate) fn host_word_loads<S: IntoIterator<Item = usize>>(
    prog: &Program,
    entry: usize,
    reached: impl Fn(usize) -> bool,
    successors: impl Fn(usize, &Insn) -> S,
) -> Vec<bool> {
    // At an entry only r10, the frame pointer, is known not to be the ctx.
    let mut state: Vec<Option<MaybeCtx>> = vec![None; prog.len()];
    state[entry] = Some(!bit(Reg::R10));
    let mut work = vec![entry];
    while let Some(pc) = work.pop() {
        let (Some(insn), Some(before)) = (prog.insn(pc), state[pc]) else {
            continue;
        };
        let out = transfer(insn, before);
        for next in successors(pc, insn) {
            if !reached(next) {
                continue;
            }
            let known = state[next];
            let joined = known.unwrap_or(0) | out;
            if known != Some(joined) {
                state[next] = Some(joined);
                work.push(next);
            }
        }
    }
    state
        .iter()
        .enumerate()
        .map(|(pc, maybe)| match (maybe, prog.insn(pc)) {
            (
                Some(maybe),
                Some(Insn::Load {
                    size: Size::W, src, ..
                }),
            ) => maybe & bit(*src) == 0,
            _ => false,
        })
        .collect()
}

/// The registers that may hold a ctx pointer after `insn`, given those before it.
fn transfer(insn: &Insn, before: MaybeCtx) -> MaybeCtx {
    let maybe = |r: Reg| before & bit(r) != 0;
    match *insn {
        // A copy: the source's kind.
        Insn::Alu {
            width: Width::W64,
            op: AluOp::Mov,
            dst,
            src,
        } => match src {
            Source::Reg(r) if maybe(r) => before | bit(dst),
            _ => before & !bit(dst),
        },
        // 64-bit arithmetic: a pointer moved by an offset stays a pointer of its kind (the
        // verifier allows only adding and subtracting scalars); either operand counts.
        Insn::Alu {
            width: Width::W64,
            dst,
            src: Source::Reg(r),
            ..
        } if maybe(r) => before | bit(dst),
        Insn::Alu {
            width: Width::W64, ..
        } => before,
        // Scalars: 32-bit results, negation, sign extension, byte swaps, arena casts,
        // constants and map or code addresses.
        Insn::Alu { dst, .. }
        | Insn::Neg { dst, .. }
        | Insn::MovSx { dst, .. }
        | Insn::AddrSpaceCast { dst, .. }
        | Insn::Endian { dst, .. }
        | Insn::LdImm64 { dst, .. } => before & !bit(dst),
        // A narrower load reads a scalar, or a converted ctx field (a packet pointer); an
        // 8-byte one may fill a spilled ctx pointer.
        Insn::Load { size, dst, .. } => match size {
            Size::DW => before | bit(dst),
            _ => before & !bit(dst),
        },
        Insn::Atomic { op, dst, src, .. } => match op {
            AtomicOp::LoadAcquire => before | bit(dst),
            AtomicOp::Cmpxchg => before | bit(Reg::R0),
            _ if op.fetches() => before | bit(src),
            _ => before,
        },
        // Legacy packet loads and helpers return scalars or pointers of other kinds, and
        // leave r1-r5 undefined.
        Insn::LdAbs { .. } | Insn::LdInd { .. } | Insn::Call(CallTarget::Helper(_)) => {
            (before | ARGS) & !bit(Reg::R0)
        }
        // A subprogram may return the pointer it was given.
        Insn::Call(_) => before | ARGS | bit(Reg::R0),
        Insn::Store { .. }
        | Insn::StoreReg { .. }
        | Insn::Ja { .. }
        | Insn::Jump { .. }
        | Insn::MayGoto { .. }
        | Insn::Exit => before,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bpfemu_isa::asm::assemble_kernel;

    fn direct(text: &str) -> Vec<usize> {
        let prog = Program::decode(assemble_kernel(text).unwrap()).unwrap();
        let direct = host_word_loads(
            &prog,
            0,
            |pc| prog.insn(pc).is_some(),
            |pc, insn| match insn {
                Insn::Exit => vec![],
                Insn::Jump { off, .. } => vec![pc + 1, (pc as i64 + 1 + *off as i64) as usize],
                Insn::Ja { off, .. } => vec![(pc as i64 + 1 + *off as i64) as usize],
                _ => vec![pc + insn.slots()],
            },
        );
        (0..direct.len()).filter(|&pc| direct[pc]).collect()
    }

    #[test]
    fn loads_through_the_frame_and_packet_pointers_are_direct() {
        let text = "
            r2 = *(u32 *)(r1 +0)
            r3 = *(u32 *)(r2 +0)
            r4 = *(u32 *)(r10 -8)
            r0 = 0
            exit";
        // r1 may be the ctx; r2 holds a field's value, r10 the frame.
        assert_eq!(direct(text), [1, 2]);
    }

    #[test]
    fn copies_offsets_and_fills_may_be_the_ctx() {
        let text = "
            r6 = r1
            r6 += 4
            r2 = *(u32 *)(r6 +0)
            *(u64 *)(r10 -8) = r1
            r7 = *(u64 *)(r10 -8)
            r3 = *(u32 *)(r7 +0)
            w6 = w6
            r4 = *(u32 *)(r6 +0)
            exit";
        // Only the load through a 32-bit result is direct.
        assert_eq!(direct(text), [7]);
    }

    #[test]
    fn joins_keep_what_any_path_may_hold() {
        let text = "
            r2 = r10
            if r3 > 5 goto pc+1
            r2 = r1
            r4 = *(u32 *)(r2 +0)
            r2 = 0
            r5 = *(u32 *)(r2 +0)
            exit";
        assert_eq!(direct(text), [5]);
    }

    #[test]
    fn calls_leave_their_arguments_unknown() {
        let text = "
            r1 = r10
            call map_lookup_elem#1
            r2 = *(u32 *)(r0 +0)
            r3 = *(u32 *)(r1 +0)
            call map_lookup_elem#1
            exit";
        // A helper's r0 is never the ctx; r1-r5 are undefined after it.
        assert_eq!(direct(text), [2]);
    }
}
