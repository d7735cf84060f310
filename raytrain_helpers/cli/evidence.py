"""``raytrain-tutorial evidence RUN``: 06's and 07's tables rebuilt from the run's folder alone, the cluster gone.

Reads ``runs/<run>/evidence/`` (what 05-08 saved as they read it, :mod:`..steps.evidence`) and the checkpoint and
model kept in the run's folder; asks no cluster anything.
"""

from __future__ import annotations

import argparse

from ..steps import benchmark, evidence, verify
from .args import add_settings_args, settings_from_args


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "evidence",
        help="rebuild 06's criteria and 07's tables from a run's saved evidence (no cluster needed)",
        description="Reads runs/<run>/evidence/ (the workers' logs, the job records, 06's infrastructure rows, "
        "07's variants) and prints 06's criteria table and 07's figures and comparison. Exit 0: 06's criteria "
        "pass; 1: they do not; 2: nothing saved for the run.",
    )
    p.add_argument("run", help="the run's name (runs/<run>/)")
    p.add_argument("--no-model", action="store_true", help="leave out the row that loads the exported model")
    add_settings_args(p)
    p.set_defaults(func=_cli_evidence)


def _cli_evidence(args: argparse.Namespace) -> int:
    settings = settings_from_args(args, run_name=args.run)
    saved = evidence.kinds(settings)
    if not saved:
        print(f"error: nothing saved under runs/{args.run}/{evidence.FOLDER}: run 06 (or 08) first")
        return 2
    print(f"saved evidence of run {args.run!r}: {', '.join(saved)}")
    v = verify.from_evidence(settings, check_model=not args.no_model)
    v.show()
    bench = benchmark.from_evidence(settings)
    if bench:
        benchmark.show_figures(bench)
        benchmark.compare(settings, bench, write=False).show()
        benchmark.efa_table(bench)
    return 0 if v.ok else 1
