"""The Ray dashboard of the learner's cluster, opened as 05 teaches: a training job of the session's local cluster
(token authentication on), the address and token from the target's ``dashboard``, the job's page opened in headless
Chromium (Debian's, through Playwright): the dashboard asks for the token, takes it, and shows the job.

The screenshot is kept beside the test's files; with ``RAYTRAIN_UPDATE_SCREENSHOTS=1`` it also replaces
``docs/images/dashboard-job.png``, the picture docs/observability.md shows. Without Chromium or Playwright the test
is skipped with the reason.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from raytrain_helpers.core import config
from raytrain_helpers.steps import observe, train
from raytrain_helpers.targets import local
from tests.jupyterlab import CHROMIUM, missing

pytestmark = pytest.mark.browser
DOCS_SHOT = Path(__file__).resolve().parents[2] / "docs" / "images" / "dashboard-job.png"


def test_the_token_opens_the_job_page_in_the_dashboard(local_settings, local_cluster, tmp_path):
    if missing():
        pytest.skip(missing())
    from playwright import sync_api

    s = config.with_overrides(local_settings, run_name="dashboard", steps=3, gpus_per_worker_node=0)
    job = train.submit(s, quiet=True)
    assert job.ok, job.result.get("error")
    shown = str(observe.dashboard(s))
    with local.dashboard(s) as access:
        assert access.token and access.token not in shown and access.token not in repr(access), "never printed"
        shot = tmp_path / "dashboard-job.png"
        with sync_api.sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"], headless=True)
            try:
                page = browser.new_page(viewport={"width": 1280, "height": 860})
                page.goto(f"{access.url}/#/jobs/{job.submission_id}", wait_until="load")
                box = page.get_by_placeholder("Enter your authentication token")
                box.wait_for(timeout=60_000)  # Ray 2.58's dialog "Authentication Token Required"
                box.fill("not-the-token")
                page.get_by_role("button", name="Submit").click()
                page.get_by_text("authentication token is invalid", exact=False).first.wait_for(timeout=30_000)
                box.fill(access.token)
                page.get_by_role("button", name="Submit").click()
                page.get_by_text(job.submission_id).first.wait_for(timeout=60_000)
                page.get_by_text("SUCCEEDED").first.wait_for(timeout=60_000)
                assert box.count() == 0 or not box.is_visible(), "the dialog closed once the token was taken"
                page.wait_for_timeout(2_000)  # the job's tables fill in
                page.screenshot(path=str(shot), full_page=False)
            finally:
                browser.close()
    assert shot.stat().st_size > 20_000, "a page, not a blank"
    if os.environ.get("RAYTRAIN_UPDATE_SCREENSHOTS") == "1":
        DOCS_SHOT.parent.mkdir(exist_ok=True)
        shutil.copyfile(shot, DOCS_SHOT)
