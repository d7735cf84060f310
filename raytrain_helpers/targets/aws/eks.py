"""Step 02 on the ``aws`` target: the EKS cluster, created with eksctl; and step 08, its removal.

Every action is decided from the resources' real state, read with boto3 (``eks:DescribeCluster`` /
``eks:DescribeNodegroup``: NOT_FOUND, CREATING, ACTIVE, DELETING, FAILED...), so re-running any action is safe:

* ``plan``   renders the eksctl configs from env.yaml and lists what ``up`` would do; creates nothing.
* ``up``     creates what is missing - the cluster (VPC with private subnets in the AZs offering the GPU
             type, one NAT gateway, OIDC, core add-ons, the ``role=system`` node group), then the EFA GPU
             node group in exactly one AZ (the placement from step 01, passed as explicit subnet ids) -
             after one confirmation; waits for what is in progress; reports failures with their causes.
* ``status`` reads and shows the state; never changes anything.
* ``down``   deletes the GPU node group, then the cluster, after one confirmation, and lists what is left.

What to do is decided by :func:`raytrain_helpers.plan.eksctl.decide_actions` from the state read here; this
module reads the state, carries the actions out, waits and diagnoses. :func:`teardown` (notebook 08) also
removes the Kubernetes objects first: the RayCluster, the KubeRay operator and the device plugins.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ...clients import aws as aws_client
from ...clients.eksctl import CommandResult, eksctl_path, run_eksctl
from ...clients.kubernetes import cluster_context
from ...core.config import ConfigError, Settings
from ...core.constants import STEP_ACTIONS
from ...core.paths import runs_dir
from ...core.tables import table
from ...plan import cost
from ...plan.eksctl import (
    CLUSTER_CFG,
    CREATE_CLUSTER,
    CREATE_GPU_NG,
    CREATE_SYSTEM_NG,
    FAILED_NG,
    GPU_CFG,
    IN_PROGRESS,
    KUBECONFIG,
    NOT_FOUND,
    SYSTEM_NODEGROUP,
    WAIT_CLUSTER,
    WAIT_GPU_NG,
    WAIT_GPU_NG_GONE,
    Action,
    Decision,
    Observed,
    cluster_azs,
    decide_actions,
    drift,
    render_cluster_config,
    render_gpu_nodegroup_config,
)
from ...plan.raycluster import OPERATOR_NAMESPACE
from ..base import check_action
from . import capacity_blocks, common, kuberay, plugins, storage
from .placement import cancel_probe_reservations, probe_reservations

#: Seconds between state reads while waiting (tests shorten it).
POLL_S = 20.0
CLUSTER_TIMEOUT_S = 50 * 60
NODEGROUP_TIMEOUT_S = 45 * 60
DELETE_TIMEOUT_S = 45 * 60


@dataclass
class AwsClusterResult:
    action: str
    account: str
    region: str
    cluster_name: str
    cluster_status: str = NOT_FOUND
    nodegroups: list[dict[str, Any]] = field(default_factory=list)
    gpu_az: str | None = None
    gpu_az_source: str | None = None
    gpu_subnets: list[str] = field(default_factory=list)
    reservation_type: str = ""  # EC2's ReservationType of aws.capacity_reservation_id ("" without one)
    configs: dict[str, str] = field(default_factory=dict)  # name -> rendered eksctl config
    config_files: dict[str, str] = field(default_factory=dict)
    actions: list[str] = field(default_factory=list)  # planned (plan) or done (up/down)
    remaining: list[str] = field(default_factory=list)  # down: what is still there
    causes: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    logs: list[str] = field(default_factory=list)

    def nodegroup(self, name: str) -> dict[str, Any] | None:
        return next((n for n in self.nodegroups if n["name"] == name), None)

    @property
    def ok(self) -> bool:
        if self.problems:
            return False
        if self.action == "down":
            return not self.remaining
        if self.action in ("up", "status"):
            return (
                self.cluster_status == "ACTIVE"
                and bool(self.nodegroups)
                and all(n["status"] == "ACTIVE" for n in self.nodegroups)
            )
        return True

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["ok"] = self.ok
        return d

    def show(self) -> None:
        print(f"cluster step '{self.action}' - AWS account {self.account}, region {self.region}")
        print(f"EKS cluster {self.cluster_name}: {self.cluster_status}")
        if self.nodegroups:
            table(
                [
                    (
                        n["name"],
                        n["status"],
                        n.get("instance_type", "-"),
                        n.get("size", "-"),
                        ",".join(n.get("azs", [])) or "-",
                        n.get("labels", "-"),
                    )
                    for n in self.nodegroups
                ],
                ["node group", "status", "type", "min/desired/max", "AZ", "labels"],
            )
        if self.gpu_az:
            print(
                f"GPU AZ: {self.gpu_az} ({self.gpu_az_source})"
                + (f", subnets {', '.join(self.gpu_subnets)}" if self.gpu_subnets else "")
            )
        for name, text in self.configs.items():
            where = f" ({self.config_files[name]})" if name in self.config_files else ""
            print(f"--- {name}{where} ---")
            print(text.rstrip())
        if self.actions:
            print("actions " + ("planned (nothing was created):" if self.action == "plan" else "taken:"))
            for a in self.actions:
                print(f"  - {a}")
        if self.action == "down":
            print("left in the account: " + ("nothing" if not self.remaining else ""))
            for r in self.remaining:
                print(f"  - {r}")
        for prefix, lines in (("cause", self.causes), ("note", self.notes), ("log", self.logs)):
            for line in lines:
                print(f"{prefix}: {line}")
        for p in self.problems:
            print(f"PROBLEM: {p}")
        print("cluster:", "OK" if self.ok else "NOT OK")


class AwsContext:
    """The session, identity and clients of one step run, and the cluster's state as read now."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.region = settings.aws.region
        self.sess, self.ident = common.connect(settings)
        self.eks = aws_client.client(self.sess, "eks", self.region)
        self.ec2 = aws_client.client(self.sess, "ec2", self.region)
        self.run_dir = runs_dir(settings) / settings.run_name

    def client(self, name: str):
        return aws_client.client(self.sess, name, self.region)

    def cluster(self) -> dict[str, Any] | None:
        return aws_client.describe_cluster(self.eks, self.settings.aws.cluster_name)

    def cluster_status(self) -> str:
        c = self.cluster()
        return c["status"] if c else NOT_FOUND

    def nodegroup(self, name: str) -> dict[str, Any] | None:
        return aws_client.describe_nodegroup(self.eks, self.settings.aws.cluster_name, name)

    def nodegroup_status(self, name: str) -> str:
        ng = self.nodegroup(name)
        return ng["status"] if ng else NOT_FOUND

    def log_path(self, op: str) -> Path:
        return self.run_dir / "logs" / f"eksctl-{op}-{time.strftime('%Y%m%d-%H%M%S')}.log"

    def eksctl(self, args: list[str], op: str, desc: str, poll: Callable[[], str] | None = None) -> CommandResult:
        """Run eksctl with this run's log file, redaction and state polling."""
        return run_eksctl(args, log_path=self.log_path(op), sess=self.sess, desc=desc, poll=poll, poll_every=POLL_S)


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


# --------------------------------------------------------------------------------------------------------------
# Reading state and failure causes
# --------------------------------------------------------------------------------------------------------------


def nodegroup_summary(ng: dict[str, Any], subnet_az: dict[str, str]) -> dict[str, Any]:
    """A node group as the results show it (``subnet_az``: subnet id -> AZ)."""
    sc = ng.get("scalingConfig") or {}
    return dict(
        name=ng["nodegroupName"],
        status=ng["status"],
        instance_type=",".join(ng.get("instanceTypes") or []),
        size=f"{sc.get('minSize', '?')}/{sc.get('desiredSize', '?')}/{sc.get('maxSize', '?')}",
        azs=sorted({subnet_az.get(s, "?") for s in ng.get("subnets") or []}),
        subnets=list(ng.get("subnets") or []),
        labels=",".join(f"{k}={v}" for k, v in sorted((ng.get("labels") or {}).items())),
        scaling=sc,
        instance_types=list(ng.get("instanceTypes") or []),
        health=[f"{i.get('code')}: {i.get('message')}" for i in (ng.get("health") or {}).get("issues", [])],
    )


def read_nodegroups(ctx: AwsContext) -> list[dict[str, Any]]:
    """Every node group of the cluster, summarised."""
    names = aws_client.paginate(ctx.eks, "list_nodegroups", "nodegroups", clusterName=ctx.settings.aws.cluster_name)
    ngs = [ng for ng in (ctx.nodegroup(n) for n in names) if ng]
    subnet_ids = sorted({s for ng in ngs for s in ng.get("subnets") or []})
    subnet_az = {}
    if subnet_ids:
        subnet_az = {
            s["SubnetId"]: s["AvailabilityZone"]
            for s in aws_client.essential_call(ctx.ec2, "describe_subnets", SubnetIds=subnet_ids)["Subnets"]
        }
    return [nodegroup_summary(ng, subnet_az) for ng in ngs]


def failure_causes(sess, region: str, cluster: str, nodegroup: str | None = None, *, limit: int = 5) -> list[str]:
    """Why a node group or cluster is failed or stuck: EKS health issues, Auto Scaling activities,
    CloudFormation stack events."""
    out: list[str] = []
    asgs: list[str] = []
    if nodegroup:
        ng = aws_client.describe_nodegroup(aws_client.client(sess, "eks", region), cluster, nodegroup)
        if ng:
            for i in (ng.get("health") or {}).get("issues", []):
                ids = ", ".join(i.get("resourceIds") or [])
                out.append(f"EKS health {i.get('code')}: {i.get('message')}" + (f" [{ids}]" if ids else ""))
            asgs = [g["name"] for g in (ng.get("resources") or {}).get("autoScalingGroups", []) if g.get("name")]
    out += _scaling_causes(sess, region, asgs, limit)
    stack = f"eksctl-{cluster}-nodegroup-{nodegroup}" if nodegroup else f"eksctl-{cluster}-cluster"
    return out + _stack_causes(sess, region, stack, limit)


def _scaling_causes(sess, region: str, asgs: list[str], limit: int) -> list[str]:
    out = []
    asc = aws_client.client(sess, "autoscaling", region) if asgs else None
    for name in asgs:
        sig = aws_client.optional_call(
            asc, "describe_scaling_activities", instead="the diagnosis shows EKS health and CloudFormation events only",
            default={}, AutoScalingGroupName=name, MaxRecords=20,
        )  # fmt: skip
        if not sig.available:
            out.append(f"(Auto Scaling {name}: {sig.line()})")
            break
        failed = [x for x in sig.value.get("Activities", []) if x.get("StatusCode") in ("Failed", "Cancelled")]
        for act in failed[:limit]:
            why = act.get("StatusMessage") or act.get("Description")
            out.append(f"Auto Scaling {name} {act.get('StatusCode')}: {why}")
    return out


def _stack_causes(sess, region: str, stack: str, limit: int) -> list[str]:
    out = []
    sig = aws_client.optional_call(
        aws_client.client(sess, "cloudformation", region), "describe_stack_events",
        instead="the diagnosis shows EKS health and Auto Scaling activities only", default={}, StackName=stack,
    )  # fmt: skip
    if not sig.available:
        if "does not exist" not in sig.failure.message:
            out.append(f"(CloudFormation {stack}: {sig.line()})")
        return out
    failed = [x for x in sig.value.get("StackEvents", []) if str(x.get("ResourceStatus", "")).endswith("FAILED")]
    for e in failed[:limit]:
        out.append(
            f"CloudFormation {stack} {e.get('LogicalResourceId')} {e.get('ResourceStatus')}: "
            f"{e.get('ResourceStatusReason', '')}"
        )
    return out


def leftovers(ctx: AwsContext) -> list[str]:
    """Everything of this cluster still in the account: cluster, node groups, stacks, instances, VPCs, NATs,
    this tutorial's probe reservations."""
    name = ctx.settings.aws.cluster_name
    out: list[str] = []
    c = ctx.cluster()
    if c:
        out.append(f"EKS cluster {name} ({c['status']})")
        for ng in aws_client.paginate(ctx.eks, "list_nodegroups", "nodegroups", clusterName=name):
            out.append(f"node group {ng} ({ctx.nodegroup_status(ng)})")
    stacks = aws_client.paginate(ctx.client("cloudformation"), "list_stacks", "StackSummaries")
    out += [
        f"CloudFormation stack {st['StackName']} ({st['StackStatus']})"
        for st in stacks
        if st["StackName"].startswith(f"eksctl-{name}-") and st["StackStatus"] != "DELETE_COMPLETE"
    ]
    for entry in _leftover_instances(ctx, name):
        if entry not in out:
            out.append(entry)
    out += _leftover_network(ctx, name)
    try:
        for cr in probe_reservations(ctx.ec2):
            out.append(f"probe capacity reservation {cr['CapacityReservationId']} ({cr['State']})")
    except Exception as e:  # noqa: BLE001 - listing reservations may be denied
        out.append(f"(capacity reservations unreadable: {aws_client.err_code(e)})")
    return out


def _leftover_instances(ctx: AwsContext, name: str) -> list[str]:
    out = []
    alive = {"Name": "instance-state-name", "Values": ["pending", "running", "stopping", "stopped"]}
    for tag in ("alpha.eksctl.io/cluster-name", "eks:cluster-name"):
        filters = [{"Name": f"tag:{tag}", "Values": [name]}, alive]
        for r in aws_client.paginate(ctx.ec2, "describe_instances", "Reservations", Filters=filters):
            out += [
                f"EC2 instance {i['InstanceId']} {i['InstanceType']} ({i['State']['Name']})" for i in r["Instances"]
            ]
    return out


def _leftover_network(ctx: AwsContext, name: str) -> list[str]:
    out = []
    tagged = [{"Name": "tag:alpha.eksctl.io/cluster-name", "Values": [name]}]
    for v in aws_client.paginate(ctx.ec2, "describe_vpcs", "Vpcs", Filters=tagged):
        out.append(f"VPC {v['VpcId']}")
        in_vpc = [{"Name": "vpc-id", "Values": [v["VpcId"]]}]
        for nat in aws_client.paginate(ctx.ec2, "describe_nat_gateways", "NatGateways", Filters=in_vpc):
            if nat.get("State") in ("pending", "available"):
                out.append(f"NAT gateway {nat['NatGatewayId']} ({nat['State']})")
    return out


# --------------------------------------------------------------------------------------------------------------
# The step
# --------------------------------------------------------------------------------------------------------------


def cluster(settings: Settings, action: str | None = "up", *, assume_yes: bool = False) -> AwsClusterResult:
    """Notebook 02 on aws: ``plan`` | ``up`` | ``status`` | ``down``, each decided from the real state.

    Without an action: ``up`` with ``assume_yes`` (nothing billable happens without it), else ``plan``."""
    action = action or ("up" if assume_yes else "plan")
    check_action(action, STEP_ACTIONS)
    ctx = AwsContext(settings)
    res = AwsClusterResult(
        action=action, account=ctx.ident.account, region=ctx.region, cluster_name=settings.aws.cluster_name
    )
    if action in ("plan", "up"):
        _plan_or_up(ctx, res, execute=(action == "up"), assume_yes=assume_yes)
    elif action == "status":
        _status(ctx, res)
    else:
        delete(settings, assume_yes=assume_yes, context=ctx, result=res)
    return res


def _status(ctx: AwsContext, res: AwsClusterResult) -> None:
    a = ctx.settings.aws
    c = ctx.cluster()
    res.cluster_status = c["status"] if c else NOT_FOUND
    if c is None:
        res.notes.append("no cluster: run `up` (raytrain-tutorial cluster up)")
        return
    res.nodegroups = read_nodegroups(ctx)
    if c["status"] == "FAILED":
        res.causes += failure_causes(ctx.sess, ctx.region, a.cluster_name)
    for ng in res.nodegroups:
        if ng["status"] in FAILED_NG:
            res.causes += failure_causes(ctx.sess, ctx.region, a.cluster_name, ng["name"])
    gpu = res.nodegroup(a.gpu_nodegroup_name)
    if gpu is None:
        res.notes.append(f"GPU node group {a.gpu_nodegroup_name} does not exist yet: run `up`")
    else:
        res.gpu_az = ",".join(gpu["azs"])
        res.gpu_subnets = gpu["subnets"]
        res.gpu_az_source = "the node group's subnets"


@dataclass
class UpInputs:
    """What the actions of ``up`` work from: the rendered cluster config, where the configs go, the GPU AZ."""

    cluster_text: str
    cluster_file: Path
    gpu_file: Path
    gpu_az: str | None


def _plan_or_up(ctx: AwsContext, res: AwsClusterResult, *, execute: bool, assume_yes: bool) -> None:
    s = ctx.settings
    c = ctx.cluster()
    res.cluster_status = c["status"] if c else NOT_FOUND
    offering, zones = _gpu_placement(ctx, res, execute=execute)
    observed = _observe(ctx, res, c, offering)
    azs = cluster_azs(res.gpu_az or offering[0], offering, zones, common.EKS_UNSUPPORTED_AZ_IDS)
    inputs = UpInputs(
        cluster_text=render_cluster_config(s, azs=azs, gpu_az=res.gpu_az),
        cluster_file=ctx.run_dir / "eksctl" / "cluster.yaml",
        gpu_file=ctx.run_dir / "eksctl" / "gpu-nodegroup.yaml",
        gpu_az=res.gpu_az,
    )
    res.configs[CLUSTER_CFG] = inputs.cluster_text
    res.notes += [f"WARNING: {w}" for w in cost.estimate(s, ctx.region).warnings]  # the version's support tier
    decision = decide_actions(s, observed, azs=azs, cluster_file=inputs.cluster_file, gpu_file=inputs.gpu_file)
    _take_decision(ctx, res, decision)
    storage.plan_into(res, s, ctx.sess, ctx.ident, c)  # the checkpoint bucket and the pods' role: read, not made
    if not execute or res.problems:
        if not execute:
            res.notes.append("plan: nothing was created; run `up` to do the actions above")
        return
    _confirm_billable(ctx, decision, assume_yes=assume_yes)
    eksctl_path()  # a clear error before anything starts when eksctl is missing
    done: list[str] = []
    try:
        execute_actions(ctx, res, decision.actions, inputs, done)
    except common.WaitTimeout as e:
        _fail(ctx, res, f"stuck: {e}", None, nodegroup=e.nodegroup)
    res.actions = done
    # the real state, whatever happened
    res.cluster_status = ctx.cluster_status()
    if res.cluster_status == "ACTIVE" and not res.problems:
        storage.up_into(res, s, ctx.sess, ctx.ident, ctx.cluster(), assume_yes=assume_yes)
    res.nodegroups = read_nodegroups(ctx) if res.cluster_status != NOT_FOUND else []
    gpu = res.nodegroup(s.aws.gpu_nodegroup_name)
    problem = drift(s, gpu, res.gpu_az) if gpu and not res.problems else None
    if problem:
        res.problems.append(problem)


def _gpu_placement(ctx: AwsContext, res: AwsClusterResult, *, execute: bool) -> tuple[list[str], dict[str, Any]]:
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


def _observe(ctx: AwsContext, res: AwsClusterResult, c: dict[str, Any] | None, offering: list[str]) -> Observed:
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


def _take_decision(ctx: AwsContext, res: AwsClusterResult, decision: Decision) -> None:
    """Record the decision in ``res``: the causes of what failed, the problems, the GPU config, the actions."""
    for nodegroup in decision.diagnose:
        res.causes += failure_causes(ctx.sess, ctx.region, ctx.settings.aws.cluster_name, nodegroup)
    res.problems += decision.problems
    res.gpu_subnets = decision.gpu_subnets
    if decision.gpu_config_subnets is not None:
        res.configs[GPU_CFG] = render_gpu_nodegroup_config(
            ctx.settings,
            gpu_az=res.gpu_az,
            subnet_ids=decision.gpu_config_subnets,
            reservation_type=res.reservation_type,
        )
    res.actions = decision.descriptions


def _confirm_billable(ctx: AwsContext, decision: Decision, *, assume_yes: bool) -> None:
    """One confirmation for everything billable (nothing to confirm when nothing is created)."""
    billable = decision.billable
    if not billable:
        return
    est = cost.estimate(ctx.settings, ctx.region)
    common.confirm(
        f"create EKS resources for {ctx.settings.aws.cluster_name}",
        ctx.ident,
        assume_yes=assume_yes,
        details=billable
        + [
            f"billed while they exist: about ${est.total_per_hour:.2f}/h for the whole "
            f"stack (prices as of {est.as_of}); remove with `cluster down`"
        ],
    )


# --------------------------------------------------------------------------------------------------------------
# The executor: one function per kind of action; each returns False to stop
# --------------------------------------------------------------------------------------------------------------


def execute_actions(
    ctx: AwsContext, res: AwsClusterResult, actions: list[Action], inputs: UpInputs, done: list[str]
) -> None:
    """Carry ``actions`` out in order, appending each one's description to ``done``; stop at the first failure."""
    for action in actions:
        if not EXECUTORS[action.kind](ctx, res, inputs):
            break
        done.append(action.description)


def _create_cluster(ctx: AwsContext, res: AwsClusterResult, inputs: UpInputs) -> bool:
    _write(inputs.cluster_file, inputs.cluster_text, res, CLUSTER_CFG)
    r = ctx.eksctl(
        ["create", "cluster", "-f", str(inputs.cluster_file)],
        "create-cluster",
        f"cluster {ctx.settings.aws.cluster_name}",
        poll=ctx.cluster_status,
    )
    res.logs.append(str(r.log_path))
    status = ctx.cluster_status()
    if status in IN_PROGRESS:
        status = _wait_cluster(ctx)
    if r.returncode != 0 or status != "ACTIVE":
        _fail(ctx, res, f"eksctl create cluster exited {r.returncode}; cluster is {status}", r, nodegroup=None)
        return False
    return True


def _wait_cluster_active(ctx: AwsContext, res: AwsClusterResult, inputs: UpInputs) -> bool:
    status = _wait_cluster(ctx)
    if status != "ACTIVE":
        _fail(ctx, res, f"cluster ended {status}", None, nodegroup=None)
        return False
    return True


def _create_system_nodegroup(ctx: AwsContext, res: AwsClusterResult, inputs: UpInputs) -> bool:
    _write(inputs.cluster_file, inputs.cluster_text, res, CLUSTER_CFG)
    r = ctx.eksctl(
        ["create", "nodegroup", "-f", str(inputs.cluster_file), "--include", SYSTEM_NODEGROUP],
        "create-system-nodegroup",
        f"node group {SYSTEM_NODEGROUP}",
        poll=lambda: ctx.nodegroup_status(SYSTEM_NODEGROUP),
    )
    res.logs.append(str(r.log_path))
    st = _wait_nodegroup(ctx, SYSTEM_NODEGROUP)
    if r.returncode != 0 or st != "ACTIVE":
        what = f"eksctl create nodegroup ({SYSTEM_NODEGROUP}) exited {r.returncode}; it is {st}"
        _fail(ctx, res, what, r, nodegroup=SYSTEM_NODEGROUP)
        return False
    return True


def _wait_gpu_nodegroup_gone(ctx: AwsContext, res: AwsClusterResult, inputs: UpInputs) -> bool:
    _wait_nodegroup_gone(ctx, ctx.settings.aws.gpu_nodegroup_name)
    return True


def _create_gpu_nodegroup(ctx: AwsContext, res: AwsClusterResult, inputs: UpInputs) -> bool:
    a = ctx.settings.aws
    c = ctx.cluster()
    private = common.private_subnets_by_az(ctx.ec2, (c.get("resourcesVpcConfig") or {}).get("subnetIds") or [])
    subnets = private.get(inputs.gpu_az or "", [])
    if not subnets:
        res.problems.append(
            f"the cluster has no private subnet in {inputs.gpu_az} (AZs with one: "
            f"{', '.join(private) or 'none'}). Fix: `cluster down` then `up`, or set gpu_az"
        )
        return False
    res.gpu_subnets = subnets
    text = render_gpu_nodegroup_config(
        ctx.settings, gpu_az=inputs.gpu_az, subnet_ids=subnets, reservation_type=res.reservation_type
    )
    res.configs[GPU_CFG] = text
    _write(inputs.gpu_file, text, res, GPU_CFG)
    r = ctx.eksctl(
        ["create", "nodegroup", "-f", str(inputs.gpu_file), "--install-nvidia-plugin=false"],
        "create-gpu-nodegroup",
        f"GPU node group {a.gpu_nodegroup_name}",
        poll=lambda: ctx.nodegroup_status(a.gpu_nodegroup_name),
    )
    res.logs.append(str(r.log_path))
    st = _wait_nodegroup(ctx, a.gpu_nodegroup_name)
    if r.returncode != 0 or st != "ACTIVE":
        what = f"eksctl create nodegroup ({a.gpu_nodegroup_name}) exited {r.returncode}; it is {st}"
        _fail(ctx, res, what, r, nodegroup=a.gpu_nodegroup_name)
        return False
    return True


def _wait_gpu_nodegroup(ctx: AwsContext, res: AwsClusterResult, inputs: UpInputs) -> bool:
    name = ctx.settings.aws.gpu_nodegroup_name
    st = _wait_nodegroup(ctx, name)
    if st != "ACTIVE":
        _fail(ctx, res, f"GPU node group ended {st}", None, nodegroup=name)
        return False
    return True


def _write_kubeconfig(ctx: AwsContext, res: AwsClusterResult, inputs: UpInputs) -> bool:
    r = ctx.eksctl(
        ["utils", "write-kubeconfig", "--cluster", ctx.settings.aws.cluster_name, "--region", ctx.region],
        "write-kubeconfig",
        "kubeconfig",
    )
    if r.returncode != 0:
        res.notes.append(f"writing the kubeconfig failed (exit {r.returncode}); see {r.log_path}")
    return True


#: The function carrying out each kind of action of :func:`raytrain_helpers.plan.eksctl.decide_actions`.
EXECUTORS: dict[str, Callable[[AwsContext, AwsClusterResult, UpInputs], bool]] = {
    CREATE_CLUSTER: _create_cluster,
    WAIT_CLUSTER: _wait_cluster_active,
    CREATE_SYSTEM_NG: _create_system_nodegroup,
    WAIT_GPU_NG_GONE: _wait_gpu_nodegroup_gone,
    CREATE_GPU_NG: _create_gpu_nodegroup,
    WAIT_GPU_NG: _wait_gpu_nodegroup,
    KUBECONFIG: _write_kubeconfig,
}


def _write(path: Path, text: str, res: AwsClusterResult, name: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    res.config_files[name] = str(path)


def _fail(
    ctx: AwsContext, res: AwsClusterResult, what: str, run: CommandResult | None, *, nodegroup: str | None
) -> None:
    res.causes += failure_causes(ctx.sess, ctx.region, ctx.settings.aws.cluster_name, nodegroup)
    if run is not None and run.tail:
        res.causes += [f"eksctl: {line}" for line in run.tail[-8:] if line.strip()]
    res.problems.append(
        f"{what}. Fix: read the causes and the log; re-running `up` resumes from the real state; "
        f"`cluster down --yes` removes what was created"
    )


# --------------------------------------------------------------------------------------------------------------
# Waits
# --------------------------------------------------------------------------------------------------------------


def _wait_cluster(ctx: AwsContext) -> str:
    return common.wait_until(
        ctx.cluster_status,
        done=lambda st: st not in ("CREATING", "UPDATING", "PENDING"),
        desc=f"cluster {ctx.settings.aws.cluster_name}",
        timeout=CLUSTER_TIMEOUT_S,
        every=POLL_S,
    )


def _wait_nodegroup(ctx: AwsContext, name: str) -> str:
    return common.wait_until(
        lambda: ctx.nodegroup_status(name),
        done=lambda st: st not in IN_PROGRESS,
        desc=f"node group {name}",
        timeout=NODEGROUP_TIMEOUT_S,
        every=POLL_S,
        nodegroup=name,
    )


def _wait_nodegroup_gone(ctx: AwsContext, name: str) -> str:
    return common.wait_until(
        lambda: ctx.nodegroup_status(name),
        done=lambda st: st != "DELETING",
        desc=f"deleting node group {name}",
        timeout=DELETE_TIMEOUT_S,
        every=POLL_S,
        nodegroup=name,
    )


def _wait_cluster_gone(ctx: AwsContext) -> str:
    return common.wait_until(
        ctx.cluster_status,
        done=lambda st: st != "DELETING",
        desc=f"deleting cluster {ctx.settings.aws.cluster_name}",
        timeout=DELETE_TIMEOUT_S,
        every=POLL_S,
    )


# --------------------------------------------------------------------------------------------------------------
# Deleting: the GPU node group, then the cluster; verified by listing what is left
# --------------------------------------------------------------------------------------------------------------


def delete(
    settings: Settings,
    *,
    assume_yes: bool = False,
    nodegroup_only: bool = False,
    context: AwsContext | None = None,
    result: AwsClusterResult | None = None,
) -> AwsClusterResult:
    """Delete the GPU node group, then (unless ``nodegroup_only``) the cluster with everything eksctl made.

    Headless with ``assume_yes=True``; never prompts in a non-interactive run (it refuses instead).
    ``context`` / ``result``: an open :class:`AwsContext` and the result to fill (new ones by default).
    """
    ctx = context or AwsContext(settings)
    res = result or AwsClusterResult(
        action="down", account=ctx.ident.account, region=ctx.region, cluster_name=settings.aws.cluster_name
    )
    a = settings.aws
    c = ctx.cluster()
    res.cluster_status = c["status"] if c else NOT_FOUND
    gpu_status = ctx.nodegroup_status(a.gpu_nodegroup_name) if c else NOT_FOUND
    try:
        probes = [cr["CapacityReservationId"] for cr in probe_reservations(ctx.ec2)]
    except Exception:  # noqa: BLE001 - listing may be denied; leftovers() reports it
        probes = []
    if nodegroup_only:
        probes = []
    todo = _deletions(settings, c, gpu_status, probes, nodegroup_only=nodegroup_only)
    if todo:
        what = f"delete {'the GPU node group of ' if nodegroup_only else ''}{a.cluster_name}"
        common.confirm(what, ctx.ident, assume_yes=assume_yes, details=todo)
        if gpu_status != NOT_FOUND or c is not None:
            eksctl_path()  # a clear error before anything starts when eksctl is missing
    done: list[str] = []
    try:
        if _delete_gpu_nodegroup(ctx, res, done, gpu_status) and not nodegroup_only and c is not None:
            _delete_cluster(ctx, res, done, c)
    except common.WaitTimeout as e:
        res.causes += failure_causes(ctx.sess, ctx.region, a.cluster_name, e.nodegroup)
        res.problems.append(f"stuck: {e}. Fix: see the causes; run `down` again later")
    if probes:
        cancelled, _left = cancel_probe_reservations(ctx.ec2)
        if cancelled:
            done.append(f"cancelled probe reservations {', '.join(cancelled)}")
    res.actions = done or ["nothing to delete"]
    res.cluster_status = ctx.cluster_status()
    res.nodegroups = read_nodegroups(ctx) if res.cluster_status != NOT_FOUND else []
    left = leftovers(ctx)
    res.remaining = [x for x in left if a.gpu_nodegroup_name in x] if nodegroup_only else left
    return res


def _deletions(
    settings: Settings, c: dict[str, Any] | None, gpu_status: str, probes: list[str], *, nodegroup_only: bool
) -> list[str]:
    """What ``down`` will delete, as shown before the confirmation."""
    a = settings.aws
    todo = []
    if gpu_status != NOT_FOUND:
        todo.append(f"delete GPU node group '{a.gpu_nodegroup_name}' ({gpu_status})")
    if not nodegroup_only and c is not None:
        todo.append(
            f"delete EKS cluster {a.cluster_name} ({c['status']}) with its node groups, VPC, NAT gateway "
            f"and eksctl stacks"
        )
    if probes:
        todo.append(f"cancel leftover capacity-probe reservations {', '.join(probes)}")
    return todo


def _delete_gpu_nodegroup(ctx: AwsContext, res: AwsClusterResult, done: list[str], gpu_status: str) -> bool:
    """Delete the GPU node group and wait until it is gone; False when it is still there."""
    a = ctx.settings.aws
    if gpu_status not in (NOT_FOUND, "DELETING"):
        r = ctx.eksctl(
            [
                "delete",
                "nodegroup",
                "--cluster",
                a.cluster_name,
                "--name",
                a.gpu_nodegroup_name,
                "--region",
                ctx.region,
                "--drain=false",
                "--wait",
            ],
            "delete-gpu-nodegroup",
            f"deleting node group {a.gpu_nodegroup_name}",
            poll=lambda: ctx.nodegroup_status(a.gpu_nodegroup_name),
        )
        res.logs.append(str(r.log_path))
        if r.returncode != 0:
            res.causes += [f"eksctl: {line}" for line in r.tail[-6:] if line.strip()]
    if gpu_status == NOT_FOUND:
        return True
    st = ctx.nodegroup_status(a.gpu_nodegroup_name)
    if st == "DELETING":
        st = _wait_nodegroup_gone(ctx, a.gpu_nodegroup_name)
    if st != NOT_FOUND:
        res.causes += failure_causes(ctx.sess, ctx.region, a.cluster_name, a.gpu_nodegroup_name)
        res.problems.append(
            f"GPU node group '{a.gpu_nodegroup_name}' is {st}, not deleted. Fix: see the causes "
            f"(often an ENI or security group still in use), then run `down` again"
        )
        return False
    done.append(f"deleted GPU node group '{a.gpu_nodegroup_name}'")
    return True


def _delete_cluster(ctx: AwsContext, res: AwsClusterResult, done: list[str], c: dict[str, Any]) -> None:
    """Delete the cluster with everything eksctl made, and wait until it is gone."""
    name = ctx.settings.aws.cluster_name
    if c["status"] != "DELETING":
        r = ctx.eksctl(
            ["delete", "cluster", "--name", name, "--region", ctx.region, "--wait"],
            "delete-cluster",
            f"deleting cluster {name}",
            poll=ctx.cluster_status,
        )
        res.logs.append(str(r.log_path))
        if r.returncode != 0:
            res.causes += [f"eksctl: {line}" for line in r.tail[-6:] if line.strip()]
    st = ctx.cluster_status()
    if st == "DELETING":
        st = _wait_cluster_gone(ctx)
    if st != NOT_FOUND:
        res.causes += failure_causes(ctx.sess, ctx.region, name)
        res.problems.append(f"cluster {name} is {st}, not deleted. Fix: see the causes; run `down` again")
        return
    done.append(f"deleted EKS cluster {name}")


# --------------------------------------------------------------------------------------------------------------
# Notebook 08: everything, in reverse order
# --------------------------------------------------------------------------------------------------------------


class AwsTeardownResult:
    """Notebook 08 on aws: one row (what, gone, evidence) per step in the order done; ``parts``: each step's
    own result (``kuberay``, ``plugins``, ``cluster``)."""

    def __init__(self, steps: list[tuple[str, bool, str]], *, refused: str = "", parts: dict[str, Any] | None = None):
        self.steps = steps
        self.refused = refused
        self.parts = parts or {}

    @property
    def ok(self) -> bool:
        return not self.refused and bool(self.steps) and all(ok for _, ok, _ in self.steps)

    @property
    def remaining(self) -> list[str]:
        c = self.parts.get("cluster")
        return list(c.remaining) if c is not None else []

    def show(self) -> None:
        if self.refused:
            print(self.refused)
            return
        table(
            [(name, "gone" if ok else "LEFT", ev) for name, ok, ev in self.steps],
            ["what", "state", "evidence"],
            title="teardown (reverse order)",
            max_width=90,
        )
        if self.parts.get("storage") is not None:
            storage.show_kept(self.parts["storage"].kept)
        c = self.parts.get("cluster")
        if c is not None:
            print("left in the account: " + ("nothing" if not c.remaining else ""))
            for r in c.remaining:
                print(f"  - {r}")
            for x in c.causes:
                print(f"cause: {x}")
            for x in c.problems:
                print(f"PROBLEM: {x}")
        print("teardown:", "everything is gone" if self.ok else "NOT complete (see LEFT above); re-run to retry")


@dataclass
class TeardownRows:
    """The names of notebook 08's rows, from the settings."""

    raycluster: str
    operator: str
    plugins: str
    nodegroup: str
    cluster: str

    @classmethod
    def of(cls, settings: Settings) -> TeardownRows:
        a, k = settings.aws, settings.kubernetes
        return cls(
            raycluster=f"RayCluster {k.namespace}/{k.ray_cluster_name} and its pods",
            operator=f"KubeRay operator ({OPERATOR_NAMESPACE}), its CRDs, namespace {k.namespace}",
            plugins="device plugins (NVIDIA, EFA DaemonSets in kube-system)",
            nodegroup=f"GPU node group '{a.gpu_nodegroup_name}'",
            cluster=f"EKS cluster {a.cluster_name} (node groups, VPC, NAT gateway, eksctl stacks)",
        )


def teardown(settings: Settings, *, assume_yes: bool = False, nodegroup_only: bool = False) -> AwsTeardownResult:
    """RayCluster -> KubeRay operator -> device plugins -> GPU node group -> EKS cluster, each checked by
    listing. The Kubernetes objects are deleted only through the kubeconfig context of *this* EKS
    cluster; without one (or with the API unreachable) they are left to go with the cluster.
    ``nodegroup_only``: only the GPU node group. Never prompts: refuses without ``assume_yes``."""
    if not assume_yes:
        return AwsTeardownResult([], refused=_refusal(settings, nodegroup_only))
    rows = TeardownRows.of(settings)
    ctx = AwsContext(settings)
    parts: dict[str, Any] = {}
    k8s_rows = [] if nodegroup_only else _kubernetes_teardown(settings, ctx.cluster(), rows, parts)
    if not nodegroup_only:  # the pods' role and association, the tutorial's bucket (before the cluster)
        parts["storage"] = storage.teardown(settings, ctx.sess, ctx.ident, ctx.cluster())
    res = delete(settings, assume_yes=True, nodegroup_only=nodegroup_only, context=ctx)
    parts["cluster"] = res
    steps = _summary(settings, res, rows, k8s_rows, nodegroup_only=nodegroup_only)
    steps[len(k8s_rows) : len(k8s_rows)] = parts["storage"].rows if "storage" in parts else []
    return AwsTeardownResult(steps, parts=parts)


def _refusal(settings: Settings, nodegroup_only: bool) -> str:
    a, k = settings.aws, settings.kubernetes
    if nodegroup_only:
        what = f"GPU node group '{a.gpu_nodegroup_name}' of EKS cluster {a.cluster_name}"
    else:
        what = (
            f"RayCluster {k.namespace}/{k.ray_cluster_name}, the KubeRay operator, the device plugins, GPU "
            f"node group '{a.gpu_nodegroup_name}' and EKS cluster {a.cluster_name}"
        )
    return (
        f"refused: teardown deletes the {what} in {a.region}; nothing was deleted. Fix: pass assume_yes=True "
        f"(notebook parameter assume_yes, CLI --yes) after checking the account and region"
    )


def _kubernetes_teardown(
    settings: Settings, c: dict[str, Any] | None, rows: TeardownRows, parts: dict[str, Any]
) -> list[tuple[str, bool, str]]:
    """The RayCluster, the operator and the device plugins, through this cluster's kubeconfig context only."""
    k8s_names = (rows.raycluster, rows.operator, rows.plugins)
    if c is None:
        return [
            (r, True, f"no EKS cluster {settings.aws.cluster_name}: nothing in Kubernetes to delete") for r in k8s_names
        ]
    context, where = cluster_context(settings)
    if context is None:
        return [(r, False, f"not deleted through the API: {where}") for r in k8s_names]
    print(f"Kubernetes: {where}")
    kr = kuberay.teardown(settings, assume_yes=True)
    parts["kuberay"] = kr
    rc = [(o, st) for o, st in kr.deleted if o.startswith(("RayCluster", "pods"))]
    op = [(o, st) for o, st in kr.deleted if not o.startswith(("RayCluster", "pods"))]
    out = []
    for row, listed in ((rows.raycluster, rc), (rows.operator, op)):
        gone = bool(listed) and all(st == "absent" for _, st in listed)
        out.append((row, gone, "; ".join(f"{o}: {st}" for o, st in listed) or kr.message))
    pl = plugins.teardown(settings, assume_yes=True)
    parts["plugins"] = pl
    out.append((rows.plugins, pl.ok, "; ".join(f"{o}: {st}" for o, st in pl.deleted) or pl.message))
    return out


def _summary(
    settings: Settings,
    res: AwsClusterResult,
    rows: TeardownRows,
    k8s_rows: list[tuple[str, bool, str]],
    *,
    nodegroup_only: bool,
) -> list[tuple[str, bool, str]]:
    """Notebook 08's rows: the Kubernetes ones, the node group, the cluster (unless ``nodegroup_only``)."""
    name = settings.aws.gpu_nodegroup_name
    cluster_gone = res.cluster_status == NOT_FOUND
    # what the API could not delete went with the cluster when the cluster is gone (verified by EKS)
    steps = [
        (r, ok or cluster_gone, ev if ok or not cluster_gone else f"{ev}; gone with the EKS cluster")
        for r, ok, ev in k8s_rows
    ]
    ng_left = [x for x in res.remaining if f"node group {name} " in x or f"nodegroup-{name}" in x]
    ng_done = any(name in x and x.startswith("deleted") for x in res.actions)
    ng_evidence = "; ".join(ng_left) or ("deleted, then checked: absent" if ng_done else "absent (nothing to delete)")
    steps.append((rows.nodegroup, not ng_left and not any(name in p for p in res.problems), ng_evidence))
    if nodegroup_only:
        return steps
    others = [x for x in res.remaining if x not in ng_left]
    cl_done = any(x.startswith("deleted EKS cluster") for x in res.actions)
    evidence = "; ".join(others[:6]) + (f" ... ({len(others)} in all)" if len(others) > 6 else "")
    if not evidence:
        evidence = (
            "; ".join(res.problems)
            if res.problems
            else ("deleted, then listed: nothing left" if cl_done else "absent (nothing to delete)")
        )
    steps.append((rows.cluster, not others and cluster_gone and not res.problems, evidence))
    return steps
