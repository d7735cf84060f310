"""Watching the job on aws: the dashboard's steps never hold the token, the metrics pages come through the pod proxy
of the Ray pods that run, and the EFA counters are read in each worker pod (the Kubernetes calls stood in for)."""

from __future__ import annotations

import pytest

from raytrain_helpers.clients import kubernetes as kube
from raytrain_helpers.core import config
from raytrain_helpers.targets.aws.jobs import observe


@pytest.fixture
def settings(clean_env, repo_root):
    return config.load(repo_root / "env.yaml", environ={}, target="aws", check_installed_ray=False)


class _Client:
    def close(self):
        pass


def _pod(name, role, phase="Running"):
    return {"metadata": {"name": name, "labels": {"ray.io/node-type": role}}, "status": {"phase": phase}}


def test_the_dashboard_steps_forward_8265_and_write_the_token_to_a_private_file(settings):
    steps = observe.dashboard_steps(settings)
    text = "\n".join(how for _, how in steps)
    assert "port-forward svc/raytrain-head-svc 8265:8265" in text
    assert "umask 077" in text and "> ~/.ray-dashboard-token" in text and "echo" not in text


def test_metrics_come_through_the_pod_proxy_of_running_ray_pods(settings, monkeypatch):
    pods = [_pod("head-0", "head"), _pod("w-1", "worker"), _pod("w-2", "worker", "Pending")]
    monkeypatch.setattr(observe, "cluster_pods", lambda api, s: pods)
    monkeypatch.setattr(kube, "api_client", lambda s, **kw: _Client())
    asked = []

    def request(api, method, path, **kw):
        asked.append(path)
        if "head-0" in path:
            raise kube.K8sError("503 service unavailable", 503)
        return "ray_node_cpu_utilization 5.0\n"

    monkeypatch.setattr(kube, "request", request)
    got = observe.node_metrics(settings)
    assert asked == [
        "/api/v1/namespaces/ray-train/pods/head-0:8080/proxy/metrics",
        "/api/v1/namespaces/ray-train/pods/w-1:8080/proxy/metrics",
    ], "a pod that is not Running is not asked"
    assert got == {"worker w-1": "ray_node_cpu_utilization 5.0\n"}, "a pod that did not answer is left out"


def test_efa_counters_are_read_in_each_worker_pod(settings, monkeypatch):
    monkeypatch.setattr(kube, "api_client", lambda s, **kw: _Client())
    monkeypatch.setattr(observe, "worker_pods", lambda s, client=None: ["w-1", "w-2"])
    listings = {
        "w-1": "/sys/class/infiniband/rdmap0s6/ports/1/hw_counters/tx_bytes 4096\n",
        "w-2": "",  # no EFA device in that pod
    }
    ran = []

    def exec_in_pod(s, pod, cmd, **kw):
        ran.append(cmd)
        return listings[pod]

    monkeypatch.setattr(kube, "exec_in_pod", exec_in_pod)
    assert observe.efa_counters(settings) == {"w-1": {"rdmap0s6/1/tx_bytes": 4096}}
    assert ran[0][:2] == ["sh", "-c"] and "/sys/class/infiniband/*/ports/*/hw_counters/*" in ran[0][2]
