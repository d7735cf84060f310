"""Where the job's step and the yardstick's step part ways: both profiled the same way, one GPU, the same batch.

    python benchmarks/step_trace.py --out DIR [--probe PATH/fsdp_probe.py] [--batch 22] [--variant NAME ...]

Each run is its own ``torchrun --nproc-per-node=1`` process: the yardstick (``--probe``, by default
``benchmarks/yardstick/fsdp_probe.py``, run unchanged with ``--liger``) and the job's loop
(``benchmarks/torchrun_loop.py``: ``train_loop_per_worker`` with Ray's calls answered by torchrun, random tokens).
In both, ``torch.optim.AdamW.step`` is wrapped, so nothing in either loop changes:

- before the first update it counts the parameters that hold nothing but zeros;
- the wall time between consecutive optimizer steps is the whole iteration (data, host syncs, metric reductions,
  logging included), the figure a user's tokens/s comes from;
- ``torch.profiler`` (CPU + CUDA) runs from the end of optimizer step ``--prof-at`` to two steps later (0: never),
  so the trace holds two whole iterations and what lies between them, and the CUDA caching allocator's counters
  (allocation retries, cudaMalloc calls) are read there.

Variants (``--variant``, joined with ``+``), each removing one suspected cause: ``set_to_none`` (zero_grad frees the
gradients), ``expandable`` (``PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True``), ``rope_first`` (liger's RoPE
patch before the model exists), ``reset_init`` (the job's model re-initialised by each module's
``reset_parameters``, as the probe does), ``zero_norms`` (the job's RMSNorm weights zero), ``norms_ones`` (the
probe's RMSNorm weights initialised to ones, for a probe that leaves them as ``to_empty`` left them, as the
yardstick did before 2026-12-05; with ``--yardstick-variant``). Writes DIR/step_trace.json (and a
gzipped Chrome trace per profiled run) and prints the comparison. Run it with ``nvidia-smi --query-gpu=
clocks.sm,power.draw --format=csv -lms 500`` beside it to see the clocks each run kept.
"""

from __future__ import annotations

import argparse
import atexit
import gzip
import json
import os
import runpy
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
#: The yardstick the job is compared with (benchmarks/yardstick/README.md).
YARDSTICK = HERE / "yardstick" / "fsdp_probe.py"
#: ``launch(..., pythonpath_first=DIR)``: the child imports the package from DIR (another checkout) instead.
sys.path[:0] = [str(HERE), os.environ.get("STEP_TRACE_PACKAGE_ROOT") or str(ROOT)]

from profile_step import family  # noqa: E402


def install_hook(out: Path, label: str, start: int, n_prof: int = 2) -> None:
    """Wrap AdamW.step (before any optimizer exists): iteration times, a profiler window, allocator counters."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    orig = torch.optim.AdamW.step
    st: dict = dict(n=0, t=[], prof=None)

    def step(self, *a, **k):
        if not st["n"]:  # before the first update: which parameters hold nothing but zeros
            params = [p.to_local() if hasattr(p, "to_local") else p for g in self.param_groups for p in g["params"]]
            zero = [p for p in params if not bool(p.detach().any())]
            st["zero_params"] = dict(tensors=len(zero), of=len(params), numel=sum(p.numel() for p in zero))
        r = orig(self, *a, **k)
        torch.cuda.synchronize()
        st["n"] += 1
        st["t"].append(time.perf_counter())
        if st["n"] == start:
            torch.cuda.memory.reset_peak_memory_stats()
            st["prof"] = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])
            st["prof"].__enter__()
            st["t0"] = time.perf_counter()
        elif st["n"] == start + n_prof and st["prof"] is not None:
            wall = (time.perf_counter() - st["t0"]) / n_prof
            st["prof"].__exit__(None, None, None)
            summarise(st["prof"], out, label, wall, n_prof, st["t"])
            st["prof"] = None
        return r

    torch.optim.AdamW.step = step

    def write_iterations() -> None:
        its = [b - a for a, b in zip(st["t"], st["t"][1:], strict=False)]
        rec = dict(label=label, iteration_s=its, zero_params_before_first_step=st.get("zero_params"))
        (out / f"{label}.iters.json").write_text(json.dumps(rec))

    atexit.register(write_iterations)


def summarise(prof, out: Path, label: str, wall: float, n_prof: int, stamps: list[float]) -> None:
    import torch

    gpu: dict[str, float] = defaultdict(float)
    cpu: dict[str, float] = defaultdict(float)
    launches = 0
    for ev in prof.key_averages():
        if str(getattr(ev, "device_type", "")).endswith("CUDA"):
            gpu[ev.key] += ev.self_device_time_total / n_prof / 1e3
            launches += ev.count
        else:
            cpu[ev.key] += ev.self_cpu_time_total / n_prof / 1e3
    fams: dict[str, float] = defaultdict(float)
    for k, v in gpu.items():
        fams[family(k)] += v
    stats = torch.cuda.memory_stats()
    its = [b - a for a, b in zip(stamps, stamps[1:], strict=False)]
    rec = dict(
        label=label,
        iteration_s_unprofiled=[round(x, 4) for x in its],
        profiled_wall_s_per_step=round(wall, 4),
        gpu_busy_ms_per_step=round(sum(gpu.values()), 1),
        kernels_per_step=launches // n_prof,
        families_ms={k: round(v, 1) for k, v in sorted(fams.items(), key=lambda kv: -kv[1])},
        top_kernels_ms=[(k[:120], round(v, 2)) for k, v in sorted(gpu.items(), key=lambda kv: -kv[1])[:25]],
        top_cpu_ops_ms=[(k[:120], round(v, 2)) for k, v in sorted(cpu.items(), key=lambda kv: -kv[1])[:25]],
        alloc_retries=stats.get("num_alloc_retries"),
        device_allocs=stats.get("num_device_alloc"),
        peak_allocated_gib=round(stats.get("allocated_bytes.all.peak", 0) / 2**30, 2),
        reserved_gib=round(stats.get("reserved_bytes.all.current", 0) / 2**30, 2),
        alloc_conf=os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
    )
    (out / f"{label}.trace.json").write_text(json.dumps(rec, indent=1))
    trace = out / f"{label}.chrome.json"
    prof.export_chrome_trace(str(trace))
    with open(trace, "rb") as f, gzip.open(str(trace) + ".gz", "wb") as g:
        g.write(f.read())
    trace.unlink()


def child(args) -> int:
    out = Path(args.out)
    install_hook(out, args.label, args.prof_at)
    variants = set("+".join(args.variant).split("+"))
    if "set_to_none" in variants:
        import torch

        orig = torch.optim.Optimizer.zero_grad
        torch.optim.Optimizer.zero_grad = lambda self, set_to_none=True: orig(self, set_to_none=True)
    if "rope_first" in variants:  # liger's module-level RoPE patch before any model exists
        from liger_kernel.transformers import apply_liger_kernel_to_qwen2

        apply_liger_kernel_to_qwen2(
            rope=True, rms_norm=False, swiglu=False, cross_entropy=False, fused_linear_cross_entropy=False
        )
    if "norms_ones" in variants:  # give RMSNorm a reset_parameters (ones, as Hugging Face initialises it)
        norms_ones()
    if "zero_norms" in variants:  # the job's model with every RMSNorm weight zero (what to_empty left in the probe)
        import torch

        from raytrain_helpers.worker import model as model_mod

        build_plain = model_mod.build_random

        def build_zero(cfg, device):
            m = build_plain(cfg, device)
            with torch.no_grad():
                for name, p in m.named_parameters():
                    if "norm" in name:
                        p.zero_()
            return m

        model_mod.build_random = build_zero
    if "reset_init" in variants:  # the yardstick's initial weights (each module's reset_parameters)
        import torch

        from raytrain_helpers.worker import model as model_mod

        build = model_mod.build_random

        def build_reset(cfg, device):
            m = build(cfg, device)
            with torch.no_grad():
                for mod in m.modules():
                    if hasattr(mod, "reset_parameters"):
                        mod.reset_parameters()
            return m

        model_mod.build_random = build_reset
    if args.which == "yardstick":
        sys.argv = [args.probe, "--seq", "2048", "--batch", str(args.batch), "--liger", "--steps", str(args.steps)]
        runpy.run_path(args.probe, run_name="__main__")
        return 0
    import torchrun_loop

    return torchrun_loop.main(["--config", str(out / "job.config.json"), "--out", str(out / f"{args.label}.sum.json")])


def norms_ones() -> None:
    """The probe builds on the meta device, ``to_empty``, then calls each module's ``reset_parameters``: RMSNorm
    (Hugging Face's and liger's) has none, so its weight keeps whatever the fresh allocation held (zeros on a new
    CUDA allocation) and every normalised activation is zero. This gives both classes one that fills ones."""
    import torch
    from liger_kernel.transformers.rms_norm import LigerRMSNorm
    from transformers.models.qwen2.modeling_qwen2 import Qwen2RMSNorm

    for cls in (LigerRMSNorm, Qwen2RMSNorm):
        cls.reset_parameters = lambda self: torch.nn.init.ones_(self.weight)


def job_config(out: Path, batch: int, steps: int) -> None:
    import uuid

    import gpu_runs

    from raytrain_helpers.steps import train

    s = gpu_runs.settings(batch_size=batch, steps=steps, bench_steps=steps)
    cfg = train.job_config(s, run_name=f"trace-{uuid.uuid4().hex[:6]}", steps=steps, warmup_steps=3)
    (out / "job.config.json").write_text(cfg.to_json())


def launch(args, which: str, variant: str, *, pythonpath_first: str = "", label: str = "") -> dict:
    """One run in its own torchrun process; ``pythonpath_first``: import the package from another checkout."""
    label = label or (f"{which}-{variant}" if variant else which)
    path = [p for p in (pythonpath_first, str(ROOT), os.environ.get("PYTHONPATH", "")) if p]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(path))
    if pythonpath_first:
        env["STEP_TRACE_PACKAGE_ROOT"] = pythonpath_first
    env.setdefault("NCCL_NVLS_ENABLE", "0")
    if "expandable" in variant.split("+"):
        env["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=1", __file__, "--child"]
    cmd += ["--which", which, "--variant", variant or "", "--label", label, "--out", args.out]
    cmd += [
        "--probe",
        args.probe,
        "--batch",
        str(args.batch),
        "--steps",
        str(args.steps),
        "--prof-at",
        str(args.prof_at),
    ]
    t = time.time()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    (Path(args.out) / f"{label}.log").write_text(proc.stdout[-20000:] + proc.stderr[-20000:])
    rec: dict = dict(label=label, ok=proc.returncode == 0, wall_s=round(time.time() - t, 1))
    for suffix in ("iters", "trace"):
        path = Path(args.out) / f"{label}.{suffix}.json"
        if path.exists():
            rec.update(json.loads(path.read_text()))
    probe_lines = [ln for ln in proc.stdout.splitlines() if ln.startswith('{"mode"')]
    if probe_lines:
        rec["probe"] = json.loads(probe_lines[-1])
    if proc.returncode:
        rec["error"] = (proc.stderr or proc.stdout)[-2500:]
    return rec


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--probe", default=str(YARDSTICK), help="the yardstick script (default: %(default)s)")
    ap.add_argument("--batch", type=int, default=22)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--prof-at", type=int, default=5)
    ap.add_argument("--variant", action="append", default=[])
    ap.add_argument("--yardstick-last", action="store_true", help="the yardstick again after the job's runs")
    ap.add_argument("--yardstick-variant", action="append", default=[], help="e.g. norms_ones")
    ap.add_argument("--no-yardstick", action="store_true", help="only the job's runs")
    ap.add_argument("--no-plain", action="store_true", help="only the --variant runs of the job")
    ap.add_argument("--child", action="store_true")
    ap.add_argument("--which", default="job")
    ap.add_argument("--label", default="")
    args = ap.parse_args(argv)
    if args.child:
        return child(args)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    job_config(out, args.batch, args.steps)
    runs = [] if args.no_yardstick else [launch(args, "yardstick", "")]
    for v in ["", *args.variant] if not args.no_plain else args.variant:
        runs.append(launch(args, "job", v))
    for v in args.yardstick_variant:
        runs.append(launch(args, "yardstick", v))
    if args.yardstick_last:  # the same GPU later in the call: does the order matter?
        runs.append(launch(args, "yardstick", "last"))
    (out / "step_trace.json").write_text(json.dumps(runs, indent=1))
    for r in runs:
        keys = ("label", "ok", "iteration_s", "zero_params_before_first_step", "gpu_busy_ms_per_step")
        keys += ("families_ms", "alloc_retries", "device_allocs", "peak_allocated_gib", "reserved_gib", "error")
        print(json.dumps({k: r.get(k) for k in keys}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
