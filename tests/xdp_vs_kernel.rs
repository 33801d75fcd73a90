//! The XDP runtime against the kernel: every program of the corpus (`examples/xdp/build`,
//! each -mcpu level) loaded by libbpf into the running kernel and by bpfemu, the bundled
//! captures run through both (BPF_PROG_TEST_RUN and `XdpRuntime::run`), with the same
//! initial map entries; per packet the return value and `data_out` (or the errno) must be
//! equal, and at the end every map's contents.
//!
//! Per-CPU maps: the test thread is pinned to CPU 0 and bpfemu runs every packet on virtual
//! CPU 0 of as many as the machine has, so both hold the same copies.
//!
//! Configuration: the example map setups `examples/maps/NAME.json` (VIPs, rings, backends,
//! blocklists, ACLs, table entries, `.rodata`/`.data` knobs) are applied on both sides, so the
//! configured paths run too. The file is read with bpfemu's BTF-typed JSON reader, the entries
//! set in bpfemu's maps, and the very bytes bpfemu then holds (syscall-side layout: per-CPU
//! values once per possible CPU, padded to 8) are written into the kernel's maps after load;
//! `.rodata` goes in before load with `bpf_map__set_initial_value` (libbpf freezes it at
//! creation, so the kernel's verifier sees the configured constants as bpfemu's run does).
//!
//! Left out, with the reason:
//! - `router`: `bpf_fib_lookup` reads the routing table of the namespace the program runs in;
//!   it is compared in `tests/router_vs_kernel.rs`, inside a namespace built from
//!   `examples/fib/router.json`, the FIB bpfemu is given.
//! - `legacy_maps`: libbpf ≥ 1.0 refuses it (expected).
//! - `xsk_dispatch`'s XSKMAP entries: the kernel only takes the fd of a bound AF_XDP socket
//!   with a UMEM; without them both sides take the configured port's XDP_PASS fallback (its
//!   `.rodata` port is still set on both sides).
//! - `spin_lock`'s buckets: a token bucket refills by the clock (`bpf_ktime_get_ns` is the
//!   capture's timestamp in bpfemu, the kernel's monotonic clock in the kernel), so a rate
//!   limit configured there gives verdicts that depend on how fast the test runs.
//! - map contents that hold clock readings: `l4lb`'s connection table, `spin_lock`'s
//!   buckets, `ringbuf_events`' state; their packets are still compared.
//!
//! Skipped with a message when bpf() is out of reach, unless `BPFEMU_REQUIRE_KERNEL=1`.

mod common;

use bpfemu::jit::Engine;
use bpfemu::pcap::PcapReader;
use bpfemu::replay::hex;
use bpfemu::vm_runtime::build_runtime;
use bpfemu_conformance::libbpf::{LibbpfObject, LogOptions, kernel_or_skip, test_run};
use bpfemu_loader::btf::json::{MapValue, parse_map_contents};
use bpfemu_loader::{LoadOptions, MapOrigin, Object, load_file};
use bpfemu_vm::xdp::{PacketError, PacketMeta, XdpConfig, XdpRuntime};
use std::collections::BTreeMap;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::path::{Path, PathBuf};

mod kernel {
    //! Just enough of `bpf()` to read maps by fd, and CPU pinning.

    const BPF_MAP_LOOKUP_ELEM: i64 = 1;
    const BPF_MAP_GET_NEXT_KEY: i64 = 4;

    fn sys(cmd: i64, fd: i32, key: u64, value: u64, flags: u64) -> Result<(), i32> {
        let mut attr = [0u8; 128];
        attr[0..4].copy_from_slice(&(fd as u32).to_ne_bytes());
        attr[8..16].copy_from_slice(&key.to_ne_bytes());
        attr[16..24].copy_from_slice(&value.to_ne_bytes());
        attr[24..32].copy_from_slice(&flags.to_ne_bytes());
        // SAFETY: attr is a zero-padded union bpf_attr of 128 bytes; its key and value
        // pointers point at live buffers of the map's key size and (syscall) value size.
        let r = unsafe { libc::syscall(libc::SYS_bpf, cmd, attr.as_mut_ptr(), attr.len()) };
        if r < 0 {
            Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(0))
        } else {
            Ok(())
        }
    }

    pub fn lookup(fd: i32, key: &[u8], value_size: usize) -> Result<Vec<u8>, i32> {
        let mut out = vec![0u8; value_size];
        sys(
            BPF_MAP_LOOKUP_ELEM,
            fd,
            key.as_ptr() as u64,
            out.as_mut_ptr() as u64,
            0,
        )?;
        Ok(out)
    }

    pub fn next_key(fd: i32, key: Option<&[u8]>, key_size: usize) -> Result<Vec<u8>, i32> {
        let mut out = vec![0u8; key_size];
        let k = key.map_or(0, |k| k.as_ptr() as u64);
        sys(BPF_MAP_GET_NEXT_KEY, fd, k, out.as_mut_ptr() as u64, 0)?;
        Ok(out)
    }

    /// `num_possible_cpus()`, from sysfs.
    pub fn possible_cpus() -> u32 {
        let text = std::fs::read_to_string("/sys/devices/system/cpu/possible").unwrap_or_default();
        let last = text.trim().rsplit(['-', ',']).next();
        last.and_then(|n| n.parse::<u32>().ok())
            .map_or(1, |n| n + 1)
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

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Objects whose packets are compared; those without comparable map contents.
const SKIP_OBJECTS: &[&str] = &["router", "legacy_maps"];
const CLOCK_MAPS: &[&str] = &["conn_table", "buckets", "rate", "state", "last_summary"];

/// Map types whose contents the syscall side can list (hash, array and per-CPU kinds, LRU,
/// LPM).
fn listable(map_type: u32) -> bool {
    matches!(map_type, 1 | 2 | 5 | 6 | 9 | 10 | 11)
}

/// Maps of an example setup that only bpfemu can take (see the module docs): (object, map).
const BPFEMU_ONLY: &[(&str, &str)] = &[("xsk_dispatch", "xsks_map"), ("spin_lock", "buckets")];

/// One configured entry: the map's name, whether it is `.rodata` (set before load), the key and
/// the syscall-side value bpfemu holds after the update.
struct SetupEntry {
    map: String,
    rodata: bool,
    key: Vec<u8>,
    value: Vec<u8>,
}

/// Applies `examples/maps/STEM.json` (when there is one) to bpfemu's maps and returns the
/// entries for the kernel.
fn apply_setup_bpfemu(stem: &str, obj: &Object, rt: &mut XdpRuntime) -> Vec<SetupEntry> {
    let path = root().join(format!("examples/maps/{stem}.json"));
    let Ok(text) = std::fs::read_to_string(&path) else {
        return Vec::new();
    };
    let doc: serde_json::Value = serde_json::from_str(&text).expect("map setup is JSON");
    let contents = parse_map_contents(&doc, &obj.maps, obj.btf.as_ref())
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut out = Vec::new();
    for map in contents {
        if BPFEMU_ONLY.contains(&(stem, map.name.as_str())) {
            continue;
        }
        let spec = obj.maps.iter().find(|m| m.name == map.name).unwrap();
        let rodata =
            matches!(&spec.origin, MapOrigin::GlobalData { section } if section == ".rodata");
        let (maps, mem) = rt.maps_mut();
        let index = maps.index_of(&map.name).unwrap();
        let sys_size = maps.get(index).unwrap().sys_value_size();
        for entry in map.entries {
            let value = match entry.value {
                MapValue::Single(v) if sys_size > v.len() => {
                    let slot = v.len().div_ceil(8) * 8;
                    let mut all = Vec::new();
                    for _ in 0..sys_size / slot {
                        let mut one = v.clone();
                        one.resize(slot, 0);
                        all.extend(one);
                    }
                    all
                }
                MapValue::Single(v) => v,
                MapValue::PerCpu(vs) => vs
                    .iter()
                    .flat_map(|v| {
                        let mut one = v.clone();
                        one.resize(v.len().div_ceil(8) * 8, 0);
                        one
                    })
                    .collect(),
            };
            maps.sys_update(mem, index, &entry.key, &value, 0)
                .unwrap_or_else(|e| panic!("{stem}: bpfemu {}: {e}", map.name));
            let held = maps.sys_lookup(mem, index, &entry.key, 0).unwrap();
            out.push(SetupEntry {
                map: map.name.clone(),
                rodata,
                key: entry.key,
                value: held,
            });
        }
    }
    out
}

/// Both sides' contents of every listable map, by name.
type Dump = BTreeMap<String, BTreeMap<Vec<u8>, Vec<u8>>>;

fn kernel_dump(obj: &LibbpfObject, rt: &XdpRuntime) -> Dump {
    let mut out = Dump::new();
    for map in rt.maps().iter() {
        if !listable(map.map_type().raw()) || CLOCK_MAPS.contains(&map.name()) {
            continue;
        }
        let fd = obj.map_fd(map.name()).expect("kernel map").as_raw_fd();
        let (ks, vs) = (map.key_size(), map.sys_value_size());
        let mut entries = BTreeMap::new();
        let mut key: Option<Vec<u8>> = None;
        while let Ok(next) = kernel::next_key(fd, key.as_deref(), ks) {
            if let Ok(v) = kernel::lookup(fd, &next, vs) {
                entries.insert(next.clone(), v);
            }
            key = Some(next);
        }
        out.insert(map.name().to_string(), entries);
    }
    out
}

fn bpfemu_dump(rt: &XdpRuntime) -> Dump {
    let mut out = Dump::new();
    for (i, map) in rt.maps().iter().enumerate() {
        if !listable(map.map_type().raw()) || CLOCK_MAPS.contains(&map.name()) {
            continue;
        }
        let entries = rt
            .maps()
            .dump(rt.memory(), i)
            .unwrap()
            .into_iter()
            .collect();
        out.insert(map.name().to_string(), entries);
    }
    out
}

/// Sets the entries on the kernel's side: `.rodata` before load, the rest after it.
fn apply_setup_kernel(stem: &str, kobj: &mut LibbpfObject, entries: &[SetupEntry], loaded: bool) {
    for e in entries.iter().filter(|e| e.rodata != loaded) {
        if e.rodata {
            kobj.set_initial_value(&e.map, &e.value)
                .unwrap_or_else(|err| panic!("{stem}: kernel {}: {err}", e.map));
        } else {
            kobj.map_update(&e.map, &e.key, &e.value, 0)
                .unwrap_or_else(|err| panic!("{stem}: kernel {}: errno {err}", e.map));
        }
    }
}

/// Every packet of every bundled capture.
fn packets() -> Vec<(String, usize, u64, Vec<u8>)> {
    let mut caps: Vec<PathBuf> = std::fs::read_dir(root().join("examples/pcap"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "pcap"))
        .collect();
    caps.sort();
    let mut out = Vec::new();
    for cap in caps {
        let name = cap.file_name().unwrap().to_string_lossy().into_owned();
        for p in PcapReader::open(&cap).unwrap() {
            let p = p.unwrap();
            out.push((name.clone(), p.index, p.ts_ns, p.data));
        }
    }
    out
}

/// Compares one object; returns the number of packets compared.
fn compare_object(path: &Path, packets: &[(String, usize, u64, Vec<u8>)], engine: Engine) -> usize {
    let stem = path.file_name().unwrap().to_string_lossy();
    let stem = stem.split('.').next().unwrap().to_string();
    let obj = load_file(path, &LoadOptions::default()).expect("bpfemu loads");
    let cfg = XdpConfig {
        cpus: kernel::possible_cpus(),
        ..XdpConfig::default()
    };
    let mut rt = build_runtime(&obj, cfg).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let setup = apply_setup_bpfemu(&stem, &obj, &mut rt);
    let mut kobj = LibbpfObject::open_file(path).expect("libbpf opens");
    apply_setup_kernel(&stem, &mut kobj, &setup, false);
    let loaded = kobj.load(&LogOptions::default());
    assert!(
        loaded.result.is_ok(),
        "{}: kernel load failed: {}",
        path.display(),
        loaded.failure_tail(20)
    );
    apply_setup_kernel(&stem, &mut kobj, &setup, true);
    // After the kernel's verifier accepted the object: trusted code may run it.
    rt.set_engine(&*engine.build(None))
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut compared = 0;
    let mut verdicts: BTreeMap<String, usize> = BTreeMap::new();
    for prog in &obj.programs {
        let index = rt.program_index(&prog.name).unwrap();
        let fd: BorrowedFd<'_> = kobj.program_fd(&prog.name).expect("kernel program");
        for (cap, i, ts, data) in packets {
            let meta = PacketMeta {
                ts_ns: *ts,
                ..PacketMeta::default()
            };
            let ours = rt.run(index, data, &meta);
            let theirs = test_run(fd, data, None, 1);
            let at = format!("{} {} on {cap} packet {i}", path.display(), prog.name);
            match (ours, theirs) {
                (Ok(o), Ok(k)) => {
                    *verdicts.entry(format!("{:?}", o.action)).or_default() += 1;
                    assert_eq!(o.retval, k.retval, "{at}: retval");
                    assert_eq!(hex(&o.data_out), hex(&k.data), "{at}: data_out");
                }
                (Err(PacketError::Refused { errno, .. }), Err(kerr)) => {
                    *verdicts.entry(format!("errno {kerr}")).or_default() += 1;
                    assert_eq!(errno.0, kerr, "{at}: errno");
                }
                (o, k) => panic!("{at}: bpfemu {o:?}, kernel {k:?}"),
            }
            compared += 1;
        }
    }
    let dump = bpfemu_dump(&rt);
    assert_eq!(
        dump,
        kernel_dump(&kobj, &rt),
        "{}: map contents",
        path.display()
    );
    let entries: usize = dump.values().map(BTreeMap::len).sum();
    eprintln!(
        "{}: {} configured entries, {verdicts:?}, {entries} map entries equal",
        path.display(),
        setup.len()
    );
    compared
}

fn corpus(level: &str) -> Vec<PathBuf> {
    common::corpus(level, SKIP_OBJECTS)
        .into_iter()
        .map(|(_, path)| path)
        .collect()
}

fn compare_level(level: &str, engine: Engine) {
    if !kernel_or_skip("xdp_vs_kernel") {
        return;
    }
    kernel::pin_to_cpu0();
    let packets = packets();
    let mut total = 0;
    for obj in corpus(level) {
        let n = compare_object(&obj, &packets, engine);
        eprintln!("{}: {n} runs equal", obj.display());
        total += n;
    }
    eprintln!(
        "{level}, {}: {total} packet runs equal to the kernel's",
        engine.name()
    );
    assert!(total > 0);
}

#[test]
fn corpus_v2_matches_kernel() {
    compare_level("v2", Engine::Interp);
}

#[test]
fn corpus_v3_matches_kernel() {
    compare_level("v3", Engine::Interp);
}

#[test]
fn corpus_v4_matches_kernel() {
    compare_level("v4", Engine::Interp);
}

/// The JIT, checked, on the v3 corpus (v2 and v4 differ from v3 in instruction choice only;
/// the random-program equivalence in `jit/tests` covers every instruction).
#[test]
fn corpus_v3_matches_kernel_under_the_jit() {
    compare_level("v3", Engine::Jit);
}

/// The JIT on host memory, on the v4 corpus (movsx, sign-extending loads, gotol, bswap), each
/// object run only after the kernel's verifier accepted it.
#[test]
fn corpus_v4_matches_kernel_under_the_trusted_jit() {
    compare_level("v4", Engine::JitTrusted);
}

/// The baseline JIT (x86-64 templates) on host memory, on the v4 corpus and on v3 (whose
/// instruction choices differ: plain loads and byte swaps, no gotol), each object run only
/// after the kernel's verifier accepted it.
#[test]
fn corpus_v4_matches_kernel_under_the_baseline_jit() {
    compare_level("v4", Engine::JitBaseline);
}

#[test]
fn corpus_v3_matches_kernel_under_the_baseline_jit() {
    compare_level("v3", Engine::JitBaseline);
}

/// Packet sizes at test_run's limits: refused (with the kernel's errno) or run alike. Above
/// 3520 bytes the rest goes into fragments, up to 17 pages (73152 bytes in all); beyond that
/// the kernel refuses with ENOMEM. `tests/xdp_frags_vs_kernel.rs` covers the frag helpers.
#[test]
fn size_limits_match_kernel() {
    if !kernel_or_skip("size_limits_match_kernel") {
        return;
    }
    let path = root().join("examples/xdp/build/adjust_tail.v3.o");
    let mut kobj = LibbpfObject::open_file(&path).expect("libbpf opens");
    assert!(kobj.load(&LogOptions::default()).result.is_ok());
    let obj = load_file(&path, &LoadOptions::default()).expect("bpfemu loads");
    let mut rt = build_runtime(&obj, XdpConfig::default()).unwrap();
    let name = &obj.programs[0].name;
    let fd = kobj.program_fd(name).unwrap();
    for len in [
        0usize, 13, 14, 60, 1514, 3519, 3520, 3521, 9000, 73152, 73153,
    ] {
        let data = vec![0x45u8; len];
        let ours = rt.run(0, &data, &PacketMeta::default());
        let theirs = test_run(fd, &data, None, 1);
        match (ours, theirs) {
            (Ok(o), Ok(k)) => {
                assert_eq!(
                    (o.retval, hex(&o.data_out)),
                    (k.retval, hex(&k.data)),
                    "{len} bytes"
                )
            }
            (Err(PacketError::Refused { errno, .. }), Err(kerr)) => {
                assert_eq!(errno.0, kerr, "{len} bytes")
            }
            (o, k) => panic!("{len} bytes: bpfemu {o:?}, kernel {k:?}"),
        }
    }
}
