"""The audit: which transport each rank pair of one run used, against the expected one.

:func:`audit` parses the logs, builds the rank-pair x transport matrix of each communicator, classifies each
pair as intra-node or inter-node by host identity, resolves the expected transport (``auto`` -> efa | ib |
p2p) and applies the verdict rules of :mod:`.rules`. :func:`select_run` keeps one run's logs by its marker.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ..core.constants import MARKER_PREFIX
from .lines import ANSI
from .matrix import assign_hosts, build_comms, classify_pairs
from .model import Communicator, ParsedLog
from .parsing import as_sources, parse
from .result import AuditResult, Finding
from .rules import judge

#: What ``expect`` may be. ``ib`` is accepted for InfiniBand clusters; settings use the other five.
EXPECTATIONS = ("auto", "efa", "p2p", "socket", "none", "ib")

#: A Ray worker's log file (``worker-<id>-<job>-<pid>.out`` / ``.err``, optionally rotated ``.N``).
WORKER_FILE = re.compile(r"^worker-.+\.(out|err)(\.\d+)?$")
_WORKER_PARTS = re.compile(r"^(worker-.+)\.(out|err)((?:\.\d+)?)$")


def sibling_log(name: str) -> str | None:
    """The other stream of the same worker process: ``worker-x.out`` <-> ``worker-x.err``; None for other names."""
    m = _WORKER_PARTS.match(name)
    if not m:
        return None
    return f"{m.group(1)}.{'err' if m.group(2) == 'out' else 'out'}{m.group(3)}"


def check_expect(expect: Any) -> str:
    """``expect`` normalised (stripped, lower case); ValueError unless it is one of :data:`EXPECTATIONS`."""
    e = str(expect).strip().lower() if expect is not None else "auto"
    if e not in EXPECTATIONS:
        raise ValueError(
            f"expect={expect!r} is not one of {', '.join(EXPECTATIONS)}. Fix: efa on aws, p2p for one "
            f"GPU host, socket for a deliberate TCP baseline, none for CPU/gloo, auto to infer"
        )
    return e


def check_marker(marker: Any) -> str:
    """``marker`` itself; ValueError unless it is one word (the run marker the workers print)."""
    if not isinstance(marker, str) or not marker.strip() or any(c.isspace() for c in marker):
        raise ValueError(
            f"marker={marker!r}: expected the run marker the workers print (one word, e.g. "
            f"'tutorial-20261129-1000'). Fix: pass the marker of the run you submitted"
        )
    return marker


def select_run(texts: Mapping[str, str], marker: str) -> dict[str, str]:
    """Keep the texts (and, within a text, the stretches) that belong to the run ``marker``.

    A text belongs to the run when it contains the line ``[raytrain] marker=<marker>``. When one text holds
    several markers (a reused worker process), only the lines from each of this marker's lines up to the
    next other marker line are kept; lines before the first marker belong to the first one."""
    marker = check_marker(marker)
    out: dict[str, str] = {}
    for name, text in texts.items():
        sliced = _slice_for_marker(text, marker)
        if sliced is not None:
            out[name] = sliced
    return out


def _marker_of(line: str) -> str | None:
    i = line.find(MARKER_PREFIX)
    if i < 0:
        return None
    rest = line[i + len(MARKER_PREFIX) :]
    return rest.split(None, 1)[0] if rest.strip() else ""


def _slice_for_marker(text: str, marker: str) -> str | None:
    if MARKER_PREFIX not in text:
        return None
    lines = text.splitlines(keepends=True)
    owners: list[str | None] = []
    current: str | None = None
    first: str | None = None
    for ln in lines:
        m = _marker_of(ANSI.sub("", ln)) if MARKER_PREFIX in ln else None
        if m is not None:
            current = m
            if first is None:
                first = m
        owners.append(current)
    if marker not in owners:
        return None
    if all(o in (None, marker) for o in owners):
        return text
    kept = [ln for ln, o in zip(lines, owners, strict=True) if o == marker or (o is None and first == marker)]
    return "".join(kept)


def resolve_expect(log: ParsedLog, comms: dict[str, Communicator], expect: str) -> tuple[str, str]:
    """The transport a run was meant to use, and why: ``expect`` itself, or for ``auto`` what the logs show
    (p2p on one host, efa where aws-ofi-nccl ran or ranks span hosts, ib where NET/IB is in use)."""
    if expect != "auto":
        return expect, "as asked"
    procs = list(log.procs.values())
    chans = [c for g in comms.values() for c in g.channels]
    hosts = {p.host_id or f"?{p.key}" for p in procs}
    complete = all(pair.location != "unknown" for g in comms.values() for pair in g.pairs.values()) and all(
        len(g.ranks) >= (g.nranks or 0) for g in comms.values() if g.key != "anon"
    )
    if len(hosts) == 1 and complete:
        return "p2p", f"all NCCL processes on one host ({next(iter(hosts))})"
    ofi_seen = any(
        p.ofi_version or p.provider or p.ofi_ok or any(k == "ofi" for k, _ in p.plugin_failures) for p in procs
    )
    if ofi_seen or any(c.kind == "ofi" for c in chans):
        return "efa", "aws-ofi-nccl (NET/OFI) lines present"
    if any(c.kind == "ib" for c in chans) or any(n.upper() == "IB" for p in procs for n in p.nets):
        return "ib", "NET/IB in use"
    if len(hosts) == 1:
        return "p2p", f"all NCCL processes seen are on one host ({next(iter(hosts))}); some ranks left no lines"
    if not hosts:
        return "p2p", "no NCCL processes"
    return "efa", (
        f"ranks on {len(hosts)} hosts and no OFI/IB lines: a multi-node run must use a fabric (EFA on the aws target)"
    )


def audit(
    text_or_texts: Any, expect: str = "auto", hosts_hint: Mapping[Any, str] | None = None, *, marker: str | None = None
) -> AuditResult:
    """Audit NCCL_DEBUG=INFO output: which transport each rank pair used, against ``expect``.

    ``text_or_texts``: a log text, a list of texts, or ``{source: text}`` (e.g. from ``collect_local_logs``).
    ``expect``: efa | p2p | socket | none | auto (| ib). ``hosts_hint``: optional ``{hostname/IP/pod: host}`` or
    ``{world rank: host}`` overriding host identity. ``marker``: keep only this run's texts (see select_run)."""
    expect = check_expect(expect)
    sources = as_sources(text_or_texts)
    if marker is not None:
        sources = list(select_run(dict(sources), marker).items())
    log = parse(dict(sources) if sources else "")
    comms = build_comms(log)
    host_basis = assign_hosts(log, comms, hosts_hint)
    classify_pairs(log, comms)
    if marker is not None and not sources:
        return _no_run(expect, marker, host_basis)
    expected, basis = resolve_expect(log, comms, expect)
    return judge(log, comms, expect, expected, basis, host_basis)


def _no_run(expect: str, marker: str, host_basis: str) -> AuditResult:
    f = Finding(
        "fail",
        "no-run",
        f"no log holds the line '{MARKER_PREFIX}{marker}': wrong marker, or the "
        f"workers' logs were not collected (Ray writes them to session_latest/logs/worker-*.out)",
    )
    return AuditResult(
        ok=False,
        verdict="inconclusive",
        expect=expect,
        expected=expect,
        expected_basis="",
        summary=f"inconclusive: {f.message}",
        host_basis=host_basis,
        findings=[f],
        matrix=[],
        processes=[],
        stats={"lines": 0, "nccl_lines": 0, "sources": 0},
    )


__all__ = [
    "EXPECTATIONS",
    "WORKER_FILE",
    "AuditResult",
    "Finding",
    "audit",
    "check_expect",
    "check_marker",
    "resolve_expect",
    "select_run",
    "sibling_log",
]
