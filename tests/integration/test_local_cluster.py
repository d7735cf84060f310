"""The local target's cluster, for real: its shape, idempotent ``up``, refusal of another shape, and Ray token
authentication. The training jobs run on the same cluster in tests/notebooks/ (papermill, the aws notebooks)."""

import json
import os
import sys
import time
import urllib.error
import urllib.request

import pytest

from raytrain_helpers.clients import rayjobs
from raytrain_helpers.core import config
from raytrain_helpers.targets import local
from raytrain_helpers.targets.local import cluster_state, procs, raylets, rootdir
from tests.conftest import AUTH_VARS

pytestmark = pytest.mark.integration


def test_cluster_shape_and_idempotent_up(local_settings, local_cluster):
    info = local.status(local_settings)
    assert info.running and info.head is not None
    assert info.head["resources"].get("CPU", 0) == 0 and info.head["resources"].get("train_slot", 0) == 0
    assert len(info.workers) == 2 and all(w["resources"]["train_slot"] >= 1 for w in info.workers)
    assert all(w["alive"] for w in info.workers) and {w["name"] for w in info.workers} == {"worker-0", "worker-1"}
    state = json.loads(raylets.state_path(local_settings).read_text())
    assert state["python"] == sys.executable and (raylets.state_path(local_settings).parent / rootdir.MARKER).is_file()
    # every process `ray start` left is recorded by pid and start time, for each of the three nodes
    assert {r["node"] for r in state["processes"]} == {"head", "worker-0", "worker-1"}
    assert all(procs.is_alive(r) for r in state["processes"])
    assert set(local.our_pids(local_settings)) >= {r["pid"] for r in state["processes"]}
    again = local.up(local_settings)
    assert again.action == "reused" and {n["node_id"] for n in again.nodes} == {n["node_id"] for n in info.nodes}
    dirs = local.session_log_dirs(local_settings)
    assert len(dirs) == 3 and len({d.parent.resolve() for d in dirs}) == 3, "each raylet has its own temp dir"


def test_up_refuses_a_different_shape(local_settings, local_cluster):
    other = config.with_overrides(local_settings, worker_nodes=3)
    with pytest.raises(local.LocalClusterError, match="different shape"):
        local.up(other)


def test_token_auth_end_to_end(local_settings, local_cluster):
    """The session's cluster runs with token authentication: one 0600 token file; a request without the token
    gets 401; the jobs the other tests submit through the helpers (papermill kernels, the aws port-forward)
    succeed with it."""
    token_file = raylets.token_path(local_settings)
    assert token_file.is_file() and oct(token_file.stat().st_mode & 0o777) == "0o600"
    assert os.environ["RAY_AUTH_MODE"] == "token" and os.environ["RAY_AUTH_TOKEN_PATH"] == str(token_file)
    url = f"http://127.0.0.1:{local_settings.local.dashboard_port}/api/jobs/"
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(url, timeout=10)
    assert e.value.code == 401
    request = urllib.request.Request(url, headers=rayjobs.auth_headers())
    with urllib.request.urlopen(request, timeout=10) as answer:
        assert answer.status == 200


def test_a_job_without_the_token_is_refused(local_settings, local_cluster, monkeypatch):
    """The cluster started with the default settings (the session's cluster sets no auth_mode): a job submitted
    to its Jobs API without the token is refused, and nothing runs."""
    from ray.job_submission import JobSubmissionClient

    assert local.status(local_settings).token_auth, "the default settings start a cluster without token auth"
    for k in AUTH_VARS:  # Ray's client adds the token from these by itself
        monkeypatch.delenv(k, raising=False)
    url = f"http://127.0.0.1:{local_settings.local.dashboard_port}"
    with pytest.raises(Exception, match=r"401|[Uu]nauthori[sz]ed|authenticat"):
        JobSubmissionClient(url).submit_job(entrypoint="touch /tmp/raytrain-token-test-ran")
    assert not os.path.exists("/tmp/raytrain-token-test-ran")
    request = urllib.request.Request(f"{url}/api/jobs/", headers={"Authorization": "Bearer " + "0" * 64})
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(request, timeout=10)
    assert e.value.code in (401, 403), "a wrong token was accepted"


def _machine_address() -> str:
    """This machine's own (non-loopback) address, as Ray finds it."""
    from ray._private.services import get_node_ip_address

    return get_node_ip_address()


def test_what_listens_where(local_settings, local_cluster):
    """The dashboard and Jobs API listen on 127.0.0.1 only. Ray 2.58 puts the GCS and the raylets on every interface
    and the Ray Client server on the machine's address (``ray start`` replaces a loopback node address): there a
    call without the token is refused, one with it answered."""
    import grpc
    from ray.core.generated import (
        gcs_service_pb2,
        gcs_service_pb2_grpc,
        node_manager_pb2,
        node_manager_pb2_grpc,
        ray_client_pb2,
        ray_client_pb2_grpc,
    )

    loc = local_settings.local
    # the Ray Client server starts in the background: on a busy machine it may listen some seconds after `up`
    deadline = time.monotonic() + 90
    while True:
        found = local.status(local_settings).listeners
        if any(r["role"] == "Ray Client server" for r in found) or time.monotonic() > deadline:
            break
        time.sleep(1)
    dashboard = [r for r in found if r["port"] == loc.dashboard_port]
    assert dashboard and {r["address"] for r in dashboard} == {"127.0.0.1"}, dashboard
    assert {r["address"] for r in found if r["port"] == loc.gcs_port} <= {"*", "127.0.0.1"}
    rows = raylets.exposure_rows(found, token_auth=True)  # what 02 shows
    metrics = [r for r in found if "(Prometheus)" in r["role"]]
    agents = {r["port"] for r in metrics if r["role"] == cluster_state.AGENT_METRICS}
    assert len(agents) == 3, metrics  # one dashboard agent per raylet: the head and two workers
    heads = [r for r in metrics if r["port"] not in agents]  # the dashboard's and the autoscaler's
    assert len({r["port"] for r in heads}) == 2 and not {r["port"] for r in heads} & {44217, 44227}, metrics
    for r in metrics:  # the table says these ask for no token: metrics only, answered to anyone who reaches them
        with urllib.request.urlopen(f"http://127.0.0.1:{r['port']}/metrics", timeout=10) as answer:
            assert answer.status == 200
    assert {row[2] for row in rows if "(Prometheus)" in row[0]} == {cluster_state.METRICS_ONLY}, rows
    assert cluster_state.AGENT_METRICS in {row[0] for row in rows}
    assert [r for r in rows if r[0] == "dashboard + Jobs API"] == [
        ("dashboard + Jobs API", "this machine only (127.0.0.1)", "on")
    ]
    token = raylets.token_path(local_settings).read_text().strip()
    host = _machine_address()
    calls = [
        (loc.gcs_port, gcs_service_pb2_grpc.NodeInfoGcsServiceStub, "GetAllNodeInfo",
         gcs_service_pb2.GetAllNodeInfoRequest()),
    ]  # fmt: skip
    auth = [("authorization", f"Bearer {token}")]
    with grpc.insecure_channel(f"{host}:{loc.gcs_port}") as channel:  # each raylet's node manager port
        nodes = gcs_service_pb2_grpc.NodeInfoGcsServiceStub(channel).GetAllNodeInfo(
            gcs_service_pb2.GetAllNodeInfoRequest(), timeout=20, metadata=auth
        )
    raylet_ports = {n.node_manager_port for n in nodes.node_info_list if n.state == 0}  # 0: ALIVE
    assert len(raylet_ports) == 3, nodes
    for port in raylet_ports:
        calls.append((port, node_manager_pb2_grpc.NodeManagerServiceStub, "GetNodeStats",
                      node_manager_pb2.GetNodeStatsRequest()))  # fmt: skip
    # Ray's client server gives up when the head's node info comes late (a loaded machine); that it runs is
    # test_the_head_keeps_off_ray_clients_default_port's to check
    for port in {r["port"] for r in found if r["role"] == "Ray Client server" and r["address"] != "127.0.0.1"}:
        request = ray_client_pb2.ClusterInfoRequest(type=ray_client_pb2.ClusterInfoType.PING)
        calls.append((port, ray_client_pb2_grpc.RayletDriverStub, "ClusterInfo", request))
    for port, stub, method, request in calls:
        with grpc.insecure_channel(f"{host}:{port}") as channel:
            call = getattr(stub(channel), method)
            with pytest.raises(grpc.RpcError) as e:
                call(request, timeout=20)
            assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED, (port, e.value)
            call(request, timeout=20, metadata=auth)


def test_the_gcs_checks_the_raylets_every_second(local_settings, local_cluster):
    """The head's GCS was started with one health check a second, so a dead raylet is named within seconds (the
    fault test kills one)."""
    state = json.loads(raylets.state_path(local_settings).read_text())
    gcs = next(r for r in state["processes"] if r["node"] == "head" and procs.program(r["pid"]) == "gcs_server")
    environ = dict(kv.split("=", 1) for kv in open(f"/proc/{gcs['pid']}/environ").read().split("\0") if "=" in kv)
    assert environ.get("RAY_health_check_period_ms") == str(raylets.HEALTH_CHECK_PERIOD_MS) == "1000"


def test_the_head_keeps_off_ray_clients_default_port(local_settings, local_cluster):
    """Ray starts a Ray Client server on the head, on 10001 unless told otherwise, and gRPC lets a second head on
    the same host listen there too: `ray://127.0.0.1:10001` would then reach either cluster. This cluster's Ray
    Client server listens on a port of its own, and none of its processes holds 10001."""
    ours = set(local.our_pids(local_settings))
    argvs = {pid: procs.command_line(pid) for pid in ours}
    client = [pid for pid, argv in argvs.items() if "ray.util.client.server" in argv]
    assert len(client) == 1, "the head runs one Ray Client server"
    port = next(int(a.removeprefix("--port=")) for a in argvs[client[0]] if a.startswith("--port="))
    assert port != 10001 and client[0] in procs.holders(port)
    assert not ours & set(procs.holders(10001)), "a process of this cluster holds Ray Client's default port"
