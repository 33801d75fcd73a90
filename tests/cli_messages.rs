//! Messages as good as tcpdump's: bad captures, map files, outputs and options are refused
//! with one line naming the file, the place and what is wrong, before any work; `-` reads a
//! capture from standard input; warnings are said once.

#[allow(dead_code)]
mod cli_support;

use cli_support::{Scratch, assert_exit, bpfemu, bpfemu_with_stdin, example, stderr, stdout};

fn reflector() -> String {
    example("xdp/build/reflector.v3.o")
}

/// The one line of error a refused command printed.
#[track_caller]
fn one_line_error(out: &std::process::Output) -> String {
    assert_exit(out, 2);
    let err = stderr(out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.len() < 400, "{} bytes: {err}", err.len());
    err
}

fn pcapng_block(ty: u32, body: &[u8]) -> Vec<u8> {
    let len = (12 + body.len()) as u32;
    [
        &ty.to_le_bytes()[..],
        &len.to_le_bytes(),
        body,
        &len.to_le_bytes(),
    ]
    .concat()
}

fn pcapng_packet(data: &[u8]) -> Vec<u8> {
    let mut body = Vec::new();
    for field in [0u32, 0, 0, data.len() as u32, data.len() as u32] {
        body.extend_from_slice(&field.to_le_bytes());
    }
    body.extend_from_slice(data);
    body.resize(body.len().div_ceil(4) * 4, 0);
    pcapng_block(6, &body)
}

#[test]
fn a_malformed_pcapng_block_is_one_line_with_its_offset() {
    let dir = Scratch::new("msg-pcapng");
    let mut shb = 0x1a2b_3c4du32.to_le_bytes().to_vec();
    shb.extend_from_slice(&[1, 0, 0, 0]);
    shb.extend_from_slice(&(-1i64).to_le_bytes());
    let idb = [1u8, 0, 0, 0, 0, 0, 0, 0];
    let frame: Vec<u8> = (0..60).collect();
    let mut bad = pcapng_packet(&frame);
    let n = bad.len();
    bad[n - 4..].copy_from_slice(&81u32.to_le_bytes()); // the trailing length disagrees
    let file = [
        pcapng_block(0x0a0d_0d0a, &shb),
        pcapng_block(1, &idb),
        pcapng_packet(&frame),
        bad,
        vec![0; 200_000],
    ]
    .concat();
    let path = dir.path("bad.pcapng");
    std::fs::write(&path, file).unwrap();
    let out = bpfemu(&["replay", &reflector(), &path]);
    let err = one_line_error(&out);
    assert!(
        err.contains("bad.pcapng: malformed record after packet 1 at byte 140: pcapng block of type 0x6, 92 bytes: "),
        "{err}"
    );
    // The packet before it was replayed.
    let table = stdout(&out);
    let total = table.lines().find(|l| l.starts_with("total")).unwrap();
    assert_eq!(total.split_whitespace().nth(1), Some("1"), "{table}");
}

#[test]
fn a_bogus_caplen_is_called_so() {
    let dir = Scratch::new("msg-caplen");
    let mut bytes = std::fs::read(example("pcap/normal.pcap")).unwrap();
    bytes[24 + 8..24 + 12].copy_from_slice(&u32::MAX.to_le_bytes());
    let path = dir.path("bogus.pcap");
    std::fs::write(&path, bytes).unwrap();
    let err = one_line_error(&bpfemu(&["replay", &reflector(), &path]));
    assert!(
        err.contains("bogus.pcap: packet 0: bogus caplen 4294967295 at byte 24"),
        "{err}"
    );
}

#[test]
fn directories_and_missing_files_are_said_once() {
    let dir = Scratch::new("msg-files");
    let err = one_line_error(&bpfemu(&[
        "replay",
        &reflector(),
        dir.dir().to_str().unwrap(),
    ]));
    assert!(err.ends_with("is a directory, not a capture\n"), "{err}");
    let missing = dir.path("missing.pcap");
    let err = one_line_error(&bpfemu(&["replay", &reflector(), &missing]));
    assert_eq!(
        err,
        format!("bpfemu: {missing}: No such file or directory\n")
    );
    let err = one_line_error(&bpfemu(&["replay", &dir.path("no.o"), &missing]));
    assert_eq!(err.matches("No such file or directory").count(), 1, "{err}");
    assert!(!err.contains("os error"), "{err}");
}

#[test]
fn a_capture_from_standard_input() {
    let bytes = std::fs::read(example("pcap/normal.pcap")).unwrap();
    let from_stdin = bpfemu_with_stdin(&["replay", "--json", &reflector(), "-"], &bytes);
    assert_exit(&from_stdin, 0);
    let from_file = bpfemu(&[
        "replay",
        "--json",
        &reflector(),
        &example("pcap/normal.pcap"),
    ]);
    let packets = |o: &std::process::Output| {
        stdout(o)
            .lines()
            .filter(|l| !l.contains("summary"))
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    assert_eq!(packets(&from_stdin).len(), 200);
    assert_eq!(packets(&from_stdin), packets(&from_file));
}

#[test]
fn map_files_say_sizes_and_take_raw_bytes() {
    let dir = Scratch::new("msg-maps");
    let pcap = example("pcap/normal.pcap");
    let maps = dir.path("maps.json");
    std::fs::write(
        &maps,
        r#"{"proto_count": [{"key": ["0x11", "0x00", "0x00"], "value": 1}]}"#,
    )
    .unwrap();
    let err = one_line_error(&bpfemu(&["replay", &reflector(), &pcap, "--maps", &maps]));
    assert!(err.contains("key is 3 bytes, key_size is 4"), "{err}");
    // Raw bytes where a typed value would do, as bpftool takes both.
    std::fs::write(
        &maps,
        r#"{"proto_count": [{"key": 17, "value": ["0x05", "0", "0", "0", "0", "0", "0", "0"]},
                            {"key": ["0x06", "0x00", "0x00", "0x00"], "value": 7}]}"#,
    )
    .unwrap();
    let after = dir.path("after.json");
    let out = bpfemu(&[
        "replay",
        &reflector(),
        &pcap,
        "--maps",
        &maps,
        "--dump-maps",
        &after,
    ]);
    assert_exit(&out, 0);
    let dump: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&after).unwrap()).unwrap();
    let count = |proto: u64| {
        dump["proto_count"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["formatted"]["key"] == proto)
            .map(|e| e["formatted"]["values"][0]["value"].clone())
            .unwrap()
    };
    // The replay counts 80 UDP and 60 TCP packets on top of what the file set.
    assert_eq!(count(17), 85);
    assert_eq!(count(6), 67);
}

#[test]
fn a_cpumap_entry_for_a_missing_cpu_names_the_option() {
    let args = |cpus: &'static str| {
        vec![
            "replay".to_owned(),
            example("xdp/build/ddos_filter.v3.o"),
            example("pcap/attack.pcap"),
            "--maps".into(),
            example("maps/ddos_filter.json"),
            "--cpus".into(),
            cpus.into(),
        ]
    };
    let run = |a: Vec<String>| bpfemu(&a.iter().map(String::as_str).collect::<Vec<_>>());
    let err = one_line_error(&run(args("1")));
    assert!(
        err.contains("map cpu_map: entry 1 is for CPU 1, which this run does not have: it has 1 CPU (--cpus 2 gives it CPU 1)"),
        "{err}"
    );
    assert_exit(&run(args("2")), 0);
}

#[test]
fn outputs_are_checked_before_the_work_and_hold_no_stale_captures() {
    let dir = Scratch::new("msg-outputs");
    let pcap = example("pcap/normal.pcap");
    let out_dir = dir.path("out");
    // A first replay writes tx.pcap and drop.pcap; one that passes everything leaves pass.pcap
    // alone.
    assert_exit(
        &bpfemu(&["replay", &reflector(), &pcap, "--out-dir", &out_dir]),
        0,
    );
    let mut first: Vec<String> = std::fs::read_dir(&out_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    first.sort();
    assert_eq!(first, ["drop.pcap", "tx.pcap"]);
    std::fs::write(dir.path("out/pass.pcap"), b"stale").unwrap();
    let attack = example("pcap/attack.pcap");
    assert_exit(
        &bpfemu(&["replay", &reflector(), &attack, "--out-dir", &out_dir]),
        0,
    );
    let summary = stdout(&bpfemu(&["replay", &reflector(), &attack]));
    for name in ["pass", "tx", "drop"] {
        let file = dir.path(&format!("out/{name}.pcap"));
        assert_eq!(
            std::path::Path::new(&file).exists(),
            summary.lines().any(|l| l.starts_with(name)),
            "{name}.pcap after a replay whose summary is\n{summary}"
        );
    }

    let err = one_line_error(&bpfemu(&[
        "replay",
        &reflector(),
        &pcap,
        "--out-dir",
        "/etc/passwd",
    ]));
    assert_eq!(err, "bpfemu: --out-dir /etc/passwd: not a directory\n");
    let missing = dir.path("nowhere/after.json");
    let out = bpfemu(&["replay", &reflector(), &pcap, "--dump-maps", &missing]);
    let err = one_line_error(&out);
    assert!(err.contains("does not exist"), "{err}");
    assert!(stdout(&out).is_empty(), "the replay ran: {}", stdout(&out));
    let err = one_line_error(&bpfemu(&[
        "replay",
        &reflector(),
        &pcap,
        "--record",
        &dir.path("nowhere/exp.json"),
    ]));
    assert!(err.contains("cannot create"), "{err}");
}

#[test]
fn options_are_checked_as_the_kernel_checks_them() {
    let pcap = example("pcap/normal.pcap");
    let err = one_line_error(&bpfemu(&["replay", &reflector(), &pcap, "--rxq", "1"]));
    assert!(
        err.contains("--rxq 1 with --ifindex 1: ") && err.contains("EINVAL"),
        "{err}"
    );
    let err = one_line_error(&bpfemu(&[
        "replay",
        &reflector(),
        &pcap,
        "--ifindex",
        "0",
        "--rxq",
        "2",
    ]));
    assert!(err.contains("without an ingress_ifindex"), "{err}");
    assert_exit(&bpfemu(&["replay", &reflector(), &pcap, "--rxq", "0"]), 0);
    let out = bpfemu(&["bench", &reflector(), &pcap, "--packets", "0"]);
    assert_exit(&out, 0);
    assert_eq!(
        stdout(&out),
        "0 packets through xdp_reflector: nothing measured\n"
    );
}

#[test]
fn diff_takes_ifindex_and_rxq_as_replay_does() {
    if !cli_support::kernel_or_skip("diff_takes_ifindex_and_rxq_as_replay_does") {
        return;
    }
    let pcap = example("pcap/normal.pcap");
    let err = one_line_error(&bpfemu(&["diff", &reflector(), &pcap, "--rxq", "1"]));
    assert!(
        err.contains("--rxq 1: lo (ifindex 1)") && err.contains("EINVAL"),
        "{err}"
    );
    let err = one_line_error(&bpfemu(&["diff", &reflector(), &pcap, "--ifindex", "4242"]));
    assert!(
        err.contains("--ifindex 4242: no such device") && err.contains("ENODEV"),
        "{err}"
    );
    // A program that reads both fields: the kernel and bpfemu see the same ones.
    let xsk = example("xdp/build/xsk_dispatch.v3.o");
    let args = ["diff", &xsk, &pcap, "--ifindex", "1", "--rxq", "0"];
    let out = bpfemu(&args);
    assert_exit(&out, 0);
    assert!(
        stdout(&out).ends_with("200 packets, 0 mismatches\n"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn warnings_are_said_once() {
    let obj = example("xdp/build/legacy_maps.v3.o");
    let pcap = "examples/pcap/normal.pcap";
    let dir = Scratch::new("msg-warnings");
    let findings = dir.path("findings");
    let mut commands = vec![
        vec!["replay", obj.as_str(), pcap],
        vec!["inspect", obj.as_str()],
        vec!["verify", obj.as_str()],
        vec!["disasm", obj.as_str()],
        vec!["bench", obj.as_str(), pcap, "--packets", "10"],
        vec![
            "fuzz",
            obj.as_str(),
            "--runs",
            "10",
            "--out",
            findings.as_str(),
        ],
    ];
    if cli_support::kernel_or_skip("warnings_are_said_once (diff)") {
        commands.push(vec!["diff", obj.as_str(), pcap]);
    }
    for args in commands {
        let err = stderr(&bpfemu(&args));
        let warnings: Vec<&str> = err.lines().filter(|l| l.contains("warning:")).collect();
        assert_eq!(warnings.len(), 2, "{args:?}: {err}");
        assert_ne!(warnings[0], warnings[1]);
    }
}

/// A kernel named with `--kernel` whose BTF the object needs (CO-RE) and the cache lacks:
/// one line that names the file and says how to fetch it, exit 2.
#[test]
fn a_kernel_btf_not_fetched_says_how_to_fetch_it() {
    let cache = Scratch::new("msg-no-kernels");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_bpfemu"))
        .args([
            "verify",
            &example("xdp/build/core_ctx.v3.o"),
            "--kernel",
            "5.10",
        ])
        .env("BPFEMU_KERNELS", cache.dir())
        .output()
        .unwrap();
    let err = one_line_error(&out);
    assert!(err.contains(&cache.path("5.10/vmlinux.btf")), "{err}");
    assert!(err.contains("`bpfemu kernels fetch 5.10`"), "{err}");
}
