"""The one templating path: Jinja2 templates in ``manifests/`` rendered from the settings.

Every manifest (RayCluster, RayJob, eksctl ClusterConfig, device plugins) is a ``*.yaml.j2`` file in
``manifests/`` rendered with :func:`render_template`; undefined variables are errors, never blanks.
"""

from __future__ import annotations

from typing import Any

import jinja2
import yaml

from ..core.paths import manifests_dir
from ..core.settings import Settings


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(manifests_dir())),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
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
    """The text of one template of ``manifests/``."""
    return _environment().get_template(name).render(**context(settings, **extra))


def render_objects(name: str, settings: Settings, **extra: Any) -> list[dict[str, Any]]:
    """Render a template and parse it into Kubernetes-style objects (multi-document YAML)."""
    text = render_template(name, settings, **extra)
    return [d for d in yaml.safe_load_all(text) if d]


def to_yaml(obj: dict[str, Any]) -> str:
    """One object as block YAML, keys in their rendered order."""
    return yaml.safe_dump(obj, sort_keys=False, width=120)


__all__ = ["context", "render_objects", "render_template", "to_yaml"]
