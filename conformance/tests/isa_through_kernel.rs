//! The bpf_conformance ISA suite through the real kernel: every test the kernel's verifier
//! accepts and runs must give bpfemu's r0, all 64 bits, and every rejection must be explained.

use bpfemu::conformance::kernel_isa::{self, Agreement, BlockPlacement, KernelVerdict};
use bpfemu::conformance::suite;
use bpfemu_conformance::libbpf::kernel_or_skip;
use bpfemu_kernel as kernel;
use std::path::{Path, PathBuf};

/// The suite's tests: `../shared/conformance/bpf_conformance/tests` from the workspace root,
/// unless `BPFEMU_CONFORMANCE_DIR` names another checkout.
fn tests_dir() -> PathBuf {
    let dir = std::env::var_os("BPFEMU_CONFORMANCE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("../../shared/conformance/bpf_conformance")
        })
        .join("tests");
    assert!(
        dir.is_dir(),
        "the bpf_conformance suite is not at {}",
        dir.display()
    );
    dir
}

/// More rejections than this means the wrapper, not the tests, is what the kernel refuses
/// (Linux 6.18 rejects 12: the shift-by-immediate tests with out-of-range amounts).
const MAX_REJECTED: usize = 20;

/// Why the kernel rejects a test, from the verifier's error line; `None` for a rejection nobody
/// has explained yet.
fn explain_rejection(name: &str, line: &str) -> Option<&'static str> {
    let shift_imm_out_of_range = name.contains("sh")
        && name.contains("-imm-")
        && (name.ends_with("-high") || name.ends_with("-neg"));
    if line.starts_with("invalid shift ") && shift_imm_out_of_range {
        // check_alu_op: a constant shift amount must be below the operand width; the suite
        // expects the amount masked, as the register forms (which the kernel runs) do.
        return Some("shift immediate outside 0..width-1");
    }
    None
}

/// Tests the wrapper must get through the verifier: plain ALU, jumps, loads and stores through
/// the block on the stack, atomics, and a test with its own local calls.
const MUST_BE_ACCEPTED: &[&str] = &[
    "add",
    "mov",
    "jeq-imm",
    "ldxw",
    "stxdw",
    "lock_add",
    "call_local",
    "mem-len",
    "lddw",
];

#[test]
fn isa_suite_through_the_kernel_agrees_with_bpfemu() {
    if !kernel_or_skip("isa_suite_through_the_kernel_agrees_with_bpfemu") {
        return;
    }
    let reports = kernel_isa::run_dir_against_kernel(&tests_dir()).expect("suite runs");
    println!("{}", kernel_isa::format_reports(&reports));
    assert!(reports.len() >= 300, "only {} tests found", reports.len());

    let differ: Vec<String> = reports
        .iter()
        .filter(|r| {
            matches!(
                r.agreement,
                Agreement::Differ { .. } | Agreement::KernelRunFailed
            )
        })
        .filter_map(kernel_isa::report_line)
        .collect();
    assert!(
        differ.is_empty(),
        "{} tests where the kernel ran and bpfemu disagrees (or the run failed):\n{}",
        differ.len(),
        differ.join("\n")
    );

    // Every rejection names the verifier's reason.
    let rejected: Vec<_> = reports
        .iter()
        .filter(|r| r.agreement == Agreement::KernelRejects)
        .collect();
    let mut unexplained = Vec::new();
    for r in &rejected {
        let KernelVerdict::Rejected {
            verifier_error_line,
            ..
        } = &r.kernel
        else {
            panic!("{}: rejected without a Rejected verdict", r.name);
        };
        assert!(
            !verifier_error_line.is_empty() && verifier_error_line != "(empty verifier log)",
            "{}: rejected without a verifier error line",
            r.name
        );
        match explain_rejection(&r.name, verifier_error_line) {
            Some(why) => eprintln!("rejected {}: {verifier_error_line} ({why})", r.name),
            None => unexplained.push(format!("{}: {verifier_error_line}", r.name)),
        }
    }
    assert!(
        unexplained.is_empty(),
        "kernel rejections nobody explained:\n{}",
        unexplained.join("\n")
    );
    assert!(
        rejected.len() < MAX_REJECTED,
        "{} tests rejected by the kernel: the wrapper is suspect",
        rejected.len()
    );
    for name in MUST_BE_ACCEPTED {
        let r = reports
            .iter()
            .find(|r| r.name == *name)
            .unwrap_or_else(|| panic!("{name}: not in the suite"));
        assert_eq!(
            r.agreement,
            Agreement::Agree,
            "{name}: {}",
            kernel_isa::report_line(r).unwrap_or_default()
        );
    }

    // The only test that calls helper 5 ignores its result, so it is compared, and agrees.
    let unwind = reports
        .iter()
        .find(|r| r.name == "call_unwind_fail")
        .expect("call_unwind_fail in the suite");
    assert_eq!(unwind.agreement, Agreement::Agree);

    // Only callx (not a Linux instruction) is skipped.
    let skipped: Vec<&str> = reports
        .iter()
        .filter(|r| matches!(r.agreement, Agreement::Skipped { .. }))
        .map(|r| r.name.as_str())
        .collect();
    assert_eq!(skipped, ["callx"]);

    // The block goes on the stack, moved off the 8-byte boundary when the test reads it
    // unaligned (the verifier's stack alignment rule); ldxw reads a word at offset 2.
    for r in &reports {
        if !matches!(r.block, None | Some(BlockPlacement::Stack { shift: 0 })) {
            eprintln!("block of {}: {:?}", r.name, r.block);
        }
    }
    let ldxw = reports.iter().find(|r| r.name == "ldxw").expect("ldxw");
    assert!(
        matches!(ldxw.block, Some(BlockPlacement::Stack { shift }) if shift % 4 == 2),
        "ldxw: block {:?}",
        ldxw.block
    );

    // The JSON form serializes.
    let json = serde_json::to_string(&reports).expect("reports serialize");
    assert!(json.contains("\"agreement\":\"agree\""));
}

/// Two loads whose alignments no single stack shift satisfies (a word at offset 1, a double
/// word at offset 2): the wrapper falls back to the block in a map value, and still agrees.
#[test]
fn unaligned_block_falls_back_to_a_map_value() {
    if !kernel_or_skip("unaligned_block_falls_back_to_a_map_value") {
        return;
    }
    let text = "-- asm\nldxw %r0, [%r1+1]\nldxdw %r3, [%r1+2]\nadd %r0, %r3\nadd %r0, %r2\nexit\n\
                -- mem\n00 11 22 33 44 55 66 77 88 99 aa bb cc dd ee ff\n-- result\n0x9988776699775543\n";
    let case = suite::parse(Path::new("unaligned.data"), text).expect("parses");
    let report = kernel_isa::run_case_against_kernel(&case).expect("kernel reachable");
    assert_eq!(report.block, Some(BlockPlacement::MapValue), "{report:?}");
    assert_eq!(report.agreement, Agreement::Agree, "{report:?}");
    assert_eq!(report.kernel, KernelVerdict::Result(0x9988776699775543));
}

/// The raw map read-back the comparison relies on: update, lookup, and EINVAL (not a kernel
/// write past our buffer) when the sizes do not match the map's.
#[test]
fn raw_map_lookup_and_update() {
    if !kernel_or_skip("raw_map_lookup_and_update") {
        return;
    }
    let map = kernel::map_create(&kernel::MapSpec::array(8, 1)).expect("array map");
    let key = 0u32.to_ne_bytes();
    let mut value = [0xffu8; 8];
    kernel::map_lookup(&map, &key, &mut value).expect("lookup");
    assert_eq!(value, [0; 8], "array values start zeroed");
    kernel::map_update(&map, &key, &0x1122_3344_5566_7788u64.to_ne_bytes(), 0).expect("update");
    kernel::map_lookup(&map, &key, &mut value).expect("lookup");
    assert_eq!(u64::from_ne_bytes(value), 0x1122_3344_5566_7788);
    let mut short = [0u8; 4];
    assert_eq!(
        kernel::map_lookup(&map, &key, &mut short),
        Err(libc::EINVAL)
    );
    assert_eq!(
        kernel::map_update(&map, &key, &[0u8; 4], 0),
        Err(libc::EINVAL)
    );
    assert_eq!(
        kernel::map_lookup(&map, &1u32.to_ne_bytes(), &mut value),
        Err(libc::ENOENT)
    );
}
