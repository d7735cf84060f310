"""The aws glue between the steps: the worker pods' logs (steps.verify.worker_logs -> targets.aws.jobs.logs ->
clients.kubernetes.exec_in_pod, against the stand-in), and 08's full teardown (targets.aws.teardown: RayCluster,
operator, plugins, node group, cluster) against the stand-in and a moto server with the fake eksctl. 06's
infrastructure rows and the fail-fast of hopeless waits are in test_kuberay.py and test_plugins.py beside this."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import boto3
import pytest

REPO = Path(__file__).resolve().parents[4]
FIX = REPO / "tests" / "fixtures" / "nccl"
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO))

from raytrain_helpers import nccl  # noqa: E402
from raytrain_helpers.clients import kubernetes  # noqa: E402
from raytrain_helpers.core import config  # noqa: E402
from raytrain_helpers.steps import train as train_step  # noqa: E402
from raytrain_helpers.steps import verify  # noqa: E402
from raytrain_helpers.targets import aws  # noqa: E402
from raytrain_helpers.targets.aws import common  # noqa: E402
from raytrain_helpers.targets.aws.eks import down as eks_teardown  # noqa: E402
from raytrain_helpers.targets.aws.jobs.logs import LIST_SCRIPT  # noqa: E402
from raytrain_helpers.targets.aws.kuberay import raycluster as kuberay  # noqa: E402
from raytrain_helpers.targets.aws.storage import teardown as storage_teardown  # noqa: E402
from tests.fakes.aws.fixtures import SECRETS, make_settings  # noqa: E402
from tests.fakes.k8s_standin import ray_worker_logs, standin  # noqa: E402
from tests.helpers import job_cfg  # noqa: E402

pytestmark = pytest.mark.timeout(120)

QUIET = lambda *a: None  # noqa: E731
FAST = dict(timeout_s=5, poll_s=0.05, log=QUIET)
READY_OP = dict(plugins_installed=True, operator_installed=True, delay_s=0.05)
NAME, R = "raytrain-tutorial", "us-west-2"
CONTEXT = f"{NAME}.{R}.eksctl.io"
BUCKET = f"{NAME}-123456789012-{R}"  # what eksctl names the cluster in the kubeconfig


def settings(**params):
    return config.load(REPO / "env.yaml", environ={}, check_installed_ray=False, **dict(dict(target="aws"), **params))


# --------------------------------------------------------------------------------------------
# The worker pods' logs (06's NCCL audit on aws)
# --------------------------------------------------------------------------------------------


class _Run:
    """What 06 reads of a finished JobRun: its typed config (the marker names its workers' log files) and ranks."""

    def __init__(self, marker):
        self.config, self.result, self.ranks = {"marker": marker}, {}, [{"device": "cuda:0"}]
        self.job_config = job_cfg(marker=marker)


def test_worker_logs_come_from_the_pods_and_only_this_runs():
    s = settings()
    with standin("healthy", set_env=True, **READY_OP) as st:
        assert kuberay.raycluster(s, **FAST).ok
        nodes = st.gpu_nodes()
        files = ray_worker_logs((FIX / "synthetic-efa-2x4-healthy.log").read_text(), "run0good0001", nodes)
        older = ray_worker_logs(
            (FIX / "synthetic-efa-2x4-sockets-provider.log").read_text(), "run0bad00001", nodes, job_id="01000000"
        )
        files = {
            n: {
                **files[n],
                **older[n],
                "/tmp/ray/session_latest/logs/old/worker-x-01-9.out": "[raytrain] marker=run0good0001\n",
            }
            for n in nodes
        }  # the glob does not reach into sub-directories
        st.serve_files(files)
        texts = verify.worker_logs(s, _Run("run0good0001"))
        assert len(texts) == 16 and {k.split(":", 1)[0] for k in texts} == set(kuberay.worker_pods(s))
        good = verify.audit_run(s, _Run("run0good0001"))
        assert good.ok and good.summary.startswith("pass: 8 ranks on 2 host(s)")
        bad = verify.audit_run(s, _Run("run0bad00001"))
        assert not bad.ok and "sockets provider" in bad.summary
        none = nccl.audit(verify.worker_logs(s, _Run("run0none0001")), expect="efa", marker="run0none0001")
        assert not none.ok and none.verdict == "inconclusive"


def test_standin_exec_lists_and_reads_like_a_shell():
    s = settings()
    with standin(
        "healthy",
        set_env=True,
        **READY_OP,
        files={
            "/tmp/a/worker-1.out": "x needle y\n",
            "/tmp/a/worker-2.err": "nothing\n",
            "/tmp/a/.worker-3.out": "needle\n",
            "/tmp/a/sub/worker-4.out": "needle\n",
        },
    ):
        assert kuberay.raycluster(s, **FAST).ok
        pod = kuberay.worker_pods(s)[0]
        out = kubernetes.exec_in_pod(s, pod, ["sh", "-c", LIST_SCRIPT, "raytrain-collect", "needle", "/tmp/a/worker-*"])
        assert out == "M\t/tmp/a/worker-1.out\nF\t/tmp/a/worker-2.err\n"
        assert kubernetes.exec_in_pod(s, pod, ["cat", "--", "/tmp/a/worker-2.err"]) == "nothing\n"
        with pytest.raises(kubernetes.ExecError, match="exited 1") as e:
            kubernetes.exec_in_pod(s, pod, ["cat", "--", "/tmp/a/absent"])
        assert "No such file or directory" in e.value.stderr


# --------------------------------------------------------------------------------------------
# 08 on aws: targets.aws.teardown
# --------------------------------------------------------------------------------------------


def _cluster_up(tmp_path):
    s = make_settings(tmp_path)
    common.save_placement(
        s,
        dict(
            region=R,
            az="us-west-2a",
            az_id="",
            instance_type=s.aws.gpu_node_type,
            gpu_node_count=2,
            account="123456789012",
            source="ranked",
        ),
    )
    with standin("healthy", delay_s=0.05) as api:  # the API 02's storage check pod runs in
        os.environ["FAKE_EKSCTL_API_KUBECONFIG"] = api.kubeconfig
        try:
            assert aws.cluster(s, "up", assume_yes=True).ok
        finally:
            del os.environ["FAKE_EKSCTL_API_KUBECONFIG"]
    return s


def _eks():
    return boto3.client("eks", region_name=R)


def test_teardown_refuses_without_assume_yes_and_touches_nothing(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(eks_teardown, "AwsContext", lambda s: pytest.fail("no AWS call may happen"))
    r = aws.teardown(settings())
    assert not r.ok and r.steps == []
    r.show()
    out = capsys.readouterr().out
    assert out.startswith(
        "refused: teardown deletes the RayCluster ray-train/raytrain, the KubeRay operator, "
        "the device plugins, GPU node group 'gpu-efa' and EKS cluster raytrain-tutorial in "
        "us-west-2; nothing was deleted. Also the S3 bucket the tutorial created goes with every object in it, "
        "the exported model included (s3://raytrain-tutorial-ACCOUNT-us-west-2/raytrain/"
    )
    run = settings().run_name
    assert (
        f"copy the model out first with `aws s3 sync s3://raytrain-tutorial-ACCOUNT-us-west-2/raytrain/{run}/model "
        "./model`. Fix: pass assume_yes=True" in out
    ), out


def test_teardown_removes_everything_in_reverse_order_and_is_idempotent(srv, tmp_path, monkeypatch, capsys):
    s = _cluster_up(tmp_path)
    with standin("healthy", context=CONTEXT, **READY_OP) as st:
        monkeypatch.setenv("KUBECONFIG", st.kubeconfig)
        assert kuberay.raycluster(s, **FAST).ok
        n = len(srv.eksctl_calls())
        model = train_step.export_path(s)  # where the job exports the model: in the bucket 08 deletes
        assert storage_teardown.model_export(s) == model == f"s3://{BUCKET}/raytrain/{s.run_name}/model"
        capsys.readouterr()
        r = aws.teardown(s, assume_yes=True)
        assert r.ok, r.steps
        assert f"S3 bucket {BUCKET}: deleting it with every object version, the exported model {model}" in (
            capsys.readouterr().out
        )
        assert [state for _, state, _ in r.steps] == [True] * 7
        assert [w.split(" (")[0].split(",")[0] for w, _, _ in r.steps] == [
            "RayCluster ray-train/raytrain and its pods",
            "KubeRay operator",
            "device plugins",
            "storage role raytrain-tutorial-ray-train-raytrain-s3 and its pod identity association",
            "S3 checkpoint bucket raytrain-tutorial-123456789012-us-west-2",
            "GPU node group 'gpu-efa'",
            "EKS cluster raytrain-tutorial",
        ]
        assert st.objects("apps/v1", "daemonsets", "kube-system") == []
        assert st.objects("v1", "pods", "ray-train") == [] and st.objects("apps/v1", "deployments") == []
        deletes = [p for m, p in st.cluster.requests if m == "DELETE"]
        order = [
            next(i for i, p in enumerate(deletes) if k in p) for k in ("/rayclusters/", "/deployments/", "/daemonsets/")
        ]
        assert order == sorted(order)
        assert [c["argv"][:2] for c in srv.eksctl_calls()[n:]] == [["delete", "nodegroup"], ["delete", "cluster"]]
        assert _eks().list_clusters()["clusters"] == [] and r.remaining == []
        r.show()
        out = capsys.readouterr().out
        assert "left in the account: nothing" in out and "teardown: everything is gone" in out
        assert not any(x in out for x in SECRETS)
        # again: nothing is left, nothing is deleted, and it says so
        n_req = len(st.cluster.requests)
        r2 = aws.teardown(s, assume_yes=True)
        assert r2.ok and "nothing in Kubernetes to delete" in r2.steps[0][2]
        assert len(srv.eksctl_calls()) == n + 2 and len(st.cluster.requests) == n_req


def test_teardown_never_deletes_through_another_clusters_context(srv, tmp_path, monkeypatch):
    s = _cluster_up(tmp_path)
    with standin("healthy", context="someone-elses-cluster", **READY_OP) as st:  # the current context
        monkeypatch.setenv("KUBECONFIG", st.kubeconfig)
        r = aws.teardown(s, assume_yes=True)
        assert [m for m, _ in st.cluster.requests if m == "DELETE"] == []  # nothing touched there
        assert len(st.objects("apps/v1", "daemonsets", "kube-system")) == 2
    assert r.ok, r.steps  # the objects went with the EKS cluster, which is verified gone
    assert (
        "has no context for EKS cluster raytrain-tutorial in us-west-2 (current context: "
        "'someone-elses-cluster'); gone with the EKS cluster" in r.steps[0][2]
    )
    assert _eks().list_clusters()["clusters"] == []


def test_teardown_of_the_node_group_only(srv, tmp_path, monkeypatch):
    s = _cluster_up(tmp_path)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent"))
    r = aws.teardown(s, assume_yes=True, nodegroup_only=True)
    assert r.ok and [w for w, _, _ in r.steps] == ["GPU node group 'gpu-efa'"]
    assert _eks().list_nodegroups(clusterName=NAME)["nodegroups"] == ["system"]
