"""``raytrain-tutorial env``: the export line for a terminal, from the local cluster's own state; with no cluster
running it prints nothing to eval and says how to start one."""

from __future__ import annotations

import shlex
import socket
from types import SimpleNamespace

from raytrain_helpers import cli
from raytrain_helpers.targets import local


def test_without_a_cluster_it_refuses_and_names_the_fix(capsys, tmp_path, clean_env, monkeypatch):
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        free = sock.getsockname()[1]
    monkeypatch.setenv("RAYTRAIN_GCS_PORT", str(free))
    monkeypatch.setenv("RAYTRAIN_TEMP_ROOT", "/tmp/rt-env-test")
    assert cli.main(["env"]) == 1
    out, err = capsys.readouterr()
    assert out == "" and "not running" in err and "raytrain-tutorial up" in err


def test_the_line_exports_the_address_and_the_token_file(capsys, clean_env, monkeypatch, tmp_path):
    info = SimpleNamespace(running=True, address="127.0.0.1:6390", token_auth=True, message="")
    monkeypatch.setattr(local.raylets, "status", lambda settings: info)
    monkeypatch.setenv("RAYTRAIN_TEMP_ROOT", "/tmp/rt env test")
    assert cli.main(["env"]) == 0
    line = capsys.readouterr().out.strip()
    words = shlex.split(line)
    assert words[0] == "export"
    env = dict(w.split("=", 1) for w in words[1:])
    assert env == {
        "RAY_ADDRESS": "127.0.0.1:6390",
        "RAY_AUTH_MODE": "token",
        "RAY_AUTH_TOKEN_PATH": "/tmp/rt env test/auth_token",
    }
    info.token_auth = False
    assert cli.main(["env"]) == 0
    assert shlex.split(capsys.readouterr().out) == ["export", "RAY_ADDRESS=127.0.0.1:6390"]
