"""Step 01's optional probe on aws: an On-Demand Capacity Reservation for all the GPU nodes in each candidate
AZ, cancelled at once - only after confirmation (``assume_yes`` or an interactive yes), cancelled on every exit
path (exceptions, Ctrl-C, kernel interrupt, SIGTERM), then verified by listing. Step 02 uses the listing and
cancelling too, to clear probe reservations a hard kill left behind.
"""

from __future__ import annotations

import datetime as _dt
import sys
import uuid
from collections.abc import Callable
from typing import Any

from ....clients import aws as aws_client
from ....clients.aws import Identity
from ....core.config import Settings
from ....plan import cost
from .. import common
from .report import CapacityReport, ProbeResult

#: How many top-ranked AZs a probe tests at most.
MAX_PROBE_AZS = 3
#: Errors of ``CreateCapacityReservation`` that mean "no capacity there now".
NO_CAPACITY_CODES = ("InsufficientInstanceCapacity", "InsufficientCapacity", "InsufficientReservedInstanceCapacity")
#: A test seam: called as probe_hook(reservation_id) right after a probe reservation is created.
probe_hook: Callable[[str], None] | None = None


def probe_reservations(ec2, token: str | None = None) -> list[dict[str, Any]]:
    """This tutorial's active or pending probe reservations (one probe's by token, or all)."""
    return aws_client.tagged_reservations(ec2, common.PROBE_TAG_KEY, token)


def cancel_probe_reservations(ec2, token: str | None = None) -> tuple[list[str], list[str]]:
    """Cancel this tutorial's probe reservations (one probe's by token, or all); (cancelled, still active)."""
    from botocore.exceptions import ClientError

    cancelled: list[str] = []
    for cr in probe_reservations(ec2, token):
        rid = cr["CapacityReservationId"]
        try:
            ec2.cancel_capacity_reservation(CapacityReservationId=rid)
            cancelled.append(rid)
        except ClientError as e:
            print(
                f"warning: cancelling {rid} failed ({aws_client.err_code(e)}): {aws_client.err_msg(e)}", file=sys.stderr
            )
    left = [cr["CapacityReservationId"] for cr in probe_reservations(ec2, token)]
    return cancelled, left


def _create_probe_reservation(ec2, az: str, instance_type: str, count: int, token: str) -> str:
    from botocore.exceptions import ClientError

    tags = [
        {
            "ResourceType": "capacity-reservation",
            "Tags": [
                {"Key": common.PROBE_TAG_KEY, "Value": token},
                {"Key": common.TAG_KEY, "Value": "capacity-probe"},
                {"Key": "Name", "Value": "raytrain-tutorial capacity probe (cancelled at once)"},
            ],
        }
    ]
    base = dict(
        InstanceType=instance_type,
        InstancePlatform="Linux/UNIX",
        AvailabilityZone=az,
        InstanceCount=count,
        InstanceMatchCriteria="targeted",
        ClientToken=token,
        TagSpecifications=tags,
    )
    try:
        # A safety net for a hard kill (SIGKILL, power loss): the reservation expires by itself.
        cr = ec2.create_capacity_reservation(
            **base, EndDateType="limited", EndDate=common.utcnow() + _dt.timedelta(minutes=30)
        )
    except ClientError as e:
        code, msg = aws_client.err_code(e), aws_client.err_msg(e)
        if code not in ("InvalidParameterValue", "InvalidParameterCombination") or "EndDate" not in msg:
            raise
        cr = ec2.create_capacity_reservation(**base, EndDateType="unlimited")
    return cr["CapacityReservation"]["CapacityReservationId"]


def probe_az(ec2, region: str, az: str, instance_type: str, count: int) -> ProbeResult:
    """Reserve ``count`` x ``instance_type`` in ``az`` and cancel at once. Never leaves a reservation behind."""
    from botocore.exceptions import BotoCoreError, ClientError

    token = uuid.uuid4().hex
    result = ProbeResult(region=region, az=az, status="error: not run", reservation_id=None, cancelled=False)
    with common.DeferredInterrupt() as guard:
        try:
            result.reservation_id = _create_probe_reservation(ec2, az, instance_type, count, token)
            result.status = "confirmed"
            if probe_hook is not None:
                probe_hook(result.reservation_id)
        except (ClientError, BotoCoreError) as e:
            code = aws_client.err_code(e)
            if code in NO_CAPACITY_CODES:
                result.status, result.message = "no capacity", aws_client.err_msg(e)
            else:
                result.status, result.message = f"error: {code}", aws_client.err_msg(e)
        finally:
            _, left = cancel_probe_reservations(ec2, token)
            result.cancelled = not left
            if left:
                msg = f"probe reservation(s) {', '.join(left)} are STILL ACTIVE and billed. Cancel now: " + "; ".join(
                    f"aws ec2 cancel-capacity-reservation --capacity-reservation-id {r} --region {region}" for r in left
                )
                print(f"WARNING: {msg}", file=sys.stderr)
                result.message = (result.message + " " + msg).strip()
    guard.reraise()
    return result


def run_probes(sess, settings: Settings, report: CapacityReport, ident: Identity, *, prices: Any, assume_yes: bool):
    a = settings.aws
    if a.gpu_az:
        cands = [r for r in report.rows if r.region == a.region and r.az == a.gpu_az and r.tier <= 2]
    else:
        cands = [r for r in report.rows if r.tier <= 2][:MAX_PROBE_AZS]
    if not cands:
        report.notes.append("probe skipped: no AZ has quota for the GPU nodes")
        return
    price, _ = cost.instance_price(cost.load(prices), a.gpu_node_type, cands[0].region)
    billed = "" if price is None else f", about ${price * a.gpu_node_count / 60:.2f} per AZ if billed for a minute"
    common.confirm(
        f"create and at once cancel an On-Demand Capacity Reservation for {a.gpu_node_count} x "
        f"{a.gpu_node_type} in {len(cands)} AZ(s)",
        ident,
        assume_yes=assume_yes,
        details=[f"{r.region}/{r.az}" for r in cands]
        + [
            f"billed at the On-Demand rate while it exists (seconds here{billed})",
            f"cancelled on every exit path and verified by listing; leftovers carry the tag {common.PROBE_TAG_KEY}",
            "it reserves outside the cluster placement group: it proves the AZ has the instances, not that they fit "
            "in the one placement group the EFA node group launches into",
        ],
    )
    for region in sorted({r.region for r in cands}):
        old, left = cancel_probe_reservations(aws_client.client(sess, "ec2", region))
        if old:
            print(f"cancelled {len(old)} leftover probe reservation(s) in {region}: {', '.join(old)}")
        if left:
            report.problems.append(f"leftover probe reservations still active in {region}: {', '.join(left)}")
    for r in cands:
        print(f"probing {r.region}/{r.az} ...", flush=True)
        res = probe_az(aws_client.client(sess, "ec2", r.region), r.region, r.az, a.gpu_node_type, a.gpu_node_count)
        report.probes.append(res)
        r.probe = res.status
        if not res.cancelled:
            report.problems.append(res.message)
