//! Packet captures in and out: pcap and pcapng (microsecond and nanosecond timestamps) read
//! through `pcap-parser`, classic pcap written directly (a 24-byte header, 16 bytes a record).
//!
//! Only Ethernet captures (link type 1) can feed an XDP program: the program sees frames from
//! the Ethernet header on, so any other link type is refused up front, naming it.
//!
//! The reader streams the file through one buffer and hands out each frame as a slice of it
//! ([`PcapReader::next_ref`]): replaying a capture copies no packet.

use pcap_parser::traits::PcapReaderIterator;
use pcap_parser::{Block, Linktype, PcapBlockOwned, PcapError};
use std::fs::File;
use std::io::{self, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

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

/// The bytes of a capture: the file, or standard input for `-`.
pub fn open_source(path: &Path) -> Result<Box<dyn Read + Send>, PcapReadError> {
    if path.as_os_str() == "-" {
        return Ok(Box::new(io::stdin()));
    }
    if path.is_dir() {
        return Err(PcapReadError::Directory { path: path.into() });
    }
    let file = File::open(path).map_err(|error| PcapReadError::Io {
        path: path.into(),
        error,
    })?;
    Ok(Box::new(file))
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
    inner: Box<dyn PcapReaderIterator + Send>,
    state: ReaderState,
    done: bool,
    /// Bytes of the block last handed out by [`PcapReader::next_ref`], consumed on the next call.
    pending: usize,
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
    /// Opens a capture file; `-` is standard input, as for tcpdump's `-r -`.
    pub fn open(path: &Path) -> Result<PcapReader, PcapReadError> {
        Self::from_reader(path, open_source(path)?)
    }

    /// Reads a capture from any byte source; `path` names it in messages.
    pub fn from_reader(
        path: &Path,
        reader: impl Read + Send + 'static,
    ) -> Result<PcapReader, PcapReadError> {
        let inner = pcap_parser::create_reader(READ_BUFFER, reader)
            .map_err(|_| PcapReadError::NotPcap { path: path.into() })?;
        let state = ReaderState {
            path: path.into(),
            legacy_nanos: false,
            legacy_big_endian: None,
            legacy_plain: false,
            interfaces: Vec::new(),
            next_index: 0,
        };
        Ok(PcapReader {
            inner,
            state,
            done: false,
            pending: 0,
        })
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
        Ok(match self.inner.next() {
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
        let result = self.inner.refill().map_err(|e| describe_parse_error(&e));
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
            let step = self.step()?;
            // Only on the slow paths (a refill or a failure), never per packet.
            if matches!(step, Step::Refill | Step::Grow | Step::Truncated)
                && let Some(bogus) = self.bogus_caplen()
            {
                return Err(bogus);
            }
            match step {
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
                    if bigger > MAX_BUFFER || !self.inner.grow(bigger) {
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
    /// plausible caplen: its length and frame (without the bytes, at
    /// `[CLASSIC_RECORD_HEADER, len)` of the buffer). Read from the 16 header bytes
    /// directly, as pcap-parser reads them but without building its block; anything else
    /// (a refill, a bogus caplen, pcapng) is left to [`PcapReader::seek_packet`], whose
    /// errors stay the reader's.
    #[inline]
    fn next_classic(&self) -> Option<(usize, PacketRef<'static>)> {
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
        let frame = PacketRef {
            index: self.state.next_index,
            ts_ns: u64::from(ts_sec) * 1_000_000_000 + frac_ns,
            data: &[],
            orig_len,
        };
        Some((len, frame))
    }

    /// How far into the capture the reader is, in bytes (for progress).
    pub fn bytes_read(&self) -> u64 {
        self.inner.consumed() as u64
    }

    /// The next frame, borrowed from the reader's buffer (no copy); `None` at the end of the
    /// capture. Yields every frame, then at most one error, then stops.
    pub fn next_ref(&mut self) -> Option<Result<PacketRef<'_>, PcapReadError>> {
        if self.done {
            return None;
        }
        self.inner.consume(std::mem::take(&mut self.pending));
        if let Some((len, frame)) = self.next_classic() {
            self.pending = len;
            self.state.next_index += 1;
            let data = &self.inner.data()[CLASSIC_RECORD_HEADER..len];
            return Some(Ok(PacketRef { data, ..frame }));
        }
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

    #[test]
    fn reads_pcapng_with_nanosecond_resolution() {
        let mut ng = Vec::new();
        let block = |ty: u32, body: &[u8]| {
            let len = (12 + body.len()) as u32;
            let mut b = Vec::new();
            b.extend_from_slice(&ty.to_le_bytes());
            b.extend_from_slice(&len.to_le_bytes());
            b.extend_from_slice(body);
            b.extend_from_slice(&len.to_le_bytes());
            b
        };
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
        let ts: u64 = 1_600_000_000_000_000_007;
        let mut epb = Vec::new();
        epb.extend_from_slice(&0u32.to_le_bytes());
        epb.extend_from_slice(&((ts >> 32) as u32).to_le_bytes());
        epb.extend_from_slice(&(ts as u32).to_le_bytes());
        epb.extend_from_slice(&16u32.to_le_bytes());
        epb.extend_from_slice(&16u32.to_le_bytes());
        epb.extend_from_slice(&[0xab; 16]);
        ng.extend(block(6, &epb));
        let packets = read_all(ng);
        assert_eq!(packets.len(), 1);
        let p = packets[0].as_ref().unwrap();
        assert_eq!(p.ts_ns, ts);
        assert_eq!(p.data, vec![0xab; 16]);
    }
}
