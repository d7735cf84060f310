"""Verify: a topology-aware audit of the transports NCCL really used.

When EFA or the aws-ofi-nccl plugin is misconfigured, NCCL silently falls back to TCP sockets: the job
succeeds at a fraction of the speed. Grepping for ``Using network Socket`` is not a test: a perfectly
healthy single-node NVLink run prints it too (it only names the NET plugin NCCL loaded; no rank pair has
to use it). This module reads ``NCCL_DEBUG=INFO`` output instead, rank pair by rank pair:

* :func:`parse` reads NCCL INFO/WARN lines under any prefix (bare, Ray driver ``(RayTrainWorker pid=..,
  ip=..)`` with colours and ``[repeated Nx across cluster]``, ``kubectl logs --prefix --timestamps``) and
  extracts per process (host + pid) the NCCL version, the NET plugin and OFI provider, plugin failures,
  every communicator (rank, nRanks, nNodes, localRanks, cudaDev, busId) and every channel connection.
* :func:`audit` builds the rank-pair x transport matrix of each communicator, classifies each pair as
  intra-node or inter-node by host identity (NCCL hostname, split by bootstrap IP; or ``hosts_hint``),
  and gives a verdict against the expected transport, with the exact log lines each finding rests on.
* :func:`plot_matrix` draws a rank x rank transport heatmap.
* :func:`collect_local_logs` / :func:`collect_pod_logs` gather one run's Ray worker logs (by run marker).
* :func:`compare_runs` compares two benchmark runs only after both audits confirm their transports.
* ``raytrain-tutorial audit LOG [LOG...] [--expect ...] [--json]``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import re
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

__all__ = [
    "EXPECTATIONS", "Evidence", "Finding", "Process", "Communicator", "Pair", "ParsedLog", "AuditResult",
    "Comparison", "parse", "audit", "plot_matrix", "collect_local_logs", "collect_pod_logs", "select_run",
    "compare_runs", "register_cli",
]

#: What ``expect`` may be. ``ib`` is accepted for InfiniBand clusters; settings use the other five.
EXPECTATIONS = ("auto", "efa", "p2p", "socket", "none", "ib")
MARKER_PREFIX = "[raytrain] marker="
MAX_LINE = 16384                 # longer lines are parsed on their first MAX_LINE characters
MAX_EVIDENCE = 6                 # log lines quoted per finding

# transport classes of one channel line
LOCAL_CLASSES = ("p2p", "shm", "nvls", "collnet")          # never leave the host
_CLASS_ABBR = {"p2p": "P2P", "shm": "SHM", "nvls": "NVLS", "collnet": "CNET", "efa": "EFA", "ib": "IB",
               "socket": "SOCK", "ofi?": "OFI?", "net?": "NET?", "?": "?"}

# --------------------------------------------------------------------------------------------
# Line level: prefixes and NCCL messages
# --------------------------------------------------------------------------------------------

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
_REPEATED = re.compile(r"\s*\[repeated (\d+)x across cluster\](?:\s*\(Ray deduplicates logs.*\))?\s*$")
_POD = re.compile(r"\[pod/([^/\]\s]+)(?:/([^\]\s]+))?\]\s?")
_TS_ISO = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?\s+")
_TS_BRACKET = re.compile(r"\[\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?\]\s*")
_RAY = re.compile(r"\(([^()]{0,200}(?:\([^()]{0,100}\)[^()]{0,100})?)\)\s?")
_RAY_PID = re.compile(r"(?:^|[\s,])pid=(\d+)")
_RAY_IP = re.compile(r"(?:^|[\s,])ip=([0-9A-Za-z.:-]+)")
_RAY_SYSTEM = ("raylet", "gcs_server", "autoscaler", "dashboard", "monitor", "log_monitor")

# host:pid:tid [dev] [function:line] NCCL LEVEL message
_NCCL = re.compile(r"(?<![\w.-])(?P<host>[A-Za-z0-9][A-Za-z0-9._-]{0,252}):(?P<pid>\d{1,10}):(?P<tid>\d{1,10}) "
                   r"\[(?P<dev>\d{1,4})\] (?:(?P<where>[^\n]{0,400}?) )?NCCL (?P<level>INFO|WARN|TRACE|ABORT)"
                   r"(?: (?P<msg>.*))?$")
_BARE_VERSION = re.compile(r"^\s*NCCL version (?P<v>\d+\.\d+\.\d+\S*)")
_MARKER = re.compile(r"\[raytrain\] marker=(?P<marker>\S+)(?P<rest>.*)$")
_MARKER_KV = re.compile(r"\b(rank|node|host|pid)=(\S+)")

_VERSION = re.compile(r"^NCCL version (?P<v>\S+)")
_BOOTSTRAP = re.compile(r"^Bootstrap ?: Using (?P<ifname>[^:\s]+):(?P<ip>[^<\s]+)")
_CHANNEL = re.compile(r"^(?:Channel|Ring) (?P<ch>\d+)(?:/(?P<sub>\d+))? : (?P<src>\d+)(?:\[(?P<sdev>\d+)\])? -> "
                      r"(?P<dst>\d+)(?:\[(?P<ddev>\d+)\])?(?: \[(?P<dir>send|receive)\])? via (?P<via>\S.*?)\s*$")
_COMM_EVENT = re.compile(r"^(?:(?P<fn>ncclComm\w+):? )?comm (?P<ptr>0x[0-9a-fA-F]+) (?P<rest>.*?)\s*-\s*"
                         r"(?P<what>Init|Destroy|Abort) (?P<state>START|COMPLETE)")
_COMM_TOPO = re.compile(r"^comm (?P<ptr>0x[0-9a-fA-F]+) rank (?P<rank>\d+) nRanks (?P<nranks>\d+) "
                        r"nNodes (?P<nnodes>\d+) localRanks (?P<lranks>\d+) localRank (?P<lrank>\d+)")
_KV = re.compile(r"\b(rank|nranks|cudaDev|nvmlDev|busId|commId|parent|splitCount|color|key) (-?(?:0x)?[0-9a-fA-F]+)")
_USING_NET = re.compile(r"^Using network (?P<net>.+?)\s*$")
_ASSIGNED = re.compile(r"^Assigned NET plugin (?P<net>.+?) to comm")
_INITIALIZED = re.compile(r"^Initialized NET plugin (?P<net>.+?)\s*$")
_FAILED_NET = re.compile(r"^Failed to initialize NET plugin (?P<net>.+?)\s*$")
_PLUGIN_MISSING = re.compile(r"^NET/Plugin ?: ?(?:Could not find:? (?P<a>\S+?)\.?\s*$|.*No plugin found \((?P<b>[^)]+)\)"
                             r"|Plugin load returned \d+ : (?P<c>[^:\s]+))")
_PLUGIN_LOADED = re.compile(r"^(?:NET/Plugin ?: ?Loaded net plugin (?P<name>.+?)(?: \(v\d+\))?\s*$"
                            r"|Successfully loaded external plugin (?P<lib>\S+))")
_OFI_INIT = re.compile(r"^NET/OFI Initializing aws-ofi-nccl (?P<v>\S+)")
_OFI_LIBFABRIC = re.compile(r"^NET/OFI Using Libfabric version (?P<v>\S+)")
_OFI_PROVIDER = re.compile(r"^NET/OFI Selected [Pp]rovider is (?P<prov>[^,\s(]+)(?:, fabric is (?P<fabric>[^\s(,]+))?"
                           r"(?: \(found (?P<nics>\d+) nics?\))?")
_OFI_PROTOCOL = re.compile(r"^NET/OFI Using transport protocol (?P<p>\S+)")
_OFI_FAILURES = ("No eligible providers were found", "aws-ofi-nccl initialization failed",
                 "Unable to find a protocol that worked", "Initializing plugin failed", "fi_getinfo() call failed",
                 "requires at least libfabric", "Failed to initialize", "Couldn't open")
_ENV = re.compile(r"^(?P<var>(?:NCCL|FI|OFI_NCCL)_[A-Z0-9_]+) set by environment to (?P<val>.*?)\.?\s*$")


def _strip_prefixes(line: str) -> tuple[str, dict[str, Any]]:
    """Remove Ray / kubectl / timestamp prefixes and the Ray dedup suffix; return (core, meta)."""
    meta: dict[str, Any] = {}
    if "repeated" in line:
        m = _REPEATED.search(line)
        if m:
            meta["repeated"] = int(m.group(1))
            line = line[:m.start()]
    for _ in range(8):
        s = line.lstrip()
        m = _POD.match(s)
        if m:
            meta["pod"], meta["container"] = m.group(1), m.group(2)
            line = s[m.end():]
            continue
        m = _TS_ISO.match(s) or _TS_BRACKET.match(s)
        if m:
            line = s[m.end():]
            continue
        if s.startswith("("):
            m = _RAY.match(s)
            if m:
                inner = m.group(1).strip()
                pid, ip = _RAY_PID.search(inner), _RAY_IP.search(inner)
                first = re.split(r"[\s,]", inner, maxsplit=1)[0]
                if pid or ip or first in _RAY_SYSTEM:
                    if pid:
                        meta["ray_pid"] = int(pid.group(1))
                        name = inner[:pid.start()].strip(" ,")
                        if name:
                            meta["ray_name"] = name
                    elif first in _RAY_SYSTEM:
                        meta["ray_name"] = first
                    if ip:
                        meta["ray_ip"] = ip.group(1)
                    line = s[m.end():]
                    continue
        break
    return line, meta


def _classify_via(via: str) -> tuple[str, str, bool]:
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
    direction: str | None        # send | receive | None (P2P/SHM connections are printed by the sender)
    via: str
    label: str
    kind: str                    # before provider refinement
    gdr: bool
    evidence: Evidence
    repeated: int = 0
    comm: LocalComm | None = None
    cls: str = ""                # after provider refinement: efa, ofi-tcp, ofi?, socket, p2p, ...
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
    nets: list[str] = field(default_factory=list)             # Using network X / Assigned NET plugin X
    plugins_loaded: list[str] = field(default_factory=list)
    plugin_failures: list[tuple[str, Evidence]] = field(default_factory=list)   # (kind, line)
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
    evidence: dict[str, Evidence] = field(default_factory=dict)    # first line of each fact
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
            "process": self.key, "hostname": self.hostname, "pid": self.pid, "host": self.host_id,
            "host_basis": self.host_basis, "sources": self.sources, "ray_name": self.ray_name,
            "ray_ip": self.ray_ip, "pod": self.pod, "bootstrap_ip": self.bootstrap_ip,
            "nccl_version": self.nccl_version, "net_plugins": sorted(set(self.nets)),
            "plugins_loaded": self.plugins_loaded,
            "plugin_failures": [{"kind": k, **e.to_dict()} for k, e in self.plugin_failures],
            "aws_ofi_nccl": self.ofi_version, "libfabric": self.libfabric_version, "provider": self.provider,
            "fabric": self.fabric, "nics": self.nics, "ofi_protocol": self.ofi_protocol, "env": self.env,
            "marker": self.marker,
            "ranks": [{"rank": c.rank, "nranks": c.nranks, "cudaDev": c.cuda_dev, "busId": c.bus_id,
                       "comm": c.group} for c in self.comms],
        }


@dataclass
class Pair:
    """All channel connections from rank ``src`` to rank ``dst`` of one communicator."""
    src: int
    dst: int
    location: str = "unknown"            # intra | inter | unknown
    basis: str = ""
    src_host: str | None = None
    dst_host: str | None = None
    transports: Counter = field(default_factory=Counter)     # label (+GDRDMA) -> channel lines
    classes: Counter = field(default_factory=Counter)        # class -> channel lines
    lines: dict[str, list[Evidence]] = field(default_factory=dict, repr=False)   # class -> channel lines
    repeated: int = 0

    @property
    def cls(self) -> str:
        """The pair's one class for display: the worst of its classes."""
        order = ("socket", "?", "net?", "ofi?", "ib", "efa", "shm", "collnet", "nvls", "p2p")
        cands = [c for c in self.classes]
        cands.sort(key=lambda c: order.index(c) if c in order else -1)
        return cands[0] if cands else ""

    def to_dict(self) -> dict[str, Any]:
        return {"src": self.src, "dst": self.dst, "location": self.location, "basis": self.basis,
                "src_host": self.src_host, "dst_host": self.dst_host, "transports": dict(self.transports),
                "classes": dict(self.classes), "repeated": self.repeated}


@dataclass
class Communicator:
    """One communicator across processes: its ranks, where they live, and the pair x transport matrix."""
    key: str
    label: str
    nranks: int | None = None
    nnodes: set = field(default_factory=set)
    local_ranks: set = field(default_factory=set)
    ranks: dict[int, str] = field(default_factory=dict)          # rank -> process key
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
        return {"id": self.key, "label": self.label, "nranks": self.size,
                "nccl_nnodes": sorted(self.nnodes), "local_ranks": sorted(self.local_ranks),
                "hosts": self.hosts,
                "ranks": {str(r): {"process": p, "host": self.rank_host.get(r), "cudaDev": self.rank_dev.get(r)}
                          for r, p in sorted(self.ranks.items())},
                "conflicts": self.conflicts,
                "pairs": [p.to_dict() for _, p in sorted(self.pairs.items())]}


@dataclass
class ParsedLog:
    sources: list[str] = field(default_factory=list)
    procs: dict[str, Process] = field(default_factory=dict)
    channels: list[Channel] = field(default_factory=list)
    markers: list[tuple[dict[str, str], Evidence]] = field(default_factory=list)
    bare_versions: list[Evidence] = field(default_factory=list)
    repeated: list[Evidence] = field(default_factory=list)
    unparsed: list[Evidence] = field(default_factory=list)      # NCCL-looking lines that did not parse
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

def _as_sources(text_or_texts: Any) -> list[tuple[str, str]]:
    def dec(t: Any, what: str) -> str:
        if isinstance(t, bytes):
            return t.decode("utf-8", errors="replace")
        if isinstance(t, str):
            return t
        raise TypeError(f"{what}: expected log text (str or bytes), got {type(t).__name__}. Fix: pass the text of "
                        f"the log, a list of texts, or a dict {{source name: text}} (e.g. from collect_local_logs)")

    if text_or_texts is None:
        raise TypeError("text_or_texts is None. Fix: pass the log text (str), a list of texts or a dict of them")
    if isinstance(text_or_texts, (str, bytes)):
        return [("log", dec(text_or_texts, "text_or_texts"))]
    if isinstance(text_or_texts, Mapping):
        return [(str(k), dec(v, f"text_or_texts[{k!r}]")) for k, v in text_or_texts.items()]
    if isinstance(text_or_texts, Iterable):
        items = list(text_or_texts)
        return [(f"log[{i}]", dec(t, f"text_or_texts[{i}]")) for i, t in enumerate(items)]
    raise TypeError(f"text_or_texts: unsupported type {type(text_or_texts).__name__}. Fix: pass a str, a list of "
                    f"str or a dict {{source: str}}")


def parse(text_or_texts: Any) -> ParsedLog:
    """Read NCCL lines from one text, a list of texts, or ``{source: text}``. Never raises on bad lines."""
    P = ParsedLog()
    seq = 0
    for source, text in _as_sources(text_or_texts):
        P.sources.append(source)
        source_markers: list[tuple[dict[str, str], Evidence, dict[str, Any]]] = []
        source_procs: list[str] = []
        for lineno, raw in enumerate(text.splitlines(), 1):
            seq += 1
            P.lines += 1
            if "\x1b" in raw:
                raw = _ANSI.sub("", raw)
            line = raw.rstrip()
            if not line:
                continue
            work = line if len(line) <= MAX_LINE else line[:MAX_LINE]
            if "NCCL" not in work and "[raytrain]" not in work:
                continue
            core, meta = _strip_prefixes(work)
            ev = Evidence(source, lineno, line if len(line) <= MAX_LINE else line[:MAX_LINE])
            if "[raytrain] marker=" in core:
                m = _MARKER.search(core)
                if m:
                    info = {"marker": m.group("marker")}
                    info.update({k: v for k, v in _MARKER_KV.findall(m.group("rest"))})
                    P.markers.append((info, ev))
                    source_markers.append((info, ev, meta))
                continue
            m = _NCCL.search(core)
            if not m:
                mv = _BARE_VERSION.match(core)
                if mv:
                    P.bare_versions.append(ev)
                elif "NCCL INFO" in core or "NCCL WARN" in core:
                    P.unparsed.append(ev)
                continue
            P.nccl_lines += 1
            proc = P.proc(m.group("host"), int(m.group("pid")), source, meta)
            if proc.key not in source_procs:
                source_procs.append(proc.key)
            if meta.get("repeated"):
                P.repeated.append(ev)
            _parse_message(P, proc, m.group("level"), (m.group("msg") or "").strip(), ev, seq,
                           meta.get("repeated", 0))
        _link_markers(P, source_markers, source_procs)
    return P


def _link_markers(P: ParsedLog, markers: list, source_procs: list[str]) -> None:
    for info, ev, meta in markers:
        target = None
        pid = info.get("pid") or (str(meta["ray_pid"]) if "ray_pid" in meta else None)
        if pid:
            cands = [p for p in P.procs.values() if str(p.pid) == pid]
            if info.get("host"):
                cands = [p for p in cands if p.hostname == info["host"]] or cands
            if meta.get("ray_ip"):
                cands = [p for p in cands if p.ray_ip in (None, meta["ray_ip"])] or cands
            if len(cands) == 1:
                target = cands[0]
        elif len(source_procs) == 1:
            target = P.procs[source_procs[0]]
        if target is not None and target.marker is None:
            target.marker = info
            target.note("marker", ev)


def _parse_message(P: ParsedLog, proc: Process, level: str, msg: str, ev: Evidence, seq: int, repeated: int) -> None:
    if level == "WARN":
        proc.warnings.append(ev)
        if "NET/OFI" in msg and any(s in msg for s in _OFI_FAILURES):
            proc.plugin_failures.append(("ofi", ev))
        return
    if level != "INFO":
        return
    c0 = msg[:1]
    if c0 in ("C", "R") and (msg.startswith("Channel ") or msg.startswith("Ring ")):
        m = _CHANNEL.match(msg)
        if m is None:
            if "->" in msg:
                P.unparsed.append(ev)
            return
        label, kind, gdr = _classify_via(m.group("via"))
        P.channels.append(Channel(
            proc=proc.key, seq=seq, channel=int(m.group("ch")), src=int(m.group("src")), dst=int(m.group("dst")),
            src_dev=int(m.group("sdev")) if m.group("sdev") else None,
            dst_dev=int(m.group("ddev")) if m.group("ddev") else None, direction=m.group("dir"),
            via=m.group("via"), label=label, kind=kind, gdr=gdr, evidence=ev, repeated=repeated))
        return
    if msg.startswith("comm 0x") or msg.startswith("ncclComm"):
        m = _COMM_TOPO.match(msg)
        if m:
            c = _local_comm(proc, m.group("ptr"), seq, create_if_missing=True)
            c.rank = int(m.group("rank"))
            c.nranks = int(m.group("nranks"))
            c.nnodes = int(m.group("nnodes"))
            c.local_ranks = int(m.group("lranks"))
            c.local_rank = int(m.group("lrank"))
            c.evidence.append(ev)
            return
        m = _COMM_EVENT.match(msg)
        if m:
            if m.group("what") != "Init":
                return
            kv = dict(_KV.findall(m.group("rest")))
            c = _local_comm(proc, m.group("ptr"), seq, create_if_missing=True,
                            new=(m.group("state") == "START"), comm_id=kv.get("commId"))
            c.fn = c.fn or m.group("fn")
            for name, attr, conv in (("rank", "rank", int), ("nranks", "nranks", int), ("cudaDev", "cuda_dev", int),
                                     ("busId", "bus_id", str), ("commId", "comm_id", str),
                                     ("parent", "parent", str), ("color", "color", str),
                                     ("splitCount", "split_count", str)):
                if name in kv and getattr(c, attr) is None:
                    try:
                        setattr(c, attr, conv(kv[name]))
                    except ValueError:
                        pass
            c.evidence.append(ev)
        return
    if msg.startswith("NCCL version"):
        m = _VERSION.match(msg)
        if m and proc.nccl_version is None:
            proc.nccl_version = m.group("v")
            proc.note("version", ev)
        return
    if msg.startswith("Bootstrap"):
        m = _BOOTSTRAP.match(msg)
        if m and proc.bootstrap_ip is None:
            proc.bootstrap_if, proc.bootstrap_ip = m.group("ifname"), m.group("ip")
            proc.note("bootstrap", ev)
        return
    if msg.startswith("NET/OFI"):
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
        return
    if msg.startswith("NET/Plugin") or msg.startswith("Successfully loaded"):
        m = _PLUGIN_MISSING.match(msg)
        if m:
            lib = m.group("a") or m.group("b") or m.group("c") or "?"
            proc.plugin_failures.append(("plugin-missing:" + lib, ev))
            return
        m = _PLUGIN_LOADED.match(msg)
        if m:
            proc.plugins_loaded.append(m.group("name") or m.group("lib"))
            proc.note("plugin-loaded", ev)
        return
    if msg.startswith("Using network"):
        m = _USING_NET.match(msg)
        if m:
            proc.nets.append(m.group("net"))
            proc.note("net:" + m.group("net"), ev)
        return
    if msg.startswith("Assigned NET plugin"):
        m = _ASSIGNED.match(msg)
        if m:
            proc.nets.append(m.group("net"))
            proc.note("assigned:" + m.group("net"), ev)
        return
    if msg.startswith("Initialized NET plugin"):
        m = _INITIALIZED.match(msg)
        if m:
            proc.note("net-init:" + m.group("net"), ev)
        return
    if msg.startswith("Failed to initialize NET plugin"):
        m = _FAILED_NET.match(msg)
        if m:
            proc.plugin_failures.append(("net-init:" + m.group("net"), ev))
        return
    if msg.startswith("NET/IB") and "No device found" in msg:
        proc.plugin_failures.append(("ib", ev))
        return
    if " set by environment to " in msg:
        m = _ENV.match(msg)
        if m:
            proc.env[m.group("var")] = m.group("val")
            proc.note("env:" + m.group("var"), ev)
        return


def _local_comm(proc: Process, ptr: str, seq: int, *, create_if_missing: bool, new: bool = False,
                comm_id: str | None = None) -> LocalComm:
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


# --------------------------------------------------------------------------------------------
# Communicators, hosts and the pair matrix
# --------------------------------------------------------------------------------------------

def _group_key(proc: Process, c: LocalComm, ordinal: dict[tuple[str, int | None], int]) -> tuple[str, str]:
    if c.comm_id:
        return f"commId:{c.comm_id}", f"commId {c.comm_id}"
    if c.parent:
        parent = next((p for p in reversed(proc.comms) if p.ptr == c.parent and p.seq < c.seq), None)
        if parent is not None and parent.group:
            return (f"split:{parent.group}:{c.color}:{c.split_count}",
                    f"split of {parent.group.split(':', 1)[-1]} (color {c.color})")
        return f"split:?:{c.color}:{c.split_count}:{c.nranks}", f"split comm (color {c.color}, parent not in log)"
    k = (proc.key, c.nranks)
    ordinal[k] = ordinal.get(k, 0) + 1
    return f"seq:{c.nranks}:{ordinal[k]}", f"{c.nranks}-rank comm #{ordinal[k]} (no commId in log)"


def _build_comms(P: ParsedLog) -> dict[str, Communicator]:
    comms: dict[str, Communicator] = {}
    ordinal: dict[tuple[str, int | None], int] = {}
    for proc in P.procs.values():
        for c in sorted(proc.comms, key=lambda c: c.seq):
            key, label = _group_key(proc, c, ordinal)
            c.group = key
            g = comms.get(key)
            if g is None:
                g = comms[key] = Communicator(key=key, label=label)
            if c.nranks is not None:
                g.nranks = max(g.nranks or 0, c.nranks)
            if c.nnodes is not None:
                g.nnodes.add(c.nnodes)
            if c.local_ranks is not None:
                g.local_ranks.add(c.local_ranks)
            if c.rank is not None:
                prev = g.ranks.get(c.rank)
                if prev is None:
                    g.ranks[c.rank] = proc.key
                    if c.cuda_dev is not None:
                        g.rank_dev[c.rank] = c.cuda_dev
                elif prev != proc.key:
                    g.conflicts.append(f"rank {c.rank} claimed by {prev} and {proc.key}")
            g.evidence.extend(c.evidence[:2])
    # attribute channel lines: the printing process's latest communicator in which it holds the local rank
    for ch in P.channels:
        proc = P.procs[ch.proc]
        hi = max(ch.src, ch.dst)
        cands = [c for c in proc.comms if (c.rank is None or c.rank == ch.local_rank)
                 and (c.nranks is None or c.nranks > hi)]
        exact = [c for c in cands if c.rank == ch.local_rank]
        cands = exact or cands
        before = [c for c in cands if c.seq < ch.seq]
        chosen = (before or cands)[-1] if cands else None
        ch.comm = chosen
        key = chosen.group if chosen is not None and chosen.group else "anon"
        g = comms.get(key)
        if g is None:
            g = comms[key] = Communicator(key=key, label="channel lines without a communicator line")
        if key == "anon":
            prev = g.ranks.get(ch.local_rank)
            if prev is None:
                g.ranks[ch.local_rank] = proc.key
            elif prev != proc.key and not any(str(ch.local_rank) in s for s in g.conflicts):
                g.conflicts.append(f"rank {ch.local_rank} printed by {prev} and {proc.key}")
        g.channels.append(ch)
    return comms


def _assign_hosts(P: ParsedLog, comms: dict[str, Communicator], hosts_hint: Any) -> str:
    """Give every process a host identity; return a sentence saying what it rested on."""
    by_str: dict[str, str] = {}
    by_rank: dict[int, str] = {}
    if hosts_hint is not None:
        if not isinstance(hosts_hint, Mapping):
            raise TypeError(f"hosts_hint: expected a mapping, got {type(hosts_hint).__name__}. Fix: pass "
                            f"{{hostname, IP or pod: host}} or {{world rank: host}}, or None")
        for k, v in hosts_hint.items():
            if isinstance(k, bool) or not isinstance(k, (int, str)):
                raise TypeError(f"hosts_hint key {k!r}: expected a hostname/IP/pod (str) or a world rank (int)")
            if isinstance(k, int):
                by_rank[k] = str(v)
            else:
                by_str[k] = str(v)
    world = max(comms.values(), key=lambda g: (g.size, len(g.ranks)), default=None)
    rank_of: dict[str, int] = {}
    if world is not None:
        rank_of = {pk: r for r, pk in world.ranks.items()}
    hinted = 0
    rest: dict[str, list[Process]] = {}
    for p in P.procs.values():
        label = None
        if by_rank and p.key in rank_of and rank_of[p.key] in by_rank:
            label = by_rank[rank_of[p.key]]
        for k in (p.key, p.hostname, p.bootstrap_ip, p.ray_ip, p.pod, *p.sources):
            if label is None and k and k in by_str:
                label = by_str[k]
        if label is not None:
            p.host_id, p.host_basis = label, "hosts_hint"
            hinted += 1
        else:
            rest.setdefault(p.hostname, []).append(p)
    split = []
    for hostname, procs in rest.items():
        ips = {p.bootstrap_ip for p in procs if p.bootstrap_ip}
        kind = "bootstrap IP"
        if not ips:
            ips = {p.ray_ip for p in procs if p.ray_ip}
            kind = "Ray node IP"
        if len(ips) <= 1:
            for p in procs:
                p.host_id, p.host_basis = hostname, "NCCL hostname"
        else:
            split.append(f"{hostname} by {kind}")
            for p in procs:
                ip = p.bootstrap_ip if kind == "bootstrap IP" else p.ray_ip
                p.host_id = f"{hostname}@{ip}" if ip else None
                p.host_basis = f"NCCL hostname + {kind}" if ip else f"NCCL hostname {hostname} is ambiguous"
    parts = []
    if hinted:
        parts.append(f"hosts_hint for {hinted} process(es)")
    if rest:
        parts.append("NCCL hostnames (the prefix host:pid:tid of every NCCL line)")
    if split:
        parts.append(f"one hostname with several IPs split ({', '.join(split)})")
    for g in comms.values():
        g.rank_host = {r: P.procs[pk].host_id for r, pk in g.ranks.items()}
    return "; ".join(parts) or "no NCCL processes"


def _classify_pairs(P: ParsedLog, comms: dict[str, Communicator]) -> None:
    known = {p.provider for p in P.procs.values() if p.provider}
    consensus = next(iter(known)) if len(known) == 1 else None
    for g in comms.values():
        for ch in g.channels:
            proc = P.procs[ch.proc]
            if ch.kind == "ofi":
                prov = proc.provider
                if prov:
                    ch.provider_basis = f"provider of {proc.key}"
                elif consensus:
                    prov = consensus
                    ch.provider_basis = "provider printed by the other processes"
                if prov is None:
                    ch.cls = "ofi?"
                elif prov.lower().startswith("efa"):
                    ch.cls = "efa"
                else:
                    ch.cls = f"ofi-{prov.lower()}"
            else:
                ch.cls = ch.kind
            pair = g.pairs.get((ch.src, ch.dst))
            if pair is None:
                pair = g.pairs[(ch.src, ch.dst)] = Pair(ch.src, ch.dst)
            lab = ch.label + ("/GDRDMA" if ch.gdr else "")
            pair.transports[lab] += 1
            pair.classes[ch.cls] += 1
            if ch.repeated:
                pair.repeated += ch.repeated
            pair.lines.setdefault(ch.cls, []).append(ch.evidence)
        nn = g.nnodes
        for (a, b), pair in g.pairs.items():
            ha, hb = g.rank_host.get(a), g.rank_host.get(b)
            pair.src_host, pair.dst_host = ha, hb
            if ha and hb:
                pair.location = "intra" if ha == hb else "inter"
                pa, pb = P.procs[g.ranks[a]], P.procs[g.ranks[b]]
                bases = sorted({pa.host_basis, pb.host_basis})
                pair.basis = " / ".join(bases)
            elif nn == {1}:
                pair.location, pair.basis = "intra", "NCCL nNodes 1"
            elif all(c in LOCAL_CLASSES for c in pair.classes):
                pair.location, pair.basis = "intra", "transport (P2P/SHM/NVLS never leave a host)"
            else:
                missing = [str(r) for r, h in ((a, ha), (b, hb)) if not h]
                pair.location = "unknown"
                pair.basis = f"no host for rank {', '.join(missing)} (its process printed no communicator line)"


# --------------------------------------------------------------------------------------------
# The audit
# --------------------------------------------------------------------------------------------

@dataclass
class Finding:
    severity: str                 # fail | warn | info | pass
    code: str                     # fallback | plugin-failure | degraded | unexpected | no-nccl | inconclusive | ...
    message: str
    evidence: list[Evidence] = field(default_factory=list)
    more: int = 0                 # matching lines not quoted

    def to_dict(self) -> dict[str, Any]:
        return {"severity": self.severity, "code": self.code, "message": self.message,
                "evidence": [e.to_dict() for e in self.evidence], "more_lines": self.more}


_VERDICT_ORDER = ("fallback", "plugin-failure", "degraded", "unexpected", "no-nccl", "inconclusive")


def _ev(lines: Iterable[Evidence], limit: int = MAX_EVIDENCE) -> tuple[list[Evidence], int]:
    seen: list[Evidence] = []
    n = 0
    for e in lines:
        if e in seen:
            continue
        n += 1
        if len(seen) < limit:
            seen.append(e)
    return seen, n - len(seen)


@dataclass
class AuditResult:
    ok: bool
    verdict: str                  # pass | n/a | fallback | plugin-failure | degraded | unexpected | no-nccl | inconclusive
    expect: str                   # as asked
    expected: str                 # resolved (auto -> efa | ib | p2p)
    expected_basis: str
    summary: str
    host_basis: str
    findings: list[Finding]
    matrix: list[Communicator]    # world (largest) communicator first
    processes: list[Process]
    stats: dict[str, int]

    @property
    def world(self) -> Communicator | None:
        return self.matrix[0] if self.matrix else None

    @property
    def hosts(self) -> list[str]:
        return sorted({p.host_id for p in self.processes if p.host_id})

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "verdict": self.verdict, "expect": self.expect, "expected": self.expected,
                "expected_basis": self.expected_basis, "summary": self.summary, "host_basis": self.host_basis,
                "hosts": self.hosts, "findings": [f.to_dict() for f in self.findings],
                "communicators": [g.to_dict() for g in self.matrix],
                "processes": [p.to_dict() for p in self.processes], "stats": self.stats}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=False)

    def show(self) -> None:
        status = "PASS" if self.ok else "FAIL"
        print(f"NCCL transport audit: {status} ({self.verdict})  expected: {self.expected}"
              + (f" (from {self.expect}: {self.expected_basis})" if self.expect != self.expected else ""))
        print(f"  {self.summary}")
        if self.processes:
            print(f"  hosts: {len(self.hosts)} ({', '.join(self.hosts) or '?'}) by {self.host_basis}")
            rows = []
            for p in self.processes:
                ranks = ",".join(str(c.rank) for c in p.comms if c.group == (self.world.key if self.world else None)
                                 and c.rank is not None)
                net = ",".join(sorted(set(p.nets))) or "-"
                prov = p.provider or ("failed" if any(k == "ofi" for k, _ in p.plugin_failures) else "-")
                where = p.pod or p.ray_ip or ""
                node = (p.marker or {}).get("node", "")[:12]
                rows.append((p.key, p.host_id or "?", where, node or "-", ranks or "-", p.nccl_version or "?", net,
                             prov))
            _table(rows, ["process", "host", "pod/ray ip", "ray node", "world rank", "NCCL", "net plugin",
                          "ofi provider"], title="processes")
        for g in self.matrix:
            print(f"\ncommunicator {g.label}: {g.size} ranks, NCCL nNodes {_fmt_set(g.nnodes)}, "
                  f"localRanks {_fmt_set(g.local_ranks)}, hosts {len(g.hosts)}")
            n = g.size
            if 0 < n <= 16:
                grid = g.grid()
                rows = []
                for a in range(n):
                    row = [f"{a} {g.rank_host.get(a) or '?'}"]
                    for b in range(n):
                        if a == b:
                            row.append("-")
                            continue
                        cls = grid[a][b]
                        cell = _abbr(cls) if cls else "."
                        if cls and g.pairs[(a, b)].location == "inter":
                            cell += "*"
                        elif cls and g.pairs[(a, b)].location == "unknown":
                            cell += "?"
                        row.append(cell)
                    rows.append(row)
                _table(rows, ["src \\ dst", *[str(b) for b in range(n)]],
                       title="pair matrix (row sends to column; * = inter-node, ? = location unknown, "
                             ". = no channel line)")
            agg: dict[tuple[str, str], list[int]] = {}
            for p in g.pairs.values():
                for lab, cnt in p.transports.items():
                    a = agg.setdefault((p.location, lab), [0, 0])
                    a[0] += 1
                    a[1] += cnt
            rows = [(loc, lab, v[0], v[1]) for (loc, lab), v in sorted(agg.items())]
            if rows:
                _table(rows, ["location", "transport", "pairs", "channel lines"], title="transports by location")
        print("\nfindings:")
        for f in self.findings:
            print(f"  [{f.severity.upper()}] {f.code}: {f.message}")
            for e in f.evidence:
                print(f"      > {e}")
            if f.more:
                print(f"      > ... and {f.more} more line(s)")

    def text(self) -> str:
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            self.show()
        return buf.getvalue()


def _fmt_set(s: set) -> str:
    return "/".join(str(x) for x in sorted(s)) if s else "?"


def _abbr(cls: str) -> str:
    if cls.startswith("ofi-"):
        return "OFI:" + cls[4:]
    return _CLASS_ABBR.get(cls, cls)


def _table(rows: Sequence[Sequence[Any]], headers: Sequence[str], title: str | None = None) -> None:
    from .report import table as report_table  # the shared plain-text table
    report_table(rows, headers, title=title, max_width=90)


def _check_expect(expect: str) -> str:
    e = str(expect).strip().lower() if expect is not None else "auto"
    if e not in EXPECTATIONS:
        raise ValueError(f"expect={expect!r} is not one of {', '.join(EXPECTATIONS)}. Fix: efa on aws, p2p for one "
                         f"GPU host, socket for a deliberate TCP baseline, none for CPU/gloo, auto to infer")
    return e


def select_run(texts: Mapping[str, str], marker: str) -> dict[str, str]:
    """Keep the texts (and, within a text, the stretches) that belong to the run ``marker``.

    A text belongs to the run when it contains the line ``[raytrain] marker=<marker>``. When one text holds
    several markers (a reused worker process), only the lines from each of this marker's lines up to the
    next other marker line are kept; lines before the first marker belong to the first one."""
    marker = _check_marker(marker)
    out: dict[str, str] = {}
    for name, text in texts.items():
        sliced = _slice_for_marker(text, marker)
        if sliced is not None:
            out[name] = sliced
    return out


def _check_marker(marker: Any) -> str:
    if not isinstance(marker, str) or not marker.strip() or any(c.isspace() for c in marker):
        raise ValueError(f"marker={marker!r}: expected the run marker the workers print (one word, e.g. "
                         f"'tutorial-20261129-1000'). Fix: pass the marker of the run you submitted")
    return marker


def _marker_of(line: str) -> str | None:
    i = line.find(MARKER_PREFIX)
    if i < 0:
        return None
    rest = line[i + len(MARKER_PREFIX):]
    return rest.split(None, 1)[0] if rest.strip() else ""


def _slice_for_marker(text: str, marker: str) -> str | None:
    if MARKER_PREFIX not in text:
        return None
    lines = text.splitlines(keepends=True)
    owners: list[str | None] = []
    current: str | None = None
    first: str | None = None
    for ln in lines:
        m = _marker_of(_ANSI.sub("", ln)) if MARKER_PREFIX in ln else None
        if m is not None:
            current = m
            if first is None:
                first = m
        owners.append(current)
    if marker not in owners:
        return None
    if all(o in (None, marker) for o in owners):
        return text
    kept = [ln for ln, o in zip(lines, owners) if o == marker or (o is None and first == marker)]
    return "".join(kept)


def audit(text_or_texts: Any, expect: str = "auto", hosts_hint: Mapping[Any, str] | None = None, *,
          marker: str | None = None) -> AuditResult:
    """Audit NCCL_DEBUG=INFO output: which transport each rank pair used, against ``expect``.

    ``text_or_texts``: a log text, a list of texts, or ``{source: text}`` (e.g. from :func:`collect_local_logs`).
    ``expect``: efa | p2p | socket | none | auto (| ib). ``hosts_hint``: optional ``{hostname/IP/pod: host}`` or
    ``{world rank: host}`` overriding host identity. ``marker``: keep only this run's texts (see select_run)."""
    expect = _check_expect(expect)
    sources = _as_sources(text_or_texts)
    if marker is not None:
        sources = list(select_run(dict(sources), marker).items())
    P = parse(dict(sources) if sources else "")
    comms = _build_comms(P)
    host_basis = _assign_hosts(P, comms, hosts_hint)
    _classify_pairs(P, comms)
    if marker is not None and not sources:
        f = Finding("fail", "no-run", f"no log holds the line '{MARKER_PREFIX}{marker}': wrong marker, or the "
                    f"workers' logs were not collected (Ray writes them to session_latest/logs/worker-*.out)")
        return AuditResult(ok=False, verdict="inconclusive", expect=expect, expected=expect, expected_basis="",
                           summary=f"inconclusive: {f.message}", host_basis=host_basis, findings=[f], matrix=[],
                           processes=[], stats={"lines": 0, "nccl_lines": 0, "sources": 0})
    return _judge(P, comms, expect, host_basis)


def _resolve_expect(P: ParsedLog, comms: dict[str, Communicator], expect: str) -> tuple[str, str]:
    if expect != "auto":
        return expect, "as asked"
    procs = list(P.procs.values())
    chans = [c for g in comms.values() for c in g.channels]
    hosts = {p.host_id or f"?{p.key}" for p in procs}
    complete = all(pair.location != "unknown" for g in comms.values() for pair in g.pairs.values()) and all(
        len(g.ranks) >= (g.nranks or 0) for g in comms.values() if g.key != "anon")
    if len(hosts) == 1 and complete:
        return "p2p", f"all NCCL processes on one host ({next(iter(hosts))})"
    if any(p.ofi_version or p.provider or p.ofi_ok or any(k == "ofi" for k, _ in p.plugin_failures) for p in procs) \
            or any(c.kind == "ofi" for c in chans):
        return "efa", "aws-ofi-nccl (NET/OFI) lines present"
    if any(c.kind == "ib" for c in chans) or any(n.upper() == "IB" for p in procs for n in p.nets):
        return "ib", "NET/IB in use"
    if len(hosts) == 1:
        return "p2p", f"all NCCL processes seen are on one host ({next(iter(hosts))}); some ranks left no lines"
    if not hosts:
        return "p2p", "no NCCL processes"
    return "efa", (f"ranks on {len(hosts)} hosts and no OFI/IB lines: a multi-node run must use a fabric "
                   f"(EFA on the aws target)")


def _judge(P: ParsedLog, comms: dict[str, Communicator], expect: str, host_basis: str) -> AuditResult:
    findings: list[Finding] = []
    procs = sorted(P.procs.values(), key=lambda p: (p.host_id or "~", p.pid))
    ordered = sorted(comms.values(), key=lambda g: (-g.size, g.key == "anon", g.key))
    stats = {"lines": P.lines, "nccl_lines": P.nccl_lines, "processes": len(procs), "communicators": len(comms),
             "channel_lines": len(P.channels), "deduplicated_lines": len(P.repeated), "unparsed_lines": len(P.unparsed),
             "sources": len(P.sources)}
    add = findings.append

    def result(ok: bool, verdict: str, expected: str, basis: str, summary: str) -> AuditResult:
        sev = {"fail": 0, "warn": 1, "pass": 2, "info": 3}
        findings.sort(key=lambda f: sev.get(f.severity, 9))
        return AuditResult(ok=ok, verdict=verdict, expect=expect, expected=expected, expected_basis=basis,
                           summary=summary, host_basis=host_basis, findings=findings, matrix=ordered,
                           processes=procs, stats=stats)

    markers = sorted({info["marker"] for info, _ in P.markers})
    if len(markers) > 1:
        evs, more = _ev(e for _, e in P.markers)
        add(Finding("warn", "mixed-runs", f"the logs hold {len(markers)} runs (markers {', '.join(markers)}); audit "
                    f"one run: collect_local_logs(..., marker) or audit(..., marker=...)", evs, more))

    # Ray nodes that share one machine (the local target's raylets stand in for GPU nodes)
    nodes_by_host: dict[str, set[str]] = {}
    for p in P.procs.values():
        if p.marker and p.marker.get("node") and p.host_id:
            nodes_by_host.setdefault(p.host_id, set()).add(p.marker["node"])
    for host, nodes in sorted(nodes_by_host.items()):
        if len(nodes) > 1:
            evs, more = _ev(p.evidence["marker"] for p in P.procs.values() if p.host_id == host
                            and "marker" in p.evidence)
            add(Finding("info", "ray-nodes-share-host", f"{len(nodes)} Ray nodes run on one host ({host}): to NCCL "
                        f"their ranks are intra-node (the local target's raylets stand in for separate GPU nodes)",
                        evs[:2], more + max(0, len(evs) - 2)))

    # ---- no NCCL at all ------------------------------------------------------------------
    if not P.procs:
        bare, more = _ev(P.bare_versions)
        if expect == "none":
            add(Finding("pass", "no-nccl", "no NCCL lines: the run did not use NCCL (gloo on CPU), as expected"))
            return result(True, "n/a", "none", "as asked", "n/a: NCCL not used (gloo)")
        msg = ("no NCCL INFO lines in the logs (" + f"{P.lines} lines read). Either the run used gloo (CPU; "
               "use expect='none'), NCCL_DEBUG=INFO was not set for the workers, or these are not the training "
               "workers' logs (Ray writes them to session_latest/logs/worker-*.out)")
        if bare:
            msg += "; only a bare 'NCCL version' line was found"
        add(Finding("fail", "no-nccl", msg, bare, more))
        return result(False, "no-nccl", expect if expect != "auto" else "auto", "no NCCL lines to infer from",
                      "no-nccl: no NCCL INFO lines to audit")

    expected, basis = _resolve_expect(P, comms, expect)

    # ---- facts: versions, plugins, nNodes vs hosts ----------------------------------------
    versions = Counter(p.nccl_version for p in procs if p.nccl_version)
    if len(versions) > 1:
        evs, more = _ev(p.evidence["version"] for p in procs if "version" in p.evidence)
        add(Finding("warn", "version-mismatch", "processes run different NCCL versions: "
                    + ", ".join(f"{v} x{n}" for v, n in versions.most_common()), evs, more))
    elif versions:
        v = next(iter(versions))
        ofi = sorted({p.ofi_version for p in procs if p.ofi_version})
        evs, _ = _ev([p.evidence["version"] for p in procs if "version" in p.evidence][:1]
                     + [p.evidence["ofi"] for p in procs if "ofi" in p.evidence][:1])
        add(Finding("info", "versions", f"NCCL {v} in {sum(versions.values())} process(es)"
                    + (f"; aws-ofi-nccl {', '.join(ofi)}" if ofi else ""), evs))

    if expect == "none":
        evs, more = _ev([p.evidence["version"] for p in procs if "version" in p.evidence]
                        or [c.evidence[0] for p in procs for c in p.comms if c.evidence])
        add(Finding("fail", "unexpected", f"expected no NCCL (CPU/gloo) but {len(procs)} process(es) ran NCCL",
                    evs, more))
        return result(False, "unexpected", "none", basis, "unexpected: NCCL in use although gloo (no NCCL) "
                      "was expected")

    for g in ordered:
        hosts = g.hosts
        if g.conflicts:
            add(Finding("warn", "mixed-runs", f"communicator {g.label}: " + "; ".join(g.conflicts[:3])
                        + " - logs of several runs mixed? Audit one run (marker filter)", g.evidence[:2]))
        if g.nnodes and hosts and len(g.ranks) >= (g.nranks or 0) and all(g.rank_host.get(r) for r in g.ranks):
            nn = max(g.nnodes)
            if nn != len(hosts):
                env_ev = [P.procs[pk].evidence[k] for pk in set(g.ranks.values())
                          for k in ("env:NCCL_P2P_DISABLE", "env:NCCL_SHM_DISABLE")
                          if k in P.procs[pk].evidence]
                topo = [e for e in g.evidence if "nNodes" in e.text][:2]
                why = (" NCCL counts a host as several 'nodes' when its GPUs cannot reach each other through "
                       "P2P or SHM (here NCCL_P2P_DISABLE / NCCL_SHM_DISABLE are set)") if env_ev and nn > len(hosts) \
                    else ""
                evs, more = _ev(topo + env_ev)
                add(Finding("info", "nnodes-vs-hosts",
                            f"communicator {g.label}: NCCL reports nNodes {nn} but its ranks are on {len(hosts)} "
                            f"host(s) ({', '.join(hosts)}); pairs are classified by host identity, not by nNodes."
                            + why, evs, more))
        if g.nranks and g.key != "anon":
            missing = [r for r in range(g.nranks) if r not in g.ranks]
            if missing and len(missing) < g.nranks:
                add(Finding("warn", "partial-logs", f"communicator {g.label}: no log lines from rank(s) "
                            f"{_ranges(missing)} of {g.nranks}; pairs touching them are judged from the other end",
                            g.evidence[:1]))

    # ---- the pair rules --------------------------------------------------------------------
    groups: dict[tuple[str, str, str], list[tuple[Communicator, Pair, str]]] = {}
    unconfirmed: list[tuple[Communicator, Pair, str]] = []

    def hit(sev_code: tuple[str, str], g: Communicator, pair: Pair, cls: str, loc: str) -> None:
        groups.setdefault((sev_code[0], sev_code[1], f"{loc}|{cls}"), []).append((g, pair, cls))

    all_pairs = [(g, p) for g in ordered for p in g.pairs.values()]
    classes_seen: Counter = Counter()
    labels_seen: dict[str, Counter] = {}
    for g, pair in all_pairs:
        for cls, n in pair.classes.items():
            loc = pair.location
            if loc == "unknown" and cls in LOCAL_CLASSES:
                loc = "intra"
            classes_seen[(loc, cls)] += n
            for lab, k in pair.transports.items():
                if _label_class(lab, cls, pair):
                    labels_seen.setdefault(loc, Counter())[lab] += k
            verdict = _rule(expected, loc, cls)
            if verdict == "ok":
                hit(("pass", "ok"), g, pair, cls, loc)
            elif verdict == "unconfirmed":
                unconfirmed.append((g, pair, cls))
                hit(("warn", "unconfirmed"), g, pair, cls, loc)
            elif verdict == "info":
                hit(("info", "p2p-across-hosts"), g, pair, cls, loc)
            else:
                hit(("fail", verdict), g, pair, cls, loc)

    def chan_lines(items: list[tuple[Communicator, Pair, str]]) -> list[Evidence]:
        return [e for _, pair, cls in items for e in pair.lines.get(cls, [])]

    def chan_ev(items: list[tuple[Communicator, Pair, str]], limit: int = MAX_EVIDENCE) -> tuple[list[Evidence], int]:
        return _ev(chan_lines(items), limit)

    def cause_ev(kinds: Sequence[str]) -> list[Evidence]:
        out = []
        for p in procs:
            for k in kinds:
                if k in p.evidence:
                    out.append(p.evidence[k])
        return out

    for (sev, code, lockey), items in sorted(groups.items()):
        loc, cls = lockey.split("|", 1)
        npairs = len({(id(g), p.src, p.dst) for g, p, _ in items})
        labels = Counter()
        for _, p, c in items:
            for lab, n in p.transports.items():
                if _label_class(lab, c, p):
                    labels[lab] += n
        transport = ", ".join(lab for lab, _ in labels.most_common(3)) or _abbr(cls)
        where = {"intra": "intra-node", "inter": "inter-node", "unknown": "location-unknown"}[loc]
        evs, more = chan_ev(items)
        if code == "ok":
            add(Finding("pass", f"{where}", f"{npairs} {where} pair(s) ride {transport} ({_desc(cls)}), as "
                        f"expected for {expected}", evs[:2], max(0, more + len(evs) - 2)))
        elif code == "unconfirmed":
            add(Finding("warn", "unconfirmed", f"{npairs} {where} pair(s) ride {transport}, which the log does not "
                        f"let the audit confirm as {expected}" + (" (no 'NET/OFI Selected provider' line)"
                                                                  if cls == "ofi?" else ""), evs, more))
        elif code == "p2p-across-hosts":
            add(Finding("info", "p2p-across-hosts", f"{npairs} pair(s) between different hosts ride {transport}: "
                        f"a multi-node NVLink domain (MNNVL) or one machine under several hostnames", evs, more))
        elif code == "fallback":
            cause = cause_ev(["net:Socket"]) if cls == "socket" else cause_ev(["provider"])
            evs, more = chan_ev(items, 4)
            msg = (f"{npairs} {where} pair(s) ride {transport} - "
                   + ("TCP sockets instead of the fabric: the silent fallback" if cls == "socket" else
                      f"libfabric's {cls[4:]} provider (TCP), not EFA: the EFA device is not visible to the pod")
                   + ("" if loc == "inter" else " (hosts unknown: TCP either way)"))
            forced = cause_ev(["env:NCCL_NET"])
            if forced and cls == "socket":
                msg += " (NCCL_NET is set by environment: for a deliberate TCP baseline audit with expect='socket')"
            evs2, more2 = _ev(evs + forced[:1] + cause[:2])
            add(Finding("fail", "fallback", msg, evs2, more + more2))
        elif code == "degraded":
            env_ev = cause_ev(["env:NCCL_P2P_DISABLE", "env:NCCL_SHM_DISABLE", "env:NCCL_P2P_LEVEL"])
            msg = (f"{npairs} {where} pair(s) ride {transport} although their ranks share a host: P2P/SHM are "
                   f"disabled or unavailable" + (", see the NCCL_*_DISABLE lines" if env_ev else "")
                   + (f" (expected {expected})"))
            evs2, more2 = _ev(evs + env_ev[:2], MAX_EVIDENCE + 2)
            add(Finding("fail", "degraded", msg, evs2, more + more2))
        elif code == "unexpected":
            add(Finding("fail", "unexpected", f"{npairs} {where} pair(s) ride {transport}, but {expected} was "
                        f"expected", evs, more))

    net_pairs = [(g, p) for g, p in all_pairs if p.location in ("inter", "unknown")
                 and any(c not in LOCAL_CLASSES for c in p.classes)]
    inter_pairs = [(g, p) for g, p in all_pairs if p.location == "inter"]

    # ---- expectation-wide rules -------------------------------------------------------------
    if expected in ("efa", "ib") and P.channels and not net_pairs and not inter_pairs:
        hosts = sorted({p.host_id or "?" for p in procs})
        add(Finding("fail", "unexpected", f"all ranks are on one host ({', '.join(hosts)}): no inter-node traffic, "
                    f"so {expected.upper()} is not exercised. Use expect='p2p' for a single-node run",
                    _ev(c.evidence for c in P.channels)[0][:2]))
    if expected == "socket" and P.channels and not any(c.cls == "socket" for c in P.channels):
        using, more = _ev(cause_ev(["net:Socket"]))
        add(Finding("fail", "unexpected", "socket was expected but no rank pair uses NET/Socket"
                    + (" ('Using network Socket' only names the plugin NCCL loaded, no pair has to use it)"
                       if using else ""), using, more))

    # plugin failures: meaningful where the plugin was expected
    if expected == "efa":
        bad = [p for p in procs if not p.ofi_ok]
        if bad:
            lines = [e for p in bad for k, e in p.plugin_failures if k == "ofi" or k.startswith("plugin-missing")
                     or k.lower().startswith("net-init:libfabric")]
            efa_pairs = [p for _, p in net_pairs if "efa" in p.classes]
            sev = "fail" if not efa_pairs or lines else "warn"
            reasons = _ofi_reasons(lines)
            evs, more = _ev(lines + cause_ev(["net:Socket"])[:1])
            add(Finding(sev, "plugin-failure",
                        f"aws-ofi-nccl did not initialise in {len(bad)} of {len(procs)} process(es)"
                        + (f": {reasons}" if reasons else ": no 'NET/OFI Selected provider' or 'Using network "
                           "Libfabric' line (plugin not loaded; NCCL_NET_PLUGIN / LD_LIBRARY_PATH?)"), evs, more))
        efa_procs = [p for p in procs if p.provider and p.provider.lower().startswith("efa")]
        if efa_procs:
            evs, more = _ev(p.evidence["provider"] for p in efa_procs)
            add(Finding("pass" if len(efa_procs) == len(procs) else "info", "provider",
                        f"libfabric selected provider efa in {len(efa_procs)} of {len(procs)} process(es)",
                        evs[:2], more + max(0, len(evs) - 2)))
        non_efa = sorted({p.provider for p in procs if p.provider and not p.provider.lower().startswith("efa")})
        if non_efa:
            evs, more = _ev(p.evidence["provider"] for p in procs if p.provider in non_efa)
            add(Finding("fail", "plugin-failure", f"libfabric selected provider {', '.join(non_efa)} instead of efa: "
                        f"the EFA device is not visible (vpc.amazonaws.com/efa resource, FI_PROVIDER=efa)", evs, more))
        ofi_other = [(k, e) for p in procs if p.ofi_ok for k, e in p.plugin_failures if k == "ofi"]
        if ofi_other:
            evs, more = _ev(e for _, e in ofi_other)
            add(Finding("warn", "ofi-warnings", "aws-ofi-nccl printed errors in processes where it did initialise",
                        evs, more))
    elif expected == "ib":
        bad = [p for p in procs if not any(n.upper() == "IB" for n in p.nets)]
        if bad and not any("ib" in p.classes for _, p in net_pairs):
            lines = [e for p in bad for k, e in p.plugin_failures if k in ("ib", "net-init:IB")]
            evs, more = _ev(lines)
            add(Finding("fail", "plugin-failure", f"the IB transport did not initialise in {len(bad)} process(es)",
                        evs, more))
    else:
        fails = [e for p in procs for k, e in p.plugin_failures]
        if fails:
            evs, more = _ev(fails, 3)
            add(Finding("info", "plugins", "NET plugin probes that found nothing (normal without a fabric; NCCL "
                        "then uses its built-in Socket transport only for pairs that need a network)", evs, more))

    using_socket = cause_ev(["net:Socket"])
    if using_socket and not any(c.cls == "socket" for c in P.channels) and P.channels:
        evs, more = _ev(using_socket, 2)
        add(Finding("info", "socket-plugin-unused", "'Using network Socket' is printed, yet no rank pair uses "
                    "NET/Socket: the line names the NET plugin NCCL loaded, not a transport any pair rides", evs,
                    more))

    warns = [e for p in procs for e in p.warnings
             if not any(e is fe for _, fe in p.plugin_failures)]
    if warns:
        evs, more = _ev(warns, 4)
        add(Finding("warn", "nccl-warn", f"{len(warns)} NCCL WARN line(s)", evs, more))
    if P.unparsed:
        evs, more = _ev(P.unparsed, 3)
        add(Finding("info", "unparsed", f"{len(P.unparsed)} NCCL-looking line(s) could not be read (truncated?)",
                    evs, more))
    shm = [(g, p) for g, p in all_pairs if "shm" in p.classes]
    if shm and expected in ("p2p", "efa", "ib"):
        add(Finding("info", "shm", f"{len(shm)} pair(s) use SHM (host memory) rather than P2P: the GPUs cannot "
                    f"address each other directly (no NVLink/PCIe P2P, or separate CUDA_VISIBLE_DEVICES)"))

    # ---- verdict ------------------------------------------------------------------------------
    fail_codes = [f.code for f in findings if f.severity == "fail"]
    repeated_ch = [c for c in P.channels if c.repeated]
    if not fail_codes and not P.channels:
        single = all((g.nranks or 0) <= 1 for g in comms.values()) and comms
        add(Finding("fail", "inconclusive", ("every communicator has one rank: there is no inter-rank traffic to "
                    "audit") if single else "no channel connection lines (`Channel xx/x : a[d] -> b[d] via ...`) "
                    "in the logs: the run stopped before its first collective, or the logs are truncated"))
        fail_codes.append("inconclusive")
    if not fail_codes and unconfirmed:
        add(Finding("fail", "inconclusive", f"{len(unconfirmed)} pair(s) ride a transport the audit cannot confirm "
                    f"as {expected}", chan_ev(unconfirmed)[0]))
        fail_codes.append("inconclusive")
    if repeated_ch:
        evs, more = _ev(c.evidence for c in repeated_ch)
        sev = "warn" if fail_codes else "fail"
        add(Finding(sev, "inconclusive", f"{len(repeated_ch)} channel line(s) carry Ray's '[repeated Nx across "
                    f"cluster]': Ray folded lines that differ only in numbers - which includes the transport "
                    f"(NET/Socket/0 and NET/Libfabric/0 look alike to it). Audit the worker log files "
                    f"(collect_local_logs / collect_pod_logs) or run with RAY_DEDUP_LOGS=0", evs, more))
        if sev == "fail":
            fail_codes.append("inconclusive")
    if fail_codes:
        verdict = min(fail_codes, key=lambda c: _VERDICT_ORDER.index(c) if c in _VERDICT_ORDER else 99)
        first = next(f for f in findings if f.severity == "fail" and f.code == verdict)
        return result(False, verdict, expected, basis, f"{verdict}: {first.message}")
    return result(True, "pass", expected, basis, "pass: " + _pass_summary(expected, labels_seen, procs, comms))


def _label_class(label: str, cls: str, pair: Pair) -> bool:
    kind = _classify_via(label.replace("/GDRDMA", ""))[1]
    if cls in ("efa", "ofi?") or cls.startswith("ofi-"):
        return kind == "ofi"
    return kind == cls


def _rule(expected: str, loc: str, cls: str) -> str:
    """ok | unconfirmed | info | fallback | degraded | unexpected for one (location, class) of a pair."""
    local = cls in LOCAL_CLASSES
    unknown_cls = cls in ("?", "net?", "ofi?")
    tcp = cls == "socket" or cls.startswith("ofi-")
    if expected == "socket":
        if local:
            return "ok" if loc == "intra" else "info"
        if cls == "socket":
            return "ok"
        return "unconfirmed" if unknown_cls else "unexpected"
    if expected == "p2p":
        if local:
            return "ok" if loc == "intra" else "info"
        if loc == "inter":
            return "fallback" if tcp else ("unconfirmed" if unknown_cls else "unexpected")
        return "unconfirmed" if cls == "?" else "degraded"
    # efa / ib: the fabric across nodes, P2P/SHM/NVLS within one
    fabric = "efa" if expected == "efa" else "ib"
    if loc == "intra":
        if local:
            return "ok"
        return "unconfirmed" if cls == "?" else "degraded"
    if local:
        return "info"
    if cls == fabric:
        return "ok"
    if tcp:
        return "fallback"
    if unknown_cls:
        return "unconfirmed"
    return "unexpected"


def _desc(cls: str) -> str:
    return {"p2p": "GPU peer-to-peer: NVLink or PCIe", "shm": "host shared memory", "nvls": "NVLink SHARP",
            "collnet": "CollNet", "efa": "aws-ofi-nccl over EFA", "ib": "InfiniBand verbs",
            "socket": "TCP sockets"}.get(cls, cls)


def _ofi_reasons(lines: list[Evidence]) -> str:
    reasons = []
    for e in lines:
        t = e.text
        for s in ("No eligible providers were found", "aws-ofi-nccl initialization failed", "fi_getinfo() call failed",
                  "requires at least libfabric"):
            if s in t and s not in reasons:
                reasons.append(s)
        m = re.search(r"Could not find:? (\S+)", t)
        if m and f"{m.group(1).rstrip('.')} not found" not in reasons:
            reasons.append(f"{m.group(1).rstrip('.')} not found")
    return "; ".join(reasons)


def _pass_summary(expected: str, labels: dict[str, Counter], procs: list[Process],
                  comms: dict[str, Communicator]) -> str:
    hosts = sorted({p.host_id for p in procs if p.host_id})
    world = max(comms.values(), key=lambda g: g.size, default=None)
    n = world.size if world else 0
    parts = [f"{n} ranks on {len(hosts)} host(s)"]
    names = {"inter": "inter-node", "intra": "intra-node", "unknown": "location-unknown"}
    for loc in ("inter", "intra", "unknown"):
        if loc in labels:
            text = f"{names[loc]} pairs ride {', '.join(lab for lab, _ in labels[loc].most_common())}"
            prov = sorted({p.provider for p in procs if p.provider})
            if loc == "inter" and prov and expected == "efa":
                text += f" (libfabric provider {', '.join(prov)})"
            parts.append(text)
    return "; ".join(parts)


def _ranges(nums: list[int]) -> str:
    nums = sorted(nums)
    out = []
    start = prev = nums[0]
    for x in nums[1:] + [None]:  # type: ignore[list-item]
        if x is not None and x == prev + 1:
            prev = x
            continue
        out.append(f"{start}-{prev}" if prev != start else f"{start}")
        if x is not None:
            start = prev = x
    return ",".join(out)


# --------------------------------------------------------------------------------------------
# Heatmap
# --------------------------------------------------------------------------------------------

_PLOT_COLORS = [("", "#ffffff"), ("p2p", "#2ca02c"), ("nvls", "#17becf"), ("shm", "#98df8a"),
                ("collnet", "#bcbd22"), ("efa", "#1f77b4"), ("ib", "#9467bd"), ("ofi-*", "#ff7f0e"),
                ("socket", "#d62728"), ("?", "#7f7f7f")]


def plot_matrix(result: AuditResult, ax=None, comm: str | None = None):
    """A rank x rank heatmap of the transport each pair used (row sends to column); inter-node pairs are
    marked with a dot. Returns the matplotlib Figure (never calls plt.show)."""
    from matplotlib.colors import BoundaryNorm, ListedColormap
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    comms = result.matrix
    g = next((c for c in comms if comm in (c.key, c.label)), None) if comm else (comms[0] if comms else None)
    if comm and g is None:
        raise ValueError(f"comm={comm!r} is not one of the audited communicators: "
                         f"{', '.join(c.label for c in comms)}")
    if ax is None:
        fig = Figure(figsize=(6.4, 5.6))
        ax = fig.add_subplot(1, 1, 1)
    else:
        fig = ax.figure
    names = [n for n, _ in _PLOT_COLORS]
    cmap = ListedColormap([c for _, c in _PLOT_COLORS])
    norm = BoundaryNorm([i - 0.5 for i in range(len(names) + 1)], cmap.N)
    n = g.size if g else 0
    data = [[0] * n for _ in range(n)]
    present = set()
    if g is not None:
        for (a, b), p in g.pairs.items():
            cls = p.cls
            key = "ofi-*" if cls.startswith("ofi-") else (cls if cls in names else "?")
            data[a][b] = names.index(key)
            present.add(key)
    ax.imshow(data if n else [[0]], cmap=cmap, norm=norm, interpolation="nearest")
    if g is not None:
        for (a, b), p in g.pairs.items():
            if p.location == "inter":
                ax.plot(b, a, marker="o", markersize=max(2, 40 // max(n, 1)), color="white", markeredgecolor="black")
    ax.set_xlabel("receiving rank")
    ax.set_ylabel("sending rank")
    if n and n <= 32:
        ax.set_xticks(range(n))
        ax.set_yticks(range(n))
    title = f"NCCL transports: {result.verdict} (expected {result.expected})"
    if g is not None:
        title += f"\n{g.label}, {n} ranks on {len(g.hosts)} host(s)"
    ax.set_title(title, fontsize=10)
    labels = {"p2p": "P2P (NVLink/PCIe)", "nvls": "NVLS", "shm": "SHM", "collnet": "CollNet", "efa": "EFA (OFI)",
              "ib": "IB", "ofi-*": "OFI non-EFA provider", "socket": "NET/Socket (TCP)", "?": "unknown"}
    handles = [Patch(facecolor=c, edgecolor="black", label=labels[k]) for k, c in _PLOT_COLORS if k in present]
    if any(p.location == "inter" for p in (g.pairs.values() if g else [])):
        from matplotlib.lines import Line2D
        handles.append(Line2D([], [], marker="o", color="white", markeredgecolor="black", linestyle="",
                              label="inter-node pair"))
    if handles:
        ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=8, frameon=False)
    try:
        fig.tight_layout()
    except Exception:  # pragma: no cover - layout is cosmetic
        pass
    return fig


# --------------------------------------------------------------------------------------------
# Log collection
# --------------------------------------------------------------------------------------------

_WORKER_FILE = re.compile(r"^worker-.+\.(out|err)(\.\d+)?$")


def _sibling(name: str) -> str | None:
    m = re.match(r"^(worker-.+)\.(out|err)((?:\.\d+)?)$", name)
    if not m:
        return None
    return f"{m.group(1)}.{'err' if m.group(2) == 'out' else 'out'}{m.group(3)}"


def collect_local_logs(log_dirs: Sequence[Path | str], marker: str) -> dict[str, str]:
    """One run's Ray worker logs from each raylet's ``session_latest/logs`` directory.

    Reads ``worker-*.out`` / ``worker-*.err`` and keeps a file when it holds the line
    ``[raytrain] marker=<marker>`` (each training worker prints it at start), plus the ``.err``/``.out``
    sibling of a kept file (the same worker process). Two runs in one Ray session are never mixed.
    Returns ``{"<log dir>/<file name>": text}``; a missing directory is skipped (a raylet may have no
    workers), a path that is not a directory raises."""
    marker = _check_marker(marker)
    if isinstance(log_dirs, (str, Path)):
        log_dirs = [log_dirs]
    out: dict[str, str] = {}
    for d in log_dirs:
        d = Path(d)
        if not d.exists():
            continue
        if not d.is_dir():
            raise NotADirectoryError(f"log_dirs: {d} is not a directory. Fix: pass each raylet's "
                                     f"<temp_dir>/session_latest/logs (targets.local.session_log_dirs(settings))")
        files = sorted(f for f in d.iterdir() if _WORKER_FILE.match(f.name) and f.is_file())
        texts: dict[str, str] = {}
        for f in files:
            try:
                texts[f.name] = f.read_bytes().decode("utf-8", errors="replace")
            except OSError:
                continue
        kept = select_run(texts, marker)
        for name in list(kept):
            sib = _sibling(name)
            if sib and sib in texts and sib not in kept and MARKER_PREFIX not in texts[sib]:
                kept[sib] = texts[sib]
        for name in sorted(kept):
            out[f"{d}/{name}"] = kept[name]
    return out


_LIST_SCRIPT = ('for f in $2; do [ -f "$f" ] || continue; '
                'if grep -qF -e "$1" "$f" 2>/dev/null; then printf "M\\t%s\\n" "$f"; '
                'else printf "F\\t%s\\n" "$f"; fi; done; true')


def collect_pod_logs(exec_fn: Callable[[str, list[str]], str], pods: Sequence[str], marker: str,
                     log_glob: str = "/tmp/ray/session_latest/logs/worker-*") -> dict[str, str]:
    """One run's Ray worker logs read inside each pod (a pod's stdout does not carry the workers' lines).

    ``exec_fn(pod_name, command_list) -> stdout`` runs a command in the pod (the Kubernetes exec stream is
    supplied by the caller). One listing per pod finds the worker files holding ``[raytrain] marker=<marker>``,
    then each kept file (and its .out/.err sibling) is read with ``cat``. Returns ``{"<pod>:<path>": text}``."""
    marker = _check_marker(marker)
    if not callable(exec_fn):
        raise TypeError("exec_fn: expected a callable exec_fn(pod_name, command_list) -> str")
    if isinstance(pods, str):
        pods = [pods]
    needle = MARKER_PREFIX + marker
    out: dict[str, str] = {}
    for pod in pods:
        try:
            listing = exec_fn(pod, ["sh", "-c", _LIST_SCRIPT, "raytrain-collect", needle, log_glob]) or ""
        except Exception as e:
            raise RuntimeError(f"pod {pod}: listing {log_glob} failed: {e}. Fix: check the pod is Running and "
                               f"the exec permission (pods/exec) of your kubeconfig") from e
        matched, others = [], set()
        for ln in listing.splitlines():
            tag, _, path = ln.partition("\t")
            path = path.strip()
            if not path or not _WORKER_FILE.match(path.rsplit("/", 1)[-1]):
                continue
            (matched.append(path) if tag == "M" else others.add(path))
        texts: dict[str, str] = {}
        for path in matched:
            texts[path] = _cat(exec_fn, pod, path)
        kept = select_run(texts, marker)
        for path in list(kept):
            d, _, name = path.rpartition("/")
            sib = _sibling(name)
            sp = f"{d}/{sib}" if sib else None
            if sp and sp in others:
                kept[sp] = _cat(exec_fn, pod, sp)
        for path in sorted(kept):
            out[f"{pod}:{path}"] = kept[path]
    return out


def _cat(exec_fn: Callable[[str, list[str]], str], pod: str, path: str) -> str:
    try:
        text = exec_fn(pod, ["cat", "--", path])
    except Exception as e:
        raise RuntimeError(f"pod {pod}: reading {path} failed: {e}") from e
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    return text or ""


# --------------------------------------------------------------------------------------------
# Benchmark comparison
# --------------------------------------------------------------------------------------------

_RUN_FIELDS = ("label", "expected_transport", "log_text", "tokens_per_s_per_gpu", "steps_per_s")


@dataclass
class Comparison:
    ok: bool
    refusal: str | None
    run_a: dict[str, Any]
    run_b: dict[str, Any]
    audit_a: AuditResult
    audit_b: AuditResult
    speedup_tokens: float | None = None       # a / b, tokens per second per GPU
    speedup_steps: float | None = None        # a / b, steps per second

    @property
    def speedup(self) -> float | None:
        return self.speedup_tokens

    def to_dict(self) -> dict[str, Any]:
        def run(r: dict[str, Any], a: AuditResult) -> dict[str, Any]:
            return {"label": r["label"], "expected_transport": r["expected_transport"],
                    "tokens_per_s_per_gpu": r["tokens_per_s_per_gpu"], "steps_per_s": r["steps_per_s"],
                    "audit": {"ok": a.ok, "verdict": a.verdict, "expected": a.expected, "summary": a.summary}}
        return {"ok": self.ok, "refusal": self.refusal, "run_a": run(self.run_a, self.audit_a),
                "run_b": run(self.run_b, self.audit_b), "speedup_tokens": self.speedup_tokens,
                "speedup_steps": self.speedup_steps}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    def show(self) -> None:
        rows = []
        for r, a in ((self.run_a, self.audit_a), (self.run_b, self.audit_b)):
            rows.append((r["label"], r["expected_transport"], f"{'PASS' if a.ok else 'FAIL'} ({a.verdict})",
                         f"{float(r['tokens_per_s_per_gpu']):.1f}", f"{float(r['steps_per_s']):.3f}"))
        _table(rows, ["run", "expected transport", "audit", "tokens/s/GPU", "steps/s"], title="benchmark comparison")
        if self.ok:
            print(f"speedup {self.run_a['label']} / {self.run_b['label']}: {self.speedup_tokens:.2f}x tokens/s per "
                  f"GPU, {self.speedup_steps:.2f}x steps/s (both transports confirmed by the NCCL audit)")
        else:
            print(f"no speedup reported: {self.refusal}")


def _check_run(run: Any, name: str) -> dict[str, Any]:
    if not isinstance(run, Mapping):
        raise TypeError(f"{name}: expected a dict with {', '.join(_RUN_FIELDS)}")
    missing = [f for f in _RUN_FIELDS if f not in run]
    if missing:
        raise ValueError(f"{name}: missing {', '.join(missing)}. Fix: pass a dict with {', '.join(_RUN_FIELDS)} "
                         f"(rates measured after the warm-up steps)")
    out = dict(run)
    _check_expect(out["expected_transport"])
    if out["expected_transport"] == "auto":
        raise ValueError(f"{name}.expected_transport='auto': a benchmark run must state the transport it was meant "
                         f"to use. Fix: efa, p2p, socket or none")
    for f in ("tokens_per_s_per_gpu", "steps_per_s"):
        v = out[f]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0 or v != v or v == float("inf"):
            raise ValueError(f"{name}.{f}={v!r}: expected a positive number. Fix: the measured rate after warm-up")
    return out


def compare_runs(run_a: Mapping[str, Any], run_b: Mapping[str, Any]) -> Comparison:
    """Compare two benchmark runs; refuse unless each run's NCCL audit confirms the transport it was meant to use.

    Each run: ``label``, ``expected_transport`` (efa|p2p|socket|none), ``log_text`` (str, list or dict of texts),
    ``tokens_per_s_per_gpu``, ``steps_per_s`` (warm-up excluded). ``speedup_tokens`` = a / b."""
    a, b = _check_run(run_a, "run_a"), _check_run(run_b, "run_b")
    audit_a = audit(a["log_text"], expect=a["expected_transport"])
    audit_b = audit(b["log_text"], expect=b["expected_transport"])
    refusals = []
    for r, au in ((a, audit_a), (b, audit_b)):
        if not au.ok:
            refusals.append(f"run {r['label']!r} was meant to use {r['expected_transport']} but its NCCL audit says "
                            f"{au.verdict}: {au.summary}")
    if refusals:
        return Comparison(False, "; ".join(refusals), a, b, audit_a, audit_b)
    return Comparison(True, None, a, b, audit_a, audit_b,
                      speedup_tokens=float(a["tokens_per_s_per_gpu"]) / float(b["tokens_per_s_per_gpu"]),
                      speedup_steps=float(a["steps_per_s"]) / float(b["steps_per_s"]))


# --------------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------------

def register_cli(sub: argparse._SubParsersAction) -> None:
    from .cli import add_settings_args
    p = sub.add_parser(
        "audit", help="audit NCCL_DEBUG=INFO logs: the transport each rank pair used, against the expected one",
        description="Reads NCCL INFO lines (bare, Ray- or kubectl-prefixed), builds the rank-pair x transport "
                    "matrix and says whether the expected transport was used. Exit 0: as expected; 1: not; "
                    "2: unreadable input.")
    p.add_argument("logs", nargs="+", metavar="LOG",
                   help="log file ('-' = stdin; a directory = its worker-*.out/.err files)")
    p.add_argument("--expect", choices=EXPECTATIONS, default=None,
                   help="expected transport (default: the nccl.expect setting, auto)")
    p.add_argument("--marker", default=None, help="keep only the logs of this run marker")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    add_settings_args(p)
    p.set_defaults(func=_cli_audit)


def _read_inputs(paths: Sequence[str]) -> dict[str, str]:
    texts: dict[str, str] = {}
    for s in paths:
        if s == "-":
            texts["<stdin>"] = sys.stdin.read()
            continue
        path = Path(s)
        if path.is_dir():
            files = sorted(f for f in path.iterdir() if _WORKER_FILE.match(f.name) and f.is_file())
            if not files:
                raise OSError(f"{path}: a directory without worker-*.out/.err files")
            for f in files:
                texts[str(f)] = f.read_bytes().decode("utf-8", errors="replace")
            continue
        texts[str(path)] = path.read_bytes().decode("utf-8", errors="replace")
    return texts


def _cli_audit(args: argparse.Namespace) -> int:
    try:
        texts = _read_inputs(args.logs)
    except OSError as e:
        print(f"error: cannot read the log: {e}", file=sys.stderr)
        return 2
    if args.marker:
        try:
            texts = select_run(texts, args.marker)
        except ValueError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        if not texts:
            print(f"error: no log holds the line '{MARKER_PREFIX}{args.marker}'", file=sys.stderr)
            return 2
    expect = args.expect
    if expect is None:
        from .cli import settings_from_args
        expect = settings_from_args(args).nccl.expect
    res = audit(texts, expect=expect)
    if args.json:
        print(res.to_json())
    else:
        res.show()
    return 0 if res.ok else 1
