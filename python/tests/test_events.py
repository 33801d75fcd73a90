"""What a run reports besides its verdict: ring buffer records, bpf_printk lines, redirect
targets, global data."""

import struct

import pytest
from conftest import FIB, MAPS, REPO, corpus, eth
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


def test_records_typed_by_btf_and_perf_samples():
    # tests/objects/record_events.c: per packet a `struct record` in the ring buffer (length,
    # a salt from a map, the first 6 bytes), the length as a u64, a perf sample of 3 bytes and
    # the first 14 of the packet on the CPU's slot, and the errno of a sample into CPU 1's slot.
    obj = str(REPO / "tests" / "objects" / "record_events.o")
    prog = bpfemu.load(obj, cpus=2, record_types={"records": "struct record"})
    prog.maps["salt"][0] = 77
    for cpu in (0, 1):
        prog.maps["samples"][cpu] = cpu  # a perf event opened on each CPU
    packet = bytes(eth() / IP(src="198.51.100.1", dst="192.0.2.1") / UDP(dport=7) / (b"x" * 18))
    result = prog.run(packet)
    record, length, errno = result.ringbuf
    assert record.formatted == {"len": 60, "salt": 77, "head": list(packet[:6]), "pad": 0}
    assert length.formatted is None and length.data == (60).to_bytes(8, "little")
    (sample,) = result.perf_events
    assert (sample.map, sample.slot) == ("samples", result.cpu)
    assert sample.data == bytes([1, 2, 3]) + packet[:14]
    # Into the other CPU's event from this CPU: EOPNOTSUPP, as the kernel answers.
    assert int.from_bytes(errno.data, "little", signed=True) == -95
    # A type the object's BTF lacks is refused as --record-type refuses it.
    with pytest.raises(bpfemu.LoadError, match="has no struct nothing"):
        bpfemu.load(obj, record_types={"records": "struct nothing"})


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


def test_socket_lookups_find_the_table_given():
    # sk_lookup.o passes a packet whose TCP lookup finds a socket and writes the socket's
    # state, family and ports in its first bytes; without a socket it drops the packet. The
    # table is the one tests/data/sockets/sk_lookup.toml runs against the kernel.
    data = REPO / "tests" / "data" / "sockets"
    packet = (
        Ether(src="02:00:00:00:00:00")
        / IP(src="127.0.0.1", dst="127.0.0.1")
        / TCP(sport=40000, dport=80, flags="A")
    )
    alone = bpfemu.load(data / "sk_lookup.o", fib=data / "lo.json")
    assert alone.run(packet).action == XdpAction.DROP
    with_table = bpfemu.load(
        data / "sk_lookup.o", fib=data / "lo.json", sockets=data / "sockets.json"
    )
    found = with_table.run(packet)
    assert found.action == XdpAction.PASS
    # The established socket (TCP_ESTABLISHED, AF_INET), local port 80, and a byte of its
    # remote port 40000 (0x9c40, which bpf_sock keeps in network order); the rest of the
    # packet as it came.
    assert found.data[:4] == bytes([1, 2, 80, 0x40])
    assert found.data[4:] == bytes(packet)[4:]
