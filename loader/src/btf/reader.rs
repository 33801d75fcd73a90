//! A bounds-checked cursor over a BTF or BTF.ext blob, built on nom's number parsers.
//!
//! Both blobs are sequences of fixed-size little- or big-endian words whose layout depends on
//! values read earlier (kind, vlen, record size), so a cursor that knows its absolute position
//! gives better error messages (byte offsets) than a combinator pipeline would.

use super::error::BtfError;
use nom::IResult;
use nom::number::Endianness;
use nom::number::complete as num;

#[derive(Clone, Copy, Debug)]
pub(crate) struct Cursor<'a> {
    /// The whole blob: positions are absolute offsets into it.
    data: &'a [u8],
    pos: usize,
    /// Where this cursor must stop (the end of the section being read).
    end: usize,
    endian: Endianness,
    blob: &'static str,
}

impl<'a> Cursor<'a> {
    pub(crate) fn new(data: &'a [u8], endian: Endianness, blob: &'static str) -> Self {
        Cursor {
            data,
            pos: 0,
            end: data.len(),
            endian,
            blob,
        }
    }

    /// A cursor over `data[start..end]`. An end past the data is cut to it, so that a header
    /// claiming more than the blob holds reads as truncated, never out of bounds.
    pub(crate) fn range(&self, start: usize, end: usize) -> Self {
        Cursor {
            pos: start,
            end: end.min(self.data.len()),
            ..*self
        }
    }

    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    pub(crate) fn remaining(&self) -> usize {
        self.end.saturating_sub(self.pos)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.remaining() == 0
    }

    /// Fails unless `need` more bytes are available for `what`.
    pub(crate) fn need(&self, need: usize, what: &'static str) -> Result<(), BtfError> {
        if self.remaining() < need {
            return Err(BtfError::Truncated {
                blob: self.blob,
                what,
                offset: self.pos,
                need,
                have: self.remaining(),
            });
        }
        Ok(())
    }

    pub(crate) fn skip(&mut self, n: usize, what: &'static str) -> Result<(), BtfError> {
        self.need(n, what)?;
        self.pos += n;
        Ok(())
    }

    fn number<T>(
        &mut self,
        width: usize,
        what: &'static str,
        parse: impl Fn(&'a [u8]) -> IResult<&'a [u8], T>,
    ) -> Result<T, BtfError> {
        self.need(width, what)?;
        let input = self.data.get(self.pos..self.end).unwrap_or_default();
        let (_, value) = parse(input).map_err(|_| BtfError::Truncated {
            blob: self.blob,
            what,
            offset: self.pos,
            need: width,
            have: input.len(),
        })?;
        self.pos += width;
        Ok(value)
    }

    pub(crate) fn u8(&mut self, what: &'static str) -> Result<u8, BtfError> {
        self.number(1, what, num::u8)
    }

    pub(crate) fn u16(&mut self, what: &'static str) -> Result<u16, BtfError> {
        let endian = self.endian;
        self.number(2, what, num::u16(endian))
    }

    pub(crate) fn u32(&mut self, what: &'static str) -> Result<u32, BtfError> {
        let endian = self.endian;
        self.number(4, what, num::u32(endian))
    }
}

/// Reads the magic at the start of a blob and says which byte order it was written in.
pub(crate) fn detect_endianness(data: &[u8], blob: &'static str) -> Result<Endianness, BtfError> {
    const MAGIC: u16 = 0xeb9f;
    let mut cur = Cursor::new(data, Endianness::Little, blob);
    let magic = cur.u16("magic")?;
    if magic == MAGIC {
        Ok(Endianness::Little)
    } else if magic == MAGIC.swap_bytes() {
        Ok(Endianness::Big)
    } else {
        Err(BtfError::BadMagic { blob, magic })
    }
}

/// Reads the NUL-terminated string at `str_off` of a string section.
///
/// `None` when the offset is outside the section or the string runs off its end.
pub(crate) fn string_at(strings: &[u8], str_off: u32) -> Option<String> {
    let tail = strings.get(str_off as usize..)?;
    // (`CStr` finds the NUL with the C library's memchr: a kernel's BTF has a million names.)
    let bytes = std::ffi::CStr::from_bytes_until_nul(tail).ok()?.to_bytes();
    Some(match std::str::from_utf8(bytes) {
        Ok(name) => name.to_owned(),
        Err(_) => String::from_utf8_lossy(bytes).into_owned(),
    })
}

#[cfg(test)]
mod regression {
    /// Found by the `btf` fuzz target: a header whose sections run past the blob made the
    /// cursor slice beyond the data (a panic); it must read as an error.
    #[test]
    fn sections_past_the_blob_are_an_error() {
        let blob: [u8; 38] = [
            0x9f, 0xeb, 0x01, 0x00, 0x18, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x0c, 0x00,
            0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
            0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        ];
        assert!(crate::btf::Btf::parse(&blob).is_err());
    }
}
