"""The output object every view returns, and whether the front end renders more than text.

:class:`Shown` is ``text/plain`` always, and HTML of the same content only when :func:`interactive_frontend`
finds a front end that renders widgets (JupyterLab, Notebook 7; never papermill or nbval).
"""

from __future__ import annotations

import html
from collections.abc import Callable

from ..core.tables import MAX_WIDTH

#: None: detect the front end; True / False: force (tests, or a front end the detection does not know).
FORCE_INTERACTIVE: bool | None = None
#: Execute-request metadata keys that widget-capable front ends send and headless runners do not: JupyterLab
#: and Notebook 7 send ``cellId``, ``deletedCells`` and ``recordTiming``; papermill, nbclient and nbval send none.
FRONTEND_METADATA_KEYS = ("cellId", "deletedCells", "recordTiming")


def interactive_frontend(interactive: bool | None = None) -> bool:
    """True when the cell runs in a kernel whose front end renders widgets (never under papermill or nbval).

    Evidence, in order: an explicit ``interactive`` (or :data:`FORCE_INTERACTIVE`); an IPython kernel with
    ipywidgets importable; the current execute request's metadata carrying a front end's cell keys
    (:data:`FRONTEND_METADATA_KEYS`). Anything missing means plain text.
    """
    if interactive is not None:
        return bool(interactive)
    if FORCE_INTERACTIVE is not None:
        return FORCE_INTERACTIVE
    kernel = _kernel()
    if kernel is None:
        return False
    try:
        import ipywidgets  # noqa: F401 - only whether it is there
    except ImportError:
        return False
    try:
        parent = kernel.get_parent("shell")
    except Exception:  # noqa: BLE001 - older ipykernel: no parent API means no evidence
        return False
    metadata = (parent or {}).get("metadata") or {}
    return any(key in metadata for key in FRONTEND_METADATA_KEYS)


def _kernel():
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    return getattr(get_ipython(), "kernel", None)


class Shown:
    """Text a notebook displays: always ``text/plain``; HTML of the same content only for a rich front end."""

    def __init__(self, text: str, html_text: str | None = None, *, interactive: bool | None = None):
        self.text = text.rstrip("\n")
        self.html = html_text
        self.interactive = interactive

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return self.text

    def _repr_pretty_(self, printer, cycle: bool) -> None:
        printer.text(self.text)

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict[str, str]:
        bundle = {"text/plain": self.text}
        if self.html and interactive_frontend(self.interactive):
            bundle["text/html"] = self.html
        return bundle

    def mimebundle(self) -> dict[str, str]:
        """Both renderings, whatever the front end (for tests and reports)."""
        out = {"text/plain": self.text}
        if self.html:
            out["text/html"] = self.html
        return out


def pre_html(text: str, marked: Callable[[str], str | None] | None = None) -> str:
    """``text`` in a <pre>, line by line; ``marked(line)`` may return a CSS colour for a line."""
    lines = []
    for line in text.split("\n"):
        colour = marked(line) if marked else None
        escaped = html.escape(line)
        lines.append(f'<span style="color:{colour}">{escaped}</span>' if colour else escaped)
    body = "\n".join(lines)
    return f'<pre style="font-size:12px;line-height:1.35;max-width:{MAX_WIDTH}ch;overflow-x:auto">{body}</pre>'


def fit(line: str, width: int = MAX_WIDTH) -> str:
    """One line cut to ``width`` characters (an ellipsis marks the cut)."""
    return line if len(line) <= width else line[: width - 3] + "..."
