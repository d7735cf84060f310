"""Faults during training, on the session's real local Ray cluster: a training worker killed with SIGKILL (Ray Train
restarts the worker group from the latest checkpoint; no step is lost and 06 says so), and the submitting process
(the notebook kernel) killed while following (the job goes on; submit again follows it, no second job).

Steps are made a little slower (longer sequences) so that there is a window to act in; nothing waits on a clock
except for a line to appear in the job's log."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from raytrain_helpers.clients import rayjobs
from raytrain_helpers.core import config
from raytrain_helpers.core.paths import run_dir
from raytrain_helpers.steps import train, verify
from tests.conftest import REPO, TEST_LOCAL

pytestmark = pytest.mark.integration

#: Slow enough steps on 2 cores (about a second each) for the test to act between checkpoints.
SLOW = dict(seq_len=512, batch_size=4, checkpoint_every=2, gpus_per_worker_node=0, eval_every=0, export=False)
_MARKER = r"\[raytrain\] marker=\S+ rank=(\d+)/\d+ .*?pid=(\d+)"


def _wait_for_log(client, sid: str, predicate, what: str, limit_s: float = 240):
    """The job's log once ``predicate(log)`` is true (a failure if the job ends first, or after ``limit_s``)."""
    t0 = time.time()
    while True:
        logs = client.get_job_logs(sid)
        found = predicate(logs)
        if found:
            return found
        status = rayjobs.status_of(client, sid)
        assert status not in rayjobs.TERMINAL, f"{sid} ended ({status}) before {what}:\n{logs[-3000:]}"
        assert time.time() - t0 < limit_s, f"no {what} in the log of {sid} after {limit_s} s"
        time.sleep(0.5)


def _client(settings):
    from raytrain_helpers.targets import local

    return rayjobs.client(local.status(settings).dashboard_url)


def test_a_killed_training_worker_is_replaced_and_no_step_is_lost(local_settings, local_cluster, capsys):
    import re

    s = config.with_overrides(local_settings, run_name="fault-worker", steps=8, max_failures=1, **SLOW)
    job = train.submit(s, follow=False, quiet=True)
    client = _client(s)

    def rank1_after_a_checkpoint(logs):
        # Ray Train registers a checkpoint once its controller has collected every rank's report; a step after
        # the checkpoint (and a few seconds) makes sure the one at step 2 is the run's latest when the kill lands
        pids = {int(r): int(p) for r, p in re.findall(_MARKER, logs)}
        return pids.get(1) if "[train] step 3/8" in logs else None

    pid = _wait_for_log(client, job.submission_id, rank1_after_a_checkpoint, "rank 1's pid and a checkpoint")
    time.sleep(3)
    os.kill(pid, signal.SIGKILL)  # a worker of the job this test submitted

    run = train.submit(s)  # attaches to the running job and follows it to its end
    out = capsys.readouterr().out
    assert run.attached and run.submission_id == job.submission_id
    assert run.status == "SUCCEEDED" and run.ok, run.logs[-3000:]
    attempts = run.attempts
    assert len(attempts) == 2 and attempts[1]["resumed_from"] in (2, 4, 6), attempts
    steps = {st["step"] for st in run.steps}
    assert steps == set(range(1, 9)) and run.metrics["step"] == 8
    assert out.count("[train] resumed from checkpoint at step") == 1

    v = verify.run(s)
    row = next(c for c in v.criteria.items if c.name == "every step trained, failures recovered")
    k = attempts[1]["resumed_from"]
    assert row.status == "PASS" and row.evidence == f"resumed after 1 failure from step {k}; steps 1-8 of 8 trained"
    assert v.ok, v.criteria.to_json()


KERNEL = """
import json, sys
from raytrain_helpers import load
from raytrain_helpers.steps import train
s = load({env!r}, environ={{}}, **json.loads(sys.argv[1]))
train.submit(s)
"""


def test_a_killed_kernel_leaves_the_job_running_and_submit_follows_it(local_settings, local_cluster, capsys):
    params = dict(TEST_LOCAL, run_name="fault-kernel", steps=6, **SLOW)
    s = config.with_overrides(local_settings, **{k: v for k, v in params.items() if k not in TEST_LOCAL})
    kernel = subprocess.Popen(
        [sys.executable, "-c", KERNEL.format(env=str(REPO / "env.yaml")), json.dumps(params)],
        cwd=REPO,
        env=dict(os.environ, PYTHONPATH=str(REPO), PYTHONUNBUFFERED="1"),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        sid = None
        for line in kernel.stdout:
            if line.startswith("submitted "):
                sid = line.split()[1]
            if sid and line.startswith("[train] step 1/"):
                break
        assert sid, "the kernel submitted nothing"
        kernel.kill()  # the process this test started, mid-follow
        kernel.wait(30)
    finally:
        if kernel.poll() is None:
            kernel.kill()
    client = _client(s)
    assert rayjobs.status_of(client, sid) in ("PENDING", "RUNNING"), "the job must outlive the kernel"
    log = (run_dir(s, "fault-kernel") / "job.log").read_text()
    assert "[train] step 1/6" in log, "the log received so far was saved as it arrived"

    run = train.submit(s)
    assert f"a job of run 'fault-kernel' is already running: following {sid}" in capsys.readouterr().out
    assert run.submission_id == sid and run.attached and run.status == "SUCCEEDED"
    assert run.config.get("steps") == 6, "the attached job's config is read back from its staged folder"
    ours = [j for j in client.list_jobs() if (j.metadata or {}).get(rayjobs.RUN_KEY) == "fault-kernel"]
    assert [j.submission_id for j in ours] == [sid], "no second job"
