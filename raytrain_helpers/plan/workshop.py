"""A workshop's shape, computed offline from the attendees' settings: the shared cluster's size, each attendee's
GPU quota, the vCPUs the account must allow, what it costs, and each attendee's local ports and folder.

Each attendee's RayCluster asks for ``gpu_node_count`` worker pods of ``gpus_per_node`` GPUs each
(:mod:`.raycluster`), so the namespace's GPU quota is at least ``gpu_node_count x gpus_per_node`` and the shared
GPU node group holds the sum over the attendees. The Ray head is sized to fill one system node
(:func:`.raycluster.head_size`), so the shared system node group has one node per attendee. An attendee with a
cluster of their own (a roster row with ``cluster_name``) counts in the vCPUs and the cost, not in the shared
cluster.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ..core.presets import INSTANCE_TYPES
from ..core.settings import Settings
from ..core.validation import ConfigError
from . import cost
from .raycluster import system_node_shape

#: Each attendee's local ports and temp_root sit at base + STRIDE x row index (the facilitator keeps the base).
PORT_STRIDE = 10
#: Attendee folders of the local raylets: TEMP_ROOT-<index>, always well under local.temp_root's 40 characters.
#: ``{uid}`` is the attendee's own user id, filled in on their machine: each folder is created 0700 by its user.
TEMP_ROOT = "/tmp/raytrain-{uid}-ws"


@dataclass
class WorkshopPlan:
    """What the hand-out writes into the shared-cluster settings and checks against the account."""

    attendees: int
    shared: int
    gpu_nodes: int  # the shared GPU node group
    system_nodes: int  # the shared system node group: one Ray head each
    gpu_quota: dict[str, int] = field(default_factory=dict)  # namespace -> requests.nvidia.com/gpu
    vcpus: dict[str, int] = field(default_factory=dict)  # instance type -> vCPUs of every node the workshop starts
    hours: float = 0.0
    cost_per_hour: float = 0.0
    cost_complete: bool = True
    cost_assumes: list[str] = field(default_factory=list)

    @property
    def cost_total(self) -> float:
        return self.cost_per_hour * self.hours


def attendee_gpus(settings: Settings) -> int:
    """The GPUs one attendee's RayCluster requests: its worker pods times the GPUs of each."""
    return settings.aws.gpu_node_count * settings.aws.gpus_per_node


def plan(
    base: Settings,
    attendees: Sequence[tuple[Settings, bool]],
    *,
    gpus_per_attendee: int | None = None,
    hours: float = 3.0,
    prices=None,
) -> WorkshopPlan:
    """``attendees``: (settings, has a cluster of their own) per roster row. ``gpus_per_attendee`` may raise the
    quota, never lower it below what the RayCluster asks for (refused: the RayCluster would never be created)."""
    if hours <= 0:
        raise ConfigError(f"--hours = {hours}: the workshop must last some time. Fix: e.g. --hours 3")
    shared = [s for s, own in attendees if not own]
    quota: dict[str, int] = {}
    for s in shared:
        need = attendee_gpus(s)
        if gpus_per_attendee is not None and gpus_per_attendee < need:
            raise ConfigError(
                f"--gpus-per-attendee {gpus_per_attendee} is below what {s.run_name}'s RayCluster asks for: "
                f"{s.aws.gpu_node_count} GPU nodes x {s.aws.gpus_per_node} GPUs = {need}. Fix: leave it out "
                f"(the hand-out computes {need}) or lower gpu_node_count"
            )
        _same_node_group(base, s)
        quota[s.kubernetes.namespace] = max(need, gpus_per_attendee or 0)
    gpu_nodes = sum(s.aws.gpu_node_count for s in shared)
    system_nodes = max(base.aws.system_node_count, len(shared))
    wp = WorkshopPlan(len(attendees), len(shared), gpu_nodes, system_nodes, quota, hours=hours)
    clusters = [sized(base, wp)] if shared else []
    clusters += [s for s, own in attendees if own]
    for c in clusters:
        for itype, n in (
            (c.aws.gpu_node_type, c.aws.gpu_node_count),
            (c.aws.system_node_type, c.aws.system_node_count),
        ):
            wp.vcpus[itype] = wp.vcpus.get(itype, 0) + n * vcpus_of(itype)
        est = cost.estimate(c, c.aws.region, prices)
        wp.cost_per_hour += est.total_per_hour
        wp.cost_complete = wp.cost_complete and est.complete
    wp.cost_assumes = [
        f"{len(clusters)} cluster(s) up for {hours:g} h each (the shared one sized for {len(shared)} attendee(s)), "
        "every node running the whole time",
        f"On-Demand list prices as of {cost.AS_OF} (plan/cost.py), the EKS control plane and one NAT gateway "
        "per cluster",
        "nothing for EBS volumes, NAT data processing, data transfer, S3 or taxes",
    ]
    return wp


def _same_node_group(base: Settings, s: Settings) -> None:
    for key in ("gpu_node_type", "gpus_per_node", "cluster_name", "region"):
        if getattr(s.aws, key) != getattr(base.aws, key):
            raise ConfigError(
                f"{s.run_name} shares the cluster but sets {key} = {getattr(s.aws, key)!r} (the shared cluster has "
                f"{getattr(base.aws, key)!r}). Fix: leave {key} out of the roster, or give the row a cluster_name "
                "of its own"
            )


def sized(base: Settings, wp: WorkshopPlan) -> Settings:
    """The facilitator's settings with the shared cluster's node groups sized for every attendee."""
    aws = base.aws.model_copy(update=dict(gpu_node_count=wp.gpu_nodes, system_node_count=wp.system_nodes))
    return base.model_copy(update=dict(aws=aws))


def vcpus_of(instance_type: str) -> int:
    """vCPUs of a GPU type the tutorial knows, or of a general-purpose system type (from its name)."""
    known = INSTANCE_TYPES.get(instance_type)
    return int(known["vcpus"]) if known else system_node_shape(instance_type).vcpus


def quota_problems(wp: WorkshopPlan, rows: Sequence[tuple[str, bool | None, str]]) -> list[str]:
    """The account's answer (``Target.vcpu_room``: quota class, fits, evidence) as refusals."""
    return [f"vCPU quota {name}: {evidence}" for name, fits, evidence in rows if fits is False]


@dataclass
class HostPlan:
    """A room whose attendees' clusters all run on one host: their sum against the host's capacity."""

    attendees: int
    need: dict[str, float]
    host: dict[str, float]
    ports: list[int] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


#: What a host plan compares: (key, what it is, unit).
HOST_RESOURCES = (("cpus", "CPU cores", ""), ("memory_gib", "memory", " GiB"), ("gpus", "GPUs", ""),
                  ("disk_gib", "free disk under the attendees' temp_root", " GiB"))  # fmt: skip


def host_plan(needs: Sequence[dict[str, object]], host: dict[str, float]) -> HostPlan:
    """Sum what each attendee's cluster takes (the target's ``workshop_host``) and refuse, with the numbers, what
    the host cannot hold (a value the host could not read, NaN, is not compared); ports must all differ."""
    total = {k: float(sum(float(n[k]) for n in needs)) for k, _, _ in HOST_RESOURCES}  # type: ignore[arg-type]
    ports = [int(p) for n in needs for p in n["ports"]]  # type: ignore[union-attr]
    hp = HostPlan(len(needs), total, dict(host), sorted(ports))
    for key, what, unit in HOST_RESOURCES:
        have = host.get(key, float("nan"))
        if have == have and total[key] > have:
            each = ", ".join(f"{float(n[key]):g}" for n in needs[:5]) + (" ..." if len(needs) > 5 else "")  # type: ignore[arg-type]
            hp.problems.append(
                f"{what}: the {len(needs)} attendees' clusters take {total[key]:.1f}{unit} ({each}), the host has "
                f"{have:.1f}{unit}. Fix: fewer attendees per host, smaller local clusters in the roster or base "
                f"(worker_nodes, cpus_per_worker_node, object_store_mb), or a bigger host (--host {key}=N)"
            )
    dup = sorted({p for p in ports if ports.count(p) > 1})
    if dup:
        hp.problems.append(
            f"ports used by two attendees: {dup}. Fix: leave gcs_port and dashboard_port out of the roster"
        )
    return hp


def local_slot(index: int, base: Settings) -> dict[str, object]:
    """Attendee ``index`` (0, 1, ...)'s own ``local.gcs_port``, ``local.dashboard_port`` and ``local.temp_root``,
    so that attendees on one JupyterHub host never share a port or a raylet folder. Deterministic: the same row
    gets the same values each hand-out; the base values stay the facilitator's."""
    step = PORT_STRIDE * (index + 1)
    gcs, dash = base.local.gcs_port + step, base.local.dashboard_port + step
    if max(gcs, dash) > 65535:
        raise ConfigError(
            f"attendee {index + 1}'s local ports ({gcs}, {dash}) pass 65535. Fix: lower local.gcs_port and "
            "local.dashboard_port in the base env.yaml, or hand out fewer attendees per host"
        )
    gap = base.local.dashboard_port - base.local.gcs_port
    if gap % PORT_STRIDE == 0:  # some attendee's dashboard would land on another's GCS port
        raise ConfigError(
            f"local.dashboard_port - local.gcs_port = {gap}, a multiple of {PORT_STRIDE}: attendees' ports, "
            f"{PORT_STRIDE} apart, would collide. Fix: e.g. 6390 and 8266 (the defaults)"
        )
    return dict(gcs_port=gcs, dashboard_port=dash, temp_root=f"{TEMP_ROOT}{index + 1}")


__all__ = [
    "HOST_RESOURCES",
    "HostPlan",
    "host_plan",
    "PORT_STRIDE",
    "TEMP_ROOT",
    "WorkshopPlan",
    "attendee_gpus",
    "local_slot",
    "plan",
    "quota_problems",
    "sized",
    "vcpus_of",
]
