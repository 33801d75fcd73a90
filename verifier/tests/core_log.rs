//! The verifier log at level 2, line for line against the running kernel's, for small
//! programs that exercise the core: packet range checks (accepted and rejected), stack spills
//! of scalars of several widths, branch refinement of scalar ranges, register-register
//! comparisons, uninitialised registers, precision backtracking (`mark_precise:` lines), a
//! helper's write clobbering the stack it was given; sockets (`sock_or_null(id=..,ref_obj_id=..)`,
//! `sock_common`, casts to `ptr_tcp_sock`) looked up, read, spilled, released or leaked.
//!
//! The trace of 6.18's stack liveness analysis (`(0) frame 0 insn 6 +written -8`, `(0) live
//! stack update done in 2 iterations`) is compared too.
//!
//! Skipped with a message when bpf() is out of reach, unless `BPFEMU_REQUIRE_KERNEL=1`.

use bpfemu_conformance::libbpf::kernel_or_skip;
use bpfemu_isa::asm::assemble_kernel;
use bpfemu_kernel::{BPF_LOG_LEVEL2, BPF_PROG_TYPE_XDP, LoadOptions, prog_load};
use bpfemu_loader::Kernel;
use bpfemu_verifier::{Options, ProgramInput, verify};

const PROGRAMS: &[(&str, &str)] = &[
    (
        "packet_read_within_range",
        "r2 = *(u32 *)(r1 +0)
         r3 = *(u32 *)(r1 +4)
         r4 = r2
         r4 += 14
         if r4 > r3 goto pc+3
         r5 = *(u8 *)(r2 +12)
         *(u64 *)(r10 -8) = r5
         *(u32 *)(r10 -16) = r5
         r0 = 2
         exit",
    ),
    (
        "packet_read_past_range",
        "r2 = *(u32 *)(r1 +0)
         r3 = *(u32 *)(r1 +4)
         r4 = r2
         r4 += 14
         if r4 > r3 goto pc+2
         r5 = *(u8 *)(r2 +14)
         r0 = r5
         r0 = 2
         exit",
    ),
    (
        "ranges_refined_on_both_edges",
        "r2 = *(u32 *)(r1 +16)
         r2 &= 255
         if r2 > 100 goto pc+3
         r3 = r2
         r3 <<= 2
         if w3 s< 8 goto pc+1
         r0 = 1
         r0 = 0
         exit",
    ),
    (
        "register_register_compare",
        "r2 = *(u32 *)(r1 +12)
         r3 = *(u32 *)(r1 +16)
         r2 &= 1023
         r3 &= 63
         if r2 < r3 goto pc+2
         r0 = r2
         exit
         r0 = r3
         exit",
    ),
    (
        "partial_zero_spill_makes_its_register_precise",
        "r2 = 0
         *(u32 *)(r10 -4) = r2
         r0 = *(u32 *)(r10 -4)
         exit",
    ),
    (
        "constant_size_argument_is_backtracked",
        "r1 = 0
         *(u64 *)(r10 -8) = r1
         r1 = r10
         r1 += -8
         r2 = 8
         r3 = 0
         r4 = 0
         r5 = 0
         call bpf_csum_diff#28
         r0 = 2
         exit",
    ),
    (
        "helper_writes_clobber_stack_zeros",
        "r6 = r1
         r1 = 0
         *(u64 *)(r10 -8) = r1
         *(u64 *)(r10 -16) = r1
         *(u64 *)(r10 -24) = r1
         *(u64 *)(r10 -32) = r1
         *(u64 *)(r10 -40) = r1
         *(u64 *)(r10 -48) = r1
         *(u64 *)(r10 -56) = r1
         *(u64 *)(r10 -64) = r1
         r1 = r6
         r2 = r10
         r2 += -64
         r3 = 64
         r4 = 0
         call bpf_fib_lookup#69
         r0 = *(u8 *)(r10 -10)
         r0 &= 1
         exit",
    ),
    (
        "uninitialised_register_read",
        "r0 = 0
         if r1 == 0 goto pc+1
         r0 = r4
         exit",
    ),
    (
        "socket_lookup_checked_read_and_released",
        "r2 = 0
         *(u64 *)(r10 -16) = r2
         *(u32 *)(r10 -8) = r2
         r2 = r10
         r2 += -16
         r3 = 12
         r4 = -1
         r5 = 0
         call bpf_sk_lookup_tcp
         r6 = r0
         if r0 == 0 goto pc+4
         r7 = *(u32 *)(r0 +4)
         *(u64 *)(r10 -24) = r0
         r1 = r0
         call bpf_sk_release
         r0 = 2
         exit",
    ),
    (
        "sock_common_cast_keeps_the_reference",
        "r2 = 0
         *(u64 *)(r10 -16) = r2
         *(u32 *)(r10 -8) = r2
         r2 = r10
         r2 += -16
         r3 = 12
         r4 = -1
         r5 = 0
         call bpf_skc_lookup_tcp
         if r0 == 0 goto pc+8
         r6 = r0
         r1 = r0
         call bpf_skc_to_tcp_sock
         if r0 == 0 goto pc+2
         r1 = r0
         goto pc+1
         r1 = r6
         call bpf_sk_release
         r0 = 2
         exit",
    ),
    (
        "socket_leaked",
        "r2 = 0
         *(u64 *)(r10 -16) = r2
         *(u32 *)(r10 -8) = r2
         r2 = r10
         r2 += -16
         r3 = 12
         r4 = -1
         r5 = 0
         call bpf_sk_lookup_udp
         if r0 == 0 goto pc+1
         r1 = *(u8 *)(r0 +48)
         r0 = 2
         exit",
    ),
];

#[test]
fn level2_log_matches_the_kernel() {
    if !kernel_or_skip("level2_log_matches_the_kernel") {
        return;
    }
    let mut problems = Vec::new();
    for (name, src) in PROGRAMS {
        let insns = assemble_kernel(src).unwrap_or_else(|e| panic!("{name}: {e:?}"));
        let mut load = LoadOptions::new(BPF_PROG_TYPE_XDP, &insns);
        load.log_level = BPF_LOG_LEVEL2;
        let kernel = prog_load(&load);
        let ours = verify(
            &ProgramInput::raw(BPF_PROG_TYPE_XDP, &insns, &[], &Kernel::running()),
            &Options {
                log_level: BPF_LOG_LEVEL2,
                ..Options::default()
            },
        );
        assert_eq!(
            kernel.fd.is_ok(),
            ours.is_accepted(),
            "{name}: verdicts differ\nkernel:\n{}\nbpfemu:\n{}",
            kernel.log,
            ours.log
        );
        let expected = kernel.log.clone();
        if expected != ours.log {
            let first = expected
                .lines()
                .zip(ours.log.lines())
                .position(|(a, b)| a != b)
                .unwrap_or(expected.lines().count().min(ours.log.lines().count()));
            problems.push(format!(
                "{name}: logs differ from line {}\nkernel: {:?}\nbpfemu: {:?}",
                first + 1,
                expected.lines().nth(first),
                ours.log.lines().nth(first)
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
}

#[test]
fn level1_log_of_a_rejection_is_the_failing_path() {
    if !kernel_or_skip("level1_log_of_a_rejection_is_the_failing_path") {
        return;
    }
    let (name, src) = PROGRAMS[1];
    let insns = assemble_kernel(src).unwrap_or_else(|e| panic!("{name}: {e:?}"));
    let mut load = LoadOptions::new(BPF_PROG_TYPE_XDP, &insns);
    load.log_level = 1;
    let kernel = prog_load(&load);
    let ours = verify(
        &ProgramInput::raw(BPF_PROG_TYPE_XDP, &insns, &[], &Kernel::running()),
        &Options {
            log_level: 1,
            ..Options::default()
        },
    );
    assert_eq!(kernel.log, ours.log);
    assert_eq!(
        ours.rejection().map(|r| r.message.as_str()),
        Some("R2 offset is outside of the packet")
    );
}
