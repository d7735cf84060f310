"""``raytrain-tutorial config``: show the resolved settings, their sources, or validate a file."""

from __future__ import annotations

import argparse

from . import config as C


def register_cli(sub: argparse._SubParsersAction) -> None:
    from .cli import add_settings_args
    p = sub.add_parser("config", help="show the resolved settings (env.yaml + overrides) and where each came from")
    add_settings_args(p)
    p.add_argument("--names", action="store_true", help="list every setting's flat name and env variable")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from .cli import settings_from_args
    if args.names:
        for flat, (group, leaf) in sorted(C.FLAT_FIELDS.items()):
            dotted = f"{group}.{leaf}" if group else leaf
            print(f"{flat:30s} {dotted:40s} {C.env_var_name(flat)}")
        return 0
    s = settings_from_args(args)
    print(C.dump_yaml(s), end="")
    src = C.sources(s)
    if src:
        print("# sources of non-default values:")
        for k, v in sorted(src.items()):
            print(f"#   {k}: {v}")
    return 0
