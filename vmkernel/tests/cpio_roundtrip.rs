//! The initramfs writer's archives read back as written: by this crate's reader, and by GNU
//! cpio's `cpio -t` when it is installed (an independent reader of the format).

use bpfemu_vmkernel::initramfs::{Initramfs, Kind, read_newc};
use std::process::{Command, Stdio};

fn sample() -> (Initramfs, Vec<u8>) {
    // One file per call: the tests of this binary build samples in parallel.
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let host_file =
        std::env::temp_dir().join(format!("vmkernel-cpio-{}-{call}", std::process::id()));
    std::fs::write(&host_file, b"from the host\n").unwrap();
    let mut archive = Initramfs::with_skeleton();
    archive.file("/bpfemu-vm/plan", 0o644, b"job L2Jpbi9qdWRnZQ==\n".to_vec());
    // Lengths 0 to 3 exercise every padding of names and data.
    archive.file("/a", 0o600, Vec::new());
    archive.file("/bb", 0o600, b"x".to_vec());
    archive.file("/ccc/dd", 0o700, b"xyz".to_vec());
    archive
        .host_file("/deep/er/host", 0o644, &host_file)
        .unwrap();
    archive.symlink("/lib64/ld.so", "/lib/x86_64-linux-gnu/ld.so");
    let mut bytes = Vec::new();
    archive.write_to(&mut bytes).unwrap();
    std::fs::remove_file(&host_file).unwrap();
    (archive, bytes)
}

#[test]
fn every_entry_reads_back_with_its_kind_permissions_and_bytes() {
    let (archive, bytes) = sample();
    assert_eq!(
        bytes.len() as u64,
        archive.size(),
        "size() predicts the archive"
    );
    assert_eq!(bytes.len() % 4, 0);
    let entries = read_newc(&bytes).unwrap();
    let find = |name: &str| {
        entries
            .iter()
            .find(|e| e.name == name)
            .unwrap_or_else(|| panic!("{name} missing from {entries:#?}"))
    };
    assert_eq!(
        find("dev/console").kind,
        Kind::CharDevice { major: 5, minor: 1 }
    );
    assert_eq!(
        find("dev/null").kind,
        Kind::CharDevice { major: 1, minor: 3 }
    );
    assert_eq!(find("tmp").permissions, 0o1777);
    assert_eq!(find("bb").data, b"x");
    assert_eq!(find("ccc/dd").data, b"xyz");
    assert_eq!(find("ccc/dd").permissions, 0o700);
    assert_eq!(find("deep/er/host").data, b"from the host\n");
    assert_eq!(
        find("lib64/ld.so").kind,
        Kind::Symlink {
            target: "/lib/x86_64-linux-gnu/ld.so".into()
        }
    );
    // The kernel creates nothing implicitly: each parent comes before what it holds, once.
    let position = |name: &str| entries.iter().position(|e| e.name == name).unwrap();
    assert!(position("deep") < position("deep/er"));
    assert!(position("deep/er") < position("deep/er/host"));
    assert_eq!(entries.iter().filter(|e| e.name == "dev").count(), 1);
    assert_eq!(find("deep").kind, Kind::Dir);
}

#[test]
fn a_truncated_or_foreign_archive_is_an_error_not_a_panic() {
    let (_, bytes) = sample();
    for cut in [0, 50, 110, 200, bytes.len() - 1] {
        assert!(read_newc(&bytes[..cut]).is_err(), "cut at {cut}");
    }
    let mut foreign = bytes.clone();
    foreign[..6].copy_from_slice(b"070707");
    let error = read_newc(&foreign).unwrap_err().to_string();
    assert!(error.contains("offset 0"), "{error}");
}

#[test]
fn gnu_cpio_lists_the_same_entries() {
    let Ok(mut cpio) = Command::new("cpio")
        .args(["-t", "-v", "--quiet"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    else {
        eprintln!("gnu_cpio_lists_the_same_entries: skipping: cpio is not installed");
        return;
    };
    let (_, bytes) = sample();
    let mut stdin = cpio.stdin.take().unwrap();
    let writer = std::thread::spawn(move || std::io::Write::write_all(&mut stdin, &bytes));
    let output = cpio.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    assert!(output.status.success(), "{output:?}");
    let listing = String::from_utf8(output.stdout).unwrap();
    let line = |name: &str| {
        listing
            .lines()
            .find(|l| l.ends_with(&format!(" {name}")) || l.contains(&format!(" {name} -> ")))
            .unwrap_or_else(|| panic!("{name} not in:\n{listing}"))
            .to_owned()
    };
    assert!(line("dev/console").starts_with("crw-------"), "{listing}");
    assert!(line("ccc/dd").starts_with("-rwx------"), "{listing}");
    assert!(line("deep/er").starts_with("drwxr-xr-x"), "{listing}");
    assert!(line("lib64/ld.so").starts_with("lrwxrwxrwx"), "{listing}");
    assert!(
        line("bpfemu-vm/plan").starts_with("-rw-r--r--"),
        "{listing}"
    );
}
