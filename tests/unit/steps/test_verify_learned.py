"""06's "the model learned" criterion: the held-out eval loss must fall by the stated margin; n/a on random data."""

from __future__ import annotations

import math

from raytrain_helpers.clients.rayjobs import JobRun
from raytrain_helpers.core.criteria import Criteria
from raytrain_helpers.steps import verify
from tests.helpers import job_cfg

# eval losses of real runs of the job (tiny preset, 2 CPU workers, 8 steps, eval every 2 steps)
LEARNABLE = [(0, 6.43), (2, 6.02), (4, 5.41), (6, 4.90), (8, 4.47)]
RANDOM = [(0, 6.95), (2, 6.95), (4, 6.94), (6, 6.95), (8, 6.95)]


def _run(evals, data) -> JobRun:
    return JobRun("raytrain-t-1", "SUCCEEDED", result=dict(ok=True, metrics=dict(evals=evals, data=data)))


def _row(evals, data):
    crit = Criteria("t")
    verify.check_learned(crit, _run(evals, data))
    (row,) = crit.items
    return row


def test_passes_on_learnable_data_whose_eval_loss_fell():
    row = _row(LEARNABLE, "learnable")
    assert row.status == "PASS", row
    assert "6.430 at step 0 -> 4.685" in row.evidence and "needs >= 5 %" in row.evidence


def test_fails_when_the_eval_loss_stays_flat_on_data_that_could_be_learned():
    row = _row(RANDOM, "learnable")
    assert row.status == "FAIL", row


def test_is_not_applicable_on_random_data_even_when_the_loss_wobbles_down():
    assert _row(LEARNABLE, "random").status == "n/a"
    assert _row(RANDOM, "random").status == "n/a"


def test_fails_without_two_evals_or_with_non_finite_ones():
    assert _row([(8, 4.0)], "learnable").status == "FAIL"
    assert _row([(0, 6.4), (8, math.nan)], "learnable").status == "FAIL"


def test_margin_is_relative_to_the_first_eval():
    ok, _ = verify.learned([(0, 10.0), (2, 9.6), (4, 9.4)], "learnable", margin=0.05)
    assert ok is True  # mean 9.5 <= 9.5
    ok, _ = verify.learned([(0, 10.0), (2, 9.7), (4, 9.4)], "learnable", margin=0.05)
    assert ok is False  # mean 9.55 > 9.5


def test_no_evals_asked_for_is_not_a_failure():
    from types import SimpleNamespace

    from raytrain_helpers.core.criteria import Criteria
    from raytrain_helpers.steps.verify import check_learned

    crit = Criteria("verification")
    run = SimpleNamespace(metrics={"data": "learnable"}, steps=[], job_config=job_cfg(eval_every=0, data="learnable"))
    check_learned(crit, run)
    assert crit.items[-1].status == "n/a" and "eval_every is 0" in crit.items[-1].evidence
    crit = Criteria("verification")
    check_learned(crit, SimpleNamespace(metrics={"data": "learnable"}, steps=[], job_config=job_cfg(eval_every=2)))
    assert crit.items[-1].status == "FAIL"
