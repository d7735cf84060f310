"""Captured reference runs: a healthy run and a socket fallback, real logs audited side by side.

The package ships two ``NCCL_DEBUG=INFO`` logs of one FSDP2 job captured on 2 x H200 (``captured/``; where and
how in ``captured/captured.json``): healthy (every pair ``via P2P/CUMEM``) and with ``NCCL_P2P_DISABLE=1
NCCL_SHM_DISABLE=1`` (every pair ``via NET/Socket``, about 7 times slower). A run that printed no NCCL lines of its
own (the local CPU/gloo path) shows these instead, always labelled as captured, so that the failure the tutorial
exists to catch is seen on every path. The verdicts are :func:`.auditing.audit`'s; :func:`key_lines` picks, from
what the audit parsed, the lines that give each run away.
"""

from __future__ import annotations

import json
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.tables import format_table
from .auditing import audit
from .model import Evidence
from .result import AuditResult

#: The shipped logs and their sidecar (package data).
CAPTURED_DIR = Path(__file__).resolve().parent / "captured"
SIDECAR = "captured.json"
#: Every view of these logs carries this label.
LABEL = "captured on 2×H200 (not this run)"
#: Transport classes that are TCP.
_TCP = ("socket", "ofi-tcp", "ofi-sockets")
#: What each NCCL_*_DISABLE switches off (NCCL's environment variables, docs.nvidia.com/deeplearning/nccl env.html).
_DISABLED = {
    "NCCL_P2P_DISABLE": "GPU peer-to-peer (NVLink / PCIe)",
    "NCCL_SHM_DISABLE": "the shared-memory path through the host",
    "NCCL_IB_DISABLE": "InfiniBand / RoCE",
}


@dataclass(frozen=True)
class KeyLine:
    """One line of a log that gives the run away, and what it tells."""

    what: str
    evidence: Evidence


@dataclass
class CapturedRun:
    """One captured run: what the sidecar says of it, and its audit now."""

    label: str
    file: str
    env: dict[str, str]
    tokens_per_s_per_gpu: float
    steps_per_s: float
    audit: AuditResult

    @property
    def verdict(self) -> str:
        """``healthy P2P`` / ``socket fallback`` as the audit finds it (not as the sidecar labels it)."""
        return verdict_name(self.audit)

    @property
    def key_lines(self) -> list[KeyLine]:
        return key_lines(self.audit)


def sidecar(directory: Path = CAPTURED_DIR) -> dict[str, Any]:
    """Where and how the logs were captured, and each run's figures (``captured.json``)."""
    path = directory / SIDECAR
    if not path.is_file():
        raise FileNotFoundError(f"{path}: the captured NCCL logs' sidecar is missing (reinstall raytrain-tutorial)")
    return json.loads(path.read_text())


def captured_runs(directory: Path = CAPTURED_DIR) -> list[CapturedRun]:
    """The shipped runs, each audited against the transport its host should give (``expect`` in the sidecar)."""
    out = []
    for r in sidecar(directory)["runs"]:
        text = (directory / r["file"]).read_text()
        out.append(
            CapturedRun(
                label=r["label"],
                file=r["file"],
                env=dict(r.get("env") or {}),
                tokens_per_s_per_gpu=float(r["tokens_per_s_per_gpu"]),
                steps_per_s=float(r["steps_per_s"]),
                audit=audit({r["file"]: text}, expect=r["expect"]),
            )
        )
    return out


def verdict_name(res: AuditResult) -> str:
    """The audit's verdict in a learner's words: ``healthy P2P``, ``socket fallback``, or the verdict itself."""
    world = res.world
    classes = {c for p in (world.pairs.values() if world else []) for c in p.classes}
    if res.ok and classes and classes <= {"p2p", "nvls", "shm"}:
        return "healthy " + ("P2P" if "p2p" in classes else "/".join(sorted(c.upper() for c in classes)))
    if res.ok and "efa" in classes:
        return "healthy EFA"
    if classes & set(_TCP) and not res.ok:
        return "socket fallback"
    return res.verdict


def key_lines(res: AuditResult) -> list[KeyLine]:
    """The lines that give a run away, from what the audit parsed: one channel line per rank pair of the world
    communicator (``via P2P/CUMEM`` / ``via NET/Socket``), the ``nNodes`` line, ``Using network ...`` and the
    ``NCCL_*_DISABLE`` settings, each with what it tells."""
    world = res.world
    if world is None:
        return []
    out = []
    for (a, b), pair in sorted(world.pairs.items()):
        for cls, lines in pair.lines.items():
            how = "TCP sockets, not a GPU path" if cls in _TCP else "the GPUs reach each other directly"
            label = ", ".join(sorted(pair.transports))
            out.append(KeyLine(f"rank {a} -> {b} rides {label}: {how}", lines[0]))
    hosts = len(world.hosts)
    nodes = next((e for e in world.evidence if " nNodes " in e.text), None)
    if nodes is not None:
        n = "/".join(str(x) for x in sorted(world.nnodes))
        why = "" if str(hosts) == n else ": NCCL sees the GPUs of one host as separate nodes when P2P and SHM are off"
        out.append(KeyLine(f"NCCL counts nNodes {n} for ranks on {hosts} host(s){why}", nodes))
    first = res.processes[0] if res.processes else None
    if first is not None:
        out += _process_lines(first, res)
    return out


def _process_lines(proc, res: AuditResult) -> list[KeyLine]:
    out = []
    used = {c for p in res.world.pairs.values() for c in p.classes} if res.world else set()
    for key, ev in proc.evidence.items():
        if key.startswith("net:"):
            rides = "and pairs ride it" if used & set(_TCP) else "yet no pair rides it: alone it proves nothing"
            out.append(KeyLine(f"names the NET plugin NCCL loaded, {rides}", ev))
        elif key.startswith("env:") and key.endswith("_DISABLE"):
            path = _DISABLED.get(key[4:], "a transport")
            out.append(KeyLine(f"{key[4:]} set in the job's environment: {path} switched off", ev))
    return out


def side_by_side(runs: list[CapturedRun] | None = None) -> str:
    """The captured runs audited side by side: where and how, the transport of every rank pair, the verdicts,
    the figures, and the lines that give each run away."""
    runs = runs if runs is not None else captured_runs()
    meta = sidecar()
    out = [f"NCCL logs {LABEL}: real logs shipped with the package, audited now by the same audit as a run's"]
    for key in ("where", "how"):
        out += textwrap.wrap(meta[key], 110, initial_indent=f"  {key}: ".ljust(9), subsequent_indent=" " * 9)
    out.append(format_table(_rows(runs), ["rank pair", *(r.label for r in runs)], "transport per rank pair", 40))
    for r in runs:
        out.append(f"\n{r.label} ({r.file}): audit {'PASS' if r.audit.ok else 'FAIL'} - {r.audit.summary}")
        for k in r.key_lines:
            out.append(f"  > line {k.evidence.lineno}: {k.evidence.text}")
            out.append(f"      {k.what}")
    return "\n".join(out)


def _rows(runs: list[CapturedRun]) -> list[list[str]]:
    pairs = sorted({ab for r in runs if r.audit.world for ab in r.audit.world.pairs})
    rows = []
    for a, b in pairs:
        cells = []
        for r in runs:
            p = r.audit.world.pairs.get((a, b)) if r.audit.world else None
            cells.append(", ".join(sorted(p.transports)) if p else "-")
        rows.append([f"{a} -> {b}", *cells])
    rows.append(["verdict", *(f"{'PASS' if r.audit.ok else 'FAIL'}: {r.verdict}" for r in runs)])
    rows.append(["nNodes / hosts", *(_nodes(r.audit) for r in runs)])
    rows.append(["tokens/s per GPU", *(f"{r.tokens_per_s_per_gpu:,.0f}" for r in runs)])
    env = [", ".join(f"{k}={v}" for k, v in r.env.items() if k.endswith("_DISABLE")) or "-" for r in runs]
    rows.append(["forced by", *env])
    return rows


def _transports(res: AuditResult) -> str:
    w = res.world
    return ", ".join(sorted({t for p in w.pairs.values() for t in p.transports})) if w else "?"


def _nodes(res: AuditResult) -> str:
    w = res.world
    return f"{'/'.join(str(x) for x in sorted(w.nnodes)) or '?'} / {len(w.hosts)}" if w else "?"


def plot_ab(runs: list[CapturedRun] | None = None, ax=None):
    """The captured A/B as bars: tokens/s per GPU of each run, its verdict, and how many times slower the
    fallback ran. Labelled as captured. Returns the matplotlib Figure (never calls plt.show)."""
    from matplotlib.figure import Figure

    runs = runs if runs is not None else captured_runs()
    if ax is None:
        fig = Figure(figsize=(6.4, 3.6))
        ax = fig.add_subplot(1, 1, 1)
    else:
        fig = ax.figure
    vals = [r.tokens_per_s_per_gpu for r in runs]
    colours = ["tab:green" if r.audit.ok else "tab:red" for r in runs]
    names = [f"{r.label}\npairs via {_transports(r.audit)}\naudit {'PASS' if r.audit.ok else 'FAIL'}" for r in runs]
    ax.bar(names, vals, color=colours)
    ax.set_ylim(0, max(vals + [1.0]) * 1.15)
    for i, v in enumerate(vals):
        ax.text(i, v, f"{v:,.0f}", ha="center", va="bottom")
    if len(vals) == 2 and min(vals) > 0:
        slow = runs[vals.index(min(vals))].label
        ax.text(0.98, 0.9, f"{slow}: {max(vals) / min(vals):.1f}x slower", transform=ax.transAxes, ha="right")
    ax.set_ylabel("tokens/s per GPU")
    ax.set_title(f"{LABEL}\nsame FSDP2 job, only the NCCL transport changed", fontsize=10)
    try:
        fig.tight_layout()
    except Exception:  # pragma: no cover - layout is cosmetic
        pass
    return fig


__all__ = [
    "CAPTURED_DIR",
    "LABEL",
    "SIDECAR",
    "CapturedRun",
    "KeyLine",
    "captured_runs",
    "key_lines",
    "plot_ab",
    "side_by_side",
    "sidecar",
    "verdict_name",
]
