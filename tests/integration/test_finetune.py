"""The fine-tuning job for real on the session's local Ray cluster: Ray Data shards, eval loss, resume from a
checkpoint without repeating or skipping data, "the model learned", and the exported Hugging Face folder.

Two jobs of one run: 4 steps (final checkpoint at step 4), then the same run to 8 steps (resumes at step 4)."""

from __future__ import annotations

import pytest

from raytrain_helpers.core import config
from raytrain_helpers.steps import train as train_step
from raytrain_helpers.steps import verify

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def runs(local_settings, local_cluster):
    s = config.with_overrides(
        local_settings, run_name="finetune-it", data="learnable", eval_every=2, learning_rate=0, checkpoint_every=4
    )
    first = train_step.submit(s, steps=4, quiet=True)
    second = train_step.submit(s, steps=8, quiet=True)
    return s, first, second


def _by_rank(run):
    return {r["rank"]: r for r in run.ranks}


def test_each_worker_reads_a_disjoint_shard(runs):
    _, first, second = runs
    assert first.ok, first.result.get("error")
    for run in (first, second):
        ranks = _by_rank(run)
        assert len(ranks) == 2
        a, b = (set(ranks[i]["data_digests"]) for i in (0, 1))
        assert a and b and not a & b, "two ranks trained on the same batch"


def test_resume_neither_repeats_nor_skips_data(runs):
    _, first, second = runs
    assert second.ok, second.result.get("error")
    assert second.metrics["resumed_from"] == 4 and second.metrics["data_position"] == {"epoch": 0, "batch": 8}
    for rank, before in _by_rank(first).items():
        after = _by_rank(second)[rank]
        assert len(before["data_digests"]) == 4 and len(after["data_digests"]) == 4
        # the resumed reader passed over exactly the batches trained before the checkpoint, in order...
        assert after["skipped_digests"] == before["data_digests"]
        # ...and trained on new ones
        assert not set(after["data_digests"]) & set(before["data_digests"])


def test_eval_loss_is_reported_and_the_model_learned(runs):
    _, _, second = runs
    evals = second.metrics["evals"]
    assert [st for st, _ in evals] == [0, 2, 4, 6, 8]  # steps 0-4 carried over in the checkpoint
    assert sorted({st["step"] for st in second.steps if "eval_loss" in st}) == [6, 8]  # Ray may print a line twice
    ok, evidence = verify.learned(evals, second.metrics["data"])
    assert ok, evidence


def test_the_exported_model_loads_and_generates(runs):
    settings, _, second = runs
    out = verify.generate(settings, run_name="finetune-it", show=False)
    assert out["path"] == second.metrics["export_path"] and out["path"].endswith("finetune-it/model")
    assert len(out["rows"]) >= 10 and out["after"] is not None
