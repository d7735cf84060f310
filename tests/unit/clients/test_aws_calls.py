"""Guarded AWS calls (raytrain_helpers.clients.aws): essential_call / optional_call, the IAM action of each call,
the one-line error and the retry policy. botocore's Stubber answers the errors here (it bypasses the retries, so
these are the failures that survived them); the retries themselves are exercised against moto in
tests/unit/targets/aws/placement/test_capacity_restricted.py."""

from __future__ import annotations

import boto3
import pytest
from botocore.exceptions import EndpointConnectionError
from botocore.stub import Stubber

from raytrain_helpers.clients import aws as aws_client

R = "us-west-2"


def _client(service: str):
    sess = boto3.session.Session(aws_access_key_id="a" * 20, aws_secret_access_key="b" * 40, region_name=R)
    return aws_client.client(sess, service, R)


@pytest.mark.parametrize(
    ("service", "operation", "action"),
    [
        ("ec2", "describe_capacity_reservations", "ec2:DescribeCapacityReservations"),
        ("ec2", "get_spot_placement_scores", "ec2:GetSpotPlacementScores"),
        ("service-quotas", "get_aws_default_service_quota", "servicequotas:GetAWSDefaultServiceQuota"),
        ("eks", "describe_nodegroup", "eks:DescribeNodegroup"),
        ("autoscaling", "describe_scaling_activities", "autoscaling:DescribeScalingActivities"),
    ],
)
def test_iam_action_comes_from_the_service_model(service, operation, action):
    assert aws_client.iam_action(_client(service), operation) == action


def test_an_http_500_on_an_optional_call_becomes_a_row():
    ec2 = _client("ec2")
    with Stubber(ec2) as stub:
        stub.add_client_error(
            "describe_capacity_reservations", "InternalError", "We encountered an internal error", 500
        )
        sig = aws_client.optional_call(
            ec2, "describe_capacity_reservations", instead="reservations not counted", default=[],
            items="CapacityReservations",
        )  # fmt: skip
    assert not sig.available and sig.value == []
    assert sig.failure.status == 500 and sig.failure.kind == "unavailable"
    assert sig.line() == "unavailable: InternalError for ec2:DescribeCapacityReservations; reservations not counted"


def test_throttling_that_survived_the_retries_becomes_a_row():
    ec2 = _client("ec2")
    with Stubber(ec2) as stub:
        stub.add_client_error("get_spot_placement_scores", "RequestLimitExceeded", "Request limit exceeded.", 503)
        sig = aws_client.optional_call(
            ec2, "get_spot_placement_scores", instead="no Spot score", InstanceTypes=["g6.12xlarge"], TargetCapacity=2
        )
    assert sig.failure.kind == "throttled"
    assert sig.line() == "unavailable: RequestLimitExceeded for ec2:GetSpotPlacementScores; no Spot score"


def test_an_available_signal_carries_the_value():
    ec2 = _client("ec2")
    with Stubber(ec2) as stub:
        stub.add_response("get_spot_placement_scores", {"SpotPlacementScores": []})
        sig = aws_client.optional_call(
            ec2, "get_spot_placement_scores", instead="x", InstanceTypes=["g6.12xlarge"], TargetCapacity=2
        )
    assert sig.available and sig.line() == "" and sig.value["SpotPlacementScores"] == []


def test_an_essential_call_that_is_denied_is_one_line_with_the_api_the_action_and_the_fix():
    ec2 = _client("ec2")
    with Stubber(ec2) as stub:
        stub.add_client_error(
            "describe_instance_types",
            "UnauthorizedOperation",
            "You are not authorized to perform this operation.\nEncoded authorization failure message: abc",
            403,
        )
        with pytest.raises(aws_client.AwsCallError) as info:
            aws_client.essential_call(ec2, "describe_instance_types", InstanceTypes=["g6.12xlarge"])
    msg = str(info.value)
    assert "\n" not in msg
    assert msg.startswith("DescribeInstanceTypes failed in us-west-2 (UnauthorizedOperation)")
    assert "IAM action ec2:DescribeInstanceTypes" in msg
    assert "Fix: allow ec2:DescribeInstanceTypes for this identity" in msg
    # a notebook (IPython) shows this one line instead of a traceback
    assert info.value._render_traceback_() == [f"AwsCallError: {msg}"]
    assert isinstance(info.value, aws_client.AwsError)  # the CLI's `error: ...` line catches it


@pytest.mark.parametrize(
    ("code", "status", "fix"),
    [
        ("Throttling", 400, "wait a minute and re-run"),
        ("InternalError", 500, "the service did not answer in us-west-2"),
        ("SomethingNew", 502, "the service did not answer in us-west-2"),
        ("UnsupportedOperation", 400, "us-west-2 does not offer ec2:DescribeInstanceTypes"),
        ("ExpiredToken", 400, "refresh the credentials"),
        ("InvalidParameterValue", 400, "correct what the message says"),
    ],
)
def test_the_fix_follows_the_error(code, status, fix):
    ec2 = _client("ec2")
    with Stubber(ec2) as stub:
        stub.add_client_error("describe_instance_types", code, "message", status)
        with pytest.raises(aws_client.AwsCallError, match=f"\\({code}.*IAM action ec2:DescribeInstanceTypes. Fix: "):
            try:
                aws_client.essential_call(ec2, "describe_instance_types")
            except aws_client.AwsCallError as e:
                assert fix in str(e)
                raise


def test_no_answer_at_all_is_named_too():
    ec2 = _client("ec2")

    def unreachable(**kwargs):
        raise EndpointConnectionError(endpoint_url="https://ec2.us-west-2.amazonaws.com/")

    ec2.meta.events.register("before-call.ec2.DescribeRegions", unreachable)
    with pytest.raises(aws_client.AwsCallError, match=r"DescribeRegions .*\(EndpointConnectionError.*did not answer"):
        aws_client.essential_call(ec2, "describe_regions")
    sig = aws_client.optional_call(ec2, "describe_regions", instead="x")
    assert sig.line() == "unavailable: EndpointConnectionError for ec2:DescribeRegions; x"


def test_absent_codes_return_none_and_a_bad_call_is_a_bug_not_a_signal():
    eks = _client("eks")
    with Stubber(eks) as stub:
        stub.add_client_error("describe_cluster", "ResourceNotFoundException", "No cluster found", 404)
        assert (
            aws_client.essential_call(eks, "describe_cluster", absent=("ResourceNotFoundException",), name="c") is None
        )
    # `name` missing: the caller's bug, raised (not a signal) as one line naming the API, never a traceback
    with pytest.raises(aws_client.AwsCallError, match="DescribeCluster failed .*ParamValidationError") as info:
        aws_client.optional_call(eks, "describe_cluster", instead="x")
    assert info.value.failure.kind == "invalid request" and "\n" not in str(info.value)


def test_clients_retry_with_botocores_modes(monkeypatch):
    monkeypatch.delenv("AWS_RETRY_MODE", raising=False)
    retries = _client("ec2").meta.config.retries  # botocore counts the first attempt too
    assert retries == {"mode": "standard", "total_max_attempts": aws_client.MAX_ATTEMPTS + 1}
    monkeypatch.setenv("AWS_RETRY_MODE", "adaptive")
    assert _client("service-quotas").meta.config.retries["mode"] == "adaptive"
    monkeypatch.setenv("AWS_RETRY_MODE", "legacy")  # legacy ignores most throttling codes: not accepted
    assert _client("eks").meta.config.retries["mode"] == "standard"
