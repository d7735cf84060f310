"""One profiled FSDP step, read: each rank's spans (``worker/step_trace.py``) as phases per layer.

FSDP2's ``record_function`` labels (PyTorch 2.13, ``torch/distributed/fsdp/_fully_shard/_fsdp_param_group.py``:
``FSDPParamGroup.unshard``, ``pre_forward``, ``post_forward``, ``pre_backward``, ``post_backward``) name the module
in brackets (``FSDP::all_gather (model.layers.0)``); the root module's carry none. From them:

- **all-gather**: ``FSDP::all_gather (m)``: the module's full weights gathered from every rank's shard;
- **forward**: from the end of ``FSDP::pre_forward (m)`` to the start of ``FSDP::post_forward (m)``;
- **backward**: from the end of ``FSDP::pre_backward (m)`` to the start of the first ``FSDP::post_backward_*
  (m)``;
- **reduce-scatter**: ``FSDP::post_backward_reduce (m)``: the gradients summed and averaged, each rank keeping its
  shard (the root's runs in ``FSDP::root_post_backward_callback``);
- **optimizer**: ``Optimizer.step#AdamW.step``.

The root's forward and backward enclose every layer's, so the root's compute is not a phase of its own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

#: The phases, in the order a step runs them.
KINDS = ("all-gather", "forward", "backward", "reduce-scatter", "optimizer")
_LABEL = re.compile(r"^FSDP::(?P<stage>[a-z_]+)(?: \((?P<module>[^)]*)\))?$")


@dataclass(frozen=True)
class Phase:
    """One phase of one rank's step: what, for which module (``root`` for the embeddings and head), from when, how
    long (microseconds from the rank's first kept span)."""

    kind: str
    module: str
    start_us: float
    duration_us: float

    @property
    def end_us(self) -> float:
        return self.start_us + self.duration_us


def rank_traces(ranks: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    """The profiled ranks' traces from a job's per-rank figures (``metrics["ranks"]``), by rank."""
    out = [r["step_trace"] for r in ranks or [] if isinstance(r, dict) and r.get("step_trace")]
    return sorted(out, key=lambda t: t["rank"])


def phases(trace: dict[str, Any]) -> list[Phase]:
    """One rank's phases in start order (see the module's docstring for how each is read)."""
    spans: dict[tuple[str, str], list[tuple[float, float]]] = {}
    out: list[Phase] = []
    for name, start, dur, *_ in trace.get("spans") or []:
        if str(name).startswith("Optimizer.step"):
            out.append(Phase("optimizer", "all", float(start), float(dur)))
            continue
        m = _LABEL.match(str(name))
        if m:
            spans.setdefault((m["stage"], _short(m["module"])), []).append((float(start), float(dur)))
    for (stage, module), found in spans.items():
        if stage == "all_gather":
            out += [Phase("all-gather", module, s, d) for s, d in found]
        elif stage == "post_backward_reduce":
            out += [Phase("reduce-scatter", module, s, d) for s, d in found]
        elif stage in ("pre_forward", "pre_backward") and module != "root":
            ends = ("post_forward",) if stage == "pre_forward" else _POST_BACKWARD
            after = sorted(s for (st, mo), f in spans.items() if mo == module and st in ends for s, _ in f)
            for s, d in found:
                nxt = next((a for a in after if a >= s + d), None)
                if nxt is not None:
                    kind = "forward" if stage == "pre_forward" else "backward"
                    out.append(Phase(kind, module, s + d, nxt - (s + d)))
    return sorted(out, key=lambda p: (p.start_us, KINDS.index(p.kind)))


_POST_BACKWARD = ("post_backward_accumulate", "post_backward_reshard", "post_backward_reduce")


def _short(module: str | None) -> str:
    """``model.layers.0`` -> ``layers.0``; no module -> ``root``."""
    if not module:
        return "root"
    return ".".join(module.split(".")[-2:])


def order_of(trace: dict[str, Any]) -> dict[str, dict[str, bool]]:
    """Per layer: its weights were all-gathered before its forward ran, gathered again before its backward (or kept
    from forward), and its gradients reduce-scattered after its backward; what the picture shows, as booleans."""
    ph = phases(trace)
    out = {}
    for module in sorted({p.module for p in ph if p.kind == "forward"}):
        mine = [p for p in ph if p.module == module]
        fw = next(p for p in mine if p.kind == "forward")
        bw = next((p for p in mine if p.kind == "backward"), None)
        gathers = [p for p in mine if p.kind == "all-gather"]
        reduces = [p for p in mine if p.kind == "reduce-scatter"]
        out[module] = dict(
            gathered_before_forward=any(g.end_us <= fw.start_us for g in gathers),
            gathered_before_backward=bw is not None and any(fw.end_us <= g.end_us <= bw.start_us for g in gathers),
            reduced_after_backward=bw is not None and any(r.start_us >= bw.end_us for r in reduces),
        )
    return out
