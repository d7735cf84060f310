"""Watching the job: the dashboard guide (the token never printed), Ray's metrics recorded while a block runs, the
local target's metrics addresses from Ray's discovery file, and the EFA reading around a variant."""

from __future__ import annotations

import contextlib
import json
import shutil
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from raytrain_helpers.core import config
from raytrain_helpers.steps import observe
from raytrain_helpers.targets import DashboardAccess, local
from raytrain_helpers.targets.local import observe as local_observe

NODE = (
    'ray_node_cpu_utilization{{IsHeadNode="{head}",SessionName="s"}} {cpu}\n'
    'ray_node_mem_used{{IsHeadNode="{head}"}} 2e9\n'
)


@pytest.fixture
def settings(clean_env, repo_root, tmp_path, monkeypatch):
    import tempfile

    monkeypatch.setenv("RAYTRAIN_RUNS_DIR", str(tmp_path / "runs"))
    root = tempfile.mkdtemp(prefix="rt-obs-", dir="/tmp")  # Ray's socket paths limit the temp root's length
    yield config.load(repo_root / "env.yaml", environ={}, run_name="obs", temp_root=root, check_installed_ray=False)
    shutil.rmtree(root, ignore_errors=True)


def test_the_dashboard_guide_names_where_the_token_is_never_the_token(settings, monkeypatch):
    @contextlib.contextmanager
    def dashboard(s):
        steps = [("open", "http://127.0.0.1:8266"), ("paste the token", "/tmp/x/auth_token")]
        yield DashboardAccess("http://127.0.0.1:8266", "s3cr3t-token", steps)

    monkeypatch.setattr(local, "dashboard", dashboard)
    monkeypatch.setattr(observe.raystate, "get_json", lambda url: {"authentication_mode": "token"})
    text = str(observe.dashboard(settings))
    assert "its login: token" in text
    assert "http://127.0.0.1:8266" in text and "/tmp/x/auth_token" in text and "RayTrainWorker" in text
    assert "s3cr3t-token" not in text and "s3cr3t" not in repr(DashboardAccess("u", "s3cr3t", []))


def test_metrics_are_recorded_while_the_block_runs_and_a_failed_reading_is_skipped(settings, monkeypatch):
    calls = []

    def node_metrics(s):
        calls.append(1)
        if len(calls) == 2:
            raise OSError("a node went away")
        return {"a:1": NODE.format(head="false", cpu=40), "b:2": NODE.format(head="true", cpu=5), "c:3": "# none\n"}

    monkeypatch.setattr(local, "node_metrics", node_metrics)
    with observe.recording(settings, "train", interval_s=0.05) as path:
        time.sleep(0.4)
    rows = observe.read_metrics(path)
    assert len(calls) >= 3 and rows, "read again after a failure"
    assert {r["node"] for r in rows} == {"a:1", "b:2"}, "a page without node figures is no node"
    assert all(r["mem_used_bytes"] == 2e9 for r in rows)
    summary = dict((r[0], r) for r in observe.summary(rows))
    assert summary["worker a:1"][2] == "40 / 40" and summary["head b:2"][3] == "1.86"
    n = len(observe.read_metrics(path))
    time.sleep(0.2)
    assert len(observe.read_metrics(path)) == n, "nothing is read once the block ended"


def test_the_local_metrics_pages_are_the_ones_rays_discovery_file_lists(settings):
    class Page(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's name
            body = NODE.format(head="false", cpu=12).encode()
            self.send_response(200 if self.path == "/metrics" else 404)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        folder = local.cluster_state.temp_root(settings) / "head" / "session_latest"
        folder.mkdir(parents=True)
        up = f"127.0.0.1:{server.server_port}"
        (folder / local_observe.DISCOVERY_FILE).write_text(
            json.dumps([{"labels": {"job": "ray"}, "targets": [up, "127.0.0.1:1"]}])
        )
        assert local_observe.metrics_addresses(settings) == sorted([up, "127.0.0.1:1"])
        assert list(local.node_metrics(settings)) == [up], "an address that does not answer is left out"
    finally:
        server.shutdown()
    assert local.efa_counters(settings) == {}


def test_the_efa_reading_brackets_the_block_and_judges_it(settings, monkeypatch):
    readings = iter([{"w": {"rdmap0/1/tx_bytes": 0}}, {"w": {"rdmap0/1/tx_bytes": 2**31}}])
    monkeypatch.setattr(local, "efa_counters", lambda s: next(readings))
    with observe.efa_reading(settings, "efa") as efa:
        assert efa["before"] == {"w": {"rdmap0/1/tx_bytes": 0}} and efa["verdict"] is None
    assert efa["verdict"].ok is True and efa["verdict"].moved == {"w": 2**31}
    monkeypatch.setattr(local, "efa_counters", lambda s: {})
    with observe.efa_reading(settings, "efa") as none:
        pass
    assert none["verdict"] is None and observe.efa_rows({"gloo": None})[0][2] == "n/a"
