"""The local target's cluster, for real: its shape, idempotent ``up``, refusal of another shape, and Ray token
authentication end to end. The training job itself runs in tests/notebooks/test_papermill.py on the same cluster."""

import os
import urllib.error
import urllib.request

import pytest

from raytrain_helpers.clients import rayjobs
from raytrain_helpers.core import config
from raytrain_helpers.targets import local
from raytrain_helpers.targets.local import raylets

pytestmark = pytest.mark.integration


def test_cluster_shape_and_idempotent_up(local_settings, local_cluster):
    info = local.status(local_settings)
    assert info.running and info.head is not None
    assert info.head["resources"].get("CPU", 0) == 0 and info.head["resources"].get("train_slot", 0) == 0
    assert len(info.workers) == 2 and all(w["resources"]["train_slot"] >= 1 for w in info.workers)
    again = local.up(local_settings)
    assert again.action == "reused" and {n["node_id"] for n in again.nodes} == {n["node_id"] for n in info.nodes}
    dirs = local.session_log_dirs(local_settings)
    assert len(dirs) == 3 and len({d.parent.resolve() for d in dirs}) == 3, "each raylet has its own temp dir"


def test_up_refuses_a_different_shape(local_settings, local_cluster):
    other = config.with_overrides(local_settings, worker_nodes=3)
    with pytest.raises(local.LocalClusterError, match="different shape"):
        local.up(other)


DRIVER = "python -c \"import ray; ray.init(); print('nodes', len(ray.nodes()))\""


def test_token_auth_end_to_end(repo_root, test_runs_dir, monkeypatch):
    """One 0600 token file: a request without it gets 401, a job submitted with the helpers' client succeeds."""
    for k in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"):
        monkeypatch.delenv(k, raising=False)
    s = config.load(
        repo_root / "env.yaml",
        environ={},
        run_name="it-auth",
        auth_mode="token",
        worker_nodes=1,
        gcs_port=6393,
        dashboard_port=8273,
        temp_root="/tmp/raytrain-auth",
        gpus_per_worker_node=0,
    )
    try:
        local.up(s)
        token_file = raylets.token_path(s)
        assert token_file.is_file() and oct(token_file.stat().st_mode & 0o777) == "0o600"
        assert os.environ["RAY_AUTH_MODE"] == "token"
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen("http://127.0.0.1:8273/api/jobs/", timeout=10)
        assert e.value.code == 401
        with local.job_server(s) as url:
            client = rayjobs.client(url)
            sid = client.submit_job(entrypoint=DRIVER)
            run = rayjobs.follow(client, sid, timeout_s=120, quiet=True, progress=False, total=None)
        assert run.status == "SUCCEEDED" and "nodes 2" in run.logs, run.logs[-2000:]
    finally:
        local.down(s)
        for k in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"):
            os.environ.pop(k, None)  # the helpers set them for this process; later tests use no token
    assert not local.our_pids(s)
