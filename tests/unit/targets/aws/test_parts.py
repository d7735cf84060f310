"""The aws target's CLI actions on the device plugins and on KubeRay (targets.aws.parts): each action reaches the
function notebook 03/04 (or its status, or its teardown) uses, with the CLI's confirmation and wait."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[4]))

from raytrain_helpers.targets import aws  # noqa: E402
from raytrain_helpers.targets.aws import parts  # noqa: E402
from raytrain_helpers.targets.aws.kuberay import access  # noqa: E402
from raytrain_helpers.targets.aws.kuberay import raycluster as kuberay  # noqa: E402
from raytrain_helpers.targets.aws.plugins import install as plugins  # noqa: E402
from raytrain_helpers.targets.aws.workshop import attendee as shared  # noqa: E402
from tests.fakes.aws.fixtures import make_settings  # noqa: E402


@pytest.fixture
def calls(monkeypatch):
    seen = []

    def record(name):
        return lambda settings, **kw: seen.append((name, kw)) or name

    for module, label, name in [
        (plugins, "plugins", "devices"),
        (plugins, "plugins", "status"),
        (plugins, "plugins", "teardown"),
        (kuberay, "kuberay", "status"),
    ]:
        monkeypatch.setattr(module, name, record(f"{label}.{name}"))
    monkeypatch.setattr(kuberay, "teardown", record("kuberay.teardown"))
    monkeypatch.setattr(access, "raycluster", record("access.raycluster"))
    monkeypatch.setattr(shared, "operator", record("shared.operator"))
    return seen


def test_each_action_reaches_the_steps_own_function(calls, tmp_path):
    s = make_settings(tmp_path)
    assert aws.plugins_action(s, "up", timeout_s=30) == "plugins.devices"
    assert aws.plugins_action(s, "status") == "plugins.status"
    assert aws.plugins_action(s, "down", assume_yes=True) == "plugins.teardown"
    assert aws.kuberay_action(s, "up", assume_yes=True) == "access.raycluster"  # 04's step: with the access check
    assert aws.kuberay_action(s, "status") == "kuberay.status"
    assert aws.kuberay_action(s, "down", assume_yes=True, timeout_s=60) == "kuberay.teardown"
    assert aws.kuberay_action(s, "operator") == "shared.operator"  # a facilitator's operator alone
    assert calls == [
        ("plugins.devices", dict(assume_yes=False, timeout_s=30)),
        ("plugins.status", {}),
        ("plugins.teardown", dict(assume_yes=True)),  # no timeout given: the teardown's own
        ("access.raycluster", dict(assume_yes=True, client=None)),
        ("kuberay.status", {}),
        ("kuberay.teardown", dict(assume_yes=True, timeout_s=60)),
        ("shared.operator", {}),
    ]


def test_plan_is_not_an_action_of_the_parts(calls, tmp_path):
    s = make_settings(tmp_path)
    for action in (aws.plugins_action, aws.kuberay_action):
        with pytest.raises(ValueError, match="unknown action 'plan': use up, status, down"):
            action(s, "plan")
    assert calls == []


def test_the_aws_answers(tmp_path):
    s = make_settings(tmp_path, gpu_node_count=3)
    assert aws.worker_node_count(s) == 3
    assert aws.cluster_missing(s) is None
    assert aws.NODEGROUP_ONLY_DOWN is True and parts.STANDS_IN_FOR is None
    assert aws.WORKERS_USE_THIS_ENVIRONMENT is False
