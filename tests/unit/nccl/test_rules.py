"""The verdict rules, one by one: each rule alone on a log made for it, each rule through the audit (and not
without it), the pair verdict table, the order of the rules, and the property that an inter-node channel over
NET/Socket never passes."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from raytrain_helpers import nccl
from raytrain_helpers.nccl import rules
from raytrain_helpers.nccl.auditing import check_expect, resolve_expect
from raytrain_helpers.nccl.matrix import assign_hosts, build_comms, classify_pairs
from raytrain_helpers.nccl.rules import comms, registry
from tests.unit.nccl import synth
from tests.unit.nccl.fixtures import NVLINK, SOCKET, fixture, split_by_process


def context(text, expect: str = "auto") -> rules.Context:
    """The rules' context for a log, as the audit builds it (no rule applied yet)."""
    expect = check_expect(expect)
    log = nccl.parse(text)
    comms = build_comms(log)
    host_basis = assign_hosts(log, comms, None)
    classify_pairs(log, comms)
    expected, basis = resolve_expect(log, comms, expect)
    return rules.Context(log, comms, expect, expected, basis, host_basis)


def found(findings) -> list[tuple[str, str, str]]:
    return [(f.severity, f.code, f.message) for f in findings]


# ---------------------------------------------------------------------------------------------
# Logs made for one rule each
# ---------------------------------------------------------------------------------------------


def _two_markers():
    return "[raytrain] marker=a rank=0/4\n[raytrain] marker=b rank=1/4\n" + synth.run_log(2, 2)


def _ray_nodes_on_one_host():
    return {
        f"worker-{pid}.out": f"[raytrain] marker=m1 node={node} host=vm pid={pid}\n{body}"
        for (pid, body), node in zip(split_by_process(NVLINK.read_text()).items(), ("aaaa", "bbbb"), strict=True)
    }


def _two_versions():
    return synth.run_log(2, 2) + synth.run_log(1, 1, nccl="2.1.0", base_pid=9000, comm_id="0x99")


def _rank_claimed_twice():
    return synth.run_log(2, 2) + synth.run_log(2, 2, base_pid=5000)


def _one_host_missing():
    text = synth.run_log(2, 2, net="socket")
    return "\n".join(ln for ln in text.splitlines() if not ln.startswith("ip-10-0-1-12:"))


def _ofi_warning():
    return synth.run_log(2, 2) + "ip-10-0-1-11:4100:4100 [0] NCCL WARN NET/OFI Unable to find a protocol that worked\n"


def _cuda_warning():
    return synth.run_log(2, 2) + "ip-10-0-1-11:4100:4100 [0] NCCL WARN Cuda failure 'out of memory'\n"


def _no_channel_lines():
    return "\n".join(ln for ln in synth.run_log(2, 2).splitlines() if " -> " not in ln)


def _ray_folded():
    lines = NVLINK.read_text().splitlines()
    i = next(k for k, ln in enumerate(lines) if "via P2P/CUMEM" in ln)
    lines[i] += " [repeated 22x across cluster]"
    return "\n".join(lines)


#: rule -> (log, expect, the finding it adds: severity, code, a piece of the message)
CASES = {
    "mixed_run_markers": (_two_markers, "efa", ("warn", "mixed-runs", "the logs hold 2 runs (markers a, b)")),
    "ray_nodes_share_host": (_ray_nodes_on_one_host, "p2p", ("info", "ray-nodes-share-host", "2 Ray nodes run on")),
    "no_nccl": (lambda: "NCCL version 2.28.9\n", "p2p", ("fail", "no-nccl", "only a bare 'NCCL version' line")),
    "versions": (_two_versions, "efa", ("warn", "version-mismatch", "2.29.7+cuda13.0 x4, 2.1.0 x1")),
    "nccl_not_expected": (NVLINK.read_text, "none", ("fail", "unexpected", "but 2 process(es) ran NCCL")),
    "comm_conflicts": (_rank_claimed_twice, "efa", ("warn", "mixed-runs", "rank 0 claimed by")),
    "comm_nnodes_vs_hosts": (SOCKET.read_text, "p2p", ("info", "nnodes-vs-hosts", "NCCL reports nNodes 2 but")),
    "comm_partial_logs": (_one_host_missing, "efa", ("warn", "partial-logs", "no log lines from rank(s) 2-3 of 4")),
    "degraded_pairs": (SOCKET.read_text, "p2p", ("fail", "degraded", "2 intra-node pair(s) ride NET/Socket although")),
    "fallback_pairs": (
        lambda: fixture("synthetic-efa-2x4-no-providers.log"),
        "efa",
        ("fail", "fallback", "4 inter-node pair(s) ride NET/Socket - TCP sockets instead of the fabric"),
    ),
    "unexpected_pairs": (
        lambda: fixture("synthetic-efa-2x4-healthy.log"),
        "socket",
        ("fail", "unexpected", "4 inter-node pair(s) ride NET/Libfabric/GDRDMA, but socket was expected"),
    ),
    "p2p_across_hosts": (
        lambda: synth.run_log(2, 2, overrides={(1, 2): "P2P/CUMEM"}),
        "efa",
        ("info", "p2p-across-hosts", "1 pair(s) between different hosts ride P2P/CUMEM"),
    ),
    "expected_pairs": (NVLINK.read_text, "p2p", ("pass", "intra-node", "2 intra-node pair(s) ride P2P/CUMEM (GPU")),
    "unconfirmed_pairs": (
        lambda: synth.run_log(2, 2, print_provider=False),
        "efa",
        ("warn", "unconfirmed", "(no 'NET/OFI Selected provider' line)"),
    ),
    "fabric_on_one_host": (lambda: synth.run_log(1, 4), "efa", ("fail", "unexpected", "so EFA is not exercised")),
    "socket_not_used": (NVLINK.read_text, "socket", ("fail", "unexpected", "no rank pair uses NET/Socket")),
    "ofi_not_initialised": (
        lambda: fixture("synthetic-efa-2x4-no-providers.log"),
        "efa",
        ("fail", "plugin-failure", "did not initialise in 8 of 8 process(es): No eligible providers were found"),
    ),
    "efa_provider": (
        lambda: fixture("synthetic-efa-2x4-healthy.log"),
        "efa",
        ("pass", "provider", "libfabric selected provider efa in 8 of 8 process(es)"),
    ),
    "non_efa_provider": (
        lambda: fixture("synthetic-efa-2x4-tcp-provider.log"),
        "efa",
        ("fail", "plugin-failure", "libfabric selected provider tcp instead of efa"),
    ),
    "ofi_warnings": (_ofi_warning, "efa", ("warn", "ofi-warnings", "aws-ofi-nccl printed errors")),
    "ib_not_initialised": (
        lambda: synth.run_log(2, 2, net="socket"),
        "ib",
        ("fail", "plugin-failure", "the IB transport did not initialise in 4 process(es)"),
    ),
    "plugin_probes": (NVLINK.read_text, "p2p", ("info", "plugins", "NET plugin probes that found nothing")),
    "socket_plugin_unused": (NVLINK.read_text, "p2p", ("info", "socket-plugin-unused", "yet no rank pair uses")),
    "nccl_warnings": (_cuda_warning, "efa", ("warn", "nccl-warn", "1 NCCL WARN line(s)")),
    "unparsed_lines": (
        lambda: synth.run_log(2, 2) + "ip-10-0-1-11:4100:4100 [0] NCCL INFO Channel 00/0 : 0[0] -> \n",
        "efa",
        ("info", "unparsed", "1 NCCL-looking line(s) could not be read"),
    ),
    "shm_pairs": (
        lambda: synth.run_log(1, 2, intra="SHM/direct/direct"),
        "p2p",
        ("info", "shm", "2 pair(s) use SHM (host memory) rather than P2P"),
    ),
    "no_channels": (_no_channel_lines, "efa", ("fail", "inconclusive", "no channel connection lines")),
    "unconfirmed_inconclusive": (
        lambda: synth.run_log(2, 2, print_provider=False),
        "efa",
        ("fail", "inconclusive", "4 pair(s) ride a transport the audit cannot confirm as efa"),
    ),
    "ray_dedup": (_ray_folded, "p2p", ("fail", "inconclusive", "1 channel line(s) carry Ray's '[repeated Nx")),
}


def _apply(name: str, ctx: rules.Context):
    rule = getattr(rules, name)
    if rule in rules.COMM_RULES:
        out = [rule(ctx, g) for g in ctx.ordered]
        ctx.findings.extend(f for f in out if f is not None)
        return None
    return rule(ctx)


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_rule_alone(name):
    make, expect, (sev, code, piece) = CASES[name]
    ctx = context(make(), expect)
    _apply(name, ctx)
    assert [(s, c) for s, c, _ in found(ctx.findings)] == [(sev, code)], found(ctx.findings)
    assert piece in ctx.findings[0].message


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_rule_through_the_audit_and_not_without_it(name, monkeypatch):
    make, expect, (sev, code, piece) = CASES[name]

    def hits(res):
        return [f for f in res.findings if (f.severity, f.code) == (sev, code) and piece in f.message]

    assert hits(nccl.audit(make(), expect=expect))
    rule = getattr(rules, name)
    if rule in rules.COMM_RULES:
        monkeypatch.setattr(comms, "COMM_RULES", tuple(r for r in rules.COMM_RULES if r is not rule))
    else:
        monkeypatch.setattr(registry, "RULES", tuple(r for r in rules.RULES if r is not rule))
    assert not hits(nccl.audit(make(), expect=expect))


def test_every_rule_has_a_case_and_runs_in_this_order():
    assert [r.__name__ for r in rules.RULES] == [
        "mixed_run_markers",
        "ray_nodes_share_host",
        "no_nccl",
        "versions",
        "nccl_not_expected",
        "communicators",
        "degraded_pairs",
        "fallback_pairs",
        "unexpected_pairs",
        "p2p_across_hosts",
        "expected_pairs",
        "unconfirmed_pairs",
        "fabric_on_one_host",
        "socket_not_used",
        "ofi_not_initialised",
        "efa_provider",
        "non_efa_provider",
        "ofi_warnings",
        "ib_not_initialised",
        "plugin_probes",
        "socket_plugin_unused",
        "nccl_warnings",
        "unparsed_lines",
        "shm_pairs",
        "no_channels",
        "unconfirmed_inconclusive",
        "ray_dedup",
    ]
    named = {r.__name__ for r in rules.RULES if r is not rules.communicators} | {r.__name__ for r in rules.COMM_RULES}
    assert named == set(CASES)


# ---------------------------------------------------------------------------------------------
# The other side of each rule
# ---------------------------------------------------------------------------------------------


def test_rules_stay_quiet_on_a_healthy_efa_run():
    ctx = context(fixture("synthetic-efa-2x4-healthy.log"), "efa")
    quiet = [name for name in CASES if name not in ("versions", "expected_pairs", "efa_provider")]
    for name in quiet:
        assert _apply(name, ctx) is None
    assert ctx.findings == []


def test_settling_rules():
    ctx = context("", "none")
    res = rules.no_nccl(ctx)
    assert res.ok and res.verdict == "n/a" and found(res.findings)[0][:2] == ("pass", "no-nccl")
    ctx = context(synth.run_log(1, 2), "none")
    assert rules.no_nccl(ctx) is None
    res = rules.nccl_not_expected(ctx)
    assert not res.ok and res.verdict == "unexpected" and res.expected == "none"
    assert rules.nccl_not_expected(context(synth.run_log(1, 2), "p2p")) is None


def test_versions_without_a_mismatch_are_info():
    ctx = context(synth.run_log(2, 2), "efa")
    rules.versions(ctx)
    assert found(ctx.findings) == [("info", "versions", "NCCL 2.29.7+cuda13.0 in 4 process(es); aws-ofi-nccl 1.17.1")]


def test_one_rank_communicators_are_inconclusive():
    ctx = context(synth.run_log(1, 1), "p2p")
    rules.no_channels(ctx)
    assert found(ctx.findings)[0][2].startswith("every communicator has one rank")


def test_inconclusive_rules_yield_to_a_failure():
    ctx = context(synth.run_log(2, 2, print_provider=False), "efa")
    ctx.add(nccl.Finding("fail", "fallback", "x"))
    rules.unconfirmed_inconclusive(ctx)
    rules.no_channels(context(_no_channel_lines(), "efa"))
    assert [f.code for f in ctx.findings] == ["fallback"]
    ctx = context(_ray_folded(), "p2p")
    ctx.add(nccl.Finding("fail", "fallback", "x"))
    rules.ray_dedup(ctx)
    assert [(f.severity, f.code) for f in ctx.findings] == [("fail", "fallback"), ("warn", "inconclusive")]


def test_nnodes_vs_hosts_quotes_the_processes_in_rank_order():
    ctx = context(SOCKET.read_text(), "p2p")
    (finding,) = [rules.comm_nnodes_vs_hosts(ctx, g) for g in ctx.ordered]
    env = [e.text.split(" ", 1)[0] for e in finding.evidence if "set by environment" in e.text]
    assert env == ["vm:1279:1279", "vm:1279:1279", "vm:1280:1280", "vm:1280:1280"]


def test_ofi_not_initialised_is_a_warning_when_efa_pairs_exist():
    text = fixture("synthetic-efa-2x4-healthy.log").replace(
        "ip-10-0-1-11:4100:4100 [0] NCCL INFO NET/OFI Selected provider is efa, fabric is efa (found 1 nics)", "x"
    )
    text = text.replace("ip-10-0-1-11:4100:4100 [0] NCCL INFO Using network Libfabric", "x").replace(
        "ip-10-0-1-11:4100:4100 [0] NCCL INFO Assigned NET plugin Libfabric to comm", "x"
    )
    ctx = context(text, "efa")
    rules.ofi_not_initialised(ctx)
    assert [(f.severity, f.code) for f in ctx.findings] == [("warn", "plugin-failure")]
    assert "did not initialise in 1 of 8 process(es): no 'NET/OFI Selected provider'" in ctx.findings[0].message


# ---------------------------------------------------------------------------------------------
# The verdict
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "expected, loc, cls, verdict",
    [
        ("p2p", "intra", "p2p", "ok"),
        ("p2p", "inter", "p2p", "info"),
        ("p2p", "inter", "socket", "fallback"),
        ("p2p", "inter", "ofi-tcp", "fallback"),
        ("p2p", "inter", "efa", "unexpected"),
        ("p2p", "inter", "net?", "unconfirmed"),
        ("p2p", "intra", "socket", "degraded"),
        ("p2p", "unknown", "?", "unconfirmed"),
        ("efa", "intra", "shm", "ok"),
        ("efa", "intra", "efa", "degraded"),
        ("efa", "intra", "?", "unconfirmed"),
        ("efa", "inter", "nvls", "info"),
        ("efa", "inter", "efa", "ok"),
        ("efa", "unknown", "socket", "fallback"),
        ("efa", "inter", "ofi?", "unconfirmed"),
        ("efa", "inter", "ib", "unexpected"),
        ("ib", "inter", "ib", "ok"),
        ("ib", "inter", "efa", "unexpected"),
        ("socket", "intra", "p2p", "ok"),
        ("socket", "inter", "p2p", "info"),
        ("socket", "inter", "socket", "ok"),
        ("socket", "inter", "ofi?", "unconfirmed"),
        ("socket", "inter", "efa", "unexpected"),
    ],
)
def test_pair_verdict(expected, loc, cls, verdict):
    assert rules.pair_verdict(expected, loc, cls) == verdict


def test_verdict_is_the_most_serious_failure_and_a_pass_says_what_pairs_rode():
    ctx = context(synth.run_log(2, 2), "efa")
    for code in ("inconclusive", "unexpected", "plugin-failure", "degraded"):
        ctx.add(nccl.Finding("fail", code, f"{code} message"))
    ctx.add(nccl.Finding("info", "x", "y"))
    res = rules.verdict(ctx)
    assert not res.ok and res.verdict == "plugin-failure" and res.summary == "plugin-failure: plugin-failure message"
    assert [f.severity for f in res.findings] == ["fail"] * 4 + ["info"]
    res = nccl.audit(synth.run_log(2, 2), expect="efa")
    assert res.ok and res.summary == (
        "pass: 4 ranks on 2 host(s); inter-node pairs ride NET/Libfabric/GDRDMA (libfabric provider efa); "
        "intra-node pairs ride P2P/CUMEM"
    )


def test_findings_are_sorted_by_severity_and_keep_the_rule_order_within_one():
    res = nccl.audit(fixture("synthetic-efa-2x4-no-providers.log"), expect="efa")
    sev = [f.severity for f in res.findings]
    assert sev == sorted(sev, key=["fail", "warn", "pass", "info"].index)
    assert [f.code for f in res.findings if f.severity == "fail"] == ["fallback", "plugin-failure"]


# ---------------------------------------------------------------------------------------------
# The property: an inter-node channel over NET/Socket never yields a pass
# ---------------------------------------------------------------------------------------------

_INTRA = st.sampled_from(["P2P/CUMEM/read", "P2P/IPC", "P2P/direct pointer", "SHM/direct/direct"])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    nodes=st.integers(2, 3),
    gpus=st.integers(1, 3),
    net=st.sampled_from(["efa", "ib", "socket", "provider"]),
    intra=_INTRA,
    style=st.sampled_from(["bare", "ray", "kubectl", "files"]),
    seed=st.integers(0, 10_000),
    expect=st.sampled_from(["efa", "p2p", "auto", "ib"]),
    data=st.data(),
)
def test_property_inter_node_socket_never_passes(nodes, gpus, net, intra, style, seed, expect, data):
    n = nodes * gpus
    a = data.draw(st.integers(0, n - 1), label="src")
    b = data.draw(st.integers(0, n - 1).filter(lambda x: x // gpus != a // gpus), label="dst")
    text = synth.run_log(
        nodes, gpus, net=net, intra=intra, seed=seed, provider="efa", overrides={(a, b): "NET/Socket/0"}
    )
    text = text.replace("0x1f2e3d4c5b6a7988", "") if seed % 7 == 0 else text  # no commId sometimes
    # extra edge (a, b) so the injected pair always exists
    r_a = synth.layout(nodes, gpus)[a]
    r_b = synth.layout(nodes, gpus)[b]
    extra = (
        f"{r_a.prefix}Channel 03/0 : {a}[{r_a.local}] -> {b}[{r_b.local}] [send] via NET/Socket/0\n"
        f"{r_b.prefix}Channel 03/0 : {a}[{r_a.local}] -> {b}[{r_b.local}] [receive] via NET/Socket/0\n"
    )
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
