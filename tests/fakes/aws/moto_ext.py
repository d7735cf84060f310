"""What moto 5.2.1 lacks, added to moto's own response classes (test-only).

moto 5.2.1 has EC2 offerings/instance types/AZs, VPCs, EKS, IAM, CloudFormation and STS, but:

* Service Quotas only knows the ``vpc`` service: ``get_service_quota`` for ``ec2`` raises
  NoSuchResource and ``get_aws_default_service_quota`` is not implemented;
* ``ec2:GetSpotPlacementScores`` and the capacity-reservation calls (Create/Describe/Cancel) are not
  implemented;
* ``autoscaling:DescribeScalingActivities`` always answers an empty list;
* CloudFormation never fails a stack: a node group EC2 has no capacity for rolls back as the real service does
  (moto_cfn.py), and it neither enforces termination protection nor implements UpdateTerminationProtection
  (moto_cfn.py adds both);
* EKS add-ons (``CreateAddon``/``DescribeAddon``/``ListAddons``), EKS Pod Identity associations
  (``Create/List/Describe/Update/DeletePodIdentityAssociation``) and access entries
  (``Create/Describe/List/DeleteAccessEntry``) are not implemented;
* S3's ``CompleteMultipartUpload`` answers with a ``<CompleteMultipartUploadResponse>`` root element where S3
  documents ``<CompleteMultipartUploadResult>``: pyarrow's S3 filesystem (what Ray Data and the export write
  with) takes the unknown root for an error embedded in a 200 OK and retries with backoff, so every multipart
  upload took about 25 s before it gave up retrying. The root is renamed to S3's.

* a bucket policy's ``Condition`` is evaluated for ``StringEquals`` only: any other operator is ignored, so the
  documented ``{"Bool": {"aws:SecureTransport": "false"}}`` Deny (refuse requests without TLS) matched every
  request. The fake server stands in for S3's HTTPS endpoint (boto3 and pyarrow use https), so such a statement
  is decided as S3 decides it for a request over TLS: ``aws:SecureTransport`` is ``"true"`` (IAM User Guide,
  "Bool condition operators"; a request sent over plain HTTP to S3 has ``"false"``).

One speed fix: moto's EKS checks every role ARN's partition with a new ``boto3.Session()``, which parses
botocore's endpoints file again each time (a tenth of the EKS tests' CPU); the partitions are read once.

:func:`install` adds those operations as methods of moto's response classes, backed by the in-memory
state of :data:`FAKE` (quotas, scores, per-AZ spare capacity, reservations, scaling activities). Because
it patches the classes that both ``mock_aws`` and moto's server dispatch to, it works in-process *and*
for clients in other processes (a notebook kernel, the fake eksctl) that reach a ``ThreadedMotoServer``
started in this process over HTTP: the server thread runs the patched code. The responses go through
moto's serializer, which shapes them by botocore's service model - i.e. like the real API.
"""

from __future__ import annotations

import datetime as _dt
import functools
import json
import re
import threading
import urllib.parse
import uuid
from dataclasses import dataclass, field
from typing import Any

from . import moto_blocks

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
    #: (region, cluster) -> add-on name -> add-on (API shape): EKS add-ons (eksctl's `addons:`)
    addons: dict[tuple[str, str], dict[str, dict[str, Any]]] = field(default_factory=dict)
    #: region -> association id -> EKS Pod Identity association (API shape)
    associations: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    #: (region, cluster) -> principal ARN -> EKS access entry (API shape)
    access_entries: dict[tuple[str, str], dict[str, dict[str, Any]]] = field(default_factory=dict)
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
            self.addons.clear()
            self.associations.clear()
            self.access_entries.clear()
            self.calls.clear()

    def all_reservations(self, region: str | None = None) -> list[dict[str, Any]]:
        with self.lock:
            regs = [region] if region else list(self.reservations)
            return [dict(r) for g in regs for r in self.reservations.get(g, {}).values()]


def shared_on_moto(attr: str, factory):
    """One object per process, even if a fakes module is imported under two names (fakes.aws.X and
    tests.fakes.aws.X): it lives on the moto package, under ``attr``."""
    import moto

    state = getattr(moto, attr, None)
    if state is None:
        state = factory()
        setattr(moto, attr, state)
    return state


FAKE = shared_on_moto("_raytrain_fake_state", FakeState)


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


# --------------------------------------------------------------------------------------------
# EKS: add-ons and Pod Identity associations (moto 5.2.1 has neither)
# --------------------------------------------------------------------------------------------

_EKS_PATH = re.compile(r"/clusters/([^/]+)/(addons|pod-identity-associations)(?:/([^/?]+))?")


def _eks_target(self) -> tuple[str, str | None]:  # noqa: ANN001
    """(cluster, item) from the request path; ResourceNotFoundException when moto has no such cluster."""
    from moto.eks.exceptions import ResourceNotFoundException
    from moto.eks.models import eks_backends

    m = _EKS_PATH.search(urllib.parse.unquote(self.path))
    cluster, item = m.group(1), m.group(3)
    if cluster not in eks_backends[self.current_account][self.region].clusters:
        raise ResourceNotFoundException(clusterName=cluster, message=f"No cluster found for name: {cluster}.")
    return cluster, item


def _eks_not_found(message: str):
    from moto.eks.exceptions import ResourceNotFoundException

    return ResourceNotFoundException(message=message)


def _create_addon(self):  # noqa: ANN001
    from moto.core.responses import ActionResult

    cluster, _ = _eks_target(self)
    name = self._get_param("addonName")
    FAKE.calls.append(("CreateAddon", self.region))
    addon = {"addonName": name, "clusterName": cluster, "status": "ACTIVE", "addonVersion": "v1.0.0-eksbuild.1"}
    if self._get_param("configurationValues"):  # kept and returned as sent (EKS API: CreateAddon, DescribeAddon)
        addon["configurationValues"] = self._get_param("configurationValues")
    with FAKE.lock:
        FAKE.addons.setdefault((self.region, cluster), {})[name] = addon
    return ActionResult({"addon": addon})


def _describe_addon(self):  # noqa: ANN001
    from moto.core.responses import ActionResult

    cluster, name = _eks_target(self)
    with FAKE.lock:
        addon = FAKE.addons.get((self.region, cluster), {}).get(name)
    if addon is None:
        raise _eks_not_found(f"No addon: {name} found in cluster: {cluster}")
    return ActionResult({"addon": addon})


def _list_addons(self):  # noqa: ANN001
    from moto.core.responses import ActionResult

    cluster, _ = _eks_target(self)
    with FAKE.lock:
        return ActionResult({"addons": sorted(FAKE.addons.get((self.region, cluster), {}))})


def _association_summary(a: dict[str, Any]) -> dict[str, Any]:
    keys = ("clusterName", "namespace", "serviceAccount", "associationArn", "associationId", "ownerArn")
    return {k: a[k] for k in keys if k in a}


def _create_pod_identity_association(self):  # noqa: ANN001
    from moto.core.responses import ActionResult
    from moto.eks.exceptions import ResourceInUseException

    cluster, _ = _eks_target(self)
    FAKE.calls.append(("CreatePodIdentityAssociation", self.region))
    ns, sa, role = self._get_param("namespace"), self._get_param("serviceAccount"), self._get_param("roleArn")
    with FAKE.lock:
        regional = FAKE.associations.setdefault(self.region, {})
        if any((a["clusterName"], a["namespace"], a["serviceAccount"]) == (cluster, ns, sa) for a in regional.values()):
            raise ResourceInUseException(message="Association already exists")
        aid = "a-" + uuid.uuid4().hex[:17]
        regional[aid] = {
            "clusterName": cluster,
            "namespace": ns,
            "serviceAccount": sa,
            "roleArn": role,
            "associationArn": f"arn:aws:eks:{self.region}:{ACCOUNT}:podidentityassociation/{cluster}/{aid}",
            "associationId": aid,
            "tags": self._get_param("tags") or {},
            "disableSessionTags": bool(self._get_param("disableSessionTags") or False),
            "createdAt": _now(),
            "modifiedAt": _now(),
        }
        return ActionResult({"association": dict(regional[aid])})


def _list_pod_identity_associations(self):  # noqa: ANN001
    from moto.core.responses import ActionResult

    cluster, _ = _eks_target(self)
    ns, sa = self._get_param("namespace"), self._get_param("serviceAccount")
    with FAKE.lock:
        found = [
            _association_summary(a)
            for a in FAKE.associations.get(self.region, {}).values()
            if a["clusterName"] == cluster and ns in (None, a["namespace"]) and sa in (None, a["serviceAccount"])
        ]
    return ActionResult({"associations": found})


def _association(self) -> dict[str, Any]:  # noqa: ANN001
    cluster, aid = _eks_target(self)
    a = FAKE.associations.get(self.region, {}).get(aid)
    if a is None or a["clusterName"] != cluster:
        raise _eks_not_found(f"Association {aid} not found")
    return a


def _describe_pod_identity_association(self):  # noqa: ANN001
    from moto.core.responses import ActionResult

    with FAKE.lock:
        return ActionResult({"association": dict(_association(self))})


def _update_pod_identity_association(self):  # noqa: ANN001
    from moto.core.responses import ActionResult

    FAKE.calls.append(("UpdatePodIdentityAssociation", self.region))
    with FAKE.lock:
        a = _association(self)
        a["roleArn"] = self._get_param("roleArn") or a["roleArn"]
        a["modifiedAt"] = _now()
        return ActionResult({"association": dict(a)})


def _delete_pod_identity_association(self):  # noqa: ANN001
    from moto.core.responses import ActionResult

    FAKE.calls.append(("DeletePodIdentityAssociation", self.region))
    with FAKE.lock:
        a = _association(self)
        del FAKE.associations[self.region][a["associationId"]]
        return ActionResult({"association": dict(a)})


_ACCESS_PATH = re.compile(r"/clusters/([^/]+)/access-entries(?:/([^/?]+))?")


def _access_target(self) -> tuple[str, str | None]:  # noqa: ANN001
    """(cluster, principal ARN) of an access-entry request: botocore percent-encodes the ARN's ``/`` in the path
    (a non-greedy label), so the item is unquoted after the match."""
    from moto.eks.exceptions import ResourceNotFoundException
    from moto.eks.models import eks_backends

    m = _ACCESS_PATH.search(self.path)
    cluster = urllib.parse.unquote(m.group(1))
    if cluster not in eks_backends[self.current_account][self.region].clusters:
        raise ResourceNotFoundException(clusterName=cluster, message=f"No cluster found for name: {cluster}.")
    return cluster, urllib.parse.unquote(m.group(2)) if m.group(2) else None


def _create_access_entry(self):  # noqa: ANN001
    """EKS API ``CreateAccessEntry``: one entry per principal and cluster (``ResourceInUseException`` else)."""
    from moto.core.responses import ActionResult
    from moto.eks.exceptions import ResourceInUseException

    cluster, _ = _access_target(self)
    FAKE.calls.append(("CreateAccessEntry", self.region))
    principal = self._get_param("principalArn")
    with FAKE.lock:
        entries = FAKE.access_entries.setdefault((self.region, cluster), {})
        if principal in entries:
            raise ResourceInUseException(message="The specified access entry resource is already in use")
        entries[principal] = {
            "clusterName": cluster,
            "principalArn": principal,
            "kubernetesGroups": self._get_param("kubernetesGroups") or [],
            "accessEntryArn": f"arn:aws:eks:{self.region}:{ACCOUNT}:access-entry/{cluster}/{uuid.uuid4().hex[:8]}",
            "createdAt": _now(),
            "modifiedAt": _now(),
            "tags": self._get_param("tags") or {},
            "username": self._get_param("username") or principal,
            "type": self._get_param("type") or "STANDARD",
        }
        return ActionResult({"accessEntry": dict(entries[principal])})


def _access_entry(self) -> dict[str, Any]:  # noqa: ANN001
    cluster, principal = _access_target(self)
    entry = FAKE.access_entries.get((self.region, cluster), {}).get(principal or "")
    if entry is None:
        raise _eks_not_found(f"The specified principalArn could not be found: {principal}")
    return entry


def _describe_access_entry(self):  # noqa: ANN001
    from moto.core.responses import ActionResult

    with FAKE.lock:
        return ActionResult({"accessEntry": dict(_access_entry(self))})


def _list_access_entries(self):  # noqa: ANN001
    from moto.core.responses import ActionResult

    cluster, _ = _access_target(self)
    with FAKE.lock:
        return ActionResult({"accessEntries": sorted(FAKE.access_entries.get((self.region, cluster), {}))})


def _delete_access_entry(self):  # noqa: ANN001
    from moto.core.responses import ActionResult

    FAKE.calls.append(("DeleteAccessEntry", self.region))
    with FAKE.lock:
        entry = _access_entry(self)
        del FAKE.access_entries[(self.region, entry["clusterName"])][entry["principalArn"]]
        return ActionResult({})


def _install_eks() -> None:
    import moto.eks.urls as eks_urls
    from moto.eks.responses import EKSResponse

    EKSResponse.create_addon = _create_addon
    EKSResponse.describe_addon = _describe_addon
    EKSResponse.list_addons = _list_addons
    EKSResponse.create_pod_identity_association = _create_pod_identity_association
    EKSResponse.list_pod_identity_associations = _list_pod_identity_associations
    EKSResponse.describe_pod_identity_association = _describe_pod_identity_association
    EKSResponse.update_pod_identity_association = _update_pod_identity_association
    EKSResponse.delete_pod_identity_association = _delete_pod_identity_association
    EKSResponse.create_access_entry = _create_access_entry
    EKSResponse.describe_access_entry = _describe_access_entry
    EKSResponse.list_access_entries = _list_access_entries
    EKSResponse.delete_access_entry = _delete_access_entry
    for tail in ("addons", "pod-identity-associations", "access-entries"):
        eks_urls.url_paths["{0}/clusters/(?P<name>[^/]+)/" + tail + "$"] = eks_urls.response.dispatch
        eks_urls.url_paths["{0}/clusters/(?P<name>[^/]+)/" + tail + "/(?P<item>[^/]+)$"] = eks_urls.response.dispatch


#: moto's root element of CompleteMultipartUpload's answer -> the one S3's API reference documents
S3_COMPLETE_ROOT = ("CompleteMultipartUploadResponse", "CompleteMultipartUploadResult")


def _wrap_s3_key_post(original):
    def key_response_post(self, *args, **kwargs):  # noqa: ANN001, ANN202
        status, headers, body = original(self, *args, **kwargs)
        moto_root, s3_root = S3_COMPLETE_ROOT
        if isinstance(body, bytes) and f"<{moto_root}".encode() in body:
            body = body.replace(moto_root.encode(), s3_root.encode())
        elif isinstance(body, str) and f"<{moto_root}" in body:
            body = body.replace(moto_root, s3_root)
        return status, headers, body

    return key_response_post


#: The value of ``aws:SecureTransport`` for a request to the fake S3 (standing in for the HTTPS endpoint).
SECURE_TRANSPORT = "true"


def over_tls(statement: dict[str, Any]) -> dict[str, Any] | None:
    """A bucket policy statement with its ``Bool`` ``aws:SecureTransport`` condition decided for a request over
    TLS: removed when it holds, the statement dropped (None) when it does not; any other statement as it is."""
    cond = dict(statement.get("Condition") or {})
    flags = {k.lower(): v for k, v in (cond.get("Bool") or {}).items()}
    if "aws:securetransport" not in flags:
        return statement
    wanted = flags["aws:securetransport"]
    if SECURE_TRANSPORT not in [str(w).lower() for w in (wanted if isinstance(wanted, list) else [wanted])]:
        return None
    rest = {k: v for k, v in cond["Bool"].items() if k.lower() != "aws:securetransport"}
    cond = {**cond, "Bool": rest} if rest else {k: v for k, v in cond.items() if k != "Bool"}
    return {**statement, "Condition": cond} if cond else {k: v for k, v in statement.items() if k != "Condition"}


def _wrap_bucket_permission(original):
    def get_permission(self, action: str, resource: str):  # noqa: ANN001, ANN202
        if self.policy is None:
            return original(self, action, resource)
        doc = json.loads(self.policy)
        statements = doc["Statement"] if isinstance(doc["Statement"], list) else [doc["Statement"]]
        kept = [st for st in (over_tls(st) for st in statements) if st is not None]
        if kept == statements:
            return original(self, action, resource)
        from moto.iam.access_control import IAMPolicy, PermissionResult

        if not kept:
            return PermissionResult.NEUTRAL
        return IAMPolicy(json.dumps({**doc, "Statement": kept})).is_action_permitted(action, resource)

    return get_permission


@functools.cache
def _partitions() -> tuple[str, ...]:
    from boto3 import Session

    return tuple(Session().get_available_partitions())


class PartitionsOnce:
    """What ``moto.eks.utils`` asks of ``boto3.Session``: the partitions, read once per process."""

    def get_available_partitions(self) -> list[str]:
        return list(_partitions())


def install() -> None:
    """Patch moto's response classes once (idempotent)."""
    import moto.eks.utils as eks_utils
    from moto.autoscaling.responses import AutoScalingResponse
    from moto.ec2.responses import EC2Response
    from moto.s3.models import FakeBucket
    from moto.s3.responses import S3Response
    from moto.servicequotas.responses import ServiceQuotasResponse

    if getattr(EC2Response, "_raytrain_fakes_installed", False):
        return
    EC2Response.get_spot_placement_scores = _get_spot_placement_scores
    EC2Response.create_capacity_reservation = _create_capacity_reservation
    EC2Response.describe_capacity_reservations = _describe_capacity_reservations
    EC2Response.cancel_capacity_reservation = _cancel_capacity_reservation
    moto_blocks.install()
    ServiceQuotasResponse.get_service_quota = _wrap_get_service_quota(ServiceQuotasResponse.get_service_quota)
    ServiceQuotasResponse.get_aws_default_service_quota = _get_aws_default_service_quota
    AutoScalingResponse.describe_scaling_activities = _wrap_describe_scaling_activities(
        AutoScalingResponse.describe_scaling_activities
    )
    _install_eks()
    from . import moto_cfn  # here: it imports this module

    moto_cfn.install()
    S3Response._key_response_post = _wrap_s3_key_post(S3Response._key_response_post)
    FakeBucket.get_permission = _wrap_bucket_permission(FakeBucket.get_permission)
    eks_utils.Session = PartitionsOnce
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
