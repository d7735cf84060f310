"""One storage role for every namespace (``aws.storage_per_namespace``): the policy reads the namespace from the
session tag EKS Pod Identity attaches (``${aws:PrincipalTag/kubernetes-namespace}``), and ``plan.iam_eval`` fills
policy variables from the principal's tags, so these tests decide, request by request of what the job's storage
layer sends (``plan.s3_access``), that attendee A uses their own prefix and can neither read nor write B's."""

from __future__ import annotations

from pathlib import Path

import pytest

from raytrain_helpers.core import config
from raytrain_helpers.plan import iam, iam_eval, s3_access

REPO = Path(__file__).resolve().parents[3]
ACCOUNT = "123456789012"
OBJECT_ACTIONS = set(iam.OBJECT_ACTIONS)


def settings(namespace: str, **params):
    return config.load(REPO / "env.yaml", environ={}, check_installed_ray=False, target="aws",
                       storage_per_namespace=True, namespace=namespace, **params)  # fmt: skip


def tags_of(namespace: str) -> dict[str, str]:
    return {"aws:PrincipalTag/kubernetes-namespace": namespace}


def test_the_prefix_is_per_namespace_and_the_policy_names_the_session_tag():
    ann = settings("ray-train-ann", storage_path="s3://ws-bucket/ckpt")
    loc = iam.storage_location(ann, ACCOUNT)
    assert loc == iam.StorageLocation("ws-bucket", "ckpt/ray-train-ann")
    doc = iam.permission_policy(ann, loc)
    bob = settings("ray-train-bob", storage_path="s3://ws-bucket/ckpt")
    assert doc == iam.permission_policy(bob, iam.storage_location(bob, ACCOUNT))  # one policy for every namespace
    (objects,) = [s for s in doc["Statement"] if s["Sid"] == "ObjectsUnderTheRunPrefix"]
    assert objects["Resource"] == "arn:aws:s3:::ws-bucket/ckpt/${aws:PrincipalTag/kubernetes-namespace}/*"
    assert iam.policy_problems(doc, iam.policy_location(ann, loc), iam.principal_tags(ann)) == []


def test_attendee_a_uses_its_own_prefix_and_cannot_read_or_write_b_s():
    ann, bob = settings("ray-train-ann"), settings("ray-train-bob")
    doc = iam.permission_policy(ann, iam.storage_location(ann, ACCOUNT))
    a_loc, b_loc = iam.storage_location(ann, ACCOUNT), iam.storage_location(bob, ACCOUNT)
    assert iam.uncovered(doc, a_loc, iam.principal_tags(ann)) == []  # every request of the job on A's prefix
    assert iam.uncovered(doc, b_loc, iam.principal_tags(bob)) == []  # and B on B's
    denied = []  # every object of B's prefix (the folder marker above all prefixes is shared: an empty object)
    for req in s3_access.storage_requests(b_loc.bucket, b_loc.prefix):
        for auth in s3_access.authorizations(req):
            verdict = iam_eval.decide(
                doc, auth.action, auth.resource, {**dict(auth.context), **tags_of("ray-train-ann")}
            )
            if auth.action in OBJECT_ACTIONS and auth.resource.startswith(f"{b_loc.bucket_arn}/{b_loc.prefix}/"):
                assert verdict == iam_eval.IMPLICIT_DENY, (auth, verdict)
                denied.append(auth.action)
    assert {"s3:GetObject", "s3:PutObject", "s3:DeleteObject"} <= set(denied)
    for action in OBJECT_ACTIONS:  # by hand too: A on B's checkpoint, with and without A's tag
        b_key = f"arn:aws:s3:::{b_loc.bucket}/{b_loc.prefix}/tutorial/checkpoint_0/model.pt"
        assert iam_eval.decide(doc, action, b_key, tags_of("ray-train-ann")) == iam_eval.IMPLICIT_DENY
        assert iam_eval.decide(doc, action, b_key, tags_of("ray-train-bob")) == iam_eval.ALLOW
        assert iam_eval.decide(doc, action, b_key, {}) == iam_eval.IMPLICIT_DENY  # no session tag: no value


@pytest.mark.parametrize(
    "pattern, context, text, matches",
    [
        ("a/${aws:PrincipalTag/ns}/*", {"aws:principaltag/ns": "x"}, "a/x/k", True),
        ("a/${aws:PrincipalTag/ns}/*", {"aws:PrincipalTag/ns": "x"}, "a/y/k", False),
        ("a/${aws:PrincipalTag/ns}/k", {"aws:PrincipalTag/ns": "*"}, "a/zz/k", False),  # a value is no wildcard
        ("a/${aws:PrincipalTag/ns}/k", {"aws:PrincipalTag/ns": "*"}, "a/*/k", True),
    ],
)
def test_policy_variables_are_replaced_from_the_request_context(pattern, context, text, matches):
    assert iam_eval.wildcard_match(pattern, text, context=context) is matches


def test_an_unresolved_variable_matches_nothing_and_conditions_read_variables():
    with pytest.raises(iam_eval.Unresolved):
        iam_eval.wildcard_match("a/${aws:PrincipalTag/ns}", "a/x", context={})
    with pytest.raises(ValueError, match="not evaluated here"):  # defaults and escapes: never guessed
        iam_eval.wildcard_match("a/${aws:PrincipalTag/ns, 'none'}", "a/none", context={})
    same_tag = {"StringEquals": {"s3:ExistingObjectTag/ns": "${aws:PrincipalTag/ns}"}}
    doc = {"Statement": [{"Effect": "Allow", "Action": "s3:GetObject", "Resource": "arn:aws:s3:::b/*",
                          "Condition": same_tag}]}  # fmt: skip
    ctx = {"aws:PrincipalTag/ns": "x", "s3:ExistingObjectTag/ns": "x"}
    assert iam_eval.decide(doc, "s3:GetObject", "arn:aws:s3:::b/k", ctx) == iam_eval.ALLOW
    ctx["s3:ExistingObjectTag/ns"] = "y"
    assert iam_eval.decide(doc, "s3:GetObject", "arn:aws:s3:::b/k", ctx) == iam_eval.IMPLICIT_DENY
    assert iam_eval.decide(doc, "s3:GetObject", "arn:aws:s3:::b/k", {"s3:ExistingObjectTag/ns": "x"}) == (
        iam_eval.IMPLICIT_DENY
    )


def test_folder_markers_are_the_levels_above_the_namespace_never_a_cut_variable():
    ann = settings("ray-train-ann", storage_path="s3://ws-bucket/ckpt/runs")
    loc = iam.storage_location(ann, ACCOUNT)
    doc = iam.permission_policy(ann, loc)
    (markers,) = [s for s in doc["Statement"] if s["Sid"] == "FolderMarkersAboveThePrefix"]
    # the folders above the real prefix ckpt/runs/ray-train-ann: the variable is one level, not cut at its '/'
    assert markers["Resource"] == ["arn:aws:s3:::ws-bucket/ckpt/", "arn:aws:s3:::ws-bucket/ckpt/runs/"]
    assert iam.policy_location(ann, loc).parents == loc.parents == ["ckpt", "ckpt/runs"]
    assert iam.policy_problems(doc, iam.policy_location(ann, loc), iam.principal_tags(ann)) == []
    # the checker refuses the malformed resource that cutting the variable at its '/' gave
    markers["Resource"].append("arn:aws:s3:::ws-bucket/ckpt/runs/${aws:PrincipalTag/")
    problems = iam.policy_problems(doc, iam.policy_location(ann, loc), iam.principal_tags(ann))
    assert any("policy variable that is not closed" in p for p in problems), problems


def _assume(doc, tags):
    """The trust policy's decision on EKS Pod Identity's AssumeRole/TagSession: the request carries the session
    tags the User Guide lists (pod-id-abac.html) and nothing else it does not document."""
    context = {f"aws:RequestTag/{k}": v for k, v in tags.items()}
    return {a: iam_eval.decide(doc, a, "", context) for a in ("sts:AssumeRole", "sts:TagSession")}


def pod_tags(namespace="ray-train", sa="raytrain", cluster="raytrain-tutorial", region="us-west-2", account=ACCOUNT):
    """The session tags EKS Pod Identity sets (Amazon EKS User Guide, pod-id-abac.html)."""
    return {
        "eks-cluster-arn": f"arn:aws:eks:{region}:{account}:cluster/{cluster}",
        "eks-cluster-name": cluster,
        "kubernetes-namespace": namespace,
        "kubernetes-service-account": sa,
        "kubernetes-pod-name": "raytrain-head-abcde",
        "kubernetes-pod-uid": "0f0e0d0c-0000-4000-8000-000000000000",
    }


def test_the_trust_policy_conditions_only_on_the_session_tags_eks_documents():
    """A condition on a key the service is not documented to send (e.g. aws:SourceAccount) would deny every pod."""
    for s in (settings("ray-train"), settings("ray-train-ann")):
        (st,) = iam.trust_policy(s, "pod-identity", ACCOUNT)["Statement"]
        keys = [k for block in st["Condition"].values() for k in block]
        assert keys and all(
            k.startswith("aws:RequestTag/") and k.split("/", 1)[1] in iam.POD_IDENTITY_SESSION_TAGS for k in keys
        ), keys


def test_the_storage_role_trusts_only_its_cluster_namespace_and_service_account():
    s = config.load(REPO / "env.yaml", environ={}, check_installed_ray=False, target="aws")
    doc = iam.trust_policy(s, "pod-identity", ACCOUNT)
    allow = {"sts:AssumeRole": iam_eval.ALLOW, "sts:TagSession": iam_eval.ALLOW}
    assert _assume(doc, pod_tags()) == allow
    for other in (
        pod_tags(namespace="kube-system"),  # any other namespace's association
        pod_tags(sa="default"),
        pod_tags(cluster="someone-elses"),
        pod_tags(region="eu-west-1"),  # a cluster of the same name in another region
        {},  # an association with disableSessionTags
    ):
        assert set(_assume(doc, other).values()) == {iam_eval.IMPLICIT_DENY}, other
    # a cluster of the same name and region in another account: its ARN differs
    assert set(_assume(doc, pod_tags(account="999999999999")).values()) == {iam_eval.IMPLICIT_DENY}


def test_the_shared_role_of_a_workshop_trusts_every_namespace_of_its_cluster_and_service_account():
    doc = iam.trust_policy(settings("ray-train-ann"), "pod-identity", ACCOUNT)
    assert doc == iam.trust_policy(settings("ray-train-bob"), "pod-identity", ACCOUNT)
    assert set(_assume(doc, pod_tags(namespace="ray-train-bob")).values()) == {iam_eval.ALLOW}
    assert set(_assume(doc, pod_tags(namespace="ray-train-bob", sa="x")).values()) == {iam_eval.IMPLICIT_DENY}
    assert set(_assume(doc, pod_tags(cluster="other")).values()) == {iam_eval.IMPLICIT_DENY}


def test_the_bucket_refuses_every_request_of_the_job_without_tls():
    s = settings("ray-train-ann", storage_path="s3://ws-bucket/ckpt")
    loc = iam.storage_location(s, ACCOUNT)
    policy = iam.bucket_policy(s, loc.bucket)
    role = iam.permission_policy(s, loc)
    tags = {f"aws:PrincipalTag/{k}": v for k, v in iam.principal_tags(s).items()}
    seen = 0
    for req in s3_access.storage_requests(loc.bucket, loc.prefix):
        for auth in s3_access.authorizations(req):
            ctx = {**dict(auth.context), **tags}
            plain = {**ctx, "aws:SecureTransport": "false"}
            assert iam_eval.decide(policy, auth.action, auth.resource, plain) == iam_eval.EXPLICIT_DENY, auth
            # over TLS the bucket policy denies nothing: the role's policy decides
            tls = {**ctx, "aws:SecureTransport": "true"}
            assert iam_eval.decide(policy, auth.action, auth.resource, tls) == iam_eval.IMPLICIT_DENY
            assert iam_eval.decide(role, auth.action, auth.resource, tls) == iam_eval.ALLOW
            seen += 1
    assert seen > 5
    # a request whose context lacks the key is not matched by Bool (IAM: the values do not match)
    assert iam_eval.decide(policy, "s3:GetObject", "arn:aws:s3:::ws-bucket/k", {}) == iam_eval.IMPLICIT_DENY


def test_the_bucket_policy_keeps_other_statements_and_is_put_once():
    s = settings("ray-train-ann")
    theirs = {"Sid": "Theirs", "Effect": "Deny", "Principal": "*", "Action": "s3:DeleteBucket", "Resource": "*"}
    merged = iam.with_bucket_policy(s, {"Version": "2012-10-17", "Statement": [theirs]}, "b")
    assert merged["Statement"][0] == theirs and merged["Statement"][1]["Sid"] == iam.TLS_ONLY_SID
    assert iam.with_bucket_policy(s, merged, "b") is None  # already there: nothing to put
    assert iam.with_bucket_policy(s, None, "b") == iam.bucket_policy(s, "b")
