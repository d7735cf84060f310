"""The job's configuration is one typed, documented object: a misspelt, missing or ill-typed key is an error that
names it where the config is built or read (the notebook side, the job's driver), never a KeyError on a worker."""

from __future__ import annotations

import json
import re

import pytest

from raytrain_helpers.clients.rayjobs import JobRun
from raytrain_helpers.core import config
from raytrain_helpers.steps import train
from raytrain_helpers.worker import entrypoint, transport
from raytrain_helpers.worker.job_config import JobConfig, JobConfigError, field_docs
from raytrain_helpers.worker.train import loop_config
from tests.helpers import job_cfg

#: The keys the first job config had (before data, eval, export, kernels and restarts were settings): what a
#: recorded job_config.json of a run of that time holds.
FIRST_KEYS = dict(
    run_name="old",
    marker="0123456789ab",
    model={"vocab_size": 256},
    preset="tiny",
    model_id=None,
    steps=8,
    seq_len=128,
    batch_size=2,
    learning_rate=1e-4,
    seed=0,
    checkpoint_every=4,
    num_workers=0,
    precision="auto",
    use_gpu=False,
    storage_path="/runs/old/storage",
    warmup_steps=0,
    cpu_threads=1,
    final_checkpoint=True,
)


@pytest.mark.parametrize("cls", [JobConfig, transport.CheckConfig])
def test_every_field_has_a_docstring(cls):
    docs = field_docs(cls)
    names = list(cls.model_fields)
    assert [n for n in names if len(docs.get(n, "")) < 20] == [], "fields without a docstring under them"


def test_field_docs_are_the_literals_under_the_fields():
    docs = field_docs()
    assert docs["steps"].startswith("Optimizer steps of the whole run")  # the literal under the field, on one line
    assert "\n" not in docs["use_gpu"] and "the job's driver decides" in docs["use_gpu"]


def test_the_json_round_trip_gives_the_same_config_with_one_key_per_field():
    cfg = job_cfg(model_id="org/tiny", kernels="auto", planned_kernels="liger", peak_tflops={"H200": 989.0})
    text = cfg.to_json()
    assert set(json.loads(text)) == set(JobConfig.model_fields)
    assert JobConfig.from_json(text) == cfg
    assert JobConfig.from_dict(loop_config(cfg, None)["job"]) == cfg  # what Ray Train hands every worker


def test_a_misspelt_key_is_an_error_naming_it_and_the_right_one():
    d = dict(job_cfg().to_dict(), stpes=8)
    with pytest.raises(JobConfigError, match=r"unknown key 'stpes': did you mean 'steps'\?"):
        JobConfig.from_dict(d)
    with pytest.raises(JobConfigError, match="unknown key 'stpes'"):
        JobConfig.from_json(json.dumps(d))
    with pytest.raises(JobConfigError, match=r"unknown key 'stpes': did you mean 'steps'\?"):  # in code too
        job_cfg().replace(stpes=8)
    with pytest.raises(JobConfigError, match=r"unknown key 'stpes'"):
        JobConfig(**d)


def test_a_missing_key_is_an_error_naming_it():
    d = job_cfg().to_dict()
    del d["seq_len"]
    with pytest.raises(JobConfigError, match=r"missing key 'seq_len' \(Tokens per row.*Fix: set seq_len"):
        JobConfig.from_dict(d)


@pytest.mark.parametrize(
    ("key", "value"),
    [("steps", "8"), ("batch_size", True), ("use_gpu", "yes"), ("kernels", "fast"), ("model_id", 3), ("model", [])],
)
def test_a_value_of_the_wrong_type_is_an_error_naming_the_key(key, value):
    with pytest.raises(JobConfigError, match=re.escape(f"job config: {key} = {value!r} is not of type")):
        JobConfig.from_dict(dict(job_cfg().to_dict(), **{key: value}))


def test_the_drivers_config_is_checked_before_anything_is_staged(clean_env, repo_root, tmp_path, monkeypatch):
    """The notebook side builds the config from the settings; one that would not read back as itself on the job's
    driver (here a tuple, which JSON turns into a list) stops staging with a ConfigError, and nothing is written."""
    monkeypatch.setenv("RAYTRAIN_RUNS_DIR", str(tmp_path))
    s = config.load(repo_root / "env.yaml", environ={}, gpus_per_worker_node=0, run_name="unit")
    cfg = train.job_config(s, marker="abc")
    assert isinstance(cfg, JobConfig) and cfg.steps == s.train.steps and cfg.data == s.train.data
    bad = cfg.replace(model=dict(cfg.model, layer_types=("full", "full")))
    with pytest.raises(config.ConfigError, match=r"job config: model = \{.*\} does not read back from JSON as itself"):
        train.stage_working_dir(s, bad)
    assert not (tmp_path / "unit" / "job_src" / "abc").exists()


def test_the_jobs_driver_stops_on_a_misspelt_key_before_ray_starts(tmp_path, monkeypatch):
    import ray

    monkeypatch.setattr(ray, "init", lambda *a, **k: pytest.fail("ray.init called with a bad config"))
    p = tmp_path / "job_config.json"
    p.write_text(json.dumps(dict(job_cfg().to_dict(), sed=1)))
    with pytest.raises(SystemExit, match=r"job_config.json: job config: unknown key 'sed': did you mean 'seed'"):
        entrypoint.main(["--config", str(p)])
    # the transport check's job alike, with its own config
    check = transport.CheckConfig(run_name="t-transport", marker="m0", use_gpu=False, size_bytes=1024)
    assert transport.CheckConfig.from_json(check.to_json()) == check
    p.write_text(json.dumps(dict(check.to_dict(), iter=3)))
    with pytest.raises(SystemExit, match=r"transport check config: unknown key 'iter': did you mean 'iters'"):
        transport.main(["--config", str(p)])


def test_a_config_recorded_by_an_earlier_version_reads_for_display(tmp_path, clean_env, repo_root, monkeypatch):
    """A recorded config lacks the keys added since: those are filled with what such a job ran with (random data,
    no export, the fields' defaults); a key this version no longer knows is left out; an unreadable one is None."""
    old = JobConfig.from_record(dict(FIRST_KEYS, retired_key=1))
    assert old is not None and old.run_name == "old" and old.steps == 8
    assert old.data == "random" and old.export is False and old.eval_every == 0 and old.kernels == "none"
    with pytest.raises(JobConfigError, match="missing key 'data'"):  # the job itself accepts no such config
        JobConfig.from_dict(FIRST_KEYS)
    assert JobConfig.from_record({}) is None and JobConfig.from_record({"steps": 8}) is None
    run = JobRun.from_json(dict(submission_id="raytrain-old-0123456789ab", status="SUCCEEDED", config=FIRST_KEYS))
    assert run.job_config == old and run.to_json()["config"] == FIRST_KEYS  # job.json keeps what it recorded
    # a job attached to after the kernel that submitted it died: its staged job_config.json
    monkeypatch.setenv("RAYTRAIN_RUNS_DIR", str(tmp_path))
    s = config.load(repo_root / "env.yaml", environ={}, run_name="old")
    staged = tmp_path / "old" / "job_src" / "0123456789ab"
    staged.mkdir(parents=True)
    (staged / "job_config.json").write_text(json.dumps(FIRST_KEYS))
    assert train._recorded_config(s, "old", "raytrain-old-0123456789ab") == old
    assert train._recorded_config(s, "old", "raytrain-old-ffffffffffff") is None


def test_the_notebook_side_names_a_bad_value_when_it_builds_the_config(clean_env, repo_root, monkeypatch):
    monkeypatch.setattr(train, "learning_rate", lambda settings: "1e-4")  # a str where the job needs a float
    s = config.load(repo_root / "env.yaml", environ={}, gpus_per_worker_node=0)
    with pytest.raises(config.ConfigError, match=r"job config: learning_rate = '1e-4' is not of type float"):
        train.job_config(s)
