"""targets.aws.jobs.rows: 06's infrastructure rows (GPUs, EFA, fi_info in the worker pods, the pods), against the
Kubernetes API stand-in (see test_kuberay.py for what only the stand-in proves) and from node facts alone."""

from __future__ import annotations

from pathlib import Path

import pytest

from raytrain_helpers.targets.aws.jobs import efa_tools
from raytrain_helpers.targets.aws.jobs import rows as kuberay_rows
from raytrain_helpers.targets.aws.kuberay import raycluster as kuberay
from tests.fakes.k8s_standin import standin
from tests.helpers import aws_settings

REPO = Path(__file__).resolve().parents[5]
QUIET = lambda *a: None  # noqa: E731
FAST = dict(timeout_s=5, poll_s=0.05, log=QUIET)
READY = dict(plugins_installed=True, delay_s=0.1)  # GPUs/EFA already allocatable (notebook 03 done)
READY_OP = dict(READY, operator_installed=True)  # ... and the KubeRay operator already there


settings = aws_settings


@pytest.fixture(autouse=True)
def _no_helm(monkeypatch):
    monkeypatch.setenv("PATH", "/usr/bin:/bin")


def rows_by_name(rows):
    assert [n for n, _, _ in rows] == [
        kuberay_rows.INFRA_GPU,
        kuberay_rows.INFRA_EFA,
        kuberay_rows.INFRA_FI,
        kuberay_rows.INFRA_PODS,
    ]
    return {n: (ok, ev) for n, ok, ev in rows}


# --------------------------------------------------------------------------------------------
# 06's infrastructure rows
# --------------------------------------------------------------------------------------------


def test_infra_criteria_pass_on_a_healthy_cluster_and_read_fi_info_in_every_worker():
    s = settings()
    with standin("healthy", set_env=True, **READY_OP) as st:
        assert kuberay.raycluster(s, **FAST).ok
        n0 = len(st.cluster.exec_log)
        rows = rows_by_name(kuberay_rows.infra_criteria(s))
        assert rows[kuberay_rows.INFRA_GPU] == (True, "2 GPU node(s) advertise nvidia.com/gpu=4")
        assert rows[kuberay_rows.INFRA_EFA] == (True, "2 GPU node(s) advertise vpc.amazonaws.com/efa >= 1 (1, 1)")
        assert rows[kuberay_rows.INFRA_FI] == (True, "2/2 worker pod(s): provider efa, FI_EP_RDM (rdmap0s0-rdm)")
        assert rows[kuberay_rows.INFRA_PODS] == (True, "head Ready, workers Running 2/2")
        execs = st.cluster.exec_log[n0:]
        assert sorted(p for p, _ in execs) == kuberay.worker_pods(s)
        assert all(argv == efa_tools.fi_info_command() for _, argv in execs)


def test_infra_criteria_fail_with_the_evidence():
    s = settings()
    # no EFA interfaces on the nodes: the plugin advertises 0; no RayCluster yet: nothing to exec in
    with standin("healthy", set_env=True, **READY_OP, efa_attached=False):
        rows = rows_by_name(kuberay_rows.infra_criteria(s))
    assert rows[kuberay_rows.INFRA_GPU][0] is True
    assert rows[kuberay_rows.INFRA_EFA] == (
        False,
        "vpc.amazonaws.com/efa: ip-10-0-2-20.us-west-2.compute.internal=0, ip-10-0-2-21.us-west-2.compute.internal=0",
    )
    assert rows[kuberay_rows.INFRA_FI] == (False, "no Running worker pod to run fi_info in. Fix: run notebook 04")
    assert rows[kuberay_rows.INFRA_PODS] == (False, "head missing, workers Running 0/2")
    # fewer GPU nodes than GPU_NODE_COUNT; GPUS_PER_NODE differing from what the nodes advertise
    with standin("healthy", set_env=True, **READY_OP, gpu_node_count=1, gpu_node_type="g6.48xlarge"):
        rows = rows_by_name(kuberay_rows.infra_criteria(s))
    ok, ev = rows[kuberay_rows.INFRA_GPU]
    assert not ok and "nvidia.com/gpu: ip-10-0-2-20.us-west-2.compute.internal=8 (GPUS_PER_NODE 4)" in ev
    assert "only 1 role=gpu-worker node(s), GPU_NODE_COUNT = 2" in ev
    # one node's worker pod where libfabric finds no EFA device: fi_info fails there, and says so
    second = "ip-10-0-2-21.us-west-2.compute.internal"
    with standin(
        "healthy",
        set_env=True,
        **READY_OP,
        exec_handler=lambda pod, argv: (
            ("", "fi_getinfo: -61 (No data available)\n", 1)
            if argv == efa_tools.fi_info_command() and pod["spec"].get("nodeName") == second
            else None
        ),
    ) as st:
        assert kuberay.raycluster(s, **FAST).ok
        rows = rows_by_name(kuberay_rows.infra_criteria(s))
        (bad,) = [
            p["metadata"]["name"] for p in st.objects("v1", "pods", "ray-train") if p["spec"]["nodeName"] == second
        ]
    ok, ev = rows[kuberay_rows.INFRA_FI]
    assert not ok and ev.startswith(f"{bad}: exit 1: fi_getinfo: -61 (No data available). Fix: ")


def test_infra_criteria_without_an_api_fail_every_row(tmp_path, monkeypatch):
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent"))
    rows = kuberay_rows.infra_criteria(settings())
    assert len(rows) == 4 and all(not ok and "no kubeconfig at" in ev for _, ok, ev in rows)


@pytest.mark.parametrize(
    "text,ok,evidence",
    [
        (
            "provider: efa\n    fabric: efa\n    domain: rdmap0s31-rdm\n    version: 122.0\n    type: FI_EP_RDM\n"
            "    protocol: FI_PROTO_EFA\nprovider: efa\n    fabric: efa\n    domain: rdmap0s31-dgrm\n"
            "    version: 122.0\n    type: FI_EP_DGRAM\n    protocol: FI_PROTO_EFA\n",
            True,
            "provider efa, FI_EP_RDM (rdmap0s31-dgrm, rdmap0s31-rdm)",
        ),
        (
            "provider: efa\n    fabric: efa\n    domain: rdmap0s31-dgrm\n    type: FI_EP_DGRAM\n",
            False,
            "providers efa, no FI_EP_RDM endpoint",
        ),
        ("provider: tcp;ofi_rxm\n    fabric: 10.0.0.0/16\n    type: FI_EP_RDM\n", False, "providers tcp;ofi_rxm"),
        ("", False, "no provider listed"),
    ],
)
def test_fi_info_parser(text, ok, evidence):
    assert kuberay_rows.fi_info_efa(text) == (ok, evidence)


def _node(name, gpus, efa):
    return dict(name=name, gpus=gpus, efa=efa)


def test_infra_rows_from_node_facts():
    """The GPU/EFA/pods rows alone, without an API: what each criterion reads and says."""
    s = settings()  # 2 nodes of 4 GPUs
    good = [_node("a", 4, 1), _node("b", 4, 2)]
    assert kuberay_rows.gpu_row(good, s) == (kuberay_rows.INFRA_GPU, True, "2 GPU node(s) advertise nvidia.com/gpu=4")
    assert kuberay_rows.efa_row(good, s) == (
        kuberay_rows.INFRA_EFA,
        True,
        "2 GPU node(s) advertise vpc.amazonaws.com/efa >= 1 (1, 2)",
    )
    assert kuberay_rows.gpu_row([_node("a", 4, 1)], s)[1:] == (
        False,
        "1 GPU node(s) advertise nvidia.com/gpu=4; only 1 role=gpu-worker node(s), GPU_NODE_COUNT = 2",
    )
    assert kuberay_rows.efa_row([_node("a", 4, 1), _node("b", 4, 0)], s) == (
        kuberay_rows.INFRA_EFA,
        False,
        "vpc.amazonaws.com/efa: b=0",
    )
    assert kuberay_rows.efa_row([], s)[1:] == (
        False,
        "no node labelled role=gpu-worker; only 0 role=gpu-worker node(s), GPU_NODE_COUNT = 2",
    )

    def pod(name, role, phase, ready=False):
        conditions = [{"type": "Ready", "status": "True"}] if ready else []
        return {
            "metadata": {"name": name, "labels": {"ray.io/node-type": role}},
            "status": {"phase": phase, "conditions": conditions},
        }

    pods = [pod("h", "head", "Running", True), pod("w1", "worker", "Running"), pod("w2", "worker", "Pending")]
    assert kuberay_rows.pods_row(pods, s) == (
        kuberay_rows.INFRA_PODS,
        False,
        "head Ready, workers Running 1/2 (w2 Pending)",
    )
    assert kuberay_rows.pods_row(pods[:2] + [pod("w2", "worker", "Running")], s)[1] is True
