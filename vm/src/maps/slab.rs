//! Value storage in [`Memory`] regions, laid out like the kernel's preallocated maps: a fixed
//! number of slots of `round_up(value_size, 8)` bytes, one region per per-CPU copy.
//!
//! The slab never shrinks or moves: a slot's address stays valid (and addressable by the
//! program) after its element is deleted, as with the kernel's prealloc, and a later insert
//! reuses it.

use crate::memory::{Memory, RegionId, RegionKind};

/// Slot storage of one map.
#[derive(Debug)]
pub(crate) struct Slab {
    /// One region per copy (per-CPU maps: per virtual CPU).
    regions: Vec<RegionId>,
    /// Base address of each region, cached: region storage never moves.
    bases: Vec<u64>,
    slot_size: usize,
    value_size: usize,
    slots: u32,
    /// A `struct bpf_spin_lock` in the value: value copies leave these 4 bytes alone.
    lock_off: Option<usize>,
}

/// Rounds up to the 8-byte slot granularity of the kernel's maps.
pub(crate) fn round8(n: usize) -> usize {
    n.div_ceil(8) * 8
}

impl Slab {
    /// Allocates `slots` zeroed slots in `copies` regions of kind `kind`.
    pub(crate) fn new(
        mem: &mut Memory,
        kind: RegionKind,
        layout: SlabLayout,
        writable: bool,
    ) -> Slab {
        let slot_size = round8(layout.value_size);
        let len = slot_size * layout.slots as usize;
        let regions: Vec<RegionId> = (0..layout.copies)
            .map(|_| mem.add_zeroed(kind.clone(), len, writable))
            .collect();
        let bases = regions
            .iter()
            .map(|id| mem.region(*id).expect("just added").base())
            .collect();
        Slab {
            regions,
            bases,
            slot_size,
            value_size: layout.value_size,
            slots: layout.slots,
            lock_off: layout.lock_off,
        }
    }

    /// The base address of each copy's slots.
    pub(crate) fn bases(&self) -> &[u64] {
        &self.bases
    }

    pub(crate) fn copies(&self) -> usize {
        self.regions.len()
    }

    pub(crate) fn slots(&self) -> u32 {
        self.slots
    }

    pub(crate) fn value_size(&self) -> usize {
        self.value_size
    }

    /// The program-visible address of `slot` in copy `copy`.
    pub(crate) fn addr(&self, copy: usize, slot: u32) -> u64 {
        self.bases[copy] + slot as u64 * self.slot_size as u64
    }

    fn range(&self, slot: u32) -> std::ops::Range<usize> {
        let start = slot as usize * self.slot_size;
        start..start + self.value_size
    }

    /// Every slot of copy `copy`, `slot_size` bytes apart; `None` when a spin lock sits in the
    /// values (the syscall side reads it as zero, so the raw bytes are not what `bpf()` sees).
    pub(crate) fn raw_slots<'m>(&self, mem: &'m Memory, copy: usize) -> Option<&'m [u8]> {
        if self.lock_off.is_some() {
            return None;
        }
        Some(mem.region(self.regions[copy]).expect(BOUND).bytes())
    }

    pub(crate) fn slot_size(&self) -> usize {
        self.slot_size
    }

    /// The value bytes of `slot` in copy `copy`.
    pub(crate) fn read<'m>(&self, mem: &'m Memory, copy: usize, slot: u32) -> &'m [u8] {
        let region = mem.region(self.regions[copy]).expect(BOUND);
        &region.bytes()[self.range(slot)]
    }

    fn bytes_mut<'m>(&self, mem: &'m mut Memory, copy: usize, slot: u32) -> &'m mut [u8] {
        let region = mem.region_mut(self.regions[copy]).expect(BOUND);
        &mut region.bytes_mut()[self.range(slot)]
    }

    /// Copies `value` into the slot the way the kernel's `copy_map_value` does: every byte
    /// but a spin lock's.
    pub(crate) fn write(&self, mem: &mut Memory, copy: usize, slot: u32, value: &[u8]) {
        let lock = self.lock_off;
        copy_skipping_lock(self.bytes_mut(mem, copy, slot), value, lock);
    }

    /// Like [`Slab::write`] over the whole 8-byte-padded slot (`copy_map_value_long`, what
    /// per-CPU values from `bpf()` use).
    fn write_long(&self, mem: &mut Memory, copy: usize, slot: u32, value: &[u8]) {
        let (lock, start) = (self.lock_off, slot as usize * self.slot_size);
        let region = mem.region_mut(self.regions[copy]).expect(BOUND);
        copy_skipping_lock(
            &mut region.bytes_mut()[start..start + self.slot_size],
            value,
            lock,
        );
    }

    /// Zeroes the value (not a spin lock), as `zero_map_value` does.
    pub(crate) fn zero(&self, mem: &mut Memory, copy: usize, slot: u32) {
        let zeros = vec![0; self.value_size];
        self.write(mem, copy, slot, &zeros);
    }

    /// The value as the syscall side reports it: a spin lock reads as zero.
    pub(crate) fn export(&self, mem: &Memory, copy: usize, slot: u32, out: &mut Vec<u8>) {
        let start = out.len();
        out.extend_from_slice(self.read(mem, copy, slot));
        if let Some(off) = self.lock_off {
            out[start + off..start + off + 4].fill(0);
        }
    }

    /// Every copy of the value, each with its padding to 8 bytes: the kernel's per-CPU value
    /// layout for `bpf()` (`round_up(value_size, 8) * num_possible_cpus()`), copied whole.
    pub(crate) fn export_all(&self, mem: &Memory, slot: u32) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.slot_size * self.copies());
        let start = slot as usize * self.slot_size;
        for copy in 0..self.copies() {
            let at = out.len();
            let region = mem.region(self.regions[copy]).expect(BOUND);
            out.extend_from_slice(&region.bytes()[start..start + self.slot_size]);
            if let Some(off) = self.lock_off {
                out[at + off..at + off + 4].fill(0);
            }
        }
        out
    }

    /// Writes every copy from the per-CPU layout of [`Slab::export_all`].
    pub(crate) fn import_all(&self, mem: &mut Memory, slot: u32, values: &[u8]) {
        for copy in 0..self.copies() {
            let at = copy * self.slot_size;
            self.write_long(mem, copy, slot, &values[at..at + self.slot_size]);
        }
    }

    /// Writes `value` to copy `cpu` and zeroes the others: a new per-CPU element created by
    /// a program (the kernel's `pcpu_init_value`).
    pub(crate) fn init_one_copy(&self, mem: &mut Memory, slot: u32, cpu: usize, value: &[u8]) {
        for copy in 0..self.copies() {
            if copy == cpu {
                self.write(mem, copy, slot, value);
            } else {
                self.zero(mem, copy, slot);
            }
        }
    }

    /// Bytes of the syscall-side value: one value, or all per-CPU copies.
    pub(crate) fn sys_value_size(&self, percpu: bool) -> usize {
        if percpu {
            self.slot_size * self.copies()
        } else {
            self.value_size
        }
    }
}

/// The shape of a [`Slab`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct SlabLayout {
    pub(crate) slots: u32,
    pub(crate) value_size: usize,
    pub(crate) copies: usize,
    pub(crate) lock_off: Option<usize>,
}

/// Copies `src` over `dst` except the 4 bytes of a spin lock at `lock`.
fn copy_skipping_lock(dst: &mut [u8], src: &[u8], lock: Option<usize>) {
    let len = dst.len();
    match lock {
        None => dst.copy_from_slice(&src[..len]),
        Some(off) => {
            dst[..off].copy_from_slice(&src[..off]);
            dst[off + 4..].copy_from_slice(&src[off + 4..len]);
        }
    }
}

const BOUND: &str = "a map's storage lives in the Memory it was created in";
