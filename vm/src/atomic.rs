//! The read-modify-write semantics of eBPF's atomic instructions, once for every engine: the
//! interpreter runs them here, and so does compiled code where the hardware cannot do the
//! operation atomically (a misaligned address in checked code). Compiled code that uses the
//! hardware's locked instructions must match these results.
//!
//! `load_acquire` and `store_release` are a plain load and store on one thread of execution,
//! so they have no read-modify-write here.

use bpfemu_isa::{AtomicOp, Reg};

/// The word `op` leaves in memory, from the `old` word (zero-extended from `bytes`, 4 or 8),
/// the source register `operand` and, for `cmpxchg`, r0 as `expected` (compared on the low
/// `bytes` only). Bits above `bytes` in the result are dropped by the store.
pub fn new_value(op: AtomicOp, bytes: usize, old: u64, operand: u64, expected: u64) -> u64 {
    let mask = if bytes == 4 {
        u32::MAX as u64
    } else {
        u64::MAX
    };
    match op {
        AtomicOp::Add | AtomicOp::FetchAdd => old.wrapping_add(operand),
        AtomicOp::Or | AtomicOp::FetchOr => old | operand,
        AtomicOp::And | AtomicOp::FetchAnd => old & operand,
        AtomicOp::Xor | AtomicOp::FetchXor => old ^ operand,
        AtomicOp::Xchg => operand,
        AtomicOp::Cmpxchg if old == expected & mask => operand,
        // A failed cmpxchg writes the old word back (the access still needs a writable
        // slot, as the hardware instruction does); loads and stores change nothing.
        _ => old,
    }
}

/// Does `op` on the little-endian word `slot` (4 or 8 bytes) in place: the old word,
/// zero-extended, which [`old_value_to`] says where to put.
pub fn update(slot: &mut [u8], op: AtomicOp, operand: u64, expected: u64) -> u64 {
    let n = slot.len();
    let mut word = [0u8; 8];
    word[..n].copy_from_slice(slot);
    let old = u64::from_le_bytes(word);
    let new = new_value(op, n, old, operand, expected);
    slot.copy_from_slice(&new.to_le_bytes()[..n]);
    old
}

/// The register that receives the old memory word of `op` with source register `src`: r0 for
/// `cmpxchg`, `src` for the fetching forms and `xchg`, none for the others.
pub fn old_value_to(op: AtomicOp, src: Reg) -> Option<Reg> {
    match op {
        AtomicOp::Cmpxchg => Some(Reg::R0),
        _ if op.fetches() => Some(src),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cmpxchg_compares_the_low_word_of_a_32_bit_slot() {
        let mut slot = 7u32.to_le_bytes();
        // r0's high bits do not count against a 4-byte slot.
        let old = update(&mut slot, AtomicOp::Cmpxchg, 9, (1 << 32) | 7);
        assert_eq!((old, u32::from_le_bytes(slot)), (7, 9));
        let old = update(&mut slot, AtomicOp::Cmpxchg, 1, 7);
        assert_eq!((old, u32::from_le_bytes(slot)), (9, 9));
    }

    #[test]
    fn arithmetic_wraps_at_the_slot_width() {
        let mut slot = u32::MAX.to_le_bytes();
        assert_eq!(update(&mut slot, AtomicOp::FetchAdd, 2, 0), u32::MAX as u64);
        assert_eq!(u32::from_le_bytes(slot), 1);
        assert_eq!(old_value_to(AtomicOp::Add, Reg::R3), None);
        assert_eq!(old_value_to(AtomicOp::Xchg, Reg::R3), Some(Reg::R3));
        assert_eq!(old_value_to(AtomicOp::Cmpxchg, Reg::R3), Some(Reg::R0));
    }
}
