//! The socket lookups against the kernel: `tests/data/sockets/sk_lookup.o` looks up the
//! tuple of each packet (`bpf_sk_lookup_tcp`, `bpf_sk_lookup_udp`, `bpf_skc_lookup_tcp`, with
//! good and bad sizes, flags and namespace ids), writes every field of the socket found
//! into a map and the packet, and asks `bpf_tcp_check_syncookie` about the segment. `bpfemu::diff::Session` runs it with a `--sockets` table: bpfemu
//! searches the table, the kernel the same sockets opened for real (listeners, accepted and
//! connecting ends of TCP connections, bound and connected UDP sockets, IPv4, IPv6,
//! dual-stack and IPv4-mapped) in the private namespace whose loopback is the test device.
//! The namespace's loopback is up (a `--fib` file), as connections need.
//! Per packet the return value and `data_out` must be equal, and at the end every map entry.
//!
//! Skipped with a message when bpf() is out of reach, unless `BPFEMU_REQUIRE_KERNEL=1`.

use bpfemu::diff::{DiffOptions, Outcome, Session, format_map, format_packet};
use bpfemu_conformance::libbpf::{XdpMd, kernel_or_skip};
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The namespace: its loopback up, with its usual addresses (connections need it).
const LOOPBACK_UP: &str = r#"{"interfaces": [
    {"ifindex": 1, "name": "lo", "mtu": 65536, "addrs": ["127.0.0.1/8", "::1/128"]},
    {"ifindex": 2, "name": "eth0", "mac": "02:00:00:00:00:01", "addrs": ["192.0.2.10/24"]}
]}"#;

/// The sockets both sides search.
const TABLE: &str = r#"{"sockets": [
    {"protocol": "tcp", "state": "listen", "local": "0.0.0.0:80"},
    {"protocol": "tcp", "state": "listen", "local": "[::]:8081"},
    {"protocol": "tcp", "state": "listen", "local": "[::1]:443"},
    {"protocol": "tcp", "state": "listen", "local": "127.0.0.1:8083", "mark": 5, "priority": 3},
    {"protocol": "tcp", "state": "listen", "local": "[::]:8082", "v6only": true},
    {"protocol": "tcp", "state": "listen", "local": "127.0.0.1:9090", "dev": 1},
    {"protocol": "tcp", "state": "established", "local": "127.0.0.1:80",
     "remote": "127.0.0.1:40000", "accepted": true, "mark": 11},
    {"protocol": "tcp", "state": "established", "local": "127.0.0.1:40000",
     "remote": "127.0.0.1:80", "priority": 2},
    {"protocol": "tcp", "state": "established", "local": "[::1]:443",
     "remote": "[::1]:40001", "accepted": true},
    {"protocol": "tcp", "state": "established", "local": "[::1]:40001", "remote": "[::1]:443"},
    {"protocol": "tcp", "state": "established", "local": "[::ffff:127.0.0.2]:8081",
     "remote": "[::ffff:127.0.0.3]:40002", "accepted": true},
    {"protocol": "tcp", "state": "established", "local": "127.0.0.3:40002",
     "remote": "127.0.0.2:8081"},
    {"protocol": "tcp", "state": "established", "local": "[::1]:7000",
     "remote": "[::1]:40003", "accepted": true},
    {"protocol": "tcp", "state": "established", "local": "[::1]:40003", "remote": "[::1]:7000"},
    {"protocol": "udp", "local": "127.0.0.1:53"},
    {"protocol": "udp", "local": "0.0.0.0:53", "mark": 9},
    {"protocol": "udp", "local": "127.0.0.1:5353", "remote": "127.0.0.1:9999"},
    {"protocol": "udp", "local": "127.0.0.1:5354", "remote": "127.0.0.5:9999"},
    {"protocol": "udp", "local": "[::1]:53"},
    {"protocol": "udp", "local": "[::]:54"},
    {"protocol": "udp", "local": "[::1]:5353", "remote": "[::1]:9999", "dev": 1},
    {"protocol": "udp", "local": "[::ffff:127.0.0.1]:5355"},
    {"protocol": "udp", "local": "127.0.0.1:7777", "mark": 1},
    {"protocol": "udp", "local": "127.0.0.1:7777", "mark": 2},
    {"protocol": "udp", "local": "127.0.0.1:7778", "dev": 2}
]}"#;

const TCP: u8 = 6;
const UDP: u8 = 17;

/// An Ethernet frame from `src` to `dst` (TCP with `tcp_flags`, or UDP), whose source MAC's
/// last byte is the program's mode.
fn frame(proto: u8, src: &str, dst: &str, mode: u8, tcp_flags: u8) -> Vec<u8> {
    let (src, dst): (SocketAddr, SocketAddr) = (src.parse().unwrap(), dst.parse().unwrap());
    let mut out = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, mode];
    let l4_len = if proto == TCP { 20 } else { 8 };
    match (src.ip(), dst.ip()) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            out.extend_from_slice(&[0x08, 0x00, 0x45, 0, 0, 20 + l4_len, 0, 0, 0, 0, 64, proto]);
            out.extend_from_slice(&[0, 0]);
            out.extend_from_slice(&s.octets());
            out.extend_from_slice(&d.octets());
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            out.extend_from_slice(&[0x86, 0xdd, 0x60, 0, 0, 0, 0, l4_len, proto, 64]);
            out.extend_from_slice(&s.octets());
            out.extend_from_slice(&d.octets());
        }
        _ => unreachable!("one family"),
    }
    out.extend_from_slice(&src.port().to_be_bytes());
    out.extend_from_slice(&dst.port().to_be_bytes());
    if proto == TCP {
        // seq, ack, data offset 5, flags, window, checksum, urgent
        out.extend_from_slice(&[
            0, 0, 0, 1, 0, 0, 0, 2, 0x50, tcp_flags, 0xff, 0xff, 0, 0, 0, 0,
        ]);
    } else {
        out.extend_from_slice(&[0, 8, 0, 0]);
    }
    out
}

/// The tuples looked up: hits of every kind of socket, and misses beside them.
const TUPLES: &[(u8, &str, &str)] = &[
    // established before listener; the other end of the connection; a listener's wildcard
    (TCP, "127.0.0.1:40000", "127.0.0.1:80"),
    (TCP, "127.0.0.1:80", "127.0.0.1:40000"),
    (TCP, "127.0.0.9:1234", "127.0.0.1:80"),
    (TCP, "127.0.0.9:1234", "127.0.0.7:80"),
    // a bound IPv4 listener; a dual-stack one for IPv4 and IPv6
    (TCP, "127.0.0.9:1234", "127.0.0.1:8083"),
    (TCP, "127.0.0.9:1234", "127.0.0.2:8083"),
    (TCP, "127.0.0.9:1234", "127.0.0.1:8081"),
    (TCP, "127.0.0.9:1234", "127.0.0.4:8081"),
    (TCP, "[::1]:1234", "[::1]:8081"),
    // IPv6-only listeners never answer IPv4
    (TCP, "[::1]:1234", "[::1]:443"),
    (TCP, "127.0.0.9:1234", "127.0.0.1:443"),
    (TCP, "127.0.0.9:1234", "127.0.0.1:8082"),
    (TCP, "[::1]:1234", "[::1]:8082"),
    // a listener bound to the loopback device
    (TCP, "127.0.0.9:1234", "127.0.0.1:9090"),
    // IPv6 connections; IPv4-mapped accepted end found by IPv4 tuples only
    (TCP, "[::1]:40001", "[::1]:443"),
    (TCP, "[::1]:443", "[::1]:40001"),
    (TCP, "127.0.0.3:40002", "127.0.0.2:8081"),
    (TCP, "127.0.0.2:8081", "127.0.0.3:40002"),
    (TCP, "[::ffff:127.0.0.3]:40002", "[::ffff:127.0.0.2]:8081"),
    (TCP, "[::1]:40003", "[::1]:7000"),
    (TCP, "[::1]:7000", "[::1]:40003"),
    (TCP, "127.0.0.9:1234", "127.0.0.6:7000"),
    // misses
    (TCP, "127.0.0.9:1234", "127.0.0.1:81"),
    (TCP, "[::1]:1234", "[::1]:80"),
    // UDP: bound before wildcard, connected ones, dual-stack, IPv4-mapped
    (UDP, "127.0.0.9:1234", "127.0.0.1:53"),
    (UDP, "127.0.0.9:1234", "127.0.0.8:53"),
    (UDP, "127.0.0.1:9999", "127.0.0.1:5353"),
    (UDP, "127.0.0.1:9998", "127.0.0.1:5353"),
    (UDP, "127.0.0.5:9999", "127.0.0.1:5354"),
    (UDP, "127.0.0.6:9999", "127.0.0.1:5354"),
    (UDP, "[::1]:1234", "[::1]:53"),
    (UDP, "[::1]:1234", "[::1]:54"),
    (UDP, "127.0.0.9:1234", "127.0.0.1:54"),
    (UDP, "[::1]:9999", "[::1]:5353"),
    (UDP, "[::2]:9999", "[::1]:5353"),
    (UDP, "127.0.0.9:1234", "127.0.0.1:5355"),
    (UDP, "[::1]:1234", "[::ffff:127.0.0.1]:5355"),
    (UDP, "127.0.0.9:1234", "127.0.0.1:80"),
    // equal scores: the socket bound last; a socket bound to another device
    (UDP, "127.0.0.9:1234", "127.0.0.1:7777"),
    (UDP, "127.0.0.9:1234", "127.0.0.1:7778"),
];

/// The program's modes (the lookups with good and bad arguments; then
/// `bpf_tcp_check_syncookie` with good, short IP and short TCP headers), each with the TCP
/// flags of the segments: ACK for the lookups; for the cookie check a bare ACK, SYN, SYN-ACK,
/// RST-ACK and no flag.
fn runs() -> Vec<(u8, u8)> {
    let lookups = (0..=5).map(|mode| (mode, 0x10));
    let cookies = (6..=8).flat_map(|mode| [0x10, 0x02, 0x12, 0x14, 0x00].map(|f| (mode, f)));
    lookups.chain(cookies).collect()
}

/// The devices packets arrive on: test_run's default (the loopback), then `eth0` (through
/// an `xdp_md`), where the sockets bound to the loopback are not found and the one bound to
/// `eth0` is.
const INGRESS: [Option<u32>; 2] = [None, Some(2)];

#[test]
fn socket_lookups_match_kernel_with_the_same_sockets() {
    if !kernel_or_skip("socket_lookups_match_kernel_with_the_same_sockets") {
        return;
    }
    let dir = std::env::temp_dir().join(format!("bpfemu-sockets-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let table = dir.join("sockets.json");
    std::fs::write(&table, TABLE).unwrap();
    let fib = dir.join("lo.json");
    std::fs::write(&fib, LOOPBACK_UP).unwrap();
    let mut opts = DiffOptions::new(root().join("tests/data/sockets/sk_lookup.o"));
    opts.sockets = Some(table);
    opts.fib = Some(fib);
    let mut session = Session::open(&opts).unwrap_or_else(|e| panic!("{e}"));
    let mut failures = Vec::new();
    let mut found = 0;
    let mut index = 0;
    let all = INGRESS
        .iter()
        .flat_map(|&ingress| runs().into_iter().map(move |r| (ingress, r)));
    for (ingress, (mode, tcp_flags)) in all {
        for &(proto, src, dst) in TUPLES {
            let packet = frame(proto, src, dst, mode, tcp_flags);
            let cmp = match ingress {
                None => session.run_packet(index, &packet),
                Some(dev) => {
                    let md = XdpMd::new(packet.len(), 0, dev, 0);
                    session.run_packet_ctx(index, &packet, Some(&md))
                }
            };
            index += 1;
            if let Outcome::Ran { retval: 2, .. } = cmp.kernel {
                found += 1;
            }
            if cmp.is_notable() {
                failures.push(format!(
                    "ingress {ingress:?}, mode {mode}, TCP flags {tcp_flags:#x}, {proto} {src} -> {dst}: {}",
                    format_packet(&cmp)
                ));
            }
        }
        // `seen` holds 64 slots: compare before they are written again.
        for report in session.compare_maps().unwrap() {
            if !report.mismatches.is_empty() || !report.not_compared_fields.is_empty() {
                failures.push(format!(
                    "ingress {ingress:?}, mode {mode}, TCP flags {tcp_flags:#x}: {}",
                    format_map(&report)
                ));
            }
        }
    }
    drop(session);
    std::fs::remove_dir_all(&dir).unwrap();
    eprintln!("sockets: {index} lookups, {found} found a socket in the kernel");
    assert!(found >= 40, "too few lookups found a socket: {found}");
    assert!(
        failures.is_empty(),
        "{} differences from the kernel:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
