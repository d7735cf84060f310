"""Communicators, host identity and the pair matrix: hostnames split by IP, hints, per-file sources, gaps."""

from __future__ import annotations

import pytest

from raytrain_helpers import nccl
from raytrain_helpers.nccl.matrix import assign_hosts, build_comms, classify_pairs
from tests.unit.nccl import synth
from tests.unit.nccl.fixtures import check_evidence


def test_same_hostname_different_bootstrap_ips_are_two_hosts():
    text = synth.run_log(2, 2, hostnames=["vm", "vm"], net="socket")
    res = nccl.audit(text, expect="efa")
    assert res.hosts == ["vm@10.0.1.11", "vm@10.0.1.12"] and res.verdict == "fallback"
    assert "bootstrap IP" in res.host_basis


def test_hosts_hint_overrides_identity():
    text = synth.run_log(2, 2, net="socket")
    merged = nccl.audit(text, expect="socket", hosts_hint={"ip-10-0-1-11": "node-a", "ip-10-0-1-12": "node-a"})
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
    check_evidence(b, files)


def test_missing_ranks_are_judged_from_the_other_end():
    text = synth.run_log(2, 2, net="socket")
    keep = "\n".join(ln for ln in text.splitlines() if not ln.startswith("ip-10-0-1-12:"))
    res = nccl.audit(keep, expect="efa")
    assert not res.ok and res.verdict == "fallback"
    assert any(f.code == "partial-logs" for f in res.findings)


def test_the_matrix_step_by_step():
    log = nccl.parse(synth.run_log(2, 2, overrides={(1, 2): "NET/Socket/0"}))
    comms = build_comms(log)
    (g,) = comms.values()
    assert g.key == "commId:0x1f2e3d4c5b6a7988" and g.ranks == {r: p for p, r in _world_ranks(log).items()}
    assert all(ch.comm is not None for ch in g.channels)
    basis = assign_hosts(log, comms, None)
    assert basis == "NCCL hostnames (the prefix host:pid:tid of every NCCL line)"
    assert g.rank_host == {0: "ip-10-0-1-11", 1: "ip-10-0-1-11", 2: "ip-10-0-1-12", 3: "ip-10-0-1-12"}
    classify_pairs(log, comms)
    assert g.pairs[(0, 1)].location == "intra" and g.pairs[(0, 1)].cls == "p2p"
    assert g.pairs[(1, 2)].location == "inter" and g.pairs[(1, 2)].cls == "socket"
    assert g.pairs[(2, 3)].cls == "p2p" and g.pairs[(3, 0)].cls == "efa"
    assert g.grid()[1][2] == "socket" and g.grid()[0][0] == ""


def test_ofi_channels_take_the_provider_of_the_other_processes():
    text = synth.run_log(2, 1).replace("ip-10-0-1-12:4137:4137 [0] NCCL INFO NET/OFI Selected provider is efa", "x")
    res = nccl.audit(text, expect="efa")
    chans = [c for c in res.world.channels if c.proc == "ip-10-0-1-12:4137"]
    assert chans and all(c.cls == "efa" and c.provider_basis.startswith("provider printed") for c in chans)


def _world_ranks(log) -> dict[str, int]:
    return {p.key: c.rank for p in log.procs.values() for c in p.comms}
