//! The router corpus program (`examples/xdp/router.c`, which forwards with `bpf_fib_lookup`
//! and `bpf_redirect_map`) against the kernel, over the routing state of
//! `examples/fib/router.json`: bpfemu answers from its FIB model, the kernel from a private
//! network namespace built from the same file (`bpfemu_kernel::netns::Netns::from_fib`:
//! the file's interfaces at its ifindexes, so the devmap ports of `examples/maps/router.json`
//! are real devices there). `bpfemu::diff::Session` loads `router.vN.o` through libbpf from
//! this thread after entering the namespace and sets the devmap on both sides.
//!
//! Every bundled capture runs through both at v2, v3 and v4, with three contexts: none
//! (test_run's default, ingress on the namespace's loopback), ingress `eth0` (ifindex 2, the
//! clients' side) and ingress `eth1` with 8 bytes of metadata in front of each packet; per
//! packet the return value and `data_out` must be equal, and at the end the per-CPU action
//! counters.
//!
//! Skipped with a message when bpf() is out of reach, unless `BPFEMU_REQUIRE_KERNEL=1`.

use bpfemu::diff::{DiffOptions, Outcome, Session, format_map, format_packet};
use bpfemu::pcap::PcapReader;
use bpfemu_conformance::libbpf::{XdpMd, kernel_or_skip};
use std::collections::BTreeMap;
use std::path::PathBuf;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn captures() -> Vec<(String, Vec<Vec<u8>>)> {
    let mut caps: Vec<PathBuf> = std::fs::read_dir(root().join("examples/pcap"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "pcap"))
        .collect();
    caps.sort();
    caps.into_iter()
        .map(|cap| {
            let packets = PcapReader::open(&cap)
                .unwrap()
                .map(|p| p.unwrap().data)
                .collect();
            (
                cap.file_name().unwrap().to_string_lossy().into_owned(),
                packets,
            )
        })
        .collect()
}

/// How packets enter: a label, the ingress ifindex and the metadata length (`None`: no ctx).
const CONTEXTS: &[(&str, Option<(u32, u32)>)] = &[
    ("no ctx (loopback)", None),
    ("ingress eth0", Some((2, 0))),
    ("ingress eth1, 8 bytes of metadata", Some((3, 8))),
];

#[test]
fn router_matches_kernel_in_a_namespace_built_from_its_fib() {
    if !kernel_or_skip("router_matches_kernel_in_a_namespace_built_from_its_fib") {
        return;
    }
    let captures = captures();
    let maps: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("examples/maps/router.json")).unwrap(),
    )
    .unwrap();
    let mut failures = Vec::new();
    let mut total = 0;
    for level in ["v2", "v3", "v4"] {
        for &(label, ctx) in CONTEXTS {
            let mut opts =
                DiffOptions::new(root().join(format!("examples/xdp/build/router.{level}.o")));
            opts.fib = Some(root().join("examples/fib/router.json"));
            let mut session = Session::open(&opts).unwrap_or_else(|e| panic!("{level}: {e}"));
            session.set_maps_json(&maps).unwrap();
            let mut retvals: BTreeMap<u32, usize> = BTreeMap::new();
            for (cap, packets) in &captures {
                for (i, packet) in packets.iter().enumerate() {
                    let cmp = match ctx {
                        None => session.run_packet(i, packet),
                        Some((ingress, meta_len)) => {
                            let mut input = vec![0xa5u8; meta_len as usize];
                            input.extend_from_slice(packet);
                            let md = XdpMd::new(input.len(), meta_len, ingress, 0);
                            session.run_packet_ctx(i, &input, Some(&md))
                        }
                    };
                    if let Outcome::Ran { retval, .. } = cmp.kernel {
                        *retvals.entry(retval).or_default() += 1;
                    }
                    if cmp.is_notable() {
                        failures.push(format!("{level} {label} {cap}: {}", format_packet(&cmp)));
                    }
                    total += 1;
                }
            }
            for report in session.compare_maps().unwrap() {
                if !report.mismatches.is_empty() || !report.not_compared_fields.is_empty() {
                    failures.push(format!("{level} {label}: {}", format_map(&report)));
                }
            }
            eprintln!("router.{level}.o, {label}: kernel return values {retvals:?}");
            // The forwarding paths are all taken: redirect, drop (blackhole/unreachable), pass.
            for action in [1, 2, 4] {
                assert!(
                    retvals.contains_key(&action),
                    "{level} {label}: no packet got action {action}"
                );
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} differences from the kernel:\n{}",
        failures.len(),
        failures.join("\n")
    );
    eprintln!("router: {total} packet runs equal to the kernel's");
}
