//! RINGBUF (kernel/bpf/ringbuf.c): a power-of-two data area of 8-byte-aligned records, each
//! behind an 8-byte header `{ u32 len; u32 pg_off; }` whose `len` carries a busy bit while
//! the record is reserved and a discard bit once discarded.
//!
//! The kernel maps the data pages twice in a row so that a record crossing the end is
//! contiguous. bpfemu's region is twice the data size for the same reason: a record that
//! crosses the end is written and read in the second half, which only ever holds the tail
//! of that one record (the space check keeps the first half's same bytes unused until the
//! record is consumed).

use super::spec::*;
use super::{Errno, MapResult};
use crate::memory::{Memory, RegionId, RegionKind};

/// `BPF_RINGBUF_BUSY_BIT` and `BPF_RINGBUF_DISCARD_BIT` of a record header's `len`.
pub const BPF_RINGBUF_BUSY_BIT: u32 = 1 << 31;
pub const BPF_RINGBUF_DISCARD_BIT: u32 = 1 << 30;
/// `BPF_RINGBUF_HDR_SZ`.
pub const BPF_RINGBUF_HDR_SZ: u64 = 8;
/// `RINGBUF_MAX_RECORD_SZ`.
const MAX_RECORD_SZ: u64 = (u32::MAX / 4) as u64;
/// Pages of `struct bpf_ringbuf` before the data (its header page, then the consumer and
/// producer position pages): the base of a record header's `pg_off`.
const META_PAGES: u64 = 3;
/// The largest dynptr (`DYNPTR_MAX_SIZE`).
const DYNPTR_MAX_SIZE: u64 = (1 << 24) - 1;

/// Why a reservation failed; each helper turns it into its own answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReserveError {
    /// Larger than a record may be, or than the whole ring.
    TooLarge,
    /// Not enough room before the consumer position or the oldest uncommitted record.
    NoSpace,
}

impl ReserveError {
    /// `bpf_ringbuf_output`'s answer.
    pub fn output_errno(self) -> Errno {
        Errno::EAGAIN
    }

    /// `bpf_ringbuf_reserve_dynptr`'s answer: E2BIG past the largest dynptr, EINVAL otherwise.
    pub fn dynptr_errno(self, size: u64) -> Errno {
        if size > DYNPTR_MAX_SIZE {
            Errno::E2BIG
        } else {
            Errno::EINVAL
        }
    }
}

/// A committed record, as a consumer sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// The record's position (producer counter value of its header).
    pub pos: u64,
    pub data: Vec<u8>,
}

#[derive(Debug)]
pub(crate) struct Ringbuf {
    region: RegionId,
    base: u64,
    size: u64,
    consumer_pos: u64,
    producer_pos: u64,
    pending_pos: u64,
}

fn round8(n: u64) -> u64 {
    n.div_ceil(8) * 8
}

impl Ringbuf {
    pub(crate) fn new(mem: &mut Memory, spec: &MapSpec) -> Ringbuf {
        let size = spec.max_entries as u64;
        let kind = RegionKind::MapValue {
            map: spec.name.clone(),
        };
        let region = mem.add_zeroed(kind, 2 * size as usize, true);
        let base = mem.region(region).expect("just added").base();
        Ringbuf {
            region,
            base,
            size,
            consumer_pos: 0,
            producer_pos: 0,
            pending_pos: 0,
        }
    }

    fn mask(&self) -> u64 {
        self.size - 1
    }

    fn header(&self, mem: &Memory, pos: u64) -> u32 {
        let off = (pos & self.mask()) as usize;
        let bytes = &mem.region(self.region).expect("ring region").bytes()[off..off + 4];
        u32::from_ne_bytes(bytes.try_into().expect("4 bytes"))
    }

    fn write_header(&self, mem: &mut Memory, off: u64, len: u32, pg_off: u32) {
        let bytes = mem
            .region_mut(self.region)
            .expect("ring region")
            .bytes_mut();
        let off = off as usize;
        bytes[off..off + 4].copy_from_slice(&len.to_ne_bytes());
        bytes[off + 4..off + 8].copy_from_slice(&pg_off.to_ne_bytes());
    }

    /// Bytes a record of `len` payload bytes occupies.
    fn footprint(len: u32) -> u64 {
        round8(
            (len & !(BPF_RINGBUF_BUSY_BIT | BPF_RINGBUF_DISCARD_BIT)) as u64 + BPF_RINGBUF_HDR_SZ,
        )
    }

    /// `__bpf_ringbuf_reserve`: the address of a `size`-byte sample, its header marked busy.
    pub(crate) fn reserve(&mut self, mem: &mut Memory, size: u64) -> Result<u64, ReserveError> {
        if size > MAX_RECORD_SZ {
            return Err(ReserveError::TooLarge);
        }
        let len = round8(size + BPF_RINGBUF_HDR_SZ);
        if len > self.size {
            return Err(ReserveError::TooLarge);
        }
        while self.pending_pos < self.producer_pos {
            let hdr = self.header(mem, self.pending_pos);
            if hdr & BPF_RINGBUF_BUSY_BIT != 0 {
                break;
            }
            self.pending_pos += Self::footprint(hdr);
        }
        let new_prod = self.producer_pos + len;
        if new_prod - self.consumer_pos > self.mask() || new_prod - self.pending_pos > self.mask() {
            return Err(ReserveError::NoSpace);
        }
        let off = self.producer_pos & self.mask();
        let pg_off = (META_PAGES + (off >> 12)) as u32;
        self.write_header(mem, off, size as u32 | BPF_RINGBUF_BUSY_BIT, pg_off);
        self.producer_pos = new_prod;
        Ok(self.base + off + BPF_RINGBUF_HDR_SZ)
    }

    /// The header offset of a reserved sample at `sample`, or EINVAL when it is not one.
    fn busy_header(&self, mem: &Memory, sample: u64) -> MapResult<u64> {
        let off = sample
            .wrapping_sub(self.base)
            .wrapping_sub(BPF_RINGBUF_HDR_SZ);
        if off >= self.size
            || !off.is_multiple_of(8)
            || self.header(mem, off) & BPF_RINGBUF_BUSY_BIT == 0
        {
            return Err(Errno::EINVAL);
        }
        Ok(off)
    }

    /// `bpf_ringbuf_commit`: clears the busy bit (and sets the discard bit).
    pub(crate) fn commit(&mut self, mem: &mut Memory, sample: u64, discard: bool) -> MapResult<()> {
        let off = self.busy_header(mem, sample)?;
        let mut len = self.header(mem, off) ^ BPF_RINGBUF_BUSY_BIT;
        if discard {
            len |= BPF_RINGBUF_DISCARD_BIT;
        }
        let pg_off = (META_PAGES + (off >> 12)) as u32;
        self.write_header(mem, off, len, pg_off);
        Ok(())
    }

    /// `bpf_ringbuf_output`: reserve, copy, submit.
    pub(crate) fn output(&mut self, mem: &mut Memory, data: &[u8], flags: u64) -> MapResult<()> {
        if flags & !(BPF_RB_NO_WAKEUP | BPF_RB_FORCE_WAKEUP) != 0 {
            return Err(Errno::EINVAL);
        }
        let sample = self
            .reserve(mem, data.len() as u64)
            .map_err(ReserveError::output_errno)?;
        let off = (sample - self.base) as usize;
        let bytes = mem
            .region_mut(self.region)
            .expect("ring region")
            .bytes_mut();
        bytes[off..off + data.len()].copy_from_slice(data);
        self.commit(mem, sample, false)
    }

    /// `bpf_ringbuf_query`.
    pub(crate) fn query(&self, flags: u64) -> u64 {
        match flags {
            BPF_RB_AVAIL_DATA => self.producer_pos - self.consumer_pos,
            BPF_RB_RING_SIZE => self.size,
            BPF_RB_CONS_POS => self.consumer_pos,
            BPF_RB_PROD_POS => self.producer_pos,
            _ => 0,
        }
    }

    /// Reads committed records from the consumer position on, as a user-space consumer
    /// does, skipping discarded ones and stopping at the first busy one.
    pub(crate) fn consume(&mut self, mem: &Memory) -> Vec<Record> {
        let (records, end) = self.committed_from(mem, self.consumer_pos);
        self.consumer_pos = end;
        records
    }

    /// The producer position: where the next reservation starts.
    pub(crate) fn producer_pos(&self) -> u64 {
        self.producer_pos
    }

    /// The committed records from position `pos` on (without consuming them), and where the
    /// walk stopped: the producer position, or the first record still busy.
    pub(crate) fn committed_from(&self, mem: &Memory, mut pos: u64) -> (Vec<Record>, u64) {
        let mut records = Vec::new();
        let bytes = mem.region(self.region).expect("ring region").bytes();
        while pos < self.producer_pos {
            let hdr = self.header(mem, pos);
            if hdr & BPF_RINGBUF_BUSY_BIT != 0 {
                break;
            }
            if hdr & BPF_RINGBUF_DISCARD_BIT == 0 {
                let start = (pos & self.mask()) as usize + BPF_RINGBUF_HDR_SZ as usize;
                let data = bytes[start..start + hdr as usize].to_vec();
                records.push(Record { pos, data });
            }
            pos += Self::footprint(hdr);
        }
        (records, pos)
    }
}
