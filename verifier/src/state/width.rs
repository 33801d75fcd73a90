//! One scalar's bounds seen at one width: the low 32 bits (`u32_min_value`, `s32_min_value`,
//! the tnum's subregister) or all 64 (`umin_value`, `smin_value`, the whole tnum).
//!
//! The kernel writes most bound operations twice, `scalar32_min_max_add` next to
//! `scalar_min_max_add`, `u32` fields next to `u64` ones, with the same steps. Here such an
//! operation is written once, generic over [`BoundWidth`], and called as `op::<W32>` and
//! `op::<W64>`; where the kernel's two widths really do different things (shifts, sign
//! extension, what a bitwise op re-reads from the tnum) the difference stays visible, either
//! as separate functions or as a named hook of the width.

use super::reg::RegState;
use super::tnum::Tnum;

/// The integer operations the bound arithmetic needs, for `u32`, `u64`, `i32` and `i64`.
pub trait Int: Copy + Ord {
    const MIN: Self;
    const MAX: Self;
    const ONE: Self;
    const ZERO: Self;
    fn overflowing_add(self, other: Self) -> (Self, bool);
    fn overflowing_sub(self, other: Self) -> (Self, bool);
    fn checked_mul(self, other: Self) -> Option<Self>;
    fn wrapping_add(self, other: Self) -> Self;
    fn wrapping_sub(self, other: Self) -> Self;
    /// Division rounding toward zero, as C's `/` (`MIN / -1` wraps; callers exclude it).
    fn wrapping_div(self, other: Self) -> Self;
    fn wrapping_neg(self) -> Self;
}

macro_rules! int {
    ($($t:ty),*) => {$(
        impl Int for $t {
            const MIN: Self = <$t>::MIN;
            const MAX: Self = <$t>::MAX;
            const ONE: Self = 1;
            const ZERO: Self = 0;
            fn overflowing_add(self, other: Self) -> (Self, bool) {
                <$t>::overflowing_add(self, other)
            }
            fn overflowing_sub(self, other: Self) -> (Self, bool) {
                <$t>::overflowing_sub(self, other)
            }
            fn checked_mul(self, other: Self) -> Option<Self> {
                <$t>::checked_mul(self, other)
            }
            fn wrapping_add(self, other: Self) -> Self {
                <$t>::wrapping_add(self, other)
            }
            fn wrapping_sub(self, other: Self) -> Self {
                <$t>::wrapping_sub(self, other)
            }
            fn wrapping_div(self, other: Self) -> Self {
                <$t>::wrapping_div(self, other)
            }
            fn wrapping_neg(self) -> Self {
                <$t>::wrapping_neg(self)
            }
        }
    )*};
}
int!(u32, u64, i32, i64);

/// The four ranges of one width, copied out of a [`RegState`] so that an operation can work
/// on plain values and write them back with [`BoundWidth::set`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bounds<U, S> {
    pub umin: U,
    pub umax: U,
    pub smin: S,
    pub smax: S,
}

/// A width of scalar bounds: 32 ([`W32`]) or 64 ([`W64`]) bits.
pub trait BoundWidth {
    /// `u32` or `u64`.
    type U: Int;
    /// `i32` or `i64`.
    type S: Int;

    fn get(r: &RegState) -> Bounds<Self::U, Self::S>;
    fn set(r: &mut RegState, b: Bounds<Self::U, Self::S>);

    /// The tnum of this width (the subregister for 32 bits, zero-extended).
    fn tnum(r: &RegState) -> Tnum;
    /// Replaces this width's part of the tnum: for 32 bits the upper half stays as it was.
    fn set_tnum(r: &mut RegState, t: Tnum);

    /// `__mark_reg32_known` / `__mark_reg_known`: this width becomes the constant `value`
    /// (64 bits: the whole register, 32-bit bounds included).
    fn mark_known(r: &mut RegState, value: u64);

    /// After a bitwise operation's bounds: the 64-bit ones re-read the tnum
    /// (`__update_reg_bounds`), the 32-bit ones leave that to the final `reg_bounds_sync`,
    /// as the kernel's `scalar32_min_max_and`/`or`/`xor` do.
    fn after_bitwise(r: &mut RegState);

    /// `U` as `S`, bit for bit (`(s32)u32_min_value`).
    fn signed(u: Self::U) -> Self::S;
    /// `S` as `U`, bit for bit (`(u32)s32_min_value`).
    fn unsigned(s: Self::S) -> Self::U;

    /// `reset_reg64_and_tnum` / `reset_reg32_and_tnum` (7.x): after an operation computed
    /// this width's range only, the other width and the tnum become unknown.
    fn reset_other_width_and_tnum(r: &mut RegState);
    /// The low bits of a 64-bit value as `U` and as `S` (a compared constant).
    fn trunc_u(v: u64) -> Self::U;
    fn trunc_s(v: u64) -> Self::S;

    /// Whether this width of `r` is one known value in every view (tnum and both ranges).
    fn is_const(r: &RegState) -> bool {
        let b = Self::get(r);
        Self::tnum(r).is_const() && b.smin == b.smax && b.umin == b.umax
    }
}

/// The low 32 bits.
pub enum W32 {}
/// All 64 bits.
pub enum W64 {}

impl BoundWidth for W32 {
    type U = u32;
    type S = i32;

    fn get(r: &RegState) -> Bounds<u32, i32> {
        Bounds {
            umin: r.u32_min_value,
            umax: r.u32_max_value,
            smin: r.s32_min_value,
            smax: r.s32_max_value,
        }
    }

    fn set(r: &mut RegState, b: Bounds<u32, i32>) {
        r.u32_min_value = b.umin;
        r.u32_max_value = b.umax;
        r.s32_min_value = b.smin;
        r.s32_max_value = b.smax;
    }

    fn tnum(r: &RegState) -> Tnum {
        r.var_off.subreg()
    }

    fn set_tnum(r: &mut RegState, t: Tnum) {
        r.var_off = r.var_off.with_subreg(t);
    }

    fn mark_known(r: &mut RegState, value: u64) {
        let v = value as u32;
        r.var_off = r.var_off.const_subreg(v);
        W32::set(
            r,
            Bounds {
                umin: v,
                umax: v,
                smin: v as i32,
                smax: v as i32,
            },
        );
    }

    fn after_bitwise(_: &mut RegState) {}

    fn signed(u: u32) -> i32 {
        u as i32
    }

    fn unsigned(s: i32) -> u32 {
        s as u32
    }

    fn reset_other_width_and_tnum(r: &mut RegState) {
        r.mark_64_unbounded();
        r.var_off = Tnum::UNKNOWN;
    }

    fn trunc_u(v: u64) -> u32 {
        v as u32
    }

    fn trunc_s(v: u64) -> i32 {
        v as i32
    }
}

impl BoundWidth for W64 {
    type U = u64;
    type S = i64;

    fn get(r: &RegState) -> Bounds<u64, i64> {
        Bounds {
            umin: r.umin_value,
            umax: r.umax_value,
            smin: r.smin_value,
            smax: r.smax_value,
        }
    }

    fn set(r: &mut RegState, b: Bounds<u64, i64>) {
        r.umin_value = b.umin;
        r.umax_value = b.umax;
        r.smin_value = b.smin;
        r.smax_value = b.smax;
    }

    fn tnum(r: &RegState) -> Tnum {
        r.var_off
    }

    fn set_tnum(r: &mut RegState, t: Tnum) {
        r.var_off = t;
    }

    fn mark_known(r: &mut RegState, value: u64) {
        r.set_known(value);
    }

    fn after_bitwise(r: &mut RegState) {
        r.update_bounds();
    }

    fn signed(u: u64) -> i64 {
        u as i64
    }

    fn unsigned(s: i64) -> u64 {
        s as u64
    }

    fn reset_other_width_and_tnum(r: &mut RegState) {
        r.mark_32_unbounded();
        r.var_off = Tnum::UNKNOWN;
    }

    fn trunc_u(v: u64) -> u64 {
        v
    }

    fn trunc_s(v: u64) -> i64 {
        v as i64
    }
}
