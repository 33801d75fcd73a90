"""The module, the command line and the kernel agree on the corpus: the module's replay is
`bpfemu replay`'s packet for packet, and `bpfemu diff` finds no difference between bpfemu and
the kernel's BPF_PROG_TEST_RUN on the same packets and maps. The kernel's half needs root and
bpf(); it is skipped without them unless BPFEMU_REQUIRE_KERNEL=1 (CI), where it fails."""

import json
import os
import re

import pytest
from conftest import FIB, MAPS, PCAP, corpus, run_cli

import bpfemu

# (program, capture, load options): each corpus program with the setup that exercises it.
CASES = [
    ("reflector", "normal", {}),
    ("firewall", "flows", {"maps": MAPS / "firewall.json"}),
    ("l4lb", "flows", {"maps": MAPS / "l4lb.json"}),
    ("router", "normal", {"maps": MAPS / "router.json", "fib": FIB / "router.json", "ifindex": 2}),
    ("ringbuf_events", "attack", {"maps": MAPS / "ringbuf_events.json"}),
    ("trace_printk", "vlan", {}),
    ("adjust_tail", "normal", {"maps": MAPS / "adjust_tail.json"}),
]


def flags(options: dict) -> list[str]:
    out = []
    for name, value in options.items():
        out += [f"--{name}", str(value)]
    return out


def record_json(record: bpfemu.Record) -> dict:
    """A record as `replay --json` shows it."""
    shown = {"map": record.map, "data": record.data.hex()}
    if record.slot is not None:
        shown["slot"] = record.slot
    return shown


@pytest.mark.parametrize("name, capture, options", CASES, ids=[c[0] for c in CASES])
def test_the_module_replays_as_the_command_line(bpfemu_cli, name, capture, options):
    pcap = str(PCAP / f"{capture}.pcap")
    replay = bpfemu.load(corpus(name), **options).replay(pcap)
    cli = run_cli(bpfemu_cli, "replay", corpus(name), pcap, "--json", *flags(options))
    assert cli.returncode == 0, cli.stderr
    lines = [json.loads(line) for line in cli.stdout.splitlines()]
    packets, summary = lines[:-1], lines[-1]["summary"]
    assert len(replay) == len(packets) == summary["packets"] > 0
    for ours, theirs in zip(replay, packets):
        assert isinstance(ours, bpfemu.RunResult)
        assert (ours.index, ours.cpu) == (theirs["index"], theirs["cpu"])
        assert ours.retval == theirs["retval"]
        assert ours.action_name == theirs["action"]
        assert (ours.meta + ours.data).hex() == theirs["data"]
        assert ours.printk == theirs["printk"]
        assert (str(ours.redirect) if ours.redirect else None) == theirs.get("redirect")
        assert [record_json(r) for r in ours.records] == theirs.get("events", [])
    assert replay.summary.actions == summary["actions"]


@pytest.mark.parametrize("name, capture, options", CASES, ids=[c[0] for c in CASES])
def test_the_kernel_agrees(bpfemu_cli, name, capture, options):
    diff = run_cli(bpfemu_cli, "diff", corpus(name), str(PCAP / f"{capture}.pcap"), *flags(options))
    # Skipped only when the kernel is out of reach (any other exit 2 is a failure).
    unreachable = diff.returncode == 2 and "is not usable here" in diff.stderr
    if unreachable and os.environ.get("BPFEMU_REQUIRE_KERNEL") != "1":
        pytest.skip(diff.stderr.strip())
    assert diff.returncode == 0, diff.stdout[-2000:] + diff.stderr
    last = diff.stdout.rstrip().splitlines()[-1]
    assert re.fullmatch(r"[1-9]\d* packets, 0 mismatches", last), last
