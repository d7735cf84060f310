"""FSDP2's memory, measured here: one training step of a small Qwen2 prepared by a sharding function, on CPU.

:func:`measure` builds the model with the job's own builder, hands it to a sharding function (the job's
:func:`~raytrain_helpers.worker.model.shard_model`, or one you write), runs one forward, backward and AdamW step on a
gloo process group of one rank in this process, and reports the step's peak memory by kind, as PyTorch's
``FSDPMemTracker`` (``torch.distributed._tools.fsdp2_mem_tracker``, PyTorch 2.13) counts every tensor FSDP and
autograd allocate. With one rank a shard is the whole tensor, so the sharded weights, gradients and optimizer state
are what N ranks would each hold times N; what the sharding *function* changes (how long each layer's full weights
live, which activations backward keeps) is the same at any number of ranks. A step takes under a second.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..core.presets import PRESETS
from . import kernels
from . import model as model_mod

#: The lab's model: the tiny preset made deeper and wider (6 decoder layers of width 128), so that the decoder layers
#: hold most of the weights, as in a real model.
LAB_MODEL = dict(PRESETS["tiny"], hidden_size=128, intermediate_size=352, num_hidden_layers=6)
#: What the tracker's categories are called here (its ``_FSDPRefType`` names), in the order they are shown.
KINDS = {
    "SHARDED_PARAM": "sharded weights",
    "UNSHARDED_PARAM": "full weights (gathered)",
    "ALL_GATHER": "all-gather buffers",
    "ACT": "activations",
    "SHARDED_GRAD": "gradients (sharded)",
    "UNSHARDED_GRAD": "gradients (full)",
    "REDUCE_SCATTER": "reduce-scatter buffers",
    "OPT": "optimizer state",
    "TEMP": "temporaries",
}


def measure(
    shard: Callable[..., Any], *, model_cfg: dict[str, Any] | None = None, batch_size: int = 2, seq_len: int = 256
) -> dict[str, int]:
    """Bytes at the peak of one training step, by kind (:data:`KINDS`' names) and ``"total"``.

    ``shard(model, mixed_precision=False)`` prepares the freshly built model, as the job's ``shard_model`` does."""
    import torch
    import torch.distributed as dist
    from torch.distributed._tools.fsdp2_mem_tracker import FSDPMemTracker

    ours = not dist.is_initialized()
    if ours:
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the job's CPU workers run (cpu_threads); a fraction of a second per step
    try:
        torch.manual_seed(0)
        model = model_mod.build_random(model_cfg or LAB_MODEL, torch.device("cpu"))
        shard(model, mixed_precision=False)
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
        seeded = torch.Generator().manual_seed(0)
        ids = torch.randint(0, model.config.vocab_size, (batch_size, seq_len), generator=seeded)
        tracker = FSDPMemTracker(model, optimizer)
        tracker.track_inputs((ids,))
        with tracker:
            kernels.causal_lm_loss(model, ids).backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        peak = tracker.get_tracker_snapshot("peak")[torch.device("cpu")]
    finally:
        torch.set_num_threads(threads)
        if ours:
            dist.destroy_process_group()
    out = {name: 0 for name in KINDS.values()}
    for kind, size in peak.items():
        name = KINDS.get(getattr(kind, "name", str(kind)))
        if name is not None:
            out[name] += int(size)
    out["total"] = int(peak.get("Total", sum(out.values())))
    return out
