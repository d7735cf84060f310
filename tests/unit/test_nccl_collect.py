"""Collecting one run's worker logs (local raylet dirs, pods through an injected exec) and the audit CLI."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from raytrain_helpers import cli, nccl

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "nccl"
NVLINK = (FIX / "h200x2-fsdp2-p2p-nvlink.log").read_text()
SOCKET = (FIX / "h200x2-fsdp2-socket-fallback.log").read_text()


def _split(text: str) -> dict[str, str]:
    """A log's lines per NCCL process (host:pid), other lines to every process: one worker-*.out per process."""
    per: dict[str, list[str]] = {}
    for ln in text.splitlines():
        head = ln.split(" ", 1)[0]
        parts = head.split(":")
        if len(parts) == 3 and parts[1].isdigit() and parts[2].isdigit():
            per.setdefault(parts[1], []).append(ln)
    return {pid: "\n".join(lines) + "\n" for pid, lines in per.items()}


def _session(tmp: Path, node: str, runs: dict[str, str], job: str) -> Path:
    """Write a raylet's session_latest/logs with one worker-*.out (+ .err) per NCCL process of each run."""
    logs = tmp / node / "session_latest" / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    (logs / "raylet.out").write_text("raylet started\n")
    (logs / "python-core-worker-abc.log").write_text("[raytrain] marker=ignored-core-log\n")
    for marker, text in runs.items():
        for pid, body in _split(text).items():
            stem = f"worker-{marker[:4]}{pid}-{job}-{pid}"
            head = f":job_id:{job}\n:actor_name:RayTrainWorker\n"
            (logs / f"{stem}.out").write_text(head + f"[raytrain] marker={marker} rank=0/2 node=n{node} "
                                              f"host=vm pid={pid}\n" + body)
            (logs / f"{stem}.err").write_text(head + "UserWarning: something harmless\n")
    return logs


def test_collect_local_logs_keeps_one_run(tmp_path):
    d1 = _session(tmp_path, "head", {"run-a": NVLINK}, "01000000")
    d2 = _session(tmp_path, "worker1", {"run-b": SOCKET}, "02000000")
    (d2 / "worker-zz-03000000-99.out").write_text("[raytrain] marker=run-a0 rank=0/1\n")  # a prefix lookalike
    a = nccl.collect_local_logs([d1, d2, tmp_path / "absent" / "logs"], "run-a")
    assert sorted(Path(k).name for k in a) == sorted(
        [f"worker-run-730-01000000-730.{s}" for s in ("out", "err")]
        + [f"worker-run-731-01000000-731.{s}" for s in ("out", "err")])
    assert all(k.startswith(str(d1)) for k in a)
    assert nccl.audit(a, expect="p2p").ok
    b = nccl.collect_local_logs([d1, d2], "run-b")
    assert len(b) == 4 and all(k.startswith(str(d2)) for k in b)
    assert nccl.audit(b, expect="p2p").verdict == "degraded"
    # without the marker filter the runs mix: two communicators, and the fallback taints the healthy run
    both = nccl.collect_local_logs([d1, d2], "run-a") | nccl.collect_local_logs([d1, d2], "run-b")
    mixed = nccl.audit(both, expect="p2p")
    assert not mixed.ok and len(mixed.matrix) == 2
    assert any(f.code == "mixed-runs" for f in mixed.findings)
    assert nccl.audit(both, expect="p2p", marker="run-a").ok
    assert nccl.collect_local_logs([d1, d2], "run-c") == {}


def test_two_runs_in_one_worker_file_are_sliced(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    a = "\n".join(ln for ln in NVLINK.splitlines() if ln.startswith("vm:730:"))
    b = "\n".join(ln for ln in SOCKET.splitlines() if ln.startswith("vm:1279:"))
    (logs / "worker-x-01000000-1.out").write_text(
        f"[raytrain] marker=r1 rank=0/2\n{a}\n[raytrain] marker=r2 rank=0/2\n{b}\n")
    got = nccl.collect_local_logs([logs], "r1")
    (text,) = got.values()
    assert "vm:730:" in text and "vm:1279:" not in text
    (text2,) = nccl.collect_local_logs([logs], "r2").values()
    assert "vm:1279:" in text2 and "vm:730:" not in text2


def test_collect_local_logs_bad_input(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(NotADirectoryError, match="session_latest/logs"):
        nccl.collect_local_logs([f], "m")
    for bad in ("", "two words", None):
        with pytest.raises(ValueError, match="marker="):
            nccl.collect_local_logs([tmp_path], bad)


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
    for pod, runs in (("worker-a", {"run-a": NVLINK, "run-b": SOCKET}), ("worker-b", {"run-b": SOCKET}),
                      ("head", {})):
        logs = tmp_path / pod / "session_latest" / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        for marker, text in runs.items():
            for pid, body in _split(text).items():
                stem = f"worker-{pid}-{marker}"
                (logs / f"{stem}.out").write_text(f"[raytrain] marker={marker} rank=0/2 pid={pid}\n{body}")
                (logs / f"{stem}.err").write_text("stderr of the worker\n")
    calls: list = []
    got = nccl.collect_pod_logs(_fake_exec(tmp_path, calls), ["worker-a", "worker-b", "head"], "run-a")
    assert sorted(got) == sorted(f"worker-a:/tmp/ray/session_latest/logs/worker-{pid}-run-a.{s}"
                                 for pid in ("730", "731") for s in ("out", "err"))
    assert nccl.audit(got, expect="p2p").ok
    assert [c for c in calls if c[1] == "sh"] == [("worker-a", "sh"), ("worker-b", "sh"), ("head", "sh")]
    got_b = nccl.collect_pod_logs(_fake_exec(tmp_path, []), ["worker-a", "worker-b"], "run-b")
    assert len(got_b) == 8
    assert nccl.audit(got_b, expect="socket").ok
    with pytest.raises(RuntimeError, match="pod dead-pod: listing"):
        nccl.collect_pod_logs(_fake_exec(tmp_path, []), ["dead-pod"], "run-a")
    assert nccl.collect_pod_logs(lambda p, c: "", ["x"], "run-a") == {}


# ---------------------------------------------------------------------------------------------
# CLI
# ---------------------------------------------------------------------------------------------

def test_cli_exit_codes_and_json(tmp_path, capsys):
    nv, so = tmp_path / "nv.log", tmp_path / "so.log"
    nv.write_text(NVLINK)
    so.write_text(SOCKET)
    assert cli.main(["audit", str(nv), "--expect", "p2p"]) == 0
    out = capsys.readouterr().out
    assert "NCCL transport audit: PASS (pass)" in out and "P2P/CUMEM" in out
    assert cli.main(["audit", str(so), "--expect", "p2p"]) == 1
    out = capsys.readouterr().out
    assert "FAIL (degraded)" in out and "via NET/Socket/0" in out
    assert cli.main(["audit", str(so), "--expect", "socket", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["ok"] is True and d["verdict"] == "pass" and d["communicators"][0]["nccl_nnodes"] == [2]
    assert cli.main(["audit", str(tmp_path / "missing.log")]) == 2
    assert "cannot read" in capsys.readouterr().err
    assert cli.main(["audit", str(nv), str(so), "--expect", "p2p", "--json"]) == 1     # two runs in one audit
    capsys.readouterr()
    empty = tmp_path / "gloo.log"
    empty.write_text("[train] step 1\n")
    assert cli.main(["audit", str(empty), "--expect", "none"]) == 0
    assert "n/a: NCCL not used (gloo)" in capsys.readouterr().out
    assert cli.main(["audit", str(empty), "--expect", "p2p"]) == 1


def test_cli_directory_marker_and_default_expect(tmp_path, capsys):
    logs = _session(tmp_path, "node", {"run-a": NVLINK, "run-b": SOCKET}, "01000000")
    assert cli.main(["audit", str(logs), "--marker", "run-a", "--expect", "p2p"]) == 0
    assert cli.main(["audit", str(logs), "--marker", "run-b", "--expect", "p2p"]) == 1
    assert cli.main(["audit", str(logs), "--marker", "nope"]) == 2
    assert "no log holds" in capsys.readouterr().err
    assert cli.main(["audit", str(tmp_path), "--expect", "p2p"]) == 2          # a dir without worker files
    # no --expect: the nccl.expect setting (auto), overridable with -p
    assert cli.main(["audit", str(logs), "--marker", "run-b"]) == 1
    assert cli.main(["audit", str(logs), "--marker", "run-b", "-p", "nccl.expect", "socket"]) == 0


def test_markers_link_processes_to_ray_nodes(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    for pid, node in (("730", "aaaa1111"), ("731", "bbbb2222")):
        body = "\n".join(ln for ln in NVLINK.splitlines() if ln.startswith(f"vm:{pid}:"))
        (logs / f"worker-{pid}-01-{pid}.out").write_text(
            f"[raytrain] marker=m1 rank={int(pid) - 730}/2 node={node} host=vm pid={pid}\n{body}\n")
    got = nccl.collect_local_logs([logs], "m1")
    res = nccl.audit(got, expect="p2p")
    assert res.ok
    assert {p.key: p.marker["node"] for p in res.processes} == {"vm:730": "aaaa1111", "vm:731": "bbbb2222"}
    assert any(f.code == "ray-nodes-share-host" for f in res.findings)
    none = nccl.audit(got, expect="none", marker="other")
    assert not none.ok and none.findings[0].code == "no-run"
