"""The reflector bounces UDP back out of the port it came in on (XDP_TX, MACs swapped),
drops everything else, and counts packets by IP protocol in a per-CPU array."""

import pytest
from conftest import CLIENT_MAC as CLIENT
from conftest import SERVER_MAC as SERVER
from conftest import corpus, eth
from scapy.layers.inet import IP, TCP, UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import ARP, Ether

import bpfemu
from bpfemu import XdpAction


@pytest.fixture
def reflector() -> bpfemu.Program:
    return bpfemu.load(corpus("reflector"))


def udp(payload: bytes = b"ping") -> Ether:
    return eth() / IP(src="198.51.100.1", dst="192.0.2.1") / UDP(sport=40000, dport=7) / payload


def test_udp_is_sent_back_with_the_macs_swapped(reflector):
    packet = udp()
    result = reflector.run(packet)
    assert result.action is XdpAction.TX
    assert result.action_name == "tx"
    out = Ether(result.data)
    assert (out.src, out.dst) == (SERVER, CLIENT)
    # Only the Ethernet addresses change: the rest of the frame is as it came.
    assert bytes(out)[12:] == bytes(packet)[12:]
    assert result.redirect is None and result.records == [] and result.printk == []


def test_tcp_and_non_ip_are_dropped(reflector):
    tcp = eth() / IP(src="198.51.100.1", dst="192.0.2.1") / TCP(dport=80, flags="S")
    assert reflector.run(tcp).action == XdpAction.DROP
    assert reflector.run(eth() / ARP()).action == XdpAction.DROP
    # A UDP header cut short is not reflected.
    assert reflector.run(bytes(udp())[:38]).action == XdpAction.DROP


def test_counters_by_protocol_and_reflected_bytes(reflector):
    for _ in range(3):
        reflector.run(udp(b"x" * 20))
    reflector.run(eth() / IPv6(src="2001:db8::2", dst="2001:db8::1") / UDP(dport=7))
    reflector.run(eth() / IP(src="198.51.100.1", dst="192.0.2.1") / TCP())
    proto_count = reflector.maps["proto_count"]
    assert proto_count.per_cpu and proto_count.type == "percpu_array"
    # One value per CPU (a single CPU here), typed by BTF: __u64 is an int.
    assert proto_count[17] == [4]
    assert proto_count[6] == [1]
    assert proto_count[1] == [0]
    frame = len(udp(b"x" * 20))
    ipv6_frame = len(eth() / IPv6() / UDP())
    assert reflector.maps["reflected_bytes"][0] == [3 * frame + ipv6_frame]


def test_maps_set_from_python_are_what_the_program_adds_to(reflector):
    reflector.maps["reflected_bytes"][0] = 1000  # every CPU's copy
    result = reflector.run(udp())
    assert result.action == XdpAction.TX
    assert reflector.maps["reflected_bytes"][0] == [1000 + len(udp())]


def test_each_cpu_keeps_its_own_count():
    # Four CPUs; RSS steers each flow to one of them, as a NIC would.
    reflector = bpfemu.load(corpus("reflector"), cpus=4)
    cpus = set()
    for port in range(40000, 40016):
        packet = eth() / IP(src="198.51.100.1", dst="192.0.2.1") / UDP(sport=port, dport=7)
        cpus.add(reflector.run(packet).cpu)
    counts = reflector.maps["proto_count"][17]
    assert len(counts) == 4 and sum(counts) == 16
    assert {cpu for cpu, n in enumerate(counts) if n} == cpus
