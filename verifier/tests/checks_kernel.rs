//! The checks before exploration (`check.rs`) against the running kernel.
//!
//! The kernel's level-1 log of a program refused before exploration is the message and
//! "processed 0 insns": so for each program, either both refuse it before exploring with the
//! same message, or neither does (the kernel then explored at least one instruction).
//! Programs: every opcode byte, hand-written shapes (jumps out of range, into an `ld_imm64`,
//! fall-through off the end, unreachable code, subprogram boundaries, back-edges, `ld_imm64`
//! forms) and a few thousand random small control-flow shapes (`BPFEMU_CHECK_CASES` sets how
//! many).
//!
//! Skipped with a message when bpf() is out of reach, unless `BPFEMU_REQUIRE_KERNEL=1`.

use bpfemu_conformance::libbpf::kernel_or_skip;
use bpfemu_isa::RawInsn;
use bpfemu_kernel::{
    BPF_LOG_LEVEL1, BPF_PROG_TYPE_XDP, LoadOptions, MapSpec, fd_imm, map_create, prog_load,
};
use bpfemu_loader::Kernel;
use bpfemu_verifier::check::{MapShape, check_raw};
use bpfemu_verifier::{Options, ProgramInput, verify};

fn r(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> RawInsn {
    RawInsn::new(code, dst, src, off, imm)
}

const MOV0_2: RawInsn = RawInsn::new(0xb7, 0, 0, 0, 2);
const EXIT: RawInsn = RawInsn::new(0x95, 0, 0, 0, 0);

/// The kernel's pre-exploration verdict: `Some(message)` when it refused the program before
/// exploring, `None` when it explored (whatever it then decided).
fn kernel_precheck(insns: &[RawInsn]) -> Option<String> {
    let mut opts = LoadOptions::new(BPF_PROG_TYPE_XDP, insns);
    opts.log_level = BPF_LOG_LEVEL1;
    opts.log_size = 1 << 20;
    let res = prog_load(&opts);
    if res.fd.is_ok() {
        return None;
    }
    let lines: Vec<&str> = res.log.lines().collect();
    let processed_zero = lines
        .iter()
        .any(|l| l.starts_with("processed 0 insns (limit"));
    if !processed_zero {
        return None;
    }
    Some(
        lines
            .iter()
            .rev()
            .find(|l| !l.is_empty() && !l.starts_with("processed "))
            .map_or_else(String::new, |l| l.to_string()),
    )
}

/// The running kernel, one for every case: its BTF, read for a program that names a kernel
/// symbol or a function by BTF, is parsed once, not per case (half a second in debug).
fn running() -> &'static Kernel {
    static RUNNING: std::sync::OnceLock<Kernel> = std::sync::OnceLock::new();
    RUNNING.get_or_init(Kernel::running)
}

fn ours(insns: &[RawInsn], maps: &[MapShape]) -> Option<String> {
    check_raw(insns, maps, running()).err().map(|e| e.message)
}

fn compare(name: &str, insns: &[RawInsn]) -> Result<(), String> {
    let kernel = kernel_precheck(insns);
    let bpfemu = ours(insns, &[]);
    if kernel == bpfemu {
        // The whole verifier reports the same refusal, with the kernel's log.
        if let Some(msg) = &kernel {
            let input = ProgramInput::raw(BPF_PROG_TYPE_XDP, insns, &[], running());
            let verdict = verify(
                &input,
                &Options {
                    log_level: 1,
                    ..Options::default()
                },
            );
            let got = verdict.rejection().map(|r| r.message.as_str());
            if got != Some(msg.as_str()) || !verdict.log.starts_with(&format!("{msg}\n")) {
                return Err(format!(
                    "{name}: verify() says {got:?}, log {:?}",
                    verdict.log
                ));
            }
        }
        Ok(())
    } else {
        Err(format!(
            "{name}: kernel {kernel:?}, bpfemu {bpfemu:?}\n  program: {:?}",
            insns
                .iter()
                .map(|i| format!("{:016x}", i.to_u64()))
                .collect::<Vec<_>>()
        ))
    }
}

fn assert_all(cases: Vec<(String, Vec<RawInsn>)>) {
    let failures: Vec<String> = cases
        .iter()
        .filter_map(|(name, insns)| compare(name, insns).err())
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} disagree:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

#[test]
fn every_opcode_byte() {
    if !kernel_or_skip("every_opcode_byte") {
        return;
    }
    let mut cases = Vec::new();
    for code in 0..=255u8 {
        let mut p = vec![r(code, 0, 0, 0, 0)];
        if code == 0x18 {
            p.push(r(0, 0, 0, 0, 0));
        }
        p.extend([MOV0_2, EXIT]);
        cases.push((format!("opcode {code:02x}"), p));
        // The same opcode as the last instruction (fall-through rules first).
        cases.push((
            format!("opcode {code:02x} last"),
            vec![MOV0_2, EXIT, r(code, 0, 0, 0, 0)],
        ));
    }
    assert_all(cases);
}

#[test]
fn control_flow_shapes() {
    if !kernel_or_skip("control_flow_shapes") {
        return;
    }
    let ld = |imm| [r(0x18, 0, 0, 0, imm), r(0, 0, 0, 0, 0)];
    let cases: Vec<(&str, Vec<RawInsn>)> = vec![
        ("jump past the end", vec![r(0x05, 0, 0, 5, 0), MOV0_2, EXIT]),
        (
            "jump before the start",
            vec![r(0x05, 0, 0, -5, 0), MOV0_2, EXIT],
        ),
        (
            "gotol past the end",
            vec![r(0x06, 0, 0, 0, 7), MOV0_2, EXIT],
        ),
        (
            "conditional past the end",
            vec![r(0x15, 1, 0, 9, 0), MOV0_2, EXIT],
        ),
        (
            "jmp32 conditional out",
            vec![r(0x16, 1, 0, -3, 0), MOV0_2, EXIT],
        ),
        ("no exit", vec![MOV0_2]),
        ("conditional last", vec![MOV0_2, r(0x15, 0, 0, -2, 0)]),
        ("ja last", vec![MOV0_2, EXIT, r(0x05, 0, 0, -2, 0)]),
        ("unreachable exit", vec![MOV0_2, EXIT, EXIT]),
        ("self loop", vec![MOV0_2, r(0x05, 0, 0, -1, 0), EXIT]),
        ("back-edge", vec![MOV0_2, r(0x15, 0, 0, -2, 0), EXIT]),
        (
            "into ld_imm64",
            [
                vec![r(0x15, 1, 0, 1, 0)],
                ld(1).to_vec(),
                vec![MOV0_2, EXIT],
            ]
            .concat(),
        ),
        (
            "ld_imm64 unreachable then into it",
            [
                vec![r(0x05, 0, 0, 1, 0)],
                ld(1).to_vec(),
                vec![MOV0_2, EXIT],
            ]
            .concat(),
        ),
        (
            "ld_imm64 truncated",
            vec![MOV0_2, EXIT, r(0x18, 0, 0, 0, 1)],
        ),
        (
            "ld_imm64 bad second slot",
            vec![r(0x18, 0, 0, 0, 1), r(0x07, 0, 0, 0, 0), MOV0_2, EXIT],
        ),
        (
            "ld_imm64 unknown kind",
            vec![r(0x18, 0, 7, 0, 1), r(0, 0, 0, 0, 0), MOV0_2, EXIT],
        ),
        (
            "ld_imm64 map fd with next imm",
            vec![r(0x18, 0, 1, 0, 1), r(0, 0, 0, 0, 1), MOV0_2, EXIT],
        ),
        ("ldx imm set", vec![r(0x61, 0, 1, 0, 5), MOV0_2, EXIT]),
        ("ldx mode abs", vec![r(0x21, 0, 1, 0, 0), MOV0_2, EXIT]),
        (
            "call out of range",
            vec![r(0x85, 0, 1, 0, 50), MOV0_2, EXIT],
        ),
        (
            "call backwards out",
            vec![r(0x85, 0, 1, 0, -2), MOV0_2, EXIT],
        ),
        (
            "call subprog",
            vec![r(0x85, 0, 1, 0, 2), MOV0_2, EXIT, MOV0_2, EXIT],
        ),
        (
            "subprog falls through",
            vec![r(0x85, 0, 1, 0, 2), MOV0_2, EXIT, MOV0_2],
        ),
        (
            "main falls into subprog",
            vec![r(0x85, 0, 1, 0, 1), MOV0_2, MOV0_2, EXIT],
        ),
        (
            "jump across subprogs",
            vec![r(0x85, 0, 1, 0, 2), r(0x05, 0, 0, 1, 0), EXIT, MOV0_2, EXIT],
        ),
        (
            "subprog never called",
            vec![
                r(0x85, 0, 1, 0, 2),
                MOV0_2,
                EXIT,
                MOV0_2,
                EXIT,
                MOV0_2,
                EXIT,
            ],
        ),
        (
            "ld_imm64 func",
            vec![
                r(0x18, 2, 4, 0, 3),
                r(0, 0, 0, 0, 0),
                MOV0_2,
                EXIT,
                MOV0_2,
                EXIT,
            ],
        ),
        (
            "ld_imm64 func out of range",
            vec![r(0x18, 2, 4, 0, 30), r(0, 0, 0, 0, 0), MOV0_2, EXIT],
        ),
        ("may_goto self", vec![MOV0_2, r(0xe5, 0, 0, -1, 0), EXIT]),
        (
            "unknown op then oob jump",
            vec![r(0xff, 0, 0, 0, 0), r(0x05, 0, 0, 9, 0), EXIT],
        ),
        (
            "oob jump then unknown op",
            vec![r(0x05, 0, 0, 9, 0), r(0xff, 0, 0, 0, 0), EXIT],
        ),
        (
            "unknown op unreachable",
            vec![MOV0_2, EXIT, r(0xff, 0, 0, 0, 0), EXIT],
        ),
        (
            "tail call in a subprog",
            vec![
                r(0x85, 0, 1, 0, 2),
                MOV0_2,
                EXIT,
                r(0x85, 0, 0, 0, 12),
                MOV0_2,
                EXIT,
            ],
        ),
        (
            "ld_abs in a subprog",
            vec![
                r(0x85, 0, 1, 0, 2),
                MOV0_2,
                EXIT,
                r(0x30, 0, 0, 0, 0),
                MOV0_2,
                EXIT,
            ],
        ),
    ];
    assert_all(cases.into_iter().map(|(n, p)| (n.to_string(), p)).collect());
}

/// The workspace's xorshift64* generator, so failures reproduce.
use bpfemu_vm::rng::Rng;

/// A jump offset around a program of `len` instructions: mostly inside, a few just outside.
fn random_off(rng: &mut Rng, len: usize) -> i16 {
    rng.below(len as u64 + 4) as i16 - (len as i16 / 2) - 2
}

fn random_program(rng: &mut Rng) -> Vec<RawInsn> {
    let len = 2 + rng.below(10) as usize;
    let mut p = Vec::with_capacity(len + 1);
    while p.len() < len {
        let insn = match rng.below(16) {
            0..=3 => MOV0_2,
            4 | 5 => EXIT,
            6 => r(0x05, 0, 0, random_off(rng, len), 0),
            7 => r(0x06, 0, 0, 0, random_off(rng, len) as i32),
            8 | 9 => r(0x15, 0, 0, random_off(rng, len), 0),
            10 => r(0x85, 0, 1, 0, random_off(rng, len) as i32),
            11 => r(0xe5, 0, 0, random_off(rng, len), 0),
            12 => {
                p.push(r(0x18, 0, 0, 0, 7));
                r(0, 0, 0, 0, 0)
            }
            13 => r(rng.below(256) as u8, 0, 0, 0, 0),
            14 if rng.below(2) == 0 => r(0x85, 0, 0, 0, 12),
            14 => r(0x61, 0, 1, 0, rng.below(2) as i32),
            _ => r(0x18, 2, 4, 0, random_off(rng, len) as i32),
        };
        p.push(insn);
    }
    p
}

#[test]
fn random_control_flow() {
    if !kernel_or_skip("random_control_flow") {
        return;
    }
    let n: usize = std::env::var("BPFEMU_CHECK_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3000);
    let mut rng = Rng::from_state(0x9e37_79b9_7f4a_7c15);
    let cases = (0..n)
        .map(|i| (format!("random #{i}"), random_program(&mut rng)))
        .collect();
    assert_all(cases);
}

#[test]
fn map_references() {
    if !kernel_or_skip("map_references") {
        return;
    }
    let array = map_create(&MapSpec::array(16, 1)).expect("array map");
    let big = map_create(&MapSpec::array(16, 4)).expect("array map");
    let hash = map_create(&MapSpec::hash(4, 8, 4)).expect("hash map");
    let fds = [fd_imm(&array), fd_imm(&big), fd_imm(&hash)];
    let shapes = [
        MapShape {
            map_type: 2,
            key_size: 4,
            value_size: 16,
            max_entries: 1,
            map_flags: 0,
        },
        MapShape {
            map_type: 2,
            key_size: 4,
            value_size: 16,
            max_entries: 4,
            map_flags: 0,
        },
        MapShape {
            map_type: 1,
            key_size: 4,
            value_size: 8,
            max_entries: 4,
            map_flags: 0,
        },
    ];
    // (name, kind, map, next imm): kernel programs name fds, ours indices.
    let cases = [
        ("map fd", 1u8, 0usize, 0i32),
        ("hash map fd", 1, 2, 0),
        ("value at 0", 2, 0, 0),
        ("value at 15", 2, 0, 15),
        ("value at 16", 2, 0, 16),
        ("value past max var off", 2, 0, 1 << 29),
        ("value of a 4-entry array", 2, 1, 0),
        ("value of a hash", 2, 2, 0),
    ];
    let mut failures = Vec::new();
    for (name, kind, map, next) in cases {
        let prog = |imm: i32| vec![r(0x18, 1, kind, 0, imm), r(0, 0, 0, 0, next), MOV0_2, EXIT];
        let kernel = kernel_precheck(&prog(fds[map]));
        let bpfemu = ours(&prog(map as i32), &shapes);
        if kernel != bpfemu {
            failures.push(format!("{name}: kernel {kernel:?}, bpfemu {bpfemu:?}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The kernel's final line after exploring (or not) `insns`.
fn kernel_last_line(insns: &[RawInsn]) -> String {
    let mut opts = LoadOptions::new(BPF_PROG_TYPE_XDP, insns);
    opts.log_level = BPF_LOG_LEVEL1;
    opts.log_size = 1 << 20;
    let res = prog_load(&opts);
    res.log
        .lines()
        .rev()
        .find(|l| !l.is_empty() && !l.starts_with("processed "))
        .unwrap_or("")
        .to_string()
}

#[test]
fn malformed_fields_when_reached() {
    if !kernel_or_skip("malformed_fields_when_reached") {
        return;
    }
    // One kernel for every case: its BTF (kernel symbols) is read once.
    let running = Kernel::running();
    let n: usize = std::env::var("BPFEMU_CHECK_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3000);
    let codes: Vec<u8> = (0..=255u8)
        .filter(|&c| bpfemu_verifier::check::opcode_in_insntable(c))
        .collect();
    let offs = [0i16, 1, -1, 8, 16, 32, 3];
    let imms = [0i32, 1, 16, 32, 64, 5, 0x99, 0xe1, 0x10000, 0xc0];
    let mut rng = Rng::from_state(0x1234_5678_9abc_def1);
    let mut failures = Vec::new();
    let mut compared = 0;
    for _ in 0..n {
        let code = codes[rng.below(codes.len() as u64) as usize];
        let insn = r(
            code,
            rng.below(12) as u8,
            rng.below(12) as u8,
            offs[rng.below(offs.len() as u64) as usize],
            imms[rng.below(imms.len() as u64) as usize],
        );
        let mut prog = vec![insn];
        if code == 0x18 {
            prog.push(r(0, 0, 0, 0, 0));
        }
        prog.extend([MOV0_2, EXIT]);
        if check_raw(&prog, &[], &running).is_err() || bpfemu_isa::Insn::decode(&prog, 0).is_ok() {
            continue;
        }
        // Kernel symbols and kfuncs are resolved against vmlinux BTF before exploration,
        // which these checks do not model.
        let ksym = code == 0x18 && insn.src == 3;
        let kfunc = code == 0x85 && insn.src == 2;
        if ksym || kfunc {
            continue;
        }
        compared += 1;
        // At the first instruction only R1 (ctx) and R10 are written.
        let ours = bpfemu_verifier::check::malformed_message(
            insn,
            &|r| r == 1 || r == 10,
            running.version(),
        );
        let kernel = kernel_last_line(&prog);
        if ours.as_deref() != Some(kernel.as_str()) {
            failures.push(format!(
                "{:016x}: kernel {kernel:?}, bpfemu {ours:?}",
                insn.to_u64()
            ));
        }
    }
    assert!(
        compared > n / 10,
        "only {compared} malformed instructions generated"
    );
    failures.sort();
    failures.dedup();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The kernel's verdict (None: accepted) and bpfemu's, through the whole verifier.
fn verdicts(insns: &[RawInsn]) -> (Option<String>, Option<String>) {
    let kernel = {
        let mut opts = LoadOptions::new(BPF_PROG_TYPE_XDP, insns);
        opts.log_level = BPF_LOG_LEVEL1;
        let res = prog_load(&opts);
        res.fd.is_err().then(|| kernel_last_line(insns))
    };
    let running = Kernel::running();
    let input = ProgramInput::raw(BPF_PROG_TYPE_XDP, insns, &[], &running);
    let verdict = verify(&input, &Options::default());
    (kernel, verdict.rejection().map(|r| r.message.clone()))
}

#[test]
fn combined_stack_depth() {
    if !kernel_or_skip("combined_stack_depth") {
        return;
    }
    let ret0 = [r(0xb7, 0, 0, 0, 0), EXIT];
    // main stores at fp-main, calls a subprogram that stores at fp-sub.
    let chain = |main: i16, sub: i16| {
        [
            vec![r(0x7a, 10, 0, -main, 0), r(0x85, 0, 1, 0, 2)],
            ret0.to_vec(),
            vec![r(0x7a, 10, 0, -sub, 0)],
            ret0.to_vec(),
        ]
        .concat()
    };
    let mut failures = Vec::new();
    // Frames round to 16 bytes with the JIT: 488+16 fits (496+16), 488+32 does not.
    for (main, sub) in [
        (488, 16),
        (488, 32),
        (256, 256),
        (264, 256),
        (8, 8),
        (504, 8),
    ] {
        let (kernel, ours) = verdicts(&chain(main, sub));
        if kernel != ours {
            failures.push(format!("{main}+{sub}: kernel {kernel:?}, bpfemu {ours:?}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
