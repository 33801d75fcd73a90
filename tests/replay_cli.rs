//! `bpfemu replay` as a user runs it: expectations recorded and checked (and a changed program
//! caught), and bad input reported without losing the packets already processed.

use bpfemu::pcap::PcapWriter;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn bpfemu(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_bpfemu"))
        .args(args)
        .output()
        .expect("bpfemu runs")
}

fn example(path: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples")
        .join(path)
        .display()
        .to_string()
}

/// A scratch directory of this test, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("bpfemu-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    fn path(&self, file: &str) -> String {
        self.0.join(file).display().to_string()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The reflector with its `XDP_TX` verdicts turned into `XDP_PASS`: every `r0 = 3` or
/// `w0 = 3` instruction of the object's code becomes `= 2`.
fn reflector_that_passes(dest: &str) {
    reflector_returning(dest, 2);
}

/// The reflector with every `r0 = 3` / `w0 = 3` (its `XDP_TX`) turned into `= retval`.
fn reflector_returning(dest: &str, retval: u8) {
    let mut bytes = std::fs::read(example("xdp/build/reflector.v3.o")).unwrap();
    let mut patched = 0;
    for insn in bytes.chunks_exact_mut(8) {
        if matches!(insn[0], 0xb7 | 0xb4) && insn[1] == 0 && insn[2..8] == [0, 0, 3, 0, 0, 0] {
            insn[4] = retval;
            patched += 1;
        }
    }
    assert!(patched > 0, "no `r0 = XDP_TX` instruction found to change");
    std::fs::write(dest, bytes).unwrap();
}

#[test]
fn record_then_check_and_catch_a_changed_program() {
    let dir = Scratch::new("record");
    let (obj, pcap, exp) = (
        example("xdp/build/reflector.v3.o"),
        example("pcap/normal.pcap"),
        dir.path("exp.json"),
    );
    let out = bpfemu(&["replay", &obj, &pcap, "--record", &exp]);
    assert!(out.status.success(), "{}", stderr(&out));

    let out = bpfemu(&["replay", &obj, &pcap, "--check", &exp]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("check passed: 200 packets"),
        "{}",
        stderr(&out)
    );

    let changed = dir.path("changed.o");
    reflector_that_passes(&changed);
    let out = bpfemu(&["replay", &changed, &pcap, "--check", &exp]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let report = stderr(&out);
    assert!(report.contains("differs:"), "{report}");
    assert!(report.contains("expected: action tx,"), "{report}");
    assert!(report.contains("got:      action pass,"), "{report}");
}

#[test]
fn changed_map_contents_fail_the_check() {
    let dir = Scratch::new("mapcheck");
    let (obj, exp) = (example("xdp/build/reflector.v3.o"), dir.path("exp.json"));
    assert!(
        bpfemu(&[
            "replay",
            &obj,
            &example("pcap/normal.pcap"),
            "--record",
            &exp
        ])
        .status
        .success()
    );
    // Same packets minus the last: packet verdicts agree, the count and counters do not.
    let frames = bpfemu::traffic::bundled()
        .into_iter()
        .find(|(n, _)| *n == "normal.pcap")
        .unwrap()
        .1;
    let shorter = dir.path("shorter.pcap");
    let mut w = PcapWriter::create(Path::new(&shorter), true).unwrap();
    for (i, f) in frames[..frames.len() - 1].iter().enumerate() {
        w.write(
            bpfemu::traffic::BUNDLED_EPOCH_NS + i as u64 * bpfemu::traffic::BUNDLED_GAP_NS,
            f,
        )
        .unwrap();
    }
    w.finish().unwrap();
    let out = bpfemu(&["replay", &obj, &shorter, "--check", &exp]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("the capture gave 199 packets"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn refused_packets_carry_an_error_and_the_replay_goes_on() {
    let dir = Scratch::new("refused");
    let pcap = dir.path("sizes.pcap");
    let good = bpfemu::traffic::bundled()[0].1[0].clone();
    let mut w = PcapWriter::create(Path::new(&pcap), false).unwrap();
    for frame in [&good[..10], &good[..], &good[..13], &good[..]] {
        w.write(0, frame).unwrap();
    }
    w.finish().unwrap();
    let out = bpfemu(&[
        "replay",
        &example("xdp/build/reflector.v3.o"),
        &pcap,
        "--json",
    ]);
    // Refused packets fail the replay, which still runs every packet.
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("2 packets faulted, the first: packet 0: "),
        "{}",
        stderr(&out)
    );
    let lines: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 5, "four packets and the summary");
    for refused in [&lines[0], &lines[2]] {
        let error = refused["error"].as_str().expect("an error field");
        assert!(error.contains("14"), "{error}");
        assert!(refused.get("action").is_none());
    }
    for ran in [&lines[1], &lines[3]] {
        assert!(ran.get("error").is_none(), "{ran}");
        assert!(ran["data"].as_str().unwrap().len() == good.len() * 2);
    }
    assert_eq!(lines[4]["summary"]["packets"], 4);
    assert_eq!(lines[4]["summary"]["actions"]["error"], 2);
    assert_eq!(lines[4]["summary"]["faulted"], 2);
    assert_eq!(lines[4]["summary"]["first_fault"]["index"], 0);
}

#[test]
fn a_truncated_capture_keeps_what_was_read() {
    let dir = Scratch::new("truncated");
    let mut bytes = std::fs::read(example("pcap/normal.pcap")).unwrap();
    bytes.truncate(bytes.len() - 7);
    let pcap = dir.path("cut.pcap");
    std::fs::write(&pcap, bytes).unwrap();
    let out_dir = dir.path("out");
    let out = bpfemu(&[
        "replay",
        &example("xdp/build/reflector.v3.o"),
        &pcap,
        "--json",
        "--out-dir",
        &out_dir,
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(err.contains("cut.pcap: packet 199 is truncated"), "{err}");
    assert!(err.contains("199 packets before it were replayed"), "{err}");
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        stdout.lines().filter(|l| l.contains("\"index\"")).count(),
        199
    );
    assert!(stdout.lines().last().unwrap().contains("summary"));
    let written: usize = ["tx.pcap", "drop.pcap"]
        .iter()
        .map(|f| {
            bpfemu::pcap::PcapReader::open(&Path::new(&out_dir).join(f))
                .unwrap()
                .count()
        })
        .sum();
    assert_eq!(
        written, 199,
        "every replayed packet is in the per-action captures"
    );
}

#[test]
fn bad_inputs_are_named() {
    let dir = Scratch::new("bad");
    let obj = example("xdp/build/l4lb.v3.o");
    let pcap = example("pcap/normal.pcap");

    let maps = dir.path("maps.json");
    std::fs::write(
        &maps,
        r#"{"vip_map": [{"key": {"vip": 1, "port": 80, "nope": 1}, "value": {}}]}"#,
    )
    .unwrap();
    let out = bpfemu(&["replay", &obj, &pcap, "--maps", &maps]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("maps.json") && err.contains("vip_map"),
        "{err}"
    );

    let not_ethernet = dir.path("sll.pcap");
    let mut bytes = std::fs::read(&pcap).unwrap();
    bytes[20] = 113;
    std::fs::write(&not_ethernet, bytes).unwrap();
    let out = bpfemu(&["replay", &obj, &not_ethernet]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("link type 113 is not Ethernet"),
        "{}",
        stderr(&out)
    );

    let out = bpfemu(&["replay", &obj, &pcap, "--prog", "nothere"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("no program `nothere`"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn out_dir_holds_one_capture_per_action() {
    let dir = Scratch::new("outdir");
    let out_dir = dir.path("out");
    let out = bpfemu(&[
        "replay",
        &example("xdp/build/reflector.v3.o"),
        &example("pcap/normal.pcap"),
        "--out-dir",
        &out_dir,
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let tx: Vec<_> = bpfemu::pcap::PcapReader::open(&Path::new(&out_dir).join("tx.pcap"))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert!(!tx.is_empty());
    for packet in &tx {
        // Reflected: the source MAC is the original destination.
        assert_eq!(&packet.data[6..12], &bpfemu::traffic::MAC_B);
        assert_eq!(&packet.data[0..6], &bpfemu::traffic::MAC_A);
    }
}

#[test]
fn return_values_past_the_actions_are_shown_as_numbers() {
    let dir = Scratch::new("retval7");
    let obj = dir.path("reflector7.o");
    reflector_returning(&obj, 7);
    let out = bpfemu(&["replay", &obj, &example("pcap/normal.pcap"), "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let summary = &lines.last().unwrap()["summary"]["actions"];
    assert!(summary["7"].as_u64().unwrap_or(0) > 0, "{summary}");
    assert!(summary.get("unknown").is_none(), "{summary}");
    assert!(lines.iter().any(|l| l["action"] == "7"), "{text}");
    let human = bpfemu(&["replay", &obj, &example("pcap/normal.pcap")]);
    let human = String::from_utf8_lossy(&human.stdout);
    assert!(!human.contains("unknown"), "{human}");
}

/// Ring buffer records are shown with the packet that produced them (`--json`), listed under
/// their map by `--dump-maps`, and recorded and checked by `--record`/`--check`.
#[test]
fn ring_buffer_records_are_shown_dumped_and_checked() {
    let dir = Scratch::new("ringbuf-events");
    let obj = example("xdp/build/ringbuf_events.v3.o");
    let cap = example("pcap/normal.pcap");
    let (dump, expect) = (dir.path("maps.json"), dir.path("expect.jsonl"));
    let out = bpfemu(&[
        "replay",
        &obj,
        &cap,
        "--json",
        "--dump-maps",
        &dump,
        "--record",
        &expect,
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    let with_events: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|l| l.get("events").is_some())
        .collect();
    assert!(!with_events.is_empty(), "{text}");
    for packet in &with_events {
        // The program reports drops: every record comes with a dropped packet.
        assert_eq!(packet["action"], "drop", "{packet}");
        assert_eq!(packet["events"][0]["map"], "events", "{packet}");
        assert!(packet["events"][0]["data"].as_str().unwrap().len() > 16);
    }
    let maps: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&dump).unwrap()).unwrap();
    let listed = maps["events"].as_array().unwrap();
    assert_eq!(
        listed.len(),
        with_events
            .iter()
            .map(|p| p["events"].as_array().unwrap().len())
            .sum::<usize>()
    );
    assert_eq!(listed[0]["packet"], with_events[0]["index"]);
    assert_eq!(listed[0]["data"], with_events[0]["events"][0]["data"]);
    let recorded = std::fs::read_to_string(&expect).unwrap();
    assert!(recorded.contains("\"events\":[\"events "), "{recorded}");
    let check = bpfemu(&["replay", &obj, &cap, "--check", &expect]);
    assert!(check.status.success(), "{}", stderr(&check));
    // A changed record is caught.
    let first = with_events[0]["events"][0]["data"].as_str().unwrap();
    let changed = recorded.replacen(first, &format!("ff{}", &first[2..]), 1);
    assert_ne!(changed, recorded);
    std::fs::write(&expect, changed).unwrap();
    let check = bpfemu(&["replay", &obj, &cap, "--check", &expect]);
    assert_eq!(check.status.code(), Some(1), "{}", stderr(&check));
}

/// `--record-type MAP=TYPE` shows a ring buffer's records typed by a type of the object's BTF,
/// as bpftool shows map values (`"formatted"`), in `--json` and in `--dump-maps`; records
/// shorter than the type stay bytes only; a type or map the object lacks is one line, exit 2.
#[test]
fn ring_buffer_records_are_shown_typed_by_the_type_the_user_names() {
    let dir = Scratch::new("record-type");
    let obj = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/objects/record_events.o")
        .display()
        .to_string();
    let cap = example("pcap/normal.pcap");
    let dump = dir.path("maps.json");
    let typed = "records=struct record";
    let out = bpfemu(&[
        "replay",
        &obj,
        &cap,
        "--json",
        "--dump-maps",
        &dump,
        "--record-type",
        typed,
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    let first: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    let events = first["events"].as_array().unwrap();
    // The submitted record: its length, the salt, the first 6 bytes of the frame.
    let data = hex_bytes(events[0]["data"].as_str().unwrap());
    let formatted = &events[0]["formatted"];
    assert_eq!(
        formatted["len"],
        u32::from_le_bytes(data[0..4].try_into().unwrap()),
        "{first}"
    );
    assert_eq!(formatted["salt"], 0, "{first}");
    let head: Vec<u64> = data[8..14].iter().map(|&b| u64::from(b)).collect();
    assert_eq!(formatted["head"], serde_json::json!(head), "{first}");
    // The 8-byte records that follow are shorter than struct record: bytes only.
    assert!(events[1].get("formatted").is_none(), "{first}");
    let maps: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&dump).unwrap()).unwrap();
    assert_eq!(maps["records"][0]["formatted"], *formatted);

    for (wanted, says) in [
        ("records=struct nothing", "BTF has no struct nothing"),
        ("nomap=struct record", "has no map nomap"),
        ("salt=struct record", "map salt of"),
    ] {
        let out = bpfemu(&["replay", &obj, &cap, "--record-type", wanted]);
        assert_eq!(out.status.code(), Some(2), "{wanted}: {}", stderr(&out));
        let err = stderr(&out);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.contains(says) && err.contains("record_events.o"),
            "{err}"
        );
    }
}

fn hex_bytes(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}
