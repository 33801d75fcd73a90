//! bpfemu as a VM's `/init` (bpfemu_vmkernel's guest hook at the top of `main`) and, as that
//! VM's job, the hidden `bpfemu kernel-verdicts`: `diff --verifier`'s kernel side, given by a
//! kernel other than the host's. Judged by 6.1 and 6.12 booted for real on the cpu v4 object
//! of tests/data/vm (a BPF_SDIV): 6.1 rejects it with the message libbpf_verdicts gets there,
//! 6.12 accepts it in 12 instructions, as vmkernel/tests/kernels.rs has it through libbpf.
//! One boot per kernel.
//!
//! Needs QEMU and apt access to the suites (see scripts/kernel_apt_sources.sh); skipped with
//! a message without them, unless `BPFEMU_REQUIRE_KERNEL=1` (CI).

use bpfemu_vmkernel::images;
use bpfemu_vmkernel::test_images::image_or_skip;
use bpfemu_vmkernel::{JobStatus, Vm};
use std::path::Path;
use std::time::Duration;

const BPFEMU: &str = env!("CARGO_BIN_EXE_bpfemu");

/// The kernel-verdicts lines `version` gives for both test objects, booted with bpfemu as init.
fn kernel_verdicts_in(version: &str, image: &Path) -> Vec<serde_json::Value> {
    let kernel = images::kernel(version).expect("a known kernel");
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/vm");
    let object = |name: &str| std::fs::read(data.join(name)).expect(name);
    let results = Vm::new(image, Path::new(BPFEMU))
        .with_file("/objects/pass.o", object("accepted_everywhere.o"))
        .with_file("/objects/sdiv.o", object("cpu_v4_sdiv.o"))
        .job(["/init", "kernel-verdicts", "/objects/pass.o"])
        .job(["/init", "kernel-verdicts", "/objects/sdiv.o"])
        .timeout(Duration::from_secs(300))
        .run()
        .unwrap_or_else(|e| panic!("{version}: {e}"));
    assert_eq!(results.release, kernel.release);
    let mut lines = Vec::new();
    for job in &results.jobs {
        let stderr = String::from_utf8_lossy(&job.stderr);
        assert_eq!(job.status, JobStatus::Exited(0), "{version}: {stderr}");
        for line in String::from_utf8_lossy(&job.stdout).lines() {
            lines.push(serde_json::from_str(line).expect(line));
        }
    }
    lines
}

fn summary(line: &serde_json::Value) -> (String, bool, Option<String>, Option<u64>) {
    let kernel = &line["kernel"];
    (
        line["program"].as_str().unwrap_or_default().to_owned(),
        kernel["accepted"].as_bool().expect("accepted"),
        kernel["error"].as_str().map(str::to_owned),
        kernel["processed_insns"].as_u64(),
    )
}

#[test]
fn bpfemu_as_init_reports_6_1s_verdicts() {
    let Some(image) = image_or_skip("bpfemu_as_init_reports_6_1s_verdicts", "6.1") else {
        return;
    };
    let lines = kernel_verdicts_in("6.1", &image);
    let got: Vec<_> = lines.iter().map(summary).collect();
    assert_eq!(
        got,
        [
            ("pass_ipv4".into(), true, None, Some(16)),
            (
                "signed_divide".into(),
                false,
                Some("BPF_ALU uses reserved fields".into()),
                Some(7)
            ),
        ]
    );
    assert_eq!(lines[1]["section"], "xdp");
}

#[test]
fn bpfemu_as_init_reports_6_12s_verdicts() {
    let Some(image) = image_or_skip("bpfemu_as_init_reports_6_12s_verdicts", "6.12") else {
        return;
    };
    let got: Vec<_> = kernel_verdicts_in("6.12", &image)
        .iter()
        .map(summary)
        .collect();
    assert_eq!(
        got,
        [
            ("pass_ipv4".into(), true, None, Some(16)),
            ("signed_divide".into(), true, None, Some(12)),
        ]
    );
}
