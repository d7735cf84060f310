"""The per-worker training loop: Qwen2 from config (random init), FSDP2, AdamW, synthetic tokens.

This module runs inside the Ray Train workers (in the DLC on aws, in the local raylets here). It
imports only torch, transformers, ray, the standard library and the package's shared constants, and takes a
plain JSON-able config.

Per step it reports loss, step time, tokens/s and peak memory; every ``checkpoint_every`` steps (and at
the end) it writes a sharded ``torch.distributed.checkpoint`` to the run's storage path through
``ray.train.report``; when the run is started again with the same name it resumes from the latest one.
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


def build_model(cfg: dict[str, Any], device):
    """Qwen2ForCausalLM with random weights from a preset (or a local model_id's config.json)."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    if cfg.get("model_id"):
        model_cfg = Qwen2Config.from_pretrained(cfg["model_id"], local_files_only=True)
    else:
        model_cfg = Qwen2Config(**cfg["model"])
    model_cfg.use_cache = False
    attn = "sdpa"
    try:
        model_cfg._attn_implementation = attn
    except Exception:  # pragma: no cover - older transformers
        pass
    with torch.device(device):
        model = Qwen2ForCausalLM(model_cfg)
    return model


def shard_model(model, *, mixed_precision: bool):
    """FSDP2: ``fully_shard`` each decoder layer, then the root."""
    import torch
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    mp = (
        MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
        if mixed_precision
        else MixedPrecisionPolicy()
    )
    for layer in model.model.layers:
        fully_shard(layer, mp_policy=mp)
    fully_shard(model, mp_policy=mp)
    return model


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


def _batch(cfg: dict[str, Any], rank: int, step: int, vocab: int, device):
    import torch

    g = torch.Generator().manual_seed(cfg["seed"] * 1_000_003 + rank * 10_007 + step)
    ids = torch.randint(0, vocab, (cfg["batch_size"], cfg["seq_len"]), generator=g)
    return ids.to(device)


def _peak_memory(device) -> int:
    import torch

    if device.type == "cuda":
        return int(torch.cuda.max_memory_allocated(device))
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


def train_loop_per_worker(cfg: dict[str, Any]) -> None:
    """The function Ray Train runs on every worker: build, shard, resume, train, summarise, checkpoint."""
    import ray.train

    w = _setup(cfg)
    start_step = _resume(w, cfg)
    steps = int(cfg["steps"])
    losses, step_times, last_metrics = _train_steps(w, cfg, start_step, steps)
    final = _summary(w, cfg, losses, step_times, last_metrics, start_step, steps)
    if w.rank == 0:  # also in the job's logs, so the summary survives runs without a final checkpoint
        print(SUMMARY_PREFIX + json.dumps(final, default=str), flush=True)
    # Ray Train's Result.metrics are those of the latest checkpoint: the summary rides on the final one.
    if cfg.get("final_checkpoint", True):
        _save_and_report(w.model, w.optimizer, final, steps, w.rank, cfg)
    else:  # benchmarks: no multi-GB write after the timed steps
        ray.train.report(final)
    print(f"[train] SUCCESS rank={w.rank}/{w.world}", flush=True)


class _Worker:
    """What one rank holds while it trains."""

    def __init__(self, **kw: Any):
        self.__dict__.update(kw)


def _setup(cfg: dict[str, Any]) -> _Worker:
    import ray
    import ray.train
    import ray.train.torch
    import torch

    ctx = ray.train.get_context()
    rank, world = ctx.get_world_rank(), ctx.get_world_size()
    node_id = ray.get_runtime_context().get_node_id()
    host = socket.gethostname()
    print(
        f"{MARKER_PREFIX}{cfg['marker']} rank={rank}/{world} node={node_id} host={host} pid={os.getpid()}", flush=True
    )
    device = ray.train.torch.get_device()
    on_gpu = device.type == "cuda"
    if not on_gpu:
        torch.set_num_threads(int(cfg.get("cpu_threads", 1)))
    mixed = on_gpu and cfg.get("precision", "auto") in ("auto", "bf16")
    torch.manual_seed(cfg["seed"])  # identical initial weights on every rank before sharding
    model = build_model(cfg, device)
    shard_model(model, mixed_precision=mixed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg["learning_rate"], fused=on_gpu or None)
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
    )


def _resume(w: _Worker, cfg: dict[str, Any]) -> int:
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
    if w.rank == 0:
        print(f"[train] resumed from checkpoint at step {w.resumed_from} ({ckpt.path})", flush=True)
    return w.resumed_from


def _train_steps(w: _Worker, cfg: dict[str, Any], start_step: int, steps: int):
    """Forward, backward, AdamW step; report every step, checkpoint every ``checkpoint_every`` steps."""
    import ray.train
    import torch
    import torch.distributed as dist

    every = int(cfg.get("checkpoint_every") or 0)
    tokens_per_step = cfg["batch_size"] * cfg["seq_len"]
    losses: list[float] = []
    step_times: list[float] = []
    last_metrics: dict[str, Any] = {}
    if w.on_gpu:
        torch.cuda.reset_peak_memory_stats(w.device)
    for step in range(start_step, steps):
        ids = _batch(cfg, w.rank, step, w.model.config.vocab_size, w.device)
        if w.on_gpu:
            torch.cuda.synchronize(w.device)
        t0 = time.perf_counter()
        loss = w.model(input_ids=ids, labels=ids).loss
        loss.backward()
        w.optimizer.step()
        w.optimizer.zero_grad(set_to_none=False)
        if w.on_gpu:
            torch.cuda.synchronize(w.device)
        dt = time.perf_counter() - t0
        avg = loss.detach().float().clone()
        dist.all_reduce(avg)
        avg = avg.item() / w.world
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
        if w.rank == 0:
            print(
                f"{STEP_PREFIX} {step + 1}/{steps} loss={avg:.4f} step_time={dt:.3f}s "
                f"tokens/s={tokens_per_step / dt:.0f} peak_mem={last_metrics['peak_mem_bytes'] / 2**20:.0f}MiB",
                flush=True,
            )
        if step + 1 == steps:
            break  # the last step's checkpoint carries the run's summary
        if every and (step + 1) % every == 0:
            _save_and_report(w.model, w.optimizer, last_metrics, step + 1, w.rank, cfg)
        else:
            ray.train.report(last_metrics)
    return losses, step_times, last_metrics


def _summary(
    w: _Worker, cfg: dict[str, Any], losses, step_times, last_metrics, start_step: int, steps: int
) -> dict[str, Any]:
    """Every rank's figures, gathered: throughput after warm-up, peak memory, sharded state, finite loss."""
    import torch.distributed as dist

    tokens_per_step = cfg["batch_size"] * cfg["seq_len"]
    warm = int(cfg.get("warmup_steps", 0))
    timed = step_times[warm:] if len(step_times) > warm else step_times
    mean_dt = sum(timed) / len(timed) if timed else float("nan")
    mine = dict(
        rank=w.rank,
        node_id=w.node_id,
        host=w.host,
        pid=os.getpid(),
        device=str(w.device),
        steps_run=len(step_times),
        mean_step_time_s=mean_dt,
        tokens_per_s=(tokens_per_step / mean_dt) if timed else 0.0,
        peak_mem_bytes=_peak_memory(w.device),
        state_bytes=local_state_bytes(w.model, w.optimizer),
        loss_finite=all(math.isfinite(x) for x in losses),
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
    )
    if not step_times:
        final.update(step=steps, note="already complete: the latest checkpoint is at the last step")
    return final


def _save_and_report(model, optimizer, metrics, step, rank, cfg) -> None:
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
                        model=cfg.get("model"),
                        preset=cfg.get("preset"),
                        world_size=metrics.get("world_size"),
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
    from transformers import Qwen2Config, Qwen2ForCausalLM

    with open(os.path.join(checkpoint_dir, "raytrain_meta.json")) as f:
        meta = json.load(f)
    cfg = Qwen2Config(**model_cfg)
    model = Qwen2ForCausalLM(cfg)
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
