//! Redirect targets (kernel/bpf/devmap.c, cpumap.c, net/xdp/xskmap.c): DEVMAP and
//! DEVMAP_HASH (interfaces, optionally with an XDP program), CPUMAP (CPUs with a queue
//! size, optionally with a program) and XSKMAP (AF_XDP sockets).
//!
//! What an update accepts follows the kernel; what exists outside the map comes from the
//! [`MapEnv`]: an ifindex must name a known interface, a cpumap key a virtual CPU. Program
//! fds and sockets are caller-chosen handles (bpfemu has no fds), stored as given; the
//! kernel would report a program's id where bpfemu reports the handle.

use super::array::{key_index, next_index};
use super::slab::{Slab, SlabLayout};
use super::spec::{BPF_EXIST, BPF_NOEXIST, MapEnv, MapSpec, MapType};
use super::{Errno, MapResult};
use crate::memory::{Memory, RegionKind};
use std::collections::BTreeMap;

/// A devmap or cpumap value: `struct bpf_devmap_val` / `struct bpf_cpumap_val`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TargetVal {
    /// The ifindex (devmap) or the queue size (cpumap).
    pub first: u32,
    /// The program handle, 0 for none.
    pub prog: u32,
}

fn parse_val(value: &[u8]) -> (u32, i32) {
    let first = u32::from_ne_bytes(value[..4].try_into().expect("4 bytes"));
    let fd = if value.len() >= 8 {
        i32::from_ne_bytes(value[4..8].try_into().expect("4 bytes"))
    } else {
        0
    };
    (first, fd)
}

fn encode(val: TargetVal, value_size: usize) -> Vec<u8> {
    let mut out = val.first.to_ne_bytes().to_vec();
    out.extend_from_slice(&val.prog.to_ne_bytes());
    out.truncate(value_size);
    out
}

/// `__dev_map_alloc_node`: the interface must exist; a program fd > 0 is attached.
fn dev_val(env: &MapEnv, value: &[u8]) -> MapResult<TargetVal> {
    let (ifindex, fd) = parse_val(value);
    if !env.ifindex_exists(ifindex) {
        return Err(Errno::EINVAL);
    }
    Ok(TargetVal {
        first: ifindex,
        prog: fd.max(0) as u32,
    })
}

/// DEVMAP and DEVMAP_HASH. Lookups from programs get a read-only pointer to the
/// `bpf_devmap_val` in a slab slot.
#[derive(Debug)]
pub(crate) struct DevMap {
    hash: bool,
    slab: Slab,
    /// key -> (slot, insertion sequence); arrays use key == slot.
    entries: BTreeMap<u32, (u32, u64)>,
    vals: Vec<Option<TargetVal>>,
    free: Vec<u32>,
    max_entries: u32,
    n_buckets: u32,
    seq: u64,
}

impl DevMap {
    pub(crate) fn new(mem: &mut Memory, spec: &MapSpec, t: MapType) -> DevMap {
        let layout = SlabLayout {
            slots: spec.max_entries,
            value_size: spec.value_size as usize,
            copies: 1,
            lock_off: None,
        };
        let kind = RegionKind::MapValue {
            map: spec.name.clone(),
        };
        DevMap {
            hash: t == MapType::DevmapHash,
            slab: Slab::new(mem, kind, layout, false),
            entries: BTreeMap::new(),
            vals: vec![None; spec.max_entries as usize],
            free: (0..spec.max_entries).rev().collect(),
            max_entries: spec.max_entries,
            n_buckets: spec.max_entries.next_power_of_two(),
            seq: 0,
        }
    }

    /// The target stored under `key` (what `bpf_redirect_map` needs).
    pub(crate) fn get(&self, key: u32) -> Option<TargetVal> {
        let (slot, _) = self.entries.get(&key)?;
        self.vals[*slot as usize]
    }

    pub(crate) fn lookup(&self, key: &[u8]) -> Option<u64> {
        let (slot, _) = self.entries.get(&key_index(key))?;
        Some(self.slab.addr(0, *slot))
    }

    pub(crate) fn sys_lookup(&self, key: &[u8]) -> MapResult<Vec<u8>> {
        let val = self.get(key_index(key)).ok_or(Errno::ENOENT)?;
        Ok(encode(val, self.slab.value_size()))
    }

    fn set(&mut self, mem: &mut Memory, key: u32, slot: u32, val: TargetVal) {
        self.seq += 1;
        self.entries.insert(key, (slot, self.seq));
        self.vals[slot as usize] = Some(val);
        self.slab.write(mem, 0, slot, &encode(val, 8));
    }

    pub(crate) fn update(
        &mut self,
        mem: &mut Memory,
        env: &MapEnv,
        key: &[u8],
        value: &[u8],
        flags: u64,
    ) -> MapResult<()> {
        if self.hash {
            self.hash_update(mem, env, key, value, flags)
        } else {
            self.array_update(mem, env, key, value, flags)
        }
    }

    /// `__dev_map_update_elem`: ifindex 0 empties the slot.
    fn array_update(
        &mut self,
        mem: &mut Memory,
        env: &MapEnv,
        key: &[u8],
        value: &[u8],
        flags: u64,
    ) -> MapResult<()> {
        let index = key_index(key);
        if flags > BPF_EXIST {
            return Err(Errno::EINVAL);
        }
        if index >= self.max_entries {
            return Err(Errno::E2BIG);
        }
        if flags == BPF_NOEXIST {
            return Err(Errno::EEXIST);
        }
        let (ifindex, fd) = parse_val(value);
        if ifindex == 0 {
            if fd > 0 {
                return Err(Errno::EINVAL);
            }
            self.entries.remove(&index);
            self.vals[index as usize] = None;
            return Ok(());
        }
        let val = dev_val(env, value)?;
        self.set(mem, index, index, val);
        Ok(())
    }

    /// `__dev_map_hash_update_elem`: BPF_EXIST is not checked for a missing key.
    fn hash_update(
        &mut self,
        mem: &mut Memory,
        env: &MapEnv,
        key: &[u8],
        value: &[u8],
        flags: u64,
    ) -> MapResult<()> {
        let index = key_index(key);
        if flags > BPF_EXIST || parse_val(value).0 == 0 {
            return Err(Errno::EINVAL);
        }
        let old = self.entries.get(&index).map(|(slot, _)| *slot);
        if old.is_some() && flags & BPF_NOEXIST != 0 {
            return Err(Errno::EEXIST);
        }
        let val = dev_val(env, value)?;
        let slot = match old {
            Some(slot) => slot,
            None => self.free.pop().ok_or(Errno::E2BIG)?,
        };
        self.set(mem, index, slot, val);
        Ok(())
    }

    pub(crate) fn delete(&mut self, key: &[u8]) -> MapResult<()> {
        let index = key_index(key);
        if !self.hash {
            if index >= self.max_entries {
                return Err(Errno::EINVAL);
            }
            self.entries.remove(&index);
            self.vals[index as usize] = None;
            return Ok(());
        }
        let (slot, _) = self.entries.remove(&index).ok_or(Errno::ENOENT)?;
        self.vals[slot as usize] = None;
        self.free.push(slot);
        Ok(())
    }

    /// Arrays: every index. Hashes: the kernel's own order, which is deterministic here
    /// (the bucket of a key is the key modulo the power-of-two bucket count; within a
    /// bucket, the most recently inserted first); a missing key restarts at the first.
    pub(crate) fn next_key(&self, key: Option<&[u8]>) -> MapResult<Vec<u8>> {
        if !self.hash {
            return next_index(key, self.max_entries);
        }
        let mut order: Vec<(u32, std::cmp::Reverse<u64>, u32)> = self
            .entries
            .iter()
            .map(|(k, (_, seq))| (k & (self.n_buckets - 1), std::cmp::Reverse(*seq), *k))
            .collect();
        order.sort();
        let at = key
            .map(key_index)
            .and_then(|k| order.iter().position(|e| e.2 == k));
        let next = match at {
            Some(i) => order.get(i + 1),
            None => order.first(),
        };
        next.map(|e| e.2.to_ne_bytes().to_vec())
            .ok_or(Errno::ENOENT)
    }

    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }
}

/// The largest cpumap queue size the kernel accepts.
const CPUMAP_MAX_QSIZE: u32 = 16384;

/// CPUMAP: slot i names virtual CPU i with a queue size.
#[derive(Debug)]
pub(crate) struct CpuMap {
    vals: Vec<Option<TargetVal>>,
    value_size: usize,
}

impl CpuMap {
    pub(crate) fn new(spec: &MapSpec) -> CpuMap {
        CpuMap {
            vals: vec![None; spec.max_entries as usize],
            value_size: spec.value_size as usize,
        }
    }

    pub(crate) fn get(&self, cpu: u32) -> Option<TargetVal> {
        self.vals.get(cpu as usize).copied().flatten()
    }

    /// `cpu_map_update_elem`: queue size 0 empties the slot.
    pub(crate) fn update(
        &mut self,
        env: &MapEnv,
        key: &[u8],
        value: &[u8],
        flags: u64,
    ) -> MapResult<()> {
        let cpu = key_index(key);
        if flags > BPF_EXIST {
            return Err(Errno::EINVAL);
        }
        if cpu as usize >= self.vals.len() {
            return Err(Errno::E2BIG);
        }
        if flags == BPF_NOEXIST {
            return Err(Errno::EEXIST);
        }
        let (qsize, fd) = parse_val(value);
        if qsize > CPUMAP_MAX_QSIZE {
            return Err(Errno::EOVERFLOW);
        }
        if cpu >= env.ncpus {
            return Err(Errno::ENODEV);
        }
        self.vals[cpu as usize] = (qsize != 0).then_some(TargetVal {
            first: qsize,
            prog: fd.max(0) as u32,
        });
        Ok(())
    }

    pub(crate) fn delete(&mut self, key: &[u8]) -> MapResult<()> {
        let slot = self
            .vals
            .get_mut(key_index(key) as usize)
            .ok_or(Errno::EINVAL)?;
        *slot = None;
        Ok(())
    }

    pub(crate) fn sys_lookup(&self, key: &[u8]) -> MapResult<Vec<u8>> {
        let val = self.get(key_index(key)).ok_or(Errno::ENOENT)?;
        Ok(encode(val, self.value_size))
    }

    pub(crate) fn next_key(&self, key: Option<&[u8]>) -> MapResult<Vec<u8>> {
        next_index(key, self.vals.len() as u32)
    }

    pub(crate) fn len(&self) -> usize {
        self.vals.iter().flatten().count()
    }
}

/// XSKMAP: slot i holds an AF_XDP socket handle.
#[derive(Debug)]
pub(crate) struct XskMap {
    socks: Vec<Option<u32>>,
}

impl XskMap {
    pub(crate) fn new(spec: &MapSpec) -> XskMap {
        XskMap {
            socks: vec![None; spec.max_entries as usize],
        }
    }

    pub(crate) fn get(&self, index: u32) -> Option<u32> {
        self.socks.get(index as usize).copied().flatten()
    }

    /// `xsk_map_update_elem`.
    pub(crate) fn update(&mut self, key: &[u8], value: &[u8], flags: u64) -> MapResult<()> {
        if flags > BPF_EXIST {
            return Err(Errno::EINVAL);
        }
        let slot = self
            .socks
            .get_mut(key_index(key) as usize)
            .ok_or(Errno::E2BIG)?;
        match (slot.is_some(), flags) {
            (true, BPF_NOEXIST) => return Err(Errno::EEXIST),
            (false, BPF_EXIST) => return Err(Errno::ENOENT),
            _ => {}
        }
        *slot = Some(u32::from_ne_bytes(value[..4].try_into().expect("4 bytes")));
        Ok(())
    }

    pub(crate) fn delete(&mut self, key: &[u8]) -> MapResult<()> {
        let slot = self
            .socks
            .get_mut(key_index(key) as usize)
            .ok_or(Errno::EINVAL)?;
        *slot = None;
        Ok(())
    }

    pub(crate) fn next_key(&self, key: Option<&[u8]>) -> MapResult<Vec<u8>> {
        next_index(key, self.socks.len() as u32)
    }

    pub(crate) fn len(&self) -> usize {
        self.socks.iter().flatten().count()
    }
}
