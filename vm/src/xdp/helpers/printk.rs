//! `bpf_trace_printk`, `bpf_trace_vprintk` (kernel/trace/bpf_trace.c) and `bpf_snprintf` (kernel/bpf/helpers.c),
//! with the format rules of `bpf_bprintf_prepare`: printable ASCII only; conversions `%d %i
//! %u %x %X` with `l`/`ll`, `%c`, `%s`, `%p` (`%pK %px %ps %pS`, `%pks %pus`, `%pi4 %pI4
//! %pi6 %pI6`), optional `0 + - space` flags and a width, no precision; `%%`. A format the
//! kernel refuses answers -EINVAL, as there.
//!
//! What `bpf_trace_printk` prints is captured as a line of the outcome (without the trace
//! pipe's `[timestamp] task-pid` prefix, and without one trailing newline). Pointers print as
//! 16 hex digits of the raw value: the kernel's `%p` hashes with a per-boot key, which would
//! make replays differ.

use super::misc::read_cstr;
use super::{HelperResult, XdpEnv, ret};
use crate::helpers::HelperError;
use crate::maps::Errno;
use crate::memory::Memory;

/// `MAX_BPRINTF_BUF`: the output buffer, and the room `%s` strings share.
const MAX_BPRINTF_BUF: usize = 512;
/// `MAX_TRACE_PRINTK_VARARGS`.
const TRACE_PRINTK_ARGS: usize = 3;
/// `MAX_BPRINTF_VARARGS`.
const SNPRINTF_ARGS: u64 = 12;

/// `bpf_trace_printk(fmt, fmt_size, arg1, arg2, arg3)`: answers the formatted length.
pub fn trace_printk(env: &mut XdpEnv<'_>, a: [u64; 5], mem: &mut Memory) -> HelperResult {
    print_line(env, mem, a[0], a[1], &a[2..2 + TRACE_PRINTK_ARGS])
}

/// `bpf_trace_vprintk(fmt, fmt_size, data, data_len)` (kernel/trace/bpf_trace.c): as
/// `bpf_trace_printk` with its arguments in an array of u64 (up to 12; `data_len` a multiple
/// of 8, and `data` not NULL when it is not 0, else -EINVAL).
pub fn trace_vprintk(env: &mut XdpEnv<'_>, a: [u64; 5], mem: &mut Memory) -> HelperResult {
    let [fmt, fmt_size, data, data_len, _] = a;
    let args = match read_args(mem, data, data_len)? {
        Ok(args) => args,
        Err(e) => return ret(e.as_ret()),
    };
    print_line(env, mem, fmt, fmt_size, &args)
}

/// The u64 arguments of `bpf_snprintf` and `bpf_trace_vprintk`, or the kernel's errno for a
/// length it refuses.
fn read_args(
    mem: &Memory,
    data: u64,
    data_len: u64,
) -> Result<Result<Vec<u64>, Errno>, HelperError> {
    let data_len = data_len as u32 as u64;
    if !data_len.is_multiple_of(8) || data_len > SNPRINTF_ARGS * 8 || (data_len != 0 && data == 0) {
        return Ok(Err(Errno::EINVAL));
    }
    Ok(Ok((0..data_len / 8)
        .map(|i| mem.read(data + 8 * i, 8))
        .collect::<Result<_, _>>()?))
}

/// Formats a trace line from `fmt` (which must hold a NUL within `fmt_size`) and records it.
fn print_line(
    env: &mut XdpEnv<'_>,
    mem: &Memory,
    fmt: u64,
    fmt_size: u64,
    args: &[u64],
) -> HelperResult {
    let fmt = mem.slice(fmt, fmt_size as u32 as usize)?;
    let Some(end) = fmt.iter().position(|&b| b == 0) else {
        return ret(Errno::EINVAL.as_ret());
    };
    let fmt = fmt[..end].to_vec();
    let text = match format(&fmt, args, mem) {
        Ok(text) => text,
        Err(e) => return ret(e.as_ret()),
    };
    let len = text.len();
    let mut shown: String = text.chars().take(MAX_BPRINTF_BUF - 1).collect();
    if shown.ends_with('\n') {
        shown.pop();
    }
    env.run.printk.push(shown);
    ret(len as u64)
}

/// `bpf_snprintf(str, str_size, fmt, data, data_len)`: writes at most `str_size` bytes with a
/// NUL; answers the full formatted length plus one.
pub fn snprintf(_env: &mut XdpEnv<'_>, a: [u64; 5], mem: &mut Memory) -> HelperResult {
    let [out, out_size, fmt, data, data_len] = a;
    let args = match read_args(mem, data, data_len)? {
        Ok(args) => args,
        Err(e) => return ret(e.as_ret()),
    };
    let Some(fmt) = read_cstr(mem, fmt, usize::MAX >> 1) else {
        return ret(Errno::EINVAL.as_ret());
    };
    let text = match format(&fmt, &args, mem) {
        Ok(text) => text,
        Err(e) => return ret(e.as_ret()),
    };
    let size = out_size as u32 as usize;
    if size > 0 {
        let n = text.len().min(size - 1);
        let dst = mem.slice_mut(out, n + 1)?;
        dst[..n].copy_from_slice(&text.as_bytes()[..n]);
        dst[n] = 0;
    }
    ret(text.len() as u64 + 1)
}

/// A conversion's flags and width.
#[derive(Default)]
struct Spec {
    zero: bool,
    plus: bool,
    left: bool,
    space: bool,
    width: usize,
}

/// Formats `fmt` (without its NUL) with `args` as the kernel would, or the kernel's errno.
pub fn format(fmt: &[u8], args: &[u64], mem: &Memory) -> Result<String, Errno> {
    if fmt
        .iter()
        .any(|&c| !(c.is_ascii_graphic() || c == b' ' || (9..=13).contains(&c)))
    {
        return Err(Errno::EINVAL);
    }
    let mut out = String::new();
    let mut strings_room = MAX_BPRINTF_BUF;
    let (mut i, mut n) = (0, 0);
    let at = |i: usize| fmt.get(i).copied().unwrap_or(0);
    while i < fmt.len() {
        if fmt[i] != b'%' {
            out.push(fmt[i] as char);
            i += 1;
            continue;
        }
        if at(i + 1) == b'%' {
            out.push('%');
            i += 2;
            continue;
        }
        let arg = *args.get(n).ok_or(Errno::EINVAL)?;
        n += 1;
        i += 1;
        let mut spec = Spec::default();
        while let c @ (b'0' | b'+' | b'-' | b' ') = at(i) {
            match c {
                b'0' => spec.zero = true,
                b'+' => spec.plus = true,
                b'-' => spec.left = true,
                _ => spec.space = true,
            }
            i += 1;
        }
        while at(i).is_ascii_digit() {
            spec.width = spec.width * 10 + (at(i) - b'0') as usize;
            i += 1;
        }
        let (text, used) = conversion(&fmt[i..], arg, &spec, mem, &mut strings_room)?;
        out.push_str(&pad(&spec, text));
        i += used;
    }
    Ok(out)
}

/// One conversion at the start of `rest`: its text (before padding) and the bytes it used.
fn conversion(
    rest: &[u8],
    arg: u64,
    spec: &Spec,
    mem: &Memory,
    strings_room: &mut usize,
) -> Result<(String, usize), Errno> {
    let at = |i: usize| rest.get(i).copied().unwrap_or(0);
    let ends = |c: u8| c == 0 || c.is_ascii_whitespace() || c.is_ascii_punctuation();
    match at(0) {
        b'p' => pointer(rest, arg, mem, strings_room),
        b's' if ends(at(1)) => Ok((string(mem, arg, strings_room), 1)),
        b's' => Err(Errno::EINVAL),
        b'c' => Ok((((arg as u8) as char).to_string(), 1)),
        _ => integer(rest, arg, spec),
    }
}

fn pointer(
    rest: &[u8],
    arg: u64,
    mem: &Memory,
    strings_room: &mut usize,
) -> Result<(String, usize), Errno> {
    let at = |i: usize| rest.get(i).copied().unwrap_or(0);
    let ends = |c: u8| c == 0 || c.is_ascii_whitespace() || c.is_ascii_punctuation();
    let hex = format!("{arg:016x}");
    match (at(1), at(2)) {
        (c, _) if ends(c) => Ok((hex, 1)),
        (b'k' | b'u', b's') if ends(at(3)) => Ok((string(mem, arg, strings_room), 3)),
        (b'k' | b'u', b's') => Err(Errno::EINVAL),
        (b'K' | b'x' | b's' | b'S', _) => Ok((hex, 2)),
        (c @ (b'i' | b'I'), v @ (b'4' | b'6')) => Ok((ip(mem, arg, c == b'I', v == b'4'), 3)),
        _ => Err(Errno::EINVAL),
    }
}

/// `%pI4 %pi4 %pI6 %pi6`: the address at `ptr` (zeros when unreadable).
fn ip(mem: &Memory, ptr: u64, upper: bool, v4: bool) -> String {
    let len = if v4 { 4 } else { 16 };
    let bytes = mem.slice(ptr, len).map_or(vec![0; len], <[u8]>::to_vec);
    match (v4, upper) {
        (true, true) => bytes
            .iter()
            .map(u8::to_string)
            .collect::<Vec<_>>()
            .join("."),
        (true, false) => bytes
            .iter()
            .map(|b| format!("{b:03}"))
            .collect::<Vec<_>>()
            .join("."),
        (false, true) => bytes
            .chunks(2)
            .map(|p| format!("{:02x}{:02x}", p[0], p[1]))
            .collect::<Vec<_>>()
            .join(":"),
        (false, false) => bytes.iter().map(|b| format!("{b:02x}")).collect(),
    }
}

/// `%s`: the string at `ptr`, within the room left of the strings buffer; empty when
/// unreadable.
fn string(mem: &Memory, ptr: u64, room: &mut usize) -> String {
    let bytes = read_cstr(mem, ptr, room.saturating_sub(1)).unwrap_or_default();
    *room = room.saturating_sub(bytes.len() + 1);
    bytes.iter().map(|&b| b as char).collect()
}

/// `%d %i %u %x %X` with an optional `l` or `ll`.
fn integer(rest: &[u8], arg: u64, spec: &Spec) -> Result<(String, usize), Errno> {
    let mut i = 0;
    let mut wide = false;
    if rest.get(i) == Some(&b'l') {
        wide = true;
        i += 1;
    }
    if rest.get(i) == Some(&b'l') {
        i += 1;
    }
    let value = if wide { arg } else { arg as u32 as u64 };
    let signed = if wide {
        arg as i64
    } else {
        arg as u32 as i32 as i64
    };
    let text = match rest.get(i) {
        Some(b'd' | b'i') => {
            let sign = if signed < 0 {
                "-"
            } else if spec.plus {
                "+"
            } else if spec.space {
                " "
            } else {
                ""
            };
            format!("{sign}{}", signed.unsigned_abs())
        }
        Some(b'u') => value.to_string(),
        Some(b'x') => format!("{value:x}"),
        Some(b'X') => format!("{value:X}"),
        _ => return Err(Errno::EINVAL),
    };
    Ok((text, i + 1))
}

/// Pads to the width: left-aligned with `-`, zero-filled after any sign with `0`.
fn pad(spec: &Spec, text: String) -> String {
    let len = text.chars().count();
    if len >= spec.width {
        return text;
    }
    let fill = spec.width - len;
    if spec.left {
        return text + &" ".repeat(fill);
    }
    let numeric = text
        .chars()
        .all(|c| c.is_ascii_hexdigit() || "+- ".contains(c));
    if spec.zero && numeric {
        let sign_len = text.starts_with(['-', '+', ' ']) as usize;
        let (sign, digits) = text.split_at(sign_len);
        return format!("{sign}{}{digits}", "0".repeat(fill));
    }
    " ".repeat(fill) + &text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fmt(f: &str, args: &[u64]) -> Result<String, Errno> {
        format(f.as_bytes(), args, &Memory::new())
    }

    #[test]
    fn integers_and_widths() {
        assert_eq!(
            fmt("%d %u %x", &[u64::MAX, u64::MAX, 255]).unwrap(),
            "-1 4294967295 ff"
        );
        assert_eq!(
            fmt("%lld %llu", &[u64::MAX, u64::MAX]).unwrap(),
            "-1 18446744073709551615"
        );
        assert_eq!(
            fmt("%5d|%-5d|%05d", &[42, 42, u64::MAX]).unwrap(),
            "   42|42   |-0001"
        );
        assert_eq!(fmt("%+d %lX %%", &[3, 0xabc]).unwrap(), "+3 ABC %");
        assert_eq!(fmt("%c%c", &[b'o' as u64, b'k' as u64]).unwrap(), "ok");
    }

    #[test]
    fn kernel_refusals() {
        assert_eq!(fmt("%d %d", &[1]), Err(Errno::EINVAL));
        assert_eq!(fmt("%.2d", &[1]), Err(Errno::EINVAL));
        assert_eq!(fmt("%f", &[1]), Err(Errno::EINVAL));
        assert_eq!(fmt("%sx", &[1]), Err(Errno::EINVAL));
        assert_eq!(fmt("%pQ", &[1]), Err(Errno::EINVAL));
        assert_eq!(fmt("caf\u{e9}", &[]), Err(Errno::EINVAL));
        assert_eq!(fmt("tab\there\n", &[]).unwrap(), "tab\there\n");
    }

    #[test]
    fn strings_and_addresses() {
        let mut mem = Memory::new();
        let id = mem.add_copy(crate::RegionKind::Input, b"eth0\0\x0a\x00\x00\x01", false);
        let base = mem.region(id).unwrap().base();
        let f = |s: &str, args: &[u64]| format(s.as_bytes(), args, &mem).unwrap();
        assert_eq!(f("dev %s!", &[base]), "dev eth0!");
        assert_eq!(f("[%s]", &[0x10]), "[]");
        assert_eq!(
            f("%pI4 %pi4", &[base + 5, base + 5]),
            "10.0.0.1 010.000.000.001"
        );
        assert_eq!(f("%px", &[0x1234]), "0000000000001234");
    }
}
