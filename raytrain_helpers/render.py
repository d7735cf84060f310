"""The one templating path: Jinja2 templates in ``manifests/`` rendered from the settings.

Every manifest (RayCluster, RayJob, eksctl ClusterConfig, device plugins) is a ``*.yaml.j2`` file in
``manifests/`` rendered with :func:`render_template`; undefined variables are errors, never blanks.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jinja2
import yaml

from .config import Settings

MANIFESTS_DIR = Path(__file__).resolve().parent.parent / "manifests"


def manifests_dir() -> Path:
    if not MANIFESTS_DIR.is_dir():  # pragma: no cover - an installed wheel without the repo
        raise FileNotFoundError(f"manifests/ not found next to the package ({MANIFESTS_DIR})")
    return MANIFESTS_DIR


def _env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(manifests_dir())),
        undefined=jinja2.StrictUndefined, keep_trailing_newline=True, trim_blocks=True, lstrip_blocks=True,
    )
    env.filters["yaml"] = lambda v: yaml.safe_dump(v, default_flow_style=True, width=10_000).strip()
    env.filters["q"] = lambda v: '"' + str(v).replace("\\", "\\\\").replace('"', '\\"') + '"'
    return env


def context(settings: Settings, **extra: Any) -> dict[str, Any]:
    """Template variables: the settings groups by name, plus anything extra."""
    ctx: dict[str, Any] = settings.public_dict()
    ctx["settings"] = settings
    ctx.update(extra)
    return ctx


def render_template(name: str, settings: Settings, **extra: Any) -> str:
    return _env().get_template(name).render(**context(settings, **extra))


def render_objects(name: str, settings: Settings, **extra: Any) -> list[dict[str, Any]]:
    """Render a template and parse it into Kubernetes-style objects (multi-document YAML)."""
    text = render_template(name, settings, **extra)
    return [d for d in yaml.safe_load_all(text) if d]


# --------------------------------------------------------------------------------------------
# Every manifest of the aws target, one object per file
# --------------------------------------------------------------------------------------------

#: Objects written under this sub-folder are alternatives, not part of `kubectl apply -f DIR`.
ALTERNATIVES = "alternatives"


def _filename(index: int, obj: dict[str, Any]) -> str:
    return f"{index:02d}-{obj['kind'].lower()}-{obj['metadata']['name']}.yaml"


def render_all(settings: Settings, *, include_alternatives: bool = True) -> list[tuple[str, dict[str, Any]]]:
    """Every object the aws target applies, in apply order, as (filename, object).

    Order: the device plugins (notebook 03), the KubeRay operator, the namespace, the RayCluster
    (notebook 04). The RayJob (the declarative alternative to notebook 05) comes last under
    ``alternatives/``: applying it next to the RayCluster would ask for every GPU node twice.
    """
    from . import kuberay, plugins
    objs = plugins.render_plugins(settings) + kuberay.render_operator(settings)
    objs += [kuberay.render_namespace(settings), kuberay.render_raycluster(settings)]
    out = [(_filename(i, o), o) for i, o in enumerate(objs, start=1)]
    if include_alternatives:
        job = kuberay.render_rayjob(settings)
        out.append((f"{ALTERNATIVES}/{_filename(len(out) + 1, job)}", job))
    return out


def to_yaml(obj: dict[str, Any]) -> str:
    return yaml.safe_dump(obj, sort_keys=False, width=120)


def write_all(settings: Settings, out_dir: str | Path, *, include_alternatives: bool = True) -> list[Path]:
    """Write :func:`render_all` to ``out_dir`` (one object per file); stale files of ours are replaced."""
    out = Path(out_dir)
    rendered = render_all(settings, include_alternatives=include_alternatives)
    out.mkdir(parents=True, exist_ok=True)
    header = "# Rendered by `raytrain-tutorial render` from env.yaml; edit env.yaml, not this file.\n"
    paths = []
    for name, obj in rendered:
        p = out / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(header + to_yaml(obj))
        paths.append(p)
    return paths


def register_cli(sub) -> None:
    from .cli import add_settings_args
    p = sub.add_parser("render", help="render every Kubernetes manifest (device plugins, KubeRay operator, "
                                      "RayCluster, RayJob) from env.yaml")
    add_settings_args(p)
    p.add_argument("--out", default=None, metavar="DIR",
                   help="write one YAML file per object into DIR (kubectl apply -f DIR); default: print to stdout")
    p.add_argument("--no-alternatives", action="store_true", help="leave out the RayJob alternative")
    p.set_defaults(func=_cli)


def _cli(args) -> int:
    from .cli import settings_from_args
    settings = settings_from_args(args)
    if args.out:
        paths = write_all(settings, args.out, include_alternatives=not args.no_alternatives)
        for pth in paths:
            print(pth)
        print(f"{len(paths)} manifest(s) written to {args.out} (apply with: kubectl apply --server-side -f {args.out})")
        return 0
    for name, obj in render_all(settings, include_alternatives=not args.no_alternatives):
        print(f"---\n# file: {name}")
        print(to_yaml(obj), end="")
    return 0
