"""What of the tutorial bills now on aws, read from the live account, with its cost per hour and the command that
stops it (``raytrain-tutorial status``, and after any failed step); the opt-in teardown after a failure.

Prices come from :mod:`raytrain_helpers.plan.cost` (the dated On-Demand list prices and the EKS control plane's
support tier); an S3 bucket bills per GB-month, not per hour, and is listed without an hourly figure.
"""

from __future__ import annotations

from typing import Any

from ....clients import aws as aws_client
from ....core.config import Settings
from ....plan import cost, iam
from ...base import BillingResult
from .. import ownership
from ..placement.probe import probe_reservations
from ..storage.state import ABSENT, bucket_state
from .state import AwsContext

#: The one command that stops everything the tutorial created on aws (notebook 08's teardown).
STOP_COMMAND = "raytrain-tutorial down --target aws --yes"
#: Node group statuses whose instances may run.
RUNNING_NG = ("CREATING", "ACTIVE", "UPDATING", "DEGRADED", "DELETING", "CREATE_FAILED", "DELETE_FAILED")


def stop_command(settings: Settings) -> str:
    """:data:`STOP_COMMAND`, with the settings' cluster and region when they are not the defaults."""
    a = settings.aws
    fields = type(a).model_fields
    changed = [name for name in ("cluster_name", "region") if getattr(a, name) != fields[name].default]
    return STOP_COMMAND + "".join(f" -p {name} {getattr(a, name)}" for name in changed)


def billing(settings: Settings, *, context: AwsContext | None = None) -> BillingResult:
    """What bills now: the EKS cluster, its node groups (instance type x desired size), the NAT gateways of its
    VPC, the tutorial's probe reservations, the checkpoint bucket; read from the account, nothing changed."""
    ctx = context or AwsContext(settings)
    a = settings.aws
    prices = cost.load()
    res = BillingResult(where=f"AWS account {ctx.ident.account}, {ctx.region}", stop_command=stop_command(settings))
    c = ctx.cluster()
    theirs = c is not None and (ownership.existing(settings) or not ownership.owned(c.get("tags"), settings))
    if theirs:  # not the tutorial's to stop: `down` keeps it, so it is not listed as the tutorial's cost
        res.notes.append(
            f"EKS cluster {a.cluster_name}, its node groups and VPC are not listed: "
            + ("the cluster is yours (aws.existing_cluster: true)" if ownership.existing(settings) else
               ownership.not_ours(f"EKS cluster {a.cluster_name}", settings))
        )  # fmt: skip
        c = None
    if c is not None:
        plane = next(r for r in cost.estimate(settings, ctx.region).rows if r[0].startswith("EKS control plane"))
        _add(res, f"EKS cluster {a.cluster_name} ({c['status']})", "1", float(plane[2]))
        for ng in aws_client.paginate(ctx.eks, "list_nodegroups", "nodegroups", clusterName=a.cluster_name):
            _nodegroup_row(ctx, res, prices, ng)
    if not theirs:
        _nat_rows(ctx, res, prices)
    _reservation_rows(ctx, res, prices)
    _bucket_row(ctx, res, settings)
    if res.rows:
        res.notes.append(
            f"On-Demand list prices as of {prices.get('as_of')}; EBS volumes, data transfer and NAT data processing "
            f"are extra"
        )
    return res


def _add(res: BillingResult, what: str, count: str, per_hour: float | None, note: str = "") -> None:
    if per_hour is None:
        res.rows.append((what, count, note or "?"))
        return
    res.rows.append((what, count, f"{per_hour:.3f}"))
    res.per_hour += per_hour


def _nodegroup_row(ctx: AwsContext, res: BillingResult, prices: dict[str, Any], name: str) -> None:
    ng = ctx.nodegroup(name)
    if ng is None or ng["status"] not in RUNNING_NG:
        return
    size = int((ng.get("scalingConfig") or {}).get("desiredSize", 0))
    itype = ",".join(ng.get("instanceTypes") or []) or "?"
    price, note = cost.instance_price(prices, itype, ctx.region)
    what = f"node group {name} ({ng['status']})"
    _add(res, what, f"{size} x {itype}", None if price is None else price * size, note)


def _nat_rows(ctx: AwsContext, res: BillingResult, prices: dict[str, Any]) -> None:
    tagged = [{"Name": "tag:alpha.eksctl.io/cluster-name", "Values": [ctx.settings.aws.cluster_name]}]
    for v in aws_client.paginate(ctx.ec2, "describe_vpcs", "Vpcs", Filters=tagged):
        in_vpc = [{"Name": "vpc-id", "Values": [v["VpcId"]]}]
        for nat in aws_client.paginate(ctx.ec2, "describe_nat_gateways", "NatGateways", Filters=in_vpc):
            if nat.get("State") in ("pending", "available"):
                _add(res, f"NAT gateway {nat['NatGatewayId']} ({nat['State']})", "1", float(prices["nat_gateway"]))


def _reservation_rows(ctx: AwsContext, res: BillingResult, prices: dict[str, Any]) -> None:
    try:
        found = probe_reservations(ctx.ec2)
    except Exception as e:  # noqa: BLE001 - listing reservations may be denied
        res.unreadable.append(f"capacity reservations ({aws_client.err_code(e)})")
        return
    for cr in found:
        n, itype = int(cr.get("TotalInstanceCount", 0)), cr.get("InstanceType", "?")
        price, note = cost.instance_price(prices, itype, ctx.region)
        what = f"probe capacity reservation {cr['CapacityReservationId']} ({cr['State']})"
        _add(res, what, f"{n} x {itype}", None if price is None else price * n, note)


def _bucket_row(ctx: AwsContext, res: BillingResult, settings: Settings) -> None:
    try:
        bucket = iam.storage_location(settings, ctx.ident.account).bucket
        state, _ = bucket_state(ctx.client("s3"), bucket, ctx.ident.account, settings)
    except Exception as e:  # noqa: BLE001 - no bucket setting, or another account's or region's: not this bill
        res.notes.append(f"checkpoint bucket not counted: {str(e)[:160]}")
        return
    if state != ABSENT:
        res.rows.append((f"S3 bucket {bucket} ({state})", "-", "per GB-month, not hourly"))


def after_failure(settings: Settings, teardown) -> BillingResult:  # noqa: ANN001 - the target's teardown function
    """:func:`billing`; with ``aws.teardown_on_failure`` and something billing, ``teardown`` (notebook 08's) first,
    then what is left."""
    res = billing(settings)
    if res.ok or not settings.aws.teardown_on_failure:
        if not res.ok:
            res.notes.append("aws.teardown_on_failure: true would have torn this down at once")
        return res
    done = teardown(settings, assume_yes=True)
    left = billing(settings)
    left.teardown = done
    return left
