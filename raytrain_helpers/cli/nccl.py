"""``raytrain-tutorial audit LOG [LOG...] [--expect ...] [--marker ...] [--json]``: the NCCL transport audit."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from ..core.constants import MARKER_PREFIX
from ..nccl import EXPECTATIONS, WORKER_FILE, audit, select_run
from .args import add_settings_args, settings_from_args


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "audit",
        help="audit NCCL_DEBUG=INFO logs: the transport each rank pair used, against the expected one",
        description="Reads NCCL INFO lines (bare, Ray- or kubectl-prefixed), builds the rank-pair x transport "
        "matrix and says whether the expected transport was used. Exit 0: as expected; 1: not; "
        "2: unreadable input.",
    )
    p.add_argument(
        "logs", nargs="+", metavar="LOG", help="log file ('-' = stdin; a directory = its worker-*.out/.err files)"
    )
    p.add_argument(
        "--expect",
        choices=EXPECTATIONS,
        default=None,
        help="expected transport (default: the nccl.expect setting, auto)",
    )
    p.add_argument("--marker", default=None, help="keep only the logs of this run marker")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    add_settings_args(p)
    p.set_defaults(func=_cli_audit)


def _read_inputs(paths: Sequence[str]) -> dict[str, str]:
    """``{name: text}`` of each LOG argument: a file, ``-`` (stdin), or a directory's worker-*.out/.err files."""
    texts: dict[str, str] = {}
    for s in paths:
        if s == "-":
            texts["<stdin>"] = sys.stdin.read()
            continue
        path = Path(s)
        if path.is_dir():
            files = sorted(f for f in path.iterdir() if WORKER_FILE.match(f.name) and f.is_file())
            if not files:
                raise OSError(f"{path}: a directory without worker-*.out/.err files")
            for f in files:
                texts[str(f)] = f.read_bytes().decode("utf-8", errors="replace")
            continue
        texts[str(path)] = path.read_bytes().decode("utf-8", errors="replace")
    return texts


def _cli_audit(args: argparse.Namespace) -> int:
    try:
        texts = _read_inputs(args.logs)
    except OSError as e:
        print(f"error: cannot read the log: {e}", file=sys.stderr)
        return 2
    if args.marker:
        try:
            texts = select_run(texts, args.marker)
        except ValueError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        if not texts:
            print(f"error: no log holds the line '{MARKER_PREFIX}{args.marker}'", file=sys.stderr)
            return 2
    expect = args.expect
    if expect is None:
        expect = settings_from_args(args).nccl.expect
    res = audit(texts, expect=expect)
    if args.json:
        print(res.to_json())
    else:
        res.show()
    return 0 if res.ok else 1
