"""Step 01's results on aws: one row per AZ offering the GPU type, the probes, and the report that
:func:`.placement.capacity` returns (its ``show()`` prints the tables; ``as_dict()`` is what the CLI's
``--json`` prints)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from ....clients.aws import Signal
from ....core.tables import table
from ....plan import cost
from ....plan.memory import MemoryPlan
from .quotas import QuotaState
from .region_scan import InstanceFacts

#: How many ranked AZs show() prints.
SHOW_ROWS = 15


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
