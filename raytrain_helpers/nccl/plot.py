"""A rank x rank heatmap of the transport each pair used (matplotlib is imported when a plot is drawn)."""

from __future__ import annotations

from .model import Communicator
from .result import AuditResult

_PLOT_COLORS = [
    ("", "#ffffff"),
    ("p2p", "#2ca02c"),
    ("nvls", "#17becf"),
    ("shm", "#98df8a"),
    ("collnet", "#bcbd22"),
    ("efa", "#1f77b4"),
    ("ib", "#9467bd"),
    ("ofi-*", "#ff7f0e"),
    ("socket", "#d62728"),
    ("?", "#7f7f7f"),
]
_LABELS = {
    "p2p": "P2P (NVLink/PCIe)",
    "nvls": "NVLS",
    "shm": "SHM",
    "collnet": "CollNet",
    "efa": "EFA (OFI)",
    "ib": "IB",
    "ofi-*": "OFI non-EFA provider",
    "socket": "NET/Socket (TCP)",
    "?": "unknown",
}


def plot_matrix(result: AuditResult, ax=None, comm: str | None = None):
    """A rank x rank heatmap of the transport each pair used (row sends to column); inter-node pairs are
    marked with a dot. Returns the matplotlib Figure (never calls plt.show)."""
    from matplotlib.colors import BoundaryNorm, ListedColormap
    from matplotlib.figure import Figure

    comms = result.matrix
    g = next((c for c in comms if comm in (c.key, c.label)), None) if comm else (comms[0] if comms else None)
    if comm and g is None:
        raise ValueError(f"comm={comm!r} is not one of the audited communicators: {', '.join(c.label for c in comms)}")
    if ax is None:
        fig = Figure(figsize=(6.4, 5.6))
        ax = fig.add_subplot(1, 1, 1)
    else:
        fig = ax.figure
    names = [n for n, _ in _PLOT_COLORS]
    cmap = ListedColormap([c for _, c in _PLOT_COLORS])
    norm = BoundaryNorm([i - 0.5 for i in range(len(names) + 1)], cmap.N)
    n = g.size if g else 0
    data, present = _cells(g, names)
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
    _legend(ax, g, present)
    try:
        fig.tight_layout()
    except Exception:  # pragma: no cover - layout is cosmetic
        pass
    return fig


def _cells(g: Communicator | None, names: list[str]) -> tuple[list[list[int]], set[str]]:
    """The matrix as colour indices, and the classes present."""
    n = g.size if g else 0
    data = [[0] * n for _ in range(n)]
    present = set()
    if g is not None:
        for (a, b), p in g.pairs.items():
            cls = p.cls
            key = "ofi-*" if cls.startswith("ofi-") else (cls if cls in names else "?")
            data[a][b] = names.index(key)
            present.add(key)
    return data, present


def _legend(ax, g: Communicator | None, present: set[str]) -> None:
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    handles = [Patch(facecolor=c, edgecolor="black", label=_LABELS[k]) for k, c in _PLOT_COLORS if k in present]
    if any(p.location == "inter" for p in (g.pairs.values() if g else [])):
        handles.append(
            Line2D([], [], marker="o", color="white", markeredgecolor="black", linestyle="", label="inter-node pair")
        )
    if handles:
        ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=8, frameon=False)
