//! The license rule against the running kernel: a program whose object is not under a
//! GPL-compatible license may call no GPL-only helper and no kfunc. Judged for every helper
//! an XDP program may call, and for license strings the kernel reads as GPL-compatible and
//! ones that only look it.
//!
//! Skipped with a message when bpf() is out of reach, unless `BPFEMU_REQUIRE_KERNEL=1`.

mod common;

use bpfemu_conformance::libbpf::kernel_or_skip;
use bpfemu_isa::RawInsn;
use bpfemu_kernel::BPF_PROG_TYPE_XDP;
use bpfemu_loader::Kernel;
use bpfemu_verifier::call::proto::xdp_proto;
use bpfemu_verifier::{Options, ProgramInput, license_is_gpl_compatible, verify};
use common::kernel_side::kernel_error_line;
use std::ffi::CString;

fn r(code: u8, dst: u8, src: u8, imm: i32) -> RawInsn {
    RawInsn {
        code,
        dst,
        src,
        off: 0,
        imm,
    }
}

/// `call ID; r0 = 2; exit` (`src` 0: a helper; 2: a kfunc by BTF id). The license is checked
/// before any argument, so no argument is set up.
fn calling(src: u8, id: i32) -> Vec<RawInsn> {
    vec![r(0x85, 0, src, id), r(0xb7, 0, 0, 2), r(0x95, 0, 0, 0)]
}

/// The kernel's final error line under `license`, or `None` when it loads the program.
fn kernel_says(insns: &[RawInsn], license: &str) -> Option<String> {
    let license = CString::new(license).expect("no NUL");
    kernel_error_line(insns, &license)
}

fn bpfemu_says(insns: &[RawInsn], gpl_compatible: bool, kernel: &Kernel) -> Option<String> {
    let input = ProgramInput {
        gpl_compatible,
        ..ProgramInput::raw(BPF_PROG_TYPE_XDP, insns, &[], kernel)
    };
    let verdict = verify(&input, &Options::default());
    verdict.rejection().map(|r| r.message.clone())
}

const GPL_REFUSAL: &str = "cannot call GPL-restricted function from non-GPL compatible program";

#[test]
fn gpl_only_helpers_match_the_kernel() {
    if !kernel_or_skip("gpl_only_helpers_match_the_kernel") {
        return;
    }
    let kernel = Kernel::running();
    let mut checked = 0;
    let mut gpl_only = 0;
    let mut failures = Vec::new();
    for id in (1..=211).filter(|&id| xdp_proto(id).is_some()) {
        let insns = calling(0, id);
        let kernel_refuses = kernel_says(&insns, "Proprietary").as_deref() == Some(GPL_REFUSAL);
        let ours = bpfemu_says(&insns, false, &kernel);
        let we_refuse = ours.as_deref() == Some(GPL_REFUSAL);
        if kernel_refuses != we_refuse {
            failures.push(format!(
                "helper #{id}: kernel GPL-only {kernel_refuses} ({:?}), bpfemu {ours:?}",
                kernel_says(&insns, "Proprietary")
            ));
        }
        // Under GPL the same call never meets the rule.
        if bpfemu_says(&insns, true, &kernel).as_deref() == Some(GPL_REFUSAL) {
            failures.push(format!("helper #{id}: refused under GPL"));
        }
        checked += 1;
        gpl_only += usize::from(kernel_refuses);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // The table is the XDP helpers' (about 150), bpf_trace_printk among the GPL-only ones.
    assert!(
        checked > 100 && gpl_only > 5,
        "{checked} helpers, {gpl_only} GPL-only"
    );
}

#[test]
fn license_strings_match_the_kernel() {
    if !kernel_or_skip("license_strings_match_the_kernel") {
        return;
    }
    let trace_printk = calling(0, 6);
    for license in [
        "GPL",
        "GPL v2",
        "GPL and additional rights",
        "Dual BSD/GPL",
        "Dual MIT/GPL",
        "Dual MPL/GPL",
        "",
        "gpl",
        "GPL ",
        "GPLv2",
        "GPL-2.0",
        "GPL v3",
        "Dual BSD/GPL ",
        "BSD",
        "Proprietary",
    ] {
        let kernel = kernel_says(&trace_printk, license).as_deref() == Some(GPL_REFUSAL);
        assert_eq!(
            !license_is_gpl_compatible(license),
            kernel,
            "license {license:?}: kernel refuses bpf_trace_printk: {kernel}"
        );
    }
}

#[test]
fn kfuncs_need_a_gpl_compatible_license() {
    if !kernel_or_skip("kfuncs_need_a_gpl_compatible_license") {
        return;
    }
    let kernel = Kernel::running();
    // Any id: the rule comes before the id is looked up, in the kernel as in bpfemu.
    for id in [1, 0x7fff_fff0] {
        let insns = calling(2, id);
        let want = kernel_says(&insns, "MIT");
        assert_eq!(
            want.as_deref(),
            Some("cannot call kernel function from non-GPL compatible program")
        );
        assert_eq!(bpfemu_says(&insns, false, &kernel), want, "kfunc id {id}");
        // Under GPL the id itself is judged.
        assert_ne!(bpfemu_says(&insns, true, &kernel), want, "kfunc id {id}");
    }
}
