"""Ray's state API over HTTP (the dashboard's ``/api/v0``), at the address the Jobs API answers on: a local head,
or a port-forward to a KubeRay head. Token authentication as :func:`.rayjobs.auth_headers` gives it."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

from .rayjobs import auth_headers


def get_json(url: str, timeout: float = 5.0) -> Any:
    req = urllib.request.Request(url, headers=auth_headers())
    with urllib.request.urlopen(req, timeout=timeout) as r:  # noqa: S310 - the cluster's own dashboard
        return json.loads(r.read().decode())


def list_nodes(dashboard_url: str) -> list[dict[str, Any]]:
    """Alive and dead nodes (GET /api/v0/nodes): ``node_id``, ``state``, ``is_head_node``, ``resources_total``..."""
    data = get_json(f"{dashboard_url}/api/v0/nodes?limit=1000&detail=1")
    return data["data"]["result"]["result"]


def alive_node_ids(dashboard_url: str) -> list[str]:
    """The IDs of the nodes alive now, sorted: a new cluster, or a replaced pod or raylet, has new ones."""
    return sorted(n["node_id"] for n in list_nodes(dashboard_url) if n.get("state") == "ALIVE")
