"""``raytrain-tutorial plugins|kuberay|render``: the device plugins (notebook 03), the KubeRay operator and the
RayCluster (notebook 04), and every Kubernetes manifest rendered from env.yaml."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

from ..plan.manifests import PLACEHOLDERS, aws_documents, render_all, write_all
from ..plan.render import to_yaml
from ..targets import for_settings
from ..targets.base import OPERATOR_ACTION, PART_ACTIONS
from .args import add_settings_args, settings_from_args


def register(sub) -> None:
    """Add the ``kuberay``, ``plugins`` and ``render`` commands."""
    _register_kuberay(sub)
    _register_plugins(sub)
    _register_render(sub)


# --------------------------------------------------------------------------------------------
# plugins up|status|down
# --------------------------------------------------------------------------------------------


def _register_plugins(sub) -> None:
    parser = sub.add_parser("plugins", help="NVIDIA + EFA device plugins (notebook 03): up, status, down")
    parser.add_argument("action", choices=PART_ACTIONS)
    parser.add_argument("--yes", action="store_true", help="allow the destructive action (down)")
    parser.add_argument("--timeout", type=float, default=None, help="seconds to wait (default: the step's own)")
    add_settings_args(parser)
    parser.set_defaults(func=plugins_command)


def plugins_command(args: argparse.Namespace) -> int:
    settings = settings_from_args(args)
    target = for_settings(settings)
    result = target.plugins_action(settings, args.action, assume_yes=args.yes, timeout_s=args.timeout)
    result.show()
    return 0 if result.ok else 1


# --------------------------------------------------------------------------------------------
# kuberay up|status|down
# --------------------------------------------------------------------------------------------


def _register_kuberay(sub) -> None:
    parser = sub.add_parser(
        "kuberay", help="KubeRay operator + RayCluster (notebook 04): up, status, down; operator: the operator only"
    )
    parser.add_argument("action", choices=(*PART_ACTIONS, OPERATOR_ACTION))
    parser.add_argument(
        "--yes", action="store_true", help="allow destructive actions (down, replacing a changed cluster)"
    )
    parser.add_argument("--timeout", type=float, default=None, help="seconds to wait (default: the step's own)")
    add_settings_args(parser)
    parser.set_defaults(func=kuberay_command)


def kuberay_command(args: argparse.Namespace) -> int:
    settings = settings_from_args(args)
    target = for_settings(settings)
    result = target.kuberay_action(settings, args.action, assume_yes=args.yes, timeout_s=args.timeout)
    result.show()
    return 0 if result.ok else 1


# --------------------------------------------------------------------------------------------
# render
# --------------------------------------------------------------------------------------------


def _register_render(sub) -> None:
    parser = sub.add_parser(
        "render",
        help="render every document the aws path creates from env.yaml: the Kubernetes manifests (device plugins, "
        "KubeRay operator, RayCluster, RayJob), the eksctl configs, the storage role's IAM policies",
    )
    add_settings_args(parser)
    parser.add_argument(
        "--out",
        default=None,
        metavar="DIR",
        help="write one YAML file per Kubernetes object into DIR (kubectl apply -f DIR), the eksctl configs into "
        "DIR/eksctl, the IAM policies into DIR/iam, the Pod Identity association into DIR/eks; default: stdout",
    )
    parser.add_argument("--no-alternatives", action="store_true", help="leave out the RayJob alternative")
    parser.set_defaults(func=render_command)


def out_dir_problem(out: Path) -> str | None:
    """Why manifests cannot be written into ``out`` (a file in the way, a folder not writable), or None."""
    for p in [*reversed(out.parents), out]:
        if p.exists() and not p.is_dir():
            return f"{p} is a file, not a folder"
        if not p.exists():
            parent = p.parent
            return None if os.access(parent, os.W_OK | os.X_OK) else f"{parent} is not writable"
    return None if os.access(out, os.W_OK | os.X_OK) else f"{out} is not writable"


def render_command(args: argparse.Namespace) -> int:
    settings = settings_from_args(args)
    include = not args.no_alternatives
    if args.out:
        out = Path(args.out).expanduser().resolve()
        problem = out_dir_problem(out)
        if problem:
            print(
                f"error: cannot write manifests to {args.out} (--out): {problem}. Fix: choose a folder you can "
                f"write to, or leave out --out to print them",
                file=sys.stderr,
            )
            return 2
        existed = out.exists()
        try:
            paths = write_all(settings, out, include_alternatives=include)
        except OSError as e:
            if not existed:
                shutil.rmtree(out, ignore_errors=True)
            print(
                f"error: cannot write manifests to {args.out} (--out): {e.strerror or e}. Fix: choose a folder you "
                f"can write to",
                file=sys.stderr,
            )
            return 2
        for path in paths:
            print(path)
        print(
            f"{len(paths)} document(s) written to {args.out}: the Kubernetes objects at the top (apply with: kubectl "
            f"apply --server-side -f {args.out}), the eksctl configs, IAM policies and Pod Identity association "
            f"in its sub-folders"
        )
        print(f"placeholders step 02 fills in from AWS: {', '.join(PLACEHOLDERS.values())}")
        return 0
    for name, obj in render_all(settings, include_alternatives=include):
        print(f"---\n# file: {name}")
        print(to_yaml(obj), end="")
    for name, text in aws_documents(settings):
        print(f"---\n# file: {name}")
        print(text, end="")
    return 0


__all__ = ["kuberay_command", "plugins_command", "register", "render_command"]
