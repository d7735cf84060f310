"""The storage role's policy against the S3 requests the job's storage layer really sends.

Recorded live, in each run: moto's S3 server (tests/fakes/aws/s3_recorder.py notes every HTTP request it answers)
serves pyarrow 26 driven by Ray Train 2.58's own storage code - ``StorageContext`` (``FileSystem.from_uri`` of
``s3://BUCKET/PREFIX``, ``create_dir``, the ``.validate_storage_marker`` write, ``get_file_info``), a checkpoint
persisted with ``persist_current_checkpoint``, the run listed (``_list_at_fs_path``) and the checkpoint deleted
(``delete_fs_path``) - and then the in-pod check (targets/aws/storage/check.py) run as a subprocess with
``AWS_ENDPOINT_URL_S3`` pointing at the server. The distinct requests must be exactly
``plan.s3_access.STORAGE_REQUESTS`` (the table the product checks policies with; when pyarrow or Ray change
what they send, this test fails and prints the new table: ``python -m tests.unit.plan.test_s3_access``).

Each request is mapped to what IAM evaluates (``s3_access.authorizations``: action, resource ARN, condition keys
such as ``s3:prefix``/``s3:delimiter``/``s3:max-keys`` taken from the request's own parameters, only those it
carries; a HeadObject answered 404 also needs ``s3:ListBucket``, without which S3 answers 403), and decided
under the rendered policy by ``plan.iam_eval.decide``: explicit Deny wins, then a matching Allow; Action
wildcards case-insensitive, Resource wildcards case-sensitive; within a Condition every operator and key must
hold and a key's listed values are alternatives; ``StringLike``/``StringEquals`` FAIL when the request lacks
the key (HeadBucket carries no ``s3:prefix``), the ``StringNot...`` forms and ``...IfExists`` hold then, and
``Null`` tests presence. The previous prefix-conditioned policy (kept below as OLD_POLICY) is caught: its
HeadBucket and its 404 on a missing key are denied.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from raytrain_helpers.core import config
from raytrain_helpers.plan import iam, iam_eval, s3_access
from raytrain_helpers.targets.aws.storage import check as storage_check

REPO = Path(__file__).resolve().parents[3]
ACCOUNT = "123456789012"
BUCKET, PREFIX = "ckpt-bucket", "team/raytrain"
pytestmark = pytest.mark.timeout(120)

#: The storage role's permission policy before this check existed: ListBucket only with an s3:prefix condition.
OLD_POLICY = {
    "Version": "2012-10-17",
    "Statement": [
        {
            "Sid": "ListTheRunPrefix",
            "Effect": "Allow",
            "Action": "s3:ListBucket",
            "Resource": f"arn:aws:s3:::{BUCKET}",
            "Condition": {"StringLike": {"s3:prefix": [PREFIX, f"{PREFIX}/*"]}},
        },
        {
            "Sid": "ObjectsUnderTheRunPrefix",
            "Effect": "Allow",
            "Action": ["s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload"],
            "Resource": f"arn:aws:s3:::{BUCKET}/{PREFIX}/*",
        },
    ],
}


def _ray_train_storage(uri: str) -> None:
    """What Ray Train 2.58 does with ``storage_path=uri`` for a run named ``run``: its own code."""
    import ray.train
    from ray.train.v2._internal.execution import storage as ray_storage

    ctx = ray_storage.StorageContext(uri, "run")
    with tempfile.TemporaryDirectory() as d:
        pathlib.Path(d, "shard.distcp").write_bytes(b"x" * 100)
        pathlib.Path(d, ".metadata").write_bytes(b"m")
        ckpt = ctx.persist_current_checkpoint(ray.train.Checkpoint.from_directory(d), "checkpoint")
    assert sorted(ray_storage._list_at_fs_path(ctx.storage_filesystem, ctx.experiment_fs_path)) == [
        ".validate_storage_marker",
        "checkpoint",
    ]
    ray_storage.delete_fs_path(ctx.storage_filesystem, ckpt.path)


def record(bucket: str = BUCKET, prefix: str = PREFIX) -> list[s3_access.S3Request]:
    """Every request moto's S3 answered for :func:`_ray_train_storage` and for the in-pod check."""
    import boto3

    from tests.fakes.aws.s3_recorder import recording_s3

    with recording_s3() as rec:
        env = {"AWS_ACCESS_KEY_ID": "fake", "AWS_SECRET_ACCESS_KEY": "fake", "AWS_REGION": "us-west-2"}
        s3 = boto3.client("s3", endpoint_url=rec.endpoint, region_name="us-west-2", **_keys(env))
        s3.create_bucket(Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
        rec.take()
        env["AWS_ENDPOINT_URL_S3"] = rec.endpoint
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            _ray_train_storage(f"s3://{bucket}/{prefix}")
        finally:
            for k, v in saved.items():
                os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)
        run_check(f"s3://{bucket}/{prefix}", "check", dict(os.environ, **env))
        return rec.take()


def _keys(env: dict[str, str]) -> dict[str, str]:
    return {"aws_access_key_id": env["AWS_ACCESS_KEY_ID"], "aws_secret_access_key": env["AWS_SECRET_ACCESS_KEY"]}


def run_check(uri: str, folder: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    source = Path(storage_check.__file__).read_text()
    return subprocess.run(
        [sys.executable, "-c", source, uri, folder], env=env, capture_output=True, text=True, timeout=60
    )


def table(requests: list[s3_access.S3Request], bucket: str = BUCKET, prefix: str = PREFIX) -> list[tuple]:
    own = [r for r in requests if r.bucket != s3_access.BACKEND_PROBE]
    return sorted({s3_access.shape(r, bucket, prefix) for r in own})


@pytest.fixture(scope="module")
def recorded() -> list[s3_access.S3Request]:
    return record()


def settings(**params):
    return config.load(REPO / "env.yaml", environ={}, check_installed_ray=False, target="aws", **params)


def test_the_recorded_requests_are_the_table_the_product_checks_with(recorded):
    probes = [r for r in recorded if r.bucket == s3_access.BACKEND_PROBE]
    assert probes and {(r.method, r.key) for r in probes} == {("HEAD", "")}, "the backend probe: one HeadBucket per fs"
    assert {r.bucket for r in recorded} == {BUCKET, s3_access.BACKEND_PROBE}
    assert table(recorded) == sorted(s3_access.STORAGE_REQUESTS), "\n".join(map(repr, table(recorded)))
    ops = {r.operation for r in recorded}
    assert ops == {
        "HeadBucket",
        "PutObject",
        "CreateMultipartUpload",
        "UploadPart",
        "CompleteMultipartUpload",
        "HeadObject",
        "GetObject",
        "ListObjectsV2",
        "DeleteObjects",
        "DeleteObject",
    }


def test_the_rendered_policy_allows_every_recorded_request_and_nothing_outside(recorded):
    s = settings(storage_path=f"s3://{BUCKET}/{PREFIX}")
    loc = iam.storage_location(s, ACCOUNT)
    doc = iam.permission_policy(s, loc)
    checked = []
    for req in recorded:
        for auth in s3_access.authorizations(req):
            verdict = iam_eval.decide(doc, auth.action, auth.resource, dict(auth.context))
            if req.bucket == s3_access.BACKEND_PROBE:  # expected to fail: arrow only reads which S3 answers
                assert verdict == iam_eval.IMPLICIT_DENY
                continue
            assert verdict == iam_eval.ALLOW, (req, auth)
            checked.append(auth.action)
    assert set(checked) == {"s3:ListBucket", "s3:GetObject", "s3:PutObject", "s3:DeleteObject"}
    assert iam.policy_problems(doc, loc) == []
    for action, resource in [
        ("s3:PutObject", f"arn:aws:s3:::{BUCKET}/team/other/x"),
        ("s3:GetObject", f"arn:aws:s3:::{BUCKET}/team/x"),
        ("s3:PutObject", f"arn:aws:s3:::{BUCKET}/team/x"),
        ("s3:PutObject", f"arn:aws:s3:::{BUCKET}/{PREFIX}X/x"),
        ("s3:ListBucket", "arn:aws:s3:::other-bucket"),
        ("s3:DeleteBucket", f"arn:aws:s3:::{BUCKET}"),
        ("s3:PutBucketPolicy", f"arn:aws:s3:::{BUCKET}"),
    ]:
        assert iam_eval.decide(doc, action, resource) == iam_eval.IMPLICIT_DENY, (action, resource)


def test_the_old_prefix_only_policy_is_caught(recorded):
    loc = iam.StorageLocation(BUCKET, PREFIX)
    denied = []
    for req in recorded:
        if req.bucket == s3_access.BACKEND_PROBE:
            continue
        for auth in s3_access.authorizations(req):
            if iam_eval.decide(OLD_POLICY, auth.action, auth.resource, dict(auth.context)) != iam_eval.ALLOW:
                denied.append((req.operation, req.key, auth.action))
    assert ("HeadBucket", "", "s3:ListBucket") in denied  # create_dir's BucketExists: no s3:prefix to match
    assert ("HeadObject", f"{PREFIX}/check/missing", "s3:ListBucket") in denied  # 403, not 404
    assert ("PutObject", "team/", "s3:PutObject") in denied  # create_dir's marker above the prefix
    problems = iam.policy_problems(OLD_POLICY, loc)
    assert any(p.startswith(f"HeadBucket HEAD /{BUCKET}/ (no condition keys) needs s3:ListBucket") for p in problems)


def test_the_table_expands_for_any_prefix_depth():
    one = {(r.method, r.key) for r in s3_access.storage_requests("b", "raytrain")}
    assert ("PUT", "raytrain/") in one and not any(k.endswith("/") and "raytrain" not in k for _, k in one if k)
    three = {r.key for r in s3_access.storage_requests("b", "a/b/c") if r.method == "PUT"}
    assert {"a/", "a/b/", "a/b/c/"} <= three and not any(k.startswith("{") for k in three)
    loc = iam.StorageLocation("b", "a/b/c")
    assert loc.marker_arns == ["arn:aws:s3:::b/a/", "arn:aws:s3:::b/a/b/"]


@pytest.mark.parametrize(
    "block,context,holds",
    [
        ({"StringLike": {"s3:prefix": ["p", "p/*"]}}, {}, False),  # key absent: StringLike fails
        ({"StringLike": {"s3:prefix": ["p", "p/*"]}}, {"s3:prefix": "p/run/"}, True),
        ({"StringLike": {"s3:prefix": "p/*"}}, {"s3:prefix": "q/"}, False),
        ({"StringEquals": {"s3:prefix": "p/"}}, {}, False),
        ({"StringEquals": {"s3:prefix": "p/"}}, {"s3:prefix": "p/"}, True),
        ({"StringNotEquals": {"s3:prefix": "p/"}}, {}, True),
        ({"StringLikeIfExists": {"s3:prefix": "p/*"}}, {}, True),
        ({"Null": {"s3:prefix": "true"}}, {}, True),
        ({"Null": {"s3:prefix": "true"}}, {"s3:prefix": "p/"}, False),
        ({"StringLike": {"s3:prefix": "p/*"}, "StringEquals": {"s3:delimiter": "/"}}, {"s3:prefix": "p/x"}, False),
    ],
)
def test_condition_evaluation(block, context, holds):
    assert iam_eval.conditions_hold(block, context) is holds


def test_explicit_deny_wins_and_unknown_operators_are_refused():
    doc = {
        "Statement": [
            {"Effect": "Allow", "Action": "s3:*", "Resource": "arn:aws:s3:::b/*"},
            {"Effect": "Deny", "Action": "s3:deleteobject", "Resource": "arn:aws:s3:::b/keep/*"},
        ]
    }
    assert iam_eval.decide(doc, "s3:GetObject", "arn:aws:s3:::b/x") == iam_eval.ALLOW
    assert iam_eval.decide(doc, "s3:DeleteObject", "arn:aws:s3:::b/keep/x") == iam_eval.EXPLICIT_DENY
    assert iam_eval.decide(doc, "s3:GetObject", "arn:aws:s3:::B/x") == iam_eval.IMPLICIT_DENY  # ARNs: case
    with pytest.raises(ValueError, match="NumericLessThan"):
        iam_eval.conditions_hold({"NumericLessThan": {"s3:max-keys": "10"}}, {"s3:max-keys": "5"})


@pytest.mark.parametrize(
    "step,error,expected",
    [
        (  # captured here: pyarrow 26 on moto's 403 to HeadBucket
            "create_dir",
            "OSError: When testing for existence of bucket 'ckpt-bucket': AWS Error ACCESS_DENIED during HeadBucket "
            "operation: No response body.",
            ("HeadBucket", "ACCESS_DENIED", "s3:ListBucket"),
        ),
        (  # the text reported in ray-project/ray#55055 (pyarrow 21)
            "get_file_info missing",
            "OSError: When reading information for key 'p/check/missing' in bucket 'b': AWS Error ACCESS_DENIED "
            "during HeadObject operation: No response body.",
            ("HeadObject", "ACCESS_DENIED", "s3:ListBucket"),
        ),
        (  # the text reported in ray-project/ray#50820
            "list",
            "When listing objects under key 'p/check/' in bucket 'b': AWS Error ACCESS_DENIED during ListObjectsV2 "
            "operation: Access Denied",
            ("ListObjectsV2", "ACCESS_DENIED", "s3:ListBucket"),
        ),
        (  # the same HeadObject in another step needs s3:GetObject
            "get_file_info",
            "OSError: When reading information for key 'p/check/probe.txt' in bucket 'b': AWS Error ACCESS_DENIED "
            "during HeadObject operation: No response body.",
            ("HeadObject", "ACCESS_DENIED", "s3:GetObject"),
        ),
        (  # the others: arrow's ErrorToStatus format (cpp/src/arrow/filesystem/s3_internal.h)
            "read",
            "AWS Error UNKNOWN (HTTP status 403) during GetObject operation: x",
            ("GetObject", "ACCESS_DENIED", "s3:GetObject"),
        ),
        (
            "delete",
            "AWS Error ACCESS_DENIED during DeleteObjects operation: x",
            ("DeleteObjects", "ACCESS_DENIED", "s3:DeleteObject"),
        ),
        (
            "write",
            "AWS Error NO_SUCH_BUCKET during CreateMultipartUpload operation: x",
            ("CreateMultipartUpload", "NO_SUCH_BUCKET", "s3:PutObject"),
        ),
    ],
)
def test_pyarrow_errors_name_the_operation_and_the_iam_action(step, error, expected):
    d = s3_access.denial(step, error)
    assert (d.operation, d.kind, d.action) == expected
    assert s3_access.denial("read", "read 0 bytes, not the 23 written") is None


if __name__ == "__main__":  # print the table for plan/s3_access.py
    sys.path.insert(0, str(REPO))
    for row in table(record()):
        print(f"    {row!r},")
