"""``raytrain-tutorial cost``: what the whole walkthrough costs on aws, offline (no credentials, no API call).

Minutes of cluster per notebook and their price (:mod:`raytrain_helpers.plan.walkthrough`), for the settings given
(``-f profiles/aws-article.yaml``, ``-p gpu_node_count 4``...) whatever their target: the aws group is priced.
Estimating needs no bucket: a ``train.storage_path`` that is still a placeholder (the article's profile ships
``s3://<your-bucket>/raytrain``) or not a valid bucket is left out of the estimate, with a note on stderr, instead of
refusing the command; every command that creates or runs something still refuses it.
"""

from __future__ import annotations

import argparse
import sys

from ..core.settings import Settings
from ..core.validation import ConfigError
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


#: The note printed when the estimate was made without the settings' storage path.
NO_BUCKET_NOTE = (
    "note: train.storage_path is not a bucket yet; the estimate needs none (S3 is not priced). Set it before "
    "`run`: -p storage_path s3://YOUR-BUCKET/raytrain"
)


def settings_without_bucket(args: argparse.Namespace) -> tuple[Settings, bool]:
    """The settings the arguments ask for, and whether their storage path had to be left out: when the only
    problem is ``train.storage_path`` (a placeholder, a bad bucket name), the settings without it (empty)."""
    try:
        return settings_from_args(args), False
    except ConfigError as e:
        if "train.storage_path" not in str(e):
            raise
        try:
            return settings_from_args(args, storage_path=""), True
        except ConfigError:
            raise e from None


def _run(args: argparse.Namespace) -> int:
    settings, no_bucket = settings_without_bucket(args)
    est = walkthrough.estimate(settings, args.prices)
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
    if no_bucket:
        print(NO_BUCKET_NOTE, file=sys.stderr)
    return 0 if est.usd is not None else 1
