"""The function every Ray Train worker runs: Qwen2 (random init, or pretrained weights), FSDP2, AdamW, Ray Data.

This module runs inside the Ray Train workers (in the DLC on aws, in the local raylets here). It imports only
torch, transformers, ray, the standard library and the package's shared constants, and reads the job's
:class:`~raytrain_helpers.worker.job_config.JobConfig` (handed over by Ray Train as JSON: :func:`loop_config`).

:func:`train_loop_per_worker` reads top-down, and each part it calls is here, in the order it calls them:
:func:`this_rank`, :func:`data_readers` (each rank's ``ray.train.get_dataset_shard``), :func:`build_sharded_model`
(``fully_shard`` per decoder layer, then the root, with the mixed-precision policy: :func:`shard_model`),
:func:`resume` (``ray.train.get_checkpoint`` and a DCP load, data position included), then the loop itself,
:func:`save_checkpoint` (a sharded ``torch.distributed.checkpoint`` handed to ``ray.train.report`` every
``checkpoint_every`` steps and at the end) and :func:`export` (the model gathered once and written as a Hugging Face
folder). The bookkeeping around the loop (step lines, evaluations, the summary) is
:class:`~raytrain_helpers.worker.progress.TrainLog`.
"""

from __future__ import annotations

import json
import os
import socket
import tempfile
import time
from typing import Any

from . import data as data_mod
from . import kernels, step_trace
from . import model as model_mod
from .job_config import JobConfig
from .progress import Rank, TrainLog

#: FSDP2's sharding of a model (each decoder layer, then the root), as the job applies it.
shard_model = model_mod.shard_model


def loop_config(cfg: JobConfig, eval_rows: Any = None) -> dict[str, Any]:
    """Ray Train's ``train_loop_config`` (a dict): the job config as its JSON object, and the object reference of
    the held-out rows the driver put in Ray's object store (None: no evaluation)."""
    return {"job": cfg.to_dict(), "eval_rows": eval_rows}


def train_loop_per_worker(config: dict[str, Any]) -> None:
    """The function Ray Train runs on every worker: data, model, resume, the loop, the summary,
    the last checkpoint. ``config``: Ray Train's ``train_loop_config`` (:func:`loop_config`)."""
    import ray.train
    import torch
    import torch.distributed as dist

    cfg = JobConfig.from_dict(config["job"])
    me = this_rank(cfg)  # rank, world size, node and device (a GPU with NCCL, or the CPU with gloo)

    # 1. This rank's data: its shard of the Ray Dataset, already streaming while the model is built.
    reader, eval_batches = data_readers(cfg, me, config.get("eval_rows"))

    # 2. The model, sharded with FSDP2; AdamW then updates only this rank's shards.
    model, model_dir = build_sharded_model(cfg, me)
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.learning_rate, fused=me.on_gpu or None)

    # 3. Resume: Ray Train hands every rank the run's latest checkpoint, if there is one.
    log = TrainLog(cfg, me, reader, eval_batches)
    start = resume(model, optimizer, reader, log)

    # 4. The loop. A step is the whole iteration as the user waits for it: the next batch, forward,
    #    backward, the optimizer, and the loss averaged over the ranks (.item() waits for the device).
    log.begin(model, start)
    for step in range(start + 1, cfg.steps + 1):
        t0 = time.perf_counter()
        ids, labels = reader.next()  # labels: -100 where the loss does not look (prompts, user turns)
        with step_trace.profiled(step == cfg.profile_step, me.rank) as trace:  # train.profile_step only
            # forward: FSDP all-gathers each layer's weights just before it runs, frees them after
            loss = kernels.causal_lm_loss(model, ids.to(me.device, non_blocking=True), labels.to(me.device))
            # backward: each layer gathered again, its gradients reduce-scattered (each rank keeps a shard)
            loss.backward()
            optimizer.step()  # AdamW on this rank's shards
        log.keep_trace(trace)  # the profiled step's spans ride in the summary (every rank's)
        log.measure_state(model, optimizer)  # once: parameters, gradients, optimizer states all exist
        optimizer.zero_grad(set_to_none=True)  # freed, not zeroed: no memset per parameter
        mean_loss = loss.detach().float()
        dist.all_reduce(mean_loss)  # the sum over the ranks
        log.step(step, ids, mean_loss.item() / me.world, time.perf_counter() - t0, model)
        # Only checkpoints go through ray.train.report: Ray Train keeps one unread report per worker
        # and reads them once per health check, so a report every step would wait for that check.
        if cfg.checkpoint_every and step % cfg.checkpoint_every == 0 and step < cfg.steps:
            metrics, meta = log.last_metrics, log.data_meta()
            save_checkpoint(model, optimizer, metrics, step, me.rank, cfg, meta=meta)

    # 5. Every rank's figures, gathered; they ride on the last checkpoint (Ray Train's Result.metrics).
    final = log.summary(model, optimizer, start)
    if cfg.final_checkpoint:
        save_checkpoint(model, optimizer, final, cfg.steps, me.rank, cfg, meta=log.data_meta())
    else:  # benchmarks: no multi-GB write after the timed steps
        ray.train.report(final)
    if final.get("export_path") and (log.step_times or not os.path.isdir(final["export_path"])):
        export(model, cfg, me, final, model_dir)
    print(f"[train] SUCCESS rank={me.rank}/{me.world}", flush=True)


def this_rank(cfg: JobConfig) -> Rank:
    """This worker as Ray Train set it up: its rank and the world size (``ray.train.get_context()``), its node, its
    device (``ray.train.torch.get_device()``: the GPU Ray assigned, or the CPU). Prints the job's marker line."""
    import ray
    import ray.train
    import ray.train.torch
    import torch

    ctx = ray.train.get_context()
    me = Rank(
        rank=ctx.get_world_rank(),
        world=ctx.get_world_size(),
        node_id=ray.get_runtime_context().get_node_id(),
        host=socket.gethostname(),
        device=ray.train.torch.get_device(),
    )
    print(me.marker_line(cfg), flush=True)
    if not me.on_gpu:
        torch.set_num_threads(cfg.cpu_threads)
    return me


def data_readers(cfg: JobConfig, me: Rank, eval_rows: Any = None):
    """This rank's train reader and eval batches: its Ray Data shard (``get_dataset_shard``),
    its first batch on the way (Ray Data starts while the model is built), and its share of the
    driver's held-out rows; or, outside a Ray Train run with datasets (the torchrun benchmark),
    seeded random tokens and no evaluation."""
    import ray.train

    try:
        train_shard = ray.train.get_dataset_shard("train")
    except Exception:  # noqa: BLE001 - not in a Ray Train session with datasets
        train_shard = None
    if train_shard is None:
        if cfg.data != data_mod.RANDOM:
            raise RuntimeError(f"train.data = {cfg.data!r} needs the job's Ray Datasets: none given")
        vocab = int(cfg.model["vocab_size"])
        return data_mod.ShardReader(lambda epoch: _random_batches(cfg, me.rank, vocab)), []

    def batches(epoch):  # Ray Data streams this rank's rows as tensors, batch by batch
        return train_shard.iter_torch_batches(batch_size=cfg.batch_size, drop_last=True)

    reader = data_mod.ShardReader(batches)
    return reader.prefetch(), _held_out_batches(cfg, me, eval_rows)


def _random_batches(cfg: JobConfig, rank: int, vocab: int):
    """Seeded uniform tokens, one batch per step: ``random`` data when the loop runs without Ray Data."""
    import torch

    for step in range(cfg.steps):
        g = torch.Generator().manual_seed(cfg.seed * 1_000_003 + rank * 10_007 + step)
        yield torch.randint(0, vocab, (cfg.batch_size, cfg.seq_len), generator=g)


def _held_out_batches(cfg: JobConfig, me: Rank, eval_rows: Any) -> list:
    """This rank's held-out batches (the same at every evaluation): its share of the rows the driver put in Ray's
    object store, at most ``EVAL_MAX_BATCHES`` batches."""
    import ray
    import torch

    if eval_rows is None:
        return []
    rows = ray.get(eval_rows)
    rows = rows if isinstance(rows, dict) else {"input_ids": rows, "labels": rows}
    mine = {k: torch.tensor(v) for k, v in data_mod.rank_rows(rows, me.rank, me.world).items()}  # copies: read-only
    b, n = cfg.batch_size, len(mine["input_ids"])
    batches = [(mine["input_ids"][i : i + b], mine["labels"][i : i + b]) for i in range(0, n, b)]
    return batches[: data_mod.EVAL_MAX_BATCHES]


def build_model(cfg: JobConfig, device):
    """The model with random weights from ``cfg.model`` (a preset, or a model_id's config.json)."""
    return model_mod.build_random(cfg.model, device)


def build_sharded_model(cfg: JobConfig, me: Rank):
    """The model on this rank, sharded: random weights from the preset (the same on every rank:
    one seed), or pretrained weights loaded the FSDP2 way (meta device, shard, rank 0 reads,
    broadcast). Mixed precision (bf16 compute, fp32 weights and gradient reduction) on GPUs;
    CPUs stay in fp32. Returns (model, the pretrained folder or None)."""
    import torch

    mixed = me.on_gpu and cfg.precision in ("auto", "bf16")
    torch.manual_seed(cfg.seed)  # identical initial weights on every rank before sharding

    def patch(model):  # fused kernels replace forwards: before sharding
        kernels.apply(model, cfg.kernels, on_gpu=me.on_gpu)

    if cfg.model_id:  # pretrained
        model_dir = model_mod.resolve_model_dir(cfg.model_id)
        model = model_mod.load_pretrained(
            model_dir,
            me.device,
            rank=me.rank,
            mixed_precision=mixed,
            before_shard=patch,
        )
        return model, model_dir
    model = build_model(cfg, me.device)
    patch(model)
    shard_model(model, mixed_precision=mixed)
    return model, None


def resume(model, optimizer, reader, log: TrainLog) -> int:
    """Load the run's latest checkpoint, if Ray Train hands one over (``get_checkpoint()``): every
    rank reads its own shards of the model and optimizer state (DCP reshards when the world size
    changed), and the reader skips the batches trained before. Returns the step to go on from."""
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
        msd, osd = get_state_dict(model, optimizer)
        state = {"model": msd, "optim": osd}
        dcp.load(state, checkpoint_id=d)
        set_state_dict(
            model,
            optimizer,
            model_state_dict=state["model"],
            optim_state_dict=state["optim"],
        )
    log.resumed_from = int(meta["step"])
    pos = meta.get("data_position") or {"epoch": 0, "batch": log.resumed_from}
    reader.epoch, reader.batch = int(pos["epoch"]), int(pos["batch"])  # skip what was consumed
    log.evals = [tuple(e) for e in meta.get("evals") or []]
    if log.me.rank == 0:
        print(f"[train] resumed from checkpoint at step {log.resumed_from} ({ckpt.path})", flush=True)
    return log.resumed_from


def save_checkpoint(
    model,
    optimizer,
    metrics: dict[str, Any],
    step: int,
    rank: int,
    cfg: JobConfig,
    meta: dict[str, Any] | None = None,
) -> None:
    """A sharded checkpoint: every rank writes its own shards (``dcp.save``) into a temporary
    folder, rank 0 adds the step and the data position, and ``ray.train.report`` hands the folder
    to Ray Train, which gathers every rank's files into one checkpoint under ``storage_path``.
    No rank ever holds the full state."""
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
        checkpoint = ray.train.Checkpoint.from_directory(tmp)
        ray.train.report(dict(metrics, checkpoint_step=step), checkpoint=checkpoint)
    if rank == 0:
        print(f"[train] checkpoint saved at step {step}", flush=True)


def export(model, cfg: JobConfig, me: Rank, final: dict[str, Any], model_dir: str | None) -> None:
    """Gather the trained shards once and write the Hugging Face folder (rank 0); every rank takes part."""
    import torch.distributed as dist

    full = model_mod.gather_full_state(model)
    if me.rank == 0:
        meta = dict(step=final["step"], run_name=cfg.run_name, data=final["data"], model_id=cfg.model_id)
        model_mod.write_hf_folder(full, model.config, final["export_path"], model_dir=model_dir, meta=meta)
        print(f"[train] exported the model to {final['export_path']}", flush=True)
    del full
    dist.barrier()


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
