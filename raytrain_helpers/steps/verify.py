"""06 · Verify: success is a table of checked criteria, not "exit 0".

Each criterion is checked from evidence: the job's record, every rank's summary, the placement of ranks on
nodes, the checkpoint reloaded in this process, the measured memory against the plan, and the NCCL transport of
every rank pair read from the workers' own logs. Rows that do not apply to the target say so instead of passing.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from .. import nccl
from ..clients.rayjobs import JobRun
from ..core.config import Settings
from ..core.constants import GIB, SUCCESS_RE
from ..core.criteria import Criteria
from ..core.tables import human_bytes
from ..plan.memory import MemoryPlan, plan_for
from ..targets import for_settings
from ..worker.train import restore_check
from .train import live_status, load_last, runs_dir


def success_ranks(logs: str) -> tuple[set[int], int]:
    """Ranks that printed SUCCESS (Ray may print a line twice: counted once) and the world size."""
    ranks, world = set(), 0
    for m in re.finditer(SUCCESS_RE, logs):
        ranks.add(int(m.group(1)))
        world = max(world, int(m.group(2)))
    return ranks, world


@dataclass
class Verification:
    """The criteria table, and the evidence behind it (the job, the memory plan, the audit, rank placement)."""

    criteria: Criteria
    run: Any = None
    plan: Any = None
    audit: Any = None
    placement: list = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.criteria.ok

    def show(self) -> None:
        self.criteria.show()

    def raise_if_failed(self) -> None:
        self.criteria.raise_if_failed()


def on_gpu(run: JobRun | None) -> bool:
    """Did the job's ranks run on GPUs?"""
    return any(str(r.get("device", "")).startswith("cuda") for r in (run.ranks if run else []))


def verify(
    settings: Settings,
    run: JobRun | None = None,
    *,
    run_name: str | None = None,
    check_restore: bool = True,
    audit: Any = None,
    audit_error: str | None = None,
) -> Verification:
    """Check the last job of the run against every criterion that applies to the target."""
    target = for_settings(settings)
    run = run or load_last(settings, run_name)
    crit = Criteria(f"verification of run {run_name or settings.run_name!r} on target {target.NAME!r}")
    if run is None:
        crit.add(
            "job recorded by 05_train",
            False,
            f"no job.json under {runs_dir(settings)}/{run_name or settings.run_name}: run 05_train first",
        )
        return Verification(crit)
    for name, ok, evidence in target.infra_criteria(settings):
        crit.add(name, ok, evidence)
    head_ids = check_nodes(crit, run)
    check_job(crit, run, live_status(settings, run.submission_id))
    world = check_ranks(crit, run)
    placement = check_placement(crit, run, head_ids)
    check_loss(crit, run)
    check_checkpoint(crit, settings, run, check_restore)
    plan = plan_for(settings, world or 1, on_gpu=on_gpu(run))
    check_memory(crit, run, plan)
    check_transport(crit, settings.expected_transport(1 if on_gpu(run) else 0), audit, audit_error)
    return Verification(crit, run=run, plan=plan, audit=audit, placement=placement)


def check_nodes(crit: Criteria, run: JobRun) -> set[str]:
    """The head and at least one worker node were alive when the job ran; returns the head's node ids."""
    nodes = run.result.get("nodes", [])
    head_ids = {n["node_id"] for n in nodes if n.get("is_head")}
    workers = [n for n in nodes if not n.get("is_head") and n.get("alive")]
    crit.add(
        "head up, worker nodes running",
        bool(head_ids) and len(workers) >= 1,
        f"{len(head_ids)} head, {len(workers)} worker node(s) alive when the job ran",
    )
    return head_ids


def check_job(crit: Criteria, run: JobRun, live: str | None) -> None:
    """The job SUCCEEDED, as recorded and as the cluster reports it now."""
    crit.add(
        "job SUCCEEDED",
        run.status == "SUCCEEDED" and run.result.get("ok", False) and live in (None, "SUCCEEDED"),
        f"{run.status}"
        + (f" (cluster now says {live})" if live else " (recorded by 05_train)")
        + (f"; error: {run.result.get('error')}" if run.result.get("error") else ""),
    )


def check_ranks(crit: Criteria, run: JobRun) -> int:
    """Every rank printed SUCCESS and sent its summary; returns the world size."""
    ranks = run.ranks
    world = run.metrics.get("world_size") or len(ranks)
    said, _ = success_ranks(run.logs)
    crit.add(
        "every rank reported SUCCESS",
        bool(world) and said == set(range(world)) and len(ranks) == world,
        f"{len(said)}/{world} ranks printed SUCCESS, {len(ranks)}/{world} summaries gathered",
    )
    return world


def check_placement(crit: Criteria, run: JobRun, head_ids: set[str]) -> list[tuple[int, str, str]]:
    """Training ranks spread over worker nodes and none on the head; returns (rank, node, kind) rows."""
    nodes = run.result.get("nodes", [])
    workers = [n for n in nodes if not n.get("is_head") and n.get("alive")]
    rank_nodes = {r["rank"]: r["node_id"] for r in run.ranks}
    used = set(rank_nodes.values())
    on_head = sorted(r for r, n in rank_nodes.items() if n in head_ids)
    want = min(2, len(workers)) if workers else 2
    crit.add(
        f"workers spread over >= {want} worker nodes, none on the head",
        bool(head_ids) and len(used - head_ids) >= want and not on_head,
        f"{len(run.ranks)} ranks on {len(used - head_ids)} worker node(s)"
        + (f"; ranks {on_head} on the head" if on_head else "; none on the head"),
    )
    return [(r, rank_nodes[r][:12], "HEAD" if rank_nodes[r] in head_ids else "worker") for r in sorted(rank_nodes)]


def check_loss(crit: Criteria, run: JobRun) -> None:
    """The loss is finite at every step and on every rank."""
    losses = run.metrics.get("losses") or []
    finite = bool(losses) and all(math.isfinite(x) for x in losses) and all(r.get("loss_finite") for r in run.ranks)
    crit.add(
        "loss finite on every rank",
        finite,
        f"{len(losses)} step(s), last {losses[-1]:.4f}" if losses else "no loss recorded",
    )


def check_checkpoint(crit: Criteria, settings: Settings, run: JobRun, check_restore: bool) -> None:
    """The latest checkpoint reloads into one process (DCP reshards), at the last step, all finite."""
    ckpt = run.result.get("checkpoint")
    if not check_restore:
        crit.add("checkpoint restorable", None, na_reason="skipped by the caller")
    elif ckpt and not str(ckpt).startswith(("s3://", "gs://")):
        try:
            rc = restore_check(ckpt, run.config.get("model") or settings.model_config_dict())
            crit.add(
                "checkpoint restorable",
                rc["ok"] and rc["step"] == run.metrics.get("steps"),
                f"step {rc['step']}: {rc['tensors']} tensors reloaded into one process, all finite",
            )
        except Exception as e:  # noqa: BLE001 - any failure to load is the finding
            crit.add("checkpoint restorable", False, f"{type(e).__name__}: {e}")
    else:
        crit.add("checkpoint restorable", bool(ckpt), f"{ckpt or 'no checkpoint'} (remote: listed, not loaded here)")


def check_memory(crit: Criteria, run: JobRun, plan: MemoryPlan) -> None:
    """Measured sharded state (and GPU peak) against the memory plan; throughput reported by every rank."""
    ranks = run.ranks
    if not ranks:
        return
    measured = max(r["state_bytes"]["total"] for r in ranks)
    planned = plan.state_per_device_gib * GIB
    # FSDP2 pads dim-0 shards: allow the padding of one row per tensor, and 10 %
    ok_mem = measured <= planned * 1.10 + 64 * 1024 and measured >= planned * 0.5
    ev = f"sharded state {human_bytes(measured)}/rank vs plan {human_bytes(planned)}"
    peak = max(r["peak_mem_bytes"] for r in ranks)
    if on_gpu(run):
        ok_mem = ok_mem and peak <= plan.peak_per_device_gib * GIB * 1.25 + GIB
        ev += f"; GPU peak {human_bytes(peak)} vs planned {plan.peak_per_device_gib:.2f} GiB"
    else:
        ev += f"; process peak RSS {human_bytes(peak)} (CPU: info only)"
    crit.add("measured memory vs the plan", ok_mem, ev)
    tps = sum(r["tokens_per_s"] for r in ranks)
    crit.add(
        "throughput reported by every rank",
        all(r["tokens_per_s"] > 0 for r in ranks),
        f"{tps:.0f} tokens/s total, {tps / len(ranks):.0f} tokens/s per rank",
    )


def check_transport(crit: Criteria, expect: str, audit: Any, audit_error: str | None) -> None:
    """NCCL used the expected transport between every rank pair (n/a on CPU: gloo)."""
    name = f"NCCL transport as expected ({expect}) for every rank pair"
    if audit_error:
        crit.add(name, False, audit_error)
    elif audit is not None:
        crit.add(name, audit.ok, getattr(audit, "summary", None) or str(getattr(audit, "verdict", "")))
    elif expect == "none":
        crit.add(
            "NCCL transport as expected for every rank pair",
            None,
            na_reason="n/a: CPU run, gloo over loopback (NCCL not used)",
        )
    else:
        crit.add(name, False, "no transport audit was run (NCCL logs not collected)")


def worker_logs(settings: Settings, run: JobRun) -> dict[str, str]:
    """The training workers' own log files for this run (NCCL prints there, not on the driver)."""
    marker = (run.config or {}).get("marker") or (run.result or {}).get("marker")
    if not marker:
        return {}
    return for_settings(settings).worker_logs(settings, marker)


def audit_run(settings: Settings, run: JobRun, logs: str | None = None):
    """Audit the NCCL transport of a run; None when there is nothing to audit (CPU/gloo)."""
    expect = settings.expected_transport(1 if on_gpu(run) else 0)
    if expect == "none":
        return None
    text = logs if logs is not None else worker_logs(settings, run)
    return nccl.audit(text, expect=expect)


def run(settings: Settings, *, run_name: str | None = None, check_restore: bool = True) -> Verification:
    """06_verify's entry point: collect the run's worker logs, audit them, check every criterion."""
    job = load_last(settings, run_name)
    audit, error = None, None
    if job is not None:
        try:
            audit = audit_run(settings, job)
        except Exception as e:  # noqa: BLE001 - logs unreachable (API down, exec forbidden): a failed check
            error = f"could not collect the workers' NCCL logs: {type(e).__name__}: {e}"
    return verify(settings, job, run_name=run_name, check_restore=check_restore, audit=audit, audit_error=error)
