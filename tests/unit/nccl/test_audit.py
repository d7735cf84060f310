"""The NCCL transport audit end to end: the real 2xH200 logs, synthetic EFA/OFI runs, gloo, bad arguments."""

from __future__ import annotations

import pytest

from raytrain_helpers import nccl
from tests.unit.nccl import synth
from tests.unit.nccl.fixtures import FIX, NVLINK, SOCKET, check_evidence, fixture

# ---------------------------------------------------------------------------------------------
# The two real logs
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("expect", ["p2p", "auto"])
def test_healthy_nvlink_passes_although_it_prints_using_network_socket(expect):
    text = NVLINK.read_text()
    assert "Using network Socket" in text  # what the naive grep would flag
    res = nccl.audit(text, expect=expect)
    assert res.ok and res.verdict == "pass"
    assert res.expected == "p2p"
    w = res.world
    assert w.size == 2 and w.nnodes == {1} and w.local_ranks == {2}
    assert set(w.pairs) == {(0, 1), (1, 0)}
    for p in w.pairs.values():
        assert p.location == "intra" and dict(p.transports) == {"P2P/CUMEM": 24} and p.cls == "p2p"
    assert res.hosts == ["vm"]
    procs = {p.key: p for p in res.processes}
    assert set(procs) == {"vm:730", "vm:731"}
    assert procs["vm:730"].nccl_version == "2.28.9+cuda13.0"
    assert procs["vm:731"].bootstrap_ip == "192.0.2.2"
    assert [(c.rank, c.nranks, c.cuda_dev, c.bus_id) for c in procs["vm:731"].comms] == [(1, 2, 1, "70")]
    unused = [f for f in res.findings if f.code == "socket-plugin-unused"]
    assert unused and all("Socket" in e.text for e in unused[0].evidence)
    assert not [f for f in res.findings if f.severity == "fail"]
    check_evidence(res, {"log": text})


def test_socket_fallback_fails_p2p_and_is_recognised_as_socket():
    text = SOCKET.read_text()
    for expect in ("p2p", "auto"):
        res = nccl.audit(text, expect=expect)
        assert not res.ok and res.verdict == "degraded", expect
        deg = next(f for f in res.findings if f.code == "degraded")
        assert any("via NET/Socket/0" in e.text for e in deg.evidence)
        assert any("NCCL_P2P_DISABLE set by environment to 1" in e.text for e in deg.evidence)
        check_evidence(res, {"log": text})
    w = res.world
    assert w.nnodes == {2} and w.hosts == ["vm"]  # NCCL says 2 nodes, one host in truth
    assert all(p.location == "intra" and p.cls == "socket" for p in w.pairs.values())
    assert any(f.code == "nnodes-vs-hosts" for f in res.findings)
    assert "NCCL hostname" in res.host_basis

    res = nccl.audit(text, expect="socket")
    assert res.ok and res.verdict == "pass" and "NET/Socket" in res.summary


def test_wrong_expectations_on_the_real_logs():
    assert nccl.audit(NVLINK.read_text(), expect="socket").verdict == "unexpected"
    r = nccl.audit(NVLINK.read_text(), expect="efa")
    assert not r.ok and {"unexpected", "plugin-failure"} <= {f.code for f in r.findings if f.severity == "fail"}
    r = nccl.audit(NVLINK.read_text(), expect="none")
    assert not r.ok and r.verdict == "unexpected"


# ---------------------------------------------------------------------------------------------
# Synthetic EFA / OFI runs (2 nodes x 4 GPUs)
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("expect", ["efa", "auto"])
def test_healthy_efa_2x4(expect):
    text = fixture("synthetic-efa-2x4-healthy.log")
    res = nccl.audit(text, expect=expect)
    assert res.ok and res.verdict == "pass" and res.expected == "efa"
    w = res.world
    assert w.size == 8 and w.hosts == ["ip-10-0-1-11", "ip-10-0-1-12"]
    inter = {k for k, p in w.pairs.items() if p.location == "inter"}
    assert inter == {(3, 4), (7, 0), (0, 4), (4, 0)}
    assert all(w.pairs[k].cls == "efa" for k in inter)
    assert all(p.cls == "p2p" for k, p in w.pairs.items() if k not in inter)
    assert all(p.provider == "efa" and p.ofi_version == "1.17.1" for p in res.processes)
    assert any(f.code == "provider" and "Selected provider is efa" in f.evidence[0].text for f in res.findings)
    check_evidence(res, {"log": text})


@pytest.mark.parametrize(
    "name, verdict, needle",
    [
        ("synthetic-efa-2x4-no-providers.log", "fallback", "No eligible providers were found"),
        ("synthetic-efa-2x4-plugin-missing.log", "fallback", "Could not find: libnccl-net-ofi.so"),
        ("synthetic-efa-2x4-tcp-provider.log", "fallback", "Selected provider is tcp"),
        ("synthetic-efa-2x4-sockets-provider.log", "fallback", "Selected provider is sockets"),
        ("synthetic-efa-2x4-p2p-disabled.log", "degraded", "NCCL_P2P_DISABLE set by environment to 1"),
    ],
)
def test_broken_efa_variants(name, verdict, needle):
    text = fixture(name)
    for expect in ("efa", "auto"):
        res = nccl.audit(text, expect=expect)
        assert not res.ok and res.verdict == verdict, (expect, res.summary)
        quoted = [e.text for f in res.findings if f.severity == "fail" for e in f.evidence]
        assert any(needle in t for t in quoted), quoted
        check_evidence(res, {"log": text})


def test_no_providers_names_the_cause_and_the_socket_channels():
    res = nccl.audit(fixture("synthetic-efa-2x4-no-providers.log"), expect="efa")
    codes = [f.code for f in res.findings if f.severity == "fail"]
    assert codes[:2] == ["fallback", "plugin-failure"] or set(codes) >= {"fallback", "plugin-failure"}
    fb = next(f for f in res.findings if f.code == "fallback")
    assert all("NET/Socket" in e.text or "Using network Socket" in e.text for e in fb.evidence)
    assert {p.location for p in res.world.pairs.values() if p.cls == "socket"} == {"inter"}


def test_socket_baseline_is_a_socket_run_not_an_efa_one():
    text = fixture("synthetic-socket-2x4-baseline.log")
    assert nccl.audit(text, expect="socket").ok
    r = nccl.audit(text, expect="efa")
    assert r.verdict == "fallback" and "expect='socket'" in r.summary
    assert any("NCCL_NET set by environment to Socket" in e.text for e in r.findings[0].evidence)
    assert nccl.audit(text, expect="auto").verdict == "fallback"  # auto never infers socket


def test_efa_expected_on_a_single_host_is_not_confirmed():
    res = nccl.audit(synth.run_log(1, 4), expect="efa")
    assert not res.ok and res.verdict == "unexpected"
    auto = nccl.audit(synth.run_log(1, 4), expect="auto")  # one host: auto expects p2p despite OFI lines
    assert auto.ok and auto.expected == "p2p"


def test_provider_not_printed_is_inconclusive():
    res = nccl.audit(synth.run_log(2, 2, print_provider=False), expect="efa")
    assert not res.ok and res.verdict == "inconclusive"
    assert any(f.code == "unconfirmed" for f in res.findings)


def test_ib_expectation():
    text = synth.run_log(2, 2, net="ib")
    assert nccl.audit(text, expect="ib").ok
    assert nccl.audit(text, expect="auto").expected == "ib"
    r = nccl.audit(text, expect="efa")
    assert not r.ok and {"plugin-failure", "unexpected"} <= {f.code for f in r.findings if f.severity == "fail"}


def test_synthetic_fixtures_are_reproducible():
    for name, kw in synth.SYNTHETIC.items():
        assert (FIX / name).read_text() == synth.HEADER + synth.run_log(**kw), name


# ---------------------------------------------------------------------------------------------
# Expectations
# ---------------------------------------------------------------------------------------------


def test_auto_resolves_from_what_the_logs_show():
    cases = [
        (synth.run_log(1, 4), "p2p", "all NCCL processes on one host (ip-10-0-1-11)"),
        (synth.run_log(2, 2), "efa", "aws-ofi-nccl (NET/OFI) lines present"),
        (synth.run_log(2, 2, net="ib"), "ib", "NET/IB in use"),
        (synth.run_log(2, 2, net="socket"), "efa", "ranks on 2 hosts and no OFI/IB lines"),
    ]
    for text, expected, basis in cases:
        res = nccl.audit(text, expect="auto")
        assert (res.expected, res.expected_basis[: len(basis)]) == (expected, basis)
    assert nccl.audit(synth.run_log(2, 2), expect="p2p").expected_basis == "as asked"
    assert nccl.check_expect(" EFA ") == "efa" and nccl.check_expect(None) == "auto"


# ---------------------------------------------------------------------------------------------
# No NCCL, gloo, bad arguments, run markers
# ---------------------------------------------------------------------------------------------


def test_gloo_run_is_not_applicable():
    gloo = "[raytrain] marker=m1 rank=0/2 node=abc host=vm pid=12\n[train] step 1 loss 10.1\n[train] SUCCESS rank=0/2\n"
    res = nccl.audit(gloo, expect="none")
    assert res.ok and res.verdict == "n/a" and res.summary == "n/a: NCCL not used (gloo)"
    for expect in ("auto", "p2p", "efa"):
        r = nccl.audit(gloo, expect=expect)
        assert not r.ok and r.verdict == "no-nccl" and "NCCL_DEBUG=INFO" in r.findings[0].message


def test_bad_arguments():
    with pytest.raises(ValueError, match="expect='ethernet'"):
        nccl.audit("", expect="ethernet")
    with pytest.raises(TypeError, match="text_or_texts"):
        nccl.audit(42)
    with pytest.raises(TypeError, match=r"text_or_texts\[1\]"):
        nccl.audit(["ok", 3])


def test_select_run_slices_texts_by_marker():
    a = "[raytrain] marker=r1 rank=0/2\nline a\n"
    b = "[raytrain] marker=r2 rank=0/2\nline b\n"
    texts = {"one": a, "both": "early\n" + a + b, "none": "no marker\n"}
    assert nccl.select_run(texts, "r1") == {"one": a, "both": "early\n" + a}
    assert nccl.select_run(texts, "r2") == {"both": b}
    assert nccl.select_run(texts, "r3") == {}
    for bad in ("", "two words", None):
        with pytest.raises(ValueError, match="marker="):
            nccl.select_run(texts, bad)
    res = nccl.audit(texts, expect="p2p", marker="r3")
    assert not res.ok and res.verdict == "inconclusive" and res.findings[0].code == "no-run"


def test_worker_file_names_and_siblings():
    assert nccl.WORKER_FILE.match("worker-abc-01000000-730.out") and nccl.WORKER_FILE.match("worker-x.err.2")
    assert not nccl.WORKER_FILE.match("raylet.out") and not nccl.WORKER_FILE.match("python-core-worker-abc.log")
    assert nccl.sibling_log("worker-x-1.out") == "worker-x-1.err"
    assert nccl.sibling_log("worker-x-1.err.3") == "worker-x-1.out.3"
    assert nccl.sibling_log("raylet.out") is None
