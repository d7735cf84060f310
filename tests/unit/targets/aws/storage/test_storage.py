"""targets.aws.storage.bucket and targets.aws.storage.identity: the checkpoint bucket, the storage role and its
binding to the pods' ServiceAccount (step 02), the in-pod access check (04), 06's checkpoint row and the teardown (08).

S3, IAM and EKS run in moto (in-process ``mock_aws``; EKS add-ons and Pod Identity associations come from
tests/fakes/aws/moto_ext.py, which moto 5.2.1 lacks); the association calls' parameters are also checked with
botocore's Stubber against the real EKS API model; a bucket of another account (S3's 403 to HeadBucket with
ExpectedBucketOwner) is stubbed. The access check runs its real program through the Kubernetes stand-in's exec
against a moto server, once with IAM enforced on the rendered policy.
"""

from __future__ import annotations

import json
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
from raytrain_helpers.targets.aws.jobs import verify  # noqa: E402
from raytrain_helpers.targets.aws.kuberay import access  # noqa: E402
from raytrain_helpers.targets.aws.storage import bucket as storage
from tests.fakes.aws import moto_ext  # noqa: E402
from tests.fakes.aws.fixtures import make_settings  # noqa: E402
from tests.fakes.k8s_standin import standin  # noqa: E402

pytestmark = pytest.mark.timeout(120)

R, ACCOUNT, NAME = "us-west-2", "123456789012", "raytrain-tutorial"
BUCKET = f"{NAME}-{ACCOUNT}-{R}"
IDENT = Identity(ACCOUNT, f"arn:aws:iam::{ACCOUNT}:user/tester", R)
CREATES = {"CreateBucket", "CreateRole", "CreatePodIdentityAssociation", "PutRolePolicy", "UpdateAssumeRolePolicy"}
CREATES |= {"PutPublicAccessBlock", "PutBucketEncryption", "PutBucketLifecycleConfiguration", "PutBucketTagging"}


class Recorder:
    """A boto3 session that records every API operation called through it."""

    def __init__(self) -> None:
        self.sess = boto3.session.Session(region_name=R)
        self.ops: list[str] = []
        self.sess.events.register("before-call", lambda event_name, **kw: self.ops.append(event_name.split(".")[-1]))


class Res:
    """The fields of the cluster step's result that storage.plan_into/up_into fill."""

    def __init__(self) -> None:
        self.configs, self.actions, self.notes, self.problems = {}, [], [], []


def eks_cluster(addon: bool = True) -> dict:
    eks = boto3.client("eks", region_name=R)
    eks.create_cluster(name=NAME, roleArn=f"arn:aws:iam::{ACCOUNT}:role/eks", resourcesVpcConfig={})
    if addon:
        eks.create_addon(clusterName=NAME, addonName=iam.POD_IDENTITY_ADDON)
    return eks.describe_cluster(name=NAME)["cluster"]


def s3():
    return boto3.client("s3", region_name=R)


def iam_api():
    return boto3.client("iam", region_name=R)


# --------------------------------------------------------------------------------------------
# 02: plan creates nothing; up creates, once
# --------------------------------------------------------------------------------------------


def test_plan_shows_bucket_role_association_and_policies_and_creates_nothing(mocked_aws, tmp_path):
    s = make_settings(tmp_path)
    rec, res = Recorder(), Res()
    storage.plan_into(res, s, rec.sess, IDENT, None)
    assert res.problems == []
    assert [a.split(" (")[0].split(":")[0] for a in res.actions] == [
        f"create S3 bucket {BUCKET} in {R}",
        f"create IAM role {NAME}-ray-train-raytrain-s3",
        f"associate {NAME}-ray-train-raytrain-s3 with ServiceAccount ray-train/raytrain",
    ]
    assert f"checkpoint storage: s3://{BUCKET}/raytrain" in res.notes[0]
    docs = {k: json.loads(v) for k, v in res.configs.items()}
    assert sorted(docs) == [
        f"storage role {NAME}-ray-train-raytrain-s3: permission policy",
        f"storage role {NAME}-ray-train-raytrain-s3: trust policy (pod-identity)",
    ]
    assert not CREATES & set(rec.ops), rec.ops
    assert s3().list_buckets()["Buckets"] == [] and iam_api().list_roles()["Roles"] == []


def test_up_creates_a_private_encrypted_tagged_bucket_role_and_association(mocked_aws, tmp_path):
    s = make_settings(tmp_path)
    cluster = eks_cluster()
    done, problems = storage.ensure(s, Recorder().sess, IDENT, cluster, assume_yes=True)
    assert problems == [] and len(done) == 8, done
    c = s3()
    policy = json.loads(c.get_bucket_policy(Bucket=BUCKET)["Policy"])
    assert policy == iam.bucket_policy(s, BUCKET)  # requests without TLS denied
    assert policy["Statement"][0]["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    assert c.get_bucket_tagging(Bucket=BUCKET)["TagSet"] == [{"Key": common.TAG_KEY, "Value": NAME}]
    assert c.get_public_access_block(Bucket=BUCKET)["PublicAccessBlockConfiguration"] == storage.PUBLIC_ACCESS_BLOCK
    (rule,) = c.get_bucket_encryption(Bucket=BUCKET)["ServerSideEncryptionConfiguration"]["Rules"]
    assert rule["ApplyServerSideEncryptionByDefault"]["SSEAlgorithm"] == "AES256"
    (life,) = c.get_bucket_lifecycle_configuration(Bucket=BUCKET)["Rules"]
    assert life["AbortIncompleteMultipartUpload"] == {"DaysAfterInitiation": 1} and life["Status"] == "Enabled"
    role = iam_api().get_role(RoleName=f"{NAME}-ray-train-raytrain-s3")["Role"]
    assert role["AssumeRolePolicyDocument"] == iam.trust_policy(s, "pod-identity", ACCOUNT)
    assert {t["Key"]: t["Value"] for t in role["Tags"]} == {common.TAG_KEY: NAME}
    assert iam_api().list_role_policies(RoleName=role["RoleName"])["PolicyNames"] == [iam.POLICY_NAME]
    assert iam_api().list_attached_role_policies(RoleName=role["RoleName"])["AttachedPolicies"] == []
    doc = iam_api().get_role_policy(RoleName=role["RoleName"], PolicyName=iam.POLICY_NAME)["PolicyDocument"]
    loc = iam.storage_location(s, ACCOUNT)
    assert doc == iam.permission_policy(s, loc) and iam.policy_problems(doc, loc) == []
    (assoc,) = boto3.client("eks", region_name=R).list_pod_identity_associations(clusterName=NAME)["associations"]
    assert (assoc["namespace"], assoc["serviceAccount"]) == ("ray-train", "raytrain")
    assert storage.load_record(s)["role_arn"] == role["Arn"]


def test_up_again_makes_no_create_call(mocked_aws, tmp_path):
    s = make_settings(tmp_path)
    cluster = eks_cluster()
    storage.ensure(s, Recorder().sess, IDENT, cluster, assume_yes=True)
    rec = Recorder()
    done, problems = storage.ensure(s, rec.sess, IDENT, cluster, assume_yes=False)  # nothing to confirm
    assert done == [] and problems == []
    assert not CREATES & set(rec.ops), rec.ops
    res = Res()
    storage.plan_into(res, s, Recorder().sess, IDENT, cluster)
    assert res.actions == [] and res.problems == []


def test_up_restores_a_tampered_policy(mocked_aws, tmp_path):
    s = make_settings(tmp_path)
    cluster = eks_cluster()
    storage.ensure(s, Recorder().sess, IDENT, cluster, assume_yes=True)
    role = f"{NAME}-ray-train-raytrain-s3"
    wide = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}
    iam_api().put_role_policy(RoleName=role, PolicyName=iam.POLICY_NAME, PolicyDocument=json.dumps(wide))
    done, _ = storage.ensure(s, Recorder().sess, IDENT, cluster, assume_yes=True)
    assert done == [f"policy {iam.POLICY_NAME} on {role}: s3://{BUCKET}/raytrain/ objects and listing"]
    doc = iam_api().get_role_policy(RoleName=role, PolicyName=iam.POLICY_NAME)["PolicyDocument"]
    assert iam.policy_problems(doc, iam.storage_location(s, ACCOUNT)) == []


def test_headless_up_without_assume_yes_creates_nothing(mocked_aws, tmp_path, monkeypatch):
    monkeypatch.setattr(common, "interactive", lambda: False)
    s = make_settings(tmp_path)
    with pytest.raises(common.ConfirmationRefused):
        storage.ensure(s, Recorder().sess, IDENT, eks_cluster(), assume_yes=False)
    assert s3().list_buckets()["Buckets"] == [] and iam_api().list_roles()["Roles"] == []


def test_irsa_where_the_cluster_has_no_pod_identity_agent(mocked_aws, tmp_path):
    s = make_settings(tmp_path)
    cluster = eks_cluster(addon=False)
    done, problems = storage.ensure(s, Recorder().sess, IDENT, cluster, assume_yes=True)
    assert problems == []
    role = iam_api().get_role(RoleName=f"{NAME}-ray-train-raytrain-s3")["Role"]
    issuer = cluster["identity"]["oidc"]["issuer"].removeprefix("https://")
    (st,) = role["AssumeRolePolicyDocument"]["Statement"]
    assert st["Principal"] == {"Federated": f"arn:aws:iam::{ACCOUNT}:oidc-provider/{issuer}"}
    assert boto3.client("eks", region_name=R).list_pod_identity_associations(clusterName=NAME)["associations"] == []
    sa = storage.service_account(s)
    assert sa["metadata"]["annotations"] == {"eks.amazonaws.com/role-arn": role["Arn"]}
    pinned = make_settings(tmp_path, pod_identity="pod-identity")
    problems = storage.read_state(pinned, Recorder().sess, ACCOUNT, cluster).problems
    assert any(f"has no {iam.POD_IDENTITY_ADDON} add-on" in p for p in problems), problems


# --------------------------------------------------------------------------------------------
# Buckets that are not the tutorial's
# --------------------------------------------------------------------------------------------


def test_a_bucket_of_another_account_is_refused_naming_the_setting(mocked_aws, tmp_path, monkeypatch):
    s = make_settings(tmp_path, storage_path="s3://somebody-elses/ckpt")
    c = s3()
    with Stubber(c) as stub:
        stub.add_client_error(
            "head_bucket",
            service_error_code="403",
            http_status_code=403,
            expected_params={"Bucket": "somebody-elses", "ExpectedBucketOwner": ACCOUNT},
        )
        with pytest.raises(ConfigError, match="not owned by account 123456789012") as e:
            storage.bucket_state(c, "somebody-elses", ACCOUNT, s)
    assert "Fix: set aws.storage_bucket" in str(e.value)
    # plan (and so up, which plans first) stops there: nothing is listed to create
    real_client = storage.aws_client.client
    stubbed = s3()
    stub = Stubber(stubbed)
    stub.add_client_error("head_bucket", service_error_code="403", http_status_code=403)
    monkeypatch.setattr(
        storage.aws_client,
        "client",
        lambda sess, svc, region=None: stubbed if svc == "s3" else real_client(sess, svc, region),
    )
    res = Res()
    with stub:
        storage.plan_into(res, s, Recorder().sess, IDENT, None)
    assert any("not owned by account" in p for p in res.problems) and res.actions == []


def test_an_account_bucket_is_reused_untouched_and_kept_at_teardown(mocked_aws, tmp_path):
    s = make_settings(tmp_path, storage_path="s3://team-ckpts/raytrain")
    s3().create_bucket(Bucket="team-ckpts", CreateBucketConfiguration={"LocationConstraint": R})
    s3().put_object(Bucket="team-ckpts", Key="raytrain/x", Body=b"1")
    rec, cluster = Recorder(), eks_cluster()
    done, problems = storage.ensure(s, rec.sess, IDENT, cluster, assume_yes=True)
    assert problems == [] and not any("bucket" in d for d in done)
    assert not {"CreateBucket", "PutPublicAccessBlock", "PutBucketEncryption", "PutBucketTagging"} & set(rec.ops)
    out = storage.teardown(s, Recorder().sess, IDENT, cluster)
    assert [ok for _, ok, _ in out.rows] == [True, True]
    assert out.rows[1] == ("S3 checkpoint bucket team-ckpts", True, "kept: not the tutorial's")
    assert "not created by the tutorial" in out.kept[0] and s3().head_bucket(Bucket="team-ckpts")
    assert iam_api().list_roles()["Roles"] == []


# --------------------------------------------------------------------------------------------
# 08: the association, the role, the tutorial's bucket with its objects
# --------------------------------------------------------------------------------------------


def test_teardown_removes_association_role_and_own_bucket_with_objects(mocked_aws, tmp_path):
    s = make_settings(tmp_path)
    cluster = eks_cluster()
    storage.ensure(s, Recorder().sess, IDENT, cluster, assume_yes=True)
    for i in range(3):
        s3().put_object(Bucket=BUCKET, Key=f"raytrain/tutorial/checkpoint_{i}/shard", Body=b"x")
    out = storage.teardown(s, Recorder().sess, IDENT, cluster)
    assert [ok for _, ok, _ in out.rows] == [True, True] and out.kept == []
    assert "association deleted; role raytrain-tutorial-ray-train-raytrain-s3 deleted" in out.rows[0][2]
    assert out.rows[1][2].startswith("3 object version(s) deleted, bucket deleted, then checked: absent")
    assert s3().list_buckets()["Buckets"] == [] and iam_api().list_roles()["Roles"] == []
    assert boto3.client("eks", region_name=R).list_pod_identity_associations(clusterName=NAME)["associations"] == []
    again = storage.teardown(s, Recorder().sess, IDENT, cluster)
    assert [r[2] for r in again.rows] == ["absent (nothing to delete), then checked", "absent (nothing to delete)"]


def test_a_role_of_the_same_name_not_ours_is_refused_and_kept(mocked_aws, tmp_path):
    s = make_settings(tmp_path)
    iam_api().create_role(RoleName=f"{NAME}-ray-train-raytrain-s3", AssumeRolePolicyDocument="{}")
    done, problems = storage.ensure(s, Recorder().sess, IDENT, eks_cluster(), assume_yes=True)
    assert done == [] and "was not created by the tutorial" in problems[0]
    out = storage.teardown(s, Recorder().sess, IDENT, None)
    assert "not created by the tutorial" in out.kept[0] and iam_api().get_role(RoleName=f"{NAME}-ray-train-raytrain-s3")


# --------------------------------------------------------------------------------------------
# The association's calls against the real EKS API model (Stubber)
# --------------------------------------------------------------------------------------------


def test_association_calls_match_the_eks_api(tmp_path):
    s = make_settings(tmp_path)
    eks = boto3.client("eks", region_name=R, aws_access_key_id="x", aws_secret_access_key="y")
    st = storage.StorageState(iam.storage_location(s, ACCOUNT), ACCOUNT, "pod-identity", iam.role_name(s))
    with Stubber(eks) as stub:
        stub.add_response(
            "create_pod_identity_association",
            {"association": {"associationId": "a-1", "roleArn": st.role_arn}},
            expected_params={
                "clusterName": NAME,
                "namespace": "ray-train",
                "serviceAccount": "raytrain",
                "roleArn": st.role_arn,
                "tags": {common.TAG_KEY: NAME},
            },
        )
        assert storage._ensure_association(s, eks, st)[0].startswith("associated")
        st.association = {"associationId": "a-1", "roleArn": "arn:aws:iam::123456789012:role/old"}
        stub.add_response(
            "update_pod_identity_association",
            {"association": {"associationId": "a-1"}},
            expected_params={"clusterName": NAME, "associationId": "a-1", "roleArn": st.role_arn},
        )
        assert storage._ensure_association(s, eks, st)[0].startswith("pointed")
        stub.assert_no_pending_responses()


# --------------------------------------------------------------------------------------------
# 04: the access check from inside the worker pods; 06: the checkpoint row
# --------------------------------------------------------------------------------------------


READY_OP = dict(plugins_installed=True, operator_installed=True, delay_s=0.05)
FAST = dict(timeout_s=5, poll_s=0.05, log=lambda *a: None)


@pytest.fixture
def cluster_with_storage(srv, tmp_path, monkeypatch):
    """02's storage on the moto server, and a ready RayCluster in the stand-in."""
    from raytrain_helpers.targets.aws.kuberay import raycluster as kuberay

    monkeypatch.setenv("PATH", ":".join(p for p in __import__("os").environ["PATH"].split(":") if "helm" not in p))
    s = make_settings(tmp_path)
    cluster = eks_cluster()
    storage.ensure(s, boto3.session.Session(region_name=R), IDENT, cluster, assume_yes=True)
    with standin("healthy", set_env=True, **READY_OP) as st:
        assert kuberay.raycluster(s, **FAST).ok
        yield s, st


def test_access_check_runs_the_job_storage_code_from_the_head_and_every_worker(cluster_with_storage):
    s, st = cluster_with_storage
    ok, lines = access.access_check(s)
    assert ok, lines
    assert lines[0] == (
        "storage access from 3 Ray pod(s) (head and workers), with pyarrow's S3 filesystem as Ray Train builds it: "
        f"create_dir, write, get_file_info, get_file_info missing, read, list, delete under s3://{BUCKET}/raytrain/"
        ".raytrain-access-check/ OK"
    )
    calls = [(p, argv[:2], argv[3:4]) for p, argv in st.cluster.exec_log]
    assert [c[0].split("-")[-2] for c in calls][0] == "head" and len(calls) == 3
    assert all(argv == ["python3", "-c"] and uri == [f"s3://{BUCKET}/raytrain"] for _, argv, uri in calls)
    left = {o["Key"]: o["Size"] for o in s3().list_objects_v2(Bucket=BUCKET)["Contents"]}
    assert left == {"raytrain/": 0, "raytrain/.raytrain-access-check/": 0}  # folder markers only (pyarrow's)
    sa = st.get("v1", "serviceaccounts", "raytrain", "ray-train")
    assert sa is not None and "annotations" not in sa["metadata"]  # Pod Identity: nothing to annotate


def _as_pod_role(monkeypatch, doc: dict) -> None:
    """The pods' role (02's storage role, whose session EKS Pod Identity gave them) holds ``doc``, with moto
    enforcing IAM."""
    import moto.settings

    # the pods run as the storage role (their EKS Pod Identity session, taken when the stand-in created them)
    (role,) = [r["RoleName"] for r in iam_api().list_roles()["Roles"] if r["RoleName"].endswith("-s3")]
    iam_api().put_role_policy(RoleName=role, PolicyName=iam.POLICY_NAME, PolicyDocument=json.dumps(doc))
    monkeypatch.setattr(moto.settings, "INITIAL_NO_AUTH_ACTION_COUNT", 0)


#: moto authorises HeadBucket as "s3:HeadBucket" (moto/s3/responses.py ACTION_MAP), which is no IAM action:
#: real S3 asks s3:ListBucket (tests/unit/plan/test_s3_access.py decides the real policy). Granting it lets a test
#: get past create_dir's HeadBucket on moto; the 403s below are moto's, the messages pyarrow's own.
MOTO_HEAD_BUCKET = {"Effect": "Allow", "Action": "s3:HeadBucket", "Resource": f"arn:aws:s3:::{BUCKET}"}


def test_a_denied_head_bucket_names_list_bucket_without_a_prefix_condition(cluster_with_storage, monkeypatch):
    from tests.unit.plan.test_s3_access import OLD_POLICY

    s, _ = cluster_with_storage
    old = json.loads(json.dumps(OLD_POLICY).replace("ckpt-bucket", BUCKET).replace("team/raytrain", "raytrain"))
    _as_pod_role(monkeypatch, old)
    ok, lines = access.access_check(s)
    assert not ok and len(lines) == 3, lines
    assert lines[0].endswith(
        f"create_dir on s3://{BUCKET}/raytrain/ failed: HeadBucket was denied, the pod's role lacks s3:ListBucket on "
        f"arn:aws:s3:::{BUCKET} (without an s3:prefix condition: HeadBucket carries none). Fix: re-run notebook 02 "
        "(cluster up), which restores the storage role's policy (and the pod identity association of "
        "ray-train/raytrain), then 04"
    )
    assert "-head-" in lines[0]
    _, _, rows = access.access_check(s, with_rows=True)
    head = lines[0].split(":")[0].removeprefix("Ray pod ")
    expected = [
        "identity: OK (runs as arn:aws:sts::123456789012:assumed-role/raytrain-tutorial-ray-train-raytrain-s3/",
        "filesystem: OK",
        "create_dir: FAILED - create_dir on",
        "write: not run",
        "get_file_info: not run",
        "get_file_info missing: not run",
        "read: not run",
        "list: not run",
        "delete: not run",
    ]
    assert all(r.startswith(f"storage check in {head}: {w}") for r, w in zip(rows, expected, strict=True)), rows
    assert "HeadBucket was denied, the pod's role lacks s3:ListBucket" in rows[2]


@pytest.mark.parametrize(
    "drop,step,operation,action",
    [
        ("s3:PutObject", "create_dir", "PutObject", "s3:PutObject"),
        ("missing-key", "get_file_info missing", "HeadObject", "s3:ListBucket"),
    ],
)
def test_a_denied_step_names_the_operation_and_the_action(
    cluster_with_storage, monkeypatch, drop, step, operation, action
):
    s, _ = cluster_with_storage
    doc = iam.permission_policy(s, iam.storage_location(s, ACCOUNT))
    doc["Statement"].append(MOTO_HEAD_BUCKET)
    if drop == "missing-key":  # GetObject only on the probe: the never-written key answers 403, as without ListBucket
        doc["Statement"][1]["Action"].remove("s3:GetObject")
        doc["Statement"].append(
            {"Effect": "Allow", "Action": "s3:GetObject", "Resource": f"arn:aws:s3:::{BUCKET}/raytrain/*/probe.txt"}
        )
    else:
        doc["Statement"][1]["Action"].remove(drop)
    _as_pod_role(monkeypatch, doc)
    ok, lines = access.access_check(s)
    assert not ok and len(lines) == 3, lines
    assert (
        f"{step} on s3://{BUCKET}/raytrain/ failed: {operation} was denied, the pod's role lacks {action} on"
        in lines[0]
    )
    moto_settings_reset(monkeypatch)
    left = [o["Key"] for o in s3().list_objects_v2(Bucket=BUCKET).get("Contents", [])]
    assert not [k for k in left if k.endswith("probe.txt")], left  # nothing half-written left behind


def moto_settings_reset(monkeypatch) -> None:
    import moto.settings

    monkeypatch.setattr(moto.settings, "INITIAL_NO_AUTH_ACTION_COUNT", float("inf"))
    for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(k, "x")


def test_the_rendered_policy_allows_the_prefix_and_nothing_outside(srv, tmp_path, monkeypatch):
    """IAM enforced by moto on the rendered policy (moto's server cannot verify signed list requests with '/' in
    the prefix, so listing is checked by the policy test in tests/unit/plan/test_iam.py)."""
    import moto.settings

    s = make_settings(tmp_path)
    s3().create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": R})
    doc = iam.permission_policy(s, iam.storage_location(s, ACCOUNT))
    iam_api().create_user(UserName="pod")
    iam_api().put_user_policy(UserName="pod", PolicyName="p", PolicyDocument=json.dumps(doc))
    key = iam_api().create_access_key(UserName="pod")["AccessKey"]
    pod = boto3.client(
        "s3", region_name=R, aws_access_key_id=key["AccessKeyId"], aws_secret_access_key=key["SecretAccessKey"]
    )
    monkeypatch.setattr(moto.settings, "INITIAL_NO_AUTH_ACTION_COUNT", 0)
    pod.put_object(Bucket=BUCKET, Key="raytrain/run/ckpt", Body=b"1")
    assert pod.get_object(Bucket=BUCKET, Key="raytrain/run/ckpt")["Body"].read() == b"1"
    pod.delete_object(Bucket=BUCKET, Key="raytrain/run/ckpt")
    for call in (
        lambda: pod.put_object(Bucket=BUCKET, Key="elsewhere/x", Body=b"1"),
        lambda: pod.put_object(Bucket=BUCKET, Key="raytrainX/x", Body=b"1"),
        lambda: pod.get_bucket_policy(Bucket=BUCKET),
        lambda: pod.delete_bucket(Bucket=BUCKET),
    ):
        with pytest.raises(Exception, match="AccessDenied"):
            call()


def test_checkpoint_row_lists_the_latest_checkpoint(mocked_aws, tmp_path):
    s = make_settings(tmp_path)
    s3().create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": R})
    ckpt = f"{BUCKET}/raytrain/tutorial/checkpoint_2026-12-01_00-00-00.000001"  # as Ray Train reports it (no s3://)
    for name in ("__0_0.distcp", "__1_0.distcp", ".metadata"):
        s3().put_object(Bucket=BUCKET, Key=f"{ckpt.split('/', 1)[1]}/{name}", Body=b"12345")
    job = {"result": {"storage_path": f"s3://{BUCKET}/raytrain", "checkpoint": ckpt}}
    assert verify.checkpoint_row(s, job) == (
        "checkpoint in storage",
        True,
        f"s3://{ckpt}/: 3 object(s), 15 bytes",
    )
    job["result"]["checkpoint"] = f"{BUCKET}/raytrain/tutorial/checkpoint_missing"
    name, ok, evidence = verify.checkpoint_row(s, job)
    assert ok is False and evidence.endswith("0 object(s), 0 bytes (nothing there)")
    assert verify.checkpoint_row(s, {"result": {"storage_path": "/tmp/x", "checkpoint": "/tmp/x/c"}})[1] is None
    assert verify.checkpoint_row(s)[1:] == (False, "no job recorded for this run: run notebook 05 first")
    moto_ext.FAKE.reset()


def test_a_denied_teardown_call_is_a_left_row_naming_it(mocked_aws, tmp_path):
    from botocore.awsrequest import AWSResponse

    s = make_settings(tmp_path)
    cluster = eks_cluster()
    storage.ensure(s, Recorder().sess, IDENT, cluster, assume_yes=True)
    rec = Recorder()
    denied = {"Error": {"Code": "AccessDenied", "Message": "not authorized to perform: iam:DeleteRole"}}
    rec.sess.events.register("before-call.iam.DeleteRole", lambda **kw: (AWSResponse("", 403, {}, None), denied))
    out = storage.teardown(s, rec.sess, IDENT, cluster)
    ((row, ok, evidence),) = out.rows
    assert row.startswith("storage role") and ok is False
    assert "DeleteRole failed (AccessDenied): not authorized to perform: iam:DeleteRole" in evidence
    assert iam_api().get_role(RoleName=f"{NAME}-ray-train-raytrain-s3")  # still there, and said so


def test_the_fake_s3_decides_the_tls_condition_as_s3_does_for_https(tmp_path):
    from tests.fakes.aws import moto_ext

    deny_plain = iam.bucket_policy(make_settings(tmp_path), "b")["Statement"][0]
    assert moto_ext.over_tls(deny_plain) is None  # over TLS the Deny of plain HTTP does not apply
    deny_tls = dict(deny_plain, Condition={"Bool": {"aws:SecureTransport": "true"}})
    assert "Condition" not in moto_ext.over_tls(deny_tls)  # ... and one that denies TLS applies to every request
    other = {"Effect": "Deny", "Action": "s3:*", "Resource": "*", "Condition": {"StringEquals": {"k": "v"}}}
    assert moto_ext.over_tls(other) is other
