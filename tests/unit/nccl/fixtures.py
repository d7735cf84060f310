"""The NCCL log fixtures (tests/fixtures/nccl), the check every audit test applies to its findings, and
writers of Ray worker-log files and session directories from a log."""

from __future__ import annotations

from pathlib import Path

from raytrain_helpers.nccl import AuditResult
from raytrain_helpers.nccl.lines import ANSI

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "nccl"
#: A healthy single-node 2 x H200 run: P2P over NVLink (it prints 'Using network Socket' all the same).
NVLINK = FIX / "h200x2-fsdp2-p2p-nvlink.log"
#: The same host with NCCL_P2P_DISABLE / NCCL_SHM_DISABLE: every pair rides NET/Socket.
SOCKET = FIX / "h200x2-fsdp2-socket-fallback.log"


def fixture(name: str) -> str:
    return (FIX / name).read_text()


def check_evidence(res: AuditResult, sources: dict[str, str]) -> None:
    """Every quoted line is exactly the line at that place in the input (colour codes removed)."""
    for f in res.findings:
        for e in f.evidence:
            lines = sources[e.source].splitlines()
            assert ANSI.sub("", lines[e.lineno - 1]).rstrip() == e.text, (f.code, e)


def split_by_process(text: str) -> dict[str, str]:
    """A log's lines per NCCL process (host:pid), other lines to every process: one worker-*.out per process."""
    per: dict[str, list[str]] = {}
    for ln in text.splitlines():
        head = ln.split(" ", 1)[0]
        parts = head.split(":")
        if len(parts) == 3 and parts[1].isdigit() and parts[2].isdigit():
            per.setdefault(parts[1], []).append(ln)
    return {pid: "\n".join(lines) + "\n" for pid, lines in per.items()}


def write_session(tmp: Path, node: str, runs: dict[str, str], job: str) -> Path:
    """Write a raylet's session_latest/logs with one worker-*.out (+ .err) per NCCL process of each run."""
    logs = tmp / node / "session_latest" / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    (logs / "raylet.out").write_text("raylet started\n")
    (logs / "python-core-worker-abc.log").write_text("[raytrain] marker=ignored-core-log\n")
    for marker, text in runs.items():
        for pid, body in split_by_process(text).items():
            stem = f"worker-{marker[:4]}{pid}-{job}-{pid}"
            head = f":job_id:{job}\n:actor_name:RayTrainWorker\n"
            (logs / f"{stem}.out").write_text(
                head + f"[raytrain] marker={marker} rank=0/2 node=n{node} host=vm pid={pid}\n" + body
            )
            (logs / f"{stem}.err").write_text(head + "UserWarning: something harmless\n")
    return logs
