//! Writing a relocation's value into its instruction: the immediate of an ALU op or of an
//! `ld_imm64`, or the offset (and, when the field changed width, the size) of a load or store.
//!
//! Before patching, the instruction must hold the value computed from the local BTF (unless
//! the kind is exempt), which catches a relocation applied to the wrong instruction.

use super::{CoreFailure, CoreReloResult};
use bpfemu_isa::RawInsn;
use bpfemu_isa::opcode::*;

/// The helper id libbpf calls in place of an instruction it could not relocate
/// (`0xbad2310`, "bad relo"); the verifier reports `invalid func unknown#195896080`.
pub const POISON_HELPER_ID: i32 = 0xbad2310;

const LD_IMM64: u8 = BPF_LD | BPF_IMM | BPF_DW;

fn poison(insn: &mut RawInsn) {
    *insn = RawInsn::new(BPF_JMP | BPF_CALL, 0, 0, 0, POISON_HELPER_ID);
}

/// Replaces the instruction (both slots of an `ld_imm64`, so the verifier does not trip over
/// a stray second half) with the invalid call.
fn poison_at(insns: &mut [RawInsn], idx: usize) {
    if insns[idx].code == LD_IMM64
        && let Some(next) = insns.get_mut(idx + 1)
    {
        poison(next);
    }
    poison(&mut insns[idx]);
}

/// Patches `insns[idx]` (the caller checked the index) with the relocation result.
pub(crate) fn patch_insn(
    insns: &mut [RawInsn],
    idx: usize,
    res: &CoreReloResult,
) -> Result<(), CoreFailure> {
    if res.poison {
        poison_at(insns, idx);
        return Ok(());
    }
    match class(insns[idx].code) {
        BPF_ALU | BPF_ALU64 => patch_alu(&mut insns[idx], res),
        BPF_LDX | BPF_ST | BPF_STX => patch_mem(insns, idx, res),
        BPF_LD => patch_ld_imm64(insns, idx, res),
        _ => Err(CoreFailure::UnsupportedInsn {
            code: insns[idx].code,
        }),
    }
}

fn unexpected(class: &'static str, got: i64, res: &CoreReloResult) -> CoreFailure {
    CoreFailure::UnexpectedValue {
        class,
        got,
        expected: res.orig_val,
        new: res.new_val,
    }
}

fn patch_alu(insn: &mut RawInsn, res: &CoreReloResult) -> Result<(), CoreFailure> {
    if source(insn.code) != BPF_K {
        return Err(CoreFailure::UnsupportedInsn { code: insn.code });
    }
    // The immediate compares as a sign-extended 64-bit number, as in libbpf.
    if res.validate && insn.imm as i64 as u64 != res.orig_val {
        return Err(unexpected("ALU/ALU64", insn.imm.into(), res));
    }
    insn.imm = res.new_val as i32;
    Ok(())
}

fn patch_mem(insns: &mut [RawInsn], idx: usize, res: &CoreReloResult) -> Result<(), CoreFailure> {
    let insn = &mut insns[idx];
    if res.validate && insn.off as i64 as u64 != res.orig_val {
        return Err(unexpected("LDX/ST/STX", insn.off.into(), res));
    }
    if res.new_val > i16::MAX as u64 {
        return Err(CoreFailure::OffsetTooBig(res.new_val));
    }
    if res.fail_memsz_adjust {
        // The field changed width and is not a pointer or unsigned int: reading it with
        // another width would give a wrong value, so the access is made to fail verification.
        poison_at(insns, idx);
        return Ok(());
    }
    insn.off = res.new_val as i16;
    if res.new_sz != res.orig_sz {
        let got = size_bytes(insn.code);
        if got != res.orig_sz {
            return Err(CoreFailure::UnexpectedMemSize {
                got,
                expected: res.orig_sz,
            });
        }
        let new_size = size_code(res.new_sz).ok_or(CoreFailure::InvalidMemSize(res.new_sz))?;
        insn.code = mode(insn.code) | new_size | class(insn.code);
    }
    Ok(())
}

fn size_bytes(code: u8) -> u32 {
    match size(code) {
        BPF_DW => 8,
        BPF_W => 4,
        BPF_H => 2,
        _ => 1,
    }
}

fn size_code(bytes: u32) -> Option<u8> {
    match bytes {
        8 => Some(BPF_DW),
        4 => Some(BPF_W),
        2 => Some(BPF_H),
        1 => Some(BPF_B),
        _ => None,
    }
}

fn patch_ld_imm64(
    insns: &mut [RawInsn],
    idx: usize,
    res: &CoreReloResult,
) -> Result<(), CoreFailure> {
    let first = insns[idx];
    let second = insns.get(idx + 1).copied().ok_or(CoreFailure::BadLdImm64)?;
    let well_formed = first.code == LD_IMM64
        && first.src == 0
        && first.off == 0
        && second.code == 0
        && second.dst == 0
        && second.src == 0
        && second.off == 0;
    if !well_formed {
        return Err(CoreFailure::BadLdImm64);
    }
    let imm = u64::from(first.imm as u32) | (u64::from(second.imm as u32) << 32);
    if res.validate && imm != res.orig_val {
        return Err(unexpected("LDIMM64", imm as i64, res));
    }
    insns[idx].imm = res.new_val as i32;
    insns[idx + 1].imm = (res.new_val >> 32) as i32;
    Ok(())
}
