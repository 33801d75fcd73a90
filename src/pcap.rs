//! Packet captures in and out: pcap and pcapng (microsecond and nanosecond timestamps) read
//! through `pcap-parser`, classic pcap written directly (a 24-byte header, 16 bytes a record).
//!
//! Only Ethernet captures (link type 1) can feed an XDP program: the program sees frames from
//! the Ethernet header on, so any other link type is refused up front, naming it.
//!
//! A regular file is mapped ([`mapped`]) and each frame handed out as a slice of the mapping
//! ([`PcapReader::next_ref`]): replaying a capture copies no packet, and reads it with no
//! system call per block. Standard input, pipes and other files that cannot be mapped stream
//! through one buffer instead, their frames slices of it. Both sources give the same frames
//! and the same errors, and memory stays bounded by the file (the mapping), never by the
//! number of packets.

mod mapped;
mod truncation;

use pcap_parser::traits::PcapReaderIterator;
use pcap_parser::{Block, Linktype, PcapBlockOwned, PcapError};
use std::fs::File;
use std::io::{self, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use mapped::MappedBlocks;
pub use mapped::MappedFile;

/// One captured frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Packet {
    /// Position in the capture, from 0.
    pub index: usize,
    /// Capture time in nanoseconds since the epoch.
    pub ts_ns: u64,
    /// The captured bytes (possibly fewer than on the wire).
    pub data: Vec<u8>,
    /// Length on the wire.
    pub orig_len: u32,
}

/// One captured frame, borrowed from the reader's buffer until the next one is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PacketRef<'a> {
    /// Position in the capture, from 0.
    pub index: usize,
    /// Capture time in nanoseconds since the epoch.
    pub ts_ns: u64,
    /// The captured bytes (possibly fewer than on the wire).
    pub data: &'a [u8],
    /// Length on the wire.
    pub orig_len: u32,
}

impl PacketRef<'_> {
    pub fn to_packet(&self) -> Packet {
        Packet {
            index: self.index,
            ts_ns: self.ts_ns,
            data: self.data.to_vec(),
            orig_len: self.orig_len,
        }
    }
}

impl Packet {
    pub fn as_ref(&self) -> PacketRef<'_> {
        PacketRef {
            index: self.index,
            ts_ns: self.ts_ns,
            data: &self.data,
            orig_len: self.orig_len,
        }
    }
}

/// A capture that cannot be read, naming the file and where.
#[derive(Debug, thiserror::Error)]
pub enum PcapReadError {
    /// The OS error is kept out of the error chain (no `source`), so that it is said once.
    #[error("{path}: {}", os_reason(.error))]
    Io { path: PathBuf, error: io::Error },
    #[error("{path}: is a directory, not a capture")]
    Directory { path: PathBuf },
    #[error("{path}: not a pcap or pcapng file")]
    NotPcap { path: PathBuf },
    #[error(
        "{path}: link type {linktype} is not Ethernet (1): XDP programs see Ethernet frames only"
    )]
    LinkType { path: PathBuf, linktype: i32 },
    #[error("{path}: packet {index} is truncated: the file ends inside its record (byte {offset})")]
    Truncated {
        path: PathBuf,
        index: usize,
        offset: usize,
    },
    #[error(
        "{path}: packet {index}: bogus caplen {caplen} at byte {offset} (a record holds at most {SNAPLEN} bytes)"
    )]
    BogusCaplen {
        path: PathBuf,
        index: usize,
        offset: usize,
        caplen: u32,
    },
    #[error("{path}: malformed record after packet {index} at byte {offset}: {detail}")]
    Malformed {
        path: PathBuf,
        index: usize,
        offset: usize,
        detail: String,
    },
    #[error("{path}: packet {index} refers to interface {interface}, which no block describes")]
    UnknownInterface {
        path: PathBuf,
        index: usize,
        interface: u32,
    },
}

/// The bytes of a capture, as [`open_source`] opens them.
pub enum CaptureSource {
    /// A regular file, mapped whole.
    Mapped(MappedFile),
    /// Standard input, a pipe, a device: read as a stream.
    Stream(Box<dyn Read + Send>),
}

/// The bytes of a capture: the file, mapped when it is a regular one, or standard input for
/// `-`.
pub fn open_source(path: &Path) -> Result<CaptureSource, PcapReadError> {
    Ok(match open_file(path)? {
        None => CaptureSource::Stream(Box::new(io::stdin())),
        Some(file) => match MappedFile::new(&file, path) {
            Some(mapped) => CaptureSource::Mapped(mapped),
            None => CaptureSource::Stream(Box::new(file)),
        },
    })
}

/// The bytes of a capture as a stream, never mapped: the file, or standard input for `-`.
pub fn open_stream(path: &Path) -> Result<Box<dyn Read + Send>, PcapReadError> {
    Ok(match open_file(path)? {
        None => Box::new(io::stdin()),
        Some(file) => Box::new(file),
    })
}

/// The capture file opened, or `None` for `-`, standard input.
fn open_file(path: &Path) -> Result<Option<File>, PcapReadError> {
    if path.as_os_str() == "-" {
        return Ok(None);
    }
    if path.is_dir() {
        return Err(PcapReadError::Directory { path: path.into() });
    }
    let file = File::open(path).map_err(|error| PcapReadError::Io {
        path: path.into(),
        error,
    })?;
    Ok(Some(file))
}

/// What a parse error means, in a few words (never the bytes the parser was looking at).
fn describe_parse_error<I>(error: &PcapError<I>) -> String {
    match error {
        PcapError::NomError(_, kind) | PcapError::OwnedNomError(_, kind) => {
            format!("its contents do not parse (at the {kind:?} step)")
        }
        PcapError::HeaderNotRecognized => "an unknown header".into(),
        PcapError::ReadError => "a read error".into(),
        _ => "unreadable".into(),
    }
}

/// An OS error as tcpdump words it: the reason alone, without "(os error N)".
fn os_reason(error: &io::Error) -> String {
    let text = error.to_string();
    match text.find(" (os error") {
        Some(cut) => text[..cut].to_owned(),
        None => text,
    }
}

/// A pcapng interface: what its packets' timestamps mean.
#[derive(Clone, Copy, Debug)]
struct Interface {
    /// Timestamp units per second.
    units_per_sec: u64,
    offset_sec: i64,
}

/// Reads the Ethernet frames of a pcap or pcapng file, in order.
pub struct PcapReader {
    inner: Blocks,
    state: ReaderState,
    done: bool,
    /// Bytes of the block last handed out by [`PcapReader::next_ref`], consumed on the next call.
    pending: usize,
}

/// Where a reader's blocks come from. The few calls each packet makes ([`Blocks::data`],
/// [`Blocks::consume`]) are matched here rather than dispatched through the trait object.
enum Blocks {
    Mapped(MappedBlocks),
    Streamed(Box<dyn PcapReaderIterator + Send>),
}

impl Blocks {
    fn parser(&mut self) -> &mut dyn PcapReaderIterator {
        match self {
            Blocks::Mapped(mapped) => mapped,
            Blocks::Streamed(streamed) => streamed.as_mut(),
        }
    }

    /// The bytes read and not consumed yet, from the next block on.
    #[inline]
    fn data(&self) -> &[u8] {
        match self {
            Blocks::Mapped(mapped) => mapped.rest(),
            Blocks::Streamed(streamed) => streamed.data(),
        }
    }

    #[inline]
    fn consume(&mut self, len: usize) {
        match self {
            Blocks::Mapped(mapped) => mapped.advance(len),
            Blocks::Streamed(streamed) => streamed.consume(len),
        }
    }

    fn consumed(&self) -> usize {
        match self {
            Blocks::Mapped(mapped) => mapped.consumed(),
            Blocks::Streamed(streamed) => streamed.consumed(),
        }
    }
}

/// What the headers read so far say, apart from the byte source so both can be borrowed.
struct ReaderState {
    path: PathBuf,
    legacy_nanos: bool,
    /// Set by a classic pcap header: whether its records are big-endian.
    legacy_big_endian: Option<bool>,
    /// A classic pcap file with 16-byte record headers (not the "modified" format's 24):
    /// its records are read straight from the buffer ([`PcapReader::next_classic`]).
    legacy_plain: bool,
    interfaces: Vec<Interface>,
    next_index: usize,
}

/// Room for the largest record a capture may hold (pcap-parser grows on demand).
const READ_BUFFER: usize = 1 << 20;
/// Bytes of a classic pcap record's header: seconds, sub-seconds, caplen, original length.
const CLASSIC_RECORD_HEADER: usize = 16;
/// A record larger than this is taken for corruption.
const MAX_BUFFER: usize = 64 << 20;

/// What one attempt to read a block gave, with nothing borrowed from the reader.
enum Step {
    /// A header block of this many bytes, taken into the reader's state.
    Header(usize),
    /// A packet block of `len` bytes is next (left in the buffer); its frame's fields, with
    /// the frame's bytes as the host address of their first byte and their length.
    Packet {
        len: usize,
        frame: PacketRef<'static>,
        data_addr: usize,
        data_len: usize,
    },
    Eof,
    Refill,
    Grow,
    Truncated,
    Malformed(String),
}

impl PcapReader {
    /// Opens a capture file (mapped when it is a regular file); `-` is standard input, as for
    /// tcpdump's `-r -`.
    pub fn open(path: &Path) -> Result<PcapReader, PcapReadError> {
        Self::from_source(path, open_source(path)?)
    }

    /// Reads a capture from what [`open_source`] opened; `path` names it in messages.
    pub fn from_source(path: &Path, source: CaptureSource) -> Result<PcapReader, PcapReadError> {
        match source {
            CaptureSource::Mapped(file) => Self::from_mapping(path, file),
            CaptureSource::Stream(reader) => Self::from_reader(path, reader),
        }
    }

    /// Reads a mapped capture; `path` names it in messages.
    pub fn from_mapping(path: &Path, file: MappedFile) -> Result<PcapReader, PcapReadError> {
        let blocks = MappedBlocks::new(file, MAX_BUFFER)
            .ok_or_else(|| PcapReadError::NotPcap { path: path.into() })?;
        Ok(Self::with_blocks(path, Blocks::Mapped(blocks)))
    }

    /// Reads a capture from any byte source, through a buffer; `path` names it in messages.
    pub fn from_reader(
        path: &Path,
        reader: impl Read + Send + 'static,
    ) -> Result<PcapReader, PcapReadError> {
        let streamed = pcap_parser::create_reader(READ_BUFFER, reader)
            .map_err(|_| PcapReadError::NotPcap { path: path.into() })?;
        Ok(Self::with_blocks(path, Blocks::Streamed(streamed)))
    }

    fn with_blocks(path: &Path, inner: Blocks) -> PcapReader {
        let state = ReaderState {
            path: path.into(),
            legacy_nanos: false,
            legacy_big_endian: None,
            legacy_plain: false,
            interfaces: Vec::new(),
            next_index: 0,
        };
        PcapReader {
            inner,
            state,
            done: false,
            pending: 0,
        }
    }

    /// Whether the capture is read through a mapping (else through a buffer).
    pub fn is_mapped(&self) -> bool {
        matches!(self.inner, Blocks::Mapped(_))
    }

    fn malformed(&self, detail: String) -> PcapReadError {
        PcapReadError::Malformed {
            path: self.state.path.clone(),
            index: self.state.next_index,
            offset: self.inner.consumed(),
            detail,
        }
    }

    fn step(&mut self) -> Result<Step, PcapReadError> {
        Ok(match self.inner.parser().next() {
            Ok((len, block)) if is_packet(&block) => {
                let packet = self.state.packet(block)?;
                Step::Packet {
                    len,
                    frame: PacketRef {
                        data: &[],
                        ..packet
                    },
                    data_addr: packet.data.as_ptr().addr(),
                    data_len: packet.data.len(),
                }
            }
            Ok((len, block)) => {
                self.state.handle_header(block)?;
                Step::Header(len)
            }
            Err(PcapError::Eof) => Step::Eof,
            Err(PcapError::Incomplete(_)) => Step::Refill,
            Err(PcapError::BufferTooSmall) => Step::Grow,
            Err(PcapError::UnexpectedEof) => Step::Truncated,
            Err(e) => Step::Malformed(describe_parse_error(&e)),
        })
    }

    fn refill(&mut self) -> Result<(), PcapReadError> {
        let result = self
            .inner
            .parser()
            .refill()
            .map_err(|e| describe_parse_error(&e));
        result.map_err(|detail| self.malformed(detail))
    }

    /// A classic pcap record whose caplen no capture can hold: said as such, not as a
    /// truncated file or a record too large for the buffer.
    fn bogus_caplen(&self) -> Option<PcapReadError> {
        let big_endian = self.state.legacy_big_endian?;
        let field: [u8; 4] = self.inner.data().get(8..12)?.try_into().ok()?;
        let caplen = if big_endian {
            u32::from_be_bytes(field)
        } else {
            u32::from_le_bytes(field)
        };
        (caplen > SNAPLEN).then(|| PcapReadError::BogusCaplen {
            path: self.state.path.clone(),
            index: self.state.next_index,
            offset: self.inner.consumed(),
            caplen,
        })
    }

    /// What the block that failed to parse is, for the message: its type and length as its
    /// header declares them (pcapng), or nothing for a classic record.
    fn block_label(&self) -> String {
        if self.state.legacy_big_endian.is_some() {
            return String::new();
        }
        let head = self.inner.data();
        match (head.get(0..4), head.get(4..8)) {
            (Some(ty), Some(len)) => {
                let ty = u32::from_le_bytes(ty.try_into().unwrap_or_default());
                let len = u32::from_le_bytes(len.try_into().unwrap_or_default());
                format!("pcapng block of type {ty:#x}, {len} bytes: ")
            }
            _ => String::new(),
        }
    }

    /// Reads up to the next packet block and leaves it first in the buffer: `None` at the
    /// end of the capture, else the block's length, the frame, and where its bytes are in
    /// the buffer.
    fn seek_packet(
        &mut self,
    ) -> Result<Option<(usize, PacketRef<'static>, usize, usize)>, PcapReadError> {
        loop {
            // Classic records come here only when the fast path declines them, a bogus
            // caplen among them: refused whether the record lies whole in the buffer or not,
            // so that the mapped and the streamed capture refuse the same records.
            if let Some(bogus) = self.bogus_caplen() {
                return Err(bogus);
            }
            match self.step()? {
                Step::Header(len) => self.inner.consume(len),
                Step::Packet {
                    len,
                    frame,
                    data_addr,
                    data_len,
                } => {
                    let data_off = data_addr - self.inner.data().as_ptr().addr();
                    return Ok(Some((len, frame, data_off, data_len)));
                }
                Step::Eof => return Ok(None),
                Step::Refill => self.refill()?,
                Step::Grow => {
                    let bigger = self.inner.data().len().max(READ_BUFFER) * 2;
                    if bigger > MAX_BUFFER || !self.inner.parser().grow(bigger) {
                        return Err(self.malformed("record larger than 64 MiB".into()));
                    }
                    self.refill()?;
                }
                Step::Truncated => {
                    return Err(PcapReadError::Truncated {
                        path: self.state.path.clone(),
                        index: self.state.next_index,
                        offset: self.inner.consumed(),
                    });
                }
                Step::Malformed(detail) => {
                    let detail = format!("{}{detail}", self.block_label());
                    return Err(self.malformed(detail));
                }
            }
        }
    }

    /// The next record of a classic pcap file when it lies whole in the buffer with a
    /// plausible caplen: its length, capture time and length on the wire (its bytes are
    /// `[CLASSIC_RECORD_HEADER, len)` of the buffer). Scalars rather than a frame: the
    /// caller builds the [`PacketRef`] once, where it is returned (a frame built here and
    /// copied there was copied with a wide load over the narrow store of `orig_len`, a
    /// store-forwarding stall on every packet). Read from the 16 header bytes
    /// directly, as pcap-parser reads them but without building its block; anything else
    /// (a refill, a bogus caplen, pcapng) is left to [`PcapReader::seek_packet`], whose
    /// errors stay the reader's.
    #[inline]
    fn next_classic(&self) -> Option<(usize, u64, u32)> {
        let big_endian = self
            .state
            .legacy_big_endian
            .filter(|_| self.state.legacy_plain)?;
        let head: &[u8; CLASSIC_RECORD_HEADER] =
            self.inner.data().first_chunk::<CLASSIC_RECORD_HEADER>()?;
        let field = |i: usize| {
            let bytes = [head[i], head[i + 1], head[i + 2], head[i + 3]];
            match big_endian {
                true => u32::from_be_bytes(bytes),
                false => u32::from_le_bytes(bytes),
            }
        };
        let (ts_sec, ts_frac, caplen, orig_len) = (field(0), field(4), field(8), field(12));
        let len = CLASSIC_RECORD_HEADER + caplen as usize;
        if caplen > SNAPLEN || len > self.inner.data().len() {
            return None;
        }
        let frac_ns = match self.state.legacy_nanos {
            true => u64::from(ts_frac),
            false => u64::from(ts_frac) * 1000,
        };
        Some((len, u64::from(ts_sec) * 1_000_000_000 + frac_ns, orig_len))
    }

    /// How far into the capture the reader is, in bytes (for progress).
    pub fn bytes_read(&self) -> u64 {
        self.inner.consumed() as u64
    }

    /// The next frame, borrowed from the reader's buffer or mapping (no copy); `None` at the
    /// end of the capture. Yields every frame, then at most one error, then stops.
    ///
    /// Inlined into the caller's loop with the classic pcap fast path: a call returns this
    /// large enum through memory, and the caller's copy of it waited for the stores
    /// (a store-forwarding stall, a few percent of a fast replay); LLVM finds it too large to
    /// inline by itself.
    #[inline(always)]
    pub fn next_ref(&mut self) -> Option<Result<PacketRef<'_>, PcapReadError>> {
        if self.done {
            return None;
        }
        self.inner.consume(std::mem::take(&mut self.pending));
        if let Some((len, ts_ns, orig_len)) = self.next_classic() {
            self.pending = len;
            let index = self.state.next_index;
            self.state.next_index += 1;
            let data = &self.inner.data()[CLASSIC_RECORD_HEADER..len];
            return Some(Ok(PacketRef {
                index,
                ts_ns,
                data,
                orig_len,
            }));
        }
        self.next_block()
    }

    /// [`PcapReader::next_ref`] past its fast path: headers, pcapng blocks, the end, errors.
    #[inline(never)]
    fn next_block(&mut self) -> Option<Result<PacketRef<'_>, PcapReadError>> {
        let (len, frame, data_off, data_len) = match self.seek_packet() {
            Ok(Some(found)) => found,
            Ok(None) => {
                self.done = true;
                return None;
            }
            Err(e) => {
                self.done = true;
                return Some(Err(e));
            }
        };
        self.pending = len;
        self.state.next_index += 1;
        let data = &self.inner.data()[data_off..data_off + data_len];
        Some(Ok(PacketRef { data, ..frame }))
    }
}

/// Whether a block holds a packet (as opposed to a header or another pcapng block).
fn is_packet(block: &PcapBlockOwned<'_>) -> bool {
    matches!(
        block,
        PcapBlockOwned::Legacy(_)
            | PcapBlockOwned::NG(Block::EnhancedPacket(_) | Block::SimplePacket(_))
    )
}

impl ReaderState {
    /// Takes a header block (or any other block that is not a packet) into the state.
    fn handle_header(&mut self, block: PcapBlockOwned<'_>) -> Result<(), PcapReadError> {
        match block {
            PcapBlockOwned::LegacyHeader(header) => {
                self.check_linktype(header.network)?;
                self.legacy_nanos = header.is_nanosecond_precision();
                self.legacy_big_endian = Some(header.is_bigendian());
                self.legacy_plain = !header.is_modified_format();
            }
            PcapBlockOwned::NG(Block::SectionHeader(_)) => self.interfaces.clear(),
            PcapBlockOwned::NG(Block::InterfaceDescription(idb)) => {
                self.check_linktype(idb.linktype)?;
                let units_per_sec =
                    idb.ts_resolution()
                        .ok_or_else(|| PcapReadError::Malformed {
                            path: self.path.clone(),
                            index: self.next_index,
                            offset: 0,
                            detail: format!("bad timestamp resolution {}", idb.if_tsresol),
                        })?;
                self.interfaces.push(Interface {
                    units_per_sec,
                    offset_sec: idb.ts_offset(),
                });
            }
            _ => {}
        }
        Ok(())
    }

    /// The frame of a packet block.
    fn packet<'a>(&self, block: PcapBlockOwned<'a>) -> Result<PacketRef<'a>, PcapReadError> {
        let (ts_ns, data, orig_len) = match block {
            PcapBlockOwned::Legacy(record) => {
                let frac_ns = if self.legacy_nanos {
                    u64::from(record.ts_usec)
                } else {
                    u64::from(record.ts_usec) * 1000
                };
                let ts_ns = u64::from(record.ts_sec) * 1_000_000_000 + frac_ns;
                (ts_ns, record.data, record.origlen)
            }
            PcapBlockOwned::NG(Block::EnhancedPacket(epb)) => {
                let iface = self.interface(epb.if_id)?;
                let units = (u64::from(epb.ts_high) << 32) | u64::from(epb.ts_low);
                let data = &epb.data[..(epb.caplen as usize).min(epb.data.len())];
                (units_to_ns(units, iface), data, epb.origlen)
            }
            PcapBlockOwned::NG(Block::SimplePacket(spb)) => {
                self.interface(0)?;
                (0, spb.data, spb.origlen)
            }
            _ => unreachable!("is_packet chose a packet block"),
        };
        Ok(PacketRef {
            index: self.next_index,
            ts_ns,
            data,
            orig_len,
        })
    }

    fn interface(&self, id: u32) -> Result<Interface, PcapReadError> {
        self.interfaces
            .get(id as usize)
            .copied()
            .ok_or_else(|| PcapReadError::UnknownInterface {
                path: self.path.clone(),
                index: self.next_index,
                interface: id,
            })
    }

    fn check_linktype(&self, linktype: Linktype) -> Result<(), PcapReadError> {
        if linktype == Linktype::ETHERNET {
            Ok(())
        } else {
            Err(PcapReadError::LinkType {
                path: self.path.clone(),
                linktype: linktype.0,
            })
        }
    }
}

fn units_to_ns(units: u64, iface: Interface) -> u64 {
    let ns = u128::from(units) * 1_000_000_000 / u128::from(iface.units_per_sec.max(1));
    let offset = i128::from(iface.offset_sec) * 1_000_000_000;
    (ns as i128 + offset).clamp(0, u64::MAX as i128) as u64
}

impl Iterator for PcapReader {
    type Item = Result<Packet, PcapReadError>;

    /// Yields every frame, then at most one error, then stops.
    fn next(&mut self) -> Option<Self::Item> {
        self.next_ref().map(|item| item.map(|p| p.to_packet()))
    }
}

/// Largest frame a written capture declares (tcpdump's default snap length).
const SNAPLEN: u32 = 262_144;
const LINKTYPE_ETHERNET: u32 = 1;

/// Writes a classic pcap file: Ethernet, microsecond or nanosecond timestamps.
pub struct PcapWriter<W: Write> {
    out: W,
    nanos: bool,
}

impl PcapWriter<BufWriter<File>> {
    pub fn create(path: &Path, nanos: bool) -> io::Result<Self> {
        PcapWriter::new(BufWriter::new(File::create(path)?), nanos)
    }
}

impl<W: Write> PcapWriter<W> {
    pub fn new(mut out: W, nanos: bool) -> io::Result<Self> {
        let magic: u32 = if nanos { 0xa1b2_3c4d } else { 0xa1b2_c3d4 };
        let mut header = Vec::with_capacity(24);
        header.extend_from_slice(&magic.to_le_bytes());
        header.extend_from_slice(&2u16.to_le_bytes());
        header.extend_from_slice(&4u16.to_le_bytes());
        header.extend_from_slice(&0i32.to_le_bytes());
        header.extend_from_slice(&0u32.to_le_bytes());
        header.extend_from_slice(&SNAPLEN.to_le_bytes());
        header.extend_from_slice(&LINKTYPE_ETHERNET.to_le_bytes());
        out.write_all(&header)?;
        Ok(PcapWriter { out, nanos })
    }

    /// Appends one frame captured whole.
    pub fn write(&mut self, ts_ns: u64, data: &[u8]) -> io::Result<()> {
        let sec = (ts_ns / 1_000_000_000) as u32;
        let sub = ts_ns % 1_000_000_000;
        let frac = if self.nanos { sub } else { sub / 1000 } as u32;
        let len = data.len() as u32;
        let mut record = Vec::with_capacity(16 + data.len());
        for field in [sec, frac, len, len] {
            record.extend_from_slice(&field.to_le_bytes());
        }
        record.extend_from_slice(data);
        self.out.write_all(&record)
    }

    pub fn finish(mut self) -> io::Result<W> {
        self.out.flush()?;
        Ok(self.out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_all(bytes: Vec<u8>) -> Vec<Result<Packet, PcapReadError>> {
        PcapReader::from_reader(Path::new("t.pcap"), io::Cursor::new(bytes))
            .unwrap()
            .collect()
    }

    fn capture(nanos: bool, frames: &[(u64, &[u8])]) -> Vec<u8> {
        let mut w = PcapWriter::new(Vec::new(), nanos).unwrap();
        for (ts, data) in frames {
            w.write(*ts, data).unwrap();
        }
        w.finish().unwrap()
    }

    #[test]
    fn round_trips_microsecond_and_nanosecond_captures() {
        let frames: [(u64, &[u8]); 2] = [(1_700_000_000_123_456_789, &[1; 60]), (5_000, &[2; 14])];
        let packets: Vec<Packet> = read_all(capture(true, &frames))
            .into_iter()
            .map(Result::unwrap)
            .collect();
        assert_eq!(packets.len(), 2);
        assert_eq!(packets[0].ts_ns, 1_700_000_000_123_456_789);
        assert_eq!(packets[1].data, vec![2; 14]);
        assert_eq!(packets[1].index, 1);
        let micro = read_all(capture(false, &frames));
        assert_eq!(micro[0].as_ref().unwrap().ts_ns, 1_700_000_000_123_456_000);
    }

    /// A classic record by hand: 16 header bytes in the file's byte order, then the bytes.
    fn record(big_endian: bool, fields: [u32; 4], data: &[u8]) -> Vec<u8> {
        let mut out: Vec<u8> = fields
            .iter()
            .flat_map(|f| match big_endian {
                true => f.to_be_bytes(),
                false => f.to_le_bytes(),
            })
            .collect();
        out.extend_from_slice(data);
        out
    }

    /// Big-endian microsecond captures read as little-endian ones do: timestamps, original
    /// lengths and bytes from the records' own byte order, through the classic fast path
    /// (the records lie whole in the buffer) as well as the parser.
    #[test]
    fn big_endian_classic_records() {
        let mut bytes = vec![0xa1, 0xb2, 0xc3, 0xd4, 0, 2, 0, 4];
        bytes.extend([0; 8]);
        bytes.extend(SNAPLEN.to_be_bytes());
        bytes.extend(1u32.to_be_bytes());
        bytes.extend(record(true, [7, 250, 3, 1500], &[9, 8, 7]));
        bytes.extend(record(true, [8, 0, 14, 14], &[5; 14]));
        let packets: Vec<Packet> = read_all(bytes).into_iter().map(Result::unwrap).collect();
        assert_eq!(packets.len(), 2);
        assert_eq!(packets[0].ts_ns, 7_000_250_000);
        assert_eq!(
            (packets[0].data.as_slice(), packets[0].orig_len),
            (&[9, 8, 7][..], 1500)
        );
        assert_eq!((packets[1].index, packets[1].ts_ns), (1, 8_000_000_000));
        assert_eq!(packets[1].data, vec![5; 14]);
    }

    /// A record whose caplen no capture holds, after good ones, is reported as such, by
    /// index and offset, whatever path read the records before it.
    #[test]
    fn bogus_caplen_after_good_records() {
        let mut bytes = capture(false, &[(1_000, &[1; 60]), (2_000, &[2; 60])]);
        bytes.extend(record(false, [0, 0, SNAPLEN + 1, 64], &[3; 64]));
        let results = read_all(bytes);
        assert_eq!(results.len(), 3);
        assert!(results[..2].iter().all(Result::is_ok));
        let message = results[2].as_ref().unwrap_err().to_string();
        assert_eq!(
            message,
            format!(
                "t.pcap: packet 2: bogus caplen {} at byte {} (a record holds at most {SNAPLEN} bytes)",
                SNAPLEN + 1,
                24 + 2 * (16 + 60)
            )
        );
    }

    #[test]
    fn truncated_record_is_reported_after_the_good_packets() {
        let mut bytes = capture(false, &[(0, &[1; 60]), (0, &[2; 60])]);
        bytes.truncate(bytes.len() - 10);
        let items = read_all(bytes);
        assert_eq!(items.len(), 2);
        assert!(items[0].is_ok());
        let err = items[1].as_ref().unwrap_err().to_string();
        assert!(err.contains("t.pcap: packet 1 is truncated"), "{err}");
    }

    #[test]
    fn other_link_types_are_refused_by_name() {
        let mut bytes = capture(false, &[(0, &[1; 20])]);
        bytes[20] = 113; // Linux cooked capture
        let err = PcapReader::from_reader(Path::new("c.pcap"), io::Cursor::new(bytes))
            .unwrap()
            .next()
            .unwrap()
            .unwrap_err();
        assert!(
            err.to_string().contains("link type 113 is not Ethernet"),
            "{err}"
        );
    }

    #[test]
    fn garbage_is_not_a_capture() {
        let err = PcapReader::from_reader(Path::new("g"), io::Cursor::new(vec![7u8; 100]));
        assert!(matches!(err, Err(PcapReadError::NotPcap { .. })));
    }

    /// A pcapng capture by hand: a section, one Ethernet interface with nanosecond
    /// timestamps, and an enhanced packet block per frame.
    fn pcapng_capture(frames: &[(u64, &[u8])]) -> Vec<u8> {
        let block = |ty: u32, body: &[u8]| {
            let len = (12 + body.len()) as u32;
            let mut b = Vec::new();
            b.extend_from_slice(&ty.to_le_bytes());
            b.extend_from_slice(&len.to_le_bytes());
            b.extend_from_slice(body);
            b.extend_from_slice(&len.to_le_bytes());
            b
        };
        let mut ng = Vec::new();
        let mut shb = Vec::new();
        shb.extend_from_slice(&0x1a2b_3c4du32.to_le_bytes());
        shb.extend_from_slice(&1u16.to_le_bytes());
        shb.extend_from_slice(&0u16.to_le_bytes());
        shb.extend_from_slice(&(-1i64).to_le_bytes());
        ng.extend(block(0x0a0d_0d0a, &shb));
        let mut idb = Vec::new();
        idb.extend_from_slice(&1u16.to_le_bytes());
        idb.extend_from_slice(&0u16.to_le_bytes());
        idb.extend_from_slice(&0u32.to_le_bytes());
        // if_tsresol = 9 (nanoseconds), then end of options.
        idb.extend_from_slice(&[9, 0, 1, 0, 9, 0, 0, 0, 0, 0, 0, 0]);
        ng.extend(block(1, &idb));
        for (ts, data) in frames {
            let mut epb = Vec::new();
            epb.extend_from_slice(&0u32.to_le_bytes());
            epb.extend_from_slice(&((ts >> 32) as u32).to_le_bytes());
            epb.extend_from_slice(&(*ts as u32).to_le_bytes());
            epb.extend_from_slice(&(data.len() as u32).to_le_bytes());
            epb.extend_from_slice(&(data.len() as u32).to_le_bytes());
            epb.extend_from_slice(data);
            // The frame's bytes are padded to 32 bits.
            epb.resize(epb.len().next_multiple_of(4), 0);
            ng.extend(block(6, &epb));
        }
        ng
    }

    #[test]
    fn reads_pcapng_with_nanosecond_resolution() {
        let ts: u64 = 1_600_000_000_000_000_007;
        let packets = read_all(pcapng_capture(&[(ts, &[0xab; 16])]));
        assert_eq!(packets.len(), 1);
        let p = packets[0].as_ref().unwrap();
        assert_eq!(p.ts_ns, ts);
        assert_eq!(p.data, vec![0xab; 16]);
    }

    /// A capture written to a file of its own (removed when dropped), to be mapped.
    struct TempCapture(PathBuf);

    impl TempCapture {
        fn new(name: &str, bytes: &[u8]) -> TempCapture {
            let path =
                std::env::temp_dir().join(format!("bpfemu-pcap-{}-{name}", std::process::id()));
            std::fs::write(&path, bytes).unwrap();
            TempCapture(path)
        }

        /// Every frame or error, read through the mapping (checked to be one).
        fn mapped(&self) -> Vec<Result<Packet, String>> {
            let reader = PcapReader::open(&self.0).unwrap();
            assert!(reader.is_mapped(), "{} is mapped", self.0.display());
            reader.map(|item| item.map_err(|e| e.to_string())).collect()
        }

        /// Every frame or error, read as a pipe reads it: through the buffer.
        fn streamed(&self) -> Vec<Result<Packet, String>> {
            let file = File::open(&self.0).unwrap();
            let reader = PcapReader::from_reader(&self.0, file).unwrap();
            assert!(!reader.is_mapped());
            reader.map(|item| item.map_err(|e| e.to_string())).collect()
        }
    }

    impl Drop for TempCapture {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }

    /// Big-endian classic pcap: a header and records in network byte order.
    fn big_endian_capture(nanos: bool, frames: &[(u32, u32, &[u8])]) -> Vec<u8> {
        let magic: u32 = if nanos { 0xa1b2_3c4d } else { 0xa1b2_c3d4 };
        let mut bytes = magic.to_be_bytes().to_vec();
        bytes.extend([0, 2, 0, 4]);
        bytes.extend([0; 8]);
        bytes.extend(SNAPLEN.to_be_bytes());
        bytes.extend(1u32.to_be_bytes());
        for (sec, frac, data) in frames {
            let len = data.len() as u32;
            bytes.extend(record(true, [*sec, *frac, len, len], data));
        }
        bytes
    }

    /// The mapped file and the stream give the same frames, in every format the reader
    /// takes: classic pcap in both byte orders and timestamp units, pcapng, and the bundled
    /// captures.
    #[test]
    fn mapped_and_streamed_captures_give_the_same_frames() {
        let frames: [(u64, &[u8]); 3] = [
            (1_700_000_000_123_456_789, &[1; 60]),
            (5_000, &[2; 14]),
            (7, &[3; 1514]),
        ];
        let be_frames: [(u32, u32, &[u8]); 2] = [(7, 250, &[9; 61]), (8, 999_999, &[5; 14])];
        let mut captures = vec![
            ("micro.pcap".into(), capture(false, &frames)),
            ("nano.pcap".into(), capture(true, &frames)),
            (
                "be-micro.pcap".into(),
                big_endian_capture(false, &be_frames),
            ),
            ("be-nano.pcap".into(), big_endian_capture(true, &be_frames)),
            ("nano.pcapng".into(), pcapng_capture(&frames)),
        ];
        let bundled = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/pcap");
        for entry in std::fs::read_dir(bundled).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            captures.push((name, std::fs::read(&path).unwrap()));
        }
        for (name, bytes) in captures {
            let file = TempCapture::new(&name, &bytes);
            let mapped = file.mapped();
            assert!(
                !mapped.is_empty() && mapped.iter().all(Result::is_ok),
                "{name}"
            );
            assert_eq!(mapped, file.streamed(), "{name}");
        }
    }

    /// A broken capture says the same error, after the same frames, mapped or streamed:
    /// a truncated record (classic and pcapng), a bogus caplen, a malformed pcapng block.
    #[test]
    fn mapped_captures_break_off_with_the_streamed_errors() {
        let good = capture(false, &[(1_000, &[1; 60]), (2_000, &[2; 60])]);
        let truncated = good[..good.len() - 10].to_vec();
        let mut bogus = good.clone();
        bogus.extend(record(false, [0, 0, u32::MAX, 64], &[3; 64]));
        let ng = pcapng_capture(&[(1, &[1; 60]), (2, &[2; 60])]);
        let ng_truncated = ng[..ng.len() - 8].to_vec();
        let mut ng_malformed = ng.clone();
        // The last block's trailing length no longer matches its leading one.
        let at = ng_malformed.len() - 4;
        ng_malformed[at] ^= 0x40;
        let cases = [
            (
                "trunc.pcap",
                truncated,
                "trunc.pcap: packet 1 is truncated: the file ends inside its record (byte 100)",
            ),
            (
                "bogus.pcap",
                bogus,
                "bogus.pcap: packet 2: bogus caplen 4294967295 at byte 176",
            ),
            (
                "trunc.pcapng",
                ng_truncated,
                "trunc.pcapng: packet 1 is truncated",
            ),
            (
                "bad.pcapng",
                ng_malformed,
                "bad.pcapng: malformed record after packet 1",
            ),
        ];
        for (name, bytes, expected) in cases {
            let file = TempCapture::new(name, &bytes);
            let mapped = file.mapped();
            assert_eq!(mapped, file.streamed(), "{name}");
            let (last, frames) = mapped.split_last().unwrap();
            assert!(frames.iter().all(Result::is_ok), "{name}");
            let error = last.as_ref().unwrap_err();
            assert!(error.contains(expected), "{name}: {error}");
        }
    }

    /// A classic record whose caplen no capture holds is refused even when its bytes are all
    /// there (the mapping holds the whole file), not handed to the program.
    #[test]
    fn a_whole_record_with_a_bogus_caplen_is_refused() {
        let mut bytes = capture(false, &[(1_000, &[1; 60])]);
        let caplen = SNAPLEN + 1;
        bytes.extend(record(
            false,
            [0, 0, caplen, caplen],
            &vec![3; caplen as usize],
        ));
        let file = TempCapture::new("whole-bogus.pcap", &bytes);
        let mapped = file.mapped();
        assert_eq!(mapped, file.streamed());
        assert_eq!(mapped.len(), 2);
        let error = mapped[1].as_ref().unwrap_err();
        assert!(
            error.contains("packet 1: bogus caplen 262145 at byte 100"),
            "{error}"
        );
    }

    /// What cannot be mapped is streamed: an empty file is no capture, as before.
    #[test]
    fn an_empty_file_is_not_a_capture() {
        let file = TempCapture::new("empty.pcap", &[]);
        let err = PcapReader::open(&file.0).err().unwrap();
        assert!(matches!(err, PcapReadError::NotPcap { .. }), "{err}");
        let garbage = TempCapture::new("garbage.pcap", &[7; 100]);
        let err = PcapReader::open(&garbage.0).err().unwrap();
        assert!(matches!(err, PcapReadError::NotPcap { .. }), "{err}");
    }
}
