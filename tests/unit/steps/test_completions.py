"""06's "the model does the task": the completion criterion (fails below 90 %), the before/after table, and the
pretrained path on the user's own prompts, with a small model the test saves itself (nothing downloaded)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")

from raytrain_helpers.core import config  # noqa: E402
from raytrain_helpers.core.criteria import Criteria  # noqa: E402
from raytrain_helpers.steps import completions, verify  # noqa: E402
from raytrain_helpers.worker import model as model_mod  # noqa: E402
from tests.helpers import SMALL_MODEL, job_cfg  # noqa: E402


def test_the_criterion_fails_at_89_percent_and_passes_at_90():
    assert completions.completion_ok(89, 100) == (False, "89/100 exactly right (89%), needs >= 90%")
    assert completions.completion_ok(90, 100)[0]
    assert completions.completion_ok(18, 20) == (True, "18/20 exactly right (90%), needs >= 90%")
    assert not completions.completion_ok(17, 20)[0]
    ok, evidence = completions.completion_ok(19, 19)  # all right, but too few prompts to say much
    assert not ok and "of at least 20 prompts" in evidence


@pytest.fixture
def settings(clean_env, repo_root, tmp_path):
    clean_env.setenv("RAYTRAIN_RUNS_DIR", str(tmp_path / "runs"))
    return config.load(repo_root / "env.yaml", environ={}, run_name="r1")


def _export(path, seed=0):
    torch.manual_seed(seed)
    model = model_mod.build_random(SMALL_MODEL, "cpu")
    model_mod.write_hf_folder(model.state_dict(), model.config, str(path), model_dir=None, meta={})
    return str(path)


def _run(path, **cfg):
    return SimpleNamespace(
        job_config=job_cfg(**{"model": SMALL_MODEL, "seed": 0, "data": "learnable", "export_path": path, **cfg}),
        metrics=dict(export_path=path),
    )


def test_the_table_rows_are_prompt_expected_before_after(settings, tmp_path, capsys):
    """An untrained export (the initial weights themselves): 20 held-out prompts, before == after, and the row
    fails with the count."""
    run = _run(_export(tmp_path / "model"))
    crit = Criteria("t")
    out = completions.check_completions(crit, settings, run)
    rows = out["rows"]
    assert len(rows) == 20 and rows[0][:2] == ("abcd", "efgh")
    assert all(before == after for _, _, before, after in rows)  # the same weights continue alike
    (row,) = crit.items
    assert row.status == "FAIL" and row.name.startswith("trained model completes held-out prompts")
    assert f"{sum(r[3] == r[1] for r in rows)}/20 exactly right" in row.evidence
    verify.show_model(verify.Verification(crit, run=run, generations=out), settings)
    text = capsys.readouterr().out
    assert "held-out prompt" in text and "before training" in text and "after training" in text
    assert "exactly right on 20 held-out prompts" in text


def test_the_row_passes_when_the_trained_model_continues_every_prompt(settings, monkeypatch):
    """Scoring counts the trained column against the expected one (the model stands in, its rows do not)."""
    pairs = completions.prompt_pairs(settings, job_cfg(data="learnable", seed=0), None)
    good = {"rows": [(p, e, "zzzz", e) for p, e in pairs], "before": 0.0, "after": 1.0, "path": "x"}
    monkeypatch.setattr(completions, "generate", lambda *a, **k: good)
    crit = Criteria("t")
    completions.check_completions(crit, settings, _run("x"))
    assert crit.items[0].status == "PASS" and "20/20 exactly right (100%)" in crit.items[0].evidence
    two_wrong = {**good, "rows": [(p, e, "zzzz", "zzzz" if i < 3 else e) for i, (p, e) in enumerate(pairs)]}
    monkeypatch.setattr(completions, "generate", lambda *a, **k: two_wrong)
    crit = Criteria("t")
    completions.check_completions(crit, settings, _run("x"))
    assert crit.items[0].status == "FAIL" and "17/20 exactly right (85%)" in crit.items[0].evidence


def test_no_export_fails_and_other_data_is_not_applicable(settings, tmp_path):
    crit = Criteria("t")
    completions.check_completions(crit, settings, SimpleNamespace(job_config=job_cfg(data="learnable"), metrics={}))
    assert crit.items[0].status == "FAIL" and "no exported model" in crit.items[0].evidence
    crit = Criteria("t")
    completions.check_completions(crit, settings, _run(None, export=False))
    assert crit.items[0].status == "n/a" and "train.export is false" in crit.items[0].evidence
    crit = Criteria("t")
    text = tmp_path / "mine.txt"
    assert completions.check_completions(crit, settings, _run("x", data=str(text))) is None
    assert crit.items[0].status == "n/a"


def test_a_pretrained_model_continues_the_users_own_prompts(settings, tmp_path, capsys):
    """aws with model_id set and the user's data: the table shows the pretrained model (loaded from model_id)
    beside the fine-tuned export, on the prompts passed to 06, unscored."""
    pretrained = _export(tmp_path / "pretrained", seed=1)
    export = _export(tmp_path / "model", seed=2)  # "fine-tuned": other weights than the pretrained ones
    (tmp_path / "mine.txt").write_text("hello world\n")
    s = config.with_overrides(settings, model_id=pretrained, data=str(tmp_path / "mine.txt"))
    run = _run(export, model_id=pretrained, data=str(tmp_path / "mine.txt"))
    v = verify.Verification(Criteria("t"), run=run)
    out = verify.show_model(v, s, ["hello wor", "abc"])
    assert [r[:2] for r in out["rows"]] == [("hello wor", "-"), ("abc", "-")]
    assert out["before"] is None and out["after"] is None
    ref = completions.generate(s, ["hello wor", "abc"], run=_run(pretrained, model_id=pretrained), show=False)
    assert [r[2] for r in out["rows"]] == [r[3] for r in ref["rows"]], "before = the pretrained model's continuation"
    assert out["rows"][1][2] != out["rows"][1][3], "the two models continue 'abc' differently (seeds 1 and 2)"
    text = capsys.readouterr().out
    assert "prompt" in text and "hello wor" in text and "exactly right" not in text


def test_a_continuation_is_right_when_it_starts_with_the_expected_letters():
    assert completions.right("efgh", "efgh") and completions.right("efghij", "efgh")  # a BPE token may run on
    assert not completions.right("efg", "efgh") and not completions.right("<eos>efgh", "efgh")
    assert not completions.right("anything", "")


def test_prompt_completion_data_is_scored_on_its_held_out_rows_by_the_final_answer(settings, tmp_path, monkeypatch):
    """A GSM8K-shaped file (question, answer ending in #### N): the table's prompts are its held-out rows as the job
    wrote them (the template filled in), the expected column their answers; the row passes only when the trained
    model's final answers beat the initial weights'."""
    import json

    from raytrain_helpers.worker import data as worker_data

    rows = [{"question": f"What is {i} plus {i}?", "answer": f"{i}+{i}={2 * i}\n#### {2 * i}"} for i in range(600)]
    (tmp_path / "qa.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    fields = dict(
        data=str(tmp_path / "qa.jsonl"),
        data_format="prompt_completion",
        data_columns={"prompt": "question", "completion": "answer"},
        prompt_template="Question: {prompt}\nAnswer: ",
    )
    cfg = job_cfg(seed=0, **fields)
    pairs = completions.prompt_pairs(settings, cfg, None)
    assert len(pairs) == 20 and all(p.startswith("Question: What is ") and p.endswith("\nAnswer: ") for p, _ in pairs)
    held = {
        r["question"]
        for r in rows
        if worker_data.is_eval_row("prompt_completion", {"prompt": r["question"], "completion": r["answer"]})
    }
    assert {p.removeprefix("Question: ").removesuffix("\nAnswer: ") for p, _ in pairs} <= held
    right = [(p, e, "I do not know", "so\n#### " + e.rsplit("#### ", 1)[1]) for p, e in pairs]
    for after, before, status in ((1.0, 0.0, "PASS"), (0.0, 0.0, "FAIL")):
        got = {"rows": right, "before": before, "after": after, "path": "x"}
        monkeypatch.setattr(completions, "generate", lambda *a, _g=got, **k: _g)
        crit = Criteria("t")
        completions.check_completions(crit, settings, SimpleNamespace(job_config=cfg, metrics={}))
        (row,) = crit.items
        assert row.status == status and row.name.endswith("(better than before training)"), row
        assert row.evidence.startswith("20/20 exactly right after training")
