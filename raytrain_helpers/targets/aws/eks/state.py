"""Step 02 on aws: what the EKS cluster is now - the step's result, the run's AWS context, the node groups as read,
the causes of a failure, what is left in the account, and the waits on EKS states."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ....clients import aws as aws_client
from ....clients.eksctl import CommandResult, run_eksctl
from ....core.config import Settings
from ....core.paths import runs_dir
from ....core.tables import table
from ....plan.eksctl import IN_PROGRESS, NOT_FOUND
from .. import common
from ..placement.capacity import probe_reservations

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
    #: up: each AZ the GPU node group was tried in, in order, and what happened there
    gpu_az_tries: list[tuple[str, str]] = field(default_factory=list)
    reservation_type: str = ""  # EC2's ReservationType of aws.capacity_reservation_id ("" without one)
    configs: dict[str, str] = field(default_factory=dict)  # name -> rendered eksctl config
    config_files: dict[str, str] = field(default_factory=dict)
    actions: list[str] = field(default_factory=list)  # planned (plan) or done (up/down)
    remaining: list[str] = field(default_factory=list)  # down: what is still there
    kept: list[str] = field(default_factory=list)  # down: what was left on purpose (not the tutorial's), and why
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
        if self.gpu_az_tries:
            table(self.gpu_az_tries, ["GPU AZ tried", "what happened"], title="GPU node group, AZ by AZ", max_width=100)
        for name, text in self.configs.items():
            where = f" ({self.config_files[name]})" if name in self.config_files else ""
            print(f"--- {name}{where} ---")
            print(text.rstrip())
        if self.actions:
            print("actions " + ("planned (nothing was created):" if self.action == "plan" else "taken:"))
            for a in self.actions:
                print(f"  - {a}")
        for k in self.kept:
            print(f"kept: {k}")
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
# Waits
# --------------------------------------------------------------------------------------------------------------


def wait_cluster(ctx: AwsContext) -> str:
    return common.wait_until(
        ctx.cluster_status,
        done=lambda st: st not in ("CREATING", "UPDATING", "PENDING"),
        desc=f"cluster {ctx.settings.aws.cluster_name}",
        timeout=CLUSTER_TIMEOUT_S,
        every=POLL_S,
    )


def wait_nodegroup(ctx: AwsContext, name: str) -> str:
    return common.wait_until(
        lambda: ctx.nodegroup_status(name),
        done=lambda st: st not in IN_PROGRESS,
        desc=f"node group {name}",
        timeout=NODEGROUP_TIMEOUT_S,
        every=POLL_S,
        nodegroup=name,
    )


def wait_nodegroup_gone(ctx: AwsContext, name: str) -> str:
    return common.wait_until(
        lambda: ctx.nodegroup_status(name),
        done=lambda st: st != "DELETING",
        desc=f"deleting node group {name}",
        timeout=DELETE_TIMEOUT_S,
        every=POLL_S,
        nodegroup=name,
    )


def wait_cluster_gone(ctx: AwsContext) -> str:
    return common.wait_until(
        ctx.cluster_status,
        done=lambda st: st != "DELETING",
        desc=f"deleting cluster {ctx.settings.aws.cluster_name}",
        timeout=DELETE_TIMEOUT_S,
        every=POLL_S,
    )
