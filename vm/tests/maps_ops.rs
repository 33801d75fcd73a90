//! Map operations through bpfemu's own API: what programs see (value pointers into memory,
//! per-CPU copies, handles), ring buffer records, LRU eviction order, map-in-map and the
//! redirect maps. The kernel cross-checks are in maps_kernel.rs.

use bpfemu_vm::maps::*;
use bpfemu_vm::{FaultCause, Memory};

fn setup(ncpus: u32) -> (Memory, Maps) {
    (Memory::new(), Maps::new(MapEnv::with_cpus(ncpus)))
}

fn addr(v: Option<ValueRef>) -> u64 {
    match v {
        Some(ValueRef::Addr(a)) => a,
        other => panic!("expected an address, got {other:?}"),
    }
}

#[test]
fn lookup_pointer_is_writable_and_seen_by_next_lookup() {
    let (mut mem, mut maps) = setup(1);
    let m = maps
        .create(&mut mem, &MapSpec::new("h", MapType::Hash, 4, 8, 4))
        .unwrap();
    let key = 5u32.to_ne_bytes();
    maps.sys_update(&mut mem, m, &key, &[0; 8], BPF_ANY)
        .unwrap();
    let a = addr(maps.get_mut(m).unwrap().lookup(&mem, &key, 0));
    mem.write(a, 8, 0x1122_3344_5566_7788).unwrap();
    let b = addr(maps.get_mut(m).unwrap().lookup(&mem, &key, 0));
    assert_eq!(a, b);
    assert_eq!(mem.read(b, 8).unwrap(), 0x1122_3344_5566_7788);
    assert_eq!(
        maps.sys_lookup(&mem, m, &key, 0).unwrap(),
        0x1122_3344_5566_7788u64.to_ne_bytes()
    );
    // A deleted element's memory stays addressable; a later insert reuses it.
    maps.sys_delete(m, &key).unwrap();
    assert!(mem.read(a, 8).is_ok());
    maps.sys_update(&mut mem, m, &9u32.to_ne_bytes(), &[1; 8], BPF_NOEXIST)
        .unwrap();
    assert_eq!(
        addr(
            maps.get_mut(m)
                .unwrap()
                .lookup(&mem, &9u32.to_ne_bytes(), 0)
        ),
        a
    );
}

#[test]
fn hash_replace_moves_value_to_spare_slot_like_kernel_extra_elems() {
    let (mut mem, mut maps) = setup(1);
    let m = maps
        .create(&mut mem, &MapSpec::new("h", MapType::Hash, 4, 8, 1))
        .unwrap();
    let key = 1u32.to_ne_bytes();
    maps.sys_update(&mut mem, m, &key, &1u64.to_ne_bytes(), BPF_ANY)
        .unwrap();
    let old = addr(maps.get_mut(m).unwrap().lookup(&mem, &key, 0));
    // Full map: a new key is refused, an existing one replaced.
    assert_eq!(
        maps.sys_update(&mut mem, m, &2u32.to_ne_bytes(), &[0; 8], BPF_ANY),
        Err(Errno::E2BIG)
    );
    maps.sys_update(&mut mem, m, &key, &2u64.to_ne_bytes(), BPF_EXIST)
        .unwrap();
    let new = addr(maps.get_mut(m).unwrap().lookup(&mem, &key, 0));
    assert_ne!(old, new);
    assert_eq!(mem.read(old, 8).unwrap(), 1);
    assert_eq!(mem.read(new, 8).unwrap(), 2);
    assert_eq!(
        maps.sys_update(&mut mem, m, &key, &[0; 8], 8),
        Err(Errno::EINVAL)
    );
    assert_eq!(
        maps.sys_update(&mut mem, m, &key, &[0; 8], BPF_F_LOCK),
        Err(Errno::EINVAL)
    );
}

#[test]
fn percpu_maps_keep_one_value_per_cpu() {
    let (mut mem, mut maps) = setup(3);
    for t in [
        MapType::PercpuArray,
        MapType::PercpuHash,
        MapType::LruPercpuHash,
    ] {
        let name = t.name();
        let m = maps
            .create(&mut mem, &MapSpec::new(name, t, 4, 4, 4))
            .unwrap();
        let env = maps.env().clone();
        let key = 0u32.to_ne_bytes();
        let map = maps.get_mut(m).unwrap();
        map.update(&mut mem, &env, &key, &7u32.to_ne_bytes(), BPF_ANY, 1)
            .unwrap();
        let on1 = addr(map.lookup(&mem, &key, 1));
        let on2 = addr(map.lookup(&mem, &key, 2));
        assert_ne!(on1, on2, "{name}");
        assert_eq!(mem.read(on1, 4).unwrap(), 7, "{name}");
        assert_eq!(mem.read(on2, 4).unwrap(), 0, "{name}");
        mem.write(on2, 4, 9).unwrap();
        // The syscall side sees every CPU's copy, each padded to 8 bytes.
        let all = maps.sys_lookup(&mem, m, &key, 0).unwrap();
        assert_eq!(all.len(), 24, "{name}");
        let copies: Vec<u32> = all
            .chunks(8)
            .map(|c| u32::from_ne_bytes(c[..4].try_into().unwrap()))
            .collect();
        assert_eq!(copies, [0, 7, 9], "{name}");
    }
}

#[test]
fn array_semantics_and_global_data() {
    let (mut mem, mut maps) = setup(1);
    let m = maps
        .create(&mut mem, &MapSpec::new("a", MapType::Array, 4, 4, 3))
        .unwrap();
    assert_eq!(maps.sys_delete(m, &0u32.to_ne_bytes()), Err(Errno::EINVAL));
    assert_eq!(
        maps.sys_update(&mut mem, m, &3u32.to_ne_bytes(), &[0; 4], BPF_ANY),
        Err(Errno::E2BIG)
    );
    assert_eq!(
        maps.sys_update(&mut mem, m, &0u32.to_ne_bytes(), &[0; 4], BPF_NOEXIST),
        Err(Errno::EEXIST)
    );
    assert_eq!(
        maps.get_mut(m)
            .unwrap()
            .lookup(&mem, &3u32.to_ne_bytes(), 0),
        None
    );
    let keys: Vec<u32> = maps
        .dump(&mem, m)
        .unwrap()
        .iter()
        .map(|(k, _)| u32::from_ne_bytes(k[..4].try_into().unwrap()))
        .collect();
    assert_eq!(keys, [0, 1, 2]);
    assert_eq!(
        maps.sys_next_key(m, Some(&7u32.to_ne_bytes())).unwrap(),
        0u32.to_ne_bytes()
    );
    assert_eq!(
        maps.sys_next_key(m, Some(&2u32.to_ne_bytes())),
        Err(Errno::ENOENT)
    );

    let ro = maps
        .create(
            &mut mem,
            &MapSpec::global_data("obj.rodata", ".rodata", 16, true),
        )
        .unwrap();
    maps.sys_update(&mut mem, ro, &0u32.to_ne_bytes(), &[0xab; 16], BPF_ANY)
        .unwrap();
    let base = maps.value_addr(ro, 4).unwrap();
    assert_eq!(mem.read(base, 1).unwrap(), 0xab);
    let fault = mem.write(base, 1, 0).unwrap_err();
    assert!(
        matches!(fault.cause, FaultCause::ReadOnly { .. }),
        "{fault}"
    );
    assert!(fault.to_string().contains("global data .rodata"), "{fault}");
    assert_eq!(maps.value_addr(ro, 16), Err(Errno::EINVAL));
    assert_eq!(maps.value_addr(m, 0), Err(Errno::EINVAL));
}

#[test]
fn handles_are_opaque_and_map_back() {
    let (mut mem, mut maps) = setup(1);
    let a = maps
        .create(&mut mem, &MapSpec::new("a", MapType::Array, 4, 8, 2))
        .unwrap();
    let h = maps
        .create(&mut mem, &MapSpec::new("h", MapType::Hash, 4, 8, 2))
        .unwrap();
    assert_eq!(maps.index_of_handle(maps.handle(h)), Some(h));
    assert_eq!(maps.index_of_handle(maps.handle(h) + 8), None);
    assert_eq!(maps.index_of("a"), Some(a));
    assert!(
        mem.read(maps.handle(a), 8).is_err(),
        "a handle is not memory"
    );
    assert!(matches!(
        maps.create(&mut mem, &MapSpec::new("a", MapType::Array, 4, 8, 2)),
        Err(MapError::DuplicateName { .. })
    ));

    // Helpers by address: key and value read through memory, r0 as the kernel's.
    let buf = mem.add_zeroed(
        bpfemu_vm::RegionKind::Other {
            name: "stack".into(),
        },
        16,
        true,
    );
    let base = mem.region(buf).unwrap().base();
    mem.write(base, 4, 3).unwrap();
    mem.write(base + 8, 8, 77).unwrap();
    let hh = maps.handle(h);
    assert_eq!(maps.lookup_elem(&mem, hh, base, 0).unwrap(), 0);
    assert_eq!(
        maps.update_elem(&mut mem, hh, base, base + 8, BPF_EXIST, 0)
            .unwrap(),
        Errno::ENOENT.as_ret()
    );
    assert_eq!(
        maps.update_elem(&mut mem, hh, base, base + 8, BPF_ANY, 0)
            .unwrap(),
        0
    );
    let v = maps.lookup_elem(&mem, hh, base, 0).unwrap();
    assert_eq!(mem.read(v, 8).unwrap(), 77);
    assert_eq!(maps.delete_elem(&mem, hh, base).unwrap(), 0);
    assert_eq!(
        errno_of_ret(maps.delete_elem(&mem, hh, base).unwrap()),
        Some(Errno::ENOENT)
    );
    assert!(maps.lookup_elem(&mem, 0x1234, base, 0).is_err());
}

#[test]
fn creation_refusals_name_the_map_and_errno() {
    let (mut mem, mut maps) = setup(2);
    let err = maps
        .create(&mut mem, &MapSpec::new("bad", MapType::LpmTrie, 8, 4, 4))
        .unwrap_err();
    assert_eq!(err.errno(), Some(Errno::EINVAL));
    assert!(
        err.to_string()
            .starts_with("map bad: LPM tries need BPF_F_NO_PREALLOC (EINVAL (22))"),
        "{err}"
    );
    let lru = MapSpec::new("l", MapType::LruHash, 4, 4, 4).with_flags(BPF_F_NO_PREALLOC);
    assert_eq!(
        maps.create(&mut mem, &lru).unwrap_err().errno(),
        Some(Errno::ENOTSUPP)
    );
    let rb = MapSpec::new("r", MapType::Ringbuf, 0, 0, 4096 * 3);
    assert_eq!(
        maps.create(&mut mem, &rb).unwrap_err().errno(),
        Some(Errno::EINVAL)
    );
    let mut unsupported = MapSpec::new("s", MapType::Array, 4, 4, 4);
    unsupported.map_type = 15; // SOCKMAP
    assert_eq!(
        maps.create(&mut mem, &unsupported).unwrap_err().errno(),
        Some(Errno::EOPNOTSUPP)
    );
    let big = MapSpec::new("big", MapType::Array, 4, 1 << 20, 1 << 20);
    assert_eq!(
        maps.create(&mut mem, &big).unwrap_err().errno(),
        Some(Errno::ENOMEM)
    );
    // Per-CPU LRU lists round max_entries up to a multiple of the CPU count.
    let m = maps
        .create(
            &mut mem,
            &MapSpec::new("pl", MapType::LruHash, 4, 4, 3).with_flags(BPF_F_NO_COMMON_LRU),
        )
        .unwrap();
    assert_eq!(maps.get(m).unwrap().max_entries(), 4);
}

fn lru_keys(mem: &Memory, maps: &Maps, m: usize) -> Vec<u32> {
    maps.dump(mem, m)
        .unwrap()
        .iter()
        .map(|(k, _)| u32::from_ne_bytes(k[..4].try_into().unwrap()))
        .collect()
}

#[test]
fn lru_evicts_unreferenced_oldest_first() {
    // One CPU, 8 elements: the local free target is 4. Filling the map and adding more
    // evicts from the inactive tail; a program lookup (reference bit) saves an element.
    let (mut mem, mut maps) = setup(1);
    let m = maps
        .create(&mut mem, &MapSpec::new("lru", MapType::LruHash, 4, 4, 8))
        .unwrap();
    let env = maps.env().clone();
    for k in 0..8u32 {
        maps.sys_update(&mut mem, m, &k.to_ne_bytes(), &k.to_ne_bytes(), BPF_NOEXIST)
            .unwrap();
    }
    assert_eq!(lru_keys(&mem, &maps, m), (0..8).collect::<Vec<_>>());
    let map = maps.get_mut(m).unwrap();
    assert!(map.lookup(&mem, &0u32.to_ne_bytes(), 0).is_some());
    map.update(&mut mem, &env, &100u32.to_ne_bytes(), &[0; 4], BPF_ANY, 0)
        .unwrap();
    // The refill evicted four unreferenced elements from the oldest end; 0 was referenced.
    assert_eq!(lru_keys(&mem, &maps, m), [0, 5, 6, 7, 100]);
    // Never E2BIG: an LRU map always makes room.
    for k in 200..230u32 {
        maps.sys_update(&mut mem, m, &k.to_ne_bytes(), &[0; 4], BPF_NOEXIST)
            .unwrap();
    }
    assert!(maps.get(m).unwrap().len() <= 8);
    assert_eq!(
        maps.sys_update(&mut mem, m, &1u32.to_ne_bytes(), &[0; 4], 3),
        Err(Errno::EINVAL)
    );
}

#[test]
fn lpm_longest_prefix_and_postorder_walk() {
    let (mut mem, mut maps) = setup(1);
    let spec = MapSpec::new("lpm", MapType::LpmTrie, 8, 4, 8).with_flags(BPF_F_NO_PREALLOC);
    let m = maps.create(&mut mem, &spec).unwrap();
    let key = |plen: u32, ip: [u8; 4]| [plen.to_ne_bytes(), ip].concat();
    for (i, (plen, ip)) in [
        (16, [192, 168, 0, 0]),
        (24, [192, 168, 0, 0]),
        (24, [192, 168, 1, 0]),
        (24, [192, 168, 128, 0]),
    ]
    .iter()
    .enumerate()
    {
        maps.sys_update(
            &mut mem,
            m,
            &key(*plen, *ip),
            &(i as u32).to_ne_bytes(),
            BPF_NOEXIST,
        )
        .unwrap();
    }
    let get =
        |maps: &Maps, mem: &Memory, ip| maps.sys_lookup(mem, m, &key(32, ip), 0).map(|v| v[0]);
    assert_eq!(get(&maps, &mem, [192, 168, 1, 9]), Ok(2));
    assert_eq!(get(&maps, &mem, [192, 168, 7, 9]), Ok(0));
    assert_eq!(get(&maps, &mem, [10, 0, 0, 1]), Err(Errno::ENOENT));
    // The kernel's example order: more specific first, bit 0 before bit 1.
    let walk: Vec<(u32, u8)> = maps
        .dump(&mem, m)
        .unwrap()
        .iter()
        .map(|(k, _)| (u32::from_ne_bytes(k[..4].try_into().unwrap()), k[6]))
        .collect();
    assert_eq!(walk, [(24, 0), (24, 1), (24, 128), (16, 0)]);
    assert_eq!(
        maps.sys_update(&mut mem, m, &key(33, [0; 4]), &[0; 4], BPF_ANY),
        Err(Errno::EINVAL)
    );
    assert_eq!(
        maps.sys_update(&mut mem, m, &key(8, [10, 0, 0, 0]), &[0; 4], BPF_EXIST),
        Err(Errno::ENOENT)
    );
    assert_eq!(maps.sys_delete(m, &key(16, [192, 168, 0, 0])), Ok(()));
    assert_eq!(get(&maps, &mem, [192, 168, 7, 9]), Err(Errno::ENOENT));
}

#[test]
fn queue_stack_and_bloom() {
    let (mut mem, mut maps) = setup(1);
    let q = maps
        .create(&mut mem, &MapSpec::new("q", MapType::Queue, 0, 4, 2))
        .unwrap();
    let s = maps
        .create(&mut mem, &MapSpec::new("s", MapType::Stack, 0, 4, 2))
        .unwrap();
    for m in [q, s] {
        for v in 1..=2u32 {
            maps.sys_update(&mut mem, m, &[], &v.to_ne_bytes(), BPF_ANY)
                .unwrap();
        }
        assert_eq!(
            maps.sys_update(&mut mem, m, &[], &3u32.to_ne_bytes(), BPF_ANY),
            Err(Errno::E2BIG)
        );
        maps.sys_update(&mut mem, m, &[], &3u32.to_ne_bytes(), BPF_EXIST)
            .unwrap();
        assert_eq!(
            maps.sys_update(&mut mem, m, &[], &3u32.to_ne_bytes(), BPF_NOEXIST),
            Err(Errno::EINVAL)
        );
    }
    let mut out = [0u8; 4];
    maps.get_mut(q).unwrap().pop(&mut out).unwrap();
    assert_eq!(u32::from_ne_bytes(out), 2, "queue dropped 1, pops 2 then 3");
    maps.get_mut(s).unwrap().pop(&mut out).unwrap();
    assert_eq!(u32::from_ne_bytes(out), 3, "stack pops the newest");
    assert_eq!(maps.sys_next_key(q, None), Err(Errno::EINVAL));

    let b = maps
        .create(
            &mut mem,
            &MapSpec::new("b", MapType::BloomFilter, 0, 4, 100).with_flags(BPF_F_ZERO_SEED),
        )
        .unwrap();
    maps.sys_update(&mut mem, b, &[], &42u32.to_ne_bytes(), BPF_ANY)
        .unwrap();
    let bloom = maps.get_mut(b).unwrap();
    assert_eq!(bloom.peek(&mut 42u32.to_ne_bytes()), Ok(()));
    assert_eq!(bloom.peek(&mut 43u32.to_ne_bytes()), Err(Errno::ENOENT));
    assert_eq!(
        bloom.push(&1u32.to_ne_bytes(), BPF_EXIST),
        Err(Errno::EINVAL)
    );
    assert_eq!(bloom.pop(&mut out), Err(Errno::EOPNOTSUPP));
    assert_eq!(maps.sys_delete(b, &[]), Err(Errno::EOPNOTSUPP));
}

#[test]
fn ringbuf_records_headers_and_space() {
    let (mut mem, mut maps) = setup(1);
    let m = maps
        .create(&mut mem, &MapSpec::new("rb", MapType::Ringbuf, 0, 0, 4096))
        .unwrap();
    let h = maps.handle(m);
    let s1 = maps.ringbuf_reserve(&mut mem, h, 5, 0).unwrap();
    assert_ne!(s1, 0);
    // Header: len with the busy bit, pg_off of the data's page.
    let hdr = mem.read(s1 - 8, 4).unwrap() as u32;
    assert_eq!(hdr, 5 | BPF_RINGBUF_BUSY_BIT);
    assert_eq!(mem.read(s1 - 4, 4).unwrap(), 3);
    mem.write(s1, 4, 0xdead_beef).unwrap();
    assert_eq!(
        maps.ringbuf_reserve(&mut mem, h, 8, 1).unwrap(),
        0,
        "flags must be 0"
    );
    let s2 = maps.ringbuf_reserve(&mut mem, h, 16, 0).unwrap();
    assert_eq!(
        s2,
        s1 + 16,
        "records are 8-byte aligned: 8 + round_up(5 + 8)"
    );
    maps.ringbuf_commit(&mut mem, s2, true).unwrap();
    assert_eq!(maps.ringbuf_query(h, BPF_RB_PROD_POS).unwrap(), 16 + 24);
    // Nothing is consumable while the first record is busy.
    assert!(
        maps.get_mut(m)
            .unwrap()
            .ringbuf_consume(&mem)
            .unwrap()
            .is_empty()
    );
    maps.ringbuf_commit(&mut mem, s1, false).unwrap();
    assert!(
        maps.ringbuf_commit(&mut mem, s1, false).is_err(),
        "not reserved any more"
    );
    let recs = maps.get_mut(m).unwrap().ringbuf_consume(&mem).unwrap();
    assert_eq!(
        recs,
        [Record {
            pos: 0,
            data: vec![0xef, 0xbe, 0xad, 0xde, 0]
        }]
    );
    assert_eq!(maps.ringbuf_query(h, BPF_RB_AVAIL_DATA).unwrap(), 0);
    assert_eq!(maps.ringbuf_query(h, BPF_RB_RING_SIZE).unwrap(), 4096);

    // A record must leave one byte of the ring unused; too large is refused outright.
    let map = maps.get_mut(m).unwrap();
    assert_eq!(
        map.ringbuf_reserve(&mut mem, 4096).unwrap(),
        Err(ReserveError::TooLarge)
    );
    assert_eq!(
        map.ringbuf_output(&mut mem, &[1; 4088], 0),
        Err(Errno::EAGAIN)
    );
    assert_eq!(map.ringbuf_output(&mut mem, &[1; 8], 4), Err(Errno::EINVAL));
    // Wrapping: records crossing the end read back whole.
    for i in 0..20u8 {
        map.ringbuf_output(&mut mem, &[i; 300], 0).unwrap();
        let recs = map.ringbuf_consume(&mem).unwrap();
        assert_eq!(recs.len(), 1);
        assert_eq!(recs[0].data, vec![i; 300]);
    }
    assert_eq!(ReserveError::NoSpace.dynptr_errno(1 << 24), Errno::E2BIG);
    assert_eq!(maps.sys_lookup(&mem, m, &[], 0), Err(Errno::ENOTSUPP));
}

#[test]
fn map_in_map_and_prog_array_slots() {
    let (mut mem, mut maps) = setup(1);
    let inner_spec = MapSpec::new("inner", MapType::Array, 4, 4, 2);
    let inner = maps.create(&mut mem, &inner_spec).unwrap();
    let other = maps
        .create(&mut mem, &MapSpec::new("other", MapType::Array, 4, 4, 3))
        .unwrap();
    let outer = maps
        .create(
            &mut mem,
            &MapSpec::new("outer", MapType::ArrayOfMaps, 4, 4, 2).with_inner(inner_spec.clone()),
        )
        .unwrap();
    let hom = maps
        .create(
            &mut mem,
            &MapSpec::new("hom", MapType::HashOfMaps, 4, 4, 2).with_inner(inner_spec),
        )
        .unwrap();
    let no_inner = MapSpec::new("x", MapType::ArrayOfMaps, 4, 4, 2);
    assert_eq!(
        maps.create(&mut mem, &no_inner).unwrap_err().errno(),
        Some(Errno::EBADF)
    );
    for m in [outer, hom] {
        let slot = 1u32.to_ne_bytes();
        assert_eq!(
            maps.sys_update(&mut mem, m, &slot, &(other as u32).to_ne_bytes(), BPF_ANY),
            Err(Errno::EINVAL)
        );
        assert_eq!(
            maps.sys_update(&mut mem, m, &slot, &99u32.to_ne_bytes(), BPF_ANY),
            Err(Errno::EBADF)
        );
        maps.sys_update(&mut mem, m, &slot, &(inner as u32).to_ne_bytes(), BPF_ANY)
            .unwrap();
        assert_eq!(
            maps.sys_lookup(&mem, m, &slot, 0).unwrap(),
            (inner as u32).to_ne_bytes()
        );
        let buf = mem.add_copy(
            bpfemu_vm::RegionKind::Other { name: "key".into() },
            &slot,
            true,
        );
        let base = mem.region(buf).unwrap().base();
        let h = maps.handle(m);
        assert_eq!(
            maps.lookup_elem(&mem, h, base, 0).unwrap(),
            maps.handle(inner)
        );
    }
    assert_eq!(
        maps.sys_update(
            &mut mem,
            outer,
            &0u32.to_ne_bytes(),
            &(inner as u32).to_ne_bytes(),
            BPF_NOEXIST
        ),
        Err(Errno::EINVAL)
    );
    assert_eq!(
        maps.sys_delete(outer, &0u32.to_ne_bytes()),
        Err(Errno::ENOENT)
    );
    assert_eq!(
        maps.sys_delete(outer, &5u32.to_ne_bytes()),
        Err(Errno::E2BIG)
    );

    let pa = maps
        .create(&mut mem, &MapSpec::new("jmp", MapType::ProgArray, 4, 4, 4))
        .unwrap();
    maps.sys_update(
        &mut mem,
        pa,
        &2u32.to_ne_bytes(),
        &7u32.to_ne_bytes(),
        BPF_ANY,
    )
    .unwrap();
    assert_eq!(maps.get(pa).unwrap().prog_array_get(2), Some(7));
    assert_eq!(maps.get(pa).unwrap().prog_array_get(1), None);
    assert_eq!(
        maps.sys_update(
            &mut mem,
            pa,
            &9u32.to_ne_bytes(),
            &7u32.to_ne_bytes(),
            BPF_ANY
        ),
        Err(Errno::E2BIG)
    );
    let pe = maps
        .create(
            &mut mem,
            &MapSpec::new("events", MapType::PerfEventArray, 4, 4, 2),
        )
        .unwrap();
    maps.sys_update(
        &mut mem,
        pe,
        &0u32.to_ne_bytes(),
        &3u32.to_ne_bytes(),
        BPF_ANY,
    )
    .unwrap();
    assert_eq!(
        maps.sys_lookup(&mem, pe, &0u32.to_ne_bytes(), 0),
        Err(Errno::ENOTSUPP)
    );
}

#[test]
fn redirect_maps_accept_what_the_kernel_accepts() {
    let mut mem = Memory::new();
    let env = MapEnv {
        ifindexes: Some(vec![1, 4]),
        ..MapEnv::with_cpus(2)
    };
    let mut maps = Maps::new(env);
    let d = maps
        .create(&mut mem, &MapSpec::new("tx", MapType::Devmap, 4, 8, 4))
        .unwrap();
    let val = |ifindex: u32, fd: i32| [ifindex.to_ne_bytes(), fd.to_ne_bytes()].concat();
    assert_eq!(
        maps.sys_update(&mut mem, d, &0u32.to_ne_bytes(), &val(3, 0), BPF_ANY),
        Err(Errno::EINVAL)
    );
    assert_eq!(
        maps.sys_update(&mut mem, d, &0u32.to_ne_bytes(), &val(0, 5), BPF_ANY),
        Err(Errno::EINVAL)
    );
    maps.sys_update(&mut mem, d, &0u32.to_ne_bytes(), &val(4, 5), BPF_ANY)
        .unwrap();
    assert_eq!(
        maps.get(d).unwrap().devmap_get(0),
        Some(TargetVal { first: 4, prog: 5 })
    );
    // Programs get a read-only bpf_devmap_val.
    let a = addr(
        maps.get_mut(d)
            .unwrap()
            .lookup(&mem, &0u32.to_ne_bytes(), 0),
    );
    assert_eq!(mem.read(a, 4).unwrap(), 4);
    assert!(mem.write(a, 4, 1).is_err());

    let c = maps
        .create(&mut mem, &MapSpec::new("cpus", MapType::Cpumap, 4, 4, 4))
        .unwrap();
    assert_eq!(
        maps.sys_update(
            &mut mem,
            c,
            &3u32.to_ne_bytes(),
            &64u32.to_ne_bytes(),
            BPF_ANY
        ),
        Err(Errno::ENODEV)
    );
    assert_eq!(
        maps.sys_update(
            &mut mem,
            c,
            &1u32.to_ne_bytes(),
            &16385u32.to_ne_bytes(),
            BPF_ANY
        ),
        Err(Errno::EOVERFLOW)
    );
    maps.sys_update(
        &mut mem,
        c,
        &1u32.to_ne_bytes(),
        &64u32.to_ne_bytes(),
        BPF_ANY,
    )
    .unwrap();
    assert_eq!(
        maps.get(c).unwrap().cpumap_get(1),
        Some(TargetVal { first: 64, prog: 0 })
    );

    let x = maps
        .create(&mut mem, &MapSpec::new("xsks", MapType::Xskmap, 4, 4, 4))
        .unwrap();
    assert_eq!(
        maps.sys_update(
            &mut mem,
            x,
            &0u32.to_ne_bytes(),
            &9u32.to_ne_bytes(),
            BPF_EXIST
        ),
        Err(Errno::ENOENT)
    );
    maps.sys_update(
        &mut mem,
        x,
        &0u32.to_ne_bytes(),
        &9u32.to_ne_bytes(),
        BPF_NOEXIST,
    )
    .unwrap();
    assert_eq!(maps.get(x).unwrap().xsk_get(0), Some(9));
    assert_eq!(
        maps.sys_lookup(&mem, x, &0u32.to_ne_bytes(), 0),
        Err(Errno::EOPNOTSUPP)
    );
    assert_eq!(maps.sys_delete(x, &4u32.to_ne_bytes()), Err(Errno::EINVAL));
}
