//! HASH, PERCPU_HASH, LRU_HASH, LRU_PERCPU_HASH (kernel/bpf/hashtab.c), and the table under
//! HASH_OF_MAPS.
//!
//! Elements are slab slots. A plain hash has `max_entries` slots on a LIFO free list plus
//! one spare slot per CPU: replacing an existing key writes the new value into the spare of
//! the updating CPU and the old slot becomes that CPU's spare, as the kernel's
//! `extra_elems` do (so a value pointer taken before the update still reads the old value).
//! LRU maps have exactly `max_entries` slots managed by [`Lru`].
//!
//! Iteration order (`get_next_key`): the kernel walks buckets of a hash seeded at random,
//! which no run can reproduce. bpfemu walks keys in ascending order of their bytes
//! (memcmp order), which does not depend on history. As in the kernel, a key that is not
//! in the map restarts the walk at the first key.

use super::key_index::KeyIndex;
use super::lru::Lru;
use super::slab::{Slab, SlabLayout};
use super::spec::{
    BPF_EXIST, BPF_F_LOCK, BPF_F_NO_COMMON_LRU, BPF_NOEXIST, MapEnv, MapSpec, MapType,
};
use super::{Errno, MapResult};
use crate::memory::{Memory, RegionKind};

/// Where an update's value comes from.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Src<'a> {
    /// A program on `cpu`: one value (per-CPU maps: that CPU's copy).
    Prog { value: &'a [u8], cpu: u32 },
    /// `bpf()`: one value, or every CPU's copy for per-CPU maps.
    Sys { value: &'a [u8] },
}

impl Src<'_> {
    fn cpu(&self) -> u32 {
        match self {
            Src::Prog { cpu, .. } => *cpu,
            Src::Sys { .. } => 0,
        }
    }
}

#[derive(Debug)]
pub(crate) struct HashMap {
    percpu: bool,
    has_lock: bool,
    slab: Slab,
    index: KeyIndex,
    /// The key each slot last held (what LRU eviction removes).
    keys: Vec<Vec<u8>>,
    free: Vec<u32>,
    /// Per-CPU spare slot of a plain non-per-CPU hash.
    spare: Vec<u32>,
    lru: Option<Lru>,
}

/// The kernel's `check_flags`: BPF_NOEXIST needs a new key, BPF_EXIST an existing one.
fn check_flags(exists: bool, flags: u64) -> MapResult<()> {
    match flags & !BPF_F_LOCK {
        BPF_NOEXIST if exists => Err(Errno::EEXIST),
        BPF_EXIST if !exists => Err(Errno::ENOENT),
        _ => Ok(()),
    }
}

impl HashMap {
    pub(crate) fn new(
        mem: &mut Memory,
        spec: &MapSpec,
        env: &MapEnv,
        t: MapType,
        max_entries: u32,
    ) -> HashMap {
        let percpu = t.is_percpu();
        let lru = matches!(t, MapType::LruHash | MapType::LruPercpuHash);
        let spares = if lru || percpu { 0 } else { env.ncpus };
        let layout = SlabLayout {
            slots: max_entries + spares,
            value_size: spec.value_size as usize,
            copies: if percpu { env.ncpus as usize } else { 1 },
            lock_off: spec.spin_lock_off.map(|o| o as usize),
        };
        let kind = RegionKind::MapValue {
            map: spec.name.clone(),
        };
        let percpu_lru = spec.map_flags & BPF_F_NO_COMMON_LRU != 0;
        HashMap {
            percpu,
            has_lock: spec.spin_lock_off.is_some(),
            slab: Slab::new(mem, kind, layout, true),
            index: KeyIndex::default(),
            keys: vec![Vec::new(); (max_entries + spares) as usize],
            free: if lru {
                Vec::new()
            } else {
                (0..max_entries).rev().collect()
            },
            spare: (max_entries..max_entries + spares).collect(),
            lru: lru.then(|| Lru::new(max_entries, env.ncpus, percpu_lru)),
        }
    }

    fn copy(&self, cpu: u32) -> usize {
        if self.percpu { cpu as usize } else { 0 }
    }

    /// A program's lookup: the address of the value (this CPU's copy); marks an LRU
    /// element as used.
    #[inline]
    pub(crate) fn lookup(&mut self, key: &[u8], cpu: u32) -> Option<u64> {
        let slot = self.index.get(key)?;
        if let Some(lru) = &mut self.lru {
            lru.set_ref(slot);
        }
        Some(self.slab.addr(self.copy(cpu), slot))
    }

    /// [`Self::lookup`]'s address without touching the LRU.
    pub(crate) fn peek_addr(&self, key: &[u8], cpu: u32) -> Option<u64> {
        let slot = self.index.get(key)?;
        Some(self.slab.addr(self.copy(cpu), slot))
    }

    /// The slot of `key`, without touching the LRU (the syscall side's lookup).
    pub(crate) fn slot(&self, key: &[u8]) -> Option<u32> {
        self.index.get(key)
    }

    pub(crate) fn sys_lookup(&self, mem: &Memory, key: &[u8]) -> MapResult<Vec<u8>> {
        let slot = self.slot(key).ok_or(Errno::ENOENT)?;
        if self.percpu {
            return Ok(self.slab.export_all(mem, slot));
        }
        let mut out = Vec::new();
        self.slab.export(mem, 0, slot, &mut out);
        Ok(out)
    }

    pub(crate) fn sys_value_size(&self) -> usize {
        self.slab.sys_value_size(self.percpu)
    }

    pub(crate) fn len(&self) -> usize {
        self.index.len()
    }

    pub(crate) fn update(
        &mut self,
        mem: &mut Memory,
        key: &[u8],
        src: Src,
        flags: u64,
    ) -> MapResult<()> {
        match (&self.lru, self.percpu) {
            (Some(_), false) => self.lru_update(mem, key, src, flags),
            (Some(_), true) => self.lru_percpu_update(mem, key, src, flags),
            (None, _) => self.plain_update(mem, key, src, flags),
        }
    }

    /// Writes an update's value into `slot`; `fresh` slots of per-CPU maps get zeroes on
    /// the other CPUs when a program creates them.
    fn store(&self, mem: &mut Memory, slot: u32, src: Src, fresh: bool) {
        match src {
            Src::Sys { value } if self.percpu => self.slab.import_all(mem, slot, value),
            Src::Prog { value, cpu } if self.percpu && fresh => {
                self.slab.init_one_copy(mem, slot, cpu as usize, value)
            }
            Src::Prog { value, cpu } => self.slab.write(mem, self.copy(cpu), slot, value),
            Src::Sys { value } => self.slab.write(mem, 0, slot, value),
        }
    }

    fn insert(&mut self, key: &[u8], slot: u32) {
        self.keys[slot as usize] = key.to_vec();
        self.index.insert(key, slot);
    }

    /// `htab_map_update_elem` / `__htab_percpu_map_update_elem`.
    fn plain_update(
        &mut self,
        mem: &mut Memory,
        key: &[u8],
        src: Src,
        flags: u64,
    ) -> MapResult<()> {
        let allowed = if self.percpu { 0 } else { BPF_F_LOCK };
        if flags & !allowed > BPF_EXIST {
            return Err(Errno::EINVAL);
        }
        if flags & BPF_F_LOCK != 0 && !self.has_lock {
            return Err(Errno::EINVAL);
        }
        let old = self.slot(key);
        check_flags(old.is_some(), flags)?;
        match old {
            Some(slot) if self.percpu || flags & BPF_F_LOCK != 0 => {
                self.store(mem, slot, src, false);
            }
            Some(slot) => {
                let cpu = src.cpu() as usize;
                let new = self.spare[cpu];
                self.store(mem, new, src, true);
                self.spare[cpu] = slot;
                self.insert(key, new);
            }
            None => {
                let new = self.free.pop().ok_or(Errno::E2BIG)?;
                self.store(mem, new, src, true);
                self.insert(key, new);
            }
        }
        Ok(())
    }

    /// Takes an LRU node for a new element, evicting old elements if needed.
    fn lru_pop(&mut self, cpu: u32) -> MapResult<u32> {
        let HashMap {
            lru, index, keys, ..
        } = self;
        let lru = lru.as_mut().expect("an LRU map");
        let mut evict = |slot: u32| {
            let key = &keys[slot as usize];
            let present = index.get(key) == Some(slot);
            if present {
                index.remove(key);
            }
            present
        };
        lru.pop_free(cpu, &mut evict).ok_or(Errno::ENOMEM)
    }

    fn lru_mut(&mut self) -> &mut Lru {
        self.lru.as_mut().expect("an LRU map")
    }

    /// `htab_lru_map_update_elem`: the new node is taken (and maybe something evicted,
    /// possibly the key being updated) before the key is looked up.
    fn lru_update(&mut self, mem: &mut Memory, key: &[u8], src: Src, flags: u64) -> MapResult<()> {
        if flags > BPF_EXIST {
            return Err(Errno::EINVAL);
        }
        let new = self.lru_pop(src.cpu())?;
        self.store(mem, new, src, true);
        let old = self.slot(key);
        if let Err(e) = check_flags(old.is_some(), flags) {
            self.lru_mut().push_free(new);
            return Err(e);
        }
        self.insert(key, new);
        if let Some(old) = old {
            self.lru_mut().set_ref(new);
            self.lru_mut().push_free(old);
        }
        Ok(())
    }

    /// `__htab_lru_percpu_map_update_elem`: existing elements are updated in place.
    fn lru_percpu_update(
        &mut self,
        mem: &mut Memory,
        key: &[u8],
        src: Src,
        flags: u64,
    ) -> MapResult<()> {
        if flags > BPF_EXIST {
            return Err(Errno::EINVAL);
        }
        let new = if flags != BPF_EXIST {
            Some(self.lru_pop(src.cpu())?)
        } else {
            None
        };
        let old = self.slot(key);
        let result = check_flags(old.is_some(), flags);
        let unused = match (result, old) {
            (Err(_), _) => new,
            (Ok(()), Some(slot)) => {
                self.lru_mut().set_ref(slot);
                self.store(mem, slot, src, false);
                new
            }
            (Ok(()), None) => {
                let slot = new.expect("taken unless BPF_EXIST");
                self.store(mem, slot, src, true);
                self.insert(key, slot);
                None
            }
        };
        if let Some(slot) = unused {
            self.lru_mut().push_free(slot);
        }
        result
    }

    pub(crate) fn delete(&mut self, key: &[u8]) -> MapResult<()> {
        let slot = self.index.remove(key).ok_or(Errno::ENOENT)?;
        match &mut self.lru {
            Some(lru) => lru.push_free(slot),
            None => self.free.push(slot),
        }
        Ok(())
    }

    /// The key after `key` in ascending byte order; the first key when `key` is absent.
    pub(crate) fn next_key(&self, key: Option<&[u8]>) -> MapResult<Vec<u8>> {
        let after = key.filter(|k| self.index.contains_key(k));
        self.index.next_after(after).cloned().ok_or(Errno::ENOENT)
    }

    /// The value bytes of a non-per-CPU element (map-in-map: the inner map's index).
    pub(crate) fn value(&self, mem: &Memory, key: &[u8]) -> Option<Vec<u8>> {
        let slot = self.slot(key)?;
        Some(self.slab.read(mem, 0, slot).to_vec())
    }
}
