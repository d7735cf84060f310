"""The image pre-pull from 03 to 04 on the Kubernetes API stand-in: 03 applies the DaemonSet (the GPU nodes start
pulling), 04 records each node's pull time from the kubelet's Pulled events into the run's folder and deletes it;
a DaemonSet of that name that is not the tutorial's is never touched."""

from __future__ import annotations

import json

import pytest

from raytrain_helpers.plan import prepull, walkthrough
from raytrain_helpers.targets.aws.kuberay import raycluster as kuberay
from raytrain_helpers.targets.aws.plugins import install as plugins
from tests.fakes.k8s_standin import standin
from tests.helpers import aws_settings
from tests.unit.targets.aws.plugins.test_plugins import fake_helm

QUIET = lambda *a: None  # noqa: E731
FAST = dict(timeout_s=8, poll_s=0.05, log=QUIET)


@pytest.fixture(autouse=True)
def _only_the_fake_helm(monkeypatch):
    monkeypatch.setenv("PATH", "/usr/bin:/bin")


def test_03_starts_the_pull_and_04_records_it_and_deletes_the_daemonset(tmp_path, monkeypatch):
    monkeypatch.setenv("RAYTRAIN_RUNS_DIR", str(tmp_path))
    fake_helm(tmp_path, monkeypatch)
    s = aws_settings()
    ns = s.kubernetes.namespace
    preload = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}]  # 02 made it
    with standin("healthy", set_env=True, delay_s=0.05, pull_s=0.2, operator_installed=True, preload=preload) as st:
        r3 = plugins.devices(s, **FAST)
        assert r3.ok, (r3.message, r3.diagnosis)
        assert any(n.startswith("image pre-pull: the GPU nodes pull") for n in r3.notes), r3.notes
        ds = st.get("apps/v1", "daemonsets", prepull.NAME, ns)
        assert ds is not None and ds["spec"]["template"]["spec"]["containers"][0]["image"] == s.versions.dlc_image
        gpu = sorted(n for n, hw in st.cluster.hw.items() if hw["gpus"])
        pulling = [p for p in st.objects("v1", "pods", ns) if p["metadata"]["name"].startswith(prepull.NAME)]
        assert sorted(p["spec"]["nodeName"] for p in pulling) == gpu  # one per GPU node, none elsewhere
        r4 = kuberay.raycluster(s, **FAST)
        assert r4.ok, (r4.message, r4.diagnosis)
        assert st.get("apps/v1", "daemonsets", prepull.NAME, ns) is None  # deleted once the Ray pods run
    record = json.loads((tmp_path / s.run_name / prepull.RECORD).read_text())
    assert record["image"] == s.versions.dlc_image and set(gpu) <= set(record["nodes"])
    assert all(0 < v < 5 for v in record["nodes"].values())
    assert walkthrough.chapter_minutes(s, "04") < walkthrough.ALLOWANCES["kuberay"][0] + 1  # cost uses the record


def test_a_daemonset_of_that_name_not_the_tutorials_is_left_alone(tmp_path, monkeypatch):
    fake_helm(tmp_path, monkeypatch)
    s = aws_settings()
    ns = s.kubernetes.namespace
    theirs = prepull.render_prepull(s)
    theirs["metadata"]["labels"] = {"app.kubernetes.io/name": prepull.NAME, "team": "someone-else"}
    theirs["spec"]["template"]["spec"]["containers"][0]["image"] = "public.ecr.aws/someone/else:1"
    ns_obj = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
    with standin("healthy", set_env=True, delay_s=0.05, preload=[ns_obj, theirs]) as st:
        r3 = plugins.devices(s, **FAST)
        kept = st.get("apps/v1", "daemonsets", prepull.NAME, ns)
    assert any("is not the tutorial's: left alone" in n for n in r3.notes), r3.notes
    assert kept["spec"]["template"]["spec"]["containers"][0]["image"] == "public.ecr.aws/someone/else:1"


def test_teardown_deletes_a_pre_pull_daemonset_04_did_not(tmp_path, monkeypatch):
    fake_helm(tmp_path, monkeypatch)
    s = aws_settings()
    ns = s.kubernetes.namespace
    preload = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}, prepull.render_prepull(s)]
    with standin("healthy", set_env=True, delay_s=0.05, preload=preload) as st:
        assert st.get("apps/v1", "daemonsets", prepull.NAME, ns) is not None
        kuberay.teardown(s, assume_yes=True, **FAST)
        assert st.get("apps/v1", "daemonsets", prepull.NAME, ns) is None
