"""Shared paths for the examples: the repository's corpus and the `bpfemu` binary whose
messages the module must repeat."""

import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BUILD = REPO / "examples" / "xdp" / "build"
MAPS = REPO / "examples" / "maps"
PCAP = REPO / "examples" / "pcap"
FIB = REPO / "examples" / "fib"
VERIFY_DATA = REPO / "tests" / "data" / "verify"


def corpus(name: str) -> str:
    """A corpus object, built for -mcpu=v3."""
    return str(BUILD / f"{name}.v3.o")


@pytest.fixture(scope="session")
def bpfemu_cli() -> Path:
    """The command line built from the same tree (`scripts/python_tests.sh` builds it and
    names it in BPFEMU_BIN)."""
    path = Path(os.environ.get("BPFEMU_BIN", REPO / "target" / "debug" / "bpfemu"))
    assert path.is_file(), f"{path}: build the command line first (cargo build --bin bpfemu)"
    return path


def run_cli(cli: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(cli), *args], capture_output=True, text=True, check=False)


CLIENT_MAC = "02:00:00:00:00:01"
SERVER_MAC = "02:00:00:00:00:02"


def eth():
    """An Ethernet header with both addresses given (Scapy would otherwise look them up)."""
    from scapy.layers.l2 import Ether

    return Ether(src=CLIENT_MAC, dst=SERVER_MAC)
