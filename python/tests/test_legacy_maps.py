"""An object from before BTF: legacy map definitions (no types), a pre-1.0 section name. The
loader's warnings become Python warnings with the command line's text; maps without types
give bytes (an array's key, its index, stays an int)."""

import socket

import pytest
from conftest import PCAP, corpus, eth, run_cli
from scapy.layers.inet import IP, TCP, UDP

import bpfemu
from bpfemu import XdpAction


@pytest.fixture
def legacy(recwarn) -> bpfemu.Program:
    return bpfemu.load(corpus("legacy_maps"))


def test_the_loader_warnings_are_the_command_lines(bpfemu_cli):
    with pytest.warns(UserWarning) as caught:
        bpfemu.load(corpus("legacy_maps"))
    cli = run_cli(bpfemu_cli, "replay", corpus("legacy_maps"), str(PCAP / "normal.pcap"))
    said = [line[len("bpfemu: ") :] for line in cli.stderr.splitlines() if "warning:" in line]
    assert len(said) == 2
    assert [str(w.message) for w in caught] == said


def test_untyped_maps_take_and_give_bytes(legacy):
    rxcnt, drop_ports = legacy.maps["rxcnt"], legacy.maps["drop_ports"]
    assert rxcnt.key_type is None and drop_ports.value_type is None
    dns = eth() / IP(src="198.51.100.1", dst="192.0.2.1") / UDP(dport=53)
    assert legacy.run(dns).action == XdpAction.PASS
    drop_ports[socket.htons(53).to_bytes(2, "little")] = (1).to_bytes(4, "little")
    assert legacy.run(dns).action == XdpAction.DROP
    # Without BTF an int is taken in the host's byte order, as the program reads the key.
    drop_ports[socket.htons(5353)] = 1
    assert (socket.htons(5353).to_bytes(2, "little"), (1).to_bytes(4, "little")) in (
        drop_ports.items()
    )
    legacy.run(eth() / IP(src="198.51.100.1", dst="192.0.2.1") / TCP())
    # The per-CPU counters of the array by protocol: keys are ints, values bytes (a long).
    counts = {k: v for k, v in rxcnt.items() if v != [bytes(8)]}
    assert counts == {17: [(2).to_bytes(8, "little")], 6: [(1).to_bytes(8, "little")]}
    with pytest.raises(TypeError, match="does not type the value"):
        drop_ports[1] = "one"
