"""The transport check's arithmetic and verdict, fed the real NCCL logs of tests/fixtures/nccl: two H200s of one
host over P2P/NVLink, the same two forced onto sockets, and the 2-node EFA logs (healthy, and falling back to TCP)."""

from __future__ import annotations

import math

import pytest

from raytrain_helpers.steps import transport
from raytrain_helpers.worker.transport import bus_bandwidth, summarize, worker_nodes
from tests.unit.nccl.fixtures import NVLINK, SOCKET, fixture, split_by_process

MIB = 2**20


def test_busbw_follows_nccl_tests_all_reduce_factor():
    # nccl-tests AllReduceGetBw: algbw = bytes / 1e9 / s; busbw = algbw * 2(n-1)/n
    assert bus_bandwidth(1_000_000_000, 1.0, 2) == (1.0, 1.0)  # two ranks: the factor is exactly 1
    algbw, busbw = bus_bandwidth(256 * MIB, 0.010, 8)
    assert math.isclose(algbw, 26.8435456) and math.isclose(busbw, algbw * 14 / 8)
    assert bus_bandwidth(4 * MIB, 0.002, 4)[1] == pytest.approx(4 * MIB / 1e9 / 0.002 * 1.5)
    with pytest.raises(ValueError):
        bus_bandwidth(MIB, 0.0, 2)


def test_the_slowest_rank_sets_the_time():
    ranks = [
        dict(rank=0, host="a", node_id="n0", device="cpu", backend="gloo", sum_ok=True, seconds=0.004, nccl_log=""),
        dict(rank=1, host="b", node_id="n1", device="cpu", backend="gloo", sum_ok=True, seconds=0.005, nccl_log=""),
    ]
    rec = summarize(ranks, 4 * MIB)
    assert rec["seconds"] == 0.005 and rec["busbw_gbs"] == pytest.approx(4 * MIB / 1e9 / 0.005)
    assert rec["ok"] and rec["logs"] == {} and "nccl_log" not in rec["ranks"][0]
    assert not summarize([dict(ranks[0], sum_ok=False), ranks[1]], MIB)["ok"]


def test_ranks_go_only_on_alive_worker_nodes_with_a_slot_and_a_gpu_when_asked():
    nodes = [
        dict(Alive=True, Resources={"CPU": 0.0}),  # the head
        dict(Alive=True, Resources={"CPU": 1.0, "train_slot": 1.0}),
        dict(Alive=True, Resources={"CPU": 1.0, "train_slot": 1.0, "GPU": 1.0}),
        dict(Alive=False, Resources={"CPU": 1.0, "train_slot": 1.0, "GPU": 1.0}),
    ]
    assert len(worker_nodes(nodes, use_gpu=False)) == 2 and len(worker_nodes(nodes, use_gpu=True)) == 1


def _result(text: str, backend: str = "nccl", world: int = 2) -> dict:
    logs = {f"rank{i}": t for i, t in enumerate(split_by_process(text).values())}
    return dict(
        ok=True,
        backend=backend,
        world=world,
        size_bytes=256 * MIB,
        seconds=0.01,
        algbw_gbs=26.8,
        busbw_gbs=26.8,
        logs=logs,
        ranks=[],
        use_gpu=True,
    )


def test_healthy_p2p_passes_and_names_the_transport():
    check = transport.judge(_result(NVLINK.read_text()), "p2p")
    assert check.ok and check.verdict == "pass" and check.transport == "P2P/CUMEM", check.message
    assert "busbw 26.80 GB/s over 2 ranks" in check.message


def test_forced_sockets_between_local_gpus_fail_with_the_fix():
    check = transport.judge(_result(SOCKET.read_text()), "p2p")
    assert not check.ok and check.verdict == "fallback" and check.transport == "NET/Socket"
    assert "rank pairs ride NET/Socket over TCP, not p2p: the silent fallback" in check.message
    assert "Fix: the GPUs must reach each other directly: remove NCCL_P2P_DISABLE" in check.message
    forced = transport.judge(_result(SOCKET.read_text()), "p2p", {"NCCL_P2P_DISABLE": "1"})
    assert "Fix: nccl.env sets NCCL_P2P_DISABLE=1, which forces TCP" in forced.message


@pytest.mark.parametrize(
    "name, ok, verdict, transport_label",
    [
        ("synthetic-efa-2x4-healthy.log", True, "pass", "NET/Libfabric/GDRDMA"),
        ("synthetic-efa-2x4-plugin-missing.log", False, "fallback", "NET/Socket"),
        ("synthetic-efa-2x4-tcp-provider.log", False, "fallback", "NET/Libfabric"),
    ],
)
def test_efa_between_nodes_passes_and_the_tcp_fallback_fails_with_the_efa_fix(name, ok, verdict, transport_label):
    check = transport.judge(_result(fixture(name), world=8), "efa")
    assert (check.ok, check.verdict) == (ok, verdict), check.message
    assert transport_label in check.transport
    if not ok:
        assert "the silent fallback" in check.message and "vpc.amazonaws.com/efa" in check.message


def test_cpu_workers_report_gloo_honestly_with_the_bandwidth():
    res = dict(_result("", backend="gloo"), logs={}, busbw_gbs=1.25, use_gpu=False)
    check = transport.judge(res, "none")
    assert check.ok and check.verdict == "n/a" and check.transport == "n/a: CPU (gloo)"
    assert check.message == "busbw 1.25 GB/s over 2 ranks (gloo: no NCCL transport)"
    assert not transport.judge(dict(res, ok=False, error="the all-reduce returned a wrong sum"), "none").ok


def test_a_failed_or_skipped_job_is_said_plainly():
    failed = transport.judge({"ok": False, "error": "no 2 worker nodes with a free ..."}, "efa")
    assert not failed.ok and failed.verdict == "failed" and failed.message.startswith("no 2 worker nodes")
    skipped = transport.judge({"ok": True, "skipped": "1 worker node(s): no pair of nodes to check"}, "efa")
    assert skipped.ok and skipped.verdict == "skipped"
