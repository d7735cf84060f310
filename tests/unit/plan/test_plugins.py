"""plan.plugins: the device plugins' Helm charts pinned, their values selecting the GPU nodes and tolerating their
taints."""

from __future__ import annotations

from pathlib import Path

from raytrain_helpers.plan import plugins
from tests.helpers import aws_settings

REPO = Path(__file__).resolve().parents[3]


settings = aws_settings


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


def test_the_tutorials_efa_release_is_named_apart_from_eksctls():
    """eksctl creates or replaces kube-system/aws-efa-k8s-device-plugin at every `create nodegroup` of an EFA node
    group: the tutorial's release must name its DaemonSet otherwise. The chart names the DaemonSet after the release
    when the release name contains the chart name (aws/eks-charts stable/aws-efa-k8s-device-plugin/templates/
    _helpers.tpl, chart v0.5.30), and selects its pods by ``name: <that name>``, so eksctl's pods are not its own."""
    assert plugins.EFA_CHART["chart"] in plugins.EFA_CHART["release"]
    assert plugins.EFA_DAEMONSET == plugins.EFA_CHART["release"] != plugins.EKSCTL_EFA_DAEMONSET


def test_only_the_device_plugin_hands_out_gpus(tmp_path):
    """NVIDIA_VISIBLE_DEVICES=all in a pod (or its image) must not reach the GPUs: the plugin passes its allocation as
    volume mounts, and every Amazon Linux GPU node's toolkit is set to read only those, before its kubelet starts."""
    import yaml

    from raytrain_helpers.plan import eksctl
    from tests.fakes.helm import RENDER
    from tests.unit.plan.test_eksctl import eksctl_errors

    values = plugins.helm_values(settings())["nvidia"]
    assert values["deviceListStrategy"] == "volume-mounts"
    ds = RENDER["nvidia-device-plugin"]("nvidia-device-plugin", "kube-system", "0.20.0", values)[0]
    ctr = ds["spec"]["template"]["spec"]["containers"][0]
    assert {"name": "DEVICE_LIST_STRATEGY", "value": "volume-mounts"} in ctr["env"]
    for family, want in (("AmazonLinux2023", plugins.NVIDIA_TOOLKIT_COMMAND), ("Bottlerocket", None)):
        s = settings(node_ami_family=family)
        text = eksctl.render_gpu_nodegroup_config(s, gpu_az="us-west-2b", subnet_ids=["subnet-b1"])
        ng = yaml.safe_load(text)["managedNodeGroups"][0]
        assert ng.get("preBootstrapCommands") == ([want] if want else None), family
        assert eksctl_errors(text) == []
    cmd = plugins.NVIDIA_TOOLKIT_COMMAND.split()
    assert cmd[:3] == ["nvidia-ctk", "config", "--in-place"]
    sets = dict(cmd[i + 1].split("=") for i, word in enumerate(cmd) if word == "--set")
    assert sets == {
        "accept-nvidia-visible-devices-envvar-when-unprivileged": "false",
        "accept-nvidia-visible-devices-as-volume-mounts": "true",
    }
