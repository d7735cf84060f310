"""The NCCL logs captured on 2 x H200 that the package ships (raytrain_helpers/nccl/captured/): audited side by
side they show a healthy P2P run and a socket fallback, labelled as captured, with the lines that give each away;
their figures are the runs' own; the wheel declares them as package data."""

from __future__ import annotations

import json
import re
from fnmatch import fnmatch
from pathlib import Path

import pytest

from raytrain_helpers.nccl import reference
from tests.unit.nccl.fixtures import FIX, check_evidence

ROOT = Path(__file__).resolve().parents[3]
RESULTS = ROOT / "benchmarks" / "results"


@pytest.fixture(scope="module")
def runs():
    return reference.captured_runs()


def test_the_audit_tells_healthy_p2p_from_the_socket_fallback(runs):
    healthy, fallback = runs
    assert (healthy.verdict, healthy.audit.ok) == ("healthy P2P", True)
    assert (fallback.verdict, fallback.audit.ok, fallback.audit.verdict) == ("socket fallback", False, "degraded")
    assert {t for p in healthy.audit.world.pairs.values() for t in p.transports} == {"P2P/CUMEM"}
    assert {t for p in fallback.audit.world.pairs.values() for t in p.transports} == {"NET/Socket"}


def test_the_lines_that_give_each_run_away_are_quoted_as_they_stand(runs):
    healthy, fallback = runs
    quoted = {r.label: [k.evidence.text for k in r.key_lines] for r in runs}
    assert any(t.endswith("0[0] -> 1[1] via P2P/CUMEM") for t in quoted["healthy P2P"])
    assert any(t.endswith("via NET/Socket/0") for t in quoted["socket fallback"])
    assert not any("NET/Socket/0" in t for t in quoted["healthy P2P"])
    for label in quoted:  # both print it: alone it proves nothing
        assert any(t.endswith("Using network Socket") for t in quoted[label])
    assert any(" nNodes 1 localRanks 2 " in t for t in quoted["healthy P2P"])
    assert any(" nNodes 2 localRanks 1 " in t for t in quoted["socket fallback"])
    assert any("NCCL_P2P_DISABLE set by environment to 1" in t for t in quoted["socket fallback"])
    for r in runs:
        check_evidence(r.audit, {r.file: (reference.CAPTURED_DIR / r.file).read_text()})
        text = (reference.CAPTURED_DIR / r.file).read_text().splitlines()
        assert all(text[k.evidence.lineno - 1].rstrip() == k.evidence.text for k in r.key_lines)
    socket_says = [k.what for k in fallback.key_lines if k.evidence.text.endswith("Using network Socket")]
    healthy_says = [k.what for k in healthy.key_lines if k.evidence.text.endswith("Using network Socket")]
    assert "proves nothing" in healthy_says[0] and "pairs ride it" in socket_says[0]


def test_side_by_side_is_labelled_captured_and_says_where_and_how(runs):
    text = reference.side_by_side(runs)
    assert text.startswith("NCCL logs captured on 2×H200 (not this run)")
    assert "H200" in text and "NCCL_P2P_DISABLE=1, NCCL_SHM_DISABLE=1" in text and "torchrun" in text
    rows = {
        line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]]
        for line in text.splitlines()
        if line.startswith("| ")
    }
    assert rows["0 -> 1"] == ["P2P/CUMEM", "NET/Socket"] and rows["1 -> 0"] == ["P2P/CUMEM", "NET/Socket"]
    assert rows["verdict"] == ["PASS: healthy P2P", "FAIL: socket fallback"]
    assert rows["nNodes / hosts"] == ["1 / 1", "2 / 1"]
    assert rows["tokens/s per GPU"] == ["28,563", "4,053"]
    assert "> line 92: vm:730:730 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM" in text


def test_the_shipped_logs_are_the_fixtures_and_their_figures_their_own(runs):
    meta = reference.sidecar()
    assert meta["label"] == reference.LABEL and meta["trimmed"] is False
    for r, entry in zip(runs, meta["runs"], strict=True):
        shipped = (reference.CAPTURED_DIR / r.file).read_bytes()
        assert shipped == (FIX / r.file).read_bytes()
        assert len(shipped) < 1_000_000
        own = [json.loads(ln) for ln in shipped.decode().splitlines() if ln.startswith('{"mode"')]
        assert len(own) == 1 and own[0]["tok_s_gpu"] == entry["tokens_per_s_per_gpu"] == r.tokens_per_s_per_gpu
        assert own[0]["steps_per_s"] == r.steps_per_s
        assert {k: v for k, v in own[0]["nccl_env"].items() if k != "NCCL_VERSION"} == r.env
    # the same job under Ray Train, as the sidecar cites it
    for name in ("h200x2-qwen2.5-1.5b-gpu-evidence.json", "h200x2-qwen2.5-1.5b-gpu-evidence-run2.json"):
        data = json.loads((RESULTS / name).read_text())
        figures = re.findall(
            r'"label": "(p2p|socket)",\s*"expected_transport": "\1",[^}]*?"tokens_per_s_per_gpu": '
            r"([0-9.]+)",
            json.dumps(data, indent=8),
        )
        assert figures, name
        for _, tps in figures:
            assert f"{round(float(tps)):,}" in meta["figures"], (name, tps)


def test_the_wheel_declares_the_captured_logs():
    # [tool.setuptools.package-data] in pyproject.toml (read as text: tomllib needs Python 3.11)
    line = re.search(r'^"raytrain_helpers\.nccl" = (\[.*\])$', (ROOT / "pyproject.toml").read_text(), re.M)
    globs = json.loads(line.group(1))
    files = [p.name for p in reference.CAPTURED_DIR.iterdir()]
    assert all(any(fnmatch(f"captured/{f}", g) for g in globs) for f in files), (files, globs)
    assert "recursive-include raytrain_helpers/nccl/captured *.log *.json" in (ROOT / "MANIFEST.in").read_text()


def test_the_captured_ab_plot_is_labelled_and_shows_both_figures(runs):
    fig = reference.plot_ab(runs)
    ax = fig.axes[0]
    assert "captured on 2×H200 (not this run)" in ax.get_title()
    assert [round(b.get_height()) for b in ax.patches] == [28563, 4053]
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert "via P2P/CUMEM" in labels[0] and "via NET/Socket" in labels[1]
    assert any(t.get_text() == "socket fallback: 7.0x slower" for t in ax.texts)
