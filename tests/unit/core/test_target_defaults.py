"""env.yaml's ``target_defaults``: the aws target's default run is a real task (Qwen2.5-1.5B on GSM8K), the local
target's stays the toy language on the tiny model, and every value written plainly (env.yaml's groups, ``-f``,
``RAYTRAIN_*``, ``-p``) wins over a target's defaults, with its source named."""

from pathlib import Path

import pytest
import yaml

from raytrain_helpers.core import loading
from raytrain_helpers.core.settings_train import TrainSettings
from raytrain_helpers.core.validation import ConfigError

REPO = Path(__file__).resolve().parents[3]
ENV = REPO / "env.yaml"
GSM8K = "hf://datasets/openai/gsm8k/main/train-00000-of-00001.parquet"


def load(*files, env_file=ENV, environ=None, **params):
    return loading.load(env_file, files=list(files), environ=environ or {}, check_installed_ray=False, **params)


def test_the_aws_default_run_is_qwen_fine_tuned_on_gsm8k_and_says_so():
    s = load(target="aws")
    t = s.train
    assert (t.model_id, t.model_preset, t.data) == ("Qwen/Qwen2.5-1.5B", "qwen2.5-1.5b", GSM8K)
    assert (t.data_format, t.data_columns) == ("prompt_completion", {"prompt": "question", "completion": "answer"})
    assert t.prompt_template == "Question: {prompt}\nAnswer: "
    src = loading.sources(s)
    assert src["train.model_id"] == "env.yaml (target_defaults.aws.train.model_id)"
    assert src["train.data"] == "env.yaml (target_defaults.aws.train.data)"
    # the same task as the profile that writes it out (the profile adds a run name and a bucket placeholder)
    profile = yaml.safe_load((REPO / "profiles" / "aws-gsm8k.yaml").read_text())["train"]
    for leaf, value in profile.items():
        if leaf != "storage_path":
            assert getattr(t, leaf) == value, leaf


def test_the_local_default_run_is_unchanged_the_tiny_model_on_the_toy_language():
    s = load()
    assert s.target == "local"
    assert s.train == TrainSettings(), "the local defaults are the schema's own"
    assert (s.train.model_preset, s.train.model_id, s.train.data, s.train.steps) == ("tiny", "", "learnable", 80)
    assert loading.sources(s)["train.data"] == "env.yaml (target_defaults.local.train.data)"


def test_the_article_profile_keeps_its_random_tokens():
    s = load(REPO / "profiles" / "aws-article.yaml", storage_path="")
    t = s.train
    assert (t.data, t.data_format, t.data_columns, t.prompt_template) == ("random", "auto", {}, "{prompt}")
    assert (t.seq_len, t.batch_size, t.steps, t.learning_rate, t.eval_every) == (2048, 1, 100, 0.0, 0)
    assert loading.sources(s)["train.data"] == "aws-article.yaml (train.data)"


def test_every_value_written_plainly_wins_over_the_targets_defaults(tmp_path, monkeypatch):
    doc = yaml.safe_load(ENV.read_text())
    doc["train"]["steps"] = 7
    doc["train"]["data"] = "s3://mine/data.jsonl"
    edited = tmp_path / "env.yaml"
    edited.write_text(yaml.safe_dump(doc))
    s = load(env_file=edited, target="aws")
    assert (s.train.steps, s.train.data) == (7, "s3://mine/data.jsonl")
    assert loading.sources(s)["train.steps"] == "env.yaml (train.steps)"
    assert s.train.model_id == "Qwen/Qwen2.5-1.5B", "what was not written keeps the target's default"

    over = tmp_path / "over.yaml"
    over.write_text("train:\n  steps: 9\n")
    s = load(over, target="aws")
    assert s.train.steps == 9 and loading.sources(s)["train.steps"] == "over.yaml (train.steps)"

    s = load(environ={"RAYTRAIN_STEPS": "11"}, target="aws")
    assert s.train.steps == 11 and loading.sources(s)["train.steps"] == "environment (RAYTRAIN_STEPS)"

    s = load(target="aws", steps=13, model_id="", model_preset="tiny")
    assert (s.train.steps, s.train.model_id, s.train.model_preset) == (13, "", "tiny")
    assert loading.sources(s)["train.steps"] == "parameter (steps)"

    monkeypatch.setenv("RAYTRAIN_TARGET", "aws")  # the target itself from any layer picks the block
    s = loading.load(ENV, check_installed_ray=False)
    assert s.train.data == GSM8K


def test_a_files_own_target_defaults_rank_below_its_plain_values_and_above_earlier_files(tmp_path):
    over = tmp_path / "over.yaml"
    over.write_text(
        "train:\n  seq_len: 256\n"
        "target_defaults:\n  aws:\n    train:\n      seq_len: 1024\n      steps: 5\n"
        "  local:\n    train:\n      steps: 3\n"
    )
    s = load(over, target="aws")
    assert (s.train.seq_len, s.train.steps) == (256, 5)
    assert loading.sources(s)["train.steps"] == "over.yaml (target_defaults.aws.train.steps)"
    assert load(over).train.steps == 3


def test_choosing_another_target_later_brings_that_targets_defaults():
    local = load(steps=17)
    aws = loading.with_overrides(local, target="aws")
    assert (aws.train.data, aws.train.steps) == (GSM8K, 17), "-p steps still wins"
    back = loading.with_overrides(aws, target="local")
    assert (back.train.data, back.train.model_preset) == ("learnable", "tiny")


@pytest.mark.parametrize(
    ("block", "says"),
    [
        ("target_defaults: [aws]\n", "target_defaults must map a target"),
        ("target_defaults:\n  gcp: {train: {steps: 1}}\n", "target_defaults.gcp: unknown target"),
        ("target_defaults:\n  aws: {target: local}\n", "target_defaults.aws.target: a target's defaults cannot"),
        ("target_defaults:\n  local: {train: {stpes: 1}}\n", "unknown setting target_defaults.local.train.stpes"),
        ("target_defaults:\n  aws: {train: {steps: many}}\n", "target_defaults.aws.train.steps"),
    ],
)
def test_a_bad_target_defaults_block_names_the_field_and_the_fix(tmp_path, block, says):
    bad = tmp_path / "bad.yaml"
    bad.write_text(block)
    with pytest.raises(ConfigError, match="Fix") as e:
        load(bad)  # checked on every target, not only the one that runs
    assert says in str(e.value)
