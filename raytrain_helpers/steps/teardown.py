"""08 · Teardown: everything the tutorial created, removed in reverse order and checked by listing what is left.

Before anything is deleted, the evidence the audits read and that is not yet in the run's folder is collected from
the cluster (:func:`collect_missing`): 06's and 07's tables can then be rebuilt from ``runs/<run>/`` alone. On aws
nothing is deleted without ``assume_yes`` (papermill runs never prompt).
"""

from __future__ import annotations

from ..core.paths import runs_dir
from ..core.settings import Settings
from ..core.tables import table
from ..targets import StepResult, for_settings
from . import benchmark, evidence
from .train import load_last
from .verify import read_evidence, worker_logs


def bench_runs(settings: Settings) -> dict[str, str]:
    """The run's benchmark jobs recorded in ``runs/`` (``<run>-bench-<label>-<id>``), the last of each label."""
    prefix = f"{settings.run_name}-bench-"
    out: dict[str, str] = {}
    for job_file in sorted(runs_dir(settings).glob(f"{prefix}*/job.json"), key=lambda p: p.stat().st_mtime):
        name = job_file.parent.name
        out[name[len(prefix) :].rsplit("-", 1)[0]] = name
    return out


def collect_missing(settings: Settings) -> list[tuple[str, str]]:
    """Save what 06 and 07 read from the cluster and the run's folder lacks (each job's workers' logs, its status
    there, 06's infrastructure rows); (reading, what happened) rows. A reading that fails is said, and the
    teardown goes on: what bills must still stop."""
    rows: list[tuple[str, str]] = []
    job = load_last(settings)
    if job is None:
        rows.append(("train", "no job recorded by 05: nothing to collect"))
    elif evidence.saved(settings, "train") is not None:
        rows.append(("train", "already saved (06)"))
    else:
        try:
            read_evidence(settings, job)
            rows.append(("train", f"saved now in runs/{settings.run_name}/{evidence.FOLDER}/train"))
        except Exception as e:  # noqa: BLE001 - said, never stops the teardown
            rows.append(("train", f"NOT saved: {type(e).__name__}: {e}"))
    variants = {v["label"]: v for v in for_settings(settings).benchmark_variants(settings)}
    for label, name in bench_runs(settings).items():
        kind = f"bench-{label}"
        if evidence.saved(settings, kind) is not None:
            rows.append((kind, "already saved (07)"))
            continue
        bench_job = load_last(settings, name)
        try:
            v = variants.get(label) or dict(
                label=label, expect=for_settings(settings).expected_transport(settings), env={}
            )
            benchmark.save_variant(settings, v, bench_job, worker_logs(settings, bench_job), {})
            rows.append((kind, f"saved now in runs/{settings.run_name}/{evidence.FOLDER}/{kind}"))
        except Exception as e:  # noqa: BLE001
            rows.append((kind, f"NOT saved: {type(e).__name__}: {e}"))
    return rows


def run(settings: Settings, *, assume_yes: bool = False) -> StepResult:
    """Notebook 08's entry point: the missing evidence collected, then the teardown."""
    table(collect_missing(settings), ["evidence", "before the teardown"], title="What the audits read, kept in the run")
    return for_settings(settings).teardown(settings, assume_yes=assume_yes)
