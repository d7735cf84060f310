"""plan.iam: where the checkpoints go, the storage role's policies (exact actions and resources, no wildcard, nothing
outside the prefix), the ServiceAccount, and the RayCluster's identity and Hugging Face cache against the real
schemas (core kinds with kubernetes-validate, RayCluster/RayJob with the KubeRay v1.7.0 CRDs)."""

from __future__ import annotations

import copy
import math
from pathlib import Path

import pytest

from raytrain_helpers.core import config
from raytrain_helpers.plan import iam, raycluster
from raytrain_helpers.plan.memory import count_params
from tests.helpers import aws_settings
from tests.unit.plan.test_manifests import core_errors, crd_errors

REPO = Path(__file__).resolve().parents[3]
ACCOUNT = "123456789012"


settings = aws_settings


# --------------------------------------------------------------------------------------------
# Where the checkpoints go
# --------------------------------------------------------------------------------------------


def test_derived_bucket_is_a_valid_s3_name_within_63():
    loc = iam.storage_location(settings(), ACCOUNT)
    assert loc == iam.StorageLocation("raytrain-tutorial-123456789012-us-west-2", "raytrain", derived=True)
    long = iam.storage_location(settings(cluster_name="A" + "b-" * 49), ACCOUNT)
    assert (
        len(long.bucket) <= 63 and config.BUCKET_RE.match(long.bucket) and long.bucket.endswith(f"-{ACCOUNT}-us-west-2")
    )
    assert long.bucket.startswith("ab-b") and "--" not in long.bucket.split(ACCOUNT)[0][:-1]


def test_storage_path_names_bucket_and_prefix():
    loc = iam.storage_location(settings(storage_path="s3://my-ckpts/team/run/"), ACCOUNT)
    assert (loc.bucket, loc.prefix, loc.derived) == ("my-ckpts", "team/run", False)
    assert loc.uri == "s3://my-ckpts/team/run" and loc.objects_arn == "arn:aws:s3:::my-ckpts/team/run/*"
    assert iam.storage_location(settings(storage_bucket="other-b"), ACCOUNT).bucket == "other-b"


@pytest.mark.parametrize(
    "params,match",
    [
        (dict(storage_path="/mnt/x"), "train.storage_path = '/mnt/x' is not reachable from the worker pods"),
        (dict(storage_path="s3://Bad_Bucket/x"), "is not a bucket name S3 accepts"),
        (dict(storage_path="s3://ok-bucket/a*"), "may not hold wildcards"),
        (
            dict(storage_path="s3://one-b/x", storage_bucket="two-b"),
            "aws.storage_bucket = 'two-b' but train.storage_path",
        ),
    ],
)
def test_bad_storage_settings_name_the_setting(params, match):
    with pytest.raises(config.ConfigError, match=match):
        iam.storage_location(settings(**params), ACCOUNT)


def test_role_name_fits_iam_and_differs_per_cluster():
    assert iam.role_name(settings()) == "raytrain-tutorial-ray-train-raytrain-s3"
    a, b = (iam.role_name(settings(cluster_name="c" * 60 + x)) for x in ("a", "b"))
    assert len(a) == len(b) == 64 and a != b


# --------------------------------------------------------------------------------------------
# The policies: exactly these actions on exactly these resources
# --------------------------------------------------------------------------------------------


def _loc(**params):
    return iam.storage_location(settings(**params), ACCOUNT)


def _grants(doc):
    return sorted(
        (a, r, str(st.get("Condition")))
        for st in doc["Statement"]
        for a in (st["Action"] if isinstance(st["Action"], list) else [st["Action"]])
        for r in (st["Resource"] if isinstance(st["Resource"], list) else [st["Resource"]])
    )


def test_permission_policy_is_exactly_least_privilege():
    """ListBucket on the bucket without a condition (HeadBucket carries no s3:prefix: tests/unit/plan/
    test_s3_access.py), objects only below the prefix, PutObject also on the folder markers above it."""
    s = settings(storage_path="s3://ckpt-bucket/runs")
    loc = iam.storage_location(s, ACCOUNT)
    doc = iam.permission_policy(s, loc)
    assert all(st["Effect"] == "Allow" for st in doc["Statement"])
    objects = "arn:aws:s3:::ckpt-bucket/runs/*"
    assert _grants(doc) == [
        ("s3:AbortMultipartUpload", objects, "None"),
        ("s3:DeleteObject", objects, "None"),
        ("s3:GetObject", objects, "None"),
        ("s3:ListBucket", "arn:aws:s3:::ckpt-bucket", "None"),
        ("s3:PutObject", objects, "None"),
    ]
    assert iam.policy_problems(doc, loc) == []
    deep = settings(storage_path="s3://ckpt-bucket/team/a/runs")
    dloc = iam.storage_location(deep, ACCOUNT)
    ddoc = iam.permission_policy(deep, dloc)
    markers = [g for g in _grants(ddoc) if g[1].endswith("/")]
    assert markers == [
        ("s3:PutObject", "arn:aws:s3:::ckpt-bucket/team/", "None"),
        ("s3:PutObject", "arn:aws:s3:::ckpt-bucket/team/a/", "None"),
    ]
    assert iam.policy_problems(ddoc, dloc) == []


@pytest.mark.parametrize(
    "edit,expected",
    [
        (lambda d: d["Statement"][1].update(Action="s3:*"), "wildcard action 's3:*'"),
        (lambda d: d["Statement"][1]["Action"].append("s3:Get*"), "wildcard action 's3:Get*'"),
        (
            lambda d: d["Statement"][1].update(Resource="arn:aws:s3:::ckpt-bucket/*"),
            "outside arn:aws:s3:::ckpt-bucket/runs/*",
        ),
        (lambda d: d["Statement"][1]["Action"].append("s3:PutBucketPolicy"), "'s3:PutBucketPolicy' is not needed"),
        (
            lambda d: d["Statement"][0].update(Condition={"StringLike": {"s3:prefix": ["runs", "runs/*"]}}),
            "HeadBucket HEAD /ckpt-bucket/ (no condition keys) needs s3:ListBucket on arn:aws:s3:::ckpt-bucket",
        ),
        (lambda d: d["Statement"][0].update(Resource="arn:aws:s3:::other"), "outside arn:aws:s3:::ckpt-bucket"),
        (lambda d: d["Statement"][1]["Action"].remove("s3:DeleteObject"), "missing s3:DeleteObject"),
        (lambda d: d["Statement"][1].update(NotAction="s3:GetObject"), "NotAction grants everything else"),
        (
            lambda d: d["Statement"].append({"Effect": "Deny", "Action": "s3:GetObject", "Resource": "*"}),
            "HeadObject HEAD /ckpt-bucket/runs/run/.validate_storage_marker (no condition keys) needs s3:GetObject",
        ),
    ],
)
def test_policy_check_fails_on_anything_beyond_the_prefix_or_short_of_the_job(edit, expected):
    s = settings(storage_path="s3://ckpt-bucket/runs")
    loc = iam.storage_location(s, ACCOUNT)
    doc = copy.deepcopy(iam.permission_policy(s, loc))
    edit(doc)
    assert any(expected in p for p in iam.policy_problems(doc, loc)), iam.policy_problems(doc, loc)


def test_trust_policies_pod_identity_and_irsa():
    s = settings()
    pod = iam.trust_policy(s, "pod-identity", ACCOUNT)
    (st,) = pod["Statement"]
    assert st["Principal"] == {"Service": "pods.eks.amazonaws.com"}
    assert st["Action"] == ["sts:AssumeRole", "sts:TagSession"]
    assert st["Condition"] == {
        "StringEquals": {
            "aws:RequestTag/eks-cluster-arn": f"arn:aws:eks:us-west-2:{ACCOUNT}:cluster/raytrain-tutorial",
            "aws:RequestTag/kubernetes-namespace": "ray-train",
            "aws:RequestTag/kubernetes-service-account": "raytrain",
        }
    }
    issuer = "oidc.eks.us-west-2.amazonaws.com/id/ABCDEF"
    (st,) = iam.trust_policy(s, "irsa", ACCOUNT, "https://" + issuer)["Statement"]
    assert st["Principal"] == {"Federated": f"arn:aws:iam::{ACCOUNT}:oidc-provider/{issuer}"}
    assert st["Action"] == "sts:AssumeRoleWithWebIdentity"
    assert st["Condition"]["StringEquals"] == {
        f"{issuer}:sub": "system:serviceaccount:ray-train:raytrain",
        f"{issuer}:aud": "sts.amazonaws.com",
    }
    with pytest.raises(config.ConfigError, match="has no OIDC issuer"):
        iam.trust_policy(s, "irsa", ACCOUNT, "")


# --------------------------------------------------------------------------------------------
# The ServiceAccount and the RayCluster against the real schemas
# --------------------------------------------------------------------------------------------


def test_service_account_validates_with_and_without_irsa():
    s = settings(service_account="ray-pods")
    plain = iam.render_service_account(s)
    irsa = iam.render_service_account(s, f"arn:aws:iam::{ACCOUNT}:role/r")
    assert plain["metadata"]["name"] == "ray-pods" and "annotations" not in plain["metadata"]
    assert irsa["metadata"]["annotations"] == {"eks.amazonaws.com/role-arn": f"arn:aws:iam::{ACCOUNT}:role/r"}
    for obj in (plain, irsa):
        assert core_errors(obj) == [] and core_errors(obj, s.aws.k8s_version) == []


@pytest.mark.parametrize("secret", ["", "hf-token"])
def test_raycluster_and_rayjob_carry_the_identity_and_hf_cache(secret):
    s = settings(service_account="ray-pods", hf_token_secret=secret, model_preset="qwen2.5-1.5b")
    for obj in (raycluster.render_raycluster(s), raycluster.render_rayjob(s)):
        assert crd_errors(obj) == []
        spec = obj["spec"].get("rayClusterSpec") or obj["spec"]
        head, worker = spec["headGroupSpec"]["template"]["spec"], spec["workerGroupSpecs"][0]["template"]["spec"]
        assert head["serviceAccountName"] == worker["serviceAccountName"] == "ray-pods"
        env = {e["name"]: e for e in worker["containers"][0]["env"]}
        assert env["HF_HOME"]["value"] == raycluster.HF_HOME
        cache = next(v for v in worker["volumes"] if v["name"] == "hf-cache")
        assert cache == {"name": "hf-cache", "emptyDir": {"sizeLimit": "10Gi"}}
        if secret:
            assert env["HF_TOKEN"] == {
                "name": "HF_TOKEN",
                "valueFrom": {"secretKeyRef": {"name": "hf-token", "key": "HF_TOKEN", "optional": True}},
            }
        else:
            assert "HF_TOKEN" not in env
    assert raycluster.check_raycluster(raycluster.render_raycluster(s), s) == []


def test_hf_cache_size_from_the_model_or_the_setting():
    big = dict(config.PRESETS["qwen2.5-1.5b"], num_hidden_layers=280)  # ~14 G parameters
    s = settings()
    s.__dict__["model_config_dict"] = lambda: big  # a model whose bf16 weights are ~28 GiB
    weights_gib = count_params(big)["total"] * 2 / 2**30
    assert weights_gib > 20 and raycluster.hf_cache_gib(s) == math.ceil(2 * weights_gib) == 50
    assert raycluster.hf_cache_gib(settings(hf_cache_gib=200)) == 200
    assert raycluster.hf_cache_gib(settings()) == raycluster.HF_CACHE_MIN_GIB


def test_structural_check_names_a_missing_service_account_and_a_literal_token():
    s = settings(hf_token_secret="hf-token")
    rc = raycluster.render_raycluster(s)
    bad = copy.deepcopy(rc)
    del bad["spec"]["workerGroupSpecs"][0]["template"]["spec"]["serviceAccountName"]
    env = bad["spec"]["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]["env"]
    token = next(e for e in env if e["name"] == "HF_TOKEN")
    token.pop("valueFrom")
    token["value"] = "hf_xxx"
    problems = raycluster.check_raycluster(bad, s)
    assert any("serviceAccountName None, not 'raytrain'" in p for p in problems), problems
    assert any("HF_TOKEN must come from an optional secretKeyRef" in p for p in problems), problems
    assert crd_errors(bad) == []  # the schema cannot see either: that is why the check exists


def test_policies_text_shows_the_rendered_templates_with_placeholders():
    import json

    s = settings()
    text = iam.policies_text(s)
    assert text.splitlines()[0] == (
        "# checkpoint storage: s3://raytrain-tutorial-ACCOUNT-us-west-2/raytrain (bucket name derived from cluster, "
        "account and region)"
    )
    loc = iam.storage_location(s, "ACCOUNT")
    assert json.dumps(iam.permission_policy(s, loc), indent=2) in text
    assert json.dumps(iam.trust_policy(s, "pod-identity", "ACCOUNT"), indent=2) in text
    irsa = iam.policies_text(settings(pod_identity="irsa"))
    assert "trust policy (irsa; manifests/iam-trust-irsa.json.j2)" in irsa and "sts:AssumeRoleWithWebIdentity" in irsa
    local = iam.policies_text(settings(target="local", storage_path="/tmp/ckpts"))
    assert local.startswith("# checkpoint storage: s3://raytrain-tutorial-ACCOUNT-us-west-2/raytrain")
