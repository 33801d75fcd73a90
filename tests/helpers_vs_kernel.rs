//! Every XDP helper held to the kernel on its own: small programs (kernel assembler syntax)
//! call one helper with random and edge arguments, store its return value and the stack
//! buffer it may have written into a result map, and return; the same program runs in the
//! kernel (BPF_PROG_TEST_RUN) and in bpfemu's XDP runtime, and everything is compared: the
//! program's return value, `data_out` (every packet byte), and every entry of every map
//! (the result map included, so every byte the helper wrote to the stack). bpfemu runs each
//! case twice, in its interpreter and in its (checked) JIT.
//!
//! Each family draws `BPFEMU_HELPER_CASES` random cases (default 8) besides its fixed edge
//! cases, from a seed (`BPFEMU_HELPER_SEED`, default fixed) printed on failure.
//!
//! Skipped with a message when bpf() is out of reach, unless `BPFEMU_REQUIRE_KERNEL=1`.
//! `DEBUG_HELPERS=1` prints both sides' r0 and output bytes for each case that differs.

use bpfemu::replay::hex;
use bpfemu_conformance::libbpf::{
    CpuPin, kernel_or_skip, map_entries_fd, possible_cpus, sys_value_size, test_run,
};
use bpfemu_isa::RawInsn;
use bpfemu_isa::asm::assemble_kernel;
use bpfemu_kernel::netns::Netns;
use bpfemu_kernel::{self as kernel, BPF_PROG_TYPE_XDP};
use bpfemu_vm::rng::Rng;
use bpfemu_vm::xdp::{MapInit, PacketMeta, XdpConfig, XdpProgramSpec, XdpRuntime};
use bpfemu_vm::{MapSpec, MapType};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};

/// Bytes of the stack buffer every program fills before the call and copies out after it:
/// `[r10 - 512, r10 - 8)`; `r10 - 8` holds the result map's key.
const BUF: i32 = 504;
/// The result map's value: the helper's r0, then the stack buffer.
const RESULT_VALUE: u32 = 8 + BUF as u32;
/// `BPF_F_XDP_HAS_FRAGS`: the program takes multi-buffer frames.
const BPF_F_XDP_HAS_FRAGS: u32 = 1 << 5;
/// The immediate that stands for map N in a program's text until it is bound.
const MAP_MARK: i32 = 0x5eed_0000;
/// The immediate that stands for callback N (`CB<N>`) until it becomes a `BPF_PSEUDO_FUNC`.
const CALLBACK_MARK: i32 = 0x5eed_1000;
/// The line that starts a callback's text after the main program's.
const CALLBACK_START: &str = "\nCALLBACK\n";

/// A map of a case: created on both sides, filled with `entries`, compared after the run.
#[derive(Clone, Debug)]
struct MapDef {
    map_type: MapType,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    flags: u32,
    /// For a prog array, each entry's value is the index (u32) of a [`Case::targets`] program.
    entries: Vec<(Vec<u8>, Vec<u8>)>,
    /// Frozen after its entries are written (constant strings must live in such a map).
    frozen: bool,
    /// The value is `struct { struct bpf_spin_lock lock; u32 data; }`, described by BTF.
    spin_lock: bool,
    /// For a map of maps: the map (number) its inner maps are like; its entries' values are
    /// map numbers (u32).
    inner: Option<usize>,
}

impl MapDef {
    fn new(map_type: MapType, key_size: u32, value_size: u32, max_entries: u32) -> MapDef {
        MapDef {
            map_type,
            key_size,
            value_size,
            max_entries,
            flags: 0,
            entries: Vec::new(),
            frozen: false,
            spin_lock: false,
            inner: None,
        }
    }

    /// Whether both sides can list its entries through the syscall side.
    fn comparable(&self) -> bool {
        matches!(
            self.map_type,
            MapType::Array
                | MapType::Hash
                | MapType::LruHash
                | MapType::PercpuArray
                | MapType::PercpuHash
                | MapType::LruPercpuHash
                | MapType::LpmTrie
                | MapType::Devmap
                | MapType::DevmapHash
        )
    }
}

/// One program run on one packet.
#[derive(Clone, Debug)]
struct Case {
    label: String,
    /// Map 1 onwards (map 0 is the result map); the program names map N as `MAP<N>`.
    maps: Vec<MapDef>,
    /// What runs between the buffer fill and the result copy: it may use r6 (ctx) and must
    /// leave the helper's return value in r0.
    body: String,
    packet: Vec<u8>,
    prog_flags: u32,
    /// Callbacks the body names as `CB<N>` (each a function of its own after the program).
    callbacks: Vec<String>,
    /// Whole programs a prog array's entries name (tail call targets).
    targets: Vec<String>,
}

impl Case {
    fn new(label: impl Into<String>, body: impl Into<String>, packet: Vec<u8>) -> Case {
        Case {
            label: label.into(),
            maps: Vec::new(),
            body: body.into(),
            packet,
            prog_flags: 0,
            callbacks: Vec::new(),
            targets: Vec::new(),
        }
    }

    fn with_target(mut self, text: impl Into<String>) -> Case {
        self.targets.push(text.into());
        self
    }

    fn with_callback(mut self, text: impl Into<String>) -> Case {
        self.callbacks.push(text.into());
        self
    }

    fn with_map(mut self, map: MapDef) -> Case {
        self.maps.push(map);
        self
    }

    fn all_maps(&self) -> Vec<MapDef> {
        let mut result = MapDef::new(MapType::Array, 4, RESULT_VALUE, 1);
        result
            .entries
            .push((vec![0; 4], vec![0; RESULT_VALUE as usize]));
        std::iter::once(result)
            .chain(self.maps.iter().cloned())
            .collect()
    }

    /// The whole program's text, with `MAP<N>` standing for map N.
    fn source(&self, fill_seed: u64) -> String {
        let mut src = String::from("r6 = r1\n");
        let mut rng = Rng::from_state(fill_seed | 1);
        for off in (8..=512).rev().step_by(8).filter(|o| *o > 8) {
            src += &format!("r1 = {:#x} ll\n*(u64 *)(r10 -{off}) = r1\n", rng.next_u64());
        }
        src += "r1 = 0\n*(u64 *)(r10 -8) = r1\n";
        src += &self.body;
        src += "\nr7 = r0\nr1 = MAP0\nr2 = r10\nr2 += -8\ncall bpf_map_lookup_elem#1\n\
                if r0 == 0x0 goto done\n*(u64 *)(r0 +0) = r7\n";
        for i in 0..BUF / 8 {
            src += &format!(
                "r1 = *(u64 *)(r10 -{})\n*(u64 *)(r0 +{}) = r1\n",
                512 - 8 * i,
                8 + 8 * i
            );
        }
        src += "done:\nr0 = 2\nexit\n";
        for callback in &self.callbacks {
            src += CALLBACK_START;
            src += callback;
        }
        src
    }
}

/// Assembles `src`, binding `MAP<N>` to `bind(N)` as a `BPF_PSEUDO_MAP_FD` reference and
/// `CB<N>` to the N-th function after the main program as a `BPF_PSEUDO_FUNC` one.
fn assemble(src: &str, bind: impl Fn(usize) -> i32) -> Vec<RawInsn> {
    assemble_functions(src, bind).0
}

/// [`assemble`], and where each function starts (the main program at 0, then the callbacks).
fn assemble_functions(src: &str, bind: impl Fn(usize) -> i32) -> (Vec<RawInsn>, Vec<i32>) {
    let mut text = src.to_string();
    for n in (0..16).rev() {
        text = text.replace(
            &format!("MAP{n}"),
            &format!("{:#x} ll", MAP_MARK as i64 + n as i64),
        );
        text = text.replace(
            &format!("CB{n}"),
            &format!("{:#x} ll", CALLBACK_MARK as i64 + n as i64),
        );
    }
    // Each function is assembled on its own (labels stay local); callback N starts where the
    // functions before it end.
    let mut insns = Vec::new();
    let mut starts = Vec::new();
    for function in text.split(CALLBACK_START) {
        starts.push(insns.len() as i32);
        insns.extend(assemble_kernel(function).unwrap_or_else(|e| panic!("{e}\n{function}")));
    }
    let mut pc = 0;
    while pc + 1 < insns.len() {
        let i = insns[pc];
        if i.code == 0x18 && i.src == 0 && insns[pc + 1].imm == 0 {
            let n = i.imm.wrapping_sub(MAP_MARK);
            let f = i.imm.wrapping_sub(CALLBACK_MARK);
            if (0..16).contains(&n) {
                insns[pc].src = 1;
                insns[pc].imm = bind(n as usize);
            } else if (0..15).contains(&f) && (f as usize) + 1 < starts.len() {
                insns[pc].src = 4;
                insns[pc].imm = starts[f as usize + 1] - pc as i32 - 1;
            }
            pc += 2;
        } else {
            pc += 1;
        }
    }
    (insns, starts)
}

/// A BTF blob with `int` and a static `int fN(void)` for each function, and the func_info
/// records that place them at `starts`: what the kernel asks of a program with callbacks.
fn functions_btf(starts: &[i32]) -> (Vec<u8>, Vec<kernel::FuncInfo>) {
    const KIND_INT: u32 = 1;
    const KIND_FUNC: u32 = 12;
    const KIND_FUNC_PROTO: u32 = 13;
    let mut strings = b"\0int\0".to_vec();
    // [1] int (signed, 32 bits); [2] int (void); [3..] the functions.
    let mut words = vec![
        1,
        KIND_INT << 24,
        4,
        0x0100_0020,
        0,
        KIND_FUNC_PROTO << 24,
        1,
    ];
    let mut info = Vec::new();
    for (n, &start) in starts.iter().enumerate() {
        words.extend([strings.len() as u32, KIND_FUNC << 24, 2]);
        strings.extend_from_slice(format!("f{n}\0").as_bytes());
        info.push(kernel::FuncInfo {
            insn_off: start as u32,
            type_id: 3 + n as u32,
        });
    }
    (btf_blob(&words, &strings), info)
}

/// A BTF blob of `[1] u32`, `[2] struct bpf_spin_lock { u32 val; }` and
/// `[3] struct locked { struct bpf_spin_lock lock; u32 data; }`: what a map value holding a
/// spin lock must be described by.
fn spin_lock_btf() -> Vec<u8> {
    const KIND_INT: u32 = 1;
    const KIND_STRUCT: u32 = 4;
    let strings = b"\0u32\0bpf_spin_lock\0val\0locked\0lock\0data\0";
    let at = |name: &str| {
        strings
            .windows(name.len() + 2)
            .position(|w| {
                w[0] == 0 && &w[1..=name.len()] == name.as_bytes() && w[name.len() + 1] == 0
            })
            .expect("a name in the table") as u32
            + 1
    };
    let words = [
        at("u32"),
        KIND_INT << 24,
        4,
        32,
        at("bpf_spin_lock"),
        KIND_STRUCT << 24 | 1,
        4,
        at("val"),
        1,
        0,
        at("locked"),
        KIND_STRUCT << 24 | 2,
        8,
        at("lock"),
        2,
        0,
        at("data"),
        1,
        32,
    ];
    btf_blob(&words, strings)
}

/// A BTF blob from its type section (as words) and its string section.
fn btf_blob(words: &[u32], strings: &[u8]) -> Vec<u8> {
    let types: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    let mut blob = vec![0x9f, 0xeb, 1, 0];
    let header = [
        24,
        0,
        types.len() as u32,
        types.len() as u32,
        strings.len() as u32,
    ];
    blob.extend(header.iter().flat_map(|w| w.to_le_bytes()));
    blob.extend(types);
    blob.extend(strings);
    blob
}

/// The maps' contents after a run: (map number, key, syscall-side value), sorted.
type Dump = Vec<(usize, Vec<u8>, Vec<u8>)>;

/// What one side gave: the program's return value and `data_out`, and the maps.
#[derive(Debug, PartialEq, Eq)]
struct Seen {
    retval: u32,
    data: Vec<u8>,
    maps: Dump,
}

fn run_kernel(case: &Case, src: &str, cpus: u32) -> Result<Seen, String> {
    let defs = case.all_maps();
    let lock_btf = kernel::btf_load(&spin_lock_btf())
        .map_err(|(e, log)| format!("spin lock BTF load: errno {e}: {log}"))?;
    let mut fds: Vec<OwnedFd> = Vec::new();
    for (n, d) in defs.iter().enumerate() {
        let fd = kernel::map_create(&kernel::MapSpec {
            map_type: d.map_type.raw(),
            key_size: d.key_size,
            value_size: d.value_size,
            max_entries: d.max_entries,
            map_flags: d.flags,
            inner_map_fd: d.inner.map(|n| fds[n].as_raw_fd()),
            btf: d.spin_lock.then(|| kernel::MapBtf {
                fd: lock_btf.as_raw_fd(),
                key_type_id: 1,
                value_type_id: 3,
            }),
            ..Default::default()
        })
        .map_err(|e| format!("map {n}: create: errno {e}"))?;
        if d.map_type != MapType::ProgArray && d.inner.is_none() {
            for (k, v) in &d.entries {
                let value = per_cpu_value(d, v, cpus);
                bpfemu_conformance::libbpf::map_update_fd(fd.as_fd(), k, &value, 0)
                    .map_err(|e| format!("map {n}: update: errno {e}"))?;
            }
        }
        if d.frozen {
            kernel::map_freeze(fd.as_fd()).map_err(|e| format!("map {n}: freeze: errno {e}"))?;
        }
        fds.push(fd);
    }
    let mut targets = Vec::new();
    for (t, text) in case.targets.iter().enumerate() {
        let insns = assemble(text, |n| kernel::fd_imm(&fds[n]));
        let opts = kernel::LoadOptions::new(BPF_PROG_TYPE_XDP, &insns);
        let fd = kernel::prog_load(&opts)
            .fd
            .map_err(|e| format!("target {t}: load: errno {e}"))?;
        targets.push(fd);
    }
    for (n, d) in defs.iter().enumerate() {
        if d.map_type != MapType::ProgArray && d.inner.is_none() {
            continue;
        }
        for (k, v) in &d.entries {
            let target = u32::from_le_bytes(v[..4].try_into().expect("a u32")) as usize;
            let fd = if d.inner.is_some() {
                fds[target].as_raw_fd()
            } else {
                targets[target].as_raw_fd()
            };
            let value = (fd as u32).to_ne_bytes();
            bpfemu_conformance::libbpf::map_update_fd(fds[n].as_fd(), k, &value, 0)
                .map_err(|e| format!("map {n}: slot: errno {e}"))?;
        }
    }
    let (insns, starts) = assemble_functions(src, |n| kernel::fd_imm(&fds[n]));
    let mut opts = kernel::LoadOptions::new(BPF_PROG_TYPE_XDP, &insns);
    opts.prog_flags = case.prog_flags;
    // Callbacks need BTF describing each function.
    let (btf, func_info) = functions_btf(&starts);
    let btf_fd = if starts.len() > 1 {
        Some(kernel::btf_load(&btf).map_err(|(e, log)| format!("BTF load: errno {e}: {log}"))?)
    } else {
        None
    };
    if let Some(fd) = &btf_fd {
        opts.prog_btf_fd = Some(fd.as_raw_fd());
        opts.func_info = &func_info;
    }
    opts.log_level = 0;
    let load = kernel::prog_load(&opts);
    let prog = match load.fd {
        Ok(fd) => fd,
        Err(e) => {
            let mut opts = opts.clone();
            opts.log_level = 1;
            let log = kernel::prog_load(&opts).log;
            let tail: Vec<&str> = log.lines().rev().take(6).collect();
            return Err(format!("kernel load: errno {e}: {}", tail.join(" | ")));
        }
    };
    let out = test_run(prog.as_fd(), &case.packet, None, 1)
        .map_err(|e| format!("test_run: errno {e}"))?;
    let mut maps = Vec::new();
    for (n, (d, fd)) in defs.iter().zip(&fds).enumerate() {
        if !d.comparable() {
            continue;
        }
        let value_len = sys_value_size(d.map_type.raw(), d.value_size, cpus);
        let entries = map_entries_fd(fd.as_fd(), d.key_size as usize, value_len, 1 << 16)
            .map_err(|e| format!("map {n}: dump: errno {e}"))?;
        maps.extend(entries.into_iter().map(|(k, v)| (n, k, v)));
    }
    maps.sort();
    Ok(Seen {
        retval: out.retval,
        data: out.data,
        maps,
    })
}

fn per_cpu_value(d: &MapDef, v: &[u8], cpus: u32) -> Vec<u8> {
    if !matches!(
        d.map_type,
        MapType::PercpuArray | MapType::PercpuHash | MapType::LruPercpuHash
    ) {
        return v.to_vec();
    }
    let slot = (d.value_size as usize).div_ceil(8) * 8;
    let mut out = Vec::new();
    for _ in 0..cpus {
        let mut one = v.to_vec();
        one.resize(slot, 0);
        out.extend(one);
    }
    out
}

/// Runs `case` in bpfemu, with the interpreter or the (checked) JIT.
fn run_bpfemu(
    case: &Case,
    src: &str,
    cpus: u32,
    jit: Option<bpfemu_jit::Mode>,
) -> Result<Seen, String> {
    let defs = case.all_maps();
    let specs = defs
        .iter()
        .enumerate()
        .map(|(n, d)| {
            let mut spec = MapSpec::new(
                &format!("map{n}"),
                d.map_type,
                d.key_size,
                d.value_size,
                d.max_entries,
            );
            spec.map_flags = d.flags;
            spec.spin_lock_off = d.spin_lock.then_some(0);
            if let Some(template) = d.inner {
                let t = &defs[template];
                spec = spec.with_inner(MapSpec::new(
                    &format!("map{template}"),
                    t.map_type,
                    t.key_size,
                    t.value_size,
                    t.max_entries,
                ));
            }
            let mut init = MapInit::default();
            if d.inner.is_some() {
                init.map_slots = d
                    .entries
                    .iter()
                    .map(|(k, v)| {
                        let slot = u32::from_le_bytes(k[..4].try_into().expect("a u32"));
                        let map = u32::from_le_bytes(v[..4].try_into().expect("a u32"));
                        (slot, map as usize)
                    })
                    .collect();
            }
            if d.map_type == MapType::ProgArray {
                init.prog_slots = d
                    .entries
                    .iter()
                    .map(|(k, v)| {
                        let slot = u32::from_le_bytes(k[..4].try_into().expect("a u32"));
                        let target = u32::from_le_bytes(v[..4].try_into().expect("a u32"));
                        (slot, 1 + target as usize)
                    })
                    .collect();
            }
            (spec, init)
        })
        .collect();
    let insns = assemble(src, |n| n as i32);
    let cfg = XdpConfig {
        cpus,
        // The kernel has no budget: a bpf_loop of 1 << 23 calls must run to its end.
        insn_budget: 1 << 30,
        ..XdpConfig::default()
    };
    let mut progs = vec![XdpProgramSpec {
        name: "helper".into(),
        insns,
    }];
    for (t, text) in case.targets.iter().enumerate() {
        progs.push(XdpProgramSpec {
            name: format!("target{t}"),
            insns: assemble(text, |n| n as i32),
        });
    }
    let mut rt = XdpRuntime::new(progs, specs, cfg).map_err(|e| format!("runtime: {e}"))?;
    if let Some(mode) = jit {
        rt.set_engine(&bpfemu_jit::Jit::new(mode))
            .map_err(|e| format!("JIT: {e}"))?;
    }
    {
        let (maps, mem) = rt.maps_mut();
        for (n, d) in defs.iter().enumerate() {
            if d.map_type == MapType::ProgArray || d.inner.is_some() {
                continue;
            }
            for (k, v) in &d.entries {
                maps.sys_update(mem, n, k, &per_cpu_value(d, v, cpus), 0)
                    .map_err(|e| format!("map {n}: update: {e}"))?;
            }
        }
    }
    let out = rt
        .run(0, &case.packet, &PacketMeta::default())
        .map_err(|e| format!("run: {e}"))?;
    let mut maps = Vec::new();
    let (registry, mem) = rt.maps_mut();
    for (n, d) in defs.iter().enumerate() {
        if !d.comparable() {
            continue;
        }
        let entries = registry
            .dump(mem, n)
            .map_err(|e| format!("map {n}: dump: {e}"))?;
        maps.extend(entries.into_iter().map(|(k, v)| (n, k, v)));
    }
    maps.sort();
    Ok(Seen {
        retval: out.retval,
        data: out.data_out,
        maps,
    })
}

/// Runs every case on both sides; panics with every difference found.
fn check_all(family: &str, cases: &[Case]) {
    if !kernel_or_skip(family) {
        return;
    }
    let _pin = CpuPin::new(0).expect("pin to CPU 0");
    let cpus = possible_cpus().expect("possible CPUs");
    // The kernel side runs in a fresh namespace (the loopback alone), as bpfemu without a
    // FIB models it, so the host's devices and routes play no part.
    let netns = Netns::create("bpfemu-helpers").unwrap_or_else(|e| panic!("{e}"));
    // IPv4 settings a new namespace inherits from the host's: set them as a fresh host has them.
    for key in [
        "net.ipv4.conf.all.forwarding",
        "net.ipv4.conf.lo.forwarding",
    ] {
        netns.sysctl(key, "0").unwrap_or_else(|e| panic!("{e}"));
    }
    let sources: Vec<String> = (0..cases.len())
        .map(|i| cases[i].source(i as u64 * 0x9e37_79b9 + 17))
        .collect();
    let kernel_seen: Vec<Result<Seen, String>> = netns.run_in(|| {
        let _pin = CpuPin::new(0).expect("pin to CPU 0");
        cases
            .iter()
            .zip(&sources)
            .map(|(case, src)| run_kernel(case, src, cpus))
            .collect()
    });
    let mut failures = Vec::new();
    for ((case, src), kernel) in cases.iter().zip(&sources).zip(kernel_seen) {
        if let Err(k) = &kernel {
            failures.push(format!("{family}: {}: kernel: {k}", case.label));
            continue;
        }
        // The kernel's verifier accepted the case: trusted code may run it too.
        for (engine, jit) in [
            ("interp", None),
            ("jit", Some(bpfemu_jit::Mode::Checked)),
            ("jit-trusted", Some(bpfemu_jit::Mode::Trusted)),
        ] {
            let ours = run_bpfemu(case, src, cpus, jit);
            match (&kernel, &ours) {
                (Ok(k), Ok(o)) if k == o => {}
                (Ok(k), Ok(o)) => failures.push(format!(
                    "{family}: {} ({engine}): {}",
                    case.label,
                    describe_difference(k, o)
                )),
                (_, Err(o)) => {
                    failures.push(format!("{family}: {} ({engine}): bpfemu: {o}", case.label))
                }
                (Err(_), Ok(_)) => unreachable!("kernel failures are taken above"),
            }
        }
    }
    eprintln!("{family}: {} cases, {} differ", cases.len(), failures.len());
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

fn describe_difference(k: &Seen, o: &Seen) -> String {
    if std::env::var_os("DEBUG_HELPERS").is_some() {
        for (side, seen) in [("kernel", k), ("bpfemu", o)] {
            if let Some((_, _, v)) = seen.maps.iter().find(|(n, _, _)| *n == 0) {
                eprintln!(
                    "{side}: r0 {:x?} stack {:?}",
                    &v[..8],
                    String::from_utf8_lossy(&v[8..])
                );
            }
        }
    }
    if k.retval != o.retval {
        return format!("retval: kernel {:#x}, bpfemu {:#x}", k.retval, o.retval);
    }
    if k.data != o.data {
        let first = k.data.iter().zip(&o.data).position(|(a, b)| a != b);
        return format!(
            "data_out: kernel {} bytes, bpfemu {}, first difference at {first:?}\n kernel {}\n bpfemu {}",
            k.data.len(),
            o.data.len(),
            hex(&k.data[..k.data.len().min(80)]),
            hex(&o.data[..o.data.len().min(80)])
        );
    }
    for (n, key, kv) in &k.maps {
        let Some((_, _, ov)) = o.maps.iter().find(|(m, ok, _)| m == n && ok == key) else {
            continue;
        };
        if let Some(at) = kv.iter().zip(ov.iter()).position(|(a, b)| a != b) {
            let window = |v: &[u8]| hex(&v[at..(at + 16).min(v.len())]);
            let place = if *n == 0 && at >= 8 {
                format!(" (stack r10 -{})", 512 - (at - 8))
            } else {
                String::new()
            };
            return format!(
                "map {n} key {}: first difference at value byte {at}{place}: kernel {}, bpfemu {}",
                hex(key),
                window(kv),
                window(ov)
            );
        }
    }
    let kset: Vec<_> = k.maps.iter().filter(|e| !o.maps.contains(e)).collect();
    let oset: Vec<_> = o.maps.iter().filter(|e| !k.maps.contains(e)).collect();
    let show = |v: &[&(usize, Vec<u8>, Vec<u8>)]| {
        v.iter()
            .take(2)
            .map(|(n, key, val)| {
                let r0 = if *n == 0 && val.len() >= 8 {
                    format!(
                        " (r0 {:#x})",
                        u64::from_le_bytes(val[..8].try_into().expect("8 bytes"))
                    )
                } else {
                    String::new()
                };
                format!(
                    "map {n} key {}{r0} value {}",
                    hex(key),
                    hex(&val[..val.len().min(64)])
                )
            })
            .collect::<Vec<_>>()
            .join("; ")
    };
    format!(
        "maps: kernel only [{}]\n bpfemu only [{}]",
        show(&kset),
        show(&oset)
    )
}

fn rng(family: &str) -> Rng {
    let seed = std::env::var("BPFEMU_HELPER_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x0bad_cafe_u64);
    let mix = family
        .bytes()
        .fold(seed, |h, b| h.rotate_left(5) ^ b as u64);
    Rng::from_state(mix | 1)
}

fn random_cases() -> usize {
    std::env::var("BPFEMU_HELPER_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(8)
}

/// An Ethernet/IPv4/UDP-looking packet of `len` bytes (at least 14).
fn packet(rng: &mut Rng, len: usize) -> Vec<u8> {
    let mut p = rng.bytes(len.max(14));
    p[12] = 0x08;
    p[13] = 0x00;
    p
}

/// `rN = r10; rN += -off`: a pointer `off` bytes below the frame into the filled buffer.
fn stack_ptr(reg: u8, off: i32) -> String {
    format!("r{reg} = r10\nr{reg} += -{off}\n")
}

// ---------------------------------------------------------------------------------------------
// bpf_csum_diff

fn csum_diff_case(
    label: String,
    from: Option<(i32, u32)>,
    to: Option<(i32, u32)>,
    seed: u64,
) -> Case {
    let mut body = String::new();
    match from {
        Some((off, size)) => body += &(stack_ptr(1, off) + &format!("r2 = {size}\n")),
        None => body += "r1 = 0\nr2 = 0\n",
    }
    match to {
        Some((off, size)) => body += &(stack_ptr(3, off) + &format!("r4 = {size}\n")),
        None => body += "r3 = 0\nr4 = 0\n",
    }
    body += &format!("r5 = {seed:#x} ll\ncall bpf_csum_diff#28\n");
    let mut r = Rng::from_state(seed | 1);
    Case::new(label, body, packet(&mut r, 64))
}

#[test]
fn csum_diff_equals_the_kernels() {
    let mut r = rng("csum_diff");
    let mut cases = vec![
        csum_diff_case("nothing, seed 0".into(), None, None, 0),
        csum_diff_case(
            "nothing, seed high".into(),
            None,
            None,
            0xdead_beef_1234_5678,
        ),
        csum_diff_case("to 20, seed 0".into(), None, Some((512, 20)), 0),
        csum_diff_case("from 20, seed 0".into(), Some((512, 20)), None, 0),
        csum_diff_case("same 16 both".into(), Some((400, 16)), Some((400, 16)), 0),
        csum_diff_case("from 4 to 8".into(), Some((100, 4)), Some((200, 8)), 0x1234),
        csum_diff_case(
            "odd sizes".into(),
            Some((97, 7)),
            Some((301, 13)),
            0xffff_ffff,
        ),
        csum_diff_case("odd address".into(), Some((511, 3)), Some((33, 1)), 1),
        csum_diff_case("largest".into(), Some((512, 504)), Some((512, 504)), 0),
        csum_diff_case("40 bytes".into(), None, Some((256, 40)), 0xffff),
        csum_diff_case("80 bytes".into(), Some((500, 80)), None, 77),
        csum_diff_case("to 0 from 0 seed".into(), None, None, 0xffff_0000),
    ];
    for i in 0..random_cases() * 4 {
        let side = |r: &mut Rng| {
            if r.below(4) == 0 {
                return None;
            }
            let size = (*r.pick(&[
                1u32, 2, 3, 4, 5, 8, 12, 20, 40, 63, 64, 65, 100, 255, 256, 504,
            ]))
            .min(r.below(504) as u32 + 1);
            let off = 8 + size as i32 + r.below((504 - size) as u64 + 1) as i32;
            Some((off.min(512), size))
        };
        let (from, to) = (side(&mut r), side(&mut r));
        let seed = match r.below(3) {
            0 => r.next_u64() as u32 as u64,
            1 => r.next_u64(),
            _ => 0,
        };
        cases.push(csum_diff_case(
            format!("random {i}: from {from:?} to {to:?} seed {seed:#x}"),
            from,
            to,
            seed,
        ));
    }
    check_all("csum_diff", &cases);
}

// ---------------------------------------------------------------------------------------------
// Packet helpers: frame bounds, bytes, length, MTU

/// Packet lengths: the smallest, small odd ones, common ones, the linear part's limit.
const PACKET_LENS: &[usize] = &[14, 15, 33, 60, 64, 100, 255, 1500, 3519, 3520];

fn packet_case(r: &mut Rng, label: &str, body: String) -> Case {
    let len = *r.pick(PACKET_LENS);
    Case::new(format!("{label} on {len} bytes"), body, packet(r, len))
}

/// Frame-bound deltas: zero, small and odd, at and past the headroom and the packet length.
fn delta(r: &mut Rng) -> i64 {
    match r.below(3) {
        0 => *r.pick(&[
            0i64, 1, -1, 4, -4, 14, -14, 255, 256, -256, -257, 3520, -3520,
        ]),
        1 => r.below(600) as i64 - 300,
        _ => r.next_u64() as i32 as i64,
    }
}

#[test]
fn frame_bound_helpers_equal_the_kernels() {
    let mut r = rng("frame");
    let mut cases = Vec::new();
    for (id, name) in [
        (44, "xdp_adjust_head"),
        (54, "xdp_adjust_meta"),
        (65, "xdp_adjust_tail"),
    ] {
        for _ in 0..random_cases() * 2 {
            let d = delta(&mut r);
            let body = format!("r1 = r6\nr2 = {d}\ncall bpf_{name}#{id}\n");
            cases.push(packet_case(&mut r, &format!("{name}({d})"), body));
        }
        // Twice in a row: the second call sees the first's frame.
        let (a, b) = (delta(&mut r), delta(&mut r));
        let body = format!(
            "r1 = r6\nr2 = {a}\ncall bpf_{name}#{id}\nr1 = r6\nr2 = {b}\ncall bpf_{name}#{id}\n"
        );
        cases.push(packet_case(
            &mut r,
            &format!("{name}({a}) then ({b})"),
            body,
        ));
    }
    // Metadata then head: the head may not cross the metadata.
    for _ in 0..random_cases() {
        let (m, h) = (-(r.below(64) as i64) * 4, delta(&mut r));
        let body = format!(
            "r1 = r6\nr2 = {m}\ncall bpf_xdp_adjust_meta#54\nr1 = r6\nr2 = {h}\n\
             call bpf_xdp_adjust_head#44\n"
        );
        cases.push(packet_case(
            &mut r,
            &format!("meta({m}) then head({h})"),
            body,
        ));
    }
    check_all("frame bounds", &cases);
}

#[test]
fn packet_byte_helpers_equal_the_kernels() {
    let mut r = rng("bytes");
    let mut cases = Vec::new();
    for _ in 0..random_cases() * 3 {
        let len = *r.pick(&[1u32, 2, 3, 4, 7, 8, 13, 64, 100, 503, 504]);
        let off = *r.pick(&[0u32, 1, 13, 14, 59, 60, 61, 99, 100, 3519]);
        let off = if r.below(3) == 0 {
            r.below(4000) as u32
        } else {
            off
        };
        let buf = 8 + len as i32 + r.below((BUF - len as i32) as u64 + 1) as i32;
        let buf = buf.min(512);
        for (id, name) in [(189, "xdp_load_bytes"), (190, "xdp_store_bytes")] {
            let body = format!(
                "r1 = r6\nr2 = {off}\n{}r4 = {len}\ncall bpf_{name}#{id}\n",
                stack_ptr(3, buf)
            );
            cases.push(packet_case(
                &mut r,
                &format!("{name}(off {off}, len {len})"),
                body,
            ));
        }
    }
    // Multi-buffer frames: bytes across the linear part's end and the fragments.
    for _ in 0..random_cases() {
        let len = *r.pick(&[3521usize, 5000, 7617, 9000]);
        let off = *r.pick(&[3500u32, 3519, 3520, 4000, 7616, 8990]);
        let n = *r.pick(&[1u32, 20, 64, 400]);
        for (id, name) in [(189, "xdp_load_bytes"), (190, "xdp_store_bytes")] {
            let body = format!(
                "r1 = r6\nr2 = {off}\n{}r4 = {n}\ncall bpf_{name}#{id}\n",
                stack_ptr(3, 8 + n as i32)
            );
            let mut case = Case::new(
                format!("{name}(off {off}, len {n}) on {len} bytes, frags"),
                body,
                packet(&mut r, len),
            );
            case.prog_flags = BPF_F_XDP_HAS_FRAGS;
            cases.push(case);
        }
    }
    // Growing and shrinking a multi-buffer frame's tail: within the last fragment, across
    // fragments, into the linear part.
    for _ in 0..random_cases() {
        let len = *r.pick(&[3521usize, 5000, 7617, 9000]);
        let d = *r.pick(&[-1i64, -97, -1500, -4097, -5000, 1, 100, 3000, 4096, 0]);
        let mut case = Case::new(
            format!("adjust_tail({d}) then get_buff_len on {len} bytes, frags"),
            format!(
                "r1 = r6\nr2 = {d}\ncall bpf_xdp_adjust_tail#65\n*(u64 *)(r10 -400) = r0\n\
                 r1 = r6\ncall bpf_xdp_get_buff_len#188\n"
            ),
            packet(&mut r, len),
        );
        case.prog_flags = BPF_F_XDP_HAS_FRAGS;
        cases.push(case);
    }
    for _ in 0..random_cases() {
        let d = delta(&mut r);
        let body = format!(
            "r1 = r6\nr2 = {d}\ncall bpf_xdp_adjust_tail#65\nr1 = r6\ncall bpf_xdp_get_buff_len#188\n"
        );
        cases.push(packet_case(
            &mut r,
            &format!("get_buff_len after tail({d})"),
            body,
        ));
    }
    check_all("packet bytes", &cases);
}

#[test]
fn check_mtu_equals_the_kernels() {
    let mut r = rng("mtu");
    let mut cases = Vec::new();
    for _ in 0..random_cases() * 3 {
        let ifindex = *r.pick(&[0u32, 1, 2, 99]);
        let any = r.next_u64();
        let mtu_len = *r.pick(&[0u32, 1, 1500, 65536, 65522, 70000, any as u32]);
        let len_diff = *r.pick(&[0i64, 1, -1, 65536, -65536, 100_000, any as i32 as i64]);
        let flags = *r.pick(&[0u64, 0, 1, 2, 4]);
        let body = format!(
            "r1 = {mtu_len:#x} ll\n*(u32 *)(r10 -16) = r1\nr1 = r6\nr2 = {ifindex}\n{}\
             r4 = {len_diff}\nr5 = {flags}\ncall bpf_check_mtu#163\n",
            stack_ptr(3, 16)
        );
        let label =
            format!("check_mtu(if {ifindex}, mtu_len {mtu_len}, diff {len_diff}, flags {flags})");
        cases.push(packet_case(&mut r, &label, body));
    }
    check_all("check_mtu", &cases);
}

#[test]
fn plain_value_helpers_equal_the_kernels() {
    let mut r = rng("plain");
    let cases = vec![
        packet_case(
            &mut r,
            "get_numa_node_id",
            "call bpf_get_numa_node_id#42\n".into(),
        ),
        packet_case(
            &mut r,
            "get_smp_processor_id",
            "call bpf_get_smp_processor_id#8\n".into(),
        ),
    ];
    check_all("plain values", &cases);
}

// ---------------------------------------------------------------------------------------------
// Map helpers

/// Map types the element helpers take, with small sizes.
fn element_maps() -> Vec<MapDef> {
    vec![
        MapDef::new(MapType::Array, 4, 12, 4),
        MapDef::new(MapType::Hash, 4, 12, 3),
        MapDef::new(MapType::LruHash, 4, 12, 3),
        MapDef::new(MapType::PercpuArray, 4, 12, 4),
        MapDef::new(MapType::PercpuHash, 4, 12, 3),
        MapDef::new(MapType::LruPercpuHash, 4, 12, 3),
        MapDef {
            flags: 1, // BPF_F_NO_PREALLOC
            ..MapDef::new(MapType::Hash, 4, 12, 3)
        },
    ]
}

/// Keys: present, absent, past an array's end.
fn key(r: &mut Rng) -> u32 {
    *r.pick(&[0u32, 1, 2, 3, 4, 5, 0xffff_ffff])
}

#[test]
fn map_element_helpers_equal_the_kernels() {
    let mut r = rng("maps");
    let mut cases = Vec::new();
    for map in element_maps() {
        for _ in 0..random_cases() {
            let mut m = map.clone();
            if !matches!(m.map_type, MapType::Array | MapType::PercpuArray) {
                for k in 0..r.below(4) as u32 {
                    m.entries.push((k.to_le_bytes().to_vec(), r.bytes(12)));
                }
            }
            // A few operations in a row, each one's r0 kept in the stack buffer.
            let mut body = String::new();
            let mut what = Vec::new();
            for step in 0..3 {
                let k = key(&mut r);
                body += &format!("r1 = {k:#x} ll\n*(u32 *)(r10 -16) = r1\n");
                match r.below(3) {
                    0 => {
                        let flags = *r.pick(&[0u64, 1, 2, 3, 4, 5]);
                        body += &format!(
                            "r1 = MAP1\n{}{}r4 = {flags}\ncall bpf_map_update_elem#2\n",
                            stack_ptr(2, 16),
                            stack_ptr(3, 100 + 16 * step)
                        );
                        what.push(format!("update({k:#x}, {flags})"));
                    }
                    1 => {
                        body += &format!(
                            "r1 = MAP1\n{}call bpf_map_delete_elem#3\n",
                            stack_ptr(2, 16)
                        );
                        what.push(format!("delete({k:#x})"));
                    }
                    _ => {
                        // The value found (or 12 zero bytes) goes into the buffer.
                        body += &format!(
                            "r1 = MAP1\n{}call bpf_map_lookup_elem#1\nr1 = 0\n\
                             *(u64 *)(r10 -{o}) = r1\n*(u32 *)(r10 -{p}) = r1\n\
                             if r0 == 0x0 goto miss{step}\nr1 = *(u64 *)(r0 +0)\n\
                             *(u64 *)(r10 -{o}) = r1\nr1 = *(u32 *)(r0 +8)\n\
                             *(u32 *)(r10 -{p}) = r1\nr0 = 1\nmiss{step}:\n",
                            stack_ptr(2, 16),
                            o = 304 + 16 * step,
                            p = 296 + 16 * step
                        );
                        what.push(format!("lookup({k:#x})"));
                    }
                }
                body += &format!("*(u64 *)(r10 -{}) = r0\n", 400 + 8 * step);
            }
            cases.push(
                Case::new(
                    format!("{:?}: {}", map.map_type, what.join(", ")),
                    body,
                    packet(&mut r, 64),
                )
                .with_map(m),
            );
        }
    }
    check_all("map elements", &cases);
}

/// `BPF_F_NO_PREALLOC`, which an LPM trie must have.
const BPF_F_NO_PREALLOC: u32 = 1;

/// An LPM trie key: prefix length, then an IPv4 address.
fn lpm_key(prefix_len: u32, addr: [u8; 4]) -> Vec<u8> {
    [prefix_len.to_le_bytes(), addr].concat()
}

#[test]
fn lpm_trie_element_helpers_equal_the_kernels() {
    let mut r = rng("lpm");
    let addrs = [
        [10, 0, 0, 1],
        [10, 1, 2, 3],
        [10, 1, 255, 1],
        [192, 168, 1, 1],
        [0, 0, 0, 0],
        [255, 255, 255, 255],
    ];
    let lens = [0u32, 1, 8, 16, 24, 31, 32, 33];
    let mut cases = Vec::new();
    for _ in 0..random_cases() * 2 {
        let mut trie = MapDef::new(MapType::LpmTrie, 8, 8, 6);
        trie.flags = BPF_F_NO_PREALLOC;
        for _ in 0..r.below(6) {
            let key = lpm_key(*r.pick(&lens[..7]), *r.pick(&addrs));
            if !trie.entries.iter().any(|(k, _)| *k == key) {
                trie.entries.push((key, r.bytes(8)));
            }
        }
        let mut body = String::new();
        let mut what = Vec::new();
        for step in 0..4 {
            let (len, addr) = (*r.pick(&lens), *r.pick(&addrs));
            let key = u64::from_le_bytes(lpm_key(len, addr).try_into().expect("8 bytes"));
            body += &format!("r1 = {key:#x} ll\n*(u64 *)(r10 -16) = r1\n");
            let op = match r.below(3) {
                0 => {
                    let flags = *r.pick(&[0u64, 1, 2, 3]);
                    body += &format!(
                        "r1 = MAP1\n{}{}r4 = {flags}\ncall bpf_map_update_elem#2\n",
                        stack_ptr(2, 16),
                        stack_ptr(3, 100 + 16 * step)
                    );
                    format!("update({flags})")
                }
                1 => {
                    body += &format!(
                        "r1 = MAP1\n{}call bpf_map_delete_elem#3\n",
                        stack_ptr(2, 16)
                    );
                    "delete".to_string()
                }
                _ => {
                    // The value found (or zeros) goes into the buffer.
                    body += &format!(
                        "r1 = MAP1\n{}call bpf_map_lookup_elem#1\nr1 = 0\n*(u64 *)(r10 -{o}) = r1\n\
                         if r0 == 0x0 goto miss{step}\nr1 = *(u64 *)(r0 +0)\n\
                         *(u64 *)(r10 -{o}) = r1\nr0 = 1\nmiss{step}:\n",
                        stack_ptr(2, 16),
                        o = 304 + 16 * step,
                    );
                    "lookup".to_string()
                }
            };
            what.push(format!(
                "{op} {}/{len}",
                addr.map(|b| b.to_string()).join(".")
            ));
            body += &format!("*(u64 *)(r10 -{}) = r0\n", 400 + 8 * step);
        }
        let label = format!("{} prefixes: {}", trie.entries.len(), what.join(", "));
        cases.push(Case::new(label, body, packet(&mut r, 64)).with_map(trie));
    }
    check_all("lpm trie", &cases);
}

/// `BPF_F_ZERO_SEED`: a bloom filter's hashes as the kernel's, not seeded at random.
const BPF_F_ZERO_SEED: u32 = 1 << 6;

#[test]
fn bloom_filter_helpers_equal_the_kernels() {
    let mut r = rng("bloom");
    let values = [0u32, 1, 2, 0xdead_beef, 0xffff_ffff, 77, 78, 79];
    let mut cases = Vec::new();
    for _ in 0..random_cases() * 2 {
        let mut bloom = MapDef::new(MapType::BloomFilter, 0, 4, *r.pick(&[1u32, 4, 16]));
        bloom.flags = BPF_F_ZERO_SEED;
        let mut body = String::new();
        let mut what = Vec::new();
        for step in 0..6 {
            let value = *r.pick(&values);
            body += &format!("r1 = {value:#x}\n*(u32 *)(r10 -16) = r1\n");
            if r.below(2) == 0 {
                let flags = *r.pick(&[0u64, 0, 0, 1, 2]);
                body += &format!(
                    "r1 = MAP1\n{}r3 = {flags}\ncall bpf_map_push_elem#87\n",
                    stack_ptr(2, 16)
                );
                what.push(format!("push({value:#x}, {flags})"));
            } else {
                body += &format!("r1 = MAP1\n{}call bpf_map_peek_elem#89\n", stack_ptr(2, 16));
                what.push(format!("peek({value:#x})"));
            }
            body += &format!("*(u64 *)(r10 -{}) = r0\n", 400 + 8 * step);
        }
        let label = format!("bloom of {}: {}", bloom.max_entries, what.join(", "));
        cases.push(Case::new(label, body, packet(&mut r, 64)).with_map(bloom));
    }
    check_all("bloom filter", &cases);
}

#[test]
fn map_in_map_lookups_equal_the_kernels() {
    let mut r = rng("map_in_map");
    let mut cases = Vec::new();
    for outer_type in [MapType::ArrayOfMaps, MapType::HashOfMaps] {
        for _ in 0..random_cases() {
            // Maps 1 and 2 are the inner arrays; map 3 holds them at keys 0 and 5 (an array
            // of maps has 3 slots: 5 is past its end, slot 2 is empty).
            let inner = |r: &mut Rng| {
                let mut m = MapDef::new(MapType::Array, 4, 8, 4);
                for k in 0..4u32 {
                    m.entries.push((k.to_le_bytes().to_vec(), r.bytes(8)));
                }
                m
            };
            let (first, second) = (inner(&mut r), inner(&mut r));
            let mut outer = MapDef::new(outer_type, 4, 4, 3);
            outer.inner = Some(1);
            outer.entries = vec![
                (0u32.to_le_bytes().to_vec(), 1u32.to_le_bytes().to_vec()),
                (1u32.to_le_bytes().to_vec(), 2u32.to_le_bytes().to_vec()),
            ];
            let mut body = String::new();
            let mut what = Vec::new();
            for step in 0..3 {
                let (outer_key, inner_key) = (*r.pick(&[0u32, 1, 2, 5]), *r.pick(&[0u32, 3, 4]));
                let update = r.below(2) == 0;
                body += &format!(
                    "r1 = {outer_key}\n*(u32 *)(r10 -16) = r1\nr1 = MAP3\n{}\
                     call bpf_map_lookup_elem#1\nif r0 == 0x0 goto none{step}\nr7 = r0\n\
                     r1 = {inner_key}\n*(u32 *)(r10 -24) = r1\nr1 = r7\n{}",
                    stack_ptr(2, 16),
                    stack_ptr(2, 24),
                );
                if update {
                    body += &format!(
                        "{}r4 = 0\ncall bpf_map_update_elem#2\n",
                        stack_ptr(3, 100 + 16 * step)
                    );
                } else {
                    body += &format!(
                        "call bpf_map_lookup_elem#1\nif r0 == 0x0 goto none{step}\n\
                         r1 = *(u64 *)(r0 +0)\n*(u64 *)(r10 -{}) = r1\nr0 = 1\n",
                        304 + 16 * step
                    );
                }
                body += &format!("none{step}:\n*(u64 *)(r10 -{}) = r0\n", 400 + 8 * step);
                let op = if update { "update" } else { "lookup" };
                what.push(format!("{op} [{outer_key}][{inner_key}]"));
            }
            let label = format!("{outer_type:?}: {}", what.join(", "));
            cases.push(
                Case::new(label, body, packet(&mut r, 64))
                    .with_map(first)
                    .with_map(second)
                    .with_map(outer),
            );
        }
    }
    check_all("map in map", &cases);
}

#[test]
fn queue_and_stack_helpers_equal_the_kernels() {
    let mut r = rng("queue");
    let mut cases = Vec::new();
    for map_type in [MapType::Queue, MapType::Stack] {
        for _ in 0..random_cases() * 2 {
            let mut body = String::new();
            let mut what = Vec::new();
            for step in 0..5 {
                match r.below(3) {
                    0 => {
                        let flags = *r.pick(&[0u64, 0, 2, 1, 4]);
                        body += &format!(
                            "r1 = MAP1\n{}r3 = {flags}\ncall bpf_map_push_elem#87\n",
                            stack_ptr(2, 100 + 8 * step)
                        );
                        what.push(format!("push({flags})"));
                    }
                    1 => {
                        body += &format!(
                            "r1 = MAP1\n{}call bpf_map_pop_elem#88\n",
                            stack_ptr(2, 200 + 8 * step)
                        );
                        what.push("pop".to_string());
                    }
                    _ => {
                        body += &format!(
                            "r1 = MAP1\n{}call bpf_map_peek_elem#89\n",
                            stack_ptr(2, 300 + 8 * step)
                        );
                        what.push("peek".to_string());
                    }
                }
                body += &format!("*(u64 *)(r10 -{}) = r0\n", 400 + 8 * step);
            }
            let map = MapDef::new(map_type, 0, 8, 2);
            cases.push(
                Case::new(
                    format!("{map_type:?}: {}", what.join(", ")),
                    body,
                    packet(&mut r, 64),
                )
                .with_map(map),
            );
        }
    }
    check_all("queue/stack", &cases);
}

// ---------------------------------------------------------------------------------------------
// Redirects

#[test]
fn redirect_helpers_equal_the_kernels() {
    let mut r = rng("redirect");
    let mut cases = Vec::new();
    for _ in 0..random_cases() {
        let ifindex = *r.pick(&[0u32, 1, 2, 99, 0xffff_ffff]);
        let flags = *r.pick(&[0u64, 1, 2, 8, 0x1_0000_0000]);
        let body = format!("r1 = {ifindex:#x} ll\nr2 = {flags:#x} ll\ncall bpf_redirect#23\n");
        cases.push(packet_case(
            &mut r,
            &format!("redirect({ifindex}, {flags:#x})"),
            body,
        ));
    }
    let mut devmap = MapDef::new(MapType::Devmap, 4, 4, 4);
    devmap
        .entries
        .push((1u32.to_le_bytes().to_vec(), 1u32.to_le_bytes().to_vec()));
    let mut devmap_hash = MapDef::new(MapType::DevmapHash, 4, 4, 4);
    devmap_hash
        .entries
        .push((7u32.to_le_bytes().to_vec(), 1u32.to_le_bytes().to_vec()));
    let maps = [
        devmap,
        devmap_hash,
        MapDef::new(MapType::Cpumap, 4, 4, 2),
        MapDef::new(MapType::Xskmap, 4, 4, 2),
    ];
    for map in maps {
        for _ in 0..random_cases() {
            let k = *r.pick(&[0u32, 1, 2, 7, 8, 0xffff_ffff]);
            // The low bits are the action when the slot is empty; 8 and 16 are BROADCAST and
            // EXCLUDE_INGRESS; anything else is refused.
            let flags = *r.pick(&[0u64, 1, 2, 3, 4, 5, 8, 16, 24, 32, 0x1_0000_0000]);
            let body = format!(
                "r1 = MAP1\nr2 = {k:#x} ll\nr3 = {flags:#x} ll\ncall bpf_redirect_map#51\n"
            );
            cases.push(
                packet_case(
                    &mut r,
                    &format!("{:?} redirect_map({k}, {flags:#x})", map.map_type),
                    body,
                )
                .with_map(map.clone()),
            );
        }
    }
    check_all("redirects", &cases);
}

// ---------------------------------------------------------------------------------------------
// Events: return values (the records themselves are compared by the replay/diff tests)

#[test]
fn ringbuf_helpers_equal_the_kernels() {
    let mut r = rng("ringbuf");
    let mut cases = Vec::new();
    for _ in 0..random_cases() * 2 {
        let mut body = String::new();
        let mut what = Vec::new();
        for step in 0..4 {
            match r.below(3) {
                0 => {
                    let size = (*r.pick(&[1u32, 3, 8, 100, 504])).min(BUF as u32);
                    let flags = *r.pick(&[0u64, 1, 2, 3, 4]);
                    body += &format!(
                        "r1 = MAP1\n{}r3 = {size}\nr4 = {flags}\ncall bpf_ringbuf_output#130\n",
                        stack_ptr(2, 8 + size as i32)
                    );
                    what.push(format!("output({size}, {flags})"));
                }
                1 => {
                    let size = *r.pick(&[1u32, 8, 16, 4000, 4096]);
                    let flags = *r.pick(&[0u64, 1, 2]);
                    let submit = *r.pick(&[(132, "submit"), (133, "discard")]);
                    body += &format!(
                        "r1 = MAP1\nr2 = {size}\nr3 = 0\ncall bpf_ringbuf_reserve#131\n\
                         if r0 == 0x0 goto none{step}\n*(u8 *)(r0 +0) = 7\nr1 = r0\n\
                         r2 = {flags}\ncall bpf_ringbuf_{}#{}\nr0 = 1\nnone{step}:\n",
                        submit.1, submit.0
                    );
                    what.push(format!("reserve({size}) {}({flags})", submit.1));
                }
                _ => {
                    let q = *r.pick(&[0u64, 1, 2, 3, 4]);
                    body += &format!("r1 = MAP1\nr2 = {q}\ncall bpf_ringbuf_query#134\n");
                    what.push(format!("query({q})"));
                }
            }
            body += &format!("*(u64 *)(r10 -{}) = r0\n", 400 + 8 * step);
        }
        let map = MapDef::new(MapType::Ringbuf, 0, 0, 4096);
        cases.push(Case::new(what.join(", "), body, packet(&mut r, 64)).with_map(map));
    }
    check_all("ringbuf", &cases);
}

#[test]
fn perf_event_output_equals_the_kernels() {
    let mut r = rng("perf");
    let mut cases = Vec::new();
    for _ in 0..random_cases() * 2 {
        let size = *r.pick(&[0u32, 1, 8, 100]);
        let index = *r.pick(&[0u64, 1, 3, 0xffff_ffff]);
        let ctx_len = *r.pick(&[0u64, 1, 14, 64, 65, 4000]);
        let junk = *r.pick(&[0u64, 0, 1 << 52]);
        let flags = index | ctx_len << 32 | junk;
        let body = format!(
            "r1 = r6\nr2 = MAP1\nr3 = {flags:#x} ll\n{}r5 = {size}\ncall bpf_perf_event_output#25\n",
            stack_ptr(4, 8 + size as i32)
        );
        cases.push(
            packet_case(
                &mut r,
                &format!("perf_event_output(size {size}, flags {flags:#x})"),
                body,
            )
            .with_map(MapDef::new(MapType::PerfEventArray, 4, 4, 2)),
        );
    }
    check_all("perf_event_output", &cases);
}

#[test]
fn trace_printk_equals_the_kernels() {
    let mut r = rng("printk");
    let formats: &[&[u8]] = &[
        b"hello\0",
        b"a %d b\0",
        b"%u %x %llx\0",
        b"%d %d %d\0",
        b"%%\0",
        b"%5d|%-3x\0",
        b"%c\0",
        b"%ld%lu\0",
    ];
    let mut cases = Vec::new();
    for fmt in formats {
        for _ in 0..2 {
            let mut body = String::new();
            let mut padded = fmt.to_vec();
            padded.resize(fmt.len().div_ceil(8) * 8, 0);
            for (i, chunk) in padded.chunks(8).enumerate() {
                let word = u64::from_le_bytes(chunk.try_into().expect("8 bytes"));
                body += &format!("r1 = {word:#x} ll\n*(u64 *)(r10 -{}) = r1\n", 200 - 8 * i);
            }
            let size = if r.below(4) == 0 {
                fmt.len() - 1
            } else {
                fmt.len()
            };
            body += &format!(
                "{}r2 = {size}\nr3 = {:#x} ll\nr4 = {:#x} ll\nr5 = {:#x} ll\ncall bpf_trace_printk#6\n",
                stack_ptr(1, 200),
                r.next_u64() & 0xffff,
                r.next_u64(),
                r.next_u64() as u32
            );
            let label = format!("trace_printk({:?}, {size})", String::from_utf8_lossy(fmt));
            cases.push(packet_case(&mut r, &label, body));
        }
    }
    check_all("trace_printk", &cases);
}

#[test]
fn trace_vprintk_equals_the_kernels() {
    let mut r = rng("vprintk");
    let formats: &[&[u8]] = &[
        b"none\0",
        b"%d\0",
        b"%u %x %llx %d %d\0",
        b"%d %d %d %d %d %d %d %d %d %d %d %d\0",
        b"%d %d %d %d %d %d %d %d %d %d %d %d %d\0",
        b"%c%c %5u|%-4d|%08x\0",
        b"bad %q\0",
    ];
    let mut cases = Vec::new();
    for fmt in formats {
        for data_len in [0u32, 8, 12, 24, 96, 104] {
            let mut body = String::new();
            let mut padded = fmt.to_vec();
            padded.resize(fmt.len().div_ceil(8) * 8, 0);
            for (i, chunk) in padded.chunks(8).enumerate() {
                let word = u64::from_le_bytes(chunk.try_into().expect("8 bytes"));
                body += &format!("r1 = {word:#x} ll\n*(u64 *)(r10 -{}) = r1\n", 120 - 8 * i);
            }
            // The arguments: the (random) buffer at r10 - 504, or NULL with length 0 half
            // the time.
            let data = if data_len == 0 && r.below(2) == 0 {
                "r3 = 0\n".to_string()
            } else {
                stack_ptr(3, 504)
            };
            body += &format!(
                "{}r2 = {}\n{data}r4 = {data_len}\ncall bpf_trace_vprintk#177\n",
                stack_ptr(1, 120),
                fmt.len()
            );
            let label = format!(
                "trace_vprintk({:?}, data_len {data_len})",
                String::from_utf8_lossy(fmt)
            );
            cases.push(packet_case(&mut r, &label, body));
        }
    }
    check_all("trace_vprintk", &cases);
}

// ---------------------------------------------------------------------------------------------
// bpf_fib_lookup without a FIB: a fresh namespace's answers

#[test]
fn fib_lookup_without_a_fib_equals_a_fresh_namespace() {
    let mut r = rng("fib");
    let mut cases = Vec::new();
    for _ in 0..random_cases() * 4 {
        let family = *r.pick(&[2u8, 10, 0, 7]);
        let ifindex = *r.pick(&[1u32, 0, 2, 99]);
        let flags = *r.pick(&[0u64, 1, 2, 3, 4, 6, 8, 9, 16, 32, 64, 128, 0x100]);
        let plen = *r.pick(&[64u32, 64, 63, 80, 8]);
        let body = format!(
            "r1 = {family}\n*(u8 *)(r10 -304) = r1\nr1 = {ifindex}\n*(u32 *)(r10 -296) = r1\n\
             r1 = r6\n{}r3 = {plen}\nr4 = {flags:#x}\ncall bpf_fib_lookup#69\n",
            stack_ptr(2, 304)
        );
        let label = format!(
            "fib_lookup(family {family}, ifindex {ifindex}, plen {plen}, flags {flags:#x})"
        );
        cases.push(packet_case(&mut r, &label, body));
    }
    check_all("fib_lookup", &cases);
}

/// The model bpfemu answers from without a FIB is what a new namespace holds.
#[test]
fn fresh_netns_fib_is_a_new_namespaces_state() {
    if !kernel_or_skip("fresh_netns_fib_is_a_new_namespaces_state") {
        return;
    }
    let netns = Netns::create("bpfemu-fresh").unwrap_or_else(|e| panic!("{e}"));
    netns
        .sysctl("net.ipv4.conf.lo.forwarding", "0")
        .unwrap_or_else(|e| panic!("{e}"));
    let seen = bpfemu_vm::fib::Fib::from_system(Some(netns.name())).unwrap();
    assert_eq!(seen, bpfemu_vm::fib::Fib::fresh_netns());
}

// ---------------------------------------------------------------------------------------------
// Callbacks: bpf_loop, bpf_for_each_map_elem
//
// The kernel verifies a callback as a loop body until its states converge. Counters kept on the
// stack are exact constants that never converge (the load fails at 1M instructions): callbacks
// that may run more than a few times keep theirs in a map value, which the verifier sees as
// unknown scalars. The ctx argument must point to the stack: it points to a slot holding the
// map value's address, cleared after the call (no address reaches the compared buffer).

/// The accumulator map: sum, last index, count.
fn accumulator() -> MapDef {
    let mut acc = MapDef::new(MapType::Array, 4, 24, 1);
    acc.entries.push((vec![0; 4], vec![0; 24]));
    acc
}

/// The stack slot holding the accumulator's address.
const ACC_SLOT: i32 = 200;

/// Runs `call` with r3 pointing to the slot that holds map `n`'s value address; r0 is the
/// call's, or 0 when the lookup fails.
fn with_accumulator(n: usize, call: &str) -> String {
    format!(
        "r1 = MAP{n}\n{}call bpf_map_lookup_elem#1\nif r0 == 0x0 goto no_acc\n\
         *(u64 *)(r10 -{ACC_SLOT}) = r0\n{}{call}r8 = r0\nr1 = 0\n*(u64 *)(r10 -{ACC_SLOT}) = r1\n\
         r0 = r8\nno_acc:\n",
        stack_ptr(2, 8),
        stack_ptr(3, ACC_SLOT)
    )
}

/// A callback's tail: r0 = 1 (stop) when `r{count}`'s low 32 bits equal `stop`, else 0.
/// `stop` u32::MAX never stops: its immediate sign-extends past 32 bits.
fn stop_at(count: u8, stop: u32) -> String {
    format!(
        "r{count} &= 0xffffffff\nr0 = 0\nif r{count} != {stop:#x} goto go_on\nr0 = 1\ngo_on:\nexit\n"
    )
}

/// Adds `index + 1` to ctx[0], keeps the index in ctx[8] and counts in ctx[16] (ctx in
/// `r{ctx}`, the index in r1), so that every call shows.
fn count_calls(ctx: u8) -> String {
    format!(
        "r5 = *(u64 *)(r{ctx} +0)\nr5 += r1\nr5 += 1\n*(u64 *)(r{ctx} +0) = r5\n\
         *(u64 *)(r{ctx} +8) = r1\nr6 = *(u64 *)(r{ctx} +16)\nr6 += 1\n*(u64 *)(r{ctx} +16) = r6\n"
    )
}

/// Where a `bpf_loop` callback keeps its counts.
#[derive(Clone, Copy, Debug, PartialEq)]
enum LoopCtx {
    /// None: the callback stops on its index.
    Null,
    /// The caller's stack: exact values the verifier unrolls, for a few loops only.
    Stack,
    /// A map value.
    Map,
}

fn loop_case(r: &mut Rng, nr: u64, stop: u32, flags: u64, ctx: LoopCtx) -> Case {
    let call = format!("r1 = {nr:#x} ll\nr2 = CB0\nr4 = {flags:#x} ll\ncall bpf_loop#181\n");
    let (body, callback) = match ctx {
        LoopCtx::Null => (
            format!("r3 = 0\n{call}"),
            "r6 = r1\nr6 += 1\n".to_string() + &stop_at(6, stop),
        ),
        LoopCtx::Stack => (
            format!("{}{call}", stack_ptr(3, 200)),
            count_calls(2) + &stop_at(6, stop),
        ),
        LoopCtx::Map => (
            with_accumulator(1, &call),
            "r2 = *(u64 *)(r2 +0)\n".to_string() + &count_calls(2) + &stop_at(6, stop),
        ),
    };
    let label = format!("bpf_loop({nr:#x}, stop after {stop}, ctx {ctx:?}, flags {flags:#x})");
    let case = Case::new(label, body, packet(r, 64)).with_callback(callback);
    if ctx == LoopCtx::Map {
        case.with_map(accumulator())
    } else {
        case
    }
}

#[test]
fn bpf_loop_equals_the_kernels() {
    const MAX_LOOPS: u64 = 1 << 23;
    let mut r = rng("loop");
    // nr_loops: none, one, a few, BPF_MAX_LOOPS and past it, the upper 32 bits set (a constant
    // flags 0 makes the kernel inline the loop, and its inlined bound check is 64-bit).
    let fixed: &[(u64, u32, u64, LoopCtx)] = &[
        (0, u32::MAX, 0, LoopCtx::Stack),
        (1, u32::MAX, 0, LoopCtx::Stack),
        (1, 0, 0, LoopCtx::Stack),
        (5, 2, 0, LoopCtx::Stack),
        (7, u32::MAX, 0, LoopCtx::Stack),
        (MAX_LOOPS, 3, 0, LoopCtx::Map),
        (MAX_LOOPS, u32::MAX, 0, LoopCtx::Null),
        (MAX_LOOPS + 1, 0, 0, LoopCtx::Map),
        (0xffff_ffff, 0, 0, LoopCtx::Null),
        (0x1_0000_0003, u32::MAX, 0, LoopCtx::Map),
        (0x1_0000_0003, u32::MAX, 0, LoopCtx::Null),
        (4, u32::MAX, 1, LoopCtx::Map),
        (MAX_LOOPS + 1, u32::MAX, 2, LoopCtx::Null),
        (4, u32::MAX, 0x8000_0000_0000_0000, LoopCtx::Stack),
        (1000, u32::MAX, 0, LoopCtx::Map),
    ];
    let mut cases: Vec<Case> = fixed
        .iter()
        .map(|&(nr, stop, flags, ctx)| loop_case(&mut r, nr, stop, flags, ctx))
        .collect();
    for _ in 0..random_cases() {
        let nr = *r.pick(&[0u64, 1, 2, 3, 9, 64, 300, MAX_LOOPS, MAX_LOOPS + 1]);
        // Long loops stop early: a full 1 << 23 run is one fixed case, not a random one.
        let stop = if nr > 1000 {
            *r.pick(&[1u32, 2, 5])
        } else {
            *r.pick(&[0u32, 1, 2, 5, 63, u32::MAX])
        };
        let flags = *r.pick(&[0u64, 0, 0, 1, 2]);
        let ctx = *r.pick(&[LoopCtx::Null, LoopCtx::Map]);
        cases.push(loop_case(&mut r, nr, stop, flags, ctx));
    }
    check_all("bpf_loop", &cases);
}

#[test]
fn for_each_map_elem_equals_the_kernels() {
    let mut r = rng("for_each");
    let mut cases = Vec::new();
    for map in element_maps() {
        // Arrays visit in index order in both; hash maps in an order of their own (the
        // kernel's buckets, bpfemu's key order), so their callbacks keep only what does not
        // depend on it.
        let ordered = matches!(map.map_type, MapType::Array | MapType::PercpuArray);
        for _ in 0..random_cases() {
            let mut m = map.clone();
            let keys: Vec<u32> = if ordered {
                (0..m.max_entries).filter(|_| r.below(2) == 0).collect()
            } else {
                let n = r.below(m.max_entries as u64 + 1);
                (0..n)
                    .map(|_| *r.pick(&[0u32, 1, 2, 3, 7, 100, 0xffff_ffff]))
                    .collect()
            };
            for k in keys {
                if !m.entries.iter().any(|(e, _)| e[..] == k.to_le_bytes()) {
                    m.entries.push((k.to_le_bytes().to_vec(), r.bytes(12)));
                }
            }
            let stop = if ordered {
                *r.pick(&[0u32, 1, 2, 3, u32::MAX])
            } else {
                u32::MAX
            };
            let flags = *r.pick(&[0u64, 0, 0, 1, 0x1_0000_0000]);
            let body = with_accumulator(
                2,
                &format!(
                    "r1 = MAP1\nr2 = CB0\nr4 = {flags:#x} ll\ncall bpf_for_each_map_elem#164\n"
                ),
            );
            // ctx[0]: the keys' sum, or an order-sensitive hash of them; ctx[8]: the count;
            // ctx[16]: the values' xor; each value's last word grows by one (a map write).
            let mix = if ordered { "r0 *= 31\n" } else { "" };
            let callback = format!(
                "r4 = *(u64 *)(r4 +0)\nr5 = *(u32 *)(r2 +0)\nr0 = *(u64 *)(r4 +0)\n{mix}r0 += r5\n*(u64 *)(r4 +0) = r0\n\
                 r6 = *(u64 *)(r4 +8)\nr6 += 1\n*(u64 *)(r4 +8) = r6\n\
                 r5 = *(u64 *)(r3 +0)\nr0 = *(u64 *)(r4 +16)\nr0 ^= r5\n*(u64 *)(r4 +16) = r0\n\
                 r5 = *(u32 *)(r3 +8)\nr5 += 1\n*(u32 *)(r3 +8) = r5\n{}",
                stop_at(6, stop)
            );
            let label = format!(
                "{:?} flags {:#x} with {} entries: for_each(stop after {stop}, flags {flags:#x})",
                map.map_type,
                map.flags,
                m.entries.len()
            );
            cases.push(
                Case::new(label, body, packet(&mut r, 64))
                    .with_map(m)
                    .with_map(accumulator())
                    .with_callback(callback),
            );
        }
    }
    check_all("for_each_map_elem", &cases);
}

// ---------------------------------------------------------------------------------------------
// bpf_tail_call

/// Tail call target 0: adds 1,000 to the counter (map 2) and drops.
const TARGET_COUNTS_THOUSAND: &str = "r6 = r1\nr1 = 0\n*(u32 *)(r10 -4) = r1\nr1 = MAP2\n\
     r2 = r10\nr2 += -4\ncall bpf_map_lookup_elem#1\nif r0 == 0x0 goto out\n\
     r1 = *(u64 *)(r0 +0)\nr1 += 1000\n*(u64 *)(r0 +0) = r1\nout:\nr0 = 1\nexit\n";

/// Tail call target 1: adds 1 to the counter and tail-calls slot 1 (itself) until the
/// kernel's limit stops it; then answers XDP_TX.
const TARGET_CALLS_ITSELF: &str = "r6 = r1\nr1 = 0\n*(u32 *)(r10 -4) = r1\nr1 = MAP2\n\
     r2 = r10\nr2 += -4\ncall bpf_map_lookup_elem#1\nif r0 == 0x0 goto out\n\
     r1 = *(u64 *)(r0 +0)\nr1 += 1\n*(u64 *)(r0 +0) = r1\nr1 = r6\nr2 = MAP1\nr3 = 1\n\
     call bpf_tail_call#12\nout:\nr0 = 3\nexit\n";

#[test]
fn tail_call_equals_the_kernels() {
    let mut r = rng("tail_call");
    let mut cases = Vec::new();
    // Slots: 0 and 3 the counting target, 1 the self-calling one, 2 empty; index 4 is past the
    // end, and only an index's low 32 bits count.
    let indexes = [0u64, 1, 2, 3, 4, 0xffff_ffff, 0x1_0000_0001, 0x1_0000_0002];
    let mut sequences: Vec<Vec<u64>> = vec![vec![2], vec![4], vec![0], vec![1], vec![2, 2, 1]];
    sequences.push(vec![2; 40]);
    sequences.push([vec![2; 30], vec![1]].concat());
    sequences.push([vec![4; 40], vec![1]].concat());
    for _ in 0..random_cases() {
        let n = 1 + r.below(4) as usize;
        sequences.push((0..n).map(|_| *r.pick(&indexes)).collect());
    }
    for (c, sequence) in sequences.into_iter().enumerate() {
        let mut body = String::new();
        for (step, &index) in sequence.iter().enumerate() {
            // Every other case takes the index from the packet, where the verifier cannot
            // see it (no direct jump).
            if c % 2 == 1 && index <= u32::MAX as u64 {
                body += &format!(
                    "r1 = {index:#x}\n*(u32 *)(r10 -{at}) = r1\nr3 = *(u32 *)(r10 -{at})\n",
                    at = 16 + 8 * (step % 8)
                );
            } else {
                body += &format!("r3 = {index:#x} ll\n");
            }
            body += "r1 = r6\nr2 = MAP1\ncall bpf_tail_call#12\n";
        }
        body += "r0 = 0x77\n";
        let mut slots = MapDef::new(MapType::ProgArray, 4, 4, 4);
        for (slot, target) in [(0u32, 0u32), (1, 1), (3, 0)] {
            slots
                .entries
                .push((slot.to_le_bytes().to_vec(), target.to_le_bytes().to_vec()));
        }
        let label = format!("tail calls to {sequence:x?}");
        cases.push(
            Case::new(label, body, packet(&mut r, 64))
                .with_map(slots)
                .with_map(accumulator())
                .with_target(TARGET_COUNTS_THOUSAND)
                .with_target(TARGET_CALLS_ITSELF),
        );
    }
    check_all("tail_call", &cases);
}

// ---------------------------------------------------------------------------------------------
// bpf_spin_lock, bpf_spin_unlock (both void to the verifier: their effect is the data)

#[test]
fn spin_lock_helpers_equal_the_kernels() {
    let mut r = rng("spin_lock");
    let mut cases = Vec::new();
    for map_type in [MapType::Array, MapType::Hash] {
        for _ in 0..random_cases() {
            let mut map = MapDef::new(map_type, 4, 8, 2);
            map.spin_lock = true;
            for k in 0..2u32 {
                let mut value = vec![0u8; 4];
                value.extend(r.bytes(4));
                map.entries.push((k.to_le_bytes().to_vec(), value));
            }
            let rounds = 1 + r.below(3);
            let mut body = String::new();
            for round in 0..rounds {
                let key = r.below(3) as u32; // key 2 is absent
                let add = r.below(1 << 31);
                body += &format!(
                    "r1 = {key}\n*(u32 *)(r10 -16) = r1\nr1 = MAP1\n{}call bpf_map_lookup_elem#1\n\
                     if r0 == 0x0 goto skip{round}\nr7 = r0\nr1 = r0\ncall bpf_spin_lock#93\n\
                     r1 = *(u32 *)(r7 +4)\nr1 += {add}\n*(u32 *)(r7 +4) = r1\nr1 = r7\n\
                     call bpf_spin_unlock#94\nskip{round}:\n",
                    stack_ptr(2, 16),
                );
            }
            body += "r0 = 0\n";
            let label = format!("{map_type:?}: {rounds} lock/unlock rounds");
            cases.push(Case::new(label, body, packet(&mut r, 64)).with_map(map));
        }
    }
    check_all("spin_lock", &cases);
}

// ---------------------------------------------------------------------------------------------
// bpf_snprintf, bpf_strncmp: constant strings in a frozen read-only map

/// `BPF_F_RDONLY_PROG`.
const BPF_F_RDONLY_PROG: u32 = 1 << 7;
/// Bytes a constant string may take in the strings map.
const STRING_SLOT: usize = 64;

/// A frozen, program-read-only array whose value holds `strings`, one per 64-byte slot.
fn strings_map(strings: &[&[u8]]) -> MapDef {
    let mut value = vec![0u8; STRING_SLOT * strings.len()];
    for (i, s) in strings.iter().enumerate() {
        assert!(s.len() < STRING_SLOT, "{s:?} fits a slot with its NUL");
        value[i * STRING_SLOT..i * STRING_SLOT + s.len()].copy_from_slice(s);
    }
    let mut map = MapDef::new(MapType::Array, 4, value.len() as u32, 1);
    map.flags = BPF_F_RDONLY_PROG;
    map.frozen = true;
    map.entries.push((vec![0; 4], value));
    map
}

/// `r{reg}` = the address of constant string `slot` of the strings map (map 1); the body
/// jumps to `no_strings` when the lookup fails.
fn const_string(reg: u8, slot: usize) -> String {
    format!(
        "r1 = 0\n*(u32 *)(r10 -16) = r1\nr1 = MAP1\n{}call bpf_map_lookup_elem#1\n\
         if r0 == 0x0 goto no_strings\nr{reg} = r0\nr{reg} += {}\n",
        stack_ptr(2, 16),
        slot * STRING_SLOT
    )
}

/// Formats every kind of conversion `bpf_bprintf_prepare` takes (a `%p` of an address aside:
/// the kernel hashes it).
const FORMATS: &[&[u8]] = &[
    b"%d %u %x %X|%ld %lu %lx|%lld %llu %llx %llX",
    b"%c%c%c|%5d|%-5d|%05u|%+d|% d|%i|%lli|%%",
    b"[%s] [%s] %d",
    b"%pI4 %pi4 %pI6 %pi6",
    b"%px %pks %pus",
    b"no conversion at all",
    b"%llu%llu%llu%llu%llu%llu%llu%llu%llu%llu%llu%llu",
    b"",
];

#[test]
fn snprintf_equals_the_kernels() {
    let mut r = rng("snprintf");
    let mut cases = Vec::new();
    for (slot, format) in FORMATS.iter().enumerate() {
        for size in [0u32, 1, 7, 64, 200] {
            // The arguments: u64s at r10 -120 .. -24; strings and addresses point into the
            // filled buffer at r10 -400 (its bytes end in a NUL the body writes).
            let mut body = String::new();
            for i in 0..12 {
                let any = r.next_u64();
                let value = *r.pick(&[0u64, 1, 0xffff_ffff, 0x8000_0000, 0x7f, any]);
                body += &format!("r1 = {value:#x} ll\n*(u64 *)(r10 -{}) = r1\n", 120 - 8 * i);
            }
            let string_len = r.below(40) as i32;
            body += &format!("r1 = 0\n*(u8 *)(r10 -{}) = r1\n", 400 - string_len);
            let pointers: &[usize] = match *format {
                b"[%s] [%s] %d" => &[0, 1],
                b"%pI4 %pi4 %pI6 %pi6" => &[0, 1, 2, 3],
                b"%px %pks %pus" => &[1, 2],
                _ => &[],
            };
            for &p in pointers {
                body += &format!("{}*(u64 *)(r10 -{}) = r1\n", stack_ptr(1, 400), 120 - 8 * p);
            }
            // The verifier checks the format at load: at least one u64 per conversion.
            let needed = format.split(|&b| b == b'%').count() as u32
                - 1
                - 2 * format.windows(2).filter(|w| w == b"%%").count() as u32;
            let data_len = 8 * (*r.pick(&[needed, needed, 12])).max(needed);
            body += &const_string(3, slot);
            body += &format!(
                "{}r2 = {size}\n{}r5 = {data_len}\ncall bpf_snprintf#165\nno_strings:\n",
                stack_ptr(1, 500),
                stack_ptr(4, 120)
            );
            // No address stays in the compared buffer.
            for &p in pointers {
                body += &format!("r1 = 0\n*(u64 *)(r10 -{}) = r1\n", 120 - 8 * p);
            }
            let label = format!(
                "snprintf(size {size}, {:?}, data_len {data_len})",
                String::from_utf8_lossy(format)
            );
            cases.push(Case::new(label, body, packet(&mut r, 64)).with_map(strings_map(FORMATS)));
        }
    }
    check_all("snprintf", &cases);
}

#[test]
fn strncmp_equals_the_kernels() {
    let mut r = rng("strncmp");
    let constants: &[&[u8]] = &[b"", b"a", b"abc", b"abcdef", b"\x7f\x80\xff", b"xdp"];
    let mut cases = Vec::new();
    let mut s1s: Vec<Vec<u8>> = vec![
        b"abc\0".to_vec(),
        b"abd\0".to_vec(),
        b"ab\0".to_vec(),
        b"abcdefgh".to_vec(),
        b"\0".to_vec(),
        b"\x7f\x80\xfe\0".to_vec(),
        b"\x7f\x80\xff\0".to_vec(),
        b"xdp\0xyz".to_vec(),
    ];
    for _ in 0..random_cases() {
        let len = 1 + r.below(8) as usize;
        s1s.push(r.bytes(len));
    }
    for (i, s1) in s1s.iter().enumerate() {
        for slot in 0..constants.len() {
            if (i + slot) % 2 == 1 && i >= 8 {
                continue;
            }
            let size = 1 + r.below(s1.len() as u64 + 2) as usize;
            let mut body = String::new();
            for (k, b) in s1.iter().enumerate() {
                body += &format!("r1 = {b}\n*(u8 *)(r10 -{}) = r1\n", 300 - k as i32);
            }
            body += &const_string(3, slot);
            body += &format!(
                "{}r2 = {size}\ncall bpf_strncmp#182\nno_strings:\n",
                stack_ptr(1, 300)
            );
            let label = format!(
                "strncmp({}, {size}, {:?})",
                hex(s1),
                String::from_utf8_lossy(constants[slot])
            );
            cases.push(Case::new(label, body, packet(&mut r, 64)).with_map(strings_map(constants)));
        }
    }
    check_all("strncmp", &cases);
}

// ---------------------------------------------------------------------------------------------
// Socket lookups: the kernel side runs in a fresh namespace, where nothing listens and no other
// namespace has an id, so every lookup returns NULL (a socket found would be released and
// count as 1). The tuple is the random stack; sizes, namespace ids and flags vary.

#[test]
fn socket_lookups_equal_the_kernels() {
    let mut r = rng("sockets");
    let mut cases = Vec::new();
    let lookups = [
        (84, "sk_lookup_tcp"),
        (85, "sk_lookup_udp"),
        (99, "skc_lookup_tcp"),
    ];
    let mut shapes: Vec<(u64, i64, u64)> = vec![
        (12, -1, 0),
        (36, -1, 0),
        (0, -1, 0),
        (20, -1, 0),
        (12, 0, 0),
        (36, 1, 0),
        (12, 0x7fff_ffff, 0),
        (12, 0x8000_0000, 0),
        (12, 0x1_ffff_ffff, 0),
        (12, -1, 1),
        (36, -1, 1 << 63),
    ];
    for _ in 0..random_cases() {
        let lens = [12u64, 36, r.below(64)];
        let len = *r.pick(&lens);
        let ids = [-1i64, r.next_u64() as i64, r.below(4) as i64];
        let netns = *r.pick(&ids);
        let all_flags = [0u64, r.next_u64()];
        let flags = *r.pick(&all_flags);
        shapes.push((len, netns, flags));
    }
    for (id, name) in lookups {
        for &(len, netns, flags) in &shapes {
            let body = format!(
                "r1 = r6\n{}r3 = {len}\nr4 = {netns} ll\nr5 = {flags:#x} ll\n\
                 call bpf_{name}#{id}\nif r0 == 0x0 goto not_found\nr1 = r0\n\
                 call bpf_sk_release#86\nr0 = 1\nnot_found:\n",
                stack_ptr(2, 300)
            );
            let label = format!("{name}(len {len}, netns {netns}, flags {flags:#x})");
            cases.push(Case::new(label, body, packet(&mut r, 64)));
        }
    }
    check_all("sockets", &cases);
}

// ---------------------------------------------------------------------------------------------
// Clocks and random numbers: bpfemu's are deterministic by design (the packet's timestamp, a
// seeded generator; see vm/src/xdp/determinism.rs), so what is held to the kernel is what a
// program may rely on: each clock never goes back, the coarse clock is not ahead of the fine
// one nor the monotonic one of boot time, jiffies never go back, random numbers are 32-bit.

#[test]
fn clock_and_random_helpers_keep_the_kernels_promises() {
    let mut r = rng("clocks");
    // (fact number, instructions leaving r8 = first value, r0 = second, the comparison that
    // must hold)
    let pairs: &[(&str, &str, &str)] = &[
        ("call bpf_ktime_get_ns#5", "call bpf_ktime_get_ns#5", ">="),
        (
            "call bpf_ktime_get_boot_ns#125",
            "call bpf_ktime_get_boot_ns#125",
            ">=",
        ),
        (
            "call bpf_ktime_get_coarse_ns#160",
            "call bpf_ktime_get_coarse_ns#160",
            ">=",
        ),
        ("call bpf_jiffies64#118", "call bpf_jiffies64#118", ">="),
        (
            "call bpf_ktime_get_coarse_ns#160",
            "call bpf_ktime_get_ns#5",
            ">=",
        ),
        (
            "call bpf_ktime_get_ns#5",
            "call bpf_ktime_get_boot_ns#125",
            ">=",
        ),
        (
            "call bpf_get_prandom_u32#7",
            "call bpf_get_prandom_u32#7",
            "!=",
        ),
    ];
    let mut body = String::new();
    for (n, (first, second, holds)) in pairs.iter().enumerate() {
        body += &format!(
            "{first}\nr8 = r0\n{second}\nr7 = 1\nif r0 {holds} r8 goto fact{n}\nr7 = 0\nfact{n}:\n\
             *(u64 *)(r10 -{}) = r7\nr0 >>= 32\n*(u64 *)(r10 -{}) = r0\n",
            304 + 16 * n,
            312 + 16 * n
        );
    }
    // The 32-bit random number's upper half is zero; the clocks' are not compared.
    for n in 0..pairs.len() - 1 {
        body += &format!("r1 = 0\n*(u64 *)(r10 -{}) = r1\n", 312 + 16 * n);
    }
    body += "r0 = 0\n";
    let cases = vec![Case::new(
        "clocks and random numbers",
        body,
        packet(&mut r, 64),
    )];
    check_all("clocks", &cases);
}

// ---------------------------------------------------------------------------------------------
// Coverage of the families above

/// Every helper bpfemu implements is called by one of the families above (by its id in a
/// `call name#ID` line, or in an `(ID, "name")` table), or, for the helpers that need a socket
/// the test-run namespace does not have, by the C fixture `tests/sockets_vs_kernel.rs` runs
/// beside real sockets (`bpf_NAME(` in `tests/data/sockets/sk_lookup.c`).
#[test]
fn every_helper_has_a_family() {
    let source = include_str!("helpers_vs_kernel.rs");
    let with_sockets = include_str!("data/sockets/sk_lookup.c");
    let missing: Vec<String> = bpfemu_vm::xdp::helpers::HELPERS
        .iter()
        .filter(|h| {
            let in_families = [
                format!("#{}\\n", h.id),
                format!("#{}\"", h.id),
                format!("({}, \"", h.id),
            ]
            .iter()
            .any(|p| source.contains(p.as_str()));
            !in_families && !with_sockets.contains(&format!("bpf_{}(", h.name))
        })
        .map(|h| format!("{} ({})", h.name, h.id))
        .collect();
    assert!(missing.is_empty(), "helpers without a family: {missing:?}");
}
