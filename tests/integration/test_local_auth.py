"""Ray token authentication on the local target: every process uses one token file; a request without it is
refused while the job submitted through the helpers (with the token) succeeds."""

import os
import urllib.error
import urllib.request

import pytest

from raytrain_helpers import config as C, jobs
from raytrain_helpers.targets import local

pytestmark = pytest.mark.integration


def test_token_auth_end_to_end(repo_root, test_runs_dir, monkeypatch):
    for k in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("RAYTRAIN_RUNS_DIR", str(test_runs_dir))
    s = C.load(repo_root / "env.yaml", environ={}, run_name="it-auth", steps=1, auth_mode="token",
               gcs_port=6393, dashboard_port=8273, temp_root="/tmp/raytrain-auth", gpus_per_worker_node=0)
    try:
        local.up(s)
        token_file = local._token_path(s)
        assert token_file.is_file() and oct(token_file.stat().st_mode & 0o777) == "0o600"
        assert os.environ["RAY_AUTH_MODE"] == "token"
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen("http://127.0.0.1:8273/api/jobs/", timeout=10)
        assert e.value.code == 401
        run = jobs.submit(s, progress=False, quiet=True)
        assert run.ok, run.logs[-2000:]
    finally:
        local.down(s)
        for k in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"):
            os.environ.pop(k, None)   # the helpers set them for this process; later tests use no token
    assert not local._our_pids(s)
