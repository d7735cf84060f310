"""The data model a parsed NCCL log fills: the lines as evidence, processes, their communicators and channel
connections, and (filled by :mod:`.matrix`) the communicators across processes with their rank pairs."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Evidence:
    """One log line as it appeared in the input (colour codes removed), and where."""

    source: str
    lineno: int
    text: str

    def __str__(self) -> str:
        t = self.text if len(self.text) <= 300 else self.text[:297] + "..."
        return f"{self.source}:{self.lineno}: {t}"

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "line": self.lineno, "text": self.text}


@dataclass
class LocalComm:
    """One communicator as one process saw it (its ``comm 0x..`` pointer is process-local)."""

    proc: str
    ptr: str
    seq: int
    fn: str | None = None
    rank: int | None = None
    nranks: int | None = None
    cuda_dev: int | None = None
    bus_id: str | None = None
    comm_id: str | None = None
    parent: str | None = None
    color: str | None = None
    split_count: str | None = None
    nnodes: int | None = None
    local_ranks: int | None = None
    local_rank: int | None = None
    evidence: list[Evidence] = field(default_factory=list)
    group: str | None = None


@dataclass
class Channel:
    proc: str
    seq: int
    channel: int
    src: int
    dst: int
    src_dev: int | None
    dst_dev: int | None
    direction: str | None  # send | receive | None (P2P/SHM connections are printed by the sender)
    via: str
    label: str
    kind: str  # before provider refinement
    gdr: bool
    evidence: Evidence
    repeated: int = 0
    comm: LocalComm | None = None
    cls: str = ""  # after provider refinement: efa, ofi-tcp, ofi?, socket, p2p, ...
    provider_basis: str = ""

    @property
    def local_rank(self) -> int:
        return self.dst if self.direction == "receive" else self.src


@dataclass
class Process:
    """One NCCL process, keyed ``hostname:pid``."""

    key: str
    hostname: str
    pid: int
    sources: list[str] = field(default_factory=list)
    ray_name: str | None = None
    ray_ip: str | None = None
    pod: str | None = None
    bootstrap_ip: str | None = None
    bootstrap_if: str | None = None
    nccl_version: str | None = None
    nets: list[str] = field(default_factory=list)  # Using network X / Assigned NET plugin X
    plugins_loaded: list[str] = field(default_factory=list)
    plugin_failures: list[tuple[str, Evidence]] = field(default_factory=list)  # (kind, line)
    ofi_version: str | None = None
    libfabric_version: str | None = None
    provider: str | None = None
    fabric: str | None = None
    nics: int | None = None
    ofi_protocol: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    marker: dict[str, str] | None = None
    comms: list[LocalComm] = field(default_factory=list)
    warnings: list[Evidence] = field(default_factory=list)
    evidence: dict[str, Evidence] = field(default_factory=dict)  # first line of each fact
    host_id: str | None = None
    host_basis: str = ""

    def note(self, what: str, ev: Evidence) -> None:
        self.evidence.setdefault(what, ev)

    @property
    def ofi_ok(self) -> bool:
        """The aws-ofi-nccl plugin initialised in this process (provider chosen or NET plugin Libfabric)."""
        return bool(self.provider) or any("libfabric" in n.lower() or n.lower() == "ofi" for n in self.nets)

    def to_dict(self) -> dict[str, Any]:
        return {
            "process": self.key,
            "hostname": self.hostname,
            "pid": self.pid,
            "host": self.host_id,
            "host_basis": self.host_basis,
            "sources": self.sources,
            "ray_name": self.ray_name,
            "ray_ip": self.ray_ip,
            "pod": self.pod,
            "bootstrap_ip": self.bootstrap_ip,
            "nccl_version": self.nccl_version,
            "net_plugins": sorted(set(self.nets)),
            "plugins_loaded": self.plugins_loaded,
            "plugin_failures": [{"kind": k, **e.to_dict()} for k, e in self.plugin_failures],
            "aws_ofi_nccl": self.ofi_version,
            "libfabric": self.libfabric_version,
            "provider": self.provider,
            "fabric": self.fabric,
            "nics": self.nics,
            "ofi_protocol": self.ofi_protocol,
            "env": self.env,
            "marker": self.marker,
            "ranks": [
                {"rank": c.rank, "nranks": c.nranks, "cudaDev": c.cuda_dev, "busId": c.bus_id, "comm": c.group}
                for c in self.comms
            ],
        }


@dataclass
class Pair:
    """All channel connections from rank ``src`` to rank ``dst`` of one communicator."""

    src: int
    dst: int
    location: str = "unknown"  # intra | inter | unknown
    basis: str = ""
    src_host: str | None = None
    dst_host: str | None = None
    transports: Counter = field(default_factory=Counter)  # label (+GDRDMA) -> channel lines
    classes: Counter = field(default_factory=Counter)  # class -> channel lines
    lines: dict[str, list[Evidence]] = field(default_factory=dict, repr=False)  # class -> channel lines
    repeated: int = 0

    @property
    def cls(self) -> str:
        """The pair's one class for display: the worst of its classes."""
        order = ("socket", "?", "net?", "ofi?", "ib", "efa", "shm", "collnet", "nvls", "p2p")
        cands = [c for c in self.classes]
        cands.sort(key=lambda c: order.index(c) if c in order else -1)
        return cands[0] if cands else ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "src": self.src,
            "dst": self.dst,
            "location": self.location,
            "basis": self.basis,
            "src_host": self.src_host,
            "dst_host": self.dst_host,
            "transports": dict(self.transports),
            "classes": dict(self.classes),
            "repeated": self.repeated,
        }


@dataclass
class Communicator:
    """One communicator across processes: its ranks, where they live, and the pair x transport matrix."""

    key: str
    label: str
    nranks: int | None = None
    nnodes: set = field(default_factory=set)
    local_ranks: set = field(default_factory=set)
    ranks: dict[int, str] = field(default_factory=dict)  # rank -> process key
    rank_dev: dict[int, int] = field(default_factory=dict)
    conflicts: list[str] = field(default_factory=list)
    channels: list[Channel] = field(default_factory=list)
    pairs: dict[tuple[int, int], Pair] = field(default_factory=dict)
    evidence: list[Evidence] = field(default_factory=list)
    rank_host: dict[int, str | None] = field(default_factory=dict)

    @property
    def size(self) -> int:
        known = [self.nranks or 0, *(r + 1 for r in self.ranks)]
        for p in self.pairs:
            known.extend((p[0] + 1, p[1] + 1))
        return max(known) if known else 0

    @property
    def hosts(self) -> list[str]:
        return sorted({h for h in self.rank_host.values() if h})

    def grid(self) -> list[list[str]]:
        """``grid[src][dst]``: the pair's class ('' where no channel was seen)."""
        n = self.size
        g = [["" for _ in range(n)] for _ in range(n)]
        for (a, b), p in self.pairs.items():
            g[a][b] = p.cls
        return g

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.key,
            "label": self.label,
            "nranks": self.size,
            "nccl_nnodes": sorted(self.nnodes),
            "local_ranks": sorted(self.local_ranks),
            "hosts": self.hosts,
            "ranks": {
                str(r): {"process": p, "host": self.rank_host.get(r), "cudaDev": self.rank_dev.get(r)}
                for r, p in sorted(self.ranks.items())
            },
            "conflicts": self.conflicts,
            "pairs": [p.to_dict() for _, p in sorted(self.pairs.items())],
        }


@dataclass
class ParsedLog:
    sources: list[str] = field(default_factory=list)
    procs: dict[str, Process] = field(default_factory=dict)
    channels: list[Channel] = field(default_factory=list)
    markers: list[tuple[dict[str, str], Evidence]] = field(default_factory=list)
    bare_versions: list[Evidence] = field(default_factory=list)
    repeated: list[Evidence] = field(default_factory=list)
    unparsed: list[Evidence] = field(default_factory=list)  # NCCL-looking lines that did not parse
    lines: int = 0
    nccl_lines: int = 0

    def proc(self, host: str, pid: int, source: str, meta: Mapping[str, Any]) -> Process:
        key = f"{host}:{pid}"
        p = self.procs.get(key)
        if p is None:
            p = self.procs[key] = Process(key=key, hostname=host, pid=pid)
        if source not in p.sources:
            p.sources.append(source)
        if meta:
            if meta.get("ray_pid") == pid or "ray_pid" not in meta:
                p.ray_ip = p.ray_ip or meta.get("ray_ip")
                p.ray_name = p.ray_name or meta.get("ray_name")
            p.pod = p.pod or meta.get("pod")
        return p
