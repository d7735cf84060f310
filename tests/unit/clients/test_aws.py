"""boto3, thinly (raytrain_helpers.clients.aws): redaction, errors, identity, the one pagination helper, tags."""

from __future__ import annotations

import boto3
import pytest
from botocore.stub import Stubber

from raytrain_helpers.clients import aws as aws_client

R = "us-west-2"


def _session():
    return boto3.session.Session(aws_access_key_id="a" * 20, aws_secret_access_key="b" * 40, region_name=R)


def test_redact_scrubs_live_credentials():
    sess = boto3.session.Session(
        aws_access_key_id="AKIAABCDEFGHIJKLMNOP", aws_secret_access_key="s3cr3t-value-123", region_name=R
    )
    line = "key AKIAABCDEFGHIJKLMNOP secret s3cr3t-value-123 other ASIAZZZZZZZZZZZZZZZZ ok"
    assert aws_client.redact(line, sess) == "key *** secret *** other *** ok"


def test_redact_scrubs_credentials_of_the_environment(monkeypatch):
    monkeypatch.setenv("AWS_SESSION_TOKEN", "a-session-token-value")
    monkeypatch.setenv("AWS_SECURITY_TOKEN", "short")  # too short to be told from ordinary words: kept
    assert aws_client.redact("token a-session-token-value short") == "token *** short"


def test_client_carries_the_retry_policy_and_user_agent():
    ec2 = aws_client.client(_session(), "ec2")
    assert ec2.meta.region_name == R
    retries = ec2.meta.config.retries  # botocore counts the first attempt too
    assert retries["mode"] == "standard" and retries["total_max_attempts"] == aws_client.MAX_ATTEMPTS + 1
    assert aws_client.USER_AGENT in ec2.meta.config.user_agent_extra


def test_error_code_and_message():
    from botocore.exceptions import ClientError

    e = ClientError({"Error": {"Code": "Throttling", "Message": "Rate exceeded"}}, "DescribeInstances")
    assert (aws_client.err_code(e), aws_client.err_msg(e)) == ("Throttling", "Rate exceeded")
    assert (aws_client.err_code(ValueError("x")), aws_client.err_msg(ValueError("x"))) == ("ValueError", "x")


def test_identity_without_credentials_says_how_to_get_them(monkeypatch, tmp_path):
    for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    with pytest.raises(aws_client.AwsError, match="no AWS credentials found. Fix: `aws configure`"):
        aws_client.identity(aws_client.session(R), R)


def test_paginate_follows_every_page_with_the_paginator():
    ec2 = _session().client("ec2", region_name=R)
    with Stubber(ec2) as stub:
        stub.add_response(
            "describe_instance_type_offerings",
            {"InstanceTypeOfferings": [{"Location": "us-west-2a"}], "NextToken": "t1"},
            {"LocationType": "availability-zone"},
        )
        stub.add_response(
            "describe_instance_type_offerings",
            {"InstanceTypeOfferings": [{"Location": "us-west-2b"}]},
            {"LocationType": "availability-zone", "NextToken": "t1"},
        )
        items = aws_client.paginate(
            ec2, "describe_instance_type_offerings", "InstanceTypeOfferings", LocationType="availability-zone"
        )
    assert [i["Location"] for i in items] == ["us-west-2a", "us-west-2b"]


class _PagedByHand:
    """An API without a paginator in its model: the helper follows NextToken itself."""

    def __init__(self):
        self.calls = []

    def can_paginate(self, operation):
        return False

    def list_things(self, **kwargs):
        self.calls.append(dict(kwargs))
        if "NextToken" not in kwargs:
            return {"Things": [1, 2], "NextToken": "n"}
        return {"Things": [3]}


def test_paginate_follows_next_token_by_hand():
    api = _PagedByHand()
    assert aws_client.paginate(api, "list_things", "Things", Owner="me") == [1, 2, 3]
    assert api.calls == [{"Owner": "me"}, {"Owner": "me", "NextToken": "n"}]


def test_tag_filters():
    items = [
        {"Id": 1, "Tags": [{"Key": "probe", "Value": "t1"}]},
        {"Id": 2, "Tags": [{"Key": "probe", "Value": "t2"}, {"Key": "Name", "Value": "x"}]},
        {"Id": 3},
    ]
    assert aws_client.tags_of(items[1]) == {"probe": "t2", "Name": "x"}
    assert [i["Id"] for i in aws_client.with_tag(items, "probe")] == [1, 2]
    assert [i["Id"] for i in aws_client.with_tag(items, "probe", "t2")] == [2]


def test_tagged_reservations_reads_every_page_and_filters_by_tag():
    ec2 = _session().client("ec2", region_name=R)
    states = {"Filters": [{"Name": "state", "Values": ["active", "pending"]}]}

    def reservation(rid, tags):
        return {"CapacityReservationId": rid, "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}

    with Stubber(ec2) as stub:
        stub.add_response(
            "describe_capacity_reservations",
            {"CapacityReservations": [reservation("cr-1", {"p": "a"}), reservation("cr-2", {})], "NextToken": "t"},
            states,
        )
        stub.add_response(
            "describe_capacity_reservations",
            {"CapacityReservations": [reservation("cr-3", {"p": "b"})]},
            {**states, "NextToken": "t"},
        )
        found = aws_client.tagged_reservations(ec2, "p")
    assert [cr["CapacityReservationId"] for cr in found] == ["cr-1", "cr-3"]


def test_describe_returns_none_for_what_does_not_exist():
    eks = _session().client("eks", region_name=R)
    with Stubber(eks) as stub:
        stub.add_client_error("describe_cluster", "ResourceNotFoundException", "No cluster found")
        stub.add_client_error("describe_nodegroup", "ResourceNotFoundException", "No node group found")
        stub.add_client_error("describe_cluster", "AccessDeniedException", "denied")
        assert aws_client.describe_cluster(eks, "c") is None
        assert aws_client.describe_nodegroup(eks, "c", "n") is None
        with pytest.raises(aws_client.AwsCallError, match=r"DescribeCluster .*AccessDeniedException.*eks:Desc"):
            aws_client.describe_cluster(eks, "c")
