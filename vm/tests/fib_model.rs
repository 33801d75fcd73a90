//! The FIB model: file parsing, longest-prefix match, metrics, rules and every return path of
//! `fib_lookup`. (conformance/tests/fib_kernel.rs checks the same paths against the kernel.)

use bpfemu_vm::fib::{self, Fib, offsets};
use std::net::IpAddr;

const TOPO: &str = r#"{
  "interfaces": [
    {"ifindex": 1, "name": "lo", "mtu": 65536, "addrs": ["127.0.0.1/8", "::1/128"]},
    {"ifindex": 2, "name": "eth0", "mac": "02:00:00:00:00:02",
     "addrs": ["192.0.2.10/24", "192.0.2.11/24", "2001:db8:1::10/64"]},
    {"ifindex": 3, "name": "eth1", "mac": "02:00:00:00:00:03", "mtu": 1400,
     "addrs": ["198.51.100.1/24", "2001:db8:2::1/64"]},
    {"ifindex": 4, "name": "eth2", "forwarding": false, "addrs": ["203.0.113.1/24"]},
    {"ifindex": 5, "name": "down0", "up": false, "addrs": ["172.31.0.1/24"]}
  ],
  "routes": [
    {"dst": "10.0.0.0/8", "via": "192.0.2.1"},
    {"dst": "10.1.0.0/16", "via": "198.51.100.7", "metric": 20},
    {"dst": "10.1.0.0/16", "via": "192.0.2.1", "metric": 10},
    {"dst": "10.2.0.0/16", "via": "192.0.2.99"},
    {"dst": "10.3.0.0/16", "type": "blackhole"},
    {"dst": "10.4.0.0/16", "type": "unreachable"},
    {"dst": "10.5.0.0/16", "type": "prohibit"},
    {"dst": "10.6.0.0/16", "via": "192.0.2.1", "encap": true},
    {"dst": "10.7.0.0/16", "via": "192.0.2.1", "mtu": 1000, "mtu_lock": true},
    {"dst": "10.8.0.0/16", "via": "192.0.2.1", "src": "198.51.100.1"},
    {"dst": "10.9.0.0/16", "via": "172.31.0.9", "dev": "down0"},
    {"dst": "10.9.0.0/16", "via": "192.0.2.1", "metric": 5},
    {"dst": "10.20.0.0/16", "via": "198.51.100.7", "table": 100},
    {"dst": "2001:db8:10::/48", "via": "2001:db8:1::1"},
    {"dst": "2001:db8:11::/48", "type": "prohibit"},
    {"dst": "2001:db8:12::/48", "via": "2001:db8:2::2"}
  ],
  "neighbours": [
    {"ip": "192.0.2.1", "mac": "02:00:00:00:01:01", "dev": 2},
    {"ip": "198.51.100.7", "mac": "02:00:00:00:01:07", "dev": "eth1", "state": "stale"},
    {"ip": "192.0.2.99", "dev": 2, "state": "failed"},
    {"ip": "2001:db8:1::1", "mac": "02:00:00:00:06:01", "dev": 2},
    {"ip": "2001:db8:2::2", "mac": "02:00:00:00:06:02", "dev": 3}
  ],
  "rules": [
    {"family": "inet", "priority": 0, "table": "local"},
    {"family": "inet", "priority": 10, "fwmark": 7, "table": 100},
    {"family": "inet", "priority": 20, "to": "10.30.0.0/16", "action": "prohibit"},
    {"family": "inet", "priority": 32766, "table": "main"}
  ]
}"#;

fn topo() -> Fib {
    Fib::from_json_str("topo.json", TOPO).expect("valid topology")
}

fn params(ifindex: u32, dst: &str) -> [u8; 64] {
    let mut p = [0u8; 64];
    let dst: IpAddr = dst.parse().unwrap();
    match dst {
        IpAddr::V4(a) => {
            p[0] = fib::AF_INET;
            p[32..36].copy_from_slice(&a.octets());
        }
        IpAddr::V6(a) => {
            p[0] = fib::AF_INET6;
            p[32..48].copy_from_slice(&a.octets());
        }
    }
    p[8..12].copy_from_slice(&ifindex.to_ne_bytes());
    p[48..52].copy_from_slice(&[0xaa; 4]);
    p
}

fn run(fib: &Fib, p: &mut [u8; 64], flags: u32) -> i64 {
    fib::fib_lookup(fib, p, 64, flags, 2)
}

fn u32_at(p: &[u8; 64], off: usize) -> u32 {
    u32::from_ne_bytes(p[off..off + 4].try_into().unwrap())
}

fn u16_at(p: &[u8; 64], off: usize) -> u16 {
    u16::from_ne_bytes(p[off..off + 2].try_into().unwrap())
}

#[test]
fn success_writes_gateway_macs_ifindex_metric_and_mtu() {
    let fib = topo();
    let mut p = params(2, "10.1.2.3");
    assert_eq!(run(&fib, &mut p, 0), fib::BPF_FIB_LKUP_RET_SUCCESS);
    // 10.1.0.0/16 beats 10.0.0.0/8; metric 10 beats metric 20.
    assert_eq!(&p[32..36], &[192, 0, 2, 1]);
    assert_eq!(u32_at(&p, offsets::IFINDEX), 2);
    assert_eq!(u32_at(&p, offsets::RT_METRIC), 10);
    assert_eq!(&p[offsets::SMAC..offsets::SMAC + 6], &[2, 0, 0, 0, 0, 2]);
    assert_eq!(&p[offsets::DMAC..offsets::DMAC + 6], &[2, 0, 0, 0, 1, 1]);
    assert_eq!(u16_at(&p, offsets::MTU_RESULT), 1500);
    assert_eq!(&p[48..52], &[0; 4], "h_vlan_proto/TCI cleared");
}

#[test]
fn longest_prefix_then_metric_and_dead_nexthops_are_skipped() {
    let fib = topo();
    let mut p = params(2, "10.200.0.1");
    assert_eq!(run(&fib, &mut p, 0), 0);
    assert_eq!(u32_at(&p, offsets::RT_METRIC), 0, "the /8");
    // The metric-0 route of 10.9/16 leaves through a down interface: the metric-5 one wins.
    let mut p = params(2, "10.9.0.1");
    assert_eq!(run(&fib, &mut p, 0), 0);
    assert_eq!(u32_at(&p, offsets::RT_METRIC), 5);
    // OUTPUT through eth1: the eth0 routes are skipped, the metric-20 one via eth1 remains.
    let mut p = params(3, "10.1.2.3");
    assert_eq!(run(&fib, &mut p, fib::BPF_FIB_LOOKUP_OUTPUT), 0);
    assert_eq!(u32_at(&p, offsets::RT_METRIC), 20);
    assert_eq!(u32_at(&p, offsets::IFINDEX), 3);
    // Nothing else leaves through eth1 for 10.200/16: backtracking finds no route.
    let mut p = params(3, "10.200.0.1");
    assert_eq!(
        run(&fib, &mut p, fib::BPF_FIB_LOOKUP_OUTPUT),
        fib::BPF_FIB_LKUP_RET_NOT_FWDED
    );
}

#[test]
fn reject_routes_and_local_destinations() {
    let fib = topo();
    for (dst, want) in [
        ("10.3.0.1", fib::BPF_FIB_LKUP_RET_BLACKHOLE),
        ("10.4.0.1", fib::BPF_FIB_LKUP_RET_UNREACHABLE),
        ("10.5.0.1", fib::BPF_FIB_LKUP_RET_PROHIBIT),
        ("192.0.2.10", fib::BPF_FIB_LKUP_RET_NOT_FWDED), // local
        ("192.0.2.255", fib::BPF_FIB_LKUP_RET_NOT_FWDED), // broadcast
        ("8.8.8.8", fib::BPF_FIB_LKUP_RET_NOT_FWDED),    // no route
        ("10.30.0.1", fib::BPF_FIB_LKUP_RET_PROHIBIT),   // rule
        ("2001:db8:11::1", fib::BPF_FIB_LKUP_RET_PROHIBIT),
        ("fe80::1", fib::BPF_FIB_LKUP_RET_NOT_FWDED),
        ("2001:db8:1::10", fib::BPF_FIB_LKUP_RET_NOT_FWDED), // local
    ] {
        let mut p = params(2, dst);
        let before = p;
        assert_eq!(run(&fib, &mut p, 0), want, "{dst}");
        assert_eq!(p, before, "{dst}: nothing written");
    }
}

#[test]
fn neighbours_mtu_lwt_and_forwarding() {
    let fib = topo();
    let mut p = params(2, "10.2.0.1");
    assert_eq!(
        run(&fib, &mut p, 0),
        fib::BPF_FIB_LKUP_RET_NO_NEIGH,
        "failed entry"
    );
    assert_eq!(
        &p[32..36],
        &[192, 0, 2, 99],
        "the gateway is written before the neighbour lookup"
    );
    let mut p = params(2, "10.2.0.1");
    assert_eq!(run(&fib, &mut p, fib::BPF_FIB_LOOKUP_SKIP_NEIGH), 0);
    assert_eq!(&p[52..64], &[0; 12]);

    let mut p = params(2, "10.6.0.1");
    assert_eq!(run(&fib, &mut p, 0), fib::BPF_FIB_LKUP_RET_UNSUPP_LWT);

    let mut p = params(2, "10.7.0.1");
    p[6..8].copy_from_slice(&1001u16.to_ne_bytes());
    assert_eq!(
        run(&fib, &mut p, 0),
        fib::BPF_FIB_LKUP_RET_FRAG_NEEDED,
        "locked route MTU"
    );
    assert_eq!(u16_at(&p, offsets::MTU_RESULT), 1000);
    assert_eq!(u32_at(&p, offsets::IFINDEX), 2, "ifindex untouched");

    let mut p = params(2, "2001:db8:12::1");
    p[6..8].copy_from_slice(&1401u16.to_ne_bytes());
    assert_eq!(run(&fib, &mut p, 0), fib::BPF_FIB_LKUP_RET_FRAG_NEEDED);
    assert_eq!(u16_at(&p, offsets::MTU_RESULT), 1400);

    let mut p = params(4, "10.1.0.1");
    assert_eq!(run(&fib, &mut p, 0), fib::BPF_FIB_LKUP_RET_FWD_DISABLED);
    let mut p = params(42, "10.1.0.1");
    assert_eq!(run(&fib, &mut p, 0), -19);
}

#[test]
fn helper_argument_checks() {
    let fib = topo();
    let mut p = params(2, "10.1.0.1");
    assert_eq!(fib::fib_lookup(&fib, &mut p, 63, 0, 2), -22);
    assert_eq!(fib::fib_lookup(&fib, &mut p, 64, 1 << 6, 2), -22);
    assert_eq!(fib::fib_lookup(&fib, &mut p, 128, 0, 2), 0);
    let mut p = params(2, "10.1.0.1");
    p[0] = 3;
    assert_eq!(fib::fib_lookup(&fib, &mut p, 64, 0, 2), -97);
}

#[test]
fn tbid_mark_and_source_selection() {
    let fib = topo();
    let direct_tbid = fib::BPF_FIB_LOOKUP_DIRECT | fib::BPF_FIB_LOOKUP_TBID;
    let mut p = params(2, "10.20.0.1");
    p[48..52].copy_from_slice(&100u32.to_ne_bytes());
    assert_eq!(run(&fib, &mut p, direct_tbid), 0);
    assert_eq!(u32_at(&p, offsets::IFINDEX), 3);
    let mut p = params(2, "10.20.0.1");
    p[48..52].copy_from_slice(&77u32.to_ne_bytes());
    assert_eq!(
        run(&fib, &mut p, direct_tbid),
        fib::BPF_FIB_LKUP_RET_NOT_FWDED
    );
    assert_eq!(
        u32_at(&p, offsets::TBID),
        0,
        "tbid is zeroed even on failure"
    );

    let mut p = params(2, "10.20.0.1");
    assert_eq!(run(&fib, &mut p, 0), 0, "main: 10/8");
    assert_eq!(u32_at(&p, offsets::IFINDEX), 2);
    let mut p = params(2, "10.20.0.1");
    p[52..56].copy_from_slice(&7u32.to_ne_bytes());
    assert_eq!(
        run(&fib, &mut p, fib::BPF_FIB_LOOKUP_MARK),
        0,
        "fwmark 7 -> table 100"
    );
    assert_eq!(u32_at(&p, offsets::IFINDEX), 3);

    // Connected route's prefsrc, route prefsrc, inet_select_addr for a gateway route.
    let mut p = params(2, "10.1.0.1");
    assert_eq!(run(&fib, &mut p, fib::BPF_FIB_LOOKUP_SRC), 0);
    assert_eq!(
        &p[16..20],
        &[192, 0, 2, 10],
        "primary address in the gateway's subnet"
    );
    let mut p = params(2, "10.8.0.1");
    assert_eq!(run(&fib, &mut p, fib::BPF_FIB_LOOKUP_SRC), 0);
    assert_eq!(&p[16..20], &[198, 51, 100, 1]);
    let mut p = params(2, "2001:db8:12::1");
    assert_eq!(run(&fib, &mut p, fib::BPF_FIB_LOOKUP_SRC), 0);
    let want: std::net::Ipv6Addr = "2001:db8:2::1".parse().unwrap();
    assert_eq!(
        &p[16..32],
        &want.octets(),
        "RFC 6724: the outgoing interface's address"
    );
}

#[test]
fn ipv4_route_with_ipv6_gateway_switches_family() {
    let fib = Fib::from_json_str(
        "v4v6.json",
        r#"{"interfaces": [{"ifindex": 2, "name": "eth0", "addrs": ["2001:db8::1/64"]}],
            "routes": [{"dst": "10.0.0.0/8", "via": "2001:db8::2", "dev": 2}],
            "neighbours": [{"ip": "2001:db8::2", "mac": "02:00:00:00:00:09", "dev": 2}]}"#,
    )
    .unwrap();
    let mut p = params(2, "10.1.1.1");
    assert_eq!(run(&fib, &mut p, 0), 0);
    assert_eq!(p[0], fib::AF_INET6);
    let gw: std::net::Ipv6Addr = "2001:db8::2".parse().unwrap();
    assert_eq!(&p[32..48], &gw.octets());
}

#[test]
fn parse_errors_name_the_file_the_entry_and_the_field() {
    let cases = [
        (
            r#"{"routes": [{"dst": "10.0.0.0/8", "via": "10.0.0"}]}"#,
            "f.json: routes[0].via: invalid IP address \"10.0.0\"",
        ),
        (
            r#"{"interfaces": [{"ifindex": 2}, {"ifindex": 3, "mac": "zz"}]}"#,
            "f.json: interfaces[1].mac: invalid MAC address \"zz\"",
        ),
        (
            r#"{"routes": [{"dst": "10.0.0.0/8", "gatway": "1.2.3.4"}]}"#,
            "f.json: routes[0].gatway: unknown field",
        ),
        (
            r#"{"neighbours": [{"ip": "1.2.3.4", "mac": "02:00:00:00:00:01", "dev": 9}]}"#,
            "f.json: neighbours[0].dev: no interface with ifindex 9",
        ),
        (
            r#"{"routes": [{"dst": "10.0.0.0/33", "type": "blackhole"}]}"#,
            "f.json: routes[0].dst: invalid prefix",
        ),
        (
            r#"{"rules": [{"priority": 5}]}"#,
            "f.json: rules[0].table: missing",
        ),
        (
            r#"{"routes": [{"dst": "10.0.0.0/8", "via": "10.9.9.9"}]}"#,
            "f.json: routes[0].via: no interface has an address",
        ),
        (r#"{"routes": 5}"#, "f.json: routes: expected a list"),
        (r#"{"routes": ["#, "f.json: invalid JSON"),
    ];
    for (text, want) in cases {
        let err = Fib::from_json_str("f.json", text).unwrap_err().to_string();
        assert!(
            err.starts_with(want),
            "{text}\n  got:  {err}\n  want: {want}..."
        );
    }
    let err = Fib::from_json_file("/nonexistent/fib.json".as_ref())
        .unwrap_err()
        .to_string();
    assert!(err.starts_with("/nonexistent/fib.json: "), "{err}");
}

#[test]
fn iproute_json_is_read() {
    let links = r#"[{"ifindex":1,"ifname":"lo","flags":["LOOPBACK","UP"],"mtu":65536,"address":"00:00:00:00:00:00","addr_info":[{"family":"inet","local":"127.0.0.1","prefixlen":8,"scope":"host"}]},
                    {"ifindex":3,"ifname":"va","flags":["BROADCAST","UP"],"mtu":1500,"address":"12:17:78:07:16:33","addr_info":[{"family":"inet","local":"10.1.0.1","prefixlen":24,"scope":"global"},{"family":"inet","local":"10.1.0.9","prefixlen":24,"scope":"global","secondary":true}]}]"#;
    let routes_v4 = r#"[{"dst":"10.1.0.0/24","dev":"va","protocol":"kernel","scope":"link","prefsrc":"10.1.0.1","flags":[]},
                        {"dst":"10.9.0.0/16","gateway":"10.1.0.2","dev":"va","metric":5,"flags":[]},
                        {"type":"blackhole","dst":"10.8.0.0/16","flags":[]},
                        {"dst":"10.6.0.0/16","via":{"family":"inet6","host":"2001:db8:1::2"},"dev":"va","flags":[]},
                        {"type":"local","dst":"10.1.0.1","dev":"va","table":"local","protocol":"kernel","scope":"host","prefsrc":"10.1.0.1","flags":[]}]"#;
    let neighbours = r#"[{"dst":"10.1.0.2","dev":"va","lladdr":"02:00:00:00:00:02","state":["PERMANENT"]},{"dst":"10.1.0.6","dev":"va","state":["INCOMPLETE"]}]"#;
    let rules_v4 = r#"[{"priority":0,"src":"all","table":"local"},{"priority":100,"src":"all","fwmark":"0x5","fwmask":"0xff","table":"100"},{"priority":32766,"src":"all","table":"main"},{"priority":32767,"src":"all","table":"default"}]"#;
    let netconf = r#"[{"family":"inet","interface":"va","forwarding":true},{"family":"inet6","interface":"va","forwarding":false}]"#;
    let fib = Fib::from_iproute_json(&fib::IprouteJson {
        links,
        routes_v4,
        routes_v6: "[]",
        neighbours,
        rules_v4: Some(rules_v4),
        rules_v6: None,
        netconf: Some(netconf),
    })
    .unwrap();
    assert_eq!(fib.interfaces.len(), 2);
    let va = fib.interface(3).unwrap();
    assert!(va.forwarding_v4 && !va.forwarding_v6);
    assert!(va.addrs[1].secondary);
    assert_eq!(fib.routes.len(), 5);
    assert_eq!(fib.routes[1].metric, 5);
    let rules = fib.rules_v4.as_ref().expect("custom rules");
    assert_eq!((rules[1].fwmark, rules[1].fwmask), (5, 0xff));
    assert!(fib.rules_v6.is_none());
    assert!(!fib.neighbours[1].state.is_valid());

    let mut p = params(3, "10.9.1.1");
    assert_eq!(run(&fib, &mut p, fib::BPF_FIB_LOOKUP_SRC), 0);
    assert_eq!(&p[16..20], &[10, 1, 0, 1]);
    assert_eq!(&p[58..64], &[2, 0, 0, 0, 0, 2]);

    let bad = Fib::from_iproute_json(&fib::IprouteJson {
        links,
        routes_v4: r#"[{"dst":"10.9.0.0/16","gateway":"10.1.0.2","dev":"nope"}]"#,
        routes_v6: "[]",
        neighbours: "[]",
        ..Default::default()
    })
    .unwrap_err()
    .to_string();
    assert!(
        bad.starts_with(
            "ip -j -4 route show table all: routes[0].dev: no interface named \"nope\""
        ),
        "{bad}"
    );
}
