//! One map: its spec and its implementation, with the operations programs reach through
//! helpers (by key and value bytes, on a virtual CPU) and those `bpf()` offers user space.

use super::MapError;
use super::array::ArrayMap;
use super::bloom::Bloom;
use super::create::validate;
use super::dev::{CpuMap, DevMap, TargetVal, XskMap};
use super::fd::FdArray;
use super::hash::{HashMap, Src};
use super::lpm::LpmTrie;
use super::queue::QueueStack;
use super::ringbuf::{Record, ReserveError, Ringbuf};
use super::spec::*;
use super::{Errno, MapResult};
use crate::memory::Memory;
use bpfemu_isa::inline_policy::InlinedLookup;

#[derive(Debug)]
enum Imp {
    Array(ArrayMap),
    Hash(HashMap),
    Lpm(LpmTrie),
    Queue(QueueStack),
    Bloom(Bloom),
    Ringbuf(Ringbuf),
    /// A local storage map (socket storage): no entries of its own; its values hang off
    /// sockets, which bpfemu has none of.
    Storage,
    Fd(FdArray),
    Dev(DevMap),
    Cpu(CpuMap),
    Xsk(XskMap),
}

/// What a lookup from a program finds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueRef {
    /// The address of the value in a memory region.
    Addr(u64),
    /// A map-in-map slot: the inner map's index in the registry.
    InnerMap(u32),
    /// An XSKMAP slot: the socket handle.
    Socket(u32),
}

/// A map of one loaded object.
#[derive(Debug)]
pub struct Map {
    spec: MapSpec,
    /// `spec.name`, shared with the records that name the map.
    shared_name: super::MapName,
    map_type: MapType,
    max_entries: u32,
    imp: Imp,
}

impl Map {
    /// Validates `spec` as `BPF_MAP_CREATE` does and allocates the map's storage in `mem`.
    pub fn create(mem: &mut Memory, spec: &MapSpec, env: &MapEnv) -> Result<Map, MapError> {
        let max_entries = validate(spec, env).map_err(|(errno, reason)| MapError::Invalid {
            map: spec.name.clone(),
            errno,
            reason,
        })?;
        let MapTypeOk(t) = MapTypeOk::of(spec);
        let imp = match t {
            MapType::Array => Imp::Array(ArrayMap::new(mem, spec, env, false)),
            MapType::PercpuArray => Imp::Array(ArrayMap::new(mem, spec, env, true)),
            MapType::Hash
            | MapType::PercpuHash
            | MapType::LruHash
            | MapType::LruPercpuHash
            | MapType::HashOfMaps => Imp::Hash(HashMap::new(mem, spec, env, t, max_entries)),
            MapType::LpmTrie => Imp::Lpm(LpmTrie::new(mem, spec)),
            MapType::Queue => Imp::Queue(QueueStack::new(spec, false)),
            MapType::Stack => Imp::Queue(QueueStack::new(spec, true)),
            MapType::BloomFilter => Imp::Bloom(Bloom::new(spec, env)),
            MapType::Ringbuf => Imp::Ringbuf(Ringbuf::new(mem, spec)),
            MapType::SkStorage => Imp::Storage,
            MapType::ProgArray | MapType::PerfEventArray | MapType::ArrayOfMaps => {
                Imp::Fd(FdArray::new(t, max_entries))
            }
            MapType::Devmap | MapType::DevmapHash => Imp::Dev(DevMap::new(mem, spec, t)),
            MapType::Cpumap => Imp::Cpu(CpuMap::new(spec)),
            MapType::Xskmap => Imp::Xsk(XskMap::new(spec)),
        };
        Ok(Map {
            spec: spec.clone(),
            shared_name: spec.name.as_str().into(),
            map_type: t,
            max_entries,
            imp,
        })
    }

    pub fn name(&self) -> &str {
        &self.spec.name
    }

    /// The name, to keep in a run's records without a copy.
    pub fn shared_name(&self) -> &super::MapName {
        &self.shared_name
    }

    pub fn spec(&self) -> &MapSpec {
        &self.spec
    }

    pub fn map_type(&self) -> MapType {
        self.map_type
    }

    #[inline]
    pub fn key_size(&self) -> usize {
        self.spec.key_size as usize
    }

    pub fn value_size(&self) -> usize {
        self.spec.value_size as usize
    }

    /// `max_entries` as the kernel reports it (LRU maps with per-CPU lists round it up).
    /// A plain ARRAY's values in place, for reading a large map without a copy per element
    /// (`bpfemu diff` compares arrays of millions of entries this way); `None` for other
    /// types, per-CPU arrays and values holding a spin lock.
    pub fn array_storage<'m>(&self, mem: &'m Memory) -> Option<super::ArrayStorage<'m>> {
        match &self.imp {
            Imp::Array(a) => a.storage(mem),
            _ => None,
        }
    }

    /// An ARRAY's or PERCPU_ARRAY's value layout, which never changes: what an engine needs
    /// to inline `bpf_map_lookup_elem` on it as the kernel does (`array_map_gen_lookup`).
    /// The map types are the ones whose inlined lookup makes no call
    /// ([`InlinedLookup::without_call`]).
    pub fn inline_array(&self) -> Option<super::InlineArray> {
        let inlined = InlinedLookup::of_map_type(self.map_type.raw());
        match &self.imp {
            Imp::Array(a) if inlined.is_some_and(InlinedLookup::without_call) => Some(a.layout()),
            _ => None,
        }
    }

    pub fn max_entries(&self) -> u32 {
        self.max_entries
    }

    /// Bytes of a value on the syscall side: all CPUs' copies for per-CPU maps.
    pub fn sys_value_size(&self) -> usize {
        match &self.imp {
            Imp::Array(a) => a.sys_value_size(),
            Imp::Hash(h) => h.sys_value_size(),
            _ => self.value_size(),
        }
    }

    /// Elements present (arrays: `max_entries`; queues: queued values; bloom filters and
    /// ring buffers: 0).
    pub fn len(&self) -> usize {
        match &self.imp {
            Imp::Array(a) => a.max_entries() as usize,
            Imp::Hash(h) => h.len(),
            Imp::Lpm(l) => l.len() as usize,
            Imp::Queue(q) => q.len() as usize,
            Imp::Fd(f) => f.len(),
            Imp::Dev(d) => d.len(),
            Imp::Cpu(c) => c.len(),
            Imp::Xsk(x) => x.len(),
            Imp::Bloom(_) | Imp::Ringbuf(_) | Imp::Storage => 0,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn is_map_in_map(&self) -> bool {
        matches!(self.map_type, MapType::ArrayOfMaps | MapType::HashOfMaps)
    }

    // ---- program side ----

    /// `bpf_map_lookup_elem` from a program on virtual CPU `cpu`: `None` is NULL.
    #[inline]
    pub fn lookup(&mut self, mem: &Memory, key: &[u8], cpu: u32) -> Option<ValueRef> {
        match &mut self.imp {
            Imp::Array(a) => a.lookup(key, cpu).map(ValueRef::Addr),
            Imp::Hash(h) if self.map_type == MapType::HashOfMaps => {
                let v = h.value(mem, key)?;
                Some(ValueRef::InnerMap(u32::from_ne_bytes(
                    v[..4].try_into().ok()?,
                )))
            }
            Imp::Hash(h) => h.lookup(key, cpu).map(ValueRef::Addr),
            Imp::Lpm(l) => l.lookup(key).map(ValueRef::Addr),
            Imp::Fd(f) if self.map_type == MapType::ArrayOfMaps => {
                f.get_key(key).map(ValueRef::InnerMap)
            }
            Imp::Dev(d) => d.lookup(key).map(ValueRef::Addr),
            Imp::Xsk(x) => x.get(super::array::key_index(key)).map(ValueRef::Socket),
            _ => None,
        }
    }

    /// The address of the value at `key` (`cpu`'s copy) as [`Map::lookup`] finds it, without
    /// its side effects (an LRU element stays as it was); `None` where a lookup gives no
    /// address of a value in memory.
    pub fn value_addr(&self, _mem: &Memory, key: &[u8], cpu: u32) -> Option<u64> {
        match &self.imp {
            Imp::Array(a) => a.lookup(key, cpu),
            Imp::Hash(h) if self.map_type != MapType::HashOfMaps => h.peek_addr(key, cpu),
            _ => None,
        }
    }

    /// `bpf_map_update_elem` from a program on `cpu` (one value, also for per-CPU maps).
    pub fn update(
        &mut self,
        mem: &mut Memory,
        env: &MapEnv,
        key: &[u8],
        value: &[u8],
        flags: u64,
        cpu: u32,
    ) -> MapResult<()> {
        match &mut self.imp {
            Imp::Array(a) => a.update(mem, key, value, flags, cpu),
            Imp::Hash(h) => h.update(mem, key, Src::Prog { value, cpu }, flags),
            _ => self.common_update(mem, env, key, value, flags),
        }
    }

    /// Updates that do not depend on who asks.
    fn common_update(
        &mut self,
        mem: &mut Memory,
        env: &MapEnv,
        key: &[u8],
        value: &[u8],
        flags: u64,
    ) -> MapResult<()> {
        match &mut self.imp {
            Imp::Lpm(l) => l.update(mem, key, value, flags),
            Imp::Queue(q) => q.push(value, flags),
            Imp::Bloom(b) => b.push(value, flags),
            Imp::Fd(f) => f.update(
                key,
                u32::from_ne_bytes(value[..4].try_into().expect("4 bytes")),
                flags,
            ),
            Imp::Dev(d) => d.update(mem, env, key, value, flags),
            Imp::Cpu(c) => c.update(env, key, value, flags),
            Imp::Xsk(x) => x.update(key, value, flags),
            Imp::Ringbuf(_) => Err(Errno::ENOTSUPP),
            // The key is a socket fd (`bpf_fd_sk_storage_update_elem`): bpfemu has none.
            Imp::Storage => Err(Errno::EBADF),
            Imp::Array(_) | Imp::Hash(_) => unreachable!("handled by the caller"),
        }
    }

    /// `bpf_map_delete_elem` (programs and `bpf()` alike).
    pub fn delete(&mut self, key: &[u8]) -> MapResult<()> {
        match &mut self.imp {
            Imp::Array(_) | Imp::Queue(_) => Err(Errno::EINVAL),
            Imp::Hash(h) => h.delete(key),
            Imp::Lpm(l) => l.delete(key),
            Imp::Fd(f) => f.delete(key),
            Imp::Dev(d) => d.delete(key),
            Imp::Cpu(c) => c.delete(key),
            Imp::Xsk(x) => x.delete(key),
            Imp::Bloom(_) => Err(Errno::EOPNOTSUPP),
            Imp::Ringbuf(_) => Err(Errno::ENOTSUPP),
            Imp::Storage => Err(Errno::EBADF),
        }
    }

    /// `bpf_map_push_elem` (QUEUE, STACK, BLOOM_FILTER).
    pub fn push(&mut self, value: &[u8], flags: u64) -> MapResult<()> {
        match &mut self.imp {
            Imp::Queue(q) => q.push(value, flags),
            Imp::Bloom(b) => b.push(value, flags),
            _ => Err(Errno::EINVAL),
        }
    }

    /// `bpf_map_pop_elem`: the value is written to `out`.
    pub fn pop(&mut self, out: &mut [u8]) -> MapResult<()> {
        match &mut self.imp {
            Imp::Queue(q) => copy_out(q.pop().inspect_err(|_| out.fill(0))?, out),
            Imp::Bloom(_) => Err(Errno::EOPNOTSUPP),
            _ => Err(Errno::EINVAL),
        }
    }

    /// `bpf_map_peek_elem`: a queue or stack writes its next value to `value`; a bloom
    /// filter tests `value` (0: maybe present, ENOENT: absent).
    /// An empty queue or stack zeroes `value` (`__queue_map_get`, `__stack_map_get`), for
    /// pop as for peek.
    pub fn peek(&self, value: &mut [u8]) -> MapResult<()> {
        match &self.imp {
            Imp::Queue(q) => copy_out(q.peek().inspect_err(|_| value.fill(0))?, value),
            Imp::Bloom(b) => b.peek(value),
            _ => Err(Errno::EINVAL),
        }
    }

    // ---- redirect targets and tail calls ----

    /// A PROG_ARRAY slot (the program handle a tail call jumps to).
    pub fn prog_array_get(&self, index: u32) -> Option<u32> {
        match &self.imp {
            Imp::Fd(f) if self.map_type == MapType::ProgArray => f.get(index),
            _ => None,
        }
    }

    /// A PERF_EVENT_ARRAY or ARRAY_OF_MAPS slot.
    pub fn fd_slot(&self, index: u32) -> Option<u32> {
        match &self.imp {
            Imp::Fd(f) => f.get(index),
            _ => None,
        }
    }

    /// A DEVMAP/DEVMAP_HASH target: ifindex and program handle.
    pub fn devmap_get(&self, key: u32) -> Option<TargetVal> {
        match &self.imp {
            Imp::Dev(d) => d.get(key),
            _ => None,
        }
    }

    /// A CPUMAP target: queue size and program handle.
    pub fn cpumap_get(&self, cpu: u32) -> Option<TargetVal> {
        match &self.imp {
            Imp::Cpu(c) => c.get(cpu),
            _ => None,
        }
    }

    /// An XSKMAP socket handle.
    pub fn xsk_get(&self, index: u32) -> Option<u32> {
        match &self.imp {
            Imp::Xsk(x) => x.get(index),
            _ => None,
        }
    }

    /// The address `BPF_PSEUDO_MAP_VALUE` gives: byte `off` of a one-element array's value.
    pub fn direct_value_addr(&self, off: u32) -> MapResult<u64> {
        match &self.imp {
            Imp::Array(a) => a.direct_value_addr(off),
            _ => Err(Errno::EINVAL),
        }
    }

    // ---- ring buffers ----

    fn ringbuf(&mut self) -> MapResult<&mut Ringbuf> {
        match &mut self.imp {
            Imp::Ringbuf(r) => Ok(r),
            _ => Err(Errno::EINVAL),
        }
    }

    /// Reserves a `size`-byte sample and returns its address.
    pub fn ringbuf_reserve(
        &mut self,
        mem: &mut Memory,
        size: u64,
    ) -> MapResult<Result<u64, ReserveError>> {
        Ok(self.ringbuf()?.reserve(mem, size))
    }

    /// Submits (or discards) a sample this ring buffer handed out.
    pub fn ringbuf_commit(
        &mut self,
        mem: &mut Memory,
        sample: u64,
        discard: bool,
    ) -> MapResult<()> {
        self.ringbuf()?.commit(mem, sample, discard)
    }

    /// `bpf_ringbuf_output`.
    pub fn ringbuf_output(&mut self, mem: &mut Memory, data: &[u8], flags: u64) -> MapResult<()> {
        self.ringbuf()?.output(mem, data, flags)
    }

    /// `bpf_ringbuf_query`.
    pub fn ringbuf_query(&mut self, flags: u64) -> MapResult<u64> {
        Ok(self.ringbuf()?.query(flags))
    }

    /// A ring buffer's producer position (`None` for other maps).
    pub fn ringbuf_producer_pos(&self) -> Option<u64> {
        match &self.imp {
            Imp::Ringbuf(r) => Some(r.producer_pos()),
            _ => None,
        }
    }

    /// A ring buffer's committed records from position `pos` on, left unconsumed.
    pub fn ringbuf_records_from(&self, mem: &Memory, pos: u64) -> MapResult<Vec<Record>> {
        match &self.imp {
            Imp::Ringbuf(r) => Ok(r.committed_from(mem, pos).0),
            _ => Err(Errno::EINVAL),
        }
    }

    /// Reads and consumes the committed records, as a user-space consumer would.
    pub fn ringbuf_consume(&mut self, mem: &Memory) -> MapResult<Vec<Record>> {
        Ok(self.ringbuf()?.consume(mem))
    }

    /// Whether `addr` is a sample this map's ring could have handed out.
    pub(crate) fn ringbuf_owns(&self, mem: &Memory, addr: u64) -> bool {
        let Imp::Ringbuf(_) = &self.imp else {
            return false;
        };
        mem.regions().any(|r| {
            matches!(r.kind(), crate::memory::RegionKind::MapValue { map } if *map == self.spec.name)
                && (r.base()..r.end()).contains(&addr)
        })
    }

    // ---- syscall side ----

    fn can_read(&self) -> MapResult<()> {
        if self.spec.map_flags & BPF_F_WRONLY != 0 {
            Err(Errno::EPERM)
        } else {
            Ok(())
        }
    }

    fn can_write(&self) -> MapResult<()> {
        if self.spec.map_flags & BPF_F_RDONLY != 0 {
            Err(Errno::EPERM)
        } else {
            Ok(())
        }
    }

    fn lock_flag_ok(&self, flags: u64) -> MapResult<()> {
        if flags & BPF_F_LOCK != 0 && self.spec.spin_lock_off.is_none() {
            Err(Errno::EINVAL)
        } else {
            Ok(())
        }
    }

    fn key_ok(&self, key: &[u8]) -> MapResult<()> {
        if key.len() != self.key_size() {
            Err(Errno::EFAULT)
        } else {
            Ok(())
        }
    }

    /// `BPF_MAP_LOOKUP_ELEM`: the value bytes (per-CPU maps: every CPU's copy, each padded
    /// to 8 bytes); QUEUE/STACK peek. For BLOOM_FILTER use [`Map::sys_peek`].
    pub fn sys_lookup(&self, mem: &Memory, key: &[u8], flags: u64) -> MapResult<Vec<u8>> {
        if flags & !BPF_F_LOCK != 0 {
            return Err(Errno::EINVAL);
        }
        self.can_read()?;
        self.lock_flag_ok(flags)?;
        self.key_ok(key)?;
        match &self.imp {
            Imp::Array(a) => a.sys_lookup(mem, key),
            Imp::Hash(h) => h.sys_lookup(mem, key),
            Imp::Lpm(l) => l.sys_lookup(mem, key),
            Imp::Queue(q) => q.peek(),
            Imp::Bloom(_) => Err(Errno::EINVAL),
            Imp::Fd(f) => f.sys_lookup(key),
            Imp::Dev(d) => d.sys_lookup(key),
            Imp::Cpu(c) => c.sys_lookup(key),
            Imp::Xsk(_) => Err(Errno::EOPNOTSUPP),
            Imp::Ringbuf(_) => Err(Errno::ENOTSUPP),
            Imp::Storage => Err(Errno::EBADF),
        }
    }

    /// `BPF_MAP_LOOKUP_ELEM` on a bloom filter: tests `value`.
    pub fn sys_peek(&self, value: &[u8]) -> MapResult<()> {
        self.can_read()?;
        match &self.imp {
            Imp::Bloom(b) => b.peek(value),
            _ => Err(Errno::EINVAL),
        }
    }

    /// `BPF_MAP_UPDATE_ELEM` (QUEUE/STACK/BLOOM_FILTER: push, with an empty key). Map-in-map
    /// values must be checked by the registry first ([`super::Maps::sys_update`]).
    pub fn sys_update(
        &mut self,
        mem: &mut Memory,
        env: &MapEnv,
        key: &[u8],
        value: &[u8],
        flags: u64,
    ) -> MapResult<()> {
        self.can_write()?;
        self.lock_flag_ok(flags)?;
        self.key_ok(key)?;
        if value.len() != self.sys_value_size() {
            return Err(Errno::EFAULT);
        }
        match &mut self.imp {
            Imp::Array(a) => a.sys_update(mem, key, value, flags),
            Imp::Hash(h) => h.update(mem, key, Src::Sys { value }, flags),
            _ => self.common_update(mem, env, key, value, flags),
        }
    }

    /// `BPF_MAP_DELETE_ELEM`.
    pub fn sys_delete(&mut self, key: &[u8]) -> MapResult<()> {
        self.can_write()?;
        self.key_ok(key)?;
        self.delete(key)
    }

    /// `BPF_MAP_GET_NEXT_KEY`: the key after `key` (`None`: the first key).
    pub fn sys_next_key(&self, key: Option<&[u8]>) -> MapResult<Vec<u8>> {
        self.can_read()?;
        if let Some(key) = key {
            self.key_ok(key)?;
        }
        match &self.imp {
            Imp::Array(a) => super::array::next_index(key, a.max_entries()),
            Imp::Hash(h) => h.next_key(key),
            Imp::Lpm(l) => l.next_key(key),
            Imp::Queue(_) => Err(Errno::EINVAL),
            Imp::Bloom(_) => Err(Errno::EOPNOTSUPP),
            Imp::Fd(f) => f.next_key(key),
            Imp::Dev(d) => d.next_key(key),
            Imp::Cpu(c) => c.next_key(key),
            Imp::Xsk(x) => x.next_key(key),
            Imp::Ringbuf(_) | Imp::Storage => Err(Errno::ENOTSUPP),
        }
    }

    /// `BPF_MAP_LOOKUP_AND_DELETE_ELEM` for QUEUE and STACK (pop).
    pub fn sys_lookup_and_delete(&mut self) -> MapResult<Vec<u8>> {
        self.can_write()?;
        match &mut self.imp {
            Imp::Queue(q) => q.pop(),
            Imp::Bloom(_) => Err(Errno::EOPNOTSUPP),
            _ => Err(Errno::ENOTSUPP),
        }
    }

    pub(crate) fn check_inner(&self, inner: &Map) -> MapResult<()> {
        let template = self.spec.inner.as_deref().ok_or(Errno::EINVAL)?;
        if !self.is_map_in_map() || !meta_equal(template, inner) {
            return Err(Errno::EINVAL);
        }
        Ok(())
    }
}

/// `bpf_map_meta_equal` (and arrays' `array_map_meta_equal`): an inner map must match the
/// template's type, sizes and flags; arrays also its size unless BPF_F_INNER_MAP.
fn meta_equal(template: &MapSpec, inner: &Map) -> bool {
    let s = inner.spec();
    let same = template.map_type == s.map_type
        && template.key_size == s.key_size
        && template.value_size == s.value_size
        && template.map_flags == s.map_flags
        && template.spin_lock_off == s.spin_lock_off;
    let sized = inner.map_type() != MapType::Array
        || template.map_flags & BPF_F_INNER_MAP != 0
        || template.max_entries == inner.max_entries();
    same && sized
}

fn copy_out(value: Vec<u8>, out: &mut [u8]) -> MapResult<()> {
    out[..value.len()].copy_from_slice(&value);
    Ok(())
}

/// The validated type of a spec (validation has already refused the others).
struct MapTypeOk(MapType);

impl MapTypeOk {
    fn of(spec: &MapSpec) -> MapTypeOk {
        match MapType::from_raw(spec.map_type) {
            RawMapType::Supported(t) => MapTypeOk(t),
            _ => unreachable!("validate refuses unsupported types"),
        }
    }
}
