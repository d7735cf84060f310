"""plan.ray_pods: pod sizes from the instance types, as the rendered RayCluster carries them."""

from __future__ import annotations

from pathlib import Path

import pytest

from raytrain_helpers.core import config
from raytrain_helpers.plan import ray_pods, raycluster
from raytrain_helpers.plan.kube_objects import quantity
from tests.helpers import aws_settings

REPO = Path(__file__).resolve().parents[3]


def cores(q) -> float:
    return quantity(q)


def gib(q) -> float:
    return quantity(q) / 2**30


settings = aws_settings


def _head(rc):
    return rc["spec"]["headGroupSpec"]


# --------------------------------------------------------------------------------------------
# Sizes
# --------------------------------------------------------------------------------------------


def test_head_is_sized_for_the_system_node():
    s = settings()
    rc = raycluster.render_raycluster(s)
    head = _head(rc)
    c = head["template"]["spec"]["containers"][0]
    assert head["rayStartParams"]["num-gpus"] == "0"
    assert c["resources"]["requests"] == c["resources"]["limits"]
    node = ray_pods.system_node_shape("m7i.xlarge")
    assert (node.vcpus, node.mem_gib) == (4, 16)
    # room for kube-system and the operator: at least 1 core and 3 GiB stay free
    assert cores(c["resources"]["limits"]["cpu"]) <= node.allocatable_cpu_m / 1000 - 1
    assert gib(c["resources"]["limits"]["memory"]) <= node.allocatable_mem_gib - 3
    bigger = raycluster.render_raycluster(settings(system_node_type="m7i.2xlarge"))
    bc = bigger["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    assert cores(bc["resources"]["limits"]["cpu"]) > cores(c["resources"]["limits"]["cpu"])


def test_too_small_or_unknown_system_node_is_a_clear_error():
    with pytest.raises(config.ConfigError, match=r"system_node_type.*too small.*m7i\.xlarge"):
        raycluster.render_raycluster(settings(system_node_type="m7i.large"))
    with pytest.raises(config.ConfigError, match=r"SYSTEM_NODE_TYPE.*cannot size"):
        raycluster.render_raycluster(settings(system_node_type="g6.xlarge"))


def test_max_pods_follows_the_node_size():
    assert [ray_pods.max_pods(v) for v in (2, 8, 16, 48, 192)] == [29, 58, 110, 250, 250]
