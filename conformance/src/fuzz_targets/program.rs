//! Programs made from fuzzer bytes, for the targets that hold the verifier and the JIT to
//! account.
//!
//! [`xdp_program`] builds what XDP programs are made of, right and wrong: packet bounds
//! checks (exact, off by one, missing), packet loads at constant and variable offsets,
//! arithmetic on loaded values, branches on derived values, stack spills and fills (sometimes
//! of uninitialised slots), array map lookups with and without the null check, helper calls
//! that clobber the argument registers, bounded and unbounded loops, early returns. Every
//! choice comes from the bytes, so an input always means the same program.
//!
//! [`alu_program`] is a straight mix of every arithmetic, jump and memory instruction over an
//! input buffer in r1 (length in r2), for comparing the interpreter with the JIT on programs
//! nobody verified.

use arbitrary::{Result, Unstructured};
use bpfemu_isa::{
    AluOp, AtomicOp, ByteOrder, CallTarget, Insn, JmpCond, LdImm64Kind, Reg, Size, Source, Width,
};

/// The one map generated XDP programs use: an array of 4 values of [`MAP_VALUE_SIZE`] bytes,
/// referenced by `ld_imm64` with imm 0 (its index; the kernel side puts its fd there).
pub const MAP_VALUE_SIZE: u32 = 16;
pub const MAP_ENTRIES: u32 = 4;

use bpfemu_isa::helpers::id;

/// A jump whose target is known only once the program is laid out.
#[derive(Clone, Copy, Debug)]
enum Target {
    /// The common exit (`r0 = XDP_DROP; exit`).
    Exit,
    /// The start of the block `n` blocks after the current one (or the exit).
    Skip(usize),
    /// An absolute slot (back-edges of loops).
    Slot(usize),
}

#[derive(Clone, Copy, Debug)]
enum Item {
    Insn(Insn),
    Jump {
        width: Width,
        cond: JmpCond,
        dst: Reg,
        src: Source,
        target: Target,
    },
}

/// Lays out blocks of items, resolving jump targets.
#[derive(Default)]
struct Builder {
    blocks: Vec<Vec<Item>>,
}

impl Builder {
    fn block(&mut self) -> &mut Vec<Item> {
        if self.blocks.is_empty() {
            self.blocks.push(Vec::new());
        }
        self.blocks.last_mut().expect("one block at least")
    }

    fn new_block(&mut self) {
        self.blocks.push(Vec::new());
    }

    fn insn(&mut self, insn: Insn) {
        self.block().push(Item::Insn(insn));
    }

    fn jump(&mut self, width: Width, cond: JmpCond, dst: Reg, src: Source, target: Target) {
        self.block().push(Item::Jump {
            width,
            cond,
            dst,
            src,
            target,
        });
    }

    /// The slot the next item of the current block goes to.
    fn next_slot(&self) -> usize {
        self.blocks
            .iter()
            .flatten()
            .map(|item| match item {
                Item::Insn(i) => i.slots(),
                Item::Jump { .. } => 1,
            })
            .sum()
    }

    /// The program, ending with the common exit block.
    fn finish(self) -> Vec<Insn> {
        let slots = |items: &[Item]| -> usize {
            items
                .iter()
                .map(|item| match item {
                    Item::Insn(i) => i.slots(),
                    Item::Jump { .. } => 1,
                })
                .sum()
        };
        let mut starts = Vec::with_capacity(self.blocks.len() + 1);
        let mut at = 0;
        for block in &self.blocks {
            starts.push(at);
            at += slots(block);
        }
        let exit = at;
        starts.push(exit);
        let mut out = Vec::new();
        let mut slot = 0;
        for (index, block) in self.blocks.iter().enumerate() {
            for item in block {
                match *item {
                    Item::Insn(insn) => {
                        slot += insn.slots();
                        out.push(insn);
                    }
                    Item::Jump {
                        width,
                        cond,
                        dst,
                        src,
                        target,
                    } => {
                        let to = match target {
                            Target::Exit => exit,
                            Target::Skip(n) => starts[(index + n).min(self.blocks.len())],
                            Target::Slot(s) => s,
                        };
                        let off = to as i64 - slot as i64 - 1;
                        slot += 1;
                        out.push(Insn::Jump {
                            width,
                            cond,
                            dst,
                            src,
                            off: off as i16,
                        });
                    }
                }
            }
        }
        out.push(mov64(Reg::R0, 1));
        out.push(Insn::Exit);
        out
    }
}

fn mov64(dst: Reg, imm: i32) -> Insn {
    Insn::Alu {
        width: Width::W64,
        op: AluOp::Mov,
        dst,
        src: Source::Imm(imm),
    }
}

fn alu64(op: AluOp, dst: Reg, src: Source) -> Insn {
    Insn::Alu {
        width: Width::W64,
        op,
        dst,
        src,
    }
}

fn load(size: Size, dst: Reg, src: Reg, off: i16) -> Insn {
    Insn::Load {
        size,
        sign_extend: false,
        dst,
        src,
        off,
    }
}

fn any_size(u: &mut Unstructured) -> Result<Size> {
    u.choose(&[Size::B, Size::H, Size::W, Size::DW]).copied()
}

fn size_bytes(size: Size) -> i32 {
    match size {
        Size::B => 1,
        Size::H => 2,
        Size::W => 4,
        Size::DW => 8,
    }
}

const CONDS: [JmpCond; 11] = JmpCond::ALL;

/// Reloads data (r2) and data_end (r3) from the ctx kept in r6.
fn reload_packet_pointers(b: &mut Builder) {
    b.insn(load(Size::W, Reg::R2, Reg::R6, 0));
    b.insn(load(Size::W, Reg::R3, Reg::R6, 4));
}

/// An XDP program from fuzzer bytes; ctx in r6, data in r2, data_end in r3, values in r5,
/// r7 and r8, loop counters in r9.
pub fn xdp_program(u: &mut Unstructured) -> Result<Vec<Insn>> {
    let mut b = Builder::default();
    b.insn(alu64(AluOp::Mov, Reg::R6, Source::Reg(Reg::R1)));
    reload_packet_pointers(&mut b);
    b.insn(mov64(Reg::R5, 0));
    b.insn(mov64(Reg::R7, 0));
    b.insn(mov64(Reg::R8, 0));
    let blocks = u.int_in_range(1..=12)?;
    for _ in 0..blocks {
        b.new_block();
        xdp_block(u, &mut b)?;
    }
    b.new_block();
    if u.arbitrary()? {
        b.insn(mov64(Reg::R0, u.int_in_range(0..=4)?));
    } else {
        b.insn(alu64(AluOp::Mov, Reg::R0, Source::Reg(Reg::R7)));
        b.insn(alu64(AluOp::And, Reg::R0, Source::Imm(3)));
    }
    b.insn(Insn::Exit);
    Ok(b.finish())
}

fn xdp_block(u: &mut Unstructured, b: &mut Builder) -> Result<()> {
    match u.int_in_range(0..=10)? {
        // A bounds check: data + n > data_end goes to the exit.
        0 | 1 => {
            let n = u.int_in_range(1..=64)?;
            b.insn(alu64(AluOp::Mov, Reg::R4, Source::Reg(Reg::R2)));
            b.insn(alu64(AluOp::Add, Reg::R4, Source::Imm(n)));
            let cond = *u.choose(&[JmpCond::Gt, JmpCond::Gt, JmpCond::Ge])?;
            b.jump(
                Width::W64,
                cond,
                Reg::R4,
                Source::Reg(Reg::R3),
                Target::Exit,
            );
        }
        // A packet load at a constant offset (within what was checked, or not).
        2 | 3 => {
            let size = any_size(u)?;
            let off = u.int_in_range(0..=70)?;
            b.insn(load(size, Reg::R5, Reg::R2, off));
        }
        // Arithmetic on loaded values.
        4 => {
            let op = *u.choose(&[
                AluOp::Add,
                AluOp::Sub,
                AluOp::And,
                AluOp::Or,
                AluOp::Xor,
                AluOp::Lsh,
                AluOp::Rsh,
                AluOp::Arsh,
                AluOp::Mul,
                AluOp::Div,
                AluOp::Mod,
            ])?;
            let width = *u.choose(&[Width::W64, Width::W32])?;
            let src = if u.arbitrary()? {
                Source::Reg(*u.choose(&[Reg::R5, Reg::R8])?)
            } else {
                let limit = if matches!(op, AluOp::Lsh | AluOp::Rsh | AluOp::Arsh) {
                    if width == Width::W64 { 63 } else { 31 }
                } else {
                    0xffff
                };
                Source::Imm(u.int_in_range(0..=limit)?)
            };
            b.insn(Insn::Alu {
                width,
                op,
                dst: Reg::R7,
                src,
            });
        }
        // A branch on a derived value, skipping blocks.
        5 => {
            let cond = *u.choose(&CONDS)?;
            let width = *u.choose(&[Width::W64, Width::W32])?;
            let imm = u.int_in_range(-8..=300)?;
            let skip = u.int_in_range(1..=3)?;
            b.jump(width, cond, Reg::R7, Source::Imm(imm), Target::Skip(skip));
        }
        // A spill and a fill (of this slot or another, maybe never written).
        6 => {
            let slot = u.int_in_range(1..=8)? * 8;
            let size = any_size(u)?;
            let off = -(slot as i16)
                + i16::from(u.int_in_range(0u8..=7)?) / size_bytes(size) as i16
                    * size_bytes(size) as i16;
            b.insn(Insn::StoreReg {
                size: Size::DW,
                dst: Reg::R10,
                src: Reg::R7,
                off: -(slot as i16),
            });
            let read = if u.arbitrary()? {
                off
            } else {
                -(u.int_in_range(1..=8)? * 8)
            };
            b.insn(load(size, Reg::R8, Reg::R10, read));
        }
        // A packet access at a variable offset, masked and checked (or not).
        7 => {
            let mask = u.int_in_range(0..=63)?;
            b.insn(alu64(AluOp::Mov, Reg::R4, Source::Reg(Reg::R7)));
            b.insn(alu64(AluOp::And, Reg::R4, Source::Imm(mask)));
            b.insn(alu64(AluOp::Mov, Reg::R5, Source::Reg(Reg::R2)));
            b.insn(alu64(AluOp::Add, Reg::R5, Source::Reg(Reg::R4)));
            if u.ratio(3, 4)? {
                b.insn(alu64(AluOp::Mov, Reg::R0, Source::Reg(Reg::R5)));
                b.insn(alu64(AluOp::Add, Reg::R0, Source::Imm(1)));
                b.jump(
                    Width::W64,
                    JmpCond::Gt,
                    Reg::R0,
                    Source::Reg(Reg::R3),
                    Target::Exit,
                );
            }
            b.insn(load(Size::B, Reg::R5, Reg::R5, 0));
        }
        // An array map lookup, the value read with or without the null check.
        8 => {
            b.insn(Insn::Store {
                size: Size::W,
                dst: Reg::R10,
                off: -4,
                imm: u.int_in_range(0..=5)?,
            });
            b.insn(Insn::LdImm64 {
                dst: Reg::R1,
                kind: LdImm64Kind::MapFd,
                imm: 0,
                next_imm: 0,
            });
            b.insn(alu64(AluOp::Mov, Reg::R2, Source::Reg(Reg::R10)));
            b.insn(alu64(AluOp::Add, Reg::R2, Source::Imm(-4)));
            b.insn(Insn::Call(CallTarget::Helper(id::MAP_LOOKUP_ELEM)));
            if u.ratio(3, 4)? {
                b.jump(
                    Width::W64,
                    JmpCond::Eq,
                    Reg::R0,
                    Source::Imm(0),
                    Target::Exit,
                );
            }
            let size = any_size(u)?;
            let off = u.int_in_range(0..=MAP_VALUE_SIZE as i16)?;
            b.insn(load(size, Reg::R8, Reg::R0, off));
            if u.arbitrary()? {
                b.insn(Insn::StoreReg {
                    size,
                    dst: Reg::R0,
                    src: Reg::R7,
                    off: u.int_in_range(0..=MAP_VALUE_SIZE as i16)?,
                });
            }
            reload_packet_pointers(b);
        }
        // A helper that returns a scalar; the argument registers are clobbered.
        9 => {
            let helper = *u.choose(&[id::GET_PRANDOM_U32, id::KTIME_GET_NS])?;
            b.insn(Insn::Call(CallTarget::Helper(helper)));
            b.insn(alu64(AluOp::Mov, Reg::R7, Source::Reg(Reg::R0)));
            if u.ratio(7, 8)? {
                reload_packet_pointers(b);
            }
        }
        // A loop: bounded by a constant, or by a loaded value (unbounded unless masked).
        _ => {
            b.insn(mov64(Reg::R9, 0));
            let head = b.next_slot();
            b.insn(alu64(AluOp::Add, Reg::R9, Source::Imm(1)));
            let bound = if u.arbitrary()? {
                Source::Imm(u.int_in_range(1..=64)?)
            } else {
                Source::Reg(Reg::R7)
            };
            b.jump(Width::W64, JmpCond::Lt, Reg::R9, bound, Target::Slot(head));
        }
    }
    Ok(())
}

const ALL_ALU: [AluOp; 14] = AluOp::ALL;

/// Registers an unverified program may use freely (r1 and r10 hold the buffer and frame).
const FREE: [Reg; 8] = [
    Reg::R0,
    Reg::R2,
    Reg::R3,
    Reg::R4,
    Reg::R5,
    Reg::R6,
    Reg::R7,
    Reg::R8,
];

/// A straight-line mix of arithmetic, jumps (forward and backward), loads, stores and atomics
/// on the buffer in r1 and the stack, ending in `exit`. Nothing is verified: faults and
/// endless loops are part of what both engines must report alike.
pub fn alu_program(u: &mut Unstructured) -> Result<Vec<Insn>> {
    let len = u.int_in_range(1..=48)?;
    let mut out = Vec::with_capacity(len + 1);
    for i in 0..len {
        let reg = |u: &mut Unstructured| -> Result<Reg> { u.choose(&FREE).copied() };
        let src = |u: &mut Unstructured| -> Result<Source> {
            Ok(if u.arbitrary()? {
                Source::Reg(*u.choose(&FREE)?)
            } else {
                Source::Imm(*u.choose(&[0, 1, -1, 2, 7, 31, 32, 63, 64, i32::MIN, i32::MAX])?)
            })
        };
        let insn = match u.int_in_range(0..=11)? {
            0..=3 => Insn::Alu {
                width: *u.choose(&[Width::W64, Width::W32])?,
                op: *u.choose(&ALL_ALU)?,
                dst: reg(u)?,
                src: src(u)?,
            },
            4 => Insn::Neg {
                width: *u.choose(&[Width::W64, Width::W32])?,
                dst: reg(u)?,
            },
            5 => {
                // 32-bit sign-extending moves take 8 or 16 bits; 64-bit ones also 32.
                let width = *u.choose(&[Width::W64, Width::W32])?;
                let bits = if width == Width::W64 {
                    *u.choose(&[8, 16, 32])?
                } else {
                    *u.choose(&[8, 16])?
                };
                Insn::MovSx {
                    width,
                    dst: reg(u)?,
                    src: reg(u)?,
                    bits,
                }
            }
            6 => Insn::Endian {
                order: *u.choose(&[ByteOrder::ToLe, ByteOrder::ToBe, ByteOrder::Swap])?,
                bits: *u.choose(&[16, 32, 64])?,
                dst: reg(u)?,
            },
            7 => {
                // Forward or backward; the budget ends endless loops in both engines alike.
                let back = i as i16;
                let fwd = (len - i) as i16;
                Insn::Jump {
                    width: *u.choose(&[Width::W64, Width::W32])?,
                    cond: *u.choose(&CONDS)?,
                    dst: reg(u)?,
                    src: src(u)?,
                    off: u.int_in_range(-back..=fwd.max(0))?,
                }
            }
            8 => {
                let (size, base) = (any_size(u)?, *u.choose(&[Reg::R1, Reg::R10])?);
                load(size, reg(u)?, base, mem_off(u, base, size)?)
            }
            9 => {
                let (size, base) = (any_size(u)?, *u.choose(&[Reg::R1, Reg::R10])?);
                Insn::StoreReg {
                    size,
                    dst: base,
                    src: reg(u)?,
                    off: mem_off(u, base, size)?,
                }
            }
            10 => {
                let (size, base) = (any_size(u)?, *u.choose(&[Reg::R1, Reg::R10])?);
                Insn::Store {
                    size,
                    dst: base,
                    off: mem_off(u, base, size)?,
                    imm: u.arbitrary()?,
                }
            }
            _ => Insn::Atomic {
                size: *u.choose(&[Size::W, Size::DW])?,
                op: *u.choose(&[
                    AtomicOp::Add,
                    AtomicOp::FetchAdd,
                    AtomicOp::FetchOr,
                    AtomicOp::And,
                    AtomicOp::FetchXor,
                    AtomicOp::Xchg,
                    AtomicOp::Cmpxchg,
                ])?,
                dst: Reg::R1,
                src: reg(u)?,
                off: u.int_in_range(0..=7)? * 8,
            },
        };
        out.push(insn);
    }
    out.push(Insn::Exit);
    Ok(out)
}

/// Offsets inside a 64-byte buffer (r1) or the 512-byte stack (r10), as `base` needs: an
/// access outside every region faults in both engines, but one just outside a region may land
/// in another live region of one engine's host layout and not the other's, so a difference
/// there says nothing about the JIT.
fn mem_off(u: &mut Unstructured, base: Reg, size: Size) -> Result<i16> {
    let size = size_bytes(size) as i16;
    Ok(if base == Reg::R10 {
        -u.int_in_range(size..=512)? / size * size
    } else {
        u.int_in_range(0..=64 - size)?
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bpfemu_isa::Program;

    #[test]
    fn every_byte_string_gives_a_program_that_encodes() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        for len in 0..400 {
            let bytes: Vec<u8> = (0..len)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    seed as u8
                })
                .collect();
            let xdp = xdp_program(&mut Unstructured::new(&bytes)).unwrap();
            Program::from_insns(&xdp).unwrap();
            let alu = alu_program(&mut Unstructured::new(&bytes)).unwrap();
            Program::from_insns(&alu).unwrap();
        }
    }
}
