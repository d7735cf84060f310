"""The cluster step (02) and `raytrain-tutorial cluster` on the local target: both go to the local target's
``cluster`` entry point, whatever the action; nothing starts (the target's entry points are recorded instead)."""

from __future__ import annotations

import types

import pytest

from raytrain_helpers.targets import local
from tests.fakes.aws.fixtures import make_settings


def _fake_local_target(monkeypatch):
    """The local target with its cluster entry points replaced for the test, recording the calls (nothing starts).
    The functions of the real module are patched, not the module swapped: a module first imported during the test
    (the command line's) must not keep a fake after it."""
    calls = []
    monkeypatch.setattr(
        local, "up", lambda s, plan=False: calls.append(("up", plan)) or types.SimpleNamespace(running=True)
    )
    monkeypatch.setattr(local, "status", lambda s: calls.append(("status",)) or types.SimpleNamespace(running=True))
    monkeypatch.setattr(local, "down", lambda s: calls.append(("down",)) or types.SimpleNamespace(running=False))
    monkeypatch.setattr(
        local,
        "cluster",
        lambda s, action="up", *, assume_yes=False: (
            calls.append(("cluster", action)) or types.SimpleNamespace(running=action != "down")
        ),
    )
    return calls


def test_the_cluster_step_dispatches_to_the_local_target(tmp_path, monkeypatch):
    from raytrain_helpers.steps import cluster

    calls = _fake_local_target(monkeypatch)
    s = make_settings(tmp_path, target="local")
    for a in ("plan", "up", "status", "down"):
        cluster.step(s, a)
    assert calls == [("cluster", "plan"), ("cluster", "up"), ("cluster", "status"), ("cluster", "down")]
    with pytest.raises(ValueError):
        cluster.step(s, "explode")


def test_cli_cluster_on_local_goes_to_the_local_target(tmp_path, monkeypatch):
    from raytrain_helpers import cli

    calls = _fake_local_target(monkeypatch)
    make_settings(tmp_path, target="local")
    env = str(tmp_path / "env.yaml")
    assert cli.main(["cluster", "down", "--env-file", env, "--target", "local", "--nodegroup-only"]) == 0
    assert cli.main(["cluster", "up", "--env-file", env, "--target", "local"]) == 0
    assert calls == [("cluster", "down"), ("cluster", "up")]


def test_cli_up_starts_the_local_cluster_whatever_target_the_settings_name(tmp_path, monkeypatch):
    """``raytrain-tutorial up`` is the local cluster's command: it reaches the local target through the Target
    interface (``cluster(s, "up")``) even where env.yaml says aws, and never creates anything on AWS."""
    from raytrain_helpers import cli

    seen = []

    def cluster(s, action="up", *, assume_yes=False):
        seen.append((s.target, action))
        return types.SimpleNamespace(running=True, show=lambda: None)

    monkeypatch.setattr(local, "cluster", cluster)
    make_settings(tmp_path, target="aws")
    assert cli.main(["up", "--env-file", str(tmp_path / "env.yaml"), "--target", "aws"]) == 0
    assert seen == [("local", "up")]
