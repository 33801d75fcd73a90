//! Scalar bounds: the signed and unsigned 32- and 64-bit ranges of a register and its tnum,
//! kept consistent with one another the way the kernel's `reg_bounds_sync()` does.
//!
//! Every transfer function ends by calling [`RegState::bounds_sync`]; what it deduces (and what
//! it cannot) decides which programs verify, so each step mirrors the kernel's order.

use super::reg::RegState;
use super::tnum::Tnum;
use super::width::{BoundWidth, Int, W32, W64};
use bpfemu_isa::KernelVersion;
use std::cell::Cell;

thread_local! {
    /// The bounds rules of the kernel being verified as, set by [`BoundsRules::enter`] for
    /// the length of one verification.
    static RULES: Cell<Rules> = const { Cell::new(Rules::LATEST) };
}

/// What differs between kernels in how a scalar's ranges inform one another.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Rules {
    /// `__update_reg64_bounds` ends by collapsing a range that holds a single member of the
    /// tnum into that constant (6.18).
    collapses_single_member: bool,
    /// 6.7's deduction (each domain's range from the others', the 64-bit range from the
    /// 32-bit ones, the sync's repeated passes); before, the sign-bit rules of 5.10 and 6.1.
    crosses_domains: bool,
    /// `__reg_bound_offset` narrows the 32-bit tnum from the 64-bit one it has just
    /// narrowed (6.1 on); 5.10 from the register's tnum as it was.
    offset_from_narrowed_tnum: bool,
}

impl Rules {
    const LATEST: Rules = Rules {
        collapses_single_member: true,
        crosses_domains: true,
        offset_from_narrowed_tnum: true,
    };

    fn current() -> Rules {
        RULES.with(Cell::get)
    }
}

/// The bounds rules of one kernel, in force on this thread while the value lives. The rules
/// are the kernel's, not a register's, and the transfer functions that sync bounds are many
/// and far from the verifier's environment: a scoped setting keeps them one call each.
pub struct BoundsRules {
    previous: Rules,
}

impl BoundsRules {
    pub fn enter(kernel: KernelVersion) -> BoundsRules {
        let rules = Rules {
            collapses_single_member: crate::behaviour::collapses_single_member_ranges(kernel),
            crosses_domains: crate::behaviour::deduces_bounds_across_domains(kernel),
            offset_from_narrowed_tnum: crate::behaviour::narrows_subreg_from_narrowed_tnum(kernel),
        };
        BoundsRules {
            previous: RULES.with(|c| c.replace(rules)),
        }
    }
}

impl Drop for BoundsRules {
    fn drop(&mut self) {
        RULES.with(|c| c.set(self.previous));
    }
}

/// 5.10's and 6.1's `__reg32_deduce_bounds` and `__reg64_deduce_bounds`, one width at a
/// time: the signed and unsigned ranges are one where the signed range keeps to one side of
/// the sign boundary; else the unsigned range gives the sign when it keeps to one side.
/// Nothing crosses from the other width.
fn deduce_bounds_by_sign<W: BoundWidth>(r: &mut RegState) {
    let mut b = W::get(r);
    let zero = W::S::ZERO;
    if b.smin >= zero || b.smax < zero {
        let min = W::unsigned(b.smin).max(b.umin);
        let max = W::unsigned(b.smax).min(b.umax);
        (b.smin, b.umin) = (W::signed(min), min);
        (b.smax, b.umax) = (W::signed(max), max);
    } else if W::signed(b.umax) >= zero {
        let max = W::unsigned(b.smax).min(b.umax);
        b.smin = W::signed(b.umin);
        (b.smax, b.umax) = (W::signed(max), max);
    } else if W::signed(b.umin) < zero {
        let min = W::unsigned(b.smin).max(b.umin);
        (b.smin, b.umin) = (W::signed(min), min);
        b.smax = W::signed(b.umax);
    }
    W::set(r, b);
}

impl RegState {
    /// `__mark_reg64_unbounded`.
    pub fn mark_64_unbounded(&mut self) {
        self.smin_value = i64::MIN;
        self.smax_value = i64::MAX;
        self.umin_value = 0;
        self.umax_value = u64::MAX;
    }

    /// `__mark_reg32_unbounded`.
    pub fn mark_32_unbounded(&mut self) {
        self.s32_min_value = i32::MIN;
        self.s32_max_value = i32::MAX;
        self.u32_min_value = 0;
        self.u32_max_value = u32::MAX;
    }

    /// `__mark_reg_unbounded`.
    pub fn mark_unbounded(&mut self) {
        self.mark_64_unbounded();
        self.mark_32_unbounded();
    }

    /// `__update_reg32_bounds`: what the tnum says about the 32-bit ranges.
    pub fn update_32_bounds(&mut self) {
        let v = self.var_off.subreg();
        let sign = i32::MIN as u32 as u64;
        self.s32_min_value = self
            .s32_min_value
            .max((v.value | (v.mask & sign)) as u32 as i32);
        self.s32_max_value = self
            .s32_max_value
            .min((v.value | (v.mask & i32::MAX as u64)) as u32 as i32);
        self.u32_min_value = self.u32_min_value.max(v.value as u32);
        self.u32_max_value = self.u32_max_value.min((v.value | v.mask) as u32);
    }

    /// `__update_reg64_bounds`.
    pub fn update_64_bounds(&mut self) {
        let t = self.var_off;
        self.smin_value = self
            .smin_value
            .max((t.value | (t.mask & i64::MIN as u64)) as i64);
        self.smax_value = self
            .smax_value
            .min((t.value | (t.mask & i64::MAX as u64)) as i64);
        self.umin_value = self.umin_value.max(t.value);
        self.umax_value = self.umax_value.min(t.value | t.mask);
        if Rules::current().collapses_single_member {
            self.collapse_single_member();
        }
    }

    /// From 6.18: when the u64 range and the tnum share one value only, the scalar is that
    /// constant (`r &= 8; r <<= 30; if r s< 8` leaves 8 << 30). The kernel's three cases,
    /// in its order: the member is umin, the tnum's largest member, or one in between.
    fn collapse_single_member(&mut self) {
        let t = self.var_off;
        let next = t.step(self.umin_value);
        let umin_in_tnum = t.contains(self.umin_value);
        let single = if umin_in_tnum && next > self.umax_value {
            Some(self.umin_value)
        } else if !umin_in_tnum && next == t.max_member() {
            // Taken even when the range lies wholly above the members (the kernel then
            // names the largest member, where the bounds alone would contradict).
            Some(next)
        } else if !umin_in_tnum && next <= self.umax_value && t.step(next) > self.umax_value {
            Some(next)
        } else {
            None
        };
        if let Some(value) = single {
            self.set_known(value);
        }
    }

    /// `__update_reg_bounds`.
    pub fn update_bounds(&mut self) {
        self.update_32_bounds();
        self.update_64_bounds();
    }

    /// `__reg32_deduce_bounds`.
    fn deduce_32_bounds(&mut self) {
        if (self.umin_value >> 32) == (self.umax_value >> 32) {
            self.u32_min_value = self.u32_min_value.max(self.umin_value as u32);
            self.u32_max_value = self.u32_max_value.min(self.umax_value as u32);
            if (self.umin_value as i32) <= (self.umax_value as i32) {
                self.s32_min_value = self.s32_min_value.max(self.umin_value as i32);
                self.s32_max_value = self.s32_max_value.min(self.umax_value as i32);
            }
        }
        if (self.smin_value >> 32) == (self.smax_value >> 32) {
            if (self.smin_value as u32) <= (self.smax_value as u32) {
                self.u32_min_value = self.u32_min_value.max(self.smin_value as u32);
                self.u32_max_value = self.u32_max_value.min(self.smax_value as u32);
            }
            if (self.smin_value as i32) <= (self.smax_value as i32) {
                self.s32_min_value = self.s32_min_value.max(self.smin_value as i32);
                self.s32_max_value = self.s32_max_value.min(self.smax_value as i32);
            }
        }
        // Upper halves two consecutive values while the lower halves go from negative to
        // non-negative: the low 32 bits still form one s32 range.
        if ((self.umin_value >> 32) as u32).wrapping_add(1) == (self.umax_value >> 32) as u32
            && (self.umin_value as i32) < 0
            && (self.umax_value as i32) >= 0
        {
            self.s32_min_value = self.s32_min_value.max(self.umin_value as i32);
            self.s32_max_value = self.s32_max_value.min(self.umax_value as i32);
        }
        if ((self.smin_value >> 32) as u32).wrapping_add(1) == (self.smax_value >> 32) as u32
            && (self.smin_value as i32) < 0
            && (self.smax_value as i32) >= 0
        {
            self.s32_min_value = self.s32_min_value.max(self.smin_value as i32);
            self.s32_max_value = self.s32_max_value.min(self.smax_value as i32);
        }
        if (self.u32_min_value as i32) <= (self.u32_max_value as i32) {
            self.s32_min_value = self.s32_min_value.max(self.u32_min_value as i32);
            self.s32_max_value = self.s32_max_value.min(self.u32_max_value as i32);
        }
        if (self.s32_min_value as u32) <= (self.s32_max_value as u32) {
            self.u32_min_value = self.u32_min_value.max(self.s32_min_value as u32);
            self.u32_max_value = self.u32_max_value.min(self.s32_max_value as u32);
        } else if self.u32_max_value < self.s32_min_value as u32 {
            // As in 64 bits: the s32 range wraps and the u32 range lies in its negative part.
            self.s32_min_value = self.u32_min_value as i32;
            self.u32_max_value = self.u32_max_value.min(self.s32_max_value as u32);
        } else if (self.s32_max_value as u32) < self.u32_min_value {
            // ... or in its non-negative part (s32 <= 1 with u32 >= 16: negative only).
            self.s32_max_value = self.u32_max_value as i32;
            self.u32_min_value = self.u32_min_value.max(self.s32_min_value as u32);
        }
    }

    /// `__reg64_deduce_bounds`.
    fn deduce_64_bounds(&mut self) {
        if (self.umin_value as i64) <= (self.umax_value as i64) {
            self.smin_value = self.smin_value.max(self.umin_value as i64);
            self.smax_value = self.smax_value.min(self.umax_value as i64);
        }
        if (self.smin_value as u64) <= (self.smax_value as u64) {
            self.umin_value = self.umin_value.max(self.smin_value as u64);
            self.umax_value = self.umax_value.min(self.smax_value as u64);
        } else if self.umax_value < self.smin_value as u64 {
            // The s64 range wraps; the u64 range lies in its upper (negative) part.
            self.smin_value = self.umin_value as i64;
            self.umax_value = self.umax_value.min(self.smax_value as u64);
        } else if (self.smax_value as u64) < self.umin_value {
            self.smax_value = self.umax_value as i64;
            self.umin_value = self.umin_value.max(self.smin_value as u64);
        }
    }

    /// `__reg_deduce_mixed_bounds`: 64-bit bounds from 32-bit knowledge.
    fn deduce_mixed_bounds(&mut self) {
        const HIGH: u64 = !0xffff_ffffu64;
        let new_umin = (self.umin_value & HIGH) | self.u32_min_value as u64;
        let new_umax = (self.umax_value & HIGH) | self.u32_max_value as u64;
        self.umin_value = self.umin_value.max(new_umin);
        self.umax_value = self.umax_value.min(new_umax);
        let new_smin = ((self.smin_value as u64 & HIGH) | self.u32_min_value as u64) as i64;
        let new_smax = ((self.smax_value as u64 & HIGH) | self.u32_max_value as u64) as i64;
        self.smin_value = self.smin_value.max(new_smin);
        self.smax_value = self.smax_value.min(new_smax);
        if self.s32_min_value >= 0
            && self.smin_value >= i32::MIN as i64
            && self.smax_value <= i32::MAX as i64
        {
            self.smin_value = self.s32_min_value as i64;
            self.smax_value = self.s32_max_value as i64;
            self.umin_value = self.s32_min_value as u64;
            self.umax_value = self.s32_max_value as u64;
            self.var_off = self
                .var_off
                .intersect(Tnum::range(self.smin_value as u64, self.smax_value as u64));
        }
    }

    /// `__reg_deduce_bounds`.
    pub fn deduce_bounds(&mut self) {
        if !Rules::current().crosses_domains {
            deduce_bounds_by_sign::<W32>(self);
            deduce_bounds_by_sign::<W64>(self);
            return;
        }
        self.deduce_32_bounds();
        self.deduce_64_bounds();
        self.deduce_mixed_bounds();
    }

    /// `__reg_bound_offset`: what the ranges say about the tnum.
    pub fn bound_offset(&mut self) {
        let var64 = self
            .var_off
            .intersect(Tnum::range(self.umin_value, self.umax_value));
        let narrowed = match Rules::current().offset_from_narrowed_tnum {
            true => var64,
            false => self.var_off,
        };
        let var32 = narrowed.subreg().intersect(Tnum::range(
            self.u32_min_value as u64,
            self.u32_max_value as u64,
        ));
        self.var_off = var64.clear_subreg().or(var32);
    }

    /// `reg_bounds_sync`.
    pub fn bounds_sync(&mut self) {
        self.update_bounds();
        self.deduce_bounds();
        // A second pass learns what the first one's 64-bit bounds say of the 32-bit ones.
        if Rules::current().crosses_domains {
            self.deduce_bounds();
        }
        self.bound_offset();
        self.update_bounds();
    }

    /// Whether the bounds contradict each other (`reg_bounds_sanity_check` fails; the kernel
    /// then reports a verifier bug, or treats a branch as dead when refining).
    pub fn bounds_inconsistent(&self) -> bool {
        self.umin_value > self.umax_value
            || self.smin_value > self.smax_value
            || self.u32_min_value > self.u32_max_value
            || self.s32_min_value > self.s32_max_value
            || self.umin_value > self.var_off.value | self.var_off.mask
            || self.umax_value < self.var_off.value
            || (self.u32_min_value as u64) > (self.var_off.value | self.var_off.mask) & 0xffff_ffff
            || (self.u32_max_value as u64) < self.var_off.value & 0xffff_ffff
    }

    /// `zext_32_to_64` after a 32-bit op: the upper half becomes zero.
    pub fn zext_32_to_64(&mut self) {
        self.var_off = self.var_off.subreg();
        self.assign_32_into_64();
    }

    /// `__reg_assign_32_into_64`.
    pub fn assign_32_into_64(&mut self) {
        self.umin_value = self.u32_min_value as u64;
        self.umax_value = self.u32_max_value as u64;
        if self.s32_min_value >= 0 {
            self.smin_value = self.s32_min_value as i64;
            self.smax_value = self.s32_max_value as i64;
        } else {
            self.smin_value = 0;
            self.smax_value = u32::MAX as i64;
        }
    }

    /// The bounds after a comparison refined the ranges of its width (`reg_set_min_max`'s
    /// end): synced across domains from 6.7 on; before, the other width is rebuilt from the
    /// refined one (`__reg_combine_32_into_64` after a 32-bit comparison,
    /// `__reg_combine_64_into_32` after a 64-bit one).
    pub fn sync_after_compare(&mut self, jmp32: bool) {
        match (Rules::current().crosses_domains, jmp32) {
            (true, _) => self.bounds_sync(),
            (false, true) => self.combine_32_into_64(),
            (false, false) => self.combine_64_into_32(),
        }
    }

    /// `__reg_combine_32_into_64`: the 64-bit bounds are the 32-bit ones when the upper half
    /// is known zero; else they are forgotten, and only the tnum says what it can.
    fn combine_32_into_64(&mut self) {
        let upper = self.var_off.clear_subreg();
        if upper.is_const() && upper.value == 0 {
            self.assign_32_into_64();
        } else {
            self.mark_64_unbounded();
        }
        self.bounds_sync();
    }

    /// `__reg_combine_64_into_32`: the 32-bit bounds from the 64-bit ones where they fit.
    pub fn combine_64_into_32(&mut self) {
        self.mark_32_unbounded();
        if self.smin_value >= i32::MIN as i64 && self.smax_value <= i32::MAX as i64 {
            self.s32_min_value = self.smin_value as i32;
            self.s32_max_value = self.smax_value as i32;
        }
        if self.umax_value <= u32::MAX as u64 {
            self.u32_min_value = self.umin_value as u32;
            self.u32_max_value = self.umax_value as u32;
        }
        self.bounds_sync();
    }

    /// Whether this scalar's value is one constant in 64 bits.
    pub fn is_const(&self) -> bool {
        self.var_off.is_const()
    }

    /// Whether the low 32 bits are one constant.
    pub fn is_const32(&self) -> bool {
        self.var_off.subreg().is_const()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sync_learns_32_bit_bounds_from_small_64_bit_range() {
        let mut r = RegState::unknown_scalar();
        r.umin_value = 10;
        r.umax_value = 20;
        r.bounds_sync();
        assert_eq!((r.smin_value, r.smax_value), (10, 20));
        assert_eq!((r.u32_min_value, r.u32_max_value), (10, 20));
        assert_eq!((r.s32_min_value, r.s32_max_value), (10, 20));
        assert_eq!(r.var_off, Tnum::new(0, 0x1f));
    }

    #[test]
    fn sync_learns_ranges_from_tnum() {
        let mut r = RegState::unknown_scalar();
        r.var_off = Tnum::new(0, 0xff);
        r.bounds_sync();
        assert_eq!((r.umin_value, r.umax_value), (0, 255));
        assert_eq!((r.smin_value, r.smax_value), (0, 255));
    }

    #[test]
    fn sync_of_negative_signed_range_keeps_unsigned_consistent() {
        let mut r = RegState::unknown_scalar();
        r.smin_value = -3;
        r.smax_value = -1;
        r.bounds_sync();
        assert_eq!(r.umin_value, (-3i64) as u64);
        assert_eq!(r.umax_value, u64::MAX);
        assert_eq!((r.s32_min_value, r.s32_max_value), (-3, -1));
    }
}
