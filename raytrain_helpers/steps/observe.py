"""Watching the job while it trains (05, 07): the Ray dashboard, Ray's own metrics, the EFA hardware counters.

* :func:`dashboard` (05): how to open the Ray dashboard of your cluster, and what to look at there while the job runs.
* :func:`recording` (05, 07): while a job runs, every :data:`INTERVAL_S` seconds each node's metrics page (the target's
  ``node_metrics``: Ray's metrics export port) is read and its figures (CPU and GPU utilisation, memory, network
  throughput; :data:`raytrain_helpers.plan.hardware.NODE_METRICS`) appended to ``runs/<run>/metrics/<name>.jsonl``.
* :func:`plot_metrics` (07): those figures per variant, from the run's folder.
* :func:`efa_reading` (07, aws): each GPU node's EFA counters, read before and after a variant; the bytes moved over
  EFA judged against the transport the variant meant to use.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..clients import raystate
from ..core.paths import run_dir
from ..core.settings import Settings
from ..core.tables import table
from ..plan.hardware import EfaVerdict, efa_moved, efa_verdict, node_figures
from ..present.shown import Shown
from ..targets import for_settings

#: Seconds between two readings of every node's metrics page.
INTERVAL_S = 5.0
#: What to look at in the dashboard while the job runs: (where, what it shows).
WHAT_TO_LOOK_AT = [
    ("Jobs > your job (raytrain-<run>-<marker>)", "its status, the driver's log (Logs > DRIVER), its tasks and actors"),
    ("Actors", "the Train run: its TrainController and one RayTrainWorker per rank, with the node and PID of each"),
    ("an actor's row > Log", "that rank's own output: its step lines and, on GPUs, NCCL's INFO lines (06 audits them)"),
    ("Cluster", "every node: CPU, memory, GPU and GPU memory in use, the object store"),
    ("Metrics", "Ray's time series (needs Prometheus and Grafana: the aws metrics stack, observability.md)"),
]


def auth_mode(url: str) -> str:
    """What the dashboard at ``url`` asks of a browser: ``token`` or ``disabled`` (Ray 2.58's public
    ``GET /api/authentication_mode``), or why it did not answer."""
    try:
        return str(raystate.get_json(f"{url}/api/authentication_mode").get("authentication_mode", "?"))
    except (OSError, ValueError, AttributeError) as e:
        return f"unknown (no answer: {type(e).__name__})"


def dashboard(settings: Settings) -> Shown:
    """05: how to open your cluster's Ray dashboard (the token is never printed), and what to look at there."""
    with for_settings(settings).dashboard(settings) as access:
        mode = auth_mode(access.url)
        lines = [f"The Ray dashboard of this cluster answers; its login: {mode}. Open it yourself:"]
        lines += [f"  {i}. {what}:\n       {how}" for i, (what, how) in enumerate(access.steps, 1)]
    lines.append("While the job runs, look at:")
    width = max(len(w) for w, _ in WHAT_TO_LOOK_AT)
    lines += [f"  {where:<{width}}  {what}" for where, what in WHAT_TO_LOOK_AT]
    return Shown("\n".join(lines))


# ---------------------------------------------------------------------------------------------------------------
# Ray's metrics, recorded while a job runs
# ---------------------------------------------------------------------------------------------------------------


def metrics_path(settings: Settings, name: str, run_name: str | None = None) -> Path:
    """``runs/<run>/metrics/<name>.jsonl``."""
    d = run_dir(settings, run_name) / "metrics"
    d.mkdir(exist_ok=True)
    return d / f"{name}.jsonl"


def sample(settings: Settings) -> list[dict[str, Any]]:
    """One reading: a row per node whose page carries node figures (the dashboard's and autoscaler's pages carry
    none), with the time, the node's source and its figures."""
    now = round(time.time(), 1)
    rows = []
    for source, text in sorted(for_settings(settings).node_metrics(settings).items()):
        figures = node_figures(text)
        if "cpu_percent" in figures or "mem_used_bytes" in figures:
            rows.append(dict(t=now, node=source, **figures))
    return rows


@contextlib.contextmanager
def recording(
    settings: Settings, name: str, *, run_name: str | None = None, interval_s: float = INTERVAL_S
) -> Iterator[Path]:
    """Read every node's metrics each ``interval_s`` seconds, in a thread, while the block runs; appends to
    :func:`metrics_path`. A reading that fails (a node gone, the cluster stopping) is skipped, never raised."""
    path = metrics_path(settings, name, run_name)
    stop = threading.Event()

    def loop() -> None:
        while True:
            try:
                rows = sample(settings)
            except Exception:  # noqa: BLE001 - metrics are a side view: the job goes on without them
                rows = []
            if rows:
                with path.open("a") as f:
                    f.writelines(json.dumps(r) + "\n" for r in rows)
            if stop.wait(interval_s):
                return

    thread = threading.Thread(target=loop, name=f"raytrain-metrics-{name}", daemon=True)
    thread.start()
    try:
        yield path
    finally:
        stop.set()
        thread.join(timeout=interval_s + 30)


def read_metrics(path: Path | str) -> list[dict[str, Any]]:
    """The rows of one recording (unreadable lines skipped); empty when there is none."""
    try:
        lines = Path(path).read_text().splitlines()
    except OSError:
        return []
    out = []
    for line in lines:
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


def recordings(settings: Settings, run_name: str | None = None, prefix: str = "") -> dict[str, list[dict]]:
    """The run's recordings whose name starts with ``prefix``, by name."""
    d = run_dir(settings, run_name) / "metrics"
    return {p.stem: read_metrics(p) for p in sorted(d.glob(f"{prefix}*.jsonl"))} if d.is_dir() else {}


def summary(rows: list[dict[str, Any]]) -> list[tuple[str, str, str, str, str, str]]:
    """Per node: readings, mean and peak CPU %, peak memory, mean GPU % (or -), peak network send."""
    out = []
    for node in sorted({r["node"] for r in rows}):
        mine = [r for r in rows if r["node"] == node]

        def col(key: str, rows=mine) -> list[float]:
            return [r[key] for r in rows if r.get(key) is not None]

        cpu, mem, gpu, net = col("cpu_percent"), col("mem_used_bytes"), col("gpu_percent"), col("net_send_bytes_per_s")
        role = "head" if any(r.get("head") for r in mine) else "worker"
        out.append(
            (
                f"{role} {node}",
                str(len(mine)),
                f"{sum(cpu) / len(cpu):.0f} / {max(cpu):.0f}" if cpu else "-",
                f"{max(mem) / 2**30:.2f}" if mem else "-",
                f"{sum(gpu) / len(gpu):.0f}" if gpu else "-",
                f"{max(net) / 2**20:.1f}" if net else "-",
            )
        )
    return out


def show_summary(rows: list[dict[str, Any]], title: str) -> None:
    """:func:`summary` as a table."""
    table(
        summary(rows) or [("-", "0", "-", "-", "-", "-")],
        ["node", "readings", "CPU % mean / peak", "memory GiB peak", "GPU % mean", "net send MiB/s peak"],
        title=title,
    )


def plot_metrics(by_variant: dict[str, list[dict[str, Any]]], axes=None):
    """07: CPU %, memory and GPU % (where there are GPUs) of each worker node over each variant's run, one line
    per node and variant, from the recordings (seconds from each recording's first reading)."""
    import matplotlib.pyplot as plt

    keys = [("cpu_percent", "CPU %"), ("mem_used_bytes", "memory GiB"), ("gpu_percent", "GPU %")]
    keys = [k for k in keys if any(r.get(k[0]) is not None for rows in by_variant.values() for r in rows)]
    if axes is None:
        fig, axes = plt.subplots(1, max(1, len(keys)), figsize=(4 * max(1, len(keys)), 3))
    axes = list(axes) if hasattr(axes, "__iter__") else [axes]
    fig = axes[0].figure
    for ax, (key, label) in zip(axes, keys, strict=False):
        for variant, rows in by_variant.items():
            if not rows:
                continue
            t0 = min(r["t"] for r in rows)
            for node in sorted({r["node"] for r in rows if not r.get("head")}):
                pts = [(r["t"] - t0, r[key]) for r in rows if r["node"] == node and r.get(key) is not None]
                scale = 2**30 if key == "mem_used_bytes" else 1
                ax.plot([p[0] for p in pts], [p[1] / scale for p in pts], marker=".", label=f"{variant} {node}")
        ax.set_xlabel("seconds into the run")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    if keys:
        axes[0].legend(fontsize=7)
        axes[0].set_title("Ray's node metrics per variant", fontsize=9, loc="left")
    fig.tight_layout()
    return fig


# ---------------------------------------------------------------------------------------------------------------
# EFA counters around a variant
# ---------------------------------------------------------------------------------------------------------------


@contextlib.contextmanager
def efa_reading(settings: Settings, expect: str) -> Iterator[dict[str, Any]]:
    """Read every GPU node's EFA counters before and after the block; the dict yielded gets ``before``, ``after``
    and ``verdict`` (an :class:`EfaVerdict`, or None where the target has no EFA). A reading that fails is said in
    ``error``, never raised (the variant's own result stands)."""
    target = for_settings(settings)
    out: dict[str, Any] = dict(before={}, after={}, verdict=None, error=None)
    try:
        out["before"] = target.efa_counters(settings)
    except Exception as e:  # noqa: BLE001 - no counters: said, the benchmark goes on
        out["error"] = f"before: {type(e).__name__}: {e}"
    yield out
    try:
        out["after"] = target.efa_counters(settings) if out["before"] else {}
    except Exception as e:  # noqa: BLE001
        out["error"] = f"after: {type(e).__name__}: {e}"
    if out["before"] or out["after"]:
        out["verdict"] = efa_verdict(efa_moved(out["before"], out["after"]), expect)


def efa_rows(verdicts: dict[str, EfaVerdict | None]) -> list[tuple[str, str, str, str]]:
    """Per variant: expected transport, the verdict, the evidence."""
    rows = []
    for label, v in verdicts.items():
        if v is None:
            rows.append((label, "-", "n/a", "no EFA counters here"))
        else:
            rows.append((label, v.expect, {True: "ok", False: "NOT OK", None: "n/a"}[v.ok], v.message))
    return rows


__all__ = [
    "INTERVAL_S",
    "WHAT_TO_LOOK_AT",
    "auth_mode",
    "dashboard",
    "efa_reading",
    "efa_rows",
    "metrics_path",
    "plot_metrics",
    "read_metrics",
    "recording",
    "recordings",
    "sample",
    "show_summary",
    "summary",
]
