"""Reading NCCL lines: the data model, Ray/kubectl/timestamp prefixes, Ray's dedup, truncation and junk."""

from __future__ import annotations

import json
import random
import re

import pytest

from raytrain_helpers import nccl
from raytrain_helpers.nccl.lines import ANSI, strip_prefixes
from raytrain_helpers.nccl.messages import classify_via
from raytrain_helpers.nccl.parsing import as_sources
from tests.unit.nccl import synth
from tests.unit.nccl.fixtures import NVLINK, SOCKET, check_evidence

# ---------------------------------------------------------------------------------------------
# The data model
# ---------------------------------------------------------------------------------------------


def test_parse_reads_processes_communicators_and_channels():
    log = nccl.parse(synth.run_log(2, 2))
    assert set(log.procs) == {"ip-10-0-1-11:4100", "ip-10-0-1-11:4137", "ip-10-0-1-12:4174", "ip-10-0-1-12:4211"}
    p = log.procs["ip-10-0-1-12:4174"]
    assert (p.hostname, p.pid, p.bootstrap_if, p.bootstrap_ip) == ("ip-10-0-1-12", 4174, "eth0", "10.0.1.12")
    assert (p.nccl_version, p.ofi_version, p.libfabric_version) == ("2.29.7+cuda13.0", "1.17.1", "2.2")
    assert (p.provider, p.fabric, p.nics, p.ofi_protocol) == ("efa", "efa", 1, "SENDRECV")
    assert p.ofi_ok and "Libfabric" in p.nets and p.plugins_loaded == ["Libfabric", "libnccl-net-ofi.so"]
    (c,) = p.comms
    assert (c.rank, c.nranks, c.nnodes, c.local_ranks, c.local_rank, c.cuda_dev) == (2, 4, 2, 2, 0, 0)
    assert c.comm_id == "0x1f2e3d4c5b6a7988" and c.fn == "ncclCommInitRankConfig"
    inter = [ch for ch in log.channels if ch.kind == "ofi"]
    assert inter and all(ch.gdr and ch.label == "NET/Libfabric" and ch.direction in ("send", "receive") for ch in inter)
    assert log.lines == len(synth.run_log(2, 2).splitlines()) and not log.unparsed


def test_parse_reads_failures_env_and_markers():
    text = "[raytrain] marker=m1 rank=0/2 node=abc host=ip-10-0-1-11 pid=4100\n" + synth.run_log(
        2, 1, net="no-providers", env={"NCCL_P2P_DISABLE": "1"}
    )
    log = nccl.parse(text)
    p = log.procs["ip-10-0-1-11:4100"]
    kinds = [k for k, _ in p.plugin_failures]
    assert kinds.count("ofi") == 3 and "ib" in kinds and "net-init:Libfabric" in kinds and "net-init:IB" in kinds
    assert not p.ofi_ok and p.env == {"NCCL_P2P_DISABLE": "1"} and len(p.warnings) == 2
    assert p.marker == {"marker": "m1", "rank": "0/2", "node": "abc", "host": "ip-10-0-1-11", "pid": "4100"}
    assert log.markers[0][1].lineno == 1
    missing = nccl.parse(synth.run_log(1, 1, net="plugin-missing")).procs["ip-10-0-1-11:4100"]
    assert ("plugin-missing:libnccl-net-ofi.so", 5) in [(k, e.lineno) for k, e in missing.plugin_failures]


@pytest.mark.parametrize(
    "via, expected",
    [
        ("P2P/CUMEM/read", ("P2P/CUMEM", "p2p", False)),
        ("P2P/IPC", ("P2P/IPC", "p2p", False)),
        ("SHM/direct/direct", ("SHM", "shm", False)),
        ("NVLS", ("NVLS", "nvls", False)),
        ("CollNet/0", ("CollNet", "collnet", False)),
        ("NET/Socket/0", ("NET/Socket", "socket", False)),
        ("NET/IB/0/GDRDMA", ("NET/IB", "ib", True)),
        ("NET/Libfabric/0/GDRDMA", ("NET/Libfabric", "ofi", True)),
        ("NET/AWS Libfabric/1", ("NET/AWS Libfabric", "ofi", False)),
        ("NET/Mystery/0", ("NET/Mystery", "net?", False)),
        ("carrier pigeon", ("carrier pigeon", "?", False)),
    ],
)
def test_classify_via(via, expected):
    assert classify_via(via) == expected


def test_as_sources_names_each_text():
    assert as_sources("a") == [("log", "a")]
    assert as_sources(b"\xffa") == [("log", "\ufffda")]
    assert as_sources(["a", b"b"]) == [("log[0]", "a"), ("log[1]", "b")]
    assert as_sources({"w.out": "a"}) == [("w.out", "a")]
    with pytest.raises(TypeError, match="text_or_texts is None"):
        as_sources(None)


# ---------------------------------------------------------------------------------------------
# Prefixes: Ray driver, kubectl, timestamps, dedup
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("colour", [True, False])
def test_ray_prefixed_real_fixtures(colour):
    nv = synth.ray_prefixed(NVLINK.read_text(), colour=colour)
    assert nv.count("(RayTrainWorker pid=") > 100
    res = nccl.audit(nv, expect="p2p")
    assert res.ok and res.world.size == 2
    assert {p.ray_ip for p in res.processes} == {"10.0.1.5"}
    assert {p.ray_name for p in res.processes} == {"RayTrainWorker"}
    check_evidence(res, {"log": nv})
    so = synth.ray_prefixed(SOCKET.read_text(), colour=colour)
    assert nccl.audit(so, expect="p2p").verdict == "degraded"
    assert nccl.audit(so, expect="socket").ok


def test_other_ray_prefixes():
    line = "vm:730:730 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM"
    for pre in (
        "(pid=730) ",
        "(pid=730, ip=10.0.0.9) ",
        "(raylet, ip=10.0.0.9) ",
        "(RayTrainWorker pid=730) ",
        "\x1b[33m(raylet)\x1b[0m ",
        "(TrainController pid=730, ip=10.0.0.9) ",
    ):
        core, meta = strip_prefixes(ANSI.sub("", pre + line))
        assert core == line, pre


def test_prefix_metadata():
    line = "vm:730:730 [0] NCCL INFO Using network Socket"
    ray = "(RayTrainWorker pid=730, ip=10.0.0.9)"
    core, meta = strip_prefixes(f"[pod/w-1/ray-worker] 2026-11-29T10:00:00.1Z {ray} {line}")
    assert core == line
    assert meta == {
        "pod": "w-1",
        "container": "ray-worker",
        "ray_pid": 730,
        "ray_name": "RayTrainWorker",
        "ray_ip": "10.0.0.9",
    }
    core, meta = strip_prefixes(f"[2026-11-29 10:00:01] {line} [repeated 3x across cluster]")
    assert core == line and meta == {"repeated": 3}
    assert strip_prefixes("(not a ray prefix) " + line) == ("(not a ray prefix) " + line, {})


def test_ray_dedup_makes_a_pass_inconclusive_but_not_a_fail_a_pass():
    nv = synth.ray_prefixed(NVLINK.read_text()).splitlines()
    i = next(k for k, ln in enumerate(nv) if "via P2P/CUMEM" in ln)
    nv[i] += (
        "\x1b[32m [repeated 22x across cluster] (Ray deduplicates logs by default. Set RAY_DEDUP_LOGS=0 to "
        "disable log deduplication, or see https://docs.ray.io/en/master/ray-observability/user-guides/"
        "configure-logging.html#log-deduplication for more options.)\x1b[0m"
    )
    res = nccl.audit("\n".join(nv), expect="p2p")
    assert not res.ok and res.verdict == "inconclusive"
    assert any("RAY_DEDUP_LOGS=0" in f.message for f in res.findings)
    so = synth.ray_prefixed(SOCKET.read_text()).splitlines()
    i = next(k for k, ln in enumerate(so) if "via NET/Socket" in ln)
    so[i] += " [repeated 3x across cluster]"
    assert nccl.audit("\n".join(so), expect="p2p").verdict == "degraded"


def test_kubectl_prefixed_real_fixtures():
    nv = synth.kubectl_prefixed(NVLINK.read_text())
    assert nv.startswith("[pod/raytrain-gpu-group-worker-abc12/ray-worker] 2026-11-29T10:00:00.000000000Z ")
    res = nccl.audit(nv, expect="p2p")
    assert res.ok and {p.pod for p in res.processes} == {"raytrain-gpu-group-worker-abc12"}
    check_evidence(res, {"log": nv})
    assert nccl.audit(synth.kubectl_prefixed(SOCKET.read_text()), expect="p2p").verdict == "degraded"


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
# Junk and truncation
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", [NVLINK, SOCKET])
def test_truncated_logs_never_crash_and_never_pass_a_visible_fallback(path):
    text = path.read_text()
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
        "",
        "\x00\xff" * 50,
        "NCCL " * 5000,
        "a" * 200_000 + ":1:1 [0] NCCL INFO x",
        "vm:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> ",
        "vm:1:1 [0] NCCL INFO comm 0xzz rank x nRanks",
        "vm:1:1 [0] NCCL INFO ncclCommInitRankConfig comm 0x1 rank 99999999999 nranks 2 - Init START",
        "vm:1:1 [0] NCCL INFO Channel 00/0 : 5[0] -> 9[1] via",
        "(((((((( NCCL",
        "[pod/x] [pod/y] ((pid=1)) NCCL",
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
    assert nccl.audit(b"\xff\xfe" + NVLINK.read_text().encode(), expect="p2p").ok
