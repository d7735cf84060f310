"""Capacity Blocks for ML (raytrain_helpers.targets.aws.placement.blocks): the offerings 01 lists, the window of a
reservation, and a block's reservation at `cluster plan|up`.

moto 5.2.1 implements neither ``DescribeCapacityBlockOfferings`` nor Capacity Block reservations, so these tests
answer with botocore's Stubber, which checks every request and response against botocore's own EC2 model (the
shapes the real API sends: ReservationType, State, StartDate, EndDate, UpfrontFee...)."""

from __future__ import annotations

import datetime as dt
import sys
from pathlib import Path
from types import SimpleNamespace

import boto3
import pytest
from botocore.stub import Stubber

sys.path.insert(0, str(Path(__file__).resolve().parents[5]))

from raytrain_helpers.core.config import ConfigError  # noqa: E402
from raytrain_helpers.targets.aws import eks  # noqa: E402
from raytrain_helpers.targets.aws.placement import blocks as capacity_blocks  # noqa: E402
from tests.fakes.aws import moto_blocks  # noqa: E402
from tests.fakes.aws.fixtures import make_settings  # noqa: E402

R = "us-east-2"
CR = "cr-0123456789abcdef0"
UTC = dt.timezone.utc
START, END = dt.datetime(2026, 12, 10, 11, 30, tzinfo=UTC), dt.datetime(2026, 12, 11, 11, 30, tzinfo=UTC)


@pytest.fixture
def ec2(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    client = boto3.client("ec2", region_name=R)
    with Stubber(client) as stub:
        yield client, stub
        stub.assert_no_pending_responses()


def offering(az, start, fee):
    return dict(
        CapacityBlockOfferingId=f"cb-{az[-1]}{start.day:02d}",
        InstanceType="p5.48xlarge",
        AvailabilityZone=az,
        InstanceCount=2,
        StartDate=start,
        EndDate=start + dt.timedelta(hours=24),
        CapacityBlockDurationHours=24,
        UpfrontFee=fee,
        CurrencyCode="USD",
        Tenancy="default",
    )


def block(state="active", rtype="capacity-block"):
    return dict(
        CapacityReservationId=CR,
        InstanceType="p5.48xlarge",
        InstancePlatform="Linux/UNIX",
        AvailabilityZone="us-east-2b",
        AvailableInstanceCount=2,
        TotalInstanceCount=2,
        State=state,
        StartDate=START,
        EndDate=END,
        ReservationType=rtype,
    )


def test_offerings_are_listed_soonest_first_and_nothing_is_bought(ec2, capsys):
    client, stub = ec2
    later, sooner = (
        offering("us-east-2a", START + dt.timedelta(days=2), "1580.16"),
        offering("us-east-2b", START, "1490.4"),
    )
    stub.add_response(
        "describe_capacity_block_offerings",
        {"CapacityBlockOfferings": [later, sooner]},
        dict(InstanceType="p5.48xlarge", InstanceCount=2, CapacityDurationHours=24),
    )
    got = capacity_blocks.offerings(client, R, "p5.48xlarge", 2)
    assert got.unavailable is None
    assert got.rows() == [
        ("us-east-2b", "2026-12-10 11:30 UTC", "2026-12-11 11:30 UTC", "24", "1,490.40 USD"),
        ("us-east-2a", "2026-12-12 11:30 UTC", "2026-12-13 11:30 UTC", "24", "1,580.16 USD"),
    ]
    got.show()
    out = capsys.readouterr().out
    assert (
        "Capacity Blocks for ML on offer, 2 x p5.48xlarge for 24 h in us-east-2, soonest first (nothing bought)" in out
    )
    assert "aws ec2 purchase-capacity-block --capacity-block-offering-id ID" in out


def test_no_offerings_and_a_denied_call_are_each_one_line(ec2, capsys):
    client, stub = ec2
    stub.add_response("describe_capacity_block_offerings", {"CapacityBlockOfferings": []})
    capacity_blocks.offerings(client, R, "g6.12xlarge", 2).show()
    assert "Capacity Blocks for ML (2 x g6.12xlarge for 24 h in us-east-2): none offered now" in capsys.readouterr().out
    stub.add_client_error("describe_capacity_block_offerings", "UnauthorizedOperation", "not authorized", 403)
    got = capacity_blocks.offerings(client, R, "g6.12xlarge", 2)
    got.show()
    assert got.offerings == [] and got.unavailable is not None
    assert (
        capsys.readouterr()
        .out.strip()
        .endswith(
            "unavailable: UnauthorizedOperation for ec2:DescribeCapacityBlockOfferings; " + capacity_blocks.INSTEAD
        )
    )


def test_the_plan_says_when_a_block_starts_and_ends():
    (note,) = capacity_blocks.reservation_notes(block("scheduled"))
    assert note.startswith(f"capacity reservation {CR} is a Capacity Block for ML (scheduled): it starts ")
    assert "starts 2026-12-10 11:30 UTC, ends 2026-12-11 11:30 UTC; the GPU nodes run only inside this window" in note
    (note,) = capacity_blocks.reservation_notes(block(rtype="default") | {"EndDate": None})
    odcr = f"capacity reservation {CR} is an On-Demand Capacity Reservation"
    assert note == f"{odcr} (starts 2026-12-10 11:30 UTC, ends no end date)"
    assert capacity_blocks.reservation_notes(None) == []


def ctx_for(tmp_path, client, **params):
    s = make_settings(
        tmp_path, region=R, gpu_node_type="p5.48xlarge", gpus_per_node=8, capacity_reservation_id=CR, **params
    )
    return SimpleNamespace(settings=s, ec2=client, region=R)


def test_a_scheduled_block_or_a_wrong_type_stops_up_with_the_fix(ec2, tmp_path):
    client, stub = ec2
    stub.add_response(
        "describe_capacity_reservations",
        {"CapacityReservations": [block("scheduled")]},
        {"CapacityReservationIds": [CR]},
    )
    with pytest.raises(ConfigError) as e:
        eks.validate_reservation(ctx_for(tmp_path, client), "us-east-2b")
    assert (
        "the Capacity Block starts 2026-12-10 11:30 UTC, ends 2026-12-11 11:30 UTC; run `up` once it is active"
        in str(e.value)
    )
    stub.add_response(
        "describe_capacity_reservations",
        {"CapacityReservations": [block(rtype="default")]},
        {"CapacityReservationIds": [CR]},
    )
    with pytest.raises(ConfigError) as e:
        eks.validate_reservation(ctx_for(tmp_path, client, capacity_reservation_type="capacity-block"), "us-east-2b")
    assert "EC2 reports its type as 'default', aws.capacity_reservation_type says 'capacity-block'" in str(e.value)
    stub.add_response(
        "describe_capacity_reservations", {"CapacityReservations": [block()]}, {"CapacityReservationIds": [CR]}
    )
    assert eks.validate_reservation(ctx_for(tmp_path, client), "us-east-2b")["ReservationType"] == "capacity-block"


def test_step_01_lists_block_offerings_beside_the_probe_and_spot(mocked_aws, tmp_path, monkeypatch, capsys):
    """The whole step on moto (+ tests/fakes/aws: quotas, Spot scores, reservations, block offerings)."""
    seeded = offering("us-west-2b", START, "480.0") | {"InstanceType": "g6.12xlarge"}
    monkeypatch.setitem(moto_blocks.OFFERINGS, "us-west-2", [seeded])
    rep = capacity_blocks.capacity(make_settings(tmp_path), regions=["us-west-2"])
    assert rep.ok, rep.problems
    assert rep.blocks.rows() == [("us-west-2b", "2026-12-10 11:30 UTC", "2026-12-11 11:30 UTC", "24", "480.00 USD")]
    assert rep.as_dict()["capacity_blocks"]["rows"] == [list(rep.blocks.rows()[0])]
    rep.show()
    out = capsys.readouterr().out
    assert out.index("AZs offering g6.12xlarge x 2") < out.index("Capacity Blocks for ML on offer, 2 x g6.12xlarge")
