"""``raytrain-tutorial up``: the local Ray cluster (``status``, for every target, is in :mod:`.run`)."""

from __future__ import annotations

import sys

from ..targets import local
from .args import add_settings_args, settings_from_args


def register(sub) -> None:
    for name, help_ in (("up", "start (or reuse) the local Ray cluster"),):
        p = sub.add_parser(name, help=help_)
        add_settings_args(p)
        p.set_defaults(func=lambda a, _n=name: run(a, _n))


def run(args, action: str) -> int:
    s = settings_from_args(args)
    try:
        info = local.up(s) if action == "up" else local.status(s)
    except local.LocalClusterError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    info.show()
    return 0 if (info.running or action == "status") else 1
