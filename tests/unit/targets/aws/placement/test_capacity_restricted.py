"""Step 01 on aws under a restricted IAM role and with failing endpoints, against moto enforcing IAM.

The role (tests/fakes/aws/iam_faults.py) is allowed exactly the actions step 01 needs, minus one at a time:
an optional signal denied leaves the step going on with a row "unavailable: <code> for <IAM action>; <what the
ranking uses instead>"; an essential call denied stops it with one line naming the API, the IAM action and the
fix. HTTP 500s and throttling are injected into moto's answers, so botocore's own retries see them.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[5]))

from raytrain_helpers.clients import aws as aws_client  # noqa: E402
from tests.fakes.aws import iam_faults, moto_ext  # noqa: E402
from tests.fakes.aws.fixtures import make_settings  # noqa: E402

placement = importlib.import_module("raytrain_helpers.targets.aws.placement.capacity")

pytestmark = pytest.mark.timeout(120)

R = "us-west-2"
EVERY = iam_faults.CAPACITY_ESSENTIAL + iam_faults.CAPACITY_OPTIONAL


@pytest.fixture
def faults(mocked_aws):
    iam_faults.clear()
    yield iam_faults
    iam_faults.clear()


def _capacity(tmp_path, allow=EVERY, deny=()):
    with iam_faults.restricted_role([a for a in allow if a not in deny], deny=deny):
        return placement.capacity(make_settings(tmp_path), regions=[R])


def test_the_listed_actions_are_all_step_01_needs(faults, tmp_path, capsys):
    moto_ext.set_spot_scores(R, "g6.12xlarge", {"us-west-2b": 8})
    rep = _capacity(tmp_path)
    assert rep.ok and rep.unavailable == [], [u.line() for u in rep.unavailable]
    assert rep.rows[0].az == "us-west-2b" and rep.rows[0].spot_score == 8 and rep.rows[0].gpu_quota.ok
    assert "assumed-role/raytrain-workshop" in capsys.readouterr().out  # the step really ran as the role


@pytest.mark.parametrize(
    ("action", "code", "instead", "check"),
    [
        ("ec2:GetSpotPlacementScores", "AccessDenied", "spot", lambda r: r.rows[0].spot_score is None),
        (
            "ec2:DescribeCapacityReservations",
            "AccessDenied",
            "reservations",
            lambda r: r.rows[0].gpu_quota.used == 0 and r.rows[0].gpu_quota.ok,
        ),
        (
            "ec2:DescribeInstances",
            "AccessDenied",
            "instances",
            lambda r: r.rows[0].gpu_quota.ok is None and "vCPUs in use unreadable" in r.rows[0].verdict,
        ),
        (
            "servicequotas:GetServiceQuota",
            "AccessDeniedException",
            "quota",
            lambda r: r.rows[0].gpu_quota.limit is None and "quota unknown" in r.rows[0].verdict,
        ),
        (
            "servicequotas:GetAWSDefaultServiceQuota",
            "AccessDeniedException",
            "quota",
            lambda r: r.system_quota[R].limit is None and r.rows[0].gpu_quota.limit == 192,
        ),
    ],
)
def test_one_optional_signal_denied_becomes_a_row_and_the_step_goes_on(
    faults, tmp_path, capsys, action, code, instead, check
):
    moto_ext.set_spot_scores(R, "g6.12xlarge", {"us-west-2b": 8})
    moto_ext.FAKE.reservations[R] = {}
    moto_ext.FAKE.quotas.pop((R, "L-1216C47A"))  # the system nodes' quota was never applied: the AWS default is read
    rep = _capacity(tmp_path, deny=[action])
    line = f"unavailable: {code} for {action}; {placement.INSTEAD[instead]}"
    assert line in [u.line() for u in rep.unavailable]
    assert {u.failure.action for u in rep.unavailable} == {action}  # one signal at a time
    assert check(rep)
    assert rep.recommendation is not None and rep.plan is not None and rep.cost is not None
    rep.show()
    out = capsys.readouterr().out
    assert line in out and f"| {R} " in out


@pytest.mark.parametrize(
    ("action", "api"),
    [
        ("ec2:DescribeRegions", "DescribeRegions"),
        ("ec2:DescribeAvailabilityZones", "DescribeAvailabilityZones"),
        ("ec2:DescribeInstanceTypeOfferings", "DescribeInstanceTypeOfferings"),
        ("ec2:DescribeInstanceTypes", "DescribeInstanceTypes"),
        ("eks:DescribeCluster", "DescribeCluster"),
    ],
)
def test_one_essential_call_denied_stops_with_one_line(faults, tmp_path, action, api):
    with pytest.raises(aws_client.AwsCallError) as info:
        _capacity(tmp_path, deny=[action])
    msg = str(info.value)
    assert "\n" not in msg and msg.startswith(f"{api} failed in {R} (AccessDenied")
    assert f"IAM action {action}. Fix: allow {action} for this identity" in msg
    assert info.value._render_traceback_() == [f"AwsCallError: {msg}"]


def test_cli_prints_the_one_line_and_exits_1(faults, tmp_path, capsys):
    from raytrain_helpers.cli import main

    env = tmp_path / "env.yaml"
    make_settings(tmp_path)  # copies env.yaml
    with iam_faults.restricted_role([a for a in EVERY if a != "ec2:DescribeInstanceTypes"]):
        code = main(["capacity", "-f", str(env), "-p", "target", "aws", "--regions", R])
    err = capsys.readouterr().err
    assert code == 1 and "Traceback" not in err
    errors = [ln for ln in err.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and errors[0].startswith(f"error: DescribeInstanceTypes failed in {R} (AccessDenied")


def test_an_http_500_on_describe_capacity_reservations_is_retried_then_a_row(faults, tmp_path, monkeypatch, capsys):
    """The case seen on a real endpoint: every DescribeCapacityReservations answered with HTTP 500."""
    monkeypatch.setattr(aws_client, "MAX_ATTEMPTS", 1)  # one retry: keeps the backoff short
    iam_faults.inject("DescribeCapacityReservations", R, 500, "InternalError")
    rep = placement.capacity(make_settings(tmp_path), regions=[R])
    assert rep.ok
    assert iam_faults.FAULTS.hits == [("DescribeCapacityReservations", R)] * 2  # botocore retried it once
    line = f"unavailable: InternalError for ec2:DescribeCapacityReservations; {placement.INSTEAD['reservations']}"
    assert [u.line() for u in rep.unavailable] == [line]
    rep.show()
    assert line in capsys.readouterr().out


def test_throttling_is_retried_by_botocore(faults, tmp_path):
    moto_ext.set_spot_scores(R, "g6.12xlarge", {"us-west-2b": 8})
    iam_faults.inject("GetSpotPlacementScores", R, 400, "RequestLimitExceeded", times=2)
    iam_faults.inject("GetServiceQuota", R, 400, "ThrottlingException", times=1)
    rep = placement.capacity(make_settings(tmp_path), regions=[R])
    assert rep.ok and rep.unavailable == []
    assert rep.rows[0].spot_score == 8 and rep.rows[0].gpu_quota.limit == 192
    assert len(iam_faults.FAULTS.hits) == 3


def test_a_region_whose_essential_calls_fail_is_left_out_with_a_row(faults, tmp_path, capsys):
    """An account policy denying one region: the other regions are ranked; the settings' region must work."""
    iam_faults.inject("DescribeInstanceTypeOfferings", "us-east-1", 403, "UnauthorizedOperation")
    rep = placement.capacity(make_settings(tmp_path), regions=[R, "us-east-1", "us-east-2"])
    line = "unavailable: UnauthorizedOperation for ec2:DescribeInstanceTypeOfferings; us-east-1 left out of the ranking"
    assert rep.ok and [u.line() for u in rep.unavailable] == [line]
    assert {r.region for r in rep.rows} == {R, "us-east-2"} and "us-east-1" not in rep.not_offered
    rep.show()
    assert f"| us-east-1 | {line}" in capsys.readouterr().out
    iam_faults.inject("DescribeInstanceTypeOfferings", R, 403, "UnauthorizedOperation")
    with pytest.raises(aws_client.AwsCallError, match=f"^DescribeInstanceTypeOfferings failed in {R} "):
        placement.capacity(make_settings(tmp_path), regions=[R, "us-east-2"])


def test_the_same_denial_in_several_regions_is_one_row(faults, tmp_path, capsys):
    deny = "ec2:GetSpotPlacementScores"
    with iam_faults.restricted_role([a for a in EVERY if a != deny], deny=[deny]):
        rep = placement.capacity(make_settings(tmp_path), regions=[R, "us-east-2"])
    assert rep.ok and sorted(u.scope for u in rep.unavailable) == ["us-east-2", R]
    rep.show()
    rows = [ln for ln in capsys.readouterr().out.splitlines() if deny in ln]
    assert len(rows) == 1 and rows[0].startswith("| us-west-2, us-east-2 | unavailable: AccessDenied for " + deny)


def test_a_probe_without_an_answer_is_an_error_row_and_leaves_nothing(faults):
    from botocore.exceptions import EndpointConnectionError

    ec2 = aws_client.client(aws_client.session(R), "ec2", R)

    def unreachable(**kwargs):
        raise EndpointConnectionError(endpoint_url=f"https://ec2.{R}.amazonaws.com/")

    ec2.meta.events.register("before-call.ec2.CreateCapacityReservation", unreachable)
    res = placement.probe_az(ec2, R, f"{R}a", "g6.12xlarge", 2)
    assert (res.status, res.cancelled, res.reservation_id) == ("error: EndpointConnectionError", True, None)
    assert moto_ext.FAKE.all_reservations(R) == []
