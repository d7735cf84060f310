"""06 and 07 on a run without NCCL lines (the local CPU/gloo default): the logs captured on 2 x H200 are audited
side by side and their A/B plotted, labelled as captured; a run with NCCL lines of its own keeps its own audit."""

from __future__ import annotations

import raytrain_helpers as rt
from raytrain_helpers import nccl
from raytrain_helpers.core.criteria import Criteria
from raytrain_helpers.steps import benchmark, verify
from tests.unit.nccl.fixtures import NVLINK, SOCKET


def test_06_audits_the_captured_logs_when_the_run_printed_no_nccl_lines():
    shown = verify.captured_transports(verify.Verification(Criteria("local run"), audit=None))
    text = shown.mimebundle()["text/plain"]
    assert text.startswith("NCCL logs captured on 2×H200 (not this run)")
    assert "PASS: healthy P2P" in text and "FAIL: socket fallback" in text
    assert "via P2P/CUMEM" in text and "via NET/Socket/0" in text and "Using network Socket" in text


def test_06_keeps_the_runs_own_audit_when_there_is_one():
    own = nccl.audit(NVLINK.read_text(), expect="p2p")
    text = str(verify.captured_transports(verify.Verification(Criteria("gpu run"), audit=own)))
    assert "its own audit is above (pass)" in text and "P2P/CUMEM" not in text


def test_06_synthetic_example_follows_the_settings_instance_type():
    cfg = rt.settings_from({})
    text = str(verify.efa_example(cfg))
    assert text.startswith("synthetic example") and cfg.aws.gpu_node_type in text
    assert ("GDRDMA" in text) is nccl.examples.gpudirect_rdma(cfg.aws.gpu_node_type)


def _bench(label, log_text):
    return benchmark.BenchRun(label, label, {}, job=None, log_text=log_text)


def test_07_plots_the_captured_ab_without_an_ab_of_its_own():
    fig = benchmark.captured_ab([_bench("cpu", "")])
    ax = fig.axes[0]
    assert "captured on 2×H200 (not this run)" in ax.get_title()
    assert [round(b.get_height()) for b in ax.patches] == [28563, 4053]
    own = [_bench("p2p", NVLINK.read_text()), _bench("socket", SOCKET.read_text())]
    assert benchmark.captured_ab(own) is None
