//! Tristate numbers (`kernel/bpf/tnum.c`): a value whose bits are each known 0, known 1 or
//! unknown. `value` holds the known ones, `mask` the unknown ones; a bit is never set in both.

// The operations keep the kernel's names (tnum_add, tnum_and, ...); they are not the operator
// traits because a tnum operation is an approximation, not arithmetic.
#![allow(clippy::should_implement_trait)]

use std::fmt;

/// A tristate number.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Tnum {
    pub value: u64,
    pub mask: u64,
}

impl fmt::Debug for Tnum {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "(0x{:x}; 0x{:x})", self.value, self.mask)
    }
}

impl Tnum {
    /// Every bit unknown.
    pub const UNKNOWN: Tnum = Tnum {
        value: 0,
        mask: u64::MAX,
    };

    pub const fn new(value: u64, mask: u64) -> Tnum {
        Tnum { value, mask }
    }

    /// A fully known constant.
    pub const fn constant(value: u64) -> Tnum {
        Tnum { value, mask: 0 }
    }

    /// The tightest tnum covering every value of `[min, max]` (unsigned).
    pub fn range(min: u64, max: u64) -> Tnum {
        let chi = min ^ max;
        let bits = 64 - chi.leading_zeros();
        if bits > 63 {
            return Tnum::UNKNOWN;
        }
        let delta = (1u64 << bits) - 1;
        Tnum::new(min & !delta, delta)
    }

    /// The largest member: every unknown bit set.
    pub const fn max_member(self) -> u64 {
        self.value | self.mask
    }

    /// Whether `x` is one of the values the tnum stands for.
    pub const fn contains(self, x: u64) -> bool {
        x & !self.mask == self.value
    }

    /// `tnum_step`: the smallest member greater than `z`; the largest member when none is
    /// (6.18 collapses a scalar to a constant with it, see `update_64_bounds`).
    pub fn step(self, z: u64) -> u64 {
        let max = self.max_member();
        if z >= max {
            return max;
        }
        self.smallest_member_at_least(z + 1).unwrap_or(max)
    }

    /// The smallest member `>= z`, if any. Walks from the highest bit where `z` breaks the
    /// known bits: if the tnum has a 1 there, keep `z` above it and take the smallest tail;
    /// if it has a 0, `z`'s prefix must grow at the lowest unknown bit above that is 0 in `z`.
    fn smallest_member_at_least(self, z: u64) -> Option<u64> {
        let wrong = (z & !self.mask) ^ self.value;
        if wrong == 0 {
            return Some(z);
        }
        let p = 63 - wrong.leading_zeros();
        let below = |bit: u32| (1u64 << bit) - 1;
        if self.value & (1 << p) != 0 {
            // z has a 0 where the tnum has a known 1.
            let above = !below(p) & !(1 << p);
            return Some((z & above) | (1 << p) | (self.value & below(p)));
        }
        // z has a 1 where the tnum has a known 0: set a free bit above p that z has clear.
        let candidates = self.mask & !z & !below(p) & !(1 << p);
        if candidates == 0 {
            return None;
        }
        let q = candidates.trailing_zeros();
        let above = if q == 63 { 0 } else { !below(q + 1) };
        Some((z & above) | (1 << q) | (self.value & below(q)))
    }

    pub const fn is_const(self) -> bool {
        self.mask == 0
    }

    pub const fn is_unknown(self) -> bool {
        self.mask == u64::MAX
    }

    /// Whether the value is known to equal `b`.
    pub const fn equals_const(self, b: u64) -> bool {
        self.is_const() && self.value == b
    }

    /// Whether the value is known to be a multiple of `size` (a power of two).
    pub const fn is_aligned(self, size: u64) -> bool {
        if size == 0 {
            return true;
        }
        ((self.value | self.mask) & (size - 1)) == 0
    }

    pub const fn lshift(self, shift: u32) -> Tnum {
        Tnum::new(self.value << shift, self.mask << shift)
    }

    pub const fn rshift(self, shift: u32) -> Tnum {
        Tnum::new(self.value >> shift, self.mask >> shift)
    }

    /// Arithmetic right shift of the `insn_bitness`-bit value.
    pub fn arshift(self, shift: u32, insn_bitness: u32) -> Tnum {
        if insn_bitness == 32 {
            Tnum::new(
                ((self.value as i32) >> shift) as u32 as u64,
                ((self.mask as i32) >> shift) as u32 as u64,
            )
        } else {
            Tnum::new(
                ((self.value as i64) >> shift) as u64,
                ((self.mask as i64) >> shift) as u64,
            )
        }
    }

    pub fn add(self, b: Tnum) -> Tnum {
        let sm = self.mask.wrapping_add(b.mask);
        let sv = self.value.wrapping_add(b.value);
        let sigma = sm.wrapping_add(sv);
        let chi = sigma ^ sv;
        let mu = chi | self.mask | b.mask;
        Tnum::new(sv & !mu, mu)
    }

    pub fn sub(self, b: Tnum) -> Tnum {
        let dv = self.value.wrapping_sub(b.value);
        let alpha = dv.wrapping_add(self.mask);
        let beta = dv.wrapping_sub(b.mask);
        let chi = alpha ^ beta;
        let mu = chi | self.mask | b.mask;
        Tnum::new(dv & !mu, mu)
    }

    pub fn neg(self) -> Tnum {
        Tnum::constant(0).sub(self)
    }

    pub fn and(self, b: Tnum) -> Tnum {
        let alpha = self.value | self.mask;
        let beta = b.value | b.mask;
        let v = self.value & b.value;
        Tnum::new(v, alpha & beta & !v)
    }

    pub fn or(self, b: Tnum) -> Tnum {
        let v = self.value | b.value;
        let mu = self.mask | b.mask;
        Tnum::new(v, mu & !v)
    }

    pub fn xor(self, b: Tnum) -> Tnum {
        let v = self.value ^ b.value;
        let mu = self.mask | b.mask;
        Tnum::new(v & !mu, mu)
    }

    /// Multiplication as 6.18 does it (the shift-and-add over the known/unknown bits of `self`).
    pub fn mul(self, b: Tnum) -> Tnum {
        let mut a = self;
        let mut b = b;
        let mut acc = Tnum::constant(0);
        while a.value != 0 || a.mask != 0 {
            if a.value & 1 != 0 {
                acc = acc.add(b);
            } else if a.mask & 1 != 0 {
                // The bit may be 0 (acc stays) or 1 (acc + b): what both allow.
                acc = acc.union(acc.add(b));
            }
            a = a.rshift(1);
            b = b.lshift(1);
        }
        acc
    }

    /// Multiplication before 6.18: the exact product of the known values plus the sum of
    /// the partial products' unknown bits, which loses what 6.18's union keeps ((x & 2 | 1)
    /// * 3 knows bit 2 only in 6.18).
    pub fn mul_before_6_18(self, b: Tnum) -> Tnum {
        let mut a = self;
        let mut b = b;
        let product = self.value.wrapping_mul(b.value);
        let mut unknown = Tnum::constant(0);
        while a.value != 0 || a.mask != 0 {
            if a.value & 1 != 0 {
                unknown = unknown.add(Tnum::new(0, b.mask));
            } else if a.mask & 1 != 0 {
                unknown = unknown.add(Tnum::new(0, b.value | b.mask));
            }
            a = a.rshift(1);
            b = b.lshift(1);
        }
        Tnum::constant(product).add(unknown)
    }

    /// The bits both know, where they agree (`tnum_intersect`).
    pub fn intersect(self, b: Tnum) -> Tnum {
        let v = self.value | b.value;
        let mu = self.mask & b.mask;
        Tnum::new(v & !mu, mu)
    }

    /// Whether some value fits both: no bit known to both disagrees (`tnum_overlap`).
    pub fn overlaps(self, b: Tnum) -> bool {
        let known_to_both = !self.mask & !b.mask;
        self.value & known_to_both == b.value & known_to_both
    }

    /// A tnum covering both (`tnum_union`).
    pub fn union(self, b: Tnum) -> Tnum {
        let v = self.value & b.value;
        let mu = self.mask | b.mask | (self.value ^ b.value);
        Tnum::new(v & !mu, mu)
    }

    /// The low `size` bytes.
    pub fn cast(self, size: u32) -> Tnum {
        if size >= 8 {
            return self;
        }
        let keep = (1u64 << (size * 8)) - 1;
        Tnum::new(self.value & keep, self.mask & keep)
    }

    /// `tnum_in(a, b)`: whether `b`'s values are all `self`'s values.
    pub const fn is_superset_of(self, b: Tnum) -> bool {
        if b.mask & !self.mask != 0 {
            return false;
        }
        let bv = b.value & !self.mask;
        self.value == bv
    }

    /// The low 32 bits.
    pub fn subreg(self) -> Tnum {
        self.cast(4)
    }

    /// The high 32 bits kept, the low 32 cleared.
    pub fn clear_subreg(self) -> Tnum {
        self.rshift(32).lshift(32)
    }

    /// The high 32 bits of `self` with the low 32 of `subreg`.
    pub fn with_subreg(self, subreg: Tnum) -> Tnum {
        self.clear_subreg().or(subreg.subreg())
    }

    /// The high 32 bits of `self` with the low 32 set to `value`.
    pub fn const_subreg(self, value: u32) -> Tnum {
        self.with_subreg(Tnum::constant(value as u64))
    }

    /// The kernel's `tnum_strn` text: a known value as a number (decimal up to 65535),
    /// else `(0x..; 0x..)`.
    pub fn text(self) -> String {
        if self.mask == 0 {
            if self.value <= u16::MAX as u64 {
                return format!("{}", self.value);
            }
            // `is_snum_decimal`: small negative constants print as such.
            let signed = self.value as i64;
            if (i16::MIN as i64..=i16::MAX as i64).contains(&signed) {
                return format!("{signed}");
            }
            return format!("{:#x}", self.value);
        }
        self.pair_text()
    }

    /// `(0xVALUE; 0xMASK)`, as `tnum_strn` prints any tnum (5.10 and 6.1 print constants so).
    pub fn pair_text(self) -> String {
        format!("(0x{:x}; 0x{:x})", self.value, self.mask)
    }

    /// The low `bits` bits with their bytes in reverse order (a byte swap is exact on tnums).
    pub fn bswap(self, bits: u32) -> Tnum {
        let swap = |v: u64| match bits {
            16 => (v as u16).swap_bytes() as u64,
            32 => (v as u32).swap_bytes() as u64,
            _ => v.swap_bytes(),
        };
        Tnum::new(swap(self.value), swap(self.mask))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn range_covers_its_bounds() {
        let t = Tnum::range(4, 7);
        assert_eq!(t, Tnum::new(4, 3));
        assert_eq!(Tnum::range(0, u64::MAX), Tnum::UNKNOWN);
        assert_eq!(Tnum::range(5, 5), Tnum::constant(5));
    }

    #[test]
    fn add_and_sub_of_constants_are_exact() {
        assert_eq!(Tnum::constant(3).add(Tnum::constant(4)), Tnum::constant(7));
        assert_eq!(
            Tnum::constant(3).sub(Tnum::constant(4)),
            Tnum::constant(u64::MAX)
        );
    }

    #[test]
    fn mul_of_constants_is_exact_and_unknown_low_bit_spreads() {
        assert_eq!(Tnum::constant(6).mul(Tnum::constant(7)), Tnum::constant(42));
        let t = Tnum::new(0, 1).mul(Tnum::constant(4));
        assert_eq!(t, Tnum::new(0, 4));
    }

    #[test]
    fn superset_is_tnum_in() {
        assert!(Tnum::new(0, 0xff).is_superset_of(Tnum::constant(0x12)));
        assert!(!Tnum::constant(0x12).is_superset_of(Tnum::new(0, 0xff)));
        assert!(!Tnum::new(0x100, 0xff).is_superset_of(Tnum::constant(0x12)));
    }
    #[test]
    fn step_gives_the_next_member() {
        let t = Tnum::new(0, 0x12); // 0, 2, 16, 18
        assert_eq!(t.step(0), 2);
        assert_eq!(t.step(2), 16);
        assert_eq!(t.step(3), 16);
        assert_eq!(t.step(16), 18);
        assert_eq!(t.step(17), 18);
        assert_eq!(t.step(18), 18);
        assert_eq!(t.step(u64::MAX), 18);
        let high = Tnum::new(0x100, 0xf0_0000_000f);
        assert_eq!(high.step(0x10f), 0x10_0000_0100);
        assert_eq!(Tnum::new(0, 8 << 30).step(8), 8 << 30);
    }

    #[test]
    fn step_agrees_with_a_walk_over_the_members() {
        // Every 6-bit tnum against every z: the next member by enumeration.
        for mask in 0..64u64 {
            for value in (0..64u64).filter(|v| v & mask == 0) {
                let t = Tnum::new(value, mask);
                for z in 0..70u64 {
                    let next = (z + 1..=t.max_member()).find(|&x| t.contains(x));
                    assert_eq!(t.step(z), next.unwrap_or(t.max_member()), "{t:?} {z}");
                }
            }
        }
    }
}
