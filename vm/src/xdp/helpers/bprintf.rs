//! The kernel's formatting for `bpf_snprintf`, `bpf_trace_printk` and `bpf_trace_vprintk`,
//! in its two passes: `bpf_bprintf_prepare` (kernel/bpf/helpers.c) checks the format and packs
//! the arguments into a binary buffer of [`MAX_BPRINTF_BUF`] bytes, then `bstr_printf`
//! (lib/vsprintf.c) renders the format from that buffer into an output of a given size.
//!
//! Two passes, because the second has an effect a program sees: a conversion that reads
//! memory (`%pI4 %pi4 %pI6 %pi6 %pks %pus`) was formatted into the buffer by the first pass as
//! text, and the second copies that text only while the output has room. Once the output is
//! full its length is not counted, and the reading position does not move past it: the
//! conversions after it take their values from its text. `bpf_snprintf`'s return value shows
//! both.
//!
//! Accepted: printable ASCII; `%d %i %u %x %X` with `l`/`ll`, `%c`, `%s`, `%p` (`%pK %px %ps
//! %pS`, `%pks %pus`, `%pi4 %pI4 %pi6 %pI6`), the flags `0 + - space` and a width, no
//! precision; `%%`. Anything else is EINVAL, as in the kernel. Pointers print as 16 hex digits
//! of the raw value (the kernel's `%p` hashes with a per-boot key, which would make replays
//! differ). `%pus` reads user memory, which no address an XDP program holds is: it prints
//! nothing, as the kernel's failed copy does.

use super::misc::read_cstr;
use crate::maps::Errno;
use crate::memory::Memory;

/// `MAX_BPRINTF_BUF`: the binary buffer, and trace_printk's output.
pub const MAX_BPRINTF_BUF: usize = 512;

/// A conversion's flags and width.
#[derive(Clone, Copy, Debug, Default)]
struct Spec {
    zero: bool,
    plus: bool,
    left: bool,
    space: bool,
    width: usize,
}

/// What a conversion prints.
#[derive(Clone, Copy, Debug)]
enum Kind {
    /// `%d %i %u %x %X` (the letter), 64-bit with `l` or `ll`.
    Int {
        letter: u8,
        wide: bool,
    },
    Char,
    Str,
    /// `%pI4 %pi4 %pI6 %pi6`.
    Ip {
        upper: bool,
        v4: bool,
    },
    /// `%pks`, `%pus`.
    PtrStr {
        user: bool,
    },
    /// `%p %px %pK %ps %pS`: the pointer's value.
    Ptr,
}

impl Kind {
    /// Whether the first pass formatted it to text that the second copies while there is room.
    fn preformatted(self) -> bool {
        matches!(self, Kind::Ip { .. } | Kind::PtrStr { .. })
    }
}

#[derive(Clone, Copy, Debug)]
enum Piece {
    /// Bytes `start..end` of the format, copied as they are.
    Text(usize, usize),
    /// `%%`.
    Percent,
    Conversion(Spec, Kind),
}

/// A rendered format: the bytes that fit the output, and the full length.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Formatted {
    pub written: Vec<u8>,
    pub len: usize,
}

/// Formats `fmt` (without its NUL) with `args` into an output of `size` bytes, as the
/// kernel does, or the kernel's errno.
pub fn format(fmt: &[u8], args: &[u64], mem: &Memory, size: usize) -> Result<Formatted, Errno> {
    let pieces = parse(fmt)?;
    let bin = pack(&pieces, args, mem)?;
    Ok(render(fmt, &pieces, &bin, size))
}

/// The format's pieces, or EINVAL where `bpf_bprintf_prepare` refuses it.
fn parse(fmt: &[u8]) -> Result<Vec<Piece>, Errno> {
    if fmt
        .iter()
        .any(|&c| !(c.is_ascii_graphic() || c == b' ' || (9..=13).contains(&c)))
    {
        return Err(Errno::EINVAL);
    }
    let at = |i: usize| fmt.get(i).copied().unwrap_or(0);
    let ends = |c: u8| c == 0 || c.is_ascii_whitespace() || c.is_ascii_punctuation();
    let mut pieces = Vec::with_capacity(8);
    let mut i = 0;
    while i < fmt.len() {
        if fmt[i] != b'%' {
            let end = fmt[i..]
                .iter()
                .position(|&c| c == b'%')
                .map_or(fmt.len(), |n| i + n);
            pieces.push(Piece::Text(i, end));
            i = end;
            continue;
        }
        if at(i + 1) == b'%' {
            pieces.push(Piece::Percent);
            i += 2;
            continue;
        }
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
        let (kind, used) = match (at(i), at(i + 1), at(i + 2)) {
            (b'p', c, _) if ends(c) => (Kind::Ptr, 1),
            (b'p', c @ (b'k' | b'u'), b's') if ends(at(i + 3)) => {
                (Kind::PtrStr { user: c == b'u' }, 3)
            }
            (b'p', b'K' | b'x' | b's' | b'S', _) => (Kind::Ptr, 2),
            (b'p', c @ (b'i' | b'I'), v @ (b'4' | b'6')) => (
                Kind::Ip {
                    upper: c == b'I',
                    v4: v == b'4',
                },
                3,
            ),
            (b's', c, _) if ends(c) => (Kind::Str, 1),
            (b'c', _, _) => (Kind::Char, 1),
            (b'l', b'l', letter) => (Kind::Int { letter, wide: true }, 3),
            (b'l', letter, _) => (Kind::Int { letter, wide: true }, 2),
            (letter, _, _) => (
                Kind::Int {
                    letter,
                    wide: false,
                },
                1,
            ),
        };
        if let Kind::Int { letter, .. } = kind
            && !matches!(letter, b'd' | b'i' | b'u' | b'x' | b'X')
        {
            return Err(Errno::EINVAL);
        }
        pieces.push(Piece::Conversion(spec, kind));
        i += used;
    }
    Ok(pieces)
}

/// The first pass: each conversion's argument in the binary buffer (integers and pointers
/// 4-byte aligned, a char as one byte, strings and addresses as text with a NUL).
fn pack(pieces: &[Piece], args: &[u64], mem: &Memory) -> Result<Vec<u8>, Errno> {
    let mut bin = Vec::new();
    let conversions = pieces.iter().filter_map(|p| match p {
        Piece::Conversion(_, kind) => Some(*kind),
        Piece::Text(..) | Piece::Percent => None,
    });
    for (n, kind) in conversions.enumerate() {
        let arg = *args.get(n).ok_or(Errno::EINVAL)?;
        let room = MAX_BPRINTF_BUF - bin.len();
        match kind {
            Kind::Int { wide, .. } => {
                let size = if wide { 8 } else { 4 };
                bin.resize(bin.len().next_multiple_of(4), 0);
                if MAX_BPRINTF_BUF - bin.len() < size {
                    return Err(Errno::ENOSPC);
                }
                bin.extend_from_slice(&arg.to_le_bytes()[..size]);
            }
            Kind::Ptr => {
                bin.resize(bin.len().next_multiple_of(4), 0);
                if MAX_BPRINTF_BUF - bin.len() < 8 {
                    return Err(Errno::ENOSPC);
                }
                bin.extend_from_slice(&arg.to_le_bytes());
            }
            Kind::Char => {
                if room == 0 {
                    return Err(Errno::ENOSPC);
                }
                bin.push(arg as u8);
            }
            Kind::Str | Kind::PtrStr { .. } => {
                if room == 0 {
                    return Err(Errno::ENOSPC);
                }
                let user = matches!(kind, Kind::PtrStr { user: true });
                let text = if user {
                    Vec::new()
                } else {
                    read_cstr(mem, arg, room - 1).unwrap_or_default()
                };
                bin.extend_from_slice(&text);
                bin.push(0);
            }
            Kind::Ip { upper, v4 } => {
                let len = if v4 { 4 } else { 16 };
                if room < len {
                    return Err(Errno::ENOSPC);
                }
                let bytes = mem.slice(arg, len).map_or(vec![0; len], <[u8]>::to_vec);
                let mut text = ip_text(&bytes, upper, v4).into_bytes();
                text.truncate(room - 1);
                bin.extend_from_slice(&text);
                bin.push(0);
            }
        }
    }
    Ok(bin)
}

/// The output of the second pass: bytes land while they fit; the length counts on.
struct Output {
    written: Vec<u8>,
    len: usize,
    size: usize,
}

impl Output {
    fn put(&mut self, bytes: &[u8]) {
        let room = self.size.saturating_sub(self.len);
        self.written
            .extend_from_slice(&bytes[..bytes.len().min(room)]);
        self.len += bytes.len();
    }

    fn has_room(&self) -> bool {
        self.len < self.size
    }
}

/// The binary buffer as the second pass reads it (past its end, zeros).
struct Args<'a> {
    bin: &'a [u8],
    at: usize,
}

impl Args<'_> {
    fn take(&mut self, size: usize, align: usize) -> u64 {
        self.at = self.at.next_multiple_of(align);
        let mut value = [0u8; 8];
        for (i, v) in value.iter_mut().enumerate().take(size) {
            *v = self.bin.get(self.at + i).copied().unwrap_or(0);
        }
        self.at += size;
        u64::from_le_bytes(value)
    }

    /// The NUL-terminated text at the reading position (not moving past it).
    fn text(&self) -> &[u8] {
        let rest = self.bin.get(self.at..).unwrap_or_default();
        let end = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
        &rest[..end]
    }
}

/// The second pass, `bstr_printf` into `size` bytes.
fn render(fmt: &[u8], pieces: &[Piece], bin: &[u8], size: usize) -> Formatted {
    let mut out = Output {
        written: Vec::with_capacity((fmt.len() + bin.len() * 3).min(size)),
        len: 0,
        size,
    };
    let mut args = Args { bin, at: 0 };
    for piece in pieces {
        let (spec, kind) = match *piece {
            Piece::Text(start, end) => {
                out.put(&fmt[start..end]);
                continue;
            }
            Piece::Percent => {
                out.put(b"%");
                continue;
            }
            Piece::Conversion(spec, kind) => (spec, kind),
        };
        if kind.preformatted() {
            if out.has_room() {
                let text = args.text().to_vec();
                args.at += text.len() + 1;
                out.put(&text);
            }
            continue;
        }
        let text = match kind {
            Kind::Int { letter, wide } => {
                let value = args.take(if wide { 8 } else { 4 }, 4);
                pad(&spec, integer_text(letter, wide, value, &spec))
            }
            Kind::Ptr => pad(&spec, format!("{:016x}", args.take(8, 4)).into_bytes()),
            Kind::Char => {
                let c = args.take(1, 1) as u8;
                pad(
                    &Spec {
                        zero: false,
                        ..spec
                    },
                    vec![c],
                )
            }
            Kind::Str => {
                let text = args.text().to_vec();
                args.at += text.len() + 1;
                pad(
                    &Spec {
                        zero: false,
                        ..spec
                    },
                    text,
                )
            }
            Kind::Ip { .. } | Kind::PtrStr { .. } => unreachable!("preformatted"),
        };
        out.put(&text);
    }
    Formatted {
        written: out.written,
        len: out.len,
    }
}

/// `%pI4 %pi4 %pI6 %pi6` of `bytes`.
fn ip_text(bytes: &[u8], upper: bool, v4: bool) -> String {
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

/// An integer conversion's digits and sign.
fn integer_text(letter: u8, wide: bool, value: u64, spec: &Spec) -> Vec<u8> {
    let unsigned = if wide { value } else { value as u32 as u64 };
    let signed = if wide {
        value as i64
    } else {
        value as u32 as i32 as i64
    };
    let text = match letter {
        b'd' | b'i' => {
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
        b'u' => unsigned.to_string(),
        b'x' => format!("{unsigned:x}"),
        _ => format!("{unsigned:X}"),
    };
    text.into_bytes()
}

/// Pads to the width: left-aligned with `-`, zero-filled after any sign with `0` (numbers).
fn pad(spec: &Spec, text: Vec<u8>) -> Vec<u8> {
    if text.len() >= spec.width {
        return text;
    }
    let fill = spec.width - text.len();
    if spec.left {
        return [text, vec![b' '; fill]].concat();
    }
    let numeric = text
        .iter()
        .all(|c| c.is_ascii_hexdigit() || b"+- ".contains(c));
    if spec.zero && numeric {
        let sign_len = text.starts_with(b"-") || text.starts_with(b"+") || text.starts_with(b" ");
        let (sign, digits) = text.split_at(sign_len as usize);
        return [sign, &vec![b'0'; fill], digits].concat();
    }
    [vec![b' '; fill], text].concat()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fmt(f: &str, args: &[u64]) -> Result<String, Errno> {
        let out = format(f.as_bytes(), args, &Memory::new(), MAX_BPRINTF_BUF)?;
        Ok(String::from_utf8_lossy(&out.written).into_owned())
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

    fn memory_with(bytes: &[u8]) -> (Memory, u64) {
        let mut mem = Memory::new();
        let id = mem.add_copy(crate::RegionKind::Input, bytes, false);
        let base = mem.region(id).unwrap().base();
        (mem, base)
    }

    #[test]
    fn strings_and_addresses() {
        let (mem, base) = memory_with(b"eth0\0\x0a\x00\x00\x01");
        let f = |s: &str, args: &[u64]| {
            let out = format(s.as_bytes(), args, &mem, MAX_BPRINTF_BUF).unwrap();
            String::from_utf8(out.written).unwrap()
        };
        assert_eq!(f("dev %s!", &[base]), "dev eth0!");
        assert_eq!(f("[%s]", &[0x10]), "[]");
        assert_eq!(
            f("%pI4 %pi4", &[base + 5, base + 5]),
            "10.0.0.1 010.000.000.001"
        );
        assert_eq!(f("%px", &[0x1234]), "0000000000001234");
        assert_eq!(f("[%pks] [%pus]", &[base, base]), "[eth0] []");
    }

    #[test]
    fn bytes_past_ascii_stay_one_byte() {
        let (mem, base) = memory_with(b"\xe9t\xff\0");
        let out = format(b"%s%c", &[base, 0x80], &mem, MAX_BPRINTF_BUF).unwrap();
        assert_eq!(out.written, b"\xe9t\xff\x80");
        assert_eq!(out.len, 4);
    }

    #[test]
    fn a_full_output_drops_preformatted_text_and_misreads_what_follows() {
        let (mem, base) = memory_with(b"\x01\x02\x03\x04");
        // Room for everything: "1.2.3.4 7".
        let all = format(b"%pI4 %d", &[base, 7], &mem, 64).unwrap();
        assert_eq!((all.written.as_slice(), all.len), (&b"1.2.3.4 7"[..], 9));
        // No room at all: the address is not counted, and %d reads the address's text
        // ("1.2." as a little-endian int) in place of 7.
        let none = format(b"%pI4 %d", &[base, 7], &mem, 0).unwrap();
        let misread = i32::from_le_bytes(*b"1.2.").to_string();
        assert_eq!(none.len, 1 + misread.len());
        // A %s is counted whatever the room.
        let (mem, base) = memory_with(b"abc\0");
        assert_eq!(format(b"%s", &[base], &mem, 0).unwrap().len, 3);
    }
}
