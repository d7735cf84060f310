"""The shipped profiles (``profiles/*.yaml``): override files the settings loader reads, refused until the learner
fills in what only they know, rendered and priced by the CLI like any other settings."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
import yaml

from raytrain_helpers import cli
from raytrain_helpers.cli.args import override_file
from raytrain_helpers.core import loading
from raytrain_helpers.core.validation import ConfigError
from raytrain_helpers.plan import walkthrough

REPO = Path(__file__).resolve().parents[3]
ARTICLE = REPO / "profiles" / "aws-article.yaml"
BUCKET = ["-p", "storage_path", "s3://my-checkpoints/raytrain"]


def load_article(**params):
    return loading.load(REPO / "env.yaml", files=[ARTICLE], environ={}, check_installed_ray=False, **params)


def test_the_article_profile_is_refused_until_the_storage_is_set():
    with pytest.raises(ConfigError) as e:
        load_article()
    msg = str(e.value)
    assert "train.storage_path" in msg and "placeholder" in msg and "aws-article.yaml" in msg
    assert "Fix: -p storage_path s3://YOUR-BUCKET/raytrain" in msg


def test_the_article_profile_sets_the_source_articles_shape():
    s = load_article(storage_path="s3://my-checkpoints/raytrain")
    assert s.target == "aws"
    assert (s.aws.gpu_node_type, s.aws.gpu_node_count, s.aws.gpus_per_node) == ("g6.12xlarge", 2, 4)
    assert s.train.model_id == "Qwen/Qwen2.5-1.5B" and s.train.model_preset == "qwen2.5-1.5b"
    assert s.train.data == "random"  # the article trained on random token batches (seed 002)
    assert (s.train.seq_len, s.train.batch_size) == (2048, 1)
    assert s.train.steps > 0 and s.train.job_timeout_s > 0
    # the budget guard leaves room for the predicted job (start-up, steps, export)
    job = next(p for p in walkthrough.estimate(s, today=dt.date(2026, 12, 4)).phases if p.notebook == "05")
    assert job.minutes * 60 < s.train.job_timeout_s
    # empty storage on aws: step 02 creates a bucket of its own
    assert load_article(storage_path="").train.storage_path == ""


def test_every_shipped_profile_sets_only_known_settings():
    for f in sorted((REPO / "profiles").glob("*.yaml")):
        doc = yaml.safe_load(f.read_text())
        assert isinstance(doc, dict) and doc, f
        loading.load(REPO / "env.yaml", files=[f], environ={}, check_installed_ray=False, storage_path="")


def test_a_profile_path_is_found_from_any_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert Path(override_file("profiles/aws-article.yaml")) == ARTICLE
    assert override_file("profiles/nothing.yaml") == "profiles/nothing.yaml"  # load names the missing file
    own = tmp_path / "profiles" / "aws-article.yaml"
    own.parent.mkdir()
    own.write_text("steps: 3\n")
    assert override_file("profiles/aws-article.yaml") == "profiles/aws-article.yaml"  # the learner's own wins


def test_config_render_and_cost_take_the_profile(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    for var in [v for v in __import__("os").environ if v.startswith("RAYTRAIN_")]:
        monkeypatch.delenv(var)
    monkeypatch.setenv("RAYTRAIN_ENV_FILE", str(REPO / "env.yaml"))
    profile = ["-f", "profiles/aws-article.yaml"]
    assert cli.main(["config", *profile]) == 2
    assert "train.storage_path" in capsys.readouterr().err
    assert cli.main(["config", *profile, *BUCKET]) == 0
    assert "model_id: Qwen/Qwen2.5-1.5B" in capsys.readouterr().out
    out = tmp_path / "rendered"
    assert cli.main(["render", "--target", "aws", *profile, *BUCKET, "--out", str(out)]) == 0
    capsys.readouterr()
    docs = [d for f in sorted(out.rglob("*.yaml")) for d in yaml.safe_load_all(f.read_text()) if d]
    (rc,) = [d for d in docs if d.get("kind") == "RayCluster"]
    (group,) = rc["spec"]["workerGroupSpecs"]
    assert group["replicas"] == 2
    limits = group["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert str(limits["nvidia.com/gpu"]) == "4"
    assert cli.main(["cost", *profile, *BUCKET, "--line"]) == 0
    s = load_article(storage_path="s3://my-checkpoints/raytrain")
    assert capsys.readouterr().out.strip() == walkthrough.estimate(s).line()


def test_cost_prices_the_article_profile_without_a_bucket(tmp_path, monkeypatch, capsys):
    """Estimating needs no bucket: `cost -f profiles/aws-article.yaml` prices the profile as it ships (its
    storage_path a placeholder), says on stderr that the bucket is still to set, and gives the same figure as with
    a bucket; a command that would use the bucket still refuses, and any other bad setting still stops `cost`."""
    monkeypatch.chdir(tmp_path)
    for var in [v for v in __import__("os").environ if v.startswith("RAYTRAIN_")]:
        monkeypatch.delenv(var)
    monkeypatch.setenv("RAYTRAIN_ENV_FILE", str(REPO / "env.yaml"))
    profile = ["-f", "profiles/aws-article.yaml"]
    assert cli.main(["cost", *profile, "--line"]) == 0
    got = capsys.readouterr()
    assert got.out.strip() == walkthrough.estimate(load_article(storage_path="s3://my-checkpoints/raytrain")).line()
    assert "storage_path is not a bucket yet" in got.err and "-p storage_path s3://YOUR-BUCKET" in got.err
    assert cli.main(["cost", *profile, "--json"]) == 0
    assert yaml.safe_load(capsys.readouterr().out)["usd"] > 0  # stdout stays JSON
    assert cli.main(["config", *profile]) == 2
    assert "placeholder" in capsys.readouterr().err
    assert cli.main(["cost", *profile, "-p", "region", "nowhere"]) == 2
    assert "aws.region" in capsys.readouterr().err


def test_the_existing_cluster_profile_says_the_cluster_is_the_learners():
    s = loading.load(
        REPO / "env.yaml", files=[REPO / "profiles" / "aws-existing-cluster.yaml"], environ={},
        check_installed_ray=False, cluster_name="team-gpu",
    )  # fmt: skip
    assert s.target == "aws" and s.aws.existing_cluster is True and s.aws.cluster_name == "team-gpu"


GSM8K = REPO / "profiles" / "aws-gsm8k.yaml"


def test_the_gsm8k_profile_fine_tunes_the_articles_model_on_a_real_task_and_docs_quote_its_plan():
    """GSM8K from the Hub as prompt/completion rows (question -> answer), the article's model and nodes; the
    figures docs/adapt.md quotes are what the plan and the cost model say for it."""
    from raytrain_helpers.plan import memory, perf

    s = loading.load(REPO / "env.yaml", files=[GSM8K], environ={}, check_installed_ray=False, **dict([BUCKET[1:]]))
    t = s.train
    assert t.data == "hf://datasets/openai/gsm8k/main/train-00000-of-00001.parquet"
    assert (t.data_format, t.data_columns) == ("prompt_completion", {"prompt": "question", "completion": "answer"})
    assert t.model_id == "Qwen/Qwen2.5-1.5B" and "{prompt}" in t.prompt_template
    plan, pred = memory.aws_plan(s), perf.predict_aws(s)
    assert plan.fits and plan.kernels == "liger"
    job = next(p for p in walkthrough.estimate(s, today=dt.date(2026, 12, 4)).phases if p.notebook == "05")
    assert job.minutes * 60 < t.job_timeout_s
    adapt = (REPO / "docs" / "adapt.md").read_text()
    assert f"{t.steps} steps x {pred.step_s:.1f} s predicted" in adapt
    assert f"about {pred.time_s / 60:.1f} min of training" in adapt
    total = walkthrough.estimate(s, today=dt.date(2026, 12, 4))
    assert f"about {total.minutes:.0f} min of cluster, about USD {total.usd:.2f}" in adapt
