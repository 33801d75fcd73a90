//! `bpfemu diff --verifier --kernel-image VMLINUZ`: the verdicts of a kernel booted from an
//! image under QEMU, beside bpfemu's as that image's version. Judged with Debian's 6.1 (its
//! release read from the image's boot header) on the two objects of tests/data/vm: one every
//! kernel accepts, and a cpu v4 signed division, which 6.1 rejects; and with 5.10, an object
//! whose BTF that kernel needs rewritten. And the refusals that need no boot: a missing file,
//! a file that is no kernel, a kernel with no profile.
//!
//! The booting tests need QEMU and apt access to bookworm (see scripts/kernel_apt_sources.sh);
//! skipped with a message without them, unless `BPFEMU_REQUIRE_KERNEL=1` (CI).

use bpfemu_vmkernel::test_images::image_or_skip;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const BPFEMU: &str = env!("CARGO_BIN_EXE_bpfemu");

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/vm")
        .join(name)
}

fn diff_image(image: &Path, object: &Path, extra: &[&str]) -> Output {
    Command::new(BPFEMU)
        .args(["diff", "--verifier", "--kernel-image"])
        .arg(image)
        .arg(object)
        .args(extra)
        .output()
        .expect("bpfemu runs")
}

fn json_of(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

#[test]
fn a_6_1_image_judges_both_objects_as_bpfemu_answers_as_6_1() {
    let Some(image) = image_or_skip("diff_kernel_image 6.1", "6.1") else {
        return;
    };
    let pass = diff_image(&image, &fixture("accepted_everywhere.o"), &[]);
    let text = String::from_utf8_lossy(&pass.stdout);
    assert_eq!(
        pass.status.code(),
        Some(0),
        "{text}{}",
        String::from_utf8_lossy(&pass.stderr)
    );
    assert!(
        text.starts_with("kernel: 6.1.0-47-cloud-amd64 booted from ")
            && text.contains("(bpfemu answers as 6.1)"),
        "{text}"
    );
    assert!(text.contains("bpfemu agrees on 1"), "{text}");

    // 6.1 predates cpu v4: both sides reject the signed division, in the same words, and the
    // rejection fails the run as it would against the running kernel.
    let sdiv = diff_image(&image, &fixture("cpu_v4_sdiv.o"), &["--json"]);
    assert_eq!(
        sdiv.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&sdiv.stderr)
    );
    let doc = json_of(&sdiv);
    assert_eq!(doc["release"], "6.1.0-47-cloud-amd64");
    assert_eq!(doc["answered_as"], "6.1");
    let program = &doc["programs"][0];
    assert_eq!(program["program"], "signed_divide");
    assert_eq!(program["kernel"]["accepted"], false);
    assert_eq!(program["kernel"]["error"], "BPF_ALU uses reserved fields");
    assert_eq!(program["bpfemu"]["accepted"], false);
    assert_eq!(program["agree"], true, "{program}");
}

/// An object whose BTF has kinds 5.10 lacks (decl tags) is loaded there as libbpf loads it,
/// with its BTF rewritten into kinds 5.10 knows: func_info reaches the kernel, which refuses
/// the global functions' pointer arguments as bpfemu does. Sent as it is, the BTF was refused
/// and every function verified as a static one: 5.10 "accepted" two programs libbpf cannot
/// load there.
#[test]
fn a_5_10_image_gets_the_btf_libbpf_would_send() {
    let Some(image) = image_or_skip("diff_kernel_image 5.10", "5.10") else {
        return;
    };
    let object = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/kernels/global_arg_null.o");
    let out = diff_image(&image, &object, &["--json"]);
    let doc = json_of(&out);
    let programs = doc["programs"].as_array().expect("programs");
    assert_eq!(programs.len(), 4, "{doc}");
    for program in programs {
        assert_eq!(program["kernel"]["accepted"], false, "{program}");
        let error = program["kernel"]["error"].as_str().unwrap_or_default();
        assert!(error.ends_with("is not supported yet."), "{program}");
        assert_eq!(program["agree"], true, "{program}");
    }
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn kernel_names_the_profile_bpfemu_answers_as() {
    let Some(image) = image_or_skip("diff_kernel_image --kernel", "6.1") else {
        return;
    };
    // 6.12 has cpu v4: bpfemu accepts what the booted 6.1 rejects, and the run says so.
    let out = diff_image(
        &image,
        &fixture("cpu_v4_sdiv.o"),
        &["--kernel", "6.12", "--json"],
    );
    assert_eq!(out.status.code(), Some(1));
    let doc = json_of(&out);
    assert_eq!(doc["answered_as"], "6.12");
    let program = &doc["programs"][0];
    assert_eq!(program["kernel"]["accepted"], false);
    assert_eq!(program["bpfemu"]["accepted"], true);
    assert_eq!(program["agree"], false);
}

/// Exit 2 and one line on standard error that names `path` and says `why`.
fn assert_refused(out: &Output, path: &Path, why: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(stderr.contains(&path.display().to_string()), "{stderr}");
    assert!(stderr.contains(why), "{stderr}");
    assert!(out.stdout.is_empty());
}

#[test]
fn a_missing_image_is_refused_naming_it() {
    let missing = std::env::temp_dir().join("bpfemu-no-such-vmlinuz");
    let out = diff_image(&missing, &fixture("accepted_everywhere.o"), &[]);
    assert_refused(&out, &missing, "cannot read it");
}

#[test]
fn a_file_that_is_no_kernel_is_refused_naming_it() {
    // An ELF object is a file, but no bzImage: it has no boot protocol header.
    let object = fixture("accepted_everywhere.o");
    let out = diff_image(&object, &object, &[]);
    assert_refused(&out, &object, "not an x86 Linux kernel image");
}

/// A boot header whose version text is `text`, as a bzImage starts.
fn fake_image(name: &str, text: &[u8]) -> PathBuf {
    let mut bytes = vec![0u8; 0x400];
    bytes[0x202..0x206].copy_from_slice(b"HdrS");
    bytes[0x20e..0x210].copy_from_slice(&0x100u16.to_le_bytes());
    bytes[0x300..0x300 + text.len()].copy_from_slice(text);
    let path = std::env::temp_dir().join(format!("{name}.{}", std::process::id()));
    std::fs::write(&path, bytes).expect("temp file");
    path
}

#[test]
fn a_kernel_without_a_profile_is_refused_before_booting() {
    let image = fake_image("bpfemu-vmlinuz-4.19", b"4.19.0-27-amd64 (debian) #1 SMP\0");
    let out = diff_image(&image, &fixture("accepted_everywhere.o"), &[]);
    let _ = std::fs::remove_file(&image);
    assert_refused(&out, &image, "kernel 4.19.0-27-amd64 has no bpfemu profile");
    assert!(String::from_utf8_lossy(&out.stderr).contains("--kernel VERSION"));
}
