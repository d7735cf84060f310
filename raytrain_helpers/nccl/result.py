"""What an audit returns: its findings (each with the log lines it rests on) and the report printed from them."""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..core.tables import table
from .model import Communicator, Evidence, Process

MAX_EVIDENCE = 6  # log lines quoted per finding

_CLASS_ABBR = {
    "p2p": "P2P",
    "shm": "SHM",
    "nvls": "NVLS",
    "collnet": "CNET",
    "efa": "EFA",
    "ib": "IB",
    "socket": "SOCK",
    "ofi?": "OFI?",
    "net?": "NET?",
    "?": "?",
}


def abbr(cls: str) -> str:
    """A transport class as a short matrix cell: ``p2p`` -> ``P2P``, ``ofi-tcp`` -> ``OFI:tcp``."""
    if cls.startswith("ofi-"):
        return "OFI:" + cls[4:]
    return _CLASS_ABBR.get(cls, cls)


def quote(lines: Iterable[Evidence], limit: int = MAX_EVIDENCE) -> tuple[list[Evidence], int]:
    """The first ``limit`` distinct lines, and how many more distinct lines there were."""
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
class Finding:
    severity: str  # fail | warn | info | pass
    code: str  # fallback | plugin-failure | degraded | unexpected | no-nccl | inconclusive | ...
    message: str
    evidence: list[Evidence] = field(default_factory=list)
    more: int = 0  # matching lines not quoted

    def to_dict(self) -> dict[str, Any]:
        return {
            "severity": self.severity,
            "code": self.code,
            "message": self.message,
            "evidence": [e.to_dict() for e in self.evidence],
            "more_lines": self.more,
        }


@dataclass
class AuditResult:
    ok: bool
    verdict: str  # pass | n/a | fallback | plugin-failure | degraded | unexpected | no-nccl | inconclusive
    expect: str  # as asked
    expected: str  # resolved (auto -> efa | ib | p2p)
    expected_basis: str
    summary: str
    host_basis: str
    findings: list[Finding]
    matrix: list[Communicator]  # world (largest) communicator first
    processes: list[Process]
    stats: dict[str, int]

    @property
    def world(self) -> Communicator | None:
        return self.matrix[0] if self.matrix else None

    @property
    def hosts(self) -> list[str]:
        return sorted({p.host_id for p in self.processes if p.host_id})

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "verdict": self.verdict,
            "expect": self.expect,
            "expected": self.expected,
            "expected_basis": self.expected_basis,
            "summary": self.summary,
            "host_basis": self.host_basis,
            "hosts": self.hosts,
            "findings": [f.to_dict() for f in self.findings],
            "communicators": [g.to_dict() for g in self.matrix],
            "processes": [p.to_dict() for p in self.processes],
            "stats": self.stats,
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=False)

    def show(self) -> None:
        status = "PASS" if self.ok else "FAIL"
        print(
            f"NCCL transport audit: {status} ({self.verdict})  expected: {self.expected}"
            + (f" (from {self.expect}: {self.expected_basis})" if self.expect != self.expected else "")
        )
        print(f"  {self.summary}")
        if self.processes:
            print(f"  hosts: {len(self.hosts)} ({', '.join(self.hosts) or '?'}) by {self.host_basis}")
            self._show_processes()
        for g in self.matrix:
            _show_communicator(g)
        print("\nfindings:")
        for f in self.findings:
            print(f"  [{f.severity.upper()}] {f.code}: {f.message}")
            for e in f.evidence:
                print(f"      > {e}")
            if f.more:
                print(f"      > ... and {f.more} more line(s)")

    def _show_processes(self) -> None:
        world_key = self.world.key if self.world else None
        rows = []
        for p in self.processes:
            ranks = ",".join(str(c.rank) for c in p.comms if c.group == world_key and c.rank is not None)
            net = ",".join(sorted(set(p.nets))) or "-"
            prov = p.provider or ("failed" if any(k == "ofi" for k, _ in p.plugin_failures) else "-")
            where = p.pod or p.ray_ip or ""
            node = (p.marker or {}).get("node", "")[:12]
            rows.append((p.key, p.host_id or "?", where, node or "-", ranks or "-", p.nccl_version or "?", net, prov))
        headers = ["process", "host", "pod/ray ip", "ray node", "world rank", "NCCL", "net plugin", "ofi provider"]
        _table(rows, headers, title="processes")

    def text(self) -> str:
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            self.show()
        return buf.getvalue()


def _show_communicator(g: Communicator) -> None:
    print(
        f"\ncommunicator {g.label}: {g.size} ranks, NCCL nNodes {_fmt_set(g.nnodes)}, "
        f"localRanks {_fmt_set(g.local_ranks)}, hosts {len(g.hosts)}"
    )
    n = g.size
    if 0 < n <= 16:
        _table(
            _matrix_rows(g),
            ["src \\ dst", *[str(b) for b in range(n)]],
            title="pair matrix (row sends to column; * = inter-node, ? = location unknown, . = no channel line)",
        )
    agg: dict[tuple[str, str], list[int]] = {}
    for p in g.pairs.values():
        for lab, cnt in p.transports.items():
            a = agg.setdefault((p.location, lab), [0, 0])
            a[0] += 1
            a[1] += cnt
    rows = [(loc, lab, v[0], v[1]) for (loc, lab), v in sorted(agg.items())]
    if rows:
        _table(rows, ["location", "transport", "pairs", "channel lines"], title="transports by location")


def _matrix_rows(g: Communicator) -> list[list[str]]:
    n = g.size
    grid = g.grid()
    rows = []
    for a in range(n):
        row = [f"{a} {g.rank_host.get(a) or '?'}"]
        for b in range(n):
            if a == b:
                row.append("-")
                continue
            cls = grid[a][b]
            cell = abbr(cls) if cls else "."
            if cls and g.pairs[(a, b)].location == "inter":
                cell += "*"
            elif cls and g.pairs[(a, b)].location == "unknown":
                cell += "?"
            row.append(cell)
        rows.append(row)
    return rows


def _fmt_set(s: set) -> str:
    return "/".join(str(x) for x in sorted(s)) if s else "?"


def _table(rows: Sequence[Sequence[Any]], headers: Sequence[str], title: str | None = None) -> None:
    table(rows, headers, title=title, max_width=90)
