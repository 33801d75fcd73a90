//! `bpfemu diff` on objects as users build them, against the running kernel: the kernel side
//! speaks bpf() itself and loads one program with what it needs (a program the kernel rejects
//! does not block the others; pre-1.0 section names load), global data from `--maps` goes in
//! before the load (read-only data is frozen then, as under libbpf), and `--verifier` exits 1
//! on a rejection with the kernel's real error line.
//!
//! The objects are in `tests/objects` (sources beside them, `build.sh` rebuilds them).
//! Skipped with a message when bpf() is out of reach, unless `BPFEMU_REQUIRE_KERNEL=1`.

use bpfemu_conformance::kernel::kernel_or_skip;
use std::path::PathBuf;
use std::process::{Command, Output};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn bpfemu(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_bpfemu"))
        .args(args)
        .current_dir(root())
        .output()
        .expect("bpfemu runs")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn all(out: &Output) -> String {
    format!("{}{}", text(&out.stdout), text(&out.stderr))
}

/// Every bundled map file that the kernel can take (xsk_dispatch's needs AF_XDP sockets, the
/// router's a namespace), `.rodata` included: `diff` and `bench` with `--maps` run cleanly.
#[test]
fn map_files_that_set_rodata_diff_and_bench_cleanly() {
    if !kernel_or_skip("map_files_that_set_rodata_diff_and_bench_cleanly") {
        return;
    }
    let mut with_rodata = 0;
    for entry in std::fs::read_dir(root().join("examples/maps")).unwrap() {
        let file = entry.unwrap().path();
        let name = file.file_stem().unwrap().to_str().unwrap().to_owned();
        if file.extension().is_none_or(|e| e != "json")
            || ["xsk_dispatch", "router"].contains(&name.as_str())
        {
            continue;
        }
        let doc = std::fs::read_to_string(&file).unwrap();
        with_rodata += usize::from(doc.contains(".rodata"));
        let obj = format!("examples/xdp/build/{name}.v3.o");
        let maps = file.to_str().unwrap();
        let out = bpfemu(&["diff", &obj, "examples/pcap/normal.pcap", "--maps", maps]);
        assert_eq!(out.status.code(), Some(0), "diff {name}: {}", all(&out));
        assert!(
            text(&out.stdout).ends_with(" packets, 0 mismatches\n"),
            "{}",
            all(&out)
        );
        let out = bpfemu(&[
            "bench",
            &obj,
            "examples/pcap/normal.pcap",
            "--maps",
            maps,
            "--packets",
            "50",
        ]);
        assert_eq!(out.status.code(), Some(0), "bench {name}: {}", all(&out));
    }
    assert!(with_rodata >= 4, "{with_rodata} map files set .rodata");
}

/// One object, three XDP programs: one the kernel rejects (an unchecked packet read), one in a
/// pre-1.0 section name libbpf no longer knows. The other two are compared; the rejected one
/// is refused with the kernel's reason.
#[test]
fn a_program_the_kernel_rejects_does_not_block_the_others() {
    if !kernel_or_skip("a_program_the_kernel_rejects_does_not_block_the_others") {
        return;
    }
    let obj = "tests/objects/mixed_programs.o";
    for prog in ["counted_pass", "legacy_section"] {
        let out = bpfemu(&["diff", obj, "examples/pcap/normal.pcap", "--prog", prog]);
        assert_eq!(out.status.code(), Some(0), "{prog}: {}", all(&out));
        assert!(
            text(&out.stdout).ends_with("200 packets, 0 mismatches\n"),
            "{}",
            all(&out)
        );
    }
    let out = bpfemu(&[
        "diff",
        obj,
        "examples/pcap/normal.pcap",
        "--prog",
        "counted_pass",
    ]);
    assert!(
        text(&out.stdout)
            .contains("map packets (array): 1 kernel entries, 1 bpfemu entries, 1 equal"),
        "{}",
        all(&out)
    );
    let out = bpfemu(&[
        "diff",
        obj,
        "examples/pcap/normal.pcap",
        "--prog",
        "unchecked_read",
    ]);
    assert_ne!(out.status.code(), Some(0));
    let err = text(&out.stderr);
    assert!(
        err.contains("program unchecked_read: the kernel rejects it (")
            && err.contains("R1 offset is outside of the packet"),
        "{err}"
    );
    assert_eq!(err.matches("the kernel rejects it").count(), 1, "{err}");
}

/// libbpf >= 1.0 refuses `struct bpf_map_def` maps; the kernel does not, and neither does the
/// kernel side of `diff` now that it creates maps itself.
#[test]
fn legacy_map_definitions_are_compared() {
    if !kernel_or_skip("legacy_map_definitions_are_compared") {
        return;
    }
    let out = bpfemu(&[
        "diff",
        "examples/xdp/build/legacy_maps.v3.o",
        "examples/pcap/normal.pcap",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", all(&out));
    assert!(text(&out.stdout).ends_with("200 packets, 0 mismatches\n"));
}

/// `--verifier` exits 1 when the kernel rejects a program, and names the kernel's error, not
/// the register states printed after it.
#[test]
fn verifier_rejections_exit_1_with_the_kernels_error_line() {
    if !kernel_or_skip("verifier_rejections_exit_1_with_the_kernels_error_line") {
        return;
    }
    let out = bpfemu(&["diff", "--verifier", "tests/objects/mixed_programs.o"]);
    assert_eq!(out.status.code(), Some(1), "{}", all(&out));
    let stdout = text(&out.stdout);
    let line = |prog: &str| {
        stdout
            .lines()
            .find(|l| l.starts_with(prog))
            .unwrap_or_else(|| panic!("{prog}: {stdout}"))
            .to_owned()
    };
    assert!(line("counted_pass ").contains(" accepted "), "{stdout}");
    assert!(line("legacy_section ").contains(" accepted "), "{stdout}");
    let rejected = line("unchecked_read ");
    assert!(
        rejected.contains(" rejected ") && rejected.ends_with("R1 offset is outside of the packet"),
        "{stdout}"
    );
    let out = bpfemu(&[
        "diff",
        "--verifier",
        "tests/objects/spin_forever.o",
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", all(&out));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let error = doc["programs"][0]["kernel"]["error"].as_str().unwrap();
    assert!(
        error.starts_with("infinite loop detected at insn "),
        "{error}"
    );
    let out = bpfemu(&["diff", "--verifier", "examples/xdp/build/firewall.v3.o"]);
    assert_eq!(out.status.code(), Some(0), "{}", all(&out));
}
