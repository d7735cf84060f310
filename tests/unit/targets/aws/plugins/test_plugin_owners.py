"""targets.aws.plugins.install with eksctl's own EFA device plugin present (what `efaEnabled: true` leaves in every
cluster): exactly one EFA plugin per GPU node, which one and why, and a teardown that
removes only the tutorial's plugins.
Against the Kubernetes API stand-in, whose GPU nodes here carry no taints (as the tutorial's GPU node group is
rendered), so eksctl's DaemonSet - it tolerates only aws.amazon.com/efa - runs on them as it does on EKS."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from raytrain_helpers.clients import kubernetes as kube
from raytrain_helpers.core import config
from raytrain_helpers.targets.aws.plugins import install as plugins
from tests.fakes.k8s_standin import standin
from tests.fakes.k8s_standin.server import eksctl_efa_daemonset
from tests.unit.targets.aws.plugins.test_plugins import fake_helm, helm_calls

REPO = Path(__file__).resolve().parents[5]
QUIET = lambda *a: None  # noqa: E731
FAST = dict(timeout_s=5, poll_s=0.05, log=QUIET)
SHORT = dict(timeout_s=0.8, poll_s=0.05, log=QUIET)
EKSCTL = dict(set_env=True, delay_s=0.05, eksctl_efa_plugin=True, gpu_taints=False)
OURS = "raytrain-aws-efa-k8s-device-plugin"


@pytest.fixture(autouse=True)
def _only_the_fake_helm(monkeypatch):
    """No helm of this machine: the stand-in (set_env=True) puts the fake one first on PATH."""
    monkeypatch.setenv("PATH", "/usr/bin:/bin")


def settings(**params):
    return config.load(REPO / "env.yaml", environ={}, check_installed_ray=False, target="aws", **params)


def daemonset_names(st) -> set[str]:
    return {d["metadata"]["name"] for d in st.objects("apps/v1", "daemonsets", "kube-system")}


def wait_running(st, name: str, n: int = 2) -> None:
    """Until n pods of the DaemonSet run (the stand-in's controller needs delay_s)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < 5:
        pods = [p for p in st.objects("v1", "pods", "kube-system") if p["metadata"]["name"].startswith(name + "-")]
        if sum(p["status"].get("phase") == "Running" for p in pods) >= n:
            return
        time.sleep(0.05)
    raise AssertionError(f"{name}: {n} pods never ran")


def users_helm_efa_release(release: str = "aws-efa-k8s-device-plugin") -> dict:
    """An EFA plugin someone installed with `helm install RELEASE eks/aws-efa-k8s-device-plugin --version v0.5.28`
    (image v0.5.19); with the chart's default release name, the same object name as eksctl's."""
    ds = eksctl_efa_daemonset()
    ds["metadata"].update(
        name=release,
        labels={"app.kubernetes.io/managed-by": "Helm"},
        annotations={"meta.helm.sh/release-name": release},
    )
    ds["spec"]["selector"]["matchLabels"] = ds["spec"]["template"]["metadata"]["labels"] = {"name": release}
    ds["spec"]["template"]["spec"]["containers"][0]["image"] = (
        "602401143452.dkr.ecr.us-west-2.amazonaws.com/eks/aws-efa-k8s-device-plugin:v0.5.19"
    )
    return ds


def test_eksctls_efa_plugin_is_replaced_and_replaced_again_after_a_new_node_group():
    s = settings()
    with standin("healthy", **EKSCTL) as st:
        wait_running(st, "aws-efa-k8s-device-plugin")
        before = plugins.status(s)
        assert [row["efa"] for row in before.serving] == ["aws-efa-k8s-device-plugin (eksctl, v0.5.4)"] * 2

        r = plugins.devices(s, **FAST)
        assert r.ok, (r.message, r.diagnosis)
        assert daemonset_names(st) == {"nvidia-device-plugin", OURS}
        assert [row["efa"] for row in r.serving] == [f"{OURS} (tutorial, v0.5.20)"] * 2
        assert any(
            "replaced eksctl's EFA device plugin kube-system/aws-efa-k8s-device-plugin (image v0.5.4" in n
            for n in r.notes
        )
        assert {d["name"]: d["owner"] for d in r.daemonsets}[OURS] == "the tutorial"

        # `eksctl create nodegroup` of another EFA node group re-creates eksctl's copy beside the tutorial's
        st.mutate(lambda c: c.put(eksctl_efa_daemonset()))
        wait_running(st, "aws-efa-k8s-device-plugin")
        again = plugins.status(s)
        assert not again.ok
        text = "\n".join(again.diagnosis)
        assert text.count("2 EFA device plugins serve it") == 2
        assert "run step 03 again" in text and "eksctl create nodegroup" in text

        # 03 again: replaced again, one plugin per node
        r = plugins.devices(s, **FAST)
        assert r.ok, (r.message, r.diagnosis)
        assert "aws-efa-k8s-device-plugin" not in daemonset_names(st)


def test_a_second_efa_plugin_the_tutorial_did_not_install_fails_03_and_is_kept():
    s = settings()
    with standin("healthy", preload=[users_helm_efa_release()], **{**EKSCTL, "eksctl_efa_plugin": False}) as st:
        r = plugins.devices(s, **FAST)
        assert not r.ok
        assert "problem(s) with the plugins that serve the GPU nodes" in r.message
        text = "\n".join(r.diagnosis)
        assert text.count("2 EFA device plugins serve it") == 2
        assert f"aws-efa-k8s-device-plugin (not the tutorial's, v0.5.19), {OURS} (tutorial, v0.5.20)" in text
        assert "kubectl -n kube-system delete daemonset aws-efa-k8s-device-plugin" in text
        assert "aws-efa-k8s-device-plugin" in daemonset_names(st)  # never deleted: not the tutorial's, not eksctl's


def test_the_tutorials_plugin_not_ready_fails_03_even_when_another_plugin_advertises_efa():
    s = settings()
    # someone else's EFA plugin (image v0.5.19) serves the nodes, so EFA is allocatable; the registry has no image
    # under the tutorial's tag (v0.5.20) here: its pods stay in ImagePullBackOff
    opts = {**EKSCTL, "eksctl_efa_plugin": False, "image_pull_fail": "aws-efa-k8s-device-plugin:v0.5.20"}
    with standin("healthy", preload=[users_helm_efa_release()], **opts):
        r = plugins.devices(s, **SHORT)
    assert not r.ok
    assert all(row["efa"] >= 1 for row in r.nodes)  # the devices are advertised: allocatable alone would pass
    assert [row["efa"] for row in r.serving] == ["aws-efa-k8s-device-plugin (not the tutorial's, v0.5.19)"] * 2
    text = "\n".join(r.diagnosis)
    assert text.count("the tutorial's EFA device plugin pod raytrain-aws-efa-k8s-device-plugin-") == 2
    assert "is not Ready" in text and "ImagePullBackOff" in text and "cannot pull the plugin's image" in text


def test_teardown_removes_the_tutorials_plugins_and_keeps_eksctls_copy():
    s = settings()
    with standin("healthy", **EKSCTL) as st:
        assert plugins.devices(s, **FAST).ok
        st.mutate(lambda c: c.put(eksctl_efa_daemonset()))  # a later `eksctl create nodegroup`
        r = plugins.teardown(s, assume_yes=True, timeout_s=3, poll_s=0.05, log=QUIET)
        assert r.ok, r.message
        assert daemonset_names(st) == {"aws-efa-k8s-device-plugin"}
        rows = dict(r.deleted)
        assert rows["DaemonSet (efa device plugin)"] == "absent"
        assert rows["DaemonSet aws-efa-k8s-device-plugin"].startswith("kept: eksctl's own")


def test_find_daemonsets_keeps_every_match():
    s = settings()
    with standin("healthy", preload=[users_helm_efa_release("efa-by-hand")], **EKSCTL) as st:
        with kube.using_client(s) as api:
            plugins.install(api, s, log=QUIET)
            st.mutate(lambda c: c.put(eksctl_efa_daemonset()))
            found = plugins.find_daemonsets(api)
    assert sorted(d["metadata"]["name"] for d in found["efa"]) == ["aws-efa-k8s-device-plugin", "efa-by-hand", OURS]
    assert [d["metadata"]["name"] for d in found["nvidia"]] == ["nvidia-device-plugin"]


def test_helm_path_replaces_eksctls_copy_before_installing_its_own_release(tmp_path, monkeypatch):
    log = fake_helm(tmp_path, monkeypatch)  # records each call
    s = settings()
    with standin("healthy", **EKSCTL) as st:
        with kube.using_client(s) as api:
            method, replaced = plugins.install(api, s, log=QUIET)
        assert method.startswith("helm charts") and len(replaced) == 1
        # eksctl's object went before the install; Helm never meets it
        assert daemonset_names(st) == {"nvidia-device-plugin", OURS}
    releases = [c["args"][2] for c in helm_calls(log) if c["args"][0] == "upgrade"]
    assert releases == ["nvidia-device-plugin", OURS]
