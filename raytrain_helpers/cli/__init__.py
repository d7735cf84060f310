"""``raytrain-tutorial``: the same helpers the notebooks call, from a terminal or CI.

Every command lives in this package: each module named in ``COMMAND_MODULES`` defines ``register(subparsers)``,
which adds its parsers and sets ``func`` (a callable taking the parsed namespace and returning an exit code).
Lower layers never import this package.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from ..core.validation import ConfigError

COMMAND_MODULES = (
    "run",
    "check",
    "config",
    "cost",
    "local",
    "nccl",
    "aws",
    "kube",
    "handout",
    "report",
    "evidence",
    "workdir",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="raytrain-tutorial",
        description="Multi-node PyTorch FSDP with Ray Train on KubeRay/EKS: run the tutorial notebooks, "
        "manage the local cluster, render manifests, audit NCCL transports.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(f"{__name__}.{name}").register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
