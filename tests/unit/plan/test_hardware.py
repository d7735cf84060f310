"""The hardware's numbers, parsed: a Ray node's metrics page and the EFA driver's counters, and the EFA verdict."""

from __future__ import annotations

import pytest

from raytrain_helpers.plan import hardware

#: A Ray 2.58 node's page as its metrics agent serves it (Prometheus text 0.0.4; names and tags of
#: ray/dashboard/modules/reporter/reporter_agent.py and ray/dashboard/consts.py), two GPUs, an old session's line.
_NODE = 'IsHeadNode="false",RayNodeType="worker",SessionName="{s}",Version="2.58.0",ip="10.0.1.7"'
_GPU = 'GpuDeviceName="NVIDIA H100 80GB HBM3",GpuIndex="{i}",' + _NODE
PAGE = "\n".join(
    [
        "# HELP ray_node_cpu_utilization Total CPU usage on a ray node",
        "# TYPE ray_node_cpu_utilization gauge",
        "ray_node_cpu_utilization{" + _NODE.format(s="session_new") + "} 62.5",
        "ray_node_cpu_utilization{" + _NODE.format(s="session_old") + "} 1.0",
        "ray_node_mem_used{" + _NODE.format(s="session_new") + "} 8.0e+09",
        "ray_node_gpus_utilization{" + _GPU.format(i=0, s="session_new") + "} 90.0",
        "ray_node_gpus_utilization{" + _GPU.format(i=1, s="session_new") + "} 70.0",
        "ray_node_gram_used{" + _GPU.format(i=0, s="session_new") + "} 4.0e+10",
        "ray_node_gram_used{" + _GPU.format(i=1, s="session_new") + "} 2.0e+10",
        "ray_node_network_send_speed{" + _NODE.format(s="session_new") + "} 1048576.0",
        'ray_other_metric{x="y"} 5',
        "not a sample line",
    ]
)


def test_a_node_page_gives_its_figures_per_node_for_its_own_session():
    f = hardware.node_figures(PAGE, session="session_new")
    assert f["cpu_percent"] == 62.5, "the old session's line is left out"
    assert f["mem_used_bytes"] == 8e9 and f["gpu_mem_used_bytes"] == 6e10, "GPU memory summed over the GPUs"
    assert f["gpu_percent"] == 80.0 and f["gpus"] == 2, "GPU utilisation averaged over the GPUs"
    assert f["net_send_bytes_per_s"] == 1048576.0 and f["head"] is False and f["ip"] == "10.0.1.7"


def test_the_parser_keeps_labels_with_escapes_and_skips_what_is_not_a_sample():
    got = hardware.parse_prometheus('a_b{l="x\\"y",m="2"} 3\n# c\nbad line here x\nz 1e3 1700000000\n')
    assert got == [("a_b", {"l": 'x"y', "m": "2"}, 3.0), ("z", {}, 1000.0)]


LISTING = """/sys/class/infiniband/rdmap16s27/ports/1/hw_counters/tx_bytes 1000
/sys/class/infiniband/rdmap16s27/ports/1/hw_counters/rx_bytes 2000
/sys/class/infiniband/rdmap16s27/ports/1/hw_counters/rdma_write_bytes 3000
/sys/class/infiniband/rdmap16s27/ports/1/hw_counters/tx_pkts 99
/sys/class/infiniband/rdmap32s27/ports/1/hw_counters/rdma_read_bytes 4000
/sys/class/infiniband/rdmap32s27/ports/1/hw_counters/lifespan cat: read error
"""


def test_the_efa_listing_parses_and_only_byte_counters_count():
    c = hardware.parse_efa_counters(LISTING)
    assert c["rdmap16s27/1/tx_pkts"] == 99 and "rdmap32s27/1/lifespan" not in c
    assert hardware.efa_bytes(c) == 10000, "packets are not bytes"


def _node(moved: int) -> dict[str, int]:
    return {"rdmap16s27/1/tx_bytes": moved // 2, "rdmap16s27/1/rdma_write_bytes": moved - moved // 2}


@pytest.mark.parametrize(
    ("expect", "moved", "ok"),
    [
        ("efa", [2**30, 2**30], True),
        ("efa", [2**30, 1024], False),
        ("socket", [4096, 0], True),
        ("socket", [2**30, 0], False),
        ("p2p", [0, 0], None),
    ],
)
def test_the_efa_verdict(expect, moved, ok):
    before = {f"w{i}": _node(0) for i in range(2)}
    after = {f"w{i}": _node(m) for i, m in enumerate(moved)}
    v = hardware.efa_verdict(hardware.efa_moved(before, after), expect)
    assert v.ok is ok, v.message
    assert v.moved == {"w0": moved[0], "w1": moved[1]}


def test_a_node_read_once_or_reset_is_not_judged_as_zero():
    moved = hardware.efa_moved({"w0": _node(10), "w1": _node(2**30)}, {"w0": _node(2**30), "w1": _node(5)})
    assert moved == {"w0": 2**30 - 10, "w1": None}, "counters that went down: reset, no difference"
    v = hardware.efa_verdict(moved, "efa")
    assert v.ok is False and "w1" in v.message
    assert hardware.efa_verdict({}, "efa").ok is None
