//! `bpfemu verify --kernel VERSION` against that kernel booted for real: for each of 5.10,
//! 6.1, 6.12 and 7.2, one QEMU boot judges every object of the example corpus and of the
//! verify and per-kernel fixtures (tests/data/verify, tests/data/kernels) with libbpf 1.7
//! (`libbpf_verdicts`) and hands back the kernel's BTF; bpfemu then verifies the same objects
//! as that kernel, with that BTF. Every program's verdict, final error line and processed count
//! must be equal, except the differences `verifier/probes/KNOWN_DIFFERENCES` lists as
//! `kernel/VERSION/LABEL/OBJECT/PROGRAM  reason` (LABEL: corpus, verify or kernels), which must still differ (so the list only
//! shrinks). Prints each kernel's shares.
//!
//! Needs QEMU and apt access to the kernels' suites (scripts/kernel_apt_sources.sh); skipped
//! with a message without them, unless `BPFEMU_REQUIRE_KERNEL=1` (CI).

use bpfemu_vmkernel::{JobStatus, Vm, images};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

const BPFEMU: &str = env!("CARGO_BIN_EXE_bpfemu");
const GUEST_BTF: &str = "/sys/kernel/btf/vmlinux";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The libbpf 1.7 judge (built by `cargo test --workspace`, an example of bpfemu-conformance).
fn judge() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("target"));
    target.join("debug/examples/libbpf_verdicts")
}

/// The image of `version` with QEMU and the judge at hand; else None after a skip message, or
/// a failure under `BPFEMU_REQUIRE_KERNEL=1`.
fn image_or_skip(version: &str) -> Option<PathBuf> {
    let qemu = Command::new(bpfemu_vmkernel::boot::QEMU)
        .arg("--version")
        .output();
    let why = if !qemu.is_ok_and(|o| o.status.success()) {
        "qemu-system-x86_64 is not installed (apt-get install qemu-system-x86)".to_owned()
    } else if !judge().is_file() {
        format!(
            "{} is not built (cargo build -p bpfemu-conformance --example libbpf_verdicts)",
            judge().display()
        )
    } else {
        let kernel = images::kernel(version).expect("a known kernel");
        match images::fetch(kernel, &images::cache_dir()) {
            Ok(image) => return Some(image),
            Err(e) => e.to_string(),
        }
    };
    let required = std::env::var("BPFEMU_REQUIRE_KERNEL").is_ok_and(|v| v == "1");
    assert!(!required, "{version}: BPFEMU_REQUIRE_KERNEL=1 but {why}");
    eprintln!("kernels_vs_vms {version}: skipping: {why} (set BPFEMU_REQUIRE_KERNEL=1 to fail)");
    None
}

/// The objects judged, each with the label its names carry: the example corpus, and the
/// fixtures of the verify and per-kernel tests.
const OBJECT_DIRS: [(&str, &str); 3] = [
    ("examples/xdp/build", "corpus"),
    ("tests/data/verify", "verify"),
    ("tests/data/kernels", "kernels"),
];

fn corpus() -> Vec<PathBuf> {
    let mut objects = Vec::new();
    for (dir, _) in OBJECT_DIRS {
        let mut found: Vec<PathBuf> = std::fs::read_dir(root().join(dir))
            .expect("the objects are built")
            .map(|e| e.expect("entry").path())
            .filter(|p| p.extension().is_some_and(|x| x == "o"))
            .collect();
        found.sort();
        objects.extend(found);
    }
    objects
}

/// One program's answer, from either side.
#[derive(Clone, Debug, PartialEq)]
struct Answer {
    accepted: bool,
    error: String,
    processed: Option<u64>,
}

impl Answer {
    /// What differs from `kernel`, if anything: the verdict first, then the error line where
    /// both reject, then the count where both accept.
    fn difference(&self, kernel: &Answer) -> Option<String> {
        if self.accepted != kernel.accepted {
            let word = |a: &Answer| match a.accepted {
                true => "accepted".to_owned(),
                false => format!("rejected: {}", a.error),
            };
            return Some(format!("kernel {}, bpfemu {}", word(kernel), word(self)));
        }
        if !self.accepted && self.error != kernel.error {
            return Some(format!(
                "error line: kernel '{}', bpfemu '{}'",
                kernel.error, self.error
            ));
        }
        if self.accepted && self.processed != kernel.processed {
            return Some(format!(
                "processed: kernel {:?}, bpfemu {:?}",
                kernel.processed, self.processed
            ));
        }
        None
    }
}

/// `LABEL/STEM/PROGRAM`: `corpus/l4lb.v2/xdp_l4lb`.
fn name_of(object: &Path, program: &str) -> String {
    let stem = object.file_stem().expect("a file").to_string_lossy();
    let dir = object.parent().expect("in a directory");
    let label = OBJECT_DIRS
        .iter()
        .find(|(d, _)| dir.ends_with(d))
        .map_or("other", |(_, label)| label);
    format!("{label}/{stem}/{program}")
}

/// The kernel's answers (booted once) and its BTF.
fn kernel_side(
    version: &str,
    image: &Path,
    objects: &[PathBuf],
) -> (BTreeMap<String, Answer>, Vec<u8>) {
    let mut vm = Vm::new(image, Path::new(BPFEMU))
        .with_binary("/bin/judge", &judge())
        .fetch_file(GUEST_BTF)
        .timeout(Duration::from_secs(900));
    for (i, object) in objects.iter().enumerate() {
        let guest = format!("/objects/{i}.o");
        vm = vm
            .with_file(&guest, std::fs::read(object).expect("readable"))
            .job(["/bin/judge", &guest]);
    }
    let results = vm.run().unwrap_or_else(|e| panic!("{version}: {e}"));
    eprintln!(
        "kernels_vs_vms {version}: {} judged {} objects in {:.1} s",
        results.release,
        objects.len(),
        results.wall.as_secs_f64()
    );
    let mut answers = BTreeMap::new();
    for (object, job) in objects.iter().zip(&results.jobs) {
        // libbpf refuses some objects outright (legacy map definitions): no program to compare.
        if job.status != JobStatus::Exited(0) {
            continue;
        }
        for line in String::from_utf8_lossy(&job.stdout).lines() {
            let v: serde_json::Value = serde_json::from_str(line).expect(line);
            let program = v["program"].as_str().expect("program");
            answers.insert(
                name_of(object, program),
                Answer {
                    accepted: v["accepted"].as_bool().expect("accepted"),
                    error: v["error"].as_str().unwrap_or_default().to_owned(),
                    processed: v["processed_insns"].as_u64(),
                },
            );
        }
    }
    let btf = match results.files.get(GUEST_BTF) {
        Some(Ok(bytes)) => bytes.clone(),
        other => panic!("{version}: no BTF from the guest: {other:?}"),
    };
    (answers, btf)
}

/// bpfemu's answers as `version`, with that kernel's BTF in a private kernel cache.
fn bpfemu_side(version: &str, btf: &[u8], objects: &[PathBuf]) -> BTreeMap<String, Answer> {
    let cache = std::env::temp_dir().join(format!(
        "bpfemu-kernels-vs-vms-{}-{version}",
        std::process::id()
    ));
    std::fs::create_dir_all(cache.join(version)).expect("temp dir");
    std::fs::write(cache.join(version).join("vmlinux.btf"), btf).expect("BTF written");
    let out = Command::new(BPFEMU)
        .arg("verify")
        .args(["--kernel", version, "--json"])
        .args(objects)
        .env("BPFEMU_KERNELS", &cache)
        .output()
        .expect("bpfemu runs");
    std::fs::remove_dir_all(&cache).expect("temp dir removed");
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{version}: {e}: {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(doc["kernel"]["version"], version);
    let mut answers = BTreeMap::new();
    // An object bpfemu's loader refuses for this kernel (a kfunc its BTF lacks): each of its
    // programs rejected with that reason, as libbpf refuses the object.
    for failure in doc["not_loaded"].as_array().expect("not_loaded") {
        let object = Path::new(failure["object"].as_str().expect("object"));
        let error = failure["error"].as_str().expect("error");
        answers.insert(
            format!("{}/*", name_of(object, "")),
            Answer {
                accepted: false,
                error: error.to_owned(),
                processed: None,
            },
        );
    }
    for p in doc["programs"].as_array().expect("programs") {
        let object = Path::new(p["object"].as_str().expect("object"));
        answers.insert(
            name_of(object, p["name"].as_str().expect("name")),
            Answer {
                accepted: p["accepted"].as_bool().expect("accepted"),
                error: p["message"].as_str().unwrap_or_default().to_owned(),
                processed: p["processed_insns"].as_u64(),
            },
        );
    }
    answers
}

/// `kernel/VERSION/NAME  reason` entries of KNOWN_DIFFERENCES, by NAME, of the sets this test
/// judges (`rawtable/` entries are scripts/rawtable_vs_vms.sh's).
fn known(version: &str) -> BTreeSet<String> {
    const JUDGED_HERE: [&str; 3] = ["corpus/", "verify/", "kernels/"];
    let text = std::fs::read_to_string(root().join("verifier/probes/KNOWN_DIFFERENCES"))
        .expect("KNOWN_DIFFERENCES");
    let prefix = format!("kernel/{version}/");
    text.lines()
        .filter_map(|l| l.strip_prefix(&prefix))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| JUDGED_HERE.iter().any(|set| name.starts_with(set)))
        .map(str::to_owned)
        .collect()
}

fn compare(version: &str) {
    let Some(image) = image_or_skip(version) else {
        return;
    };
    let objects = corpus();
    let (kernel, btf) = kernel_side(version, &image, &objects);
    let ours = bpfemu_side(version, &btf, &objects);
    let known = known(version);
    let (mut verdicts, mut counts, mut accepted) = (0, 0, 0);
    let mut unexplained = Vec::new();
    let mut differing = BTreeSet::new();
    for (name, k) in &kernel {
        let object_refused = name
            .rsplit_once('/')
            .and_then(|(object, _)| ours.get(&format!("{object}//*")));
        let Some(b) = ours.get(name).or(object_refused) else {
            unexplained.push(format!("{name}: judged by the kernel, not by bpfemu"));
            continue;
        };
        verdicts += usize::from(b.accepted == k.accepted);
        if b.accepted && k.accepted {
            accepted += 1;
            counts += usize::from(b.processed == k.processed);
        }
        if let Some(why) = b.difference(k) {
            differing.insert(name.clone());
            if !known.contains(name) {
                unexplained.push(format!("{name}: {why}"));
            }
        }
    }
    eprintln!(
        "kernels_vs_vms {version}: verdicts equal {verdicts}/{}, processed counts equal {counts}/{accepted}, {} differences ({} listed)",
        kernel.len(),
        differing.len(),
        known.len()
    );
    let agreeing: Vec<&String> = known.difference(&differing).collect();
    assert!(
        unexplained.is_empty() && agreeing.is_empty(),
        "{version}: differences not in KNOWN_DIFFERENCES (kernel/{version}/NAME  reason):\n{}\nlisted but now equal (remove them):\n{agreeing:?}",
        unexplained.join("\n")
    );
}

#[test]
fn the_corpus_as_5_10() {
    compare("5.10");
}

#[test]
fn the_corpus_as_6_1() {
    compare("6.1");
}

#[test]
fn the_corpus_as_6_12() {
    compare("6.12");
}

#[test]
fn the_corpus_as_7_2() {
    compare("7.2");
}

/// `bpfemu kernels fetch 5.10` boots 5.10 once and keeps its BTF in the kernel cache, where
/// `bpfemu kernels` then finds it and `verify --kernel 5.10` reads it for CO-RE; a second
/// fetch boots nothing.
#[test]
fn kernels_fetch_keeps_a_kernels_btf() {
    let Some(image) = image_or_skip("5.10") else {
        return;
    };
    let cache = std::env::temp_dir().join(format!("bpfemu-kernels-fetch-{}", std::process::id()));
    std::fs::create_dir_all(&cache).expect("temp dir");
    // The image as the cache keeps it, so that nothing is downloaded again.
    let kernel = images::kernel("5.10").expect("known");
    std::fs::copy(&image, kernel.cached(&cache)).expect("image copied");
    let bpfemu = |args: &[&str]| {
        let out = Command::new(BPFEMU)
            .args(args)
            .env("BPFEMU_KERNELS", &cache)
            .current_dir(root())
            .output()
            .expect("bpfemu runs");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(0), "{args:?}: {stdout}{stderr}");
        stdout
    };
    let btf_path = cache.join("5.10/vmlinux.btf");
    let listed = bpfemu(&["kernels"]);
    assert!(
        listed.contains("5.10   linux-image-5.10.0-32-cloud-amd64"),
        "{listed}"
    );
    assert!(
        !listed.contains(&btf_path.display().to_string()),
        "{listed}"
    );

    let fetched = bpfemu(&["kernels", "fetch", "5.10"]);
    assert!(
        fetched.starts_with(&format!(
            "5.10: {} from 5.10.0-32-cloud-amd64",
            btf_path.display()
        )),
        "{fetched}"
    );
    let btf = bpfemu_loader::btf::Btf::parse(&std::fs::read(&btf_path).expect("kept"))
        .expect("the kernel's BTF parses");
    assert!(
        (0..btf.type_count() as u32).any(|id| btf.name_of(id) == Some("xdp_md")),
        "5.10's BTF has struct xdp_md"
    );
    assert!(bpfemu(&["kernels"]).contains(&format!("BTF: {}", btf_path.display())));
    assert!(bpfemu(&["kernels", "fetch", "5.10"]).contains("(already fetched)"));
    // CO-RE against 5.10's BTF.
    let verified = bpfemu(&[
        "verify",
        "--kernel",
        "5.10",
        "examples/xdp/build/core_ctx.v3.o",
    ]);
    assert!(
        verified.contains("kernel 5.10: 1 programs: 1 accepted"),
        "{verified}"
    );
    std::fs::remove_dir_all(&cache).expect("temp dir removed");
}
