"""A learner's view: JupyterLab on 127.0.0.1 driven by headless Chromium.

The notebooks are opened as a learner opens them (prepared with the test cluster's parameters, not executed),
every cell is run through JupyterLab's own "run all" command, the notebook is saved, and the saved file must
hold no error output while the interactive parts (the settings form, the live training view) rendered as widgets
in the page. A full screenshot of each notebook is kept under the test's temporary folder (and copied to
``$TUTORIAL_SCREENSHOT_DIR`` when it is set: a RAYTRAIN_* name would reach the kernel as a setting).

Needs Debian's ``chromium`` and Playwright for Python (never ``playwright install``: the browser is the system's);
``.ci/run`` installs both. Without them the test is skipped with the reason.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import papermill as pm
import pytest

from tests.conftest import TEST_LOCAL

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
#: The notebooks the learner runs here, and the widget each must show: 01 needs no cluster; 05 trains on the
#: session's local Ray cluster (its tests run on one pytest-xdist worker, in line) and draws the live view.
NOTEBOOKS = {"01_capacity": "raytrain-settings-form", "05_train": "raytrain-live-view"}

pytestmark = pytest.mark.browser


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def browser():
    sync_api = pytest.importorskip("playwright.sync_api", reason="Playwright for Python is not installed")
    if not CHROMIUM.is_file():
        pytest.skip(f"{CHROMIUM} is absent: apt-get install -y chromium (.ci/run does)")
    with sync_api.sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"], headless=True)
        yield b
        b.close()


@pytest.fixture(scope="module")
def lab(tmp_path_factory, test_runs_dir):
    """JupyterLab serving a folder of its own, without token, with the app exposed to the page's scripts. Its
    kernels write their runs where the rest of the suite does, whichever fixture came first."""
    root = tmp_path_factory.mktemp("lab")
    port = _free_port()
    cmd = [
        sys.executable,
        "-m",
        "jupyter",
        "lab",
        "--no-browser",
        "--ip=127.0.0.1",
        f"--port={port}",
        f"--ServerApp.root_dir={root}",
        "--IdentityProvider.token=",
        "--ServerApp.password=",
        "--LabApp.expose_app_in_browser=True",
        "--LabApp.news_url=None",
    ]
    if os.geteuid() == 0:
        cmd.append("--allow-root")
    log = (root.parent / "jupyterlab.log").open("w")
    env = dict(os.environ, JUPYTER_CONFIG_DIR=str(root.parent / "jupyter-config"), RAYTRAIN_RUNS_DIR=str(test_runs_dir))
    proc = subprocess.Popen(cmd, cwd=root, stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        _wait_for_port(port, proc, timeout=90)
        yield root, f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()


def _wait_for_port(port: int, proc: subprocess.Popen, timeout: float) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"jupyter lab exited with {proc.returncode}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.5)
    raise TimeoutError(f"jupyter lab did not listen on {port} within {timeout} s")


def _prepare(root: Path, name: str, run_name: str) -> Path:
    """The notebook as a learner gets it: parameters injected, no outputs."""
    dst = root / f"{name}.ipynb"
    params = dict(TEST_LOCAL, run_name=run_name, env_file=str(REPO / "env.yaml"), steps=3, gpus_per_worker_node=0)
    pm.execute_notebook(str(REPO / "notebooks" / f"{name}.ipynb"), str(dst), parameters=params, prepare_only=True)
    return dst


#: The notebook panel showing ``path`` (JupyterLab may restore an earlier notebook beside it), its kernel's status
#: and its code cells from their models: cells scrolled out of the windowed notebook have no prompt in the page.
RUN_STATE = """(path) => {
  const panel = window.jupyterapp.shell.currentWidget;
  if (!panel || !panel.content || !panel.context || panel.context.path !== path) return null;
  const session = panel.sessionContext && panel.sessionContext.session;
  const kernel = session && session.kernel;
  const cells = panel.content.model.cells;
  let ran = 0, total = 0, errors = 0;
  for (let i = 0; i < cells.length; i++) {
    const c = cells.get(i);
    if (c.type !== 'code') continue;
    total += 1;
    if (c.executionCount) ran += 1;
    for (let j = 0; j < c.outputs.length; j++) if (c.outputs.get(j).type === 'error') errors += 1;
  }
  return {kernel: kernel ? kernel.status : 'none', ran, total, errors};
}"""


def _run_all(page, path: str, timeout_s: float) -> dict:
    """Run every cell of the notebook at ``path`` with JupyterLab's own command; returns once every code cell has
    run (or a cell failed, which stops "run all") and the kernel is idle."""
    page.wait_for_function(f"() => window.jupyterapp && ({RUN_STATE})({path!r}) !== null", timeout=60_000)
    page.wait_for_function(f"() => (({RUN_STATE})({path!r}) || {{}}).kernel === 'idle'", timeout=120_000)
    page.evaluate("window.jupyterapp.commands.execute('notebook:run-all-cells')")
    deadline = time.time() + timeout_s
    state: dict = {}
    while time.time() < deadline:
        state = page.evaluate(f"({RUN_STATE})({path!r})") or {}
        if state.get("kernel") == "idle" and (state.get("ran") == state.get("total") or state.get("errors")):
            time.sleep(1.0)  # outputs of the last message settle
            return page.evaluate(f"({RUN_STATE})({path!r})")
        time.sleep(1.0)
    raise TimeoutError(f"the notebook did not finish in {timeout_s} s: {state}")


def _screenshot(page, path: Path) -> None:
    """The notebook scrolls inside .jp-WindowedPanel-outer: grow the viewport to its height, then shoot."""
    no = page.get_by_role("button", name="No")  # JupyterLab's first-run question about news
    if no.count():
        no.first.click()
    height = page.evaluate(
        "() => { const o = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-WindowedPanel-outer');"
        " return o ? o.scrollHeight : 2000; }"
    )
    page.set_viewport_size({"width": 1280, "height": min(int(height) + 200, 16000)})
    page.evaluate(
        "() => { const o = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-WindowedPanel-outer');"
        " if (o) o.scrollTop = 0; }"
    )
    page.wait_for_timeout(1000)
    page.screenshot(path=str(path), full_page=True)
    _keep(path)


def _keep(path: Path) -> None:
    if os.environ.get("TUTORIAL_SCREENSHOT_DIR"):
        shutil.copy(path, Path(os.environ["TUTORIAL_SCREENSHOT_DIR"]) / path.name)


def _learner_runs(name: str, browser, lab, tmp_path) -> tuple[dict, str]:
    """Open the prepared notebook in JupyterLab, run all, save, screenshot. Returns the saved notebook and the
    text of the notebook's widget of ``NOTEBOOKS[name]`` as the page showed it at the end."""
    root, url = lab
    nb_path = _prepare(root, name, run_name=f"browser-{name[:2]}")
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    widget_class = NOTEBOOKS[name]
    try:
        page.goto(f"{url}/lab/tree/{nb_path.name}", wait_until="domcontentloaded", timeout=90_000)
        state = _run_all(page, nb_path.name, timeout_s=420)
        page.evaluate("window.jupyterapp.commands.execute('docmanager:save')")
        page.wait_for_timeout(1500)
        widget = page.locator(f".{widget_class}")
        rendered = widget.count()
        text = widget.first.text_content() if rendered else ""
        broken = page.get_by_text("Error displaying widget").count()
        _screenshot(page, tmp_path / f"{name}.png")
        if rendered:
            widget.first.screenshot(path=str(tmp_path / f"{name}-widget.png"))
            _keep(tmp_path / f"{name}-widget.png")
    finally:
        page.close()

    saved = json.loads(nb_path.read_text())
    errors = [
        o.get("ename", "") + ": " + o.get("evalue", "")
        for c in saved["cells"]
        if c["cell_type"] == "code"
        for o in c.get("outputs", [])
        if o.get("output_type") == "error"
    ]
    assert not errors, errors
    assert state["ran"] == state["total"], state
    assert rendered >= 1 and broken == 0, f"the {widget_class} widget did not render ({rendered} found)"
    assert (tmp_path / f"{name}.png").stat().st_size > 10_000
    return saved, text


def test_learner_fills_in_the_settings_form_in_jupyterlab(browser, lab, tmp_path):
    _, text = _learner_runs("01_capacity", browser, lab, tmp_path)
    assert "validate and save" in text, text[:500]


def test_learner_watches_the_live_training_view_in_jupyterlab(local_cluster, browser, lab, tmp_path):
    """05 on the session's cluster: the live view (progress bar, figures, loss plot) drew every step of the run,
    and the plain step lines of a headless run stayed out of the page."""
    saved, text = _learner_runs("05_train", browser, lab, tmp_path)
    assert "step 3/3: loss" in text and "tokens/s" in text, text[:500]
    assert "3/3" in text, "the progress bar reached the last step"
    printed = "".join(
        "".join(o.get("text", "")) for c in saved["cells"] if c["cell_type"] == "code" for o in c.get("outputs", [])
    )
    assert "[train] step 1/3" not in printed, "with a widget front end the step lines are drawn, not printed"
    assert "Uploading package" not in printed, "Ray's client INFO lines stay out of the notebook"
