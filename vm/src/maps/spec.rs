//! What a map is created from: its type, sizes, flags ([`MapSpec`]), and the constants of the
//! kernel's UAPI that describe them.

/// Update flags (`BPF_ANY`, ...), as `bpf_map_update_elem` takes them.
pub const BPF_ANY: u64 = 0;
pub const BPF_NOEXIST: u64 = 1;
pub const BPF_EXIST: u64 = 2;
pub const BPF_F_LOCK: u64 = 4;

/// Map creation flags (`map_flags`), named once in `bpfemu_isa::uapi`.
pub use bpfemu_isa::uapi::{
    BPF_F_ACCESS_MASK, BPF_F_INNER_MAP, BPF_F_MMAPABLE, BPF_F_NO_COMMON_LRU, BPF_F_NO_PREALLOC,
    BPF_F_NUMA_NODE, BPF_F_PRESERVE_ELEMS, BPF_F_RDONLY, BPF_F_RDONLY_PROG, BPF_F_WRONLY,
    BPF_F_WRONLY_PROG, BPF_F_ZERO_SEED,
};
/// `bpf_ringbuf_query` flags.
pub const BPF_RB_AVAIL_DATA: u64 = 0;
pub const BPF_RB_RING_SIZE: u64 = 1;
pub const BPF_RB_CONS_POS: u64 = 2;
pub const BPF_RB_PROD_POS: u64 = 3;
/// `bpf_ringbuf_submit/discard/output` wakeup flags.
pub const BPF_RB_NO_WAKEUP: u64 = 1;
pub const BPF_RB_FORCE_WAKEUP: u64 = 2;

/// `enum bpf_map_type`, for the types bpfemu implements; [`MapType::from_raw`] tells the
/// others apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MapType {
    Hash = 1,
    Array = 2,
    ProgArray = 3,
    PerfEventArray = 4,
    PercpuHash = 5,
    PercpuArray = 6,
    LruHash = 9,
    LruPercpuHash = 10,
    LpmTrie = 11,
    ArrayOfMaps = 12,
    HashOfMaps = 13,
    Devmap = 14,
    Cpumap = 16,
    Xskmap = 17,
    Queue = 22,
    Stack = 23,
    SkStorage = 24,
    DevmapHash = 25,
    Ringbuf = 27,
    BloomFilter = 30,
}

/// What a raw map type number is to bpfemu.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RawMapType {
    Supported(MapType),
    /// A type the kernel has (up to `BPF_MAP_TYPE_ARENA`) that bpfemu does not implement.
    Unsupported(u32),
    /// Not a map type of Linux 6.18: the kernel answers EINVAL.
    Unknown(u32),
}

/// The last map type number of Linux 6.18 (`BPF_MAP_TYPE_ARENA`).
const LAST_KERNEL_MAP_TYPE: u32 = 33;

impl MapType {
    pub const ALL: [MapType; 20] = [
        MapType::Hash,
        MapType::Array,
        MapType::ProgArray,
        MapType::PerfEventArray,
        MapType::PercpuHash,
        MapType::PercpuArray,
        MapType::LruHash,
        MapType::LruPercpuHash,
        MapType::LpmTrie,
        MapType::ArrayOfMaps,
        MapType::HashOfMaps,
        MapType::Devmap,
        MapType::Cpumap,
        MapType::Xskmap,
        MapType::Queue,
        MapType::Stack,
        MapType::SkStorage,
        MapType::DevmapHash,
        MapType::Ringbuf,
        MapType::BloomFilter,
    ];

    pub fn from_raw(raw: u32) -> RawMapType {
        match MapType::ALL.iter().find(|t| t.raw() == raw) {
            Some(t) => RawMapType::Supported(*t),
            None if raw == 0 || raw > LAST_KERNEL_MAP_TYPE => RawMapType::Unknown(raw),
            None => RawMapType::Unsupported(raw),
        }
    }

    pub fn raw(self) -> u32 {
        self as u32
    }

    /// Per-CPU value storage (one copy of each value per virtual CPU).
    pub fn is_percpu(self) -> bool {
        matches!(
            self,
            MapType::PercpuArray | MapType::PercpuHash | MapType::LruPercpuHash
        )
    }

    /// The kernel's name, as `bpftool` prints it.
    pub fn name(self) -> &'static str {
        match self {
            MapType::Hash => "hash",
            MapType::Array => "array",
            MapType::ProgArray => "prog_array",
            MapType::PerfEventArray => "perf_event_array",
            MapType::PercpuHash => "percpu_hash",
            MapType::PercpuArray => "percpu_array",
            MapType::LruHash => "lru_hash",
            MapType::LruPercpuHash => "lru_percpu_hash",
            MapType::LpmTrie => "lpm_trie",
            MapType::ArrayOfMaps => "array_of_maps",
            MapType::HashOfMaps => "hash_of_maps",
            MapType::Devmap => "devmap",
            MapType::Cpumap => "cpumap",
            MapType::Xskmap => "xskmap",
            MapType::Queue => "queue",
            MapType::Stack => "stack",
            MapType::DevmapHash => "devmap_hash",
            MapType::Ringbuf => "ringbuf",
            MapType::SkStorage => "sk_storage",
            MapType::BloomFilter => "bloom_filter",
        }
    }
}

/// The attributes of `BPF_MAP_CREATE` that matter to bpfemu, plus what BTF would tell the
/// kernel (the offset of a `struct bpf_spin_lock` in the value).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct MapSpec {
    pub name: String,
    /// The raw `enum bpf_map_type` number.
    pub map_type: u32,
    pub key_size: u32,
    pub value_size: u32,
    pub max_entries: u32,
    pub map_flags: u32,
    /// Only read with `BPF_F_NUMA_NODE`.
    pub numa_node: u32,
    pub map_extra: u64,
    /// The inner map template of a map-in-map (the kernel's `inner_map_fd`).
    pub inner: Option<Box<MapSpec>>,
    /// Offset of the value's `struct bpf_spin_lock`, when its BTF has one: `BPF_F_LOCK` is
    /// refused without it, and value copies never touch those 4 bytes.
    pub spin_lock_off: Option<u32>,
    /// For global data (`.data`, `.rodata`, `.bss`): the section, which names the region.
    pub global_section: Option<String>,
}

impl MapSpec {
    /// A spec with the given type and sizes and no flags.
    pub fn new(
        name: &str,
        map_type: MapType,
        key_size: u32,
        value_size: u32,
        max_entries: u32,
    ) -> MapSpec {
        MapSpec {
            name: name.to_string(),
            map_type: map_type.raw(),
            key_size,
            value_size,
            max_entries,
            ..MapSpec::default()
        }
    }

    pub fn with_flags(mut self, map_flags: u32) -> MapSpec {
        self.map_flags = map_flags;
        self
    }

    pub fn with_extra(mut self, map_extra: u64) -> MapSpec {
        self.map_extra = map_extra;
        self
    }

    pub fn with_inner(mut self, inner: MapSpec) -> MapSpec {
        self.inner = Some(Box::new(inner));
        self
    }

    /// The one-element array libbpf makes of a global data section; `.rodata` sections are
    /// read-only for the program (`BPF_F_RDONLY_PROG`).
    pub fn global_data(name: &str, section: &str, size: u32, read_only: bool) -> MapSpec {
        let flags = BPF_F_MMAPABLE | if read_only { BPF_F_RDONLY_PROG } else { 0 };
        MapSpec {
            global_section: Some(section.to_string()),
            ..MapSpec::new(name, MapType::Array, 4, size, 1).with_flags(flags)
        }
    }
}

/// The machine the maps live on: what the kernel would look up outside the map.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MapEnv {
    /// Virtual CPUs (the kernel's `num_possible_cpus()`): per-CPU copies, LRU lists, the
    /// CPUs a cpumap may name.
    pub ncpus: u32,
    /// Interface indexes a devmap may hold; `None` accepts every nonzero ifindex.
    pub ifindexes: Option<Vec<u32>>,
    /// The kernel's `NR_CPUS` (`CONFIG_NR_CPUS`): the largest cpumap. 256 on the reference
    /// kernel of this project; distribution kernels often use 8192.
    pub nr_cpus: u32,
    /// Seed for hashes the kernel seeds randomly (bloom filters without
    /// `BPF_F_ZERO_SEED`); fixed so that runs repeat.
    pub hash_seed: u32,
}

impl Default for MapEnv {
    fn default() -> MapEnv {
        MapEnv {
            ncpus: 1,
            ifindexes: None,
            nr_cpus: 256,
            hash_seed: 0,
        }
    }
}

impl MapEnv {
    pub fn with_cpus(ncpus: u32) -> MapEnv {
        MapEnv {
            ncpus: ncpus.max(1),
            ..MapEnv::default()
        }
    }

    pub(crate) fn ifindex_exists(&self, ifindex: u32) -> bool {
        ifindex != 0
            && self
                .ifindexes
                .as_ref()
                .is_none_or(|known| known.contains(&ifindex))
    }
}
