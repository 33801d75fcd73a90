//! Criterion benchmarks of bpfemu's engines against their peers, each group measured in one run:
//!
//! - `xdp/PROGRAM`: corpus XDP programs on one packet of their capture, through bpfemu's
//!   runtime (`interp`, `jit`, `jit-trusted`) and the running kernel's JIT (`kernel`:
//!   `BPF_PROG_TEST_RUN` with `repeat`, its own duration; needs root, left out otherwise), all
//!   in test_run's loop: the packet loaded once and run again and again on the frame each run
//!   leaves (`XdpRuntime::run_again_repeated` on bpfemu's side);
//! - `raw/PROGRAM`: helper-free programs over a plain buffer (r1 its address), the form rbpf
//!   runs, through bpfemu's interpreter, checked JIT and trusted JIT (the programs read only
//!   their buffer: the interpreter's checked run shows it) and rbpf 0.4's interpreter and
//!   x86-64 JIT. rbpf has no XDP context, maps or helpers, so the corpus is out of its reach;
//!   these programs (a packet parser, a checksum loop, ALU chains, bit and byte loops, a stack copy)
//!   are written for the comparison.
//!
//! `cargo bench --bench engines [-- FILTER]`. Ratios between lines of a group are what to read:
//! every line of a group runs the same instructions on the same bytes.

use bpfemu::jit::Engine;
use bpfemu::pcap::PcapReader;
use bpfemu::replay::{ReplayOptions, Replayer};
use bpfemu_isa::Program;
use bpfemu_isa::asm::assemble_kernel;
use bpfemu_jit::{Jit, Mode};
use bpfemu_kernel as kernel;
use bpfemu_vm::engine::{Engine as VmEngine, Executable};
use bpfemu_vm::memory::{Memory, RegionKind};
use bpfemu_vm::xdp::PacketMeta;
use bpfemu_vm::{Interpreter, NoHelpers, Options};
use criterion::{Criterion, criterion_group, criterion_main};
use std::hint::black_box;
use std::path::Path;
use std::time::{Duration, Instant};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Corpus programs and the capture whose first packet takes their interesting path.
const XDP_PROGRAMS: &[(&str, &str)] = &[
    ("reflector", "normal.pcap"),
    ("firewall", "normal.pcap"),
    ("l4lb", "flows.pcap"),
    ("p4_parser", "normal.pcap"),
];

fn first_packet(capture: &str) -> Vec<u8> {
    let path = root().join("examples/pcap").join(capture);
    let mut reader = PcapReader::open(&path).expect("bundled capture");
    reader.next().expect("a packet").expect("readable").data
}

fn replayer(object: &Path, engine: Engine) -> Replayer {
    let opts = ReplayOptions {
        object: object.to_path_buf(),
        cpus: 1,
        ifindex: 1,
        engine,
        ..ReplayOptions::default()
    };
    Replayer::new(&opts).expect("the corpus program prepares")
}

fn xdp(c: &mut Criterion) {
    for &(name, capture) in XDP_PROGRAMS {
        let object = root().join(format!("examples/xdp/build/{name}.v3.o"));
        let packet = first_packet(capture);
        let mut group = c.benchmark_group(format!("xdp/{name}"));
        for (label, engine) in [
            ("interp", Engine::Interp),
            ("jit", Engine::Jit),
            ("jit-trusted", Engine::JitTrusted),
            ("jit-baseline", Engine::JitBaseline),
            ("jit-baseline-checked", Engine::JitBaselineChecked),
        ] {
            let mut r = replayer(&object, engine);
            let meta = PacketMeta::default();
            // The kernel line's loop: the packet loaded once, then run `iters` times on the
            // frame each run leaves (BPF_PROG_TEST_RUN's `repeat`).
            group.bench_function(label, |b| {
                b.iter_custom(|iters| {
                    let start = Instant::now();
                    let first = r.runtime.run_in_place(r.program, black_box(&packet), &meta);
                    black_box(first.is_ok());
                    if iters > 1 {
                        let again = r.runtime.run_again_repeated(r.program, &meta, iters - 1);
                        black_box(again.is_ok());
                    }
                    start.elapsed()
                })
            });
        }
        if let Some(session) = kernel_program(&object) {
            group.bench_function("kernel", |b| {
                b.iter_custom(|iters| {
                    let repeat = iters.clamp(1, u64::from(u32::MAX)) as u32;
                    let run = kernel::test_run(session.kernel_program_fd(), &packet, None, repeat)
                        .expect("test_run of a program the kernel loaded");
                    Duration::from_nanos(u64::from(run.duration_ns).saturating_mul(iters))
                })
            });
        }
        group.finish();
    }
}

/// The kernel's copy of the corpus program (maps created, program loaded), when root and
/// bpf() are here.
fn kernel_program(object: &Path) -> Option<bpfemu::diff::Session> {
    if !kernel::kernel_available() {
        eprintln!("engines: no bpf() here; the kernel lines are left out");
        return None;
    }
    let opts = bpfemu::diff::DiffOptions::new(object);
    bpfemu::diff::Session::open(&opts).ok()
}

/// Helper-free programs over a 64-byte buffer at r1.
const RAW_PROGRAMS: &[(&str, &str)] = &[
    // Ethernet/IPv4/TCP or UDP: the destination port's class, as a filter would decide.
    (
        "parse_ipv4",
        "
        r0 = 0
        r2 = *(u16 *)(r1 +12)
        if r2 != 0x8 goto out
        r2 = *(u8 *)(r1 +14)
        r2 &= 15
        r2 <<= 2
        if r2 < 20 goto out
        r3 = *(u8 *)(r1 +23)
        r4 = r1
        r4 += r2
        if r3 == 6 goto ports
        if r3 != 17 goto out
    ports:
        r5 = *(u16 *)(r4 +16)
        r5 = be16 r5
        r0 = 1
        if r5 == 80 goto out
        if r5 == 443 goto out
        r0 = 2
        if r5 < 1024 goto out
        r0 = 3
    out:
        exit
        ",
    ),
    // The Internet checksum of the 64 bytes: 32 16-bit words, carries folded.
    (
        "checksum_64",
        "
        r0 = 0
        r2 = 0
    loop:
        r3 = r1
        r3 += r2
        r4 = *(u16 *)(r3 +0)
        r0 += r4
        r2 += 2
        if r2 < 64 goto loop
        r3 = r0
        r3 >>= 16
        r0 &= 65535
        r0 += r3
        r3 = r0
        r3 >>= 16
        r0 += r3
        r0 ^= -1
        r0 &= 65535
        exit
        ",
    ),
    // Multiplies, divisions, shifts and xors 200 times over: ALU speed.
    (
        "alu_chain",
        "
        r0 = *(u64 *)(r1 +0)
        r2 = 200
    loop:
        r0 *= 40503
        r3 = r0
        r3 >>= 13
        r0 ^= r3
        r3 = r0
        r3 /= 7
        r0 += r3
        r2 += -1
        if r2 != 0 goto loop
        exit
        ",
    ),
    // Counts the set bits of the 64 bytes one bit at a time: a tight shift-and-mask loop.
    (
        "bitcount",
        "
        r0 = 0
        r2 = 0
    word:
        r3 = r1
        r3 += r2
        r4 = *(u64 *)(r3 +0)
        r5 = 64
    bit:
        r6 = r4
        r6 &= 1
        r0 += r6
        r4 >>= 1
        r5 += -1
        if r5 != 0 goto bit
        r2 += 8
        if r2 < 64 goto word
        exit
        ",
    ),
    // Copies the 64 bytes to the stack a word at a time, then sums them back byte by byte.
    (
        "copy_sum",
        "
        r2 = 0
    copy:
        r3 = r1
        r3 += r2
        r4 = *(u64 *)(r3 +0)
        r5 = r10
        r5 += r2
        *(u64 *)(r5 -64) = r4
        r2 += 8
        if r2 < 64 goto copy
        r0 = 0
        r2 = r10
        r2 += -64
    sum:
        r3 = *(u8 *)(r2 +0)
        r0 += r3
        r2 += 1
        if r2 < r10 goto sum
        exit
        ",
    ),
    // FNV-1a over the 64 bytes: a byte-wise load, xor, multiply loop.
    (
        "fnv1a",
        "
        r0 = 0xcbf29ce484222325 ll
        r5 = 0x100000001b3 ll
        r2 = r1
        r3 = r1
        r3 += 64
    loop:
        r4 = *(u8 *)(r2 +0)
        r0 ^= r4
        r0 *= r5
        r2 += 1
        if r2 < r3 goto loop
        exit
        ",
    ),
    // A byte-wise scanner: classifies each byte (zero, ASCII letter, digit, high) with branches.
    (
        "classify_bytes",
        "
        r0 = 0
        r2 = 0
    next:
        r3 = r1
        r3 += r2
        r4 = *(u8 *)(r3 +0)
        if r4 == 0 goto zero
        if r4 > 127 goto high
        w5 = w4
        w5 |= 32
        w5 += -97
        if w5 < 26 goto letter
        w5 = w4
        w5 += -48
        if w5 < 10 goto digit
        goto step
    zero:
        r0 += 1
        goto step
    high:
        r0 += 0x100
        goto step
    letter:
        r0 += 0x10000
        goto step
    digit:
        r0 += 0x1000000
    step:
        r2 += 1
        if r2 != 64 goto next
        exit
        ",
    ),
    // A 32-bit xorshift generator stepped 500 times: 32-bit ALU speed without divisions.
    (
        "xorshift32",
        "
        r0 = *(u32 *)(r1 +0)
        w0 |= 1
        r2 = 500
    loop:
        w3 = w0
        w3 <<= 13
        w0 ^= w3
        w3 = w0
        w3 >>= 17
        w0 ^= w3
        w3 = w0
        w3 <<= 5
        w0 ^= w3
        r2 += -1
        if r2 != 0 goto loop
        exit
        ",
    ),
];

fn raw_packet() -> Vec<u8> {
    let mut packet = first_packet("normal.pcap");
    packet.resize(64, 0);
    packet
}

/// A prepared bpfemu engine over a buffer region.
struct OnBuffer {
    exe: Box<dyn Executable>,
    mem: Memory,
    addr: u64,
}

impl OnBuffer {
    fn new(engine: &dyn VmEngine, prog: &Program, buf: &[u8]) -> OnBuffer {
        let exe = engine.prepare(prog).expect("the bench program prepares");
        let mut mem = Memory::new();
        let id = mem.add_copy(RegionKind::Input, buf, true);
        let addr = mem.region(id).expect("just added").base();
        OnBuffer { exe, mem, addr }
    }

    fn run(&mut self) -> u64 {
        let args = [self.addr, 64, 0, 0, 0];
        self.exe
            .run(args, &mut self.mem, &mut NoHelpers)
            .expect("the bench program runs")
    }
}

fn raw(c: &mut Criterion) {
    let packet = raw_packet();
    for &(name, text) in RAW_PROGRAMS {
        let slots = assemble_kernel(text).expect("the bench program assembles");
        let prog = Program::decode(slots).expect("decodes");
        let bytes = prog.to_bytes();
        let options = Options::default();
        let interp = Interpreter::new(options);
        let jit = Jit::with_options(Mode::Checked, options);
        let mut ours_interp = OnBuffer::new(&interp, &prog, &packet);
        let mut ours_jit = OnBuffer::new(&jit, &prog, &packet);
        let trusted = Jit::with_options(Mode::Trusted, options);
        let mut ours_trusted = OnBuffer::new(&trusted, &prog, &packet);
        let expected = ours_interp.run();
        assert_eq!(
            ours_jit.run(),
            expected,
            "{name}: bpfemu's engines disagree"
        );
        assert_eq!(
            ours_trusted.run(),
            expected,
            "{name}: the trusted JIT disagrees"
        );

        // rbpf's raw VM takes the buffer for the VM's whole lifetime on every call; the bench
        // hands it a fresh view of the same bytes each time.
        let mut mem = packet.clone();
        let (ptr, len) = (mem.as_mut_ptr(), mem.len());
        // SAFETY: `mem` outlives the VM and is not otherwise touched while a view is in use;
        // the programs only read the 64 bytes at r1.
        let view = || unsafe { std::slice::from_raw_parts_mut(ptr, len) };
        let mut rbpf_vm = rbpf::EbpfVmRaw::new(Some(&bytes)).expect("rbpf loads it");
        assert_eq!(
            rbpf_vm.execute_program(view()).expect("rbpf runs it"),
            expected,
            "{name}: rbpf's interpreter disagrees"
        );
        rbpf_vm.jit_compile().expect("rbpf compiles it");
        // SAFETY: rbpf's JIT runs the program on the buffer it is given, which the program
        // reads within its 64 bytes.
        let jitted = unsafe { rbpf_vm.execute_program_jit(view()) };
        assert_eq!(jitted.expect("rbpf's JIT runs it"), expected, "{name}");

        let mut group = c.benchmark_group(format!("raw/{name}"));
        group.bench_function("bpfemu-interp", |b| b.iter(|| black_box(ours_interp.run())));
        group.bench_function("bpfemu-jit", |b| b.iter(|| black_box(ours_jit.run())));
        group.bench_function("bpfemu-jit-trusted", |b| {
            b.iter(|| black_box(ours_trusted.run()))
        });
        group.bench_function("rbpf-interp", |b| {
            b.iter(|| black_box(rbpf_vm.execute_program(view())))
        });
        group.bench_function("rbpf-jit", |b| {
            // SAFETY: as above.
            b.iter(|| black_box(unsafe { rbpf_vm.execute_program_jit(view()) }))
        });
        group.finish();
    }
}

criterion_group! {
    name = engines;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    targets = xdp, raw
}
criterion_main!(engines);
