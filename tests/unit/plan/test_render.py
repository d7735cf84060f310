"""plan.render: the Jinja templating of manifests/ (undefined variables are errors, never blanks)."""

from __future__ import annotations

from pathlib import Path

import jinja2
import pytest

from raytrain_helpers.core import config
from raytrain_helpers.plan import render

REPO = Path(__file__).resolve().parents[3]


def settings(**params):
    return config.load(REPO / "env.yaml", environ={}, check_installed_ray=False, **params)


def test_render_objects_parses_every_document():
    (ns,) = render.render_objects("namespace.yaml.j2", settings(namespace="team-a"), ns_name="team-a")
    assert ns["kind"] == "Namespace" and ns["metadata"]["name"] == "team-a"
    text = render.render_template("namespace.yaml.j2", settings(), ns_name="x")
    assert text.endswith("\n") and "name: x" in text


def test_undefined_variables_are_errors():
    with pytest.raises(jinja2.UndefinedError):
        render.render_template("namespace.yaml.j2", settings())


def test_context_holds_the_groups_and_the_settings():
    s = settings()
    ctx = render.context(s, extra=1)
    assert ctx["settings"] is s and ctx["aws"]["region"] == s.aws.region and ctx["extra"] == 1


def test_to_yaml_keeps_the_order():
    assert render.to_yaml({"kind": "A", "apiVersion": "v1"}) == "kind: A\napiVersion: v1\n"
