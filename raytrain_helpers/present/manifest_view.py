"""One manifest as the aws target renders it from the settings (:func:`show_manifest`; long plain lists abridged)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..core.settings import Settings
from ..plan import eksctl, plugins, raycluster, render
from .shown import Shown, pre_html

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
    return Shown(text, pre_html(text, lambda line: "#6a737d" if line.lstrip().startswith("#") else None))
