"""The commands each step stands for on aws (aws, eksctl, helm, kubectl, ray), with the settings' values: what a
learner could type instead of the step. Shown beside each step by ``present.equivalent_commands``; nothing here runs.

Sources (checked 2026-12-04): ``aws ec2 describe-capacity-block-offerings`` takes ``--capacity-duration-hours``
(required), ``--instance-type`` and ``--instance-count`` (botocore 1.43.11's ec2 model,
``DescribeCapacityBlockOfferings``; the CLI's options are its members in kebab case). eksctl's own EFA device plugin
is the DaemonSet ``kube-system/aws-efa-k8s-device-plugin`` (eksctl-io/eksctl at 99984adb,
pkg/addons/assets/efa-device-plugin.yaml; :mod:`.plugins.owners`, docs/pins.md); the tutorial's release is
``raytrain-aws-efa-k8s-device-plugin`` (``plan.plugins.EFA_CHART``).
"""

from __future__ import annotations

import inspect
import json
import shlex
from typing import Any

from ...core.config import Settings
from ...core.constants import DASHBOARD_PORT, ENTRYPOINT_MODULE, LOOPBACK
from ...plan import charts, manifests, plugins, raycluster
from ..job_commands import Commands, benchmark_commands, quote, train_commands
from . import equivalents
from .jobs import efa_tools
from .jobs.defaults import benchmark_variants
from .kuberay import raycluster as kuberay
from .placement.blocks import BLOCK_HOURS
from .placement.quotas import QUOTA_CLASSES, quota_class

#: How long 04 waits for the RayCluster (its ``timeout_s``): the first pull of the multi-GB image is most of it.
READY_TIMEOUT_S = int(inspect.signature(kuberay.raycluster).parameters["timeout_s"].default)
#: Where ``raytrain-tutorial render --target aws --out`` writes every document in these commands.
RENDERED = "rendered"


def capacity_commands(settings: Settings) -> Commands:
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
        (
            f"Capacity Blocks for ML on offer ({BLOCK_HOURS} h, nothing bought)",
            f"aws ec2 describe-capacity-block-offerings --instance-type {a.gpu_node_type} "
            f"--instance-count {a.gpu_node_count} --capacity-duration-hours {BLOCK_HOURS} --region {a.region}",
        ),
    ]


def spaced(argv: tuple[str, ...]) -> str:
    """An argv as one shell command, JSON arguments written with spaces (the same value; a display can break the
    line inside the quotes, where the shell keeps the newline and JSON reads it as a space)."""
    words = []
    for word in argv:
        if word[:1] in "{[":
            word = json.dumps(json.loads(word))
        words.append(word)
    return shlex.join(words)


def storage_check_commands(settings: Settings) -> Commands:
    """02's storage check by hand: a pod on the system node with the Ray pods' ServiceAccount and the DLC image
    runs the job's own storage calls (:mod:`.storage_check`), and is deleted whatever it found."""
    a, k = settings.aws, settings.kubernetes
    pod = "raytrain-storage-check"
    overrides = f'{{"spec": {{"serviceAccountName": "{k.service_account}", "nodeSelector": {{"role": "system"}}}}}}'
    return [
        ("kubectl's credentials", f"aws eks update-kubeconfig --region {a.region} --name {a.cluster_name}"),
        (
            "the storage check pod on the system node",
            f"kubectl run {pod} -n {k.namespace} --image {settings.versions.dlc_image} --restart=Never "
            f"--overrides {quote(overrides)} --command -- sleep 3600",
        ),
        (
            "the job's storage code in it (STORAGE_URI: the run's s3:// URI)",
            f"kubectl exec -n {k.namespace} {pod} -- python3 -c "
            f'"$(cat raytrain_helpers/targets/aws/storage/check.py)" STORAGE_URI .raytrain-access-check/manual',
        ),
        ("the pod deleted, whatever the check said", f"kubectl delete pod -n {k.namespace} {pod}"),
    ]


def cluster_commands(settings: Settings) -> Commands:
    created = [e for e in equivalents.cli_equivalents(settings, docs=RENDERED) if e.argv[0] != "kubectl"]
    gpu = next(i for i, e in enumerate(created) if e.argv[:3] == ("eksctl", "create", "nodegroup"))
    return [
        ("the rendered configs, without creating anything", "raytrain-tutorial cluster plan --target aws"),
        (
            "every document below: eksctl configs, IAM policies, manifests",
            f"raytrain-tutorial render --target aws --out {RENDERED}",
        ),
        *[(e.what, spaced(e.argv)) for e in created[:gpu]],
        *storage_check_commands(settings),
        *[("only when it passed: " + e.what, spaced(e.argv)) for e in created[gpu:]],
        (
            "the nodes, their role, type and AZ",
            "kubectl get nodes -L role,node.kubernetes.io/instance-type,topology.kubernetes.io/zone",
        ),
    ]


def set_flags(prefix: str, value: Any) -> list[str]:
    """``--set`` flags for Helm, one per leaf of ``value`` (lists as ``name[i]``)."""
    if isinstance(value, dict):
        return [flag for k, v in value.items() for flag in set_flags(f"{prefix}.{k}" if prefix else k, v)]
    if isinstance(value, list):
        return [flag for i, v in enumerate(value) for flag in set_flags(f"{prefix}[{i}]", v)]
    if value is None:
        return [f"--set-json {prefix}=null"]
    return [f"--set {quote(f'{prefix}={value}')}"]


def verified_pull(settings: Settings, chart: str, repo_alias: str) -> tuple[str, str]:
    """(what, command): ``helm pull`` of the pinned chart version, its archive checked against its digest
    (``sha256sum -c``), as 03/04 do before installing it; the archive's name is the basename of its URL in the
    index, ``<chart>-<version>.tgz`` for the three charts (docs/pins.md)."""
    pin = charts.BY_NAME[chart]
    version, digest = pin.version(settings), pin.digest(settings)
    archive = f"{chart}-{version}.tgz"
    pull = f"helm pull {repo_alias}/{chart} --version {version}"
    if digest:
        return (
            f"the {chart} archive, checked against its pinned digest",
            f"{pull} && printf '%s  %s\\n' {digest} {archive} | sha256sum -c -",
        )
    return "the chart's archive: its sha256 must be its digest in the repository's index.yaml", (
        f"{pull} && sha256sum {archive}"
    )


def plugins_commands(settings: Settings) -> Commands:
    v, values = settings.versions, plugins.helm_values(settings)
    nv, efa = plugins.NVIDIA_CHART, plugins.EFA_CHART
    allocatable = (
        "GPU='.status.allocatable.nvidia\\.com/gpu'; EFA='.status.allocatable.vpc\\.amazonaws\\.com/efa'; "
        "kubectl get nodes -l role=gpu-worker -o custom-columns=NAME:.metadata.name,GPU:$GPU,EFA:$EFA"
    )
    return [
        ("the charts' repositories", f"helm repo add nvdp {nv['repo']} && helm repo add eks {efa['repo']}"),
        verified_pull(settings, nv["chart"], "nvdp"),
        (
            "NVIDIA device plugin, on the GPU nodes only, from that archive",
            f"helm upgrade --install {nv['release']} ./{nv['chart']}-{v.nvidia_device_plugin_version}.tgz "
            f"-n {plugins.NAMESPACE} " + " ".join(set_flags("", values["nvidia"])),
        ),
        (
            "eksctl's own EFA plugin, replaced (one plugin per resource; 03 first checks it is eksctl's)",
            f"kubectl -n {plugins.NAMESPACE} delete daemonset {plugins.EKSCTL_EFA_DAEMONSET} --ignore-not-found",
        ),
        verified_pull(settings, efa["chart"], "eks"),
        (
            "the tutorial's EFA device plugin, under its own name, on the GPU nodes only, from that archive",
            f"helm upgrade --install {efa['release']} ./{efa['chart']}-{v.efa_device_plugin_version}.tgz "
            f"-n {plugins.NAMESPACE} " + " ".join(set_flags("", values["efa"])),
        ),
        ("DESIRED / READY of the DaemonSets", f"kubectl -n {plugins.NAMESPACE} get daemonsets"),
        ("what each GPU node can allocate", allocatable),
    ]


def kuberay_commands(settings: Settings) -> Commands:
    k, v = settings.kubernetes, settings.versions
    files = [name for name, obj in manifests.render_all(settings, include_alternatives=False)]
    rc_file = next(f for f in files if "-raycluster-" in f)
    ns_file = next(f for f in files if f.endswith(f"-namespace-{k.namespace}.yaml"))
    # the pods' ServiceAccount: the RayCluster names it (serviceAccountName), and pods of a missing one are refused
    sa_file = next(f for f in files if f.endswith(f"-serviceaccount-{k.service_account}.yaml"))
    # the two NetworkPolicies the step applies beside the RayCluster (raycluster.NETWORK_POLICIES), in render order
    np_files = [f for f in files if any(f.endswith(f"-networkpolicy-{n}.yaml") for n in raycluster.NETWORK_POLICIES)]
    applied = " ".join(f"-f {RENDERED}/{f}" for f in [ns_file, *np_files, sa_file, rc_file])
    return [
        ("the chart repository", f"helm repo add kuberay {raycluster.KUBERAY_HELM_REPO}"),
        verified_pull(settings, raycluster.OPERATOR_CHART, "kuberay"),
        (
            "the operator, on the system node, from that archive",
            f"helm upgrade --install {raycluster.OPERATOR_RELEASE} ./kuberay-operator-{v.kuberay_version}.tgz "
            f"-n {raycluster.OPERATOR_NAMESPACE} --create-namespace --set nodeSelector.role=system",
        ),
        ("every manifest, one object per file", f"raytrain-tutorial render --target aws --out {RENDERED}"),
        (
            "namespace, its two NetworkPolicies, the pods' ServiceAccount and RayCluster (server-side apply)",
            f"kubectl apply --server-side {applied}",
        ),
        ("the NetworkPolicies in force", f"kubectl -n {k.namespace} get networkpolicy"),
        ("the RayCluster's state", f"kubectl -n {k.namespace} get raycluster {k.ray_cluster_name}"),
        (
            "its pods and the nodes they run on",
            f"kubectl -n {k.namespace} get pods -o wide -l ray.io/cluster={k.ray_cluster_name}",
        ),
        (
            "wait for the head (the first pull of the multi-GB image takes a while)",
            f"kubectl -n {k.namespace} wait pod -l ray.io/cluster={k.ray_cluster_name},ray.io/node-type=head "
            f"--for=condition=Ready --timeout={READY_TIMEOUT_S}s",
        ),
    ]


def job_address(settings: Settings) -> tuple[str, Commands]:
    """The Jobs API address on this machine, and the port-forward to the head's Service that opens it."""
    k = settings.kubernetes
    forward = (
        "the Jobs API of the head, on this machine (leave it running)",
        f"kubectl -n {k.namespace} port-forward svc/{k.ray_cluster_name}-head-svc {DASHBOARD_PORT}:{DASHBOARD_PORT}",
    )
    secret = raycluster.auth_secret_name(k.ray_cluster_name)
    token = (
        "the cluster's Ray token, from the Secret KubeRay made (never typed or echoed)",
        f'RAY_AUTH_TOKEN="$(kubectl -n {k.namespace} get secret {secret} '
        f"-o jsonpath='{{.data.{raycluster.AUTH_TOKEN_KEY}}}' | base64 -d)\"",
    )
    export = ("`ray job` sends it with every request", "export RAY_AUTH_MODE=token RAY_AUTH_TOKEN")
    return f"http://{LOOPBACK}:{DASHBOARD_PORT}", [forward, token, export]


def exec_submit(settings: Settings) -> Commands:
    """The source article's way to submit, beside the port-forward: copy the job's code into the head pod and run
    ``ray job submit`` there, against the Jobs API on the pod's own loopback (no port leaves the cluster)."""
    k = settings.kubernetes
    head = f"-l ray.io/cluster={k.ray_cluster_name},ray.io/node-type=head"
    src = f"runs/{settings.run_name}/job_src/MARKER"
    return [
        (
            "or, as the source article does: the code copied into the head pod, submitted from there",
            f"HEAD=$(kubectl -n {k.namespace} get pods {head} -o name | cut -d/ -f2) && "
            f"kubectl -n {k.namespace} cp {src} $HEAD:/tmp/raytrain-job && "
            f"kubectl -n {k.namespace} exec $HEAD -- ray job submit --address http://{LOOPBACK}:{DASHBOARD_PORT} "
            f"--working-dir /tmp/raytrain-job -- python -m {ENTRYPOINT_MODULE} --config job_config.json",
        )
    ]


def verify_commands(settings: Settings) -> Commands:
    k = settings.kubernetes
    workers = f"-l ray.io/cluster={k.ray_cluster_name},ray.io/node-type=worker"
    fi_info = shlex.join(efa_tools.fi_info_command("efa"))  # what 06 runs in each worker pod
    return [
        (
            "GPUs and EFA every GPU node advertises",
            "kubectl get nodes -l role=gpu-worker -o json | jq '.items[].status.allocatable'",
        ),
        (
            "the EFA provider and its RDM endpoint inside each worker pod",
            f"for p in $(kubectl -n {k.namespace} get pods {workers} -o name); do "
            f"kubectl -n {k.namespace} exec $p -- {fi_info} | grep -E 'provider:|type:' | sort -u; done",
        ),
        ("the transport lines NCCL printed", "grep -hE 'via (NET|P2P|SHM)|NET/OFI Selected provider' WORKER_LOGS"),
        ("the same audit as 06, on any saved logs", "raytrain-tutorial audit WORKER_LOGS --expect auto"),
    ]


def teardown_commands(settings: Settings) -> Commands:
    a, k = settings.aws, settings.kubernetes
    removed = [e for e in equivalents.teardown_equivalents(settings, docs=RENDERED) if e.argv[0] != "kubectl"]
    return [
        ("the RayCluster (its pods go with it)", f"kubectl -n {k.namespace} delete raycluster {k.ray_cluster_name}"),
        ("the operator", f"helm uninstall {raycluster.OPERATOR_RELEASE} -n {raycluster.OPERATOR_NAMESPACE}"),
        (
            "the device plugins",
            f"helm uninstall {plugins.NVIDIA_CHART['release']} {plugins.EFA_CHART['release']} -n {plugins.NAMESPACE}",
        ),
        *[(e.what, spaced(e.argv)) for e in removed],
        ("nothing of the tutorial left", f"aws eks list-clusters --region {a.region}"),
    ]


def equivalent_commands(settings: Settings, step: str) -> Commands:
    """The aws commands of one step (``targets.base.COMMAND_STEPS``), with these settings' values."""
    if step == "train":
        return train_commands(settings, *job_address(settings)) + exec_submit(settings)
    if step == "benchmark":
        forced = next(v["env"] for v in benchmark_variants(settings) if v["expect"] == "socket")
        return benchmark_commands(settings, *job_address(settings), forced)
    return STEPS[step](settings)


STEPS = dict(
    capacity=capacity_commands,
    cluster=cluster_commands,
    plugins=plugins_commands,
    kuberay=kuberay_commands,
    verify=verify_commands,
    teardown=teardown_commands,
)

__all__ = ["READY_TIMEOUT_S", "RENDERED", "STEPS", "equivalent_commands", "job_address", "set_flags", "spaced"]
