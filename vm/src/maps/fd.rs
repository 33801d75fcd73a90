//! Maps whose slots hold references to other objects (kernel/bpf/arraymap.c's fd arrays):
//! PROG_ARRAY (programs, for tail calls), PERF_EVENT_ARRAY (perf events) and
//! ARRAY_OF_MAPS (maps).
//!
//! The kernel's `bpf()` takes a file descriptor and reports an id; bpfemu has neither, so a
//! slot holds a caller-chosen handle: a program index for PROG_ARRAY, the CPU its perf event counts on for PERF_EVENT_ARRAY
//! (`bpf_perf_event_output` into another CPU's event fails with EOPNOTSUPP, as in the kernel),
//! or the index of the inner map in its [`Maps`](super::Maps) registry (which checks that the
//! map exists and matches the inner map template).

use super::array::{key_index, next_index};
use super::spec::{BPF_ANY, MapType};
use super::{Errno, MapResult};

#[derive(Debug)]
pub(crate) struct FdArray {
    map_type: MapType,
    slots: Vec<Option<u32>>,
}

impl FdArray {
    pub(crate) fn new(map_type: MapType, max_entries: u32) -> FdArray {
        FdArray {
            map_type,
            slots: vec![None; max_entries as usize],
        }
    }

    /// The handle in slot `index`: what a tail call or a map-in-map lookup needs.
    pub(crate) fn get(&self, index: u32) -> Option<u32> {
        self.slots.get(index as usize).copied().flatten()
    }

    pub(crate) fn get_key(&self, key: &[u8]) -> Option<u32> {
        self.get(key_index(key))
    }

    /// `bpf_fd_array_map_update_elem`: only BPF_ANY.
    pub(crate) fn update(&mut self, key: &[u8], handle: u32, flags: u64) -> MapResult<()> {
        if flags != BPF_ANY {
            return Err(Errno::EINVAL);
        }
        let slot = self
            .slots
            .get_mut(key_index(key) as usize)
            .ok_or(Errno::E2BIG)?;
        *slot = Some(handle);
        Ok(())
    }

    /// `fd_array_map_delete_elem`.
    pub(crate) fn delete(&mut self, key: &[u8]) -> MapResult<()> {
        let slot = self
            .slots
            .get_mut(key_index(key) as usize)
            .ok_or(Errno::E2BIG)?;
        slot.take().map(|_| ()).ok_or(Errno::ENOENT)
    }

    /// `bpf_fd_array_map_lookup_elem`: the handle (the kernel reports an id); perf event
    /// arrays have no syscall lookup.
    pub(crate) fn sys_lookup(&self, key: &[u8]) -> MapResult<Vec<u8>> {
        if self.map_type == MapType::PerfEventArray {
            return Err(Errno::ENOTSUPP);
        }
        let handle = self.get_key(key).ok_or(Errno::ENOENT)?;
        Ok(handle.to_ne_bytes().to_vec())
    }

    pub(crate) fn next_key(&self, key: Option<&[u8]>) -> MapResult<Vec<u8>> {
        next_index(key, self.slots.len() as u32)
    }

    pub(crate) fn len(&self) -> usize {
        self.slots.iter().flatten().count()
    }
}
