"""Every Kubernetes manifest of the aws target, one object per file, in the order they are applied.

``raytrain-tutorial render --out DIR`` writes them for ``kubectl apply --server-side -f DIR``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..core.config import Settings
from .iam import render_service_account
from .plugins import render_plugins
from .raycluster import render_namespace, render_operator, render_raycluster, render_rayjob
from .render import to_yaml

#: Objects written under this sub-folder are alternatives, not part of `kubectl apply -f DIR`.
ALTERNATIVES = "alternatives"
HEADER = "# Rendered by `raytrain-tutorial render` from env.yaml; edit env.yaml, not this file.\n"


def filename(index: int, obj: dict[str, Any]) -> str:
    """``NN-kind-name.yaml``: the apply order is the file order."""
    return f"{index:02d}-{obj['kind'].lower()}-{obj['metadata']['name']}.yaml"


def render_all(settings: Settings, *, include_alternatives: bool = True) -> list[tuple[str, dict[str, Any]]]:
    """Every object the aws target applies, in apply order, as (filename, object).

    Order: the device plugins (notebook 03), the KubeRay operator, the namespace, the pods' ServiceAccount
    (Pod Identity; under IRSA step 04 adds the role annotation), the RayCluster (notebook 04). The RayJob
    (the declarative alternative to notebook 05) comes last under ``alternatives/``: applying it next to the
    RayCluster would ask for every GPU node twice.
    """
    objs = render_plugins(settings) + render_operator(settings)
    objs += [render_namespace(settings), render_service_account(settings), render_raycluster(settings)]
    out = [(filename(i, obj), obj) for i, obj in enumerate(objs, start=1)]
    if include_alternatives:
        job = render_rayjob(settings)
        out.append((f"{ALTERNATIVES}/{filename(len(out) + 1, job)}", job))
    return out


def write_all(settings: Settings, out_dir: str | Path, *, include_alternatives: bool = True) -> list[Path]:
    """Write :func:`render_all` to ``out_dir`` (one object per file); stale files of ours are replaced."""
    out = Path(out_dir)
    rendered = render_all(settings, include_alternatives=include_alternatives)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, obj in rendered:
        path = out / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(HEADER + to_yaml(obj))
        paths.append(path)
    return paths


__all__ = ["ALTERNATIVES", "HEADER", "filename", "render_all", "write_all"]
