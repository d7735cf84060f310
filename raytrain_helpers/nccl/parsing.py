"""Reading ``NCCL_DEBUG=INFO`` output: the line prefixes, NCCL's messages, and the data model they fill.

:func:`parse` reads NCCL INFO/WARN lines under any prefix (bare, Ray driver ``(RayTrainWorker pid=..,
ip=..)`` with colours and ``[repeated Nx across cluster]``, ``kubectl logs --prefix --timestamps``) and
extracts per process (host + pid) the NCCL version, the NET plugin and OFI provider, plugin failures,
every communicator (rank, nRanks, nNodes, localRanks, cudaDev, busId) and every channel connection.

The prefixes are read by :mod:`.lines`, each NCCL message by its reader in :mod:`.messages`, into the data model
of :mod:`.model`. This module keeps the names they had here (``from .parsing import Channel`` still works).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from ..core.constants import MARKER_PREFIX
from .lines import ANSI, strip_prefixes
from .messages import LOCAL_CLASSES, classify_via, parse_info, parse_warn
from .model import Channel, Communicator, Evidence, LocalComm, Pair, ParsedLog, Process

MAX_LINE = 16384  # longer lines are parsed on their first MAX_LINE characters

# host:pid:tid [dev] [function:line] NCCL LEVEL message
_NCCL = re.compile(
    r"(?<![\w.-])(?P<host>[A-Za-z0-9][A-Za-z0-9._-]{0,252}):(?P<pid>\d{1,10}):(?P<tid>\d{1,10}) "
    r"\[(?P<dev>\d{1,4})\] (?:(?P<where>[^\n]{0,400}?) )?NCCL (?P<level>INFO|WARN|TRACE|ABORT)"
    r"(?: (?P<msg>.*))?$"
)
_BARE_VERSION = re.compile(r"^\s*NCCL version (?P<v>\d+\.\d+\.\d+\S*)")
_MARKER = re.compile(r"\[raytrain\] marker=(?P<marker>\S+)(?P<rest>.*)$")
_MARKER_KV = re.compile(r"\b(rank|node|host|pid)=(\S+)")


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
        parse_warn(proc, msg, ev)
    elif m.group("level") == "INFO":
        parse_info(log, proc, msg, ev, seq, meta.get("repeated", 0))


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


__all__ = [
    "ANSI",
    "LOCAL_CLASSES",
    "MAX_LINE",
    "Channel",
    "Communicator",
    "Evidence",
    "LocalComm",
    "Pair",
    "ParsedLog",
    "Process",
    "as_sources",
    "classify_via",
    "parse",
    "strip_prefixes",
]
