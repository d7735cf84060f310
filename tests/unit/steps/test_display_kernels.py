"""05's efficiency line says when the workers trained without the kernels the plan assumed."""

from __future__ import annotations

from types import SimpleNamespace

from raytrain_helpers.steps import display
from tests.helpers import job_cfg


def _run(planned: str, ran: str) -> SimpleNamespace:
    cfg = job_cfg(kernels="auto", planned_kernels=planned)
    return SimpleNamespace(job_config=cfg, ranks=[dict(kernels=ran, mfu=0.41), dict(kernels=ran, mfu=0.40)])


def test_a_fallback_from_the_planned_kernels_is_named_with_where_to_read_why():
    line = display.efficiency(_run("liger", "none")).text
    assert "kernels none (planned: liger; the workers fell back" in line and "[kernels] log line" in line
    assert "kernels liger;" in display.efficiency(_run("liger", "liger")).text
    assert "kernels none;" in display.efficiency(_run("none", "none")).text
