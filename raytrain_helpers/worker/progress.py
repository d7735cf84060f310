"""What a rank keeps while it trains: losses, step times, the data it read, evaluations, its share of the state.

:class:`TrainLog` is the bookkeeping around the loop in :func:`~raytrain_helpers.worker.train.train_loop_per_worker`:
per step rank 0 prints the step line (loss, step time, tokens/s, peak memory; the held-out loss every
``eval_every`` steps), and at the end every rank's figures are gathered into the run's summary (throughput after
warm-up, MFU, peak memory, sharded state, finite loss). It imports only torch, the standard library and the
package's shared constants.
"""

from __future__ import annotations

import json
import math
import os
import resource
from dataclasses import dataclass
from typing import Any

from ..core.constants import MARKER_PREFIX, STEP_PREFIX, SUMMARY_PREFIX
from . import data as data_mod
from . import kernels
from .job_config import JobConfig


@dataclass
class Rank:
    """Who and where this worker is: its rank of ``world``, its Ray node and host, its device."""

    rank: int
    world: int
    node_id: str
    host: str
    device: Any

    @property
    def on_gpu(self) -> bool:
        return self.device.type == "cuda"

    def marker_line(self, cfg: JobConfig) -> str:
        """The line that ties this process's log to the job (06 finds each rank's log by it)."""
        where = f"node={self.node_id} host={self.host} pid={os.getpid()}"
        return f"{MARKER_PREFIX}{cfg.marker} rank={self.rank}/{self.world} {where}"


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


def peak_memory(device) -> int:
    """This process's peak memory: the GPU's allocator peak, or the process's peak resident size on CPU."""
    import torch

    if device.type == "cuda":
        return int(torch.cuda.max_memory_allocated(device))
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


def eval_due(cfg: JobConfig, step: int, steps: int) -> bool:
    """Evaluate after this step? Every ``eval_every`` steps and after the last one (0: only the last)."""
    every = cfg.eval_every
    return step == steps or bool(every and step % every == 0)


class TrainLog:
    """One rank's record of the run: what it trained, read and measured, and the step lines it prints."""

    def __init__(self, cfg: JobConfig, me: Rank, reader, eval_batches: list):
        self.cfg, self.me, self.reader, self.eval_batches = cfg, me, reader, eval_batches
        self.losses: list[float] = []
        self.step_times: list[float] = []
        self.digests: list[str] = []
        self.evals: list[tuple[int, float]] = []
        self.last_metrics: dict[str, Any] = {}
        self.step_trace: dict[str, Any] | None = None
        self.state_bytes: dict[str, int] | None = None
        self.resumed_from: int | None = None

    def begin(self, model, start_step: int) -> None:
        """Before the first step: the GPU's peak counter reset, and the held-out loss of the untrained model."""
        import torch

        if self.me.on_gpu:
            torch.cuda.reset_peak_memory_stats(self.me.device)
        if start_step == 0 and start_step < self.cfg.steps:
            self.evaluate(model, 0)

    def keep_trace(self, trace: dict[str, Any]) -> None:
        """The profiled step's spans (``worker/step_trace.py``), when this step was the one profiled."""
        if trace:
            self.step_trace = trace

    def measure_state(self, model, optimizer) -> None:
        """Once, after the first optimizer step (parameters, gradients and optimizer states all exist)."""
        if self.state_bytes is None:
            self.state_bytes = local_state_bytes(model, optimizer)

    def step(self, step: int, ids, loss: float, step_time_s: float, model) -> None:
        """Record a trained step (its loss averaged over the ranks), evaluate when due, print the step line."""
        cfg = self.cfg
        tokens_per_step = cfg.batch_size * cfg.seq_len
        self.digests.append(data_mod.digest(ids))
        self.losses.append(loss)
        self.step_times.append(step_time_s)
        self.last_metrics = dict(
            step=step,
            loss=loss,
            step_time_s=step_time_s,
            tokens_per_s=tokens_per_step / step_time_s,
            peak_mem_bytes=peak_memory(self.me.device),
            world_size=self.me.world,
        )
        ev = self.evaluate(model, step) if eval_due(cfg, step, cfg.steps) else None
        if ev is not None:
            self.last_metrics["eval_loss"] = ev
        if self.me.rank == 0:
            print(
                f"{STEP_PREFIX} {step}/{cfg.steps} loss={loss:.4f} step_time={step_time_s:.3f}s "
                f"tokens/s={tokens_per_step / step_time_s:.0f} "
                f"peak_mem={self.last_metrics['peak_mem_bytes'] / 2**20:.0f}MiB"
                + (f" eval_loss={ev:.4f}" if ev is not None else ""),
                flush=True,
            )

    def evaluate(self, model, step: int) -> float | None:
        """Mean loss on this rank's held-out batches (the same every time), averaged over the ranks."""
        import torch
        import torch.distributed as dist

        if not self.eval_batches:  # every rank alike: the shares are equal
            return None
        model.eval()
        with torch.no_grad():
            total = sum(
                kernels.causal_lm_loss(model, ids.to(self.me.device), labels.to(self.me.device)).detach().float()
                for ids, labels in self.eval_batches
            )
        model.reshard()  # the root stays unsharded after a forward without backward: free it before training
        model.train()
        avg = (total / len(self.eval_batches)).clone()
        dist.all_reduce(avg)
        loss = avg.item() / self.me.world
        self.evals.append((step, loss))
        if step == 0 and self.me.rank == 0:
            print(f"[train] eval before training: eval_loss={loss:.4f}", flush=True)
        return loss

    def data_meta(self) -> dict[str, Any]:
        """What a checkpoint keeps of the data: where the reader is (every rank is at the same place) and the evals."""
        return dict(data_position=self.reader.position(), evals=self.evals)

    def summary(self, model, optimizer, start_step: int) -> dict[str, Any]:
        """Every rank's figures, gathered (all ranks take part); rank 0 prints the run's summary line."""
        import torch.distributed as dist

        mine = self._rank_figures(model, optimizer)
        gathered: list[Any] = [None] * self.me.world
        dist.all_gather_object(gathered, mine)
        mean_dt = mine["mean_step_time_s"]
        print(
            f"[train] throughput rank={self.me.rank}/{self.me.world} tokens/s={mine['tokens_per_s']:.1f} "
            f"step_time={f'{mean_dt:.4f}s' if self.step_times else '-'} steps={len(self.step_times)} "
            f"node={self.me.node_id[:12]}",
            flush=True,
        )
        cfg = self.cfg
        final = dict(
            self.last_metrics,
            final=True,
            ranks=gathered,
            losses=self.losses,
            resumed_from=self.resumed_from,
            start_step=start_step,
            steps=cfg.steps,
            step_times=self.step_times,
            world_size=self.me.world,
            data=cfg.data,
            evals=self.evals,
            data_position=self.reader.position(),
            export_path=cfg.export_path if cfg.export else None,
        )
        if not self.step_times:
            final.update(step=cfg.steps, note="already complete: the latest checkpoint is at the last step")
        if self.me.rank == 0:  # also in the job's logs, so the summary survives runs without a final checkpoint
            print(SUMMARY_PREFIX + json.dumps(final, default=str), flush=True)
        return final

    def _rank_figures(self, model, optimizer) -> dict[str, Any]:
        """This rank's figures: throughput after warm-up, MFU, peak memory, sharded state, finite loss, data read."""
        import torch

        cfg, me = self.cfg, self.me
        tokens_per_step = cfg.batch_size * cfg.seq_len
        warm = cfg.warmup_steps
        timed = self.step_times[warm:] if len(self.step_times) > warm else self.step_times
        mean_dt = sum(timed) / len(timed) if timed else float("nan")
        tokens_per_s = (tokens_per_step / mean_dt) if timed else 0.0
        gpu_name = torch.cuda.get_device_name(me.device) if me.on_gpu else None
        return dict(
            data_digests=self.digests,
            skipped_digests=self.reader.skipped,
            rank=me.rank,
            node_id=me.node_id,
            host=me.host,
            pid=os.getpid(),
            device=str(me.device),
            gpu=gpu_name or "cpu",
            steps_run=len(self.step_times),
            mean_step_time_s=mean_dt,
            tokens_per_s=tokens_per_s,
            peak_mem_bytes=peak_memory(me.device),
            state_bytes=self.state_bytes or local_state_bytes(model, optimizer),
            loss_finite=all(math.isfinite(x) for x in self.losses),
            kernels=getattr(model, "raytrain_kernels", "none"),
            step_trace=self.step_trace,
            mfu=kernels.mfu(
                model.config.to_dict(),
                cfg.seq_len,
                tokens_per_s,
                kernels.peak_tflops(gpu_name, cfg.peak_tflops) if me.on_gpu else None,
            ),
        )
