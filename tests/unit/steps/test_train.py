import json

import pytest

from raytrain_helpers.core import config
from raytrain_helpers.steps import train, verify
from raytrain_helpers.worker.job_config import JobConfig
from tests.helpers import job_cfg

LOGS = """\
[36m(RayTrainWorker pid=11)[0m [train] step 1/3 loss=6.9303 step_time=0.204s tokens/s=1257 peak_mem=573MiB
[36m(RayTrainWorker pid=11)[0m [train] step 2/3 loss=6.9450 step_time=0.052s tokens/s=4895 peak_mem=577MiB
[36m(RayTrainWorker pid=11)[0m [train] SUCCESS rank=0/2
[36m(RayTrainWorker pid=11)[0m [train] SUCCESS rank=0/2
RAYTRAIN_RESULT {"ok": true, "metrics": {"step": 3}}
"""


def test_success_ranks_counts_each_rank_once():
    ranks, world = verify.success_ranks(LOGS)
    assert ranks == {0} and world == 2


def test_job_config_and_env(clean_env, repo_root, tmp_path, monkeypatch):
    monkeypatch.setenv("RAYTRAIN_RUNS_DIR", str(tmp_path))
    s = config.load(repo_root / "env.yaml", environ={}, gpus_per_worker_node=0, steps=3, run_name="unit")
    s = config.with_overrides(s, env={"NCCL_SOCKET_IFNAME": "^lo,docker0"})
    cfg = train.job_config(s, marker="abc")
    assert cfg.steps == 3 and cfg.marker == "abc" and cfg.use_gpu is False
    assert cfg.model == config.PRESETS["tiny"]
    assert cfg.storage_path == str(tmp_path / "unit" / "storage")
    env = train.worker_env(s, {"NCCL_P2P_DISABLE": "1"})
    assert env["NCCL_DEBUG"] == "INFO" and env["NCCL_SOCKET_IFNAME"] == "^lo,docker0"
    assert env["NCCL_P2P_DISABLE"] == "1" and env["HF_HUB_OFFLINE"] == "1"
    wd = train.stage_working_dir(s, cfg)
    assert (wd / "raytrain_helpers" / "worker" / "train.py").is_file()
    assert (wd / "raytrain_helpers" / "worker" / "entrypoint.py").is_file()
    assert json.loads((wd / "job_config.json").read_text())["marker"] == "abc"
    assert JobConfig.from_json((wd / "job_config.json").read_text()) == cfg  # what the job's driver reads
    assert not list(wd.rglob("__pycache__"))


def test_aws_needs_remote_storage(clean_env, repo_root):
    s = config.load(repo_root / "env.yaml", environ={}, target="aws")
    with pytest.raises(config.ConfigError, match="s3://"):
        train.storage_path(s)
    assert train.storage_path(config.with_overrides(s, storage_path="s3://ckpt-b/p")) == "s3://ckpt-b/p"


def test_the_aws_job_gets_liger_through_pip_only_when_its_gpus_may_use_it(clean_env, repo_root):
    """On aws (the DLC has no liger-kernel) kernels auto is planned as liger for the GPU node type, so the job's
    runtime_env pip gets the pinned liger-kernel; kernels none asks pip for nothing; extra_pip always travels."""
    from raytrain_helpers.worker.kernels import LIGER_HASHED

    s = config.load(repo_root / "env.yaml", environ={}, target="aws", storage_path="s3://ckpt-b/p")
    planned = train.perf_plan(s).kernels
    assert planned == "liger"
    assert train.job_pip(s, job_cfg(kernels="auto", planned_kernels=planned)) == [LIGER_HASHED]
    assert train.job_pip(s, job_cfg(kernels="none", planned_kernels="none")) == []
    extra = config.with_overrides(s, extra_pip=["einops==0.8.1"])
    assert train.job_pip(extra, job_cfg(kernels="none", planned_kernels="none")) == ["einops==0.8.1"]
    pinned = config.with_overrides(s, extra_pip=["liger-kernel==0.8.5"])
    assert train.job_pip(pinned, job_cfg(kernels="liger", planned_kernels="liger")) == ["liger-kernel==0.8.5"]


class _Jobs:
    """The Jobs API calls ``complete_run`` makes, answered from a list of (submission id, status, start, logs); the
    logs are a real job's (the real Jobs API is exercised in tests/notebooks/test_papermill.py's flow)."""

    def __init__(self, jobs):
        self.jobs = jobs

    def list_jobs(self):
        from types import SimpleNamespace

        return [
            SimpleNamespace(submission_id=sid, status=status, start_time=start, metadata={"raytrain_run": "unit"})
            for sid, status, start, _ in self.jobs
        ]

    def get_job_logs(self, sid):
        return next(logs for s, _, _, logs in self.jobs if s == sid)

    def get_job_status(self, sid):
        return next(status for s, status, _, _ in self.jobs if s == sid)


@pytest.fixture
def unit_run(clean_env, repo_root, tmp_path, monkeypatch):
    from pathlib import Path

    monkeypatch.setenv("RAYTRAIN_RUNS_DIR", str(tmp_path))
    s = config.load(repo_root / "env.yaml", environ={}, gpus_per_worker_node=0, run_name="unit")
    logs = (Path(__file__).resolve().parents[2] / "fixtures" / "jobs" / "cpu-2ranks-committed.log").read_text()
    return s, logs  # a real 2-rank job of 8 steps


def test_a_finished_run_is_its_result_and_nothing_is_submitted(unit_run, capsys):
    """A job that ended while nothing followed it is recorded; asked for no more steps than it trained, the run is
    complete: that job is returned and the learner reads why nothing was submitted and how to train again."""
    s, logs = unit_run
    jobs = _Jobs([("raytrain-unit-a", "FAILED", 1, "boom"), ("raytrain-unit-b", "SUCCEEDED", 2, logs)])
    done = train.complete_run(s, jobs, "unit", 8)
    said = capsys.readouterr().out
    assert done is not None and done.already_complete and done.submission_id == "raytrain-unit-b"
    assert "job raytrain-unit-b of run 'unit' ended while nothing followed it" in said
    assert "run 'unit' is already complete: job raytrain-unit-b trained it to step 8, so nothing was submitted" in said
    assert "-p run_name unit-2" in said and "-p steps 48" in said
    assert train.load_last(s).submission_id == "raytrain-unit-b", "the finished job is recorded for 06"
    assert train.complete_run(s, jobs, "unit", 8, quiet=True).submission_id == "raytrain-unit-b"  # from the record


def test_more_steps_or_a_failed_last_job_train(unit_run):
    s, logs = unit_run
    finished = _Jobs([("raytrain-unit-b", "SUCCEEDED", 2, logs)])
    assert train.complete_run(s, finished, "unit", 12, quiet=True) is None, "more steps: a job that resumes"
    assert train.load_last(s).submission_id == "raytrain-unit-b"
    failed = _Jobs([("raytrain-unit-b", "SUCCEEDED", 2, logs), ("raytrain-unit-c", "FAILED", 3, "boom")])
    assert train.complete_run(s, failed, "unit", 8, quiet=True).submission_id == "raytrain-unit-b"
    assert train.complete_run(s, _Jobs([]), "other", 8, quiet=True) is None, "nothing recorded, nothing ran"


def test_liger_is_installed_hash_checked_in_the_form_ray_takes(clean_env, repo_root):
    """The runtime_env pip field passes Ray 2.58's own validation; Ray writes ``packages`` one per line to a
    requirements file for ``pip install -r`` with ``pip_install_options`` (ray/_private/runtime_env/pip.py), so
    the line is a requirement with pip's per-requirement ``--hash`` option."""
    import re

    from packaging.requirements import Requirement
    from ray._private.runtime_env.validation import parse_and_validate_pip

    from raytrain_helpers.worker.kernels import LIGER_HASHED, LIGER_REQUIREMENT

    field = train.runtime_pip([LIGER_HASHED])
    assert parse_and_validate_pip(field) == field
    assert field["pip_install_options"][:2] == ["--require-hashes", "--no-deps"]
    (line,) = field["packages"]
    req, opt = line.split(" --hash=")
    assert str(Requirement(req)) == LIGER_REQUIREMENT and re.fullmatch(r"sha256:[0-9a-f]{64}", opt)
    assert train.runtime_pip(["einops==0.8.1"]) == ["einops==0.8.1"]  # nothing hashed: the plain list
    with pytest.raises(config.ConfigError, match=r"train.extra_pip = \['einops==0.8.1'\] has no --hash"):
        train.runtime_pip(["einops==0.8.1", LIGER_HASHED])
