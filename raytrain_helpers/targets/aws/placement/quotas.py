"""The EC2 vCPU quotas step 01 (and the preflight) read: which quota class an instance type counts against,
the class's On-Demand / Spot quota codes, the limit (applied, else the AWS default), and the vCPUs already held
by running instances and unused capacity reservations.

Every call here is optional: a call the IAM role may not make becomes a :class:`~...clients.aws.Signal` with
what the ranking uses instead (:data:`INSTEAD`), and the step goes on.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from ....clients import aws as aws_client
from ....clients.aws import Signal

#: On-Demand and Spot vCPU quota codes per instance class (Service Quotas, service code ec2).
QUOTA_CLASSES: dict[str, dict[str, str | None]] = {
    "G and VT": dict(od="L-DB2E81BA", spot="L-3819A6DF"),
    "P": dict(od="L-417A185B", spot="L-7212CCBC"),
    "Trn": dict(od="L-2C3B7624", spot="L-6B0D517C"),
    "Inf": dict(od="L-1945791B", spot="L-B5D1601B"),
    "DL": dict(od="L-6E869C2A", spot="L-85EED4F7"),
    "F": dict(od="L-74FC7D96", spot="L-88CF9481"),
    "X": dict(od="L-7295265B", spot=None),
    "Standard": dict(od="L-1216C47A", spot="L-34B43A08"),
}

#: What the ranking uses instead of each optional signal that could not be read.
INSTEAD = dict(
    quota="the ranking marks the AZs 'quota unknown' (check the quota in the console)",
    spot_quota="Spot scores are not checked against the Spot vCPU quota",
    instances="vCPUs of running instances not counted: the ranking marks the AZs 'quota unknown'",
    reservations="unused capacity reservations are not counted against the quota",
    spot="the ranking uses quota and cluster subnets only (no Spot score)",
)


def quota_class(instance_type: str) -> str | None:
    """The vCPU quota class of an instance type: 'G and VT', 'P', 'Trn', 'Inf', 'DL', 'F', 'X', 'Standard'."""
    fam = instance_type.split(".")[0].lower()
    for prefix, cls in (
        ("trn", "Trn"),
        ("inf", "Inf"),
        ("dl", "DL"),
        ("vt", "G and VT"),
        ("hpc", None),
        ("u-", None),
        ("g", "G and VT"),
        ("p", "P"),
        ("f", "F"),
        ("x", "X"),
    ):
        if fam.startswith(prefix):
            return cls
    if fam[:1] in set("acdhimrtz"):
        return "Standard"
    return None


@dataclass
class QuotaState:
    quota_class: str | None
    code: str | None
    limit: float | None
    source: str  # applied | default | unreadable: ... | no quota class
    used: int
    need: int
    #: False when the vCPUs of running instances could not be read (``used`` then counts only what was read).
    used_known: bool = True

    @property
    def free(self) -> float | None:
        return None if self.limit is None else self.limit - self.used

    @property
    def ok(self) -> bool | None:
        if self.limit is None:
            return None
        fits = self.limit - self.used >= self.need
        return None if fits and not self.used_known else fits

    def request_command(self, region: str) -> str | None:
        if self.ok is not False or not self.code:
            return None
        return (
            f"aws service-quotas request-service-quota-increase --service-code ec2 "
            f"--quota-code {self.code} --desired-value {int(math.ceil(self.used + self.need))} "
            f"--region {region}"
        )


def quota_limit(sq, code: str, instead: str = INSTEAD["quota"]) -> tuple[float | None, str, Signal | None]:
    """(limit, source, the signal that was unavailable or None) of an EC2 quota: the applied value, else
    (never applied: NoSuchResourceException) the AWS default. Both calls are optional."""
    scope = sq.meta.region_name or ""
    applied = aws_client.optional_call(
        sq, "get_service_quota", instead=instead, scope=scope, ServiceCode="ec2", QuotaCode=code
    )
    if applied.available:
        return float(applied.value["Quota"]["Value"]), "applied", None
    if applied.failure.code != "NoSuchResourceException":
        return None, f"unreadable: {applied.failure.code}", applied
    default = aws_client.optional_call(
        sq, "get_aws_default_service_quota", instead=instead, scope=scope, ServiceCode="ec2", QuotaCode=code
    )
    if default.available:
        return float(default.value["Quota"]["Value"]), "default", None
    return None, f"unreadable: {default.failure.code}", default


def vcpus_in_use(
    ec2, vcpu_of: Callable[[str], int], *, skip_reservation: str = ""
) -> tuple[dict[str, int], list[Signal]]:
    """vCPUs per quota class held by running/pending instances and by unused active capacity reservations,
    and the signals that were unavailable (both lists are optional)."""
    used: dict[str, int] = {}
    scope = ec2.meta.region_name or ""
    running = [{"Name": "instance-state-name", "Values": ["pending", "running"]}]
    instances = aws_client.optional_call(
        ec2, "describe_instances", instead=INSTEAD["instances"], default=[], items="Reservations", scope=scope,
        Filters=running,
    )  # fmt: skip
    for res in instances.value:
        for inst in res.get("Instances", []):
            itype = inst["InstanceType"]
            cpu = inst.get("CpuOptions") or {}
            n = (cpu.get("CoreCount", 0) * cpu.get("ThreadsPerCore", 0)) or vcpu_of(itype)
            cls = quota_class(itype)
            if cls:
                used[cls] = used.get(cls, 0) + n
    active = [{"Name": "state", "Values": ["active"]}]
    reservations = aws_client.optional_call(
        ec2, "describe_capacity_reservations", instead=INSTEAD["reservations"], default=[],
        items="CapacityReservations", scope=scope, Filters=active,
    )  # fmt: skip
    for cr in reservations.value:
        if cr["CapacityReservationId"] == skip_reservation:
            continue  # the GPU nodes will run inside it
        cls = quota_class(cr["InstanceType"])
        if cls:
            used[cls] = used.get(cls, 0) + int(cr.get("AvailableInstanceCount", 0)) * vcpu_of(cr["InstanceType"])
    return used, [sig for sig in (instances, reservations) if not sig.available]
