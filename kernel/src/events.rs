//! What a program emitted in the kernel: ring buffer records and perf event samples, read the
//! way a user-space consumer reads them, so that `bpfemu diff` compares them with bpfemu's.
//!
//! - A ring buffer map ([`RingbufReader`]) is mapped as libbpf's `ring_buffer` maps it: the
//!   consumer page read-write at offset 0, the producer page and the data pages (mapped twice
//!   in a row by the kernel, so a record that wraps reads in one piece) read-only after it.
//!   Committed records are read from the consumer position on, discarded ones skipped, and
//!   the consumer position is advanced past them (a reader stops at the first busy record).
//! - A perf event array ([`PerfReader`]) gets one `PERF_COUNT_SW_BPF_OUTPUT` event per CPU,
//!   stored in the slot of that CPU as libbpf's `perf_buffer` stores them; each event's ring
//!   is mapped and its `PERF_RECORD_SAMPLE` records read after every run. `bpf_perf_event_output`
//!   into a slot whose event counts on another CPU fails with EOPNOTSUPP in the kernel.
//!
//! ```no_run
//! use bpfemu_kernel::events::{PerfReader, PerfRecord};
//! let mut cpu0 = PerfReader::open(0, 8).unwrap();
//! // store cpu0.fd() in slot 0 of a perf event array, test-run a program on CPU 0, then:
//! for record in cpu0.read() {
//!     match record {
//!         PerfRecord::Sample(bytes) => println!("{} bytes", bytes.len()),
//!         PerfRecord::Lost(count) => println!("{count} lost"),
//!     }
//! }
//! ```

use crate as kernel;
use crate::object::KernelObject;
use bpfemu_loader::Object;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// `BPF_RINGBUF_BUSY_BIT` and `BPF_RINGBUF_DISCARD_BIT` of a record's length word.
const RINGBUF_BUSY: u32 = 1 << 31;
const RINGBUF_DISCARD: u32 = 1 << 30;
/// `BPF_RINGBUF_HDR_SZ`: the length word and the page offset before each record.
const RINGBUF_HDR: u64 = 8;

fn page_size() -> usize {
    // SAFETY: sysconf reads a constant of the system; no memory is passed.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(size).unwrap_or(4096)
}

/// A shared mapping, unmapped on drop.
struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
}

impl Mapping {
    fn new(fd: BorrowedFd<'_>, len: usize, prot: i32, offset: usize) -> io::Result<Mapping> {
        let offset = libc::off_t::try_from(offset).map_err(|_| io::ErrorKind::InvalidInput)?;
        // SAFETY: a fresh shared mapping of `len` bytes of `fd` at `offset`; the kernel checks
        // the length and the protection against the object; nothing else aliases it.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                prot,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                offset,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let ptr = NonNull::new(ptr.cast()).ok_or(io::ErrorKind::InvalidData)?;
        Ok(Mapping { ptr, len })
    }

    /// The 8-byte word at `offset`, shared with the kernel.
    fn word(&self, offset: usize) -> &AtomicU64 {
        assert!(offset + 8 <= self.len && offset.is_multiple_of(8));
        // SAFETY: in bounds, 8-aligned (mappings are page-aligned), alive as long as `self`;
        // the kernel writes it concurrently, hence the atomic.
        unsafe { &*self.ptr.as_ptr().add(offset).cast::<AtomicU64>() }
    }

    /// The 4-byte word at `offset`, shared with the kernel.
    fn word32(&self, offset: usize) -> &AtomicU32 {
        assert!(offset + 4 <= self.len && offset.is_multiple_of(4));
        // SAFETY: as in `word`, 4 bytes.
        unsafe { &*self.ptr.as_ptr().add(offset).cast::<AtomicU32>() }
    }

    /// `len` bytes at `offset`, copied out.
    fn copy(&self, offset: usize, len: usize) -> Vec<u8> {
        assert!(offset + len <= self.len);
        // SAFETY: in bounds of the live mapping; the producer has published these bytes
        // (the caller read the position that covers them with acquire ordering).
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr().add(offset), len).to_vec() }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping `new` made; no reference into it outlives `self`.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

/// A consumer of one kernel ring buffer map.
pub struct RingbufReader {
    consumer: Mapping,
    /// The producer page, then the data pages twice.
    producer: Mapping,
    page: usize,
    mask: u64,
}

impl RingbufReader {
    /// Maps ring buffer `map` of `max_entries` data bytes (a power of two of pages).
    pub fn new(map: BorrowedFd<'_>, max_entries: u32) -> io::Result<RingbufReader> {
        let page = page_size();
        let size = max_entries as usize;
        let consumer = Mapping::new(map, page, libc::PROT_READ | libc::PROT_WRITE, 0)?;
        let producer = Mapping::new(map, page + 2 * size, libc::PROT_READ, page)?;
        Ok(RingbufReader {
            consumer,
            producer,
            page,
            mask: size as u64 - 1,
        })
    }

    /// The committed records not yet consumed, in order; consumes them.
    pub fn read(&mut self) -> Vec<Vec<u8>> {
        let mut records = Vec::new();
        let mut cons = self.consumer.word(0).load(Ordering::Acquire);
        let prod = self.producer.word(0).load(Ordering::Acquire);
        while cons < prod {
            let at = self.page + (cons & self.mask) as usize;
            let len = self.producer.word32(at).load(Ordering::Acquire);
            if len & RINGBUF_BUSY != 0 {
                break;
            }
            let data_len = len & !(RINGBUF_BUSY | RINGBUF_DISCARD);
            if len & RINGBUF_DISCARD == 0 {
                records.push(
                    self.producer
                        .copy(at + RINGBUF_HDR as usize, data_len as usize),
                );
            }
            cons += (u64::from(data_len) + RINGBUF_HDR).div_ceil(8) * 8;
            self.consumer.word(0).store(cons, Ordering::Release);
        }
        records
    }
}

/// `struct perf_event_attr` up to `PERF_ATTR_SIZE_VER0` (64 bytes): all a BPF output event
/// needs.
#[repr(C)]
#[derive(Default)]
struct PerfEventAttr {
    type_: u32,
    size: u32,
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    config1: u64,
}

const PERF_TYPE_SOFTWARE: u32 = 1;
const PERF_COUNT_SW_BPF_OUTPUT: u64 = 10;
const PERF_SAMPLE_RAW: u64 = 1 << 10;
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 1 << 3;
/// `PERF_EVENT_IOC_ENABLE`: `_IO('$', 0)`.
const PERF_EVENT_IOC_ENABLE: libc::c_ulong = 0x2400;
const PERF_RECORD_LOST: u32 = 2;
const PERF_RECORD_SAMPLE: u32 = 9;
/// `data_head` and `data_tail` in `struct perf_event_mmap_page`.
const DATA_HEAD: usize = 1024;
const DATA_TAIL: usize = 1032;

/// A record read from a perf event's ring.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PerfRecord {
    /// A sample's raw bytes, as the kernel stored them: the program's bytes, then padding up
    /// to the next 8-byte boundary of the record (whose contents the kernel leaves as they
    /// were).
    Sample(Vec<u8>),
    /// Samples the ring had no room for.
    Lost(u64),
}

/// One `PERF_COUNT_SW_BPF_OUTPUT` event on one CPU, with its ring mapped.
pub struct PerfReader {
    ring: Mapping,
    fd: OwnedFd,
    page: usize,
    data_size: u64,
}

impl PerfReader {
    /// Opens the event on `cpu` with a ring of `pages` data pages (a power of two).
    pub fn open(cpu: u32, pages: usize) -> io::Result<PerfReader> {
        let attr = PerfEventAttr {
            type_: PERF_TYPE_SOFTWARE,
            size: std::mem::size_of::<PerfEventAttr>() as u32,
            config: PERF_COUNT_SW_BPF_OUTPUT,
            sample_period: 1,
            sample_type: PERF_SAMPLE_RAW,
            wakeup_events: 1,
            ..PerfEventAttr::default()
        };
        // SAFETY: perf_event_open reads `attr` (its size field says how much) and returns a
        // new fd or -1; no pointer is kept.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_perf_event_open,
                &attr as *const PerfEventAttr,
                -1 as libc::pid_t,
                cpu as libc::c_int,
                -1 as libc::c_int,
                PERF_FLAG_FD_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: the syscall returned a fresh fd that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
        let page = page_size();
        let ring = Mapping::new(
            fd.as_fd(),
            page * (1 + pages),
            libc::PROT_READ | libc::PROT_WRITE,
            0,
        )?;
        // SAFETY: an ioctl without an argument on the event's own fd.
        if unsafe { libc::ioctl(fd.as_raw_fd(), PERF_EVENT_IOC_ENABLE, 0) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(PerfReader {
            ring,
            fd,
            page,
            data_size: (page * pages) as u64,
        })
    }

    /// The event's fd, to store in a perf event array's slot.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// The records written since the last read, in order; consumes them.
    pub fn read(&mut self) -> Vec<PerfRecord> {
        let head = self.ring.word(DATA_HEAD).load(Ordering::Acquire);
        let mut tail = self.ring.word(DATA_TAIL).load(Ordering::Relaxed);
        let mut out = Vec::new();
        while tail + 8 <= head {
            let header = self.ring_bytes(tail, 8);
            let kind = u32::from_ne_bytes(header[0..4].try_into().expect("4 bytes"));
            let size = u16::from_ne_bytes(header[6..8].try_into().expect("2 bytes")) as u64;
            if size < 8 || tail + size > head {
                break;
            }
            let body = self.ring_bytes(tail + 8, (size - 8) as usize);
            match kind {
                PERF_RECORD_SAMPLE if body.len() >= 4 => {
                    let len = u32::from_ne_bytes(body[0..4].try_into().expect("4 bytes")) as usize;
                    let end = (4 + len).min(body.len());
                    out.push(PerfRecord::Sample(body[4..end].to_vec()));
                }
                // `struct { u64 id; u64 lost; }`.
                PERF_RECORD_LOST if body.len() >= 16 => {
                    let lost = u64::from_ne_bytes(body[8..16].try_into().expect("8 bytes"));
                    out.push(PerfRecord::Lost(lost));
                }
                _ => {}
            }
            tail += size;
        }
        self.ring.word(DATA_TAIL).store(tail, Ordering::Release);
        out
    }

    /// `len` bytes of the data ring from position `pos`, across its end.
    fn ring_bytes(&self, pos: u64, len: usize) -> Vec<u8> {
        let start = (pos % self.data_size) as usize;
        let first = len.min(self.data_size as usize - start);
        let mut bytes = self.ring.copy(self.page + start, first);
        bytes.extend(self.ring.copy(self.page, len - first));
        bytes
    }
}

/// An event record read from the kernel: which map, which perf slot (`None` for a ring
/// buffer), the bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelEvent {
    pub map: String,
    pub slot: Option<u32>,
    pub record: PerfRecord,
}

/// `BPF_MAP_TYPE_PERF_EVENT_ARRAY` and `BPF_MAP_TYPE_RINGBUF`.
const PERF_EVENT_ARRAY: u32 = 4;
const RINGBUF: u32 = 27;
/// Data pages of each perf event's ring: room for the samples of one run.
const PERF_PAGES: usize = 16;

/// Readers for every ring buffer and perf event array a loaded program uses (the perf events
/// stored in their arrays' slots, one per CPU).
pub struct KernelEvents {
    rings: Vec<(String, RingbufReader)>,
    perf: Vec<(String, u32, PerfReader)>,
}

impl KernelEvents {
    /// Maps the ring buffers of `kernel` and gives each perf event array slot below `cpus`
    /// an event on the CPU of that number. Maps the program does not use are left alone.
    pub fn attach(
        obj: &Object,
        kernel: &KernelObject,
        cpus: u32,
    ) -> Result<KernelEvents, (String, io::Error)> {
        let mut rings = Vec::new();
        let mut perf = Vec::new();
        for spec in &obj.maps {
            let Some(fd) = kernel.map_fd(&spec.name) else {
                continue;
            };
            let fail = |e: io::Error| (spec.name.clone(), e);
            match spec.map_type {
                RINGBUF => rings.push((
                    spec.name.clone(),
                    RingbufReader::new(fd, spec.max_entries).map_err(fail)?,
                )),
                PERF_EVENT_ARRAY => {
                    for cpu in 0..spec.max_entries.min(cpus) {
                        let reader = PerfReader::open(cpu, PERF_PAGES).map_err(fail)?;
                        let value = (reader.fd().as_raw_fd() as u32).to_ne_bytes();
                        kernel::map_update_fd(fd, &cpu.to_ne_bytes(), &value, 0)
                            .map_err(|errno| fail(io::Error::from_raw_os_error(errno)))?;
                        perf.push((spec.name.clone(), cpu, reader));
                    }
                }
                _ => {}
            }
        }
        Ok(KernelEvents { rings, perf })
    }

    /// Whether the program has any event channel.
    pub fn is_empty(&self) -> bool {
        self.rings.is_empty() && self.perf.is_empty()
    }

    /// The perf event arrays whose slots were filled, with their slot counts.
    pub fn perf_slots(&self) -> Vec<(String, u32)> {
        let mut out: Vec<(String, u32)> = Vec::new();
        for (map, _, _) in &self.perf {
            match out.last_mut() {
                Some((name, n)) if name == map => *n += 1,
                _ => out.push((map.clone(), 1)),
            }
        }
        out
    }

    /// Every record emitted since the last read, consumed: the ring buffers' records in map
    /// order, then the perf samples in map and slot order.
    pub fn read(&mut self) -> Vec<KernelEvent> {
        let mut out = Vec::new();
        for (map, ring) in &mut self.rings {
            out.extend(ring.read().into_iter().map(|data| KernelEvent {
                map: map.clone(),
                slot: None,
                record: PerfRecord::Sample(data),
            }));
        }
        for (map, cpu, reader) in &mut self.perf {
            out.extend(reader.read().into_iter().map(|record| KernelEvent {
                map: map.clone(),
                slot: Some(*cpu),
                record,
            }));
        }
        out
    }
}

/// The length of a perf sample's raw bytes as the kernel stores `len` bytes from a program:
/// rounded so that the 4-byte size word and the bytes end on an 8-byte boundary.
pub fn perf_raw_len(len: usize) -> usize {
    (len + 4).div_ceil(8) * 8 - 4
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perf_raw_lengths_pad_to_eight_with_the_size_word() {
        assert_eq!(perf_raw_len(0), 4);
        assert_eq!(perf_raw_len(4), 4);
        assert_eq!(perf_raw_len(5), 12);
        assert_eq!(perf_raw_len(12), 12);
        assert_eq!(perf_raw_len(13), 20);
    }
}
