"""``raytrain-tutorial cost``: what the whole walkthrough costs on aws, offline (no credentials, no API call).

Minutes of cluster per notebook and their price (:mod:`raytrain_helpers.plan.walkthrough`), for the settings given
(``-f profiles/aws-article.yaml``, ``-p gpu_node_count 4``...) whatever their target: the aws group is priced.
"""

from __future__ import annotations

import argparse

from ..plan import walkthrough
from .args import add_settings_args, settings_from_args


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``cost`` command."""
    p = sub.add_parser(
        "cost",
        help="the whole walkthrough on aws: minutes of cluster per notebook and USD (offline, no credentials)",
    )
    add_settings_args(p)
    p.add_argument("--prices", default=None, metavar="FILE", help="a YAML/JSON price override file")
    what = p.add_mutually_exclusive_group()
    what.add_argument("--json", action="store_true", help="print the estimate as JSON")
    what.add_argument("--line", action="store_true", help="print the one-line summary only (what the docs quote)")
    what.add_argument("--sources", action="store_true", help="also print where each figure comes from")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    est = walkthrough.estimate(settings_from_args(args), args.prices)
    if args.json:
        print(est.to_json())
    elif args.line:
        print(est.line())
    else:
        est.show()
        if args.sources:
            print("sources:")
            for s in est.sources():
                print(f"  {s}")
    return 0 if est.usd is not None else 1
