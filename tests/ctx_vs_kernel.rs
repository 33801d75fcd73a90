//! BPF_PROG_TEST_RUN with a ctx (`struct xdp_md`: metadata length, ingress device, rx queue)
//! against bpfemu's `XdpRuntime::run_ctx`: `adjust_meta`, `xsk_dispatch` (reads
//! `rx_queue_index`) and `reflector` at v2/v3/v4, loaded by libbpf from this thread inside a
//! private network namespace whose devices bpfemu is told about (`XdpConfig::rx_devices`):
//! the loopback (ifindex 1, one queue), a veth `v0` at ifindex 5 with 4 rx queues and its peer
//! `v1` at ifindex 6 with one.
//!
//! Every input (packets from the bundled captures, a 10-byte packet, one too long for the
//! frame) runs with metadata lengths 0, 4, 8, 32, 216 (the most: the headroom less the
//! `xdp_frame` area) and 252 (refused since Linux 6.18 keeps that area free), ingress 0 (test_run's default), the
//! loopback, both veths and an unknown ifindex, queue 0, a queue past each device's, and with
//! ctxs the kernel refuses (metadata length not a multiple of 4 or past `data_end`, `data_meta`
//! or `egress_ifindex` set, `data_end` not the input's length). Equal per run: the return value,
//! `data_out` and the ctx written back, or the errno.
//!
//! Skipped with a message when bpf() is out of reach, unless `BPFEMU_REQUIRE_KERNEL=1`.

use bpfemu::pcap::PcapReader;
use bpfemu::vm_runtime::build_runtime;
use bpfemu_conformance::libbpf::{LibbpfObject, LogOptions, XdpMd, kernel_or_skip, test_run_xdp};
use bpfemu_kernel::netns::Netns;
use bpfemu_loader::{LoadOptions, load_file};
use bpfemu_vm::xdp::runtime::RxDevice;
use bpfemu_vm::xdp::{PacketError, PacketMeta, XdpConfig};
use std::collections::BTreeMap;
use std::path::PathBuf;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn inputs() -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for (cap, n) in [("normal.pcap", 6), ("ipv6_ext.pcap", 3)] {
        for p in PcapReader::open(&root().join("examples/pcap").join(cap))
            .unwrap()
            .take(n)
        {
            let p = p.unwrap();
            out.push((format!("{cap} #{}", p.index), p.data));
        }
    }
    out.push(("10 bytes".into(), vec![0x11; 10]));
    out.push(("74000 bytes".into(), vec![0x22; 74_000]));
    out
}

/// (label, metadata length, the ctx for an input of that many bytes)
type CtxCase = (String, u32, XdpMd);

fn contexts(packet_len: usize) -> Vec<CtxCase> {
    let mut out = Vec::new();
    for meta in [0u32, 4, 8, 32, 216, 252] {
        let len = packet_len + meta as usize;
        for (ingress, rxq) in [
            (0, 0),
            (1, 0),
            (5, 0),
            (5, 3),
            (6, 0),
            (1, 1),
            (5, 4),
            (6, 1),
            (0, 1),
            (99, 0),
        ] {
            out.push((
                format!("meta {meta} ingress {ingress} rxq {rxq}"),
                meta,
                XdpMd::new(len, meta, ingress, rxq),
            ));
        }
    }
    let len = packet_len + 8;
    let base = XdpMd::new(len, 8, 5, 0);
    let bad = [
        ("meta 6", XdpMd { data: 6, ..base }),
        (
            "meta past data_end",
            XdpMd {
                data: len as u32 + 4,
                ..base
            },
        ),
        (
            "data_meta 4",
            XdpMd {
                data_meta: 4,
                ..base
            },
        ),
        (
            "data_end + 1",
            XdpMd {
                data_end: len as u32 + 1,
                ..base
            },
        ),
        (
            "egress 5",
            XdpMd {
                egress_ifindex: 5,
                ..base
            },
        ),
        (
            "egress 5, unknown ingress",
            XdpMd {
                egress_ifindex: 5,
                ingress_ifindex: 99,
                ..base
            },
        ),
    ];
    out.extend(bad.into_iter().map(|(l, md)| (l.to_owned(), 8, md)));
    out
}

#[test]
fn xdp_md_ctx_matches_kernel() {
    if !kernel_or_skip("xdp_md_ctx_matches_kernel") {
        return;
    }
    let ns = Netns::create("bpfemu-ctx").expect("a network namespace");
    ns.ip(&[
        "link",
        "add",
        "v0",
        "index",
        "5",
        "numrxqueues",
        "4",
        "type",
        "veth",
        "peer",
        "name",
        "v1",
        "index",
        "6",
        "numrxqueues",
        "1",
    ])
    .unwrap();
    for dev in ["lo", "v0", "v1"] {
        ns.ip(&["link", "set", dev, "up"]).unwrap();
    }
    let _inside = ns.enter().unwrap();
    let rx_devices = vec![
        RxDevice {
            ifindex: 1,
            rx_queues: 1,
        },
        RxDevice {
            ifindex: 5,
            rx_queues: 4,
        },
        RxDevice {
            ifindex: 6,
            rx_queues: 1,
        },
    ];
    let inputs = inputs();
    let mut failures = Vec::new();
    let mut outcomes: BTreeMap<String, usize> = BTreeMap::new();
    let mut total = 0;
    for prog in ["adjust_meta", "xsk_dispatch", "reflector"] {
        for level in ["v2", "v3", "v4"] {
            let path = root().join(format!("examples/xdp/build/{prog}.{level}.o"));
            let obj = load_file(&path, &LoadOptions::default()).expect("bpfemu loads");
            let cfg = XdpConfig {
                cpus: bpfemu_conformance::libbpf::possible_cpus().unwrap(),
                rx_devices: Some(rx_devices.clone()),
                ..XdpConfig::default()
            };
            let mut rt = build_runtime(&obj, cfg).unwrap();
            let mut kobj = LibbpfObject::open_file(&path).unwrap();
            let loaded = kobj.load(&LogOptions::default());
            assert!(loaded.result.is_ok(), "{}", loaded.failure_tail(20));
            let name = &obj.programs[0].name;
            let index = rt.program_index(name).unwrap();
            let fd = kobj.program_fd(name).unwrap();
            for (what, packet) in &inputs {
                for (label, meta, md) in contexts(packet.len()) {
                    let mut input = (0..meta).map(|i| (0xc0 + i) as u8).collect::<Vec<u8>>();
                    input.extend_from_slice(packet);
                    let ours = rt.run_ctx(index, &input, &PacketMeta::default(), &md);
                    let theirs = test_run_xdp(fd, &input, Some(&md), 1);
                    let at = format!("{prog}.{level} {what}, {label}");
                    total += 1;
                    match (ours, theirs) {
                        (Ok(o), Ok(k)) => {
                            *outcomes.entry(format!("retval {}", k.retval)).or_default() += 1;
                            if (o.retval, &o.data_out) != (k.retval, &k.data) {
                                failures.push(format!(
                                    "{at}: bpfemu retval {} ({} bytes), kernel {} ({} bytes)",
                                    o.retval,
                                    o.data_out.len(),
                                    k.retval,
                                    k.data.len()
                                ));
                            } else if k.xdp_md() != Some(md.after(&o)) {
                                failures.push(format!(
                                    "{at}: ctx out: kernel {:?}, bpfemu {:?}",
                                    k.xdp_md(),
                                    md.after(&o)
                                ));
                            }
                        }
                        (Err(PacketError::Refused { errno, .. }), Err(kerr)) => {
                            *outcomes.entry(format!("errno {kerr}")).or_default() += 1;
                            if errno.0 != kerr {
                                failures
                                    .push(format!("{at}: errno {} vs kernel's {kerr}", errno.0));
                            }
                        }
                        (o, k) => failures.push(format!("{at}: bpfemu {o:?}, kernel {k:?}")),
                    }
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {total} runs differ from the kernel:\n{}",
        failures.len(),
        failures.join("\n")
    );
    eprintln!("xdp_md_ctx_matches_kernel: {total} runs equal; outcomes {outcomes:?}");
    for key in ["errno 22", "errno 19", "errno 12", "retval 2", "retval 3"] {
        assert!(outcomes.contains_key(key), "no run gave {key}");
    }
}
