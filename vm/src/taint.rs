//! Taint tracking: which results of a run depend on values the kernel does not reproduce run to
//! run (random numbers, clock readings), decided from what the program did with them.
//!
//! An optional mode of the interpreter ([`crate::interp::Interpreter::set_taint`]). A value
//! from a *source* helper ([`is_source`]) is tainted with a [`TaintSource`] (the helper and the
//! instruction that called it); the taint then follows the data:
//! - registers: an ALU result is tainted when an operand is; a load is tainted when its address
//!   register or any byte it reads is; a constant is clean;
//! - memory, per byte (stack, packet, map values, global data): a store taints the bytes it
//!   writes when the value or the address register is tainted, and cleans them otherwise; a
//!   store through a tainted address could have hit any byte of its region, so the whole region
//!   becomes tainted (`TaintState`'s tainted regions);
//! - helpers, by what they read and write ([`Footprint`], answered by the runtime's
//!   [`crate::helpers::Helpers::footprint`]): the result is tainted when an argument register
//!   or a byte the helper reads is; the bytes it writes get the same taint; a map update
//!   copies the value's taint into the map's value, and a map update or delete with a tainted
//!   key taints the map's key set, which taints every later lookup's result in that map;
//!   a helper whose footprint is unknown and whose inputs are tainted taints control;
//! - control: a conditional jump on a tainted value (or a tail call with a tainted index)
//!   taints everything the program writes and returns after it, for the rest of the run
//!   ([`TaintState::control`]), and, since the kernel may have taken the other way, every
//!   map the rest of the program could write on any path (`interp/paths_not_taken.rs`).
//!
//! Map values keep their taint from one run to the next (they are the same bytes); the stack,
//! registers and control start clean each run, the packet's bytes too.

use crate::memory::{Memory, RegionKind};
use std::collections::{BTreeMap, HashMap};

/// Helper ids whose result the kernel does not reproduce: `get_prandom_u32` and the clocks
/// (`ktime_get_ns`, `jiffies64`, `ktime_get_boot_ns`, `ktime_get_coarse_ns`,
/// `ktime_get_tai_ns`).
pub const SOURCE_HELPERS: &[i32] = &[7, 5, 118, 125, 160, 208];

/// Whether helper `id` is a taint source.
pub fn is_source(id: i32) -> bool {
    SOURCE_HELPERS.contains(&id)
}

/// Where a taint comes from: the call of a source helper (shown as `bpf_NAME at insn N`, the
/// instruction in its program).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TaintSource {
    /// The helper's id.
    pub helper: i32,
    /// The program (index in the running set) and instruction of the call.
    pub prog: usize,
    pub pc: usize,
}

impl std::fmt::Display for TaintSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = bpfemu_isa::helpers::helper_name(self.helper).unwrap_or("?");
        write!(f, "bpf_{name} at insn {}", self.pc)
    }
}

/// The union of two taints: the first one known stands for both.
pub fn join(a: Option<TaintSource>, b: Option<TaintSource>) -> Option<TaintSource> {
    a.or(b)
}

/// What a helper call reads and writes, as far as taint goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Footprint {
    /// The result depends on the argument registers only; nothing in memory is written that
    /// results are compared on.
    Args,
    /// The result depends on the argument registers and the bytes of `reads`; the bytes of
    /// `writes` are written from all of them.
    Memory {
        reads: Vec<(u64, usize)>,
        writes: Vec<(u64, usize)>,
    },
    /// `bpf_map_lookup_elem`: the result depends on the key's bytes and on the map's key set.
    MapLookup { map: usize, key: (u64, usize) },
    /// `bpf_map_update_elem`: the value at the key (`value_addr` after the call) gets the
    /// taint of the value's bytes, the key's and the registers'; a tainted key taints the key
    /// set.
    MapUpdate {
        map: usize,
        key: (u64, usize),
        value: (u64, usize),
    },
    /// `bpf_map_delete_elem`: a tainted key taints the key set.
    MapDelete { map: usize, key: (u64, usize) },
    /// A helper that changes the packet's bounds (`bpf_xdp_adjust_head/meta/tail`): with a
    /// tainted argument the whole packet is tainted.
    PacketBounds,
    /// `bpf_tail_call`: a tainted index taints control.
    TailCall,
    /// Nothing known: with a tainted input, control is tainted.
    Unknown,
}

/// A map named by a handle: its index and the kind of the regions its values live in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MapOfHandle {
    pub index: usize,
    pub values: RegionKind,
}

/// The taint of one run in progress, and of the map values across runs.
#[derive(Clone, Debug, Default)]
pub struct TaintState {
    regs: [Option<TaintSource>; 16],
    /// Set by the first branch on a tainted value: everything after it is tainted.
    control: Option<TaintSource>,
    /// Tainted bytes by address.
    bytes: HashMap<u64, TaintSource>,
    /// Map values and global data wholly tainted (a store through a tainted address), by
    /// their region's name (`value of map NAME`), across runs.
    regions: BTreeMap<String, TaintSource>,
    /// Maps (by index) whose key set depends on taint.
    key_sets: BTreeMap<usize, TaintSource>,
    /// The packet as a whole (its bounds were moved by a tainted amount).
    packet: Option<TaintSource>,
    /// Caller registers of the active calls.
    saved: Vec<[Option<TaintSource>; 16]>,
    /// The run's event records (ring buffer, perf event output), from a tainted input.
    events: Option<TaintSource>,
}

/// The region key of [`TaintState::regions`].
fn region_key(kind: &RegionKind) -> String {
    kind.to_string()
}

impl TaintState {
    pub fn new() -> TaintState {
        TaintState::default()
    }

    /// Starts a run: registers, control, the call stack and every byte of stack frames and
    /// the packet are clean; map values keep their taint.
    pub fn begin_run(&mut self, mem: &Memory) {
        self.regs = [None; 16];
        self.control = None;
        self.packet = None;
        self.events = None;
        self.saved.clear();
        let transient: Vec<(u64, u64)> = mem
            .regions()
            .filter(|r| matches!(r.kind(), RegionKind::Stack { .. } | RegionKind::Packet))
            .map(|r| {
                (
                    r.extent_base(),
                    r.extent_base() + r.extent_bytes().len() as u64,
                )
            })
            .collect();
        self.bytes
            .retain(|addr, _| !transient.iter().any(|&(lo, hi)| (lo..hi).contains(addr)));
    }

    /// The control taint: set once a branch depended on a tainted value.
    pub fn control(&self) -> Option<TaintSource> {
        self.control
    }

    pub fn set_control(&mut self, source: Option<TaintSource>) {
        self.control = self.control.or(source);
    }

    pub fn reg(&self, r: usize) -> Option<TaintSource> {
        self.regs[r & 15]
    }

    /// Sets a register written by an instruction: its data taint joined with control.
    pub fn set_reg(&mut self, r: usize, taint: Option<TaintSource>) {
        self.regs[r & 15] = join(taint, self.control);
    }

    /// The taint of `len` bytes at `addr` (their own, their region's, the packet's).
    pub fn mem(&self, mem: &Memory, addr: u64, len: usize) -> Option<TaintSource> {
        let own = (0..len as u64).find_map(|i| self.bytes.get(&addr.wrapping_add(i)).copied());
        own.or_else(|| self.region_taint(mem, addr))
    }

    fn region_taint(&self, mem: &Memory, addr: u64) -> Option<TaintSource> {
        if self.regions.is_empty() && self.packet.is_none() {
            return None;
        }
        let region = mem.region_at(addr)?;
        if *region.kind() == RegionKind::Packet && self.packet.is_some() {
            return self.packet;
        }
        self.regions.get(&region_key(region.kind())).copied()
    }

    /// A store of `len` bytes at `addr` whose value has taint `value` and whose address
    /// register has taint `address` (see the module docs).
    pub fn store(
        &mut self,
        mem: &Memory,
        addr: u64,
        len: usize,
        value: Option<TaintSource>,
        address: Option<TaintSource>,
    ) {
        if let Some(source) = address {
            self.taint_region_at(mem, addr, source);
        }
        self.set_bytes(addr, len, join(join(value, address), self.control));
    }

    /// Taints every byte of the region holding `addr`: map values and global data for good
    /// (by their map), stack frames and the packet for this run (byte by byte).
    fn taint_region_at(&mut self, mem: &Memory, addr: u64, source: TaintSource) {
        let Some(region) = mem.region_at(addr) else {
            return;
        };
        match region.kind() {
            RegionKind::MapValue { .. } | RegionKind::Global { .. } => {
                self.regions
                    .entry(region_key(region.kind()))
                    .or_insert(source);
            }
            _ => {
                let (base, len) = (region.extent_base(), region.extent_bytes().len());
                for i in 0..len as u64 {
                    self.bytes.entry(base + i).or_insert(source);
                }
            }
        }
    }

    /// Sets (or cleans) the taint of `len` bytes at `addr`.
    pub fn set_bytes(&mut self, addr: u64, len: usize, taint: Option<TaintSource>) {
        for i in 0..len as u64 {
            let a = addr.wrapping_add(i);
            match taint {
                Some(t) => {
                    self.bytes.insert(a, t);
                }
                None => {
                    self.bytes.remove(&a);
                }
            }
        }
    }

    /// Copies the taint of `len` bytes from `src` to `dst`, each joined with `extra`.
    pub fn copy_bytes(
        &mut self,
        mem: &Memory,
        src: u64,
        dst: u64,
        len: usize,
        extra: Option<TaintSource>,
    ) {
        let taints: Vec<_> = (0..len as u64)
            .map(|i| join(self.mem(mem, src.wrapping_add(i), 1), extra))
            .collect();
        for (i, t) in taints.into_iter().enumerate() {
            self.set_bytes(dst.wrapping_add(i as u64), 1, t);
        }
    }

    /// Taints every value of a map or global data section (by their regions' kind), for good.
    pub fn taint_region(&mut self, kind: &RegionKind, source: TaintSource) {
        self.regions.entry(region_key(kind)).or_insert(source);
    }

    /// The taint of map `map`'s key set.
    pub fn key_set(&self, map: usize) -> Option<TaintSource> {
        self.key_sets.get(&map).copied()
    }

    pub fn taint_key_set(&mut self, map: usize, source: TaintSource) {
        self.key_sets.entry(map).or_insert(source);
    }

    /// The whole packet, from now on.
    pub fn taint_packet(&mut self, source: TaintSource) {
        self.packet = self.packet.or(Some(source));
    }

    /// The taint of the packet as a whole (its bounds), including control.
    pub fn packet(&self) -> Option<TaintSource> {
        join(self.packet, self.control)
    }

    /// The taint of the packet's bounds (moved by a tainted amount), from this run.
    pub fn bounds(&self) -> Option<TaintSource> {
        self.packet
    }

    /// An event record emitted from tainted data.
    pub fn taint_events(&mut self, source: TaintSource) {
        self.events = self.events.or(Some(source));
    }

    /// The taint of the run's event records: their data's, or control's.
    pub fn events(&self) -> Option<TaintSource> {
        join(self.events, self.control)
    }

    /// The taint of the run's result: r0's, or control's.
    pub fn result(&self) -> Option<TaintSource> {
        join(self.regs[0], self.control)
    }

    /// The taint of a region's every byte (by its kind's name: `value of map NAME`, `global
    /// data .data`).
    pub fn region(&self, kind: &RegionKind) -> Option<TaintSource> {
        self.regions.get(&region_key(kind)).copied()
    }

    /// Whether any byte of a region of this kind (a map's values: `MapValue`, `Global`) is
    /// tainted.
    pub fn touches(&self, mem: &Memory, kind: &RegionKind) -> bool {
        self.regions.contains_key(&region_key(kind))
            || self
                .bytes
                .keys()
                .any(|&addr| mem.region_at(addr).is_some_and(|r| r.kind() == kind))
    }

    /// Saves the caller's register taints at a call.
    pub fn push_call(&mut self) {
        self.saved.push(self.regs);
    }

    /// Restores them at the return; r0 keeps the callee's.
    pub fn pop_call(&mut self, keep_r0: bool) {
        if let Some(regs) = self.saved.pop() {
            let r0 = self.regs[0];
            self.regs = regs;
            if keep_r0 {
                self.regs[0] = join(r0, self.control);
            }
        }
    }

    /// Clears every register but r1-r5 (which get `args`), as a callee starts.
    pub fn enter(&mut self, args: [Option<TaintSource>; 5]) {
        self.regs = [self.control; 16];
        for (i, a) in args.into_iter().enumerate() {
            self.regs[1 + i] = join(a, self.control);
        }
    }
}
