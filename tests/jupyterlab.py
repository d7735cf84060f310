"""A learner's view: JupyterLab on 127.0.0.1 driven by headless Chromium, shared by the tests that run a notebook
as a learner does (the browser module's 01, the papermill module's first 05 run).

A notebook is opened as a learner opens it (prepared with parameters by papermill, not executed), every cell is run
through JupyterLab's own "run all" command, the notebook is saved and its kernel shut down; the server serves the
whole session, a Chromium is launched per notebook. A full screenshot of each
notebook is kept under the test's temporary folder (and copied to ``$TUTORIAL_SCREENSHOT_DIR`` when it is set: a
RAYTRAIN_* name would reach the kernel as a setting).

Needs Debian's ``chromium`` and Playwright for Python (never ``playwright install``: the browser is the system's);
``.ci/run`` installs both. :func:`missing` says what is absent.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import papermill as pm

from tests.helpers import free_port, notebook_outputs

REPO = Path(__file__).resolve().parents[1]
CHROMIUM = Path("/usr/bin/chromium")


def missing() -> str | None:
    """Why a learner's browser cannot run here, or None when it can."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "Playwright for Python is not installed"
    if not CHROMIUM.is_file():
        return f"{CHROMIUM} is absent: apt-get install -y chromium (.ci/run does)"
    return None


@dataclass
class LearnerRun:
    """What a notebook run in JupyterLab left: the saved notebook, the state of its cells as the page counted them,
    the widget's text (empty when it did not render), how many widgets failed to display, the screenshot."""

    path: Path
    state: dict
    widget_text: str
    rendered: int
    broken: int
    screenshot: Path

    @property
    def errors(self) -> list[str]:
        saved = json.loads(self.path.read_text())
        return [
            o.get("ename", "") + ": " + o.get("evalue", "")
            for c in saved["cells"]
            if c["cell_type"] == "code"
            for o in c.get("outputs", [])
            if o.get("output_type") == "error"
        ]

    @property
    def printed(self) -> str:
        """Every text output of the saved notebook."""
        return notebook_outputs(self.path)

    def check_ran(self, what: str) -> None:
        """Every code cell ran, none holds an error, ``what`` (the widget) rendered, none failed to display."""
        assert not self.errors, self.errors
        assert self.state["ran"] == self.state["total"], self.state
        assert self.rendered >= 1 and self.broken == 0, f"the {what} did not render ({self.rendered} found)"
        assert self.screenshot.stat().st_size > 10_000


class Learner:
    """A JupyterLab server serving ``root`` at ``url``; :meth:`run` runs one notebook in it as a learner does, in a
    headless Chromium launched for that run (Playwright's sync API holds an event loop of its own while it is open,
    so it is closed before the caller runs papermill again)."""

    def __init__(self, root: Path, url: str):
        self.root, self.url = root, url

    def run(self, name: str, params: dict[str, Any], widget_class: str, shots: Path) -> LearnerRun:
        """Prepare ``notebooks/<name>.ipynb`` with ``params``, open it, run all, save, screenshot, shut its kernel."""
        from playwright import sync_api

        nb_path = self.root / f"{name}.ipynb"
        pm.execute_notebook(
            str(REPO / "notebooks" / f"{name}.ipynb"),
            str(nb_path),
            parameters=dict(params, env_file=str(REPO / "env.yaml")),
            prepare_only=True,
        )
        with sync_api.sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"], headless=True)
            try:
                state, text, rendered, broken, shot = self._drive(browser.new_page(), nb_path, widget_class, shots)
            finally:
                browser.close()
        return LearnerRun(nb_path, state, text, rendered, broken, shot)

    def _drive(self, page, nb_path: Path, widget_class: str, shots: Path) -> tuple[dict, str, int, int, Path]:
        page.set_viewport_size({"width": 1280, "height": 900})
        # ?reset: a workspace without the notebooks of earlier runs (their kernels are shut down, their widgets gone)
        page.goto(f"{self.url}/lab/tree/{nb_path.name}?reset", wait_until="domcontentloaded", timeout=90_000)
        state = run_all(page, nb_path.name, timeout_s=420)
        page.evaluate("window.jupyterapp.commands.execute('docmanager:save')")
        page.wait_for_timeout(1500)
        panel = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)")
        widget = panel.locator(f".{widget_class}")
        rendered = widget.count()
        text = (widget.first.text_content() if rendered else "") or ""
        broken = panel.get_by_text("Error displaying widget").count()
        shot = shots / f"{nb_path.stem}.png"
        screenshot(page, shot)
        if rendered:
            widget.first.screenshot(path=str(shots / f"{nb_path.stem}-widget.png"))
            keep(shots / f"{nb_path.stem}-widget.png")
        # the kernel goes with the page: the server outlives this run, an idle kernel need not
        page.evaluate("window.jupyterapp.serviceManager.sessions.shutdownAll()")
        return state, text, rendered, broken, shot


@contextlib.contextmanager
def jupyterlab(root: Path, runs_dir: Path) -> Iterator[Learner]:
    """A JupyterLab server on a free port of 127.0.0.1 serving ``root`` (no token, the app exposed to the page's
    scripts); its kernels write their runs to ``runs_dir``. Stopped on exit, its kernels with it."""
    port = free_port()
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
    env = dict(os.environ, JUPYTER_CONFIG_DIR=str(root.parent / "jupyter-config"), RAYTRAIN_RUNS_DIR=str(runs_dir))
    proc = subprocess.Popen(cmd, cwd=root, stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        _wait_for_port(port, proc, timeout=90)
        yield Learner(root, f"http://127.0.0.1:{port}")
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


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


def run_all(page, path: str, timeout_s: float) -> dict:
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


def screenshot(page, path: Path) -> None:
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
    keep(path)


def keep(path: Path) -> None:
    if os.environ.get("TUTORIAL_SCREENSHOT_DIR"):
        shutil.copy(path, Path(os.environ["TUTORIAL_SCREENSHOT_DIR"]) / path.name)
