"""``raytrain-tutorial run`` (the notebooks in order, through papermill), ``down`` (tear everything down) and
``status`` (what still bills)."""

from __future__ import annotations

import argparse
import sys
import time

from ..core.loading import load
from ..steps import teardown
from ..targets import for_settings
from .args import add_settings_args, cli_params, settings_from_args, with_flags
from .runner import canonical_params, list_notebooks, report_billing, run_notebooks


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``run`` and ``down`` commands."""
    p = sub.add_parser("run", help="execute the tutorial notebooks in order (papermill) into runs/<run_name>/")
    add_settings_args(p)
    p.add_argument("--run-name", default=None, help="names runs/<run_name>/ (default: env.yaml run_name)")
    p.add_argument("--only", action="append", default=None, metavar="NB", help="run only notebooks starting with NB")
    p.add_argument("--from", dest="start_from", default=None, metavar="NB", help="start at notebook NB")
    p.add_argument("--force", action="store_true", help="re-run finished notebooks too")
    p.add_argument("--kernel", default="python3")
    p.add_argument("--log-output", action="store_true", help="stream the notebooks' output while they run")
    p.add_argument("--list", action="store_true", help="list the notebooks and their parameters, run nothing")
    p.set_defaults(func=_cli_run)

    d = sub.add_parser(
        "down",
        help="tear everything down: the local Ray cluster, or on aws the RayCluster, "
        "operator, plugins, node group and cluster in reverse order (needs --yes)",
    )
    add_settings_args(d)
    d.add_argument("--yes", action="store_true", help="aws: confirm the deletion (never prompts)")
    d.set_defaults(func=_cli_down)

    st = sub.add_parser(
        "status",
        help="the cluster (the local Ray cluster, or EKS), then what of the tutorial bills now (on aws read from the "
        "account: cluster, node groups, NAT gateway, bucket), its cost per hour and the command that stops it",
    )
    add_settings_args(st)
    st.set_defaults(func=_cli_status)


def _cli_run(args: argparse.Namespace) -> int:
    params = with_flags(args, cli_params(args), run_name=args.run_name or None, target=args.target)
    settings = load(args.env_file, files=args.files, **params)  # fail fast on bad values
    if args.list:
        _print_notebook_parameters()
        return 0
    t0 = time.time()
    try:
        results = run_notebooks(
            settings,
            params=canonical_params(settings, params),
            env_file=args.env_file,
            files=args.files,
            only=args.only,
            start_from=args.start_from,
            force=args.force,
            kernel=args.kernel,
            stream_output=args.log_output,
        )
    except (KeyboardInterrupt, Exception):  # interrupted, or the runner itself failed: say what bills, tear nothing
        report_billing(settings)
        raise
    bad = [r for r in results if r.status == "failed"]
    print(f"total {time.time() - t0:.0f} s; " + ("FAILED at " + bad[0].name if bad else "all notebooks succeeded"))
    return 1 if bad else 0


def _print_notebook_parameters() -> None:
    import papermill as pm

    for nb in list_notebooks():
        ps = pm.inspect_notebook(str(nb))
        print(f"{nb.stem}: " + ", ".join(f"{k}={v['default']}" for k, v in ps.items()))


def _cli_down(args: argparse.Namespace) -> int:
    s = settings_from_args(args)
    result = teardown.run(s, assume_yes=bool(getattr(args, "yes", False)))
    result.show()
    return 0 if result.ok else 1


def _cli_status(args: argparse.Namespace) -> int:
    s = settings_from_args(args)
    target = for_settings(s)
    try:
        target.cluster(s, "status").show()
        print()
        target.billing(s).show()
    except RuntimeError as e:  # AwsError, LocalClusterError
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0  # it only reports
