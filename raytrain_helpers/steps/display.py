"""What the notebooks show beside each step: the real artifacts, the commands behind them, live views and forms.

Every function here returns (or prints) plain text that depends only on the settings and the package's code, so
a notebook executed headless (papermill, nbval) stores the same text on every run. In an interactive kernel
whose front end renders widgets (JupyterLab, Notebook 7), the same objects add a rich rendering: HTML beside an
identical ``text/plain``, a live loss view with a ``tqdm.auto`` bar, a settings form.

* :func:`show_source`: a function of the package, numbered as in its file (it cannot drift from the code).
* :func:`show_manifest`: one manifest rendered from the settings (eksctl, device plugins, RayCluster...).
* :func:`equivalent_commands`: the aws / eksctl / helm / kubectl / ray commands a step stands for.
* :func:`cost_note`: the stack's hourly cost on aws, from the package's price table.
* :func:`criteria_view`: 06's criteria as a table at most :data:`MAX_WIDTH` characters wide (coloured in HTML).
* :func:`show_nccl_lines`: the NCCL log lines the transport audit based its verdict on.
* :func:`live_view`: ``update(metrics)`` / ``close()`` for the training step's progress.
* :func:`settings_form`: edit the run's override file, validated by :mod:`core.config`.
"""

from __future__ import annotations

import html
import importlib
import inspect
import json
import shlex
import tempfile
import textwrap
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

import yaml

from ..core import config
from ..core.config import ConfigError, Settings
from ..core.constants import DASHBOARD_PORT, ENTRYPOINT_MODULE, LOOPBACK
from ..core.criteria import FAIL, NA, PASS, Criteria
from ..core.paths import REPO_ROOT
from ..core.tables import MAX_WIDTH, format_table, wrapped_table
from ..plan import cost, eksctl, manifests, plugins, raycluster, render
from ..targets import for_settings
from ..targets.aws.placement import QUOTA_CLASSES, quota_class
from .verify import ran_kernels

#: None: detect the front end; True / False: force (tests, or a front end the detection does not know).
FORCE_INTERACTIVE: bool | None = None
#: Execute-request metadata keys that widget-capable front ends send and headless runners do not: JupyterLab
#: and Notebook 7 send ``cellId``, ``deletedCells`` and ``recordTiming``; papermill, nbclient and nbval send none.
FRONTEND_METADATA_KEYS = ("cellId", "deletedCells", "recordTiming")


# --------------------------------------------------------------------------------------------------------------
# Front-end detection and the text/plain + HTML output object
# --------------------------------------------------------------------------------------------------------------


def target_name(settings: Settings) -> str:
    """``local`` or ``aws``: the name of the target these settings run on."""
    return for_settings(settings).NAME


def interactive_frontend(interactive: bool | None = None) -> bool:
    """True when the cell runs in a kernel whose front end renders widgets (never under papermill or nbval).

    Evidence, in order: an explicit ``interactive`` (or :data:`FORCE_INTERACTIVE`); an IPython kernel with
    ipywidgets importable; the current execute request's metadata carrying a front end's cell keys
    (:data:`FRONTEND_METADATA_KEYS`). Anything missing means plain text.
    """
    if interactive is not None:
        return bool(interactive)
    if FORCE_INTERACTIVE is not None:
        return FORCE_INTERACTIVE
    kernel = _kernel()
    if kernel is None:
        return False
    try:
        import ipywidgets  # noqa: F401 - only whether it is there
    except ImportError:
        return False
    try:
        parent = kernel.get_parent("shell")
    except Exception:  # noqa: BLE001 - older ipykernel: no parent API means no evidence
        return False
    metadata = (parent or {}).get("metadata") or {}
    return any(key in metadata for key in FRONTEND_METADATA_KEYS)


def _kernel():
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    return getattr(get_ipython(), "kernel", None)


class Shown:
    """Text a notebook displays: always ``text/plain``; HTML of the same content only for a rich front end."""

    def __init__(self, text: str, html_text: str | None = None, *, interactive: bool | None = None):
        self.text = text.rstrip("\n")
        self.html = html_text
        self.interactive = interactive

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return self.text

    def _repr_pretty_(self, printer, cycle: bool) -> None:
        printer.text(self.text)

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict[str, str]:
        bundle = {"text/plain": self.text}
        if self.html and interactive_frontend(self.interactive):
            bundle["text/html"] = self.html
        return bundle

    def mimebundle(self) -> dict[str, str]:
        """Both renderings, whatever the front end (for tests and reports)."""
        out = {"text/plain": self.text}
        if self.html:
            out["text/html"] = self.html
        return out


def _pre(text: str, marked: Callable[[str], str | None] | None = None) -> str:
    """``text`` in a <pre>, line by line; ``marked(line)`` may return a CSS colour for a line."""
    lines = []
    for line in text.split("\n"):
        colour = marked(line) if marked else None
        escaped = html.escape(line)
        lines.append(f'<span style="color:{colour}">{escaped}</span>' if colour else escaped)
    body = "\n".join(lines)
    return f'<pre style="font-size:12px;line-height:1.35;max-width:{MAX_WIDTH}ch;overflow-x:auto">{body}</pre>'


def fit(line: str, width: int = MAX_WIDTH) -> str:
    """One line cut to ``width`` characters (an ellipsis marks the cut)."""
    return line if len(line) <= width else line[: width - 3] + "..."


# --------------------------------------------------------------------------------------------------------------
# Source of the package's functions
# --------------------------------------------------------------------------------------------------------------


def show_source(func: Any, lines: tuple[int, int] | str | Sequence[str] | None = None) -> Shown:
    """A function's (or a whole module's) source as it is in the package, numbered as in its file.

    ``func`` may be named: ``"raytrain_helpers.worker.train:train_loop_per_worker"``.
    ``lines``: None = the whole function; ``(first, last)`` = those lines of the function (1 = its ``def``);
    a string or strings = only the lines containing one of them (each with its own line number).
    """
    func = inspect.unwrap(resolve(func) if isinstance(func, str) else func)
    source, start = inspect.getsourcelines(func)
    start = max(start, 1)  # a module starts at line 1
    path = Path(inspect.getsourcefile(func) or "?")
    try:
        where = path.resolve().relative_to(REPO_ROOT)
    except ValueError:
        where = Path(path.name)
    numbered = [(start + i, text.rstrip("\n")) for i, text in enumerate(source)]
    patterns: list[str] = []
    if isinstance(lines, tuple):
        numbered = numbered[max(lines[0] - 1, 0) : lines[1]]
    elif lines is not None:
        patterns = [lines] if isinstance(lines, str) else list(lines)
        numbered = [(n, t) for n, t in numbered if any(p in t for p in patterns)]
    name = getattr(func, "__qualname__", getattr(func, "__name__", "?"))
    head = f"# {where} - {name}, lines {start}-{start + len(source) - 1}"
    if patterns:
        head += " (only the lines quoted)"
    missing = [p for p in patterns if not any(p in t for _, t in numbered)]
    body = [fit(f"{n:4d}  {t}") for n, t in numbered]
    if missing:
        body.append(f"      (not in this version of {name}: {', '.join(missing)})")
    text = "\n".join([head, *body])
    return Shown(text, _pre(text, lambda line: "#6a737d" if line.startswith("# ") else None))


def resolve(name: str) -> Any:
    """``"package.module"`` or ``"package.module:attribute"`` -> the module or the attribute."""
    module_name, _, attr = name.partition(":")
    obj = importlib.import_module(module_name)
    for part in filter(None, attr.split(".")):
        obj = getattr(obj, part)
    return obj


def code_lines(path: Path) -> list[tuple[int, str]]:
    """(line number, stripped line) of a Python file's code: comments and docstring/string blocks left out."""
    out, in_string = [], False
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        stripped = line.strip()
        quotes = stripped.count('"""') + stripped.count("'''")
        if in_string or stripped.startswith(('"""', "'''")):
            in_string = in_string != (quotes % 2 == 1)
            continue
        if quotes % 2 == 1:
            in_string = True
        if stripped and not stripped.startswith("#"):
            out.append((number, stripped))
    return out


def key_lines(
    patterns: Sequence[tuple[str, str]], package: str = "raytrain_helpers.worker", per_pattern: int = 2
) -> Shown:
    """Where the key lines of a package are: for each (label, text), the first lines containing ``text`` in any
    of the package's modules, with file and line number. Found by text, so the listing follows the code."""
    root = Path(resolve(package).__file__).parent
    files = sorted(root.glob("*.py"))
    out = [f"# key lines of {root.relative_to(REPO_ROOT)}/ (found by their text; they follow the code)"]
    for label, needle in patterns:
        out.append(f"# {label}")
        hits = [(path.name, number, line) for path in files for number, line in code_lines(path) if needle in line]
        if not hits:
            out.append(f"    (no line contains {needle!r} in this version)")
        for name, number, line in hits[:per_pattern]:
            out.append(fit(f"{name}:{number}: {line}"))
    text = "\n".join(out)
    return Shown(text, _pre(text, lambda line: "#6a737d" if line.startswith("#") else None))


# --------------------------------------------------------------------------------------------------------------
# Manifests rendered from the settings
# --------------------------------------------------------------------------------------------------------------

#: How long a list may be before :func:`abridge` shortens it.
LIST_LIMIT = 6


def abridge(obj: Any, limit: int = LIST_LIMIT) -> Any:
    """Lists of more than ``limit`` plain values keep their first few and say how many were left out."""
    if isinstance(obj, dict):
        return {k: abridge(v, limit) for k, v in obj.items()}
    if isinstance(obj, list):
        if len(obj) > limit and all(not isinstance(v, (dict, list)) for v in obj):
            return [*obj[: limit - 2], f"... {len(obj) - (limit - 2)} more (not shown)"]
        return [abridge(v, limit) for v in obj]
    return obj


def placeholder_azs(settings: Settings) -> tuple[str, list[str]]:
    """The GPU AZ (the setting, or the region's first AZ as a placeholder) and the cluster's two AZs."""
    region = settings.aws.region
    gpu_az = settings.aws.gpu_az or f"{region}a"
    other = f"{region}b" if gpu_az != f"{region}b" else f"{region}a"
    return gpu_az, [gpu_az, other]


def _manifest_objects(name: str, settings: Settings) -> list[dict[str, Any]] | str:
    """One named artifact: a list of objects, or YAML text for the eksctl configs (they carry comments)."""
    gpu_az, azs = placeholder_azs(settings)
    if name == "eksctl-cluster":
        return eksctl.render_cluster_config(settings, azs=azs, gpu_az=gpu_az)
    if name == "eksctl-gpu-nodegroup":
        subnet = f"<private subnet of the cluster in {gpu_az}>"
        return eksctl.render_gpu_nodegroup_config(settings, gpu_az=gpu_az, subnet_ids=[subnet])
    objects = plugins.render_plugins(settings)
    builders: dict[str, Callable[[], list[dict[str, Any]]]] = {
        "nvidia-device-plugin": lambda: objects[:1],
        "efa-device-plugin": lambda: objects[1:],
        "kuberay-operator": lambda: raycluster.render_operator(settings),
        "namespace": lambda: [raycluster.render_namespace(settings)],
        "raycluster": lambda: [raycluster.render_raycluster(settings)],
        "rayjob": lambda: [raycluster.render_rayjob(settings)],
    }
    if name not in builders:
        known = ", ".join(["eksctl-cluster", "eksctl-gpu-nodegroup", *builders])
        raise ValueError(f"unknown manifest {name!r}. Fix: one of {known}")
    return builders[name]()


MANIFEST_NAMES = (
    "eksctl-cluster",
    "eksctl-gpu-nodegroup",
    "nvidia-device-plugin",
    "efa-device-plugin",
    "kuberay-operator",
    "namespace",
    "raycluster",
    "rayjob",
)


def show_manifest(name: str, settings: Settings, *, full: bool = False) -> Shown:
    """One artifact as the aws target renders it from these settings (long plain lists abridged unless
    ``full``). Names: :data:`MANIFEST_NAMES`."""
    rendered = _manifest_objects(name, settings)
    if isinstance(rendered, str):
        body = rendered.strip("\n")
        if name == "eksctl-gpu-nodegroup" or not settings.aws.gpu_az:
            body += "\n# (AZ and subnet shown as placeholders: step 01 picks the AZ, step 02 reads the subnet ids)"
    else:
        docs = [render.to_yaml(obj if full else abridge(obj)).rstrip("\n") for obj in rendered]
        body = "\n---\n".join(docs)
    text = f"# {name}: rendered from env.yaml (`raytrain-tutorial render --target aws` writes every manifest)\n{body}"
    return Shown(text, _pre(text, lambda line: "#6a737d" if line.lstrip().startswith("#") else None))


# --------------------------------------------------------------------------------------------------------------
# Equivalent commands
# --------------------------------------------------------------------------------------------------------------


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
    a = settings.aws
    folder = f"runs/{settings.run_name}/eksctl"
    return [
        ("the rendered configs, without creating anything", "raytrain-tutorial cluster plan --target aws"),
        ("EKS, its VPC and the system node group (15-20 min)", f"eksctl create cluster -f {folder}/cluster.yaml"),
        (
            "the EFA GPU node group in one AZ (5-10 min)",
            f"eksctl create nodegroup -f {folder}/gpu-nodegroup.yaml --install-nvidia-plugin=false",
        ),
        ("kubectl's credentials", f"aws eks update-kubeconfig --region {a.region} --name {a.cluster_name}"),
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
            "namespace and RayCluster (server-side apply)",
            f"kubectl apply --server-side -f rendered/{ns_file} -f rendered/{rc_file}",
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
    shown = Shown(text, _pre(text, lambda line: "#6a737d" if line.startswith("#") else None))
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


# --------------------------------------------------------------------------------------------------------------
# Cost on aws
# --------------------------------------------------------------------------------------------------------------


def cost_note(settings: Settings, minutes: float, *, creates: bool = True) -> Shown:
    """What the aws stack costs per hour (the package's price table) and for ``minutes`` of this chapter.

    ``creates``: whether the stack exists while the chapter runs (False: the chapter creates nothing billed).
    """
    aws = settings.aws
    est = cost.estimate(settings, aws.region)
    rows = [*est.rows, ("total", "", "", f"{est.total_per_hour:.2f}")]
    table = format_table(rows, ["item", "qty", "USD/h each", "USD/h"], title=None)
    if creates:
        share = est.total_per_hour * minutes / 60
        lead = (
            f"On aws this chapter takes about {minutes:g} min of the stack below: about USD {share:.2f} "
            f"(USD {est.total_per_hour:.2f}/h)."
        )
    else:
        lead = (
            f"On aws this chapter creates nothing billed (about {minutes:g} min of API calls); the stack it "
            f"prepares costs USD {est.total_per_hour:.2f}/h while it exists."
        )
    notes = [f"prices: {aws.region}, list prices of {est.as_of}; " + "; ".join(est.notes)]
    notes.append("On the local target nothing is billed.")
    text = "\n".join([textwrap.fill(lead, MAX_WIDTH), table, *(textwrap.fill(n, MAX_WIDTH) for n in notes)])
    return Shown(text, _pre(text))


# --------------------------------------------------------------------------------------------------------------
# 06: criteria and the NCCL lines
# --------------------------------------------------------------------------------------------------------------

#: Column widths of :func:`criteria_view` (result, criterion, evidence): 4 + 6 + 3 + 30 + 3 + 62 + 2 = 110.
#: Criterion names are fixed text; evidence carries measured figures, so it breaks at its "; " separators first
#: (a figure one digit longer must not move a line break: nbval compares the lines).
CRITERIA_WIDTHS = (6, 30, 62)
STATUS_COLOURS = {PASS: "#1a7f37", FAIL: "#cf222e", NA: "#6a737d"}


def criteria_view(verification: Any, *, interactive: bool | None = None) -> Shown:
    """06's criteria as a table at most :data:`MAX_WIDTH` wide (long evidence wraps inside its cell), then the
    count; HTML: the same rows with the result coloured (green PASS, red FAIL, grey n/a)."""
    crit: Criteria = getattr(verification, "criteria", verification)
    rows = [(c.status, c.name, c.evidence) for c in crit.items]
    text_rows = [(status, name, evidence.replace("; ", ";\n")) for status, name, evidence in rows]
    n_pass = sum(c.status == PASS for c in crit.items)
    n_na = sum(c.status == NA for c in crit.items)
    summary = f"{n_pass} passed, {len(crit.failed)} failed, {n_na} not applicable"
    text = wrapped_table(text_rows, ["result", "criterion", "evidence"], CRITERIA_WIDTHS, title=crit.title)
    text += "\n" + summary
    cells = "".join(
        f'<tr><td style="color:{STATUS_COLOURS.get(s, "inherit")};font-weight:bold;text-align:left">{html.escape(s)}'
        f'</td><td style="text-align:left">{html.escape(n)}</td><td style="text-align:left">{html.escape(e)}</td></tr>'
        for s, n, e in rows
    )
    page = (
        f"<div><b>{html.escape(crit.title)}</b>"
        f'<table style="table-layout:fixed;width:100%;max-width:{MAX_WIDTH}ch;font-size:12px">'
        '<colgroup><col style="width:8%"><col style="width:34%"><col style="width:58%"></colgroup>'
        "<thead><tr><th style='text-align:left'>result</th><th style='text-align:left'>criterion</th>"
        f"<th style='text-align:left'>evidence</th></tr></thead><tbody>{cells}</tbody></table>"
        f"<p>{html.escape(summary)}</p></div>"
    )
    return Shown(text, page, interactive=interactive)


def criteria_rows(text: str) -> dict[str, tuple[str, str]]:
    """Read a :func:`criteria_view` table back: criterion -> (result, evidence), wrapped cells joined again."""
    rows: list[list[str]] = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not line.startswith("| ") or len(cells) != 3:
            continue
        if cells[0] in (PASS, FAIL, NA):
            rows.append(cells)
        elif not cells[0] and rows:
            rows[-1][1] = f"{rows[-1][1]} {cells[1]}".strip()
            rows[-1][2] = f"{rows[-1][2]} {cells[2]}".strip()
    return {name: (status, evidence) for status, name, evidence in rows}


def show_nccl_lines(audit: Any, limit: int = 12) -> Shown:
    """The NCCL log lines the transport audit quoted for its findings (None: no NCCL in this run)."""
    if audit is None:
        return Shown("no NCCL lines: the ranks ran on CPU and talk through gloo, which prints no transport lines")
    out = [f"NCCL transport audit: {'PASS' if audit.ok else 'FAIL'} ({audit.verdict}), expected {audit.expected}"]
    out += textwrap.wrap(audit.summary, MAX_WIDTH, initial_indent="  ", subsequent_indent="  ")
    shown = 0
    for finding in audit.findings:
        head = f"[{finding.severity.upper()}] {finding.code}: {finding.message}"
        out += textwrap.wrap(head, MAX_WIDTH, subsequent_indent="    ")
        for evidence in finding.evidence:
            if shown >= limit:
                break
            out.append(fit(f"    > {evidence.text}"))
            shown += 1
    text = "\n".join(out)
    return Shown(text, _pre(text, lambda line: "#cf222e" if line.startswith("[FAIL]") else None))


# --------------------------------------------------------------------------------------------------------------
# 05: the live view of training
# --------------------------------------------------------------------------------------------------------------


class QuietView:
    """What :func:`live_view` returns without a widget front end: accepts the calls, shows nothing (the train
    step prints its own plain step lines)."""

    enabled = False

    def __init__(self) -> None:
        self.history: list[dict[str, Any]] = []

    def update(self, metrics: dict[str, Any]) -> None:
        self.history.append(dict(metrics))

    def close(self) -> None:
        return None


class LiveView(QuietView):
    """Loss per step (an SVG line, eval loss dashed when reported), the last step's figures and a
    ``tqdm.auto`` progress bar, in one widget box updated by :meth:`update`."""

    enabled = True

    def __init__(self, total: int | None = None):
        super().__init__()
        import ipywidgets
        from IPython.display import display
        from tqdm.auto import tqdm as auto_tqdm

        self.plot = ipywidgets.HTML(_svg_plot([], []))
        self.figures = ipywidgets.HTML("waiting for the first step...")
        try:
            self.bar = auto_tqdm(total=total, desc="train steps", unit="step", display=False)
            children = [self.bar.container, self.figures, self.plot]
        except (TypeError, KeyError):  # a tqdm without the notebook variant: it draws itself
            self.bar = auto_tqdm(total=total, desc="train steps", unit="step")
            children = [self.figures, self.plot]
        self.box = ipywidgets.VBox(children)
        self.box.add_class("raytrain-live-view")  # what a browser (and the browser test) looks for
        display(self.box)

    def update(self, metrics: dict[str, Any]) -> None:
        super().update(metrics)
        step = int(metrics.get("step", len(self.history)))
        total = metrics.get("steps") or metrics.get("total")
        if len(self.history) == 1:  # the bar's clock starts at the first step, not at the job's submission
            self.bar.reset(total=int(total) if total else self.bar.total)
        if total and not self.bar.total:
            self.bar.total = int(total)
        self.bar.n = step
        self.bar.set_postfix(loss=f"{metrics.get('loss', float('nan')):.4f}", refresh=False)
        self.bar.refresh()
        losses = [(int(m.get("step", i + 1)), float(m["loss"])) for i, m in enumerate(self.history) if "loss" in m]
        evals = [
            (int(m.get("step", i + 1)), float(m["eval_loss"])) for i, m in enumerate(self.history) if "eval_loss" in m
        ]
        self.plot.value = _svg_plot(losses, evals)
        self.figures.value = html.escape(metrics_line(metrics))

    def close(self) -> None:
        self.bar.close()


def metrics_line(metrics: dict[str, Any]) -> str:
    """``step 3/8: loss 6.9480 | 0.044 s/step | 5,867 tokens/s`` (eval loss when reported)."""
    total = metrics.get("steps") or metrics.get("total")
    step = f"{metrics.get('step', '?')}" + (f"/{total}" if total else "")
    parts = [f"step {step}: loss {metrics.get('loss', float('nan')):.4f}"]
    if "eval_loss" in metrics:
        parts.append(f"eval loss {metrics['eval_loss']:.4f}")
    if "step_time_s" in metrics:
        parts.append(f"{metrics['step_time_s']:.3f} s/step")
    if "tokens_per_s" in metrics:
        parts.append(f"{metrics['tokens_per_s']:,.0f} tokens/s")
    return " | ".join(parts)


def _svg_plot(
    losses: list[tuple[int, float]], evals: list[tuple[int, float]], width: int = 420, height: int = 160
) -> str:
    """A small line chart of loss (solid) and eval loss (dashed) against step, as inline SVG."""
    points = losses + evals
    if not points:
        return (
            f'<svg width="{width}" height="{height}"><text x="10" y="20" font-size="12">loss: no step yet</text></svg>'
        )
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    x0, x1 = min(xs), max(max(xs), min(xs) + 1)
    y0, y1 = min(ys), max(ys)
    pad = (y1 - y0) * 0.1 or 0.05
    y0, y1 = y0 - pad, y1 + pad

    def coords(series: list[tuple[int, float]]) -> str:
        return " ".join(
            f"{40 + (x - x0) / (x1 - x0) * (width - 50):.1f},{10 + (y1 - y) / (y1 - y0) * (height - 30):.1f}"
            for x, y in series
        )

    lines = [f'<polyline fill="none" stroke="#1f77b4" stroke-width="2" points="{coords(losses)}"/>']
    if evals:
        lines.append(f'<polyline fill="none" stroke="#ff7f0e" stroke-dasharray="4" points="{coords(evals)}"/>')
    labels = (
        f'<text x="2" y="14" font-size="10">{y1:.3f}</text><text x="2" y="{height - 20}" font-size="10">{y0:.3f}</text>'
        f'<text x="40" y="{height - 4}" font-size="10">step {x0}</text>'
        f'<text x="{width - 60}" y="{height - 4}" font-size="10">step {max(xs)}</text>'
    )
    return f'<svg width="{width}" height="{height}">{labels}{"".join(lines)}</svg>'


def live_view(total: int | None = None, *, interactive: bool | None = None) -> QuietView:
    """A progress sink for the training step: ``update(metrics)`` per step (keys: step, steps (the total), loss,
    step_time_s, tokens_per_s, optional eval_loss), ``close()`` at the end. With a widget front end it draws a
    live loss plot, the step's tokens/s and a ``tqdm.auto`` bar; otherwise it shows nothing."""
    if interactive_frontend(interactive):
        return LiveView(total)
    return QuietView()


# --------------------------------------------------------------------------------------------------------------
# The settings form
# --------------------------------------------------------------------------------------------------------------

#: The settings the form offers (flat names), most often changed first.
FORM_FIELDS = (
    "target",
    "run_name",
    "model_preset",
    "steps",
    "seq_len",
    "batch_size",
    "learning_rate",
    "num_workers",
    "checkpoint_every",
    "region",
    "gpu_node_type",
    "gpu_node_count",
    "gpu_az",
    "storage_path",
)


def read_overrides(path: str | Path) -> dict[str, Any]:
    """The flat-named settings an override file sets ({} when it does not exist); dotted keys are flattened."""
    p = Path(path)
    if not p.is_file():
        return {}
    doc = yaml.safe_load(p.read_text()) or {}
    if not isinstance(doc, dict):
        raise ConfigError(f"{p}: expected `name: value` lines. Fix: rewrite it or delete it")
    out: dict[str, Any] = {}
    for key, value in doc.items():
        if isinstance(value, dict) and key in config.GROUPS:
            out.update({leaf: v for leaf, v in value.items()})
        else:
            out[config.resolve_key(str(key))[1]] = value
    return out


def validate_overrides(path: str | Path, values: dict[str, Any], env_file: str | None = None) -> list[str]:
    """Problems (one line each, naming the field and the fix) of ``values`` written as ``path``; [] = valid.

    The values are written to a file of the same name in a temporary folder and loaded exactly as
    ``override_files`` would load them, so the messages are :mod:`core.config`'s own.
    """
    with tempfile.TemporaryDirectory(prefix="raytrain-form-") as tmp:
        trial = Path(tmp) / Path(path).name
        trial.write_text(yaml.safe_dump(values, sort_keys=False))
        try:
            config.load(env_file, files=[trial])
        except ConfigError as e:
            lines = [line.strip().removeprefix("- ") for line in str(e).splitlines()]
            return [line for line in lines if line and not line.startswith("invalid settings")] or [str(e)]
    return []


def save_overrides(path: str | Path, values: dict[str, Any], env_file: str | None = None) -> list[str]:
    """Validate, then write ``values`` to ``path`` (only when valid); returns the problems ([] = saved)."""
    problems = validate_overrides(path, values, env_file)
    if not problems:
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        header = "# Overrides of env.yaml for this run (written by the settings form; edit freely).\n"
        p.write_text(header + yaml.safe_dump(values, sort_keys=False))
    return problems


def settings_table(settings: Settings, path: str | Path) -> Shown:
    """The form's settings: value and where it comes from (the text shown without a widget front end)."""
    flat, where = settings.flat(), config.sources(settings)
    dotted = {leaf: f"{group}.{leaf}" if group else leaf for leaf, (group, _) in config.FLAT_FIELDS.items()}
    rows = [(name, _short(flat[name]), where.get(dotted[name], "default")) for name in FORM_FIELDS if name in flat]
    exists = Path(path).is_file()
    title = f"settings of this run (override file {path}: {'present' if exists else 'none yet'})"
    text = wrapped_table(rows, ["setting", "value", "from"], (18, 36, 36), title=title)
    return Shown(text, _pre(text))


def _short(value: Any) -> str:
    return '""' if value == "" else str(value)


#: The override file the settings form writes when the run names none.
DEFAULT_OVERRIDE_FILE = "my-settings.yaml"


def settings_form(
    path: str | Path | Sequence[str] | None, settings: Settings | None = None, *, interactive: bool | None = None
) -> Any:
    """A form over :data:`FORM_FIELDS` that writes ``path`` (an override file: the notebook's ``override_files``,
    its first one when several, or :data:`DEFAULT_OVERRIDE_FILE` when None) after validating it; errors show next
    to their field. Without a widget front end: the settings table (:func:`settings_table`)."""
    if path is None or (not isinstance(path, (str, Path)) and not path):
        path = DEFAULT_OVERRIDE_FILE
    elif not isinstance(path, (str, Path)):
        path = list(path)[0]
    settings = settings or config.load()
    if not interactive_frontend(interactive):
        return settings_table(settings, path)
    return SettingsForm(path, settings).box


class SettingsForm:
    """The ipywidgets form of :func:`settings_form`."""

    def __init__(self, path: str | Path, settings: Settings):
        import ipywidgets

        self.path, self.settings = Path(path), settings
        self.env_file = config.loaded_env_file(settings)
        current = {**settings.flat(), **read_overrides(path)}
        self.inputs: dict[str, Any] = {}
        self.errors: dict[str, Any] = {}
        rows = []
        for name in FORM_FIELDS:
            widget = _input_widget(ipywidgets, name, current.get(name))
            self.inputs[name] = widget
            self.errors[name] = ipywidgets.HTML("")
            rows.append(ipywidgets.HBox([widget, self.errors[name]]))
        self.status = ipywidgets.HTML(f"override file: <code>{html.escape(str(self.path))}</code>")
        button = ipywidgets.Button(description="validate and save", button_style="primary")
        button.on_click(lambda _button: self.save())
        self.box = ipywidgets.VBox([*rows, button, self.status])
        self.box.add_class("raytrain-settings-form")

    def values(self) -> dict[str, Any]:
        """The fields whose value differs from the settings without the file (what the file must hold)."""
        base = self.settings.flat()
        out = {}
        for name, widget in self.inputs.items():
            value = widget.value
            if isinstance(base.get(name), int) and not isinstance(base.get(name), bool) and isinstance(value, str):
                value = config.coerce_scalar(value)
            if value != base.get(name):
                out[name] = value
        return out

    def save(self) -> list[str]:
        problems = save_overrides(self.path, self.values(), self.env_file)
        for name, label in self.errors.items():
            mine = [p for p in problems if _names_field(p, name)]
            label.value = "".join(f'<span style="color:#cf222e">{html.escape(p)}</span><br>' for p in mine)
        if problems:
            self.status.value = "<span style='color:#cf222e'>not saved: " + "<br>".join(map(html.escape, problems))
        else:
            self.status.value = (
                f"saved <code>{html.escape(str(self.path))}</code>: set <code>override_files = "
                f"'{html.escape(str(self.path))}'</code> in the parameters cell, then run the notebook again"
            )
        return problems


def _names_field(problem: str, name: str) -> bool:
    head = problem.split(" ", 1)[0].split("=")[0]
    return head == name or head.endswith(f".{name}") or f"({name})" in problem.split(":")[0]


def _input_widget(ipywidgets, name: str, value: Any):
    group, leaf = config.FLAT_FIELDS[name]
    annotation = config.field_annotation(group, leaf)
    choices = [str(a) for a in get_args(annotation)] if get_origin(annotation) is Literal else []
    if name == "model_preset":
        choices = list(config.PRESETS)
    style = {"description_width": "140px"}
    layout = ipywidgets.Layout(width="420px")
    if choices and str(value) in choices:
        return ipywidgets.Dropdown(options=choices, value=str(value), description=name, style=style, layout=layout)
    if isinstance(value, bool):
        return ipywidgets.Checkbox(value=value, description=name, style=style)
    if isinstance(value, int):
        return ipywidgets.IntText(value=value, description=name, style=style, layout=layout)
    if isinstance(value, float):
        return ipywidgets.FloatText(value=value, description=name, style=style, layout=layout)
    return ipywidgets.Text(value=str(value), description=name, style=style, layout=layout)


__all__ = [
    "CRITERIA_WIDTHS",
    "DEFAULT_OVERRIDE_FILE",
    "FORM_FIELDS",
    "MANIFEST_NAMES",
    "MAX_WIDTH",
    "LiveView",
    "QuietView",
    "SettingsForm",
    "Shown",
    "abridge",
    "cost_note",
    "criteria_rows",
    "criteria_view",
    "equivalent_commands",
    "fit",
    "interactive_frontend",
    "key_lines",
    "live_view",
    "metrics_line",
    "read_overrides",
    "resolve",
    "save_overrides",
    "settings_form",
    "settings_table",
    "show_manifest",
    "show_nccl_lines",
    "show_source",
    "validate_overrides",
    "wrapped_table",
]


def efficiency(run: Any) -> Shown:
    """05: the batch and kernels the job ran with, and each rank's model FLOPs utilisation (GPU workers)."""
    cfg = getattr(run, "config", None) or {}
    mfu = [r.get("mfu") for r in getattr(run, "ranks", None) or []]
    per_rank = ", ".join(f"{m:.0%}" for m in mfu) if mfu and all(m is not None for m in mfu) else "n/a (CPU workers)"
    return Shown(f"batch {cfg.get('batch_size')} per worker, kernels {ran_kernels(run)}; MFU per rank: {per_rank}")
