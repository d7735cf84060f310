"""The NCCL transport audit: real 2xH200 fixtures, synthetic EFA/OFI logs, prefixes, truncation, a property."""

from __future__ import annotations

import importlib.util
import io
import json
import random
import re
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from raytrain_helpers import nccl

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "nccl"
NVLINK = FIX / "h200x2-fsdp2-p2p-nvlink.log"
SOCKET = FIX / "h200x2-fsdp2-socket-fallback.log"

_spec = importlib.util.spec_from_file_location("nccl_synth", Path(__file__).with_name("test_nccl_synth.py"))
synth = sys.modules.setdefault("nccl_synth", importlib.util.module_from_spec(_spec))
if not hasattr(synth, "run_log"):
    _spec.loader.exec_module(synth)


def _text(p: Path) -> str:
    return p.read_text()


def _check_evidence(res: nccl.AuditResult, sources: dict[str, str]) -> None:
    """Every quoted line is exactly the line at that place in the input (colour codes removed)."""
    for f in res.findings:
        for e in f.evidence:
            lines = sources[e.source].splitlines()
            assert nccl._ANSI.sub("", lines[e.lineno - 1]).rstrip() == e.text, (f.code, e)


# ---------------------------------------------------------------------------------------------
# The two real logs
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("expect", ["p2p", "auto"])
def test_healthy_nvlink_passes_although_it_prints_using_network_socket(expect):
    text = _text(NVLINK)
    assert "Using network Socket" in text          # what the naive grep would flag
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
    _check_evidence(res, {"log": text})


def test_socket_fallback_fails_p2p_and_is_recognised_as_socket():
    text = _text(SOCKET)
    for expect in ("p2p", "auto"):
        res = nccl.audit(text, expect=expect)
        assert not res.ok and res.verdict == "degraded", expect
        deg = next(f for f in res.findings if f.code == "degraded")
        assert any("via NET/Socket/0" in e.text for e in deg.evidence)
        assert any("NCCL_P2P_DISABLE set by environment to 1" in e.text for e in deg.evidence)
        _check_evidence(res, {"log": text})
    w = res.world
    assert w.nnodes == {2} and w.hosts == ["vm"]               # NCCL says 2 nodes, one host in truth
    assert all(p.location == "intra" and p.cls == "socket" for p in w.pairs.values())
    assert any(f.code == "nnodes-vs-hosts" for f in res.findings)
    assert "NCCL hostname" in res.host_basis

    res = nccl.audit(text, expect="socket")
    assert res.ok and res.verdict == "pass" and "NET/Socket" in res.summary


def test_wrong_expectations_on_the_real_logs():
    assert nccl.audit(_text(NVLINK), expect="socket").verdict == "unexpected"
    r = nccl.audit(_text(NVLINK), expect="efa")
    assert not r.ok and {"unexpected", "plugin-failure"} <= {f.code for f in r.findings if f.severity == "fail"}
    r = nccl.audit(_text(NVLINK), expect="none")
    assert not r.ok and r.verdict == "unexpected"


# ---------------------------------------------------------------------------------------------
# Synthetic EFA / OFI runs (2 nodes x 4 GPUs)
# ---------------------------------------------------------------------------------------------

def _fixture(name: str) -> str:
    return (FIX / name).read_text()


@pytest.mark.parametrize("expect", ["efa", "auto"])
def test_healthy_efa_2x4(expect):
    text = _fixture("synthetic-efa-2x4-healthy.log")
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
    _check_evidence(res, {"log": text})


@pytest.mark.parametrize("name, verdict, needle", [
    ("synthetic-efa-2x4-no-providers.log", "fallback", "No eligible providers were found"),
    ("synthetic-efa-2x4-plugin-missing.log", "fallback", "Could not find: libnccl-net-ofi.so"),
    ("synthetic-efa-2x4-tcp-provider.log", "fallback", "Selected provider is tcp"),
    ("synthetic-efa-2x4-sockets-provider.log", "fallback", "Selected provider is sockets"),
    ("synthetic-efa-2x4-p2p-disabled.log", "degraded", "NCCL_P2P_DISABLE set by environment to 1"),
])
def test_broken_efa_variants(name, verdict, needle):
    text = _fixture(name)
    for expect in ("efa", "auto"):
        res = nccl.audit(text, expect=expect)
        assert not res.ok and res.verdict == verdict, (expect, res.summary)
        quoted = [e.text for f in res.findings if f.severity == "fail" for e in f.evidence]
        assert any(needle in t for t in quoted), quoted
        _check_evidence(res, {"log": text})


def test_no_providers_names_the_cause_and_the_socket_channels():
    res = nccl.audit(_fixture("synthetic-efa-2x4-no-providers.log"), expect="efa")
    codes = [f.code for f in res.findings if f.severity == "fail"]
    assert codes[:2] == ["fallback", "plugin-failure"] or set(codes) >= {"fallback", "plugin-failure"}
    fb = next(f for f in res.findings if f.code == "fallback")
    assert all("NET/Socket" in e.text or "Using network Socket" in e.text for e in fb.evidence)
    assert {p.location for p in res.world.pairs.values() if p.cls == "socket"} == {"inter"}


def test_socket_baseline_is_a_socket_run_not_an_efa_one():
    text = _fixture("synthetic-socket-2x4-baseline.log")
    assert nccl.audit(text, expect="socket").ok
    r = nccl.audit(text, expect="efa")
    assert r.verdict == "fallback" and "expect='socket'" in r.summary
    assert any("NCCL_NET set by environment to Socket" in e.text for e in r.findings[0].evidence)
    assert nccl.audit(text, expect="auto").verdict == "fallback"     # auto never infers socket


def test_efa_expected_on_a_single_host_is_not_confirmed():
    res = nccl.audit(synth.run_log(1, 4), expect="efa")
    assert not res.ok and res.verdict == "unexpected"
    auto = nccl.audit(synth.run_log(1, 4), expect="auto")       # one host: auto expects p2p despite OFI lines
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
# Prefixes: Ray driver, kubectl, timestamps, dedup
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("colour", [True, False])
def test_ray_prefixed_real_fixtures(colour):
    nv = synth.ray_prefixed(_text(NVLINK), colour=colour)
    assert nv.count("(RayTrainWorker pid=") > 100
    res = nccl.audit(nv, expect="p2p")
    assert res.ok and res.world.size == 2
    assert {p.ray_ip for p in res.processes} == {"10.0.1.5"}
    assert {p.ray_name for p in res.processes} == {"RayTrainWorker"}
    _check_evidence(res, {"log": nv})
    so = synth.ray_prefixed(_text(SOCKET), colour=colour)
    assert nccl.audit(so, expect="p2p").verdict == "degraded"
    assert nccl.audit(so, expect="socket").ok


def test_other_ray_prefixes():
    line = "vm:730:730 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM"
    for pre in ("(pid=730) ", "(pid=730, ip=10.0.0.9) ", "(raylet, ip=10.0.0.9) ", "(RayTrainWorker pid=730) ",
                "\x1b[33m(raylet)\x1b[0m ", "(TrainController pid=730, ip=10.0.0.9) "):
        core, meta = nccl._strip_prefixes(nccl._ANSI.sub("", pre + line))
        assert core == line, pre


def test_ray_dedup_makes_a_pass_inconclusive_but_not_a_fail_a_pass():
    nv = synth.ray_prefixed(_text(NVLINK)).splitlines()
    i = next(k for k, ln in enumerate(nv) if "via P2P/CUMEM" in ln)
    nv[i] += "\x1b[32m [repeated 22x across cluster] (Ray deduplicates logs by default. Set RAY_DEDUP_LOGS=0 to " \
             "disable log deduplication, or see https://docs.ray.io/en/master/ray-observability/user-guides/" \
             "configure-logging.html#log-deduplication for more options.)\x1b[0m"
    res = nccl.audit("\n".join(nv), expect="p2p")
    assert not res.ok and res.verdict == "inconclusive"
    assert any("RAY_DEDUP_LOGS=0" in f.message for f in res.findings)
    so = synth.ray_prefixed(_text(SOCKET)).splitlines()
    i = next(k for k, ln in enumerate(so) if "via NET/Socket" in ln)
    so[i] += " [repeated 3x across cluster]"
    assert nccl.audit("\n".join(so), expect="p2p").verdict == "degraded"


def test_kubectl_prefixed_real_fixtures():
    nv = synth.kubectl_prefixed(_text(NVLINK))
    assert nv.startswith("[pod/raytrain-gpu-group-worker-abc12/ray-worker] 2026-11-29T10:00:00.000000000Z ")
    res = nccl.audit(nv, expect="p2p")
    assert res.ok and {p.pod for p in res.processes} == {"raytrain-gpu-group-worker-abc12"}
    _check_evidence(res, {"log": nv})
    assert nccl.audit(synth.kubectl_prefixed(_text(SOCKET)), expect="p2p").verdict == "degraded"


def test_kubectl_and_ray_prefixed_efa_run():
    text = synth.run_log(2, 4)
    pods = {"ip-10-0-1-11": "raytrain-gpu-worker-a", "ip-10-0-1-12": "raytrain-gpu-worker-b"}
    ips = {"ip-10-0-1-11": "10.0.1.11", "ip-10-0-1-12": "10.0.1.12"}
    wrapped = synth.kubectl_prefixed(synth.ray_prefixed(text, ips), pods)
    res = nccl.audit(wrapped, expect="efa")
    assert res.ok and len(res.hosts) == 2
    assert {p.pod for p in res.processes} == set(pods.values())
    broken = synth.kubectl_prefixed(synth.ray_prefixed(synth.run_log(2, 4, net="no-providers"), ips), pods)
    assert nccl.audit(broken, expect="efa").verdict == "fallback"


# ---------------------------------------------------------------------------------------------
# Hosts: identity, hints, per-file sources
# ---------------------------------------------------------------------------------------------

def test_same_hostname_different_bootstrap_ips_are_two_hosts():
    text = synth.run_log(2, 2, hostnames=["vm", "vm"], net="socket")
    res = nccl.audit(text, expect="efa")
    assert res.hosts == ["vm@10.0.1.11", "vm@10.0.1.12"] and res.verdict == "fallback"
    assert "bootstrap IP" in res.host_basis


def test_hosts_hint_overrides_identity():
    text = synth.run_log(2, 2, net="socket")
    merged = nccl.audit(text, expect="socket",
                        hosts_hint={"ip-10-0-1-11": "node-a", "ip-10-0-1-12": "node-a"})
    assert merged.hosts == ["node-a"]
    assert all(p.location == "intra" for p in merged.world.pairs.values())
    by_rank = nccl.audit(text, expect="efa", hosts_hint={0: "x", 1: "x", 2: "y", 3: "y"})
    assert by_rank.hosts == ["x", "y"] and by_rank.verdict == "fallback"
    with pytest.raises(TypeError, match="hosts_hint"):
        nccl.audit(text, hosts_hint=["a"])


def test_one_source_per_worker_file_equals_one_stream():
    text = synth.run_log(2, 2)
    per_proc: dict[str, list[str]] = {}
    for ln in text.splitlines():
        per_proc.setdefault(ln.split(" ", 1)[0].rsplit(":", 1)[0], []).append(ln)
    files = {f"worker-{k}.out": "\n".join(v) for k, v in per_proc.items()}
    a, b = nccl.audit(text, expect="efa"), nccl.audit(files, expect="efa")
    assert a.ok and b.ok
    assert {k: p.to_dict() for k, p in a.world.pairs.items()} == {k: p.to_dict() for k, p in b.world.pairs.items()}
    _check_evidence(b, files)


def test_missing_ranks_are_judged_from_the_other_end():
    text = synth.run_log(2, 2, net="socket")
    keep = "\n".join(ln for ln in text.splitlines() if not ln.startswith("ip-10-0-1-12:"))
    res = nccl.audit(keep, expect="efa")
    assert not res.ok and res.verdict == "fallback"
    assert any(f.code == "partial-logs" for f in res.findings)


# ---------------------------------------------------------------------------------------------
# No NCCL, gloo, junk, truncation
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


@pytest.mark.parametrize("path", [NVLINK, SOCKET])
def test_truncated_logs_never_crash_and_never_pass_a_visible_fallback(path):
    text = _text(path)
    rnd = random.Random(7)
    cuts = sorted({rnd.randrange(len(text)) for _ in range(60)} | {0, 1, len(text) // 2, len(text) - 1})
    for cut in cuts:
        part = text[:cut]
        res = nccl.audit(part, expect="p2p")
        assert res.verdict in ("pass", "degraded", "inconclusive", "no-nccl"), (cut, res.verdict)
        if re.search(r"-> \d+\[\d+\] \[(send|receive)\] via NET/S", part):
            assert not res.ok, cut
        if res.ok:
            assert "via P2P/CUMEM" in part
        json.loads(res.to_json())
        res.text()


def test_garbage_never_crashes():
    rnd = random.Random(3)
    junk = [
        "", "\x00\xff" * 50, "NCCL " * 5000, "a" * 200_000 + ":1:1 [0] NCCL INFO x",
        "vm:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> ", "vm:1:1 [0] NCCL INFO comm 0xzz rank x nRanks",
        "vm:1:1 [0] NCCL INFO ncclCommInitRankConfig comm 0x1 rank 99999999999 nranks 2 - Init START",
        "vm:1:1 [0] NCCL INFO Channel 00/0 : 5[0] -> 9[1] via", "(((((((( NCCL", "[pod/x] [pod/y] ((pid=1)) NCCL",
        "vm:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via NET/Soc",
    ]
    for _ in range(30):
        junk.append("".join(chr(rnd.randrange(1, 0x2FFF)) for _ in range(rnd.randrange(1, 400))))
    text = "\n".join(junk)
    for expect in nccl.EXPECTATIONS:
        res = nccl.audit(text, expect=expect)
        assert res.verdict != "pass"
        json.loads(res.to_json())
        res.text()
    assert nccl.audit(b"\xff\xfe" + _text(NVLINK).encode(), expect="p2p").ok


# ---------------------------------------------------------------------------------------------
# The property: an inter-node channel over NET/Socket never yields a pass
# ---------------------------------------------------------------------------------------------

_INTRA = st.sampled_from(["P2P/CUMEM/read", "P2P/IPC", "P2P/direct pointer", "SHM/direct/direct"])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nodes=st.integers(2, 3), gpus=st.integers(1, 3), net=st.sampled_from(["efa", "ib", "socket", "provider"]),
       intra=_INTRA, style=st.sampled_from(["bare", "ray", "kubectl", "files"]), seed=st.integers(0, 10_000),
       expect=st.sampled_from(["efa", "p2p", "auto", "ib"]), data=st.data())
def test_property_inter_node_socket_never_passes(nodes, gpus, net, intra, style, seed, expect, data):
    n = nodes * gpus
    a = data.draw(st.integers(0, n - 1), label="src")
    b = data.draw(st.integers(0, n - 1).filter(lambda x: x // gpus != a // gpus), label="dst")
    text = synth.run_log(nodes, gpus, net=net, intra=intra, seed=seed, provider="efa",
                         overrides={(a, b): "NET/Socket/0"})
    text = text.replace("0x1f2e3d4c5b6a7988", "")  if seed % 7 == 0 else text       # no commId sometimes
    # extra edge (a, b) so the injected pair always exists
    r_a = synth.layout(nodes, gpus)[a]
    r_b = synth.layout(nodes, gpus)[b]
    extra = (f"{r_a.prefix}Channel 03/0 : {a}[{r_a.local}] -> {b}[{r_b.local}] [send] via NET/Socket/0\n"
             f"{r_b.prefix}Channel 03/0 : {a}[{r_a.local}] -> {b}[{r_b.local}] [receive] via NET/Socket/0\n")
    lines = text.splitlines()
    # some junk and some truncated (non-injected) lines
    rnd = random.Random(seed)
    for _ in range(rnd.randrange(0, 6)):
        k = rnd.randrange(len(lines))
        if "NET/Socket" not in lines[k]:
            lines[k] = lines[k][: rnd.randrange(len(lines[k]) + 1)]
    lines.insert(rnd.randrange(len(lines) + 1), extra.rstrip("\n"))
    text = "\n".join(lines)
    if style == "ray":
        text = synth.ray_prefixed(text, colour=bool(seed % 2))
    elif style == "kubectl":
        text = synth.kubectl_prefixed(text)
    if style == "files":
        files: dict[str, list[str]] = {}
        for ln in text.splitlines():
            files.setdefault(ln.split(" ", 1)[0].rsplit(":", 1)[0], []).append(ln)
        res = nccl.audit({k: "\n".join(v) for k, v in files.items()}, expect=expect)
    else:
        res = nccl.audit(text, expect=expect)
    assert not res.ok and res.verdict != "pass", res.summary


# ---------------------------------------------------------------------------------------------
# Report, JSON, plot
# ---------------------------------------------------------------------------------------------

def test_show_and_json(capsys):
    res = nccl.audit(_fixture("synthetic-efa-2x4-no-providers.log"), expect="efa")
    res.show()
    out = capsys.readouterr().out
    assert "NCCL transport audit: FAIL (fallback)" in out and "SOCK*" in out and "No eligible providers" in out
    d = json.loads(res.to_json())
    assert d["verdict"] == "fallback" and d["ok"] is False and d["expected"] == "efa"
    world = d["communicators"][0]
    assert world["nranks"] == 8 and world["hosts"] == ["ip-10-0-1-11", "ip-10-0-1-12"]
    assert {(p["src"], p["dst"]) for p in world["pairs"] if p["location"] == "inter"} == {(3, 4), (7, 0), (0, 4),
                                                                                          (4, 0)}
    assert all(f["evidence"] or f["severity"] in ("info", "warn") for f in d["findings"])


def test_plot_matrix_returns_a_figure():
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib.figure import Figure
    res = nccl.audit(_fixture("synthetic-efa-2x4-healthy.log"))
    fig = nccl.plot_matrix(res)
    assert isinstance(fig, Figure)
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    assert buf.getvalue()[:4] == b"\x89PNG"
    ax = fig.axes[0]
    img = ax.get_images()[0].get_array()
    assert img.shape == (8, 8)
    assert len({int(v) for v in img.ravel()}) >= 3        # none, P2P, EFA
    fig2 = Figure()
    ax2 = fig2.add_subplot(1, 1, 1)
    assert nccl.plot_matrix(nccl.audit(_text(SOCKET)), ax=ax2) is fig2
    assert nccl.plot_matrix(nccl.audit("")) is not None
    with pytest.raises(ValueError, match="comm="):
        nccl.plot_matrix(res, comm="nope")


# ---------------------------------------------------------------------------------------------
# Benchmark comparison
# ---------------------------------------------------------------------------------------------

def _run(label, expected, log, tok, sps):
    return dict(label=label, expected_transport=expected, log_text=log, tokens_per_s_per_gpu=tok, steps_per_s=sps)


def test_compare_runs_confirms_both_transports_first(capsys):
    efa = _run("efa", "efa", _fixture("synthetic-efa-2x4-healthy.log"), 2000.0, 1.0)
    tcp = _run("tcp", "socket", _fixture("synthetic-socket-2x4-baseline.log"), 1000.0, 0.5)
    c = nccl.compare_runs(efa, tcp)
    assert c.ok and c.refusal is None and c.speedup_tokens == pytest.approx(2.0) and c.speedup_steps == pytest.approx(2)
    c.show()
    assert "2.00x" in capsys.readouterr().out
    assert json.loads(c.to_json())["speedup_tokens"] == pytest.approx(2.0)

    fake = _run("efa", "efa", _fixture("synthetic-efa-2x4-no-providers.log"), 1000.0, 0.5)
    c = nccl.compare_runs(fake, tcp)
    assert not c.ok and c.speedup_tokens is None and "'efa'" in c.refusal and "fallback" in c.refusal
    c.show()
    assert "no speedup reported" in capsys.readouterr().out

    nv = _run("nvlink", "p2p", _text(NVLINK), 28563, 3.487)
    so = _run("no-p2p", "p2p", _text(SOCKET), 4053, 0.495)
    c = nccl.compare_runs(nv, so)
    assert not c.ok and "'no-p2p'" in c.refusal and "degraded" in c.refusal
    so["expected_transport"] = "socket"
    c = nccl.compare_runs(nv, so)
    assert c.ok and c.speedup_tokens == pytest.approx(28563 / 4053)


def test_compare_runs_validates_fields():
    good = _run("a", "p2p", _text(NVLINK), 1.0, 1.0)
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
