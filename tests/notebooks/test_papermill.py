"""Notebooks executed headless with papermill against the real local cluster, with -p overrides."""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import papermill as pm
import pytest

from raytrain_helpers.clients import rayjobs
from raytrain_helpers.core import config
from raytrain_helpers.present.reports import CRITERIA_CLASS
from raytrain_helpers.steps import train, verify
from raytrain_helpers.steps.completions import COMPLETIONS
from raytrain_helpers.targets import local
from raytrain_helpers.worker.train import restore_check
from tests.conftest import TEST_LOCAL
from tests.helpers import notebook_outputs

REPO = Path(__file__).resolve().parents[2]
NB = REPO / "notebooks"
pytestmark = pytest.mark.notebooks


def test_parameters_are_discoverable():
    for nb in sorted(NB.glob("[0-9][0-9]_*.ipynb")):
        params = pm.inspect_notebook(str(nb))
        assert {"target", "run_name", "env_file", "override_files", "assume_yes"} <= set(params), nb.name
    assert "steps" in pm.inspect_notebook(str(NB / "05_train.ipynb"))


def _run(name: str, out: Path, params: dict) -> str:
    pm.execute_notebook(
        str(NB / f"{name}.ipynb"), str(out), parameters=params, cwd=str(NB), kernel_name="python3", progress_bar=False
    )
    return notebook_outputs(out)


def _first_run(learner, params: dict, tmp_path: Path) -> str:
    """The flow's first 05 run, prepared with ``params`` by papermill: run in JupyterLab as a learner runs it when a
    browser is here (the live view drew every step, the plain step lines of a headless run stayed out of the page),
    else executed headless by papermill. Returns the text the notebook printed."""
    if learner is None:
        return _run("05_train", tmp_path / "05a.ipynb", params)
    run = learner.run("05_train", params, "raytrain-live-view", tmp_path)
    run.check_ran("live view")
    assert "step 3/3: loss" in run.widget_text and "tokens/s" in run.widget_text, run.widget_text[:500]
    assert "3/3" in run.widget_text, "the progress bar reached the last step"
    assert "[train] step 1/3" not in run.printed, "with a widget front end the step lines are drawn, not printed"
    assert "Uploading package" not in run.printed, "Ray's client INFO lines stay out of the notebook"
    return run.printed


def _main_command(params: dict, interrupt_when=None) -> str:
    """The README's main command, ``raytrain-tutorial run``, on 05 alone (``--only 05``: the session's cluster stays
    up) with ``params`` as ``-p`` overrides; Ctrl-C (SIGINT to the command) once ``interrupt_when()`` is true.
    Returns what the command printed and, for a finished 05, what the executed notebook printed."""
    argv = [sys.executable, "-m", "raytrain_helpers.cli", "run", "--only", "05"]
    for key, value in params.items():
        argv += ["-p", key, str(value)]
    proc = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if interrupt_when is not None:
        deadline = time.monotonic() + 240
        while not interrupt_when():
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[0][-3000:]
            time.sleep(0.5)
        proc.send_signal(signal.SIGINT)  # Ctrl-C in the terminal: the command stops, its job goes on
    printed = proc.communicate(timeout=240)[0]
    executed = Path(os.environ["RAYTRAIN_RUNS_DIR"]) / params["run_name"] / "notebooks" / "05_train.ipynb"
    return printed + (notebook_outputs(executed) if proc.returncode == 0 else "")


def _interrupted_then_again(s, params: dict, earlier: str) -> tuple[str, str]:
    """The main command with more steps, interrupted with Ctrl-C once its job runs: the job trains on to its end in
    the cluster; the command run again (as it advises) picks up at 05, which reads that finished job back and
    records it, submitting nothing. Returns that job's submission id and what the second command printed."""
    with local.job_server(s) as url:
        client = rayjobs.client(url)

        def new_job() -> str | None:
            ours = [j for j in client.list_jobs() if (j.metadata or {}).get(rayjobs.RUN_KEY) == "pm-resume"]
            return next((j.submission_id for j in ours if j.submission_id != earlier), None)

        said = _main_command(dict(params, steps=5), interrupt_when=new_job)
        assert "interrupted during 05_train" in said and "Run the same command again" in said, said[-3000:]
        sid = new_job()
        deadline = time.monotonic() + 180
        while rayjobs.status_of(client, sid) not in rayjobs.TERMINAL:
            assert time.monotonic() < deadline, "the resumed job did not end in time"
            time.sleep(0.5)
    text = _main_command(dict(params, steps=5))
    assert f"job {sid} of run 'pm-resume' ended while nothing followed it" in text, text[-3000:]
    assert "run 'pm-resume' is already complete" in text and "nothing was submitted" in text
    return sid, text


def _again(learner, params: dict, tmp_path: Path) -> str:
    """05 once more on a finished run, as the learner runs it after the main command: in JupyterLab when a browser
    is here (the live view replays the finished job's steps), else headless. Returns the text the notebook printed."""
    if learner is None:
        return _run("05_train", tmp_path / "05c.ipynb", params)
    run = learner.run("05_train", params, "raytrain-live-view", tmp_path)
    run.check_ran("live view, again")
    assert "step 5/5: loss" in run.widget_text, run.widget_text[:500]
    assert not re.search(r"\bnan\b", run.widget_text), run.widget_text[:500]
    return run.printed


def test_train_resume_and_verify_with_overrides(local_settings, local_cluster, learner, tmp_path):
    """05 with -p overrides trains 3 steps (checkpoint at 2 and 3), in JupyterLab where a browser is here (its live
    view checked), else headless; 05 again, headless with more steps, resumes from the latest checkpoint without
    repeating or skipping data; the held-out loss fell; the exported model loads and generates; 06's verification
    then passes every criterion, the checkpoint reloaded into one process (06 itself runs as a notebook in nbval)."""
    params = dict(TEST_LOCAL, run_name="pm-resume", steps=3, checkpoint_every=2, gpus_per_worker_node=0)
    text = _first_run(learner, params, tmp_path)
    assert "steps 0->3 of 3" in text and "SUCCEEDED" in text and "run pm-resume" in text
    s = config.with_overrides(local_settings, run_name="pm-resume", steps=3)
    first = train.load_last(s)
    m = first.metrics
    assert m["start_step"] == 0 and m["step"] == 3 and len(m["losses"]) == 3
    assert len(first.ranks) == 2 and len({r["node_id"] for r in first.ranks}) == 2
    assert restore_check(first.result["checkpoint"], s.model_config_dict())["step"] == 3
    # reports go to Ray Train with the checkpoints only (steps 2 and 3), never once a step: each rank's second
    # report in a row would wait for the controller's next health check
    reports = set(re.findall(r"Reporting training result (\d+): .* from rank (\d+)", first.logs))
    assert reports == {(n, r) for n in "12" for r in "01"}, sorted(reports)
    # the cluster was started with no `python` on PATH (conftest): the job ran the cluster's own interpreter
    with local.job_server(s) as url:
        entrypoint = rayjobs.client(url).get_job_info(first.submission_id).entrypoint
    assert entrypoint.startswith(f"{shlex.quote(sys.executable)} -m "), entrypoint

    pending, text = _interrupted_then_again(s, params, first.submission_id)
    assert "steps 3->5 of 5" in text and "resumed from step 3" in text
    assert "on these same nodes with the same settings" in text, "05 again checked the transport anew"
    second = train.load_last(s)
    assert second.submission_id == pending and second.attached
    assert second.metrics["resumed_from"] == 3 and len(second.metrics["losses"]) == 2
    assert "[train] resumed from checkpoint at step 3" in second.logs

    # Ray Data: each rank read its own batches, and the resumed run passed over exactly the ones trained before
    # its checkpoint, then trained on new ones (a digest per batch, recorded by the workers)
    for run in (first, second):
        ranks = {r["rank"]: r for r in run.ranks}
        assert not set(ranks[0]["data_digests"]) & set(ranks[1]["data_digests"]), "two ranks read the same batch"
    for before in first.ranks:
        after = next(r for r in second.ranks if r["rank"] == before["rank"])
        assert after["skipped_digests"] == before["data_digests"] and len(after["data_digests"]) == 2
        assert not set(after["data_digests"]) & set(before["data_digests"])
    evals = second.metrics["evals"]
    assert [st for st, _ in evals][0] == 0 and [st for st, _ in evals][-1] == 5
    assert verify.learned(evals, second.metrics["data"])[0], evals
    out = verify.generate(config.with_overrides(s, steps=5), show=False)  # the exported folder, from_pretrained
    assert out["path"] == second.metrics["export_path"] and len(out["rows"]) >= 10 and out["after"] is not None

    # the README's path: after the run finished, the learner runs 05 again (in JupyterLab where a browser is here):
    # it says the run is complete, shows that job's results and how to train again, and submits nothing
    text = _again(learner, dict(params, steps=5), tmp_path)
    assert "run 'pm-resume' is already complete" in text and f"job {pending} trained it to step 5" in text
    assert "To train again: a new run name" in text and "steps 3->5 of 5" in text
    assert not re.search(r"\bnan\b", text), "a missing figure reached the learner as nan"
    with local.job_server(s) as url:
        ours = [j for j in rayjobs.client(url).list_jobs() if (j.metadata or {}).get(rayjobs.RUN_KEY) == "pm-resume"]
    assert sorted(j.submission_id for j in ours) == sorted([first.submission_id, second.submission_id]), "a no-op job"

    # 06's entry point, in this process (5 steps do not teach the task: the completion row is checked on the
    # default run, see tests/unit/steps/test_completions.py)
    v = verify.run(config.with_overrides(s, steps=5), check_model=False)
    assert v.ok, v.criteria.to_json()
    rows = {c.name: c.status for c in v.criteria.items}
    assert rows["checkpoint restorable"] == "PASS"
    assert rows["workers spread over >= 2 worker nodes, none on the head"] == "PASS"

    if learner is not None:  # 06 as a learner sees it: the criteria table in the page, its rows and results
        page = learner.run("06_verify", dict(params, steps=5), CRITERIA_CLASS, tmp_path)
        assert page.rendered == 1, "06's criteria table is not in the page"
        for name in ("checkpoint restorable", "workers spread over >= 2 worker nodes", COMPLETIONS):
            assert name in page.widget_text, (name, page.widget_text[:800])
        assert "PASS" in page.widget_text and "FAIL" in page.widget_text
        # what it verifies is the job that trained steps 4-5, not a job that resumed at the end and trained nothing
        assert "2 step(s), last" in page.widget_text and not re.search(r"\bnan\b", page.widget_text)
        # 5 steps do not teach the task: the completion row fails, and only the last cell says so, as in a headless run
        assert len(page.errors) == 1 and COMPLETIONS in page.errors[0], page.errors

    marker = second.config["marker"]
    hits = [
        p
        for d in local.session_log_dirs(local_settings)
        for p in d.glob("worker-*.out")
        if f"[raytrain] marker={marker}" in p.read_text(errors="replace")
    ]
    assert len({p.parents[2] for p in hits}) == 2, "each worker raylet holds one rank's log"


def test_verify_fails_the_run_headless_when_a_criterion_fails(tmp_path):
    params = dict(TEST_LOCAL, run_name="pm-never-ran")
    with pytest.raises(pm.PapermillExecutionError) as e:
        pm.execute_notebook(
            str(NB / "06_verify.ipynb"),
            str(tmp_path / "06.ipynb"),
            parameters=params,
            cwd=str(NB),
            kernel_name="python3",
            progress_bar=False,
        )
    assert "failed criteria" in str(e.value) and "05_train" in str(e.value)


def test_bad_parameter_fails_with_the_field_named(tmp_path):
    with pytest.raises(pm.PapermillExecutionError) as e:
        pm.execute_notebook(
            str(NB / "01_capacity.ipynb"),
            str(tmp_path / "01.ipynb"),
            parameters=dict(seq_len=4),
            cwd=str(NB),
            kernel_name="python3",
            progress_bar=False,
        )
    assert "ConfigError" in str(e.value) and "train.seq_len (SEQ_LEN)" in str(e.value)
