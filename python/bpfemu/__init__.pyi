"""Type stubs of the bpfemu module (load, verify and run XDP programs without a kernel)."""

import enum
from collections.abc import Iterator, Mapping, MutableMapping
from dataclasses import dataclass
from os import PathLike
from typing import Any, Optional, Union

StrPath = Union[str, PathLike[str]]

__all__ = [
    "Error",
    "LoadError",
    "Map",
    "MapError",
    "Maps",
    "PacketFault",
    "Program",
    "Record",
    "Redirect",
    "Replay",
    "ReplaySummary",
    "RunError",
    "RunResult",
    "Verdict",
    "VerifierError",
    "XdpAction",
    "load",
]

class Error(Exception):
    """The base of every error bpfemu raises."""

class LoadError(Error):
    """An object, program, map file, FIB file or capture that cannot be loaded."""

class VerifierError(Error):
    """The program the verifier rejects was asked to run (the kernel would not load it).

    ``str()`` is the command line's text: the error at its source line, then the refusal.
    """

    program: Optional[str]
    message: Optional[str]
    note: Optional[str]
    insn: Optional[int]
    insn_text: Optional[str]
    file: Optional[str]
    line: Optional[int]
    column: Optional[int]
    source: Optional[str]

class RunError(Error):
    """The kernel refuses the packet, or the run stopped (a memory fault, the budget)."""

class MapError(Error):
    """A map operation answered with an errno other than ENOENT."""

    errno: int
    map: str

class XdpAction(enum.IntEnum):
    ABORTED = 0
    DROP = 1
    PASS = 2
    TX = 3
    REDIRECT = 4

@dataclass(frozen=True)
class Redirect:
    kind: str
    text: str
    map: Optional[str] = None
    key: Optional[int] = None
    ifindex: Optional[int] = None
    broadcast: bool = False
    exclude_ingress: bool = False

@dataclass(frozen=True)
class Record:
    map: str
    slot: Optional[int]
    data: bytes
    formatted: Any = None

@dataclass(frozen=True)
class RunResult:
    index: int
    cpu: int
    retval: int
    action: Union[XdpAction, int]
    action_name: str
    data: bytes
    meta: bytes
    redirect: Optional[Redirect]
    records: list[Record]
    printk: list[str]
    insns: int
    def __bytes__(self) -> bytes: ...
    @property
    def ringbuf(self) -> list[Record]: ...
    @property
    def perf_events(self) -> list[Record]: ...

@dataclass(frozen=True)
class PacketFault:
    index: int
    cpu: int
    error: str

@dataclass(frozen=True)
class ReplaySummary:
    packets: int
    actions: dict[str, int]
    faulted: int
    first_fault: Optional[tuple[int, str]]
    insns: int
    elapsed_ms: float
    packets_per_sec: float

@dataclass(frozen=True)
class Replay:
    results: list[Union[RunResult, PacketFault]]
    summary: ReplaySummary
    def __iter__(self) -> Iterator[Union[RunResult, PacketFault]]: ...
    def __len__(self) -> int: ...
    def __getitem__(self, index: int) -> Union[RunResult, PacketFault]: ...
    @property
    def faults(self) -> list[PacketFault]: ...

@dataclass(frozen=True)
class Verdict:
    program: str
    section: str
    verdict: str
    accepted: bool
    processed_insns: int
    total_states: int
    peak_states: int
    log: str
    text: str
    message: Optional[str] = None
    note: Optional[str] = None
    insn: Optional[int] = None
    insn_text: Optional[str] = None
    file: Optional[str] = None
    line: Optional[int] = None
    column: Optional[int] = None
    source: Optional[str] = None

class Map(MutableMapping[Any, Any]):
    """Keys and values typed by BTF as bpftool prints them (ints, dicts for structs, lists
    for arrays), bytes accepted everywhere and given where no BTF types them; a per-CPU
    value is a list, one per CPU."""

    # Made by Program.maps, not by users.
    def __init__(self, native: Any, spec: dict[str, Any], typed: bool = True) -> None: ...
    @property
    def name(self) -> str: ...
    @property
    def type(self) -> str: ...
    @property
    def key_size(self) -> int: ...
    @property
    def value_size(self) -> int: ...
    @property
    def max_entries(self) -> int: ...
    @property
    def per_cpu(self) -> bool: ...
    @property
    def key_type(self) -> Optional[str]: ...
    @property
    def value_type(self) -> Optional[str]: ...
    @property
    def raw(self) -> Map: ...
    def __getitem__(self, key: Any) -> Any: ...
    def __setitem__(self, key: Any, value: Any) -> None: ...
    def __delitem__(self, key: Any) -> None: ...
    def __iter__(self) -> Iterator[Any]: ...
    def __len__(self) -> int: ...
    def items(self) -> list[tuple[Any, Any]]: ...  # type: ignore[override]
    def values(self) -> list[Any]: ...  # type: ignore[override]

class Maps(Mapping[str, Map]):
    def __init__(self, native: Any) -> None: ...
    def __getitem__(self, name: str) -> Map: ...
    def __iter__(self) -> Iterator[str]: ...
    def __len__(self) -> int: ...

class Program:
    # Made by load(), not by users.
    def __init__(self, native: Any) -> None: ...
    @property
    def name(self) -> str: ...
    @property
    def section(self) -> str: ...
    @property
    def path(self) -> str: ...
    @property
    def cpus(self) -> int: ...
    @property
    def maps(self) -> Maps: ...
    def verify(self, log_level: int = 0) -> Verdict: ...
    def run(self, packet: Any, *, ts_ns: int = 0) -> RunResult: ...
    def replay(self, capture: StrPath) -> Replay: ...
    def dump_maps(self) -> dict[str, Any]: ...

def load(
    path: StrPath,
    prog: Optional[str] = None,
    maps: Optional[StrPath] = None,
    *,
    engine: str = "jit",
    cpus: int = 1,
    seed: int = 0,
    fib: Optional[StrPath] = None,
    sockets: Optional[StrPath] = None,
    ifindex: int = 1,
    rxq: Optional[int] = None,
    no_verify: bool = False,
    btf: Optional[StrPath] = None,
    map_sizes: Optional[dict[str, int]] = None,
    record_types: Optional[dict[str, str]] = None,
) -> Program: ...
