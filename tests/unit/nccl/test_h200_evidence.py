"""The audit on the NCCL logs of this project's own 2 x H200 evidence run (benchmarks/gpu_evidence.py):
the workers' log files collected from each worker raylet's session dir, with Ray's file headers."""

import pytest

from raytrain_helpers import nccl
from tests.unit.nccl.fixtures import FIX


def _read(name):
    return (FIX / name).read_text()


@pytest.mark.parametrize("name", ["h200x2-raytrain-train-p2p.log", "h200x2-raytrain-bench-p2p.log"])
def test_healthy_runs_pass_as_p2p(name):
    res = nccl.audit(_read(name), expect="p2p")
    assert res.ok and res.verdict == "pass", res.text()
    assert nccl.audit(_read(name), expect="auto").ok
    assert not nccl.audit(_read(name), expect="efa").ok  # one host: EFA cannot have been used


def test_forced_socket_run_is_degraded_under_p2p_and_matches_socket():
    text = _read("h200x2-raytrain-bench-socket.log")
    bad = nccl.audit(text, expect="p2p")
    assert not bad.ok and bad.verdict == "degraded"
    assert any("NET/Socket" in str(e.to_dict()) for f in bad.findings for e in f.evidence)
    assert nccl.audit(text, expect="socket").ok


def _bench(label, expect, log, tps, sps):
    return dict(label=label, expected_transport=expect, log_text=_read(log), tokens_per_s_per_gpu=tps, steps_per_s=sps)


def test_comparison_of_the_real_runs_and_refusal_when_mislabelled():
    # figures of the evidence run (benchmarks/results/h200x2-qwen2.5-1.5b-gpu-evidence.json)
    a = _bench("p2p", "p2p", "h200x2-raytrain-bench-p2p.log", 30668.1, 3.743)
    b = _bench("socket", "socket", "h200x2-raytrain-bench-socket.log", 4833.6, 0.590)
    cmp = nccl.compare_runs(a, b)
    assert cmp.ok and cmp.speedup_tokens == pytest.approx(6.34, abs=0.01)
    # the same two runs with their labels swapped: each audit contradicts its label -> no speedup reported
    wrong = nccl.compare_runs(dict(a, expected_transport="socket"), dict(b, expected_transport="p2p"))
    assert not wrong.ok and wrong.speedup_tokens is None
    assert "p2p" in wrong.refusal and "socket" in wrong.refusal
