"""``raytrain-tutorial capacity`` (step 01) and ``raytrain-tutorial cluster plan|up|status|down`` (step 02)."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys

from ..clients.aws import AwsError
from ..core.constants import STEP_ACTIONS
from ..targets import for_settings
from .args import add_settings_args, settings_from_args


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``capacity`` and ``cluster`` commands."""
    p = sub.add_parser(
        "capacity",
        help="step 01: where can the GPU nodes run (quota, offerings, Spot scores, "
        "optional reservation probe), memory plan and cost",
    )
    add_settings_args(p)
    p.add_argument(
        "--regions",
        nargs="+",
        default=None,
        metavar="REGION",
        help="regions to check (space or comma separated; default: every enabled region)",
    )
    p.add_argument(
        "--probe",
        action="store_true",
        help="definitive check: create and at once cancel a capacity reservation (billable, asks first)",
    )
    p.add_argument("--yes", action="store_true", help="confirm billable actions without asking")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument("--prices", default=None, metavar="FILE", help="a YAML/JSON price override file")
    p.set_defaults(func=run_capacity)

    c = sub.add_parser("cluster", help="step 02: plan | up | status | down the cluster (local raylets or EKS)")
    c.add_argument("action", choices=STEP_ACTIONS)
    add_settings_args(c)
    c.add_argument("--yes", action="store_true", help="confirm billable/destructive actions without asking")
    c.add_argument("--nodegroup-only", action="store_true", help="down: delete only the GPU node group (aws)")
    c.add_argument("--json", action="store_true", help="print the result as JSON (aws)")
    c.set_defaults(func=run_cluster)


def run_capacity(args: argparse.Namespace) -> int:
    settings = settings_from_args(args)
    target = for_settings(settings)
    regions = None
    if args.regions:
        regions = [r for item in args.regions for r in item.replace(",", " ").split()]
    try:
        if args.json:
            with contextlib.redirect_stdout(sys.stderr):  # progress and prompts on stderr, JSON alone on stdout
                rep = target.capacity(
                    settings, regions=regions, probe=args.probe, assume_yes=args.yes, prices=args.prices
                )
            print(json.dumps(rep.as_dict(), indent=2, default=str))
        else:
            rep = target.capacity(settings, regions=regions, probe=args.probe, assume_yes=args.yes, prices=args.prices)
            rep.show()
    except AwsError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0 if rep.ok else 1


def run_cluster(args: argparse.Namespace) -> int:
    settings = settings_from_args(args)
    target = for_settings(settings)
    try:
        if args.action == "down" and args.nodegroup_only and target.NODEGROUP_ONLY_DOWN:
            res = target.teardown(settings, assume_yes=args.yes, nodegroup_only=True)
        else:
            res = target.cluster(settings, args.action, assume_yes=args.yes)
    except RuntimeError as e:  # AwsError, LocalClusterError
        print(f"error: {e}", file=sys.stderr)
        return 1
    if args.json and hasattr(res, "as_dict"):
        print(json.dumps(res.as_dict(), indent=2, default=str))
    elif hasattr(res, "show"):
        res.show()
    ok = getattr(res, "ok", None)
    if ok is None:  # the local cluster info: up/status want it running, down wants it stopped
        running = getattr(res, "running", True)
        ok = (not running) if args.action == "down" else (running or args.action == "plan")
    return 0 if ok else 1
