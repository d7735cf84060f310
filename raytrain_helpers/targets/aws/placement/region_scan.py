"""Step 01 reading the account, region by region, without creating anything.

The GPU and system node types' facts (``ec2:DescribeInstanceTypes``, once: they do not vary by region) and the
settings checked against them; then, for every region at once (a few threads), the AZs offering the types, the
On-Demand quotas and the vCPUs in use (:mod:`.quotas`), the Spot quota and placement scores, and the existing
cluster's private subnets per AZ. A region other than the settings' one whose essential calls fail is left out
of the ranking with a row.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from ....clients import aws as aws_client
from ....clients.aws import AwsCallError, Signal
from ....core.config import ConfigError, Settings
from .. import common
from .quotas import INSTEAD, QUOTA_CLASSES, QuotaState, quota_class, quota_limit, vcpus_in_use


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


def type_facts(ec2, settings: Settings) -> dict[str, InstanceFacts]:
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


def scan_regions(
    sess, settings: Settings, region_list: list[str], facts: dict[str, InstanceFacts]
) -> list[dict[str, Any]]:
    """Every region at once (a few threads); ConfigError when no region offers the GPU type."""
    with ThreadPoolExecutor(max_workers=min(8, len(region_list))) as pool:
        scans = list(pool.map(lambda r: _region_scan_or_skip(sess, r, settings, facts), region_list))
    if not any(s["gpu_azs"] for s in scans):
        raise ConfigError(
            f"{settings.aws.gpu_node_type} is not offered in any AZ of {', '.join(region_list)}. "
            f"Fix: check other regions (--regions / regions=[...]) or choose another gpu_node_type"
        )
    return scans
