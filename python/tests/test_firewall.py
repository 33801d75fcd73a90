"""The firewall looks up a 5-tuple ACL (IPv4 as ::ffff:a.b.c.d), then the same tuple with
the source port wildcarded, and falls back to the default policy of its `.rodata`; it counts
allows, denies and defaults in a per-CPU array. The rules come from the corpus' map file and
from Python."""

import socket

import pytest
from conftest import MAPS, corpus, eth
from scapy.layers.inet import ICMP, IP, TCP, UDP
from scapy.layers.l2 import ARP

import bpfemu
from bpfemu import XdpAction

ALLOW, DENY, DEFAULT = 0, 1, 2  # fw_stats slots


@pytest.fixture
def firewall() -> bpfemu.Program:
    return bpfemu.load(corpus("firewall"), maps=MAPS / "firewall.json")


def tcp(src: str, sport: int, dst: str = "192.0.2.1", dport: int = 80):
    return eth() / IP(src=src, dst=dst) / TCP(sport=sport, dport=dport, flags="S")


def v4_mapped(address: str) -> list[int]:
    """The ACL's address field for an IPv4 address: ::ffff:a.b.c.d, as a list of bytes."""
    return [0] * 10 + [0xFF, 0xFF] + list(socket.inet_aton(address))


def test_rules_from_the_map_file(firewall):
    # An exact deny shadows the source-port wildcard allow of the same flow.
    assert firewall.run(tcp("198.51.100.11", 40001)).action == XdpAction.DROP
    assert firewall.run(tcp("198.51.100.11", 40002)).action == XdpAction.PASS
    assert firewall.run(tcp("198.51.100.10", 12345)).action == XdpAction.PASS
    # No rule: .rodata's default policy is deny.
    assert firewall.run(tcp("198.51.100.99", 40001)).action == XdpAction.DROP
    # ICMP has no ports: rule 6 allows it from .50 only.
    ping = eth() / IP(src="198.51.100.50", dst="192.0.2.1") / ICMP()
    assert firewall.run(ping).action == XdpAction.PASS
    # Non-IP traffic is let through (.rodata allow_non_ip).
    assert firewall.run(eth() / ARP()).action == XdpAction.PASS
    stats = firewall.maps["fw_stats"]
    assert (stats[ALLOW], stats[DENY], stats[DEFAULT]) == ([3], [1], [1])


def test_acl_entries_are_typed_by_btf(firewall):
    acl = firewall.maps["acl"]
    assert (acl.type, acl.key_type, acl.value_type) == ("hash", "struct fw_tuple", "struct fw_rule")
    rules = {value["rule_id"]: (key, value) for key, value in acl.items()}
    assert len(rules) == len(acl) == 7
    key, value = rules[1]
    assert value == {"action": DENY, "rule_id": 1}
    assert key["saddr"] == v4_mapped("198.51.100.11")
    assert key["proto"] == socket.IPPROTO_TCP
    # Ports are __be16: the number the host reads from the network-order bytes, as bpftool
    # prints them.
    assert key["dport"] == socket.htons(80) == 0x5000


def test_the_default_policy_is_global_data(firewall):
    rodata = firewall.maps["firewall.rodata"]
    # A global data section is one array entry typed as bpftool shows it: variables by name.
    assert rodata.items() == [(0, {".rodata": [{"default_action": DENY}, {"allow_non_ip": True}]})]
    assert firewall.dump_maps()["firewall.rodata"][0]["formatted"]["value"] == rodata[0]


def test_a_rule_added_from_python_takes_effect(firewall):
    flow = tcp("198.51.100.77", 5555, dport=22)
    assert firewall.run(flow).action == XdpAction.DROP  # the default policy
    key = {
        "saddr": v4_mapped("198.51.100.77"),
        "daddr": v4_mapped("192.0.2.1"),
        "sport": 0,
        "dport": socket.htons(22),
        "proto": socket.IPPROTO_TCP,
    }
    firewall.maps["acl"][key] = {"action": ALLOW, "rule_id": 100}
    assert firewall.maps["acl"][key] == {"action": ALLOW, "rule_id": 100}
    assert key in firewall.maps["acl"]
    assert firewall.run(flow).action == XdpAction.PASS
    # UDP to the same port is another tuple: still the default.
    udp = eth() / IP(src="198.51.100.77", dst="192.0.2.1") / UDP(sport=5555, dport=22)
    assert firewall.run(udp).action == XdpAction.DROP

    del firewall.maps["acl"][key]
    assert key not in firewall.maps["acl"]
    assert firewall.run(flow).action == XdpAction.DROP
    with pytest.raises(KeyError):
        del firewall.maps["acl"][key]


def test_raw_bytes_reach_the_same_entries(firewall):
    raw = firewall.maps["acl"].raw
    key = bytes(v4_mapped("198.51.100.77") + v4_mapped("192.0.2.1")) + (
        socket.htons(0).to_bytes(2, "little")
        + (22).to_bytes(2, "big")
        + bytes([socket.IPPROTO_TCP])
    )
    raw[key] = (DENY).to_bytes(4, "little") + (101).to_bytes(4, "little")
    assert firewall.maps["acl"][key] == {"action": DENY, "rule_id": 101}
    assert raw[key] == bytes([1, 0, 0, 0, 101, 0, 0, 0])
    with pytest.raises(ValueError, match="37"):
        raw[key[:-1]] = bytes(8)


def test_map_errors_carry_the_errno(firewall):
    import errno

    with pytest.raises(bpfemu.MapError) as caught:
        del firewall.maps["fw_stats"][0]  # an array's entries cannot be deleted
    assert caught.value.errno == errno.EINVAL
    assert caught.value.map == "fw_stats"
    assert str(caught.value) == "map fw_stats: the delete fails with EINVAL (22)"
    with pytest.raises(bpfemu.MapError) as caught:
        firewall.maps["fw_stats"][3] = 1  # past max_entries
    assert caught.value.errno == errno.E2BIG
    with pytest.raises(KeyError):
        firewall.maps["fw_stats"][3]
