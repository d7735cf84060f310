"""The per-worker training loop: Qwen2 (random init, or pretrained weights), FSDP2, AdamW, data from Ray Data.

This module runs inside the Ray Train workers (in the DLC on aws, in the local raylets here). It
imports only torch, transformers, ray, the standard library and the package's shared constants, and reads the
job's :class:`~raytrain_helpers.worker.job_config.JobConfig` (handed over by Ray Train as JSON: :func:`loop_config`).

Each rank reads its shard of the ``train`` dataset (``ray.train.get_dataset_shard``). Per step rank 0 prints loss,
step time, tokens/s and peak memory, and every ``eval_every`` steps the loss on the held-out rows; every
``checkpoint_every`` steps (and at the end) it writes a sharded ``torch.distributed.checkpoint`` (with the data
position) to the run's storage path through ``ray.train.report``; when the run is started again with the same
name it resumes from the latest one, data included. At the end the model is exported once as a Hugging Face
folder (``export_path``).
"""

from __future__ import annotations

import json
import math
import os
import resource
import socket
import tempfile
import time
from typing import Any

from ..core.constants import MARKER_PREFIX, STEP_PREFIX, SUMMARY_PREFIX
from . import data as data_mod
from . import kernels
from . import model as model_mod
from .job_config import JobConfig


def loop_config(cfg: JobConfig, eval_rows: Any = None) -> dict[str, Any]:
    """Ray Train's ``train_loop_config`` (a dict): the job config as its JSON object, and the object reference of
    the held-out rows the driver put in Ray's object store (None: no evaluation)."""
    return {"job": cfg.to_dict(), "eval_rows": eval_rows}


def build_model(cfg: JobConfig, device):
    """The model with random weights from ``cfg.model`` (a preset, or a model_id's config.json)."""
    return model_mod.build_random(cfg.model, device)


shard_model = model_mod.shard_model


def local_state_bytes(model, optimizer) -> dict[str, int]:
    """Bytes this rank really holds of the sharded model state (params, grads, optimizer states)."""

    def local(t):
        return t.to_local() if hasattr(t, "to_local") else t

    params = grads = optim = 0
    for p in model.parameters():
        lp = local(p)
        params += lp.numel() * lp.element_size()
        if p.grad is not None:
            lg = local(p.grad)
            grads += lg.numel() * lg.element_size()
    for st in optimizer.state.values():
        for v in st.values():
            if hasattr(v, "numel") and v.dim() > 0:
                lv = local(v)
                optim += lv.numel() * lv.element_size()
    return dict(params=params, grads=grads, optimizer=optim, total=params + grads + optim)


def _random_batches(cfg: JobConfig, rank: int, vocab: int):
    """Seeded uniform tokens, one batch per step: ``random`` data when the loop runs without Ray Data."""
    import torch

    for step in range(cfg.steps):
        g = torch.Generator().manual_seed(cfg.seed * 1_000_003 + rank * 10_007 + step)
        yield torch.randint(0, vocab, (cfg.batch_size, cfg.seq_len), generator=g)


def _readers(cfg: JobConfig, rank: int, world: int, vocab: int, eval_rows: Any = None):
    """This rank's train reader and eval batches: its Ray Data shard (``get_dataset_shard``), its first batch on the
    way (Ray Data starts while the model is built), and its share of the driver's held-out rows; or, outside a Ray
    Train run with datasets (the torchrun benchmark), seeded random tokens and no evaluation."""
    import ray.train

    try:
        train_shard = ray.train.get_dataset_shard("train")
    except Exception:  # noqa: BLE001 - not in a Ray Train session with datasets
        train_shard = None
    if train_shard is None:
        if cfg.data != data_mod.RANDOM:
            raise RuntimeError(f"train.data = {cfg.data!r} needs the job's Ray Datasets; none were given")
        return data_mod.ShardReader(lambda epoch: _random_batches(cfg, rank, vocab)), []
    b = cfg.batch_size
    reader = data_mod.ShardReader(lambda epoch: train_shard.iter_torch_batches(batch_size=b, drop_last=True))
    return reader.prefetch(), _held_out_batches(cfg, rank, world, eval_rows)


def _held_out_batches(cfg: JobConfig, rank: int, world: int, eval_rows: Any) -> list:
    """This rank's held-out batches (the same at every evaluation): its share of the rows the driver put in Ray's
    object store, at most ``EVAL_MAX_BATCHES`` batches."""
    import ray
    import torch

    if eval_rows is None:
        return []
    mine = torch.tensor(data_mod.rank_rows(ray.get(eval_rows), rank, world))  # a copy: the store's is read-only
    b = cfg.batch_size
    return [mine[i : i + b] for i in range(0, len(mine), b)][: data_mod.EVAL_MAX_BATCHES]


def _peak_memory(device) -> int:
    import torch

    if device.type == "cuda":
        return int(torch.cuda.max_memory_allocated(device))
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


def train_loop_per_worker(config: dict[str, Any]) -> None:
    """The function Ray Train runs on every worker: build, shard, resume, train, summarise, checkpoint.

    ``config``: Ray Train's ``train_loop_config``, as :func:`loop_config` makes it."""
    import ray.train

    cfg = JobConfig.from_dict(config["job"])
    w = _setup(cfg, config.get("eval_rows"))
    start_step = _resume(w, cfg)
    steps = cfg.steps
    losses, step_times, last_metrics = _train_steps(w, cfg, start_step, steps)
    final = _summary(w, cfg, losses, step_times, last_metrics, start_step, steps)
    if w.rank == 0:  # also in the job's logs, so the summary survives runs without a final checkpoint
        print(SUMMARY_PREFIX + json.dumps(final, default=str), flush=True)
    # Ray Train's Result.metrics are those of the latest checkpoint: the summary rides on the final one.
    if cfg.final_checkpoint:
        _save_and_report(w.model, w.optimizer, final, steps, w.rank, cfg, meta=_data_meta(w))
    else:  # benchmarks: no multi-GB write after the timed steps
        ray.train.report(final)
    if final.get("export_path") and (step_times or not os.path.isdir(final["export_path"])):
        _export(w, cfg, final)
    print(f"[train] SUCCESS rank={w.rank}/{w.world}", flush=True)


def _export(w, cfg: JobConfig, final: dict[str, Any]) -> None:
    """Gather the trained shards once and write the Hugging Face folder (rank 0); every rank takes part."""
    import torch.distributed as dist

    full = model_mod.gather_full_state(w.model)
    if w.rank == 0:
        meta = dict(step=final["step"], run_name=cfg.run_name, data=final["data"], model_id=cfg.model_id)
        model_mod.write_hf_folder(full, w.model.config, final["export_path"], model_dir=w.model_dir, meta=meta)
        print(f"[train] exported the model to {final['export_path']}", flush=True)
    del full
    dist.barrier()


class _Worker:
    """What one rank holds while it trains."""

    def __init__(self, **kw: Any):
        self.__dict__.update(kw)


def _setup(cfg: JobConfig, eval_rows: Any = None) -> _Worker:
    import ray
    import ray.train
    import ray.train.torch
    import torch

    ctx = ray.train.get_context()
    rank, world = ctx.get_world_rank(), ctx.get_world_size()
    node_id = ray.get_runtime_context().get_node_id()
    host = socket.gethostname()
    print(f"{MARKER_PREFIX}{cfg.marker} rank={rank}/{world} node={node_id} host={host} pid={os.getpid()}", flush=True)
    device = ray.train.torch.get_device()
    on_gpu = device.type == "cuda"
    if not on_gpu:
        torch.set_num_threads(cfg.cpu_threads)
    mixed = on_gpu and cfg.precision in ("auto", "bf16")
    torch.manual_seed(cfg.seed)  # identical initial weights on every rank before sharding

    def patch(m):  # before sharding: patches forwards
        kernels.apply(m, cfg.kernels, on_gpu=on_gpu)

    reader, eval_batches = _readers(cfg, rank, world, int(cfg.model["vocab_size"]), eval_rows)  # before the model
    model_dir = None
    if cfg.model_id:  # pretrained: meta init, shard, rank 0 reads, broadcast
        model_dir = model_mod.resolve_model_dir(cfg.model_id)
        model = model_mod.load_pretrained(model_dir, device, rank=rank, mixed_precision=mixed, before_shard=patch)
    else:
        model = build_model(cfg, device)
        patch(model)
        shard_model(model, mixed_precision=mixed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.learning_rate, fused=on_gpu or None)
    return _Worker(
        rank=rank,
        world=world,
        node_id=node_id,
        host=host,
        device=device,
        on_gpu=on_gpu,
        model=model,
        optimizer=optimizer,
        resumed_from=None,
        model_dir=model_dir,
        reader=reader,
        eval_batches=eval_batches,
        evals=[],
        digests=[],
        state_bytes=None,
    )


def _resume(w: _Worker, cfg: JobConfig) -> int:
    """Load the latest checkpoint of the run, if Ray Train hands one over; returns the step to start from."""
    import ray.train
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

    ckpt = ray.train.get_checkpoint()
    if ckpt is None:
        return 0
    with ckpt.as_directory() as d:
        with open(os.path.join(d, "raytrain_meta.json")) as f:
            meta = json.load(f)
        # FSDP2 needs materialised optimizer state before loading it: one zero-lr step would change
        # nothing, but get_state_dict on an empty AdamW gives the keys DCP has to fill.
        msd, osd = get_state_dict(w.model, w.optimizer)
        state = {"model": msd, "optim": osd}
        dcp.load(state, checkpoint_id=d)
        set_state_dict(w.model, w.optimizer, model_state_dict=state["model"], optim_state_dict=state["optim"])
    w.resumed_from = int(meta["step"])
    pos = meta.get("data_position") or {"epoch": 0, "batch": w.resumed_from}
    w.reader.epoch, w.reader.batch = int(pos["epoch"]), int(pos["batch"])  # skip what was consumed
    w.evals = [tuple(e) for e in meta.get("evals") or []]
    if w.rank == 0:
        print(f"[train] resumed from checkpoint at step {w.resumed_from} ({ckpt.path})", flush=True)
    return w.resumed_from


def _train_steps(w: _Worker, cfg: JobConfig, start_step: int, steps: int):
    """Forward, backward, AdamW step; a step line every step, a checkpoint every ``checkpoint_every`` steps.

    A step's time is the whole iteration as the user waits for it: from the end of the previous step (the loss's
    ``.item()`` waits for the GPU, so no other host sync is needed) through the next batch, forward, backward and
    the optimizer, to the averaged loss on the host. Gradients are freed after each optimizer step
    (``set_to_none``): zeroing them would cost a memset and an accumulate kernel per parameter every step."""
    import torch
    import torch.distributed as dist

    every = cfg.checkpoint_every
    tokens_per_step = cfg.batch_size * cfg.seq_len
    losses: list[float] = []
    step_times: list[float] = []
    last_metrics: dict[str, Any] = {}
    if w.on_gpu:
        torch.cuda.reset_peak_memory_stats(w.device)
    if start_step == 0 and start_step < steps:
        _evaluate(w, cfg, 0)
    for step in range(start_step, steps):
        t0 = time.perf_counter()
        ids = w.reader.next()
        w.digests.append(data_mod.digest(ids))
        loss = kernels.causal_lm_loss(w.model, ids.to(w.device, non_blocking=True))
        loss.backward()
        w.optimizer.step()
        if w.state_bytes is None:  # once, while gradients and optimizer states all exist
            w.state_bytes = local_state_bytes(w.model, w.optimizer)
        w.optimizer.zero_grad(set_to_none=True)
        avg = loss.detach().float()
        dist.all_reduce(avg)
        avg = avg.item() / w.world
        dt = time.perf_counter() - t0
        losses.append(avg)
        step_times.append(dt)
        last_metrics = dict(
            step=step + 1,
            loss=avg,
            step_time_s=dt,
            tokens_per_s=tokens_per_step / dt,
            peak_mem_bytes=_peak_memory(w.device),
            world_size=w.world,
        )
        ev = _evaluate(w, cfg, step + 1) if eval_due(cfg, step + 1, steps) else None
        if ev is not None:
            last_metrics["eval_loss"] = ev
        if w.rank == 0:
            print(
                f"{STEP_PREFIX} {step + 1}/{steps} loss={avg:.4f} step_time={dt:.3f}s "
                f"tokens/s={tokens_per_step / dt:.0f} peak_mem={last_metrics['peak_mem_bytes'] / 2**20:.0f}MiB"
                + (f" eval_loss={ev:.4f}" if ev is not None else ""),
                flush=True,
            )
        if step + 1 == steps:
            break  # the last step's checkpoint carries the run's summary
        # Only checkpoints go through ray.train.report: Ray Train keeps one unread report per worker and the
        # controller reads them once per health check (RAY_TRAIN_HEALTH_CHECK_INTERVAL_S, 2 s by default), so a
        # report every step would hold each step until the next check. Step metrics travel in the step lines.
        if every and (step + 1) % every == 0:
            _save_and_report(w.model, w.optimizer, last_metrics, step + 1, w.rank, cfg, meta=_data_meta(w))
    return losses, step_times, last_metrics


def eval_due(cfg: JobConfig, step: int, steps: int) -> bool:
    """Evaluate after this step? Every ``eval_every`` steps and after the last one (0: only the last)."""
    every = cfg.eval_every
    return step == steps or bool(every and step % every == 0)


def _evaluate(w: _Worker, cfg: JobConfig, step: int) -> float | None:
    """Mean loss on this rank's held-out batches (the same every time), averaged over the ranks."""
    import torch
    import torch.distributed as dist

    if not w.eval_batches:  # every rank alike: the shares are equal
        return None
    w.model.eval()
    with torch.no_grad():
        total = sum(kernels.causal_lm_loss(w.model, ids.to(w.device)).detach().float() for ids in w.eval_batches)
    w.model.reshard()  # the root stays unsharded after a forward without backward: free it before training
    w.model.train()
    avg = (total / len(w.eval_batches)).clone()
    dist.all_reduce(avg)
    loss = avg.item() / w.world
    w.evals.append((step, loss))
    if step == 0 and w.rank == 0:
        print(f"[train] eval before training: eval_loss={loss:.4f}", flush=True)
    return loss


def _data_meta(w: _Worker) -> dict[str, Any]:
    """What a checkpoint keeps of the data: where the reader is (every rank is at the same place) and the evals."""
    return dict(data_position=w.reader.position(), evals=w.evals)


def _summary(
    w: _Worker, cfg: JobConfig, losses, step_times, last_metrics, start_step: int, steps: int
) -> dict[str, Any]:
    """Every rank's figures, gathered: throughput after warm-up, MFU, peak memory, sharded state, finite loss."""
    import torch
    import torch.distributed as dist

    tokens_per_step = cfg.batch_size * cfg.seq_len
    warm = cfg.warmup_steps
    timed = step_times[warm:] if len(step_times) > warm else step_times
    mean_dt = sum(timed) / len(timed) if timed else float("nan")
    mine = dict(
        data_digests=w.digests,
        skipped_digests=w.reader.skipped,
        rank=w.rank,
        node_id=w.node_id,
        host=w.host,
        pid=os.getpid(),
        device=str(w.device),
        gpu=torch.cuda.get_device_name(w.device) if w.on_gpu else "cpu",
        steps_run=len(step_times),
        mean_step_time_s=mean_dt,
        tokens_per_s=(tokens_per_step / mean_dt) if timed else 0.0,
        peak_mem_bytes=_peak_memory(w.device),
        state_bytes=w.state_bytes or local_state_bytes(w.model, w.optimizer),
        loss_finite=all(math.isfinite(x) for x in losses),
        kernels=getattr(w.model, "raytrain_kernels", "none"),
        mfu=kernels.mfu(
            w.model.config.to_dict(),
            cfg.seq_len,
            (tokens_per_step / mean_dt) if timed else 0.0,
            kernels.peak_tflops(torch.cuda.get_device_name(w.device), cfg.peak_tflops) if w.on_gpu else None,
        ),
    )
    gathered: list[Any] = [None] * w.world
    dist.all_gather_object(gathered, mine)
    print(
        f"[train] throughput rank={w.rank}/{w.world} tokens/s={mine['tokens_per_s']:.1f} "
        f"step_time={mean_dt:.4f}s steps={len(step_times)} node={w.node_id[:12]}",
        flush=True,
    )
    final = dict(
        last_metrics,
        final=True,
        ranks=gathered,
        losses=losses,
        resumed_from=w.resumed_from,
        start_step=start_step,
        steps=steps,
        step_times=step_times,
        world_size=w.world,
        data=cfg.data,
        evals=w.evals,
        data_position=w.reader.position(),
        export_path=cfg.export_path if cfg.export else None,
    )
    if not step_times:
        final.update(step=steps, note="already complete: the latest checkpoint is at the last step")
    return final


def _save_and_report(model, optimizer, metrics, step, rank, cfg: JobConfig, meta: dict[str, Any] | None = None) -> None:
    import ray.train
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict

    msd, osd = get_state_dict(model, optimizer)
    with tempfile.TemporaryDirectory(prefix="raytrain-ckpt-") as tmp:
        dcp.save({"model": msd, "optim": osd}, checkpoint_id=tmp)
        if rank == 0:
            with open(os.path.join(tmp, "raytrain_meta.json"), "w") as f:
                json.dump(
                    dict(
                        step=step,
                        model=cfg.model,
                        preset=cfg.preset,
                        world_size=metrics.get("world_size"),
                        **(meta or {}),
                    ),
                    f,
                )
        ray.train.report(dict(metrics, checkpoint_step=step), checkpoint=ray.train.Checkpoint.from_directory(tmp))
    if rank == 0:
        print(f"[train] checkpoint saved at step {step}", flush=True)


def restore_check(checkpoint_dir: str, model_cfg: dict[str, Any]) -> dict[str, Any]:
    """Load a sharded checkpoint into a fresh, unsharded model in this process (no process group).

    DCP reshards on load, so a checkpoint written by N ranks must load into one process: every model
    tensor must be found, have the model's shape, and be finite.
    """
    import torch
    import torch.distributed.checkpoint as dcp
    from transformers import AutoModelForCausalLM

    with open(os.path.join(checkpoint_dir, "raytrain_meta.json")) as f:
        meta = json.load(f)
    model = AutoModelForCausalLM.from_config(model_mod.config_from_dict(model_cfg))
    before = {k: v.clone() for k, v in model.state_dict().items()}
    sd = {"model": model.state_dict()}
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        dcp.load(sd, checkpoint_id=checkpoint_dir, no_dist=True)
    model.load_state_dict(sd["model"])
    after = model.state_dict()
    finite = all(torch.isfinite(v).all().item() for v in after.values())
    changed = sum(not torch.equal(before[k], after[k]) for k in after)
    return dict(
        ok=finite and changed > 0,
        step=meta.get("step"),
        tensors=len(after),
        changed=changed,
        finite=finite,
        params=sum(v.numel() for k, v in after.items()),
    )
