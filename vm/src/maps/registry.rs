//! [`Maps`]: the maps of one loaded object, by index and by name, and the glue programs need:
//! map handles for `ld_imm64` and helpers that take key and value addresses.

use super::MapError;
use super::map::{Map, ValueRef};
use super::ringbuf::ReserveError;
use super::spec::{MapEnv, MapSpec, MapType};
use super::{Errno, MapResult};
use crate::helpers::HelperError;
use crate::memory::Memory;
use std::collections::HashMap;

/// Map handles (what `ld_imm64 src=BPF_PSEUDO_MAP_FD` loads) are addresses in the
/// kernel half of the address space, which no user-space region can occupy: a program that
/// dereferences one faults in checked mode, as the verifier forbids it to.
pub const MAP_HANDLE_BASE: u64 = 0xffff_b000_0000_0000;
/// Spacing of map handles.
const HANDLE_STRIDE: u64 = 0x1000;
/// XSKMAP lookups return opaque socket addresses here: non-NULL, never dereferenceable.
pub const SOCKET_HANDLE_BASE: u64 = 0xffff_c000_0000_0000;

/// The maps of one object, bound to the [`Memory`] their values live in.
#[derive(Debug, Default)]
pub struct Maps {
    maps: Vec<Map>,
    by_name: HashMap<String, usize>,
    env: MapEnv,
    /// The key and value an update copies, kept from call to call (no allocation per call).
    scratch: Vec<u8>,
}

impl Maps {
    pub fn new(env: MapEnv) -> Maps {
        Maps {
            maps: Vec::new(),
            by_name: HashMap::new(),
            env,
            scratch: Vec::new(),
        }
    }

    pub fn env(&self) -> &MapEnv {
        &self.env
    }

    /// Creates a map (checked as `BPF_MAP_CREATE` does) and returns its index.
    pub fn create(&mut self, mem: &mut Memory, spec: &MapSpec) -> Result<usize, MapError> {
        if self.by_name.contains_key(&spec.name) {
            return Err(MapError::DuplicateName {
                map: spec.name.clone(),
            });
        }
        let map = Map::create(mem, spec, &self.env)?;
        self.maps.push(map);
        self.by_name.insert(spec.name.clone(), self.maps.len() - 1);
        Ok(self.maps.len() - 1)
    }

    pub fn len(&self) -> usize {
        self.maps.len()
    }

    pub fn is_empty(&self) -> bool {
        self.maps.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = &Map> {
        self.maps.iter()
    }

    pub fn get(&self, index: usize) -> Option<&Map> {
        self.maps.get(index)
    }

    pub fn get_mut(&mut self, index: usize) -> Option<&mut Map> {
        self.maps.get_mut(index)
    }

    pub fn index_of(&self, name: &str) -> Option<usize> {
        self.by_name.get(name).copied()
    }

    pub fn by_name(&self, name: &str) -> Option<&Map> {
        self.index_of(name).and_then(|i| self.get(i))
    }

    /// The handle a program holds for map `index` (`BPF_PSEUDO_MAP_FD`).
    pub fn handle(&self, index: usize) -> u64 {
        MAP_HANDLE_BASE + index as u64 * HANDLE_STRIDE
    }

    /// The map a handle names, if it is one.
    pub fn index_of_handle(&self, handle: u64) -> Option<usize> {
        let off = handle.checked_sub(MAP_HANDLE_BASE)?;
        let index = (off / HANDLE_STRIDE) as usize;
        (off % HANDLE_STRIDE == 0 && index < self.maps.len()).then_some(index)
    }

    /// The address `BPF_PSEUDO_MAP_VALUE` gives: byte `off` of a one-element array's value
    /// (global data).
    pub fn value_addr(&self, index: usize, off: u32) -> MapResult<u64> {
        self.get(index).ok_or(Errno::EBADF)?.direct_value_addr(off)
    }

    fn map_of(&mut self, handle: u64) -> Result<&mut Map, HelperError> {
        let index = self.helper_map_index(handle)?;
        Ok(&mut self.maps[index])
    }

    /// The index of the map a helper's handle names.
    #[inline]
    fn helper_map_index(&self, handle: u64) -> Result<usize, HelperError> {
        self.index_of_handle(handle)
            .ok_or_else(|| HelperError::Failed(format!("{handle:#x} is not a map")))
    }

    /// The key a helper points at, borrowed from the memory (no copy: the map's operation
    /// does not touch the memory the key lives in).
    fn key_in<'m>(
        &mut self,
        mem: &'m Memory,
        handle: u64,
        key: u64,
    ) -> Result<&'m [u8], HelperError> {
        let size = self.map_of(handle)?.key_size();
        Ok(mem.slice(key, size)?)
    }

    // ---- helpers: addresses in, r0 out ----

    /// `bpf_map_lookup_elem(map, key)`: the value's address, an inner map's handle, or 0.
    #[inline]
    pub fn lookup_elem(
        &mut self,
        mem: &Memory,
        map: u64,
        key: u64,
        cpu: u32,
    ) -> Result<u64, HelperError> {
        // The map found once: this is the call map-heavy programs make on every packet.
        let index = self.helper_map_index(map)?;
        let m = &mut self.maps[index];
        let key = mem.slice(key, m.key_size())?;
        let found = m.lookup(mem, key, cpu);
        Ok(match found {
            None => 0,
            Some(ValueRef::Addr(addr)) => addr,
            Some(ValueRef::InnerMap(index)) => self.handle(index as usize),
            Some(ValueRef::Socket(_)) => {
                SOCKET_HANDLE_BASE
                    + (map - MAP_HANDLE_BASE) * 0x100
                    + u32::from_ne_bytes(key[..4].try_into().expect("4 bytes")) as u64
            }
        })
    }

    /// `bpf_map_update_elem(map, key, value, flags)`: 0 or -errno.
    pub fn update_elem(
        &mut self,
        mem: &mut Memory,
        map: u64,
        key: u64,
        value: u64,
        flags: u64,
        cpu: u32,
    ) -> Result<u64, HelperError> {
        // The key and value are copied (the update writes the memory they may live in), into
        // a buffer kept from call to call; the map's environment is borrowed, not cloned.
        let (key_size, size) = {
            let m = self.map_of(map)?;
            (m.key_size(), m.value_size())
        };
        let mut buf = std::mem::take(&mut self.scratch);
        buf.clear();
        let copied = mem
            .slice(key, key_size)
            .and_then(|k| {
                buf.extend_from_slice(k);
                mem.slice(value, size)
            })
            .map(|v| buf.extend_from_slice(v));
        if let Err(fault) = copied {
            self.scratch = buf;
            return Err(fault.into());
        }
        let index = self.index_of_handle(map).expect("checked above");
        let (key, value) = buf.split_at(key_size);
        let result = self.maps[index].update(mem, &self.env, key, value, flags, cpu);
        self.scratch = buf;
        Ok(ret(result))
    }

    /// `bpf_map_delete_elem(map, key)`.
    pub fn delete_elem(&mut self, mem: &Memory, map: u64, key: u64) -> Result<u64, HelperError> {
        let key = self.key_in(mem, map, key)?;
        Ok(ret(self.map_of(map)?.delete(key)))
    }

    /// `bpf_map_push_elem(map, value, flags)`.
    pub fn push_elem(
        &mut self,
        mem: &Memory,
        map: u64,
        value: u64,
        flags: u64,
    ) -> Result<u64, HelperError> {
        let size = self.map_of(map)?.value_size();
        let value = mem.slice(value, size)?;
        Ok(ret(self.map_of(map)?.push(value, flags)))
    }

    /// `bpf_map_pop_elem(map, value)`: the value is written to `value`.
    pub fn pop_elem(&mut self, mem: &mut Memory, map: u64, value: u64) -> Result<u64, HelperError> {
        let size = self.map_of(map)?.value_size();
        let out = mem.slice_mut(value, size)?;
        let index = self.index_of_handle(map).expect("checked");
        Ok(ret(self.maps[index].pop(out)))
    }

    /// `bpf_map_peek_elem(map, value)`.
    pub fn peek_elem(
        &mut self,
        mem: &mut Memory,
        map: u64,
        value: u64,
    ) -> Result<u64, HelperError> {
        let size = self.map_of(map)?.value_size();
        let index = self.index_of_handle(map).expect("checked");
        if self.maps[index].map_type() == MapType::BloomFilter {
            let mut probe = mem.slice(value, size)?.to_vec();
            return Ok(ret(self.maps[index].peek(&mut probe)));
        }
        let out = mem.slice_mut(value, size)?;
        Ok(ret(self.maps[index].peek(out)))
    }

    /// `bpf_ringbuf_reserve(map, size, flags)`: the sample's address, or 0.
    pub fn ringbuf_reserve(
        &mut self,
        mem: &mut Memory,
        map: u64,
        size: u64,
        flags: u64,
    ) -> Result<u64, HelperError> {
        if flags != 0 {
            return Ok(0);
        }
        let reserved = self.map_of(map)?.ringbuf_reserve(mem, size);
        Ok(reserved.ok().and_then(Result::ok).unwrap_or(0))
    }

    /// `bpf_ringbuf_reserve_dynptr`'s errno for a failed reservation of `size` bytes.
    pub fn ringbuf_dynptr_errno(size: u64, err: ReserveError) -> Errno {
        err.dynptr_errno(size)
    }

    /// `bpf_ringbuf_submit` / `bpf_ringbuf_discard(sample, flags)`: the ring buffer is the one
    /// whose region holds the sample.
    pub fn ringbuf_commit(
        &mut self,
        mem: &mut Memory,
        sample: u64,
        discard: bool,
    ) -> Result<u64, HelperError> {
        let index = self
            .maps
            .iter()
            .position(|m| m.ringbuf_owns(mem, sample))
            .ok_or_else(|| {
                HelperError::Failed(format!("{} is not a ring buffer sample", mem.place(sample)))
            })?;
        self.maps[index]
            .ringbuf_commit(mem, sample, discard)
            .map_err(|e| {
                HelperError::Failed(format!(
                    "{} is not a reserved sample: {e}",
                    mem.place(sample)
                ))
            })?;
        Ok(0)
    }

    /// `bpf_ringbuf_output(map, data, size, flags)`.
    pub fn ringbuf_output(
        &mut self,
        mem: &mut Memory,
        map: u64,
        data: u64,
        size: u64,
        flags: u64,
    ) -> Result<u64, HelperError> {
        let data = mem.slice(data, size as usize)?.to_vec();
        Ok(ret(self.map_of(map)?.ringbuf_output(mem, &data, flags)))
    }

    /// `bpf_ringbuf_query(map, flags)`.
    pub fn ringbuf_query(&mut self, map: u64, flags: u64) -> Result<u64, HelperError> {
        Ok(self.map_of(map)?.ringbuf_query(flags).unwrap_or(0))
    }

    // ---- the syscall side, by map index ----

    fn map(&self, index: usize) -> MapResult<&Map> {
        self.maps.get(index).ok_or(Errno::EBADF)
    }

    fn map_mut(&mut self, index: usize) -> MapResult<&mut Map> {
        self.maps.get_mut(index).ok_or(Errno::EBADF)
    }

    pub fn sys_lookup(
        &self,
        mem: &Memory,
        index: usize,
        key: &[u8],
        flags: u64,
    ) -> MapResult<Vec<u8>> {
        self.map(index)?.sys_lookup(mem, key, flags)
    }

    /// `BPF_MAP_UPDATE_ELEM`; a map-in-map value is an inner map's index, which must exist
    /// (EBADF) and match the inner map template (EINVAL).
    pub fn sys_update(
        &mut self,
        mem: &mut Memory,
        index: usize,
        key: &[u8],
        value: &[u8],
        flags: u64,
    ) -> MapResult<()> {
        let map = self.map(index)?;
        if matches!(map.map_type(), MapType::ArrayOfMaps | MapType::HashOfMaps) && value.len() == 4
        {
            let inner = u32::from_ne_bytes(value.try_into().expect("4 bytes")) as usize;
            map.check_inner(self.map(inner)?)?;
        }
        let env = self.env.clone();
        self.map_mut(index)?
            .sys_update(mem, &env, key, value, flags)
    }

    pub fn sys_delete(&mut self, index: usize, key: &[u8]) -> MapResult<()> {
        self.map_mut(index)?.sys_delete(key)
    }

    pub fn sys_next_key(&self, index: usize, key: Option<&[u8]>) -> MapResult<Vec<u8>> {
        self.map(index)?.sys_next_key(key)
    }

    /// Every (key, value) pair in `get_next_key` order, as `bpftool map dump` lists them.
    pub fn dump(&self, mem: &Memory, index: usize) -> MapResult<Vec<(Vec<u8>, Vec<u8>)>> {
        let map = self.map(index)?;
        let mut out = Vec::new();
        let mut key = None;
        while let Ok(next) = map.sys_next_key(key.as_deref()) {
            if let Ok(value) = map.sys_lookup(mem, &next, 0) {
                out.push((next.clone(), value));
            }
            key = Some(next);
            if out.len() > map.max_entries() as usize {
                break;
            }
        }
        Ok(out)
    }
}

/// A helper's r0 for an operation's answer.
fn ret(result: MapResult<()>) -> u64 {
    match result {
        Ok(()) => 0,
        Err(e) => e.as_ret(),
    }
}
