//! Bounds of a scalar divided by, or taken modulo, a constant (7.x's `scalar_min_max_udiv`,
//! `_sdiv`, `_umod`, `_smod` and their 32-bit twins). Until 6.18 the result of a division or
//! a modulo was an unknown scalar; the switch is `behaviour::bounds_div_mod_by_constant`.
//!
//! Each operation computes the range of the width it runs at only: the other width and the
//! tnum are reset to unknown, and the caller's `reg_bounds_sync` rebuilds them from the range.

use crate::state::reg::RegState;
use crate::state::width::{BoundWidth, Bounds, Int, W32, W64};
use bpfemu_isa::{AluOp, Width};

/// The division or modulo `op` of `d` by the constant `s`, at `width` (the caller has made
/// sure `s` is a constant of that width). BPF defines `x / 0 = 0` and `x % 0 = x`.
pub fn div_mod_by_constant(d: &mut RegState, s: &RegState, op: AluOp, width: Width) {
    if width == Width::W32 {
        by_constant::<W32>(d, s, op);
    } else {
        by_constant::<W64>(d, s, op);
    }
}

fn by_constant<W: BoundWidth>(d: &mut RegState, s: &RegState, op: AluOp) {
    let divisor = W::get(s);
    if divisor.umin == W::U::ZERO {
        if matches!(op, AluOp::Div | AluOp::SDiv) {
            // `___mark_reg_known(dst, 0)`: the whole register, whatever the width.
            d.set_known(0);
        }
        return;
    }
    match op {
        AluOp::Div => udiv::<W>(d, divisor.umin),
        AluOp::SDiv => sdiv::<W>(d, divisor.smin),
        AluOp::Mod => umod::<W>(d, divisor.umin),
        AluOp::SMod => smod::<W>(d, divisor.smin),
        _ => {}
    }
}

/// This width's unsigned range becomes `umin..=umax`, its signed range what that range is
/// read as signed (everything when it crosses the sign boundary), as 7.x's
/// `reg_set_urange32/64` leaves them; then the rest is reset.
fn set_unsigned_range<W: BoundWidth>(d: &mut RegState, umin: W::U, umax: W::U) {
    let (smin, smax) = if W::signed(umin) <= W::signed(umax) {
        (W::signed(umin), W::signed(umax))
    } else {
        (W::S::MIN, W::S::MAX)
    };
    W::set(
        d,
        Bounds {
            umin,
            umax,
            smin,
            smax,
        },
    );
    W::reset_other_width_and_tnum(d);
}

/// As [`set_unsigned_range`] from a signed range (`reg_set_srange32/64`): a range that
/// crosses zero leaves the unsigned one unbounded.
fn set_signed_range<W: BoundWidth>(d: &mut RegState, smin: W::S, smax: W::S) {
    let (umin, umax) = if W::unsigned(smin) <= W::unsigned(smax) {
        (W::unsigned(smin), W::unsigned(smax))
    } else {
        (W::U::MIN, W::U::MAX)
    };
    W::set(
        d,
        Bounds {
            umin,
            umax,
            smin,
            smax,
        },
    );
    W::reset_other_width_and_tnum(d);
}

/// Unsigned division is monotonic: the ends divided.
fn udiv<W: BoundWidth>(d: &mut RegState, divisor: W::U) {
    let b = W::get(d);
    set_unsigned_range::<W>(
        d,
        b.umin.wrapping_div(divisor),
        b.umax.wrapping_div(divisor),
    );
}

/// Signed division is monotonic for a divisor of one sign: the ends divided, swapped by a
/// negative divisor. `MIN / -1` is `MIN` in BPF, so a dividend that may be `MIN` and other
/// values, divided by -1, can be anything.
fn sdiv<W: BoundWidth>(d: &mut RegState, divisor: W::S) {
    let b = W::get(d);
    let minus_one = W::S::ONE.wrapping_neg();
    let (smin, smax) = if b.smin == W::S::MIN && divisor == minus_one {
        if b.smax == W::S::MIN {
            (W::S::MIN, W::S::MIN)
        } else {
            (W::S::MIN, W::S::MAX)
        }
    } else {
        let (lo, hi) = (b.smin.wrapping_div(divisor), b.smax.wrapping_div(divisor));
        (lo.min(hi), lo.max(hi))
    };
    set_signed_range::<W>(d, smin, smax);
}

/// `x % k` is below `k`; a dividend already below `k` is unchanged, bounds and tnum.
fn umod<W: BoundWidth>(d: &mut RegState, divisor: W::U) {
    let largest = divisor.wrapping_sub(W::U::ONE);
    let umax = W::get(d).umax;
    if umax <= largest {
        return;
    }
    set_unsigned_range::<W>(d, W::U::ZERO, umax.min(largest));
}

/// `x s% k` has the dividend's sign and a magnitude below `|k|`; a dividend already within
/// that is unchanged.
fn smod<W: BoundWidth>(d: &mut RegState, divisor: W::S) {
    // |k| as unsigned, so that |MIN| fits; |k| - 1 fits the signed type again.
    let magnitude = if divisor > W::S::ZERO {
        W::unsigned(divisor)
    } else {
        W::unsigned(divisor).wrapping_neg()
    };
    let largest = W::signed(magnitude.wrapping_sub(W::U::ONE));
    let b = W::get(d);
    if b.smin >= largest.wrapping_neg() && b.smax <= largest {
        return;
    }
    let (smin, smax) = if b.smin >= W::S::ZERO {
        (W::S::ZERO, b.smax.min(largest))
    } else if b.smax <= W::S::ZERO {
        (b.smin.max(largest.wrapping_neg()), W::S::ZERO)
    } else {
        (largest.wrapping_neg(), largest)
    };
    set_signed_range::<W>(d, smin, smax);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alu::adjust_scalar_min_max_vals;
    use bpfemu_isa::KernelVersion;

    /// A scalar in `lo..=hi` (64 bits, both views), as a branch would leave it.
    fn range64(lo: i64, hi: i64) -> RegState {
        let mut r = RegState::unknown_scalar();
        r.smin_value = lo;
        r.smax_value = hi;
        r.bounds_sync();
        r
    }

    fn apply(mut d: RegState, k: i64, op: AluOp, width: Width) -> RegState {
        div_mod_by_constant(&mut d, &RegState::known(k as u64), op, width);
        d.bounds_sync();
        d
    }

    #[test]
    fn unsigned_division_divides_both_ends() {
        let r = apply(range64(9, 100), 10, AluOp::Div, Width::W64);
        assert_eq!((r.umin_value, r.umax_value), (0, 10));
    }

    #[test]
    fn division_by_zero_is_zero_and_modulo_by_zero_keeps_the_dividend() {
        let r = apply(range64(9, 100), 0, AluOp::Div, Width::W64);
        assert_eq!((r.umin_value, r.umax_value), (0, 0));
        let r = apply(range64(9, 100), 0, AluOp::Mod, Width::W64);
        assert_eq!((r.umin_value, r.umax_value), (9, 100));
    }

    #[test]
    fn signed_division_by_a_negative_constant_swaps_the_ends() {
        let r = apply(range64(-20, 7), -3, AluOp::SDiv, Width::W64);
        assert_eq!((r.smin_value, r.smax_value), (-2, 6));
    }

    #[test]
    fn min_divided_by_minus_one_may_be_anything_unless_it_is_min_alone() {
        let r = apply(
            range64(i64::MIN, i64::MIN + 10),
            -1,
            AluOp::SDiv,
            Width::W64,
        );
        assert_eq!((r.smin_value, r.smax_value), (i64::MIN, i64::MAX));
        let r = apply(range64(i64::MIN, i64::MIN), -1, AluOp::SDiv, Width::W64);
        assert_eq!((r.smin_value, r.smax_value), (i64::MIN, i64::MIN));
    }

    #[test]
    fn signed_modulo_keeps_the_sign_of_the_dividend() {
        let r = apply(range64(-100, -1), 7, AluOp::SMod, Width::W64);
        assert_eq!((r.smin_value, r.smax_value), (-6, 0));
        let r = apply(range64(-100, 100), i64::MIN, AluOp::SMod, Width::W64);
        assert_eq!((r.smin_value, r.smax_value), (-100, 100));
    }

    #[test]
    fn thirty_two_bit_modulo_bounds_the_zero_extended_result_from_7_2_on() {
        let k = RegState::known(5);
        let mut r = RegState::unknown_scalar();
        adjust_scalar_min_max_vals(&mut r, &k, AluOp::Mod, Width::W32, KernelVersion::V7_2);
        assert_eq!((r.umin_value, r.umax_value), (0, 4));
        let mut r = RegState::unknown_scalar();
        adjust_scalar_min_max_vals(&mut r, &k, AluOp::Mod, Width::W32, KernelVersion::V6_18);
        assert_eq!((r.umin_value, r.umax_value), (0, u64::MAX));
    }
}
