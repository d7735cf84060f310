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


#: Only the device plugin hands out GPUs. With the plugin's default ``envvar`` strategy the NVIDIA container runtime
#: gives a container the GPUs its ``NVIDIA_VISIBLE_DEVICES`` names, and any pod may set that variable (or run an
#: image whose ENV sets it, as CUDA base images do): ``all`` on a GPU node means every GPU of the node, outside any
#: quota. With ``volume-mounts`` the plugin passes a GPU request as mounts of ``/dev/null`` under
#: ``/var/run/nvidia-container-devices`` (NVIDIA/k8s-device-plugin v0.20.0 README, ``DEVICE_LIST_STRATEGY``; chart
#: value ``deviceListStrategy``, which also gives the plugin SYS_ADMIN), and the node's toolkit, set by
#: :data:`NVIDIA_TOOLKIT_COMMAND`, reads only those: the variable is ignored in an unprivileged container and a mount
#: whose source is not ``/dev/null`` is ignored (NVIDIA/nvidia-container-toolkit, internal/config/image/
#: cuda_image.go: ``acceptEnvvarUnprivileged``, "Only consider mounts who's host volume is /dev/null"). Pod Security
#: ``baseline`` in attendee namespaces refuses privileged containers and hostPath volumes, so no pod there can
#: get around either.
DEVICE_LIST_STRATEGY = "volume-mounts"
#: Run on each GPU node before the kubelet starts (eksctl ``preBootstrapCommands``: on AmazonLinux2023 a shell part of
#: the user data, run by cloud-init, and nodeadm-run.service starts the kubelet After=cloud-final.service;
#: awslabs/amazon-eks-ami templates/al2023/runtime/rootfs/etc/systemd/system/nodeadm-run.service). ``nvidia-ctk
#: config --in-place --set KEY=VALUE`` edits /etc/nvidia-container-runtime/config.toml (the toolkit's
#: GetConfigFilePath), the file the EKS AL2023 NVIDIA AMI's dnf-installed toolkit reads; its defaults are
#: envvar-when-unprivileged true and as-volume-mounts false (api/config/v1/toml.go). Should the command fail, the
#: node keeps those defaults and a worker gets no GPU from the plugin's mounts: training fails, no GPU leaks.
NVIDIA_TOOLKIT_COMMAND = (
    "nvidia-ctk config --in-place --set accept-nvidia-visible-devices-envvar-when-unprivileged=false "
    "--set accept-nvidia-visible-devices-as-volume-mounts=true"
)


def toolkit_command(settings: Settings) -> str:
    """:data:`NVIDIA_TOOLKIT_COMMAND` for an Amazon Linux GPU node group; '' for another AMI family (Bottlerocket
    refuses ``preBootstrapCommands``, eksctl v0.230.0 validation.go; its own settings choose the strategy)."""
    return NVIDIA_TOOLKIT_COMMAND if settings.aws.node_ami_family.startswith("AmazonLinux") else ""


def helm_values(settings: Settings) -> dict[str, dict[str, Any]]:
    """Values for the two charts: role=gpu-worker nodes, both taints tolerated. ``affinity: None`` removes
    the NVIDIA chart's default affinity on NFD labels (nvidia.com/gpu.present...): 02's node group sets that one
    itself, but placement then rests on the ``role`` label alone, on any cluster; ``deviceListStrategy``:
    :data:`DEVICE_LIST_STRATEGY`."""
    return {
        "nvidia": {
            "nodeSelector": {"role": "gpu-worker"},
            "affinity": None,
            "tolerations": GPU_TOLERATIONS,
            "deviceListStrategy": DEVICE_LIST_STRATEGY,
        },
        "efa": {"nodeSelector": {"role": "gpu-worker"}, "tolerations": GPU_TOLERATIONS[1:]},
    }


#: (key, chart, the settings' version field) of both plugins, in install order.
CHARTS = (("nvidia", NVIDIA_CHART, "nvidia_device_plugin_version"), ("efa", EFA_CHART, "efa_device_plugin_version"))


__all__ = [
    "CHARTS",
    "DEVICE_LIST_STRATEGY",
    "EFA_CHART",
    "EFA_DAEMONSET",
    "EKSCTL_EFA_DAEMONSET",
    "EKSCTL_EFA_IMAGE_TAG",
    "GPU_TOLERATIONS",
    "NAMESPACE",
    "NVIDIA_CHART",
    "NVIDIA_TOOLKIT_COMMAND",
    "helm_values",
    "toolkit_command",
]
