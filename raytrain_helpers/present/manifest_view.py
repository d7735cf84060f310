"""One manifest as the aws target renders it from the settings (:func:`show_manifest`; long plain lists abridged,
or only the fields a chapter discusses with the rest folded)."""

from __future__ import annotations

import html
from collections.abc import Callable
from typing import Any

from ..core.settings import Settings
from ..plan import eksctl, plugins, raycluster, render
from ..plan.manifests import helm_documents, render_all
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


#: The Helm releases :func:`show_manifest` shows by name: their values file, headed by the install command.
HELM_RELEASES = {
    "nvidia-device-plugin": plugins.NVIDIA_CHART["release"],
    "efa-device-plugin": plugins.EFA_CHART["release"],
    "kuberay-operator": raycluster.OPERATOR_RELEASE,
}


def _manifest_objects(name: str, settings: Settings) -> list[dict[str, Any]] | str:
    """One named artifact: a list of objects, or YAML text for the eksctl configs and the Helm releases' values
    (they carry comments)."""
    gpu_az, azs = placeholder_azs(settings)
    if name == "eksctl-cluster":
        return eksctl.render_cluster_config(settings, azs=azs, gpu_az=gpu_az)
    if name == "eksctl-gpu-nodegroup":
        subnet = f"<private subnet of the cluster in {gpu_az}>"
        return eksctl.render_gpu_nodegroup_config(settings, gpu_az=gpu_az, subnet_ids=[subnet])
    if name in HELM_RELEASES:
        return dict(helm_documents(settings))[f"helm/{HELM_RELEASES[name]}.values.yaml"]
    builders: dict[str, Callable[[], list[dict[str, Any]]]] = {
        "namespace": lambda: [raycluster.render_namespace(settings)],
        "raycluster": lambda: [raycluster.render_raycluster(settings)],
        "rayjob": lambda: [raycluster.render_rayjob(settings)],
    }
    if name not in builders:
        known = ", ".join(["eksctl-cluster", "eksctl-gpu-nodegroup", *HELM_RELEASES, *builders])
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


def show_manifest(name: str, settings: Settings, *, full: bool = False, keep: list[str] | None = None) -> Shown:
    """One artifact as the aws target renders it from these settings (long plain lists abridged unless
    ``full``). Names: :data:`MANIFEST_NAMES`.

    ``keep``: show only these fields (a key name matches that key at any depth, a dotted path one place, e.g.
    ``spec.template.spec.volumes``) under each object's kind and name; the rest is folded: a collapsed HTML
    block in a widget front end, in plain text a line naming the file that ``raytrain-tutorial render`` writes.
    """
    rendered = _manifest_objects(name, settings)
    if isinstance(rendered, str):
        if keep:
            raise ValueError(
                f"keep= needs a Kubernetes manifest; {name!r} is an eksctl config or Helm values. Fix: leave out keep"
            )
        body = rendered.strip("\n")
        if name.startswith("eksctl-") and (name == "eksctl-gpu-nodegroup" or not settings.aws.gpu_az):
            body += "\n# (AZ and subnet shown as placeholders: step 01 picks the AZ, step 02 reads the subnet ids)"
    else:
        docs = [render.to_yaml(obj if full else abridge(obj)).rstrip("\n") for obj in rendered]
        body = "\n---\n".join(docs)
    text = f"# {name}: rendered from env.yaml (`raytrain-tutorial render --target aws` writes every manifest)\n{body}"
    if not keep or isinstance(rendered, str):
        return Shown(text, pre_html(text, grey_comments))
    return folded(name, settings, rendered, keep, text)


def grey_comments(line: str) -> str | None:
    return "#6a737d" if line.lstrip().startswith("#") else None


def prune(obj: Any, keep: list[str], path: tuple[str, ...] = ()) -> Any:
    """Only the branches of ``obj`` that lead to a kept field (None where none does)."""
    if isinstance(obj, dict):
        out = {}
        for key, value in obj.items():
            here = (*path, str(key))
            if key in keep or ".".join(here) in keep:
                out[key] = value
            else:
                sub = prune(value, keep, here)
                if sub is not None:
                    out[key] = sub
        return out or None
    if isinstance(obj, list):
        items = [p for p in (prune(v, keep, path) for v in obj) if p is not None]
        return items or None
    return None


def manifest_file(settings: Settings, obj: dict[str, Any]) -> str:
    """The file ``raytrain-tutorial render --out manifests`` writes ``obj`` to."""
    for filename, other in render_all(settings, include_alternatives=True):
        if (other.get("kind"), other.get("metadata", {}).get("name")) == (obj["kind"], obj["metadata"]["name"]):
            return f"manifests/{filename}"
    return "manifests/"


def folded(name: str, settings: Settings, objects: list[dict[str, Any]], keep: list[str], full_text: str) -> Shown:
    """The kept fields of each object, and the whole manifest folded away (see :func:`show_manifest`)."""
    docs, files = [], []
    for obj in objects:
        head = {"kind": obj["kind"], "metadata": {"name": obj["metadata"]["name"]}}
        docs.append(render.to_yaml({**head, **(prune(abridge(obj), keep) or {})}).rstrip("\n"))
        files.append(manifest_file(settings, obj))
    shown = "\n---\n".join(docs)
    total, kept = len(full_text.splitlines()), len(shown.splitlines())
    note = f"# ... {total - kept} more lines not shown. The full manifest: `raytrain-tutorial render --out manifests`"
    note += "".join(f"\n#   writes {f}" for f in files)
    text = f"# {name}: the fields discussed below ({', '.join(keep)})\n{shown}\n{note}"
    summary = f"the full {name} manifest ({total} lines)"
    html_text = (
        pre_html(text, grey_comments)
        + f"<details><summary>{html.escape(summary)}</summary>{pre_html(full_text, grey_comments)}</details>"
    )
    return Shown(text, html_text)
