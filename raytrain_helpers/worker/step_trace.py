"""One training step under ``torch.profiler``: what FSDP2 did on this rank, and when.

FSDP2 (PyTorch 2.13, ``torch/distributed/fsdp/_fully_shard/_fsdp_param_group.py``) wraps each stage of a sharded
module in a ``record_function`` named after it: ``FSDP::all_gather (model.layers.0)`` before a layer runs forward
(and again before backward), ``FSDP::pre_forward`` / ``FSDP::post_forward`` around its forward,
``FSDP::pre_backward`` / ``FSDP::post_backward_*`` around its backward, and ``FSDP::post_backward_reduce`` where
the layer's gradients are reduce-scattered; the root module's labels carry no name in brackets. The process group's
own spans (``c10d::_allgather_base_``, ``c10d::_reduce_scatter_base_``, ``gloo:all_gather``, ``nccl:...``) sit
inside those. :func:`profiled` keeps those spans of one step, and the optimizer's, as plain lists that travel in
the job's result: the notebook side draws them (``plan/step_trace.py``, ``present/pictures.py``).

Times are the host's (the CPU thread that issued the work). On CPU workers with gloo a collective runs in that
call; on GPUs NCCL's kernels run later on their own stream, so the host spans show when each was issued.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

#: The span names kept (prefixes): FSDP's stages, the process group's collectives, the optimizer.
KEPT = ("FSDP::", "c10d::", "gloo:", "nccl:", "Optimizer.step")
#: The most spans one rank keeps (a 32-layer model records about 20 per layer).
MAX_SPANS = 4000


@contextlib.contextmanager
def profiled(active: bool, rank: int) -> Iterator[dict[str, Any]]:
    """Run the body under ``torch.profiler.profile`` when ``active``; afterwards the yielded dict holds this rank's
    spans (``{"rank", "pid", "spans": [[name, start_us, duration_us, thread], ...], "origin_unix_us"}``, times from
    the step's first kept span, which began at ``origin_unix_us`` on the host's clock). Inactive: nothing is
    recorded and the dict stays empty."""
    out: dict[str, Any] = {}
    if not active:
        yield out
        return
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        yield out
    spans, first_us = spans_of(prof.events())
    try:  # the profile's start on the Unix clock (ns), so the ranks' traces line up in one picture
        origin_us = prof.profiler.kineto_results.trace_start_ns() / 1e3 + first_us
    except Exception:  # noqa: BLE001 - an older profiler: each rank keeps its own origin
        origin_us = None
    out.update(rank=rank, pid=os.getpid(), spans=spans, origin_unix_us=origin_us)


def spans_of(events: Any) -> tuple[list[list[Any]], float]:
    """The kept spans of a profiler's events, in start order, as ``[name, start_us, duration_us, thread]`` from the
    first one, and the first one's start in the profile's own time (microseconds)."""
    rows = []
    for e in events:
        if not str(e.name).startswith(KEPT):
            continue
        start = float(e.time_range.start)
        rows.append([str(e.name), start, float(e.time_range.end) - start, int(getattr(e, "thread", 0) or 0)])
    rows.sort(key=lambda r: r[1])
    t0 = rows[0][1] if rows else 0.0
    return [[n, round(s - t0, 1), round(d, 1), t] for n, s, d, t in rows[:MAX_SPANS]], t0
