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
    # chart v0.5.30's values.yaml image.tag, as published in eks-charts' index (docs/pins.md)
    assert espec["containers"][0]["image"] == (
        "602401143452.dkr.ecr.us-west-2.amazonaws.com/eks/aws-efa-k8s-device-plugin:v0.5.20"
    )
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
        ("efa", "raytrain-aws-efa-k8s-device-plugin"),
    ]
    versions = settings().versions
    assert [getattr(versions, field) for _, _, field in plugins.CHARTS] == ["0.20.0", "v0.5.30"]


def test_the_tutorials_efa_plugin_is_named_apart_from_eksctls_and_covers_p6():
    """eksctl creates or replaces kube-system/aws-efa-k8s-device-plugin (selector name=aws-efa-k8s-device-plugin) at
    every `create nodegroup` of an EFA node group: the tutorial's DaemonSet, on both paths, must be another object
    whose selector does not pick eksctl's pods, and the chart's allowlist must have what eksctl's lacks (p6)."""
    _, efa = plugins.render_plugins(settings())
    name = efa["metadata"]["name"]
    assert name == plugins.EFA_DAEMONSET == plugins.EFA_CHART["release"] != plugins.EKSCTL_EFA_DAEMONSET
    # the chart names its DaemonSet after the release when the release name contains the chart name
    assert plugins.EFA_CHART["chart"] in plugins.EFA_CHART["release"]
    assert efa["spec"]["selector"]["matchLabels"] == {"name": name}
    assert efa["spec"]["template"]["metadata"]["labels"]["name"] == name
    assert efa["metadata"]["labels"]["app.kubernetes.io/part-of"] == "raytrain-tutorial"
    allow = efa["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"][0]["matchExpressions"][0]["values"]
    assert len(allow) == len(set(allow)) == 303  # chart v0.5.30's supportedInstanceLabels
    assert {"p5.48xlarge", "p5en.48xlarge", "p6-b200.48xlarge", "p6-b300.48xlarge", "g6.12xlarge"} <= set(allow)
