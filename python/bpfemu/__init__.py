"""bpfemu: the Linux kernel's eBPF machinery for XDP in userspace, for pytest and Scapy.

Load an object clang built, verify its XDP program as Linux 6.18 would, run packets through
it with the kernel's semantics, read and write its maps::

    import bpfemu
    from scapy.all import Ether, IP, UDP

    prog = bpfemu.load("reflector.o")
    result = prog.run(Ether() / IP(dst="192.0.2.1") / UDP(dport=7))
    assert result.action == bpfemu.XdpAction.TX
    assert Ether(result.data)[IP].src == "192.0.2.1"

The work is done by the Rust library behind the ``bpfemu`` command line (``bpfemu._native``):
the same loader, verifier and runtime, and the same error messages.
"""

from __future__ import annotations

import enum
import json
import threading
from collections.abc import Iterator, Mapping, MutableMapping
from dataclasses import dataclass
from os import PathLike
from typing import Any, Optional, Union

from . import _native
from ._native import Error, LoadError, MapError, RunError, VerifierError

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

StrPath = Union[str, "PathLike[str]"]


class XdpAction(enum.IntEnum):
    """``enum xdp_action``: what an XDP program's return value asks of the kernel."""

    ABORTED = 0
    DROP = 1
    PASS = 2
    TX = 3
    REDIRECT = 4


def _action(retval: int) -> Union[XdpAction, int]:
    """The action for a return value; a value past ``XDP_REDIRECT`` stays a plain int."""
    try:
        return XdpAction(retval)
    except ValueError:
        return retval


@dataclass(frozen=True)
class Redirect:
    """Where an ``XDP_REDIRECT`` sends the packet.

    ``kind`` is ``ifindex`` (``bpf_redirect``), ``devmap``, ``cpumap`` or ``xskmap``
    (``bpf_redirect_map``); ``key`` is the map slot, ``ifindex`` the device when known.
    ``str()`` gives the text ``bpfemu replay`` prints (``tx_ports[3] (ifindex 3)``).
    """

    kind: str
    text: str
    map: Optional[str] = None
    key: Optional[int] = None
    ifindex: Optional[int] = None
    broadcast: bool = False
    exclude_ingress: bool = False

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True)
class Record:
    """A ring buffer record (``slot`` is None) or a perf event sample (``slot`` its CPU slot).

    ``formatted`` is the record typed by BTF, as bpftool prints a value, when
    ``load(record_types={map: type})`` names its type (``replay --record-type``).
    """

    map: str
    slot: Optional[int]
    data: bytes
    formatted: Any = None


@dataclass(frozen=True)
class RunResult:
    """What one packet's run gave, as ``BPF_PROG_TEST_RUN`` reports it.

    ``action`` is an :class:`XdpAction` (a plain int for return values past 4),
    ``action_name`` its name in bpfemu's reports (``pass``, ``tx``, ...). ``data`` is the
    frame as it leaves the program (from ``data``), ``meta`` the metadata in front of it.
    ``bytes(result)`` is ``result.data``, so ``Ether(bytes(result))`` dissects it.
    """

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

    def __bytes__(self) -> bytes:
        return self.data

    @property
    def ringbuf(self) -> list[Record]:
        """The ring buffer records this run committed."""
        return [r for r in self.records if r.slot is None]

    @property
    def perf_events(self) -> list[Record]:
        """The perf event samples this run output."""
        return [r for r in self.records if r.slot is not None]


@dataclass(frozen=True)
class PacketFault:
    """A packet of a replay that the kernel refuses, or whose run stopped (``error`` says why)."""

    index: int
    cpu: int
    error: str


@dataclass(frozen=True)
class ReplaySummary:
    """The totals of a replay, as ``bpfemu replay --json`` ends with them."""

    packets: int
    actions: dict[str, int]
    faulted: int
    first_fault: Optional[tuple[int, str]]
    insns: int
    elapsed_ms: float
    packets_per_sec: float


@dataclass(frozen=True)
class Replay:
    """Every packet of a capture through the program: ``results`` in capture order (a
    :class:`RunResult`, or a :class:`PacketFault`), and the ``summary``."""

    results: list[Union[RunResult, PacketFault]]
    summary: ReplaySummary

    def __iter__(self) -> Iterator[Union[RunResult, PacketFault]]:
        return iter(self.results)

    def __len__(self) -> int:
        return len(self.results)

    def __getitem__(self, index: int) -> Union[RunResult, PacketFault]:
        return self.results[index]

    @property
    def faults(self) -> list[PacketFault]:
        """The packets that did not run to the end."""
        return [r for r in self.results if isinstance(r, PacketFault)]


@dataclass(frozen=True)
class Verdict:
    """The verifier's verdict on a program, as ``bpfemu verify --json`` gives it.

    ``verdict`` is ``accepted``, ``rejected``, or ``undecided`` (the program uses what bpfemu's
    verifier does not check yet). A rejection has the kernel's ``message``, the instruction
    (``insn``, ``insn_text``) and its source place (``file``, ``line``, ``column``,
    ``source``); ``text`` is the error as ``bpfemu verify`` prints it
    (``prog.c:42:5: error: ...``), ``log`` the verifier log at the level asked.
    """

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

    def __str__(self) -> str:
        return self.text or f"{self.program}: {self.verdict}"


def _bytes_of(value: Any, what: str) -> bytes:
    """``value`` as bytes: bytes-like, or anything with ``__bytes__`` (a Scapy packet).

    An int is refused: ``bytes(60)`` would be sixty zero bytes, not what anyone meant.
    """
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if not isinstance(value, int) and hasattr(type(value), "__bytes__"):
        return bytes(value)
    raise TypeError(
        f"{what} must be bytes or have __bytes__ (a Scapy packet), not {type(value).__name__}"
    )


# Map types whose keys are __u32 indexes, as the kernel reads them.
_INDEXED = frozenset(
    {
        "array",
        "percpu_array",
        "prog_array",
        "perf_event_array",
        "array_of_maps",
        "devmap",
        "cpumap",
        "xskmap",
    }
)


class Map(MutableMapping):
    """One map of the program, as a mutable mapping over the map itself.

    Reads and writes go through the syscall side, as ``bpftool map`` and libbpf's
    ``bpf_map_*_elem`` reach a map: ``m[key]`` looks up (``KeyError`` when absent),
    ``m[key] = value`` updates (``BPF_ANY``), ``del m[key]`` deletes; an errno other than
    ``ENOENT`` raises :class:`MapError`.

    Keys and values are typed by the object's BTF in the form ``bpftool -j map dump``
    prints (``"formatted"``): integers and enums as ints (``__be32`` as the integer the host
    reads from the network-order bytes, as bpftool shows it), structs as dicts by member
    name, arrays as lists, ``char`` arrays as strings. Bytes are always accepted as the exact
    memory of a key or value, and a map the BTF does not type gives bytes (an array's key,
    its index, is an int all the same). A per-CPU map's value is a list with one value per
    CPU; assigning a single value sets every CPU's. ``m.raw`` is the same map, bytes only.
    """

    def __init__(self, native: Any, spec: dict[str, Any], typed: bool = True) -> None:
        self._native = native
        self._spec = spec
        self._typed = typed

    # -- what the map is --

    @property
    def name(self) -> str:
        return self._spec["name"]

    @property
    def type(self) -> str:
        """bpftool's name for the map type (``hash``, ``percpu_array``, ``devmap``)."""
        return self._spec["type"]

    @property
    def key_size(self) -> int:
        return self._spec["key_size"]

    @property
    def value_size(self) -> int:
        return self._spec["value_size"]

    @property
    def max_entries(self) -> int:
        return self._spec["max_entries"]

    @property
    def per_cpu(self) -> bool:
        return self._spec["per_cpu"]

    @property
    def key_type(self) -> Optional[str]:
        """The key's BTF type name (``__u32``, ``struct flow_key``), None without BTF."""
        return self._spec["key_type"]

    @property
    def value_type(self) -> Optional[str]:
        return self._spec["value_type"]

    @property
    def raw(self) -> Map:
        """This map with keys and values as bytes only."""
        return Map(self._native, self._spec, typed=False)

    def __repr__(self) -> str:
        # Nothing read from the map: a repr must not raise (a rejected program's maps do).
        return f"<bpfemu.Map {self.name} ({self.type}, max_entries {self.max_entries})>"

    # -- the mapping --

    def __getitem__(self, key: Any) -> Any:
        value = self._native.map_lookup(self.name, self._key_bytes(key))
        if value is None:
            raise KeyError(key)
        return self._value_from(value)

    def __setitem__(self, key: Any, value: Any) -> None:
        self._native.map_update(self.name, self._key_bytes(key), self._value_bytes(value))

    def __delitem__(self, key: Any) -> None:
        if not self._native.map_delete(self.name, self._key_bytes(key)):
            raise KeyError(key)

    def __iter__(self) -> Iterator[Any]:
        for key, _ in self._native.map_items(self.name):
            yield self._decode("key", key)

    def __len__(self) -> int:
        return len(self._native.map_items(self.name))

    def __contains__(self, key: object) -> bool:
        return self._native.map_lookup(self.name, self._key_bytes(key)) is not None

    def items(self) -> list[tuple[Any, Any]]:  # type: ignore[override]
        """Every (key, value), in the order ``bpftool map dump`` lists them (one snapshot)."""
        return [
            (self._decode("key", key), self._value_from(value))
            for key, value in self._native.map_items(self.name)
        ]

    def values(self) -> list[Any]:  # type: ignore[override]
        return [value for _, value in self.items()]

    # -- conversions --

    def _slot(self) -> int:
        """A per-CPU value's room in the syscall's buffer: its size rounded up to 8."""
        return (self.value_size + 7) // 8 * 8

    def _decode(self, part: str, data: bytes) -> Any:
        if not self._typed:
            return data
        typed = self._native.map_decode(self.name, part, data)
        if typed is not None:
            return typed
        if part == "key" and self.type in _INDEXED and len(data) == 4:
            # An array's key is its index, a __u32, whether or not the BTF says so (global
            # data maps and legacy maps have no key type).
            return int.from_bytes(data, "little")
        return data

    def _encode(self, part: str, value: Any, size: int) -> bytes:
        if isinstance(value, (bytes, bytearray, memoryview)):
            return bytes(value)
        if not self._typed:
            raise TypeError(f"map {self.name}: raw {part}s are bytes, not {type(value).__name__}")
        encoded = self._native.map_encode(self.name, part, json.dumps(value))
        if encoded is not None:
            return encoded
        if isinstance(value, int) and not isinstance(value, bool):
            # No BTF: an int is the value in the host's (little-endian) byte order.
            return value.to_bytes(size, "little", signed=value < 0)
        raise TypeError(
            f"map {self.name}: the object's BTF does not type the {part}: give bytes or an int"
        )

    def _key_bytes(self, key: Any) -> bytes:
        return self._encode("key", key, self.key_size)

    def _value_bytes(self, value: Any) -> bytes:
        if not self.per_cpu:
            return self._encode("value", value, self.value_size)
        cpus = self._native.cpus
        if isinstance(value, list):
            if len(value) != cpus:
                raise ValueError(
                    f"map {self.name}: {len(value)} per-CPU values, the program has {cpus} CPUs"
                )
            values = value
        else:
            values = [value] * cpus
        slot = self._slot()
        return b"".join(
            self._encode("value", v, self.value_size).ljust(slot, b"\0") for v in values
        )

    def _value_from(self, data: bytes) -> Any:
        if not self.per_cpu:
            return self._decode("value", data)
        slot = self._slot()
        return [
            self._decode("value", data[i : i + self.value_size]) for i in range(0, len(data), slot)
        ]


class Maps(Mapping):
    """The program's maps by name (``prog.maps["acl"]``), in the object's order."""

    def __init__(self, native: Any) -> None:
        self._maps = {spec["name"]: Map(native, spec) for spec in native.map_specs()}

    def __getitem__(self, name: str) -> Map:
        return self._maps[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._maps)

    def __len__(self) -> int:
        return len(self._maps)

    def __repr__(self) -> str:
        return f"<bpfemu.Maps {list(self._maps)}>"


def _run_result(d: dict[str, Any]) -> Union[RunResult, PacketFault]:
    if "error" in d:
        return PacketFault(index=d["index"], cpu=d["cpu"], error=d["error"])
    redirect = d["redirect"]
    return RunResult(
        index=d["index"],
        cpu=d["cpu"],
        retval=d["retval"],
        action=_action(d["retval"]),
        action_name=d["action"],
        data=d["data"],
        meta=d["meta"],
        redirect=Redirect(**redirect) if redirect is not None else None,
        records=[
            Record(map=r["map"], slot=r["slot"], data=r["data"], formatted=r.get("formatted"))
            for r in d["records"]
        ],
        printk=list(d["printk"]),
        insns=d["insns"],
    )


def _verdict(d: dict[str, Any]) -> Verdict:
    source = d.get("source") or {}
    return Verdict(
        program=d["name"],
        section=d["section"],
        verdict=d["verdict"],
        accepted=d["accepted"],
        processed_insns=d["processed_insns"],
        total_states=d["total_states"],
        peak_states=d["peak_states"],
        log=d.get("log", ""),
        text=d["text"],
        message=d.get("message"),
        note=d.get("note"),
        insn=d.get("insn"),
        insn_text=d.get("insn_text"),
        file=source.get("file"),
        line=source.get("line"),
        column=source.get("column"),
        source=source.get("text"),
    )


class _ThreadBound:
    """The native program, reached only from the thread that loaded it: its runtime (JIT
    code, the maps' memory) is not shared between threads, and the native side would abort
    the call. One program per thread; load the object again in each."""

    __slots__ = ("_native", "_thread")

    def __init__(self, native: Any) -> None:
        self._native = native
        # The Thread object itself, held, so that no later thread can be taken for it.
        self._thread = threading.current_thread()

    def __getattr__(self, name: str) -> Any:
        if threading.current_thread() is not self._thread:
            raise Error(
                f"this program was loaded in thread {self._thread.name!r}, which alone may use"
                f" it; load the object again in thread {threading.current_thread().name!r}"
            )
        return getattr(self._native, name)


class Program:
    """An XDP program loaded by :func:`load`.

    Its maps, packets run and replays share one runtime: map changes a packet makes are
    there for the next packet, as in the kernel. It is used from the thread that loaded it.
    """

    def __init__(self, native: Any) -> None:
        self._native = native
        self._maps: Optional[Maps] = None

    @property
    def name(self) -> str:
        """The program's (entry function's) name."""
        return self._native.name

    @property
    def section(self) -> str:
        return self._native.section

    @property
    def path(self) -> str:
        return str(self._native.path)

    @property
    def cpus(self) -> int:
        return self._native.cpus

    @property
    def maps(self) -> Maps:
        """The object's maps by name, typed by BTF (see :class:`Map`)."""
        if self._maps is None:
            self._maps = Maps(self._native)
        return self._maps

    def __repr__(self) -> str:
        return f"<bpfemu.Program {self.name} ({self.section}) from {self.path}>"

    def verify(self, log_level: int = 0) -> Verdict:
        """The verdict of loading the program into Linux 6.18 with libbpf 1.7, as
        ``bpfemu verify`` gives it, with the verifier log at ``log_level`` (0, 1 or 2)."""
        return _verdict(self._native.verify(log_level))

    def run(self, packet: Any, *, ts_ns: int = 0) -> RunResult:
        """Runs one packet (bytes, or a Scapy packet or anything with ``__bytes__``) at
        capture time ``ts_ns`` (what the program's clocks read).

        Raises :class:`VerifierError` when the verifier rejects the program (the kernel would
        not load it), :class:`RunError` when the kernel refuses the packet or the run stops.
        """
        result = _run_result(self._native.run(_bytes_of(packet, "packet"), ts_ns))
        assert isinstance(result, RunResult)
        return result

    def replay(self, capture: StrPath) -> Replay:
        """Every packet of a capture (pcap or pcapng, Ethernet), in order, at its capture
        time, as ``bpfemu replay`` runs them. A packet that does not run to the end is a
        :class:`PacketFault` among the results and is counted in ``summary.faulted``."""
        results, summary = self._native.replay(capture)
        first = summary["first_fault"]
        return Replay(
            results=[_run_result(r) for r in results],
            summary=ReplaySummary(
                packets=summary["packets"],
                actions=dict(summary["actions"]),
                faulted=summary["faulted"],
                first_fault=(first["index"], first["error"]) if first else None,
                insns=summary["insns"],
                elapsed_ms=summary["elapsed_ms"],
                packets_per_sec=summary["packets_per_sec"],
            ),
        )

    def dump_maps(self) -> dict[str, Any]:
        """Every map as ``bpfemu replay --dump-maps`` writes them (``bpftool -j map dump``'s
        form, typed by BTF)."""
        return self._native.dump_maps()


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
) -> Program:
    """Loads the object at ``path`` as libbpf 1.7 would and picks its XDP program.

    ``prog`` names the program (function or section name) when the object has several;
    ``maps`` is a map file as ``bpfemu replay --maps`` reads it (bpftool's JSON). The other
    keywords are ``bpfemu replay``'s flags of the same names (``sockets`` is the socket table
    ``--sockets`` reads, what socket lookups find; ``record_types`` is
    ``--record-type``: ``{"events": "struct event"}`` types that map's records). The
    verifier judges the program here; a rejected program loads (``verify()`` tells why) but
    does not run.

    Raises :class:`LoadError` (with the command line's message) when the object, the program
    or a file cannot be loaded.
    """
    native = _native.load(
        path,
        prog,
        maps,
        engine=engine,
        cpus=cpus,
        seed=seed,
        fib=fib,
        sockets=sockets,
        ifindex=ifindex,
        rxq=rxq,
        no_verify=no_verify,
        btf=btf,
        map_sizes=map_sizes,
        record_types=record_types,
    )
    return Program(_ThreadBound(native))
