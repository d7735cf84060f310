"""Which Pod Security Standards level a pod spec meets, read from the spec itself (no cluster).

The checks are the controls of the Kubernetes "Pod Security Standards" page
(kubernetes.io/docs/concepts/security/pod-security-standards/), the ones a pod spec of this tutorial could touch:

* baseline: no host namespaces (``hostNetwork``, ``hostPID``, ``hostIPC``), no privileged container, capabilities
  added only from the baseline list, no ``hostPath`` volume, no ``hostPort``, no ``Unconfined`` seccomp profile,
  ``procMount`` Default;
* restricted, beyond baseline: volumes only of the listed types, ``allowPrivilegeEscalation: false``,
  ``runAsNonRoot: true`` and no ``runAsUser: 0``, a ``RuntimeDefault`` or ``Localhost`` seccomp profile, every
  capability dropped (``ALL``) and none added but ``NET_BIND_SERVICE``.

A pod's field counts where the container does not set its own (``securityContext`` of the pod, then of the
container). Pod Security admission enforces a namespace's level from its ``pod-security.kubernetes.io/enforce``
label; :func:`strictest_level` is the level to put there for the pods that must run in it.
"""

from __future__ import annotations

from typing import Any

LEVELS = ("restricted", "baseline", "privileged")
BASELINE_CAPABILITIES = frozenset(
    "AUDIT_WRITE CHOWN DAC_OVERRIDE FOWNER FSETID KILL MKNOD NET_BIND_SERVICE SETFCAP SETGID SETPCAP SETUID "
    "SYS_CHROOT".split()
)
RESTRICTED_VOLUMES = frozenset(
    "configMap csi downwardAPI emptyDir ephemeral persistentVolumeClaim projected secret".split()
)


def _containers(pod_spec: dict[str, Any]) -> list[dict[str, Any]]:
    return [*(pod_spec.get("initContainers") or []), *(pod_spec.get("containers") or [])]


def _effective(pod_spec: dict[str, Any], container: dict[str, Any], key: str) -> Any:
    own = (container.get("securityContext") or {}).get(key)
    return own if own is not None else (pod_spec.get("securityContext") or {}).get(key)


def baseline_problems(pod_spec: dict[str, Any]) -> list[str]:
    out = [f"{k}: true" for k in ("hostNetwork", "hostPID", "hostIPC") if pod_spec.get(k)]
    out += [f"volume {v.get('name')}: hostPath" for v in pod_spec.get("volumes") or [] if "hostPath" in v]
    for c in _containers(pod_spec):
        sc, name = c.get("securityContext") or {}, c.get("name")
        if sc.get("privileged"):
            out.append(f"container {name}: privileged")
        extra = set((sc.get("capabilities") or {}).get("add") or []) - BASELINE_CAPABILITIES
        if extra:
            out.append(f"container {name}: adds capabilities {', '.join(sorted(extra))}")
        if any(p.get("hostPort") for p in c.get("ports") or []):
            out.append(f"container {name}: hostPort")
        if (sc.get("procMount") or "Default") != "Default":
            out.append(f"container {name}: procMount {sc['procMount']}")
        if ((_effective(pod_spec, c, "seccompProfile") or {}).get("type")) == "Unconfined":
            out.append(f"container {name}: seccompProfile Unconfined")
    return out


def restricted_problems(pod_spec: dict[str, Any]) -> list[str]:
    """What keeps the pod spec from the restricted level (the baseline's problems included)."""
    out = baseline_problems(pod_spec)
    for v in pod_spec.get("volumes") or []:
        kinds = set(v) - {"name"}
        if not kinds <= RESTRICTED_VOLUMES:
            out.append(f"volume {v.get('name')}: type {', '.join(sorted(kinds))}")
    for c in _containers(pod_spec):
        sc, name = c.get("securityContext") or {}, c.get("name")
        if sc.get("allowPrivilegeEscalation") is not False:
            out.append(f"container {name}: allowPrivilegeEscalation is not false")
        if _effective(pod_spec, c, "runAsNonRoot") is not True:
            out.append(f"container {name}: runAsNonRoot is not true")
        if _effective(pod_spec, c, "runAsUser") == 0:
            out.append(f"container {name}: runAsUser 0")
        if ((_effective(pod_spec, c, "seccompProfile") or {}).get("type")) not in ("RuntimeDefault", "Localhost"):
            out.append(f"container {name}: seccompProfile is not RuntimeDefault or Localhost")
        caps = sc.get("capabilities") or {}
        if "ALL" not in (caps.get("drop") or []):
            out.append(f"container {name}: capabilities do not drop ALL")
        if set(caps.get("add") or []) - {"NET_BIND_SERVICE"}:
            out.append(f"container {name}: adds capabilities beyond NET_BIND_SERVICE")
    return out


def strictest_level(pod_specs: list[dict[str, Any]]) -> str:
    """The strictest level every one of ``pod_specs`` meets: ``restricted``, ``baseline`` or ``privileged``."""
    if not any(restricted_problems(p) for p in pod_specs):
        return "restricted"
    return "privileged" if any(baseline_problems(p) for p in pod_specs) else "baseline"


__all__ = [
    "BASELINE_CAPABILITIES",
    "LEVELS",
    "RESTRICTED_VOLUMES",
    "baseline_problems",
    "restricted_problems",
    "strictest_level",
]
