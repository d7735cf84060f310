"""targets.aws.plugins.install: the device-plugin step, status and teardown against the Kubernetes API stand-in and
the fake helm (tests/fakes/helm.py: what helm does to a cluster for the pinned charts), which the stand-in puts first
on PATH."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import yaml

from raytrain_helpers.targets.aws.plugins import install as plugins
from tests.fakes.k8s_standin import standin
from tests.helpers import aws_settings

REPO = Path(__file__).resolve().parents[5]
QUIET = lambda *a: None  # noqa: E731
FAST = dict(timeout_s=3, poll_s=0.05, log=QUIET)
#: for runs that are meant to time out
SHORT = dict(timeout_s=0.7, poll_s=0.05, log=QUIET)


settings = aws_settings


@pytest.fixture(autouse=True)
def _only_the_fake_helm(monkeypatch):
    """No helm of this machine: the stand-in (set_env=True) puts the fake one first on PATH."""
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    yield


def fake_helm(tmp_path: Path, monkeypatch) -> Path:
    """Record every call of the fake helm (its argv and the values files it is given) in the returned file."""
    log = tmp_path / "helm.log"
    monkeypatch.setenv("FAKE_HELM_LOG", str(log))
    return log


def helm_calls(log: Path) -> list[dict]:
    """The calls that change the cluster (``helm list``, which only reads who owns a release, left out)."""
    calls = [json.loads(x) for x in log.read_text().splitlines()] if log.exists() else []
    return [c for c in calls if c["args"][:1] != ["list"]]


def test_healthy_install_waits_for_allocatable():
    s = settings()
    with standin("healthy", set_env=True, delay_s=0.3) as st:
        r = plugins.devices(s, **FAST)
        assert r.ok, (r.message, r.diagnosis)
        assert r.install_method == "helm charts nvidia-device-plugin 0.20.0, aws-efa-k8s-device-plugin v0.5.30"
        assert [row["gpus"] for row in r.nodes] == [4, 4] and all(row["efa"] >= 1 for row in r.nodes)
        assert {d["name"]: (d["desired"], d["owner"]) for d in r.daemonsets} == {
            "nvidia-device-plugin": (2, "the tutorial"),
            "raytrain-aws-efa-k8s-device-plugin": (2, "the tutorial"),
        }
        # it really waited: the stand-in's plugins register 0.3 s after the install
        assert r.elapsed_s >= 0.25
        applied = [(k, n) for k, _, n in st.cluster.applied if k == "DaemonSet"]
        assert applied == [("DaemonSet", "nvidia-device-plugin"), ("DaemonSet", "raytrain-aws-efa-k8s-device-plugin")]
        # idempotent: a second run re-applies and changes nothing
        pods_before = sorted(p["metadata"]["name"] for p in st.objects("v1", "pods", "kube-system"))
        r2 = plugins.devices(s, **FAST)
        assert r2.ok
        assert sorted(p["metadata"]["name"] for p in st.objects("v1", "pods", "kube-system")) == pods_before
        st_ = plugins.status(s)
        assert st_.ok and len(st_.nodes) == 2


def test_gpu_nodes_without_role_label_give_desired_0_and_say_why():
    s = settings()
    with standin("plugin-desired-0", set_env=True, delay_s=0.05):
        r = plugins.devices(s, **SHORT)
    assert not r.ok
    assert {d["desired"] for d in r.daemonsets} == {0}
    text = "\n".join(r.diagnosis)
    assert "DESIRED 0" in text
    assert "lacks the label role=gpu-worker" in text
    assert "label role=gpu-worker (nodeSelector) missing" in text


def test_plugins_stop_waiting_when_the_daemonsets_cannot_reach_the_nodes():
    s = settings()
    with standin("plugin-desired-0", set_env=True, delay_s=0.05):
        t0 = time.monotonic()
        r = plugins.devices(s, timeout_s=120, poll_s=1, log=QUIET)
    assert time.monotonic() - t0 < 15
    assert not r.ok and "stopped waiting" in r.message
    assert any("lacks the label role=gpu-worker" in d for d in r.diagnosis)
    # plugins that are merely slow are waited for
    with standin("healthy", set_env=True, delay_s=1.5):
        r = plugins.devices(s, timeout_s=30, poll_s=0.2, log=QUIET)
    assert r.ok and r.elapsed_s >= 1.4


def test_instance_type_outside_the_efa_allowlist():
    s = settings()
    # g6.4xlarge has no EFA: not on the chart's allowlist (p6-b200.48xlarge is, in chart v0.5.30)
    with standin("healthy", set_env=True, delay_s=0.05, node_instance_type_label="g6.4xlarge"):
        r = plugins.devices(s, **SHORT)
    assert not r.ok
    desired = {d["name"]: d["desired"] for d in r.daemonsets}
    assert desired == {"nvidia-device-plugin": 2, "raytrain-aws-efa-k8s-device-plugin": 0}
    text = "\n".join(r.diagnosis)
    assert "EFA device plugin" in text and "g6.4xlarge is not in the EFA plugin's allowlist" in text
    assert "NVIDIA device plugin: DaemonSet" not in text


def test_helm_installs_the_pinned_charts_with_the_tutorials_values(tmp_path, monkeypatch):
    log = fake_helm(tmp_path, monkeypatch)
    s = settings()
    # a release installed with the chart's default values: NVIDIA's affinity wants nvidia.com/gpu.present
    with standin("healthy", set_env=True, delay_s=0.05, plugins_installed=True, chart_style_plugins=True) as st:
        r = plugins.devices(s, **FAST)
        nv_ds = st.get("apps/v1", "daemonsets", "nvidia-device-plugin", "kube-system")
    calls = helm_calls(log)
    # each archive is pulled and checked against its pinned digest, then installed from the file
    assert [c["args"][:3] for c in calls] == [
        ["pull", "nvidia-device-plugin", "--repo"],
        ["upgrade", "--install", "nvidia-device-plugin"],
        ["pull", "aws-efa-k8s-device-plugin", "--repo"],
        ["upgrade", "--install", "raytrain-aws-efa-k8s-device-plugin"],
    ]
    nv_pull, nv, efa_pull, efa = calls
    assert nv_pull["args"][nv_pull["args"].index("--version") + 1] == "0.20.0"
    assert efa_pull["args"][efa_pull["args"].index("--version") + 1] == "v0.5.30"
    assert nv_pull["args"][nv_pull["args"].index("--repo") + 1] == "https://nvidia.github.io/k8s-device-plugin"
    assert efa_pull["args"][efa_pull["args"].index("--repo") + 1] == "https://aws.github.io/eks-charts"
    assert nv["args"][3].endswith("/nvidia-device-plugin-0.20.0.tgz")
    assert efa["args"][3].endswith("/aws-efa-k8s-device-plugin-v0.5.30.tgz")
    for c in (nv, efa):
        assert c["args"][c["args"].index("--namespace") + 1] == "kube-system"
        assert c["args"][c["args"].index("--kube-context") + 1] == "standin"
    nv_values = yaml.safe_load(nv["values"][0])
    assert nv_values["nodeSelector"] == {"role": "gpu-worker"} and nv_values["affinity"] is None
    assert {t["key"] for t in yaml.safe_load(efa["values"][0])["tolerations"]} == {
        "nvidia.com/gpu",
        "aws.amazon.com/efa",
    }
    # the upgrade with the tutorial's values took the chart's default affinity away: every GPU node is served
    assert r.ok, (r.message, r.diagnosis)
    assert "affinity" not in nv_ds["spec"]["template"]["spec"]


def test_the_charts_default_nvidia_affinity_is_diagnosed():
    from raytrain_helpers.clients import kubernetes as kube

    s = settings()
    with standin("healthy", set_env=True, delay_s=0.05, plugins_installed=True, chart_style_plugins=True):
        with kube.using_client(s, None) as api:
            text = "\n".join(plugins.diagnose(api, s))
    assert "nvidia.com/gpu.present label is missing" in text


def test_without_helm_the_step_fails_with_the_install_fix(tmp_path, monkeypatch):
    s = settings()
    with standin("healthy", set_env=True, delay_s=0.05, helm=False) as st:
        r = plugins.devices(s, **SHORT)
        assert st.objects("apps/v1", "daemonsets", "kube-system") == []
    assert not r.ok
    assert "helm is not on PATH" in r.message and "https://helm.sh/docs/intro/install/" in r.message


def test_a_failed_helm_install_is_reported_with_helms_message(monkeypatch):
    monkeypatch.setenv("FAKE_HELM_FAIL", "aws-efa-k8s-device-plugin")
    with standin("healthy", set_env=True, delay_s=0.05):
        r = plugins.devices(settings(), **SHORT)
    assert not r.ok
    assert "helm upgrade --install raytrain-aws-efa-k8s-device-plugin failed (1)" in r.message
    assert "INSTALLATION FAILED" in r.message


def test_crashing_plugin_is_reported():
    s = settings()
    with standin("healthy", set_env=True, delay_s=0.05, plugin_crash="nvidia"):
        r = plugins.devices(s, **SHORT)
    assert not r.ok
    text = "\n".join(r.diagnosis)
    assert "CrashLoopBackOff" in text and "accelerated (NVIDIA) AMI" in text


def test_nodes_without_efa_interfaces():
    s = settings()
    with standin("healthy", set_env=True, delay_s=0.05, efa_attached=False):
        r = plugins.devices(s, **SHORT)
    assert not r.ok
    assert [row["efa"] for row in r.nodes] == [0, 0] and [row["gpus"] for row in r.nodes] == [4, 4]
    assert any("efaEnabled: true" in d for d in r.diagnosis)


def test_missing_gpu_nodes():
    s = settings(gpu_node_count=3)
    with standin("healthy", set_env=True, delay_s=0.05, gpu_node_count=2):
        r = plugins.devices(s, **SHORT)
    assert not r.ok
    assert any("2 GPU node(s) registered, GPU_NODE_COUNT = 3" in d for d in r.diagnosis)


def test_teardown_refuses_without_assume_yes_then_deletes_and_verifies():
    s = settings()
    with standin("pods-pending", set_env=True, delay_s=0.05) as st:
        r = plugins.teardown(s)
        assert not r.ok and "assume_yes=True" in r.message
        assert len(st.objects("apps/v1", "daemonsets", "kube-system")) == 2
        r = plugins.teardown(s, assume_yes=True, timeout_s=3, poll_s=0.05, log=QUIET)
        assert r.ok, r.message
        assert st.objects("apps/v1", "daemonsets", "kube-system") == []
        assert all(state == "absent" for _, state in r.deleted)
        # the devices are gone from the nodes with the plugins
        assert plugins.status(s).ok is False
        # and again: nothing left to delete is not an error
        assert plugins.teardown(s, assume_yes=True, timeout_s=1, poll_s=0.05, log=QUIET).ok


def test_no_cluster_is_a_clear_error(tmp_path, monkeypatch):
    s = settings()
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "nope"))
    r = plugins.devices(s, **SHORT)
    assert not r.ok and "no kubeconfig" in r.message and "update-kubeconfig" in r.message
    with standin("healthy") as st:
        kc = st.kubeconfig
        dead = Path(kc).read_text()
    path = tmp_path / "dead.kubeconfig"
    path.write_text(dead)  # the server behind it is stopped
    monkeypatch.setenv("KUBECONFIG", str(path))
    r = plugins.devices(s, **SHORT)
    assert not r.ok and "no answer from the Kubernetes API" in r.message


def test_bad_token_is_refused(tmp_path, monkeypatch):
    s = settings()
    with standin("healthy") as st:
        doc = yaml.safe_load(Path(st.kubeconfig).read_text())
        doc["users"][0]["user"]["token"] = "wrong"
        p = tmp_path / "kc"
        p.write_text(yaml.safe_dump(doc))
        monkeypatch.setenv("KUBECONFIG", str(p))
        r = plugins.status(s)
    assert not r.ok and "HTTP 401" in r.message and "credentials" in r.message


# --------------------------------------------------------------------------------------------
# Facts, without an API
# --------------------------------------------------------------------------------------------


def _node(name, labels, gpus=0, efa=0):
    alloc = {"nvidia.com/gpu": str(gpus), "vpc.amazonaws.com/efa": str(efa)}
    return {"metadata": {"name": name, "labels": labels}, "status": {"allocatable": alloc}}


def test_gpu_nodes_and_their_verdicts():
    s = settings()  # GPU_NODE_COUNT 2, 4 GPUs per node, node group gpu-efa, g6.12xlarge
    nodes = [
        _node("ok", {"role": "gpu-worker"}, gpus=4, efa=1),
        _node("unlabelled", {"eks.amazonaws.com/nodegroup": "gpu-efa"}, gpus=4, efa=1),
        _node("by-type", {"node.kubernetes.io/instance-type": "g6.12xlarge", "role": "gpu-worker"}),
        _node("system", {"role": "system"}),
    ]
    assert [n["metadata"]["name"] for n in plugins.gpu_nodes(nodes, s)] == ["ok", "unlabelled", "by-type"]
    verdicts = {r["name"]: (r["verdict"], r["gpu_str"]) for r in plugins.node_rows(nodes, s)}
    assert verdicts == {
        "ok": ("ok", "4/4"),
        "unlabelled": ("not role=gpu-worker", "4/4"),
        "by-type": ("waiting", "0/4"),
    }
    assert plugins.devices_ready(s, nodes)[0] is False  # one ok node of two, and a role=gpu-worker node waits
    assert plugins.devices_ready(s, nodes[:1] + [_node("ok2", {"role": "gpu-worker"}, gpus=4, efa=1)])[0] is True


def test_a_chart_archive_that_is_not_the_pinned_one_is_not_installed(tmp_path, monkeypatch):
    """The EFA chart's archive differs from what its pinned digest says (a tampered mirror or cache): 03 stops
    with the digests and the fix, and installs nothing of that chart."""
    log = fake_helm(tmp_path, monkeypatch)
    monkeypatch.setenv("FAKE_HELM_TAMPER", "aws-efa-k8s-device-plugin")
    s = settings()
    with standin("healthy", set_env=True, delay_s=0.05) as st:
        r = plugins.devices(s, **SHORT)
        names = {d["metadata"]["name"] for d in st.objects("apps/v1", "daemonsets", "kube-system")}
    assert not r.ok
    assert "chart aws-efa-k8s-device-plugin v0.5.30" in r.message and "it was not installed" in r.message
    assert "versions.efa_device_plugin_chart_digest" in r.message
    assert "raytrain-aws-efa-k8s-device-plugin" not in names
    assert [c["args"][2] for c in helm_calls(log) if c["args"][0] == "upgrade"] == ["nvidia-device-plugin"]


def test_a_wrong_pinned_digest_refuses_the_install(tmp_path, monkeypatch):
    log = fake_helm(tmp_path, monkeypatch)
    s = settings(nvidia_device_plugin_chart_digest="ab" * 32)
    with standin("healthy", set_env=True, delay_s=0.05) as st:
        r = plugins.devices(s, **SHORT)
        assert st.objects("apps/v1", "daemonsets", "kube-system") == []
    assert not r.ok and f"expected {'ab' * 32} (pinned)" in r.message
    assert [c["args"][0] for c in helm_calls(log)] == ["pull"]


def test_each_gpu_nodes_driver_is_read_and_03_stops_below_580(tmp_path, monkeypatch):
    """nvidia-smi in the NVIDIA device plugin's container on each GPU node (no pod created, no GPU taken): 580+
    passes and is named in the notes; a node below 580 stops 03 with the AMI fix."""
    from raytrain_helpers.targets.aws.plugins import driver

    fake_helm(tmp_path, monkeypatch)
    s = settings()
    with standin("healthy", set_env=True, delay_s=0.05) as st:
        r = plugins.devices(s, **FAST)
        gpu = sorted(n for n, hw in st.cluster.hw.items() if hw["gpus"])
        smi = [argv for _, argv in st.cluster.exec_log if argv[:1] == ["nvidia-smi"]]
    assert r.ok, (r.message, r.diagnosis)
    assert len(smi) == len(gpu) == 2 and smi[0] == driver.QUERY
    assert any(n.startswith("NVIDIA driver: ") and f"{gpu[0]} 580.95.05" in n for n in r.notes), r.notes
    old = {gpu[0]: "580.95.05", gpu[1]: "570.172.08"}
    with standin("healthy", set_env=True, delay_s=0.05, nvidia_driver=old):
        r = plugins.devices(s, **SHORT)
    assert not r.ok
    text = r.message + "\n".join(r.diagnosis)
    assert f"node {gpu[1]} runs NVIDIA driver 570.172.08" in text and "branch 580 or later" in text
    assert "eksctl upgrade nodegroup --cluster raytrain-tutorial" in text and gpu[0] + " runs" not in text
