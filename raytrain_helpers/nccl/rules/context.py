"""What every rule reads: the audit's :class:`Context`, and the verdict of each rank pair and transport class.

Every rank pair and transport class is first judged by :func:`pair_verdict` (ok, unconfirmed, info, fallback,
degraded, unexpected) and grouped by (severity, code, location|class) when the context is built; the pair rules
then report each group.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ..messages import LOCAL_CLASSES, classify_via
from ..model import Communicator, Evidence, Pair, ParsedLog, Process
from ..result import MAX_EVIDENCE, AuditResult, Finding, quote

_SEVERITY_ORDER = {"fail": 0, "warn": 1, "pass": 2, "info": 3}
WHERE = {"intra": "intra-node", "inter": "inter-node", "unknown": "location-unknown"}

PairItem = tuple[Communicator, Pair, str]  # a communicator, one of its pairs, one of the pair's classes


@dataclass
class Context:
    """Everything the rules read, and the findings they add."""

    log: ParsedLog
    comms: dict[str, Communicator]
    expect: str  # as asked
    expected: str  # resolved
    basis: str  # why that expectation
    host_basis: str
    findings: list[Finding] = field(default_factory=list)
    procs: list[Process] = field(default_factory=list)
    ordered: list[Communicator] = field(default_factory=list)  # largest first
    all_pairs: list[tuple[Communicator, Pair]] = field(default_factory=list)
    groups: dict[tuple[str, str, str], list[PairItem]] = field(default_factory=dict)  # (sev, code, loc|cls)
    unconfirmed: list[PairItem] = field(default_factory=list)
    labels_seen: dict[str, Counter] = field(default_factory=dict)  # location -> transport label -> lines

    def __post_init__(self) -> None:
        self.procs = sorted(self.log.procs.values(), key=lambda p: (p.host_id or "~", p.pid))
        self.ordered = sorted(self.comms.values(), key=lambda g: (-g.size, g.key == "anon", g.key))
        self.all_pairs = [(g, p) for g in self.ordered for p in g.pairs.values()]
        _group_pairs(self)

    def add(self, finding: Finding) -> None:
        self.findings.append(finding)

    @property
    def fail_codes(self) -> list[str]:
        return [f.code for f in self.findings if f.severity == "fail"]

    @property
    def net_pairs(self) -> list[tuple[Communicator, Pair]]:
        """Pairs that are (or may be) between hosts and ride a network transport."""
        return [
            (g, p)
            for g, p in self.all_pairs
            if p.location in ("inter", "unknown") and any(c not in LOCAL_CLASSES for c in p.classes)
        ]

    @property
    def inter_pairs(self) -> list[tuple[Communicator, Pair]]:
        return [(g, p) for g, p in self.all_pairs if p.location == "inter"]

    def cause_ev(self, kinds: Sequence[str]) -> list[Evidence]:
        """Each process's first line of each fact in ``kinds`` (e.g. ``net:Socket``, ``env:NCCL_NET``)."""
        return [p.evidence[k] for p in self.procs for k in kinds if k in p.evidence]

    def stats(self) -> dict[str, int]:
        log = self.log
        return {
            "lines": log.lines,
            "nccl_lines": log.nccl_lines,
            "processes": len(self.procs),
            "communicators": len(self.comms),
            "channel_lines": len(log.channels),
            "deduplicated_lines": len(log.repeated),
            "unparsed_lines": len(log.unparsed),
            "sources": len(log.sources),
        }

    def result(self, ok: bool, verdict: str, expected: str, basis: str, summary: str) -> AuditResult:
        self.findings.sort(key=lambda f: _SEVERITY_ORDER.get(f.severity, 9))
        return AuditResult(
            ok=ok,
            verdict=verdict,
            expect=self.expect,
            expected=expected,
            expected_basis=basis,
            summary=summary,
            host_basis=self.host_basis,
            findings=self.findings,
            matrix=self.ordered,
            processes=self.procs,
            stats=self.stats(),
        )


Rule = Callable[[Context], "AuditResult | None"]


def pair_verdict(expected: str, loc: str, cls: str) -> str:
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


_VERDICT_GROUP = {"ok": ("pass", "ok"), "unconfirmed": ("warn", "unconfirmed"), "info": ("info", "p2p-across-hosts")}


def _group_pairs(ctx: Context) -> None:
    """Judge every (pair, class) and group them by (severity, code, location|class)."""
    for g, pair in ctx.all_pairs:
        for cls in pair.classes:
            loc = pair.location
            if loc == "unknown" and cls in LOCAL_CLASSES:
                loc = "intra"
            for lab, k in pair.transports.items():
                if label_class(lab, cls):
                    ctx.labels_seen.setdefault(loc, Counter())[lab] += k
            verdict = pair_verdict(ctx.expected, loc, cls)
            sev, code = _VERDICT_GROUP.get(verdict, ("fail", verdict))
            if verdict == "unconfirmed":
                ctx.unconfirmed.append((g, pair, cls))
            ctx.groups.setdefault((sev, code, f"{loc}|{cls}"), []).append((g, pair, cls))


def label_class(label: str, cls: str) -> bool:
    """Whether a transport label (``NET/Libfabric/GDRDMA``) belongs to a class (``efa``)."""
    kind = classify_via(label.replace("/GDRDMA", ""))[1]
    if cls in ("efa", "ofi?") or cls.startswith("ofi-"):
        return kind == "ofi"
    return kind == cls


def chan_ev(items: list[PairItem], limit: int = MAX_EVIDENCE) -> tuple[list[Evidence], int]:
    return quote((e for _, pair, cls in items for e in pair.lines.get(cls, [])), limit)
