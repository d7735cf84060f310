"""05's live view of training: a loss plot, the step's figures and a ``tqdm.auto`` bar with a widget front end
(:class:`LiveView`), nothing otherwise (:class:`QuietView`); :func:`live_view` picks.
"""

from __future__ import annotations

import html
from typing import Any

from ..core.tables import figure
from .shown import interactive_frontend


class QuietView:
    """What :func:`live_view` returns without a widget front end: accepts the calls, shows nothing (the train
    step prints its own plain step lines)."""

    enabled = False

    def __init__(self) -> None:
        self.history: list[dict[str, Any]] = []

    def update(self, metrics: dict[str, Any]) -> None:
        self.history.append(dict(metrics))

    def close(self) -> None:
        return None


class LiveView(QuietView):
    """Loss per step (an SVG line, eval loss dashed when reported), the last step's figures and a
    ``tqdm.auto`` progress bar, in one widget box updated by :meth:`update`."""

    enabled = True

    def __init__(self, total: int | None = None):
        super().__init__()
        import ipywidgets
        from IPython.display import display
        from tqdm.auto import tqdm as auto_tqdm

        self.plot = ipywidgets.HTML(_svg_plot([], []))
        self.figures = ipywidgets.HTML("waiting for the first step...")
        try:
            self.bar = auto_tqdm(total=total, desc="train steps", unit="step", display=False)
            children = [self.bar.container, self.figures, self.plot]
        except (TypeError, KeyError):  # a tqdm without the notebook variant: it draws itself
            self.bar = auto_tqdm(total=total, desc="train steps", unit="step")
            children = [self.figures, self.plot]
        self.box = ipywidgets.VBox(children)
        self.box.add_class("raytrain-live-view")  # what a browser (and the browser test) looks for
        display(self.box)

    def update(self, metrics: dict[str, Any]) -> None:
        super().update(metrics)
        step = int(metrics.get("step", len(self.history)))
        total = metrics.get("steps") or metrics.get("total")
        if len(self.history) == 1:  # the bar's clock starts at the first step, not at the job's submission
            self.bar.reset(total=int(total) if total else self.bar.total)
        if total and not self.bar.total:
            self.bar.total = int(total)
        self.bar.n = step
        self.bar.set_postfix(loss=figure(metrics.get("loss"), ".4f"), refresh=False)
        self.bar.refresh()
        losses = [(int(m.get("step", i + 1)), float(m["loss"])) for i, m in enumerate(self.history) if "loss" in m]
        evals = [
            (int(m.get("step", i + 1)), float(m["eval_loss"])) for i, m in enumerate(self.history) if "eval_loss" in m
        ]
        self.plot.value = _svg_plot(losses, evals)
        self.figures.value = html.escape(metrics_line(metrics))

    def close(self) -> None:
        self.bar.close()


def metrics_line(metrics: dict[str, Any]) -> str:
    """``step 3/8: loss 6.9480 | 0.044 s/step | 5,867 tokens/s`` (eval loss when reported)."""
    total = metrics.get("steps") or metrics.get("total")
    step = f"{metrics.get('step', '?')}" + (f"/{total}" if total else "")
    parts = [f"step {step}: loss {figure(metrics.get('loss'), '.4f')}"]
    if "eval_loss" in metrics:
        parts.append(f"eval loss {metrics['eval_loss']:.4f}")
    if "step_time_s" in metrics:
        parts.append(f"{metrics['step_time_s']:.3f} s/step")
    if "tokens_per_s" in metrics:
        parts.append(f"{metrics['tokens_per_s']:,.0f} tokens/s")
    return " | ".join(parts)


def _svg_plot(
    losses: list[tuple[int, float]], evals: list[tuple[int, float]], width: int = 420, height: int = 160
) -> str:
    """A small line chart of loss (solid) and eval loss (dashed) against step, as inline SVG."""
    points = losses + evals
    if not points:
        return (
            f'<svg width="{width}" height="{height}"><text x="10" y="20" font-size="12">loss: no step yet</text></svg>'
        )
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    x0, x1 = min(xs), max(max(xs), min(xs) + 1)
    y0, y1 = min(ys), max(ys)
    pad = (y1 - y0) * 0.1 or 0.05
    y0, y1 = y0 - pad, y1 + pad

    def coords(series: list[tuple[int, float]]) -> str:
        return " ".join(
            f"{40 + (x - x0) / (x1 - x0) * (width - 50):.1f},{10 + (y1 - y) / (y1 - y0) * (height - 30):.1f}"
            for x, y in series
        )

    lines = [f'<polyline fill="none" stroke="#1f77b4" stroke-width="2" points="{coords(losses)}"/>']
    if evals:
        lines.append(f'<polyline fill="none" stroke="#ff7f0e" stroke-dasharray="4" points="{coords(evals)}"/>')
    labels = (
        f'<text x="2" y="14" font-size="10">{y1:.3f}</text><text x="2" y="{height - 20}" font-size="10">{y0:.3f}</text>'
        f'<text x="40" y="{height - 4}" font-size="10">step {x0}</text>'
        f'<text x="{width - 60}" y="{height - 4}" font-size="10">step {max(xs)}</text>'
    )
    return f'<svg width="{width}" height="{height}">{labels}{"".join(lines)}</svg>'


def live_view(total: int | None = None, *, interactive: bool | None = None) -> QuietView:
    """A progress sink for the training step: ``update(metrics)`` per step (keys: step, steps (the total), loss,
    step_time_s, tokens_per_s, optional eval_loss), ``close()`` at the end. With a widget front end it draws a
    live loss plot, the step's tokens/s and a ``tqdm.auto`` bar; otherwise it shows nothing."""
    if interactive_frontend(interactive):
        return LiveView(total)
    return QuietView()
