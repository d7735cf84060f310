"""A workshop attendee (``aws.shared_cluster: true``) never changes the shared cluster: refusals name the setting,
and 08 with ``assume_yes`` deletes only the attendee's own objects (against the Kubernetes stand-in)."""

from __future__ import annotations

from pathlib import Path

import pytest

from raytrain_helpers.clients import kubernetes as kube
from raytrain_helpers.core import config
from raytrain_helpers.plan.raycluster import render_namespace, render_raycluster
from raytrain_helpers.targets import for_settings
from raytrain_helpers.targets.aws import eks
from raytrain_helpers.targets.aws.kuberay import raycluster as kuberay
from raytrain_helpers.targets.aws.workshop import attendee as shared
from tests.fakes.k8s_standin import standin

REPO = Path(__file__).resolve().parents[5]
QUIET = lambda *a: None  # noqa: E731
FAST = dict(timeout_s=5, poll_s=0.05, log=QUIET)
READY_OP = dict(plugins_installed=True, operator_installed=True, delay_s=0.1)


def settings(who: str = "", **params):
    base = dict(target="aws")
    if who:
        base.update(namespace=f"ray-train-{who}", ray_cluster_name=f"raytrain-{who}", shared_cluster=True)
    base.update(params)
    return config.load(REPO / "env.yaml", environ={}, check_installed_ray=False, **base)


@pytest.fixture(autouse=True)
def _no_helm(monkeypatch):
    monkeypatch.setenv("PATH", "/usr/bin:/bin")


@pytest.fixture
def no_cluster_wide(monkeypatch):
    def boom(*a, **k):
        raise AssertionError("a cluster-wide action ran for an attendee")

    for mod, name in ((eks, "teardown"), (eks, "delete"), (kuberay, "install_operator"), (shared.plugins, "install")):
        monkeypatch.setattr(mod, name, boom)


@pytest.mark.parametrize("action", ["up", "down"])
def test_an_attendee_cannot_create_or_delete_the_cluster(action, no_cluster_wide):
    res = for_settings(settings("ann")).cluster(settings("ann"), action, assume_yes=True)
    assert not res.ok and "aws.shared_cluster: true" in res.problems[0] and "facilitator" in res.problems[0]


def test_an_attendee_without_yes_or_asking_for_the_node_group_is_refused(no_cluster_wide):
    s = settings("ann")
    assert "assume_yes=True" in shared.teardown(s).refused
    assert "aws.shared_cluster" in shared.teardown(s, assume_yes=True, nodegroup_only=True).refused
    assert "aws.shared_cluster" in shared.plugins_teardown(s, assume_yes=True).message


def test_an_attendees_04_needs_the_facilitators_operator_and_installs_none(no_cluster_wide):
    with standin("healthy", set_env=True, plugins_installed=True, delay_s=0.1) as st:
        res = shared.raycluster(settings("ann"), **FAST)
        assert not res.ok and "aws.shared_cluster" in res.message and "KubeRay operator" in res.message
        assert st.objects("apps/v1", "deployments") == [] and st.objects("ray.io/v1", "rayclusters") == []


def test_an_attendees_03_only_reads(no_cluster_wide):
    with standin("healthy", set_env=True, delay_s=0.1) as st:
        res = for_settings(settings("ann")).devices(settings("ann"), assume_yes=True)
        assert "aws.shared_cluster" in res.message and res.action == "status"
        assert st.objects("apps/v1", "daemonsets", "kube-system") == []


def test_an_attendees_08_deletes_only_their_own_objects(no_cluster_wide):
    ann, bob = settings("ann", gpu_node_count=1), settings("bob", gpu_node_count=1)
    with standin("healthy", set_env=True, **READY_OP) as st:
        assert kuberay.raycluster(ann, **FAST).ok
        with kube.using_client(bob) as api:  # bob's head waits for a system node of its own: applied, not waited on
            for obj in (render_namespace(bob), render_raycluster(bob)):
                kube.apply(api, obj)
        daemonsets = len(st.objects("apps/v1", "daemonsets", "kube-system"))
        res = for_settings(ann).teardown(ann, assume_yes=True)
        assert res.ok, res.steps
        assert st.get("ray.io/v1", "rayclusters", "raytrain-ann", "ray-train-ann") is None
        assert st.get("ray.io/v1", "rayclusters", "raytrain-bob", "ray-train-bob") is not None
        assert st.objects("apps/v1", "deployments"), "the operator is the facilitator's"
        assert len(st.objects("apps/v1", "daemonsets", "kube-system")) == daemonsets
        assert st.get("v1", "namespaces", "ray-train-ann") is not None, "the namespace is the hand-out's"
        deletes = [p for m, p in st.cluster.requests if m == "DELETE"]
        assert deletes and all("/namespaces/ray-train-ann/" in p for p in deletes), deletes
        assert for_settings(ann).teardown(ann, assume_yes=True).ok  # idempotent


def test_the_facilitator_installs_only_the_operator_and_an_attendee_cannot():
    with standin("healthy", set_env=True, plugins_installed=True, delay_s=0.05) as st:
        res = shared.operator(settings("ann"), poll_s=0.05, log=QUIET)
        assert not res.ok and "aws.shared_cluster" in res.message and st.objects("apps/v1", "deployments") == []
        res = shared.operator(settings(), timeout_s=5, poll_s=0.05, log=QUIET)
        assert res.ok, res.message
        assert st.objects("apps/v1", "deployments") and st.objects("ray.io/v1", "rayclusters") == []
        assert shared.operator(settings(), timeout_s=5, poll_s=0.05, log=QUIET).install_method.startswith("already")
