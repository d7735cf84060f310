"""The Hugging Face token in the RayCluster: the head and every worker group get ``HF_TOKEN`` from the optional
Secret ``kubernetes.hf_token_secret`` (never a literal value), so that a gated model works everywhere it is read.

The job's driver runs on the head and fetches the model's config and tokenizer there (never its weights); the
workers download the weights into their cache volume. A token that reached only the workers would make the driver
fail on a gated model before any worker started.
"""

from __future__ import annotations

from typing import Any

from ..core.settings import Settings
from .kube_objects import container_of

TOKEN_ENV = "HF_TOKEN"


def token_problems(container: dict[str, Any], where: str, secret: str) -> list[str]:
    """``HF_TOKEN`` in one container: from the optional Secret ``secret`` when one is set, and never a literal."""
    entries = [e for e in container.get("env") or [] if e.get("name") == TOKEN_ENV]
    problems = []
    for e in entries:
        ref = (e.get("valueFrom") or {}).get("secretKeyRef") or {}
        if "value" in e or not ref or ref.get("optional") is not True:
            problems.append(
                f"{where}: {TOKEN_ENV} must come from an optional secretKeyRef, never a literal value. Fix: "
                f"kubernetes.hf_token_secret names the Secret"
            )
        elif secret and ref.get("name") != secret:
            problems.append(
                f"{where}: {TOKEN_ENV} comes from Secret {ref.get('name')!r}, not kubernetes.hf_token_secret "
                f"{secret!r}. Fix: render the RayCluster again"
            )
    if secret and not entries:
        problems.append(
            f"{where}: no {TOKEN_ENV} from Secret {secret!r} (kubernetes.hf_token_secret): a gated model would fail "
            f"there. Fix: render the RayCluster again (the head and every worker group get it)"
        )
    return problems


def check_hf_token(spec: dict[str, Any], settings: Settings) -> list[str]:
    """The head and every worker group of a RayCluster spec carry ``HF_TOKEN`` as :func:`token_problems` says."""
    secret = settings.kubernetes.hf_token_secret
    groups = [("head", spec.get("headGroupSpec") or {})]
    groups += [(f"worker group {g.get('groupName')!r}", g) for g in spec.get("workerGroupSpecs") or []]
    problems = []
    for where, group in groups:
        pod_spec = (group.get("template") or {}).get("spec") or {}
        problems += token_problems(container_of(pod_spec), where, secret)
    return problems


__all__ = ["TOKEN_ENV", "check_hf_token", "token_problems"]
