"""Faults the local cluster meets before it starts: a port already taken. Nothing of Ray starts here: the refusal
comes first, and nothing half-started or half-created is left."""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
from pathlib import Path

import pytest

from raytrain_helpers.core import config
from raytrain_helpers.targets import local
from raytrain_helpers.targets.local import raylets
from tests.helpers import free_port

pytestmark = pytest.mark.integration


@pytest.fixture
def settings(clean_env, repo_root):
    root = Path(tempfile.mkdtemp(prefix="rt-fault-", dir="/tmp"))
    yield config.load(repo_root / "env.yaml", environ={}, gpus_per_worker_node=0, temp_root=str(root / "c"))
    shutil.rmtree(root, ignore_errors=True)


@pytest.mark.parametrize("which", ["gcs_port", "dashboard_port"])
@pytest.mark.parametrize("listening", [False, True], ids=["bound", "listening"])
def test_a_port_already_taken_is_named_with_its_holder_and_setting(settings, which, listening, monkeypatch):
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    if listening:
        holder.listen()
    taken = holder.getsockname()[1]
    ports = {"gcs_port": free_port(), "dashboard_port": free_port(), which: taken}
    s = config.with_overrides(settings, **ports)
    monkeypatch.setattr(raylets, "start_raylets", lambda *a, **k: pytest.fail("raylets would start"))
    try:
        for plan in (True, False):
            with pytest.raises(local.LocalClusterError) as err:
                local.up(s, plan=plan)
            msg = str(err.value)
            assert f"port {taken} (local.{which}) is already in use" in msg
            if listening:  # /proc lists a listening socket (and its process), not one only bound
                assert f"held by pid {os.getpid()} (" in msg, "the holder (this test process) is named"
            else:
                assert "held by no process this user can see" in msg
            assert f"`-p {which} N`" in msg
    finally:
        holder.close()
    assert not Path(s.local.temp_root).exists(), "up created its temp root before finding the port taken"
    assert local.our_pids(s) == []


#: Loaded on PYTHONPATH by every Python process the cluster starts: the first time the worker node's dashboard
#: agent starts, it sleeps before it imports anything, as agents do on a busy 2-core machine where importing them
#: takes half a minute; later starts are quick, as they are once the files are in the page cache.
_SLOW_FIRST_AGENT = """
import os, sys, time
if sys.argv and sys.argv[0].endswith("dashboard/agent.py") and any(
    a.startswith("--temp-dir=") and a.rstrip("/").endswith("/worker-0") for a in sys.argv
):
    try:
        os.close(os.open({marker!r}, os.O_CREAT | os.O_EXCL))
        time.sleep(20)
    except FileExistsError:
        pass
"""


def test_a_raylet_aborted_by_slow_agents_is_started_again(settings, tmp_path, monkeypatch):
    """Ray 2.58's raylet waits 15 s for its agents to write their ports, then aborts; `up` starts that node
    again, and the cluster comes up whole."""
    (tmp_path / "sitecustomize.py").write_text(_SLOW_FIRST_AGENT.format(marker=str(tmp_path / "slowed-once")))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")])))
    s = config.with_overrides(settings, gcs_port=free_port(), dashboard_port=free_port(), worker_nodes=1)
    try:
        assert local.up(s).ok
        status = local.status(s)
        assert [(n["role"], n["alive"]) for n in status.nodes] == [("head", True), ("worker", True)], status
        log = (Path(s.local.temp_root) / "worker-0" / "ray-start.log").read_text()
        assert "its agents took over 15 s" in log and "attempt 2 of 3" in log, log[-2000:]
        assert (tmp_path / "slowed-once").exists(), "the first agent was slowed"
    finally:
        assert local.down(s).ok
    assert local.our_pids(s) == [], "the aborted attempt's processes are gone too"
