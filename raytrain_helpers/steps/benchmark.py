"""07 · Benchmark: the same job twice, changing only the transport environment.

On local GPUs P2P/NVLink vs forced sockets, on aws EFA vs ``NCCL_NET=Socket`` (the target names the variants).
Warm-up steps are discarded. Each run's transport is audited before the two are compared: a run that did not
use the transport it was meant to makes the comparison refuse, instead of reporting a meaningless speedup.
"""

from __future__ import annotations

import contextlib
import datetime
import io
import json
import platform
import uuid
from dataclasses import dataclass
from typing import Any

from .. import nccl
from ..clients.rayjobs import JobRun
from ..core.loading import with_overrides
from ..core.paths import run_dir
from ..core.settings import Settings
from ..core.tables import figure, table
from ..plan import perf
from ..plan.hardware import EfaVerdict
from ..targets import for_settings
from . import capacity, evidence, observe
from .train import submit
from .verify import worker_logs


@dataclass
class BenchRun:
    """One variant's job and the workers' log text (for the transport audit)."""

    label: str
    expect: str
    env: dict[str, str]
    job: JobRun
    log_text: str = ""
    audit: Any = None
    #: The EFA counters read before and after the run (:func:`.observe.efa_reading`); None where not read.
    efa: Any = None

    @property
    def timed_step_s(self) -> float:
        ranks = self.job.ranks
        return max(r["mean_step_time_s"] for r in ranks) if ranks else float("nan")

    @property
    def steps_per_s(self) -> float:
        return 1.0 / self.timed_step_s if self.timed_step_s == self.timed_step_s and self.timed_step_s else 0.0

    @property
    def tokens_per_s_per_gpu(self) -> float:
        ranks = self.job.ranks
        return sum(r["tokens_per_s"] for r in ranks) / len(ranks) if ranks else 0.0

    def as_compare_input(self) -> dict[str, Any]:
        return dict(
            label=self.label,
            expected_transport=self.expect,
            log_text=self.log_text,
            tokens_per_s_per_gpu=self.tokens_per_s_per_gpu,
            steps_per_s=self.steps_per_s,
        )


def run(settings: Settings, variants: list[dict[str, Any]] | None = None, *, quiet: bool = True) -> list[BenchRun]:
    """Run the job once per variant (bench_steps, the first bench_warmup_steps discarded). While each runs, Ray's
    node metrics are recorded (``runs/<run>/metrics/bench-<label>.jsonl``); each GPU node's EFA counters are read
    before and after it (aws); its workers' logs are saved as soon as they are read (``runs/<run>/evidence/
    bench-<label>``)."""
    variants = variants or for_settings(settings).benchmark_variants(settings)
    t = settings.train
    # throughput only: uniform random tokens (nothing to learn), no eval between steps, no export
    bench_settings = with_overrides(settings, checkpoint_every=0, data="random", eval_every=0, export=False)
    out = []
    for v in variants:
        name = f"{settings.run_name}-bench-{v['label']}-{uuid.uuid4().hex[:6]}"
        with observe.efa_reading(settings, v["expect"]) as efa, observe.recording(settings, f"bench-{v['label']}"):
            job = submit(
                bench_settings,
                run_name=name,
                steps=t.bench_steps,
                warmup_steps=t.bench_warmup_steps,
                extra_env=v["env"],
                quiet=quiet,
                progress=not quiet,
                final_checkpoint=False,
                metrics=None,
            )
        logs = worker_logs(settings, job)
        save_variant(settings, v, job, logs, efa)
        out.append(BenchRun(v["label"], v["expect"], v["env"], job, log_text="\n".join(logs.values()), efa=efa))
    return out


def save_variant(settings: Settings, v: dict[str, Any], job: JobRun, logs: dict[str, str], efa: dict) -> None:
    """One variant's evidence in the run's folder: the workers' logs, the job, the EFA counters and their verdict."""
    verdict = efa.get("verdict")
    evidence.save(
        settings,
        f"bench-{v['label']}",
        logs,
        job=job,
        label=v["label"],
        expected=v["expect"],
        env=v["env"],
        bench_run=(job.job_config.run_name if job.job_config else None),
        efa=dict(
            before=efa.get("before"),
            after=efa.get("after"),
            error=efa.get("error"),
            verdict=vars(verdict) if verdict is not None else None,
        ),
    )


def from_evidence(settings: Settings, run_name: str | None = None) -> list[BenchRun]:
    """07's runs rebuilt from the run's folder alone (``runs/<run>/evidence/bench-*``), in the order they ran: each
    variant's job record and workers' logs, as saved when 07 read them."""
    found = []
    for kind in evidence.kinds(settings, run_name):
        if not kind.startswith("bench-"):
            continue
        ev = evidence.saved(settings, kind, run_name)
        m = ev.manifest
        efa = dict(m.get("efa") or {})
        if efa.get("verdict"):
            efa["verdict"] = EfaVerdict(**efa["verdict"])
        bench = BenchRun(m["label"], m["expected"], m.get("env") or {}, ev.job, "\n".join(ev.logs.values()), efa=efa)
        found.append((m.get("saved_at") or "", bench))
    return [b for _, b in sorted(found, key=lambda x: x[0])]


def efa_table(bench: list[BenchRun]) -> None:
    """07 (aws): the bytes each GPU node moved over EFA during each variant, and whether that fits its transport."""
    verdicts = {b.label: (b.efa or {}).get("verdict") for b in bench}
    table(observe.efa_rows(verdicts), ["variant", "expected", "EFA counters", "bytes over EFA per node"], max_width=70)


def plot_metrics(settings: Settings, bench: list[BenchRun] | None = None, axes=None):
    """07: Ray's node metrics recorded during each variant (:func:`.observe.plot_metrics`), from the run's folder."""
    recs = observe.recordings(settings, prefix="bench-")
    labels = [b.label for b in bench] if bench else [k.removeprefix("bench-") for k in recs]
    return observe.plot_metrics({lab: recs.get(f"bench-{lab}", []) for lab in labels}, axes)


def plot(runs: list[BenchRun], ax=None):
    """Tokens/s per worker for each variant, as bars."""
    import matplotlib.pyplot as plt

    if ax is None:
        fig, ax = plt.subplots(figsize=(5, 3))
    else:
        fig = ax.figure
    labels = [r.label for r in runs]
    vals = [r.tokens_per_s_per_gpu for r in runs]
    ax.bar(labels, vals, color=["tab:green", "tab:red", "tab:blue"][: len(runs)])
    ax.set_ylabel("tokens/s per worker (warm)")
    ax.set_title("same job, transport changed only")
    for i, v in enumerate(vals):
        ax.text(i, v, f"{v:,.0f}", ha="center", va="bottom")
    fig.tight_layout()
    return fig


@dataclass
class BenchComparison:
    """The comparison's text, whether it stands, and the JSON record written to the run's folder."""

    ok: bool
    lines: list[str]
    record: dict

    def show(self) -> None:
        print("\n".join(self.lines))


def compare(settings: Settings, bench: list[BenchRun], *, write: bool = True) -> BenchComparison:
    """Audit each benchmark run, then compare them (or refuse and say why); writes a JSON record."""
    record = dict(
        kind="transport-ab",
        target=for_settings(settings).NAME,
        preset=settings.train.model_preset,
        seq_len=settings.train.seq_len,
        batch_size=settings.train.batch_size,
        bench_steps=settings.train.bench_steps,
        warmup_steps=settings.train.bench_warmup_steps,
        date=datetime.date.today().isoformat(),
        host=platform.node(),
        runs=[
            dict(
                label=b.label,
                expect=b.expect,
                env=b.env,
                status=b.job.status,
                steps_per_s=b.steps_per_s,
                tokens_per_s_per_gpu=b.tokens_per_s_per_gpu,
                mfu=[r.get("mfu") for r in b.job.ranks],
                world_size=len(b.job.ranks),
                figures=f,
                efa=vars((b.efa or {}).get("verdict")) if (b.efa or {}).get("verdict") else None,
            )
            for b, f in zip(bench, figures(bench), strict=True)
        ],
    )
    if len(bench) < 2:
        lines = [
            f"{b.label}: {b.tokens_per_s_per_gpu:,.0f} tokens/s per worker, {b.steps_per_s:.2f} steps/s" for b in bench
        ]
        lines += [
            "no A/B comparison: CPU workers use gloo, there is no NCCL transport to change",
            "(run on GPUs for P2P vs socket, or on aws for EFA vs socket)",
        ]
        record.update(comparison=None, reason="single variant (gloo)")
        ok = all(b.job.ok for b in bench)
    else:
        cmp = nccl.compare_runs(bench[0].as_compare_input(), bench[1].as_compare_input())
        lines = [comparison_text(cmp)]
        as_json = cmp.to_json()
        record.update(comparison=json.loads(as_json) if isinstance(as_json, str) else as_json)
        ok = cmp.ok
    if write:
        (run_dir(settings) / "benchmark.json").write_text(json.dumps(record, indent=2, default=str))
        lines.append(f"record: runs/{settings.run_name}/benchmark.json")
    return BenchComparison(ok, lines, record)


#: 07's performance table: the keys a device result in ``benchmarks/results/`` records, in that order.
FIGURES = ["variant", "gpu", "world_size", "batch", "tokens_per_s_per_gpu", "mfu", "step_s", "peak_memory_gib"]


def figures(bench: list[BenchRun]) -> list[dict[str, Any]]:
    """Each run's figures under the keys of ``benchmarks/results/`` (see ``docs/performance.md``): the GPU's name
    ("cpu" for CPU workers), ranks, sequences per step per rank, warm tokens/s per GPU, the lowest rank's MFU (None
    without a GPU), the slowest rank's step and the highest rank's peak memory (on CPU: the process's peak RSS)."""
    out = []
    for b in bench:
        ranks, cfg = b.job.ranks, b.job.job_config
        mfus = [r["mfu"] for r in ranks if r.get("mfu") is not None]
        peaks = [r["peak_mem_bytes"] for r in ranks if r.get("peak_mem_bytes")]
        row = dict(
            variant=b.label,
            gpu=ranks[0].get("gpu", ranks[0].get("device")) if ranks else None,
            world_size=len(ranks),
            batch=cfg.batch_size if cfg else None,
            tokens_per_s_per_gpu=b.tokens_per_s_per_gpu,
            mfu=min(mfus) if mfus else None,
            step_s=b.timed_step_s,
            peak_memory_gib=max(peaks) / 1024**3 if peaks else None,
        )
        out.append(row)
    return out


def show_figures(bench: list[BenchRun]) -> None:
    """07: :func:`figures` as a table, the columns named as ``benchmarks/results/`` names them."""

    def cell(key: str, v: Any) -> str:
        if v is None:
            return "n/a"
        formats = dict(tokens_per_s_per_gpu=",.0f", mfu=".1%", step_s=".3f", peak_memory_gib=".1f")
        return figure(v, formats[key], missing="n/a") if key in formats else str(v)

    table([[cell(k, row[k]) for k in FIGURES] for row in figures(bench)], FIGURES)


def comparison_text(cmp) -> str:
    """What the comparison's ``show()`` prints, as text."""
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        r = cmp.show()
    return buf.getvalue().rstrip() or (r or "")


def predicted(settings: Settings, bench: list[BenchRun]) -> None:
    """07: 01's prediction beside the measurement, per transport (tokens/s per GPU)."""
    rows = perf.side_by_side(capacity.predict(settings), {b.label: b.tokens_per_s_per_gpu for b in bench})
    table(
        rows or [("-", "no prediction for CPU workers", "-", "-")],
        ["transport", "predicted tokens/s per GPU", "measured", "error"],
    )


def captured_ab(bench: list[BenchRun], ax=None):
    """07 when this run has no A/B of its own (CPU workers, gloo): the A/B captured on 2 x H200, healthy P2P against
    the socket fallback, as bars (:func:`..nccl.reference.plot_ab`); None when the run compared two transports."""
    if len(bench) >= 2 and all(b.log_text for b in bench):
        return None
    return nccl.reference.plot_ab(ax=ax)
