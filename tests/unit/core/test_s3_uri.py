"""core.s3_uri: ``train.storage_path`` on S3 refused when the settings are read - no bucket, a name S3 refuses
(the general purpose bucket naming rules), wildcards - naming the field and the fix; in ``config`` and ``render``
as a new user types it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from raytrain_helpers.core import config, s3_uri

REPO_ENV = Path(__file__).resolve().parents[3] / "env.yaml"


@pytest.mark.parametrize(
    "value,needle",
    [
        ("s3://", "names no bucket. Fix: s3://BUCKET/PREFIX"),
        ("s3:///raytrain", "names no bucket"),
        ("s3:/bucket/x", "names no bucket"),
        ("s3://Bad_Bucket/x", "'Bad_Bucket' is not a bucket name S3 accepts"),
        ("s3://ab/x", "not a bucket name S3 accepts"),
        ("s3://a..b/x", "two adjacent periods"),
        ("s3://192.168.5.4/x", "formatted as an IP address"),
        ("s3://xn--bucket/x", "the prefix 'xn--' is reserved"),
        ("s3://my-ap-s3alias/x", "the suffix '-s3alias' is reserved"),
        ("s3://ok-bucket/a*", "may not hold wildcards"),
    ],
)
def test_bad_s3_storage_is_refused_naming_the_field(value, needle):
    with pytest.raises(config.ConfigError) as e:
        config.load(REPO_ENV, environ={}, check_installed_ray=False, target="aws", storage_path=value)
    assert "train.storage_path" in str(e.value) and needle in str(e.value) and "Fix:" in str(e.value)


@pytest.mark.parametrize("value", ["", "/mnt/ckpts", "s3://ok-bucket", "s3://ok-bucket/", "s3://my.ckpts-1/team/run"])
def test_good_storage_paths_pass_unchanged(value):
    s = config.load(REPO_ENV, environ={}, check_installed_ray=False, target="aws", storage_path=value)
    assert s.train.storage_path == value
    assert s3_uri.check_storage_uri(value) == value


def test_the_fix_suggests_a_name_s3_accepts():
    with pytest.raises(ValueError, match=r"e\.g\. s3://bad-bucket/x$"):
        s3_uri.check_storage_uri("s3://Bad_Bucket/x")
    assert s3_uri.bucket_name_problem("bad-bucket") == ""


@pytest.mark.parametrize("command", ["config", "render"])
@pytest.mark.parametrize("value", ["s3://", "s3://Bad_Bucket/x"])
def test_config_and_render_exit_non_zero_naming_the_field(command, value, tmp_path):
    extra = ["--target", "aws", "--out", str(tmp_path / "out")] if command == "render" else []
    r = subprocess.run(
        [sys.executable, "-m", "raytrain_helpers.cli", command, "--env-file", str(REPO_ENV), *extra]
        + ["-p", "storage_path", value],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 2, r.stdout + r.stderr
    assert f"train.storage_path = {value!r} is invalid" in r.stderr and "Fix: s3://BUCKET/PREFIX" in r.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "uri,parsed",
    [
        ("s3://ok-bucket", ("ok-bucket", "")),
        ("s3://ok-bucket/", ("ok-bucket", "")),
        ("s3://my.ckpts-1/team/run/", ("my.ckpts-1", "team/run")),
    ],
)
def test_the_one_parser_gives_bucket_and_prefix(uri, parsed):
    assert s3_uri.parse_s3_uri(uri) == parsed


@pytest.mark.parametrize(
    "uri,needle",
    [
        ("/mnt/ckpts", "names no bucket"),
        ("s3://xn--bucket/x", "the prefix 'xn--' is reserved"),
        ("s3://192.168.5.4/x", "formatted as an IP address"),
        ("s3://amzn-s3-demo-bucket/x", "the prefix 'amzn-s3-demo-' is reserved"),
        ("s3://data--x-s3/x", "the suffix '--x-s3' is reserved"),
        ("s3://ok-bucket/a//b", "may not hold wildcards or '//'"),
    ],
)
def test_the_iam_plan_reads_storage_with_the_same_rules(uri, needle):
    """plan.iam takes the bucket of train.storage_path with core.s3_uri's rules (the S3 naming rules), not looser
    ones of its own: a reserved prefix or suffix, or an IP address, is refused there too, naming the setting."""
    from raytrain_helpers.plan import iam

    with pytest.raises(config.ConfigError) as e:
        iam.storage_bucket_and_prefix(uri)
    assert str(e.value).startswith(f"train.storage_path = {uri!r}: ") and needle in str(e.value)
    assert getattr(iam, "parse_s3_uri", s3_uri.parse_s3_uri) is s3_uri.parse_s3_uri  # one parser, in core


@pytest.mark.parametrize("bucket", ["xn--ckpts", "ckpts-s3alias", "10.0.0.1", "Bad_Bucket"])
def test_aws_storage_bucket_follows_the_same_naming_rules(bucket):
    with pytest.raises(config.ConfigError) as e:
        config.load(REPO_ENV, environ={}, check_installed_ray=False, target="aws", storage_bucket=bucket)
    assert "storage_bucket" in str(e.value)
    assert repr(bucket) in str(e.value) and "Fix:" in str(e.value)
