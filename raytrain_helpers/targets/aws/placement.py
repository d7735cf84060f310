"""Step 01 on the ``aws`` target: where can the GPU nodes run, and what will it cost?

For each region (the given ones, or every enabled one) :func:`capacity` reads, without creating anything:

* the AZs that offer ``gpu_node_type`` (``ec2:DescribeInstanceTypeOfferings``, per AZ);
* the type's facts (``ec2:DescribeInstanceTypes``): vCPUs, GPUs, GPU memory, EFA - a config whose
  ``gpus_per_node`` disagrees, or a type without EFA, is rejected;
* the On-Demand vCPU quota of the type's family (Service Quotas, falling back to the AWS default) minus
  the vCPUs of running/pending instances and of unused capacity reservations of that family; short
  regions get the exact ``aws service-quotas request-service-quota-increase`` command;
* Spot placement scores per AZ (a signal only; flagged when the Spot quota could not hold the nodes);
* whether the existing cluster (if any) has a private subnet in each AZ.

It ranks the AZs (probe-confirmed > quota ok with a cluster subnet > Spot score), saves the winner as the
placement (``runs/<run_name>/placement.json``) that step 02 and later read, plans the FSDP memory on the
type's real GPU memory and estimates the stack's hourly cost.

A call that fails (denied by a restricted IAM role, missing in the partition, throttled past botocore's retries,
a server error) is caught where it is made: the offerings, the instance facts, the regions, AZs and the cluster's
description are essential (one line naming the API, the IAM action and the fix); the quotas, the vCPUs in use,
the capacity reservations and the Spot scores are optional: each becomes a row "unavailable: <code> for <IAM
action>; <what the ranking uses instead>" and the step goes on.

``probe=True`` adds the one definitive test: an On-Demand Capacity Reservation for all the GPU nodes in
each candidate AZ, cancelled at once - only after confirmation (``assume_yes`` or an interactive yes),
and cancelled on every exit path (exceptions, Ctrl-C, kernel interrupt, SIGTERM), then verified by listing.
"""

from __future__ import annotations

import datetime as _dt
import math
import sys
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any

from ...clients import aws as aws_client
from ...clients.aws import AwsCallError, Identity, Signal
from ...core.config import ConfigError, Settings
from ...core.tables import table
from ...plan import cost
from ...plan.memory import MemoryPlan, plan_for
from . import common

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

#: How many top-ranked AZs a probe tests at most.
MAX_PROBE_AZS = 3
#: How many ranked AZs show() prints.
SHOW_ROWS = 15
#: Errors of ``CreateCapacityReservation`` that mean "no capacity there now".
NO_CAPACITY_CODES = ("InsufficientInstanceCapacity", "InsufficientCapacity", "InsufficientReservedInstanceCapacity")
#: What the ranking uses instead of each optional signal that could not be read.
INSTEAD = dict(
    quota="the ranking marks the AZs 'quota unknown' (check the quota in the console)",
    spot_quota="Spot scores are not checked against the Spot vCPU quota",
    instances="vCPUs of running instances not counted: the ranking marks the AZs 'quota unknown'",
    reservations="unused capacity reservations are not counted against the quota",
    spot="the ranking uses quota and cluster subnets only (no Spot score)",
)
#: A test seam: called as probe_hook(reservation_id) right after a probe reservation is created.
probe_hook: Callable[[str], None] | None = None


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


# --------------------------------------------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------------------------------------------


@dataclass
class InstanceFacts:
    instance_type: str
    vcpus: int
    mem_gib: float
    gpus: int
    gpu_model: str
    gpu_mem_gib: float  # per GPU
    efa_supported: bool
    max_efa_interfaces: int

    @classmethod
    def from_api(cls, t: dict[str, Any]) -> InstanceFacts:
        gpus = (t.get("GpuInfo") or {}).get("Gpus") or []
        g = gpus[0] if gpus else {}
        net = t.get("NetworkInfo") or {}
        return cls(
            instance_type=t["InstanceType"],
            vcpus=int(t["VCpuInfo"]["DefaultVCpus"]),
            mem_gib=t.get("MemoryInfo", {}).get("SizeInMiB", 0) / 1024,
            gpus=sum(int(x.get("Count", 0)) for x in gpus),
            gpu_model=f"{g.get('Manufacturer', '')} {g.get('Name', '')}".strip() or "-",
            gpu_mem_gib=(g.get("MemoryInfo") or {}).get("SizeInMiB", 0) / 1024,
            efa_supported=bool(net.get("EfaSupported")),
            max_efa_interfaces=int((net.get("EfaInfo") or {}).get("MaximumEfaInterfaces", 0)),
        )


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


@dataclass
class AzRow:
    region: str
    az: str
    az_id: str
    gpu_quota: QuotaState
    spot_score: int | None = None
    spot_capped: bool = False
    cluster_subnet: bool | None = None  # None: no cluster (step 02 creates a subnet there)
    eks_supported: bool = True
    probe: str | None = None  # confirmed | no capacity | error: ... | None (not probed)
    tier: int = 9
    verdict: str = ""

    @property
    def viable(self) -> bool:
        return self.tier <= 2

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["viable"] = self.viable
        return d


@dataclass
class ProbeResult:
    region: str
    az: str
    status: str  # confirmed | no capacity | error: ...
    reservation_id: str | None
    cancelled: bool
    message: str = ""


@dataclass
class CapacityReport:
    account: str | None
    region: str  # the settings' region
    instance_type: str
    gpu_node_count: int
    facts: InstanceFacts | None
    system_facts: InstanceFacts | None
    regions_checked: list[str]
    not_offered: list[str]
    rows: list[AzRow]
    recommendation: dict[str, Any] | None
    placement_file: str | None
    plan: MemoryPlan | None
    cost: cost.CostEstimate | None
    system_quota: dict[str, QuotaState]
    quota_requests: list[str] = field(default_factory=list)
    probes: list[ProbeResult] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: Optional signals that could not be read (each shown as "unavailable: <code> for <IAM action>; ...").
    unavailable: list[Signal] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.recommendation is not None and not self.problems

    def as_dict(self) -> dict[str, Any]:
        return dict(
            ok=self.ok,
            account=self.account,
            region=self.region,
            instance_type=self.instance_type,
            gpu_node_count=self.gpu_node_count,
            facts=asdict(self.facts) if self.facts else None,
            system_facts=asdict(self.system_facts) if self.system_facts else None,
            regions_checked=self.regions_checked,
            not_offered=self.not_offered,
            rows=[r.as_dict() for r in self.rows],
            recommendation=self.recommendation,
            placement_file=self.placement_file,
            plan=self.plan.as_dict() if self.plan else None,
            cost=self.cost.as_dict() if self.cost else None,
            system_quota={k: asdict(v) for k, v in self.system_quota.items()},
            quota_requests=self.quota_requests,
            probes=[asdict(p) for p in self.probes],
            problems=self.problems,
            notes=self.notes,
            unavailable=[dict(scope=u.scope, line=u.line()) for u in self.unavailable],
        )

    def show(self) -> None:
        if self.account:
            print(f"AWS account {self.account}; settings region {self.region}")
        self._show_facts()
        self._show_rows()
        self._show_unavailable()
        self._show_quota_and_probes()
        if self.recommendation:
            r = self.recommendation
            print(f"placement: {r['region']} / {r['az']} ({r['az_id']}) [{r['source']}] -> {self.placement_file}")
        else:
            print("placement: none (see problems)")
        self._show_plan_and_cost()
        for n in self.notes:
            print(f"note: {n}")
        for p in self.problems:
            print(f"PROBLEM: {p}")
        print("capacity:", "OK" if self.ok else "NOT OK")

    def _show_facts(self) -> None:
        f = self.facts
        if not f:
            return
        table(
            [
                (
                    f.instance_type,
                    f.vcpus,
                    f"{f.mem_gib:.0f}",
                    f"{f.gpus} x {f.gpu_model}",
                    f"{f.gpu_mem_gib:.1f}",
                    "yes" if f.efa_supported else "NO",
                    f.max_efa_interfaces,
                )
            ],
            ["type", "vCPUs", "mem GiB", "GPUs", "GiB/GPU", "EFA", "max EFA"],
            title="GPU node type (ec2:DescribeInstanceTypes)",
        )

    def _show_rows(self) -> None:
        rows = []
        for i, r in enumerate(self.rows[:SHOW_ROWS], 1):
            q = r.gpu_quota
            quota = "?" if q.limit is None else f"{q.used}/{q.limit:.0f}"
            spot = "-" if r.spot_score is None else f"{r.spot_score}{' (capped)' if r.spot_capped else ''}"
            subnet = {None: "no cluster", True: "yes", False: "NO"}[r.cluster_subnet]
            rows.append(
                (i, r.region, f"{r.az} ({r.az_id})", f"{quota} +{q.need}", spot, subnet, r.probe or "-", r.verdict)
            )
        quota_class_name = self.rows[0].gpu_quota.quota_class if self.rows else ""
        table(
            rows,
            [
                "#",
                "region",
                "AZ (id)",
                f"{quota_class_name} vCPU used/limit +need",
                "spot score",
                "cluster subnet",
                "probe",
                "verdict",
            ],
            title=f"AZs offering {self.instance_type} x {self.gpu_node_count}, best first",
        )
        if len(self.rows) > SHOW_ROWS:
            print(f"... and {len(self.rows) - SHOW_ROWS} more AZs further down the ranking (all in .rows)")
        if self.not_offered:
            print(f"not offered in: {', '.join(self.not_offered)}")

    def _show_unavailable(self) -> None:
        """One row per distinct line (the same denial in many regions is one row)."""
        scopes: dict[str, list[str]] = {}
        for u in self.unavailable:
            scopes.setdefault(u.line(), []).append(u.scope)
        if scopes:
            table(
                [(", ".join(s) if len(s) <= 3 else f"{len(s)} regions", line) for line, s in scopes.items()],
                ["region", "signal"],
                title="Signals the ranking could not read (the step went on without them)",
                max_width=200,
            )

    def _show_quota_and_probes(self) -> None:
        for name, q in self.system_quota.items():
            if q.ok is False:
                print(
                    f"system node quota SHORT in {name}: {q.quota_class} {q.used}/{q.limit:.0f} vCPU used, "
                    f"needs {q.need}"
                )
        if self.quota_requests:
            print("Quota increases to request (then re-run this step):")
            for c in self.quota_requests:
                print(f"  {c}")
        for p in self.probes:
            reservation = ""
            if p.reservation_id:
                reservation = f" (reservation {p.reservation_id} {'cancelled' if p.cancelled else 'NOT CANCELLED'})"
            print(f"probe {p.region}/{p.az}: {p.status}" + reservation + (f" - {p.message}" if p.message else ""))

    def _show_plan_and_cost(self) -> None:
        if self.plan:
            table(self.plan.rows(), ["FSDP memory plan", "value"])
        if self.cost:
            table(
                self.cost.rows,
                ["item", "qty", "USD/h each", "USD/h"],
                title=f"estimated cost in {self.cost.region} (prices as of {self.cost.as_of})",
            )
            print(
                f"total: about ${self.cost.total_per_hour:.2f} per hour"
                + ("" if self.cost.complete else " (incomplete)")
            )
            for n in self.cost.notes:
                print(f"  note: {n}")


# --------------------------------------------------------------------------------------------------------------
# Reading the account
# --------------------------------------------------------------------------------------------------------------


def instance_facts(ec2, types: Sequence[str]) -> dict[str, InstanceFacts]:
    """The types' facts (essential: ``ec2:DescribeInstanceTypes``); a type EC2 does not know is a ConfigError."""
    try:
        resp = aws_client.essential_call(ec2, "describe_instance_types", InstanceTypes=list(types))
    except AwsCallError as e:
        if e.failure.code in ("InvalidInstanceType", "InvalidParameterValue"):
            raise ConfigError(
                f"instance type(s) {', '.join(types)} unknown to EC2 ({e.failure.message}). "
                f"Fix: check gpu_node_type / system_node_type spelling"
            ) from None
        raise
    return {t["InstanceType"]: InstanceFacts.from_api(t) for t in resp["InstanceTypes"]}


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


def spot_scores(ec2, instance_type: str, count: int, region: str) -> tuple[dict[str, int], Signal | None]:
    """AZ id -> Spot placement score (1-10) for ``count`` instances in one AZ (optional: the signal that was
    unavailable, or None)."""
    sig = aws_client.optional_call(
        ec2,
        "get_spot_placement_scores",
        instead=INSTEAD["spot"],
        default={},
        scope=region,
        InstanceTypes=[instance_type],
        TargetCapacity=count,
        TargetCapacityUnitType="units",
        SingleAvailabilityZone=True,
        RegionNames=[region],
    )
    if not sig.available:
        return {}, sig
    return {
        s["AvailabilityZoneId"]: int(s["Score"])
        for s in sig.value.get("SpotPlacementScores", [])
        if s.get("Region", region) == region and s.get("AvailabilityZoneId")
    }, None


def cluster_private_azs(sess, settings: Settings) -> tuple[dict[str, list[str]] | None, str | None]:
    """AZ -> private subnet ids of the existing cluster, or (None, state) when there is no cluster."""
    region = settings.aws.region
    eks = aws_client.client(sess, "eks", region)
    c = aws_client.describe_cluster(eks, settings.aws.cluster_name)
    if c is None:
        return None, None
    ids = (c.get("resourcesVpcConfig") or {}).get("subnetIds") or []
    return common.private_subnets_by_az(aws_client.client(sess, "ec2", region), ids), c.get("status")


# --------------------------------------------------------------------------------------------------------------
# The probe: reserve, cancel at once, verify - on every exit path
# --------------------------------------------------------------------------------------------------------------


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


def _run_probes(sess, settings: Settings, report: CapacityReport, ident: Identity, *, prices: Any, assume_yes: bool):
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


# --------------------------------------------------------------------------------------------------------------
# The check, phase by phase
# --------------------------------------------------------------------------------------------------------------


def _region_scan(sess, region: str, settings: Settings, facts: dict[str, InstanceFacts]) -> dict[str, Any]:
    """One region: the AZs offering the types, their quotas and vCPUs in use, Spot scores."""
    a = settings.aws
    ec2 = aws_client.client(sess, "ec2", region)
    out: dict[str, Any] = dict(region=region, notes=[], unavailable=[])
    out["gpu_azs"] = common.offering_azs(ec2, a.gpu_node_type)
    if not out["gpu_azs"]:
        return out
    out["sys_azs"] = common.offering_azs(ec2, a.system_node_type)
    out["zones"] = common.zones(ec2)
    cache: dict[str, int] = {k: v.vcpus for k, v in facts.items()}

    def vcpu_of(itype: str) -> int:
        if itype not in cache:
            cache.update({k: v.vcpus for k, v in instance_facts(ec2, [itype]).items()})
        return cache[itype]

    used, out["unavailable"] = vcpus_in_use(ec2, vcpu_of, skip_reservation=a.capacity_reservation_id)
    sq = aws_client.client(sess, "service-quotas", region)
    used_known = not any(sig.failure.api == "DescribeInstances" for sig in out["unavailable"])
    out["quotas"] = _quotas(sq, settings, facts, used, used_known, out["unavailable"])
    spot_code = QUOTA_CLASSES.get(quota_class(a.gpu_node_type) or "", {}).get("spot")
    out["spot_limit"] = None
    if spot_code:
        out["spot_limit"], _, sig = quota_limit(sq, spot_code, INSTEAD["spot_quota"])
        out["unavailable"] += [sig] if sig else []
    out["scores"], sig = spot_scores(ec2, a.gpu_node_type, a.gpu_node_count, region)
    out["unavailable"] += [sig] if sig else []
    return out


def _quotas(
    sq,
    settings: Settings,
    facts: dict[str, InstanceFacts],
    used: dict[str, int],
    used_known: bool = True,
    unavailable: list[Signal] | None = None,
) -> dict[str, QuotaState]:
    """The On-Demand vCPU quota of the GPU and the system nodes (one class for both: the system needs both);
    the quota signals that were unavailable are added to ``unavailable``."""
    a = settings.aws
    gpu_cls, sys_cls = quota_class(a.gpu_node_type), quota_class(a.system_node_type)
    gpu_need = a.gpu_node_count * facts[a.gpu_node_type].vcpus
    quotas = {}
    for label, cls, need in (
        ("gpu", gpu_cls, gpu_need),
        ("system", sys_cls, a.system_node_count * facts[a.system_node_type].vcpus),
    ):
        if cls is None:
            quotas[label] = QuotaState(None, None, None, "no quota class known", 0, need)
            continue
        code = QUOTA_CLASSES[cls]["od"]
        limit, source, sig = quota_limit(sq, code)
        if sig is not None and unavailable is not None and all(u.line() != sig.line() for u in unavailable):
            unavailable.append(sig)
        if gpu_cls == sys_cls and label == "system":
            need += gpu_need
        quotas[label] = QuotaState(cls, code, limit, source, used.get(cls, 0), need, used_known)
    return quotas


def _rank(rows: list[AzRow], settings_region: str) -> None:
    for r in rows:
        q = r.gpu_quota
        if r.probe == "no capacity":
            r.tier, r.verdict = 8, "no capacity now (probe)"
        elif q.ok is False:
            r.tier, r.verdict = 7, f"SHORT: quota {q.quota_class} {q.free:.0f} vCPU free < {q.need}"
        elif not r.eks_supported:
            r.tier, r.verdict = 6, "EKS control plane does not support this AZ"
        elif r.cluster_subnet is False:
            r.tier, r.verdict = 5, "no private subnet of the existing cluster here"
        elif r.probe == "confirmed":
            r.tier, r.verdict = 0, "ok: capacity confirmed by probe"
        elif q.ok is None:
            why = q.source if q.limit is None else "vCPUs in use unreadable"
            r.tier, r.verdict = 2, f"quota unknown ({why}): check it in the console"
        else:
            r.tier, r.verdict = 1, "ok" + (" (cluster subnet)" if r.cluster_subnet else "")
        if r.probe and r.probe.startswith("error"):
            r.verdict += f"; probe {r.probe}"
    rows.sort(key=lambda r: (r.tier, -(r.spot_score or 0), r.region != settings_region, r.region, r.az))


def _type_facts(ec2, settings: Settings) -> dict[str, InstanceFacts]:
    """The types' facts, once (they do not vary by region); a config that disagrees with them is rejected."""
    a = settings.aws
    facts = instance_facts(ec2, sorted({a.gpu_node_type, a.system_node_type}))
    gf = facts[a.gpu_node_type]
    if gf.gpus != a.gpus_per_node:
        raise ConfigError(
            f"aws.gpus_per_node (GPUS_PER_NODE) = {a.gpus_per_node} but EC2 says {a.gpu_node_type} has "
            f"{gf.gpus} x {gf.gpu_model}. Fix: set gpus_per_node: {gf.gpus}"
        )
    if not gf.efa_supported:
        raise ConfigError(
            f"{a.gpu_node_type} does not support EFA, which the tutorial's GPU nodes need. "
            f"Fix: choose an EFA-capable gpu_node_type (e.g. g6.12xlarge, p4d.24xlarge)"
        )
    if gf.gpus == 0:
        raise ConfigError(f"{a.gpu_node_type} has no GPUs. Fix: choose a GPU instance type")
    return facts


def _region_scan_or_skip(sess, region: str, settings: Settings, facts: dict[str, InstanceFacts]) -> dict[str, Any]:
    """:func:`_region_scan`; a region other than the settings' one whose essential calls fail (an account's
    policy denying a region, an API missing there) is left out of the ranking with a row, not a stop."""
    try:
        return _region_scan(sess, region, settings, facts)
    except AwsCallError as e:
        if region == settings.aws.region:
            raise
        skipped = Signal(None, f"{region} left out of the ranking", e.failure, scope=region)
        return dict(region=region, notes=[], unavailable=[skipped], gpu_azs=[], skipped=True)


def _scan(sess, settings: Settings, region_list: list[str], facts: dict[str, InstanceFacts]) -> list[dict[str, Any]]:
    """Every region at once (a few threads); ConfigError when no region offers the GPU type."""
    with ThreadPoolExecutor(max_workers=min(8, len(region_list))) as pool:
        scans = list(pool.map(lambda r: _region_scan_or_skip(sess, r, settings, facts), region_list))
    if not any(s["gpu_azs"] for s in scans):
        raise ConfigError(
            f"{settings.aws.gpu_node_type} is not offered in any AZ of {', '.join(region_list)}. "
            f"Fix: check other regions (--regions / regions=[...]) or choose another gpu_node_type"
        )
    return scans


def _new_report(
    sess,
    settings: Settings,
    ident: Identity,
    scans: list[dict[str, Any]],
    region_list: list[str],
    facts: dict[str, InstanceFacts],
) -> CapacityReport:
    """The report with one row per AZ offering the GPU type, ranked."""
    a = settings.aws
    gf = facts[a.gpu_node_type]
    offered = [s for s in scans if s["gpu_azs"]]
    in_home = any(s["region"] == a.region for s in offered)
    subnets, cluster_state = cluster_private_azs(sess, settings) if in_home else (None, None)
    report = CapacityReport(
        account=ident.account,
        region=a.region,
        instance_type=a.gpu_node_type,
        gpu_node_count=a.gpu_node_count,
        facts=gf,
        system_facts=facts[a.system_node_type],
        regions_checked=region_list,
        not_offered=[s["region"] for s in scans if not s["gpu_azs"] and not s.get("skipped")],
        rows=[],
        recommendation=None,
        placement_file=None,
        plan=None,
        cost=None,
        system_quota={},
    )
    if subnets is not None:
        report.notes.append(
            f"existing cluster {a.cluster_name} ({cluster_state}) has private subnets in "
            f"{', '.join(subnets) or 'no AZ'}"
        )
    for s in scans:
        report.unavailable.extend(s["unavailable"])
    for s in offered:
        _add_region_rows(report, settings, s, gf, subnets)
    _rank(report.rows, a.region)
    if any(r.spot_capped for r in report.rows):
        report.notes.append(
            "Spot scores marked (capped): the Spot vCPU quota could not hold the nodes, so the "
            "score is not attainable; it is only a hint about spare capacity anyway"
        )
    return report


def _add_region_rows(
    report: CapacityReport,
    settings: Settings,
    scan: dict[str, Any],
    gf: InstanceFacts,
    subnets: dict[str, list[str]] | None,
) -> None:
    a = settings.aws
    region = scan["region"]
    report.notes.extend(scan["notes"])
    q = scan["quotas"]["gpu"]
    spot_cap = scan["spot_limit"] is not None and scan["spot_limit"] < a.gpu_node_count * gf.vcpus
    report.system_quota[region] = scan["quotas"]["system"]
    for az in scan["gpu_azs"]:
        az_id = scan["zones"].get(az, {}).get("id", "")
        row = AzRow(
            region=region,
            az=az,
            az_id=az_id,
            gpu_quota=q,
            spot_score=scan["scores"].get(az_id),
            spot_capped=spot_cap and az_id in scan["scores"],
            eks_supported=az_id not in common.EKS_UNSUPPORTED_AZ_IDS,
        )
        if region == a.region and subnets is not None:
            row.cluster_subnet = bool(subnets.get(az))
        report.rows.append(row)
    cmd = q.request_command(region)
    if cmd:
        report.quota_requests.append(cmd)


def _check_pinned_az(report: CapacityReport, settings: Settings) -> None:
    a = settings.aws
    if a.gpu_az and not any(r.region == a.region and r.az == a.gpu_az for r in report.rows):
        offered_here = [r.az for r in report.rows if r.region == a.region]
        raise ConfigError(
            f"aws.gpu_az (GPU_AZ) = {a.gpu_az!r} does not offer {a.gpu_node_type}. Fix: leave "
            f"gpu_az empty (this step picks one) or use one of {', '.join(offered_here) or '(none)'}"
        )


def _choose(report: CapacityReport, settings: Settings) -> AzRow | None:
    """The pinned AZ when usable, else the best-ranked viable one; a problem when there is none."""
    a = settings.aws
    if a.gpu_az:
        choice = next(r for r in report.rows if r.region == a.region and r.az == a.gpu_az)
        if choice.viable:
            return choice
        report.problems.append(
            f"gpu_az {a.gpu_az} is pinned in the settings but not usable: {choice.verdict}. Fix: clear gpu_az or "
            f"fix the cause"
        )
        return None
    if report.rows and report.rows[0].viable:
        return report.rows[0]
    report.problems.append(
        "no AZ has quota (and capacity) for the GPU nodes. Fix: request the quota "
        "increases listed, or try other regions / a smaller gpu_node_count"
    )
    return None


def _recommend(
    report: CapacityReport, settings: Settings, choice: AzRow, scans: list[dict[str, Any]], *, save: bool
) -> None:
    """Check the system node's quota and offering in the chosen region, then record (and save) the placement."""
    a = settings.aws
    sysq = report.system_quota.get(choice.region)
    if sysq is not None and sysq.ok is False:
        cmd = sysq.request_command(choice.region)
        report.problems.append(
            f"the system node ({a.system_node_count} x {a.system_node_type}) needs {sysq.need} "
            f"{sysq.quota_class} vCPUs in {choice.region}; {sysq.free:.0f} free. Fix: {cmd}"
        )
        if cmd and cmd not in report.quota_requests:
            report.quota_requests.append(cmd)
    scan = next(s for s in scans if s["region"] == choice.region)
    if not scan.get("sys_azs"):
        report.problems.append(
            f"{a.system_node_type} (system node) is not offered in {choice.region}. "
            f"Fix: choose another system_node_type"
        )
    source = "gpu_az" if a.gpu_az else ("probe" if choice.probe == "confirmed" else "ranked")
    report.recommendation = dict(
        region=choice.region,
        az=choice.az,
        az_id=choice.az_id,
        instance_type=a.gpu_node_type,
        gpu_node_count=a.gpu_node_count,
        account=report.account,
        source=source,
        probe_confirmed=choice.probe == "confirmed",
        spot_score=choice.spot_score,
        decided_at=common.utcnow().isoformat(timespec="seconds"),
    )
    if choice.region != a.region:
        report.notes.append(
            f"the best AZ is in {choice.region}, not the settings' region {a.region}: set "
            f"`region: {choice.region}` in env.yaml (or -p region {choice.region}) before step 02"
        )
    if save:
        report.placement_file = str(common.save_placement(settings, report.recommendation))


def _plan_and_cost(report: CapacityReport, settings: Settings, region: str, prices: Any) -> None:
    """The FSDP memory plan on the type's real GPU memory, and the stack's hourly cost in ``region``."""
    a, gf = settings.aws, report.facts
    world = settings.train.num_workers or a.gpu_node_count * gf.gpus
    report.plan = plan_for(settings, world, on_gpu=True, device_mem_gib=gf.gpu_mem_gib)
    if report.plan.fits is False:
        report.problems.append(
            f"planned peak {report.plan.peak_per_device_gib:.1f} GiB per GPU exceeds 90% of "
            f"{gf.gpu_mem_gib:.1f} GiB. Fix: {'; '.join(report.plan.notes)}"
        )
    report.cost = cost.estimate(settings, region, prices)


def capacity(
    settings: Settings,
    *,
    probe: bool = False,
    assume_yes: bool = False,
    regions: Sequence[str] | str | None = None,
    prices: Any = None,
    save: bool = True,
) -> CapacityReport:
    """Notebook 01 on aws (also ``raytrain-tutorial capacity``): rank the AZs, save the placement, plan, cost.

    ``regions``: names (a list, or one string separated by spaces or commas); None: every enabled region.
    ``prices``: a price override (see :mod:`raytrain_helpers.plan.cost`). ``save=False`` saves no placement.
    """
    a = settings.aws
    if isinstance(regions, str):
        regions = regions.replace(",", " ").split()
    sess, ident = common.connect(settings)
    ec2_home = aws_client.client(sess, "ec2", a.region)
    region_list = common.validate_regions(ec2_home, regions, a.region)
    if a.gpu_az and a.region not in region_list:
        region_list = [a.region, *region_list]
    facts = _type_facts(ec2_home, settings)
    scans = _scan(sess, settings, region_list, facts)
    report = _new_report(sess, settings, ident, scans, region_list, facts)
    _check_pinned_az(report, settings)
    if probe:
        _run_probes(sess, settings, report, ident, prices=prices, assume_yes=assume_yes)
        _rank(report.rows, a.region)
    choice = _choose(report, settings)
    if choice is not None:
        _recommend(report, settings, choice, scans, save=save)
    _plan_and_cost(report, settings, choice.region if choice else a.region, prices)
    return report
