"""``raytrain-tutorial config``: the resolved settings and where each came from, or every setting's documentation.

``--names`` and ``--markdown`` are generated from the settings' field docstrings (``core.settings``); docs/settings.md's
settings table is the ``--markdown`` output, and a test keeps the two equal.
"""

from __future__ import annotations

import argparse
import json
import textwrap
from typing import Any

from ..core.loading import dump_yaml, sources
from ..core.names import FieldDoc, env_var_name, field_docs
from .args import add_settings_args, settings_from_args

MARKDOWN_HEADER = "| setting (env.sh name) | default | meaning |\n|---|---|---|"


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``config`` command."""
    p = sub.add_parser("config", help="show the resolved settings (env.yaml + overrides) and where each came from")
    add_settings_args(p)
    what = p.add_mutually_exclusive_group()
    what.add_argument(
        "--names", action="store_true", help="list every setting: name, env.sh name, type, default and meaning"
    )
    what.add_argument("--markdown", action="store_true", help="print docs/settings.md's settings table (Markdown)")
    p.set_defaults(func=_run)


def default_text(value: Any) -> str:
    """A default as env.yaml would spell it: ``""`` for an empty string, ``[]``, ``{}``, ``1e-4`` as ``0.0001``."""
    if isinstance(value, str):
        return value if value else '""'
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, dict)):
        return json.dumps(value)
    return str(value)


def names_text(docs: list[FieldDoc] | None = None) -> str:
    """Every setting: flat name (dotted name, env.sh name, environment variable): type = default, then its meaning."""
    blocks = []
    for d in field_docs() if docs is None else docs:
        names = [d.dotted] if d.dotted != d.flat else []
        if d.env_sh:
            names.append(f"env.sh {d.env_sh}")
        names.append(env_var_name(d.flat))
        head = f"{d.flat} ({', '.join(names)}): {d.type} = {default_text(d.default)}"
        blocks.append(head + "\n" + textwrap.fill(d.description, 100, initial_indent="    ", subsequent_indent="    "))
    return "\n".join(blocks)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def markdown_table(docs: list[FieldDoc] | None = None) -> str:
    """The settings table of docs/settings.md: one row per setting (dotted and env.sh name, default, meaning)."""
    rows = [MARKDOWN_HEADER]
    for d in field_docs() if docs is None else docs:
        setting = f"`{d.dotted}`" + (f" ({d.env_sh})" if d.env_sh else "")
        rows.append(f"| {setting} | `{_cell(default_text(d.default))}` | {_cell(d.description)} |")
    return "\n".join(rows)


def _run(args: argparse.Namespace) -> int:
    if args.names:
        print(names_text())
        return 0
    if args.markdown:
        print(markdown_table())
        return 0
    s = settings_from_args(args)
    print(dump_yaml(s), end="")
    src = sources(s)
    if src:
        print("# sources of non-default values:")
        for k, v in sorted(src.items()):
            print(f"#   {k}: {v}")
    return 0
