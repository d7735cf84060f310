"""Shared fixtures. The local Ray cluster of the integration tests uses its own ports and temp root,
so it never touches a cluster a person started with the env.yaml defaults.

The suite runs on two pytest-xdist workers (``--dist loadgroup``). Every test that uses the session's local Ray
cluster, and the aws notebooks' module (its tests depend on each other's order and use that cluster), is put in
one xdist group, so one worker starts the cluster once and runs those tests in order; the rest are spread. More
workers were tried: on two cores, three or four starting Ray clusters at once pass Ray's fixed 30 s raylet
registration wait and `ray start` fails."""

from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path

import pytest

# The test command installs without compiling the 25,000 modules of the environment up front (that took about 50 s
# of the 2-core machine, most of them never imported): the suite's processes (xdist workers, the Ray clusters they
# start, notebook kernels) write the bytecode of what they import, once, even where PYTHONDONTWRITEBYTECODE is set.
sys.dont_write_bytecode = False
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

REPO = Path(__file__).resolve().parents[1]
#: The session's local Ray cluster: its own ports and temp root, and otherwise the default settings, which turn Ray
#: token authentication on: every job the tests submit through it (papermill kernels, the aws notebooks'
#: port-forward) proves the token reaches Ray.
#: ``TUTORIAL_TEST_PORT_OFFSET`` moves the ports and temp root, so two checkouts can run their tests at once.
_OFFSET = int(os.environ.get("TUTORIAL_TEST_PORT_OFFSET", "0"))
TEST_LOCAL = dict(
    gcs_port=6397 + _OFFSET,
    dashboard_port=8277 + _OFFSET,
    temp_root=f"/tmp/raytrain-{{uid}}-test{_OFFSET or ''}",
)
AUTH_VARS = ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO


#: A skip reason that names a path of the repository, or beside it: the repository ships every file its tests read
#: (tests/test_self_contained.py), so such a skip is turned into a failure.
_REPOSITORY_PATH = re.compile(
    "|".join(re.escape(str(p) + os.sep) for p in {REPO, REPO.parent} if p != Path(p.anchor))
    + r"|\.\./|(?<![\w/])(?:schemas|tests/fixtures|benchmarks/yardstick)/"
)


def _as_missing_file_failure(report) -> None:
    if report.skipped and not hasattr(report, "wasxfail") and isinstance(report.longrepr, tuple):
        reason = report.longrepr[2]
        if _REPOSITORY_PATH.search(reason):
            report.outcome = "failed"
            report.longrepr = (
                f"skipped for a missing file of the repository ({reason}): ship it, or make it in the test"
            )


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    _as_missing_file_failure(outcome.get_result())


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    outcome = yield
    _as_missing_file_failure(outcome.get_result())


@pytest.fixture
def clean_env(monkeypatch):
    """No RAYTRAIN_* variables from the caller's shell leak into a test."""
    for k in list(os.environ):
        if k.startswith("RAYTRAIN_"):
            monkeypatch.delenv(k, raising=False)
    return monkeypatch


@pytest.fixture(scope="session")
def test_runs_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("runs")


@pytest.fixture(scope="session")
def local_settings(test_runs_dir):
    import raytrain_helpers as rt

    os.environ["RAYTRAIN_RUNS_DIR"] = str(test_runs_dir)
    return rt.load(REPO / "env.yaml", environ={}, **TEST_LOCAL)


@pytest.fixture(scope="session")
def local_cluster(local_settings):
    """A real local Ray cluster with token authentication: head + 2 worker raylets, stopped (and checked gone) at
    the end. ``up`` puts RAY_AUTH_MODE and RAY_AUTH_TOKEN_PATH in this process's environment, so the kernels
    papermill starts inherit them, as a notebook kernel does after 02."""
    from raytrain_helpers.targets import local

    for k in AUTH_VARS:
        os.environ.pop(k, None)
    # Started with no `python` on PATH, as on a stock Debian/Ubuntu or from a kernel whose environment is not
    # activated: every job of the suite then proves that the entrypoint names the cluster's own interpreter.
    path = os.environ["PATH"]
    os.environ["PATH"] = os.pathsep.join(d for d in path.split(os.pathsep) if not shutil.which("python", path=d))
    try:
        info = local.up(local_settings)
    finally:
        os.environ["PATH"] = path
    yield info
    local.down(local_settings)
    for k in AUTH_VARS:
        os.environ.pop(k, None)
    assert not local.our_pids(local_settings), "the test cluster left processes behind"


@pytest.fixture(scope="session")
def learner(tmp_path_factory, test_runs_dir):
    """JupyterLab serving a folder of its own for the session (started on first use), in which a test runs a
    notebook through headless Chromium as a learner does (``tests/jupyterlab.py``); None where Chromium or Playwright
    is absent (``tests.jupyterlab.missing()`` says which)."""
    from tests import jupyterlab

    if jupyterlab.missing():
        yield None
        return
    with jupyterlab.jupyterlab(tmp_path_factory.mktemp("lab"), test_runs_dir) as lab:
        yield lab


#: Modules whose tests share module fixtures and depend on each other's order: one worker runs each whole.
ORDERED_MODULES = ("test_aws_notebooks.py",)
#: Session fixtures that one worker holds: the local Ray cluster, and the JupyterLab whose kernels submit to it.
CLUSTER_FIXTURES = {"local_cluster", "learner"}


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(config, items):
    """Pin the tests that share the local Ray cluster (and the ordered module that uses it) to one xdist worker."""
    for item in items:
        if CLUSTER_FIXTURES & set(getattr(item, "fixturenames", ())) or item.path.name in ORDERED_MODULES:
            item.add_marker(pytest.mark.xdist_group("local-ray"))


@pytest.fixture(scope="session")
def built_site(tmp_path_factory):
    """The docs site, built once a run (``sphinx -W``): (the build's CompletedProcess, its output folder)."""
    from tests.test_docs import sphinx

    out = tmp_path_factory.mktemp("site")
    return sphinx(REPO, REPO / "docs", out), out
