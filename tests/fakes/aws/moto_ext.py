"""What moto 5.2.1 lacks, added to moto's own response classes (test-only).

moto 5.2.1 has EC2 offerings/instance types/AZs, VPCs, EKS, IAM, CloudFormation and STS, but:

* Service Quotas only knows the ``vpc`` service: ``get_service_quota`` for ``ec2`` raises
  NoSuchResource and ``get_aws_default_service_quota`` is not implemented;
* ``ec2:GetSpotPlacementScores`` and the capacity-reservation calls (Create/Describe/Cancel) are not
  implemented;
* ``autoscaling:DescribeScalingActivities`` always answers an empty list.

:func:`install` adds those operations as methods of moto's response classes, backed by the in-memory
state of :data:`FAKE` (quotas, scores, per-AZ spare capacity, reservations, scaling activities). Because
it patches the classes that both ``mock_aws`` and moto's server dispatch to, it works in-process *and*
for clients in other processes (a notebook kernel, the fake eksctl) that reach a ``ThreadedMotoServer``
started in this process over HTTP: the server thread runs the patched code. The responses go through
moto's serializer, which shapes them by botocore's service model - i.e. like the real API.
"""

from __future__ import annotations

import datetime as _dt
import json
import threading
import uuid
from dataclasses import dataclass, field
from typing import Any

ACCOUNT = "123456789012"  # moto's default account

QUOTA_NAMES = {
    "L-DB2E81BA": "Running On-Demand G and VT instances",
    "L-3819A6DF": "All G and VT Spot Instance Requests",
    "L-417A185B": "Running On-Demand P instances",
    "L-7212CCBC": "All P Spot Instance Requests",
    "L-1216C47A": "Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances",
    "L-34B43A08": "All Standard Spot Instance Requests",
}


@dataclass
class FakeState:
    #: (region, quota code) -> applied value; a missing key raises NoSuchResource like an unapplied quota
    quotas: dict[tuple[str, str], float] = field(default_factory=dict)
    #: quota code -> AWS default (any region)
    default_quotas: dict[str, float] = field(default_factory=dict)
    #: (region, az id, instance type) -> score 1..10
    spot_scores: dict[tuple[str, str, str], int] = field(default_factory=dict)
    #: (region, az name, instance type) -> instances EC2 could reserve there now (missing: unlimited)
    capacity: dict[tuple[str, str, str], int] = field(default_factory=dict)
    #: region -> reservation id -> reservation dict (API shape)
    reservations: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    #: ASG name -> activities (API shape)
    activities: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    #: regions where a call should fail with AccessDenied (e.g. "spot:us-west-2", "quotas:us-west-2")
    deny: set[str] = field(default_factory=set)
    calls: list[tuple[str, str]] = field(default_factory=list)
    lock: threading.RLock = field(default_factory=threading.RLock)

    def reset(self) -> None:
        with self.lock:
            self.quotas.clear()
            self.default_quotas.clear()
            self.spot_scores.clear()
            self.capacity.clear()
            self.reservations.clear()
            self.activities.clear()
            self.deny.clear()
            self.calls.clear()

    def all_reservations(self, region: str | None = None) -> list[dict[str, Any]]:
        with self.lock:
            regs = [region] if region else list(self.reservations)
            return [dict(r) for g in regs for r in self.reservations.get(g, {}).values()]


def _shared_state() -> FakeState:
    """One state per process, even if this file is imported under two names (fakes.aws.moto_ext and
    tests.fakes.aws.moto_ext): it lives on the moto package."""
    import moto

    state = getattr(moto, "_raytrain_fake_state", None)
    if state is None:
        state = FakeState()
        moto._raytrain_fake_state = state
    return state


FAKE = _shared_state()


def _now() -> _dt.datetime:
    return _dt.datetime.now(_dt.timezone.utc)


# --------------------------------------------------------------------------------------------
# EC2: spot placement scores and capacity reservations
# --------------------------------------------------------------------------------------------


def _ec2_error(code: str, message: str):
    from moto.ec2.exceptions import EC2ClientError

    return EC2ClientError(code, message)


def _get_spot_placement_scores(self):  # noqa: ANN001 - moto response method
    from moto.core.responses import ActionResult

    FAKE.calls.append(("GetSpotPlacementScores", self.region))
    if f"spot:{self.region}" in FAKE.deny:
        raise _ec2_error("UnauthorizedOperation", "You are not authorized to perform: ec2:GetSpotPlacementScores")
    types = self._get_param("InstanceTypes", []) or []
    regions = self._get_param("RegionNames", []) or [self.region]
    single = bool(self._get_param("SingleAvailabilityZone", False))
    out = []
    with FAKE.lock:
        for (region, az_id, itype), score in sorted(FAKE.spot_scores.items()):
            if region in regions and itype in types:
                out.append(
                    {"Region": region, "AvailabilityZoneId": az_id, "Score": score}
                    if single
                    else {"Region": region, "Score": score}
                )
    return ActionResult({"SpotPlacementScores": out})


def _zone_id(region: str, az: str) -> str:
    from moto.ec2.models import ec2_backends

    for z in ec2_backends[ACCOUNT][region].describe_availability_zones():
        if z.name == az:
            return z.zone_id
    return ""


def _create_capacity_reservation(self):  # noqa: ANN001
    from moto.core.responses import ActionResult

    FAKE.calls.append(("CreateCapacityReservation", self.region))
    itype = self._get_param("InstanceType")
    az = self._get_param("AvailabilityZone")
    count = int(self._get_param("InstanceCount"))
    token = self._get_param("ClientToken")
    end_type = self._get_param("EndDateType") or "unlimited"
    end = self._get_param("EndDate")
    if not az or not az.startswith(self.region):
        raise _ec2_error("InvalidParameterValue", f"Invalid availability zone: [{az}]")
    from moto.ec2.models.instance_types import INSTANCE_TYPES

    if itype not in INSTANCE_TYPES:
        raise _ec2_error("InvalidParameterValue", f"The instance type '{itype}' is not supported.")
    if end_type == "limited" and not end:
        raise _ec2_error("InvalidParameterCombination", "EndDate is required when EndDateType is limited")
    tags = self._parse_tag_specification().get("capacity-reservation", {})
    with FAKE.lock:
        regional = FAKE.reservations.setdefault(self.region, {})
        if token:
            for cr in regional.values():
                if cr.get("_token") == token:
                    return ActionResult({"CapacityReservation": _public(cr)})
        spare = FAKE.capacity.get((self.region, az, itype))
        if spare is not None and spare < count:
            raise _ec2_error(
                "InsufficientInstanceCapacity",
                f"There is insufficient capacity for the requested {itype} instances in {az}.",
            )
        if spare is not None:
            FAKE.capacity[(self.region, az, itype)] = spare - count
        rid = "cr-" + uuid.uuid4().hex[:17]
        cr = {
            "CapacityReservationId": rid,
            "OwnerId": ACCOUNT,
            "CapacityReservationArn": f"arn:aws:ec2:{self.region}:{ACCOUNT}:capacity-reservation/{rid}",
            "AvailabilityZoneId": _zone_id(self.region, az),
            "InstanceType": itype,
            "InstancePlatform": self._get_param("InstancePlatform") or "Linux/UNIX",
            "AvailabilityZone": az,
            "Tenancy": "default",
            "TotalInstanceCount": count,
            "AvailableInstanceCount": count,
            "EbsOptimized": False,
            "EphemeralStorage": False,
            "State": "active",
            "StartDate": _now(),
            "EndDateType": end_type,
            "InstanceMatchCriteria": self._get_param("InstanceMatchCriteria") or "open",
            "CreateDate": _now(),
            "Tags": [{"Key": k, "Value": v} for k, v in tags.items()],
            "_token": token,
        }
        if end_type == "limited":
            cr["EndDate"] = end
        regional[rid] = cr
        return ActionResult({"CapacityReservation": _public(cr)})


def _public(cr: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in cr.items() if not k.startswith("_")}


def _matches(cr: dict[str, Any], filters: dict[str, list[str]]) -> bool:
    """The filters DescribeCapacityReservations documents; anything else (tag filters too) is refused."""
    fields = {
        "state": "State",
        "instance-type": "InstanceType",
        "availability-zone": "AvailabilityZone",
        "owner-id": "OwnerId",
        "instance-platform": "InstancePlatform",
        "tenancy": "Tenancy",
        "end-date-type": "EndDateType",
        "instance-match-criteria": "InstanceMatchCriteria",
    }
    for name, values in filters.items():
        if name not in fields:
            raise _ec2_error("InvalidParameterValue", f"The filter '{name}' is invalid")
        if cr.get(fields[name]) not in values:
            return False
    return True


def _describe_capacity_reservations(self):  # noqa: ANN001
    from moto.core.responses import ActionResult

    FAKE.calls.append(("DescribeCapacityReservations", self.region))
    ids = self._get_param("CapacityReservationIds", []) or []
    filters = self._filters_from_querystring()
    with FAKE.lock:
        regional = FAKE.reservations.get(self.region, {})
        for i in ids:
            if i not in regional:
                raise _ec2_error(
                    "InvalidCapacityReservationId.NotFound", f"The capacity reservation ID '{i}' does not exist"
                )
        out = [_public(cr) for rid, cr in sorted(regional.items()) if (not ids or rid in ids) and _matches(cr, filters)]
    return ActionResult({"CapacityReservations": out})


def _cancel_capacity_reservation(self):  # noqa: ANN001
    from moto.core.responses import ActionResult

    FAKE.calls.append(("CancelCapacityReservation", self.region))
    rid = self._get_param("CapacityReservationId")
    with FAKE.lock:
        cr = FAKE.reservations.get(self.region, {}).get(rid)
        if cr is None:
            raise _ec2_error(
                "InvalidCapacityReservationId.NotFound", f"The capacity reservation ID '{rid}' does not exist"
            )
        if cr["State"] not in ("active", "pending"):
            raise _ec2_error("IncorrectState", f"The capacity reservation '{rid}' is in state {cr['State']}")
        cr["State"] = "cancelled"
        key = (self.region, cr["AvailabilityZone"], cr["InstanceType"])
        if key in FAKE.capacity:
            FAKE.capacity[key] += cr["AvailableInstanceCount"]
    return ActionResult({"Return": True})


# --------------------------------------------------------------------------------------------
# Service Quotas for ec2
# --------------------------------------------------------------------------------------------


def _quota_body(region: str, code: str, value: float) -> dict[str, Any]:
    return {
        "ServiceCode": "ec2",
        "ServiceName": "Amazon Elastic Compute Cloud (Amazon EC2)",
        "QuotaArn": f"arn:aws:servicequotas:{region}:{ACCOUNT}:ec2/{code}",
        "QuotaCode": code,
        "QuotaName": QUOTA_NAMES.get(code, code),
        "Value": float(value),
        "Unit": "None",
        "Adjustable": True,
        "GlobalQuota": False,
    }


def _wrap_get_service_quota(original):
    def get_service_quota(self):  # noqa: ANN001
        params = json.loads(self.body)
        if params.get("ServiceCode") != "ec2":
            return original(self)
        from moto.servicequotas.exceptions import NoSuchResource

        FAKE.calls.append(("GetServiceQuota", self.region))
        if f"quotas:{self.region}" in FAKE.deny:
            from moto.core.exceptions import JsonRESTError

            raise JsonRESTError("AccessDeniedException", "not authorized to perform servicequotas:GetServiceQuota")
        code = params.get("QuotaCode")
        with FAKE.lock:
            value = FAKE.quotas.get((self.region, code))
        if value is None:
            raise NoSuchResource
        return json.dumps({"Quota": _quota_body(self.region, code, value)})

    return get_service_quota


def _get_aws_default_service_quota(self):  # noqa: ANN001
    from moto.servicequotas.exceptions import NoSuchResource

    params = json.loads(self.body)
    FAKE.calls.append(("GetAWSDefaultServiceQuota", self.region))
    code = params.get("QuotaCode")
    with FAKE.lock:
        value = FAKE.default_quotas.get(code) if params.get("ServiceCode") == "ec2" else None
    if value is None:
        raise NoSuchResource
    return json.dumps({"Quota": _quota_body(self.region, code, value)})


# --------------------------------------------------------------------------------------------
# Auto Scaling activities
# --------------------------------------------------------------------------------------------


def _wrap_describe_scaling_activities(original):
    def describe_scaling_activities(self):  # noqa: ANN001
        from moto.core.responses import ActionResult

        name = self._get_param("AutoScalingGroupName")
        with FAKE.lock:
            acts = [dict(a) for a in FAKE.activities.get(name, [])]
        if not acts:
            return original(self)
        return ActionResult({"Activities": acts})

    return describe_scaling_activities


def install() -> None:
    """Patch moto's response classes once (idempotent)."""
    from moto.autoscaling.responses import AutoScalingResponse
    from moto.ec2.responses import EC2Response
    from moto.servicequotas.responses import ServiceQuotasResponse

    if getattr(EC2Response, "_raytrain_fakes_installed", False):
        return
    EC2Response.get_spot_placement_scores = _get_spot_placement_scores
    EC2Response.create_capacity_reservation = _create_capacity_reservation
    EC2Response.describe_capacity_reservations = _describe_capacity_reservations
    EC2Response.cancel_capacity_reservation = _cancel_capacity_reservation
    ServiceQuotasResponse.get_service_quota = _wrap_get_service_quota(ServiceQuotasResponse.get_service_quota)
    ServiceQuotasResponse.get_aws_default_service_quota = _get_aws_default_service_quota
    AutoScalingResponse.describe_scaling_activities = _wrap_describe_scaling_activities(
        AutoScalingResponse.describe_scaling_activities
    )
    EC2Response._raytrain_fakes_installed = True


# --------------------------------------------------------------------------------------------
# Seeds and in-process state changes (only for a server running in this process, or mock_aws)
# --------------------------------------------------------------------------------------------


def seed_defaults(regions: tuple[str, ...] = ("us-west-2", "us-east-1", "us-east-2")) -> None:
    """A plausible account: G/VT 192 vCPUs applied in the given regions, Standard 64, P 0 (defaults)."""
    with FAKE.lock:
        FAKE.default_quotas.update(
            {
                "L-DB2E81BA": 0.0,
                "L-3819A6DF": 0.0,
                "L-417A185B": 0.0,
                "L-7212CCBC": 0.0,
                "L-1216C47A": 5.0,
                "L-34B43A08": 5.0,
            }
        )
        for r in regions:
            FAKE.quotas[(r, "L-DB2E81BA")] = 192.0
            FAKE.quotas[(r, "L-3819A6DF")] = 192.0
            FAKE.quotas[(r, "L-1216C47A")] = 64.0


def set_spot_scores(region: str, instance_type: str, scores_by_az_name: dict[str, int]) -> None:
    for az, score in scores_by_az_name.items():
        FAKE.spot_scores[(region, _zone_id(region, az), instance_type)] = score


def set_nodegroup_state(
    region: str, cluster: str, nodegroup: str, status: str, issues: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    """Put an EKS node group into a state moto never reaches by itself (CREATE_FAILED, DEGRADED...)."""
    from moto.eks.models import eks_backends

    ng = eks_backends[ACCOUNT][region].clusters[cluster].nodegroups[nodegroup]
    ng.status = status
    if issues is not None:
        ng.health = {"issues": issues}
    return dict(asg=ng.resources["autoScalingGroups"][0]["name"])


def set_cluster_state(region: str, cluster: str, status: str) -> None:
    from moto.eks.models import eks_backends

    eks_backends[ACCOUNT][region].clusters[cluster].status = status
