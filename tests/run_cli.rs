//! `bpfemu run`: one packet through a program, as `bpftool prog run` runs it; its tcpdump
//! line against the real tcpdump, and the layer builder's lengths and checksums against
//! tcpdump -vv, which flags bad ones.

#[allow(dead_code)]
mod cli_support;

use cli_support::{Scratch, assert_exit, bpfemu, example, root, stderr, stdout};
use serde_json::{Value, json};
use std::process::Command;

fn build(spec: Value) -> Vec<u8> {
    bpfemu::layers::build::build(spec.as_object().unwrap()).unwrap()
}

/// Frames of every kind the builder and the tcpdump line know, on ports tcpdump does not
/// decode further.
fn frames() -> Vec<Vec<u8>> {
    [
        json!({"ipv4": {}, "udp": {"sport": 30000, "dport": 31000}, "payload_text": "hello"}),
        json!({"ipv4": {"ttl": 3, "tos": 4}, "tcp": {"sport": 30000, "dport": 31000, "seq": 7}}),
        json!({"ipv4": {}, "tcp": {"sport": 30000, "dport": 31000, "flags": "PA", "seq": 7, "ack": 9}, "payload_text": "data"}),
        json!({"ipv4": {}, "tcp": {"sport": 30000, "dport": 31000, "flags": "R"}}),
        json!({"ipv4": {}, "icmp": {"id": 3, "seq": 4}, "payload_text": "12345678"}),
        json!({"ipv4": {}, "icmp": {"type": 0, "id": 3, "seq": 4}}),
        json!({"ipv6": {}, "udp": {"sport": 30000, "dport": 31000}, "payload_text": "zz"}),
        json!({"ipv6": {"hlim": 9}, "tcp": {"sport": 30000, "dport": 31000, "flags": "SA", "seq": 1, "ack": 2}}),
        json!({"ipv6": {}, "icmpv6": {"id": 1, "seq": 2}}),
        json!({"ipv6": {"ext": [{"kind": "hop"}]}, "udp": {"sport": 30000, "dport": 31000}}),
        json!({"ipv6": {"ext": [{"kind": "fragment", "id": 7}]}, "udp": {"sport": 30000, "dport": 31000}}),
        json!({"ipv6": {"ext": [{"kind": "dstopts", "data": "01020000"}]}, "icmpv6": {}}),
        json!({"vlan": {"vid": 10, "pcp": 3}, "ipv4": {}, "udp": {"sport": 30000, "dport": 31000}}),
        json!({"vlan": {"vid": 100}, "vlan2": {"vid": 10}, "ipv4": {}, "udp": {"sport": 30000, "dport": 31000}}),
    ]
    .into_iter()
    .map(build)
    .collect()
}

/// What tcpdump prints for `frame` alone, with `flags`.
fn tcpdump(dir: &Scratch, frame: &[u8], flags: &[&str]) -> String {
    let pcap = dir.path("one.pcap");
    let mut w = bpfemu::pcap::PcapWriter::create(std::path::Path::new(&pcap), false).unwrap();
    w.write(0, frame).unwrap();
    w.finish().unwrap();
    let out = Command::new("tcpdump")
        .args(flags)
        .args(["-r", &pcap])
        .output()
        .expect("tcpdump is installed (apt-get install tcpdump)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn the_dissection_line_is_tcpdumps() {
    let dir = Scratch::new("run-tcpdump");
    let pass = example("xdp/build/pass.v3.o");
    for frame in frames() {
        let hex = bpfemu::replay::hex(&frame);
        let out = bpfemu(&["run", &pass, "--data", &hex, "--json"]);
        assert_exit(&out, 0);
        let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
        let theirs = tcpdump(&dir, &frame, &["-n", "-e", "-t"]);
        assert_eq!(
            doc["tcpdump"].as_str().unwrap(),
            theirs.trim_end(),
            "frame {hex}"
        );
    }
}

#[test]
fn built_lengths_and_checksums_are_right_by_tcpdump() {
    let dir = Scratch::new("run-checksums");
    for frame in frames() {
        let text = tcpdump(&dir, &frame, &["-n", "-vv"]);
        for bad in ["incorrect", "bad ", "wrong", "truncated", "[|"] {
            assert!(!text.contains(bad), "{bad}: {text}");
        }
        if text.contains("UDP, length") && !text.contains("frag (") {
            assert!(text.contains("[udp sum ok]"), "{text}");
        }
        if text.contains("Flags [") {
            assert!(text.contains("(correct)"), "{text}");
        }
    }
    // The check can fail: a checksum given on purpose is kept, and tcpdump flags it.
    let wrong =
        build(json!({"ipv4": {}, "udp": {"sport": 30000, "dport": 31000, "checksum": "0x1234"}}));
    assert!(tcpdump(&dir, &wrong, &["-n", "-vv"]).contains("[bad udp cksum 0x1234 -> "));
    let wrong = build(json!({"ipv4": {}, "tcp": {"sport": 30000, "dport": 31000, "checksum": 5}}));
    assert!(tcpdump(&dir, &wrong, &["-n", "-vv"]).contains("cksum 0x0005 (incorrect -> "));
    let wrong = build(json!({"ipv6": {}, "icmpv6": {"checksum": 5}}));
    assert!(tcpdump(&dir, &wrong, &["-n", "-vv"]).contains("[bad icmp6 cksum 0x0005 -> "));
    let wrong = build(json!({"ipv4": {"checksum": 7}, "tcp": {}}));
    assert!(tcpdump(&dir, &wrong, &["-n", "-vv"]).contains("bad cksum"));
    let correct = build(json!({"ipv4": {}, "tcp": {"sport": 30000, "dport": 31000}}));
    assert!(tcpdump(&dir, &correct, &["-n", "-vv"]).contains("(correct)"));
}

#[test]
fn one_packet_shows_verdict_packet_maps_and_printk() {
    let frame = build(json!({"ipv4": {"ttl": 17}, "udp": {"sport": 30000, "dport": 31000}}));
    let hex = bpfemu::replay::hex(&frame);
    let out = bpfemu(&["run", &example("xdp/build/reflector.v3.o"), "--data", &hex]);
    assert_exit(&out, 0);
    let text = stdout(&out);
    let mut swapped = frame.clone();
    swapped[..6].copy_from_slice(&frame[6..12]);
    swapped[6..12].copy_from_slice(&frame[..6]);
    assert!(
        text.starts_with("action: tx (retval 3)\npacket: 42 bytes\n"),
        "{text}"
    );
    assert!(
        text.contains(&format!("  {}\n", bpfemu::replay::hex(&swapped))),
        "{text}"
    );
    assert!(
        text.contains("  02:00:00:00:00:0b > 02:00:00:00:00:0a, ethertype IPv4"),
        "{text}"
    );
    assert!(
        text.contains("map proto_count: now {\"key\":17,\"values\":[{\"cpu\":0,\"value\":1}]}"),
        "{text}"
    );

    // --repeat runs it again over the same maps; @FILE reads raw bytes.
    let dir = Scratch::new("run-repeat");
    let file = dir.path("frame.bin");
    std::fs::write(&file, &frame).unwrap();
    let out = bpfemu(&[
        "run",
        &example("xdp/build/trace_printk.v3.o"),
        "--data",
        &format!("@{file}"),
        "--repeat",
        "3",
        "--json",
    ]);
    assert_exit(&out, 0);
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["action"], "pass");
    assert_eq!(doc["printk"], json!(["ipv4 proto 17 len 28 ttl 17"]));
    assert_eq!(
        doc["maps"][0]["entry"]["value"][".bss"][0]["frames_seen"],
        3
    );
}

#[test]
fn a_rejected_program_and_bad_data_are_refused() {
    let object = root()
        .join("tests/data/verify/unchecked_read.o")
        .display()
        .to_string();
    let out = bpfemu(&[
        "run",
        &object,
        "--prog",
        "xdp_unchecked",
        "--data",
        "02000000000b02000000000a0800",
    ]);
    assert_exit(&out, 1);
    assert!(
        stderr(&out).contains("R1 offset is outside of the packet"),
        "{}",
        stderr(&out)
    );
    let pass = example("xdp/build/pass.v3.o");
    let out = bpfemu(&["run", &pass, "--data", "0g"]);
    assert_exit(&out, 2);
    assert!(
        stderr(&out).contains("--data: `0g` at byte 0 is not hex"),
        "{}",
        stderr(&out)
    );
    let out = bpfemu(&["run", &pass, "--data", "@/nonexistent/frame"]);
    assert_exit(&out, 2);
    // A frame the kernel's test run refuses (shorter than Ethernet): said, exit 1.
    let out = bpfemu(&["run", &pass, "--data", "0011"]);
    assert_exit(&out, 1);
    assert!(
        stderr(&out).contains("shorter than an Ethernet header"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn ring_buffer_records_are_shown() {
    let syn = build(json!({"ipv4": {}, "tcp": {"sport": 30000, "dport": 23, "flags": "S"}}));
    let out = bpfemu(&[
        "run",
        &example("xdp/build/ringbuf_events.v3.o"),
        "--maps",
        &example("maps/ringbuf_events.json"),
        "--data",
        &bpfemu::replay::hex(&syn),
    ]);
    assert_exit(&out, 0);
    let text = stdout(&out);
    assert!(text.starts_with("action: drop (retval 1)\n"), "{text}");
    // type 1, 54 bytes captured of 54, ifindex 1, queue 0, the clock (0), then the frame.
    let record = format!(
        "record: events 010036003600000001000000000000000000000000000000{}",
        bpfemu::replay::hex(&syn)
    );
    assert!(text.contains(&record), "{text}");
}

/// bpfemu's runtime has no arena memory: a program of an object with an arena is refused in
/// one line that says so, rather than run with arena accesses it cannot honour.
#[test]
fn an_object_with_an_arena_is_refused_in_one_line() {
    let object = root()
        .join("tests/data/verifier/arena_globals.o")
        .display()
        .to_string();
    let out = bpfemu(&[
        "run",
        &object,
        "--prog",
        "arena_global_counter",
        "--data",
        "02000000000b02000000000a0800",
    ]);
    assert_exit(&out, 2);
    let err = stderr(&out);
    assert!(
        err.contains("arena maps are not implemented by bpfemu's runtime")
            && err.lines().count() == 1,
        "{err}"
    );
}
