"""The publishers' schemas the tests validate rendered objects against, shipped in ``schemas/`` (their source,
version, licence and date: ``schemas/README.md``). Always there: a missing file is a failure, never a skip."""

from __future__ import annotations

import json
from pathlib import Path

from raytrain_helpers.core.config import VersionSettings

REPO = Path(__file__).resolve().parents[1]
SCHEMAS = REPO / "schemas"
#: The eksctl release whose ClusterConfig schema the rendered configs are validated against.
EKSCTL_SCHEMA_VERSION = "0.230.0"
EKSCTL_SCHEMA = SCHEMAS / "eksctl" / f"v{EKSCTL_SCHEMA_VERSION}" / "schema.json"


def kuberay_crds(kuberay_version: str | None = None) -> Path:
    """The folder of ``ray.io_rayclusters.yaml`` / ``ray.io_rayjobs.yaml`` of a KubeRay release (default: the
    pinned ``versions.kuberay_version``)."""
    version = kuberay_version or VersionSettings().kuberay_version
    folder = SCHEMAS / "kuberay" / f"v{version}"
    files = sorted(folder.glob("ray.io_*.yaml"))
    assert [f.name for f in files] == ["ray.io_rayclusters.yaml", "ray.io_rayjobs.yaml"], (
        f"{folder}: the CRDs of KubeRay v{version} are not in the repository (schemas/README.md says how to add them)"
    )
    return folder


def eksctl_schema() -> dict:
    """eksctl's ClusterConfig JSON schema (draft-07)."""
    return json.loads(EKSCTL_SCHEMA.read_text())
