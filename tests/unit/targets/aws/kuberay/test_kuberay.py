"""targets.aws.kuberay.raycluster: the RayCluster step, status, job server and teardown, against the Kubernetes API
stand-in (06's infrastructure rows: jobs/test_rows.py).

The stand-in serves the real REST paths, server-side apply and the exec/portforward websockets, so the
client code runs unchanged; the fake helm (tests/fakes/helm.py), first on PATH, installs the operator's chart
into it. What only the stand-in (not a real EKS) proves: the KubeRay operator's
behaviour (pods from the RayCluster), the kubelet/device-plugin registration and the scheduler's choices
are simulated from the nodes' labels, taints and allocatable.
"""

from __future__ import annotations

import json
import os
import socket
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from raytrain_helpers.clients import kubernetes as kube
from raytrain_helpers.clients import rayjobs
from raytrain_helpers.plan import raycluster as plan
from raytrain_helpers.targets.aws.kuberay import raycluster as kuberay
from tests.fakes.k8s_standin import standin
from tests.helpers import aws_settings
from tests.schemas import kuberay_crds

REPO = Path(__file__).resolve().parents[5]
QUIET = lambda *a: None  # noqa: E731
FAST = dict(timeout_s=5, poll_s=0.05, log=QUIET)
SHORT = dict(timeout_s=0.8, poll_s=0.05, log=QUIET)
READY = dict(plugins_installed=True, delay_s=0.1)  # GPUs/EFA already allocatable (notebook 03 done)
READY_OP = dict(READY, operator_installed=True)  # ... and the KubeRay operator already there


settings = aws_settings


@pytest.fixture(autouse=True)
def _only_the_fake_helm(monkeypatch):
    """No helm of this machine: the stand-in (set_env=True) puts the fake one first on PATH."""
    monkeypatch.setenv("PATH", "/usr/bin:/bin")


def names(st, ns="ray-train"):
    return sorted(p["metadata"]["name"] for p in st.objects("v1", "pods", ns))


# --------------------------------------------------------------------------------------------
# raycluster (notebook 04)
# --------------------------------------------------------------------------------------------


def test_healthy_step_places_head_and_workers_and_is_idempotent(capsys):
    # helm installs the operator's chart: its CRDs first, then the Deployment
    s = settings()
    with standin("healthy", set_env=True, **READY) as st:
        r = kuberay.raycluster(s, **FAST)
        assert r.ok, (r.message, r.problems, r.diagnosis)
        assert r.state == "ready"
        roles = {p["role"]: p for p in r.pods}
        assert roles["head"]["instance_type"] == "m7i.xlarge"
        workers = [p for p in r.pods if p["role"] == "worker"]
        assert len(workers) == 2 and {w["instance_type"] for w in workers} == {"g6.12xlarge"}
        assert len({w["node"] for w in workers}) == 2 and all(w["zone"] == "us-west-2a" for w in workers)
        kinds = [k for k, _, _ in st.cluster.applied]
        assert kinds.index("CustomResourceDefinition") < kinds.index("Deployment") < kinds.index("RayCluster")
        assert kinds.index("Namespace", kinds.index("Deployment")) < kinds.index("RayCluster")
        # ingress denied to every pod of the namespace before its first pod, then allowed among the Ray pods
        assert kinds.index("Namespace", kinds.index("Deployment")) < kinds.index("NetworkPolicy")
        assert kinds.index("NetworkPolicy") < kinds.index("RayCluster")
        policies = {p["metadata"]["name"]: p["spec"] for p in st.objects("networking.k8s.io/v1", "networkpolicies")}
        assert policies["raytrain-default-deny-ingress"] == {"podSelector": {}, "policyTypes": ["Ingress"]}
        assert policies["raytrain-ray-same-namespace"]["podSelector"] == {
            "matchLabels": {"ray.io/is-ray-node": "yes", "app.kubernetes.io/part-of": "raytrain-tutorial"}
        }
        # the operator landed on the system node
        op_pods = st.objects("v1", "pods", "kuberay-system")
        assert [p["spec"]["nodeName"] for p in op_pods] == [roles["head"]["node"]]
        first = names(st)
        gen = st.get("ray.io/v1", "rayclusters", "raytrain", "ray-train")["metadata"]["generation"]
        # again: nothing is recreated, the applied spec is unchanged
        r2 = kuberay.raycluster(s, **FAST)
        assert r2.ok and names(st) == first
        assert st.get("ray.io/v1", "rayclusters", "raytrain", "ray-train")["metadata"]["generation"] == gen
        assert "already installed" in r2.install_method
        r2.show()
    out = capsys.readouterr().out
    assert "Pod placement" in out and "m7i.xlarge" in out


def test_the_crd_schema_is_enforced_by_the_standin():
    """With the full CRDs of KUBERAY_VERSION installed, an invalid RayCluster is refused with HTTP 422 (as by EKS)."""
    s = settings()
    crds = kuberay_crds(s.versions.kuberay_version)
    with standin("healthy", set_env=True, operator_installed=True, crd_dir=str(crds), **READY):
        client = kube.api_client(s)
        kube.apply(client, plan.render_namespace(s))
        rc = plan.render_raycluster(s)
        rc["spec"]["workerGroupSpecs"][0]["replicas"] = "two"
        with pytest.raises(kube.K8sError, match="HTTP 422"):
            kube.apply(client, rc)
        assert kuberay.raycluster(s, **FAST).ok  # the rendered one is accepted
        client.close()


def test_changed_spec_needs_assume_yes():
    s = settings()
    with standin("healthy", set_env=True, **READY_OP) as st:
        assert kuberay.raycluster(s, **FAST).ok
        before = names(st)
        s2 = settings(debug="TRACE")
        r = kuberay.raycluster(s2, **FAST)
        assert not r.ok and "different spec" in r.message and "assume_yes=True" in r.problems[0]
        assert names(st) == before
        r = kuberay.raycluster(s2, assume_yes=True, **FAST)
        assert r.ok, (r.message, r.diagnosis)
        after = names(st)
        assert len(after) == 3 and not set(after) & set(before)


def test_missing_plugins_fail_fast_before_anything_is_applied():
    s = settings()
    with standin("healthy", set_env=True, delay_s=0.05) as st:  # notebook 03 skipped
        t0 = time.monotonic()
        r = kuberay.raycluster(s, **FAST)
        assert time.monotonic() - t0 < 3
        assert not r.ok and "nothing was applied" in r.message
        text = "\n".join(r.problems)
        assert "nvidia.com/gpu free 0 of allocatable 0, needs 4" in text and "notebook 03" in text
        assert st.cluster.applied == []


def test_taint_on_gpu_nodes_is_named_before_apply():
    s = settings()
    with standin("pods-pending", set_env=True, delay_s=0.05) as st:
        r = kuberay.raycluster(s, **FAST)
        assert not r.ok
        text = "\n".join(r.problems)
        assert "untolerated taint dedicated=ml-training:NoSchedule" in text
        assert st.get("ray.io/v1", "rayclusters", "raytrain", "ray-train") is None

        # the taint removed, the same step succeeds
        def untaint(c):
            for n in c.list("v1", "nodes"):
                n["spec"]["taints"] = [t for t in n["spec"].get("taints") or [] if t["key"] != "dedicated"]

        st.mutate(untaint)
        assert kuberay.raycluster(s, **FAST).ok


def test_pending_pods_are_diagnosed_with_the_taint():
    """A RayCluster applied before the nodes got tainted: its pods stay Pending; status + diagnosis say why."""
    s = settings()
    rc = plan.render_raycluster(s)
    with standin("pods-pending", set_env=True, delay_s=0.05, preload=[rc]):
        # the operator makes the pods, then the head's container starts after delay_s
        w = kube.wait_for(
            lambda: (lambda r: (any(p["role"] == "head" and p["phase"] == "Running" for p in r.pods), r))(
                kuberay.status(s)
            ),
            timeout_s=3,
            interval_s=0.05,
        )
        assert w.ok
        r = w.value
        assert not r.ok
        phases = {p["role"]: p["phase"] for p in r.pods}
        assert phases == {"head": "Running", "worker": "Pending"}
        client = kube.api_client(s)
        pods = kuberay.cluster_pods(client, s)
        nodes = kube.list_objects(client, "v1", "Node")
        diag = "\n".join(kuberay.diagnose_cluster(client, s, pods, nodes, {}))
        client.close()
    assert "untolerated taint {dedicated: ml-training}" in diag  # the scheduler's words
    assert "untolerated taint dedicated=ml-training:NoSchedule" in diag  # which node, which taint
    assert "Fix: the nodes carry a taint" in diag


def test_head_never_ready_times_out_with_a_diagnosis():
    s = settings()
    with standin("head-never-ready", set_env=True, delay_s=0.05):
        r = kuberay.raycluster(s, timeout_s=1.0, poll_s=0.05, log=QUIET)
    assert not r.ok and "not ready after" in r.message
    text = "\n".join(r.diagnosis)
    assert "head pod" in text and "not Ready" in text and "restarts 3" in text and "RAY_VERSION" in text
    assert [p["phase"] for p in r.pods if p["role"] == "worker"] == ["Running", "Running"]


def test_kuberay_stops_waiting_on_a_crash_looping_head():
    s = settings()
    with standin("head-never-ready", set_env=True, delay_s=0.05):
        t0 = time.monotonic()
        r = kuberay.raycluster(s, timeout_s=120, poll_s=0.5, log=QUIET)
    assert time.monotonic() - t0 < 15
    assert not r.ok and "a pod is crash-looping" in r.message
    assert any("restarted 3 times without becoming Ready (last exit: Error 1)" in d for d in r.diagnosis)


@pytest.mark.parametrize(
    "status,why",
    [
        (
            {
                "conditions": [{"type": "Ready", "status": "True"}],
                "containerStatuses": [{"name": "c", "restartCount": 9}],
            },
            "",
        ),
        (
            {
                "containerStatuses": [
                    {"name": "c", "restartCount": 1, "state": {"waiting": {"reason": "CrashLoopBackOff"}}}
                ]
            },
            "container c CrashLoopBackOff (restarts 1)",
        ),
        (
            {
                "containerStatuses": [
                    {"name": "c", "restartCount": 0, "state": {"waiting": {"reason": "ContainerCreating"}}}
                ]
            },
            "",
        ),
        (
            {
                "containerStatuses": [
                    {"name": "c", "restartCount": 0, "state": {"waiting": {"reason": "ImagePullBackOff"}}}
                ]
            },
            "",
        ),
        (
            {"containerStatuses": [{"name": "c", "restartCount": 4, "ready": False}]},
            "container c restarted 4 times without becoming Ready",
        ),
    ],
)
def test_crash_looping(status, why):
    assert kuberay.crash_looping({"status": status}) == why


def test_broken_manifest_is_never_applied(monkeypatch):
    s = settings()
    real = plan.render_raycluster

    def no_shm(settings):
        rc = real(settings)
        rc["spec"]["workerGroupSpecs"][0]["template"]["spec"]["volumes"] = []
        return rc

    monkeypatch.setattr(kuberay, "render_raycluster", no_shm)
    with standin("healthy", set_env=True, **READY) as st:
        r = kuberay.raycluster(s, **FAST)
        assert not r.ok and any("/dev/shm" in p for p in r.problems)
        assert st.cluster.applied == []


def test_operator_without_helm_is_a_clear_error():
    s = settings()
    with standin("healthy", set_env=True, helm=False, **READY) as st:
        r = kuberay.raycluster(s, **FAST)
        assert not r.ok and "helm is not on PATH" in r.message and "https://helm.sh/docs/intro/install/" in r.message
        assert st.cluster.applied == []


def test_operator_with_helm(tmp_path, monkeypatch):
    log = tmp_path / "helm.log"
    monkeypatch.setenv("FAKE_HELM_LOG", str(log))
    s = settings()
    with standin("healthy", set_env=True, **READY) as st:
        r = kuberay.raycluster(s, **FAST)
        dep = st.get("apps/v1", "deployments", "kuberay-operator", "kuberay-system")
    calls = [a for a in (json.loads(x)["args"] for x in log.read_text().splitlines()) if a[0] != "list"]
    add, pull, install = calls[:3]
    # no digest is pinned for 1.7.0 (docs/pins.md): the repository's index gives it, then the archive is checked
    assert add[:4] == ["repo", "add", "raytrain-verify", "https://ray-project.github.io/kuberay-helm/"]
    assert pull[:2] == ["pull", "kuberay-operator"] and pull[pull.index("--version") + 1] == "1.7.0"
    assert pull[pull.index("--repo") + 1] == "https://ray-project.github.io/kuberay-helm/"
    args = install
    assert args[:3] == ["upgrade", "--install", "kuberay-operator"] and args[3].endswith("/kuberay-operator-1.7.0.tgz")
    assert args[args.index("--namespace") + 1] == "kuberay-system" and "--create-namespace" in args
    assert r.ok and r.install_method == "helm chart kuberay-operator 1.7.0"
    assert dep["spec"]["template"]["spec"]["nodeSelector"] == {"role": "system"}


def test_a_failed_operator_install_is_reported_and_nothing_else_applied(monkeypatch):
    monkeypatch.setenv("FAKE_HELM_FAIL", "kuberay-operator")
    s = settings()
    with standin("healthy", set_env=True, **READY) as st:
        r = kuberay.raycluster(s, **FAST)
        assert st.get("ray.io/v1", "rayclusters", "raytrain", "ray-train") is None
    assert not r.ok and "helm upgrade --install kuberay-operator failed (1)" in r.message


def test_operator_version_reads_the_image_tag():
    dep = {"spec": {"template": {"spec": {"containers": [{"image": "quay.io/kuberay/operator:v1.4.0"}]}}}}
    assert kuberay.operator_version(dep) == "v1.4.0"
    assert kuberay.operator_version({"spec": {"template": {"spec": {"containers": [{"image": "reg:5000/op"}]}}}}) == ""
    assert kuberay.operator_version(None) == ""


def test_gpus_held_by_other_pods_are_named():
    """A second RayCluster under another name holds the GPUs: the preflight names it instead of blaming plugins."""
    s = settings()
    other = plan.render_raycluster(settings(ray_cluster_name="old-cluster"))
    with standin("healthy", set_env=True, preload=[other], **READY_OP) as st:
        w = kube.wait_for(
            lambda: (sum(p["status"]["phase"] == "Running" for p in st.objects("v1", "pods", "ray-train")) == 3, None),
            timeout_s=3,
            interval_s=0.05,
        )
        assert w.ok
        r = kuberay.raycluster(s, **FAST)
    assert not r.ok
    text = "\n".join(r.problems)
    assert "held by old-cluster-gpu-efa-worker-" in text and "notebook 03" not in text


# --------------------------------------------------------------------------------------------
# job server (port-forward)
# --------------------------------------------------------------------------------------------


def test_job_server_forwards_to_the_head_dashboard(monkeypatch):
    monkeypatch.delenv("RAY_AUTH_TOKEN", raising=False)
    monkeypatch.delenv("RAY_AUTH_TOKEN_PATH", raising=False)
    s = settings()
    with standin("healthy", set_env=True, **READY_OP) as st:
        assert kuberay.raycluster(s, **FAST).ok
        with kuberay.job_server(s) as url:
            assert url.startswith("http://127.0.0.1:")
            port = int(url.rsplit(":", 1)[1])
            # the dashboard refuses a request without the cluster's token (Ray's token authentication)
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(url + "/api/version", timeout=5)
            assert refused.value.code == 401
            for _ in range(3):  # several connections, each its own port-forward stream
                req = urllib.request.Request(url + "/api/version", headers=rayjobs.auth_headers())
                with urllib.request.urlopen(req, timeout=5) as resp:
                    body = json.loads(resp.read())
            assert body["ray_version"] == "2.58.0"
            head = kuberay.head_pod(s)["metadata"]["name"]
            assert st.cluster.portforwards[-3:] == [(head, 8265)] * 3
            # the token is the one in the Secret KubeRay made for the cluster, and only while the forward is open
            secret = st.get("v1", "secrets", "raytrain", "ray-train")
            assert secret["metadata"]["ownerReferences"][0]["kind"] == "RayCluster"
            assert os.environ["RAY_AUTH_TOKEN"] == kuberay.cluster_token(s) != ""
        assert "RAY_AUTH_TOKEN" not in os.environ
        with socket.socket() as sock:  # closed on exit
            assert sock.connect_ex(("127.0.0.1", port)) != 0


def test_job_server_needs_a_ready_head():
    s = settings()
    with standin("healthy", set_env=True, **READY):
        with pytest.raises(kube.K8sError, match="no Ray head pod.*notebook 04"):
            with kuberay.job_server(s):
                pass
    with standin("head-never-ready", set_env=True, delay_s=0.05):
        kuberay.raycluster(s, **SHORT)
        with pytest.raises(kube.K8sError, match="not Ready"):
            with kuberay.job_server(s):
                pass


# --------------------------------------------------------------------------------------------
# teardown
# --------------------------------------------------------------------------------------------


def test_teardown_deletes_in_order_and_verifies():
    s = settings()
    with standin("healthy", set_env=True, **READY) as st:
        assert kuberay.raycluster(s, **FAST).ok
        r = kuberay.teardown(s)
        assert not r.ok and "assume_yes=True" in r.message
        assert st.get("ray.io/v1", "rayclusters", "raytrain", "ray-train") is not None
        r = kuberay.teardown(s, assume_yes=True, timeout_s=3, poll_s=0.05, log=QUIET)
        assert r.ok, r.deleted
        assert st.get("ray.io/v1", "rayclusters", "raytrain", "ray-train") is None
        assert st.objects("apps/v1", "deployments") == []
        assert st.get("v1", "namespaces", "ray-train") is None and st.get("v1", "namespaces", "kube-system")
        # the chart's CRDs stay: Helm never deletes crds/ (eksctl delete cluster does)
        assert st.get("apiextensions.k8s.io/v1", "customresourcedefinitions", "rayclusters.ray.io") is not None
        assert st.get("v1", "configmaps", "sh.helm.release.v1.kuberay-operator.v1", "kuberay-system") is None
        assert len(st.objects("apps/v1", "daemonsets", "kube-system")) == 2  # plugins are not kuberay's
        deletes = [p for m, p in st.cluster.requests if m == "DELETE"]
        assert deletes.index(next(p for p in deletes if "/rayclusters/" in p)) < deletes.index(
            next(p for p in deletes if "/deployments/" in p)
        )
        assert kuberay.teardown(s, assume_yes=True, timeout_s=1, poll_s=0.05, log=QUIET).ok  # idempotent


def test_teardown_in_a_namespace_the_tutorial_did_not_create_removes_only_its_policies():
    s = settings()
    theirs = {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy"}
    theirs["metadata"] = {"name": "their-policy", "namespace": "ray-train"}
    theirs["spec"] = {"podSelector": {}}
    preload = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ray-train"}}, theirs]
    with standin("healthy", set_env=True, preload=preload, **READY) as st:
        assert kuberay.raycluster(s, **FAST).ok
        st.cluster.get("v1", "namespaces", "", "ray-train")["metadata"]["labels"] = {}  # not the tutorial's
        assert len(st.objects("networking.k8s.io/v1", "networkpolicies", "ray-train")) == 3
        assert kuberay.teardown(s, assume_yes=True, timeout_s=3, poll_s=0.05, log=QUIET).ok
        assert st.get("v1", "namespaces", "ray-train") is not None
        left = [p["metadata"]["name"] for p in st.objects("networking.k8s.io/v1", "networkpolicies", "ray-train")]
        assert left == ["their-policy"]
