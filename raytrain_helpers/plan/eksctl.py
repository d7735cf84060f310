"""The EKS cluster as eksctl builds it: the rendered configs, and what to do about the state it is in.

* :func:`render_cluster_config` / :func:`render_gpu_nodegroup_config`: eksctl ``ClusterConfig`` documents
  rendered from the settings (``manifests/eksctl-*.yaml.j2``).
* :func:`cluster_azs`: the cluster's AZs around the GPU AZ.
* :func:`decide_actions`: given what exists (:class:`Observed`: the cluster's and node groups' states) and the
  settings, the actions that bring it to the settings, the problems that stop it, and what to diagnose. Pure:
  it reads nothing and changes nothing; the aws target reads the state and carries the actions out.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.settings import Settings
from . import plugins, render
from .walkthrough import ALLOWANCES

SYSTEM_NODEGROUP = "system"
#: EC2's ``ReservationType`` of a Capacity Block for ML (botocore's ec2 model: ``default`` | ``capacity-block``).
CAPACITY_BLOCK = "capacity-block"
#: The state of a resource that does not exist (EKS answers ResourceNotFoundException).
NOT_FOUND = "NOT_FOUND"
#: Node group states that need a person (or `down`) before anything else happens.
FAILED_NG = ("CREATE_FAILED", "DELETE_FAILED", "DEGRADED")
#: States in which EKS is still working on a resource.
IN_PROGRESS = ("CREATING", "UPDATING")
#: The names the rendered configs are shown and saved under.
CLUSTER_CFG, GPU_CFG = "eksctl cluster config", "eksctl GPU node group config"

# The kinds of action, in the order they are carried out.
CREATE_CLUSTER = "create-cluster"
WAIT_CLUSTER = "wait-cluster"
CREATE_SYSTEM_NG = "create-system-ng"
WAIT_GPU_NG_GONE = "wait-gpu-ng-gone"
CREATE_GPU_NG = "create-gpu-ng"
WAIT_GPU_NG = "wait-gpu-ng"
KUBECONFIG = "kubeconfig"


# --------------------------------------------------------------------------------------------------------------
# Rendering
# --------------------------------------------------------------------------------------------------------------


def render_cluster_config(settings: Settings, *, azs: list[str], gpu_az: str | None) -> str:
    """The ``ClusterConfig`` of ``eksctl create cluster``: VPC over ``azs``, OIDC, add-ons, the system node group."""
    return render.render_template(
        "eksctl-cluster.yaml.j2", settings, azs=azs, gpu_az=gpu_az, system_nodegroup=SYSTEM_NODEGROUP
    )


def render_gpu_nodegroup_config(
    settings: Settings, *, gpu_az: str, subnet_ids: list[str], reservation_type: str = ""
) -> str:
    """The EFA GPU node group of ``eksctl create nodegroup``, pinned to ``subnet_ids`` (one AZ).

    ``reservation_type``: the ``ReservationType`` EC2 reports for ``aws.capacity_reservation_id`` (``default`` or
    ``capacity-block``); ``aws.capacity_reservation_type`` wins when set. A Capacity Block adds
    ``instanceMarketOptions.marketType: capacity-block`` (eksctl's schema and validation, v0.230.0: accepted only
    beside ``capacityReservation``)."""
    kind = settings.aws.capacity_reservation_type or reservation_type
    return render.render_template(
        "eksctl-gpu-nodegroup.yaml.j2",
        settings,
        gpu_az=gpu_az,
        subnet_ids=subnet_ids,
        capacity_reservation_id=settings.aws.capacity_reservation_id,
        reservation_type=kind,
        capacity_block=kind == CAPACITY_BLOCK,
        toolkit_command=plugins.toolkit_command(settings),
    )


def cluster_azs(
    gpu_az: str, offering: list[str], zones: dict[str, dict[str, Any]], unsupported: frozenset, others: int = 2
) -> list[str]:
    """The cluster's AZs: the GPU AZ first, then up to ``others`` other AZs offering the type, in ``offering``'s order
    (step 02 passes 01's ranking first: the AZs it falls back to when EC2 has no GPU capacity need a private subnet);
    at least two (EKS needs two)."""
    ok = [z for z in sorted(zones) if zones[z].get("id") not in unsupported and zones[z].get("state") == "available"]
    azs = [gpu_az] + [z for z in offering if z != gpu_az and z in ok][:others]
    for z in ok:
        if len(azs) >= 2:
            break
        if z not in azs:
            azs.append(z)
    return azs


# --------------------------------------------------------------------------------------------------------------
# Deciding
# --------------------------------------------------------------------------------------------------------------


@dataclass
class Observed:
    """What exists, as read from EKS and EC2 before deciding."""

    #: The cluster's status (NOT_FOUND, CREATING, ACTIVE, UPDATING, DELETING, FAILED).
    cluster_status: str = NOT_FOUND
    #: The cluster's node groups, each a summary dict: name, status, subnets, azs, size, scaling,
    #: instance_types, health.
    nodegroups: list[dict[str, Any]] = field(default_factory=list)
    #: AZ -> the cluster's private subnet ids there.
    private_subnets: dict[str, list[str]] = field(default_factory=dict)
    #: The AZ the GPU nodes go to (None when none could be chosen).
    gpu_az: str | None = None

    def nodegroup(self, name: str) -> dict[str, Any] | None:
        return next((n for n in self.nodegroups if n["name"] == name), None)


@dataclass
class Action:
    kind: str
    description: str


@dataclass
class Decision:
    """What :func:`decide_actions` found to do."""

    actions: list[Action] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    #: Whose failure causes to read and show: None for the cluster, else a node group's name.
    diagnose: list[str | None] = field(default_factory=list)
    #: The GPU node group's subnets (existing, or those it will be created in).
    gpu_subnets: list[str] = field(default_factory=list)
    #: Render the GPU node group config with these subnet ids (None: nothing to show).
    gpu_config_subnets: list[str] | None = None

    def add(self, kind: str, description: str) -> None:
        self.actions.append(Action(kind, description))

    @property
    def descriptions(self) -> list[str]:
        return [a.description for a in self.actions]

    @property
    def billable(self) -> list[str]:
        """The actions that create something billed while it exists."""
        return [a.description for a in self.actions if a.kind.startswith("create")]


def decide_actions(
    settings: Settings, observed: Observed, *, azs: list[str], cluster_file: Path, gpu_file: Path
) -> Decision:
    """The actions that bring the cluster from ``observed`` to the settings (``azs``: the cluster's AZs;
    the files: where the rendered configs will be written, for the descriptions)."""
    decision = Decision()
    status = observed.cluster_status
    _decide_cluster(settings, status, azs, cluster_file, decision)
    if status not in ("DELETING", "FAILED"):
        _decide_system_nodegroup(settings, observed, cluster_file, decision)
        _decide_gpu_nodegroup(settings, observed, gpu_file, decision)
    if status == "ACTIVE" and not decision.actions:
        decision.add(
            KUBECONFIG,
            f"update the kubeconfig for {settings.aws.cluster_name}: eksctl utils write-kubeconfig",
        )
    return decision


def _decide_cluster(settings: Settings, status: str, azs: list[str], cluster_file: Path, decision: Decision) -> None:
    a = settings.aws
    if status == NOT_FOUND:
        decision.add(
            CREATE_CLUSTER,
            f"create EKS cluster {a.cluster_name} {a.k8s_version} in {a.region} (AZs {', '.join(azs)}; VPC, "
            f"private subnets, one NAT gateway, OIDC, add-ons) with node group '{SYSTEM_NODEGROUP}' "
            f"({a.system_node_count} x {a.system_node_type}) - up to {ALLOWANCES['cluster'][0]:.0f} min, estimated: "
            f"eksctl create cluster -f "
            f"{cluster_file}",
        )
    elif status in IN_PROGRESS:
        decision.add(WAIT_CLUSTER, f"wait for cluster {a.cluster_name} ({status}) to become ACTIVE")
    elif status == "DELETING":
        decision.problems.append(
            f"cluster {a.cluster_name} is being deleted. Fix: wait for it to go (`cluster down` "
            f"waits and verifies), then run `up` again"
        )
    elif status == "FAILED":
        decision.diagnose.append(None)
        decision.problems.append(f"cluster {a.cluster_name} is FAILED. Fix: `cluster down` (deletes it), then `up`")


def _decide_system_nodegroup(settings: Settings, observed: Observed, cluster_file: Path, decision: Decision) -> None:
    a = settings.aws
    ng = observed.nodegroup(SYSTEM_NODEGROUP)
    if observed.cluster_status != NOT_FOUND and ng is None:
        decision.add(
            CREATE_SYSTEM_NG,
            f"create node group '{SYSTEM_NODEGROUP}' ({a.system_node_count} x {a.system_node_type}): eksctl "
            f"create nodegroup -f {cluster_file} --include {SYSTEM_NODEGROUP}",
        )
    elif ng is not None and ng["status"] in FAILED_NG:
        decision.diagnose.append(SYSTEM_NODEGROUP)
        decision.problems.append(f"node group '{SYSTEM_NODEGROUP}' is {ng['status']}. Fix: `cluster down`, then `up`")


def _decide_gpu_nodegroup(settings: Settings, observed: Observed, gpu_file: Path, decision: Decision) -> None:
    a = settings.aws
    gpu_az = observed.gpu_az
    ng = observed.nodegroup(a.gpu_nodegroup_name)
    if ng is None:
        if gpu_az:
            subnets = observed.private_subnets.get(gpu_az, [])
            decision.gpu_subnets = subnets
            decision.gpu_config_subnets = subnets or [f"<private subnet of the new cluster in {gpu_az}>"]
            decision.add(CREATE_GPU_NG, _create_gpu_description(settings, gpu_az, gpu_file))
        return
    decision.gpu_subnets = ng["subnets"]
    name, status = a.gpu_nodegroup_name, ng["status"]
    if status in IN_PROGRESS:
        decision.add(WAIT_GPU_NG, f"wait for GPU node group '{name}' ({status})")
    elif status == "DELETING":
        decision.add(WAIT_GPU_NG_GONE, f"wait for GPU node group '{name}' to finish deleting")
        if gpu_az:
            decision.gpu_config_subnets = observed.private_subnets.get(gpu_az, [])
            decision.add(CREATE_GPU_NG, f"then create it again in {gpu_az}")
    elif status in FAILED_NG:
        decision.diagnose.append(name)
        decision.problems.append(
            f"GPU node group '{name}' is {status}"
            + (f" ({'; '.join(ng['health'])})" if ng["health"] else "")
            + ". Fix: see the causes; then `raytrain-tutorial cluster down --nodegroup-only --yes` and `up` "
            "(or pick another AZ in step 01 when capacity is short)"
        )
    else:
        problem = drift(settings, ng, gpu_az)
        if problem:
            decision.problems.append(problem)


def _create_gpu_description(settings: Settings, gpu_az: str, gpu_file: Path) -> str:
    a = settings.aws
    return (
        f"create GPU node group '{a.gpu_nodegroup_name}' ({a.gpu_node_count} x {a.gpu_node_type}, EFA) in "
        f"{gpu_az} - up to {ALLOWANCES['gpu_nodegroup'][0]:.0f} min, estimated: eksctl create nodegroup -f {gpu_file} "
        "--install-nvidia-plugin=false"
        + (f", in capacity reservation {a.capacity_reservation_id}" if a.capacity_reservation_id else "")
        + (" (a Capacity Block)" if a.capacity_reservation_type == CAPACITY_BLOCK else "")
    )


def drift(settings: Settings, ng: dict[str, Any], gpu_az: str | None) -> str | None:
    """How an existing GPU node group differs from the settings (type, fixed size, AZ), as a problem; or None."""
    a = settings.aws
    want = dict(minSize=a.gpu_node_count, maxSize=a.gpu_node_count, desiredSize=a.gpu_node_count)
    scaling = ng.get("scaling") or {}
    diffs = []
    if ng.get("instance_types") and ng["instance_types"] != [a.gpu_node_type]:
        diffs.append(f"instance type {','.join(ng['instance_types'])} (settings: {a.gpu_node_type})")
    if any(scaling.get(k) != v for k, v in want.items()):
        diffs.append(f"size {ng['size']} (settings: {a.gpu_node_count} fixed)")
    if gpu_az and ng.get("azs") and ng["azs"] != [gpu_az]:
        diffs.append(f"AZ {','.join(ng['azs'])} (settings/placement: {gpu_az})")
    if not diffs:
        return None
    return (
        f"the existing GPU node group '{ng['name']}' differs from the settings: "
        + "; ".join(diffs)
        + ". Fix: `raytrain-tutorial cluster down --nodegroup-only --yes`, then `up`; or change the settings to match"
    )
