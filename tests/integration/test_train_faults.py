"""Faults during training, on the session's real local Ray cluster, both in one job: a training worker killed with
SIGKILL (Ray Train restarts the worker group from the latest checkpoint; no step is lost and 06 says so), and the
submitting process (the notebook kernel) killed while following (the job goes on; submit again follows it, no
second job).

Steps are made a little slower (longer sequences) and the run longer, so that there is a window to act in."""

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


def test_a_killed_worker_and_a_killed_kernel_lose_no_step(local_settings, local_cluster, capsys):
    import re

    params = dict(TEST_LOCAL, run_name="fault", steps=STEPS, max_failures=1, **SLOW)
    s = config.with_overrides(local_settings, **{k: v for k, v in params.items() if k not in TEST_LOCAL})
    client = _client(s)
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
    assert rayjobs.status_of(client, sid) in ("PENDING", "RUNNING"), "the job must outlive the kernel"
    saved = (run_dir(s, "fault") / "job.log").read_text()
    assert f"[train] step 1/{STEPS}" in saved, "the log so far was saved as it came"

    run = train.submit(s)  # attaches to the running job and follows it to its end
    out = capsys.readouterr().out
    assert f"a job of run 'fault' is already running: following {sid}" in out
    assert run.attached and run.submission_id == sid
    assert run.status == "SUCCEEDED" and run.ok, run.logs[-3000:]
    assert run.config.get("steps") == STEPS, "the attached job's config is read back from its staged folder"
    ours = [j for j in client.list_jobs() if (j.metadata or {}).get(rayjobs.RUN_KEY) == "fault"]
    assert [j.submission_id for j in ours] == [sid], "no second job"
    attempts = run.attempts
    assert len(attempts) == 2 and attempts[1]["resumed_from"] in range(4, STEPS, 4), attempts
    steps = {st["step"] for st in run.steps}
    assert steps == set(range(1, STEPS + 1)) and run.metrics["step"] == STEPS
    assert out.count("[train] resumed from checkpoint at step") == 1

    v = verify.run(s)
    row = next(c for c in v.criteria.items if c.name == "every step trained, failures recovered")
    k = attempts[1]["resumed_from"]
    assert row.status == "PASS"
    assert row.evidence == f"resumed after 1 failure from step {k}; steps 1-{STEPS} of {STEPS} trained"
    assert v.ok, v.criteria.to_json()


def test_a_killed_worker_node_is_named_then_started_again_and_the_run_resumes(local_settings, local_cluster):
    """A worker raylet of the session's cluster killed mid-run (SIGKILL): the job fails and 06 names the dead node;
    `up` (02, which `raytrain-tutorial run` always re-runs) starts that node again, with the cluster's auth token,
    and the cluster is whole for the tests after this one; the same run then resumes from its latest checkpoint and
    finishes."""
    import re

    from raytrain_helpers.targets import local
    from raytrain_helpers.targets.local import procs, raylets

    params = dict(SLOW, run_name="node-fault", steps=STEPS)
    s = config.with_overrides(local_settings, **params)
    client = _client(s)
    sid = train.submit(s, follow=False, quiet=True).submission_id
    deadline = time.monotonic() + 240
    while f"[train] step 7/{STEPS}" not in client.get_job_logs(sid):
        assert time.monotonic() < deadline and rayjobs.status_of(client, sid) in ("PENDING", "RUNNING")
        time.sleep(0.5)
    state = json.loads(raylets.state_path(s).read_text())
    raylet = next(r for r in state["processes"] if r["node"] == "worker-1" and procs.program(r["pid"]) == "raylet")
    dead_id = next(nid for nid, name in state["node_names"].items() if name == "worker-1")
    os.kill(raylet["pid"], signal.SIGKILL)  # the raylet the session's cluster started for worker-1
    try:
        run = train.submit(s, quiet=True)  # follows the job to its end
        assert run.status == "FAILED", run.logs[-3000:]
        rows = {c.name: c for c in verify.run(s).criteria.items}
        assert any(dead_id[:12] in c.evidence and "died" in c.evidence for c in rows.values()), rows
    finally:
        again = local.up(s)  # whatever happened above, the tests after this one get the cluster whole
    assert again.action == "repaired" and "worker-1" in again.message
    assert sorted((w["name"], w["alive"]) for w in again.workers if w["alive"]) == [
        ("worker-0", True),
        ("worker-1", True),
    ]
    resumed = train.submit(s, quiet=True)
    assert resumed.ok and resumed.submission_id != sid, resumed.logs[-3000:]
    k = resumed.metrics["resumed_from"]
    assert k in range(4, STEPS, 4) and re.search(rf"resumed from checkpoint at step {k}\b", resumed.logs)
    assert resumed.metrics["step"] == STEPS and len(resumed.metrics["losses"]) == STEPS - k
    assert verify.run(s).ok
