"""The device plugins that make GPUs and EFA schedulable on the GPU nodes: pinned images and chart versions,
the EFA plugin's instance-type allowlist, and the values both install paths (Helm, rendered manifests) use.
"""

from __future__ import annotations

from typing import Any

from ..core.config import ConfigError, Settings
from .render import render_objects

#: Where both plugins run.
NAMESPACE = "kube-system"
NVIDIA_IMAGE = "nvcr.io/nvidia/k8s-device-plugin:v{version}"
NVIDIA_CHART = dict(
    release="nvidia-device-plugin", chart="nvidia-device-plugin", repo="https://nvidia.github.io/k8s-device-plugin"
)
EFA_CHART = dict(
    release="aws-efa-k8s-device-plugin", chart="aws-efa-k8s-device-plugin", repo="https://aws.github.io/eks-charts"
)
EFA_IMAGE_REPO = "602401143452.dkr.ecr.us-west-2.amazonaws.com/eks/aws-efa-k8s-device-plugin"
#: eks-charts aws-efa-k8s-device-plugin chart version -> the image tag that chart deploys (its values.yaml).
EFA_IMAGE_TAGS = {
    "v0.5.29": "v0.5.20",
    "v0.5.31": "v0.5.21-eksbuild.9",
    "v0.5.32": "v0.5.21-eksbuild.13",
}
#: The chart's supportedInstanceLabels (node.kubernetes.io/instance-type) without the SageMaker ``ml.*``
#: entries: the plugin's DaemonSet runs only on these instance types.
EFA_ALLOWLIST = [
    "m5dn.24xlarge",
    "m5dn.metal",
    "m5n.24xlarge",
    "m5n.metal",
    "m5zn.12xlarge",
    "m5zn.metal",
    "m6a.48xlarge",
    "m6a.metal",
    "m6i.32xlarge",
    "m6i.metal",
    "m6id.32xlarge",
    "m6id.metal",
    "m6idn.32xlarge",
    "m6idn.metal",
    "m6in.32xlarge",
    "m6in.metal",
    "m7a.48xlarge",
    "m7a.metal-48xl",
    "m7g.16xlarge",
    "m7g.metal",
    "m7gd.16xlarge",
    "m7i.48xlarge",
    "m7i.metal-48xl",
    "c5n.9xlarge",
    "c5n.18xlarge",
    "c5n.metal",
    "c6a.48xlarge",
    "c6a.metal",
    "c6gn.16xlarge",
    "c6i.32xlarge",
    "c6i.metal",
    "c6id.32xlarge",
    "c6id.metal",
    "c6in.32xlarge",
    "c6in.metal",
    "c7a.48xlarge",
    "c7a.metal-48xl",
    "c7g.16xlarge",
    "c7g.metal",
    "c7gd.16xlarge",
    "c7gn.16xlarge",
    "c7i.48xlarge",
    "c7i.metal-48xl",
    "r5dn.24xlarge",
    "r5dn.metal",
    "r5n.24xlarge",
    "r5n.metal",
    "r6a.48xlarge",
    "r6a.metal",
    "r6i.32xlarge",
    "r6i.metal",
    "r6idn.32xlarge",
    "r6idn.metal",
    "r6in.32xlarge",
    "r6in.metal",
    "r6id.32xlarge",
    "r6id.metal",
    "r7a.48xlarge",
    "r7a.metal-48xl",
    "r7g.16xlarge",
    "r7g.metal",
    "r7gd.16xlarge",
    "r7i.48xlarge",
    "r7i.metal-48xl",
    "r7iz.32xlarge",
    "r7iz.metal-32xl",
    "x2idn.32xlarge",
    "x2idn.metal",
    "x2iedn.32xlarge",
    "x2iedn.metal",
    "x2iezn.12xlarge",
    "x2iezn.metal",
    "i3en.12xlarge",
    "i3en.24xlarge",
    "i3en.metal",
    "i4g.16xlarge",
    "i4i.32xlarge",
    "i4i.metal",
    "im4gn.16xlarge",
    "dl1.24xlarge",
    "dl2q.24xlarge",
    "g4dn.8xlarge",
    "g4dn.12xlarge",
    "g4dn.16xlarge",
    "g4dn.metal",
    "g5.8xlarge",
    "g5.12xlarge",
    "g5.16xlarge",
    "g5.24xlarge",
    "g5.48xlarge",
    "g6.8xlarge",
    "g6.12xlarge",
    "g6.16xlarge",
    "g6.24xlarge",
    "g6.48xlarge",
    "g6e.8xlarge",
    "g6e.12xlarge",
    "g6e.16xlarge",
    "g6e.24xlarge",
    "g6e.48xlarge",
    "gr6.8xlarge",
    "inf1.24xlarge",
    "p3dn.24xlarge",
    "p4d.24xlarge",
    "p4de.24xlarge",
    "p5.48xlarge",
    "p5e.48xlarge",
    "p5en.48xlarge",
    "trn1.32xlarge",
    "trn1n.32xlarge",
    "trn2.48xlarge",
    "vt1.24xlarge",
    "hpc6a.48xlarge",
    "hpc6id.32xlarge",
    "hpc7a.12xlarge",
    "hpc7a.24xlarge",
    "hpc7a.48xlarge",
    "hpc7a.96xlarge",
    "hpc7g.4xlarge",
    "hpc7g.8xlarge",
    "hpc7g.16xlarge",
]
GPU_TOLERATIONS = [
    {"key": "CriticalAddonsOnly", "operator": "Exists"},
    {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "aws.amazon.com/efa", "operator": "Exists", "effect": "NoSchedule"},
]


def plugin_values(settings: Settings) -> dict[str, Any]:
    """Template values (as ``plugins``): images and the EFA allowlist."""
    versions = settings.versions
    tag = EFA_IMAGE_TAGS.get(versions.efa_device_plugin_version)
    if tag is None:
        raise ConfigError(
            f"versions.efa_device_plugin_version (EFA_DEVICE_PLUGIN_VERSION) = "
            f"{versions.efa_device_plugin_version!r}: the image tag that chart version deploys is not known here. "
            f"Fix: use one of {', '.join(EFA_IMAGE_TAGS)}, or add it to raytrain_helpers.plan.plugins.EFA_IMAGE_TAGS "
            f"(from the chart's values.yaml image.tag)"
        )
    return dict(
        nvidia_image=NVIDIA_IMAGE.format(version=versions.nvidia_device_plugin_version),
        efa_image=f"{EFA_IMAGE_REPO}:{tag}",
        efa_allowlist=list(EFA_ALLOWLIST),
    )


def render_plugins(settings: Settings) -> list[dict[str, Any]]:
    """The NVIDIA and the EFA device plugin DaemonSets, in that order."""
    values = plugin_values(settings)
    return render_objects("nvidia-device-plugin.yaml.j2", settings, plugins=values) + render_objects(
        "efa-device-plugin.yaml.j2", settings, plugins=values
    )


def helm_values(settings: Settings) -> dict[str, dict[str, Any]]:
    """Values for the two charts: role=gpu-worker nodes, both taints tolerated. ``affinity: None`` removes
    the NVIDIA chart's default affinity on NFD labels (nvidia.com/gpu.present...) that EKS nodes lack."""
    return {
        "nvidia": {"nodeSelector": {"role": "gpu-worker"}, "affinity": None, "tolerations": GPU_TOLERATIONS},
        "efa": {"nodeSelector": {"role": "gpu-worker"}, "tolerations": GPU_TOLERATIONS[1:]},
    }


#: (key, chart, the settings' version field) of both plugins, in install order.
CHARTS = (("nvidia", NVIDIA_CHART, "nvidia_device_plugin_version"), ("efa", EFA_CHART, "efa_device_plugin_version"))


__all__ = [
    "CHARTS",
    "EFA_ALLOWLIST",
    "EFA_CHART",
    "EFA_IMAGE_REPO",
    "EFA_IMAGE_TAGS",
    "GPU_TOLERATIONS",
    "NAMESPACE",
    "NVIDIA_CHART",
    "NVIDIA_IMAGE",
    "helm_values",
    "plugin_values",
    "render_plugins",
]
