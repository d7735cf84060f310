"""Comparing two benchmark runs: only after each run's audit confirms the transport it was meant to use."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..core.tables import table
from .auditing import audit, check_expect
from .result import AuditResult

_RUN_FIELDS = ("label", "expected_transport", "log_text", "tokens_per_s_per_gpu", "steps_per_s")


@dataclass
class Comparison:
    ok: bool
    refusal: str | None
    run_a: dict[str, Any]
    run_b: dict[str, Any]
    audit_a: AuditResult
    audit_b: AuditResult
    speedup_tokens: float | None = None  # a / b, tokens per second per GPU
    speedup_steps: float | None = None  # a / b, steps per second

    @property
    def speedup(self) -> float | None:
        return self.speedup_tokens

    def to_dict(self) -> dict[str, Any]:
        def run(r: dict[str, Any], a: AuditResult) -> dict[str, Any]:
            return {
                "label": r["label"],
                "expected_transport": r["expected_transport"],
                "tokens_per_s_per_gpu": r["tokens_per_s_per_gpu"],
                "steps_per_s": r["steps_per_s"],
                "audit": {"ok": a.ok, "verdict": a.verdict, "expected": a.expected, "summary": a.summary},
            }

        return {
            "ok": self.ok,
            "refusal": self.refusal,
            "run_a": run(self.run_a, self.audit_a),
            "run_b": run(self.run_b, self.audit_b),
            "speedup_tokens": self.speedup_tokens,
            "speedup_steps": self.speedup_steps,
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    def show(self) -> None:
        rows = []
        for r, a in ((self.run_a, self.audit_a), (self.run_b, self.audit_b)):
            rows.append(
                (
                    r["label"],
                    r["expected_transport"],
                    f"{'PASS' if a.ok else 'FAIL'} ({a.verdict})",
                    f"{float(r['tokens_per_s_per_gpu']):.1f}",
                    f"{float(r['steps_per_s']):.3f}",
                )
            )
        headers = ["run", "expected transport", "audit", "tokens/s/GPU", "steps/s"]
        table(rows, headers, title="benchmark comparison", max_width=90)
        if self.ok:
            print(
                f"speedup {self.run_a['label']} / {self.run_b['label']}: {self.speedup_tokens:.2f}x tokens/s per "
                f"GPU, {self.speedup_steps:.2f}x steps/s (both transports confirmed by the NCCL audit)"
            )
        else:
            print(f"no speedup reported: {self.refusal}")


def _check_run(run: Any, name: str) -> dict[str, Any]:
    if not isinstance(run, Mapping):
        raise TypeError(f"{name}: expected a dict with {', '.join(_RUN_FIELDS)}")
    missing = [f for f in _RUN_FIELDS if f not in run]
    if missing:
        raise ValueError(
            f"{name}: missing {', '.join(missing)}. Fix: pass a dict with {', '.join(_RUN_FIELDS)} "
            f"(rates measured after the warm-up steps)"
        )
    out = dict(run)
    check_expect(out["expected_transport"])
    if out["expected_transport"] == "auto":
        raise ValueError(
            f"{name}.expected_transport='auto': a benchmark run must state the transport it was meant "
            f"to use. Fix: efa, p2p, socket or none"
        )
    for f in ("tokens_per_s_per_gpu", "steps_per_s"):
        v = out[f]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0 or v != v or v == float("inf"):
            raise ValueError(f"{name}.{f}={v!r}: expected a positive number. Fix: the measured rate after warm-up")
    return out


def compare_runs(run_a: Mapping[str, Any], run_b: Mapping[str, Any]) -> Comparison:
    """Compare two benchmark runs; refuse unless each run's NCCL audit confirms the transport it was meant to use.

    Each run: ``label``, ``expected_transport`` (efa|p2p|socket|none), ``log_text`` (str, list or dict of texts),
    ``tokens_per_s_per_gpu``, ``steps_per_s`` (warm-up excluded). ``speedup_tokens`` = a / b."""
    a, b = _check_run(run_a, "run_a"), _check_run(run_b, "run_b")
    audit_a = audit(a["log_text"], expect=a["expected_transport"])
    audit_b = audit(b["log_text"], expect=b["expected_transport"])
    refusals = []
    for r, au in ((a, audit_a), (b, audit_b)):
        if not au.ok:
            refusals.append(
                f"run {r['label']!r} was meant to use {r['expected_transport']} but its NCCL audit says "
                f"{au.verdict}: {au.summary}"
            )
    if refusals:
        return Comparison(False, "; ".join(refusals), a, b, audit_a, audit_b)
    return Comparison(
        True,
        None,
        a,
        b,
        audit_a,
        audit_b,
        speedup_tokens=float(a["tokens_per_s_per_gpu"]) / float(b["tokens_per_s_per_gpu"]),
        speedup_steps=float(a["steps_per_s"]) / float(b["steps_per_s"]),
    )
