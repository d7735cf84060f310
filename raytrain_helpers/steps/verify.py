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
from ..clients.rayjobs import JobRun, JobStatusError, JobUnknownError
from ..core.constants import GIB, SUCCESS_RE
from ..core.criteria import Criteria
from ..core.settings import Settings
from ..core.tables import human_bytes
from ..plan.memory import MemoryPlan, model_config, plan_for
from ..present.shown import Shown
from ..targets import for_settings
from ..worker.train import restore_check
from . import evidence, progress
from .completions import check_completions, show_generations
from .completions import generate as generate  # 06 and scripts call rt.steps.verify.generate
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
    generations: dict | None = None

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
    check_model: bool = True,
    infra: list | None = None,
    status_now: tuple | None = None,
) -> Verification:
    """Check the last job of the run against every criterion that applies to the target (``check_model=False``:
    the exported model is not loaded and continued, and its row is left out). ``infra`` and ``status_now``: the
    infrastructure rows and the job's status on the cluster as read earlier (the saved evidence), instead of
    reading them now."""
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
    for name, ok, why in target.infra_criteria(settings) if infra is None else infra:
        crit.add(name, ok, why)
    want_nodes = target.worker_node_count(settings)
    head_ids = check_nodes(crit, run, want_nodes)
    check_job(crit, run, *(job_status_now(settings, run) if status_now is None else status_now))
    world = check_ranks(crit, run)
    placement = check_placement(crit, run, head_ids, want_nodes)
    check_restarts(crit, run)
    check_loss(crit, run)
    check_learned(crit, run)
    generations = check_completions(crit, settings, run) if check_model else None
    check_checkpoint(crit, settings, run, check_restore)
    plan = plan_for(
        settings,
        world or 1,
        on_gpu=on_gpu(run),
        batch_size=_config_value(run, "batch_size"),
        kernels=ran_kernels(run),
    )
    check_memory(crit, run, plan)
    check_transport(crit, target.expected_transport(settings, 1 if on_gpu(run) else 0), audit, audit_error)
    check_audit_world(crit, audit, world)
    return Verification(crit, run=run, plan=plan, audit=audit, placement=placement, generations=generations)


def ran_kernels(run: JobRun | None) -> str | None:
    """The kernels the workers really used (their summaries say), else what the job was planned with."""
    if run is None:
        return None
    ranks = [r.get("kernels") for r in run.ranks or [] if r.get("kernels")]
    cfg = run.job_config
    return ranks[0] if ranks else (cfg.planned_kernels or cfg.kernels if cfg else None)


def _config_value(run: JobRun | None, name: str) -> Any:
    """A field of the job's config (``JobConfig.<name>``); None when the run or its config is not known."""
    cfg = run.job_config if run else None
    return getattr(cfg, name) if cfg else None


def dead_worker_nodes(run: JobRun) -> list[str]:
    """Worker nodes the job's driver saw dead at its end, as ``<node id prefix> (<host>)``."""
    return [
        f"{n['node_id'][:12]} ({n.get('host') or '?'})"
        for n in run.result.get("nodes", [])
        if not n.get("is_head") and not n.get("alive")
    ]


def check_nodes(crit: Criteria, run: JobRun, want: int = 1) -> set[str]:
    """The head and the ``want`` worker nodes the settings ask for were alive when the job ended; returns the head's
    node ids. Dead worker nodes are named."""
    nodes = run.result.get("nodes", [])
    head_ids = {n["node_id"] for n in nodes if n.get("is_head")}
    workers = [n for n in nodes if not n.get("is_head") and n.get("alive")]
    dead = dead_worker_nodes(run)
    crit.add(
        "head up, worker nodes running",
        bool(head_ids) and len(workers) >= want,
        f"{len(head_ids)} head, {len(workers)}/{want} worker node(s) alive when the job ended"
        + (f"; dead: {', '.join(dead)}" if dead else ""),
    )
    return head_ids


def job_status_now(settings: Settings, run: JobRun) -> tuple[str | None, str | None, bool]:
    """(status, None, False) as the cluster reports it now, or (None, why the cluster cannot tell, whether it
    answered but does not know the job: a cluster started after the job ran)."""
    try:
        return live_status(settings, run.submission_id), None, False
    except JobUnknownError as e:
        return None, str(e), True
    except JobStatusError as e:
        return None, str(e), False


def check_job(
    crit: Criteria, run: JobRun, live: str | None, unavailable: str | None = None, unknown: bool = False
) -> None:
    """The job SUCCEEDED, as recorded and as the cluster reports it now (a status the cluster cannot give fails, with
    the reason; a cluster started after the job, which does not know it, leaves the record to say). A failed job
    whose driver saw worker nodes dead names them."""
    dead = dead_worker_nodes(run) if run.status != "SUCCEEDED" else []
    if live:
        now = f" (cluster now says {live})"
    elif unknown:
        now = " (recorded by 05_train when it ended; the cluster running now was started after it and does not know it)"
    else:
        now = f" (recorded by 05_train; {unavailable})"
    crit.add(
        "job SUCCEEDED",
        run.status == "SUCCEEDED" and run.result.get("ok", False) and (live == "SUCCEEDED" or unknown),
        f"{run.status}"
        + now
        + (f"; error: {run.result.get('error')}" if run.result.get("error") else "")
        + (f"; worker node(s) died during the run: {', '.join(dead)}" if dead else ""),
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


def check_placement(crit: Criteria, run: JobRun, head_ids: set[str], nodes: int = 2) -> list[tuple[int, str, str]]:
    """Training ranks spread over as many worker nodes as the settings ask for (``nodes``, or fewer when there are
    fewer ranks) and none on the head; returns (rank, node, kind) rows."""
    rank_nodes = {r["rank"]: r["node_id"] for r in run.ranks}
    used = set(rank_nodes.values())
    on_head = sorted(r for r, n in rank_nodes.items() if n in head_ids)
    world = run.metrics.get("world_size") or len(rank_nodes)
    want = max(1, min(world or nodes, nodes))
    crit.add(
        f"workers spread over >= {want} worker nodes, none on the head",
        bool(head_ids) and len(used - head_ids) >= want and not on_head,
        f"{len(run.ranks)} ranks on {len(used - head_ids)} worker node(s)"
        + (f"; ranks {on_head} on the head" if on_head else "; none on the head"),
    )
    return [(r, rank_nodes[r][:12], "HEAD" if rank_nodes[r] in head_ids else "worker") for r in sorted(rank_nodes)]


def _spans(steps: list[int]) -> str:
    """``[1, 2, 3, 5]`` -> ``1-3, 5``."""
    out: list[str] = []
    for s in sorted(set(steps)):
        if out and int(out[-1].split("-")[-1]) == s - 1:
            out[-1] = f"{out[-1].split('-')[0]}-{s}"
        else:
            out.append(str(s))
    return ", ".join(out)


def check_restarts(crit: Criteria, run: JobRun) -> None:
    """Every step of the run was trained, also across worker-group restarts (``train.max_failures``): the steps
    printed by all the job's worker groups cover the run from where its first group started to the last step."""
    name = "every step trained, failures recovered"
    attempts = run.attempts
    total = int(run.metrics.get("steps") or _config_value(run, "steps") or 0)
    if not attempts or not total:
        crit.add(name, None, na_reason="n/a: no worker marker or step lines in the job's log")
        return
    first = attempts[0]["resumed_from"] or 0
    seen = {s for a in attempts for s in a["steps"]}
    missing = sorted(set(range(first + 1, total + 1)) - seen)
    failures = len(attempts) - 1
    if failures:
        starts = [str(a["resumed_from"] or 0) for a in attempts[1:]]
        how = f"resumed after {failures} failure{'s' if failures > 1 else ''} from step {', '.join(starts)}"
    else:
        how = "no worker failure" + (f", resumed from step {first} (an earlier job)" if first else "")
    crit.add(
        name,
        not missing,
        f"{how}; steps {_spans(list(seen)) or 'none'} of {total} trained"
        + (f"; missing {_spans(missing)}" if missing else ""),
    )


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
            rc = restore_check(ckpt, _config_value(run, "model") or model_config(settings))
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


def check_audit_world(crit: Criteria, audit: Any, world: int) -> None:
    """The NCCL logs audited are this job's: their world communicator has the job's number of ranks (a log of
    another job, e.g. 8 ranks for a 2-rank job, fails). No row without an audit (CPU: gloo)."""
    if audit is None:
        return
    comm = getattr(audit, "world", None)
    size = comm.size if comm is not None else 0
    crit.add(
        f"NCCL audit covers the job's {world} ranks",
        bool(world) and size == world,
        f"world communicator in the audited NCCL logs: {size} ranks; the job: {world} ranks",
    )


def worker_logs(settings: Settings, run: JobRun) -> dict[str, str]:
    """The training workers' own log files for this run (NCCL prints there, not on the driver)."""
    marker = _config_value(run, "marker") or (run.result or {}).get("marker")
    if not marker:
        return {}
    return for_settings(settings).worker_logs(settings, marker)


def expected_for(settings: Settings, run: JobRun) -> str:
    """The transport the run's NCCL should have used here (``none``: CPU workers, gloo)."""
    return for_settings(settings).expected_transport(settings, 1 if on_gpu(run) else 0)


def audit_run(settings: Settings, run: JobRun, logs: str | dict | None = None):
    """Audit the NCCL transport of a run; None when there is nothing to audit (CPU/gloo)."""
    expect = expected_for(settings, run)
    if expect == "none":
        return None
    text = logs if logs is not None else worker_logs(settings, run)
    return nccl.audit(text, expect=expect)


def read_evidence(settings: Settings, job: JobRun, run_name: str | None = None) -> tuple[Any, str | None, list, tuple]:
    """Read what 06 judges from the cluster (the workers' logs, the infrastructure rows, the job's status there),
    save it at once in ``runs/<run>/evidence/train`` (:mod:`.evidence`), and audit the logs: (audit, error, the
    infrastructure rows, the job's status now)."""
    target = for_settings(settings)
    logs: dict[str, str] = {}
    audit, error = None, None
    try:
        logs = worker_logs(settings, job)
    except Exception as e:  # noqa: BLE001 - logs unreachable (API down, exec forbidden): a failed check
        error = f"could not collect the workers' NCCL logs: {type(e).__name__}: {e}"
    infra = target.infra_criteria(settings)
    now = job_status_now(settings, job)
    evidence.save(
        settings,
        "train",
        logs,
        run_name=run_name,
        job=job,
        target=target.NAME,
        expected=expected_for(settings, job),
        infra=infra,
        status_now=now,
        audit_error=error,
    )
    if error is None:
        audit = audit_run(settings, job, logs)
    return audit, error, infra, now


def run(
    settings: Settings, *, run_name: str | None = None, check_restore: bool = True, check_model: bool = True
) -> Verification:
    """06_verify's entry point: collect the run's worker logs (saved in the run's folder as they are read), audit
    them, check every criterion."""
    job = load_last(settings, run_name)
    audit, error, infra, now = None, None, None, None
    if job is not None:
        audit, error, infra, now = read_evidence(settings, job, run_name)
    v = verify(
        settings,
        job,
        run_name=run_name,
        check_restore=check_restore,
        audit=audit,
        audit_error=error,
        check_model=check_model,
        infra=infra,
        status_now=now,
    )
    if run_name is None or run_name == settings.run_name:  # the verdict of this run, where status reads it
        progress.record_verdict(settings, v.criteria, submission_id=getattr(job, "submission_id", "") or "")
    return v


def from_evidence(
    settings: Settings, run_name: str | None = None, *, check_restore: bool = True, check_model: bool = True
) -> Verification:
    """06's table rebuilt from the run's folder alone, with the cluster gone: the job's record, the workers' logs,
    the infrastructure rows and the job's status as saved when they were read (``runs/<run>/evidence/train``), the
    checkpoint and the exported model where they are kept on this machine."""
    ev = evidence.saved(settings, "train", run_name)
    if ev is None or ev.job is None:
        crit = Criteria(f"verification of run {run_name or settings.run_name!r} from its saved evidence")
        crit.add(
            "evidence saved by 06 or 08",
            False,
            f"no {evidence.FOLDER}/train under runs/{run_name or settings.run_name}",
        )
        return Verification(crit)
    job, error = ev.job, ev.manifest.get("audit_error")
    audit = None if error or ev.expected == "none" else nccl.audit(ev.logs, expect=ev.expected)
    return verify(
        settings,
        job,
        run_name=run_name,
        check_restore=check_restore,
        audit=audit,
        audit_error=error,
        check_model=check_model,
        infra=[tuple(r) for r in ev.manifest.get("infra") or []],
        status_now=tuple(ev.manifest.get("status_now") or (None, "not read", False)),
    )


#: "The model learned": the mean of the last evals is at least this fraction below the first eval.
LEARNED_MARGIN = 0.05
#: How many of the last evals are averaged.
LEARNED_LAST_EVALS = 2


def learned(evals: list, data: str | None, margin: float = LEARNED_MARGIN) -> tuple[bool | None, str]:
    """(passed, evidence) of "the model learned" from ``(step, eval_loss)`` pairs; None (n/a) on random data."""
    if data == "random":
        return None, "n/a: random tokens (throughput data): there is nothing to learn"
    evals = [(int(st), float(x)) for st, x in evals or [] if math.isfinite(float(x))]
    if len(evals) < 2:
        return False, f"{len(evals)} eval(s) recorded: need at least 2 (set train.eval_every, or more steps)"
    (first_step, first), last = evals[0], evals[1:][-LEARNED_LAST_EVALS:]
    mean_last = sum(x for _, x in last) / len(last)
    ok = mean_last <= first * (1 - margin)
    steps = ", ".join(str(st) for st, _ in last)
    return ok, (
        f"eval loss {first:.3f} at step {first_step} -> {mean_last:.3f} (mean at step {steps}): "
        f"{(1 - mean_last / first) * 100:.0f} % lower, needs >= {margin * 100:.0f} % ({data or 'unknown'} data)"
    )


def check_learned(crit: Criteria, run: JobRun, margin: float = LEARNED_MARGIN) -> None:
    """The model learned: the held-out eval loss fell by ``margin`` (n/a on random data)."""
    evals = run.metrics.get("evals") or [(st["step"], st["eval_loss"]) for st in run.steps if "eval_loss" in st]
    data = run.metrics.get("data") or _config_value(run, "data")
    if not evals and _config_value(run, "eval_every") == 0:
        ok, evidence = None, "n/a: train.eval_every is 0, so the job held out no evals to compare"
    else:
        ok, evidence = learned(evals, data, margin)
    crit.add(f"the model learned (held-out eval loss >= {margin * 100:.0f} % lower)", ok, evidence)


def show_model(v: Verification, settings: Settings, prompts: list[str] | str | None = None) -> dict | None:
    """06 section 5: the before/after table. Your ``prompts`` are continued by the exported model now; without
    them, the held-out generations the criterion scored are shown (or made, where the criterion made none)."""
    if prompts or v.generations is None:
        return generate(settings, prompts, run=v.run)
    g = v.generations
    show_generations(g["rows"], g, f"{settings.run_name}/model")
    return g


def captured_transports(v: Verification) -> Shown:
    """06 section 4 when the run printed no NCCL lines (CPU workers, gloo): the logs captured on 2 x H200, a healthy
    run and a socket fallback, audited side by side with the lines that give each away (:mod:`..nccl.reference`)."""
    if v.audit is not None:
        return Shown(
            f"this run printed NCCL lines: its own audit is above ({v.audit.verdict}); the captured logs: "
            "rt.nccl.reference.side_by_side()"
        )
    return Shown(nccl.reference.side_by_side())


def efa_example(settings: Settings) -> Shown:
    """06 section 4: synthetic EFA and fallback lines for two nodes of ``aws.gpu_node_type`` (``/GDRDMA`` only where
    that instance type has GPUDirect RDMA), labelled synthetic."""
    return Shown(nccl.examples.efa_example(settings.aws.gpu_node_type, settings.aws.gpus_per_node))
