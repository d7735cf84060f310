"""The evidence outlives the cluster: the README's main command runs 01 to 08 on a local cluster of its own (08 stops
it), then, with nothing of the cluster left, ``raytrain-tutorial audit`` reproduces 06's transport verdict and rank
count from the run's folder, and 06's and 07's tables are rebuilt from it alone; Ray's node metrics were recorded
during 05 and 07.

Its cluster has ports and a temp root of its own (the session's cluster of the other integration tests stays up).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from raytrain_helpers.core import config
from raytrain_helpers.steps import benchmark, evidence, observe, verify
from raytrain_helpers.targets import local
from tests.conftest import TEST_LOCAL
from tests.helpers import notebook_outputs

REPO = Path(__file__).resolve().parents[2]
RUN = "kept"
#: Ports and temp root beside the session cluster's.
OWN = dict(
    gcs_port=TEST_LOCAL["gcs_port"] + 50,
    dashboard_port=TEST_LOCAL["dashboard_port"] + 50,
    temp_root=TEST_LOCAL["temp_root"] + "-kept",
)
pytestmark = [pytest.mark.slow]


def _cli(args: list[str], env: dict[str, str], timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "raytrain_helpers.cli", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture(scope="module")
def whole_run(tmp_path_factory):
    """01 to 08 through the runner, in a runs folder of its own; (settings, runs folder, environment)."""
    runs = tmp_path_factory.mktemp("kept-runs")
    env = dict(os.environ, RAYTRAIN_RUNS_DIR=str(runs))
    for k in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH", "RAY_ADDRESS"):
        env.pop(k, None)
    params = [x for k, v in OWN.items() for x in ("-p", k, str(v))]
    r = _cli(["run", "--run-name", RUN, *params], env)
    assert r.returncode == 0, (r.stdout + r.stderr)[-6000:]
    s = config.load(REPO / "env.yaml", environ={}, run_name=RUN, **OWN)
    return s, runs, env


def test_after_08_the_run_folder_alone_reproduces_06_and_07(whole_run, monkeypatch):
    s, runs, env = whole_run
    monkeypatch.setenv("RAYTRAIN_RUNS_DIR", str(runs))
    assert not local.status(s).running and not local.our_pids(s), "08 stopped the cluster: nothing of it is left"
    assert {"train", "bench-gloo"} <= set(evidence.kinds(s)), evidence.kinds(s)
    printed06 = notebook_outputs(runs / RUN / "notebooks" / "06_verify.ipynb")

    # the transport verdict and the rank count, from the saved logs
    r = _cli(["audit", str(runs / RUN / evidence.FOLDER / "train")], env, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "transport: n/a: CPU run, gloo" in r.stdout and "ranks: 2/2 printed SUCCESS, 2/2 summaries" in r.stdout
    assert "n/a: CPU run, gloo over loopback (NCCL not used)" in printed06
    assert "2/2 ranks printed SUCCESS, 2/2 summaries gathered" in printed06

    # 06's table, rebuilt: the same rows with the same results as 06 printed them
    v = verify.from_evidence(s)
    assert v.ok, v.criteria.to_json()
    n_pass = sum(c.status == "PASS" for c in v.criteria.items)
    n_na = sum(c.status == "n/a" for c in v.criteria.items)
    assert f"{n_pass} passed, 0 failed, {n_na} not applicable" in printed06, printed06[-3000:]
    ranks = next(c for c in v.criteria.items if c.name == "every rank reported SUCCESS")
    assert ranks.evidence == "2/2 ranks printed SUCCESS, 2/2 summaries gathered"

    # 07's table, rebuilt: the figures 07 recorded
    recorded = json.loads((runs / RUN / "benchmark.json").read_text())
    bench = benchmark.from_evidence(s)
    assert [b.label for b in bench] == [x["label"] for x in recorded["runs"]] == ["gloo"]
    assert benchmark.figures(bench) == [x["figures"] for x in recorded["runs"]]

    # the command that does both, with the cluster gone
    r = _cli(["evidence", RUN, *[x for k, val in OWN.items() for x in ("-p", k, str(val))]], env, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert (
        re.search(rf"{n_pass} passed, 0 failed, {n_na} not applicable", r.stdout) and "tokens_per_s_per_gpu" in r.stdout
    )

    # Ray's own node metrics, recorded while 05 and 07 ran
    for name in ("train", "bench-gloo"):
        rows = observe.read_metrics(observe.metrics_path(s, name))
        workers = {x["node"] for x in rows if not x.get("head")}
        assert len(workers) == 2, (name, rows[:3])
        assert all(x["cpu_percent"] >= 0 and x["mem_used_bytes"] > 0 for x in rows), rows[:3]
