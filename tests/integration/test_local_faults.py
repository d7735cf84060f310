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

pytestmark = pytest.mark.integration


@pytest.fixture
def settings(clean_env, repo_root):
    root = Path(tempfile.mkdtemp(prefix="rt-fault-", dir="/tmp"))
    yield config.load(repo_root / "env.yaml", environ={}, gpus_per_worker_node=0, temp_root=str(root / "c"))
    shutil.rmtree(root, ignore_errors=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("which", ["gcs_port", "dashboard_port"])
@pytest.mark.parametrize("listening", [False, True], ids=["bound", "listening"])
def test_a_port_already_taken_is_named_with_its_holder_and_setting(settings, which, listening, monkeypatch):
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    if listening:
        holder.listen()
    taken = holder.getsockname()[1]
    ports = {"gcs_port": _free_port(), "dashboard_port": _free_port(), which: taken}
    s = config.with_overrides(settings, **ports)
    monkeypatch.setattr(raylets, "_start_raylets", lambda *a, **k: pytest.fail("raylets would start"))
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
