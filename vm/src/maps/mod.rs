//! BPF maps with the semantics of Linux 6.18: creation checks and errno, operations and
//! their answers, iteration order, LRU eviction, and value storage in [`Memory`](crate::memory::Memory) regions so
//! that programs read and write values through the pointers lookups return.
//!
//! - [`Maps`]: the maps of one object; handles for `ld_imm64` (`BPF_PSEUDO_MAP_FD`),
//!   value addresses for global data (`BPF_PSEUDO_MAP_VALUE`), helpers by address, and the
//!   `bpf()` side by bytes (`sys_*`, [`Maps::dump`]).
//! - [`Map`]: one map. Program-side operations take key and value bytes and the virtual
//!   CPU; syscall-side ones take and give whole values (all CPUs' copies for per-CPU maps).
//! - [`MapSpec`], [`MapType`], [`MapEnv`]: what a map is created from, and the machine
//!   (virtual CPU count, known interfaces, hash seed).
//! - [`Errno`]: the runtime answers; [`MapError`]: a refused creation, naming the map.
//!
//! Storage follows the kernel's preallocated maps: each map owns slab regions sized at
//! creation (`max_entries * round_up(value_size, 8)`, times the CPU count for per-CPU
//! maps); an element is a slot; a deleted element's slot stays addressable and is reused.
//!
//! Where the kernel is not deterministic, bpfemu picks a deterministic rule: hash maps
//! iterate keys in ascending byte order (the kernel: bucket order of a randomly seeded
//! jhash); bloom filters hash with [`MapEnv::hash_seed`] unless `BPF_F_ZERO_SEED`; the CPU of
//! every operation is explicit (the syscall side runs on CPU 0).
//!
//! ```
//! use bpfemu_vm::Memory;
//! use bpfemu_vm::maps::{Errno, MapEnv, MapSpec, MapType, Maps, BPF_NOEXIST};
//!
//! let mut mem = Memory::new();
//! let mut maps = Maps::new(MapEnv::with_cpus(2));
//! let m = maps.create(&mut mem, &MapSpec::new("counts", MapType::Hash, 4, 8, 16)).unwrap();
//! let key = 7u32.to_ne_bytes();
//! maps.sys_update(&mut mem, m, &key, &1u64.to_ne_bytes(), BPF_NOEXIST).unwrap();
//! assert_eq!(maps.sys_update(&mut mem, m, &key, &2u64.to_ne_bytes(), BPF_NOEXIST), Err(Errno::EEXIST));
//!
//! // A program's lookup gets the value's address; writes through it are the map's value.
//! let addr = maps.get_mut(m).unwrap().lookup(&mem, &key, 0).unwrap();
//! let bpfemu_vm::maps::ValueRef::Addr(addr) = addr else { unreachable!() };
//! mem.write(addr, 8, 41).unwrap();
//! assert_eq!(maps.sys_lookup(&mem, m, &key, 0).unwrap(), 41u64.to_ne_bytes());
//! ```

mod array;
mod bloom;
mod create;
mod dev;
mod fd;
mod hash;
mod key_index;
mod lpm;
mod lru;
mod map;
mod name;
mod queue;
mod registry;
mod ringbuf;
mod slab;
mod spec;

pub use bpfemu_isa::uapi::Errno;
pub use create::{MAX_MAP_BYTES, Refusal as CreateRefusal, kernel_refusal};
pub use dev::TargetVal;

/// The answer of a map operation: a value or the errno the kernel would give.
pub type MapResult<T> = Result<T, Errno>;
pub use map::{Map, ValueRef};
pub use name::MapName;
pub use registry::{MAP_HANDLE_BASE, Maps, SOCKET_HANDLE_BASE};
pub use ringbuf::{
    BPF_RINGBUF_BUSY_BIT, BPF_RINGBUF_DISCARD_BIT, BPF_RINGBUF_HDR_SZ, Record, ReserveError,
};
pub use spec::*;

/// A plain ARRAY's values as stored: element `i`'s `value_size` bytes start at
/// `i * slot_size` of `bytes` (slots are padded to 8 bytes, as in the kernel).
#[derive(Clone, Copy, Debug)]
pub struct ArrayStorage<'m> {
    pub bytes: &'m [u8],
    pub slot_size: usize,
    pub value_size: usize,
}

impl<'m> ArrayStorage<'m> {
    /// Element `index`'s value, or `None` past the end.
    pub fn value(&self, index: usize) -> Option<&'m [u8]> {
        let start = index.checked_mul(self.slot_size)?;
        self.bytes.get(start..start + self.value_size)
    }
}

/// Where an ARRAY's or PERCPU_ARRAY's values live, fixed for the map's life: element `i` of
/// CPU `c`'s copy is at `bases[c] + i * slot_size` (one copy for a plain array). An engine
/// inlines `bpf_map_lookup_elem` with it, as the kernel's `array_map_gen_lookup` does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InlineArray {
    pub bases: Vec<u64>,
    pub slot_size: u64,
    pub max_entries: u32,
    pub percpu: bool,
}

/// A map that could not be created.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MapError {
    /// `BPF_MAP_CREATE` would refuse the map with `errno`.
    #[error("map {map}: {reason} ({errno})")]
    Invalid {
        map: String,
        errno: Errno,
        reason: &'static str,
    },
    /// Another map of the set has this name.
    #[error("map {map}: a map of this name exists already")]
    DuplicateName { map: String },
}

impl MapError {
    /// The errno the kernel answers, for refusals it would make.
    pub fn errno(&self) -> Option<Errno> {
        match self {
            MapError::Invalid { errno, .. } => Some(*errno),
            MapError::DuplicateName { .. } => None,
        }
    }
}

/// Test support: an `Errno` from the helpers' r0.
#[doc(hidden)]
pub fn errno_of_ret(r0: u64) -> Option<Errno> {
    let v = r0 as i64;
    (v < 0).then(|| Errno((-v) as i32))
}
