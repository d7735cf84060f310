"""Capacity Blocks for ML on the ``aws`` target: the offerings step 01 lists beside the On-Demand reservation probe
and the Spot scores, and the start and end of the reservation the GPU nodes use.

Facts (checked 2026-12-04):

* EC2 ``DescribeCapacityBlockOfferings`` (botocore 1.43.11's ec2 model): ``CapacityDurationHours`` is required;
  ``InstanceType`` and ``InstanceCount`` narrow it; each offering has ``AvailabilityZone``, ``StartDate``,
  ``EndDate``, ``CapacityBlockDurationHours``, ``UpfrontFee`` and ``CurrencyCode``. It only reads; buying is
  ``PurchaseCapacityBlock``, which this tool never calls. moto 5.2.1 does not implement it (tests use botocore's
  Stubber).
* ``DescribeCapacityReservations`` reports ``ReservationType`` (``default`` = an On-Demand Capacity Reservation,
  ``capacity-block``), ``State`` (a block is ``scheduled`` before it starts, ``active`` while it runs, then
  ``expired``) and ``StartDate`` / ``EndDate``.
* eksctl (eksctl-io/eksctl v0.230.0, pkg/apis/eksctl.io/v1alpha5/validation.go, pkg/cfn/builder/managed_nodegroup.go;
  since v0.205.0, PR #8207): ``instanceMarketOptions.marketType: capacity-block`` beside
  ``capacityReservation.capacityReservationTarget`` makes a managed node group of capacity type CAPACITY_BLOCK.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ....clients import aws as aws_client
from ....clients.aws import Signal
from ....core.settings import Settings
from ....core.tables import table
from ....plan.eksctl import CAPACITY_BLOCK
from . import capacity as placement
from .report import CapacityReport

#: The block length 01 asks offerings for (Capacity Blocks are sold in whole days; 24 h is the shortest).
BLOCK_HOURS = 24
#: How many offerings 01 shows at most (the soonest first).
SHOW_OFFERINGS = 8
#: What 01 does without the offerings (the signal is optional).
INSTEAD = "no Capacity Block offerings listed (the On-Demand probe and Spot scores still rank the AZs)"


def _when(value: Any) -> str:
    """A botocore timestamp (or ISO text) as ``YYYY-MM-DD HH:MM UTC``."""
    if isinstance(value, str):
        value = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    if value is None:
        return "?"
    if value.tzinfo is not None:
        value = value.astimezone(dt.timezone.utc)
    return value.strftime("%Y-%m-%d %H:%M UTC")


def window(cr: dict[str, Any]) -> str:
    """When a reservation starts and ends, from ``DescribeCapacityReservations``."""
    end = _when(cr["EndDate"]) if cr.get("EndDate") else "no end date"
    return f"starts {_when(cr.get('StartDate'))}, ends {end}"


def reservation_notes(cr: dict[str, Any] | None) -> list[str]:
    """The plan's lines about the GPU nodes' reservation: its type and, for a Capacity Block, its window."""
    if not cr:
        return []
    rid = cr.get("CapacityReservationId", "?")
    if cr.get("ReservationType") == CAPACITY_BLOCK:
        return [
            f"capacity reservation {rid} is a Capacity Block for ML ({cr.get('State')}): it {window(cr)}; the GPU "
            f"nodes run only inside this window - plan the training job to end before it"
        ]
    return [f"capacity reservation {rid} is an On-Demand Capacity Reservation ({window(cr)})"]


def type_problems(cr: dict[str, Any], settings: Settings) -> list[str]:
    """Why the reservation EC2 reports does not match ``aws.capacity_reservation_type`` or cannot be used now."""
    a = settings.aws
    found = cr.get("ReservationType") or "default"
    problems = []
    if a.capacity_reservation_type and a.capacity_reservation_type != found:
        problems.append(
            f"EC2 reports its type as {found!r}, aws.capacity_reservation_type says {a.capacity_reservation_type!r} "
            f"(set capacity_reservation_type: {found}, or leave it empty to read it from EC2)"
        )
    if found == CAPACITY_BLOCK and cr.get("State") != "active":
        problems.append(f"the Capacity Block {window(cr)}; run `up` once it is active")
    return problems


@dataclass
class BlockOfferings:
    """Capacity Block offerings for the GPU nodes in one region (nothing bought)."""

    region: str
    instance_type: str
    count: int
    hours: int
    offerings: list[dict[str, Any]] = field(default_factory=list)
    #: Set when the call failed: the row 01 shows instead.
    unavailable: Signal | None = None

    def rows(self) -> list[tuple[str, str, str, str, str]]:
        out = []
        for o in self.offerings[:SHOW_OFFERINGS]:
            fee = f"{float(o['UpfrontFee']):,.2f} {o.get('CurrencyCode', 'USD')}" if o.get("UpfrontFee") else "?"
            hours = str(o.get("CapacityBlockDurationHours", self.hours))
            out.append((o.get("AvailabilityZone", "?"), _when(o.get("StartDate")), _when(o.get("EndDate")), hours, fee))
        return out

    def as_dict(self) -> dict[str, Any]:
        return dict(
            region=self.region,
            instance_type=self.instance_type,
            count=self.count,
            hours=self.hours,
            rows=[list(r) for r in self.rows()],
            unavailable=self.unavailable.line() if self.unavailable else None,
        )

    def show(self) -> None:
        what = f"{self.count} x {self.instance_type} for {self.hours} h in {self.region}"
        if self.unavailable is not None:
            print(f"Capacity Blocks for ML ({what}): {self.unavailable.line()}")
            return
        if not self.offerings:
            print(f"Capacity Blocks for ML ({what}): none offered now (ec2:DescribeCapacityBlockOfferings)")
            return
        table(
            self.rows(),
            ["AZ", "starts", "ends", "hours", "upfront fee"],
            title=f"Capacity Blocks for ML on offer, {what}, soonest first (nothing bought)",
        )
        print(
            "to buy one: aws ec2 purchase-capacity-block --capacity-block-offering-id ID --instance-platform "
            "Linux/UNIX; then set aws.capacity_reservation_id (and capacity_reservation_type: capacity-block)"
        )


def offerings(ec2, region: str, instance_type: str, count: int, hours: int = BLOCK_HOURS) -> BlockOfferings:
    """The Capacity Block offerings for ``count`` x ``instance_type`` (an optional signal: a failure is a row)."""
    sig = aws_client.optional_call(
        ec2,
        "describe_capacity_block_offerings",
        instead=INSTEAD,
        default=[],
        items="CapacityBlockOfferings",
        scope=region,
        InstanceType=instance_type,
        InstanceCount=count,
        CapacityDurationHours=hours,
    )
    found = sorted(sig.value or [], key=lambda o: (str(o.get("StartDate")), str(o.get("AvailabilityZone"))))
    return BlockOfferings(
        region=region,
        instance_type=instance_type,
        count=count,
        hours=hours,
        offerings=found,
        unavailable=None if sig.available else sig,
    )


@dataclass
class CapacityWithBlocks(CapacityReport):
    """Step 01's report with the Capacity Block offerings beside the On-Demand probe and the Spot scores."""

    blocks: BlockOfferings | None = None

    def as_dict(self) -> dict[str, Any]:
        return {**super().as_dict(), "capacity_blocks": self.blocks.as_dict() if self.blocks else None}

    def show(self) -> None:
        super().show()
        if self.blocks is not None:
            self.blocks.show()


def capacity(settings: Settings, *, regions: Sequence[str] | str | None = None, **kwargs: Any) -> CapacityWithBlocks:
    """Notebook 01 on aws: :func:`placement.capacity`, then the Capacity Block offerings in the chosen region and
    the window of the settings' reservation (read only; nothing is bought or reserved here)."""
    report = placement.capacity(settings, regions=regions, **kwargs)
    out = CapacityWithBlocks(**{f: getattr(report, f) for f in CapacityReport.__dataclass_fields__})
    region = report.recommendation["region"] if report.recommendation else settings.aws.region
    ec2 = aws_client.client(aws_client.session(region), "ec2", region)
    a = settings.aws
    out.blocks = offerings(ec2, region, a.gpu_node_type, a.gpu_node_count)
    if out.blocks.unavailable is not None:
        out.unavailable.append(out.blocks.unavailable)
    if a.capacity_reservation_id and region == a.region:
        sig = aws_client.optional_call(
            ec2,
            "describe_capacity_reservations",
            instead="the reservation's type and window are not shown",
            default=[],
            items="CapacityReservations",
            scope=region,
            CapacityReservationIds=[a.capacity_reservation_id],
        )
        out.notes += reservation_notes(sig.value[0] if sig.value else None)
    return out
