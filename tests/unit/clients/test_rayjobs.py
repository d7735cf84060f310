"""clients.rayjobs: the job's records parsed from its logs, the token header, and following a job to its end."""

import pytest

from raytrain_helpers.clients import rayjobs
from tests.unit.steps.test_train import LOGS


def test_parse_steps_and_result():
    steps = rayjobs.parse_steps(LOGS)
    assert [s["step"] for s in steps] == [1, 2] and steps[1]["tokens_per_s"] == 4895
    assert rayjobs.parse_result(LOGS) == {"ok": True, "metrics": {"step": 3}}
    assert rayjobs.parse_result("no result here") == {}


def test_auth_headers_from_the_token_or_its_file(tmp_path, monkeypatch):
    for k in ("RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"):
        monkeypatch.delenv(k, raising=False)
    assert rayjobs.auth_headers() == {}
    token = tmp_path / "token"
    token.write_text("secret-from-file\n")
    monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", str(token))
    assert rayjobs.auth_headers() == {"Authorization": "Bearer secret-from-file"}
    monkeypatch.setenv("RAY_AUTH_TOKEN", "direct")
    assert rayjobs.auth_headers() == {"Authorization": "Bearer direct"}


class ScriptedJobs:
    """Ray's JobSubmissionClient as seen by ``follow``: each poll returns the next (status, log so far)."""

    def __init__(self, script):
        self.script, self.polls, self.stopped = list(script), 0, []

    def get_job_status(self, sid):
        return self.script[min(self.polls, len(self.script) - 1)][0]

    def get_job_logs(self, sid):
        status, logs = self.script[min(self.polls, len(self.script) - 1)]
        self.polls += 1
        return logs

    def stop_job(self, sid):
        self.stopped.append(sid)


def test_follow_streams_each_new_line_once_and_parses_the_result(capsys, monkeypatch):
    monkeypatch.setattr(rayjobs.time, "sleep", lambda s: None)
    lines = LOGS.splitlines(keepends=True)
    client = ScriptedJobs([("RUNNING", "".join(lines[:1])), ("RUNNING", "".join(lines[:3])), ("SUCCEEDED", LOGS)])
    run = rayjobs.follow(client, "job-1", timeout_s=60, quiet=False, progress=False, total=3)
    assert run.status == "SUCCEEDED" and run.result == {"ok": True, "metrics": {"step": 3}}
    assert [s["step"] for s in run.steps] == [1, 2]
    assert capsys.readouterr().out == LOGS  # every line printed once, in order
    assert not client.stopped


def test_follow_stops_a_job_past_its_time(monkeypatch):
    monkeypatch.setattr(rayjobs.time, "sleep", lambda s: None)
    clock = iter(range(0, 1000, 10))
    monkeypatch.setattr(rayjobs.time, "time", lambda: next(clock))
    client = ScriptedJobs([("RUNNING", "")])
    run = rayjobs.follow(client, "job-2", timeout_s=25, quiet=True, progress=False, total=None)
    assert run.status == "STOPPED" and client.stopped == ["job-2"]


@pytest.mark.parametrize("status, name", [("JobStatus.SUCCEEDED", "SUCCEEDED"), ("RUNNING", "RUNNING")])
def test_status_without_the_enum_name(status, name):
    class One:
        def get_job_status(self, sid):
            return status

    assert rayjobs.status_of(One(), "x") == name
