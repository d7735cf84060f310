"""Notebooks executed headless with papermill against the real local cluster, with -p overrides."""

from __future__ import annotations

from pathlib import Path

import papermill as pm
import pytest

from tests.conftest import TEST_LOCAL
from tests.helpers import notebook_outputs

REPO = Path(__file__).resolve().parents[2]
NB = REPO / "notebooks"
pytestmark = pytest.mark.notebooks


def test_parameters_are_discoverable():
    for nb in sorted(NB.glob("[0-9][0-9]_*.ipynb")):
        params = pm.inspect_notebook(str(nb))
        assert {"target", "run_name", "env_file", "override_files", "assume_yes"} <= set(params), nb.name
    assert "steps" in pm.inspect_notebook(str(NB / "05_train.ipynb"))


def test_train_and_verify_with_overrides(local_cluster, tmp_path):
    params = dict(TEST_LOCAL, run_name="pm-overrides", steps=2, gpus_per_worker_node=0)
    out5 = tmp_path / "05.ipynb"
    pm.execute_notebook(str(NB / "05_train.ipynb"), str(out5), parameters=params, cwd=str(NB),
                        kernel_name="python3", progress_bar=False)
    text = notebook_outputs(out5)
    assert "steps 0->2 of 2" in text and "SUCCEEDED" in text
    assert "run pm-overrides" in text
    out6 = tmp_path / "06.ipynb"
    pm.execute_notebook(str(NB / "06_verify.ipynb"), str(out6), parameters=params, cwd=str(NB),
                        kernel_name="python3", progress_bar=False)
    text = notebook_outputs(out6)
    assert "0 failed" in text and "FAIL " not in text


def test_verify_fails_the_run_headless_when_a_criterion_fails(local_cluster, tmp_path):
    params = dict(TEST_LOCAL, run_name="pm-never-ran")
    with pytest.raises(pm.PapermillExecutionError) as e:
        pm.execute_notebook(str(NB / "06_verify.ipynb"), str(tmp_path / "06.ipynb"), parameters=params,
                            cwd=str(NB), kernel_name="python3", progress_bar=False)
    assert "failed criteria" in str(e.value) and "05_train" in str(e.value)


def test_bad_parameter_fails_with_the_field_named(tmp_path):
    with pytest.raises(pm.PapermillExecutionError) as e:
        pm.execute_notebook(str(NB / "01_capacity.ipynb"), str(tmp_path / "01.ipynb"),
                            parameters=dict(seq_len=4), cwd=str(NB), kernel_name="python3", progress_bar=False)
    assert "ConfigError" in str(e.value) and "train.seq_len (SEQ_LEN)" in str(e.value)
