"""Every target exports the Target interface with the same signatures, and only for_settings reads the target."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from raytrain_helpers import targets
from raytrain_helpers.core import config
from raytrain_helpers.targets import base

PKG = Path(targets.__file__).resolve().parents[1]


def _module(name):
    import importlib

    return importlib.import_module(f"raytrain_helpers.targets.{name}")


@pytest.mark.parametrize("name", targets.NAMES)
def test_target_exports_the_interface(name):
    mod = _module(name)
    assert mod.NAME == name
    for attr in base.INTERFACE:
        assert hasattr(mod, attr), f"targets.{name} lacks {attr}"
        assert attr in mod.__all__, f"targets.{name} does not export {attr}"
        if attr in base.ATTRIBUTES:
            assert isinstance(getattr(mod, attr), base.ATTRIBUTES[attr]), f"targets.{name}.{attr}"
            continue
        want = inspect.signature(getattr(base.Target, attr))
        got = inspect.signature(getattr(mod, attr))
        want_params = [p for p in want.parameters.values() if p.name != "self"]
        assert [(p.name, p.kind) for p in got.parameters.values()][: len(want_params)] == [
            (p.name, p.kind) for p in want_params
        ], f"targets.{name}.{attr}{got} differs from the interface {want}"
        extra = list(got.parameters.values())[len(want_params) :]
        assert all(p.default is not p.empty or p.kind is p.VAR_KEYWORD for p in extra), (
            f"targets.{name}.{attr} adds required parameters {extra}"
        )


def test_for_settings_picks_the_target_module(clean_env, repo_root):
    for name in targets.NAMES:
        s = config.load(repo_root / "env.yaml", environ={}, target=name, check_installed_ray=False)
        assert targets.for_settings(s) is _module(name)


def test_for_settings_refuses_an_unknown_target():
    class Fake:
        target = "gcp"

    with pytest.raises(config.ConfigError, match="target: local or target: aws"):
        targets.for_settings(Fake())


def _reads_target(node: ast.AST, path: str) -> bool:
    """``X.target`` where X is a settings object: a name such as ``settings``/``s``/``cfg``, an attribute such as
    ``att.settings``, or ``self`` inside the Settings class's own module."""
    if not (isinstance(node, ast.Attribute) and node.attr == "target"):
        return False
    owner = node.value
    if isinstance(owner, ast.Name):
        return owner.id in ("settings", "s", "cfg") or (owner.id == "self" and path == "core/settings.py")
    return isinstance(owner, ast.Attribute) and owner.attr == "settings"


def test_only_for_settings_reads_settings_target():
    """``settings.target`` (however the settings object is reached) appears in targets/__init__.py alone: every
    difference between the targets, the transport NCCL should use included, sits behind the Target interface."""
    offenders = []
    for path in sorted(PKG.rglob("*.py")):
        rel = str(path.relative_to(PKG))
        offenders += [f"{rel}:{n.lineno}" for n in ast.walk(ast.parse(path.read_text())) if _reads_target(n, rel)]
    assert [o.split(":")[0] for o in offenders] == ["targets/__init__.py"], offenders
