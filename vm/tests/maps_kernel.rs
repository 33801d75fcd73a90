//! Differential tests: random operation sequences on bpfemu's maps and on the running
//! kernel's (raw `bpf()` map syscalls), with the same answers and the same contents.
//!
//! Skipped with a message when the kernel's bpf() is out of reach, unless
//! `BPFEMU_REQUIRE_KERNEL=1`, which makes that a failure.

use bpfemu_vm::Memory;
use bpfemu_vm::maps::*;
use proptest::prelude::*;
use std::collections::BTreeMap;

mod kernel {
    //! Just enough of `bpf()` for maps.
    use bpfemu_vm::maps::{Errno, MapSpec};

    const BPF_MAP_CREATE: i64 = 0;
    const BPF_MAP_LOOKUP_ELEM: i64 = 1;
    const BPF_MAP_UPDATE_ELEM: i64 = 2;
    const BPF_MAP_DELETE_ELEM: i64 = 3;
    const BPF_MAP_GET_NEXT_KEY: i64 = 4;
    const BPF_MAP_LOOKUP_AND_DELETE_ELEM: i64 = 21;

    fn put32(attr: &mut [u8], off: usize, v: u32) {
        attr[off..off + 4].copy_from_slice(&v.to_ne_bytes());
    }

    fn put64(attr: &mut [u8], off: usize, v: u64) {
        attr[off..off + 8].copy_from_slice(&v.to_ne_bytes());
    }

    fn sys(cmd: i64, attr: &mut [u8; 128]) -> Result<i64, Errno> {
        // SAFETY: attr is a valid, zero-padded union bpf_attr of 128 bytes; pointers inside
        // it point at live buffers of the sizes the map was created with.
        let r = unsafe { libc::syscall(libc::SYS_bpf, cmd, attr.as_mut_ptr(), attr.len()) };
        if r < 0 {
            Err(Errno(
                std::io::Error::last_os_error().raw_os_error().unwrap_or(0),
            ))
        } else {
            Ok(r)
        }
    }

    /// A kernel map, closed on drop.
    pub struct KMap {
        fd: i32,
        pub value_size: usize,
    }

    impl Drop for KMap {
        fn drop(&mut self) {
            // SAFETY: fd is a map fd this value owns.
            unsafe { libc::close(self.fd) };
        }
    }

    pub fn create(spec: &MapSpec, sys_value_size: usize) -> Result<KMap, Errno> {
        let mut attr = [0u8; 128];
        put32(&mut attr, 0, spec.map_type);
        put32(&mut attr, 4, spec.key_size);
        put32(&mut attr, 8, spec.value_size);
        put32(&mut attr, 12, spec.max_entries);
        put32(&mut attr, 16, spec.map_flags);
        put32(&mut attr, 24, spec.numa_node);
        put64(&mut attr, 64, spec.map_extra);
        let fd = sys(BPF_MAP_CREATE, &mut attr)? as i32;
        Ok(KMap {
            fd,
            value_size: sys_value_size,
        })
    }

    impl KMap {
        fn elem_attr(&self, key: Option<&[u8]>, value: u64, flags: u64) -> [u8; 128] {
            let mut attr = [0u8; 128];
            put32(&mut attr, 0, self.fd as u32);
            put64(
                &mut attr,
                8,
                key.filter(|k| !k.is_empty())
                    .map_or(0, |k| k.as_ptr() as u64),
            );
            put64(&mut attr, 16, value);
            put64(&mut attr, 24, flags);
            attr
        }

        pub fn lookup(&self, key: &[u8], flags: u64) -> Result<Vec<u8>, Errno> {
            let mut out = vec![0u8; self.value_size];
            let mut attr = self.elem_attr(Some(key), out.as_mut_ptr() as u64, flags);
            sys(BPF_MAP_LOOKUP_ELEM, &mut attr).map(|_| out)
        }

        /// Lookup with `value` as input (bloom filters).
        pub fn peek_value(&self, value: &[u8]) -> Result<(), Errno> {
            let mut buf = value.to_vec();
            let mut attr = self.elem_attr(None, buf.as_mut_ptr() as u64, 0);
            sys(BPF_MAP_LOOKUP_ELEM, &mut attr).map(|_| ())
        }

        pub fn update(&self, key: &[u8], value: &[u8], flags: u64) -> Result<(), Errno> {
            let mut attr = self.elem_attr(Some(key), value.as_ptr() as u64, flags);
            sys(BPF_MAP_UPDATE_ELEM, &mut attr).map(|_| ())
        }

        pub fn delete(&self, key: &[u8]) -> Result<(), Errno> {
            let mut attr = self.elem_attr(Some(key), 0, 0);
            sys(BPF_MAP_DELETE_ELEM, &mut attr).map(|_| ())
        }

        pub fn next_key(&self, key: Option<&[u8]>, key_size: usize) -> Result<Vec<u8>, Errno> {
            let mut out = vec![0u8; key_size];
            let mut attr = self.elem_attr(key, out.as_mut_ptr() as u64, 0);
            sys(BPF_MAP_GET_NEXT_KEY, &mut attr).map(|_| out)
        }

        pub fn pop(&self) -> Result<Vec<u8>, Errno> {
            let mut out = vec![0u8; self.value_size];
            let mut attr = self.elem_attr(None, out.as_mut_ptr() as u64, 0);
            sys(BPF_MAP_LOOKUP_AND_DELETE_ELEM, &mut attr).map(|_| out)
        }
    }

    /// `num_possible_cpus()`, from sysfs.
    pub fn possible_cpus() -> u32 {
        let text = std::fs::read_to_string("/sys/devices/system/cpu/possible").unwrap_or_default();
        let last = text
            .trim()
            .rsplit(['-', ','])
            .next()
            .and_then(|n| n.parse::<u32>().ok());
        last.map_or(1, |n| n + 1)
    }

    /// Runs the calling thread on CPU 0 only, so that per-CPU state is CPU 0's.
    pub fn pin_to_cpu0() {
        // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET and sched_setaffinity
        // take pointers to this local set.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(0, &mut set);
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
        }
    }
}

/// Whether the kernel can be asked; a skip message when it cannot (a failure when required).
fn kernel_ready() -> bool {
    let probe = MapSpec::new("probe", MapType::Array, 4, 4, 1);
    match kernel::create(&probe, 4) {
        Ok(_) => true,
        Err(e) if std::env::var("BPFEMU_REQUIRE_KERNEL").as_deref() == Ok("1") => {
            panic!("BPFEMU_REQUIRE_KERNEL=1 but bpf() map creation fails: {e}")
        }
        Err(e) => {
            eprintln!("skipping kernel cross-check: bpf() map creation fails ({e}); run as root");
            false
        }
    }
}

/// A map's contents by key.
type Contents = BTreeMap<Vec<u8>, Vec<u8>>;
/// Updates of a sequence: key, value, flags.
type Updates = Vec<(u32, Vec<u8>, u64)>;

/// The model and the kernel map side by side.
struct Pair {
    mem: Memory,
    maps: Maps,
    m: usize,
    k: kernel::KMap,
}

impl Pair {
    fn new(spec: &MapSpec) -> Pair {
        let ncpus = kernel::possible_cpus();
        let mut mem = Memory::new();
        let mut maps = Maps::new(MapEnv::with_cpus(ncpus));
        let m = maps.create(&mut mem, spec).expect("model creates");
        let size = maps.get(m).unwrap().sys_value_size();
        let k = kernel::create(spec, size).expect("kernel creates");
        Pair { mem, maps, m, k }
    }

    fn update(
        &mut self,
        key: &[u8],
        value: &[u8],
        flags: u64,
    ) -> (Result<(), Errno>, Result<(), Errno>) {
        let ours = self
            .maps
            .sys_update(&mut self.mem, self.m, key, value, flags);
        (ours, self.k.update(key, value, flags))
    }

    fn lookup(&self, key: &[u8]) -> (Result<Vec<u8>, Errno>, Result<Vec<u8>, Errno>) {
        (
            self.maps.sys_lookup(&self.mem, self.m, key, 0),
            self.k.lookup(key, 0),
        )
    }

    fn delete(&mut self, key: &[u8]) -> (Result<(), Errno>, Result<(), Errno>) {
        (self.maps.sys_delete(self.m, key), self.k.delete(key))
    }

    fn next_key(&self, key: Option<&[u8]>) -> (Result<Vec<u8>, Errno>, Result<Vec<u8>, Errno>) {
        let ks = self.maps.get(self.m).unwrap().key_size();
        (
            self.maps.sys_next_key(self.m, key),
            self.k.next_key(key, ks),
        )
    }

    /// Both maps' contents, keyed (the kernel walked with get_next_key).
    fn contents(&self) -> (Contents, Contents) {
        let ours = self
            .maps
            .dump(&self.mem, self.m)
            .unwrap()
            .into_iter()
            .collect();
        let ks = self.maps.get(self.m).unwrap().key_size();
        let mut theirs = BTreeMap::new();
        let mut key: Option<Vec<u8>> = None;
        while let Ok(next) = self.k.next_key(key.as_deref(), ks) {
            if let Ok(v) = self.k.lookup(&next, 0) {
                theirs.insert(next.clone(), v);
            }
            key = Some(next);
        }
        (ours, theirs)
    }
}

#[derive(Clone, Debug)]
enum Op {
    Update(u32, u64, u64),
    Lookup(u32),
    Delete(u32),
    NextKey(Option<u32>),
}

fn op(keys: u32, flags: u64) -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..keys, any::<u64>(), 0..flags).prop_map(|(k, v, f)| Op::Update(k, v, f)),
        2 => (0..keys).prop_map(Op::Lookup),
        2 => (0..keys).prop_map(Op::Delete),
        1 => proptest::option::of(0..keys).prop_map(Op::NextKey),
    ]
}

/// Runs `ops` on both; next_key answers are compared only when `ordered`.
fn run_keyed(pair: &mut Pair, ops: &[Op], ordered: bool) -> Result<(), TestCaseError> {
    for (i, op) in ops.iter().enumerate() {
        match *op {
            Op::Update(k, v, f) => {
                let value: Vec<u8> = v
                    .to_ne_bytes()
                    .iter()
                    .cycle()
                    .take(pair.k.value_size)
                    .copied()
                    .collect();
                let (a, b) = pair.update(&k.to_ne_bytes(), &value, f);
                prop_assert_eq!(a, b, "op {}: {:?}", i, op);
            }
            Op::Lookup(k) => {
                let (a, b) = pair.lookup(&k.to_ne_bytes());
                prop_assert_eq!(a, b, "op {}: {:?}", i, op);
            }
            Op::Delete(k) => {
                let (a, b) = pair.delete(&k.to_ne_bytes());
                prop_assert_eq!(a, b, "op {}: {:?}", i, op);
            }
            Op::NextKey(k) => {
                let key = k.map(|k| k.to_ne_bytes().to_vec());
                // Without a common order, only a walk's start (no key, or a key not in the
                // map) has a comparable answer: the first key, or ENOENT when empty.
                let absent = key
                    .as_ref()
                    .is_none_or(|k| pair.lookup(k).1 == Err(Errno::ENOENT));
                let (a, b) = pair.next_key(key.as_deref());
                if ordered {
                    prop_assert_eq!(a, b, "op {}: {:?}", i, op);
                } else if absent {
                    prop_assert_eq!(a.is_ok(), b.is_ok(), "op {}: {:?}", i, op);
                }
            }
        }
    }
    let (ours, theirs) = pair.contents();
    prop_assert_eq!(ours, theirs);
    Ok(())
}

fn config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config(300))]

    #[test]
    fn hash_matches_kernel(max in 1u32..10, flags in prop_oneof![Just(0u32), Just(BPF_F_NO_PREALLOC)],
                           ops in proptest::collection::vec(op(14, 6), 1..60)) {
        if !kernel_ready() { return Ok(()); }
        let spec = MapSpec::new("h", MapType::Hash, 4, 8, max).with_flags(flags);
        run_keyed(&mut Pair::new(&spec), &ops, false)?;
    }

    #[test]
    fn percpu_hash_matches_kernel(max in 1u32..8, ops in proptest::collection::vec(op(10, 4), 1..40)) {
        if !kernel_ready() { return Ok(()); }
        let spec = MapSpec::new("ph", MapType::PercpuHash, 4, 12, max);
        run_keyed(&mut Pair::new(&spec), &ops, false)?;
    }

    #[test]
    fn array_matches_kernel(max in 1u32..8, percpu in any::<bool>(), ops in proptest::collection::vec(op(10, 6), 1..40)) {
        if !kernel_ready() { return Ok(()); }
        let t = if percpu { MapType::PercpuArray } else { MapType::Array };
        let spec = MapSpec::new("a", t, 4, 12, max);
        run_keyed(&mut Pair::new(&spec), &ops, true)?;
    }

    #[test]
    fn lru_hash_matches_kernel(max in 1u32..40, no_common in any::<bool>(), percpu in any::<bool>(),
                               ops in proptest::collection::vec(op(60, 4), 1..150)) {
        if !kernel_ready() { return Ok(()); }
        kernel::pin_to_cpu0();
        let t = if percpu { MapType::LruPercpuHash } else { MapType::LruHash };
        let flags = if no_common { BPF_F_NO_COMMON_LRU } else { 0 };
        let spec = MapSpec::new("lru", t, 4, 8, max).with_flags(flags);
        run_keyed(&mut Pair::new(&spec), &ops, false)?;
    }
}

#[derive(Clone, Debug)]
enum LpmOp {
    Update(u32, u16, u32, u64),
    Lookup(u32, u16),
    Delete(u32, u16),
    NextKey(Option<(u32, u16)>),
}

fn lpm_key(plen: u32, data: u16) -> Vec<u8> {
    let mut key = plen.to_ne_bytes().to_vec();
    key.extend_from_slice(&data.to_be_bytes());
    key
}

fn lpm_op() -> impl Strategy<Value = LpmOp> {
    // Few distinct data values and prefix lengths (17 is invalid) so that prefixes nest.
    let data = prop_oneof![
        Just(0u16),
        Just(0x8000),
        Just(0xc0a8),
        Just(0xc0a9),
        Just(0xc000),
        Just(0x0f0f),
        any::<u16>()
    ];
    let plen = 0u32..18;
    prop_oneof![
        4 => (plen.clone(), data.clone(), any::<u32>(), 0u64..4).prop_map(|(p, d, v, f)| LpmOp::Update(p, d, v, f)),
        2 => (plen.clone(), data.clone()).prop_map(|(p, d)| LpmOp::Lookup(p, d)),
        2 => (plen.clone(), data.clone()).prop_map(|(p, d)| LpmOp::Delete(p, d)),
        2 => proptest::option::of((plen, data)).prop_map(LpmOp::NextKey),
    ]
}

proptest! {
    #![proptest_config(config(300))]

    #[test]
    fn lpm_trie_matches_kernel(max in 1u32..12, ops in proptest::collection::vec(lpm_op(), 1..60)) {
        if !kernel_ready() { return Ok(()); }
        let spec = MapSpec::new("lpm", MapType::LpmTrie, 6, 4, max).with_flags(BPF_F_NO_PREALLOC);
        let mut pair = Pair::new(&spec);
        for (i, op) in ops.iter().enumerate() {
            match *op {
                LpmOp::Update(p, d, v, f) => {
                    let (a, b) = pair.update(&lpm_key(p, d), &v.to_ne_bytes(), f);
                    prop_assert_eq!(a, b, "op {}: {:?}", i, op);
                }
                LpmOp::Lookup(p, d) => {
                    let (a, b) = pair.lookup(&lpm_key(p, d));
                    prop_assert_eq!(a, b, "op {}: {:?}", i, op);
                }
                LpmOp::Delete(p, d) => {
                    let (a, b) = pair.delete(&lpm_key(p, d));
                    prop_assert_eq!(a, b, "op {}: {:?}", i, op);
                }
                LpmOp::NextKey(k) => {
                    let key = k.map(|(p, d)| lpm_key(p, d));
                    let (a, b) = pair.next_key(key.as_deref());
                    prop_assert_eq!(a, b, "op {}: {:?}", i, op);
                }
            }
        }
        // The whole walk, in order.
        let mut key: Option<Vec<u8>> = None;
        loop {
            let (a, b) = pair.next_key(key.as_deref());
            prop_assert_eq!(&a, &b);
            match a { Ok(k) => key = Some(k), Err(_) => break }
        }
    }
}

#[derive(Clone, Debug)]
enum QOp {
    Push(u32, u64),
    Pop,
    Peek,
}

proptest! {
    #![proptest_config(config(150))]

    #[test]
    fn queue_and_stack_match_kernel(stack in any::<bool>(), max in 1u32..6,
        ops in proptest::collection::vec(prop_oneof![
            3 => (any::<u32>(), 0u64..5).prop_map(|(v, f)| QOp::Push(v, f)),
            2 => Just(QOp::Pop),
            1 => Just(QOp::Peek)], 1..50)) {
        if !kernel_ready() { return Ok(()); }
        let t = if stack { MapType::Stack } else { MapType::Queue };
        let spec = MapSpec::new("q", t, 0, 4, max);
        let mut pair = Pair::new(&spec);
        for (i, op) in ops.iter().enumerate() {
            match *op {
                QOp::Push(v, f) => {
                    let (a, b) = pair.update(&[], &v.to_ne_bytes(), f);
                    prop_assert_eq!(a, b, "op {}: {:?}", i, op);
                }
                QOp::Pop => {
                    let ours = pair.maps.get_mut(pair.m).unwrap().sys_lookup_and_delete();
                    prop_assert_eq!(ours, pair.k.pop(), "op {}", i);
                }
                QOp::Peek => {
                    let (a, b) = pair.lookup(&[]);
                    prop_assert_eq!(a, b, "op {}", i);
                }
            }
        }
    }

    #[test]
    fn bloom_filter_matches_kernel(value_size in prop_oneof![Just(3u32), Just(4), Just(8), Just(13)],
        max in 1u32..4, hashes in 0u64..4,
        ops in proptest::collection::vec((any::<bool>(), 0u8..40, 0u64..2), 1..60)) {
        if !kernel_ready() { return Ok(()); }
        let spec = MapSpec::new("b", MapType::BloomFilter, 0, value_size, max)
            .with_flags(BPF_F_ZERO_SEED).with_extra(hashes);
        let mut pair = Pair::new(&spec);
        for (i, &(push, v, f)) in ops.iter().enumerate() {
            let value: Vec<u8> = (0..value_size as u8).map(|b| b.wrapping_mul(31) ^ v).collect();
            if push {
                let (a, b) = pair.update(&[], &value, f);
                prop_assert_eq!(a, b, "op {}", i);
            } else {
                let ours = pair.maps.get(pair.m).unwrap().sys_peek(&value);
                prop_assert_eq!(ours, pair.k.peek_value(&value), "op {}", i);
            }
        }
    }
}

/// Creation answers of both for a table of specs (valid and not).
#[test]
fn creation_errno_matches_kernel() {
    if !kernel_ready() {
        return;
    }
    let ncpus = kernel::possible_cpus();
    let specs = creation_specs();
    for spec in &specs {
        let mut mem = Memory::new();
        let ours = Map::create(&mut mem, spec, &MapEnv::with_cpus(ncpus))
            .map(|_| ())
            .map_err(|e| e.errno().unwrap());
        let theirs = kernel::create(spec, 0).map(|_| ());
        assert_eq!(ours, theirs, "{spec:?}");
        // What `verify` judges: the kernel's rules alone, the same answer.
        let judged = bpfemu_vm::maps::kernel_refusal(spec, &MapEnv::with_cpus(ncpus));
        assert_eq!(judged.map(|(errno, _)| errno), theirs.err(), "{spec:?}");
    }
    eprintln!("{} creation specs agree with the kernel", specs.len());
}

fn creation_specs() -> Vec<MapSpec> {
    use MapType::*;
    let s = MapSpec::new;
    let mut v = vec![
        s("a", Array, 4, 8, 4),
        s("a", Array, 8, 8, 4),
        s("a", Array, 4, 0, 4),
        s("a", Array, 4, 8, 0),
        s("a", Array, 4, 8, 4).with_flags(BPF_F_NO_PREALLOC),
        s("a", Array, 4, 8, 4).with_flags(BPF_F_MMAPABLE | BPF_F_RDONLY_PROG),
        s("a", Array, 4, 8, 4).with_flags(BPF_F_RDONLY_PROG | BPF_F_WRONLY_PROG),
        s("a", Array, 4, 8, 4).with_flags(BPF_F_RDONLY | BPF_F_WRONLY),
        s("a", Array, 4, 8, 4).with_flags(BPF_F_PRESERVE_ELEMS),
        s("a", Array, 4, 8, 4).with_extra(1),
        s("pa", PercpuArray, 4, 8, 4).with_flags(BPF_F_MMAPABLE),
        s("pa", PercpuArray, 4, 32768, 4),
        s("pa", PercpuArray, 4, 32769, 4),
        s("h", Hash, 4, 8, 4),
        s("h", Hash, 0, 8, 4),
        s("h", Hash, 4, 0, 4),
        s("h", Hash, 4, 8, 0),
        s("h", Hash, 4, 8, 4).with_flags(BPF_F_NO_COMMON_LRU),
        s("h", Hash, 4, 8, 4).with_flags(BPF_F_MMAPABLE),
        s("h", Hash, 4, 8, 4).with_flags(BPF_F_ZERO_SEED | BPF_F_NO_PREALLOC),
        s("h", Hash, 4, (1 << 22) - 52, 4),
        s("h", Hash, 4, (1 << 22) - 53, 4),
        s("ph", PercpuHash, 4, 32768, 4),
        s("ph", PercpuHash, 4, 32769, 4),
        s("lru", LruHash, 4, 8, 4).with_flags(BPF_F_NO_PREALLOC),
        s("lru", LruHash, 4, 8, 4).with_flags(BPF_F_NO_COMMON_LRU),
        s("lru", LruPercpuHash, 4, 8, 3).with_flags(BPF_F_NO_COMMON_LRU),
        s("lpm", LpmTrie, 8, 4, 4),
        s("lpm", LpmTrie, 8, 4, 4).with_flags(BPF_F_NO_PREALLOC),
        s("lpm", LpmTrie, 4, 4, 4).with_flags(BPF_F_NO_PREALLOC),
        s("lpm", LpmTrie, 5, 4, 4).with_flags(BPF_F_NO_PREALLOC),
        s("lpm", LpmTrie, 260, 4, 4).with_flags(BPF_F_NO_PREALLOC),
        s("lpm", LpmTrie, 261, 4, 4).with_flags(BPF_F_NO_PREALLOC),
        s("lpm", LpmTrie, 8, 0, 4).with_flags(BPF_F_NO_PREALLOC),
        s("lpm", LpmTrie, 8, 4, 0).with_flags(BPF_F_NO_PREALLOC),
        s("lpm", LpmTrie, 8, 4, 4).with_flags(BPF_F_NO_PREALLOC | BPF_F_ZERO_SEED),
        s("q", Queue, 0, 4, 4),
        s("q", Queue, 4, 4, 4),
        s("q", Queue, 0, 0, 4),
        s("q", Stack, 0, 4, 0),
        s("q", Stack, 0, 4, 4).with_flags(BPF_F_NO_PREALLOC),
        s("q", Queue, 0, (1 << 22) + 1, 4),
        s("b", BloomFilter, 0, 4, 4),
        s("b", BloomFilter, 0, 4, 4).with_extra(15),
        s("b", BloomFilter, 0, 4, 4).with_extra(16),
        s("b", BloomFilter, 4, 4, 4),
        s("b", BloomFilter, 0, 4, 0),
        s("b", BloomFilter, 0, 4, 4).with_flags(BPF_F_NO_PREALLOC),
        s("r", Ringbuf, 0, 0, 4096),
        s("r", Ringbuf, 0, 0, 8192),
        s("r", Ringbuf, 0, 0, 12288),
        s("r", Ringbuf, 0, 0, 2048),
        s("r", Ringbuf, 4, 0, 4096),
        s("r", Ringbuf, 0, 0, 4096).with_flags(BPF_F_RDONLY_PROG),
        s("pr", ProgArray, 4, 4, 4),
        s("pr", ProgArray, 4, 8, 4),
        s("pr", ProgArray, 4, 4, 4).with_flags(BPF_F_RDONLY_PROG),
        s("pe", PerfEventArray, 4, 4, 4).with_flags(BPF_F_PRESERVE_ELEMS),
        s("pe", PerfEventArray, 4, 4, 0),
        s("d", Devmap, 4, 4, 4),
        s("d", Devmap, 4, 8, 4),
        s("d", Devmap, 4, 12, 4),
        s("d", Devmap, 4, 4, 4).with_flags(BPF_F_RDONLY_PROG),
        s("dh", DevmapHash, 4, 8, 4),
        s("dh", DevmapHash, 8, 8, 4),
        s("c", Cpumap, 4, 4, 4),
        s("c", Cpumap, 4, 8, 4),
        s("c", Cpumap, 4, 12, 4),
        s("c", Cpumap, 4, 4, MapEnv::default().nr_cpus),
        s("c", Cpumap, 4, 4, MapEnv::default().nr_cpus + 1),
        s("c", Cpumap, 4, 4, 4).with_flags(BPF_F_RDONLY),
        s("x", Xskmap, 4, 4, 4),
        s("x", Xskmap, 4, 8, 4),
        s("x", Xskmap, 4, 4, 4).with_flags(BPF_F_RDONLY),
        s("x", Xskmap, 4, 4, 4).with_flags(BPF_F_RDONLY_PROG),
    ];
    let mut bad_type = s("u", Array, 4, 4, 4);
    bad_type.map_type = 99;
    v.push(bad_type);
    let mut numa = s("a", Array, 4, 4, 4).with_flags(BPF_F_NUMA_NODE);
    numa.numa_node = 7;
    v.push(numa);
    v
}

/// Lookups and updates by the kernel's answer of a few devmap/cpumap/xskmap sequences that
/// need no device, program or socket.
#[test]
fn target_maps_match_kernel() {
    if !kernel_ready() {
        return;
    }
    let lo = 1u32; // the loopback interface always exists
    let cases: Vec<(MapSpec, Updates)> = vec![
        (
            MapSpec::new("d", MapType::Devmap, 4, 4, 4),
            vec![
                (0, lo.to_ne_bytes().to_vec(), 0),
                (1, lo.to_ne_bytes().to_vec(), BPF_NOEXIST),
                (4, lo.to_ne_bytes().to_vec(), 0),
                (2, 0u32.to_ne_bytes().to_vec(), 0),
                (2, lo.to_ne_bytes().to_vec(), 3),
            ],
        ),
        (
            MapSpec::new("dh", MapType::DevmapHash, 4, 8, 2),
            vec![
                (
                    7,
                    [lo.to_ne_bytes(), 0u32.to_ne_bytes()].concat(),
                    BPF_EXIST,
                ),
                (9, [lo.to_ne_bytes(), 0u32.to_ne_bytes()].concat(), 0),
                (
                    7,
                    [lo.to_ne_bytes(), 0u32.to_ne_bytes()].concat(),
                    BPF_NOEXIST,
                ),
                (11, [lo.to_ne_bytes(), 0u32.to_ne_bytes()].concat(), 0),
                (12, [0u32.to_ne_bytes(), 0u32.to_ne_bytes()].concat(), 0),
            ],
        ),
        (
            MapSpec::new("c", MapType::Cpumap, 4, 4, 4),
            vec![
                (0, 0u32.to_ne_bytes().to_vec(), 0),
                (1, 20000u32.to_ne_bytes().to_vec(), 0),
                (3, 64u32.to_ne_bytes().to_vec(), 0),
                (4, 64u32.to_ne_bytes().to_vec(), 0),
                (0, 64u32.to_ne_bytes().to_vec(), BPF_NOEXIST),
            ],
        ),
    ];
    for (spec, ops) in cases {
        let mut pair = Pair::new(&spec);
        for (k, v, f) in ops {
            let (a, b) = pair.update(&k.to_ne_bytes(), &v, f);
            assert_eq!(a, b, "{} update {k} {v:?} {f}", spec.name);
        }
        for k in 0..13u32 {
            let (a, b) = pair.lookup(&k.to_ne_bytes());
            assert_eq!(a, b, "{} lookup {k}", spec.name);
            let (a, b) = pair.next_key(Some(&k.to_ne_bytes()));
            assert_eq!(a, b, "{} next_key {k}", spec.name);
        }
        for k in [0u32, 9, 5] {
            let (a, b) = pair.delete(&k.to_ne_bytes());
            assert_eq!(a, b, "{} delete {k}", spec.name);
        }
    }
}
