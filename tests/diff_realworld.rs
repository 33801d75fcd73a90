//! Objects as users build them. `bpfemu diff` against the running kernel: the kernel side
//! speaks bpf() itself and loads one program with what it needs (a program the kernel rejects
//! does not block the others; pre-1.0 section names load), global data from `--maps` goes in
//! before the load (read-only data is frozen then, as under libbpf), and `--verifier` exits 1
//! on a rejection with the kernel's real error line; large maps are compared in place and in
//! batches. The loader: maps sized at run time named in one message, storage maps without
//! entries, EM_NONE objects, code without function symbols explained.
//!
//! The objects are in `tests/objects` (sources beside them, `build.sh` rebuilds them).
//! Skipped with a message when bpf() is out of reach, unless `BPFEMU_REQUIRE_KERNEL=1`.

use bpfemu_kernel::kernel_or_skip;
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
/// is refused with the kernel's reason (with `--no-verify`: else bpfemu's verifier refuses it
/// first).
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
        "--no-verify",
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

/// `--verifier` shows programs of other types than XDP with the kernel's verdict and no
/// bpfemu verdict, and leaves them out of the agreement and the exit code.
#[test]
fn verifier_comparison_leaves_programs_of_other_types_out() {
    if !kernel_or_skip("verifier_comparison_leaves_programs_of_other_types_out") {
        return;
    }
    let out = bpfemu(&["diff", "--verifier", "tests/objects/beside_xdp.o"]);
    assert_eq!(out.status.code(), Some(0), "{}", all(&out));
    let stdout = text(&out.stdout);
    let tc = stdout
        .lines()
        .find(|l| l.starts_with("tc_pass "))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(
        tc.contains(" accepted ") && tc.trim_end().ends_with('-'),
        "{stdout}"
    );
    assert!(
        stdout.ends_with(
            "3 programs: 3 accepted, 0 rejected by the kernel; bpfemu agrees on 1 (2 not verified: not XDP)\n"
        ),
        "{stdout}"
    );
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

/// Maps declared with max_entries 0 are all named in one message with the option for each;
/// a socket storage map, which has no entries, is not among them and keeps its 0.
#[test]
fn every_map_sized_at_run_time_is_named_in_one_message() {
    let obj = "tests/objects/runtime_sized.o";
    let out = bpfemu(&["inspect", obj]);
    assert_eq!(out.status.code(), Some(2), "{}", all(&out));
    let err = text(&out.stderr);
    assert!(
        err.contains("maps 'sized_later_a', 'sized_later_b' are sized at run time")
            && err.contains("--map-size sized_later_a=N --map-size sized_later_b=N")
            && !err.contains("per_socket"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    let out = bpfemu(&[
        "inspect",
        obj,
        "--map-size",
        "sized_later_a=8",
        "--map-size",
        "sized_later_b=4",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", all(&out));
    let storage = text(&out.stdout)
        .lines()
        .find(|l| l.contains("per_socket"))
        .unwrap()
        .to_owned();
    assert!(
        storage.contains("BPF_MAP_TYPE_SK_STORAGE") && storage.contains("max_entries 0 "),
        "{storage}"
    );
}

/// `e_machine` EM_NONE (old LLVM) loads, as libbpf loads it.
#[test]
fn em_none_objects_load() {
    let mut bytes = std::fs::read(root().join("examples/xdp/build/reflector.v3.o")).unwrap();
    bytes[18..20].copy_from_slice(&0u16.to_le_bytes());
    let file = std::env::temp_dir().join(format!("bpfemu-em-none-{}.o", std::process::id()));
    std::fs::write(&file, &bytes).unwrap();
    let out = bpfemu(&["inspect", file.to_str().unwrap()]);
    let _ = std::fs::remove_file(&file);
    assert_eq!(out.status.code(), Some(0), "{}", all(&out));
    assert!(
        text(&out.stdout).contains("BPF_PROG_TYPE_XDP"),
        "{}",
        all(&out)
    );
}

/// Code with no function symbol is one program named by its section, as iproute2 loads it
/// (libbpf makes none), and bpfemu says so.
#[test]
fn code_without_function_symbols_is_explained() {
    let out = bpfemu(&["inspect", "tests/objects/no_function_symbols.o"]);
    let err = text(&out.stderr);
    assert!(
        err.contains("section 'xdp_raw' holds code but no function symbol: each is one program named by its section, as iproute2 loads it"),
        "{}",
        all(&out)
    );
    assert!(text(&out.stdout).contains("\n  xdp_raw "), "{}", all(&out));
}

/// A 4M-entry array read in place and a hash read in batches: every entry is counted, equal
/// ones are equal, and a difference planted on the kernel's side (one array slot, one extra
/// hash key) is found.
#[test]
fn large_maps_are_compared_entry_by_entry_without_copies() {
    use bpfemu::diff::{DiffOptions, Session};
    if !kernel_or_skip("large_maps_are_compared_entry_by_entry_without_copies") {
        return;
    }
    let opts = DiffOptions::new(root().join("tests/objects/big_maps.o"));
    let mut session = Session::open(&opts).unwrap();
    for len in [60usize, 64, 100, 1500, 60] {
        let cmp = session.run_packet(0, &vec![0xaa; len]);
        assert!(!cmp.is_mismatch(), "{}", bpfemu::diff::format_packet(&cmp));
    }
    let clean = session.compare_maps().unwrap();
    let ring = clean.iter().find(|m| m.name == "ring").unwrap();
    assert_eq!(
        (
            ring.kernel_entries,
            ring.equal_entries,
            ring.mismatches.len()
        ),
        (1 << 22, 1 << 22, 0)
    );
    let lengths = clean.iter().find(|m| m.name == "lengths").unwrap();
    assert_eq!((lengths.kernel_entries, lengths.equal_entries), (4, 4));
    let slot = 4_000_000u32.to_ne_bytes();
    let planted = 7u32.to_ne_bytes();
    let fd = session.kernel_map_fd("ring").unwrap();
    bpfemu_kernel::map_update_fd(fd, &slot, &planted, 0).unwrap();
    let fd = session.kernel_map_fd("lengths").unwrap();
    bpfemu_kernel::map_update_fd(fd, &9u32.to_ne_bytes(), &1u64.to_ne_bytes(), 0).unwrap();
    let reports = session.compare_maps().unwrap();
    let ring = reports.iter().find(|m| m.name == "ring").unwrap();
    assert_eq!(ring.mismatches.len(), 1);
    assert_eq!(ring.mismatches[0].key, slot);
    assert_eq!(ring.mismatches[0].kernel.as_deref(), Some(&planted[..]));
    assert_eq!(ring.equal_entries, (1 << 22) - 1);
    let lengths = reports.iter().find(|m| m.name == "lengths").unwrap();
    assert_eq!(lengths.mismatches.len(), 1);
    assert_eq!(lengths.mismatches[0].key, 9u32.to_ne_bytes());
    assert!(lengths.mismatches[0].bpfemu.is_none());
}
