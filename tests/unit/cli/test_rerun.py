"""Why ``raytrain-tutorial run`` runs a notebook again: the resolved settings (whatever their source), the
notebook's file and its other parameters, decided by a pure function over the recorded state."""

from __future__ import annotations

import argparse
import json

import nbformat
import pytest

from raytrain_helpers.cli import run as run_cli
from raytrain_helpers.cli import runner
from raytrain_helpers.core import config

NAMES = ["01_capacity", "02_cluster", "03_plugins", "04_kuberay", "05_train"]


@pytest.fixture
def env_copy(tmp_path, repo_root, clean_env):
    path = tmp_path / "env.yaml"
    path.write_text((repo_root / "env.yaml").read_text())
    return path


def _record(settings, digests):
    snap = runner.settings_snapshot(settings)
    return {n: {"status": "ok", "settings": snap, "notebook": d, "other_params": {}} for n, d in digests.items()}


def _reasons(steps, settings, digests, params=None):
    return runner.rerun_reasons(steps, runner.settings_snapshot(settings), digests, params or {})


DIGESTS = {n: f"d-{n}" for n in NAMES}


def test_an_edit_of_env_yaml_reruns_every_notebook_and_says_why(env_copy):
    before = config.load(env_copy, environ={})
    steps = _record(before, DIGESTS)
    assert set(_reasons(steps, config.load(env_copy, environ={}), DIGESTS).values()) == {None}

    env_copy.write_text(env_copy.read_text().replace("  steps: 80 ", "  steps: 20 "))
    after = config.load(env_copy, environ={})
    assert after.train.steps == 20
    assert set(_reasons(steps, after, DIGESTS).values()) == {"settings changed: train.steps 80 \u2192 20"}


@pytest.mark.parametrize(
    "how",
    ["file", "environment", "parameter"],
)
def test_every_source_of_a_setting_counts(env_copy, tmp_path, how):
    steps = _record(config.load(env_copy, environ={}), DIGESTS)
    over = tmp_path / "over.yaml"
    over.write_text("local:\n  worker_nodes: 3\n")
    kwargs = {
        "file": dict(files=[over], environ={}),
        "environment": dict(environ={"RAYTRAIN_WORKER_NODES": "3"}),
        "parameter": dict(environ={}, worker_nodes=3),
    }[how]
    after = config.load(env_copy, **kwargs)
    assert set(_reasons(steps, after, DIGESTS).values()) == {"settings changed: local.worker_nodes 2 \u2192 3"}


def test_notebook_file_failure_and_new_notebooks(env_copy):
    s = config.load(env_copy, environ={})
    steps = _record(s, {n: DIGESTS[n] for n in NAMES[:4]})
    steps["02_cluster"]["status"] = "failed"
    changed = {**DIGESTS, "03_plugins": "edited"}
    assert _reasons(steps, s, changed) == {
        "01_capacity": None,
        "02_cluster": "failed last time",
        "03_plugins": "notebook changed",
        "04_kuberay": None,
        "05_train": "never ran",
    }
    assert _reasons(steps, s, DIGESTS, {"assume_yes": True})["01_capacity"] == (
        "parameters changed: assume_yes (unset) \u2192 true"
    )


def test_plan_resumes_at_the_first_changed_notebook_with_reasons():
    reasons = {n: None for n in NAMES} | {"04_kuberay": "notebook changed"}
    selected, why = runner.plan_run(NAMES, reasons)
    assert selected == NAMES
    assert why == {
        "02_cluster": "re-run before resuming (reuses a running cluster)",
        "04_kuberay": "notebook changed",
        "05_train": "an earlier notebook ran again",
    }
    assert runner.plan_run(NAMES, {n: None for n in NAMES}) == (NAMES, {})
    assert set(runner.plan_run(NAMES, {n: None for n in NAMES}, force=True)[1].values()) == {"--force"}


def _nb(path, params_source):
    nb = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_code_cell(params_source, metadata={"tags": ["parameters"]}),
            nbformat.v4.new_code_cell("print('ran')"),
        ]
    )
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)


def test_run_skips_nothing_after_an_env_yaml_edit_and_injects_canonical_names(env_copy, tmp_path, monkeypatch, capsys):
    """Real papermill: -p in its three spellings is injected under the flat name with the field's type."""
    nbs = tmp_path / "nbs"
    nbs.mkdir()
    _nb(nbs / "01_one.ipynb", "# Parameters\nrun_name = None\ntarget = None\nsteps = None\nk8s_version = None")
    monkeypatch.setenv("RAYTRAIN_NOTEBOOKS_DIR", str(nbs))
    monkeypatch.setenv("RAYTRAIN_RUNS_DIR", str(tmp_path / "runs"))
    parser = argparse.ArgumentParser()
    run_cli.register(parser.add_subparsers())

    def cli(*argv):
        args = parser.parse_args(["run", "--env-file", str(env_copy), "--run-name", "fp", *argv])
        return args.func(args)

    assert cli("-p", "train.steps", "3", "-p", "K8S_VERSION", "1.30") == 0
    executed = nbformat.read(tmp_path / "runs" / "fp" / "notebooks" / "01_one.ipynb", as_version=4)
    injected = next(c.source for c in executed.cells if "injected-parameters" in c.metadata.get("tags", []))
    assert "steps = 3\n" in injected and 'k8s_version = "1.30"' in injected and "train.steps" not in injected
    assert cli("-p", "STEPS", "3", "-p", "k8s_version", "1.30") == 0  # the same settings: skipped
    assert "skipped" in capsys.readouterr().out
    env_copy.write_text(env_copy.read_text().replace("  seq_len: 128", "  seq_len: 64"))
    assert cli("-p", "steps", "3", "-p", "k8s_version", "1.30") == 0
    assert "settings changed: train.seq_len 128 \u2192 64" in capsys.readouterr().out
    state = json.loads((tmp_path / "runs" / "fp" / "run_state.json").read_text())
    assert state["steps"]["01_one"]["reason"] == "settings changed: train.seq_len 128 \u2192 64"
