"""Plain-text tables and human-readable sizes.

Tables are printed as plain text (no colour codes, fixed width) so that notebook outputs are stable and nbval
can compare them, and a terminal shows the same thing.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any


def table(rows: Iterable[Sequence[Any]], headers: Sequence[str], title: str | None = None, max_width: int = 60) -> None:
    """Print a fixed-width text table (plain text: stable for nbval, readable in a terminal)."""
    print(format_table(rows, headers, title, max_width))


def format_table(
    rows: Iterable[Sequence[Any]], headers: Sequence[str], title: str | None = None, max_width: int = 60
) -> str:
    rows = [[_cell(c, max_width) for c in r] for r in rows]
    headers = [str(h) for h in headers]
    widths = [len(h) for h in headers]
    for r in rows:
        for i, c in enumerate(r):
            widths[i] = max(widths[i], len(c))
    sep = "+-" + "-+-".join("-" * w for w in widths) + "-+"
    lines = []
    if title:
        lines.append(title)
    lines.append(sep)
    lines.append("| " + " | ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)) + " |")
    lines.append(sep)
    for r in rows:
        lines.append("| " + " | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) + " |")
    lines.append(sep)
    return "\n".join(lines)


def _cell(v: Any, max_width: int) -> str:
    if isinstance(v, float):
        s = f"{v:.4g}"
    else:
        s = str(v)
    s = s.replace("\n", " ")
    return s if len(s) <= max_width else s[: max_width - 3] + "..."


def human_bytes(n: float) -> str:
    if n is None or (isinstance(n, float) and math.isnan(n)):
        return "?"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return f"{n:.1f} TiB"  # pragma: no cover
