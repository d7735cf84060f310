"""The audit's report: the printed text and the JSON."""

from __future__ import annotations

import json

from raytrain_helpers import nccl
from tests.unit.nccl.fixtures import NVLINK, fixture


def test_show_and_json(capsys):
    res = nccl.audit(fixture("synthetic-efa-2x4-no-providers.log"), expect="efa")
    res.show()
    out = capsys.readouterr().out
    assert "NCCL transport audit: FAIL (fallback)" in out and "SOCK*" in out and "No eligible providers" in out
    d = json.loads(res.to_json())
    assert d["verdict"] == "fallback" and d["ok"] is False and d["expected"] == "efa"
    world = d["communicators"][0]
    assert world["nranks"] == 8 and world["hosts"] == ["ip-10-0-1-11", "ip-10-0-1-12"]
    inter = {(p["src"], p["dst"]) for p in world["pairs"] if p["location"] == "inter"}
    assert inter == {(3, 4), (7, 0), (0, 4), (4, 0)}
    assert all(f["evidence"] or f["severity"] in ("info", "warn") for f in d["findings"])


def test_text_is_what_show_prints(capsys):
    res = nccl.audit(NVLINK.read_text(), expect="auto")
    res.show()
    assert capsys.readouterr().out == res.text()
    lines = res.text().splitlines()
    assert lines[0] == (
        "NCCL transport audit: PASS (pass)  expected: p2p (from auto: all NCCL processes on one host (vm))"
    )
    assert "| 0 vm      | -   | P2P |" in lines and "findings:" in lines
