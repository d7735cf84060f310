"""The Ray Train image pulled on each GPU node as soon as it joins, and each node's real pull time.

* :func:`render_prepull`: the DaemonSet of ``manifests/image-prepull.yaml.j2`` (step 03 applies it first, 04 deletes
  it once the Ray pods run). The EKS AL2023 AMI's kubelet already pulls images in parallel (awslabs/amazon-eks-ami
  ``nodeadm/internal/kubelet/config.go``: ``serializeImagePulls: false`` in the kubelet configuration nodeadm
  writes, ``maxParallelImagePulls`` unset, read 2026-12-06 at 81fec2e8): what was missing is a pod asking for the
  image before 04 schedules the Ray pods.
* :func:`pulled_seconds`: the pull time of one kubelet ``Pulled`` event. The kubelet writes
  ``Successfully pulled image "IMAGE" in 1m2.345s (1m2.4s including waiting). Image size: N bytes.`` (kubernetes
  ``pkg/kubelet/images/image_manager.go``, ``EnsureImageExists``; before 1.30 without the size), the durations in
  Go's ``time.Duration`` text (``1h2m3.5s``, ``850ms``); an image already on the node gives ``Container image
  "IMAGE" already present on machine``, which has no pull time.
* :func:`save` / :func:`recorded_minutes`: ``image-pulls.json`` in the run's folder, which ``cost`` (the walkthrough
  estimate) uses in place of its assumed pull time.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from ..core.paths import run_dir, runs_dir
from ..core.settings import Settings
from .plugins import GPU_TOLERATIONS
from .render import render_objects

NAME = "raytrain-image-prepull"
RECORD = "image-pulls.json"
_PULLED = re.compile(r'^Successfully pulled image "(?P<image>[^"]+)" in (?P<pull>[0-9hmsuµn.]+) \(')
_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}


def render_prepull(settings: Settings) -> dict[str, Any]:
    """The pre-pull DaemonSet: the run's image on the GPU nodes (``role: gpu-worker``, their taints tolerated)."""
    (obj,) = render_objects(
        "image-prepull.yaml.j2",
        settings,
        prepull_name=NAME,
        node_selector={"role": "gpu-worker"},
        tolerations=GPU_TOLERATIONS[1:],
    )
    return obj


def go_duration_seconds(text: str) -> float:
    """Seconds of a Go ``time.Duration`` string (``1m2.345s``, ``850ms``, ``2h0m0s``); ValueError otherwise."""
    parts = re.findall(r"([0-9]+(?:\.[0-9]+)?)(h|ms|us|µs|ns|m|s)", text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise ValueError(f"not a Go duration: {text!r}")
    return sum(float(n) * _UNITS[u] for n, u in parts)


def pulled_seconds(message: str, image: str) -> float | None:
    """The pull time in a kubelet ``Pulled`` event's message for ``image``; None for another image, an image
    already present, or a message of another form."""
    m = _PULLED.match(message or "")
    if not m or m.group("image") != image:
        return None
    try:
        return go_duration_seconds(m.group("pull"))
    except ValueError:
        return None


def pull_times(events: list[dict], pods: list[dict], image: str) -> dict[str, float]:
    """{node: seconds} of the first pull of ``image`` on each node, from the ``Pulled`` events of ``pods`` (the
    longest when one node reports several)."""
    node_of = {(p.get("metadata") or {}).get("uid"): (p.get("spec") or {}).get("nodeName") for p in pods}
    out: dict[str, float] = {}
    for ev in events:
        if ev.get("reason") != "Pulled":
            continue
        node = node_of.get((ev.get("involvedObject") or {}).get("uid"))
        seconds = pulled_seconds(ev.get("message", ""), image)
        if node and seconds is not None:
            out[node] = max(seconds, out.get(node, 0.0))
    return out


def save(settings: Settings, times: dict[str, float], *, source: str) -> Path | None:
    """Write (merge into) ``image-pulls.json`` of the run's folder; None when there is nothing to record."""
    if not times:
        return None
    path = run_dir(settings) / RECORD
    old = json.loads(path.read_text()) if path.is_file() else {}
    nodes = {**(old.get("nodes") or {}), **{n: round(s, 3) for n, s in times.items()}}
    doc = {"image": settings.versions.dlc_image, "nodes": nodes, "source": source}
    path.write_text(json.dumps(doc, indent=2) + "\n")
    return path


def recorded_minutes(settings: Settings) -> float | None:
    """The longest recorded pull of the run's image on a GPU node, in minutes (the nodes pull at the same time);
    None when the run's folder has no record for this image (read only: no folder is created)."""
    path = runs_dir(settings) / settings.run_name / RECORD
    if not path.is_file():
        return None
    try:
        doc = json.loads(path.read_text())
    except ValueError:
        return None
    times = [float(v) for v in (doc.get("nodes") or {}).values()]
    if doc.get("image") != settings.versions.dlc_image or not times:
        return None
    return max(times) / 60


__all__ = [
    "NAME",
    "RECORD",
    "go_duration_seconds",
    "pull_times",
    "pulled_seconds",
    "recorded_minutes",
    "render_prepull",
    "save",
]
