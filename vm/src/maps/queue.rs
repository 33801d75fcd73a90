//! QUEUE and STACK (kernel/bpf/queue_stack_maps.c): a ring of `max_entries + 1` values with
//! head and tail indices. Values are copied in and out (programs never get a pointer into
//! these maps), so the ring lives in the map, not in a memory region.

use super::spec::{BPF_EXIST, BPF_NOEXIST, MapSpec};
use super::{Errno, MapResult};

#[derive(Debug)]
pub(crate) struct QueueStack {
    stack: bool,
    value_size: usize,
    /// Ring slots: `max_entries + 1`, so that full and empty differ.
    size: u32,
    head: u32,
    tail: u32,
    elements: Vec<u8>,
}

impl QueueStack {
    pub(crate) fn new(spec: &MapSpec, stack: bool) -> QueueStack {
        let size = spec.max_entries + 1;
        QueueStack {
            stack,
            value_size: spec.value_size as usize,
            size,
            head: 0,
            tail: 0,
            elements: vec![0; size as usize * spec.value_size as usize],
        }
    }

    fn is_empty(&self) -> bool {
        self.head == self.tail
    }

    fn is_full(&self) -> bool {
        (self.head + 1) % self.size == self.tail
    }

    fn at(&self, index: u32) -> &[u8] {
        let start = index as usize * self.value_size;
        &self.elements[start..start + self.value_size]
    }

    pub(crate) fn len(&self) -> u32 {
        (self.head + self.size - self.tail) % self.size
    }

    /// `queue_stack_map_push_elem`: BPF_EXIST makes room by dropping the oldest element.
    pub(crate) fn push(&mut self, value: &[u8], flags: u64) -> MapResult<()> {
        if flags & BPF_NOEXIST != 0 || flags > BPF_EXIST {
            return Err(Errno::EINVAL);
        }
        if self.is_full() {
            if flags & BPF_EXIST == 0 {
                return Err(Errno::E2BIG);
            }
            self.tail = (self.tail + 1) % self.size;
        }
        let start = self.head as usize * self.value_size;
        self.elements[start..start + self.value_size].copy_from_slice(&value[..self.value_size]);
        self.head = (self.head + 1) % self.size;
        Ok(())
    }

    /// The next value out: the oldest (queue) or the newest (stack).
    fn next_index(&self) -> u32 {
        if self.stack {
            (self.head + self.size - 1) % self.size
        } else {
            self.tail
        }
    }

    pub(crate) fn peek(&self) -> MapResult<Vec<u8>> {
        if self.is_empty() {
            return Err(Errno::ENOENT);
        }
        Ok(self.at(self.next_index()).to_vec())
    }

    pub(crate) fn pop(&mut self) -> MapResult<Vec<u8>> {
        let value = self.peek()?;
        if self.stack {
            self.head = self.next_index();
        } else {
            self.tail = (self.tail + 1) % self.size;
        }
        Ok(value)
    }
}
