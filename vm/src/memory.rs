//! Checked memory: the regions a program may touch, and the bounds strategy that validates
//! every access against them.
//!
//! A program sees real host addresses (r10 is the address just past the end of a real
//! buffer, as in the kernel), and in checked mode an address is mapped back to
//! `(region, offset)` before anything is touched. Each region is its own heap allocation, so
//! an overflow from one region can never silently land in another. The interpreter's hinted
//! accesses ([`Memory::read_hinted`], [`Memory::write_hinted`]) check the address against a
//! compact table of the live windows (one [`Span`] per region, kept in step with the regions
//! by every method that changes one) and only then read or write the host bytes at that
//! address; every other access goes through safe slice indexing.
//!
//! Two kinds of region behave specially, for the XDP runtime:
//! - a *windowed* region ([`Memory::add_windowed`]) is one allocation of which only a live
//!   window is accessible; the window moves ([`Memory::set_window`]) while the bytes stay put.
//!   The XDP frame is one: the program may touch `[data_meta, data_end)` only, and
//!   `bpf_xdp_adjust_head/meta/tail` move those bounds inside the frame.
//! - a *converted ctx* region ([`Memory::add_converted_ctx`]) answers aligned 4-byte loads
//!   with a 64-bit value per field ([`CtxFields`]), refusing every other access. This is what
//!   the kernel's verifier does to `struct xdp_md` loads (`xdp_convert_ctx_access` turns a
//!   32-bit load of `data` into a 64-bit load of `xdp_buff->data`). bpfemu has no verifier yet,
//!   so the conversion happens here at access time; once the verifier produces the xlated
//!   program, the ctx will be the real `xdp_buff` layout and this region kind can go.

use std::cell::Cell;
use std::fmt;

/// Size of one stack frame, the kernel's `MAX_BPF_STACK`.
pub const STACK_SIZE: usize = 512;

/// Regions start on an 8-byte boundary when the memory allocates them, so that aligned
/// accesses in the program are aligned on the host too (the kernel's stack is 8-aligned).
const REGION_ALIGN: usize = 8;

/// Bytes of unused allocation on each side of a region the memory allocates itself. A
/// fault just outside a region is named by the nearest region; without the guard, where the
/// host allocator put another region decided which one that was (a write 9 bytes past a stack
/// frame was "7 before input buffer" in one run and "9 past stack frame 0" in another). With
/// it, an address less than this far from such a region is nearer to it than to any other.
const REGION_GUARD: usize = 4096;

/// Identifies a region for its whole life; never reused within one [`Memory`] (a stack frame's
/// region keeps its id from one call at its depth to the next, see [`Memory::add_stack_frame`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RegionId(u32);

/// What a region holds; used for the region's name in fault reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RegionKind {
    /// The stack frame of the call at this depth (0: the entry function).
    Stack { frame: usize },
    /// The input buffer of the bpf_conformance convention (r1 = its address).
    Input,
    /// The program's context object.
    Ctx,
    /// Packet data.
    Packet,
    /// The value of a map element; `map` is the map's name.
    MapValue { map: String },
    /// Global data (`.data`, `.rodata`, `.bss`); `section` is its name.
    Global { section: String },
    /// Anything else, with a name for reports.
    Other { name: String },
}

impl fmt::Display for RegionKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RegionKind::Stack { frame } => write!(f, "stack frame {frame}"),
            RegionKind::Input => f.write_str("input buffer"),
            RegionKind::Ctx => f.write_str("ctx"),
            RegionKind::Packet => f.write_str("packet"),
            RegionKind::MapValue { map } => write!(f, "value of map {map}"),
            RegionKind::Global { section } => write!(f, "global data {section}"),
            RegionKind::Other { name } => f.write_str(name),
        }
    }
}

/// The fields of a converted ctx: field `i` is the 4-byte slot at offset `4 * i`, and a load
/// of it gives the full 64-bit value (a pointer for `data`, `data_end`, `data_meta`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CtxFields {
    pub values: Vec<u64>,
}

/// Where a converted ctx region is ([`Memory::converted_ctx_span`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CtxSpan {
    /// The address the program sees, and the region's length.
    pub base: u64,
    pub len: u64,
    /// The host address of the field values (`CtxFields::values`, one `u64` per 4-byte
    /// field): code that reads them directly (the trusted JIT) loads field `off / 4` from
    /// `values + 2 * off`. They stay put while the region lives
    /// ([`Memory::set_ctx_fields`] writes them in place).
    pub values: u64,
}

/// One contiguous, separately allocated range of bytes the program may access.
#[derive(Debug)]
pub struct Region {
    id: RegionId,
    kind: RegionKind,
    /// The allocation; the accessible region is `storage[start..start + len]`.
    storage: Vec<u8>,
    start: usize,
    len: usize,
    /// The whole extent (start, len) of a windowed region; `start`/`len` is its live window.
    extent: (usize, usize),
    writable: bool,
    /// Set for a converted ctx: loads are answered from here, never from `storage`.
    ctx: Option<CtxFields>,
    /// False for a parked stack frame: kept for the next call at its depth, invisible until then.
    live: bool,
    /// The lowest offset (into the live window) written since the region was last cleaned:
    /// what a parked stack frame must zero before it is used again.
    dirty_lo: usize,
}

impl Region {
    pub fn id(&self) -> RegionId {
        self.id
    }

    pub fn kind(&self) -> &RegionKind {
        &self.kind
    }

    /// The host address of the first byte: what the program sees as a pointer.
    pub fn base(&self) -> u64 {
        self.storage.as_ptr().addr() as u64 + self.start as u64
    }

    /// The address one past the last byte.
    pub fn end(&self) -> u64 {
        self.base() + self.len as u64
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn writable(&self) -> bool {
        self.writable
    }

    pub fn bytes(&self) -> &[u8] {
        &self.storage[self.start..self.start + self.len]
    }

    /// Mutable bytes for the host (helpers, loaders), regardless of the program's permission.
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        self.dirty_lo = 0;
        &mut self.storage[self.start..self.start + self.len]
    }

    /// The whole allocation of a windowed region (equal to [`Region::bytes`] for others).
    pub fn extent_bytes(&self) -> &[u8] {
        &self.storage[self.extent.0..self.extent.0 + self.extent.1]
    }

    /// The whole allocation of a windowed region, for the host to write.
    pub fn extent_bytes_mut(&mut self) -> &mut [u8] {
        &mut self.storage[self.extent.0..self.extent.0 + self.extent.1]
    }

    /// The host address of the first byte of the whole allocation.
    pub fn extent_base(&self) -> u64 {
        self.storage.as_ptr().addr() as u64 + self.extent.0 as u64
    }

    /// The fields of a converted ctx region.
    pub fn ctx_fields(&self) -> Option<&CtxFields> {
        self.ctx.as_ref()
    }

    /// Offset of `[addr, addr + len)` inside the region, when it lies wholly inside.
    #[inline]
    fn offset_of(&self, addr: u64, len: usize) -> Option<usize> {
        if !self.live {
            return None;
        }
        let off = addr.wrapping_sub(self.base());
        let room = (self.len as u64).checked_sub(off)?;
        (len as u64 <= room).then_some(off as usize)
    }

    fn describe(&self) -> RegionInfo {
        RegionInfo {
            name: self.kind.to_string(),
            start: self.base(),
            end: self.end(),
        }
    }

    /// `addr` relative to this region, as a program's author names it: `pkt+54`, `fp-8`
    /// (stack offsets count from the frame pointer, the end of the frame), `map value+12`,
    /// `ctx+4`, `.bss+16`. Stable from run to run, unlike the host address.
    fn place(&self, addr: u64) -> String {
        let (label, origin) = match &self.kind {
            RegionKind::Stack { frame: 0 } => ("fp".to_owned(), self.end()),
            RegionKind::Stack { frame } => (format!("frame {frame} fp"), self.end()),
            RegionKind::Input => ("input".to_owned(), self.base()),
            RegionKind::Ctx => ("ctx".to_owned(), self.base()),
            RegionKind::Packet => ("pkt".to_owned(), self.base()),
            RegionKind::MapValue { .. } => ("map value".to_owned(), self.base()),
            RegionKind::Global { section } => (section.clone(), self.base()),
            RegionKind::Other { name } => (name.clone(), self.base()),
        };
        let off = i128::from(addr) - i128::from(origin);
        if off < 0 {
            format!("{label}-{}", -off)
        } else {
            format!("{label}+{off}")
        }
    }
}

/// Read or write, for fault reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    Read,
    Write,
}

impl fmt::Display for Access {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Access::Read => "read",
            Access::Write => "write",
        })
    }
}

/// A region's name and address range, as a fault reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegionInfo {
    pub name: String,
    pub start: u64,
    pub end: u64,
}

/// The name and size: never the host addresses, which change from run to run.
impl fmt::Display for RegionInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let len = self.end.wrapping_sub(self.start);
        let plural = if len == 1 { "" } else { "s" };
        write!(f, "{} ({len} byte{plural})", self.name)
    }
}

/// Where a faulting access lies relative to the nearest region.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Position {
    /// The access starts `by` bytes before the region's first byte.
    BeforeStart { by: u64 },
    /// The access ends `by` bytes past the region's end (it may start inside: a straddle).
    PastEnd { by: u64 },
}

/// Why an access was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FaultCause {
    /// No region holds the whole access; `nearest` is the closest one, if any exists.
    OutOfBounds {
        nearest: Option<(RegionInfo, Position)>,
    },
    /// The access lies in a region the program may not write.
    ReadOnly { region: RegionInfo },
    /// An access to a converted ctx that is not an aligned 4-byte load of a field.
    CtxAccess { region: RegionInfo, off: usize },
}

/// A refused memory access.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemFault {
    pub access: Access,
    /// The host address, for the host's use; messages give [`MemFault::place`] instead.
    pub addr: u64,
    /// Where the access was, relative to the region it hit or came nearest (`pkt+54`,
    /// `fp-8`), or the address itself when it is far below any host memory (a small scalar).
    pub place: Box<str>,
    pub len: usize,
    pub cause: FaultCause,
}

impl fmt::Display for MemFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let plural = if self.len == 1 { "" } else { "s" };
        write!(
            f,
            "invalid {} of {} byte{plural} at {}: ",
            self.access, self.len, self.place
        )?;
        match &self.cause {
            FaultCause::OutOfBounds { nearest: None } => f.write_str("no memory region is mapped"),
            FaultCause::OutOfBounds {
                nearest: Some((region, Position::BeforeStart { by })),
            } => write!(f, "{by} bytes before the start of {region}"),
            FaultCause::OutOfBounds {
                nearest: Some((region, Position::PastEnd { by })),
            } => write!(f, "{by} bytes past the end of {region}"),
            FaultCause::ReadOnly { region } => write!(f, "{region} is read-only"),
            FaultCause::CtxAccess { region, off } => write!(
                f,
                "offset {off} of {region}: the ctx may only be read, one aligned 4-byte field at a time"
            ),
        }
    }
}

impl std::error::Error for MemFault {}

/// The live regions of one run.
///
/// Lookup by address is a linear scan behind a one-entry cache of the last region hit (and
/// callers may keep their own hint, [`Memory::read_hinted`]): programs touch few regions, and
/// consecutive accesses usually hit the same one (the stack, or the packet). Lookup by id is
/// a table.
///
/// Stack frames are not freed when a call returns: each call depth keeps its region, parked
/// (invisible to every lookup) until the next call at that depth revives it, zeroing only the
/// bytes the previous call wrote. Running a packet therefore allocates nothing.
#[derive(Debug, Default)]
pub struct Memory {
    regions: Vec<Region>,
    /// By index in `regions`: its [`Span`].
    spans: Vec<Span>,
    /// By region id: its index in `regions`, or [`GONE`] once removed.
    index_of: Vec<u32>,
    /// Index into `regions` of the last hit; may be stale, it is always re-checked.
    last_hit: Cell<usize>,
    packet: Option<RegionId>,
    /// By call depth: the stack frame region kept for calls at that depth.
    stacks: Vec<StackSlot>,
    /// The converted ctx region added last, which [`Memory::converted_ctx`] tries first.
    last_ctx: Option<RegionId>,
    /// [`Memory::converted_ctx_span`]'s answer, kept in step with the ctx regions (which never
    /// move while they live): an engine asks at the start of every run, and looking the region
    /// up each time was a few percent of a fast replay.
    ctx_span: Option<CtxSpan>,
}

/// Zeroes `frame[from..]`, where a stack frame was written. A tail of at most 32 bytes (what
/// most programs write) is zeroed with two fixed-size stores that may overlap, as memset does
/// it, without the call to memset, which cost a few percent of a fast replay on every packet.
#[inline(always)]
fn zero_written(frame: &mut [u8], from: usize) {
    let tail = &mut frame[from..];
    let n = tail.len();
    match n {
        16..=32 => {
            tail[..16].copy_from_slice(&[0; 16]);
            tail[n - 16..].copy_from_slice(&[0; 16]);
        }
        8..=15 => {
            tail[..8].copy_from_slice(&[0; 8]);
            tail[n - 8..].copy_from_slice(&[0; 8]);
        }
        _ => tail.fill(0),
    }
}

/// [`Memory::index_of`] of a removed region.
const GONE: u32 = u32::MAX;

/// The stack frame region kept for one call depth: its id and its index in `regions` ([`GONE`]
/// once removed), so that a call finds it without the id table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct StackSlot {
    id: RegionId,
    index: u32,
}

/// What the hinted fast path needs of a region, in one 32-byte entry per region (at the
/// region's index): where its live window is and how much of it a program may read or write.
/// Derived from the region by [`Memory::sync_span`] whenever the region changes.
#[derive(Clone, Copy, Debug)]
struct Span {
    /// The host address of the live window's first byte ([`Region::base`]).
    base: u64,
    /// Bytes of the window a program may read directly: its length, or 0 for a parked stack
    /// frame and for a converted ctx (whose loads are answered from its fields).
    read_len: u64,
    /// Bytes a program may write directly: `read_len`, or 0 for a read-only region.
    write_len: u64,
    /// The lowest offset the fast path wrote since the region was last cleaned
    /// (`u64::MAX`: none); [`Region::dirty_lo`] keeps the other writers'.
    dirty_lo: u64,
}

impl Default for Span {
    /// Nothing reachable, nothing written.
    fn default() -> Span {
        Span {
            base: 0,
            read_len: 0,
            write_len: 0,
            dirty_lo: u64::MAX,
        }
    }
}

impl Span {
    /// The offset of `[addr, addr + len)` in the window when it lies wholly inside its first
    /// `limit` bytes.
    #[inline(always)]
    fn offset(&self, addr: u64, len: usize, limit: u64) -> Option<u64> {
        let off = addr.wrapping_sub(self.base);
        (off < limit && len as u64 <= limit - off).then_some(off)
    }
}

impl Memory {
    pub fn new() -> Memory {
        Memory::default()
    }

    /// Adds a region over `bytes` as given (its address is wherever `bytes` lives).
    pub fn add(&mut self, kind: RegionKind, bytes: Vec<u8>, writable: bool) -> RegionId {
        let len = bytes.len();
        self.insert(kind, bytes, 0, len, writable)
    }

    /// Adds a zero-filled region of `len` bytes whose base is 8-byte aligned.
    pub fn add_zeroed(&mut self, kind: RegionKind, len: usize, writable: bool) -> RegionId {
        self.insert_aligned(kind, len, writable)
    }

    /// Adds a region holding a copy of `bytes`, 8-byte aligned.
    pub fn add_copy(&mut self, kind: RegionKind, bytes: &[u8], writable: bool) -> RegionId {
        let id = self.add_zeroed(kind, bytes.len(), writable);
        self.regions
            .last_mut()
            .expect("just added")
            .bytes_mut()
            .copy_from_slice(bytes);
        id
    }

    /// Adds a zeroed, writable, 8-aligned stack frame of [`STACK_SIZE`] bytes for call depth
    /// `frame`. The region parked by the last call at this depth comes back (same address,
    /// same id) with the bytes that call wrote zeroed; only the first call at a depth
    /// allocates.
    pub fn add_stack_frame(&mut self, frame: usize) -> RegionId {
        self.push_stack_frame(frame).0
    }

    /// [`Memory::add_stack_frame`], also giving the frame's top (the r10 of the call), so that
    /// a call does not look the region up again. A parked frame that nothing wrote comes back
    /// without touching its bytes.
    #[inline]
    pub fn push_stack_frame(&mut self, frame: usize) -> (RegionId, u64) {
        if let Some(&StackSlot { id, index }) = self.stacks.get(frame)
            && let Some(region) = self.regions.get_mut(index as usize)
            && !region.live
        {
            let index = index as usize;
            let len = region.len;
            region.live = true;
            // A kept frame is a writable stack region whose window never moves: its span
            // keeps its base while parked, and only becomes reachable again.
            debug_assert!(region.writable && region.ctx.is_none());
            self.zero_written_stack(index, len);
            let span = &mut self.spans[index];
            span.read_len = len as u64;
            span.write_len = len as u64;
            return (id, span.base + len as u64);
        }
        self.new_stack_frame(frame)
    }

    /// Zeroes what was written in the stack region at `index`: from byte `written_from` up
    /// (code writing memory directly), and wherever the memory saw writes; then marks the
    /// region clean. What a frame needs before its next call, parked or kept live.
    #[inline]
    fn zero_written_stack(&mut self, index: usize, written_from: usize) {
        let region = &mut self.regions[index];
        let (start, len) = (region.start, region.len);
        let span = &mut self.spans[index];
        let dirty = region
            .dirty_lo
            .min(span.dirty_lo as usize)
            .min(written_from)
            .min(len);
        if dirty < len {
            zero_written(&mut region.storage[start..start + len], dirty);
        }
        region.dirty_lo = len;
        span.dirty_lo = u64::MAX;
    }

    /// The first call at depth `frame` (or one whose kept region was removed): a new region.
    #[cold]
    fn new_stack_frame(&mut self, frame: usize) -> (RegionId, u64) {
        let id = self.insert_aligned(RegionKind::Stack { frame }, STACK_SIZE, true);
        let index = self.regions.len() - 1;
        self.regions[index].dirty_lo = STACK_SIZE;
        let slot = StackSlot {
            id,
            index: index as u32,
        };
        if frame == self.stacks.len() {
            self.stacks.push(slot);
        } else if frame < self.stacks.len() && self.region(self.stacks[frame].id).is_none() {
            self.stacks[frame] = slot;
        }
        (id, self.regions[index].end())
    }

    /// Zeroes what was written in live stack frame `id` (from byte `written_from` up, for code
    /// writing memory directly, and wherever the memory saw writes), as if it had been parked
    /// and brought back: for an engine that runs the same function again at once
    /// (BPF_PROG_TEST_RUN's repeats). False when `id` is not a live region.
    pub fn clean_stack_frame(&mut self, id: RegionId, written_from: usize) -> bool {
        let Some(index) = self.live_index(id) else {
            return false;
        };
        self.zero_written_stack(index, written_from);
        true
    }

    /// [`Memory::clean_stack_frame`] of the frame `id` kept for call depth `frame`, found
    /// through that depth's slot rather than the id table (as
    /// [`Memory::remove_stack_frame_at`]): for an engine that keeps its entry frame live from
    /// one run to the next, on every packet. False when `id` is not that depth's live frame.
    #[inline]
    pub fn clean_stack_frame_at(
        &mut self,
        frame: usize,
        id: RegionId,
        written_from: usize,
    ) -> bool {
        let Some(&StackSlot { id: kept, index }) = self.stacks.get(frame) else {
            return false;
        };
        let index = index as usize;
        if kept != id || !self.regions.get(index).is_some_and(|r| r.live) {
            return false;
        }
        self.zero_written_stack(index, written_from);
        true
    }

    /// Records that code which writes memory directly (the JIT) may have written stack frame
    /// `id` from byte `lowest` of the region up: when the frame comes back for the next call
    /// those bytes are zeroed, as the interpreter's frames are where it wrote.
    #[inline]
    pub fn note_stack_written(&mut self, id: RegionId, lowest: usize) {
        if let Some(index) = self.live_index(id) {
            let region = &mut self.regions[index];
            region.dirty_lo = region.dirty_lo.min(lowest);
        }
    }

    /// Ends a stack frame added by [`Memory::add_stack_frame`]: from now on no access reaches
    /// it, and its region waits for the next call at its depth.
    #[inline]
    pub fn remove_stack_frame(&mut self, id: RegionId) {
        if let Some(index) = self.live_index(id)
            && let RegionKind::Stack { frame } = self.regions[index].kind
            && self.stacks.get(frame).map(|slot| slot.id) == Some(id)
        {
            self.regions[index].live = false;
            self.sync_span(index);
            return;
        }
        self.remove_unkept_stack_frame(id);
    }

    /// [`Memory::remove_stack_frame`] of the frame `id` that a call at depth `frame` got: the
    /// same, without looking the region up by its id when it is that depth's kept one.
    #[inline]
    pub fn remove_stack_frame_at(&mut self, frame: usize, id: RegionId) {
        if let Some(&StackSlot { id: kept, index }) = self.stacks.get(frame)
            && kept == id
            && let Some(region) = self.regions.get_mut(index as usize)
            && region.live
        {
            region.live = false;
            let span = &mut self.spans[index as usize];
            span.read_len = 0;
            span.write_len = 0;
            return;
        }
        self.remove_stack_frame(id);
    }

    /// [`Memory::remove_stack_frame`] of a frame that is not its depth's kept one: removed
    /// for good (out of line: the common case above stays small enough to inline).
    #[cold]
    #[inline(never)]
    fn remove_unkept_stack_frame(&mut self, id: RegionId) {
        if !self.stacks.iter().any(|slot| slot.id == id) {
            self.remove(id);
        }
    }

    /// A zeroed region of `len` bytes in an allocation of its own, 8-aligned, with
    /// [`REGION_GUARD`] bytes on each side.
    fn insert_aligned(&mut self, kind: RegionKind, len: usize, writable: bool) -> RegionId {
        let storage = vec![0; REGION_GUARD + len + REGION_ALIGN - 1 + REGION_GUARD];
        let misalign = (storage.as_ptr().addr() + REGION_GUARD) % REGION_ALIGN;
        let start = REGION_GUARD + (REGION_ALIGN - misalign) % REGION_ALIGN;
        self.insert(kind, storage, start, len, writable)
    }

    fn insert(
        &mut self,
        kind: RegionKind,
        storage: Vec<u8>,
        start: usize,
        len: usize,
        writable: bool,
    ) -> RegionId {
        let id = RegionId(self.index_of.len() as u32);
        self.index_of.push(self.regions.len() as u32);
        self.regions.push(Region {
            id,
            kind,
            storage,
            start,
            len,
            extent: (start, len),
            writable,
            ctx: None,
            live: true,
            dirty_lo: 0,
        });
        self.spans.push(Span::default());
        self.sync_span(self.regions.len() - 1);
        id
    }

    /// Brings the [`Span`] of the region at `index` in step with the region: called by every
    /// method that adds a region, moves its window, or changes whether a program may reach it.
    #[inline]
    fn sync_span(&mut self, index: usize) {
        let region = &self.regions[index];
        let read_len = match region.live && region.ctx.is_none() {
            true => region.len as u64,
            false => 0,
        };
        let span = &mut self.spans[index];
        // The address keeps the allocation's provenance exposed, for the fast path's accesses
        // by address.
        span.base = region.storage.as_ptr().expose_provenance() as u64 + region.start as u64;
        span.read_len = read_len;
        span.write_len = if region.writable { read_len } else { 0 };
    }

    /// Adds a zeroed, 8-aligned allocation of `len` bytes of which only `window` (offset, length)
    /// is accessible to the program until [`Memory::set_window`] moves it.
    pub fn add_windowed(
        &mut self,
        kind: RegionKind,
        len: usize,
        window: (usize, usize),
        writable: bool,
    ) -> RegionId {
        let id = self.add_zeroed(kind, len, writable);
        self.set_window(id, window.0, window.1);
        id
    }

    /// Moves the live window of a windowed region to `[off, off + len)` of its allocation.
    ///
    /// # Panics
    /// When the window does not fit the allocation (a bug in the caller, never program input).
    #[inline]
    pub fn set_window(&mut self, id: RegionId, off: usize, len: usize) {
        let index = self.live_index(id).expect("a live region");
        let region = &mut self.regions[index];
        assert!(
            off.checked_add(len)
                .is_some_and(|end| end <= region.extent.1),
            "window {off}+{len} outside an allocation of {} bytes",
            region.extent.1
        );
        region.start = region.extent.0 + off;
        region.len = len;
        self.sync_span(index);
    }

    /// Loads a windowed region and its converted ctx for the next run in one step: zeroes
    /// `[zero_from, at)` of the allocation, copies `bytes` to offset `at`, makes them the live
    /// window and sets every field of ctx region `ctx` to `fields`. The same as
    /// `extent_bytes_mut` + [`Memory::set_window`] + [`Memory::set_ctx_fields`], with each
    /// region looked up once: an XDP frame is reloaded this way for every packet.
    ///
    /// # Panics
    /// When the bytes do not fit the allocation, or `ctx` is not a live converted ctx with as
    /// many fields (bugs in the caller, never program input).
    #[inline]
    pub fn load_window_and_ctx(
        &mut self,
        id: RegionId,
        zero_from: usize,
        at: usize,
        bytes: &[u8],
        ctx: RegionId,
        fields: &[u64],
    ) {
        let index = self.live_index(id).expect("a live region");
        let region = &mut self.regions[index];
        let (extent_start, extent_len) = region.extent;
        let extent = &mut region.storage[extent_start..extent_start + extent_len];
        if zero_from < at {
            extent[zero_from..at].fill(0);
        }
        extent[at..at + bytes.len()].copy_from_slice(bytes);
        region.start = extent_start + at;
        region.len = bytes.len();
        self.sync_span(index);
        let ctx_index = self.live_index(ctx).expect("a live region");
        let values = &mut self.regions[ctx_index]
            .ctx
            .as_mut()
            .expect("a converted ctx")
            .values;
        values.copy_from_slice(fields);
    }

    /// Adds a converted ctx region of `4 * fields.values.len()` bytes (see the module docs).
    pub fn add_converted_ctx(&mut self, fields: CtxFields) -> RegionId {
        let id = self.add_zeroed(RegionKind::Ctx, 4 * fields.values.len(), false);
        self.regions.last_mut().expect("just added").ctx = Some(fields);
        self.sync_span(self.regions.len() - 1);
        if self.converted_ctx().is_none() {
            self.last_ctx = Some(id);
        }
        self.note_converted_ctx();
        id
    }

    /// Notes [`Memory::converted_ctx`] and its span again, after a ctx region came or went.
    fn note_converted_ctx(&mut self) {
        let found = self.converted_ctx().map(|r| {
            let span = CtxSpan {
                base: r.base(),
                len: r.len() as u64,
                values: r
                    .ctx
                    .as_ref()
                    .map_or(0, |f| f.values.as_ptr().addr() as u64),
            };
            (r.id(), span)
        });
        self.last_ctx = found.map(|(id, _)| id);
        self.ctx_span = found.map(|(_, span)| span);
    }

    /// Sets field `index` of a converted ctx region.
    ///
    /// # Panics
    /// When `id` is not a converted ctx with such a field.
    pub fn set_ctx_field(&mut self, id: RegionId, index: usize, value: u64) {
        let region = self.region_mut(id).expect("a live region");
        region.ctx.as_mut().expect("a converted ctx").values[index] = value;
    }

    /// Sets every field of a converted ctx region at once.
    ///
    /// # Panics
    /// When `id` is not a converted ctx with as many fields.
    #[inline]
    pub fn set_ctx_fields(&mut self, id: RegionId, values: &[u64]) {
        let region = self.region_mut(id).expect("a live region");
        let fields = region.ctx.as_mut().expect("a converted ctx");
        fields.values.copy_from_slice(values);
    }

    /// Removes a region and hands it back.
    pub fn remove(&mut self, id: RegionId) -> Option<Region> {
        let index = self.live_index(id)?;
        if self.packet == Some(id) {
            self.packet = None;
        }
        let region = self.regions.remove(index);
        self.spans.remove(index);
        self.index_of[id.0 as usize] = GONE;
        for later in &self.regions[index..] {
            self.index_of[later.id.0 as usize] -= 1;
        }
        for slot in &mut self.stacks {
            slot.index = self.index_of[slot.id.0 as usize];
        }
        if region.ctx.is_some() {
            self.note_converted_ctx();
        }
        Some(region)
    }

    /// The index in `regions` of a live region.
    #[inline]
    fn live_index(&self, id: RegionId) -> Option<usize> {
        let index = *self.index_of.get(id.0 as usize)?;
        (index != GONE && self.regions[index as usize].live).then_some(index as usize)
    }

    pub fn region(&self, id: RegionId) -> Option<&Region> {
        self.live_index(id).map(|i| &self.regions[i])
    }

    pub fn region_mut(&mut self, id: RegionId) -> Option<&mut Region> {
        self.live_index(id).map(|i| &mut self.regions[i])
    }

    /// The first live converted ctx region (the one a run's r1 points at), found without a
    /// search while the one noted is live.
    pub fn converted_ctx(&self) -> Option<&Region> {
        if let Some(region) = self.last_ctx.and_then(|id| self.region(id)) {
            return Some(region);
        }
        self.regions().find(|r| r.ctx.is_some())
    }

    /// What an engine needs of the converted ctx region ([`Memory::converted_ctx`]) at the
    /// start of every run.
    #[inline]
    pub fn converted_ctx_span(&self) -> Option<CtxSpan> {
        self.ctx_span
    }

    /// The live regions (parked stack frames are not).
    pub fn regions(&self) -> impl Iterator<Item = &Region> {
        self.regions.iter().filter(|r| r.live)
    }

    /// Names the region that legacy packet loads (LD_ABS, LD_IND) read.
    pub fn set_packet(&mut self, id: Option<RegionId>) {
        self.packet = id;
    }

    /// The region legacy packet loads read, if one is set and still present.
    pub fn packet(&self) -> Option<&Region> {
        self.packet.and_then(|id| self.region(id))
    }

    /// Reads an unsigned little-endian value of `len` (1, 2, 4 or 8) bytes.
    pub fn read(&self, addr: u64, len: usize) -> Result<u64, MemFault> {
        let (index, off) = self.locate(addr, len, Access::Read)?;
        if let Some(fields) = &self.regions[index].ctx {
            return self.ctx_load(index, fields, off, len, addr);
        }
        let bytes = &self.regions[index].bytes()[off..off + len];
        let mut word = [0u8; 8];
        word[..len].copy_from_slice(bytes);
        Ok(u64::from_le_bytes(word))
    }

    /// [`Memory::read`] that first tries the region `hint` names (an index the caller keeps
    /// per instruction) and leaves there the region the access hit. A wrong or stale hint only
    /// costs the search; every access is checked the same way.
    #[inline]
    pub fn read_hinted(&self, addr: u64, len: usize, hint: &Cell<u32>) -> Result<u64, MemFault> {
        if matches!(len, 1 | 2 | 4 | 8)
            && let Some(span) = self.spans.get(hint.get() as usize)
            && span.offset(addr, len, span.read_len).is_some()
        {
            // SAFETY: `[addr, addr + len)` lies inside the live window of a region (the span
            // says so, and every change to a region's window, liveness or presence updates its
            // span), which is `len` initialised bytes of the region's own allocation, alive
            // while the region is in `self`; nothing else borrows them while `self` is shared.
            return Ok(unsafe { load_host(addr, len) });
        }
        self.read_missed(addr, len, hint)
    }

    /// [`Memory::read_hinted`] when the hinted region does not hold the access.
    #[inline(never)]
    fn read_missed(&self, addr: u64, len: usize, hint: &Cell<u32>) -> Result<u64, MemFault> {
        let value = self.read(addr, len)?;
        hint.set(self.last_hit.get() as u32);
        Ok(value)
    }

    /// [`Memory::write`] with a per-instruction hint, as [`Memory::read_hinted`].
    #[inline]
    pub fn write_hinted(
        &mut self,
        addr: u64,
        len: usize,
        value: u64,
        hint: &Cell<u32>,
    ) -> Result<(), MemFault> {
        if matches!(len, 1 | 2 | 4 | 8)
            && let Some(span) = self.spans.get_mut(hint.get() as usize)
            && let Some(off) = span.offset(addr, len, span.write_len)
        {
            span.dirty_lo = span.dirty_lo.min(off);
            // SAFETY: `[addr, addr + len)` lies inside the live window of a writable region
            // (see `read_hinted`), bytes of the region's own allocation that nothing else
            // borrows while `self` is borrowed mutably.
            unsafe { store_host(addr, len, value) };
            return Ok(());
        }
        self.write_missed(addr, len, value, hint)
    }

    /// [`Memory::write_hinted`] when the hinted region does not hold the access.
    #[inline(never)]
    fn write_missed(
        &mut self,
        addr: u64,
        len: usize,
        value: u64,
        hint: &Cell<u32>,
    ) -> Result<(), MemFault> {
        self.write(addr, len, value)?;
        hint.set(self.last_hit.get() as u32);
        Ok(())
    }

    /// Writes the low `len` (1, 2, 4 or 8) bytes of `value`, little-endian.
    pub fn write(&mut self, addr: u64, len: usize, value: u64) -> Result<(), MemFault> {
        self.slice_mut(addr, len)?
            .copy_from_slice(&value.to_le_bytes()[..len]);
        Ok(())
    }

    /// The live region that holds the byte at `addr`, if one does.
    pub fn region_at(&self, addr: u64) -> Option<&Region> {
        self.find(addr, 1).map(|(index, _)| &self.regions[index])
    }

    /// The `len` bytes at `addr`, which must lie wholly inside one region (not a converted
    /// ctx, whose bytes are not what the program sees).
    #[inline]
    pub fn slice(&self, addr: u64, len: usize) -> Result<&[u8], MemFault> {
        // The region of the last access, through its span: a helper's key or value is
        // usually where the one before it was (the stack), and this is every map helper's
        // first step.
        if let Some(span) = self.spans.get(self.last_hit.get())
            && span.offset(addr, len, span.read_len).is_some()
        {
            let at = std::ptr::with_exposed_provenance::<u8>(addr as usize);
            // SAFETY: `[addr, addr + len)` lies inside the live window of a region that is
            // neither a converted ctx nor a parked frame (its span's `read_len` says so; see
            // `read_hinted`): initialised bytes of the region's own allocation, alive while
            // the region is in `self`, which the shared borrow of `self` keeps from writers.
            return Ok(unsafe { std::slice::from_raw_parts(at, len) });
        }
        self.slice_located(addr, len)
    }

    /// [`Memory::slice`] past its fast path: the region found among all.
    #[inline(never)]
    fn slice_located(&self, addr: u64, len: usize) -> Result<&[u8], MemFault> {
        let (index, off) = self.locate(addr, len, Access::Read)?;
        if self.regions[index].ctx.is_some() {
            return Err(self.ctx_fault(index, off, len, addr, Access::Read));
        }
        Ok(&self.regions[index].bytes()[off..off + len])
    }

    /// A load from a converted ctx: an aligned 4-byte load of an existing field.
    fn ctx_load(
        &self,
        index: usize,
        fields: &CtxFields,
        off: usize,
        len: usize,
        addr: u64,
    ) -> Result<u64, MemFault> {
        match fields.values.get(off / 4) {
            Some(&value) if len == 4 && off.is_multiple_of(4) => Ok(value),
            _ => Err(self.ctx_fault(index, off, len, addr, Access::Read)),
        }
    }

    fn ctx_fault(
        &self,
        index: usize,
        off: usize,
        len: usize,
        addr: u64,
        access: Access,
    ) -> MemFault {
        MemFault {
            access,
            addr,
            place: self.regions[index].place(addr).into(),
            len,
            cause: FaultCause::CtxAccess {
                region: self.regions[index].describe(),
                off,
            },
        }
    }

    /// The `len` bytes at `addr` for writing: wholly inside one writable region.
    pub fn slice_mut(&mut self, addr: u64, len: usize) -> Result<&mut [u8], MemFault> {
        let (index, off) = self.locate(addr, len, Access::Write)?;
        let region = &mut self.regions[index];
        region.dirty_lo = region.dirty_lo.min(off);
        let start = region.start + off;
        Ok(&mut region.storage[start..start + len])
    }

    /// Finds the region holding `[addr, addr + len)` and checks the permission.
    fn locate(&self, addr: u64, len: usize, access: Access) -> Result<(usize, usize), MemFault> {
        let (index, off) = self
            .find(addr, len)
            .ok_or_else(|| self.out_of_bounds(addr, len, access))?;
        let region = &self.regions[index];
        if access == Access::Write && region.ctx.is_some() {
            return Err(self.ctx_fault(index, off, len, addr, access));
        }
        if access == Access::Write && !region.writable {
            return Err(MemFault {
                access,
                addr,
                place: region.place(addr).into(),
                len,
                cause: FaultCause::ReadOnly {
                    region: region.describe(),
                },
            });
        }
        Ok((index, off))
    }

    fn find(&self, addr: u64, len: usize) -> Option<(usize, usize)> {
        let cached = self.last_hit.get();
        if let Some(off) = self
            .regions
            .get(cached)
            .and_then(|r| r.offset_of(addr, len))
        {
            return Some((cached, off));
        }
        let (index, off) = self
            .regions
            .iter()
            .enumerate()
            .find_map(|(i, r)| r.offset_of(addr, len).map(|off| (i, off)))?;
        self.last_hit.set(index);
        Some((index, off))
    }

    /// Builds the fault for an access no region holds, naming the nearest region.
    fn out_of_bounds(&self, addr: u64, len: usize, access: Access) -> MemFault {
        let nearest = self
            .regions()
            .map(|r| (r, position(r, addr, len)))
            .min_by_key(|(_, (_, distance))| *distance);
        let place = self.place_near(addr, nearest.as_ref().map(|(r, (_, gap))| (*r, *gap)));
        // A region far away says nothing useful, and the distance to it is host layout.
        let nearest = nearest
            .filter(|(_, (_, gap))| *gap <= NEAR && addr >= SMALL_ADDRESS)
            .map(|(r, (pos, _))| (r.describe(), pos));
        MemFault {
            access,
            addr,
            place: place.into(),
            len,
            cause: FaultCause::OutOfBounds { nearest },
        }
    }
}

/// Accesses farther than this from every region are not described relative to one.
const NEAR: u128 = 1 << 30;

/// Below this, an address is a small number the program made, not a host address (the host's
/// heap and mappings lie far above it), and is shown as it is.
const SMALL_ADDRESS: u64 = 1 << 32;

impl Memory {
    /// `addr` for a message: relative to the region that holds it or lies nearest, never the
    /// host address (see [`MemFault::place`]).
    pub fn place(&self, addr: u64) -> String {
        if let Some((index, _)) = self.find(addr, 1) {
            return self.regions[index].place(addr);
        }
        let nearest = self
            .regions()
            .map(|r| (r, position(r, addr, 1).1))
            .min_by_key(|(_, gap)| *gap);
        self.place_near(addr, nearest)
    }

    fn place_near(&self, addr: u64, nearest: Option<(&Region, u128)>) -> String {
        match nearest {
            Some((region, gap)) if gap <= NEAR && addr >= SMALL_ADDRESS => region.place(addr),
            _ if addr < SMALL_ADDRESS => format!("{addr:#x}"),
            _ => "an address far from every region".to_owned(),
        }
    }
}

/// The little-endian value of `len` (1, 2, 4 or 8) bytes at host address `addr`.
///
/// # Safety
/// `[addr, addr + len)` must be initialised bytes of a live allocation whose provenance was
/// exposed, not written by anyone else meanwhile.
#[inline(always)]
unsafe fn load_host(addr: u64, len: usize) -> u64 {
    let at = std::ptr::with_exposed_provenance::<u8>(addr as usize);
    // SAFETY: the caller's; unaligned reads, as a program's accesses may be.
    unsafe {
        match len {
            1 => at.read() as u64,
            2 => at.cast::<u16>().read_unaligned().to_le() as u64,
            4 => at.cast::<u32>().read_unaligned().to_le() as u64,
            _ => at.cast::<u64>().read_unaligned().to_le(),
        }
    }
}

/// Writes the low `len` (1, 2, 4 or 8) bytes of `value`, little-endian, at host address
/// `addr`.
///
/// # Safety
/// `[addr, addr + len)` must be bytes of a live allocation whose provenance was exposed, that
/// nothing else reads or writes meanwhile.
#[inline(always)]
unsafe fn store_host(addr: u64, len: usize, value: u64) {
    let at = std::ptr::with_exposed_provenance_mut::<u8>(addr as usize);
    // SAFETY: the caller's; unaligned writes, as a program's accesses may be.
    unsafe {
        match len {
            1 => at.write(value as u8),
            2 => at.cast::<u16>().write_unaligned((value as u16).to_le()),
            4 => at.cast::<u32>().write_unaligned((value as u32).to_le()),
            _ => at.cast::<u64>().write_unaligned(value.to_le()),
        }
    }
}

/// Where `[addr, addr + len)` lies relative to `region`, and the gap between them (0 when
/// they overlap). Computed in u128 so that accesses near the top of the address space do not
/// wrap.
fn position(region: &Region, addr: u64, len: usize) -> (Position, u128) {
    let (start, end) = (region.base() as u128, region.end() as u128);
    let (a, b) = (addr as u128, addr as u128 + len as u128);
    if a < start {
        let by = (start - a) as u64;
        (Position::BeforeStart { by }, start.saturating_sub(b))
    } else {
        let by = (b - end) as u64;
        (Position::PastEnd { by }, a.saturating_sub(end))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hinted accesses answer exactly as unhinted ones whatever happened to the hinted region
    /// since the hint was taken: its window moved, it was parked, an earlier region was
    /// removed (so that indices shifted), it is read-only. A span left stale by any of these
    /// would read or write bytes the program may no longer reach.
    #[test]
    fn hinted_accesses_follow_every_change_to_the_regions() {
        let mut mem = Memory::new();
        let early = mem.add_zeroed(
            RegionKind::Other {
                name: "early".into(),
            },
            8,
            true,
        );
        let frame = mem.add_windowed(RegionKind::Packet, 64, (16, 32), true);
        let ro = mem.add_copy(
            RegionKind::Global {
                section: ".rodata".into(),
            },
            &[7; 8],
            false,
        );
        let base = mem.region(frame).unwrap().base();
        let hint = Cell::new(0);
        mem.write_hinted(base + 30, 2, 0xbeef, &hint).unwrap();
        assert_eq!(mem.read_hinted(base + 30, 2, &hint).unwrap(), 0xbeef);
        let hit = hint.get();
        // The window shrinks to its first 16 bytes: byte 30 is out of reach, with the fault
        // an unhinted read gives.
        mem.set_window(frame, 16, 16);
        assert_eq!(hint.get(), hit);
        let expected = mem.read(base + 30, 2).unwrap_err();
        assert_eq!(mem.read_hinted(base + 30, 2, &hint).unwrap_err(), expected);
        assert_eq!(
            mem.write_hinted(base + 30, 2, 1, &Cell::new(hit))
                .unwrap_err(),
            mem.write(base + 30, 2, 1).unwrap_err()
        );
        // An earlier region goes and the indices shift: the frame's old hint now names the
        // read-only region, which the write misses, to land in the frame.
        mem.remove(early);
        let stale = Cell::new(hit);
        mem.write_hinted(base + 8, 1, 9, &stale).unwrap();
        assert_eq!(mem.read(base + 8, 1).unwrap(), 9);
        let ro_base = mem.region(ro).unwrap().base();
        let ro_hint = Cell::new(0);
        assert_eq!(
            mem.read_hinted(ro_base, 8, &ro_hint).unwrap(),
            0x0707_0707_0707_0707
        );
        let fault = mem.write_hinted(ro_base, 1, 0, &ro_hint).unwrap_err();
        assert!(
            matches!(fault.cause, FaultCause::ReadOnly { .. }),
            "{fault}"
        );
        assert_eq!(mem.read(ro_base, 1).unwrap(), 7);
    }

    /// A kept stack frame comes back zeroed only where writes were seen: bytes written behind
    /// the memory's back (as trusted compiled code does, reporting what its stack bound
    /// covers through `note_stack_written`) stay, from the first revival on.
    #[test]
    fn a_revived_frame_keeps_what_no_one_reported_writing() {
        let mut mem = Memory::new();
        let (id, _) = mem.push_stack_frame(0);
        mem.region_mut(id).unwrap().extent_bytes_mut()[STACK_SIZE - 1] = 7;
        mem.remove_stack_frame_at(0, id);
        let (again, top) = mem.push_stack_frame(0);
        assert_eq!(again, id);
        assert_eq!(mem.read(top - 1, 1).unwrap(), 7);
        mem.note_stack_written(id, STACK_SIZE - 8);
        mem.remove_stack_frame_at(0, id);
        let (_, top) = mem.push_stack_frame(0);
        assert_eq!(mem.read(top - 1, 1).unwrap(), 0);
    }

    /// A stack frame written through the fast path is unreachable once parked and comes back
    /// zeroed where it was written.
    #[test]
    fn hinted_stack_writes_are_zeroed_when_the_frame_comes_back() {
        let mut mem = Memory::new();
        let (id, top) = mem.push_stack_frame(0);
        let hint = Cell::new(0);
        mem.write_hinted(top - 8, 8, u64::MAX, &hint).unwrap();
        mem.write_hinted(top - 300, 4, 5, &hint).unwrap();
        mem.remove_stack_frame_at(0, id);
        let parked = mem.read_hinted(top - 8, 8, &hint).unwrap_err();
        assert!(
            matches!(parked.cause, FaultCause::OutOfBounds { .. }),
            "{parked}"
        );
        assert!(mem.write_hinted(top - 8, 1, 1, &hint).is_err());
        let (again, again_top) = mem.push_stack_frame(0);
        assert_eq!((again, again_top), (id, top));
        assert_eq!(mem.read_hinted(top - 8, 8, &hint).unwrap(), 0);
        assert_eq!(mem.read_hinted(top - 300, 4, &hint).unwrap(), 0);
    }

    #[test]
    fn read_write_round_trip_and_cache() {
        let mut mem = Memory::new();
        let a = mem.add_zeroed(RegionKind::Input, 16, true);
        let b = mem.add_zeroed(RegionKind::Ctx, 16, true);
        let (ba, bb) = (mem.region(a).unwrap().base(), mem.region(b).unwrap().base());
        assert_eq!(ba % 8, 0);
        mem.write(ba + 8, 8, 0x1122_3344_5566_7788).unwrap();
        mem.write(bb, 2, 0xabcd).unwrap();
        assert_eq!(mem.read(ba + 8, 4).unwrap(), 0x5566_7788);
        assert_eq!(mem.read(bb, 8).unwrap(), 0xabcd);
        assert_eq!(mem.read(ba + 15, 1).unwrap(), 0x11);
    }

    #[test]
    fn straddle_names_region_and_overhang() {
        let mut mem = Memory::new();
        let a = mem.add_zeroed(RegionKind::Input, 16, true);
        let base = mem.region(a).unwrap().base();
        let fault = mem.read(base + 14, 4).unwrap_err();
        assert_eq!(
            fault.cause,
            FaultCause::OutOfBounds {
                nearest: Some((
                    RegionInfo {
                        name: "input buffer".into(),
                        start: base,
                        end: base + 16
                    },
                    Position::PastEnd { by: 2 }
                ))
            }
        );
        let text = mem.read(base - 3, 1).unwrap_err().to_string();
        assert_eq!(
            text,
            "invalid read of 1 byte at input-3: 3 bytes before the start of input buffer (16 bytes)"
        );
    }

    #[test]
    fn read_only_regions_refuse_writes() {
        let mut mem = Memory::new();
        let a = mem.add_copy(RegionKind::Ctx, &[1, 2, 3, 4], false);
        let base = mem.region(a).unwrap().base();
        assert_eq!(mem.read(base, 4).unwrap(), 0x0403_0201);
        let fault = mem.write(base, 1, 0).unwrap_err();
        assert!(matches!(fault.cause, FaultCause::ReadOnly { .. }));
        assert!(fault.to_string().ends_with("is read-only"), "{fault}");
    }

    #[test]
    fn no_region_and_address_wrap() {
        let mem = Memory::new();
        assert_eq!(
            mem.read(0, 8).unwrap_err().to_string(),
            "invalid read of 8 bytes at 0x0: no memory region is mapped"
        );
        let mut mem = Memory::new();
        mem.add_zeroed(RegionKind::Input, 8, true);
        assert!(mem.read(u64::MAX - 2, 8).is_err());
    }

    #[test]
    fn windowed_region_allows_only_its_window() {
        let mut mem = Memory::new();
        let id = mem.add_windowed(RegionKind::Packet, 64, (16, 8), true);
        let base = mem.region(id).unwrap().extent_base();
        assert_eq!(mem.region(id).unwrap().base(), base + 16);
        mem.write(base + 16, 8, 7).unwrap();
        assert!(mem.read(base + 15, 1).is_err());
        assert!(mem.read(base + 24, 1).is_err());
        mem.set_window(id, 8, 24);
        assert_eq!(mem.read(base + 16, 8).unwrap(), 7);
        assert!(mem.read(base + 8, 1).is_ok());
        assert_eq!(mem.region(id).unwrap().extent_bytes().len(), 64);
    }

    #[test]
    fn converted_ctx_is_the_first_live_one() {
        let mut mem = Memory::new();
        assert!(mem.converted_ctx().is_none());
        let fields = || CtxFields { values: vec![0; 2] };
        mem.add_zeroed(RegionKind::Input, 8, true);
        let first = mem.add_converted_ctx(fields());
        let second = mem.add_converted_ctx(fields());
        assert_eq!(mem.converted_ctx().map(Region::id), Some(first));
        mem.remove(first);
        assert_eq!(mem.converted_ctx().map(Region::id), Some(second));
        let third = mem.add_converted_ctx(fields());
        mem.remove(second);
        assert_eq!(mem.converted_ctx().map(Region::id), Some(third));
        let span = mem.converted_ctx_span().expect("a live ctx");
        let region = mem.converted_ctx().expect("a live ctx");
        assert_eq!((span.base, span.len), (region.base(), region.len() as u64));
        let values = region.ctx_fields().expect("a ctx").values.as_ptr().addr() as u64;
        assert_eq!(span.values, values);
        mem.remove(third);
        assert!(mem.converted_ctx().is_none());
        assert!(mem.converted_ctx_span().is_none());
    }

    #[test]
    fn converted_ctx_answers_aligned_word_loads_only() {
        let mut mem = Memory::new();
        let id = mem.add_converted_ctx(CtxFields {
            values: vec![0x1122_3344_5566_7788, 5],
        });
        let base = mem.region(id).unwrap().base();
        assert_eq!(mem.read(base, 4).unwrap(), 0x1122_3344_5566_7788);
        assert_eq!(mem.read(base + 4, 4).unwrap(), 5);
        mem.set_ctx_field(id, 1, 9);
        assert_eq!(mem.read(base + 4, 4).unwrap(), 9);
        for (off, len) in [(0, 8), (2, 2), (1, 1)] {
            let fault = mem.read(base + off, len).unwrap_err();
            assert!(
                matches!(fault.cause, FaultCause::CtxAccess { .. }),
                "{fault}"
            );
        }
        assert!(mem.write(base, 4, 0).is_err());
        assert!(mem.slice(base, 4).is_err());
    }

    #[test]
    fn a_near_miss_names_its_own_region_wherever_the_host_put_the_others() {
        // Small regions allocated one after the other sit next to each other on the host
        // heap: without the guards, a few bytes past one were nearer to the next.
        let mut mem = Memory::new();
        let mut ids: Vec<RegionId> = (0..40)
            .map(|i| mem.add_zeroed(RegionKind::Input, 8 + i % 5 * 8, true))
            .collect();
        ids.extend((0..3).map(|depth| mem.add_stack_frame(depth)));
        for id in ids {
            let (start, end) = {
                let r = mem.region(id).unwrap();
                (r.base(), r.end())
            };
            for (addr, by) in [
                (end + 1, 2),
                (end + 9, 10),
                (start - 9, 9),
                (start - 4095, 4095),
            ] {
                let fault = mem.read(addr, 1).unwrap_err();
                let FaultCause::OutOfBounds {
                    nearest: Some((region, position)),
                } = &fault.cause
                else {
                    panic!("{fault}");
                };
                assert_eq!(
                    (region.start, region.end),
                    (start, end),
                    "{by} bytes off: {fault}"
                );
                assert!(matches!(
                    position,
                    Position::PastEnd { .. } | Position::BeforeStart { .. }
                ));
            }
        }
    }

    #[test]
    fn faults_name_places_relative_to_regions_never_host_addresses() {
        let mut mem = Memory::new();
        let stack = mem.add_stack_frame(0);
        let pkt = mem.add_windowed(RegionKind::Packet, 128, (16, 60), true);
        let value = mem.add_zeroed(
            RegionKind::MapValue {
                map: "counters".into(),
            },
            8,
            false,
        );
        let fp = mem.region(stack).unwrap().end();
        let data = mem.region(pkt).unwrap().base();
        let val = mem.region(value).unwrap().base();
        let faults = [
            mem.read(data + 58, 4).unwrap_err(),
            mem.read(fp, 8).unwrap_err(),
            mem.write(val + 4, 4, 0).unwrap_err(),
            mem.read(16, 8).unwrap_err(),
        ];
        let texts: Vec<String> = faults.iter().map(ToString::to_string).collect();
        assert_eq!(
            texts,
            [
                "invalid read of 4 bytes at pkt+58: 2 bytes past the end of packet (60 bytes)",
                "invalid read of 8 bytes at fp+0: 8 bytes past the end of stack frame 0 (512 bytes)",
                "invalid write of 4 bytes at map value+4: value of map counters (8 bytes) is read-only",
                "invalid read of 8 bytes at 0x10: no memory region is mapped",
            ]
        );
        assert_eq!(mem.place(fp - 8), "fp-8");
        assert_eq!(mem.place(data + 54), "pkt+54");
        assert_eq!(mem.place(val + 12), "map value+12");
        for (fault, text) in faults.iter().zip(&texts) {
            let host = format!("{:x}", fault.addr);
            assert!(fault.addr < 1 << 32 || !text.contains(&host), "{text}");
        }
    }

    #[test]
    fn stack_frames_are_recycled_and_zeroed() {
        let mut mem = Memory::new();
        let f = mem.add_stack_frame(0);
        let top = mem.region(f).unwrap().end();
        mem.write(top - 8, 8, u64::MAX).unwrap();
        mem.write(top - 512, 1, 0xff).unwrap();
        mem.remove_stack_frame(f);
        assert!(
            mem.read(top - 8, 8).is_err(),
            "a parked frame is out of reach"
        );
        assert_eq!(mem.regions().count(), 0);
        let g = mem.add_stack_frame(0);
        assert_eq!(f, g);
        let top = mem.region(g).unwrap().end();
        assert_eq!(mem.read(top - 8, 8).unwrap(), 0);
        assert_eq!(mem.read(top - 512, 1).unwrap(), 0);
        assert_eq!(mem.regions().count(), 1);
        // A frame at the next depth is a region of its own.
        let h = mem.add_stack_frame(1);
        assert_ne!(g, h);
        assert_eq!(mem.regions().count(), 2);
    }
}
