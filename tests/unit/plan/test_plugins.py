"""plan.plugins: the device plugins pinned, selected onto the GPU nodes, tolerating their taints."""

from __future__ import annotations

from pathlib import Path

import pytest

from raytrain_helpers.core import config
from raytrain_helpers.plan import plugins

REPO = Path(__file__).resolve().parents[3]


def settings(**params):
    base = dict(target="aws")
    base.update(params)
    return config.load(REPO / "env.yaml", environ={}, check_installed_ray=False, **base)


def test_plugins_are_pinned_and_selected_onto_gpu_nodes():
    s = settings()
    nv, efa = plugins.render_plugins(s)
    nspec, espec = nv["spec"]["template"]["spec"], efa["spec"]["template"]["spec"]
    assert nspec["containers"][0]["image"] == "nvcr.io/nvidia/k8s-device-plugin:v0.20.0"
    assert espec["containers"][0]["image"].endswith("/eks/aws-efa-k8s-device-plugin:v0.5.21-eksbuild.13")
    for spec in (nspec, espec):
        assert spec["nodeSelector"] == {"role": "gpu-worker"}
        keys = {t["key"] for t in spec["tolerations"] if t.get("effect") == "NoSchedule"}
        assert {"nvidia.com/gpu", "aws.amazon.com/efa"} <= keys
    terms = espec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    allow = terms[0]["matchExpressions"][0]["values"]
    assert set(config.INSTANCE_TYPES) <= set(allow)  # every instance type the tutorial offers can get EFA
    with pytest.raises(config.ConfigError, match="EFA_DEVICE_PLUGIN_VERSION"):
        plugins.render_plugins(settings(efa_device_plugin_version="v0.4.4"))


def test_helm_values_select_the_gpu_nodes_and_drop_the_nfd_affinity():
    values = plugins.helm_values(settings())
    assert values["nvidia"]["nodeSelector"] == values["efa"]["nodeSelector"] == {"role": "gpu-worker"}
    assert "affinity" in values["nvidia"] and values["nvidia"]["affinity"] is None
    assert {t["key"] for t in values["efa"]["tolerations"]} == {"nvidia.com/gpu", "aws.amazon.com/efa"}
    assert [(key, chart["release"]) for key, chart, _ in plugins.CHARTS] == [
        ("nvidia", "nvidia-device-plugin"),
        ("efa", "aws-efa-k8s-device-plugin"),
    ]
    versions = settings().versions
    assert [getattr(versions, field) for _, _, field in plugins.CHARTS] == ["0.20.0", "v0.5.32"]
