//! bpfemu's table of the kfuncs XDP may call (`verifier/src/call/kfunc_sets.rs`) against the
//! running kernel: every function vmlinux BTF tags `bpf_kfunc` is called from a three-instruction
//! XDP program with whatever the argument registers hold; the kernel refuses the call as "not
//! allowed" exactly for the functions the table leaves out, and as sleepable exactly for those
//! it lists as sleepable. Where bpfemu checks the kfunc, or refuses it as the kernel does, its
//! verdict and message must equal the kernel's; the others it answers "not yet supported".
//!
//! Skipped with a message when bpf() is out of reach, unless `BPFEMU_REQUIRE_KERNEL=1`.

use bpfemu_conformance::libbpf::kernel_or_skip;
use bpfemu_isa::RawInsn;
use bpfemu_kernel::verifier_error_line;
use bpfemu_kernel::{self as kernel, LoadOptions};
use bpfemu_loader::Kernel;
use bpfemu_loader::btf::BtfKind;
use bpfemu_verifier::call::kfunc_sets::{in_xdp_sets, is_sleepable};
use bpfemu_verifier::{Options, ProgramInput, verify};

/// `call kfunc[id]; r0 = XDP_PASS; exit`.
fn calling(btf_id: u32) -> Vec<RawInsn> {
    let insn = |code, src, imm| RawInsn {
        code,
        dst: 0,
        src,
        off: 0,
        imm,
    };
    vec![
        insn(0x85, 2, btf_id as i32),
        insn(0xb7, 0, 2),
        insn(0x95, 0, 0),
    ]
}

#[test]
fn the_xdp_kfunc_table_is_the_kernels() {
    if !kernel_or_skip("the_xdp_kfunc_table_is_the_kernels") {
        return;
    }
    let running = Kernel::running();
    let btf = running.btf().expect("vmlinux BTF");
    let (mut kfuncs, mut same, mut unsupported) = (0, 0, 0);
    let mut problems = Vec::new();
    for id in 1..btf.type_count() as u32 {
        let Some(tag) = btf.get(id) else { continue };
        let BtfKind::DeclTag { ty, .. } = tag.kind else {
            continue;
        };
        if tag.name != "bpf_kfunc" {
            continue;
        }
        let name = btf.get(ty).map_or("?", |t| t.name.as_str()).to_owned();
        kfuncs += 1;
        let insns = calling(ty);
        let mut opts = LoadOptions::new(kernel::BPF_PROG_TYPE_XDP, &insns);
        opts.log_level = 1;
        opts.log_size = 1 << 20;
        let loaded = kernel::prog_load(&opts);
        let kernel_line = verifier_error_line(&loaded.log);
        let refused = kernel_line == format!("calling kernel function {name} is not allowed");
        let sleepable =
            kernel_line == format!("program must be sleepable to call sleepable kfunc {name}");
        if refused == in_xdp_sets(&name) {
            problems.push(format!("{name}: the kernel says '{kernel_line}'"));
        }
        if sleepable != is_sleepable(&name) {
            problems.push(format!("{name}: sleepable {sleepable} in the kernel"));
        }
        let verdict = verify(
            &ProgramInput::raw(6, &insns, &[], &running),
            &Options::default(),
        );
        let ours = verdict.rejection().map(|r| r.message.clone());
        if ours
            .as_deref()
            .is_some_and(|m| m.starts_with("not yet supported"))
        {
            unsupported += 1;
            continue;
        }
        let theirs = loaded.fd.is_err().then_some(kernel_line);
        if ours == theirs {
            same += 1;
        } else {
            problems.push(format!("{name}: kernel {theirs:?}, bpfemu {ours:?}"));
        }
    }
    println!(
        "{kfuncs} kfuncs: {same} judged as the kernel judges, {unsupported} not yet supported by bpfemu"
    );
    assert!(kfuncs > 100, "vmlinux BTF tags {kfuncs} kfuncs");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
