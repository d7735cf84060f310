"""Step 02: the cluster. ``local`` starts real Ray raylets here; ``aws`` creates EKS (eksctl).

On ``aws`` every action is decided from the resources' real state, read with boto3
(``eks:DescribeCluster`` / ``eks:DescribeNodegroup``: NOT_FOUND, CREATING, ACTIVE, DELETING, FAILED...),
so re-running any action is safe:

* ``plan``   renders the eksctl configs from env.yaml and lists what ``up`` would do; creates nothing.
* ``up``     creates what is missing - the cluster (VPC with private subnets in the AZs offering the GPU
             type, one NAT gateway, OIDC, core add-ons, the ``role=system`` node group), then the EFA GPU
             node group in exactly one AZ (the placement from step 01, passed as explicit subnet ids) -
             after one confirmation; waits for what is in progress; reports failures with their causes.
* ``status`` reads and shows the state; never changes anything.
* ``down``   deletes the GPU node group, then the cluster, after one confirmation, and lists what is left.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .config import ConfigError, Settings

ACTIONS = ("plan", "up", "status", "down")


def step(settings: Settings, action: str = "up", *, assume_yes: bool = False):
    """Notebook 02's entry point: action is up | status | down | plan."""
    if settings.target == "local":
        from .targets import local
        if action in ("up", "plan"):
            return local.up(settings, plan=(action == "plan"))
        if action == "status":
            return local.status(settings)
        if action == "down":
            return local.down(settings)
        raise ValueError(f"unknown action {action!r}: use up, status, down or plan")
    return aws_step(settings, action, assume_yes=assume_yes)


class TeardownResult:
    def __init__(self, steps: list[tuple[str, bool, str]]):
        self.steps = steps

    @property
    def ok(self) -> bool:
        return all(ok for _, ok, _ in self.steps)

    def show(self) -> None:
        from .report import table
        table([(name, "gone" if ok else "LEFT", ev) for name, ok, ev in self.steps], ["what", "state", "evidence"],
              title="teardown (reverse order)", max_width=90)


def teardown(settings: Settings, *, assume_yes: bool = False, nodegroup_only: bool = False):
    """Notebook 08's entry point: remove everything in reverse order, verified by listing.

    On aws (never prompts; refuses without ``assume_yes``): the RayCluster, the KubeRay operator, the
    device plugins (through the Kubernetes API, only in the kubeconfig context of this EKS cluster), then
    the GPU node group and the cluster (``nodegroup_only``: only the node group), returning an
    :class:`AwsTeardownResult` (``.parts`` holds each step's own result)."""
    if settings.target == "local":
        from .targets import local
        info = local.down(settings)
        left = local._our_pids(settings)
        return TeardownResult([("local Ray cluster (head + worker raylets)", not info.running and not left,
                                f"{info.message}; {len(left)} process(es) left")])
    return aws_full_teardown(settings, assume_yes=assume_yes, nodegroup_only=nodegroup_only)


class AwsTeardownResult(TeardownResult):
    """Notebook 08 on aws: one row per step in the order done, ``parts`` = each step's own result."""

    def __init__(self, steps: list[tuple[str, bool, str]], *, refused: str = "",
                 parts: dict[str, Any] | None = None):
        super().__init__(steps)
        self.refused = refused
        self.parts = parts or {}

    @property
    def ok(self) -> bool:
        return not self.refused and bool(self.steps) and super().ok

    @property
    def remaining(self) -> list[str]:
        c = self.parts.get("cluster")
        return list(c.remaining) if c is not None else []

    def show(self) -> None:
        if self.refused:
            print(self.refused)
            return
        super().show()
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


def aws_full_teardown(settings: Settings, *, assume_yes: bool = False,
                      nodegroup_only: bool = False) -> AwsTeardownResult:
    """RayCluster -> KubeRay operator -> device plugins -> GPU node group -> EKS cluster, each checked by
    listing. The Kubernetes objects are deleted only through the kubeconfig context of *this* EKS
    cluster; without one (or with the API unreachable) they are left to go with the cluster."""
    from . import kuberay, plugins
    from .k8s import cluster_context
    a, k = settings.aws, settings.kubernetes
    rc_row = f"RayCluster {k.namespace}/{k.ray_cluster_name} and its pods"
    op_row = f"KubeRay operator ({kuberay.OPERATOR_NAMESPACE}), its CRDs, namespace {k.namespace}"
    pl_row = "device plugins (NVIDIA, EFA DaemonSets in kube-system)"
    ng_row = f"GPU node group '{a.gpu_nodegroup_name}'"
    cl_row = f"EKS cluster {a.cluster_name} (node groups, VPC, NAT gateway, eksctl stacks)"
    if not assume_yes:
        what = (f"GPU node group '{a.gpu_nodegroup_name}' of EKS cluster {a.cluster_name}" if nodegroup_only else
                f"RayCluster {k.namespace}/{k.ray_cluster_name}, the KubeRay operator, the device plugins, GPU "
                f"node group '{a.gpu_nodegroup_name}' and EKS cluster {a.cluster_name}")
        return AwsTeardownResult([], refused=(
            f"refused: teardown deletes the {what} in {a.region}; nothing was deleted. Fix: pass assume_yes=True "
            f"(notebook parameter assume_yes, CLI --yes) after checking the account and region"))
    ctx = _Ctx(settings)
    parts: dict[str, Any] = {}
    steps: list[tuple[str, bool, str]] = []
    k8s_rows: list[tuple[str, bool, str]] = []
    c = ctx.cluster()
    if nodegroup_only:
        pass
    elif c is None:
        k8s_rows = [(r, True, f"no EKS cluster {a.cluster_name}: nothing in Kubernetes to delete")
                    for r in (rc_row, op_row, pl_row)]
    else:
        context, where = cluster_context(settings)
        if context is None:
            k8s_rows = [(r, False, f"not deleted through the API: {where}") for r in (rc_row, op_row, pl_row)]
        else:
            print(f"Kubernetes: {where}")
            kr = kuberay.teardown(settings, assume_yes=True)
            parts["kuberay"] = kr
            rc = [(o, st) for o, st in kr.deleted if o.startswith(("RayCluster", "pods"))]
            op = [(o, st) for o, st in kr.deleted if not o.startswith(("RayCluster", "pods"))]
            for row, listed in ((rc_row, rc), (op_row, op)):
                k8s_rows.append((row, bool(listed) and all(st == "absent" for _, st in listed),
                                 "; ".join(f"{o}: {st}" for o, st in listed) or kr.message))
            pl = plugins.teardown(settings, assume_yes=True)
            parts["plugins"] = pl
            k8s_rows.append((pl_row, pl.ok, "; ".join(f"{o}: {st}" for o, st in pl.deleted) or pl.message))
    res = aws_teardown(settings, assume_yes=True, nodegroup_only=nodegroup_only, _ctx=ctx)
    parts["cluster"] = res
    cluster_gone = res.cluster_status == NOT_FOUND
    # what the API could not delete went with the cluster when the cluster is gone (verified by EKS)
    steps += [(r, ok or cluster_gone, ev if ok or not cluster_gone else f"{ev}; gone with the EKS cluster")
              for r, ok, ev in k8s_rows]
    ng_left = [x for x in res.remaining if f"node group {a.gpu_nodegroup_name} " in x
               or f"nodegroup-{a.gpu_nodegroup_name}" in x]
    ng_done = any(a.gpu_nodegroup_name in x and x.startswith("deleted") for x in res.actions)
    steps.append((ng_row, not ng_left and not any(a.gpu_nodegroup_name in p for p in res.problems),
                  "; ".join(ng_left) or ("deleted, then checked: absent" if ng_done else "absent (nothing to delete)")))
    if not nodegroup_only:
        others = [x for x in res.remaining if x not in ng_left]
        cl_done = any(x.startswith("deleted EKS cluster") for x in res.actions)
        steps.append((cl_row, not others and cluster_gone and not res.problems,
                      "; ".join(others[:6]) + (f" ... ({len(others)} in all)" if len(others) > 6 else "")
                      or ("; ".join(res.problems) if res.problems else
                          "deleted, then listed: nothing left" if cl_done else "absent (nothing to delete)")))
    return AwsTeardownResult(steps, parts=parts)


# ============================================================================================
# The aws target
# ============================================================================================

SYSTEM_NODEGROUP = "system"
#: Seconds between state reads while waiting (tests shorten it).
POLL_S = 20.0
CLUSTER_TIMEOUT_S = 50 * 60
NODEGROUP_TIMEOUT_S = 45 * 60
DELETE_TIMEOUT_S = 45 * 60
NOT_FOUND = "NOT_FOUND"
FAILED_NG = ("CREATE_FAILED", "DELETE_FAILED", "DEGRADED")
CLUSTER_CFG, GPU_CFG = "eksctl cluster config", "eksctl GPU node group config"


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
    configs: dict[str, str] = field(default_factory=dict)         # name -> rendered eksctl config
    config_files: dict[str, str] = field(default_factory=dict)
    actions: list[str] = field(default_factory=list)              # planned (plan) or done (up/down)
    remaining: list[str] = field(default_factory=list)            # down: what is still there
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
            return self.cluster_status == "ACTIVE" and bool(self.nodegroups) and all(
                n["status"] == "ACTIVE" for n in self.nodegroups)
        return True

    def as_dict(self) -> dict[str, Any]:
        from dataclasses import asdict
        d = asdict(self)
        d["ok"] = self.ok
        return d

    def show(self) -> None:
        from .targets.aws import table
        print(f"cluster step '{self.action}' - AWS account {self.account}, region {self.region}")
        print(f"EKS cluster {self.cluster_name}: {self.cluster_status}")
        if self.nodegroups:
            table([(n["name"], n["status"], n.get("instance_type", "-"), n.get("size", "-"),
                    ",".join(n.get("azs", [])) or "-", n.get("labels", "-")) for n in self.nodegroups],
                  ["node group", "status", "type", "min/desired/max", "AZ", "labels"])
        if self.gpu_az:
            print(f"GPU AZ: {self.gpu_az} ({self.gpu_az_source})"
                  + (f", subnets {', '.join(self.gpu_subnets)}" if self.gpu_subnets else ""))
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
        for c in self.causes:
            print(f"cause: {c}")
        for n in self.notes:
            print(f"note: {n}")
        for lg in self.logs:
            print(f"log: {lg}")
        for p in self.problems:
            print(f"PROBLEM: {p}")
        print("cluster:", "OK" if self.ok else "NOT OK")


class _Ctx:
    """Clients and identity for one step run."""

    def __init__(self, settings: Settings) -> None:
        from .targets import aws as A
        self.A = A
        self.settings = settings
        self.region = settings.aws.region
        note = A.region_note(settings)
        if note:
            print(note)
        self.sess = A.session(self.region)
        self.ident = A.identity(self.sess, self.region)
        print(self.ident.line())
        self.eks = A.client(self.sess, "eks", self.region)
        self.ec2 = A.client(self.sess, "ec2", self.region)
        self.run_dir = A.runs_dir(settings) / settings.run_name

    def client(self, name: str):
        return self.A.client(self.sess, name, self.region)

    def cluster(self) -> dict[str, Any] | None:
        return self.A.describe_cluster(self.eks, self.settings.aws.cluster_name)

    def cluster_status(self) -> str:
        c = self.cluster()
        return c["status"] if c else NOT_FOUND

    def nodegroup(self, name: str) -> dict[str, Any] | None:
        return self.A.describe_nodegroup(self.eks, self.settings.aws.cluster_name, name)

    def nodegroup_status(self, name: str) -> str:
        ng = self.nodegroup(name)
        return ng["status"] if ng else NOT_FOUND

    def log_path(self, op: str) -> Path:
        return self.run_dir / "logs" / f"eksctl-{op}-{time.strftime('%Y%m%d-%H%M%S')}.log"


# --------------------------------------------------------------------------------------------
# Decisions: which AZ, which AZs for the cluster, which subnets, which reservation
# --------------------------------------------------------------------------------------------

def resolve_gpu_az(ctx: _Ctx) -> tuple[str, str]:
    """(gpu AZ name, where it came from): gpu_az in the settings wins, then step 01's placement."""
    s, A = ctx.settings, ctx.A
    placement = A.load_placement(s)
    zones = A.zones(ctx.ec2)
    if s.aws.gpu_az:
        if s.aws.gpu_az not in zones:
            raise ConfigError(f"aws.gpu_az (GPU_AZ) = {s.aws.gpu_az!r} is not an AZ of {ctx.region}. "
                              f"Fix: one of {', '.join(sorted(zones))}, or empty to use step 01's placement")
        if placement and placement.get("az") != s.aws.gpu_az:
            print(f"note: gpu_az {s.aws.gpu_az} from the settings wins over step 01's placement "
                  f"{placement.get('region')}/{placement.get('az')}")
        return s.aws.gpu_az, "gpu_az setting"
    if not placement:
        raise ConfigError(f"no GPU AZ chosen: run step 01 (notebook 01_capacity or `raytrain-tutorial capacity`), "
                          f"which saves {A.placement_path(s)}, or set aws.gpu_az (GPU_AZ)")
    if placement["region"] != ctx.region:
        raise ConfigError(f"step 01 placed the GPU nodes in {placement['region']}/{placement['az']} but the settings' "
                          f"region is {ctx.region}. Fix: set `region: {placement['region']}` (or -p region "
                          f"{placement['region']}), or re-run step 01 for {ctx.region}")
    if placement["instance_type"] != s.aws.gpu_node_type:
        raise ConfigError(f"step 01's placement was decided for {placement['instance_type']}, the settings now ask "
                          f"for {s.aws.gpu_node_type}. Fix: re-run step 01 (capacity)")
    az = placement["az"]
    if placement.get("account") and placement["account"] != ctx.ident.account and placement.get("az_id"):
        # AZ names are per account; AZ ids are not.
        by_id = {v["id"]: k for k, v in zones.items()}
        if placement["az_id"] not in by_id:
            raise ConfigError(f"placement AZ id {placement['az_id']} not found in this account. Fix: re-run step 01")
        az = by_id[placement["az_id"]]
        print(f"note: placement was decided in account {placement['account']}; AZ id {placement['az_id']} is "
              f"{az} in this account")
    if az not in zones:
        raise ConfigError(f"placement AZ {az} is not an AZ of {ctx.region}. Fix: re-run step 01 (capacity)")
    return az, f"step 01 placement ({A.placement_path(s).name})"


def cluster_azs(gpu_az: str, offering: list[str], zones: dict[str, dict[str, Any]], unsupported: frozenset) -> list[str]:
    """The cluster's AZs: the GPU AZ first, then other AZs offering the type; at least two (EKS needs two)."""
    ok = [z for z in sorted(zones) if zones[z].get("id") not in unsupported and zones[z].get("state") == "available"]
    azs = [gpu_az] + [z for z in offering if z != gpu_az and z in ok][:2]
    for z in ok:
        if len(azs) >= 2:
            break
        if z not in azs:
            azs.append(z)
    return azs


def validate_reservation(ctx: _Ctx, az: str) -> dict[str, Any] | None:
    s, A = ctx.settings, ctx.A
    rid = s.aws.capacity_reservation_id
    if not rid:
        return None
    from botocore.exceptions import ClientError
    try:
        crs = ctx.ec2.describe_capacity_reservations(CapacityReservationIds=[rid])["CapacityReservations"]
    except ClientError as e:
        if A.err_code(e).startswith("InvalidCapacityReservationId"):
            raise ConfigError(f"aws.capacity_reservation_id (CAPACITY_RESERVATION_ID) = {rid!r} was not found in "
                              f"{ctx.region} ({A.err_code(e)}); reservations belong to one region and account. "
                              f"Fix: use a reservation of this region, or leave it empty") from None
        raise
    if not crs:
        raise ConfigError(f"capacity reservation {rid} not found in {ctx.region}. Fix: leave it empty or fix the id")
    cr = crs[0]
    problems = []
    if cr.get("State") != "active":
        problems.append(f"its state is {cr.get('State')!r}, not 'active'")
    if cr.get("InstanceType") != s.aws.gpu_node_type:
        problems.append(f"it reserves {cr.get('InstanceType')}, the GPU nodes are {s.aws.gpu_node_type}")
    if cr.get("AvailabilityZone") != az:
        problems.append(f"it is in {cr.get('AvailabilityZone')}, the GPU AZ is {az} (set gpu_az: "
                        f"{cr.get('AvailabilityZone')} to follow the reservation)")
    if int(cr.get("AvailableInstanceCount", 0)) < s.aws.gpu_node_count:
        problems.append(f"only {cr.get('AvailableInstanceCount')} of its instances are available, "
                        f"{s.aws.gpu_node_count} are needed")
    if cr.get("InstancePlatform", "Linux/UNIX") != "Linux/UNIX":
        problems.append(f"its platform is {cr.get('InstancePlatform')}, the EKS nodes run Linux/UNIX")
    if problems:
        raise ConfigError(f"aws.capacity_reservation_id (CAPACITY_RESERVATION_ID) = {rid}: " + "; ".join(problems)
                          + ". Fix: correct the reservation or the settings, or leave it empty")
    return cr


def render_cluster_config(settings: Settings, *, azs: list[str], gpu_az: str | None) -> str:
    from .render import render_template
    return render_template("eksctl-cluster.yaml.j2", settings, azs=azs, gpu_az=gpu_az,
                           system_nodegroup=SYSTEM_NODEGROUP)


def render_gpu_nodegroup_config(settings: Settings, *, gpu_az: str, subnet_ids: list[str]) -> str:
    from .render import render_template
    return render_template("eksctl-gpu-nodegroup.yaml.j2", settings, gpu_az=gpu_az, subnet_ids=subnet_ids,
                           capacity_reservation_id=settings.aws.capacity_reservation_id)


# --------------------------------------------------------------------------------------------
# Reading state and failure causes
# --------------------------------------------------------------------------------------------

def _ng_summary(ctx: _Ctx, ng: dict[str, Any], subnet_az: dict[str, str]) -> dict[str, Any]:
    sc = ng.get("scalingConfig") or {}
    return dict(name=ng["nodegroupName"], status=ng["status"],
                instance_type=",".join(ng.get("instanceTypes") or []),
                size=f"{sc.get('minSize', '?')}/{sc.get('desiredSize', '?')}/{sc.get('maxSize', '?')}",
                azs=sorted({subnet_az.get(s, "?") for s in ng.get("subnets") or []}),
                subnets=list(ng.get("subnets") or []),
                labels=",".join(f"{k}={v}" for k, v in sorted((ng.get("labels") or {}).items())),
                scaling=sc, instance_types=list(ng.get("instanceTypes") or []),
                health=[f"{i.get('code')}: {i.get('message')}" for i in (ng.get("health") or {}).get("issues", [])])


def _read_nodegroups(ctx: _Ctx) -> list[dict[str, Any]]:
    name = ctx.settings.aws.cluster_name
    names = ctx.eks.list_nodegroups(clusterName=name).get("nodegroups", [])
    ngs = [ng for ng in (ctx.nodegroup(n) for n in names) if ng]
    subnet_ids = sorted({s for ng in ngs for s in ng.get("subnets") or []})
    subnet_az = {}
    if subnet_ids:
        subnet_az = {s["SubnetId"]: s["AvailabilityZone"]
                     for s in ctx.ec2.describe_subnets(SubnetIds=subnet_ids)["Subnets"]}
    return [_ng_summary(ctx, ng, subnet_az) for ng in ngs]


def failure_causes(sess, region: str, cluster: str, nodegroup: str | None = None, *, limit: int = 5) -> list[str]:
    """Why a node group or cluster is failed or stuck: EKS health issues, Auto Scaling activities,
    CloudFormation stack events."""
    from botocore.exceptions import BotoCoreError, ClientError

    from .targets import aws as A
    out: list[str] = []
    asgs: list[str] = []
    eks = A.client(sess, "eks", region)
    if nodegroup:
        ng = A.describe_nodegroup(eks, cluster, nodegroup)
        if ng:
            for i in (ng.get("health") or {}).get("issues", []):
                ids = ", ".join(i.get("resourceIds") or [])
                out.append(f"EKS health {i.get('code')}: {i.get('message')}" + (f" [{ids}]" if ids else ""))
            asgs = [g["name"] for g in (ng.get("resources") or {}).get("autoScalingGroups", []) if g.get("name")]
    try:
        asc = A.client(sess, "autoscaling", region)
        for name in asgs:
            acts = asc.describe_scaling_activities(AutoScalingGroupName=name, MaxRecords=20).get("Activities", [])
            bad = [a for a in acts if a.get("StatusCode") in ("Failed", "Cancelled")][:limit]
            for a in bad:
                out.append(f"Auto Scaling {name} {a.get('StatusCode')}: {a.get('StatusMessage') or a.get('Description')}")
    except (ClientError, BotoCoreError) as e:
        out.append(f"(Auto Scaling activities unreadable: {A.err_code(e)})")
    stack = f"eksctl-{cluster}-nodegroup-{nodegroup}" if nodegroup else f"eksctl-{cluster}-cluster"
    try:
        cfn = A.client(sess, "cloudformation", region)
        events = cfn.describe_stack_events(StackName=stack).get("StackEvents", [])
        bad = [e for e in events if str(e.get("ResourceStatus", "")).endswith("FAILED")][:limit]
        for e in bad:
            out.append(f"CloudFormation {stack} {e.get('LogicalResourceId')} {e.get('ResourceStatus')}: "
                       f"{e.get('ResourceStatusReason', '')}")
    except ClientError as e:
        if "does not exist" not in A.err_msg(e):
            out.append(f"(CloudFormation events of {stack} unreadable: {A.err_code(e)})")
    except BotoCoreError as e:  # pragma: no cover
        out.append(f"(CloudFormation unreadable: {e})")
    return out


def leftovers(ctx: _Ctx) -> list[str]:
    """Everything of this cluster still in the account: cluster, node groups, stacks, instances, VPCs, NATs,
    this tutorial's probe reservations."""
    s, A = ctx.settings, ctx.A
    name = s.aws.cluster_name
    out: list[str] = []
    c = ctx.cluster()
    if c:
        out.append(f"EKS cluster {name} ({c['status']})")
        for ng in ctx.eks.list_nodegroups(clusterName=name).get("nodegroups", []):
            out.append(f"node group {ng} ({ctx.nodegroup_status(ng)})")
    cfn = ctx.client("cloudformation")
    live = [st for st in _paged(cfn.list_stacks, "StackSummaries")
            if st["StackName"].startswith(f"eksctl-{name}-") and st["StackStatus"] != "DELETE_COMPLETE"]
    out += [f"CloudFormation stack {st['StackName']} ({st['StackStatus']})" for st in live]
    for tag in ("alpha.eksctl.io/cluster-name", "eks:cluster-name"):
        for r in _paged(ctx.ec2.describe_instances, "Reservations",
                        Filters=[{"Name": f"tag:{tag}", "Values": [name]},
                                 {"Name": "instance-state-name", "Values": ["pending", "running", "stopping", "stopped"]}]):
            for i in r["Instances"]:
                entry = f"EC2 instance {i['InstanceId']} {i['InstanceType']} ({i['State']['Name']})"
                if entry not in out:
                    out.append(entry)
    vpcs = ctx.ec2.describe_vpcs(Filters=[{"Name": "tag:alpha.eksctl.io/cluster-name", "Values": [name]}])["Vpcs"]
    for v in vpcs:
        out.append(f"VPC {v['VpcId']}")
        for nat in ctx.ec2.describe_nat_gateways(Filters=[{"Name": "vpc-id", "Values": [v["VpcId"]]}])["NatGateways"]:
            if nat.get("State") in ("pending", "available"):
                out.append(f"NAT gateway {nat['NatGatewayId']} ({nat['State']})")
    try:
        from .capacity_aws import _tagged_reservations
        for cr in _tagged_reservations(ctx.ec2):
            out.append(f"probe capacity reservation {cr['CapacityReservationId']} ({cr['State']})")
    except Exception as e:  # noqa: BLE001 - listing reservations may be denied
        out.append(f"(capacity reservations unreadable: {A.err_code(e)})")
    return out


def _paged(fn, key: str, **kwargs) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    while True:
        resp = fn(**kwargs)
        out.extend(resp.get(key, []))
        token = resp.get("NextToken")
        if not token:
            return out
        kwargs["NextToken"] = token


# --------------------------------------------------------------------------------------------
# The actions
# --------------------------------------------------------------------------------------------

def aws_step(settings: Settings, action: str, *, assume_yes: bool = False) -> AwsClusterResult:
    if action not in ACTIONS:
        raise ValueError(f"unknown action {action!r}: use {', '.join(ACTIONS)}")
    ctx = _Ctx(settings)
    res = AwsClusterResult(action=action, account=ctx.ident.account, region=ctx.region,
                           cluster_name=settings.aws.cluster_name)
    if action in ("plan", "up"):
        _plan_or_up(ctx, res, execute=(action == "up"), assume_yes=assume_yes)
    elif action == "status":
        _status(ctx, res)
    else:
        aws_teardown(settings, assume_yes=assume_yes, _ctx=ctx, _res=res)
    return res


def _status(ctx: _Ctx, res: AwsClusterResult) -> None:
    c = ctx.cluster()
    res.cluster_status = c["status"] if c else NOT_FOUND
    if c is None:
        res.notes.append("no cluster: run `up` (raytrain-tutorial cluster up)")
        return
    res.nodegroups = _read_nodegroups(ctx)
    if c["status"] == "FAILED":
        res.causes += failure_causes(ctx.sess, ctx.region, ctx.settings.aws.cluster_name)
    for ng in res.nodegroups:
        if ng["status"] in FAILED_NG:
            res.causes += failure_causes(ctx.sess, ctx.region, ctx.settings.aws.cluster_name, ng["name"])
    gpu = res.nodegroup(ctx.settings.aws.gpu_nodegroup_name)
    if gpu is None:
        res.notes.append(f"GPU node group {ctx.settings.aws.gpu_nodegroup_name} does not exist yet: run `up`")
    else:
        res.gpu_az = ",".join(gpu["azs"])
        res.gpu_subnets = gpu["subnets"]
        res.gpu_az_source = "the node group's subnets"


def _plan_or_up(ctx: _Ctx, res: AwsClusterResult, *, execute: bool, assume_yes: bool) -> None:
    s, A = ctx.settings, ctx.A
    a = s.aws
    c = ctx.cluster()
    res.cluster_status = c["status"] if c else NOT_FOUND
    offering = A.offering_azs(ctx.ec2, a.gpu_node_type)
    if not offering:
        raise ConfigError(f"{a.gpu_node_type} is not offered in any AZ of {ctx.region}. Fix: run step 01 "
                          f"(capacity) to find a region, or choose another gpu_node_type")
    try:
        gpu_az, source = resolve_gpu_az(ctx)
    except ConfigError as e:
        if execute:
            raise
        gpu_az, source = None, None
        res.problems.append(str(e))
    res.gpu_az, res.gpu_az_source = gpu_az, source
    if gpu_az and gpu_az not in offering:
        raise ConfigError(f"GPU AZ {gpu_az} ({source}) does not offer {a.gpu_node_type}; AZs that do: "
                          f"{', '.join(offering)}. Fix: set gpu_az to one of them or re-run step 01")
    zones = A.zones(ctx.ec2)
    if gpu_az and zones.get(gpu_az, {}).get("id") in A.EKS_UNSUPPORTED_AZ_IDS:
        raise ConfigError(f"GPU AZ {gpu_az} ({zones[gpu_az]['id']}) cannot host EKS control-plane subnets. Fix: choose "
                          f"another AZ (step 01 never recommends it; check gpu_az)")
    if gpu_az:
        validate_reservation(ctx, gpu_az)

    # ---- what exists, what would be done --------------------------------------------------
    private: dict[str, list[str]] = {}
    if c is not None:
        private = A.private_subnets_by_az(ctx.ec2, (c.get("resourcesVpcConfig") or {}).get("subnetIds") or [])
        res.nodegroups = _read_nodegroups(ctx)
        if c.get("version") and str(c["version"]) != a.k8s_version:
            res.notes.append(f"the cluster runs Kubernetes {c['version']}, the settings say {a.k8s_version}; "
                             f"upgrading is not part of this tutorial (eksctl upgrade cluster)")
        if gpu_az and not private.get(gpu_az) and res.nodegroup(a.gpu_nodegroup_name) is None:
            usable = [z for z in offering if private.get(z)]
            raise ConfigError(f"cluster {a.cluster_name} has no private subnet in the GPU AZ {gpu_az}. Fix: set "
                              f"gpu_az to one of {', '.join(usable) or '(none: the cluster has no private subnet in an AZ offering the type)'}"
                              f", or delete the cluster (`cluster down`) and re-run `up` to create it with {gpu_az}")
    azs = cluster_azs(gpu_az or offering[0], offering, zones, A.EKS_UNSUPPORTED_AZ_IDS)
    cluster_text = render_cluster_config(s, azs=azs, gpu_az=gpu_az)
    res.configs[CLUSTER_CFG] = cluster_text
    cluster_file = ctx.run_dir / "eksctl" / "cluster.yaml"
    gpu_file = ctx.run_dir / "eksctl" / "gpu-nodegroup.yaml"

    todo: list[tuple[str, str]] = []            # (kind, description)
    status = res.cluster_status
    if status == NOT_FOUND:
        todo.append(("create-cluster", f"create EKS cluster {a.cluster_name} {a.k8s_version} in {ctx.region} (AZs "
                     f"{', '.join(azs)}; VPC, private subnets, one NAT gateway, OIDC, add-ons) with node group "
                     f"'{SYSTEM_NODEGROUP}' ({a.system_node_count} x {a.system_node_type}) - about 15-20 min: "
                     f"eksctl create cluster -f {cluster_file}"))
    elif status in ("CREATING", "UPDATING"):
        todo.append(("wait-cluster", f"wait for cluster {a.cluster_name} ({status}) to become ACTIVE"))
    elif status == "DELETING":
        res.problems.append(f"cluster {a.cluster_name} is being deleted. Fix: wait for it to go (`cluster down` "
                            f"waits and verifies), then run `up` again")
    elif status == "FAILED":
        res.causes += failure_causes(ctx.sess, ctx.region, a.cluster_name)
        res.problems.append(f"cluster {a.cluster_name} is FAILED. Fix: `cluster down` (deletes it), then `up`")
    if status not in ("DELETING", "FAILED"):
        sys_ng = res.nodegroup(SYSTEM_NODEGROUP)
        if status != NOT_FOUND and sys_ng is None:
            todo.append(("create-system-ng", f"create node group '{SYSTEM_NODEGROUP}' ({a.system_node_count} x "
                         f"{a.system_node_type}): eksctl create nodegroup -f {cluster_file} --include "
                         f"{SYSTEM_NODEGROUP}"))
        elif sys_ng is not None and sys_ng["status"] in FAILED_NG:
            res.causes += failure_causes(ctx.sess, ctx.region, a.cluster_name, SYSTEM_NODEGROUP)
            res.problems.append(f"node group '{SYSTEM_NODEGROUP}' is {sys_ng['status']}. Fix: `cluster down`, then `up`")
        gpu_ng = res.nodegroup(a.gpu_nodegroup_name)
        if gpu_ng is None:
            if gpu_az:
                subnets = private.get(gpu_az, [])
                res.gpu_subnets = subnets
                shown = subnets or [f"<private subnet of the new cluster in {gpu_az}>"]
                res.configs[GPU_CFG] = render_gpu_nodegroup_config(
                    s, gpu_az=gpu_az, subnet_ids=shown)
                todo.append(("create-gpu-ng", f"create GPU node group '{a.gpu_nodegroup_name}' ({a.gpu_node_count} x "
                             f"{a.gpu_node_type}, EFA) in {gpu_az} - about 5-10 min: eksctl create nodegroup -f "
                             f"{gpu_file} --install-nvidia-plugin=false"
                             + (f", in capacity reservation {a.capacity_reservation_id}"
                                if a.capacity_reservation_id else "")))
        else:
            res.gpu_subnets = gpu_ng["subnets"]
            if gpu_ng["status"] in ("CREATING", "UPDATING"):
                todo.append(("wait-gpu-ng", f"wait for GPU node group '{a.gpu_nodegroup_name}' ({gpu_ng['status']})"))
            elif gpu_ng["status"] == "DELETING":
                todo.append(("wait-gpu-ng-gone", f"wait for GPU node group '{a.gpu_nodegroup_name}' to finish deleting"))
                if gpu_az:
                    res.configs[GPU_CFG] = render_gpu_nodegroup_config(
                        s, gpu_az=gpu_az, subnet_ids=private.get(gpu_az, []))
                    todo.append(("create-gpu-ng", f"then create it again in {gpu_az}"))
            elif gpu_ng["status"] in FAILED_NG:
                res.causes += failure_causes(ctx.sess, ctx.region, a.cluster_name, a.gpu_nodegroup_name)
                res.problems.append(
                    f"GPU node group '{a.gpu_nodegroup_name}' is {gpu_ng['status']}"
                    + (f" ({'; '.join(gpu_ng['health'])})" if gpu_ng["health"] else "")
                    + ". Fix: see the causes; then `raytrain-tutorial cluster down --nodegroup-only --yes` and `up` "
                      "(or pick another AZ in step 01 when capacity is short)")
            else:
                _check_drift(res, s, gpu_ng, gpu_az)
    if c is not None and status == "ACTIVE" and not todo:
        todo.append(("kubeconfig", f"update the kubeconfig for {a.cluster_name}: eksctl utils write-kubeconfig"))
    res.actions = [d for _, d in todo]
    if not execute or res.problems:
        if not execute:
            res.notes.append("plan: nothing was created; run `up` to do the actions above")
        return

    # ---- up: one confirmation for everything billable, then act and re-read ----------------
    billable = [d for k, d in todo if k.startswith("create")]
    if billable:
        from . import prices as P
        est = P.estimate(s, ctx.region)
        A.confirm(f"create EKS resources for {a.cluster_name}", ctx.ident, assume_yes=assume_yes,
                  details=billable + [f"billed while they exist: about ${est.total_per_hour:.2f}/h for the whole "
                                      f"stack (prices as of {est.as_of}); remove with `cluster down`"])
    done: list[str] = []
    A.eksctl_path()  # a clear error before anything starts when eksctl is missing
    try:
        _execute(ctx, res, todo, done, cluster_text=cluster_text, cluster_file=cluster_file, gpu_file=gpu_file,
                 gpu_az=gpu_az)
    except A.WaitTimeout as e:
        _fail(ctx, res, f"stuck: {e}", None, nodegroup=getattr(e, "nodegroup", None))
    res.actions = done
    # the real state, whatever happened
    res.cluster_status = ctx.cluster_status()
    res.nodegroups = _read_nodegroups(ctx) if res.cluster_status != NOT_FOUND else []
    gpu = res.nodegroup(a.gpu_nodegroup_name)
    if gpu and not res.problems:
        _check_drift(res, s, gpu, gpu_az)


def _execute(ctx: _Ctx, res: AwsClusterResult, todo: list[tuple[str, str]], done: list[str], *, cluster_text: str,
             cluster_file: Path, gpu_file: Path, gpu_az: str | None) -> None:
    s, A = ctx.settings, ctx.A
    a = s.aws
    for kind, desc in todo:
        if kind == "create-cluster":
            _write(cluster_file, cluster_text, res, CLUSTER_CFG)
            r = A.run_eksctl(["create", "cluster", "-f", str(cluster_file)], log_path=ctx.log_path("create-cluster"),
                             sess=ctx.sess, desc=f"cluster {a.cluster_name}", poll=ctx.cluster_status, poll_every=POLL_S)
            res.logs.append(str(r.log_path))
            status = ctx.cluster_status()
            if status in ("CREATING", "UPDATING"):
                status = _wait_cluster(ctx)
            if r.returncode != 0 or status != "ACTIVE":
                _fail(ctx, res, f"eksctl create cluster exited {r.returncode}; cluster is {status}", r, nodegroup=None)
                break
        elif kind == "wait-cluster":
            status = _wait_cluster(ctx)
            if status != "ACTIVE":
                _fail(ctx, res, f"cluster ended {status}", None, nodegroup=None)
                break
        elif kind == "create-system-ng":
            _write(cluster_file, cluster_text, res, CLUSTER_CFG)
            r = A.run_eksctl(["create", "nodegroup", "-f", str(cluster_file), "--include", SYSTEM_NODEGROUP],
                             log_path=ctx.log_path("create-system-nodegroup"), sess=ctx.sess,
                             desc=f"node group {SYSTEM_NODEGROUP}",
                             poll=lambda: ctx.nodegroup_status(SYSTEM_NODEGROUP), poll_every=POLL_S)
            res.logs.append(str(r.log_path))
            st = _wait_nodegroup(ctx, SYSTEM_NODEGROUP)
            if r.returncode != 0 or st != "ACTIVE":
                _fail(ctx, res, f"eksctl create nodegroup ({SYSTEM_NODEGROUP}) exited {r.returncode}; it is {st}", r,
                      nodegroup=SYSTEM_NODEGROUP)
                break
        elif kind == "wait-gpu-ng-gone":
            _wait_nodegroup_gone(ctx, a.gpu_nodegroup_name)
        elif kind == "create-gpu-ng":
            c = ctx.cluster()
            private = A.private_subnets_by_az(ctx.ec2, (c.get("resourcesVpcConfig") or {}).get("subnetIds") or [])
            subnets = private.get(gpu_az or "", [])
            if not subnets:
                res.problems.append(f"the cluster has no private subnet in {gpu_az} (AZs with one: "
                                    f"{', '.join(private) or 'none'}). Fix: `cluster down` then `up`, or set gpu_az")
                break
            res.gpu_subnets = subnets
            text = render_gpu_nodegroup_config(s, gpu_az=gpu_az, subnet_ids=subnets)
            res.configs[GPU_CFG] = text
            _write(gpu_file, text, res, GPU_CFG)
            r = A.run_eksctl(["create", "nodegroup", "-f", str(gpu_file), "--install-nvidia-plugin=false"],
                             log_path=ctx.log_path("create-gpu-nodegroup"), sess=ctx.sess,
                             desc=f"GPU node group {a.gpu_nodegroup_name}",
                             poll=lambda: ctx.nodegroup_status(a.gpu_nodegroup_name), poll_every=POLL_S)
            res.logs.append(str(r.log_path))
            st = _wait_nodegroup(ctx, a.gpu_nodegroup_name)
            if r.returncode != 0 or st != "ACTIVE":
                _fail(ctx, res, f"eksctl create nodegroup ({a.gpu_nodegroup_name}) exited {r.returncode}; it is {st}",
                      r, nodegroup=a.gpu_nodegroup_name)
                break
        elif kind == "wait-gpu-ng":
            st = _wait_nodegroup(ctx, a.gpu_nodegroup_name)
            if st != "ACTIVE":
                _fail(ctx, res, f"GPU node group ended {st}", None, nodegroup=a.gpu_nodegroup_name)
                break
        elif kind == "kubeconfig":
            r = A.run_eksctl(["utils", "write-kubeconfig", "--cluster", a.cluster_name, "--region", ctx.region],
                             log_path=ctx.log_path("write-kubeconfig"), sess=ctx.sess, desc="kubeconfig")
            if r.returncode != 0:
                res.notes.append(f"writing the kubeconfig failed (exit {r.returncode}); see {r.log_path}")
        done.append(desc)


def _check_drift(res: AwsClusterResult, s: Settings, ng: dict[str, Any], gpu_az: str | None) -> None:
    a = s.aws
    want = dict(minSize=a.gpu_node_count, maxSize=a.gpu_node_count, desiredSize=a.gpu_node_count)
    sc = ng.get("scaling") or {}
    diffs = []
    if ng.get("instance_types") and ng["instance_types"] != [a.gpu_node_type]:
        diffs.append(f"instance type {','.join(ng['instance_types'])} (settings: {a.gpu_node_type})")
    if any(sc.get(k) != v for k, v in want.items()):
        diffs.append(f"size {ng['size']} (settings: {a.gpu_node_count} fixed)")
    if gpu_az and ng.get("azs") and ng["azs"] != [gpu_az]:
        diffs.append(f"AZ {','.join(ng['azs'])} (settings/placement: {gpu_az})")
    if diffs:
        res.problems.append(f"the existing GPU node group '{ng['name']}' differs from the settings: "
                            + "; ".join(diffs) + ". Fix: `raytrain-tutorial cluster down --nodegroup-only --yes`, "
                            "then `up`; or change the settings to match")


def _write(path: Path, text: str, res: AwsClusterResult, name: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    res.config_files[name] = str(path)


def _fail(ctx: _Ctx, res: AwsClusterResult, what: str, run, *, nodegroup: str | None) -> None:
    res.causes += failure_causes(ctx.sess, ctx.region, ctx.settings.aws.cluster_name, nodegroup)
    if run is not None and run.tail:
        res.causes += [f"eksctl: {line}" for line in run.tail[-8:] if line.strip()]
    res.problems.append(f"{what}. Fix: read the causes and the log; re-running `up` resumes from the real state; "
                        f"`cluster down --yes` removes what was created")


def _wait_cluster(ctx: _Ctx) -> str:
    return ctx.A.wait_until(ctx.cluster_status, done=lambda st: st not in ("CREATING", "UPDATING", "PENDING"),
                            desc=f"cluster {ctx.settings.aws.cluster_name}", timeout=CLUSTER_TIMEOUT_S, every=POLL_S)


def _wait_nodegroup(ctx: _Ctx, name: str) -> str:
    try:
        return ctx.A.wait_until(lambda: ctx.nodegroup_status(name), done=lambda st: st not in ("CREATING", "UPDATING"),
                                desc=f"node group {name}", timeout=NODEGROUP_TIMEOUT_S, every=POLL_S)
    except ctx.A.WaitTimeout as e:
        e.nodegroup = name
        raise


def _wait_nodegroup_gone(ctx: _Ctx, name: str) -> str:
    try:
        return ctx.A.wait_until(lambda: ctx.nodegroup_status(name), done=lambda st: st != "DELETING",
                                desc=f"deleting node group {name}", timeout=DELETE_TIMEOUT_S, every=POLL_S)
    except ctx.A.WaitTimeout as e:
        e.nodegroup = name
        raise


def _wait_cluster_gone(ctx: _Ctx) -> str:
    return ctx.A.wait_until(ctx.cluster_status, done=lambda st: st != "DELETING",
                            desc=f"deleting cluster {ctx.settings.aws.cluster_name}", timeout=DELETE_TIMEOUT_S,
                            every=POLL_S)


# --------------------------------------------------------------------------------------------
# Teardown: the GPU node group, then the cluster; verified by listing what is left
# --------------------------------------------------------------------------------------------

def aws_teardown(settings: Settings, *, assume_yes: bool = False, nodegroup_only: bool = False,
                 _ctx: _Ctx | None = None, _res: AwsClusterResult | None = None) -> AwsClusterResult:
    """Delete the GPU node group, then (unless ``nodegroup_only``) the cluster with everything eksctl made.

    Headless with ``assume_yes=True``; never prompts in a non-interactive run (it refuses instead).
    """
    ctx = _ctx or _Ctx(settings)
    res = _res or AwsClusterResult(action="down", account=ctx.ident.account, region=ctx.region,
                                   cluster_name=settings.aws.cluster_name)
    A, a = ctx.A, settings.aws
    c = ctx.cluster()
    res.cluster_status = c["status"] if c else NOT_FOUND
    gpu_status = ctx.nodegroup_status(a.gpu_nodegroup_name) if c else NOT_FOUND
    from .capacity_aws import _tagged_reservations
    try:
        probes = [cr["CapacityReservationId"] for cr in _tagged_reservations(ctx.ec2)]
    except Exception:  # noqa: BLE001 - listing may be denied; leftovers() reports it
        probes = []
    todo = []
    if gpu_status not in (NOT_FOUND,):
        todo.append(f"delete GPU node group '{a.gpu_nodegroup_name}' ({gpu_status})")
    if not nodegroup_only and c is not None:
        todo.append(f"delete EKS cluster {a.cluster_name} ({c['status']}) with its node groups, VPC, NAT gateway "
                    f"and eksctl stacks")
    if probes and not nodegroup_only:
        todo.append(f"cancel leftover capacity-probe reservations {', '.join(probes)}")
    if todo:
        A.confirm(f"delete {'the GPU node group of ' if nodegroup_only else ''}{a.cluster_name}", ctx.ident,
                  assume_yes=assume_yes, details=todo)
        if gpu_status != NOT_FOUND or c is not None:
            A.eksctl_path()  # a clear error before anything starts when eksctl is missing
    done: list[str] = []
    try:
        _delete(ctx, res, done, gpu_status=gpu_status, cluster=c, nodegroup_only=nodegroup_only)
    except A.WaitTimeout as e:
        res.causes += failure_causes(ctx.sess, ctx.region, a.cluster_name, getattr(e, "nodegroup", None))
        res.problems.append(f"stuck: {e}. Fix: see the causes; run `down` again later")
    if probes and not nodegroup_only:
        from .capacity_aws import cancel_probe_reservations
        cancelled, _left = cancel_probe_reservations(ctx.ec2)
        if cancelled:
            done.append(f"cancelled probe reservations {', '.join(cancelled)}")
    res.actions = done or ["nothing to delete"]
    res.cluster_status = ctx.cluster_status()
    res.nodegroups = _read_nodegroups(ctx) if res.cluster_status != NOT_FOUND else []
    left = leftovers(ctx)
    if nodegroup_only:
        left = [x for x in left if a.gpu_nodegroup_name in x]
    res.remaining = left
    return res


def _delete(ctx: _Ctx, res: AwsClusterResult, done: list[str], *, gpu_status: str,
            cluster: dict[str, Any] | None, nodegroup_only: bool) -> None:
    A, a = ctx.A, ctx.settings.aws
    if gpu_status not in (NOT_FOUND, "DELETING"):
        r = A.run_eksctl(["delete", "nodegroup", "--cluster", a.cluster_name, "--name", a.gpu_nodegroup_name,
                          "--region", ctx.region, "--drain=false", "--wait"],
                         log_path=ctx.log_path("delete-gpu-nodegroup"), sess=ctx.sess,
                         desc=f"deleting node group {a.gpu_nodegroup_name}",
                         poll=lambda: ctx.nodegroup_status(a.gpu_nodegroup_name), poll_every=POLL_S)
        res.logs.append(str(r.log_path))
        if r.returncode != 0:
            res.causes += [f"eksctl: {line}" for line in r.tail[-6:] if line.strip()]
    if gpu_status != NOT_FOUND:
        st = ctx.nodegroup_status(a.gpu_nodegroup_name)
        if st == "DELETING":
            st = _wait_nodegroup_gone(ctx, a.gpu_nodegroup_name)
        if st != NOT_FOUND:
            res.causes += failure_causes(ctx.sess, ctx.region, a.cluster_name, a.gpu_nodegroup_name)
            res.problems.append(f"GPU node group '{a.gpu_nodegroup_name}' is {st}, not deleted. Fix: see the causes "
                                f"(often an ENI or security group still in use), then run `down` again")
            return
        done.append(f"deleted GPU node group '{a.gpu_nodegroup_name}'")
    if nodegroup_only or cluster is None:
        return
    if cluster["status"] != "DELETING":
        r = A.run_eksctl(["delete", "cluster", "--name", a.cluster_name, "--region", ctx.region, "--wait"],
                         log_path=ctx.log_path("delete-cluster"), sess=ctx.sess,
                         desc=f"deleting cluster {a.cluster_name}", poll=ctx.cluster_status, poll_every=POLL_S)
        res.logs.append(str(r.log_path))
        if r.returncode != 0:
            res.causes += [f"eksctl: {line}" for line in r.tail[-6:] if line.strip()]
    st = ctx.cluster_status()
    if st == "DELETING":
        st = _wait_cluster_gone(ctx)
    if st != NOT_FOUND:
        res.causes += failure_causes(ctx.sess, ctx.region, a.cluster_name)
        res.problems.append(f"cluster {a.cluster_name} is {st}, not deleted. Fix: see the causes; run `down` again")
        return
    done.append(f"deleted EKS cluster {a.cluster_name}")


# --------------------------------------------------------------------------------------------
# CLI: raytrain-tutorial cluster {plan,up,status,down}
# --------------------------------------------------------------------------------------------

def register_cli(sub: argparse._SubParsersAction) -> None:
    from .cli import add_settings_args
    p = sub.add_parser("cluster", help="step 02: plan | up | status | down the cluster (local raylets or EKS)")
    p.add_argument("action", choices=ACTIONS)
    add_settings_args(p)
    p.add_argument("--yes", action="store_true", help="confirm billable/destructive actions without asking")
    p.add_argument("--nodegroup-only", action="store_true", help="down: delete only the GPU node group (aws)")
    p.add_argument("--json", action="store_true", help="print the result as JSON (aws)")
    p.set_defaults(func=_run_cli)


def _run_cli(args: argparse.Namespace) -> int:
    import json

    from .cli import settings_from_args
    settings = settings_from_args(args)
    try:
        if settings.target == "aws" and args.action == "down" and args.nodegroup_only:
            res = teardown(settings, assume_yes=args.yes, nodegroup_only=True)
        else:
            res = step(settings, args.action, assume_yes=args.yes)
    except RuntimeError as e:  # AwsTargetError, LocalClusterError
        print(f"error: {e}", file=sys.stderr)
        return 1
    if args.json and hasattr(res, "as_dict"):
        print(json.dumps(res.as_dict(), indent=2, default=str))
    elif hasattr(res, "show"):
        res.show()
    ok = getattr(res, "ok", None)
    if ok is None:  # the local cluster info: up/status want it running, down wants it stopped
        running = getattr(res, "running", True)
        ok = (not running) if args.action == "down" else (running or args.action == "plan")
    return 0 if ok else 1
