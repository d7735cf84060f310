"""clients.kubernetes: the kubeconfig context choice, exec in a pod and the port-forward, against the stand-in
(the exec and portforward websockets are real) or a plain TCP upstream."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import pytest

from raytrain_helpers.clients import kubernetes as kube
from raytrain_helpers.plan.kube_objects import name_of
from raytrain_helpers.targets.aws.kuberay import raycluster as kuberay
from tests.fakes.k8s_standin import standin
from tests.helpers import aws_settings

REPO = Path(__file__).resolve().parents[3]
QUIET = lambda *a: None  # noqa: E731
FAST = dict(timeout_s=5, poll_s=0.05, log=QUIET)
READY_OP = dict(plugins_installed=True, operator_installed=True, delay_s=0.1)


settings = aws_settings


@pytest.fixture(autouse=True)
def _no_helm(monkeypatch):
    monkeypatch.setenv("PATH", "/usr/bin:/bin")


# --------------------------------------------------------------------------------------------
# The client and its context
# --------------------------------------------------------------------------------------------


def test_context_choice_prefers_the_eks_cluster():
    s = settings(cluster_name="raytrain-tutorial", region="us-west-2")
    kc = {
        "current-context": "kind-dev",
        "contexts": [
            {"name": "kind-dev", "context": {"cluster": "kind-dev"}},
            {"name": "eks", "context": {"cluster": "arn:aws:eks:us-west-2:123456789012:cluster/raytrain-tutorial"}},
        ],
    }
    assert kube.pick_context(s, kc) == "eks"
    kc2 = {
        "current-context": "me@raytrain-tutorial.us-west-2.eksctl.io",
        "contexts": [
            {
                "name": "me@raytrain-tutorial.us-west-2.eksctl.io",
                "context": {"cluster": "raytrain-tutorial.us-west-2.eksctl.io"},
            },
            kc["contexts"][1],
        ],
    }
    assert kube.pick_context(s, kc2) == "me@raytrain-tutorial.us-west-2.eksctl.io"
    assert (
        kube.pick_context(
            s, {"current-context": "standin", "contexts": [{"name": "standin", "context": {"cluster": "standin"}}]}
        )
        == "standin"
    )


def test_using_client_closes_only_its_own(tmp_path, monkeypatch):
    s = settings()
    with standin("healthy", set_env=True) as st:
        with kube.using_client(s) as client:
            assert kube.context_of(client) == "standin" and kube.kubeconfig_of(client) == st.kubeconfig
            assert kube.list_objects(client, "v1", "Node")
        held = kube.api_client(s)
        with kube.using_client(s, held) as client:
            assert client is held
        assert kube.list_objects(held, "v1", "Node")  # still open
        held.close()
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent"))
    with pytest.raises(kube.K8sError, match="no kubeconfig at"):
        with kube.using_client(s):
            pass


# --------------------------------------------------------------------------------------------
# exec
# --------------------------------------------------------------------------------------------


def test_exec_in_pod():
    s = settings()
    files = {"/tmp/ray/nccl.log": "NCCL INFO NET/OFI Selected provider is efa\n"}
    with standin("healthy", set_env=True, **READY_OP, files=files) as st:
        assert kuberay.raycluster(s, **FAST).ok
        client = kube.api_client(s)
        pods = kuberay.cluster_pods(client, s)
        client.close()
        worker = next(name_of(p) for p in pods if kuberay.pod_role(p) == "worker")
        head = next(name_of(p) for p in pods if kuberay.pod_role(p) == "head")
        assert "provider: efa" in kube.exec_in_pod(s, worker, ["fi_info", "-p", "efa"])
        assert "Selected provider is efa" in kube.exec_in_pod(s, worker, "cat /tmp/ray/nccl.log")
        with pytest.raises(kube.ExecError) as e:
            kube.exec_in_pod(s, head, "fi_info -p efa")  # the head has no EFA device
        assert e.value.returncode == 1 and "No data available" in e.value.stderr
        with pytest.raises(kube.ExecError) as e:
            kube.exec_in_pod(s, worker, "nvidia-smi-typo")
        assert e.value.returncode == 127
        assert kube.exec_in_pod(s, worker, "exit 3", check=False) == ""
        assert (worker, ["/bin/sh", "-c", "cat /tmp/ray/nccl.log"]) in st.cluster.exec_log
        with pytest.raises(kube.K8sError):
            kube.exec_in_pod(s, "no-such-pod", "hostname")


# --------------------------------------------------------------------------------------------
# port-forward
# --------------------------------------------------------------------------------------------


def _echo_server():
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)

    def serve():
        while True:
            try:
                c, _ = srv.accept()
            except OSError:
                return
            threading.Thread(target=lambda c=c: _echo(c), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    return srv


def _echo(c):
    with c:
        while True:
            d = c.recv(65536)
            if not d:
                return
            c.sendall(d.upper())


def test_port_forwarder_with_an_injected_upstream():
    """The local listener and relay, with a plain TCP upstream instead of the API server's websocket."""
    up = _echo_server()
    opened = []

    def factory():
        s = socket.create_connection(up.getsockname())
        opened.append(s)
        return s, s.close

    s = settings()
    with kube.port_forward(s, "ignored", 8265, connection_factory=factory) as fwd:
        assert fwd.url.startswith("http://127.0.0.1:")
        results = []

        def client(i):
            with socket.create_connection(("127.0.0.1", fwd.port)) as c:
                payload = f"hello {i} ".encode() * 5000  # larger than one recv
                c.sendall(payload)
                got = b""
                while len(got) < len(payload):
                    got += c.recv(65536)
                results.append(got == payload.upper())

        ts = [threading.Thread(target=client, args=(i,)) for i in range(4)]
        [t.start() for t in ts]
        [t.join(10) for t in ts]
        assert results == [True] * 4 and fwd.connections == 4
    up.close()
    with pytest.raises(ValueError):
        kube.PortForwarder(factory, host="0.0.0.0")


def test_port_forwarder_reports_upstream_failures():
    def factory():
        raise kube.K8sError("port-forward to ns/pod:8265 failed: connection refused")

    with kube.port_forward(settings(), "p", 8265, connection_factory=factory) as fwd:
        with socket.create_connection(("127.0.0.1", fwd.port)) as c:
            c.settimeout(5)
            assert c.recv(10) == b""  # closed, not hung
        time.sleep(0.05)
        assert fwd.errors and "connection refused" in fwd.errors[0]
