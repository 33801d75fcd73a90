"""What a run reports besides its verdict: ring buffer records, bpf_printk lines, redirect
targets, global data."""

import struct

import pytest
from conftest import FIB, MAPS, corpus, eth
from scapy.layers.inet import IP, TCP, UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether

import bpfemu
from bpfemu import XdpAction

# struct drop_event of ringbuf_events.c: type, cap_len, pkt_len, ifindex, rx_queue, ts_ns,
# then the first 64 bytes of the packet.
DROP_EVENT = struct.Struct("<HHIIIQ")
EV_DROP = 1


def syn(dport: int):
    return (
        eth() / IP(src="198.51.100.1", dst="192.0.2.1") / TCP(sport=40000, dport=dport, flags="S")
    )


def test_a_dropped_syn_is_reported_in_the_ring_buffer():
    prog = bpfemu.load(corpus("ringbuf_events"), maps=MAPS / "ringbuf_events.json", ifindex=3)
    allowed = prog.run(syn(22))
    assert allowed.action == XdpAction.PASS and allowed.records == []

    packet = syn(8080)
    dropped = prog.run(packet, ts_ns=1_700_000_000_000_000_000)
    assert dropped.action == XdpAction.DROP
    (record,) = dropped.ringbuf
    assert record.map == "events" and record.slot is None and dropped.perf_events == []
    kind, cap_len, pkt_len, ifindex, rx_queue, ts_ns = DROP_EVENT.unpack_from(record.data)
    assert (kind, cap_len, pkt_len, ifindex) == (EV_DROP, len(packet), len(packet), 3)
    assert ts_ns == 1_700_000_000_000_000_000  # the clock reads the packet's capture time
    assert record.data[DROP_EVENT.size : DROP_EVENT.size + cap_len] == bytes(packet)
    # An ACK is not policed.
    ack = eth() / IP(src="198.51.100.1", dst="192.0.2.1") / TCP(dport=8080, flags="A")
    assert prog.run(ack).action == XdpAction.PASS


def test_the_allowed_ports_are_a_map_of_be16_keys():
    prog = bpfemu.load(corpus("ringbuf_events"))
    assert prog.run(syn(443)).action == XdpAction.DROP
    prog.maps["allowed_ports"][(443).to_bytes(2, "big")] = 1
    assert prog.run(syn(443)).action == XdpAction.PASS


def test_printk_lines_and_global_data():
    prog = bpfemu.load(corpus("trace_printk"))
    ipv4 = eth() / IP(src="198.51.100.1", dst="192.0.2.1", ttl=17) / UDP() / b"abcd"
    assert prog.run(ipv4).printk == ["ipv4 proto 17 len 32 ttl 17"]
    ipv6 = eth() / IPv6(src="2001:db8::2", dst="2001:db8::1")
    assert prog.run(ipv6).printk == [f"non-ip ethertype 0x86dd len {len(ipv6)}"]
    (bss,) = [m for m in prog.maps.values() if m.name.endswith(".bss")]
    # A section of globals is typed as bpftool shows it: variables by name.
    assert bss[0] == {".bss": [{"frames_seen": 2}]}


def test_a_routed_packet_is_redirected_through_the_devmap():
    prog = bpfemu.load(
        corpus("router"), maps=MAPS / "router.json", fib=FIB / "router.json", ifindex=2
    )
    packet = eth() / IP(src="198.51.100.1", dst="192.0.2.6", ttl=64) / UDP(dport=53)
    result = prog.run(packet)
    assert result.action == XdpAction.REDIRECT
    redirect = result.redirect
    assert (redirect.kind, redirect.map, redirect.key, redirect.ifindex) == (
        "devmap",
        "tx_port",
        4,
        4,
    )
    assert str(redirect) == "tx_port[4] (ifindex 4)"
    out = Ether(result.data)
    # eth2's MAC to the next hop's, found by bpf_fib_lookup; the TTL spent, the checksum fixed.
    assert (out.src, out.dst) == ("02:00:00:00:02:01", "02:00:00:00:02:02")
    assert out[IP].ttl == 63
    recomputed = IP(bytes(out[IP]))
    del recomputed.chksum
    assert IP(bytes(recomputed)).chksum == out[IP].chksum
    # A blackholed destination is dropped.
    blackholed = eth() / IP(src="198.51.100.1", dst="192.0.2.13") / UDP(dport=53)
    assert prog.run(blackholed).action == XdpAction.DROP


@pytest.mark.parametrize("engine", ["interp", "jit", "jit-trusted", "jit-baseline"])
def test_every_engine_gives_the_same_result(engine):
    prog = bpfemu.load(
        corpus("router"),
        maps=MAPS / "router.json",
        fib=FIB / "router.json",
        ifindex=2,
        engine=engine,
    )
    reference = bpfemu.load(
        corpus("router"),
        maps=MAPS / "router.json",
        fib=FIB / "router.json",
        ifindex=2,
        engine="interp",
    )
    packet = eth() / IP(src="198.51.100.1", dst="192.0.2.6") / UDP(dport=53)
    assert prog.run(packet) == reference.run(packet)
