"""The local target's cluster, for real: its shape, idempotent ``up``, refusal of another shape, and Ray token
authentication. The training jobs run on the same cluster in tests/notebooks/ (papermill, the aws notebooks)."""

import json
import os
import sys
import urllib.error
import urllib.request

import pytest

from raytrain_helpers.clients import rayjobs
from raytrain_helpers.core import config
from raytrain_helpers.targets import local
from raytrain_helpers.targets.local import procs, raylets, rootdir

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
