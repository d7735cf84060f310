"""targets.local.standin: the local raylets standing in for the device plugins (03) and the RayCluster (04)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from raytrain_helpers.core import config
from raytrain_helpers.targets import local
from raytrain_helpers.targets.local import standin as local_standin
from tests.helpers import fake_local_status, ray_node

REPO = Path(__file__).resolve().parents[4]


def settings(**params):
    base = dict(target="local")
    base.update(params)
    return config.load(REPO / "env.yaml", environ={}, check_installed_ray=False, **base)


def test_local_nodes_is_the_one_view_of_the_raylets(monkeypatch):
    info = fake_local_status(
        monkeypatch,
        True,
        [
            ray_node("head", "head", 0, 0, 0),
            ray_node("worker-0", "worker", 2, 2, 2),
            dict(ray_node("", "worker", 1, 0, 1)),
        ],
    )
    info.nodes[2]["alive"] = False
    nodes = local_standin.local_nodes(info)
    assert [(n.name, n.role, n.alive, n.gpus, n.train_slots) for n in nodes] == [
        ("head", "head", True, 0, 0),
        ("worker-0", "worker", True, 2, 2),
        ("", "worker", False, 0, 1),
    ]
    assert [r["state"] for r in local_standin.device_rows(nodes)] == ["alive", "alive", "DEAD"]
    assert local_standin.standin_problems(False, nodes) == [local_standin.NOT_RUNNING]
    assert local_standin.standin_problems(True, nodes) == []
    assert local_standin.standin_problems(True, nodes[1:]) == [
        "the head raylet offers GPUs or train slots; training could land on it"
    ]


# --------------------------------------------------------------------------------------------
# 03: devices
# --------------------------------------------------------------------------------------------


def test_local_table_of_devices_and_backends(monkeypatch, capsys):
    fake_local_status(
        monkeypatch,
        True,
        [
            ray_node("head", "head", 0, 0, 0),
            ray_node("worker-0", "worker", 2, 2, 2),
            ray_node("worker-1", "worker", 1, 0, 1),
        ],
    )
    r = local_standin.devices(settings())
    assert r.ok
    by = {n["node"]: n for n in r.nodes}
    assert by["head"]["backend"] == "-" and by["worker-0"]["backend"] == "NCCL" and by["worker-1"]["backend"] == "gloo"
    assert by["worker-0"]["train_slots"] == 2
    r.show()
    out = capsys.readouterr().out
    assert "worker-0" in out and "NCCL" in out and "gloo" in out


def test_local_without_train_slots_is_not_ok(monkeypatch):
    fake_local_status(monkeypatch, True, [ray_node("head", "head", 0, 0, 0), ray_node("worker-0", "worker", 1, 0, 0)])
    r = local_standin.devices(settings())
    assert not r.ok and "train_slot" in r.message
    fake_local_status(monkeypatch, False)
    r = local_standin.devices(settings())
    assert not r.ok and "notebook 02" in r.message
    assert local_standin.devices_status(settings()).action == "status"
    assert local_standin.devices_teardown(settings()).ok


# --------------------------------------------------------------------------------------------
# 04: the RayCluster
# --------------------------------------------------------------------------------------------


def test_local_step_maps_the_manifest_to_raylets(monkeypatch, capsys):
    fake_local_status(
        monkeypatch,
        True,
        [
            ray_node("head", "head", 0, 0, 0),
            ray_node("worker-0", "worker", 1, 0, 1),
            ray_node("worker-1", "worker", 1, 0, 1),
        ],
    )
    s = settings()
    r = local_standin.raycluster(s)
    assert r.ok, r.problems
    parts = {row[0].split(":")[0].split(".")[0]: row for row in r.mapping}
    assert parts["headGroupSpec"][2] == "CPU 0, GPU 0"
    assert "2 alive" in next(row[2] for row in r.mapping if row[0].startswith("workerGroupSpecs"))
    assert next(row[2] for row in r.mapping if "train_slot" in row[0]) == "1, 1"
    assert r.mapping[-1] == (
        "head Service (ClusterIP :8265) + port-forward",
        "dashboard/jobs on 127.0.0.1",
        "http://127.0.0.1:8266",
    )
    man = yaml.safe_load(r.manifest_yaml)
    assert man["spec"]["headGroupSpec"]["rayStartParams"]["num-gpus"] == "0"
    assert "dshm (memory)" in man["spec"]["workerGroupSpecs"][0]["volumes"]
    r.show()
    out = capsys.readouterr().out
    assert "head raylet" in out and "worker raylets" in out and "num-gpus" in out
    r.show(manifest=False)  # a notebook that showed the manifest already does not print it twice
    out = capsys.readouterr().out
    assert "head raylet" in out and "num-gpus: '0'" not in out and "as shown above" in out
    with local.job_server(s) as url:
        assert url == "http://127.0.0.1:8266"
    assert local_standin.raycluster_teardown(s).ok
    status = local_standin.raycluster_status(s)
    assert status.ok and [p["phase"] for p in status.pods] == ["ALIVE"] * 3


def test_local_step_flags_a_head_with_gpus_or_no_cluster(monkeypatch):
    s = settings()
    fake_local_status(monkeypatch, True, [ray_node("head", "head", 1, 1, 0), ray_node("worker-0", "worker", 1, 0, 1)])
    assert not local_standin.raycluster(s).ok
    fake_local_status(monkeypatch, False)
    r = local_standin.raycluster(s)
    assert not r.ok and any("notebook 02" in p for p in r.problems)
    assert not local_standin.raycluster_status(s).ok
    with pytest.raises(RuntimeError, match="not running"):
        with local.job_server(s):
            pass
