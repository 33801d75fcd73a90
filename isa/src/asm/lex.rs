//! Lexical pieces both dialects share: the parse error type that remembers where it happened,
//! number literals and the range rules for the fields they land in, identifiers, and turning a
//! position inside a line into a column.

use nom::branch::alt;
use nom::bytes::complete::{tag, tag_no_case, take_while, take_while1};
use nom::character::complete::{one_of, space0};
use nom::combinator::{opt, recognize};
use nom::error::{ErrorKind, ParseError};
use nom::sequence::pair;
use nom::{IResult, Parser};
use std::borrow::Cow;

/// A parse failure: where in the line (`at` is the unparsed rest) and what was expected.
#[derive(Debug)]
pub(crate) struct SyntaxError<'a> {
    pub at: &'a str,
    pub message: Cow<'static, str>,
    /// Produced by a nom primitive rather than by us; loses to any specific message.
    generic: bool,
}

impl<'a> SyntaxError<'a> {
    pub fn new(at: &'a str, message: impl Into<Cow<'static, str>>) -> Self {
        SyntaxError {
            at,
            message: message.into(),
            generic: false,
        }
    }

    /// Whichever error got further into the line wins; at a tie, a specific message wins.
    fn further(self, other: Self) -> Self {
        match other.at.len().cmp(&self.at.len()) {
            std::cmp::Ordering::Less => other,
            std::cmp::Ordering::Greater => self,
            std::cmp::Ordering::Equal if self.generic && !other.generic => other,
            std::cmp::Ordering::Equal => self,
        }
    }
}

impl<'a> ParseError<&'a str> for SyntaxError<'a> {
    fn from_error_kind(input: &'a str, _kind: ErrorKind) -> Self {
        SyntaxError {
            at: input,
            message: Cow::Borrowed("syntax error"),
            generic: true,
        }
    }

    fn append(_input: &'a str, _kind: ErrorKind, other: Self) -> Self {
        other
    }

    fn or(self, other: Self) -> Self {
        self.further(other)
    }
}

pub(crate) type PResult<'a, T> = IResult<&'a str, T, SyntaxError<'a>>;

/// A hard error at `at`: no other alternative is tried.
pub(crate) fn failure<'a, T>(at: &'a str, message: impl Into<Cow<'static, str>>) -> PResult<'a, T> {
    Err(nom::Err::Failure(SyntaxError::new(at, message)))
}

/// Runs `parser`; when it does not match, reports "expected {what}" at the input it was given,
/// unless the parser produced a more specific message of its own (`invalid register r11`).
pub(crate) fn expect<'a, O>(
    what: &'static str,
    mut parser: impl Parser<&'a str, Output = O, Error = SyntaxError<'a>>,
) -> impl FnMut(&'a str) -> PResult<'a, O> {
    move |input| {
        parser.parse(input).map_err(|e| {
            e.map(|inner| {
                let mine = SyntaxError::new(input, format!("expected {what}"));
                // Keep a precise error from inside the parser.
                if !inner.generic { inner } else { mine }
            })
        })
    }
}

/// Runs `parser` between optional blanks (spaces or tabs).
pub(crate) fn blanks<'a, O>(
    mut parser: impl Parser<&'a str, Output = O, Error = SyntaxError<'a>>,
) -> impl FnMut(&'a str) -> PResult<'a, O> {
    move |input| {
        let (input, _) = space0(input)?;
        let (input, out) = parser.parse(input)?;
        let (input, _) = space0(input)?;
        Ok((input, out))
    }
}

/// A name: a letter, `_` or `.` followed by letters, digits, `_` and `.`.
pub(crate) fn identifier(input: &str) -> PResult<'_, &str> {
    recognize(pair(
        take_while1(|c: char| c.is_ascii_alphabetic() || c == '_' || c == '.'),
        take_while(|c: char| c.is_ascii_alphanumeric() || c == '_' || c == '.'),
    ))
    .parse(input)
}

/// `word` as a whole word: not followed by a character that could continue an identifier.
pub(crate) fn keyword<'a>(word: &'static str) -> impl FnMut(&'a str) -> PResult<'a, &'a str> {
    move |input| {
        let (rest, matched) = tag(word).parse(input)?;
        match rest.chars().next() {
            Some(c) if c.is_ascii_alphanumeric() || c == '_' => Err(nom::Err::Error(
                SyntaxError::from_error_kind(input, ErrorKind::Tag),
            )),
            _ => Ok((rest, matched)),
        }
    }
}

/// A number as written: sign, base and magnitude. Which values are in range depends on the
/// field it goes into, so the conversion happens later ([`Literal::to_imm32`] and friends).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Literal {
    pub negative: bool,
    pub hex: bool,
    pub magnitude: u128,
}

impl Literal {
    /// The two's-complement value of a field `bits` wide. A decimal must fit the signed range;
    /// a hex number may also use the whole unsigned range (`0xffffffff` is -1 in 32 bits), as
    /// disassemblers print immediates both ways.
    fn to_field(self, bits: u32) -> Option<i128> {
        let signed_max = (1u128 << (bits - 1)) - 1;
        let unsigned_max = (1u128 << bits) - 1;
        let value = if self.negative {
            if self.magnitude > signed_max + 1 {
                return None;
            }
            -(self.magnitude as i128)
        } else {
            let max = if self.hex { unsigned_max } else { signed_max };
            if self.magnitude > max {
                return None;
            }
            self.magnitude as i128
        };
        let wrapped = value.rem_euclid(1i128 << bits);
        Some(if wrapped as u128 > signed_max {
            wrapped - (1i128 << bits)
        } else {
            wrapped
        })
    }

    /// A 32-bit immediate: decimal in i32 range, hex up to 0xffffffff.
    pub fn to_imm32(self) -> Option<i32> {
        self.to_field(32).map(|v| v as i32)
    }

    /// A 16-bit offset: decimal in i16 range, hex up to 0xffff.
    pub fn to_off16(self) -> Option<i16> {
        self.to_field(16).map(|v| v as i16)
    }

    /// A non-negative value up to 0xffff.
    pub fn to_u16(self) -> Option<u16> {
        if self.negative {
            return None;
        }
        u16::try_from(self.magnitude).ok()
    }

    /// The 64-bit immediate of `lddw`: any u64 (decimal or hex), or a negative i64.
    pub fn to_imm64(self) -> Option<u64> {
        if self.negative {
            return self.to_field(64).map(|v| v as i64 as u64);
        }
        u64::try_from(self.magnitude).ok()
    }
}

/// A number: optional sign, then `0x` hex digits or decimal digits.
pub(crate) fn literal(input: &str) -> PResult<'_, Literal> {
    let (rest, sign) = opt(one_of("+-")).parse(input)?;
    let (rest, _) = space0(rest)?;
    let (rest, (hex, digits)) = alt((
        pair(
            tag_no_case("0x"),
            take_while1(|c: char| c.is_ascii_hexdigit()),
        )
        .map(|(_, digits)| (true, digits)),
        take_while1(|c: char| c.is_ascii_digit()).map(|digits| (false, digits)),
    ))
    .parse(rest)?;
    if rest.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_') {
        return failure(rest, "malformed number");
    }
    let radix = if hex { 16 } else { 10 };
    let Ok(magnitude) = u128::from_str_radix(digits, radix) else {
        return failure(input, "number too large");
    };
    let literal = Literal {
        negative: sign == Some('-'),
        hex,
        magnitude,
    };
    Ok((rest, literal))
}

/// A number that must carry a sign (`+4`, `-8`): offsets in memory operands and `pc+N`.
pub(crate) fn signed_literal(input: &str) -> PResult<'_, Literal> {
    if !input.starts_with(['+', '-']) {
        return Err(nom::Err::Error(SyntaxError::from_error_kind(
            input,
            ErrorKind::Char,
        )));
    }
    literal(input)
}

/// Parses a literal and converts it, failing at the literal with `what` when out of range.
pub(crate) fn literal_in_range<'a, T>(
    what: &'static str,
    convert: fn(Literal) -> Option<T>,
) -> impl FnMut(&'a str) -> PResult<'a, T> {
    move |input| {
        let (rest, lit) = literal(input)?;
        match convert(lit) {
            Some(value) => Ok((rest, value)),
            None => failure(
                input,
                out_of_range_message(what, &input[..input.len() - rest.len()]),
            ),
        }
    }
}

pub(crate) fn out_of_range_message(what: &str, text: &str) -> String {
    format!("{what} {} out of range", text.trim())
}

/// The 1-based column (in characters) at which `at`, a suffix of `line`, starts.
pub(crate) fn column(line: &str, at: &str) -> usize {
    let offset = (at.as_ptr() as usize)
        .saturating_sub(line.as_ptr() as usize)
        .min(line.len());
    line[..offset].chars().count() + 1
}

/// `line` without what follows the first comment marker.
pub(crate) fn strip_comment(line: &str, marker: char) -> &str {
    line.split_once(marker).map_or(line, |(code, _)| code)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lit(text: &str) -> Literal {
        literal(text).expect("a literal").1
    }

    #[test]
    fn imm32_ranges() {
        assert_eq!(lit("2147483647").to_imm32(), Some(i32::MAX));
        assert_eq!(lit("2147483648").to_imm32(), None);
        assert_eq!(lit("-2147483648").to_imm32(), Some(i32::MIN));
        assert_eq!(lit("0xffffffff").to_imm32(), Some(-1));
        assert_eq!(lit("0x100000000").to_imm32(), None);
        assert_eq!(lit("-0x80000000").to_imm32(), Some(i32::MIN));
    }

    #[test]
    fn offset_ranges() {
        assert_eq!(lit("+0xffff").to_off16(), Some(-1));
        assert_eq!(lit("+0x10000").to_off16(), None);
        assert_eq!(lit("-32768").to_off16(), Some(i16::MIN));
        assert_eq!(lit("32768").to_off16(), None);
    }

    #[test]
    fn imm64_ranges() {
        assert_eq!(lit("0xFFFFFFFFFFFFFFFF").to_imm64(), Some(u64::MAX));
        assert_eq!(lit("18446744073709551615").to_imm64(), Some(u64::MAX));
        assert_eq!(lit("-1").to_imm64(), Some(u64::MAX));
        assert_eq!(lit("0x10000000000000000").to_imm64(), None);
    }

    #[test]
    fn columns_count_characters() {
        let line = "  mov %r0, 1";
        assert_eq!(column(line, &line[6..]), 7);
    }
}
