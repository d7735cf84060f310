"""A learner's view: JupyterLab on 127.0.0.1 driven by headless Chromium (``tests/jupyterlab.py``).

01 is opened as a learner opens it (prepared with the test cluster's parameters, not executed), every cell is run
through JupyterLab's own "run all" command and the notebook is saved: the saved file must hold no error output and
the settings form must have rendered as a widget in the page. 05's live training view is checked the same way, in
JupyterLab, as the first run of the papermill module's train/resume flow (``tests/notebooks/test_papermill.py``).

Without Debian's ``chromium`` or Playwright for Python the test is skipped with the reason.
"""

from __future__ import annotations

import pytest

from tests.conftest import TEST_LOCAL

pytestmark = pytest.mark.browser


def test_learner_fills_in_the_settings_form_in_jupyterlab(learner, tmp_path):
    if learner is None:
        from tests.jupyterlab import missing

        pytest.skip(missing())
    params = dict(TEST_LOCAL, run_name="browser-01", steps=3, gpus_per_worker_node=0)
    run = learner.run("01_capacity", params, "raytrain-settings-form", tmp_path)
    run.check_ran("settings form")
    assert "validate and save" in run.widget_text, run.widget_text[:500]
