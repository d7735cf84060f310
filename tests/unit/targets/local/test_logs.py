"""Collecting one run's worker logs on the local target: the raylets' session directories, one run's lines only."""

from __future__ import annotations

from pathlib import Path

import pytest

from raytrain_helpers import nccl
from raytrain_helpers.targets.local.logs import collect_local_logs
from tests.unit.nccl import fixtures
from tests.unit.nccl.fixtures import write_session

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
