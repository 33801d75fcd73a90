"""The corpus's test files (`tests/data/test-files/*.toml`, run by `bpfemu test`, and by
`bpfemu test --kernel` through the kernel's BPF_PROG_TEST_RUN in the Rust tests) hold for the
module too: every packet of every test, as `bpfemu test --json` says it ran, gives the module
the same action and the same bytes out. The packets `bpfemu test` built from layers are read
back by Scapy, whose own lengths and checksums must equal the builder's."""

import json
import tomllib
from pathlib import Path

import pytest
from conftest import REPO, run_cli
from scapy.layers.inet import ICMP, IP, TCP, UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether

import bpfemu

TEST_FILES = sorted((REPO / "tests" / "data" / "test-files").glob("*.toml"))


def cases(path: Path) -> list[dict]:
    with open(path, "rb") as f:
        return tomllib.load(f)["test"]


# The fields Scapy computes, per layer, and the names a test file gives them by.
COMPUTED = (
    (IP, "ipv4", {"len": "len", "chksum": "checksum"}),
    (IPv6, "ipv6", {"plen": "plen"}),
    (UDP, "udp", {"len": "len", "chksum": "checksum"}),
    (TCP, "tcp", {"chksum": "checksum"}),
    (ICMP, "icmp", {"chksum": "checksum"}),
)


def scapy_rebuilt(frame: bytes, spec: dict) -> bytes:
    """`frame` dissected by Scapy, the lengths and checksums the test left to the builder
    dropped and computed again by Scapy."""
    packet = Ether(frame)
    for layer, name, fields in COMPUTED:
        if layer in packet:
            given = spec.get(name, {})
            for field, key in fields.items():
                if key not in given:
                    delattr(packet[layer], field)
    return bytes(packet)


@pytest.mark.parametrize("path", TEST_FILES, ids=[p.stem for p in TEST_FILES])
def test_the_module_runs_each_test_file_as_bpfemu_test_does(bpfemu_cli, path):
    report = run_cli(bpfemu_cli, "test", str(path), "--json")
    assert report.returncode == 0, report.stdout + report.stderr
    ran = {t["name"]: t for t in json.loads(report.stdout)["tests"]}
    compared = 0
    for case in cases(path):
        result = ran[case["name"]]
        if isinstance(case.get("maps"), dict):
            continue  # inline map contents: the module takes a map file
        options = {"prog": case.get("program"), "cpus": case.get("cpus", 1)}
        for key in ("maps", "fib"):
            if key in case:
                options[key] = str((path.parent / case[key]).resolve())
        program = bpfemu.load(str((path.parent / case["object"]).resolve()), **options)
        layered = [p for p in (case["packet"] if isinstance(case["packet"], list) else [case["packet"]])]
        for spec, packet in zip(layered, result["packets"]):
            data = bytes.fromhex(packet["in"])
            if isinstance(spec, dict) and not ({"hex", "pcap"} & spec.keys()):
                assert scapy_rebuilt(data, spec) == data, f"{case['name']}: Scapy's checksums differ"
            out = program.run(data)
            assert out.action_name == packet["action"], case["name"]
            assert (out.meta + out.data).hex() == packet["out"], case["name"]
            compared += 1
    assert compared > 0 or all(isinstance(c.get("maps"), dict) for c in cases(path))
