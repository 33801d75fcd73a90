//! Each kernel booted for real: the release it reports, and libbpf 1.7's verdicts on two small
//! XDP objects (tests/data/vm, committed, built by its build.sh): one every kernel accepts, and one
//! with a cpu v4 signed division, which 6.6 introduced (5.10 and 6.1 reject it, 6.12 and 7.2
//! accept it). One boot per kernel.
//!
//! Needs QEMU, apt access to the four suites (the images are cached, see
//! `images::cache_dir`), and the judge `target/debug/examples/libbpf_verdicts` (`cargo build
//! -p bpfemu-conformance --example libbpf_verdicts`; `cargo test --workspace` builds it).
//! Skipped with a message when any is missing, unless `BPFEMU_REQUIRE_KERNEL=1` (CI).

use bpfemu_vmkernel::images;
use bpfemu_vmkernel::test_images::{image_or_skip, kernel_required};
use bpfemu_vmkernel::{JobStatus, Vm, VmError};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

const INIT: &str = env!("CARGO_BIN_EXE_bpfemu-kernel-vms");

/// What a kernel test needs, or why it cannot run.
struct Setup {
    judge: PathBuf,
    objects: PathBuf,
}

/// The setup, or None after a skip message; a panic under `BPFEMU_REQUIRE_KERNEL=1`.
fn setup_or_skip(test: &str) -> Option<&'static Setup> {
    static SETUP: OnceLock<Result<Setup, String>> = OnceLock::new();
    match SETUP.get_or_init(setup) {
        Ok(setup) => Some(setup),
        Err(why) => {
            assert!(
                !kernel_required(),
                "{test}: BPFEMU_REQUIRE_KERNEL=1 but {why}"
            );
            eprintln!("{test}: skipping: {why} (set BPFEMU_REQUIRE_KERNEL=1 to fail)");
            None
        }
    }
}

fn setup() -> Result<Setup, String> {
    let qemu = Command::new(bpfemu_vmkernel::boot::QEMU)
        .arg("--version")
        .output();
    if !qemu.is_ok_and(|o| o.status.success()) {
        return Err("qemu-system-x86_64 is not installed (apt-get install qemu-system-x86)".into());
    }
    let judge = target_dir().join("examples/libbpf_verdicts");
    if !judge.is_file() {
        return Err(format!(
            "{} is not built (cargo build -p bpfemu-conformance --example libbpf_verdicts)",
            judge.display()
        ));
    }
    let objects = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data/vm");
    Ok(Setup { judge, objects })
}

/// `target/debug`: this test runs from its `deps` directory.
fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    exe.parent()
        .and_then(Path::parent)
        .expect("target/debug/deps/TEST")
        .to_owned()
}

/// One verdict line of libbpf_verdicts.
#[derive(Debug, PartialEq)]
struct Verdict {
    program: String,
    accepted: bool,
    error: Option<String>,
    processed_insns: Option<u64>,
}

fn verdicts(stdout: &[u8]) -> Vec<Verdict> {
    let text = String::from_utf8_lossy(stdout);
    text.lines()
        .map(|line| {
            let v: serde_json::Value = serde_json::from_str(line).expect(line);
            Verdict {
                program: v["program"].as_str().unwrap_or_default().to_owned(),
                accepted: v["accepted"].as_bool().expect(line),
                error: v["error"].as_str().map(str::to_owned),
                processed_insns: v["processed_insns"].as_u64(),
            }
        })
        .collect()
}

/// Boots `version` once with `uname -r` and the judge on both objects, and checks the release
/// and the verdicts: `sdiv` is what this kernel gives the cpu v4 object.
fn judged_by(version: &str, sdiv: Verdict) {
    let test = format!("judged_by_{version}");
    let Some(setup) = setup_or_skip(&test) else {
        return;
    };
    let kernel = images::kernel(version).expect("a known kernel");
    let Some(image) = image_or_skip(&test, kernel.version) else {
        return;
    };
    let object = |name: &str| std::fs::read(setup.objects.join(name)).expect(name);
    let results = Vm::new(&image, Path::new(INIT))
        .with_binary("/bin/uname", Path::new("/usr/bin/uname"))
        .with_binary("/bin/judge", &setup.judge)
        .with_file("/objects/pass.o", object("accepted_everywhere.o"))
        .with_file("/objects/sdiv.o", object("cpu_v4_sdiv.o"))
        .job(["/bin/uname", "-r"])
        .job(["/bin/judge", "/objects/pass.o"])
        .job(["/bin/judge", "/objects/sdiv.o"])
        .job(["/bin/absent"])
        .fetch_file("/proc/version")
        .fetch_file("/no/such/file")
        .timeout(Duration::from_secs(300))
        .run()
        .unwrap_or_else(|e| panic!("{test}: {e}"));
    eprintln!(
        "{test}: {} in {:.1} s, boot {} ({} KiB initramfs, {} MiB RAM)",
        results.release,
        results.wall.as_secs_f64(),
        results.boots,
        results.initramfs_bytes / 1024,
        results.memory_mib
    );
    assert_eq!(results.release, kernel.release);
    let [uname, pass, v4, absent] = &results.jobs[..] else {
        panic!("four jobs, got {:?}", results.jobs);
    };
    let JobStatus::NotStarted(why) = &absent.status else {
        panic!("/bin/absent ran: {absent:?}");
    };
    assert!(
        why.starts_with("cannot run /bin/absent: No such file"),
        "{why}"
    );
    for job in [uname, pass, v4] {
        assert_eq!(job.status, JobStatus::Exited(0), "{job:?}");
    }
    assert_eq!(
        String::from_utf8_lossy(&uname.stdout).trim(),
        kernel.release
    );
    let everywhere = Verdict {
        program: "pass_ipv4".into(),
        accepted: true,
        error: None,
        processed_insns: Some(16),
    };
    assert_eq!(verdicts(&pass.stdout), [everywhere], "{test}");
    assert_eq!(verdicts(&v4.stdout), [sdiv], "{test}");
}

/// What 5.10 and 6.1 say to BPF_SDIV: its offset field (1) is reserved there.
fn rejected_sdiv() -> Verdict {
    Verdict {
        program: "signed_divide".into(),
        accepted: false,
        error: Some("BPF_ALU uses reserved fields".into()),
        processed_insns: Some(7),
    }
}

fn accepted_sdiv() -> Verdict {
    Verdict {
        program: "signed_divide".into(),
        accepted: true,
        error: None,
        processed_insns: Some(12),
    }
}

#[test]
fn judged_by_5_10() {
    judged_by("5.10", rejected_sdiv());
}

#[test]
fn judged_by_6_1() {
    judged_by("6.1", rejected_sdiv());
}

#[test]
fn judged_by_6_12() {
    judged_by("6.12", accepted_sdiv());
}

#[test]
fn judged_by_7_2() {
    judged_by("7.2", accepted_sdiv());
}

/// A job that never ends: QEMU is killed at the timeout, and the error says which job hung.
#[test]
fn a_job_that_never_ends_times_out_with_a_clear_error() {
    let test = "a_job_that_never_ends_times_out_with_a_clear_error";
    if setup_or_skip(test).is_none() {
        return;
    }
    let kernel = images::kernel("6.1").expect("6.1");
    let Some(image) = image_or_skip(test, kernel.version) else {
        return;
    };
    let started = std::time::Instant::now();
    let error = Vm::new(&image, Path::new(INIT))
        .with_binary("/bin/sleep", Path::new("/usr/bin/sleep"))
        .job(["/bin/sleep", "infinity"])
        .timeout(Duration::from_secs(45))
        .run()
        .expect_err("sleep infinity cannot finish");
    let elapsed = started.elapsed();
    let text = error.to_string();
    assert!(matches!(error, VmError::TimedOut { .. }), "{text}");
    assert!(
        text.contains(
            "no results after 45 s, QEMU killed (still running job 1 (/bin/sleep infinity))"
        ),
        "{text}"
    );
    assert!(elapsed < Duration::from_secs(60), "took {elapsed:?}");
}

/// A kernel that dies before init (here: an init it cannot execute, a script whose
/// interpreter the initramfs lacks) is booted again, then reported with its last words.
#[test]
fn a_kernel_that_dies_before_init_is_an_error_with_its_last_words() {
    let test = "a_kernel_that_dies_before_init_is_an_error_with_its_last_words";
    if setup_or_skip(test).is_none() {
        return;
    }
    let kernel = images::kernel("6.1").expect("6.1");
    let Some(image) = image_or_skip(test, kernel.version) else {
        return;
    };
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data/vm/build.sh");
    let error = Vm::new(&image, &script)
        .job(["/bin/absent"])
        .timeout(Duration::from_secs(120))
        .run()
        .expect_err("no init can run");
    let text = error.to_string();
    assert!(matches!(error, VmError::Incomplete { .. }), "{text}");
    assert!(
        text.contains(
            "the guest ended without finishing (the guest's init never started, in each of 3 boots)"
        ),
        "{text}"
    );
    assert!(text.contains("No working init found"), "{text}");
}

/// Each image names, in its boot header, the release it reports once booted: what
/// `bpfemu diff --verifier --kernel-image` reads to choose the profile, without a boot.
#[test]
fn each_image_names_its_release_in_its_boot_header() {
    for kernel in &images::KERNELS {
        let test = format!(
            "each_image_names_its_release_in_its_boot_header {}",
            kernel.version
        );
        let Some(image) = image_or_skip(&test, kernel.version) else {
            continue;
        };
        let release = bpfemu_vmkernel::bzimage::release_of(&image)
            .unwrap_or_else(|e| panic!("{}: {e}", kernel.version));
        assert_eq!(release, kernel.release);
    }
}
