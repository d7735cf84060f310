"""The Ray Jobs API, as the tutorial uses it: authenticated client, submit-or-attach, follow, parse the result.

The job's driver prints ``RAYTRAIN_RESULT {json}`` and rank 0 prints ``RAYTRAIN_SUMMARY {json}``; every step
prints ``[train] step k/N loss=...``. :class:`JobRun` is one job as the notebooks see it, parsed from its logs.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.constants import RESULT_PREFIX, SUMMARY_PREFIX
from ..core.tables import table

STEP_RE = re.compile(r"\[train\] step (\d+)/(\d+) loss=([-\d.eEnaif+]+) step_time=([\d.]+)s tokens/s=(\d+)")
TERMINAL = {"SUCCEEDED", "FAILED", "STOPPED"}
#: The job metadata key that ties a submission to its run (a re-run attaches to a running job of the same run).
RUN_KEY = "raytrain_run"


def auth_headers() -> dict[str, str]:
    """The bearer token of a cluster started with token authentication (RAY_AUTH_TOKEN or its file), or none."""
    token = os.environ.get("RAY_AUTH_TOKEN")
    if not token and os.environ.get("RAY_AUTH_TOKEN_PATH"):
        try:
            token = Path(os.environ["RAY_AUTH_TOKEN_PATH"]).read_text().strip()
        except OSError:
            token = None
    return {"Authorization": f"Bearer {token}"} if token else {}


def client(url: str):
    """A ``JobSubmissionClient`` for the Jobs API at ``url``, with the cluster's token when it has one."""
    from ray.job_submission import JobSubmissionClient

    return JobSubmissionClient(url, headers=auth_headers() or None)


def find_active(jobs_client, run_name: str) -> str | None:
    """A job of this run that is still pending or running (so a re-run attaches to it)."""
    for j in jobs_client.list_jobs():
        md = j.metadata or {}
        if md.get(RUN_KEY) == run_name and str(j.status) in ("PENDING", "RUNNING"):
            return j.submission_id
    return None


def status_of(jobs_client, submission_id: str) -> str:
    """``SUCCEEDED``, ``RUNNING``... (without the enum's class name)."""
    return str(jobs_client.get_job_status(submission_id)).split(".")[-1]


@dataclass
class JobRun:
    """One training job: its status, logs, the driver's result and the steps parsed from the logs."""

    submission_id: str
    status: str
    logs: str = ""
    result: dict[str, Any] = field(default_factory=dict)
    steps: list[dict[str, float]] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)
    attached: bool = False
    wall_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status == "SUCCEEDED" and bool(self.result.get("ok"))

    @property
    def metrics(self) -> dict[str, Any]:
        m = self.result.get("metrics", {}) or {}
        if "ranks" not in m:  # no final checkpoint: rank 0 printed the summary into the logs
            m = dict(m, **parse_summary(self.logs))
        return m

    @property
    def ranks(self) -> list[dict[str, Any]]:
        return self.metrics.get("ranks", []) or []

    def show(self) -> None:
        m = self.metrics
        print(f"job {self.submission_id}: {self.status}" + (" (attached to a running job)" if self.attached else ""))
        if self.result.get("error"):
            print(f"  error: {self.result['error']}")
        if m:
            start = m.get("start_step", 0)
            print(
                f"  steps {start}->{m.get('step')} of {m.get('steps')}, world size {m.get('world_size')}, "
                f"final loss {m.get('loss', float('nan')):.4f}"
                + (f", resumed from step {m['resumed_from']}" if m.get("resumed_from") else "")
            )
        if self.ranks:
            table(
                [
                    (
                        r["rank"],
                        r["node_id"][:12],
                        r["device"],
                        f"{r['tokens_per_s']:.1f}",
                        f"{r['peak_mem_bytes'] / 2**20:.0f} MiB",
                    )
                    for r in self.ranks
                ],
                ["rank", "node", "device", "tokens/s", "peak memory"],
            )

    def to_json(self) -> dict[str, Any]:
        return dict(
            submission_id=self.submission_id,
            status=self.status,
            result=self.result,
            steps=self.steps,
            config=self.config,
            attached=self.attached,
            wall_s=self.wall_s,
        )

    @classmethod
    def from_json(cls, d: dict[str, Any], logs: str = "") -> JobRun:
        return cls(
            d["submission_id"],
            d["status"],
            logs=logs,
            result=d.get("result", {}),
            steps=d.get("steps", []),
            config=d.get("config", {}),
            attached=d.get("attached", False),
            wall_s=d.get("wall_s", 0.0),
        )


def _last_json(logs: str, prefix: str) -> dict[str, Any]:
    for line in reversed(logs.splitlines()):
        i = line.find(prefix)
        if i >= 0:
            try:
                return json.loads(line[i + len(prefix) :])
            except ValueError:
                continue
    return {}


def parse_result(logs: str) -> dict[str, Any]:
    """The driver's ``RAYTRAIN_RESULT`` record (the last one that parses), or {}."""
    return _last_json(logs, RESULT_PREFIX)


def parse_summary(logs: str) -> dict[str, Any]:
    """Rank 0's ``RAYTRAIN_SUMMARY`` record (the last one that parses), or {}."""
    return _last_json(logs, SUMMARY_PREFIX)


def parse_steps(logs: str) -> list[dict[str, float]]:
    """Every ``[train] step`` line: step, steps, loss, step_time_s, tokens_per_s."""
    return [
        dict(
            step=int(m.group(1)),
            steps=int(m.group(2)),
            loss=float(m.group(3)),
            step_time_s=float(m.group(4)),
            tokens_per_s=float(m.group(5)),
        )
        for m in STEP_RE.finditer(logs)
    ]


def follow(jobs_client, sid: str, *, timeout_s: float, quiet: bool, progress: bool, total: int | None) -> JobRun:
    """Stream the job's log to stdout (and a step progress bar to stderr) until it ends or ``timeout_s`` passes."""
    from tqdm import tqdm

    t0 = time.time()
    bar = (
        tqdm(
            total=total,
            desc="train steps",
            unit="step",
            file=sys.stderr,
            disable=not progress,
            dynamic_ncols=False,
            ncols=90,
        )
        if progress
        else None
    )
    seen, last_step, logs, status = 0, 0, "", "PENDING"
    try:
        while True:
            status = status_of(jobs_client, sid)
            logs = jobs_client.get_job_logs(sid)
            new, seen = logs[seen:], len(logs)
            if new and not quiet:
                sys.stdout.write(new if new.endswith("\n") else new + "\n")
                sys.stdout.flush()
            if bar is not None:
                last_step = _advance(bar, parse_steps(new), last_step)
            if status in TERMINAL:
                break
            if time.time() - t0 > timeout_s:
                jobs_client.stop_job(sid)
                status = "STOPPED"
                break
            time.sleep(1.0)
    finally:
        if bar is not None:
            bar.close()
    return JobRun(sid, status, logs=logs, result=parse_result(logs), steps=parse_steps(logs), wall_s=time.time() - t0)


def _advance(bar, steps: list[dict[str, float]], last_step: int) -> int:
    for s in steps:
        if bar.total is None:
            bar.total = s["steps"]
        bar.update(max(0, s["step"] - max(last_step, bar.n)))
        last_step = s["step"]
        bar.set_postfix(loss=f"{s['loss']:.3f}")
    return last_step
