"""The Target interface: what every place the tutorial can run on provides.

A target is a module (``targets.local``) or a package (``targets.aws``) that exports the names below, each with
the signature given here. The steps (one per notebook) call only these names, through
``targets.for_settings(settings)``, which is the one place that reads ``settings.target``. A new target is a new
package exporting the same names; ``tests/unit/targets/test_base.py`` checks that every target does.

Every step result (capacity, cluster, devices, RayCluster, teardown) satisfies :class:`StepResult`: an ``ok``
flag and a ``show()`` that prints plain-text tables (stable for nbval).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ..core.constants import STEP_ACTIONS
from ..core.settings import Settings
from ..core.tables import table, wrapped_table
from ..plan.memory import MemoryPlan

#: What the device plugins (03) and the KubeRay operator with its RayCluster (04) can be asked: every step action
#: but ``plan`` (their plan is ``raytrain-tutorial render``).
PART_ACTIONS = tuple(a for a in STEP_ACTIONS if a != "plan")
#: KubeRay's extra action: the operator alone (a workshop's facilitator installs it once for every attendee).
OPERATOR_ACTION = "operator"
#: The steps whose commands a target can show (:meth:`Target.equivalent_commands`).
COMMAND_STEPS = ("capacity", "cluster", "plugins", "kuberay", "train", "verify", "benchmark", "teardown")

#: The constants every target exports, and their types (checked by the tests).
ATTRIBUTES: dict[str, type | tuple[type, ...]] = {
    "NAME": str,
    "STANDS_IN_FOR": (str, type(None)),
    "NODEGROUP_ONLY_DOWN": bool,
    "WORKERS_USE_THIS_ENVIRONMENT": bool,
}
#: The names every target exports (checked by the tests): the constants, then the functions.
INTERFACE = (
    *ATTRIBUTES,
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
    "billing",
    "after_failure",
    "dashboard",
    "node_metrics",
    "efa_counters",
)


def check_action(action: str, allowed: tuple[str, ...] = STEP_ACTIONS) -> str:
    """``action`` when it is one of ``allowed``, else a ValueError naming them."""
    if action not in allowed:
        raise ValueError(f"unknown action {action!r}: use {', '.join(allowed)}")
    return action


class Target(Protocol):
    """The functions a target exports. Each step module receives one and calls nothing else."""

    #: ``"local"`` or ``"aws"``: for display and for ``for_settings``; no code outside ``targets/`` compares it.
    NAME: str
    #: The target whose commands this one stands in for (``"aws"`` for local: the notebooks show the aws path's
    #: commands first, then this machine's), or None.
    STANDS_IN_FOR: str | None
    #: Whether ``teardown(nodegroup_only=True)`` can delete the GPU node group alone (``cluster down
    #: --nodegroup-only``); a target without node groups ignores that option of the CLI.
    NODEGROUP_ONLY_DOWN: bool
    #: Whether the training workers run in this machine's Python environment (what is installed here, they have).
    WORKERS_USE_THIS_ENVIRONMENT: bool

    def where(self, settings: Settings) -> str:
        """One line saying what the run is on (the first line of every notebook)."""

    def preflight(self, settings: Settings, *, quota: bool = True) -> PreflightResult:
        """Before anything else: what this target needs on this machine (tools and their versions, credentials,
        on AWS the region's vCPU quota against the node groups; ``quota=False`` skips the quota), one row each."""

    def capacity(
        self,
        settings: Settings,
        *,
        probe: bool = False,
        assume_yes: bool = False,
        regions: Any = None,
        prices: Any = None,
    ) -> StepResult:
        """01: is there room for the job (machine resources, or offerings/quotas/placement on AWS)? The result
        also has ``as_dict()`` (the CLI's ``--json``); ``prices``: a price override file (aws)."""

    def cluster(self, settings: Settings, action: str = "up", *, assume_yes: bool = False) -> StepResult:
        """02: ``up`` | ``status`` | ``plan`` | ``down``. ``plan`` creates nothing; every action is idempotent."""

    def devices(self, settings: Settings, *, assume_yes: bool = False) -> StepResult:
        """03: the devices each worker node offers (device plugins on AWS), allocatable, diagnosed if not."""

    def raycluster(self, settings: Settings, *, assume_yes: bool = False) -> StepResult:
        """04: the RayCluster rendered and ready (the local cluster stands in for it on local)."""

    def job_server(self, settings: Settings) -> contextlib.AbstractContextManager[str]:
        """05: a context manager yielding the Ray Jobs API address (a port-forward on AWS), closed on exit."""

    def job_defaults(self, settings: Settings) -> JobDefaults:
        """05: how the job runs here: GPUs or not, where checkpoints go, transport environment."""

    def expected_transport(self, settings: Settings, gpus: int | None = None) -> str:
        """06/07: what NCCL should carry between ranks here: ``efa``, ``p2p``, ``socket`` or ``none`` (gloo on CPU
        workers); ``gpus``: the GPUs per worker the job used. A setting ``nccl.expect`` other than ``auto`` wins."""

    def worker_logs(self, settings: Settings, marker: str) -> dict[str, str]:
        """06/07: the training workers' own log text for one job (NCCL prints there), by source name."""

    def infra_criteria(self, settings: Settings) -> list[tuple[str, bool | None, str]]:
        """06: infrastructure rows (name, ok, evidence); ``ok`` None marks a row that does not apply here."""

    def benchmark_variants(self, settings: Settings) -> list[dict[str, Any]]:
        """07: the transport variants to compare: dicts of label, expect (transport) and env."""

    def teardown(self, settings: Settings, *, assume_yes: bool = False, nodegroup_only: bool = False) -> StepResult:
        """08: remove what the tutorial created, in reverse order, verified by listing what is left.
        ``nodegroup_only``: the GPU node group alone (only where ``NODEGROUP_ONLY_DOWN``; else a ValueError)."""

    def worker_node_count(self, settings: Settings) -> int:
        """06: how many worker nodes the settings ask for (the GPU node group, or the worker raylets)."""

    def plugins_action(
        self, settings: Settings, action: str = "up", *, assume_yes: bool = False, timeout_s: float | None = None
    ) -> StepResult:
        """03 from the CLI: one of :data:`PART_ACTIONS` on the device plugins (``up`` is :meth:`devices`);
        ``timeout_s`` None: the target's own wait."""

    def kuberay_action(
        self, settings: Settings, action: str = "up", *, assume_yes: bool = False, timeout_s: float | None = None
    ) -> StepResult:
        """04 from the CLI: one of :data:`PART_ACTIONS` on the KubeRay operator and the RayCluster (``up`` is
        :meth:`raycluster`); ``timeout_s`` None: the target's own wait."""

    def cluster_missing(self, settings: Settings) -> str | None:
        """Before the notebooks after 02 run: what is missing, when this target can tell without cost (``"the
        local Ray cluster, and none is running on ..."``); None when the cluster runs or it cannot tell cheaply."""

    def memory_plan(self, settings: Settings) -> MemoryPlan:
        """05: the memory plan the job runs with, for the workers' GPUs here."""

    def equivalent_commands(self, settings: Settings, step: str) -> list[tuple[str, str]]:
        """(purpose, command) pairs a person could type instead of ``step`` (one of :data:`COMMAND_STEPS`) on
        this target, with these settings' values; empty when there are none."""

    def billing(self, settings: Settings) -> BillingResult:
        """``raytrain-tutorial status``: what of this tutorial bills now, read from where it runs (on AWS the live
        account: cluster, node groups and their instance counts, NAT gateways, bucket), its cost per hour and the one
        command that stops it; ``ok`` when nothing bills."""

    def after_failure(self, settings: Settings) -> BillingResult:
        """After a step stopped with an error (``raytrain-tutorial run``, a notebook cell): :meth:`billing`, and the
        teardown too where the target's setting asks for it (aws: ``aws.teardown_on_failure``), in ``teardown``."""

    def dashboard(self, settings: Settings) -> contextlib.AbstractContextManager[DashboardAccess]:
        """05: the Ray dashboard of the learner's own cluster, open while the context lasts (a port-forward on AWS):
        its address, the token that logs in (never printed) and how a person opens it."""

    def node_metrics(self, settings: Settings) -> dict[str, str]:
        """05/07: each Ray node's Prometheus metrics page (Ray's own metrics export port), by node; nodes that did
        not answer are left out."""

    def efa_counters(self, settings: Settings) -> dict[str, dict[str, int]]:
        """07: each GPU node's EFA hardware counters (``"<device>/<port>/<counter>": value``), by node; empty where
        there is no EFA."""

    def attendee_state(self, settings: Settings) -> dict[str, str]:
        """``handout status``: a workshop attendee's Ray cluster (``cluster``) and last job (``job``) as the cluster
        reports them; empty where only the attendee's folder knows (read from disk instead)."""

    def create_namespace(self, settings: Settings, objects: list[dict], *, uid: str = "") -> tuple[bool, str, str]:
        """``handout namespaces``: create the attendee's namespace on a shared cluster with ``objects`` in it,
        never taking over one that exists (unless it is the one of UID ``uid`` the hand-out created); (done, what
        happened, its UID)."""

    def remove_namespace(
        self, settings: Settings, *, assume_yes: bool = False, uid: str = "", objects: list[dict] = ()
    ) -> tuple[bool, str]:
        """``handout teardown``: remove the attendee's namespace on a shared cluster, only the one the hand-out
        created (UID ``uid``, recorded by ``handout namespaces``), and the cluster-scoped ``objects`` of the
        hand-out's record that still carry its labels; (done, what happened)."""

    def workshop_host(self, attendees: list[Settings]) -> tuple[list[dict[str, Any]], dict[str, float]] | None:
        """``handout`` for attendees on this target who all run on one host (the facilitator's JupyterHub host):
        what each attendee's cluster takes there (``cpus``, ``memory_gib``, ``gpus``, ``ports``, ``disk_gib``) and
        the host's capacity (``cpus``, ``memory_gib``, ``gpus``, ``disk_gib``); None where attendees' clusters run
        elsewhere (a cloud: the hand-out plans that cluster instead)."""

    def attendee_access(
        self, settings: Settings, action: str = "status", *, request: dict | None = None
    ) -> tuple[bool | None, str]:
        """``handout namespaces|status|teardown``: the attendee's access to the shared cluster as the hand-out's
        ``request`` (its record) asks: ``create`` it, say whether it is there (``status``), or ``remove`` it, only
        while it carries the hand-out's tags; (done, what happened), done None where a status could not be read."""

    def attendee_storage(
        self, settings: Settings, action: str = "status", *, facilitator: Settings | None = None
    ) -> tuple[bool | None, str]:
        """``handout storage|status|teardown``: give the attendee's pods the facilitator's checkpoint storage, kept
        to their own namespace (``share``, with the ``facilitator``'s settings), say whether they have it
        (``status``), or remove what ``share`` created (``remove``); (done, what happened), done None where a status
        could not be read."""


# --------------------------------------------------------------------------------------------------------------
# Shared result types
# --------------------------------------------------------------------------------------------------------------


@runtime_checkable
class StepResult(Protocol):
    """What every step returns: whether it succeeded, and a plain-text report."""

    @property
    def ok(self) -> bool: ...

    def show(self) -> None: ...


@dataclass
class BillingResult:
    """What bills now (see :meth:`Target.billing`): one row per billable resource, the total per hour, the command
    that stops it all; after a failure, the teardown's own result when it ran."""

    #: Where it was read, e.g. "AWS account 123456789012, us-west-2".
    where: str
    #: (resource, how many / state, USD per hour or a note) per billable resource.
    rows: list[tuple[str, str, str]] = field(default_factory=list)
    #: The rows' sum in USD per hour (what has no hourly price is left out and said in ``notes``).
    per_hour: float = 0.0
    #: The one command that stops the billing.
    stop_command: str = ""
    notes: list[str] = field(default_factory=list)
    #: What could not be read (then the listing may be incomplete).
    unreadable: list[str] = field(default_factory=list)
    #: The teardown's result when :meth:`Target.after_failure` ran it.
    teardown: StepResult | None = None

    @property
    def ok(self) -> bool:
        return not self.rows and not self.unreadable

    def show(self) -> None:
        if self.teardown is not None:
            print("teardown after the failure (the setting asks for it):")
            self.teardown.show()
        if self.ok:
            print(f"still billing ({self.where}): nothing of this tutorial")
            return
        title = f"STILL BILLING ({self.where}): about ${self.per_hour:.2f}/h until you stop it"
        table(self.rows, ["resource", "count / state", "USD per hour"], title=title, max_width=90)
        for line in self.unreadable:
            print(f"not read: {line}")
        for line in self.notes:
            print(f"note: {line}")
        if self.stop_command:
            print(f"stop it: {self.stop_command}")


@dataclass
class DashboardAccess:
    """How to open the Ray dashboard of the learner's cluster (see :meth:`Target.dashboard`)."""

    #: The address a browser on this machine opens (while the context lasts).
    url: str
    #: The token the dashboard's login asks for; None where the cluster asks for none. Never printed.
    token: str | None = None
    #: (what, command or address) a person follows to open it themselves, without printing the token.
    steps: list[tuple[str, str]] = field(default_factory=list)

    def __repr__(self) -> str:  # the token stays out of every repr, log and notebook output
        return f"DashboardAccess(url={self.url!r}, token={'<set>' if self.token else None}, steps={self.steps!r})"


class JobDefaults:
    """How the training job runs on a target (see :meth:`Target.job_defaults`)."""

    def __init__(
        self,
        *,
        use_gpu: bool | str,
        storage_path: str | None,
        env: dict[str, str] | None = None,
        python: str = "python",
    ):
        #: True / False, or ``"auto"``: the job's driver decides from the cluster's resources.
        self.use_gpu = use_gpu
        #: Where Ray Train writes checkpoints (None: the run's own folder on this machine).
        self.storage_path = storage_path
        #: Environment variables the target adds for the driver and the workers.
        self.env = dict(env or {})
        #: The interpreter that runs the job's entrypoint on the cluster (the raylets' own on local; the image's
        #: ``python`` on aws), so the job never depends on whichever ``python`` comes first on PATH.
        self.python = python

    def __repr__(self) -> str:
        return (
            f"JobDefaults(use_gpu={self.use_gpu!r}, storage_path={self.storage_path!r}, env={self.env!r}, "
            f"python={self.python!r})"
        )


#: A requirement's status: met, or why not (``unknown``: it could not be checked; it does not stop anything).
REQUIREMENT_STATUSES = ("ok", "MISSING", "TOO OLD", "TOO NEW", "TOO FAR", "FAILED", "SHORT", "unknown")


@dataclass
class Requirement:
    """One row of the preflight: what is needed, what was found, and the fix when they differ."""

    what: str
    found: str
    needed: str
    status: str
    fix: str = ""
    #: False: the path works without it (the row warns, it never stops anything).
    required: bool = True

    def __post_init__(self) -> None:
        if self.status not in REQUIREMENT_STATUSES:
            raise ValueError(f"status {self.status!r} is not one of {REQUIREMENT_STATUSES}")

    @property
    def blocks(self) -> bool:
        """True when this row stops the run: required, checked, and not met."""
        return self.required and self.status not in ("ok", "unknown")

    def status_text(self) -> str:
        return self.status if self.required or self.status == "ok" else f"{self.status} (optional)"


@dataclass
class PreflightResult:
    """The preflight's table; ``ok`` when no required row failed."""

    target: str
    rows: list[Requirement] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not any(r.blocks for r in self.rows)

    def failed(self) -> list[Requirement]:
        return [r for r in self.rows if r.blocks]

    def summary(self) -> str:
        """One line: OK, or each failed row (its fix is under the table)."""
        if self.ok:
            return f"preflight ({self.target}): OK"
        failed = "; ".join(f"{r.what}: {r.status} (found {r.found}; needs {r.needed})" for r in self.failed())
        return f"preflight ({self.target}) failed: {failed}"

    def as_dict(self) -> dict[str, Any]:
        return dict(target=self.target, ok=self.ok, rows=[dict(vars(r), blocks=r.blocks) for r in self.rows])

    def show(self) -> None:
        """The table (what, found, needed, status), then the fix of every row that is not ok, then the verdict."""
        print(
            wrapped_table(
                [(r.what, r.found, r.needed, r.status_text()) for r in self.rows],
                ["needed", "found", "needs", "status"],
                (24, 36, 26, 10),
                title=f"What the {self.target} path needs on this machine",
            )
        )
        for r in self.rows:
            if r.status != "ok" and r.fix:
                print(f"Fix {r.what}: {r.fix}")
        print(self.summary())


@dataclass
class KubeRayResult:
    """The KubeRay operator and the RayCluster (or what stands in for them)."""

    target: str
    action: str
    ok: bool
    message: str = ""
    problems: list[str] = field(default_factory=list)
    diagnosis: list[str] = field(default_factory=list)
    pods: list[dict[str, Any]] = field(default_factory=list)
    mapping: list[tuple[str, str, str]] = field(default_factory=list)
    manifest_yaml: str = ""
    install_method: str = ""
    state: str = ""
    deleted: list[tuple[str, str]] = field(default_factory=list)
    elapsed_s: float = 0.0

    def pod_rows(self) -> list[tuple]:
        return [
            (p["pod"], p["role"], p["phase"], "yes" if p["ready"] else "no", p["node"], p["instance_type"], p["zone"])
            for p in self.pods
        ]

    def show(self, *, manifest: bool = True) -> None:
        """The step's result; ``manifest=False`` leaves out the abridged RayCluster (a notebook that showed it
        already), naming where it is written in full instead."""
        print(
            f"KubeRay ({self.target}, {self.action}): {'OK' if self.ok else 'NOT OK'}"
            + (f" - {self.message}" if self.message else "")
        )
        if self.install_method:
            print(f"  operator installed with: {self.install_method}")
        if self.state:
            print(f"  RayCluster state: {self.state}")
        if self.manifest_yaml and manifest:
            print("RayCluster manifest (abridged; `raytrain-tutorial render --out DIR` writes it in full):")
            print(self.manifest_yaml.rstrip())
        elif self.manifest_yaml:
            print("RayCluster manifest: as shown above (`raytrain-tutorial render --out DIR` writes it in full)")
        if self.mapping:
            print(
                wrapped_table(
                    self.mapping,
                    ["RayCluster manifest", "local stand-in", "found"],
                    (42, 36, 22),
                    title="What stands in for each part of the manifest on this machine",
                )
            )
        if self.pods:
            table(
                self.pod_rows(),
                ["pod", "role", "phase", "ready", "node", "instance type", "zone"],
                title="Pod placement",
            )
        if self.deleted:
            table(self.deleted, ["object", "state"], title="Teardown (verified by listing)")
        for problem in self.problems:
            print(f"  PROBLEM: {problem}")
        for line in self.diagnosis:
            print(f"  DIAGNOSIS: {line}")


@dataclass
class PluginsResult:
    """The device plugins and the devices each node offers (or the local raylets' devices)."""

    target: str
    action: str
    ok: bool
    message: str = ""
    nodes: list[dict[str, Any]] = field(default_factory=list)
    diagnosis: list[str] = field(default_factory=list)
    install_method: str = ""
    daemonsets: list[dict[str, Any]] = field(default_factory=list)
    deleted: list[tuple[str, str]] = field(default_factory=list)
    elapsed_s: float = 0.0
    #: aws: per GPU node, the plugin DaemonSet(s) whose pods run there, per resource ("nvidia", "efa")
    serving: list[dict[str, Any]] = field(default_factory=list)
    #: why the plugin that serves EFA is the one it is (what it replaced)
    notes: list[str] = field(default_factory=list)

    def show(self) -> None:
        print(
            f"device plugins ({self.target}, {self.action}): {'OK' if self.ok else 'NOT OK'}"
            + (f" - {self.message}" if self.message else "")
        )
        if self.install_method:
            print(f"  installed with: {self.install_method}")
        if self.target == "local" and self.nodes:
            table(
                [(n["node"], n["role"], n["gpus"], n["backend"], n["train_slots"], n["state"]) for n in self.nodes],
                ["node", "role", "GPUs", "backend", "train slots", "state"],
                title="Devices and collective backends per local node (no device plugins locally)",
            )
        elif self.nodes:
            table(
                [
                    (n["name"], n["instance_type"], n["zone"], n["gpu_str"], n["efa_str"], n["verdict"])
                    for n in self.nodes
                ],
                ["node", "instance type", "zone", "nvidia.com/gpu", "vpc.amazonaws.com/efa", "verdict"],
                title="Allocatable on the GPU nodes",
            )
        if self.daemonsets:
            table(
                [
                    (d["name"], d.get("owner", ""), d["desired"], d["ready"], d["available"], d.get("image", ""))
                    for d in self.daemonsets
                ],
                ["DaemonSet (kube-system)", "installed by", "desired", "ready", "available", "image"],
            )
        if self.serving:
            table(
                [(r["node"], r["nvidia"], r["efa"]) for r in self.serving],
                ["GPU node", "nvidia.com/gpu served by", "vpc.amazonaws.com/efa served by"],
                title="Which device plugin serves each GPU node (exactly one per resource)",
            )
        for line in self.notes:
            print(f"  NOTE: {line}")
        if self.deleted:
            table(self.deleted, ["object", "state"], title="Teardown (verified by listing)")
        for line in self.diagnosis:
            print(f"  DIAGNOSIS: {line}")
