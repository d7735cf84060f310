"""Comparing two benchmark runs: only after both audits confirm their transports."""

from __future__ import annotations

import json

import pytest

from raytrain_helpers import nccl
from tests.unit.nccl.fixtures import NVLINK, SOCKET, fixture


def _run(label, expected, log, tok, sps):
    return dict(label=label, expected_transport=expected, log_text=log, tokens_per_s_per_gpu=tok, steps_per_s=sps)


def test_compare_runs_confirms_both_transports_first(capsys):
    efa = _run("efa", "efa", fixture("synthetic-efa-2x4-healthy.log"), 2000.0, 1.0)
    tcp = _run("tcp", "socket", fixture("synthetic-socket-2x4-baseline.log"), 1000.0, 0.5)
    c = nccl.compare_runs(efa, tcp)
    assert c.ok and c.refusal is None and c.speedup_tokens == pytest.approx(2.0) and c.speedup_steps == pytest.approx(2)
    c.show()
    assert "2.00x" in capsys.readouterr().out
    assert json.loads(c.to_json())["speedup_tokens"] == pytest.approx(2.0)

    fake = _run("efa", "efa", fixture("synthetic-efa-2x4-no-providers.log"), 1000.0, 0.5)
    c = nccl.compare_runs(fake, tcp)
    assert not c.ok and c.speedup_tokens is None and "'efa'" in c.refusal and "fallback" in c.refusal
    c.show()
    assert "no speedup reported" in capsys.readouterr().out

    nv = _run("nvlink", "p2p", NVLINK.read_text(), 28563, 3.487)
    so = _run("no-p2p", "p2p", SOCKET.read_text(), 4053, 0.495)
    c = nccl.compare_runs(nv, so)
    assert not c.ok and "'no-p2p'" in c.refusal and "degraded" in c.refusal
    so["expected_transport"] = "socket"
    c = nccl.compare_runs(nv, so)
    assert c.ok and c.speedup_tokens == pytest.approx(28563 / 4053)


def test_compare_runs_validates_fields():
    good = _run("a", "p2p", NVLINK.read_text(), 1.0, 1.0)
    bad = dict(good)
    del bad["steps_per_s"]
    with pytest.raises(ValueError, match="run_b: missing steps_per_s"):
        nccl.compare_runs(good, bad)
    for k, v in (("tokens_per_s_per_gpu", 0), ("steps_per_s", "fast"), ("tokens_per_s_per_gpu", float("nan"))):
        bad = dict(good, **{k: v})
        with pytest.raises(ValueError, match=f"run_a.{k}"):
            nccl.compare_runs(bad, good)
    with pytest.raises(ValueError, match="expected_transport='auto'"):
        nccl.compare_runs(dict(good, expected_transport="auto"), good)
