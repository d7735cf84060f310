"""The moto server helper the notebooks run against: other processes reach the added APIs over HTTP."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[4]))

from tests.fakes.aws import moto_ext  # noqa: E402
from tests.fakes.aws.fixtures import REPO, SECRETS, make_settings  # noqa: E402

pytestmark = pytest.mark.timeout(120)

PROBE = r"""
import boto3, json
ec2 = boto3.client("ec2")
sq = boto3.client("service-quotas")
out = {
  "quota": sq.get_service_quota(ServiceCode="ec2", QuotaCode="L-DB2E81BA")["Quota"]["Value"],
  "scores": ec2.get_spot_placement_scores(InstanceTypes=["g6.12xlarge"], TargetCapacity=2,
      TargetCapacityUnitType="units", SingleAvailabilityZone=True, RegionNames=["us-west-2"])["SpotPlacementScores"],
}
cr = ec2.create_capacity_reservation(InstanceType="g6.12xlarge", InstancePlatform="Linux/UNIX",
      AvailabilityZone="us-west-2a", InstanceCount=2)["CapacityReservation"]["CapacityReservationId"]
ec2.cancel_capacity_reservation(CapacityReservationId=cr)
out["states"] = [c["State"] for c in ec2.describe_capacity_reservations()["CapacityReservations"]]
print(json.dumps(out))
"""


def test_another_process_sees_the_seeded_apis_over_http(srv):
    moto_ext.set_spot_scores("us-west-2", "g6.12xlarge", {"us-west-2a": 7})
    env = {**os.environ, **srv.env}
    assert env["AWS_ENDPOINT_URL"] == srv.endpoint and srv.endpoint.startswith("http://127.0.0.1:")
    r = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["quota"] == 192.0
    assert out["scores"] == [{"Region": "us-west-2", "AvailabilityZoneId": "usw2-az2", "Score": 7}]
    assert out["states"] == ["cancelled"]
    # the state lives in this process, where the server thread runs
    assert [c["State"] for c in moto_ext.FAKE.all_reservations("us-west-2")] == ["cancelled"]


def test_cli_in_a_subprocess_honours_aws_endpoint_url(srv, tmp_path):
    make_settings(tmp_path)
    env = {**os.environ, **srv.env, "PYTHONPATH": str(REPO)}
    base = [sys.executable, "-m", "raytrain_helpers.cli"]
    common = ["--env-file", str(tmp_path / "env.yaml"), "--target", "aws"]
    r = subprocess.run(
        base + ["capacity", *common, "--regions", "us-west-2", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert rep["ok"] and rep["recommendation"]["region"] == "us-west-2"
    assert (tmp_path / "runs" / "tutorial" / "placement.json").is_file()
    r = subprocess.run(base + ["cluster", "plan", *common], env=env, capture_output=True, text=True, timeout=90)
    assert r.returncode == 0, r.stderr
    assert "nothing was created" in r.stdout and srv.eksctl_calls() == []
    for secret in SECRETS:
        assert secret not in r.stdout + r.stderr


def test_environment_is_restored_after_the_server(tmp_path):
    from tests.fakes.aws.moto_env import moto_server

    before = {k: os.environ.get(k) for k in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "PATH", "KUBECONFIG")}
    with moto_server() as s:
        assert os.environ["AWS_ENDPOINT_URL"] == s.endpoint
        assert os.environ["PATH"].split(os.pathsep)[0] == str(s.workdir / "bin")
        assert (s.workdir / "bin" / "eksctl").is_file()
    assert {k: os.environ.get(k) for k in before} == before


def test_the_fake_eksctl_runs_with_the_suites_interpreter():
    """Found first on PATH, with only the system's folders after it: it runs under the interpreter that has boto3,
    not the first ``python3`` of PATH (on a stock Debian that one has no boto3)."""
    from tests.fakes.aws.moto_env import moto_server

    with moto_server() as s:
        path = os.pathsep.join([str(s.workdir / "bin"), "/usr/bin", "/bin"])
        r = subprocess.run(["eksctl", "version"], env=dict(s.env, PATH=path), capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.strip(), r.stderr[-2000:]


def test_s3_multipart_uploads_complete_as_s3_answers_them(capfd, tmp_path):
    """pyarrow (Ray Data's and the export's S3 writer) uploads through multipart uploads; moto's answer to
    CompleteMultipartUpload must carry S3's root element, or pyarrow reads it as an error and retries."""
    import boto3
    import pyarrow.fs

    from tests.fakes.aws.moto_env import moto_server

    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text("{}")
    with moto_server():
        s3 = boto3.client("s3", region_name="us-west-2")
        s3.create_bucket(Bucket="rt-up", CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
        roots = []
        s3.meta.events.register(
            "after-call.s3.CompleteMultipartUpload",
            lambda http_response, **_: roots.append(http_response.content.split(b">", 2)[1]),
        )
        up = s3.create_multipart_upload(Bucket="rt-up", Key="k")
        part = s3.upload_part(Bucket="rt-up", Key="k", UploadId=up["UploadId"], PartNumber=1, Body=b"x")
        parts = {"Parts": [{"ETag": part["ETag"], "PartNumber": 1}]}
        s3.complete_multipart_upload(Bucket="rt-up", Key="k", UploadId=up["UploadId"], MultipartUpload=parts)
        assert roots and roots[0].startswith(b"\n<CompleteMultipartUploadResult "), roots
        pyarrow.fs.copy_files(str(tmp_path / "model"), "s3://rt-up/runs/model")
        assert s3.get_object(Bucket="rt-up", Key="runs/model/config.json")["Body"].read() == b"{}"
    assert "error embedded in a 200 OK" not in capfd.readouterr().err


def test_eks_role_arns_are_checked_without_reading_the_endpoints_again(monkeypatch):
    """moto's EKS validates each role ARN's partition; the partitions come from one read of botocore's data."""
    from botocore.loaders import JSONFileLoader
    from moto.eks.exceptions import InvalidParameterException
    from moto.eks.utils import validate_role_arn

    moto_ext.install()
    validate_role_arn(f"arn:aws:iam::{moto_ext.ACCOUNT}:role/first")
    reads = []
    load = JSONFileLoader.load_file

    def counting_load(self, path):  # noqa: ANN001, ANN202
        reads.append(path)
        return load(self, path)

    monkeypatch.setattr(JSONFileLoader, "load_file", counting_load)
    validate_role_arn(f"arn:aws:iam::{moto_ext.ACCOUNT}:role/eks-nodes")
    validate_role_arn(f"arn:aws-cn:iam::{moto_ext.ACCOUNT}:role/eks-nodes")
    with pytest.raises(InvalidParameterException):
        validate_role_arn(f"arn:nowhere:iam::{moto_ext.ACCOUNT}:role/eks-nodes")
    assert reads == []
