"""The commands a step stands for (aws, eksctl, helm, kubectl, ray), with the settings' values:
:func:`equivalent_commands`.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable
from typing import Any

from ..core import config
from ..core.constants import DASHBOARD_PORT, ENTRYPOINT_MODULE, LOOPBACK
from ..core.settings import Settings
from ..core.tables import MAX_WIDTH
from ..plan import manifests, plugins, raycluster
from ..targets import for_settings
from ..targets.aws.quotas import QUOTA_CLASSES, quota_class
from .shown import Shown, pre_html


def target_name(settings: Settings) -> str:
    """``local`` or ``aws``: the name of the target these settings run on."""
    return for_settings(settings).NAME


def _q(value: Any) -> str:
    return shlex.quote(str(value))


def _capacity_commands(settings: Settings) -> list[tuple[str, str]]:
    a = settings.aws
    qclass = quota_class(a.gpu_node_type) or "G and VT"
    code = QUOTA_CLASSES.get(qclass, {}).get("od") or "?"
    return [
        (
            "AZs offering the GPU type",
            f"aws ec2 describe-instance-type-offerings --region {a.region} --location-type availability-zone "
            f"--filters Name=instance-type,Values={a.gpu_node_type} --query 'InstanceTypeOfferings[].Location'",
        ),
        (
            "GPUs and EFA of the type",
            f"aws ec2 describe-instance-types --region {a.region} --instance-types {a.gpu_node_type} "
            "--query 'InstanceTypes[0].[GpuInfo.Gpus[0].Count,NetworkInfo.EfaSupported]'",
        ),
        (
            f"On-Demand vCPU quota ({qclass} instances)",
            f"aws service-quotas get-service-quota --region {a.region} --service-code ec2 --quota-code {code}",
        ),
        (
            "Spot placement scores per AZ (a signal only)",
            f"aws ec2 get-spot-placement-scores --region {a.region} --instance-types {a.gpu_node_type} "
            f"--target-capacity {a.gpu_node_count} --single-availability-zone --region-names {a.region}",
        ),
    ]


def _cluster_commands(settings: Settings) -> list[tuple[str, str]]:
    a, k = settings.aws, settings.kubernetes
    folder = f"runs/{settings.run_name}/eksctl"
    return [
        ("the rendered configs, without creating anything", "raytrain-tutorial cluster plan --target aws"),
        ("EKS, its VPC and the system node group (15-20 min)", f"eksctl create cluster -f {folder}/cluster.yaml"),
        ("kubectl's credentials", f"aws eks update-kubeconfig --region {a.region} --name {a.cluster_name}"),
        (
            "after the bucket, role and association: the storage check pod on the system node",
            f"kubectl run raytrain-storage-check -n {k.namespace} --image {settings.versions.dlc_image} "
            f'--restart=Never --overrides \'{{"spec": {{"serviceAccountName": "{k.service_account}", '
            f'"nodeSelector": {{"role": "system"}}}}}}\' --command -- sleep 3600',
        ),
        (
            "the job's storage code in it (STORAGE_URI: the run's s3:// URI)",
            f"kubectl exec -n {k.namespace} raytrain-storage-check -- python3 -c "
            f'"$(cat raytrain_helpers/targets/aws/storage_check.py)" STORAGE_URI .raytrain-access-check/manual',
        ),
        ("the pod deleted, whatever the check said", f"kubectl delete pod -n {k.namespace} raytrain-storage-check"),
        (
            "only when it passed: the EFA GPU node group in one AZ (5-10 min)",
            f"eksctl create nodegroup -f {folder}/gpu-nodegroup.yaml --install-nvidia-plugin=false",
        ),
        (
            "the nodes, their role, type and AZ",
            "kubectl get nodes -L role,node.kubernetes.io/instance-type,topology.kubernetes.io/zone",
        ),
    ]


def _set_flags(prefix: str, value: Any) -> list[str]:
    """``--set`` flags for Helm, one per leaf of ``value`` (lists as ``name[i]``)."""
    if isinstance(value, dict):
        return [flag for k, v in value.items() for flag in _set_flags(f"{prefix}.{k}" if prefix else k, v)]
    if isinstance(value, list):
        return [flag for i, v in enumerate(value) for flag in _set_flags(f"{prefix}[{i}]", v)]
    if value is None:
        return [f"--set-json {prefix}=null"]
    return [f"--set {_q(f'{prefix}={value}')}"]


def _plugins_commands(settings: Settings) -> list[tuple[str, str]]:
    v, values = settings.versions, plugins.helm_values(settings)
    nv, efa = plugins.NVIDIA_CHART, plugins.EFA_CHART
    allocatable = (
        "GPU='.status.allocatable.nvidia\\.com/gpu'; EFA='.status.allocatable.vpc\\.amazonaws\\.com/efa'; "
        "kubectl get nodes -l role=gpu-worker -o custom-columns=NAME:.metadata.name,GPU:$GPU,EFA:$EFA"
    )
    return [
        ("the charts' repositories", f"helm repo add nvdp {nv['repo']} && helm repo add eks {efa['repo']}"),
        (
            "NVIDIA device plugin, on the GPU nodes only",
            f"helm upgrade --install {nv['release']} nvdp/{nv['chart']} --version {v.nvidia_device_plugin_version} "
            f"-n {plugins.NAMESPACE} " + " ".join(_set_flags("", values["nvidia"])),
        ),
        (
            "EFA device plugin, on the GPU nodes only",
            f"helm upgrade --install {efa['release']} eks/{efa['chart']} --version {v.efa_device_plugin_version} "
            f"-n {plugins.NAMESPACE} " + " ".join(_set_flags("", values["efa"])),
        ),
        ("DESIRED / READY of both DaemonSets", f"kubectl -n {plugins.NAMESPACE} get daemonsets"),
        ("what each GPU node can allocate", allocatable),
    ]


def _kuberay_commands(settings: Settings) -> list[tuple[str, str]]:
    k, v = settings.kubernetes, settings.versions
    files = [name for name, obj in manifests.render_all(settings, include_alternatives=False)]
    rc_file = next(f for f in files if "-raycluster-" in f)
    ns_file = next(f for f in files if f.endswith(f"-namespace-{k.namespace}.yaml"))
    # the pods' ServiceAccount: the RayCluster names it (serviceAccountName), and pods of a missing one are refused
    sa_file = next(f for f in files if f.endswith(f"-serviceaccount-{k.service_account}.yaml"))
    return [
        ("the chart repository", f"helm repo add kuberay {raycluster.KUBERAY_HELM_REPO}"),
        (
            "the operator, on the system node",
            f"helm upgrade --install {raycluster.OPERATOR_RELEASE} kuberay/kuberay-operator --version "
            f"{v.kuberay_version} -n {raycluster.OPERATOR_NAMESPACE} --create-namespace "
            "--set nodeSelector.role=system",
        ),
        ("every manifest, one object per file", "raytrain-tutorial render --target aws --out rendered"),
        (
            "namespace, the pods' ServiceAccount and RayCluster (server-side apply)",
            f"kubectl apply --server-side -f rendered/{ns_file} -f rendered/{sa_file} -f rendered/{rc_file}",
        ),
        ("the RayCluster's state", f"kubectl -n {k.namespace} get raycluster {k.ray_cluster_name}"),
        (
            "its pods and the nodes they run on",
            f"kubectl -n {k.namespace} get pods -o wide -l ray.io/cluster={k.ray_cluster_name}",
        ),
        (
            "wait for the head",
            f"kubectl -n {k.namespace} wait pod -l ray.io/cluster={k.ray_cluster_name},ray.io/node-type=head "
            "--for=condition=Ready --timeout=600s",
        ),
    ]


def _job_address(settings: Settings) -> tuple[str, list[tuple[str, str]]]:
    k = settings.kubernetes
    if target_name(settings) == "local":
        return f"http://{LOOPBACK}:{settings.local.dashboard_port}", []
    forward = (
        "the Jobs API of the head, on this machine (leave it running)",
        f"kubectl -n {k.namespace} port-forward svc/{k.ray_cluster_name}-head-svc {DASHBOARD_PORT}:{DASHBOARD_PORT}",
    )
    return f"http://{LOOPBACK}:{DASHBOARD_PORT}", [forward]


def _train_commands(settings: Settings) -> list[tuple[str, str]]:
    address, first = _job_address(settings)
    env = {"NCCL_DEBUG": settings.nccl.debug, **{k: str(v) for k, v in settings.nccl.env.items()}}
    runtime_env: dict[str, Any] = {"env_vars": env}
    if settings.train.extra_pip:
        runtime_env["pip"] = list(settings.train.extra_pip)
    sid = f"raytrain-{settings.run_name}-MARKER"
    return [
        *first,
        (
            "submit the job (the code travels as working_dir)",
            f"ray job submit --address {address} --submission-id {sid} "
            f"--working-dir runs/{settings.run_name}/job_src/MARKER --runtime-env-json {_q(json.dumps(runtime_env))} "
            f"-- python -m {ENTRYPOINT_MODULE} --config job_config.json",
        ),
        ("follow its log", f"ray job logs --address {address} --follow {sid}"),
        (
            "its status, and every job of the cluster",
            f"ray job status --address {address} {sid}; ray job list --address {address}",
        ),
    ]


def _verify_commands(settings: Settings) -> list[tuple[str, str]]:
    k = settings.kubernetes
    workers = f"-l ray.io/cluster={k.ray_cluster_name},ray.io/node-type=worker"
    return [
        (
            "GPUs and EFA every GPU node advertises",
            "kubectl get nodes -l role=gpu-worker -o json | jq '.items[].status.allocatable'",
        ),
        (
            "the EFA provider inside each worker pod",
            f"for p in $(kubectl -n {k.namespace} get pods {workers} -o name); do "
            f"kubectl -n {k.namespace} exec $p -- fi_info -p efa -t FI_EP_RDM | head -3; done",
        ),
        ("the transport lines NCCL printed", "grep -hE 'via (NET|P2P|SHM)|NET/OFI Selected provider' WORKER_LOGS"),
        ("the same audit as 06, on any saved logs", "raytrain-tutorial audit WORKER_LOGS --expect auto"),
    ]


def _benchmark_commands(settings: Settings) -> list[tuple[str, str]]:
    address, first = _job_address(settings)
    on_aws = target_name(settings) == "aws"
    forced = {"NCCL_NET": "Socket"} if on_aws else {"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1"}
    env = json.dumps({"env_vars": {"NCCL_DEBUG": settings.nccl.debug, **forced}})
    return [
        *first,
        (
            "the same job with the fast transport switched off",
            f"ray job submit --address {address} --working-dir runs/{settings.run_name}/job_src/MARKER "
            f"--runtime-env-json {_q(env)} -- python -m {ENTRYPOINT_MODULE} --config job_config.json",
        ),
        (
            "audit a run's logs against the transport it was meant to use",
            "raytrain-tutorial audit WORKER_LOGS --expect socket",
        ),
    ]


def _teardown_commands(settings: Settings) -> list[tuple[str, str]]:
    a, k = settings.aws, settings.kubernetes
    return [
        ("the RayCluster (its pods go with it)", f"kubectl -n {k.namespace} delete raycluster {k.ray_cluster_name}"),
        ("the operator", f"helm uninstall {raycluster.OPERATOR_RELEASE} -n {raycluster.OPERATOR_NAMESPACE}"),
        (
            "the device plugins",
            f"helm uninstall {plugins.NVIDIA_CHART['release']} {plugins.EFA_CHART['release']} -n {plugins.NAMESPACE}",
        ),
        (
            "the GPU node group (stops the GPU bill)",
            f"eksctl delete nodegroup --region {a.region} --cluster {a.cluster_name} "
            f"--name {a.gpu_nodegroup_name} --wait",
        ),
        (
            "the cluster, its VPC and NAT gateway",
            f"eksctl delete cluster --region {a.region} --name {a.cluster_name} --wait",
        ),
        ("nothing of the tutorial left", f"aws eks list-clusters --region {a.region}"),
    ]


def _local_commands(step: str, settings: Settings) -> list[tuple[str, str]]:
    lo = settings.local
    return {
        "capacity": [("this machine's CPUs, memory and GPUs", "nproc; free -g; nvidia-smi -L")],
        "cluster": [
            ("start (or reuse) the head and worker raylets", "raytrain-tutorial up"),
            ("the cluster's nodes and resources", f"ray status --address {LOOPBACK}:{lo.gcs_port}"),
        ],
        "plugins": [("the resources each raylet offers", f"ray status --address {LOOPBACK}:{lo.gcs_port} -v")],
        "kuberay": [
            ("the RayCluster this machine stands in for", "raytrain-tutorial render --target aws --out rendered")
        ],
        "teardown": [("stop the raylets this tutorial started", "raytrain-tutorial down")],
    }.get(step, [])


STEP_COMMANDS: dict[str, Callable[[Settings], list[tuple[str, str]]]] = {
    "capacity": _capacity_commands,
    "cluster": _cluster_commands,
    "plugins": _plugins_commands,
    "kuberay": _kuberay_commands,
    "train": _train_commands,
    "verify": _verify_commands,
    "benchmark": _benchmark_commands,
    "teardown": _teardown_commands,
}


def equivalent_commands(step: str, settings: Settings) -> Shown:
    """The commands a step stands for, with these settings' values: optional, for reading or typing yourself.

    ``step``: capacity, cluster, plugins, kuberay, train, verify, benchmark or teardown. The aws commands come
    first; on the local target, the local ones follow. ``.commands`` holds them as (purpose, command) pairs.
    """
    if step not in STEP_COMMANDS:
        raise ValueError(f"unknown step {step!r}. Fix: one of {', '.join(STEP_COMMANDS)}")
    aws_settings = settings if target_name(settings) == "aws" else config.with_overrides(settings, target="aws")
    groups = [("on aws", STEP_COMMANDS[step](aws_settings))]
    if step in ("train", "benchmark") and target_name(settings) == "local":
        groups = [("on aws", STEP_COMMANDS[step](aws_settings)), ("on this machine", STEP_COMMANDS[step](settings))]
    elif target_name(settings) == "local" and _local_commands(step, settings):
        groups.append(("on this machine", _local_commands(step, settings)))
    lines = ["# Optional: what the step above does, as commands you could type yourself (your values)."]
    commands: list[tuple[str, str]] = []
    for label, pairs in groups:
        lines.append(f"# --- {label}")
        for purpose, command in pairs:
            lines.append(f"# {purpose}")
            lines += _wrap_command(command)
            commands.append((purpose, command))
    text = "\n".join(lines)
    shown = Shown(text, pre_html(text, lambda line: "#6a737d" if line.startswith("#") else None))
    shown.commands = commands
    return shown


def _wrap_command(command: str, width: int = MAX_WIDTH) -> list[str]:
    """A shell command over several lines (`` \\`` continuations), split between words only."""
    words = shlex.split(command, posix=False) if "'" not in command else _split_keep_quotes(command)
    lines, current = [], ""
    for word in words:
        candidate = f"{current} {word}" if current else word
        if len(candidate) > width - 2 and current:
            lines.append(current + " \\")
            current = "    " + word
        else:
            current = candidate
    lines.append(current)
    return lines


def _split_keep_quotes(command: str) -> list[str]:
    """Words of a command, single-quoted spans kept whole with their quotes."""
    words, current, quoted = [], "", False
    for char in command:
        if char == "'":
            quoted = not quoted
        if char == " " and not quoted:
            if current:
                words.append(current)
            current = ""
        else:
            current += char
    if current:
        words.append(current)
    return words
