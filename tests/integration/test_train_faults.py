"""Faults during training, on the session's real local Ray cluster, all in one run of 40 steps:

1. a training worker killed with SIGKILL (Ray Train restarts the worker group from the latest checkpoint), and the
   submitting process (the notebook kernel) killed while following: the job goes on; submitting again follows it,
   no second job;
2. then, while that restarted group trains, a worker raylet of the cluster killed (SIGKILL): the job fails (its one
   allowed failure is spent) and 06 names the dead node; `up` (02, which `raytrain-tutorial run` always re-runs)
   starts that node again with the cluster's auth token, so the tests after this one get the cluster whole;
3. the same run submitted again resumes from its latest checkpoint and finishes: every step of the 40 was trained
   by one of the two jobs, with no gap across the restart or the failed job;
4. the finished run submitted once more: no job is submitted, the finished one is the result.

Steps are made a little slower (longer sequences) and the run longer, so that there is a window to act in."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

import pytest

from raytrain_helpers.clients import rayjobs
from raytrain_helpers.core import config
from raytrain_helpers.core.paths import run_dir
from raytrain_helpers.steps import train, verify
from tests.conftest import REPO, TEST_LOCAL

pytestmark = pytest.mark.integration

#: Steps of a few tenths of a second on 2 cores, a checkpoint every 4: the test kills a worker after step 7 (the
#: checkpoint at 4 registered) with dozens of steps still to go, however fast the machine.
SLOW = dict(seq_len=512, batch_size=4, checkpoint_every=4, gpus_per_worker_node=0, eval_every=0, export=False)
STEPS = 40
_MARKER = r"\[raytrain\] marker=\S+ rank=(\d+)/\d+ .*?pid=(\d+)"


def _client(settings):
    from raytrain_helpers.targets import local

    return rayjobs.client(local.status(settings).dashboard_url)


KERNEL = """
import json, sys
from raytrain_helpers import load
from raytrain_helpers.steps import train
s = load({env!r}, environ={{}}, **json.loads(sys.argv[1]))
train.submit(s)
"""


def _kernel_following_to_step(params: dict, step: str) -> tuple[subprocess.Popen, str]:
    """A stand-in for the notebook kernel: submits the run and follows it; returned once it printed ``step``."""
    kernel = subprocess.Popen(
        [sys.executable, "-c", KERNEL.format(env=str(REPO / "env.yaml")), json.dumps(params)],
        cwd=REPO,
        env=dict(os.environ, PYTHONPATH=str(REPO), PYTHONUNBUFFERED="1"),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    sid = None
    for line in kernel.stdout:
        if line.startswith("submitted "):
            sid = line.split()[1]
        if sid and line.startswith(step):
            return kernel, sid
    kernel.kill()
    raise AssertionError(f"the kernel ended before printing {step!r} (submitted: {sid})")


def _follow_in_background(s) -> tuple[threading.Thread, dict]:
    """``train.submit`` (the notebook's call) following the run's active job, in a thread: its JobRun lands in the
    returned dict's ``run`` once the job ended."""
    box: dict = {}
    th = threading.Thread(target=lambda: box.update(run=train.submit(s)), daemon=True)
    th.start()
    return th, box


def _wait_for(client, sid: str, pattern: str, after: str = "", timeout_s: float = 240) -> re.Match:
    """Poll the job's log until ``pattern`` appears after the first occurrence of ``after``."""
    deadline = time.monotonic() + timeout_s
    while True:
        logs = client.get_job_logs(sid)
        cut = logs.find(after) if after else 0
        m = re.search(pattern, logs[cut:]) if cut >= 0 else None
        if m:
            return m
        assert time.monotonic() < deadline, f"no {pattern!r} after {after!r} in time: {logs[-3000:]}"
        assert rayjobs.status_of(client, sid) in ("PENDING", "RUNNING"), logs[-3000:]
        time.sleep(0.5)


def _kill_a_worker_and_the_kernel(params: dict, client) -> str:
    """Phase 1: the kernel stand-in submits and follows; at step 7 a training worker and the kernel are killed
    together. Returns the job's submission id."""
    kernel, sid = _kernel_following_to_step(params, f"[train] step 7/{STEPS}")
    try:
        # Ray Train registers a checkpoint once its controller has collected every rank's report (it polls every
        # 0.5 s): three steps after the one at step 4, it is the run's latest when the kill lands
        pids = {int(r): int(p) for r, p in re.findall(_MARKER, client.get_job_logs(sid))}
        os.kill(pids[1], signal.SIGKILL)  # a worker of the job this test submitted
        kernel.kill()  # the process this test started, mid-follow
        kernel.wait(30)
    finally:
        if kernel.poll() is None:
            kernel.kill()
    return sid


def _kill_worker_1(s) -> str:
    """SIGKILL the raylet the session's cluster started for worker-1; returns that node's id."""
    from raytrain_helpers.targets.local import procs, raylets

    state = json.loads(raylets.state_path(s).read_text())
    raylet = next(r for r in state["processes"] if r["node"] == "worker-1" and procs.program(r["pid"]) == "raylet")
    os.kill(raylet["pid"], signal.SIGKILL)
    return next(nid for nid, name in state["node_names"].items() if name == "worker-1")


def test_a_killed_worker_kernel_and_node_lose_no_step(local_settings, local_cluster, capsys):
    from raytrain_helpers.targets import local

    params = dict(TEST_LOCAL, run_name="fault", steps=STEPS, max_failures=1, **SLOW)
    s = config.with_overrides(local_settings, **{k: v for k, v in params.items() if k not in TEST_LOCAL})
    client = _client(s)

    sid = _kill_a_worker_and_the_kernel(params, client)
    assert rayjobs.status_of(client, sid) in ("PENDING", "RUNNING"), "the job must outlive the kernel"
    saved = (run_dir(s, "fault") / "job.log").read_text()
    assert f"[train] step 1/{STEPS}" in saved, "the log so far was saved as it came"

    # 2. submitting again follows the same job; once the restarted group trained past a new checkpoint, a node dies
    follower, box = _follow_in_background(s)
    k1 = int(_wait_for(client, sid, r"resumed from checkpoint at step (\d+)").group(1))
    _wait_for(client, sid, rf"\[train\] step {k1 + 8}/{STEPS}", after="resumed from checkpoint at step")
    dead_id = _kill_worker_1(s)
    try:
        follower.join(300)
        run = box.get("run")
        assert run is not None, "the follower did not return"
        assert f"a job of run 'fault' is already running: following {sid}" in capsys.readouterr().out
        assert run.attached and run.submission_id == sid and run.status == "FAILED", run.logs[-3000:]
        assert run.job_config.steps == STEPS, "the attached job's config is read back from its staged folder"
        ours = [j for j in client.list_jobs() if (j.metadata or {}).get(rayjobs.RUN_KEY) == "fault"]
        assert [j.submission_id for j in ours] == [sid], "no second job"
        attempts = run.attempts
        assert len(attempts) == 2 and attempts[1]["resumed_from"] == k1 and k1 in range(4, STEPS, 4), attempts
        # the restarted group trained on from the step after its checkpoint: nothing skipped, nothing missing
        assert attempts[1]["steps"][:2] == [k1 + 1, k1 + 2], attempts
        trained = sorted({st for a in attempts for st in a["steps"]})
        assert trained == list(range(1, trained[-1] + 1)) and trained[-1] >= k1 + 8, "a step skipped or missing"
        rows = {c.name: c for c in verify.run(s).criteria.items}
        assert any(dead_id[:12] in c.evidence and "died" in c.evidence for c in rows.values()), rows
        row = rows["every step trained, failures recovered"]
        assert row.status == "FAIL" and row.evidence.startswith(f"resumed after 1 failure from step {k1}; "), row
    finally:
        again = local.up(s)  # whatever happened above, the tests after this one get the cluster whole
    assert again.action == "repaired" and "worker-1" in again.message
    assert sorted(w["name"] for w in again.workers if w["alive"]) == ["worker-0", "worker-1"]

    # 3. the same run again: a new job, from the latest checkpoint, to the end
    resumed = train.submit(s, quiet=True)
    assert resumed.ok and resumed.submission_id != sid, resumed.logs[-3000:]
    k2 = resumed.metrics["resumed_from"]
    assert k2 in range(k1 + 4, trained[-1] + 1, 4), (k1, k2, trained[-1])
    assert re.search(rf"resumed from checkpoint at step {k2}\b", resumed.logs)
    assert resumed.metrics["step"] == STEPS and len(resumed.metrics["losses"]) == STEPS - k2
    v = verify.run(s, check_model=False)  # a short run: the task is not learned (completions tested elsewhere)
    row = next(c for c in v.criteria.items if c.name == "every step trained, failures recovered")
    assert (row.status, row.evidence) == (
        "PASS",
        f"no worker failure, resumed from step {k2} (an earlier job); steps {k2 + 1}-{STEPS} of {STEPS} trained",
    )
    assert v.ok, v.criteria.to_json()

    # 4. the finished run submitted again (the tool's own advice after an interrupted `run`): nothing is submitted;
    # the finished job is the result, and 06 still verifies the job that trained
    capsys.readouterr()
    again = train.submit(s)
    said = capsys.readouterr().out
    assert again.already_complete and again.submission_id == resumed.submission_id, said
    assert f"run 'fault' is already complete: job {resumed.submission_id} trained it to step {STEPS}" in said
    ours = [j for j in client.list_jobs() if (j.metadata or {}).get(rayjobs.RUN_KEY) == "fault"]
    assert len(ours) == 2, "a job that would resume at the last step and train nothing was submitted"
    assert train.load_last(s).submission_id == resumed.submission_id
