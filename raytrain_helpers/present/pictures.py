"""The pictures the notebooks draw from the learner's own run: one FSDP step per layer, the cluster as it ran,
memory through one step, and the loss curves. Each function takes plain data (a job's result, a trace, a
timeline), returns a matplotlib ``Figure`` (never calls ``plt.show``) and :func:`save_png` writes one into the
run's folder. matplotlib is imported when a picture is drawn.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..plan.step_trace import KINDS, phases

#: One colour per phase of a step (plan/step_trace.py's KINDS) and per kind of memory.
PHASE_COLORS = {
    "all-gather": "#2ca02c",
    "forward": "#1f77b4",
    "backward": "#ff7f0e",
    "reduce-scatter": "#d62728",
    "optimizer": "#7f7f7f",
}
_COMM = ("all-gather", "reduce-scatter")
_PHASE_ABBR = {"forward": "fwd", "backward": "bwd", "optimizer": "step"}


def _figure(width: float, height: float):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height))
    return fig, fig.add_subplot(1, 1, 1)


def fsdp_step(traces: list[dict[str, Any]], *, title: str = "") -> Any:
    """One training step per rank, as ``torch.profiler`` recorded it: for each rank a lane of compute (each layer's
    forward, then its backward, then the optimizer) above a lane of collectives (all-gathers, reduce-scatters).
    ``traces``: the ranks' traces (``plan.step_trace.rank_traces``)."""
    if not traces:
        raise ValueError(
            "no rank recorded a profiled step: run the job with profile_step set (rt.steps.pictures.profile)"
        )
    fig, ax = _figure(10, 1.0 + 1.1 * len(traces))
    ticks, labels = [], []
    origins = [t.get("origin_unix_us") for t in traces]
    aligned = all(o is not None for o in origins)  # on the hosts' clocks: the ranks' lanes line up
    for i, trace in enumerate(traces):
        base = (len(traces) - 1 - i) * 3
        shift = (origins[i] - min(origins)) if aligned else 0.0
        for p in phases(trace):
            y = base + (0 if p.kind in _COMM else 1)
            ax.broken_barh(
                [((shift + p.start_us) / 1e3, max(p.duration_us / 1e3, 0.01))], (y, 0.8), color=PHASE_COLORS[p.kind]
            )
            if p.kind in ("forward", "backward") and p.module.startswith("layers."):
                ax.text(
                    (shift + p.start_us + p.duration_us / 2) / 1e3,
                    y + 0.4,
                    p.module.split(".")[-1],
                    ha="center",
                    va="center",
                    fontsize=7,
                    color="white",
                )
        ticks += [base + 0.4, base + 1.4]
        labels += [f"rank {trace['rank']} collectives", f"rank {trace['rank']} compute"]
    ax.set_yticks(ticks)
    ax.set_yticklabels(labels, fontsize=8)
    first = "the first rank's first FSDP call" if aligned else "each rank's first FSDP call"
    ax.set_xlabel(f"ms from {first} (host side, as torch.profiler recorded it)")
    from matplotlib.patches import Patch

    handles = [Patch(color=PHASE_COLORS[k], label=k) for k in KINDS]
    ax.legend(
        handles=handles,
        loc="upper center",
        bbox_to_anchor=(0.5, -0.35 if len(traces) < 3 else -0.2),
        ncol=len(KINDS),
        fontsize=8,
        frameon=False,
    )
    ax.set_title(title or "one FSDP step per layer (numbers: decoder layer)", fontsize=10)
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    return fig


def cluster(nodes: list[dict[str, Any]], ranks: list[dict[str, Any]], *, title: str = "") -> Any:
    """The cluster as the job ran on it: one box per Ray node (the head, the workers: raylets or pods), its CPUs,
    GPUs and EFA devices as Ray counts them, and the ranks that ran on it with their device. ``nodes``: the job
    result's ``nodes`` (``node_id``, ``host``, ``is_head``, ``alive``, ``resources``); ``ranks``: its per-rank
    figures (``rank``, ``node_id``, ``device``, ``gpu``)."""
    from matplotlib.patches import FancyBboxPatch

    shown = sorted(nodes, key=lambda n: (not n.get("is_head"), str(n.get("host")), str(n.get("node_id"))))
    if not shown:
        raise ValueError("the job's result lists no nodes: draw it from a finished job (rt.steps.train.load_last)")
    fig, ax = _figure(max(6.0, 2.6 * len(shown)), 3.4)
    for i, n in enumerate(shown):
        res = n.get("resources") or {}
        x = i * 2.6
        color = "#dddddd" if n.get("is_head") else ("#c6dbef" if n.get("alive", True) else "#fcbba1")
        ax.add_patch(FancyBboxPatch((x, 0), 2.3, 3.0, boxstyle="round,pad=0.05", fc=color, ec="black"))
        role = "head" if n.get("is_head") else "worker"
        ax.text(x + 1.15, 2.75, f"{role} {str(n.get('node_id', ''))[:8]}", ha="center", fontsize=9, weight="bold")
        ax.text(x + 1.15, 2.45, str(n.get("host") or "?")[:28], ha="center", fontsize=7)
        efa = sum(int(v) for k, v in res.items() if "efa" in k.lower())
        kit = f"CPU {res.get('CPU', 0):g} · GPU {res.get('GPU', 0):g}" + (f" · EFA {efa}" if efa else "")
        ax.text(x + 1.15, 2.15, kit, ha="center", fontsize=8)
        mine = sorted((r for r in ranks if r.get("node_id") == n.get("node_id")), key=lambda r: r["rank"])
        for j, r in enumerate(mine):
            y = 1.6 - j * 0.55
            ax.add_patch(FancyBboxPatch((x + 0.2, y - 0.2), 1.9, 0.4, boxstyle="round,pad=0.02", fc="#fdd0a2"))
            dev = r.get("gpu") if r.get("gpu") not in (None, "cpu") else r.get("device", "cpu")
            ax.text(x + 1.15, y, f"rank {r['rank']} · {dev}", ha="center", va="center", fontsize=8)
        if not mine:
            ax.text(
                x + 1.15,
                1.3,
                "no rank (driver, GCS)" if n.get("is_head") else "no rank",
                ha="center",
                fontsize=8,
                style="italic",
            )
    ax.set_xlim(-0.2, 2.6 * len(shown))
    ax.set_ylim(-0.2, 3.2)
    ax.axis("off")
    ax.set_title(title or f"the cluster as the job ran: {len(shown)} Ray nodes, {len(ranks)} ranks", fontsize=10)
    fig.tight_layout()
    return fig


def memory_step(points: list[dict[str, Any]], *, title: str = "") -> Any:
    """Memory through one step, stacked by kind (``worker/memory_lab.timeline``'s points): forward layer by layer,
    backward in reverse, then after the optimizer's step."""
    kinds = [k for k in points[0]["bytes"] if k != "total" and any(p["bytes"].get(k) for p in points)]
    fig, ax = _figure(10, 4)
    xs = range(len(points))
    ys = [[p["bytes"].get(k, 0) / 2**20 for p in points] for k in kinds]
    ax.stackplot(xs, ys, labels=kinds, step=None, alpha=0.85)
    ax.set_xticks(list(xs))
    ax.set_xticklabels(
        [f"{_PHASE_ABBR.get(p['phase'], p['phase'])} {p['module']}: {p['point']}" for p in points],
        rotation=70,
        ha="right",
        fontsize=7,
    )
    ax.set_ylabel("MiB on this rank")
    ax.legend(loc="upper right", fontsize=8)
    ax.set_title(title or "memory through one training step (FSDPMemTracker, one rank)", fontsize=10)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    return fig


def loss_curve(
    series: dict[str, list[tuple[int, float]]],
    *,
    measures: str,
    title: str = "",
    reference: tuple[float, str] | None = None,
) -> Any:
    """Loss against step, one line per series (``name -> [(step, loss), ...]``); ``measures`` says what the loss
    measures (the y label), so a benchmark's loss on random tokens is not read as learning. ``reference``: a value
    and its name drawn as a dashed line (ln V: guessing uniformly), with the y axis reaching 0.5 either side."""
    fig, ax = _figure(7, 3.4)
    if reference is not None:
        ax.axhline(reference[0], color="black", linestyle="--", linewidth=1, label=reference[1])
        values = [v for pts in series.values() for _, v in pts] + [reference[0]]
        ax.set_ylim(min(min(values), reference[0] - 0.5) - 0.05, max(max(values), reference[0] + 0.5) + 0.05)
    for name, pts in series.items():
        if pts:
            ax.plot([s for s, _ in pts], [v for _, v in pts], marker="o", markersize=3, label=name)
    ax.set_xlabel("step")
    ax.set_ylabel(measures, fontsize=8)
    if len(series) > 1 or reference is not None:
        ax.legend(fontsize=8)
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


class Picture:
    """A drawn picture and the PNG it was saved as: a notebook shows the PNG (``_repr_png_``), ``figure`` is the
    matplotlib Figure to change or save elsewhere."""

    def __init__(self, figure: Any, path: Path):
        self.figure, self.path = figure, path

    def _repr_png_(self) -> bytes:
        return self.path.read_bytes()

    def __repr__(self) -> str:
        return f"picture saved as {self.path}"


def save_png(fig: Any, folder: Path, name: str) -> Path:
    """Write ``fig`` as ``folder/name.png`` (the run's folder: ``runs/<run>/``); the path."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.png"
    fig.savefig(path, dpi=110, bbox_inches="tight")
    return path
