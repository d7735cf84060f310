"""How the KubeRay operator will probe the Ray containers, from KUBERAY_VERSION and the spec's ``rayVersion``.

The operator adds a liveness and a readiness probe to every Ray container that has none. Which kind it adds
(checked in github.com/ray-project/kuberay, 2026-12-04, docs/pins.md):

* KubeRay v1.4.0 (tag commit 279b9f0): always an exec probe, ``bash -c "wget ... http://localhost:52365/
  api/local_raylet_healthz | grep success"`` (and the head also ``.../8265/api/gcs_healthz``):
  ``ray-operator/controllers/ray/common/pod.go`` ``initLivenessAndReadinessProbe`` with
  ``utils.BaseWgetHealthCommand``. An image without ``wget`` never becomes Ready, and the Ray Train DLC is not
  documented to carry it.
* KubeRay v1.6.0 (tag commit 3fe72c3, change 3ac2ffa "Use HTTP health check when possible", #4448) and v1.7.0
  (tag commit 59d663a): ``supportsUnifiedHealthCheck(spec.rayVersion)`` is true from Ray 2.53.0, and then both
  probes are native ``httpGet`` probes of ``/api/healthz`` on the dashboard agent's port (52365): nothing runs
  inside the container. An empty or unparsable ``rayVersion`` falls back to the ``wget`` probes.

So the RayCluster must say ``rayVersion`` (the image's Ray, RAY_VERSION) and the operator must be 1.6 or newer.
"""

from __future__ import annotations

import re

from ..core.settings import Settings

#: The first KubeRay release whose operator probes Ray >= NATIVE_PROBES_RAY over HTTP.
NATIVE_PROBES_KUBERAY = (1, 6, 0)
#: The first Ray version KubeRay gives native HTTP probes (``/api/healthz`` of the dashboard agent).
NATIVE_PROBES_RAY = (2, 53, 0)


def version_tuple(text: str) -> tuple[int, ...] | None:
    """``2.58.0`` -> (2, 58, 0); None when it does not start with numbers (as KubeRay's ParseGeneric fails)."""
    m = re.match(r"^v?(\d+)\.(\d+)(?:\.(\d+))?", str(text or "").strip())
    if not m:
        return None
    return tuple(int(x or 0) for x in m.groups())


def probe_kind(kuberay_version: str, ray_version: str) -> str:
    """``http`` (native probes, nothing runs in the container) or ``wget`` (exec probes that need wget)."""
    kuberay, ray = version_tuple(kuberay_version), version_tuple(ray_version)
    if kuberay is None or ray is None:
        return "wget"
    return "http" if kuberay >= NATIVE_PROBES_KUBERAY and ray >= NATIVE_PROBES_RAY else "wget"


def probe_problems(spec: dict, settings: Settings) -> list[str]:
    """[] when the operator will probe the Ray containers of this RayCluster spec over HTTP; else the fix."""
    kuberay = settings.versions.kuberay_version
    ray_version = str(spec.get("rayVersion") or "")
    if probe_kind(kuberay, ray_version) == "http":
        return []
    if version_tuple(kuberay) is None or version_tuple(kuberay) < NATIVE_PROBES_KUBERAY:
        return [
            f"KubeRay {kuberay} probes the Ray containers by running `wget` inside them, which the DLC image may "
            f"lack (the head would never become Ready). Fix: versions.kuberay_version (KUBERAY_VERSION) 1.7.0: "
            f"from 1.6.0 the probes are native HTTP for rayVersion >= "
            f"{'.'.join(map(str, NATIVE_PROBES_RAY))}"
        ]
    return [
        f"spec.rayVersion = {ray_version!r}: KubeRay {kuberay} probes with `wget` inside the Ray containers unless "
        f"rayVersion is {'.'.join(map(str, NATIVE_PROBES_RAY))} or newer. Fix: rayVersion = RAY_VERSION, the "
        f"image's Ray ({settings.versions.ray_version})"
    ]


__all__ = ["NATIVE_PROBES_KUBERAY", "NATIVE_PROBES_RAY", "probe_kind", "probe_problems", "version_tuple"]
