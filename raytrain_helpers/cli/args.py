"""How every command takes its settings: the env file, override files, ``-p NAME VALUE`` and ``--target``."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ..core.loading import load, parse_param
from ..core.paths import data_path
from ..core.settings import Settings
from ..core.validation import ConfigError


def add_settings_args(p: argparse.ArgumentParser) -> None:
    """The common way every command takes settings: env file, override files, -p NAME VALUE."""
    p.add_argument("--env-file", default=None, help="the variables file (default: env.yaml found upwards)")
    p.add_argument(
        "-f",
        "--file",
        dest="files",
        action="append",
        default=[],
        metavar="YAML",
        type=override_file,
        help="an override file (repeatable; later files win); profiles/NAME.yaml is also found in the installed "
        "package (e.g. -f profiles/aws-article.yaml)",
    )
    p.add_argument(
        "-p",
        "--param",
        dest="params",
        action="append",
        nargs=2,
        default=[],
        metavar=("NAME", "VALUE"),
        help="override one setting: flat (steps), dotted (train.steps) or env.sh (STEPS) name (repeatable)",
    )
    p.add_argument("--target", choices=("local", "aws"), default=None, help="shortcut for -p target ...")


def override_file(text: str) -> str:
    """An ``-f`` path as given; ``profiles/NAME.yaml`` that is not here is the shipped profile (the repository's or
    the installed wheel's), so ``-f profiles/aws-article.yaml`` works from any folder."""
    given = Path(text).expanduser()
    if given.is_file() or given.is_absolute() or given.parts[:1] != ("profiles",):
        return text
    try:
        shipped = data_path("profiles").joinpath(*given.parts[1:])
    except FileNotFoundError:
        return text
    return str(shipped) if shipped.is_file() else text


def cli_params(args: argparse.Namespace) -> dict[str, Any]:
    """``-p NAME VALUE`` pairs by flat setting name, each value read as its field's type (later pairs win).

    NAME may be flat (``steps``), dotted (``train.steps``) or env.sh (``STEPS``): all three set the same setting.
    """
    params: dict[str, Any] = {}
    for key, value in args.params or []:
        name, typed = parse_param(key, value, source="-p")
        params[name] = typed
    return params


def with_flags(args: argparse.Namespace, params: dict[str, Any], **flags: Any) -> dict[str, Any]:
    """``params`` plus a command's own flags for a setting (``target=args.target``; None = not given).

    A flag and a ``-p`` of the same setting that disagree are an error naming both: neither silently wins.
    """
    for name, value in flags.items():
        if value is None:
            continue
        if name in params and params[name] != value:
            given = next((k for k, v in reversed(args.params or []) if parse_param(k, v)[0] == name), name)
            flag = "--" + name.replace("_", "-")
            raise ConfigError(
                f"{flag} {value} and -p {given} {params[name]} set {name} to two values. Fix: give {flag} or "
                f"-p {given}, not both"
            )
        params[name] = value
    return params


def settings_from_args(args: argparse.Namespace, **extra: Any) -> Settings:
    """The settings the parsed arguments ask for (``extra`` values that are not None win)."""
    params = with_flags(args, cli_params(args), target=getattr(args, "target", None))
    params.update({k: v for k, v in extra.items() if v is not None})
    return load(args.env_file, files=args.files, **params)
