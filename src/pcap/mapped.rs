//! A capture file read through a memory mapping: pcap-parser's block parsers run on the mapped
//! bytes themselves, so a frame reaches the program without being copied into a read buffer
//! first (the kernel's copy into that buffer was a quarter of a fast replay's time).
//!
//! The blocks come out as pcap-parser's streaming readers give them, over a buffer that holds
//! the whole file and never needs a refill: the same blocks, the same end-of-file and truncation
//! signals, so [`super::PcapReader`] says the same errors whichever source it reads.
//!
//! The file's length is taken once, when it is mapped. If another process truncates the file
//! during the replay, the pages past its new end have no bytes behind them, and reading one
//! raises SIGBUS: bpfemu then says which file and byte in one line and exits with the code of
//! bad input ([`super::truncation`]); it cannot go on. A capture that is being written or
//! rotated while it is replayed is read from a pipe instead (`bpfemu replay prog.o - <
//! capture`), which takes the buffered path.

use memmap2::{Advice, Mmap, UncheckedAdvice};
use pcap_parser::nom::{self, Needed, Offset};
use pcap_parser::traits::PcapReaderIterator;
use pcap_parser::{
    Block, LegacyPcapBlock, PcapBlockOwned, PcapError, PcapHeader, parse_block_be, parse_block_le,
    parse_pcap_frame, parse_pcap_frame_be, parse_pcap_frame_modified, parse_pcap_header,
    parse_sectionheaderblock,
};
use std::fs::File;
use std::path::Path;

/// Bytes read are handed back to the kernel this many at a time (see
/// [`MappedBlocks::release_behind`]); a multiple of every page size.
const RELEASE_STEP: usize = 2 << 20;

/// How far ahead of the reader the file's bytes are prefetched into the cache (see
/// [`MappedBlocks::prefetch_ahead`]).
const PREFETCH_AHEAD: usize = 2048;
/// The unit of a prefetch: a cache line.
const CACHE_LINE: usize = 64;

/// A regular file's bytes, mapped read-only.
pub struct MappedFile {
    map: Mmap,
}

impl MappedFile {
    /// Maps `file` (the capture `path`) when it is a regular, non-empty file; `None` for
    /// anything else (a pipe, a terminal, a device, an empty file) or when the mapping fails:
    /// such input is read through a buffer instead.
    pub fn new(file: &File, path: &Path) -> Option<MappedFile> {
        let metadata = file.metadata().ok()?;
        if !metadata.is_file() || metadata.len() == 0 {
            return None;
        }
        // SAFETY: the mapping is read-only and private to this process; bpfemu never writes
        // the capture. Another process truncating the file while it is mapped makes reads
        // past its new end raise SIGBUS, which ends the process (see the module's
        // documentation); no other change to the file can make these reads unsound, only
        // show other bytes.
        let map = unsafe { Mmap::map(file) }.ok()?;
        // Packets are read front to back, once: the kernel may read ahead far and drop
        // pages soon after. Only a hint; a refusal changes nothing.
        let _ = map.advise(Advice::Sequential);
        super::truncation::watch(&map, path);
        Some(MappedFile { map })
    }

    pub fn bytes(&self) -> &[u8] {
        &self.map
    }

    /// Unmaps the pages of `[start, end)` (both multiples of the page size) from this
    /// process, so that the resident memory of a replay does not grow with the file; the
    /// bytes stay in the page cache, and a later read maps them again, unchanged.
    fn release(&mut self, start: usize, end: usize) {
        // SAFETY: the pages are a read-only file mapping that was never written, so
        // MADV_DONTNEED only drops this process's mappings of them: reading them again maps
        // the file's bytes again (its page cache), as at first; no memory is freed that
        // anything still points into. `[start, end)` lies within the mapping.
        let _ = unsafe {
            self.map
                .unchecked_advise_range(UncheckedAdvice::DontNeed, start, end - start)
        };
    }
}

/// How the records after the file's header are parsed.
type LegacyParse = fn(&[u8]) -> nom::IResult<&[u8], LegacyPcapBlock<'_>, PcapError<&[u8]>>;

/// What the file's first block said.
enum Format {
    Legacy {
        header: PcapHeader,
        parse: LegacyParse,
    },
    /// pcapng, in the byte order of the latest section header.
    Ng { big_endian: bool },
}

/// The blocks of a mapped capture, as pcap-parser's streaming readers hand them out.
pub struct MappedBlocks {
    file: MappedFile,
    consumed: usize,
    /// The bytes before this offset have been released ([`MappedBlocks::release_behind`]).
    released: usize,
    /// The bytes before this offset have been prefetched ([`MappedBlocks::prefetch_ahead`]).
    prefetched: usize,
    format: Format,
    /// A block this long is refused as the buffered readers refuse it (their buffer stops
    /// growing there), so that both sources accept the same captures.
    max_block: usize,
}

impl MappedBlocks {
    /// Recognises the capture as [`pcap_parser::create_reader`] does: pcapng when it starts
    /// with a section header block, else classic pcap; `None` when it is neither.
    pub fn new(file: MappedFile, max_block: usize) -> Option<MappedBlocks> {
        let bytes = file.bytes();
        let format = if parse_sectionheaderblock(bytes).is_ok() {
            Format::Ng { big_endian: false }
        } else {
            let (_, header) = parse_pcap_header(bytes).ok()?;
            let parse: LegacyParse = match (header.is_modified_format(), header.is_bigendian()) {
                (true, _) => parse_pcap_frame_modified,
                (false, true) => parse_pcap_frame_be,
                (false, false) => parse_pcap_frame,
            };
            Format::Legacy { header, parse }
        };
        Some(MappedBlocks {
            file,
            consumed: 0,
            released: 0,
            prefetched: 0,
            format,
            max_block,
        })
    }

    /// The bytes not consumed yet, to the end of the file.
    #[inline]
    pub fn rest(&self) -> &[u8] {
        &self.file.bytes()[self.consumed..]
    }

    /// Consumes a block of `len` bytes: the reader moves past it.
    #[inline]
    pub fn advance(&mut self, len: usize) {
        self.consumed += len;
        self.prefetch_ahead();
        if self.consumed - self.released >= RELEASE_STEP {
            self.release_behind();
        }
    }

    /// Asks the cache for the file's bytes [`PREFETCH_AHEAD`] bytes past the reader, each
    /// line once. The file's bytes are read once, cold, and the hardware prefetcher stops at
    /// every page boundary: without this, copying each frame into the program's packet
    /// waited for memory (a quarter of a fast replay's time).
    #[inline]
    fn prefetch_ahead(&mut self) {
        let bytes = self.file.bytes();
        let target = (self.consumed + PREFETCH_AHEAD).min(bytes.len());
        while self.prefetched < target {
            prefetch(bytes[self.prefetched..].as_ptr());
            self.prefetched += CACHE_LINE;
        }
    }

    /// Releases the pages the reader has moved past (every [`RELEASE_STEP`] bytes): a
    /// replay's resident memory stays a few steps of the file, not the whole of it.
    #[cold]
    fn release_behind(&mut self) {
        let end = self.consumed / RELEASE_STEP * RELEASE_STEP;
        self.file.release(self.released, end);
        self.released = end;
    }

    /// A parse that stopped for want of bytes: the file is whole in the mapping, so it is
    /// truncated, unless the block would be too large for the buffered readers as well.
    fn incomplete<'a>(&self, available: usize, needed: Needed) -> PcapError<&'a [u8]> {
        match needed {
            Needed::Size(n) if available + usize::from(n) >= self.max_block => {
                PcapError::BufferTooSmall
            }
            _ => PcapError::UnexpectedEof,
        }
    }
}

/// Starts loading the cache line at `address`, without waiting for it.
#[inline(always)]
fn prefetch(address: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch only hints the cache: it reads nothing the program sees, cannot
    // fault, and any address is allowed (`address` is within the mapping anyway).
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(address.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = address;
}

impl Drop for MappedFile {
    fn drop(&mut self) {
        super::truncation::unwatch(&self.map);
    }
}

impl PcapReaderIterator for MappedBlocks {
    fn next(&mut self) -> Result<(usize, PcapBlockOwned<'_>), PcapError<&[u8]>> {
        let data = &self.file.bytes()[self.consumed..];
        if let Format::Legacy { header, .. } = &self.format
            && self.consumed == 0
        {
            return Ok((header.size(), PcapBlockOwned::from(header.clone())));
        }
        if data.is_empty() {
            return Err(PcapError::Eof);
        }
        let parsed = match &mut self.format {
            Format::Legacy { parse, .. } => parse(data).map(|(rest, b)| (rest, b.into())),
            Format::Ng { big_endian } => {
                let parse = if *big_endian {
                    parse_block_be
                } else {
                    parse_block_le
                };
                parse(data).map(|(rest, block)| {
                    if let Block::SectionHeader(shb) = &block {
                        *big_endian = shb.big_endian();
                    }
                    (rest, block.into())
                })
            }
        };
        match parsed {
            Ok((rest, _)) if data.offset(rest) >= self.max_block => Err(PcapError::BufferTooSmall),
            Ok((rest, block)) => Ok((data.offset(rest), block)),
            Err(nom::Err::Error(e) | nom::Err::Failure(e)) => Err(e),
            Err(nom::Err::Incomplete(needed)) => Err(self.incomplete(data.len(), needed)),
        }
    }

    fn consume(&mut self, offset: usize) {
        self.advance(offset);
    }

    fn consume_noshift(&mut self, offset: usize) {
        self.advance(offset);
    }

    fn consumed(&self) -> usize {
        self.consumed
    }

    /// Nothing to read: the whole file is already in the mapping.
    fn refill(&mut self) -> Result<(), PcapError<&[u8]>> {
        Ok(())
    }

    fn position(&self) -> usize {
        self.consumed
    }

    /// The mapping holds the whole file already; a block too large is refused.
    fn grow(&mut self, _new_size: usize) -> bool {
        false
    }

    fn data(&self) -> &[u8] {
        self.rest()
    }

    fn reader_exhausted(&self) -> bool {
        true
    }
}
