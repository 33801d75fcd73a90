//! The XDP ctx access rules (`prog_type/xdp.rs`) against the running kernel: every offset
//! from -8 to 31, sizes 1, 2, 4 and 8, loads (`ldx`), register stores (`stx`) and immediate
//! stores (`st`), for programs loaded plainly and for a devmap (`BPF_XDP_DEVMAP`). The kernel
//! accepts exactly the accesses bpfemu's rules allow, and refuses the others with
//! `invalid bpf_context access off=N size=M`.
//!
//! Skipped with a message when bpf() is out of reach, unless `BPFEMU_REQUIRE_KERNEL=1`.

use bpfemu_conformance::libbpf::kernel_or_skip;
use bpfemu_isa::RawInsn;
use bpfemu_kernel::{BPF_LOG_LEVEL1, BPF_PROG_TYPE_XDP, LoadOptions, prog_load};
use bpfemu_verifier::prog_type::ops_for;
use bpfemu_verifier::prog_type::xdp::BPF_XDP_DEVMAP;

fn kernel(insns: &[RawInsn], expected_attach_type: u32) -> Result<(), String> {
    let mut opts = LoadOptions::new(BPF_PROG_TYPE_XDP, insns);
    opts.log_level = BPF_LOG_LEVEL1;
    opts.log_size = 1 << 16;
    opts.expected_attach_type = expected_attach_type;
    let res = prog_load(&opts);
    match res.fd {
        Ok(_) => Ok(()),
        Err(_) => Err(res
            .log
            .lines()
            .rev()
            .find(|l| !l.is_empty() && !l.starts_with("processed "))
            .unwrap_or("")
            .to_string()),
    }
}

#[test]
fn ctx_accesses_match_the_kernel() {
    if !kernel_or_skip("ctx_accesses_match_the_kernel") {
        return;
    }
    let xdp = ops_for(BPF_PROG_TYPE_XDP).expect("xdp ops");
    let size_code = |size: u32| match size {
        1 => 0x10u8,
        2 => 0x08,
        4 => 0x00,
        _ => 0x18,
    };
    let mut failures = Vec::new();
    let mut accepted = 0;
    for eat in [0, BPF_XDP_DEVMAP] {
        for off in -8i16..32 {
            for size in [1u32, 2, 4, 8] {
                // (what, instruction, is a write)
                let accesses = [
                    (
                        "ldx",
                        RawInsn::new(0x61 | size_code(size), 2, 1, off, 0),
                        false,
                    ),
                    (
                        "stx",
                        RawInsn::new(0x63 | size_code(size), 1, 10, off, 0),
                        true,
                    ),
                    (
                        "st",
                        RawInsn::new(0x62 | size_code(size), 1, 0, off, 7),
                        true,
                    ),
                ];
                for (what, access, write) in accesses {
                    let prog = [
                        access,
                        RawInsn::new(0xb7, 0, 0, 0, 2),
                        RawInsn::new(0x95, 0, 0, 0, 0),
                    ];
                    let theirs = kernel(&prog, eat);
                    let ours = match xdp.ctx_access(off as i32, size, write, eat) {
                        Some(_) => Ok(()),
                        None => Err(format!("invalid bpf_context access off={off} size={size}")),
                    };
                    if theirs.is_ok() {
                        accepted += 1;
                    }
                    if theirs != ours {
                        failures.push(format!(
                            "{what} off={off} size={size} attach {eat}: kernel {theirs:?}, bpfemu {ours:?}"
                        ));
                    }
                }
            }
        }
    }
    assert_eq!(
        accepted,
        5 + 6,
        "the kernel accepts five fields, six for a devmap"
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
