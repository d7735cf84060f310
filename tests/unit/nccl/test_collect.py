"""Collecting one run's worker logs: local raylet dirs, and pods through an injected exec."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from raytrain_helpers import nccl
from raytrain_helpers.targets.aws.logs import LIST_SCRIPT, collect_pod_logs
from raytrain_helpers.targets.local.logs import collect_local_logs
from tests.unit.nccl import fixtures
from tests.unit.nccl.fixtures import split_by_process, write_session

NVLINK = fixtures.NVLINK.read_text()
SOCKET = fixtures.SOCKET.read_text()


def test_collect_local_logs_keeps_one_run(tmp_path):
    d1 = write_session(tmp_path, "head", {"run-a": NVLINK}, "01000000")
    d2 = write_session(tmp_path, "worker1", {"run-b": SOCKET}, "02000000")
    (d2 / "worker-zz-03000000-99.out").write_text("[raytrain] marker=run-a0 rank=0/1\n")  # a prefix lookalike
    a = collect_local_logs([d1, d2, tmp_path / "absent" / "logs"], "run-a")
    assert sorted(Path(k).name for k in a) == sorted(
        [f"worker-run-730-01000000-730.{s}" for s in ("out", "err")]
        + [f"worker-run-731-01000000-731.{s}" for s in ("out", "err")]
    )
    assert all(k.startswith(str(d1)) for k in a)
    assert nccl.audit(a, expect="p2p").ok
    b = collect_local_logs([d1, d2], "run-b")
    assert len(b) == 4 and all(k.startswith(str(d2)) for k in b)
    assert nccl.audit(b, expect="p2p").verdict == "degraded"
    # without the marker filter the runs mix: two communicators, and the fallback taints the healthy run
    both = collect_local_logs([d1, d2], "run-a") | collect_local_logs([d1, d2], "run-b")
    mixed = nccl.audit(both, expect="p2p")
    assert not mixed.ok and len(mixed.matrix) == 2
    assert any(f.code == "mixed-runs" for f in mixed.findings)
    assert nccl.audit(both, expect="p2p", marker="run-a").ok
    assert collect_local_logs([d1, d2], "run-c") == {}


def test_two_runs_in_one_worker_file_are_sliced(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    a = "\n".join(ln for ln in NVLINK.splitlines() if ln.startswith("vm:730:"))
    b = "\n".join(ln for ln in SOCKET.splitlines() if ln.startswith("vm:1279:"))
    (logs / "worker-x-01000000-1.out").write_text(
        f"[raytrain] marker=r1 rank=0/2\n{a}\n[raytrain] marker=r2 rank=0/2\n{b}\n"
    )
    got = collect_local_logs([logs], "r1")
    (text,) = got.values()
    assert "vm:730:" in text and "vm:1279:" not in text
    (text2,) = collect_local_logs([logs], "r2").values()
    assert "vm:1279:" in text2 and "vm:730:" not in text2


def test_collect_local_logs_bad_input(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(NotADirectoryError, match="session_latest/logs"):
        collect_local_logs([f], "m")
    for bad in ("", "two words", None):
        with pytest.raises(ValueError, match="marker="):
            collect_local_logs([tmp_path], bad)


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


def test_markers_link_processes_to_ray_nodes(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    for pid, node in (("730", "aaaa1111"), ("731", "bbbb2222")):
        body = "\n".join(ln for ln in NVLINK.splitlines() if ln.startswith(f"vm:{pid}:"))
        (logs / f"worker-{pid}-01-{pid}.out").write_text(
            f"[raytrain] marker=m1 rank={int(pid) - 730}/2 node={node} host=vm pid={pid}\n{body}\n"
        )
    got = collect_local_logs([logs], "m1")
    res = nccl.audit(got, expect="p2p")
    assert res.ok
    assert {p.key: p.marker["node"] for p in res.processes} == {"vm:730": "aaaa1111", "vm:731": "bbbb2222"}
    assert any(f.code == "ray-nodes-share-host" for f in res.findings)
    none = nccl.audit(got, expect="none", marker="other")
    assert not none.ok and none.findings[0].code == "no-run"
