"""The device plugins that make GPUs and EFA schedulable on the GPU nodes: the publishers' Helm charts (NVIDIA's
``nvidia-device-plugin``, eks-charts' ``aws-efa-k8s-device-plugin``) at the pinned versions (docs/pins.md) and the
values step 03 installs them with. Images and the EFA plugin's instance-type allowlist are the charts' own.
"""

from __future__ import annotations

from typing import Any

from ..core.settings import Settings

#: Where both plugins run.
NAMESPACE = "kube-system"
NVIDIA_CHART = dict(
    release="nvidia-device-plugin", chart="nvidia-device-plugin", repo="https://nvidia.github.io/k8s-device-plugin"
)
#: The tutorial's EFA device plugin: a Helm release named apart from the copy eksctl installs, so that eksctl's
#: ``create nodegroup`` (which creates or replaces ITS DaemonSet by name) never overwrites it and Helm never meets an
#: object it does not own. The chart names the DaemonSet after the release when the release name contains the chart
#: name (aws/eks-charts stable/aws-efa-k8s-device-plugin/templates/_helpers.tpl ``fullname``, chart v0.5.30).
EFA_CHART = dict(
    release="raytrain-aws-efa-k8s-device-plugin",
    chart="aws-efa-k8s-device-plugin",
    repo="https://aws.github.io/eks-charts",
)
EFA_DAEMONSET = EFA_CHART["release"]
#: What eksctl creates with ``efaEnabled: true`` (checked 2026-12-04 in eksctl-io/eksctl at 99984adb, v0.230.0+5:
#: pkg/eks/tasks.go ``ClusterTasksForNodeGroups`` appends the EFA device plugin task whenever a node group of the
#: config has efaEnabled, on ``create cluster`` and on every ``create nodegroup``, with no flag to skip it;
#: pkg/addons/device_plugin.go applies pkg/addons/assets/efa-device-plugin.yaml with ``CreateOrReplace`` (an HTTP
#: PUT of the whole object when it exists): DaemonSet kube-system/aws-efa-k8s-device-plugin, no metadata labels,
#: pod label ``name: aws-efa-k8s-device-plugin``, image ``<EKS account>.dkr.ecr.<region>.<suffix>/eks/
#: aws-efa-k8s-device-plugin:v0.5.4``, an instance-type allowlist without p6 or g7 types;
#: https://github.com/eksctl-io/eksctl/issues/8089).
EKSCTL_EFA_DAEMONSET = "aws-efa-k8s-device-plugin"
EKSCTL_EFA_IMAGE_TAG = "v0.5.4"
GPU_TOLERATIONS = [
    {"key": "CriticalAddonsOnly", "operator": "Exists"},
    {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "aws.amazon.com/efa", "operator": "Exists", "effect": "NoSchedule"},
]


def helm_values(settings: Settings) -> dict[str, dict[str, Any]]:
    """Values for the two charts: role=gpu-worker nodes, both taints tolerated. ``affinity: None`` removes
    the NVIDIA chart's default affinity on NFD labels (nvidia.com/gpu.present...): 02's node group sets that one
    itself, but placement then rests on the ``role`` label alone, on any cluster."""
    return {
        "nvidia": {"nodeSelector": {"role": "gpu-worker"}, "affinity": None, "tolerations": GPU_TOLERATIONS},
        "efa": {"nodeSelector": {"role": "gpu-worker"}, "tolerations": GPU_TOLERATIONS[1:]},
    }


#: (key, chart, the settings' version field) of both plugins, in install order.
CHARTS = (("nvidia", NVIDIA_CHART, "nvidia_device_plugin_version"), ("efa", EFA_CHART, "efa_device_plugin_version"))


__all__ = [
    "CHARTS",
    "EFA_CHART",
    "EFA_DAEMONSET",
    "EKSCTL_EFA_DAEMONSET",
    "EKSCTL_EFA_IMAGE_TAG",
    "GPU_TOLERATIONS",
    "NAMESPACE",
    "NVIDIA_CHART",
    "helm_values",
]
