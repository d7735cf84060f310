"""Plain-text tables, success criteria and plots shared by the notebooks and the CLI.

Tables are printed as plain text (no colour codes, fixed width) so that notebook outputs are stable and
nbval can compare them; plots go through matplotlib.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable, Sequence


from .core.criteria import FAIL, NA, PASS, Criteria, Criterion  # noqa: F401
from .core.tables import format_table, human_bytes, table  # noqa: F401


def describe(settings) -> None:
    """A short summary of what the settings ask for (first cell of every notebook)."""
    t = settings.train
    where = (f"local Ray cluster: head + {settings.local.worker_nodes} worker raylet(s)" if settings.target == "local"
             else f"EKS {settings.aws.cluster_name} in {settings.aws.region}: {settings.aws.gpu_node_count} x "
                  f"{settings.aws.gpu_node_type} ({settings.aws.gpus_per_node} GPUs each)")
    print(f"target {settings.target} | run {settings.run_name} | {where}")
    print(f"model {t.model_preset} | steps {t.steps} | seq_len {t.seq_len} | batch {t.batch_size}/worker | "
          f"workers {t.num_workers or 'all'} | Ray {settings.versions.ray_version} | image {settings.versions.dlc_image}")


# --------------------------------------------------------------------------------------------
# 06_verify: success is a list of checked criteria, not "exit 0"
# --------------------------------------------------------------------------------------------

SUCCESS_RE = r"\[train\] SUCCESS rank=(\d+)/(\d+)"


def success_ranks(logs: str) -> tuple[set[int], int]:
    """Ranks that printed SUCCESS (Ray may print a line twice: counted once) and the world size."""
    import re
    ranks, world = set(), 0
    for m in re.finditer(SUCCESS_RE, logs):
        ranks.add(int(m.group(1)))
        world = max(world, int(m.group(2)))
    return ranks, world


@dataclass
class Verification:
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


def verify(settings, run=None, *, run_name: str | None = None, check_restore: bool = True,
           audit: Any = None, audit_error: str | None = None) -> Verification:
    """Check the last job of the run against every criterion that applies to the target."""
    from . import capacity, jobs

    run = run or jobs.load_last(settings, run_name)
    crit = Criteria(f"verification of run {run_name or settings.run_name!r} on target {settings.target!r}")
    local = settings.target == "local"
    if run is None:
        crit.add("job recorded by 05_train", False, f"no job.json under {jobs.runs_dir(settings)}/"
                 f"{run_name or settings.run_name}: run 05_train first")
        return Verification(crit)

    # -- infrastructure rows (the reference sample's six criteria, exact) ------------------------
    aws_rows = _aws_infra_rows(settings) if not local else None
    if aws_rows is None:
        for name in ("GPUs allocatable on every GPU node", "EFA allocatable on every GPU node",
                     "EFA RDMA capability (fi_info -p efa)"):
            crit.add(name, None, na_reason="n/a on local (no Kubernetes device plugins)")
    else:
        for name, ok, ev in aws_rows:
            crit.add(name, ok, ev)

    nodes = run.result.get("nodes", [])
    head_ids = {n["node_id"] for n in nodes if n.get("is_head")}
    worker_nodes = [n for n in nodes if not n.get("is_head") and n.get("alive")]
    crit.add("head up, worker nodes running",
             bool(head_ids) and len(worker_nodes) >= 1,
             f"{len(head_ids)} head, {len(worker_nodes)} worker node(s) alive when the job ran")

    # -- the job ---------------------------------------------------------------------------------
    live = jobs.live_status(settings, run.submission_id)
    crit.add("job SUCCEEDED", run.status == "SUCCEEDED" and run.result.get("ok", False) and live in (None, "SUCCEEDED"),
             f"{run.status}" + (f" (cluster now says {live})" if live else " (recorded by 05_train)")
             + (f"; error: {run.result.get('error')}" if run.result.get("error") else ""))
    ranks = run.ranks
    world = run.metrics.get("world_size") or len(ranks)
    said, world_logged = success_ranks(run.logs)
    crit.add("every rank reported SUCCESS", bool(world) and said == set(range(world)) and len(ranks) == world,
             f"{len(said)}/{world} ranks printed SUCCESS, {len(ranks)}/{world} summaries gathered")

    # -- placement -------------------------------------------------------------------------------
    rank_nodes = {r["rank"]: r["node_id"] for r in ranks}
    used = set(rank_nodes.values())
    on_head = sorted(r for r, n in rank_nodes.items() if n in head_ids)
    placement = [(r, rank_nodes[r][:12], "HEAD" if rank_nodes[r] in head_ids else "worker") for r in sorted(rank_nodes)]
    want_nodes = min(2, len(worker_nodes)) if worker_nodes else 2
    crit.add(f"workers spread over >= {want_nodes} worker nodes, none on the head",
             bool(head_ids) and len(used - head_ids) >= want_nodes and not on_head,
             f"{len(ranks)} ranks on {len(used - head_ids)} worker node(s)"
             + (f"; ranks {on_head} on the head" if on_head else "; none on the head"))

    # -- numbers -----------------------------------------------------------------------------------
    import math as _m
    losses = run.metrics.get("losses") or []
    finite = bool(losses) and all(_m.isfinite(x) for x in losses) and all(r.get("loss_finite") for r in ranks)
    crit.add("loss finite on every rank", finite,
             f"{len(losses)} step(s), last {losses[-1]:.4f}" if losses else "no loss recorded")

    ckpt = run.result.get("checkpoint")
    if not check_restore:
        crit.add("checkpoint restorable", None, na_reason="skipped by the caller")
    elif ckpt and not str(ckpt).startswith(("s3://", "gs://")):
        try:
            from .train import restore_check
            rc = restore_check(ckpt, settings.model_config_dict() if not run.config.get("model")
                               else run.config["model"])
            crit.add("checkpoint restorable", rc["ok"] and rc["step"] == run.metrics.get("steps"),
                     f"step {rc['step']}: {rc['tensors']} tensors reloaded into one process, all finite")
        except Exception as e:  # noqa: BLE001 - any failure to load is the finding
            crit.add("checkpoint restorable", False, f"{type(e).__name__}: {e}")
    else:
        crit.add("checkpoint restorable", bool(ckpt), f"{ckpt or 'no checkpoint'} (remote: listed, not loaded here)")

    on_gpu = any(str(r.get("device", "")).startswith("cuda") for r in ranks)
    plan = capacity.plan_for(settings, world or 1, on_gpu=on_gpu)
    if ranks:
        measured = max(r["state_bytes"]["total"] for r in ranks)
        planned = plan.state_per_device_gib * GIB_
        # FSDP2 pads dim-0 shards: allow the padding of one row per tensor, and 10 %
        ok_mem = measured <= planned * 1.10 + 64 * 1024 and measured >= planned * 0.5
        ev = f"sharded state {human_bytes(measured)}/rank vs plan {human_bytes(planned)}"
        peak = max(r["peak_mem_bytes"] for r in ranks)
        if on_gpu:
            ok_mem = ok_mem and peak <= plan.peak_per_device_gib * GIB_ * 1.25 + GIB_
            ev += f"; GPU peak {human_bytes(peak)} vs planned {plan.peak_per_device_gib:.2f} GiB"
        else:
            ev += f"; process peak RSS {human_bytes(peak)} (CPU: info only)"
        crit.add("measured memory vs the plan", ok_mem, ev)
        tps = sum(r["tokens_per_s"] for r in ranks)
        crit.add("throughput reported by every rank", all(r["tokens_per_s"] > 0 for r in ranks),
                 f"{tps:.0f} tokens/s total, {tps / len(ranks):.0f} tokens/s per rank")

    # -- transport ---------------------------------------------------------------------------------
    expect = settings.expected_transport(1 if on_gpu else 0)
    if audit_error:
        crit.add(f"NCCL transport as expected ({expect}) for every rank pair", False, audit_error)
    elif audit is not None:
        crit.add(f"NCCL transport as expected ({expect}) for every rank pair", audit.ok,
                 getattr(audit, "summary", None) or str(getattr(audit, "verdict", "")))
    elif expect == "none":
        crit.add("NCCL transport as expected for every rank pair", None,
                 na_reason="n/a: CPU run, gloo over loopback (NCCL not used)")
    else:
        crit.add(f"NCCL transport as expected ({expect}) for every rank pair", False,
                 "no transport audit was run (NCCL logs not collected)")
    return Verification(crit, run=run, plan=plan, audit=audit, placement=placement)


GIB_ = 1024 ** 3


def _aws_infra_rows(settings):
    """On aws: allocatable GPUs/EFA per GPU node and fi_info, from the Kubernetes side (issue 5)."""
    try:
        from . import kuberay
    except ImportError:
        return [("GPUs allocatable on every GPU node", False, "the kuberay module is not available")]
    fn = getattr(kuberay, "infra_criteria", None)
    if fn is None:
        return [("GPUs allocatable on every GPU node", False, "kuberay.infra_criteria is not implemented")]
    return fn(settings)


# --------------------------------------------------------------------------------------------
# NCCL logs of a run and their audit
# --------------------------------------------------------------------------------------------

def collect_worker_logs(settings, run) -> dict:
    """The training workers' own log files for this run (NCCL prints there, not on the driver)."""
    marker = (run.config or {}).get("marker") or (run.result or {}).get("marker")
    if not marker:
        return {}
    from . import nccl
    if settings.target == "local":
        from .targets import local
        texts = nccl.collect_local_logs(local.session_log_dirs(settings), marker)
    else:
        from . import k8s, kuberay
        client = k8s.api_client(settings)          # one client for the listing and every exec
        try:
            pods = kuberay.worker_pods(settings, client=client)
            texts = nccl.collect_pod_logs(lambda pod, cmd: k8s.exec_in_pod(settings, pod, cmd, client=client),
                                          pods, marker)
        finally:
            client.close()
    return texts


def audit_run(settings, run, logs: str | None = None):
    """Audit the NCCL transport of a run; None when there is nothing to audit (CPU/gloo)."""
    on_gpu = any(str(r.get("device", "")).startswith("cuda") for r in (run.ranks if run else []))
    expect = settings.expected_transport(1 if on_gpu else 0)
    if expect == "none":
        return None
    from . import nccl
    text = logs if logs is not None else collect_worker_logs(settings, run)
    return nccl.audit(text, expect=expect)


def verify_run(settings, *, run_name: str | None = None, check_restore: bool = True) -> Verification:
    """06_verify's entry point: collect the run's worker logs, audit them, check every criterion."""
    from . import jobs
    run = jobs.load_last(settings, run_name)
    audit, error = None, None
    if run is not None:
        try:
            audit = audit_run(settings, run)
        except Exception as e:  # noqa: BLE001 - logs unreachable (API down, exec forbidden): a failed check
            error = f"could not collect the workers' NCCL logs: {type(e).__name__}: {e}"
    return verify(settings, run, run_name=run_name, check_restore=check_restore, audit=audit, audit_error=error)


@dataclass
class BenchComparison:
    ok: bool
    lines: list[str]
    record: dict

    def show(self) -> None:
        print("\n".join(self.lines))


def compare_benchmark(settings, bench, *, write: bool = True) -> BenchComparison:
    """Audit each benchmark run, then compare them (or refuse and say why); writes a JSON record."""
    import datetime
    import platform
    from . import jobs

    record = dict(kind="transport-ab", target=settings.target, preset=settings.train.model_preset,
                  seq_len=settings.train.seq_len, batch_size=settings.train.batch_size,
                  bench_steps=settings.train.bench_steps, warmup_steps=settings.train.bench_warmup_steps,
                  date=datetime.date.today().isoformat(), host=platform.node(),
                  runs=[dict(label=b.label, expect=b.expect, env=b.env, status=b.job.status,
                             steps_per_s=b.steps_per_s, tokens_per_s_per_gpu=b.tokens_per_s_per_gpu,
                             world_size=len(b.job.ranks)) for b in bench])
    if len(bench) < 2:
        lines = [f"{b.label}: {b.tokens_per_s_per_gpu:,.0f} tokens/s per worker, {b.steps_per_s:.2f} steps/s"
                 for b in bench]
        lines.append("no A/B comparison: CPU workers use gloo, there is no NCCL transport to change "
                     "(run on GPUs for P2P vs socket, or on aws for EFA vs socket)")
        record.update(comparison=None, reason="single variant (gloo)")
        ok = all(b.job.ok for b in bench)
    else:
        from . import nccl
        cmp = nccl.compare_runs(bench[0].as_compare_input(), bench[1].as_compare_input())
        lines = [cmp_text(cmp)]
        record.update(comparison=json.loads(cmp.to_json()) if isinstance(cmp.to_json(), str) else cmp.to_json())
        ok = cmp.ok
    if write:
        path = jobs.run_dir(settings) / "benchmark.json"
        path.write_text(json.dumps(record, indent=2, default=str))
        lines.append(f"record: runs/{settings.run_name}/benchmark.json")
    return BenchComparison(ok, lines, record)


def cmp_text(cmp) -> str:
    import contextlib
    import io
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        r = cmp.show()
    return buf.getvalue().rstrip() or (r or "")
