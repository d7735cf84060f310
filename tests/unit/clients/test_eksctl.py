"""eksctl as a subprocess (raytrain_helpers.clients.eksctl): found on PATH, output redacted into its log."""

from __future__ import annotations

import pytest

from raytrain_helpers.clients import eksctl
from raytrain_helpers.clients.aws import AwsError

SECRET = "AKIAFAKEKEYFORTHETEST"[:20]


def _fake_eksctl(tmp_path, body: str) -> None:
    exe = tmp_path / "bin" / "eksctl"
    exe.parent.mkdir()
    exe.write_text("#!/bin/sh\n" + body)
    exe.chmod(0o755)


def test_missing_eksctl_says_how_to_install_it(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(AwsError, match="eksctl is not on PATH. Install it"):
        eksctl.eksctl_path()


def test_run_eksctl_logs_redacted_output_and_returns_the_exit_code(monkeypatch, tmp_path, capsys):
    _fake_eksctl(tmp_path, f'echo "creating with key {SECRET}"\necho "args: $*"\nexit 3\n')
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    states = iter(["CREATING", "ACTIVE"])
    log = tmp_path / "logs" / "eksctl.log"
    r = eksctl.run_eksctl(["create", "cluster"], log_path=log, desc="cluster", poll=lambda: next(states))
    assert r.returncode == 3 and r.argv == ["eksctl", "create", "cluster"] and r.log_path == log
    assert r.tail == ["creating with key ***", "args: create cluster"]
    assert SECRET not in log.read_text() and "args: create cluster" in log.read_text()
    assert f"$ eksctl create cluster    (log: {log})" in capsys.readouterr().out


def test_run_eksctl_stops_a_command_past_its_timeout(monkeypatch, tmp_path):
    _fake_eksctl(tmp_path, "exec sleep 30\n")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:/usr/bin:/bin")
    with pytest.raises(AwsError, match="did not finish within"):
        eksctl.run_eksctl(["delete", "cluster"], log_path=tmp_path / "log", timeout=0.3)
