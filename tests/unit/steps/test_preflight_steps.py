"""Notebook 01's preflight cell (steps.capacity.preflight) and the documents 02 and 08 show (steps.documents)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from raytrain_helpers.core import config
from raytrain_helpers.steps import capacity, documents

REPO = Path(__file__).resolve().parents[3]


def settings(**params):
    return config.load(REPO / "env.yaml", environ={}, check_installed_ray=False, **params)


def test_the_local_preflight_passes_and_prints_one_table(capsys):
    res = capacity.preflight(settings(target="local"))
    out = capsys.readouterr().out
    assert res.ok and out.count("What the local path needs on this machine") == 1
    assert "preflight (local): OK" in out


def test_a_failed_preflight_stops_the_notebook_in_one_line(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("PATH", str(tmp_path))  # no aws, no eksctl
    for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # no instance role either: no credentials at all
    with pytest.raises(capacity.PreflightFailed) as info:
        capacity.preflight(settings(target="aws"), quota=False)
    (line,) = info.value._render_traceback_()
    assert "\n" not in line and "eksctl: MISSING" in line and "AWS CLI (aws): MISSING" in line
    assert "AWS credentials: FAILED" in line
    assert "What the aws path needs on this machine" in capsys.readouterr().out


def test_documents_are_written_into_the_run_and_the_commands_point_at_them(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("RAYTRAIN_RUNS_DIR", str(tmp_path))
    s = settings(target="local")  # on local: what the aws path would create with these settings
    paths = documents.show(s)
    out = capsys.readouterr().out
    folder = tmp_path / s.run_name / documents.FOLDER
    assert all(p.is_relative_to(folder) for p in paths) and len(paths) == len(list(folder.rglob("*.*")))
    trust = json.loads((folder / "iam/storage-role-trust-policy.json").read_text())
    assert "--- iam/storage-role-trust-policy.json" in out and trust["Statement"][0]["Sid"] in out
    documents.equivalents(s)
    out = capsys.readouterr().out
    assert f"file://{folder}/iam/storage-role-permission-policy.json" in out
    assert "aws eks create-pod-identity-association" in out and f"kubectl apply --server-side -f {folder}" in out
    documents.equivalents(s, teardown=True)
    assert "aws iam delete-role --role-name" in capsys.readouterr().out
