"""Step 02 on aws: the decisions that read the account - the GPU AZ (settings or step 01's placement), the
capacity reservation it must fit, and what of the cluster exists (its private subnets, its node groups)."""

from __future__ import annotations

from typing import Any

from ....clients import aws as aws_client
from ....core.config import ConfigError, Settings
from ....plan.eksctl import Observed
from .. import common
from ..placement import blocks as capacity_blocks
from .state import AwsClusterResult, AwsContext, read_nodegroups

# --------------------------------------------------------------------------------------------------------------
# Decisions that read the account: which AZ, which reservation
# --------------------------------------------------------------------------------------------------------------


def resolve_gpu_az(ctx: AwsContext) -> tuple[str, str]:
    """(gpu AZ name, where it came from): gpu_az in the settings wins, then step 01's placement."""
    s = ctx.settings
    placement = common.load_placement(s)
    zones = common.zones(ctx.ec2)
    if s.aws.gpu_az:
        if s.aws.gpu_az not in zones:
            raise ConfigError(
                f"aws.gpu_az (GPU_AZ) = {s.aws.gpu_az!r} is not an AZ of {ctx.region}. "
                f"Fix: one of {', '.join(sorted(zones))}, or empty to use step 01's placement"
            )
        if placement and placement.get("az") != s.aws.gpu_az:
            print(
                f"note: gpu_az {s.aws.gpu_az} from the settings wins over step 01's placement "
                f"{placement.get('region')}/{placement.get('az')}"
            )
        return s.aws.gpu_az, "gpu_az setting"
    if not placement:
        raise ConfigError(
            f"no GPU AZ chosen: run step 01 (notebook 01_capacity or `raytrain-tutorial capacity`), "
            f"which saves {common.placement_path(s)}, or set aws.gpu_az (GPU_AZ)"
        )
    _check_placement(ctx, placement)
    az = placement["az"]
    if placement.get("account") and placement["account"] != ctx.ident.account and placement.get("az_id"):
        # AZ names are per account; AZ ids are not.
        by_id = {v["id"]: k for k, v in zones.items()}
        if placement["az_id"] not in by_id:
            raise ConfigError(f"placement AZ id {placement['az_id']} not found in this account. Fix: re-run step 01")
        az = by_id[placement["az_id"]]
        print(
            f"note: placement was decided in account {placement['account']}; AZ id {placement['az_id']} is "
            f"{az} in this account"
        )
    if az not in zones:
        raise ConfigError(f"placement AZ {az} is not an AZ of {ctx.region}. Fix: re-run step 01 (capacity)")
    return az, f"step 01 placement ({common.placement_path(s).name})"


def _check_placement(ctx: AwsContext, placement: dict[str, Any]) -> None:
    """Step 01's placement must be for this region and this GPU type."""
    gpu_type = ctx.settings.aws.gpu_node_type
    if placement["region"] != ctx.region:
        raise ConfigError(
            f"step 01 placed the GPU nodes in {placement['region']}/{placement['az']} but the settings' "
            f"region is {ctx.region}. Fix: set `region: {placement['region']}` (or -p region "
            f"{placement['region']}), or re-run step 01 for {ctx.region}"
        )
    if placement["instance_type"] != gpu_type:
        raise ConfigError(
            f"step 01's placement was decided for {placement['instance_type']}, the settings now ask "
            f"for {gpu_type}. Fix: re-run step 01 (capacity)"
        )


def validate_reservation(ctx: AwsContext, az: str) -> dict[str, Any] | None:
    """The settings' capacity reservation, checked against the GPU nodes (ConfigError when it does not fit)."""
    rid = ctx.settings.aws.capacity_reservation_id
    if not rid:
        return None
    try:
        resp = aws_client.essential_call(ctx.ec2, "describe_capacity_reservations", CapacityReservationIds=[rid])
        crs = resp["CapacityReservations"]
    except aws_client.AwsCallError as e:
        if e.failure.code.startswith("InvalidCapacityReservationId"):
            raise ConfigError(
                f"aws.capacity_reservation_id (CAPACITY_RESERVATION_ID) = {rid!r} was not found in "
                f"{ctx.region} ({e.failure.code}); reservations belong to one region and account. "
                f"Fix: use a reservation of this region, or leave it empty"
            ) from None
        raise
    if not crs:
        raise ConfigError(f"capacity reservation {rid} not found in {ctx.region}. Fix: leave it empty or fix the id")
    problems = reservation_problems(crs[0], ctx.settings, az) + capacity_blocks.type_problems(crs[0], ctx.settings)
    if problems:
        raise ConfigError(
            f"aws.capacity_reservation_id (CAPACITY_RESERVATION_ID) = {rid}: "
            + "; ".join(problems)
            + ". Fix: correct the reservation or the settings, or leave it empty"
        )
    return crs[0]


def reservation_problems(cr: dict[str, Any], settings: Settings, az: str) -> list[str]:
    """Why a capacity reservation cannot hold the GPU nodes in ``az`` (empty when it can)."""
    a = settings.aws
    problems = []
    if cr.get("State") != "active":
        problems.append(f"its state is {cr.get('State')!r}, not 'active'")
    if cr.get("InstanceType") != a.gpu_node_type:
        problems.append(f"it reserves {cr.get('InstanceType')}, the GPU nodes are {a.gpu_node_type}")
    if cr.get("AvailabilityZone") != az:
        problems.append(
            f"it is in {cr.get('AvailabilityZone')}, the GPU AZ is {az} (set gpu_az: "
            f"{cr.get('AvailabilityZone')} to follow the reservation)"
        )
    if int(cr.get("AvailableInstanceCount", 0)) < a.gpu_node_count:
        problems.append(
            f"only {cr.get('AvailableInstanceCount')} of its instances are available, {a.gpu_node_count} are needed"
        )
    if cr.get("InstancePlatform", "Linux/UNIX") != "Linux/UNIX":
        problems.append(f"its platform is {cr.get('InstancePlatform')}, the EKS nodes run Linux/UNIX")
    return problems


def gpu_placement(ctx: AwsContext, res: AwsClusterResult, *, execute: bool) -> tuple[list[str], dict[str, Any]]:
    """The AZs offering the GPU type and the region's zones; sets ``res.gpu_az`` (a problem, not an error, in
    ``plan`` when none is chosen). ConfigError when the GPU AZ or the capacity reservation cannot work."""
    a = ctx.settings.aws
    offering = common.offering_azs(ctx.ec2, a.gpu_node_type)
    if not offering:
        raise ConfigError(
            f"{a.gpu_node_type} is not offered in any AZ of {ctx.region}. Fix: run step 01 "
            f"(capacity) to find a region, or choose another gpu_node_type"
        )
    try:
        res.gpu_az, res.gpu_az_source = resolve_gpu_az(ctx)
    except ConfigError as e:
        if execute:
            raise
        res.problems.append(str(e))
    gpu_az = res.gpu_az
    if gpu_az and gpu_az not in offering:
        raise ConfigError(
            f"GPU AZ {gpu_az} ({res.gpu_az_source}) does not offer {a.gpu_node_type}; AZs that do: "
            f"{', '.join(offering)}. Fix: set gpu_az to one of them or re-run step 01"
        )
    zones = common.zones(ctx.ec2)
    if gpu_az and zones.get(gpu_az, {}).get("id") in common.EKS_UNSUPPORTED_AZ_IDS:
        raise ConfigError(
            f"GPU AZ {gpu_az} ({zones[gpu_az]['id']}) cannot host EKS control-plane subnets. Fix: choose "
            f"another AZ (step 01 never recommends it; check gpu_az)"
        )
    if gpu_az:
        cr = validate_reservation(ctx, gpu_az)
        res.reservation_type = (cr.get("ReservationType") or "default") if cr else ""
        res.notes += capacity_blocks.reservation_notes(cr)
    return offering, zones


def observe(ctx: AwsContext, res: AwsClusterResult, c: dict[str, Any] | None, offering: list[str]) -> Observed:
    """What exists: the cluster's status, node groups and private subnets (read into ``res`` too)."""
    a = ctx.settings.aws
    observed = Observed(cluster_status=res.cluster_status, gpu_az=res.gpu_az)
    if c is None:
        return observed
    subnet_ids = (c.get("resourcesVpcConfig") or {}).get("subnetIds") or []
    observed.private_subnets = common.private_subnets_by_az(ctx.ec2, subnet_ids)
    observed.nodegroups = res.nodegroups = read_nodegroups(ctx)
    if c.get("version") and str(c["version"]) != a.k8s_version:
        res.notes.append(
            f"the cluster runs Kubernetes {c['version']}, the settings say {a.k8s_version}; "
            f"upgrading is not part of this tutorial (eksctl upgrade cluster)"
        )
    gpu_az = res.gpu_az
    if gpu_az and not observed.private_subnets.get(gpu_az) and res.nodegroup(a.gpu_nodegroup_name) is None:
        usable = [z for z in offering if observed.private_subnets.get(z)]
        choices = ", ".join(usable) or "(none: the cluster has no private subnet in an AZ offering the type)"
        raise ConfigError(
            f"cluster {a.cluster_name} has no private subnet in the GPU AZ {gpu_az}. Fix: set gpu_az to one of "
            f"{choices}, or delete the cluster (`cluster down`) and re-run `up` to create it with {gpu_az}"
        )
    return observed
