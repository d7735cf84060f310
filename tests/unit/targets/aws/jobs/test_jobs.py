"""Where the aws job's checkpoints go: ``train.storage_path``, or the bucket step 02 prepared."""

from __future__ import annotations

import json

import pytest

from raytrain_helpers.core.config import ConfigError, load, with_overrides
from raytrain_helpers.targets.aws.jobs import defaults as jobs
from raytrain_helpers.targets.aws.storage import bucket as storage


@pytest.fixture
def settings(tmp_path, monkeypatch, repo_root):
    monkeypatch.setenv("RAYTRAIN_RUNS_DIR", str(tmp_path / "runs"))
    return load(repo_root / "env.yaml", environ={}, target="aws", run_name="jobs-test")


def test_expected_transport_is_efa_unless_the_setting_names_another(settings):
    assert jobs.expected_transport(settings) == jobs.expected_transport(settings, gpus=4) == "efa"
    assert jobs.expected_transport(with_overrides(settings, expect="socket")) == "socket"


def test_without_storage_path_or_prepared_bucket_the_error_says_run_02(settings):
    with pytest.raises(ConfigError, match="storage_path.*02_cluster"):
        jobs.job_defaults(settings)


def test_the_bucket_step_02_prepared_is_used(settings):
    p = storage.record_path(settings)
    p.parent.mkdir(parents=True)
    rec = dict(
        cluster=settings.aws.cluster_name,
        namespace=settings.kubernetes.namespace,
        service_account=settings.kubernetes.service_account,
        bucket="my-bucket",
        prefix="raytrain",
        mode="pod-identity",
        role_arn="arn:aws:iam::123456789012:role/r",
    )
    p.write_text(json.dumps(rec))
    assert jobs.job_defaults(settings).storage_path == "s3://my-bucket/raytrain"
    # a record of another cluster is not this run's storage
    p.write_text(json.dumps(dict(rec, cluster="other")))
    with pytest.raises(ConfigError):
        jobs.job_defaults(settings)


def test_an_explicit_storage_path_wins(settings):
    s = load(settings.__dict__["_env_file"], environ={}, target="aws", storage_path="s3://ckpt-b/p")
    assert jobs.job_defaults(s).storage_path == "s3://ckpt-b/p"


def test_aws_workers_may_download_a_hub_model_local_ones_may_not(settings, repo_root):
    from raytrain_helpers.steps import train

    s = load(settings.__dict__["_env_file"], environ={}, target="aws", storage_path="s3://ckpt-b/p")
    assert train.worker_env(s)["HF_HUB_OFFLINE"] == "0"
    assert train.worker_env(load(repo_root / "env.yaml", environ={}))["HF_HUB_OFFLINE"] == "1"
