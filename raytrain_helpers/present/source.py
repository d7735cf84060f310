"""The package's own code, quoted where a notebook explains it: :func:`show_source` numbers a function as in its
file, :func:`key_lines` finds the key lines of a package by their text (neither can drift from the code).
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..core.paths import REPO_ROOT
from .shown import Shown, fit, pre_html


def show_source(func: Any, lines: tuple[int, int] | str | Sequence[str] | None = None) -> Shown:
    """A function's (or a whole module's) source as it is in the package, numbered as in its file.

    ``func`` may be named: ``"raytrain_helpers.worker.train:train_loop_per_worker"``.
    ``lines``: None = the whole function; ``(first, last)`` = those lines of the function (1 = its ``def``);
    a string or strings = only the lines containing one of them (each with its own line number).
    """
    func = inspect.unwrap(resolve(func) if isinstance(func, str) else func)
    source, start = inspect.getsourcelines(func)
    start = max(start, 1)  # a module starts at line 1
    path = Path(inspect.getsourcefile(func) or "?")
    try:
        where = path.resolve().relative_to(REPO_ROOT)
    except ValueError:
        where = Path(path.name)
    numbered = [(start + i, text.rstrip("\n")) for i, text in enumerate(source)]
    patterns: list[str] = []
    if isinstance(lines, tuple):
        numbered = numbered[max(lines[0] - 1, 0) : lines[1]]
    elif lines is not None:
        patterns = [lines] if isinstance(lines, str) else list(lines)
        numbered = [(n, t) for n, t in numbered if any(p in t for p in patterns)]
    name = getattr(func, "__qualname__", getattr(func, "__name__", "?"))
    head = f"# {where} - {name}, lines {start}-{start + len(source) - 1}"
    if patterns:
        head += " (only the lines quoted)"
    missing = [p for p in patterns if not any(p in t for _, t in numbered)]
    body = [fit(f"{n:4d}  {t}") for n, t in numbered]
    if missing:
        body.append(f"      (not in this version of {name}: {', '.join(missing)})")
    text = "\n".join([head, *body])
    return Shown(text, pre_html(text, lambda line: "#6a737d" if line.startswith("# ") else None))


def resolve(name: str) -> Any:
    """``"package.module"`` or ``"package.module:attribute"`` -> the module or the attribute."""
    module_name, _, attr = name.partition(":")
    obj = importlib.import_module(module_name)
    for part in filter(None, attr.split(".")):
        obj = getattr(obj, part)
    return obj


def code_lines(path: Path) -> list[tuple[int, str]]:
    """(line number, stripped line) of a Python file's code: comments and docstring/string blocks left out."""
    out, in_string = [], False
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        stripped = line.strip()
        quotes = stripped.count('"""') + stripped.count("'''")
        if in_string or stripped.startswith(('"""', "'''")):
            in_string = in_string != (quotes % 2 == 1)
            continue
        if quotes % 2 == 1:
            in_string = True
        if stripped and not stripped.startswith("#"):
            out.append((number, stripped))
    return out


def key_lines(
    patterns: Sequence[tuple[str, str]], package: str = "raytrain_helpers.worker", per_pattern: int = 2
) -> Shown:
    """Where the key lines of a package are: for each (label, text), the first lines containing ``text`` in any
    of the package's modules, with file and line number. Found by text, so the listing follows the code."""
    root = Path(resolve(package).__file__).parent
    files = sorted(root.glob("*.py"))
    out = [f"# key lines of {root.relative_to(REPO_ROOT)}/ (found by their text; they follow the code)"]
    for label, needle in patterns:
        out.append(f"# {label}")
        hits = [(path.name, number, line) for path in files for number, line in code_lines(path) if needle in line]
        if not hits:
            out.append(f"    (no line contains {needle!r} in this version)")
        for name, number, line in hits[:per_pattern]:
            out.append(fit(f"{name}:{number}: {line}"))
    text = "\n".join(out)
    return Shown(text, pre_html(text, lambda line: "#6a737d" if line.startswith("#") else None))
