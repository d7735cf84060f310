"""The memory plan, the job config and the checkpoint check use the model's real config (train.model_id)."""

from __future__ import annotations

import json

import pytest

from raytrain_helpers.core.config import PRESETS, ConfigError, load
from raytrain_helpers.core.paths import REPO_ROOT
from raytrain_helpers.plan import memory

WIDE = dict(PRESETS["tiny"], hidden_size=96, intermediate_size=256, num_hidden_layers=3, model_type="qwen2")


@pytest.fixture
def model_dir(tmp_path):
    d = tmp_path / "my-model"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(dict(WIDE, architectures=["Qwen2ForCausalLM"])))
    return d


@pytest.fixture
def empty_hf_cache(tmp_path, monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))


def _settings(**kw):
    return load(REPO_ROOT / "env.yaml", environ={}, **kw)


def test_plan_uses_the_model_id_folders_config_not_the_preset(model_dir, clean_env):
    s = _settings(model_id=str(model_dir))
    assert memory.model_config(s)["hidden_size"] == 96
    plan = memory.plan_for(s, 2, on_gpu=False)
    assert plan.params == memory.count_params(WIDE)["total"] != memory.count_params(PRESETS["tiny"])["total"]
    assert plan.preset == "my-model"


def test_job_config_carries_the_real_config_for_the_checkpoint_check(model_dir, clean_env, tmp_path, monkeypatch):
    from raytrain_helpers.steps import train as train_step

    monkeypatch.setenv("RAYTRAIN_RUNS_DIR", str(tmp_path / "runs"))
    cfg = train_step.job_config(_settings(model_id=str(model_dir), learning_rate=0))
    assert cfg.model["num_hidden_layers"] == 3 and cfg.model_id == str(model_dir)
    assert cfg.learning_rate == 2e-5  # auto: fine-tuning


def test_known_hub_id_is_planned_offline_and_an_unknown_uncached_one_names_the_fix(empty_hf_cache, clean_env):
    assert memory.model_config(_settings(model_id="Qwen/Qwen2.5-1.5B")) == PRESETS["qwen2.5-1.5b"]
    with pytest.raises(ConfigError, match=r"train.model_id = 'someone/unknown-model'.*Fix: `hf download"):
        memory.model_config(_settings(model_id="someone/unknown-model"))


def test_without_model_id_the_preset_is_planned(clean_env):
    assert memory.model_config(_settings()) == PRESETS["tiny"]
