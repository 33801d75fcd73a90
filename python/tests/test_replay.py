"""A capture through a program, as `bpfemu replay` runs it."""

import json

from conftest import MAPS, PCAP, corpus, eth, run_cli
from scapy.layers.inet import IP, UDP
from scapy.packet import Raw
from scapy.utils import rdpcap, wrpcap

import bpfemu
from bpfemu import XdpAction


def test_a_replay_gives_every_packet_and_the_cli_summary(bpfemu_cli):
    prog = bpfemu.load(corpus("l4lb"), maps=MAPS / "l4lb.json")
    replay = prog.replay(PCAP / "flows.pcap")
    assert len(replay) == len(rdpcap(str(PCAP / "flows.pcap")))
    assert [r.index for r in replay] == list(range(len(replay)))
    summary = replay.summary
    assert summary.packets == len(replay) and summary.faulted == 0 and replay.faults == []
    assert sum(summary.actions.values()) == summary.packets

    cli = run_cli(
        bpfemu_cli,
        "replay",
        corpus("l4lb"),
        str(PCAP / "flows.pcap"),
        "--maps",
        str(MAPS / "l4lb.json"),
        "--json",
    )
    assert cli.returncode == 0, cli.stderr
    lines = [json.loads(line) for line in cli.stdout.splitlines()]
    assert summary.actions == lines[-1]["summary"]["actions"]
    # Packet by packet: the same action, the same bytes out, the same redirect.
    for ours, theirs in zip(replay, lines[:-1]):
        assert ours.action_name == theirs["action"]
        assert ours.data.hex() == theirs["data"]
        assert (str(ours.redirect) if ours.redirect else None) == theirs.get("redirect")


def test_replays_and_runs_share_the_maps():
    prog = bpfemu.load(corpus("reflector"))
    replay = prog.replay(PCAP / "normal.pcap")
    tx = [r for r in replay if r.action == XdpAction.TX]
    assert replay.summary.actions["tx"] == len(tx) > 0
    # Every reflected frame's bytes are counted, and the count goes on from there.
    total = sum(len(r.data) for r in tx)
    assert prog.maps["reflected_bytes"][0] == [total]


def test_faulting_packets_are_reported_not_raised(tmp_path):
    # A frame shorter than an Ethernet header is refused, as BPF_PROG_TEST_RUN refuses it;
    # the replay goes on with the next packet.
    capture = tmp_path / "short.pcap"
    udp = eth() / IP(src="198.51.100.1", dst="192.0.2.1") / UDP(dport=7)
    wrpcap(str(capture), [udp, Raw(b"\x00" * 10), udp], linktype=1)
    replay = bpfemu.load(corpus("reflector")).replay(capture)
    assert [type(r) for r in replay] == [bpfemu.RunResult, bpfemu.PacketFault, bpfemu.RunResult]
    assert replay.summary.faulted == 1 and replay.summary.actions == {"tx": 2, "error": 1}
    (fault,) = replay.faults
    assert fault.index == 1 and "refused as the kernel refuses it" in fault.error
    assert replay.summary.first_fault == (1, fault.error)
