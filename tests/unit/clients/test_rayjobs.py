"""clients.rayjobs: the job's records parsed from its logs, the token header, what the learner sees of the log, and
following a job to its end with Ray's log tailing (here a scripted stand-in for the tail; the real one runs in
tests/integration/test_train_faults.py)."""

import asyncio
import logging
import re
import subprocess
import sys
from pathlib import Path

import pytest

from raytrain_helpers.clients import rayjobs
from tests.unit.steps.test_train import LOGS

JOBS = Path(__file__).resolve().parents[2] / "fixtures" / "jobs"
#: The job log of a real 2-rank CPU run (05 on the local target), as the Jobs API returns it.
REAL_LOG = (JOBS / "cpu-2ranks-committed.log").read_text()


def test_parse_steps_and_result():
    steps = rayjobs.parse_steps(LOGS)
    assert [s["step"] for s in steps] == [1, 2] and steps[1]["tokens_per_s"] == 4895
    assert steps[0]["step_time_s"] == pytest.approx(0.204) and "eval_loss" not in steps[0]
    assert rayjobs.parse_result(LOGS) == {"ok": True, "metrics": {"step": 3}}
    assert rayjobs.parse_result("no result here") == {}


def test_step_line_with_eval_loss():
    line = "[train] step 4/8 loss=6.9414 step_time=0.060s tokens/s=4241 peak_mem=582MiB eval_loss=6.9501"
    assert rayjobs.parse_step_line(line) == dict(
        step=4, steps=8, loss=6.9414, step_time_s=0.06, tokens_per_s=4241.0, eval_loss=6.9501
    )
    assert rayjobs.parse_step_line("[train] checkpoint saved at step 4") is None


def test_auth_headers_from_the_token_or_its_file(tmp_path, monkeypatch):
    for k in ("RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"):
        monkeypatch.delenv(k, raising=False)
    assert rayjobs.auth_headers() == {}
    token = tmp_path / "token"
    token.write_text("secret-from-file\n")
    monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", str(token))
    assert rayjobs.auth_headers() == {"Authorization": "Bearer secret-from-file"}
    monkeypatch.setenv("RAY_AUTH_TOKEN", "direct")
    assert rayjobs.auth_headers() == {"Authorization": "Bearer direct"}


# ------------------------------------------------------------------------------------------------------------
# What the learner sees
# ------------------------------------------------------------------------------------------------------------


def test_filter_on_a_real_log_keeps_steps_and_throughput_once():
    shown, _ = rayjobs.filter_log(REAL_LOG.splitlines())
    steps = [line for line in shown if line.startswith("[train] step ")]
    assert [int(re.match(r"\[train\] step (\d+)/8", s).group(1)) for s in steps] == list(range(1, 9))
    throughput = [line for line in shown if line.startswith("[train] throughput")]
    assert sorted(t.split()[2] for t in throughput) == ["rank=0/2", "rank=1/2"]
    assert len(shown) == len(set(shown)), "a line is shown once"
    text = "\n".join(shown)
    for noise in ("Reporting training result", "RAYTRAIN_SUMMARY", "RAYTRAIN_RESULT", "PreemptionWatcher", "\x1b["):
        assert noise not in text
    assert not any(line.startswith("(RayTrainWorker") for line in steps), "Ray's actor prefix is dropped"
    assert len(shown) <= 25, "one screen:\n" + text
    assert len(REAL_LOG.splitlines()) > 2 * len(shown)


def test_filter_keeps_errors_and_drops_noise_lines():
    lines = [
        "2026-12-01 02:47:14,780\tINFO dashboard_sdk.py:371 -- Uploading package gcs://_ray_pkg_fbe0.zip.",
        "train steps:  12%|█████                  | 1/8 [00:44<05:10, 44.41s/step]",
        "\x1b[36m(RayTrainWorker pid=7)\x1b[0m RuntimeError: CUDA out of memory",
        "[driver] FAILED: TrainingFailedError: a worker died",
        "Running entrypoint for job raytrain-x: python -m raytrain_helpers.worker.entrypoint",
    ]
    shown, _ = rayjobs.filter_log(lines)
    assert shown == ["(RayTrainWorker pid=7) RuntimeError: CUDA out of memory", lines[3]]


def test_a_restarted_worker_group_shows_its_steps_again():
    step = "[train] step 3/4 loss=6.9 step_time=0.05s tokens/s=5000 peak_mem=5MiB"
    lines = [f"(RayTrainWorker pid=11) {step}", f"(RayTrainWorker pid=11) {step}", f"(RayTrainWorker pid=21) {step}"]
    shown, recent = rayjobs.filter_log(lines)
    assert shown == [step, step]
    again, _ = rayjobs.filter_log(lines[:1], recent)
    assert again == [], "the window carries over to the next call"


@pytest.mark.parametrize("size", [1, 7, 100, 4096])
def test_log_view_over_chunks_equals_the_whole(size):
    view = rayjobs.LogView()
    shown = []
    for i in range(0, len(REAL_LOG), size):
        shown += view.feed(REAL_LOG[i : i + size])
    shown += view.feed("", final=True)
    assert shown == rayjobs.filter_log(REAL_LOG.splitlines())[0]


def test_attempts_of_a_job():
    pid = "(RayTrainWorker pid={0}) [raytrain] marker=m rank={1}/2 node=n host=vm pid={0}\n"
    logs = pid.format(11, 0) + pid.format(12, 1) + pid.format(11, 0) + LOGS.replace("pid=11", "pid=11")
    logs += pid.format(21, 0) + "(RayTrainWorker pid=21) [train] resumed from checkpoint at step 2 (/s)\n"
    attempts = rayjobs.parse_attempts(logs)
    assert [(a["pid"], a["resumed_from"], a["steps"]) for a in attempts] == [(11, None, [1, 2]), (21, 2, [])]


def test_quiet_client_logs_silences_rays_info_and_restores():
    seen = []

    class Keep(logging.Handler):
        def emit(self, record):
            seen.append(record.getMessage())

    logger = logging.getLogger(rayjobs.CLIENT_LOGGERS[0])
    before, handler = logger.level, Keep()
    logger.addHandler(handler)
    try:
        logger.setLevel(logging.INFO)
        with rayjobs.quiet_client_logs():
            logger.info("Uploading package gcs://_ray_pkg_x.zip.")
            logger.warning("a real warning")
        logger.info("after")
    finally:
        logger.removeHandler(handler)
        logger.setLevel(before)
    assert seen == ["a real warning", "after"]


# ------------------------------------------------------------------------------------------------------------
# Following a job
# ------------------------------------------------------------------------------------------------------------


class TailingJobs:
    """Ray's JobSubmissionClient as ``follow`` uses it: ``tail_job_logs`` is an async generator of chunks (each
    connection replays the log from its start, as Ray's does); the job ends when every chunk is out, or, with
    ``until_stopped``, only when ``stop_job`` is called. ``break_after``: the first connection breaks after that many
    chunks with the RuntimeError Ray raises on an abnormal close."""

    def __init__(self, log, size=50, *, until_stopped=False, break_after=None):
        self.chunks = [log[i : i + size] for i in range(0, len(log), size)]
        self.log, self.until_stopped, self.break_after = log, until_stopped, break_after
        self.stopped, self.connections, self.log_fetches = [], 0, 0

    @property
    def status(self):
        if self.stopped:
            return "STOPPED"
        return "RUNNING" if self.until_stopped or self.connections < 2 and self.break_after else "SUCCEEDED"

    async def tail_job_logs(self, sid):
        self.connections += 1
        for i, chunk in enumerate(self.chunks):
            if self.connections == 1 and self.break_after is not None and i == self.break_after:
                raise RuntimeError("WebSocket connection closed unexpectedly with close code 1006")
            await asyncio.sleep(0)
            yield chunk
        waited = 0
        while self.until_stopped and not self.stopped and waited < 300:  # a job ends by itself after 3 s
            await asyncio.sleep(0.01)
            waited += 1
        self.until_stopped = False

    def get_job_status(self, sid):
        return self.status

    def get_job_logs(self, sid):
        self.log_fetches += 1
        return self.log

    def stop_job(self, sid):
        self.stopped.append(sid)


class Recorder:
    def __init__(self):
        self.updates, self.closed = [], 0

    def update(self, metrics: dict) -> None:
        self.updates.append(metrics)

    def close(self) -> None:
        self.closed += 1


def test_follow_shows_the_filtered_stream_and_saves_the_full_log(capsys, tmp_path):
    client = TailingJobs(REAL_LOG)
    run = rayjobs.follow(client, "job-1", log_path=tmp_path / "job.log")
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"full log (every line, unfiltered): {tmp_path / 'job.log'}"
    assert out[1:] == rayjobs.filter_log(REAL_LOG.splitlines())[0]
    assert (tmp_path / "job.log").read_text() == REAL_LOG
    assert run.status == "SUCCEEDED" and run.result["ok"] and [s["step"] for s in run.steps][-1] == 8
    assert client.log_fetches == 1 and not client.stopped


def test_follow_hands_steps_to_the_progress_object(capsys):
    progress = Recorder()
    rayjobs.follow(TailingJobs(REAL_LOG), "job-1", progress=progress)
    assert [u["step"] for u in progress.updates] == list(range(1, 9)) and progress.closed == 1
    assert set(progress.updates[0]) == {"step", "steps", "loss", "step_time_s", "tokens_per_s"}
    out = capsys.readouterr().out
    assert "[train] step" not in out and "[train] throughput rank=1/2" in out


def test_a_progress_object_that_draws_nothing_leaves_the_step_lines_printed(capsys):
    """Headless (papermill, nbval) the live view draws nothing: the learner's plain step lines must stay."""
    progress = Recorder()
    progress.enabled = False
    rayjobs.follow(TailingJobs(REAL_LOG), "job-1", progress=progress)
    assert [u["step"] for u in progress.updates] == list(range(1, 9))
    assert capsys.readouterr().out.count("[train] step ") == 8


def test_follow_works_inside_a_running_event_loop(capsys):
    """A notebook kernel's event loop is running while a cell calls submit: following must still work."""

    async def cell():
        return rayjobs.follow(TailingJobs(REAL_LOG), "job-1", quiet=True)

    run = asyncio.run(cell())
    assert run.status == "SUCCEEDED" and capsys.readouterr().out == ""


def test_follow_reconnects_after_the_stream_breaks_without_repeating(monkeypatch):
    """Ray's tail replays the log from its start on a new connection: what was handled is skipped (200 steps, more
    than the de-duplication window could hide)."""
    monkeypatch.setattr(rayjobs.time, "sleep", lambda s: None)
    log = "".join(
        f"(RayTrainWorker pid=11) [train] step {k}/200 loss=6.9 step_time=0.05s tokens/s=5000 peak_mem=5MiB\n"
        for k in range(1, 201)
    )
    client, progress = TailingJobs(log, size=1000, break_after=10), Recorder()
    run = rayjobs.follow(client, "job-1", progress=progress)
    assert client.connections == 2 and run.status == "SUCCEEDED"
    assert [u["step"] for u in progress.updates] == list(range(1, 201))


def test_follow_stops_a_job_past_its_timeout(capsys):
    client = TailingJobs(REAL_LOG[:500], until_stopped=True)
    run = rayjobs.follow(client, "job-2", timeout_s=0.5)
    assert run.status == "STOPPED" and client.stopped == ["job-2"]
    assert "ran past train.job_timeout_s = 0.5 s" in capsys.readouterr().out


def test_follow_gives_up_when_the_stream_never_comes_back(monkeypatch):
    monkeypatch.setattr(rayjobs.time, "sleep", lambda s: None)

    class Gone(TailingJobs):
        async def tail_job_logs(self, sid):
            raise ConnectionError("Cannot connect to host 127.0.0.1:8266")
            yield  # an async generator

    with pytest.raises(rayjobs.JobFollowError, match="call submit again"):
        rayjobs.follow(Gone("", until_stopped=True), "job-3", quiet=True)


@pytest.mark.parametrize("status, name", [("JobStatus.SUCCEEDED", "SUCCEEDED"), ("RUNNING", "RUNNING")])
def test_status_without_the_enum_name(status, name):
    class One:
        def get_job_status(self, sid):
            return status

    assert rayjobs.status_of(One(), "x") == name


def test_filter_on_a_real_log_with_a_killed_worker_shows_the_restart():
    log = (JOBS / "cpu-2ranks-worker-killed.log").read_text()
    shown, _ = rayjobs.filter_log(log.splitlines())
    text = "\n".join(shown)
    assert "[FailurePolicy] RETRY" in text and "Error count: 1 (max allowed: 1)" in text
    steps = [int(re.match(r"\[train\] step (\d+)/8", s).group(1)) for s in shown if s.startswith("[train] step ")]
    assert steps == [1, 2, *range(1, 9)], "the second worker group's steps are shown, each once"
    assert len(rayjobs.parse_attempts(log)) == 2


def test_a_traceback_ray_calls_safe_to_ignore_is_hidden_and_a_real_one_is_not():
    """From a real job on a busy machine: Ray Train's controller logs a failed resource request with a traceback
    and says it is safe to ignore. The learner sees nothing of it; a traceback of the job itself stays visible."""
    benign = (JOBS / "benign-traceback.log").read_text().splitlines()
    shown, _ = rayjobs.filter_log(benign)
    assert shown == [], shown
    real = [
        "(RayTrainWorker pid=7) Traceback (most recent call last):",
        '(RayTrainWorker pid=7)   File "train.py", line 3, in step',
        "(RayTrainWorker pid=7) RuntimeError: boom",
    ]
    shown, _ = rayjobs.filter_log(benign[:3] + real)
    assert shown[0] == real[0] and shown[-1] == real[-1]


def test_quiet_client_logs_holds_when_ray_s_client_is_first_imported_inside_it():
    """In a fresh kernel the Jobs client's modules are imported inside the block, and each sets its logger to
    INFO as it is imported: the package upload line must still stay out of the notebook."""
    code = (
        "import logging\n"
        "from raytrain_helpers.clients import rayjobs\n"
        "with rayjobs.quiet_client_logs():\n"
        "    import ray.dashboard.modules.dashboard_sdk\n"
        "    print(logging.getLogger('ray.dashboard.modules.dashboard_sdk').getEffectiveLevel())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split()[-1] == str(logging.WARNING)


def test_a_job_that_trained_no_step_shows_no_nan(capsys):
    """A job that resumed at its last step has no loss and no timed step: its summary says so, never ``nan``."""
    metrics = dict(
        step=80,
        steps=80,
        start_step=80,
        world_size=2,
        losses=[],
        loss=float("nan"),
        ranks=[
            dict(rank=r, node_id="n" * 56, device="cpu", steps_run=0, tokens_per_s=0.0, peak_mem_bytes=1 << 30)
            for r in range(2)
        ],
    )
    rayjobs.JobRun("raytrain-x", "SUCCEEDED", result=dict(ok=True, metrics=metrics), already_complete=True).show()
    out = capsys.readouterr().out
    assert "nan" not in out and "no step trained by this job" in out and "the run was already complete" in out
    rows = [line.split("|") for line in out.splitlines() if line.startswith(("| 0 ", "| 1 "))]
    assert [r[4].strip() for r in rows] == ["-", "-"], out


def test_missing_figures_are_a_dash():
    from raytrain_helpers.core.tables import figure
    from raytrain_helpers.present.live import metrics_line

    assert [figure(v, ".2f") for v in (1.234, None, float("nan"), float("inf"), "x")] == ["1.23", "-", "-", "-", "-"]
    assert metrics_line(dict(step=3, steps=8)) == "step 3/8: loss -"
