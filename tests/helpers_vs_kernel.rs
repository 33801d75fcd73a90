//! Every XDP helper held to the kernel on its own: small programs (kernel assembler syntax)
//! call one helper with random and edge arguments, store its return value and the stack
//! buffer it may have written into a result map, and return; the same program runs in the
//! kernel (BPF_PROG_TEST_RUN) and in bpfemu's XDP runtime, and everything is compared: the
//! program's return value, `data_out` (every packet byte), and every entry of every map
//! (the result map included, so every byte the helper wrote to the stack).
//!
//! Each family draws `BPFEMU_HELPER_CASES` random cases (default 8) besides its fixed edge
//! cases, from a seed (`BPFEMU_HELPER_SEED`, default fixed) printed on failure.
//!
//! Skipped with a message when bpf() is out of reach, unless `BPFEMU_REQUIRE_KERNEL=1`.

use bpfemu::replay::hex;
use bpfemu_conformance::kernel::{self, BPF_PROG_TYPE_XDP};
use bpfemu_conformance::libbpf::{
    CpuPin, kernel_or_skip, map_entries_fd, possible_cpus, sys_value_size, test_run,
};
use bpfemu_conformance::netns::Netns;
use bpfemu_isa::RawInsn;
use bpfemu_isa::asm::assemble_kernel;
use bpfemu_vm::xdp::{MapInit, PacketMeta, XdpConfig, XdpProgramSpec, XdpRuntime};
use bpfemu_vm::{MapSpec, MapType};
use std::os::fd::{AsFd, OwnedFd};

/// Bytes of the stack buffer every program fills before the call and copies out after it:
/// `[r10 - 512, r10 - 8)`; `r10 - 8` holds the result map's key.
const BUF: i32 = 504;
/// The result map's value: the helper's r0, then the stack buffer.
const RESULT_VALUE: u32 = 8 + BUF as u32;
/// `BPF_F_XDP_HAS_FRAGS`: the program takes multi-buffer frames.
const BPF_F_XDP_HAS_FRAGS: u32 = 1 << 5;
/// The immediate that stands for map N in a program's text until it is bound.
const MAP_MARK: i32 = 0x5eed_0000;

/// A map of a case: created on both sides, filled with `entries`, compared after the run.
#[derive(Clone, Debug)]
struct MapDef {
    map_type: MapType,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    flags: u32,
    entries: Vec<(Vec<u8>, Vec<u8>)>,
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
}

impl Case {
    fn new(label: impl Into<String>, body: impl Into<String>, packet: Vec<u8>) -> Case {
        Case {
            label: label.into(),
            maps: Vec::new(),
            body: body.into(),
            packet,
            prog_flags: 0,
        }
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
        let mut rng = Rng(fill_seed | 1);
        for off in (8..=512).rev().step_by(8).filter(|o| *o > 8) {
            src += &format!("r1 = {:#x} ll\n*(u64 *)(r10 -{off}) = r1\n", rng.next());
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
        src
    }
}

/// Assembles `src`, binding `MAP<N>` to `bind(N)` as a `BPF_PSEUDO_MAP_FD` reference.
fn assemble(src: &str, bind: impl Fn(usize) -> i32) -> Vec<RawInsn> {
    let mut text = src.to_string();
    for n in (0..16).rev() {
        text = text.replace(
            &format!("MAP{n}"),
            &format!("{:#x} ll", MAP_MARK as i64 + n as i64),
        );
    }
    let mut insns = assemble_kernel(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let mut pc = 0;
    while pc + 1 < insns.len() {
        let i = insns[pc];
        if i.code == 0x18 && i.src == 0 && insns[pc + 1].imm == 0 {
            let n = i.imm.wrapping_sub(MAP_MARK);
            if (0..16).contains(&n) {
                insns[pc].src = 1;
                insns[pc].imm = bind(n as usize);
            }
            pc += 2;
        } else {
            pc += 1;
        }
    }
    insns
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
    let mut fds: Vec<OwnedFd> = Vec::new();
    for (n, d) in defs.iter().enumerate() {
        let fd = kernel::map_create(&kernel::MapSpec {
            map_type: d.map_type.raw(),
            key_size: d.key_size,
            value_size: d.value_size,
            max_entries: d.max_entries,
            map_flags: d.flags,
            ..Default::default()
        })
        .map_err(|e| format!("map {n}: create: errno {e}"))?;
        for (k, v) in &d.entries {
            let value = per_cpu_value(d, v, cpus);
            bpfemu_conformance::libbpf::map_update_fd(fd.as_fd(), k, &value, 0)
                .map_err(|e| format!("map {n}: update: errno {e}"))?;
        }
        fds.push(fd);
    }
    let insns = assemble(src, |n| kernel::fd_imm(&fds[n]));
    let mut opts = kernel::LoadOptions::new(BPF_PROG_TYPE_XDP, &insns);
    opts.prog_flags = case.prog_flags;
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

fn run_bpfemu(case: &Case, src: &str, cpus: u32) -> Result<Seen, String> {
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
            (spec, MapInit::default())
        })
        .collect();
    let insns = assemble(src, |n| n as i32);
    let cfg = XdpConfig {
        cpus,
        ..XdpConfig::default()
    };
    let prog = XdpProgramSpec {
        name: "helper".into(),
        insns,
    };
    let mut rt = XdpRuntime::new(vec![prog], specs, cfg).map_err(|e| format!("runtime: {e}"))?;
    {
        let (maps, mem) = rt.maps_mut();
        for (n, d) in defs.iter().enumerate() {
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
        let ours = run_bpfemu(case, src, cpus);
        match (&kernel, &ours) {
            (Ok(k), Ok(o)) if k == o => {}
            (Ok(k), Ok(o)) => failures.push(format!(
                "{family}: {}: {}",
                case.label,
                describe_difference(k, o)
            )),
            (Err(k), _) => failures.push(format!("{family}: {}: kernel: {k}", case.label)),
            (Ok(_), Err(o)) => failures.push(format!("{family}: {}: bpfemu: {o}", case.label)),
        }
    }
    eprintln!("{family}: {} cases, {} differ", cases.len(), failures.len());
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

fn describe_difference(k: &Seen, o: &Seen) -> String {
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

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len() as u64) as usize]
    }

    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

fn rng(family: &str) -> Rng {
    let seed = std::env::var("BPFEMU_HELPER_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x0bad_cafe_u64);
    let mix = family
        .bytes()
        .fold(seed, |h, b| h.rotate_left(5) ^ b as u64);
    Rng(mix | 1)
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
    let mut r = Rng(seed | 1);
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
            let size = r
                .pick(&[
                    1u32, 2, 3, 4, 5, 8, 12, 20, 40, 63, 64, 65, 100, 255, 256, 504,
                ])
                .min(r.below(504) as u32 + 1);
            let off = 8 + size as i32 + r.below((504 - size) as u64 + 1) as i32;
            Some((off.min(512), size))
        };
        let (from, to) = (side(&mut r), side(&mut r));
        let seed = match r.below(3) {
            0 => r.next() as u32 as u64,
            1 => r.next(),
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
    let len = r.pick(PACKET_LENS);
    Case::new(format!("{label} on {len} bytes"), body, packet(r, len))
}

/// Frame-bound deltas: zero, small and odd, at and past the headroom and the packet length.
fn delta(r: &mut Rng) -> i64 {
    match r.below(3) {
        0 => r.pick(&[
            0i64, 1, -1, 4, -4, 14, -14, 255, 256, -256, -257, 3520, -3520,
        ]),
        1 => r.below(600) as i64 - 300,
        _ => r.next() as i32 as i64,
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
        let len = r.pick(&[1u32, 2, 3, 4, 7, 8, 13, 64, 100, 503, 504]);
        let off = r.pick(&[0u32, 1, 13, 14, 59, 60, 61, 99, 100, 3519]);
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
        let len = r.pick(&[3521usize, 5000, 7617, 9000]);
        let off = r.pick(&[3500u32, 3519, 3520, 4000, 7616, 8990]);
        let n = r.pick(&[1u32, 20, 64, 400]);
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
        let ifindex = r.pick(&[0u32, 1, 2, 99]);
        let any = r.next();
        let mtu_len = r.pick(&[0u32, 1, 1500, 65536, 65522, 70000, any as u32]);
        let len_diff = r.pick(&[0i64, 1, -1, 65536, -65536, 100_000, any as i32 as i64]);
        let flags = r.pick(&[0u64, 0, 1, 2, 4]);
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
    r.pick(&[0u32, 1, 2, 3, 4, 5, 0xffff_ffff])
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
                        let flags = r.pick(&[0u64, 1, 2, 3, 4, 5]);
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
                        let flags = r.pick(&[0u64, 0, 2, 1, 4]);
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
        let ifindex = r.pick(&[0u32, 1, 2, 99, 0xffff_ffff]);
        let flags = r.pick(&[0u64, 1, 2, 8, 0x1_0000_0000]);
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
            let k = r.pick(&[0u32, 1, 2, 7, 8, 0xffff_ffff]);
            // The low bits are the action when the slot is empty; 8 and 16 are BROADCAST and
            // EXCLUDE_INGRESS; anything else is refused.
            let flags = r.pick(&[0u64, 1, 2, 3, 4, 5, 8, 16, 24, 32, 0x1_0000_0000]);
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
                    let size = r.pick(&[1u32, 3, 8, 100, 504]).min(BUF as u32);
                    let flags = r.pick(&[0u64, 1, 2, 3, 4]);
                    body += &format!(
                        "r1 = MAP1\n{}r3 = {size}\nr4 = {flags}\ncall bpf_ringbuf_output#130\n",
                        stack_ptr(2, 8 + size as i32)
                    );
                    what.push(format!("output({size}, {flags})"));
                }
                1 => {
                    let size = r.pick(&[1u32, 8, 16, 4000, 4096]);
                    let flags = r.pick(&[0u64, 1, 2]);
                    let submit = r.pick(&[(132, "submit"), (133, "discard")]);
                    body += &format!(
                        "r1 = MAP1\nr2 = {size}\nr3 = 0\ncall bpf_ringbuf_reserve#131\n\
                         if r0 == 0x0 goto none{step}\n*(u8 *)(r0 +0) = 7\nr1 = r0\n\
                         r2 = {flags}\ncall bpf_ringbuf_{}#{}\nr0 = 1\nnone{step}:\n",
                        submit.1, submit.0
                    );
                    what.push(format!("reserve({size}) {}({flags})", submit.1));
                }
                _ => {
                    let q = r.pick(&[0u64, 1, 2, 3, 4]);
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
        let size = r.pick(&[0u32, 1, 8, 100]);
        let index = r.pick(&[0u64, 1, 3, 0xffff_ffff]);
        let ctx_len = r.pick(&[0u64, 1, 14, 64, 65, 4000]);
        let junk = r.pick(&[0u64, 0, 1 << 52]);
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
                r.next() & 0xffff,
                r.next(),
                r.next() as u32
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
        let family = r.pick(&[2u8, 10, 0, 7]);
        let ifindex = r.pick(&[1u32, 0, 2, 99]);
        let flags = r.pick(&[0u64, 1, 2, 3, 4, 6, 8, 9, 16, 32, 64, 128, 0x100]);
        let plen = r.pick(&[64u32, 64, 63, 80, 8]);
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
