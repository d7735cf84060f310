"""``raytrain-tutorial audit``: exit codes, JSON, worker-log directories, run markers, the default expectation."""

from __future__ import annotations

import argparse
import json

from raytrain_helpers import cli
from raytrain_helpers.cli import nccl as nccl_cli
from raytrain_helpers.core.config import ConfigError
from tests.unit.nccl.fixtures import NVLINK, SOCKET, write_session

NVLINK_TEXT = NVLINK.read_text()
SOCKET_TEXT = SOCKET.read_text()


def audit_cli(argv: list[str]) -> int:
    """The command line with only this command area registered, run as ``cli.main`` runs a command."""
    parser = argparse.ArgumentParser(prog="raytrain-tutorial")
    nccl_cli.register(parser.add_subparsers(dest="command", metavar="COMMAND"))
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except ConfigError:
        return 2


def test_main_dispatches_audit(tmp_path, capsys):
    nv = tmp_path / "nv.log"
    nv.write_text(NVLINK_TEXT)
    assert cli.main(["audit", str(nv), "--expect", "p2p"]) == 0
    assert "NCCL transport audit: PASS (pass)" in capsys.readouterr().out


def test_cli_exit_codes_and_json(tmp_path, capsys):
    nv, so = tmp_path / "nv.log", tmp_path / "so.log"
    nv.write_text(NVLINK_TEXT)
    so.write_text(SOCKET_TEXT)
    assert audit_cli(["audit", str(nv), "--expect", "p2p"]) == 0
    out = capsys.readouterr().out
    assert "NCCL transport audit: PASS (pass)" in out and "P2P/CUMEM" in out
    assert audit_cli(["audit", str(so), "--expect", "p2p"]) == 1
    out = capsys.readouterr().out
    assert "FAIL (degraded)" in out and "via NET/Socket/0" in out
    assert audit_cli(["audit", str(so), "--expect", "socket", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["ok"] is True and d["verdict"] == "pass" and d["communicators"][0]["nccl_nnodes"] == [2]
    assert audit_cli(["audit", str(tmp_path / "missing.log")]) == 2
    assert "cannot read" in capsys.readouterr().err
    assert audit_cli(["audit", str(nv), str(so), "--expect", "p2p", "--json"]) == 1  # two runs in one audit
    capsys.readouterr()
    empty = tmp_path / "gloo.log"
    empty.write_text("[train] step 1\n")
    assert audit_cli(["audit", str(empty), "--expect", "none"]) == 0
    assert "n/a: NCCL not used (gloo)" in capsys.readouterr().out
    assert audit_cli(["audit", str(empty), "--expect", "p2p"]) == 1


def test_cli_directory_marker_and_default_expect(tmp_path, capsys):
    logs = write_session(tmp_path, "node", {"run-a": NVLINK_TEXT, "run-b": SOCKET_TEXT}, "01000000")
    assert audit_cli(["audit", str(logs), "--marker", "run-a", "--expect", "p2p"]) == 0
    assert audit_cli(["audit", str(logs), "--marker", "run-b", "--expect", "p2p"]) == 1
    assert audit_cli(["audit", str(logs), "--marker", "nope"]) == 2
    assert "no log holds" in capsys.readouterr().err
    assert audit_cli(["audit", str(tmp_path), "--expect", "p2p"]) == 2  # a dir without worker files
    # no --expect: the nccl.expect setting (auto), overridable with -p
    assert audit_cli(["audit", str(logs), "--marker", "run-b"]) == 1
    assert audit_cli(["audit", str(logs), "--marker", "run-b", "-p", "nccl.expect", "socket"]) == 0
