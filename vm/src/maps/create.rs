//! Map creation checks, in the order and with the errno of the kernel's `map_create`
//! (kernel/bpf/syscall.c) and each type's `map_alloc_check`/`map_alloc`.

use super::Errno;
use super::spec::*;

/// A refused creation: the errno and why.
pub type Refusal = (Errno, &'static str);

fn refuse<T>(errno: Errno, why: &'static str) -> Result<T, Refusal> {
    Err((errno, why))
}

fn check(cond: bool, errno: Errno, why: &'static str) -> Result<(), Refusal> {
    if cond { refuse(errno, why) } else { Ok(()) }
}

/// The kernel's `KMALLOC_MAX_SIZE` on x86-64 (4 MiB).
pub(crate) const KMALLOC_MAX_SIZE: u64 = 1 << 22;
/// `PCPU_MIN_UNIT_SIZE`: the largest per-CPU value.
const PCPU_MIN_UNIT_SIZE: u64 = 32 << 10;
/// `sizeof(struct htab_elem)`.
const HTAB_ELEM_SIZE: u64 = 48;
/// `sizeof(struct lpm_trie_node)` without data.
const LPM_NODE_SIZE: u64 = 32;
/// bpfemu's own limit on one map's storage; larger maps fail as the kernel's allocation
/// would, with ENOMEM.
pub const MAX_MAP_BYTES: u64 = 1 << 30;
const PAGE_SIZE: u32 = 4096;

/// Runs every check `BPF_MAP_CREATE` makes before the map exists. Returns the map's
/// effective `max_entries` (an LRU hash with per-CPU lists rounds it to the CPU count).
pub(crate) fn validate(spec: &MapSpec, env: &MapEnv) -> Result<u32, Refusal> {
    let t = generic_checks(spec)?;
    type_checks(t, spec, env)?;
    let max = effective_max_entries(t, spec, env);
    check(
        storage_bytes(t, spec, max, env) > MAX_MAP_BYTES,
        Errno::ENOMEM,
        "larger than bpfemu's map memory limit",
    )?;
    Ok(max)
}

/// The refusal `BPF_MAP_CREATE` itself would give `spec`: the kernel's rules only, without
/// bpfemu's own limits (a map type it does not implement, its memory cap), which say nothing
/// about whether the kernel creates the map. What `verify` judges before any program, as
/// libbpf creates every map before it loads a program.
pub fn kernel_refusal(spec: &MapSpec, env: &MapEnv) -> Option<Refusal> {
    let unimplemented = matches!(MapType::from_raw(spec.map_type), RawMapType::Unsupported(_));
    match generic_checks(spec) {
        Ok(t) => type_checks(t, spec, env).err(),
        // The type's own rules are unknown to bpfemu: only the generic ones were judged.
        Err((errno, _)) if unimplemented && errno == Errno::EOPNOTSUPP => None,
        Err(refusal) => Some(refusal),
    }
}

/// The checks of `map_create` itself, before the type's own.
fn generic_checks(spec: &MapSpec) -> Result<MapType, Refusal> {
    let raw = MapType::from_raw(spec.map_type);
    let bloom = raw == RawMapType::Supported(MapType::BloomFilter);
    // map_extra is only meaningful to bloom filters and arenas.
    check(
        spec.map_extra != 0 && !bloom && spec.map_type != bpfemu_isa::uapi::BPF_MAP_TYPE_ARENA,
        Errno::EINVAL,
        "map_extra is only allowed for bloom filters and arenas",
    )?;
    let rw = BPF_F_RDONLY | BPF_F_WRONLY;
    check(
        spec.map_flags & rw == rw,
        Errno::EINVAL,
        "BPF_F_RDONLY and BPF_F_WRONLY together",
    )?;
    check(
        spec.map_flags & BPF_F_NUMA_NODE != 0 && spec.numa_node != 0,
        Errno::EINVAL,
        "NUMA node is not online",
    )?;
    match raw {
        RawMapType::Supported(t) => Ok(t),
        RawMapType::Unknown(_) => refuse(Errno::EINVAL, "unknown map type"),
        RawMapType::Unsupported(_) if spec.map_type == bpfemu_isa::uapi::BPF_MAP_TYPE_ARENA => {
            refuse(
                Errno::EOPNOTSUPP,
                "arena maps are not implemented by bpfemu's runtime, which cannot run programs \
                 of an object with an arena (bpfemu verify judges them)",
            )
        }
        RawMapType::Unsupported(_) => {
            refuse(Errno::EOPNOTSUPP, "map type not implemented by bpfemu")
        }
    }
}

fn type_checks(t: MapType, spec: &MapSpec, env: &MapEnv) -> Result<(), Refusal> {
    match t {
        MapType::Array | MapType::PercpuArray => array_checks(t, spec),
        MapType::ProgArray | MapType::PerfEventArray | MapType::ArrayOfMaps => {
            fd_array_checks(t, spec)?;
            inner_checks(t, spec)
        }
        MapType::Hash | MapType::PercpuHash | MapType::LruHash | MapType::LruPercpuHash => {
            hash_checks(t, spec, env)
        }
        MapType::HashOfMaps => {
            check(
                spec.value_size != 4,
                Errno::EINVAL,
                "map-in-map values are 4-byte map fds",
            )?;
            hash_checks(t, spec, env)?;
            inner_checks(t, spec)
        }
        MapType::LpmTrie => lpm_checks(spec),
        MapType::Queue | MapType::Stack => queue_checks(spec),
        MapType::BloomFilter => bloom_checks(spec),
        MapType::Ringbuf => ringbuf_checks(spec),
        MapType::SkStorage => local_storage_checks(spec),
        MapType::Devmap | MapType::DevmapHash => devmap_checks(t, spec),
        MapType::Cpumap => cpumap_checks(spec, env),
        MapType::Xskmap => xskmap_checks(spec),
    }
}

/// `bpf_map_flags_access_ok`: a program cannot be both read-only and write-only.
fn access_ok(flags: u32) -> bool {
    flags & (BPF_F_RDONLY_PROG | BPF_F_WRONLY_PROG) != (BPF_F_RDONLY_PROG | BPF_F_WRONLY_PROG)
}

fn array_checks(t: MapType, spec: &MapSpec) -> Result<(), Refusal> {
    let mask = BPF_F_NUMA_NODE
        | BPF_F_MMAPABLE
        | BPF_F_ACCESS_MASK
        | BPF_F_PRESERVE_ELEMS
        | BPF_F_INNER_MAP;
    let percpu = t == MapType::PercpuArray;
    let numa = spec.map_flags & BPF_F_NUMA_NODE != 0;
    check(spec.max_entries == 0, Errno::EINVAL, "max_entries is 0")?;
    check(spec.key_size != 4, Errno::EINVAL, "array keys are 4 bytes")?;
    check(spec.value_size == 0, Errno::EINVAL, "value_size is 0")?;
    check(
        spec.map_flags & !mask != 0,
        Errno::EINVAL,
        "flags not allowed for arrays",
    )?;
    check(
        !access_ok(spec.map_flags),
        Errno::EINVAL,
        "BPF_F_RDONLY_PROG and BPF_F_WRONLY_PROG together",
    )?;
    check(
        percpu && numa,
        Errno::EINVAL,
        "per-CPU arrays take no NUMA node",
    )?;
    check(
        t != MapType::Array && spec.map_flags & (BPF_F_MMAPABLE | BPF_F_INNER_MAP) != 0,
        Errno::EINVAL,
        "BPF_F_MMAPABLE and BPF_F_INNER_MAP are for plain arrays",
    )?;
    check(
        t != MapType::PerfEventArray && spec.map_flags & BPF_F_PRESERVE_ELEMS != 0,
        Errno::EINVAL,
        "BPF_F_PRESERVE_ELEMS is for perf event arrays",
    )?;
    check(
        spec.value_size > i32::MAX as u32,
        Errno::E2BIG,
        "value_size too large",
    )?;
    check(
        percpu && round8(spec.value_size) > PCPU_MIN_UNIT_SIZE,
        Errno::E2BIG,
        "per-CPU value larger than 32 KiB",
    )?;
    // array_map_alloc rounds the slot count to a power of two; it must not overflow u32.
    check(
        spec.max_entries > 1 << 31,
        Errno::E2BIG,
        "max_entries too large",
    )
}

fn fd_array_checks(t: MapType, spec: &MapSpec) -> Result<(), Refusal> {
    check(
        spec.value_size != 4,
        Errno::EINVAL,
        "fd array values are 4-byte fds",
    )?;
    check(
        spec.map_flags & (BPF_F_RDONLY_PROG | BPF_F_WRONLY_PROG) != 0,
        Errno::EINVAL,
        "fd arrays take no program access flags",
    )?;
    array_checks(t, spec)
}

/// `bpf_map_meta_alloc`: the inner map template of a map-in-map.
fn inner_checks(t: MapType, spec: &MapSpec) -> Result<(), Refusal> {
    if !matches!(t, MapType::ArrayOfMaps | MapType::HashOfMaps) {
        return Ok(());
    }
    let Some(inner) = &spec.inner else {
        return refuse(Errno::EBADF, "map-in-map without an inner map");
    };
    let nested = matches!(
        MapType::from_raw(inner.map_type),
        RawMapType::Supported(MapType::ArrayOfMaps | MapType::HashOfMaps)
    );
    check(
        nested,
        Errno::EINVAL,
        "map-in-map nesting deeper than one level",
    )
}

fn round8(n: u32) -> u64 {
    (n as u64).div_ceil(8) * 8
}

fn hash_checks(t: MapType, spec: &MapSpec, env: &MapEnv) -> Result<(), Refusal> {
    let mask = BPF_F_NO_PREALLOC
        | BPF_F_NO_COMMON_LRU
        | BPF_F_NUMA_NODE
        | BPF_F_ACCESS_MASK
        | BPF_F_ZERO_SEED;
    let lru = matches!(t, MapType::LruHash | MapType::LruPercpuHash);
    let percpu = t.is_percpu();
    let percpu_lru = spec.map_flags & BPF_F_NO_COMMON_LRU != 0;
    let prealloc = spec.map_flags & BPF_F_NO_PREALLOC == 0;
    let numa = spec.map_flags & BPF_F_NUMA_NODE != 0;
    check(
        spec.map_flags & !mask != 0 || !access_ok(spec.map_flags),
        Errno::EINVAL,
        "flags not allowed for hash maps",
    )?;
    check(
        !lru && percpu_lru,
        Errno::EINVAL,
        "BPF_F_NO_COMMON_LRU is for LRU maps",
    )?;
    check(
        lru && !prealloc,
        Errno::ENOTSUPP,
        "LRU maps are always preallocated",
    )?;
    check(
        numa && (percpu || percpu_lru),
        Errno::EINVAL,
        "per-CPU hash maps take no NUMA node",
    )?;
    check(
        spec.max_entries == 0 || spec.key_size == 0 || spec.value_size == 0,
        Errno::EINVAL,
        "zero max_entries, key_size or value_size",
    )?;
    let elem = spec.key_size as u64 + spec.value_size as u64;
    check(
        elem >= KMALLOC_MAX_SIZE - HTAB_ELEM_SIZE,
        Errno::E2BIG,
        "key and value too large",
    )?;
    check(
        percpu && round8(spec.value_size) > PCPU_MIN_UNIT_SIZE,
        Errno::E2BIG,
        "per-CPU value larger than 32 KiB",
    )?;
    let max = if percpu_lru {
        lru_percpu_entries(spec.max_entries, env.ncpus)
    } else {
        spec.max_entries
    };
    check(max > 1 << 31, Errno::E2BIG, "max_entries too large")
}

/// `htab_map_alloc`: with per-CPU LRU lists, every CPU gets the same number of elements.
fn lru_percpu_entries(max: u32, ncpus: u32) -> u32 {
    let up = (max as u64).div_ceil(ncpus as u64) * ncpus as u64;
    if up > u32::MAX as u64 {
        max / ncpus * ncpus
    } else {
        up as u32
    }
}

fn lpm_checks(spec: &MapSpec) -> Result<(), Refusal> {
    let mask = BPF_F_NO_PREALLOC | BPF_F_NUMA_NODE | BPF_F_ACCESS_MASK;
    let val_max = KMALLOC_MAX_SIZE - 256 - LPM_NODE_SIZE;
    check(spec.max_entries == 0, Errno::EINVAL, "max_entries is 0")?;
    check(
        spec.map_flags & BPF_F_NO_PREALLOC == 0,
        Errno::EINVAL,
        "LPM tries need BPF_F_NO_PREALLOC",
    )?;
    check(
        spec.map_flags & !mask != 0 || !access_ok(spec.map_flags),
        Errno::EINVAL,
        "flags not allowed for LPM tries",
    )?;
    check(
        !(5..=4 + 256).contains(&spec.key_size),
        Errno::EINVAL,
        "LPM keys are a 4-byte prefixlen and 1 to 256 data bytes",
    )?;
    check(
        spec.value_size == 0 || spec.value_size as u64 > val_max,
        Errno::EINVAL,
        "value_size out of range",
    )
}

fn queue_checks(spec: &MapSpec) -> Result<(), Refusal> {
    let mask = BPF_F_NUMA_NODE | BPF_F_ACCESS_MASK;
    check(
        spec.max_entries == 0 || spec.key_size != 0 || spec.value_size == 0,
        Errno::EINVAL,
        "queues and stacks have no key, a value and max_entries",
    )?;
    check(
        spec.map_flags & !mask != 0 || !access_ok(spec.map_flags),
        Errno::EINVAL,
        "flags not allowed for queues and stacks",
    )?;
    check(
        spec.value_size as u64 > KMALLOC_MAX_SIZE,
        Errno::E2BIG,
        "value_size too large",
    )
}

fn bloom_checks(spec: &MapSpec) -> Result<(), Refusal> {
    let mask = BPF_F_NUMA_NODE | BPF_F_ZERO_SEED | BPF_F_ACCESS_MASK;
    check(
        spec.value_size as u64 > KMALLOC_MAX_SIZE,
        Errno::E2BIG,
        "value_size too large",
    )?;
    check(
        spec.key_size != 0 || spec.value_size == 0 || spec.max_entries == 0,
        Errno::EINVAL,
        "bloom filters have no key, a value and max_entries",
    )?;
    check(
        spec.map_flags & !mask != 0 || !access_ok(spec.map_flags),
        Errno::EINVAL,
        "flags not allowed for bloom filters",
    )?;
    check(
        spec.map_extra & !0xf != 0,
        Errno::EINVAL,
        "map_extra holds only the number of hashes (0-15)",
    )
}

/// `RINGBUF_MAX_DATA_SZ`: the data area's page count must fit the record header's pg_off.
const RINGBUF_MAX_DATA_SZ: u64 = ((1 << 24) - 3) * PAGE_SIZE as u64;

/// `BPF_LOCAL_STORAGE_MAX_VALUE_SIZE`: `U16_MAX` less `sizeof(struct bpf_local_storage_elem)`
/// (128 bytes on x86-64: its data starts on a cache line).
const LOCAL_STORAGE_MAX_VALUE_SIZE: u32 = 0xffff - 128;

/// `bpf_local_storage_map_alloc_check`: no entries (max_entries 0), BPF_F_NO_PREALLOC
/// required (and BPF_F_CLONE allowed), an `int` key (a socket fd from user space). The
/// kernel also requires BTF for the key and value; bpfemu's loader checks that.
fn local_storage_checks(spec: &MapSpec) -> Result<(), Refusal> {
    const BPF_F_CLONE: u32 = 1 << 9;
    check(
        spec.map_flags & !(BPF_F_NO_PREALLOC | BPF_F_CLONE) != 0
            || spec.map_flags & BPF_F_NO_PREALLOC == 0
            || spec.max_entries != 0
            || spec.key_size != 4
            || spec.value_size == 0,
        Errno::EINVAL,
        "a local storage map needs BPF_F_NO_PREALLOC, max_entries 0, a 4-byte key and a value",
    )?;
    check(
        spec.value_size > LOCAL_STORAGE_MAX_VALUE_SIZE,
        Errno::E2BIG,
        "local storage value too large",
    )
}

fn ringbuf_checks(spec: &MapSpec) -> Result<(), Refusal> {
    check(
        spec.map_flags & !BPF_F_NUMA_NODE != 0,
        Errno::EINVAL,
        "flags not allowed for ring buffers",
    )?;
    check(
        spec.key_size != 0 || spec.value_size != 0,
        Errno::EINVAL,
        "ring buffers have no key or value",
    )?;
    check(
        !spec.max_entries.is_power_of_two() || !spec.max_entries.is_multiple_of(PAGE_SIZE),
        Errno::EINVAL,
        "size must be a power of 2 and a multiple of the page size",
    )?;
    check(
        spec.max_entries as u64 > RINGBUF_MAX_DATA_SZ,
        Errno::E2BIG,
        "ring buffer too large",
    )
}

fn devmap_checks(t: MapType, spec: &MapSpec) -> Result<(), Refusal> {
    let mask = BPF_F_NUMA_NODE | BPF_F_RDONLY | BPF_F_WRONLY;
    check(
        spec.max_entries == 0 || spec.key_size != 4,
        Errno::EINVAL,
        "devmaps have 4-byte keys",
    )?;
    check(
        spec.value_size != 4 && spec.value_size != 8,
        Errno::EINVAL,
        "devmap values are an ifindex, optionally with a program fd",
    )?;
    check(
        spec.map_flags & !mask != 0,
        Errno::EINVAL,
        "flags not allowed for devmaps",
    )?;
    check(
        t == MapType::DevmapHash && spec.max_entries > 1 << 31,
        Errno::EINVAL,
        "max_entries too large",
    )
}

fn cpumap_checks(spec: &MapSpec, env: &MapEnv) -> Result<(), Refusal> {
    check(
        spec.max_entries == 0 || spec.key_size != 4,
        Errno::EINVAL,
        "cpumaps have 4-byte keys",
    )?;
    check(
        spec.value_size != 4 && spec.value_size != 8,
        Errno::EINVAL,
        "cpumap values are a queue size, optionally with a program fd",
    )?;
    check(
        spec.map_flags & !BPF_F_NUMA_NODE != 0,
        Errno::EINVAL,
        "flags not allowed for cpumaps",
    )?;
    check(
        spec.max_entries > env.nr_cpus,
        Errno::E2BIG,
        "more entries than NR_CPUS",
    )
}

fn xskmap_checks(spec: &MapSpec) -> Result<(), Refusal> {
    let mask = BPF_F_NUMA_NODE | BPF_F_RDONLY | BPF_F_WRONLY;
    check(
        spec.max_entries == 0 || spec.key_size != 4 || spec.value_size != 4,
        Errno::EINVAL,
        "xskmaps have 4-byte keys and socket fds",
    )?;
    check(
        spec.map_flags & !mask != 0,
        Errno::EINVAL,
        "flags not allowed for xskmaps",
    )
}

fn effective_max_entries(t: MapType, spec: &MapSpec, env: &MapEnv) -> u32 {
    let lru = matches!(t, MapType::LruHash | MapType::LruPercpuHash);
    if lru && spec.map_flags & BPF_F_NO_COMMON_LRU != 0 {
        lru_percpu_entries(spec.max_entries, env.ncpus)
    } else {
        spec.max_entries
    }
}

/// Bytes bpfemu would allocate for the map's storage.
fn storage_bytes(t: MapType, spec: &MapSpec, max: u32, env: &MapEnv) -> u64 {
    let copies = if t.is_percpu() { env.ncpus as u64 } else { 1 };
    let key = if matches!(
        t,
        MapType::Hash
            | MapType::PercpuHash
            | MapType::LruHash
            | MapType::LruPercpuHash
            | MapType::HashOfMaps
            | MapType::LpmTrie
            | MapType::DevmapHash
    ) {
        spec.key_size as u64
    } else {
        0
    };
    match t {
        MapType::Ringbuf => spec.max_entries as u64,
        MapType::BloomFilter => (spec.max_entries as u64 * 15 * 7 / 5).max(64) / 8 * 2,
        _ => max as u64 * (round8(spec.value_size) * copies + key),
    }
}
