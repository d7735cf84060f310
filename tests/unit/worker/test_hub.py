"""A model hub id that cannot be found: a clear error naming the setting and the fix, and HF_TOKEN never shown."""

from __future__ import annotations

import json

import pytest

from raytrain_helpers.core.config import ConfigError, load
from raytrain_helpers.core.paths import REPO_ROOT
from raytrain_helpers.steps import train as train_step
from raytrain_helpers.worker import hub

SECRET = "hf_TESTTOKENabcdefghijklmnopqrstuvwxyz"


@pytest.fixture
def empty_cache(tmp_path, monkeypatch, clean_env):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf" / "hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    from huggingface_hub import constants  # read once at import: point the imported module at the empty cache

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hf" / "hub"))
    monkeypatch.setenv("HF_TOKEN", SECRET)
    monkeypatch.setenv("RAYTRAIN_RUNS_DIR", str(tmp_path / "runs"))
    return tmp_path


def test_hub_id_not_in_the_cache_names_the_setting_and_the_fix_and_never_the_token(empty_cache, capsys):
    with pytest.raises(hub.ModelSourceError) as err:
        hub.resolve_model_dir("Qwen/Qwen2.5-1.5B")
    msg = str(err.value)
    assert "train.model_id = 'Qwen/Qwen2.5-1.5B'" in msg and "HF_HUB_OFFLINE=1" in msg
    assert "Fix:" in msg and "hf download Qwen/Qwen2.5-1.5B" in msg
    out = capsys.readouterr()
    assert SECRET not in msg + out.out + out.err


def test_job_config_stops_before_submitting_and_keeps_the_token_out_of_the_job(empty_cache, capsys):
    settings = load(REPO_ROOT / "env.yaml", environ={}, model_id="Qwen/Qwen2.5-1.5B")
    with pytest.raises(ConfigError, match=r"train.model_id = 'Qwen/Qwen2.5-1.5B'.*Fix:") as err:
        train_step.job_config(settings)
    env = train_step.worker_env(settings)
    assert env["HF_HUB_OFFLINE"] == "1"
    out = capsys.readouterr()
    assert SECRET not in str(err.value) + json.dumps(env) + out.out + out.err


def test_hub_id_already_in_the_cache_resolves_offline(empty_cache):
    snap = empty_cache / "hf" / "hub" / "models--org--tiny" / "snapshots" / ("a" * 40)
    snap.mkdir(parents=True)
    (snap / "config.json").write_text("{}")
    refs = snap.parent.parent / "refs"
    refs.mkdir()
    (refs / "main").write_text("a" * 40)
    assert hub.resolve_model_dir("org/tiny") == str(snap)


def test_a_folder_without_config_json_is_refused(tmp_path):
    with pytest.raises(hub.ModelSourceError, match="without config.json. Fix:"):
        hub.resolve_model_dir(str(tmp_path))
