"""The ``local`` target: a real Ray cluster on this machine, shaped like the EKS reference.

A head raylet that takes no training work and N worker raylets standing in for the GPU nodes, all on 127.0.0.1.
Exports the names of :mod:`..base` (the Target interface).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

from ...core.constants import LOOPBACK, STEP_ACTIONS
from ...core.settings import Settings
from ...plan.memory import MemoryPlan
from ..base import OPERATOR_ACTION, PART_ACTIONS, BillingResult, JobDefaults, StepResult, check_action
from . import commands, raylets, standin
from .cluster_state import token_path
from .logs import collect_local_logs
from .observe import dashboard, efa_counters, node_metrics
from .preflight import preflight
from .raylets import (
    LocalClusterError,
    LocalClusterInfo,
    TeardownResult,
    down,
    our_pids,
    session_log_dirs,
    status,
    up,
)
from .raylets import teardown as stop_cluster
from .resources import (
    LocalCapacity,
    host_capacity,
    local_resources,
    local_world_size,
    resolve_local_gpus,
    workshop_need,
)

NAME = "local"
#: The notebooks show the aws path's commands first: this cluster stands in for the EKS one.
STANDS_IN_FOR = "aws"
#: No node groups here: ``cluster down --nodegroup-only`` stops the raylets as ``down`` does.
NODEGROUP_ONLY_DOWN = False
#: The worker raylets run with this machine's Python environment.
WORKERS_USE_THIS_ENVIRONMENT = True
#: What switches NCCL's fast transport off between the GPUs of this machine (07's comparison).
SOCKET_ENV = {"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1"}


def where(settings: Settings) -> str:
    return f"local Ray cluster: head + {settings.local.worker_nodes} worker raylet(s)"


def capacity(
    settings: Settings, *, probe: bool = False, assume_yes: bool = False, regions: Any = None, prices: Any = None
) -> LocalCapacity:
    """CPUs, memory and GPUs here against the local cluster's shape, and the memory plan (``probe``, ``regions`` and
    ``prices`` are aws only)."""
    return local_resources(settings)


def cluster(settings: Settings, action: str | None = "up", *, assume_yes: bool = False) -> LocalClusterInfo:
    """``up`` (the default) starts or reuses the raylets, ``plan`` says what would start, ``status`` reads,
    ``down`` stops. Nothing here is billable, so nothing asks for ``assume_yes``."""
    action = check_action(action or "up", STEP_ACTIONS)
    if action in ("up", "plan"):
        return up(settings, plan=(action == "plan"))
    return status(settings) if action == "status" else down(settings)


def devices(settings: Settings, *, assume_yes: bool = False):
    """The devices and collective backend each worker raylet offers (the stand-in for the device plugins)."""
    return standin.devices(settings, assume_yes=assume_yes)


def raycluster(settings: Settings, *, assume_yes: bool = False):
    """The RayCluster rendered from the settings, each part mapped to its local stand-in."""
    return standin.raycluster(settings, assume_yes=assume_yes)


@contextlib.contextmanager
def job_server(settings: Settings) -> Iterator[str]:
    """The head's dashboard on 127.0.0.1 (nothing to open or close)."""
    info = raylets.status(settings)
    if not info.running:
        raise RuntimeError(
            "the local Ray cluster is not running. Fix: run 02_cluster (or `raytrain-tutorial up`) first"
        )
    yield info.dashboard_url


def shell_env(settings: Settings) -> dict[str, str]:
    """What a terminal of this machine needs to reach the running cluster as the notebooks do: ``RAY_ADDRESS``
    (the head runs under its own temp folder, so a bare ``ray.init()`` would not find it and would start a Ray of
    its own) and, with token authentication on, the token file (a request without it is refused)."""
    info = raylets.status(settings)
    if not info.running:
        raise LocalClusterError(
            f"the local Ray cluster is not running ({info.message}). Fix: run 02_cluster (or `raytrain-tutorial up`)"
        )
    env = {"RAY_ADDRESS": info.address}
    if info.token_auth:
        env.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN_PATH=str(token_path(settings)))
    return env


def job_defaults(settings: Settings) -> JobDefaults:
    """GPUs when the worker raylets have some; checkpoints under the run's folder unless storage_path says else;
    the entrypoint runs with the interpreter the raylets were started with."""
    use_gpu = resolve_local_gpus(settings) > 0
    # no spot capacity or node draining here: Ray Train's preemption watcher (one more actor per job) has
    # nothing to watch
    env = {"RAY_TRAIN_ENABLE_PREEMPTION_WATCHER": "0"}
    # Ray Train's placement-group cleaner asks the state API about the controller from a thread of its own, which
    # finds the cluster by looking for Ray processes on the machine: with a second local cluster running (the test
    # suite beside the notebooks) it gave up with "Found multiple active Ray instances". The address says which.
    env["RAY_ADDRESS"] = f"{LOOPBACK}:{settings.local.gcs_port}"
    if use_gpu:
        env["NCCL_NVLS_ENABLE"] = "0"
    return JobDefaults(
        use_gpu=use_gpu,
        storage_path=settings.train.storage_path or None,
        env=env,
        python=raylets.cluster_python(settings),
    )


def worker_logs(settings: Settings, marker: str) -> dict[str, str]:
    """The training workers' log files of the job with this marker, from every raylet's session logs."""
    return collect_local_logs(session_log_dirs(settings), marker)


def infra_criteria(settings: Settings) -> list[tuple[str, bool | None, str]]:
    """No Kubernetes device plugins here: the rows say so instead of passing."""
    why = "n/a on local (no Kubernetes device plugins)"
    return [
        (name, None, why)
        for name in (
            "GPUs allocatable on every GPU node",
            "EFA allocatable on every GPU node",
            "EFA provider with an RDM endpoint (fi_info -p efa)",
        )
    ]


def benchmark_variants(settings: Settings) -> list[dict[str, Any]]:
    """GPUs: P2P/NVLink vs forced sockets. CPU: the gloo baseline alone (no NCCL transport to change)."""
    if job_defaults(settings).use_gpu:
        return [
            dict(label="p2p", expect="p2p", env={}),
            dict(label="socket", expect="socket", env=dict(SOCKET_ENV)),
        ]
    return [dict(label="gloo", expect="none", env={})]


def expected_transport(settings: Settings, gpus: int | None = None) -> str:
    """P2P (NVLink or PCIe) between the GPUs of this machine; none for CPU workers, which use gloo."""
    if settings.nccl.expect != "auto":
        return settings.nccl.expect
    if gpus is None:
        gpus = settings.local.gpus_per_worker_node
    return "p2p" if gpus and gpus > 0 else "none"


def attendee_state(settings: Settings) -> dict[str, str]:
    """Nothing beyond the attendee's folder: their local cluster runs on the JupyterHub host, read from disk."""
    return {}


def create_namespace(settings: Settings, objects: list[dict], *, uid: str = "") -> tuple[bool, str, str]:
    """There are no namespaces locally: nothing to create."""
    return True, "local target: no namespace (each attendee runs raylets of their own)", ""


def remove_namespace(
    settings: Settings, *, assume_yes: bool = False, uid: str = "", objects: list[dict] = ()
) -> tuple[bool, str]:
    """There are no namespaces locally: nothing to remove."""
    return True, "local target: no namespace (each attendee's raylets stop with their 08)"


def workshop_host(attendees: list[Settings]) -> tuple[list[dict[str, Any]], dict[str, float]] | None:
    """A workshop room on one host: what each attendee's local cluster takes, and this host's capacity."""
    if not attendees:
        return None
    return [workshop_need(s) for s in attendees], host_capacity(os.path.dirname(attendees[0].local.temp_root_path()))


def attendee_access(settings: Settings, action: str = "status", *, request: dict | None = None):
    """Attendees on one host reach only their own cluster through its token: no access entry to manage."""
    return (None, "-") if action == "status" else (True, "local target: no access entry (each cluster's own token)")


def attendee_storage(
    settings: Settings, action: str = "status", *, facilitator: Settings | None = None
) -> tuple[bool | None, str]:
    """Each attendee's checkpoints stay in their own run folder on this machine: nothing to associate."""
    if action == "status":
        return None, "-"
    return True, "local target: checkpoints in the attendee's own run folder (nothing to associate)"


def teardown(settings: Settings, *, assume_yes: bool = False, nodegroup_only: bool = False) -> TeardownResult:
    """Stop every process of the local cluster and list what is left (nothing billable: no confirmation)."""
    if nodegroup_only:
        raise ValueError("the local target has no GPU node group to delete alone. Fix: leave out nodegroup_only")
    return stop_cluster(settings)


def billing(settings: Settings) -> BillingResult:
    """Nothing bills on this machine: an empty listing (the local Ray cluster stops with ``raytrain-tutorial down``)."""
    return BillingResult(where="this machine", stop_command="raytrain-tutorial down")


def after_failure(settings: Settings) -> BillingResult:
    """Nothing bills, so nothing is torn down after a failure: the local cluster stays for the retry."""
    return billing(settings)


def worker_node_count(settings: Settings) -> int:
    """The worker raylets standing in for the GPU nodes."""
    return settings.local.worker_nodes


def plugins_action(
    settings: Settings, action: str = "up", *, assume_yes: bool = False, timeout_s: float | None = None
) -> StepResult:
    """No device plugins here: ``up`` and ``status`` show what each raylet offers, ``down`` has nothing to do."""
    check_action(action, PART_ACTIONS)
    if action == "up":
        return standin.devices(settings, assume_yes=assume_yes)
    return standin.devices_status(settings) if action == "status" else standin.devices_teardown(settings)


def kuberay_action(
    settings: Settings, action: str = "up", *, assume_yes: bool = False, timeout_s: float | None = None
) -> StepResult:
    """The RayCluster rendered and mapped to the raylets (``up``), the raylets as its pods (``status``), nothing to
    delete (``down``: 08 stops the raylets); ``operator``: there is none locally, so the status."""
    check_action(action, (*PART_ACTIONS, OPERATOR_ACTION))
    if action == "up":
        return standin.raycluster(settings, assume_yes=assume_yes)
    if action in ("status", OPERATOR_ACTION):
        return standin.raycluster_status(settings)
    return standin.raycluster_teardown(settings)


def cluster_missing(settings: Settings) -> str | None:
    """The local Ray cluster, when it is not running (one look at its ports: no cost)."""
    if raylets.status(settings).running:
        return None
    loc = settings.local
    return (
        f"the local Ray cluster, and none is running on {LOOPBACK}:{loc.gcs_port} (local.gcs_port) / "
        f":{loc.dashboard_port} (local.dashboard_port)"
    )


def memory_plan(settings: Settings) -> MemoryPlan:
    """The plan for this machine's GPUs (or CPU workers), as 01 made it."""
    return capacity(settings).plan


def equivalent_commands(settings: Settings, step: str) -> list[tuple[str, str]]:
    """This machine's commands of ``step`` (:mod:`.commands`)."""
    return commands.equivalent_commands(settings, step, forced=SOCKET_ENV)


__all__ = [
    "NAME",
    "STANDS_IN_FOR",
    "NODEGROUP_ONLY_DOWN",
    "WORKERS_USE_THIS_ENVIRONMENT",
    "SOCKET_ENV",
    "shell_env",
    "where",
    "preflight",
    "capacity",
    "cluster",
    "devices",
    "raycluster",
    "job_server",
    "job_defaults",
    "expected_transport",
    "worker_logs",
    "infra_criteria",
    "benchmark_variants",
    "teardown",
    "attendee_state",
    "create_namespace",
    "remove_namespace",
    "attendee_storage",
    "attendee_access",
    "workshop_host",
    "worker_node_count",
    "plugins_action",
    "kuberay_action",
    "cluster_missing",
    "memory_plan",
    "equivalent_commands",
    "LocalCapacity",
    "LocalClusterError",
    "LocalClusterInfo",
    "TeardownResult",
    "local_world_size",
    "resolve_local_gpus",
    "session_log_dirs",
    "our_pids",
    "up",
    "down",
    "status",
    "billing",
    "after_failure",
    "dashboard",
    "node_metrics",
    "efa_counters",
]
