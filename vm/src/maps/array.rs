//! ARRAY and PERCPU_ARRAY (kernel/bpf/arraymap.c): `max_entries` preallocated, zeroed values
//! indexed by a u32 key; elements always exist, so delete is refused.
//!
//! Global data sections are one-element arrays; `.rodata` (BPF_F_RDONLY_PROG) lives in a
//! region the program cannot write.

use super::slab::{Slab, SlabLayout};
use super::spec::{BPF_EXIST, BPF_F_LOCK, BPF_F_RDONLY_PROG, BPF_NOEXIST, MapEnv, MapSpec};
use super::{Errno, MapResult};
use crate::memory::{Memory, RegionKind};

#[derive(Debug)]
pub(crate) struct ArrayMap {
    slab: Slab,
    percpu: bool,
    has_lock: bool,
}

/// The u32 index an array key holds (host byte order, as the kernel reads it).
pub(crate) fn key_index(key: &[u8]) -> u32 {
    u32::from_ne_bytes(key[..4].try_into().expect("array keys are 4 bytes"))
}

/// The next key of an index-keyed map, as `array_map_get_next_key` walks it: every index in
/// order, starting over at 0 for a missing or out-of-range key.
pub(crate) fn next_index(key: Option<&[u8]>, max_entries: u32) -> MapResult<Vec<u8>> {
    let next = match key.map(key_index) {
        Some(i) if i < max_entries => {
            if i == max_entries - 1 {
                return Err(Errno::ENOENT);
            }
            i + 1
        }
        _ => 0,
    };
    Ok(next.to_ne_bytes().to_vec())
}

impl ArrayMap {
    pub(crate) fn new(mem: &mut Memory, spec: &MapSpec, env: &MapEnv, percpu: bool) -> ArrayMap {
        let kind = match &spec.global_section {
            Some(section) => RegionKind::Global {
                section: section.clone(),
            },
            None => RegionKind::MapValue {
                map: spec.name.clone(),
            },
        };
        let layout = SlabLayout {
            slots: spec.max_entries,
            value_size: spec.value_size as usize,
            copies: if percpu { env.ncpus as usize } else { 1 },
            lock_off: spec.spin_lock_off.map(|o| o as usize),
        };
        let writable = spec.map_flags & BPF_F_RDONLY_PROG == 0;
        ArrayMap {
            slab: Slab::new(mem, kind, layout, writable),
            percpu,
            has_lock: spec.spin_lock_off.is_some(),
        }
    }

    fn copy(&self, cpu: u32) -> usize {
        if self.percpu { cpu as usize } else { 0 }
    }

    /// The address of the element's value (this CPU's copy), or `None` past the end.
    pub(crate) fn lookup(&self, key: &[u8], cpu: u32) -> Option<u64> {
        let index = key_index(key);
        (index < self.slab.slots()).then(|| self.slab.addr(self.copy(cpu), index))
    }

    /// Where the values are, for an engine that inlines lookups.
    pub(crate) fn layout(&self) -> super::InlineArray {
        super::InlineArray {
            bases: self.slab.bases().to_vec(),
            slot_size: self.slab.slot_size() as u64,
            max_entries: self.slab.slots(),
            percpu: self.percpu,
        }
    }

    /// A plain array's values for bulk reading (see [`super::ArrayStorage`]).
    pub(crate) fn storage<'m>(&self, mem: &'m Memory) -> Option<super::ArrayStorage<'m>> {
        if self.percpu {
            return None;
        }
        Some(super::ArrayStorage {
            bytes: self.slab.raw_slots(mem, 0)?,
            slot_size: self.slab.slot_size(),
            value_size: self.slab.value_size(),
        })
    }

    /// The address of byte `off` of element 0: what `BPF_PSEUDO_MAP_VALUE` loads.
    pub(crate) fn direct_value_addr(&self, off: u32) -> MapResult<u64> {
        if self.slab.slots() != 1 || self.percpu {
            return Err(Errno::EINVAL);
        }
        if off as usize >= self.slab.value_size() {
            return Err(Errno::EINVAL);
        }
        Ok(self.slab.addr(0, 0) + off as u64)
    }

    /// `array_map_update_elem`'s flag and index checks.
    fn check_update(&self, key: &[u8], flags: u64) -> MapResult<u32> {
        if flags & !BPF_F_LOCK > BPF_EXIST {
            return Err(Errno::EINVAL);
        }
        let index = key_index(key);
        if index >= self.slab.slots() {
            return Err(Errno::E2BIG);
        }
        if flags & BPF_NOEXIST != 0 {
            return Err(Errno::EEXIST);
        }
        if flags & BPF_F_LOCK != 0 && !self.has_lock {
            return Err(Errno::EINVAL);
        }
        Ok(index)
    }

    /// An update from a program: one value, into this CPU's copy.
    pub(crate) fn update(
        &self,
        mem: &mut Memory,
        key: &[u8],
        value: &[u8],
        flags: u64,
        cpu: u32,
    ) -> MapResult<()> {
        let index = self.check_update(key, flags)?;
        self.slab.write(mem, self.copy(cpu), index, value);
        Ok(())
    }

    pub(crate) fn sys_lookup(&self, mem: &Memory, key: &[u8]) -> MapResult<Vec<u8>> {
        let index = key_index(key);
        if index >= self.slab.slots() {
            return Err(Errno::ENOENT);
        }
        if self.percpu {
            return Ok(self.slab.export_all(mem, index));
        }
        let mut out = Vec::new();
        self.slab.export(mem, 0, index, &mut out);
        Ok(out)
    }

    /// An update from `bpf()`: per-CPU arrays take every CPU's value and no BPF_F_LOCK.
    pub(crate) fn sys_update(
        &self,
        mem: &mut Memory,
        key: &[u8],
        value: &[u8],
        flags: u64,
    ) -> MapResult<()> {
        if !self.percpu {
            return self.update(mem, key, value, flags, 0);
        }
        if flags > BPF_EXIST {
            return Err(Errno::EINVAL);
        }
        let index = self.check_update(key, flags)?;
        self.slab.import_all(mem, index, value);
        Ok(())
    }

    pub(crate) fn sys_value_size(&self) -> usize {
        self.slab.sys_value_size(self.percpu)
    }

    pub(crate) fn max_entries(&self) -> u32 {
        self.slab.slots()
    }
}
