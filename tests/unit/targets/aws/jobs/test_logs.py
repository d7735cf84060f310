"""Collecting one run's worker logs on the aws target: the worker pods' files through an injected exec, and the
listing script that tags the files holding a run's marker."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from raytrain_helpers import nccl
from raytrain_helpers.targets.aws.jobs.logs import LIST_SCRIPT, collect_pod_logs
from tests.unit.nccl import fixtures
from tests.unit.nccl.fixtures import split_by_process

NVLINK = fixtures.NVLINK.read_text()
SOCKET = fixtures.SOCKET.read_text()


def _fake_exec(root: Path, calls: list):
    """exec_fn that runs the command for real, with /tmp/ray mapped to root/<pod>."""

    def run(pod: str, cmd: list[str]) -> str:
        calls.append((pod, cmd[0]))
        if pod == "dead-pod":
            raise ConnectionError("pod not running")
        base = str(root / pod)
        cmd = [c.replace("/tmp/ray", base) for c in cmd]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=30).stdout
        return out.replace(base, "/tmp/ray")

    return run


def test_collect_pod_logs_with_a_fake_exec(tmp_path):
    for pod, runs in (("worker-a", {"run-a": NVLINK, "run-b": SOCKET}), ("worker-b", {"run-b": SOCKET}), ("head", {})):
        logs = tmp_path / pod / "session_latest" / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        for marker, text in runs.items():
            for pid, body in split_by_process(text).items():
                stem = f"worker-{pid}-{marker}"
                (logs / f"{stem}.out").write_text(f"[raytrain] marker={marker} rank=0/2 pid={pid}\n{body}")
                (logs / f"{stem}.err").write_text("stderr of the worker\n")
    calls: list = []
    got = collect_pod_logs(_fake_exec(tmp_path, calls), ["worker-a", "worker-b", "head"], "run-a")
    assert sorted(got) == sorted(
        f"worker-a:/tmp/ray/session_latest/logs/worker-{pid}-run-a.{s}"
        for pid in ("730", "731")
        for s in ("out", "err")
    )
    assert nccl.audit(got, expect="p2p").ok
    assert [c for c in calls if c[1] == "sh"] == [("worker-a", "sh"), ("worker-b", "sh"), ("head", "sh")]
    got_b = collect_pod_logs(_fake_exec(tmp_path, []), ["worker-a", "worker-b"], "run-b")
    assert len(got_b) == 8
    assert nccl.audit(got_b, expect="socket").ok
    with pytest.raises(RuntimeError, match="pod dead-pod: listing"):
        collect_pod_logs(_fake_exec(tmp_path, []), ["dead-pod"], "run-a")
    assert collect_pod_logs(lambda p, c: "", ["x"], "run-a") == {}


def test_list_script_tags_the_files_holding_the_marker(tmp_path):
    (tmp_path / "worker-a.out").write_text("x\n[raytrain] marker=run-a rank=0/2\n")
    (tmp_path / "worker-a.err").write_text("stderr\n")
    (tmp_path / "worker-b.out").write_text("[raytrain] marker=run-a0 rank=0/2\n")
    (tmp_path / "worker-dir.out").mkdir()
    cmd = ["sh", "-c", LIST_SCRIPT, "raytrain-collect", "[raytrain] marker=run-a ", f"{tmp_path}/worker-*"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=30, check=True).stdout
    assert sorted(out.splitlines()) == [
        f"F\t{tmp_path}/worker-a.err",
        f"F\t{tmp_path}/worker-b.out",
        f"M\t{tmp_path}/worker-a.out",
    ]
    empty = subprocess.run([*cmd[:5], f"{tmp_path}/nothing-*"], capture_output=True, text=True, timeout=30)
    assert empty.returncode == 0 and empty.stdout == ""
