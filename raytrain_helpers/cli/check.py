"""``raytrain-tutorial check``: the preflight - what the chosen target needs on this machine, one table.

The target decides what it needs (``targets.<name>.preflight``); this command only prints the table and exits 1
when a required row failed (2 for bad settings, like every command).
"""

from __future__ import annotations

import argparse
import json

from ..targets import for_settings
from .args import add_settings_args, settings_from_args


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``check`` command."""
    p = sub.add_parser(
        "check",
        help="preflight: the tools, versions, credentials and quota the target needs on this machine (run it first)",
    )
    add_settings_args(p)
    p.add_argument("--no-quota", action="store_true", help="skip the vCPU quota rows (aws: no AWS calls but STS)")
    p.add_argument("--json", action="store_true", help="print the rows as JSON")
    p.add_argument(
        "--existing-cluster",
        action="store_true",
        help="aws: also read the existing EKS cluster the tutorial would run in (aws.existing_cluster: true) and list "
        "what it needs from it, each with its fix; creates nothing",
    )
    p.set_defaults(func=run_check)


def run_check(args: argparse.Namespace) -> int:
    settings = settings_from_args(args, existing_cluster=True if args.existing_cluster else None)
    result = for_settings(settings).preflight(settings, quota=not args.no_quota)
    if args.json:
        print(json.dumps(result.as_dict(), indent=2))
    else:
        result.show()
    return 0 if result.ok else 1


__all__ = ["register", "run_check"]
