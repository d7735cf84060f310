"""The NVIDIA driver of each GPU node, read in step 03 before any job runs: the Ray Train image's PyTorch is built
for CUDA 13.0 Update 2, which needs a driver of branch 580 or later.

* What CUDA needs: NVIDIA's CUDA 13.0 Update 2 release notes (docs.nvidia.com/cuda/archive/13.0.2/
  cuda-toolkit-release-notes/, "CUDA Toolkit and Corresponding Driver Versions": 13.0 Update 2 is >= 580.95.05 on
  Linux x86_64; a driver of the 580 branch runs any CUDA 13.x through minor version compatibility, "CUDA Minor
  Version Compatibility" there; NVIDIA's data-center support matrix lists R580 as the branch of CUDA 13.0+; read
  2026-12-06). Below 580 the job's first CUDA call fails on every worker.
* Where it is read: the NVIDIA device plugin's own container on each node. Its chart (NVIDIA/k8s-device-plugin
  v0.20.0 ``deployments/helm/nvidia-device-plugin/templates/daemonset-device-plugin.yml``) sets
  ``NVIDIA_VISIBLE_DEVICES=all`` and ``NVIDIA_DRIVER_CAPABILITIES=compute,utility`` in container
  ``nvidia-device-plugin-ctr``; the EKS AL2023 NVIDIA AMI makes the NVIDIA runtime containerd's runtime
  (awslabs/amazon-eks-ami ``nodeadm/internal/containerd/runtime_config_nvidia.go``), and the container toolkit
  mounts the driver's utilities, ``nvidia-smi`` among them, for the ``utility`` capability (NVIDIA/
  nvidia-container-toolkit v1.20.0 ``pkg/nvcdi/driver-nvml.go``). ``nvidia-smi --query-gpu=driver_version
  --format=csv,noheader`` then prints one line per GPU. No pod is created and no GPU is taken. (The device plugin
  labels nothing with the driver; only GPU feature discovery does, ``nvidia.com/cuda.driver-version.*``, which the
  tutorial does not install: it needs Node Feature Discovery.)
* The fix: the AMI carries the driver. amazon-eks-ami's AL2023 NVIDIA AMIs install branch 580 by default
  (``templates/al2023/variables-default.json`` ``nvidia_driver_major_version: "580"``; the Kubernetes 1.28 one
  has 570), so a node group on the current EKS-optimized AL2023 NVIDIA AMI of ``aws.k8s_version`` has it.
"""

from __future__ import annotations

import re

from ....clients import kubernetes as kube
from ....core.settings import Settings
from ....plan.kube_objects import name_of
from ....plan.plugins import NAMESPACE, NVIDIA_CHART

#: The first driver branch that runs CUDA 13.x (the image's CUDA 13.0.2: >= 580.95.05).
MIN_DRIVER_MAJOR = 580
CUDA_NEEDS = "CUDA 13.0 Update 2 (the image's PyTorch) needs an NVIDIA driver of branch 580 or later (>= 580.95.05)"
QUERY = ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"]
CONTAINER = "nvidia-device-plugin-ctr"
SELECTOR = f"app.kubernetes.io/name={NVIDIA_CHART['chart']},app.kubernetes.io/instance={NVIDIA_CHART['release']}"


def parse_versions(text: str) -> list[str]:
    """The driver versions ``nvidia-smi --query-gpu=driver_version --format=csv,noheader`` printed (one per GPU)."""
    return [line.strip() for line in text.splitlines() if re.fullmatch(r"\d+\.\d+(\.\d+)?", line.strip())]


def fix(settings: Settings, node: str, version: str) -> str:
    a = settings.aws
    return (
        f"node {node} runs NVIDIA driver {version}: {CUDA_NEEDS}. Fix: put the GPU node group on the current "
        f"EKS-optimized AL2023 NVIDIA AMI for Kubernetes {a.k8s_version} (its driver branch is 580), e.g. "
        f"`eksctl upgrade nodegroup --cluster {a.cluster_name} --name {a.gpu_nodegroup_name} --region {a.region}` "
        f"(or delete and re-create it with notebook 02), then run 03 again"
    )


def read_drivers(client, settings: Settings, gpu_nodes: list[dict]) -> tuple[dict[str, str], list[str], list[str]]:
    """({node: driver version}, problems that stop 03, notes): the version each GPU node's NVIDIA device plugin
    container reads; a node below :data:`MIN_DRIVER_MAJOR` is a problem with the fix, one that cannot be read a
    note (the job's own CUDA check then speaks)."""
    pods = kube.list_objects(client, "v1", "Pod", NAMESPACE, label_selector=SELECTOR)
    on_node = {
        (p.get("spec") or {}).get("nodeName"): p for p in pods if (p.get("status") or {}).get("phase") == "Running"
    }
    found, problems, notes = {}, [], []
    for node in map(name_of, gpu_nodes):
        pod = on_node.get(node)
        if pod is None:
            notes.append(f"NVIDIA driver of {node}: not read (no running NVIDIA device plugin pod there)")
            continue
        try:
            out = kube.exec_in_pod(
                settings, name_of(pod), QUERY, namespace=NAMESPACE, container=CONTAINER, timeout_s=30, client=client
            )
        except kube.K8sError as e:
            notes.append(f"NVIDIA driver of {node}: not read ({str(e)[-200:]})")
            continue
        versions = parse_versions(out)
        if not versions:
            notes.append(f"NVIDIA driver of {node}: not read (nvidia-smi printed {out.strip()[:80]!r})")
            continue
        low = min(versions, key=lambda v: [int(x) for x in v.split(".")])
        found[node] = low
        if int(low.split(".")[0]) < MIN_DRIVER_MAJOR:
            problems.append(fix(settings, node, low))
    if found:
        notes.append("NVIDIA driver: " + ", ".join(f"{n} {v}" for n, v in sorted(found.items())) + f" ({CUDA_NEEDS})")
    return found, problems, notes


__all__ = ["CUDA_NEEDS", "MIN_DRIVER_MAJOR", "QUERY", "fix", "parse_versions", "read_drivers"]
