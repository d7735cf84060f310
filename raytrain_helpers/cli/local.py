"""``raytrain-tutorial up`` and ``env``: the local Ray cluster (``status``, for every target, is in :mod:`.run`)."""

from __future__ import annotations

import shlex
import sys

from ..core.loading import with_overrides
from ..targets import for_settings
from .args import add_settings_args, settings_from_args


def register(sub) -> None:
    p = sub.add_parser("up", help="start (or reuse) the local Ray cluster")
    add_settings_args(p)
    p.set_defaults(func=run)
    p = sub.add_parser(
        "env",
        help="print the export line that points a terminal at the running local cluster "
        '(RAY_ADDRESS and its token): eval "$(raytrain-tutorial env)"',
    )
    add_settings_args(p)
    p.set_defaults(func=env)


def run(args) -> int:
    """Step 02's ``up`` on the local target, whatever ``target`` the settings name (this command is the local
    cluster's), through the Target interface like every other step."""
    s = with_overrides(settings_from_args(args), target="local")
    try:
        info = for_settings(s).cluster(s, "up")
    except RuntimeError as e:  # LocalClusterError: a port taken, a raylet that did not start
        print(f"error: {e}", file=sys.stderr)
        return 1
    info.show()
    return 0 if info.running else 1


def env(args) -> int:
    """One ``export`` line for a POSIX shell: ``ray.init()`` and ``ray job`` in that shell then join the local
    cluster (not a Ray of their own) and carry its token."""
    s = with_overrides(settings_from_args(args), target="local")
    try:
        variables = for_settings(s).shell_env(s)  # the local target's own (this command is the local cluster's)
    except RuntimeError as e:  # LocalClusterError: not running
        print(f"error: {e}", file=sys.stderr)
        return 1
    print("export " + " ".join(f"{k}={shlex.quote(v)}" for k, v in variables.items()))
    return 0
