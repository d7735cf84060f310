"""targets.aws.workshop.storage: a workshop's checkpoint storage, one EKS Pod Identity association per attendee
namespace for the facilitator's storage role (``handout storage``), its status and its teardown.

S3 and IAM run in moto (``mock_aws``); moto 5.2.1 has no EKS Pod Identity API, so the associations come from
tests/fakes/aws/moto_ext.py (what the EKS API reference documents: one association per cluster, namespace and
ServiceAccount, a second one answered ResourceInUseException; List answers summaries without roleArn or tags,
Describe the whole association). The create call's parameters are also checked with botocore's Stubber against
botocore's own EKS model.
"""

from __future__ import annotations

import sys
from pathlib import Path

import boto3
import pytest
from botocore.stub import Stubber

sys.path.insert(0, str(Path(__file__).resolve().parents[5]))

from raytrain_helpers.clients.aws import Identity  # noqa: E402
from raytrain_helpers.core.config import ConfigError  # noqa: E402
from raytrain_helpers.plan import iam  # noqa: E402
from raytrain_helpers.targets.aws import common  # noqa: E402
from raytrain_helpers.targets.aws.storage import bucket as storage  # noqa: E402
from raytrain_helpers.targets.aws.workshop import storage as storage_share  # noqa: E402
from tests.fakes.aws import moto_ext  # noqa: E402
from tests.fakes.aws.fixtures import make_settings  # noqa: E402

pytestmark = pytest.mark.timeout(120)

R, ACCOUNT, NAME = "us-west-2", "123456789012", "raytrain-tutorial"
IDENT = Identity(ACCOUNT, f"arn:aws:iam::{ACCOUNT}:user/facilitator", R)


def eks():
    return boto3.client("eks", region_name=R)


def settings_in(tmp_path: Path, folder: str, **params):
    (tmp_path / folder).mkdir(exist_ok=True)
    return make_settings(tmp_path / folder, storage_per_namespace=True, **params)


def attendee(tmp_path: Path, ident: str, **params):
    return settings_in(tmp_path, ident, namespace=f"ray-train-{ident}", run_name=ident, shared_cluster=True, **params)


@pytest.fixture
def facilitator(mocked_aws, tmp_path):
    """The facilitator's 02: the bucket, the storage role (policy per namespace) and its own association."""
    s = settings_in(tmp_path, "facilitator")
    c = eks()
    c.create_cluster(name=NAME, roleArn=f"arn:aws:iam::{ACCOUNT}:role/eks", resourcesVpcConfig={})
    c.create_addon(clusterName=NAME, addonName=iam.POD_IDENTITY_ADDON)
    cluster = c.describe_cluster(name=NAME)["cluster"]
    done, problems = storage.ensure(s, boto3.session.Session(region_name=R), IDENT, cluster, assume_yes=True)
    assert problems == [], problems
    yield s
    moto_ext.FAKE.reset()


def associations() -> list[dict]:
    c = eks()
    return [
        c.describe_pod_identity_association(clusterName=NAME, associationId=a["associationId"])["association"]
        for a in c.list_pod_identity_associations(clusterName=NAME)["associations"]
    ]


def test_share_creates_one_tagged_association_per_attendee_then_keeps_it(facilitator, tmp_path):
    ann, bob = attendee(tmp_path, "ann"), attendee(tmp_path, "bob")
    role_arn = storage.load_record(facilitator)["role_arn"]
    for s in (ann, bob):
        done, said = storage_share.attendee_storage(s, "share", facilitator=facilitator)
        assert done is True and said.endswith("created, then read back"), said
    mine = {a["namespace"]: a for a in associations()}
    assert set(mine) == {"ray-train", "ray-train-ann", "ray-train-bob"}
    assert mine["ray-train-ann"]["roleArn"] == role_arn and mine["ray-train-ann"]["serviceAccount"] == "raytrain"
    assert mine["ray-train-ann"]["tags"] == {common.TAG_KEY: NAME, "raytrain-tutorial/attendee": "ann"}
    calls = len(moto_ext.FAKE.calls)
    done, said = storage_share.attendee_storage(ann, "share", facilitator=facilitator)
    assert done is True and said.endswith("already there (kept)")
    assert ("CreatePodIdentityAssociation", R) not in moto_ext.FAKE.calls[calls:]
    assert storage_share.attendee_storage(ann, "status") == (None, f"associated ({iam.role_name(facilitator)})")


def test_an_association_not_the_hand_outs_is_a_conflict_and_left_alone(facilitator, tmp_path):
    ann = attendee(tmp_path, "ann")
    other = f"arn:aws:iam::{ACCOUNT}:role/someone-elses"
    eks().create_pod_identity_association(
        clusterName=NAME, namespace="ray-train-ann", serviceAccount="raytrain", roleArn=other, tags={"team": "x"}
    )
    done, said = storage_share.attendee_storage(ann, "share", facilitator=facilitator)
    assert done is False and "was not created by the hand-out" in said and "delete-pod-identity-association" in said
    (mine,) = [a for a in associations() if a["namespace"] == "ray-train-ann"]
    assert mine["roleArn"] == other and mine["tags"] == {"team": "x"}
    assert storage_share.attendee_storage(ann, "status") == (None, "not the hand-out's (someone-elses)")
    done, said = storage_share.attendee_storage(ann, "remove")
    assert done is False and "left alone" in said and len(associations()) == 2


def test_ours_but_another_role_or_without_session_tags_is_a_conflict(facilitator, tmp_path):
    ann = attendee(tmp_path, "ann")
    tags = storage_share.association_tags(ann)
    eks().create_pod_identity_association(
        clusterName=NAME,
        namespace="ray-train-ann",
        serviceAccount="raytrain",
        roleArn="arn:aws:iam::1:role/x",
        tags=tags,
    )
    done, said = storage_share.attendee_storage(ann, "share", facilitator=facilitator)
    assert done is False and "names role arn:aws:iam::1:role/x" in said
    (bad,) = [a for a in associations() if a["namespace"] == "ray-train-ann"]
    eks().delete_pod_identity_association(clusterName=NAME, associationId=bad["associationId"])
    role_arn = storage.load_record(facilitator)["role_arn"]
    eks().create_pod_identity_association(clusterName=NAME, namespace="ray-train-ann", serviceAccount="raytrain",
                                          roleArn=role_arn, tags=tags, disableSessionTags=True)  # fmt: skip
    done, said = storage_share.attendee_storage(ann, "share", facilitator=facilitator)
    assert done is False and "disables its session tags" in said


def test_teardown_removes_only_the_hand_outs_associations(facilitator, tmp_path):
    ann = attendee(tmp_path, "ann")
    storage_share.attendee_storage(ann, "share", facilitator=facilitator)
    assert storage_share.attendee_storage(ann, "remove") == (
        True,
        "storage association ray-train-ann/raytrain: deleted, then read back: absent",
    )
    assert [a["namespace"] for a in associations()] == ["ray-train"]  # the facilitator's own 02 association stays
    assert storage_share.attendee_storage(ann, "remove")[1].endswith("absent (nothing to delete)")
    assert storage_share.attendee_storage(ann, "status") == (None, "absent")


def test_refused_without_storage_per_namespace_naming_the_setting(facilitator, tmp_path):
    ann = attendee(tmp_path, "ann")
    plain = make_settings(tmp_path / "facilitator", storage_per_namespace=False)
    done, said = storage_share.attendee_storage(ann, "share", facilitator=plain)
    assert done is False and "aws.storage_per_namespace is false in the facilitator's env.yaml" in said
    assert "Fix: storage_per_namespace: true" in said and len(associations()) == 1


def test_refused_when_the_role_policy_is_not_per_namespace(facilitator, tmp_path):
    """02 ran before storage_per_namespace was set: the role's policy grants the whole prefix to everyone."""
    ann = attendee(tmp_path, "ann")
    plain = make_settings(tmp_path / "facilitator", storage_per_namespace=False)
    loc = iam.storage_location(plain, ACCOUNT)
    boto3.client("iam", region_name=R).put_role_policy(
        RoleName=iam.role_name(facilitator),
        PolicyName=iam.POLICY_NAME,
        PolicyDocument=__import__("json").dumps(iam.permission_policy(plain, loc)),
    )
    done, said = storage_share.attendee_storage(ann, "share", facilitator=facilitator)
    assert done is False and "does not keep namespace ray-train-ann to" in said and "cluster up --yes" in said
    assert len(associations()) == 1


def test_irsa_with_storage_per_namespace_is_refused_at_load(tmp_path):
    with pytest.raises(ConfigError, match="storage_per_namespace = true needs EKS Pod Identity.*Fix: pod_identity"):
        make_settings(tmp_path, storage_per_namespace=True, pod_identity="irsa")


def test_create_call_matches_the_eks_api(tmp_path):
    ann = attendee(tmp_path, "ann")
    role_arn = f"arn:aws:iam::{ACCOUNT}:role/r"
    c = boto3.client("eks", region_name=R, aws_access_key_id="x", aws_secret_access_key="y")
    where = {"clusterName": NAME, "namespace": "ray-train-ann", "serviceAccount": "raytrain"}
    summary = {**where, "associationId": "a-1", "associationArn": "arn", "ownerArn": ""}
    full = {**summary, "roleArn": role_arn, "tags": storage_share.association_tags(ann)}
    with Stubber(c) as stub:
        stub.add_response("list_pod_identity_associations", {"associations": []}, expected_params=where)
        stub.add_response(
            "create_pod_identity_association",
            {"association": full},
            expected_params={**where, "roleArn": role_arn, "tags": {common.TAG_KEY: NAME,
                                                                    "raytrain-tutorial/attendee": "ann"}},
        )  # fmt: skip
        stub.add_response("list_pod_identity_associations", {"associations": [summary]}, expected_params=where)
        stub.add_response(
            "describe_pod_identity_association",
            {"association": full},
            expected_params={"clusterName": NAME, "associationId": "a-1"},
        )
        assert storage_share._share(ann, c, role_arn) == (True, "storage association ray-train-ann/raytrain -> r: "
                                                                 "created, then read back")  # fmt: skip
        stub.assert_no_pending_responses()


def test_an_attendee_s_denied_storage_check_names_handout_storage(tmp_path):
    from raytrain_helpers.targets.aws.storage import identity

    steps = [
        {"step": "create_dir", "ok": False, "error": "OSError: AWS Error ACCESS_DENIED during PutObject operation"}
    ]
    ann = attendee(tmp_path, "ann")
    line = identity.failure("w-1", steps, iam.storage_location(ann, ACCOUNT), ann)
    assert "lacks s3:PutObject" in line and "raytrain-tutorial handout storage DIR" in line
    own = make_settings(tmp_path / "ann", namespace="ray-train-ann")
    assert "re-run notebook 02 (cluster up)" in identity.failure("w-1", steps, iam.storage_location(own, ACCOUNT), own)


def test_an_attendee_s_job_writes_under_its_own_namespace(mocked_aws, tmp_path):
    from raytrain_helpers.targets.aws.jobs import defaults as jobs

    ann = attendee(tmp_path, "ann", storage_path="s3://ws-bucket/ckpt")
    assert jobs.job_defaults(ann).storage_path == "s3://ws-bucket/ckpt/ray-train-ann"
    bob = attendee(tmp_path, "bob")  # no storage_path, no 02 record in an attendee's folder: this account's bucket
    assert jobs.job_defaults(bob).storage_path == f"s3://{NAME}-{ACCOUNT}-{R}/raytrain/ray-train-bob"
