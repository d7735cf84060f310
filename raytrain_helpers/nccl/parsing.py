"""Reading ``NCCL_DEBUG=INFO`` output: the line prefixes, NCCL's messages, and the data model they fill.

:func:`parse` reads NCCL INFO/WARN lines under any prefix (bare, Ray driver ``(RayTrainWorker pid=..,
ip=..)`` with colours and ``[repeated Nx across cluster]``, ``kubectl logs --prefix --timestamps``) and
extracts per process (host + pid) the NCCL version, the NET plugin and OFI provider, plugin failures,
every communicator (rank, nRanks, nNodes, localRanks, cudaDev, busId) and every channel connection.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..core.constants import MARKER_PREFIX

MAX_LINE = 16384  # longer lines are parsed on their first MAX_LINE characters

# transport classes of one channel line
LOCAL_CLASSES = ("p2p", "shm", "nvls", "collnet")  # never leave the host

# --------------------------------------------------------------------------------------------
# Line level: prefixes and NCCL messages
# --------------------------------------------------------------------------------------------

#: Terminal colour codes (removed from every line before it is read or quoted).
ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
_REPEATED = re.compile(r"\s*\[repeated (\d+)x across cluster\](?:\s*\(Ray deduplicates logs.*\))?\s*$")
_POD = re.compile(r"\[pod/([^/\]\s]+)(?:/([^\]\s]+))?\]\s?")
_TS_ISO = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?\s+")
_TS_BRACKET = re.compile(r"\[\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?\]\s*")
_RAY = re.compile(r"\(([^()]{0,200}(?:\([^()]{0,100}\)[^()]{0,100})?)\)\s?")
_RAY_PID = re.compile(r"(?:^|[\s,])pid=(\d+)")
_RAY_IP = re.compile(r"(?:^|[\s,])ip=([0-9A-Za-z.:-]+)")
_RAY_SYSTEM = ("raylet", "gcs_server", "autoscaler", "dashboard", "monitor", "log_monitor")

# host:pid:tid [dev] [function:line] NCCL LEVEL message
_NCCL = re.compile(
    r"(?<![\w.-])(?P<host>[A-Za-z0-9][A-Za-z0-9._-]{0,252}):(?P<pid>\d{1,10}):(?P<tid>\d{1,10}) "
    r"\[(?P<dev>\d{1,4})\] (?:(?P<where>[^\n]{0,400}?) )?NCCL (?P<level>INFO|WARN|TRACE|ABORT)"
    r"(?: (?P<msg>.*))?$"
)
_BARE_VERSION = re.compile(r"^\s*NCCL version (?P<v>\d+\.\d+\.\d+\S*)")
_MARKER = re.compile(r"\[raytrain\] marker=(?P<marker>\S+)(?P<rest>.*)$")
_MARKER_KV = re.compile(r"\b(rank|node|host|pid)=(\S+)")

_VERSION = re.compile(r"^NCCL version (?P<v>\S+)")
_BOOTSTRAP = re.compile(r"^Bootstrap ?: Using (?P<ifname>[^:\s]+):(?P<ip>[^<\s]+)")
_CHANNEL = re.compile(
    r"^(?:Channel|Ring) (?P<ch>\d+)(?:/(?P<sub>\d+))? : (?P<src>\d+)(?:\[(?P<sdev>\d+)\])? -> "
    r"(?P<dst>\d+)(?:\[(?P<ddev>\d+)\])?(?: \[(?P<dir>send|receive)\])? via (?P<via>\S.*?)\s*$"
)
_COMM_EVENT = re.compile(
    r"^(?:(?P<fn>ncclComm\w+):? )?comm (?P<ptr>0x[0-9a-fA-F]+) (?P<rest>.*?)\s*-\s*"
    r"(?P<what>Init|Destroy|Abort) (?P<state>START|COMPLETE)"
)
_COMM_TOPO = re.compile(
    r"^comm (?P<ptr>0x[0-9a-fA-F]+) rank (?P<rank>\d+) nRanks (?P<nranks>\d+) "
    r"nNodes (?P<nnodes>\d+) localRanks (?P<lranks>\d+) localRank (?P<lrank>\d+)"
)
_KV = re.compile(r"\b(rank|nranks|cudaDev|nvmlDev|busId|commId|parent|splitCount|color|key) (-?(?:0x)?[0-9a-fA-F]+)")
_USING_NET = re.compile(r"^Using network (?P<net>.+?)\s*$")
_ASSIGNED = re.compile(r"^Assigned NET plugin (?P<net>.+?) to comm")
_INITIALIZED = re.compile(r"^Initialized NET plugin (?P<net>.+?)\s*$")
_FAILED_NET = re.compile(r"^Failed to initialize NET plugin (?P<net>.+?)\s*$")
_PLUGIN_MISSING = re.compile(
    r"^NET/Plugin ?: ?(?:Could not find:? (?P<a>\S+?)\.?\s*$|.*No plugin found \((?P<b>[^)]+)\)"
    r"|Plugin load returned \d+ : (?P<c>[^:\s]+))"
)
_PLUGIN_LOADED = re.compile(
    r"^(?:NET/Plugin ?: ?Loaded net plugin (?P<name>.+?)(?: \(v\d+\))?\s*$"
    r"|Successfully loaded external plugin (?P<lib>\S+))"
)
_OFI_INIT = re.compile(r"^NET/OFI Initializing aws-ofi-nccl (?P<v>\S+)")
_OFI_LIBFABRIC = re.compile(r"^NET/OFI Using Libfabric version (?P<v>\S+)")
_OFI_PROVIDER = re.compile(
    r"^NET/OFI Selected [Pp]rovider is (?P<prov>[^,\s(]+)(?:, fabric is (?P<fabric>[^\s(,]+))?"
    r"(?: \(found (?P<nics>\d+) nics?\))?"
)
_OFI_PROTOCOL = re.compile(r"^NET/OFI Using transport protocol (?P<p>\S+)")
_OFI_FAILURES = (
    "No eligible providers were found",
    "aws-ofi-nccl initialization failed",
    "Unable to find a protocol that worked",
    "Initializing plugin failed",
    "fi_getinfo() call failed",
    "requires at least libfabric",
    "Failed to initialize",
    "Couldn't open",
)
_ENV = re.compile(r"^(?P<var>(?:NCCL|FI|OFI_NCCL)_[A-Z0-9_]+) set by environment to (?P<val>.*?)\.?\s*$")


def strip_prefixes(line: str) -> tuple[str, dict[str, Any]]:
    """Remove Ray / kubectl / timestamp prefixes and the Ray dedup suffix; return (core, meta)."""
    meta: dict[str, Any] = {}
    if "repeated" in line:
        m = _REPEATED.search(line)
        if m:
            meta["repeated"] = int(m.group(1))
            line = line[: m.start()]
    for _ in range(8):
        s = line.lstrip()
        m = _POD.match(s)
        if m:
            meta["pod"], meta["container"] = m.group(1), m.group(2)
            line = s[m.end() :]
            continue
        m = _TS_ISO.match(s) or _TS_BRACKET.match(s)
        if m:
            line = s[m.end() :]
            continue
        end = _ray_prefix(s, meta) if s.startswith("(") else None
        if end is not None:
            line = s[end:]
            continue
        break
    return line, meta


def _ray_prefix(s: str, meta: dict[str, Any]) -> int | None:
    """Read a Ray driver prefix ``(name pid=.., ip=..)`` into ``meta`` and return where it ends; None when ``s``
    does not start with one."""
    m = _RAY.match(s)
    if not m:
        return None
    inner = m.group(1).strip()
    pid, ip = _RAY_PID.search(inner), _RAY_IP.search(inner)
    first = re.split(r"[\s,]", inner, maxsplit=1)[0]
    if not (pid or ip or first in _RAY_SYSTEM):
        return None
    if pid:
        meta["ray_pid"] = int(pid.group(1))
        name = inner[: pid.start()].strip(" ,")
        if name:
            meta["ray_name"] = name
    elif first in _RAY_SYSTEM:
        meta["ray_name"] = first
    if ip:
        meta["ray_ip"] = ip.group(1)
    return m.end()


def classify_via(via: str) -> tuple[str, str, bool]:
    """'NET/Libfabric/0/GDRDMA' -> ('NET/Libfabric', 'ofi', True). Classes: p2p shm nvls collnet socket ib
    ofi net? ? (ofi is refined later with the process's libfabric provider)."""
    v = via.strip()
    gdr = "GDRDMA" in v
    parts = v.split("/")
    head = parts[0].strip().upper()
    second = parts[1].strip() if len(parts) > 1 else ""
    if head == "P2P":
        return (f"P2P/{second}" if second else "P2P"), "p2p", gdr
    if head == "SHM":
        return "SHM", "shm", gdr
    if head.startswith("NVLS"):
        return "NVLS", "nvls", gdr
    if head.startswith("COLLNET"):
        return "CollNet", "collnet", gdr
    if head == "NET" and second:
        s = second.lower()
        if s == "socket":
            return "NET/Socket", "socket", gdr
        if s == "ib":
            return "NET/IB", "ib", gdr
        if "libfabric" in s or s in ("ofi", "aws ofi", "efa"):
            return f"NET/{second}", "ofi", gdr
        return f"NET/{second}", "net?", gdr
    return v[:40], "?", gdr


# --------------------------------------------------------------------------------------------
# Data model
# --------------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------------
# Parsing
# --------------------------------------------------------------------------------------------


def _decode(t: Any, what: str) -> str:
    if isinstance(t, bytes):
        return t.decode("utf-8", errors="replace")
    if isinstance(t, str):
        return t
    raise TypeError(
        f"{what}: expected log text (str or bytes), got {type(t).__name__}. Fix: pass the text of "
        f"the log, a list of texts, or a dict {{source name: text}} (e.g. from collect_local_logs)"
    )


def as_sources(text_or_texts: Any) -> list[tuple[str, str]]:
    """``[(source name, text)]`` from one text, a list of texts, or ``{source: text}`` (bytes are decoded)."""
    if text_or_texts is None:
        raise TypeError("text_or_texts is None. Fix: pass the log text (str), a list of texts or a dict of them")
    if isinstance(text_or_texts, (str, bytes)):
        return [("log", _decode(text_or_texts, "text_or_texts"))]
    if isinstance(text_or_texts, Mapping):
        return [(str(k), _decode(v, f"text_or_texts[{k!r}]")) for k, v in text_or_texts.items()]
    if isinstance(text_or_texts, Iterable):
        items = list(text_or_texts)
        return [(f"log[{i}]", _decode(t, f"text_or_texts[{i}]")) for i, t in enumerate(items)]
    raise TypeError(
        f"text_or_texts: unsupported type {type(text_or_texts).__name__}. Fix: pass a str, a list of "
        f"str or a dict {{source: str}}"
    )


def parse(text_or_texts: Any) -> ParsedLog:
    """Read NCCL lines from one text, a list of texts, or ``{source: text}``. Never raises on bad lines."""
    log = ParsedLog()
    seq = 0
    for source, text in as_sources(text_or_texts):
        log.sources.append(source)
        source_markers: list[tuple[dict[str, str], Evidence, dict[str, Any]]] = []
        source_procs: list[str] = []
        for lineno, raw in enumerate(text.splitlines(), 1):
            seq += 1
            log.lines += 1
            _parse_line(log, source, lineno, raw, seq, source_markers, source_procs)
        _link_markers(log, source_markers, source_procs)
    return log


def _parse_line(
    log: ParsedLog, source: str, lineno: int, raw: str, seq: int, source_markers: list, source_procs: list[str]
) -> None:
    if "\x1b" in raw:
        raw = ANSI.sub("", raw)
    line = raw.rstrip()
    if not line:
        return
    work = line if len(line) <= MAX_LINE else line[:MAX_LINE]
    if "NCCL" not in work and "[raytrain]" not in work:
        return
    core, meta = strip_prefixes(work)
    ev = Evidence(source, lineno, work)
    if MARKER_PREFIX in core:
        m = _MARKER.search(core)
        if m:
            info = {"marker": m.group("marker")}
            info.update({k: v for k, v in _MARKER_KV.findall(m.group("rest"))})
            log.markers.append((info, ev))
            source_markers.append((info, ev, meta))
        return
    m = _NCCL.search(core)
    if not m:
        if _BARE_VERSION.match(core):
            log.bare_versions.append(ev)
        elif "NCCL INFO" in core or "NCCL WARN" in core:
            log.unparsed.append(ev)
        return
    log.nccl_lines += 1
    proc = log.proc(m.group("host"), int(m.group("pid")), source, meta)
    if proc.key not in source_procs:
        source_procs.append(proc.key)
    if meta.get("repeated"):
        log.repeated.append(ev)
    msg = (m.group("msg") or "").strip()
    if m.group("level") == "WARN":
        _parse_warn(proc, msg, ev)
    elif m.group("level") == "INFO":
        _parse_info(log, proc, msg, ev, seq, meta.get("repeated", 0))


def _link_markers(log: ParsedLog, markers: list, source_procs: list[str]) -> None:
    for info, ev, meta in markers:
        target = None
        pid = info.get("pid") or (str(meta["ray_pid"]) if "ray_pid" in meta else None)
        if pid:
            cands = [p for p in log.procs.values() if str(p.pid) == pid]
            if info.get("host"):
                cands = [p for p in cands if p.hostname == info["host"]] or cands
            if meta.get("ray_ip"):
                cands = [p for p in cands if p.ray_ip in (None, meta["ray_ip"])] or cands
            if len(cands) == 1:
                target = cands[0]
        elif len(source_procs) == 1:
            target = log.procs[source_procs[0]]
        if target is not None and target.marker is None:
            target.marker = info
            target.note("marker", ev)


# --------------------------------------------------------------------------------------------
# One NCCL message: a reader per message family
# --------------------------------------------------------------------------------------------


def _parse_warn(proc: Process, msg: str, ev: Evidence) -> None:
    proc.warnings.append(ev)
    if "NET/OFI" in msg and any(s in msg for s in _OFI_FAILURES):
        proc.plugin_failures.append(("ofi", ev))


def _parse_info(log: ParsedLog, proc: Process, msg: str, ev: Evidence, seq: int, repeated: int) -> None:
    c0 = msg[:1]
    if c0 in ("C", "R") and (msg.startswith("Channel ") or msg.startswith("Ring ")):
        _parse_channel(log, proc, msg, ev, seq, repeated)
        return
    if msg.startswith("comm 0x") or msg.startswith("ncclComm"):
        _parse_comm(proc, msg, ev, seq)
        return
    for prefixes, reader in _INFO_READERS:
        if msg.startswith(prefixes):
            reader(proc, msg, ev)
            return
    if msg.startswith("NET/IB") and "No device found" in msg:
        proc.plugin_failures.append(("ib", ev))
        return
    if " set by environment to " in msg:
        _parse_env(proc, msg, ev)


def _parse_channel(log: ParsedLog, proc: Process, msg: str, ev: Evidence, seq: int, repeated: int) -> None:
    m = _CHANNEL.match(msg)
    if m is None:
        if "->" in msg:
            log.unparsed.append(ev)
        return
    label, kind, gdr = classify_via(m.group("via"))
    log.channels.append(
        Channel(
            proc=proc.key,
            seq=seq,
            channel=int(m.group("ch")),
            src=int(m.group("src")),
            dst=int(m.group("dst")),
            src_dev=int(m.group("sdev")) if m.group("sdev") else None,
            dst_dev=int(m.group("ddev")) if m.group("ddev") else None,
            direction=m.group("dir"),
            via=m.group("via"),
            label=label,
            kind=kind,
            gdr=gdr,
            evidence=ev,
            repeated=repeated,
        )
    )


_COMM_FIELDS = (
    ("rank", "rank", int),
    ("nranks", "nranks", int),
    ("cudaDev", "cuda_dev", int),
    ("busId", "bus_id", str),
    ("commId", "comm_id", str),
    ("parent", "parent", str),
    ("color", "color", str),
    ("splitCount", "split_count", str),
)


def _parse_comm(proc: Process, msg: str, ev: Evidence, seq: int) -> None:
    m = _COMM_TOPO.match(msg)
    if m:
        c = _local_comm(proc, m.group("ptr"), seq)
        c.rank = int(m.group("rank"))
        c.nranks = int(m.group("nranks"))
        c.nnodes = int(m.group("nnodes"))
        c.local_ranks = int(m.group("lranks"))
        c.local_rank = int(m.group("lrank"))
        c.evidence.append(ev)
        return
    m = _COMM_EVENT.match(msg)
    if not m or m.group("what") != "Init":
        return
    kv = dict(_KV.findall(m.group("rest")))
    c = _local_comm(proc, m.group("ptr"), seq, new=(m.group("state") == "START"), comm_id=kv.get("commId"))
    c.fn = c.fn or m.group("fn")
    for name, attr, conv in _COMM_FIELDS:
        if name in kv and getattr(c, attr) is None:
            try:
                setattr(c, attr, conv(kv[name]))
            except ValueError:
                pass
    c.evidence.append(ev)


def _local_comm(proc: Process, ptr: str, seq: int, *, new: bool = False, comm_id: str | None = None) -> LocalComm:
    """The process's latest communicator with this pointer (pointers are reused after a Destroy)."""
    for c in reversed(proc.comms):
        if c.ptr == ptr:
            fresh_init = new and any("Init START" in e.text for e in c.evidence)
            other_id = comm_id is not None and c.comm_id is not None and c.comm_id != comm_id
            if not (fresh_init or other_id):
                return c
            break
    c = LocalComm(proc=proc.key, ptr=ptr, seq=seq)
    proc.comms.append(c)
    return c


def _parse_version(proc: Process, msg: str, ev: Evidence) -> None:
    m = _VERSION.match(msg)
    if m and proc.nccl_version is None:
        proc.nccl_version = m.group("v")
        proc.note("version", ev)


def _parse_bootstrap(proc: Process, msg: str, ev: Evidence) -> None:
    m = _BOOTSTRAP.match(msg)
    if m and proc.bootstrap_ip is None:
        proc.bootstrap_if, proc.bootstrap_ip = m.group("ifname"), m.group("ip")
        proc.note("bootstrap", ev)


def _parse_ofi(proc: Process, msg: str, ev: Evidence) -> None:
    if any(s in msg for s in _OFI_FAILURES):
        proc.plugin_failures.append(("ofi", ev))
        return
    m = _OFI_PROVIDER.match(msg)
    if m:
        proc.provider = m.group("prov")
        proc.fabric = m.group("fabric")
        proc.nics = int(m.group("nics")) if m.group("nics") else None
        proc.note("provider", ev)
        return
    m = _OFI_INIT.match(msg)
    if m:
        proc.ofi_version = m.group("v")
        proc.note("ofi", ev)
        return
    m = _OFI_LIBFABRIC.match(msg)
    if m:
        proc.libfabric_version = m.group("v")
        return
    m = _OFI_PROTOCOL.match(msg)
    if m:
        proc.ofi_protocol = m.group("p")


def _parse_plugin(proc: Process, msg: str, ev: Evidence) -> None:
    m = _PLUGIN_MISSING.match(msg)
    if m:
        lib = m.group("a") or m.group("b") or m.group("c") or "?"
        proc.plugin_failures.append(("plugin-missing:" + lib, ev))
        return
    m = _PLUGIN_LOADED.match(msg)
    if m:
        proc.plugins_loaded.append(m.group("name") or m.group("lib"))
        proc.note("plugin-loaded", ev)


def _parse_using_network(proc: Process, msg: str, ev: Evidence) -> None:
    m = _USING_NET.match(msg)
    if m:
        proc.nets.append(m.group("net"))
        proc.note("net:" + m.group("net"), ev)


def _parse_assigned(proc: Process, msg: str, ev: Evidence) -> None:
    m = _ASSIGNED.match(msg)
    if m:
        proc.nets.append(m.group("net"))
        proc.note("assigned:" + m.group("net"), ev)


def _parse_initialized(proc: Process, msg: str, ev: Evidence) -> None:
    m = _INITIALIZED.match(msg)
    if m:
        proc.note("net-init:" + m.group("net"), ev)


def _parse_failed_net(proc: Process, msg: str, ev: Evidence) -> None:
    m = _FAILED_NET.match(msg)
    if m:
        proc.plugin_failures.append(("net-init:" + m.group("net"), ev))


def _parse_env(proc: Process, msg: str, ev: Evidence) -> None:
    m = _ENV.match(msg)
    if m:
        proc.env[m.group("var")] = m.group("val")
        proc.note("env:" + m.group("var"), ev)


#: Message prefix(es) -> reader, tried in order after channel and communicator lines.
_INFO_READERS = (
    (("NCCL version",), _parse_version),
    (("Bootstrap",), _parse_bootstrap),
    (("NET/OFI",), _parse_ofi),
    (("NET/Plugin", "Successfully loaded"), _parse_plugin),
    (("Using network",), _parse_using_network),
    (("Assigned NET plugin",), _parse_assigned),
    (("Initialized NET plugin",), _parse_initialized),
    (("Failed to initialize NET plugin",), _parse_failed_net),
)
