"""Plain-text tables and human-readable sizes.

Tables are printed as plain text (no colour codes, fixed width) so that notebook outputs are stable and nbval
can compare them, and a terminal shows the same thing.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Iterable, Sequence
from typing import Any

#: No table or listing line is wider than this (fits a 1,280 px browser window without wrapping).
MAX_WIDTH = 110


def table(
    rows: Iterable[Sequence[Any]],
    headers: Sequence[str],
    title: str | None = None,
    max_width: int = 60,
    fit: bool = False,
) -> None:
    """Print a fixed-width text table (plain text: stable for nbval, readable in a terminal); ``fit``: see
    :func:`format_table`."""
    print(format_table(rows, headers, title, max_width, fit))


def format_table(
    rows: Iterable[Sequence[Any]],
    headers: Sequence[str],
    title: str | None = None,
    max_width: int = 60,
    fit: bool = False,
) -> str:
    """The table as text; with ``fit``, a table wider than :data:`MAX_WIDTH` wraps its widest columns instead of
    growing, and no cell is cut off."""
    whole = [[_cell(c, 10**6) for c in r] for r in rows]
    rows = [[_cell(c, max_width) for c in r] for r in whole]
    headers = [str(h) for h in headers]
    widths = [len(h) for h in headers]
    for r in rows:
        for i, c in enumerate(r):
            widths[i] = max(widths[i], len(c))
    if fit and sum(widths) + 3 * len(widths) + 1 > MAX_WIDTH:  # wider than the page: the widest columns wrap
        return wrapped_table(whole, headers, fitted_widths(widths, MAX_WIDTH), title)  # nothing cut off
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


def wrapped_table(
    rows: Iterable[Sequence[Any]], headers: Sequence[str], widths: Sequence[int], title: str | None = None
) -> str:
    """A fixed-width text table whose cells wrap (at word boundaries) to ``widths`` instead of growing."""
    rows = [[str(c) for c in r] for r in rows]
    widths = [max(w, len(h)) for w, h in zip(widths, headers, strict=True)]
    sep = "+-" + "-+-".join("-" * w for w in widths) + "-+"
    out = textwrap.wrap(title, MAX_WIDTH, break_on_hyphens=False) if title else []
    out += [sep, "| " + " | ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)) + " |", sep]
    for row in rows:
        cells = [_wrap_cell(c, w) for c, w in zip(row, widths, strict=True)]
        for i in range(max(len(c) for c in cells)):
            parts = [(c[i] if i < len(c) else "").ljust(w) for c, w in zip(cells, widths, strict=True)]
            out.append("| " + " | ".join(parts) + " |")
    out.append(sep)
    return "\n".join(out)


def fitted_widths(widths: Sequence[int], total: int) -> list[int]:
    """Column widths whose table (borders included) is at most ``total`` wide: the widest columns are narrowed,
    one character at a time, the narrow ones kept."""
    widths = list(widths)
    while sum(widths) + 3 * len(widths) + 1 > total and max(widths) > 8:
        widths[widths.index(max(widths))] -= 1
    return widths


def _wrap_cell(text: str, width: int) -> list[str]:
    """A cell's lines: each of its own lines (``\\n``) wrapped to ``width`` at word boundaries."""
    lines = []
    for part in text.split("\n"):
        lines += textwrap.wrap(part, width, break_long_words=True, break_on_hyphens=False)
    return lines or [""]


def human_bytes(n: float) -> str:
    if n is None or (isinstance(n, float) and math.isnan(n)):
        return "?"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return f"{n:.1f} TiB"  # pragma: no cover


def figure(value: Any, fmt: str, missing: str = "-") -> str:
    """``value`` formatted with ``fmt``; ``missing`` when there is none or it is not a finite number (never
    ``nan`` in front of the learner)."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return missing
    return format(number, fmt) if math.isfinite(number) else missing
