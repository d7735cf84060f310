"""05 run again: the transport check's passing verdict is shown again for the same nodes and settings, measured
again for anything else. The check job and the state API are replaced here (the decision is what is tested); the
real ones run in tests/integration/test_transport_check.py and the papermill flow."""

from __future__ import annotations

from contextlib import contextmanager

import pytest

from raytrain_helpers.core import config
from raytrain_helpers.steps import transport


class _Target:
    """The two things ``run`` asks of a target before the check job: the Jobs API address and the job defaults."""

    def __init__(self, real):
        self.real = real

    @contextmanager
    def job_server(self, settings):
        yield "http://127.0.0.1:1"

    def job_defaults(self, settings):
        return self.real.job_defaults(settings)


@pytest.fixture
def check(repo_root, tmp_path, monkeypatch):
    """``run`` with a cluster whose alive nodes the test sets, and a check job that records each measurement."""
    monkeypatch.setenv("RAYTRAIN_RUNS_DIR", str(tmp_path / "runs"))
    s = config.load(repo_root / "env.yaml", environ={}, gpus_per_worker_node=0)
    real = transport.for_settings(s)
    monkeypatch.setattr(transport, "for_settings", lambda settings: _Target(real))
    state = dict(nodes=["n-head", "n-w0", "n-w1"], ok=True, measured=[])
    monkeypatch.setattr(transport.raystate, "alive_node_ids", lambda url: list(state["nodes"]))

    def measure(settings, cfg, url, timeout_s, extra_env):
        sid = f"raytrain-{cfg.run_name}-{cfg.marker}"
        state["measured"].append(sid)
        result = dict(ok=state["ok"], world=2, backend="gloo", busbw_gbs=0.5, size_bytes=cfg.size_bytes,
                      seconds=0.01, algbw_gbs=0.5, logs={"0": "x" * 100})  # fmt: skip
        out = transport.judge(result, "none")
        out.submission_id, out.measured_at = sid, "2026-12-05 12:00:00 UTC"
        return out

    monkeypatch.setattr(transport, "_measure", measure)
    return s, state


def test_the_same_nodes_and_settings_show_the_kept_verdict_without_a_new_job(check, capsys):
    s, state = check
    first = transport.run(s)
    assert not first.reused and len(state["measured"]) == 1
    again = transport.run(s)
    assert again.reused and len(state["measured"]) == 1, "a second check job ran for the same nodes"
    assert (again.ok, again.verdict, again.message, again.submission_id) == (
        first.ok, first.verdict, first.message, first.submission_id
    )  # fmt: skip
    assert "logs" not in again.result, "the NCCL logs stay with the job, not in the kept verdict"
    other_run = transport.run(config.with_overrides(s, run_name="another-run"))
    assert other_run.reused and len(state["measured"]) == 1, "the verdict is the cluster's, whatever the run"
    again.show()
    out = capsys.readouterr().out
    assert f"measured by {first.submission_id} at 2026-12-05 12:00:00 UTC on these same nodes" in out
    assert "again=True" in out


@pytest.mark.parametrize(
    "change",
    ["again", "a replaced node", "another NCCL setting", "extra_env", "another size"],
)
def test_anything_else_measures_again(check, change):
    s, state = check
    transport.run(s)
    kwargs = {}
    if change == "again":
        kwargs["again"] = True
    elif change == "a replaced node":
        state["nodes"] = ["n-head", "n-w0", "n-w1b"]
    elif change == "another NCCL setting":
        s = config.with_overrides(s, debug="WARN")
    elif change == "extra_env":
        kwargs["extra_env"] = {"NCCL_P2P_DISABLE": "1"}
    else:
        kwargs["size_bytes"] = 1024
    assert not transport.run(s, **kwargs).reused and len(state["measured"]) == 2, change


def test_a_failed_check_is_never_kept_nor_hides_behind_an_earlier_pass(check):
    s, state = check
    state["ok"] = False
    assert not transport.run(s).ok
    state["ok"] = True
    assert not transport.run(s).reused and len(state["measured"]) == 2, "a failed verdict was shown again"
    transport.run(s, extra_env={"NCCL_P2P_DISABLE": "1"})
    assert transport.run(s).reused and len(state["measured"]) == 3
    state["ok"] = False  # measured again on purpose, and failing: the pass kept before is not shown any more
    assert not transport.run(s, again=True).ok
    state["ok"] = True
    assert not transport.run(s).reused and len(state["measured"]) == 5


def test_without_an_answer_from_the_state_api_the_check_is_measured(check, monkeypatch):
    s, state = check

    def refused(url):
        raise ConnectionRefusedError("no dashboard")

    monkeypatch.setattr(transport.raystate, "alive_node_ids", refused)
    transport.run(s)
    transport.run(s)
    assert len(state["measured"]) == 2
