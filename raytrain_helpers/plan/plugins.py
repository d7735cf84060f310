"""The device plugins that make GPUs and EFA schedulable on the GPU nodes: pinned images and chart versions,
the EFA plugin's instance-type allowlist, and the values both install paths (Helm, rendered manifests) use.
"""

from __future__ import annotations

from typing import Any

from ..core.settings import Settings
from ..core.validation import ConfigError
from .render import render_objects

#: Where both plugins run.
NAMESPACE = "kube-system"
NVIDIA_IMAGE = "nvcr.io/nvidia/k8s-device-plugin:v{version}"
NVIDIA_CHART = dict(
    release="nvidia-device-plugin", chart="nvidia-device-plugin", repo="https://nvidia.github.io/k8s-device-plugin"
)
#: The tutorial's EFA device plugin: a Helm release (or, without helm, the rendered DaemonSet) named apart from the
#: copy eksctl installs, so that eksctl's ``create nodegroup`` (which creates or replaces ITS DaemonSet by name) never
#: overwrites it and Helm never meets an object it does not own. The chart names the DaemonSet after the release
#: when the release name contains the chart name (its ``_helpers.tpl`` fullname), so both paths give one name.
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
EFA_IMAGE_REPO = "602401143452.dkr.ecr.us-west-2.amazonaws.com/eks/aws-efa-k8s-device-plugin"
#: eks-charts aws-efa-k8s-device-plugin chart version -> the image tag that chart deploys (its values.yaml
#: ``image.tag``), for the versions in eks-charts' published index (gh-pages index.yaml at c7f9ea56, "Publish stable
#: charts v0.0.242", 2026-08-03, the newest that could be read on 2026-12-04; the .tgz of each read). Chart versions
#: after v0.5.30 (eks-charts pull requests 1363 and 1366 of 2026-08/09 bump the image to v0.5.21-eksbuild.9 and
#: -eksbuild.13) are not in that index: add them here once their published chart is read. docs/pins.md.
EFA_IMAGE_TAGS = {
    "v0.5.29": "v0.5.20",
    "v0.5.30": "v0.5.20",
}
#: The instance types the chart's DaemonSet runs on (supportedInstanceLabels, node.kubernetes.io/instance-type) of
#: chart v0.5.30's values.yaml as published (aws-efa-k8s-device-plugin-v0.5.30.tgz, digest 43b3d666...): 303 types,
#: p5/p5en/p6-b200/p6-b300/g6/g7 included. The rendered manifest uses it; Helm uses the chart's own.
EFA_ALLOWLIST = """
    c5n.18xlarge c5n.9xlarge c5n.metal c6a.48xlarge c6a.metal c6gn.16xlarge c6i.32xlarge c6i.metal c6id.32xlarge
    c6id.metal c6in.32xlarge c6in.metal c7a.48xlarge c7a.metal-48xl c7g.16xlarge c7g.metal c7gd.16xlarge
    c7gd.metal c7gn.16xlarge c7gn.metal c7i.48xlarge c7i.metal-48xl c8a.48xlarge c8a.metal-48xl c8g.24xlarge
    c8g.48xlarge c8g.metal-24xl c8g.metal-48xl c8gb.16xlarge c8gb.24xlarge c8gb.48xlarge c8gb.metal-24xl
    c8gb.metal-48xl c8gd.24xlarge c8gd.48xlarge c8gd.metal-24xl c8gd.metal-48xl c8gn.16xlarge c8gn.24xlarge
    c8gn.48xlarge c8gn.metal-24xl c8gn.metal-48xl c8i.48xlarge c8i.96xlarge c8i.metal-48xl c8i.metal-96xl
    c8ib.48xlarge c8ib.96xlarge c8ib.metal-48xl c8ib.metal-96xl c8id.48xlarge c8id.96xlarge c8id.metal-48xl
    c8id.metal-96xl c8in.48xlarge c8in.96xlarge c8in.metal-48xl c8in.metal-96xl c9g.48xlarge c9g.metal-48xl
    c9gd.48xlarge c9gd.metal-48xl dl2q.24xlarge f2.48xlarge g4dn.12xlarge g4dn.16xlarge g4dn.8xlarge g4dn.metal
    g5.12xlarge g5.16xlarge g5.24xlarge g5.48xlarge g5.8xlarge g6.12xlarge g6.16xlarge g6.24xlarge g6.48xlarge
    g6.8xlarge g6e.12xlarge g6e.16xlarge g6e.24xlarge g6e.48xlarge g6e.8xlarge g7.12xlarge g7.24xlarge
    g7.48xlarge g7.8xlarge g7e.12xlarge g7e.24xlarge g7e.48xlarge g7e.8xlarge gr6.8xlarge hpc6a.48xlarge
    hpc6id.32xlarge hpc7a.12xlarge hpc7a.24xlarge hpc7a.48xlarge hpc7a.96xlarge hpc7g.16xlarge hpc7g.4xlarge
    hpc7g.8xlarge hpc8a.96xlarge i3en.12xlarge i3en.24xlarge i3en.metal i4g.16xlarge i4i.32xlarge i4i.metal
    i7i.24xlarge i7i.48xlarge i7i.metal-48xl i7ie.48xlarge i7ie.metal-48xl i8g.48xlarge i8g.metal-48xl
    i8ge.48xlarge i8ge.metal-48xl im4gn.16xlarge inf1.24xlarge m5dn.24xlarge m5dn.metal m5n.24xlarge m5n.metal
    m5zn.12xlarge m5zn.metal m6a.48xlarge m6a.metal m6i.32xlarge m6i.metal m6id.32xlarge m6id.metal
    m6idn.32xlarge m6idn.metal m6in.32xlarge m6in.metal m7a.48xlarge m7a.metal-48xl m7g.16xlarge m7g.metal
    m7gd.16xlarge m7gd.metal m7i.48xlarge m7i.metal-48xl m8a.48xlarge m8a.metal-48xl m8azn.24xlarge
    m8azn.metal-24xl m8g.24xlarge m8g.48xlarge m8g.metal-24xl m8g.metal-48xl m8gb.16xlarge m8gb.24xlarge
    m8gb.48xlarge m8gb.metal-24xl m8gb.metal-48xl m8gd.24xlarge m8gd.48xlarge m8gd.metal-24xl m8gd.metal-48xl
    m8gn.16xlarge m8gn.24xlarge m8gn.48xlarge m8gn.metal-24xl m8gn.metal-48xl m8i.48xlarge m8i.96xlarge
    m8i.metal-48xl m8i.metal-96xl m8ib.48xlarge m8ib.96xlarge m8ib.metal-48xl m8ib.metal-96xl m8id.48xlarge
    m8id.96xlarge m8id.metal-48xl m8id.metal-96xl m8idb.48xlarge m8idb.96xlarge m8idb.metal-48xl
    m8idb.metal-96xl m8idn.48xlarge m8idn.96xlarge m8idn.metal-48xl m8idn.metal-96xl m8in.48xlarge m8in.96xlarge
    m8in.metal-48xl m8in.metal-96xl m9g.48xlarge m9g.metal-48xl m9gd.48xlarge m9gd.metal-48xl p3dn.24xlarge
    p4d.24xlarge p4de.24xlarge p5.48xlarge p5.4xlarge p5e.48xlarge p5en.48xlarge p6-b200.48xlarge
    p6-b300.48xlarge p6e-gb200.36xlarge p6e-gb300.36xlarge r5dn.24xlarge r5dn.metal r5n.24xlarge r5n.metal
    r6a.48xlarge r6a.metal r6i.32xlarge r6i.metal r6id.32xlarge r6id.metal r6idn.32xlarge r6idn.metal
    r6in.32xlarge r6in.metal r7a.48xlarge r7a.metal-48xl r7g.16xlarge r7g.metal r7gd.16xlarge r7gd.metal
    r7i.48xlarge r7i.metal-48xl r7iz.32xlarge r7iz.metal-32xl r8a.48xlarge r8a.metal-48xl r8g.24xlarge
    r8g.48xlarge r8g.metal-24xl r8g.metal-48xl r8gb.16xlarge r8gb.24xlarge r8gb.48xlarge r8gb.metal-24xl
    r8gb.metal-48xl r8gd.24xlarge r8gd.48xlarge r8gd.metal-24xl r8gd.metal-48xl r8gn.16xlarge r8gn.24xlarge
    r8gn.48xlarge r8gn.metal-24xl r8gn.metal-48xl r8i.48xlarge r8i.96xlarge r8i.metal-48xl r8i.metal-96xl
    r8ib.48xlarge r8ib.96xlarge r8ib.metal-48xl r8ib.metal-96xl r8id.48xlarge r8id.96xlarge r8id.metal-48xl
    r8id.metal-96xl r8idb.48xlarge r8idb.96xlarge r8idb.metal-48xl r8idb.metal-96xl r8idn.48xlarge
    r8idn.96xlarge r8idn.metal-48xl r8idn.metal-96xl r8in.48xlarge r8in.96xlarge r8in.metal-48xl r8in.metal-96xl
    trn1.32xlarge trn1n.32xlarge trn2-ac.24xlarge trn2.3xlarge trn2.48xlarge trn2u-ac.24xlarge trn2u.48xlarge
    u7i-12tb.224xlarge u7i-6tb.112xlarge u7i-8tb.112xlarge u7in-16tb.224xlarge u7in-24tb.224xlarge
    u7in-32tb.224xlarge vt1.24xlarge x2idn.32xlarge x2idn.metal x2iedn.32xlarge x2iedn.metal x2iezn.12xlarge
    x2iezn.metal x8aedz.24xlarge x8aedz.metal-24xl x8g.24xlarge x8g.48xlarge x8g.metal-24xl x8g.metal-48xl
    x8i.48xlarge x8i.64xlarge x8i.96xlarge x8i.metal-48xl x8i.metal-96xl
""".split()
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
        efa_daemonset=EFA_DAEMONSET,
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
    "EFA_DAEMONSET",
    "EFA_IMAGE_REPO",
    "EFA_IMAGE_TAGS",
    "EKSCTL_EFA_DAEMONSET",
    "EKSCTL_EFA_IMAGE_TAG",
    "GPU_TOLERATIONS",
    "NAMESPACE",
    "NVIDIA_CHART",
    "NVIDIA_IMAGE",
    "helm_values",
    "plugin_values",
    "render_plugins",
]
