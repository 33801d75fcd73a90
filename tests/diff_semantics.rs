//! Semantics real objects depend on, held to the running kernel: the ring buffer and perf
//! event records a run emits (read from the kernel's rings after each test run and compared
//! with bpfemu's), programs with the devmap and cpumap attach types (which test_run refuses),
//! socket storage maps (no entries; the object's XDP program runs), and socket lookups (in
//! the kernel side's fresh namespace nothing is found, and bpfemu finds nothing either).
//!
//! The objects are in `tests/objects` (sources beside them, `build.sh` rebuilds them).
//! Skipped with a message when bpf() is out of reach, unless `BPFEMU_REQUIRE_KERNEL=1`.

use bpfemu::diff::{DiffOptions, Outcome, PacketVerdict, Session};
use bpfemu_kernel::object::{KernelLoadOptions, KernelObject};
use bpfemu_kernel::{self as kernel, kernel_or_skip};
use std::path::PathBuf;
use std::process::{Command, Output};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn object(name: &str) -> PathBuf {
    root().join("tests/objects").join(format!("{name}.o"))
}

fn bpfemu(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_bpfemu"))
        .args(args)
        .current_dir(root())
        .output()
        .expect("bpfemu runs")
}

fn all(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// An IPv4 frame of `len` bytes whose bytes after the EtherType count up from `seed`.
fn frame(len: usize, seed: u8) -> Vec<u8> {
    let mut f: Vec<u8> = (0..len).map(|i| seed.wrapping_add(i as u8)).collect();
    f[12] = 0x08;
    f[13] = 0x00;
    f
}

/// Every packet's records (three ring buffer records and a perf sample on CPU 0's slot, with
/// 14 packet bytes after 3 of its own, which the kernel pads) equal the kernel's; an output
/// into CPU 1's slot fails alike on both sides.
#[test]
fn ring_and_perf_records_equal_the_kernels() {
    if !kernel_or_skip("ring_and_perf_records_equal_the_kernels") {
        return;
    }
    let mut session = Session::open(&DiffOptions::new(object("record_events"))).unwrap();
    let cpus = session.cpus();
    for (i, len) in [14usize, 60, 61, 333, 1500].into_iter().enumerate() {
        let packet = frame(len, i as u8);
        let cmp = session.run_packet(i, &packet);
        assert_eq!(
            cmp.verdict,
            PacketVerdict::Equal,
            "{}",
            bpfemu::diff::format_packet(&cmp)
        );
        let events = cmp.events.expect("records on both sides");
        assert_eq!(events.kernel.len(), 4, "{events:?}");
        assert_eq!(events.bpfemu.len(), 4, "{events:?}");
        let sample = &events.bpfemu[3];
        assert_eq!((sample.map.as_str(), sample.slot), ("samples", Some(0)));
        let mut expected = vec![1, 2, 3];
        expected.extend_from_slice(&packet[..14]);
        assert_eq!(sample.data, expected);
        // 17 bytes come back as 20 from the kernel: the size word and bytes end on 8.
        assert_eq!(events.kernel[3].data.len(), 20);
        let rc = i64::from_le_bytes(events.bpfemu[2].data[..8].try_into().unwrap());
        let expected_rc = if cpus > 1 { -95 } else { -7 };
        assert_eq!(rc, expected_rc, "output into CPU 1's slot");
        assert_eq!(events.bpfemu[0].data[..4], (len as u32).to_le_bytes());
    }
}

/// A difference planted in what the kernel's run writes (the salt its first record carries)
/// is reported as an events mismatch, with both sides' records.
#[test]
fn a_planted_record_difference_is_reported() {
    if !kernel_or_skip("a_planted_record_difference_is_reported") {
        return;
    }
    let mut session = Session::open(&DiffOptions::new(object("record_events"))).unwrap();
    let first = session.run_packet(0, &frame(60, 0));
    assert_eq!(first.verdict, PacketVerdict::Equal);
    let salt = session.kernel_map_fd("salt").expect("the program uses it");
    kernel::map_update_fd(salt, &0u32.to_ne_bytes(), &7u32.to_ne_bytes(), 0).unwrap();
    let cmp = session.run_packet(1, &frame(60, 1));
    assert_eq!(
        cmp.verdict,
        PacketVerdict::Mismatch {
            differs: vec!["events".into()]
        }
    );
    let shown = bpfemu::diff::format_packet(&cmp);
    assert!(shown.contains("MISMATCH (events)"), "{shown}");
    assert!(shown.contains("  kernel events: 4\n"), "{shown}");
    assert!(shown.contains("    records 3c00000007000000"), "{shown}");
    assert!(shown.contains("    records 3c00000000000000"), "{shown}");
}

/// BPF_PROG_TEST_RUN refuses programs that run from devmap and cpumap entries: replay refuses
/// them in one line naming the program and why, and diff finds both sides refusing every
/// packet alike (EINVAL), while the object's plain XDP program runs.
#[test]
fn devmap_and_cpumap_programs_are_refused_as_test_run_refuses_them() {
    if !kernel_or_skip("devmap_and_cpumap_programs_are_refused_as_test_run_refuses_them") {
        return;
    }
    let obj = object("attach_types");
    let path = obj.to_str().unwrap();
    let pcap = "examples/pcap/normal.pcap";
    for (prog, attach) in [
        ("on_devmap", "BPF_XDP_DEVMAP"),
        ("on_cpumap", "BPF_XDP_CPUMAP"),
        ("on_devmap_frags", "BPF_XDP_DEVMAP"),
    ] {
        let out = bpfemu(&["replay", path, pcap, "--prog", prog]);
        assert_eq!(out.status.code(), Some(2), "{}", all(&out));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        assert!(
            err.contains(&format!("program {prog} has expected attach type {attach}")),
            "{err}"
        );
        let mut opts = DiffOptions::new(&obj);
        opts.program = Some(prog.into());
        let mut session = Session::open(&opts).unwrap();
        let cmp = session.run_packet(0, &frame(60, 0));
        assert_eq!(cmp.verdict, PacketVerdict::Equal, "{prog}");
        for side in [&cmp.kernel, &cmp.bpfemu] {
            assert!(
                matches!(side, Outcome::Refused { errno: 22, .. }),
                "{prog}: {side:?}"
            );
        }
        let out = bpfemu(&["diff", path, pcap, "--prog", prog]);
        assert_eq!(out.status.code(), Some(0), "{}", all(&out));
        assert!(
            all(&out).contains(" packets, 0 mismatches"),
            "{}",
            all(&out)
        );
    }
    let out = bpfemu(&["replay", path, pcap, "--prog", "plain"]);
    assert_eq!(out.status.code(), Some(0), "{}", all(&out));
}

/// A socket storage map loads as the kernel takes it (max_entries 0, BPF_F_NO_PREALLOC, BTF
/// key and value: the kernel creates it for the object's sock_ops program), bpfemu creates it
/// empty, `--dump-maps` shows it so, and the object's XDP program diffs cleanly.
#[test]
fn socket_storage_maps_load_empty_and_the_xdp_program_runs() {
    if !kernel_or_skip("socket_storage_maps_load_empty_and_the_xdp_program_runs") {
        return;
    }
    let obj = object("sk_storage");
    let loaded = bpfemu_loader::load_file(&obj, &Default::default()).unwrap();
    let spec = loaded.maps.iter().find(|m| m.name == "flow_marks").unwrap();
    assert_eq!((spec.map_type, spec.max_entries), (24, 0));
    let opts = KernelLoadOptions {
        log_level: 0,
        log_size: 1 << 16,
        initial: Default::default(),
    };
    let kernel = KernelObject::load(&loaded, "mark_flows", &opts)
        .unwrap_or_else(|e| panic!("the kernel loads the sock_ops program: {e}"));
    assert!(kernel.map_fd("flow_marks").is_some());
    let dump = std::env::temp_dir().join(format!("bpfemu-sk-storage-{}.json", std::process::id()));
    let out = bpfemu(&[
        "replay",
        obj.to_str().unwrap(),
        "examples/pcap/normal.pcap",
        "--prog",
        "pass_ipv4",
        "--dump-maps",
        dump.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", all(&out));
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&dump).unwrap()).unwrap();
    std::fs::remove_file(&dump).ok();
    assert_eq!(doc["flow_marks"], serde_json::json!([]), "{doc}");
    let out = bpfemu(&[
        "diff",
        obj.to_str().unwrap(),
        "examples/pcap/normal.pcap",
        "--prog",
        "pass_ipv4",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", all(&out));
    assert!(
        all(&out).contains(" packets, 0 mismatches"),
        "{}",
        all(&out)
    );
}

/// Without BTF for its key and value (a legacy `maps` section definition), the kernel refuses
/// a socket storage map (EINVAL), and bpfemu's loader refuses the object naming the map.
#[test]
fn socket_storage_without_btf_is_refused_as_the_kernel_refuses_it() {
    if !kernel_or_skip("socket_storage_without_btf_is_refused_as_the_kernel_refuses_it") {
        return;
    }
    let mut spec = kernel::MapSpec::hash(4, 8, 0);
    spec.map_type = 24;
    spec.map_flags = 1; // BPF_F_NO_PREALLOC
    assert_eq!(kernel::map_create(&spec).err(), Some(libc::EINVAL));
    let out = bpfemu(&["inspect", object("sk_storage_legacy").to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", all(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(
        err.contains("map 'legacy_marks': a local storage map needs BTF for its key and value"),
        "{err}"
    );
}

/// Socket lookups for every TCP and UDP packet (`socket_lookups.c`: a socket found is read and
/// released, NULLs are counted) give the kernel's verdicts and counts in every engine: the
/// kernel side's namespace has no sockets, and the counts show the NULL paths ran.
#[test]
fn socket_lookups_find_nothing_as_in_the_kernels_namespace() {
    if !kernel_or_skip("socket_lookups_find_nothing_as_in_the_kernels_namespace") {
        return;
    }
    let obj = object("socket_lookups");
    for engine in ["interp", "jit", "jit-baseline"] {
        let out = bpfemu(&[
            "diff",
            obj.to_str().unwrap(),
            "examples/pcap/flows.pcap",
            "--engine",
            engine,
        ]);
        assert_eq!(out.status.code(), Some(0), "{engine}: {}", all(&out));
        assert!(
            all(&out).contains("93 packets, 0 mismatches"),
            "{engine}: {}",
            all(&out)
        );
    }
    let dump = std::env::temp_dir().join(format!("bpfemu-sockets-{}.json", std::process::id()));
    let out = bpfemu(&[
        "replay",
        obj.to_str().unwrap(),
        "examples/pcap/flows.pcap",
        "--dump-maps",
        dump.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", all(&out));
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&dump).unwrap()).unwrap();
    std::fs::remove_file(&dump).ok();
    let count = |slot: usize| doc["counts"][slot]["formatted"]["value"].as_u64().unwrap();
    assert!(count(0) > 0 && count(4) > 0, "the lookups ran: {doc}");
    assert_eq!(count(1), 0, "no socket is found: {doc}");
}
