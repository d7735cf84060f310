"""``raytrain-tutorial capacity`` on the local target: the same report as notebook 01, as text or JSON."""

from __future__ import annotations

import json
import sys

from raytrain_helpers import cli
from raytrain_helpers.targets.local import local_resources
from tests.fakes.aws.fixtures import make_settings


def test_cli_capacity_on_local_prints_local_resources(tmp_path, capsys, monkeypatch):
    make_settings(tmp_path)
    monkeypatch.setattr(sys.modules[local_resources.__module__], "_mem_available_gib", lambda: 64.0)
    rc = cli.main(["capacity", "--env-file", str(tmp_path / "env.yaml"), "--target", "local"])
    out = capsys.readouterr().out
    assert rc == 0 and "capacity on this machine (local target)" in out and "CPU cores" in out
    assert "FSDP memory plan per device" in out  # what 01 shows, not a shorter table of its own
    rc = cli.main(["capacity", "--env-file", str(tmp_path / "env.yaml"), "--target", "local", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert rc == 0 and data["ok"] is True and data["problems"] == []
    assert [row[0] for row in data["rows"]][:2] == ["CPU cores", "memory available"]
