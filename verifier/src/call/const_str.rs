//! Constant strings (`ARG_PTR_TO_CONST_STR`, `check_reg_const_str`): a pointer into a frozen
//! read-only map (`.rodata`) at a known offset, whose bytes up to the value's end hold a NUL;
//! and `bpf_snprintf`'s format, which the verifier reads out of that map and checks as
//! `bpf_bprintf_prepare` does (`check_bpf_snprintf_call`).

use crate::env::Env;
use crate::mem::check_map_access;
use crate::state::reg::{RegState, RegType};
use crate::{Errno, Reject};
use bpfemu_loader::{MapOrigin, MapSpec};

use bpfemu_isa::uapi::BPF_F_RDONLY_PROG;
/// `BPF_MAP_TYPE_ARRAY`: the map type with direct value access.
const ARRAY: u32 = 2;

/// `bpf_map_is_rdonly`: read-only for programs and frozen. libbpf freezes the read-only global
/// data it creates, so those are the frozen maps.
fn is_frozen_rdonly(map: &MapSpec) -> bool {
    map.map_flags & BPF_F_RDONLY_PROG != 0
        && matches!(
            map.origin,
            MapOrigin::GlobalData { .. } | MapOrigin::Kconfig
        )
}

/// Checks a constant string argument in `regno` (`reg`).
pub fn check_reg_const_str(env: &mut Env<'_>, reg: &RegState, regno: u8) -> Result<(), Reject> {
    let (RegType::MapValue, Some(map)) = (reg.ty, reg.map.and_then(|m| env.map(m))) else {
        return Err(env.reject(Errno::Einval, "verifier bug: const string not in a map"));
    };
    if !is_frozen_rdonly(map) {
        return Err(env.reject(
            Errno::Eacces,
            format!("R{regno} does not point to a readonly map'"),
        ));
    }
    if !reg.var_off.is_const() {
        return Err(env.reject(
            Errno::Eacces,
            format!("R{regno} is not a constant address'"),
        ));
    }
    if map.map_type != ARRAY {
        return Err(env.reject(
            Errno::Eacces,
            "no direct value access support for this map type",
        ));
    }
    let size = map.value_size as i32 - reg.off;
    check_map_access(env, reg, regno, reg.off, size, false)?;
    let Some(string) = string_at(map, reg) else {
        return Err(env.reject(Errno::Einval, "direct value access on string failed"));
    };
    if !string.contains(&0) {
        return Err(env.reject(Errno::Einval, "string is not zero-terminated"));
    }
    Ok(())
}

/// The map's bytes from the pointer to the value's end (`map_direct_value_addr`: arrays of
/// one element, offsets inside the value).
fn string_at<'m>(map: &'m MapSpec, reg: &RegState) -> Option<&'m [u8]> {
    if map.max_entries != 1 {
        return None;
    }
    let off = usize::try_from(reg.off as i64 + reg.var_off.value as i64).ok()?;
    if off >= map.value_size as usize {
        return None;
    }
    match &map.initial {
        Some(data) => data.get(off..),
        // No contents given: the value is zeros.
        None => Some(&[0][..]),
    }
}

/// `check_bpf_snprintf_call`: the format (R3) must be one `bpf_bprintf_prepare` accepts with
/// the arguments R5 gives room for.
pub fn check_snprintf_format(
    env: &mut Env<'_>,
    fmt_reg: &RegState,
    data_len_reg: &RegState,
) -> Result<(), Reject> {
    let data_len = data_len_reg.var_off.value;
    if !data_len.is_multiple_of(8) {
        // check_bpf_snprintf_call returns -EINVAL here without a word in the log (which ends
        // at its statistics): the rejection says why for the user, marked as not logged.
        let msg = format!(
            "bpf_snprintf's data_len (R5) is {data_len}, not a multiple of 8: the kernel refuses \
             it with EINVAL and logs no reason"
        );
        return Err(Reject {
            errno: Errno::Einval,
            msg,
            logged: false,
        });
    }
    let format = fmt_reg
        .map
        .and_then(|m| env.map(m))
        .and_then(|map| string_at(map, fmt_reg))
        .map(|s| s.split(|&b| b == 0).next().unwrap_or(&[]).to_vec());
    let valid = format.is_some_and(|f| format_is_valid(&f, (data_len / 8) as usize));
    if valid {
        return Ok(());
    }
    Err(env.reject(Errno::Einval, "Invalid format string"))
}

/// Whether `bpf_bprintf_prepare` accepts `fmt` (without its NUL) with `num_args` arguments:
/// printable ASCII only, and each conversion one of `%d %i %u %x %X` (with `l` or `ll`), `%c`,
/// `%s`, `%ks`/`%us` after `p`, `%p` alone or as `%pK %px %ps %pS %pi4 %pI4 %pi6 %pI6`,
/// each with flags `0+- ` and a width; `%%` is a literal.
pub fn format_is_valid(fmt: &[u8], num_args: usize) -> bool {
    let printable = |c: u8| c.is_ascii_graphic() || c == b' ' || (9..=13).contains(&c);
    if !fmt.iter().all(|&c| printable(c)) {
        return false;
    }
    let at = |i: usize| fmt.get(i).copied().unwrap_or(0);
    let ends = |c: u8| c == 0 || c.is_ascii_whitespace() || c.is_ascii_punctuation();
    let (mut i, mut specs) = (0, 0);
    while i < fmt.len() {
        if fmt[i] != b'%' {
            i += 1;
            continue;
        }
        if at(i + 1) == b'%' {
            i += 2;
            continue;
        }
        if specs >= num_args {
            return false;
        }
        i += 1;
        while matches!(at(i), b'0' | b'+' | b'-' | b' ') {
            i += 1;
        }
        while at(i).is_ascii_digit() {
            i += 1;
        }
        let used = match at(i) {
            b'p' => match (at(i + 1), at(i + 2)) {
                (b'k' | b'u', b's') if ends(at(i + 3)) => 3,
                (b'k' | b'u', b's') => return false,
                (c, _) if ends(c) => 1,
                (b'K' | b'x' | b's' | b'S', _) => 2,
                (b'i' | b'I', b'4' | b'6') => 3,
                _ => return false,
            },
            b's' if ends(at(i + 1)) => 1,
            b's' => return false,
            b'c' => 1,
            _ => {
                let mut n = 0;
                while n < 2 && at(i + n) == b'l' {
                    n += 1;
                }
                if !matches!(at(i + n), b'd' | b'i' | b'u' | b'x' | b'X') {
                    return false;
                }
                n + 1
            }
        };
        i += used;
        specs += 1;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::format_is_valid;

    #[test]
    fn formats_as_bprintf_prepare_takes_them() {
        assert!(format_is_valid(b"plain text", 0));
        assert!(format_is_valid(b"100%% sure", 0));
        assert!(format_is_valid(b"%d %lu %llx %-08X %c", 5));
        assert!(format_is_valid(b"%s, %pI4 %pi6 %pK %pks", 5));
        assert!(
            !format_is_valid(b"%d", 0),
            "more conversions than arguments"
        );
        assert!(!format_is_valid(b"%f", 1), "no floating point");
        assert!(
            !format_is_valid(b"%sx", 1),
            "a string conversion runs into a letter"
        );
        assert!(!format_is_valid(b"%pI5", 1));
        assert!(!format_is_valid(b"tab\x01", 0), "a control character");
        assert!(!format_is_valid(b"%lld", 0));
    }
}
