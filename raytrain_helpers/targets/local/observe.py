"""Watching the job on local (05, 07): the head's dashboard on 127.0.0.1 with the cluster's token, and each
raylet's Prometheus metrics page.

Ray's head writes the metrics address of every alive node to ``prom_metrics_service_discovery.json`` in its session
folder (Prometheus's file-based discovery, ``PrometheusServiceDiscoveryWriter`` in Ray 2.58's
``ray/_private/metrics_agent.py``), refreshed every few seconds: the addresses come from there. There is no EFA here.
"""

from __future__ import annotations

import contextlib
import json
import urllib.request
from collections.abc import Iterator

from ...core.settings import Settings
from ..base import DashboardAccess
from .cluster_state import temp_root, token_path
from .raylets import status

#: Ray's discovery file, in the head's ``session_latest`` folder (``ray_constants.PROMETHEUS_SERVICE_DISCOVERY_FILE``).
DISCOVERY_FILE = "prom_metrics_service_discovery.json"


def read_token(settings: Settings) -> str | None:
    """The cluster's token (the 0600 file ``up`` wrote), or None where the cluster asks for none."""
    if settings.local.auth_mode != "token":
        return None
    try:
        return token_path(settings).read_text().strip() or None
    except OSError:
        return None


@contextlib.contextmanager
def dashboard(settings: Settings) -> Iterator[DashboardAccess]:
    """The head's dashboard on 127.0.0.1 and the token its login asks for (nothing to open or close)."""
    info = status(settings)
    if not info.running:
        raise RuntimeError("the local Ray cluster is not running. Fix: run 02_cluster (or `raytrain-tutorial up`)")
    steps = [("open in your browser (this machine only)", info.dashboard_url)]
    if settings.local.auth_mode == "token":
        steps.append(
            (
                "paste the token at 'Authentication Token Required' (a file only you can read; copy it, never "
                "print it in a shared notebook)",
                str(token_path(settings)),
            )
        )
    yield DashboardAccess(url=info.dashboard_url, token=read_token(settings), steps=steps)


def metrics_addresses(settings: Settings) -> list[str]:
    """The ``host:port`` of every metrics page Ray's head lists (nodes, the dashboard's, the autoscaler's)."""
    path = temp_root(settings) / "head" / "session_latest" / DISCOVERY_FILE
    try:
        groups = json.loads(path.read_text())
    except (OSError, ValueError):
        return []
    return sorted({t for g in groups if isinstance(g, dict) for t in g.get("targets") or []})


def node_metrics(settings: Settings) -> dict[str, str]:
    """Each metrics page the head lists, by address; an address that does not answer is left out (the steps keep
    the pages that carry node figures)."""
    out: dict[str, str] = {}
    for address in metrics_addresses(settings):
        try:
            with urllib.request.urlopen(f"http://{address}/metrics", timeout=5) as r:  # noqa: S310 - the cluster's own
                out[address] = r.read().decode("utf-8", errors="replace")
        except OSError:
            continue
    return out


def efa_counters(settings: Settings) -> dict[str, dict[str, int]]:
    """No EFA on this machine: no counters."""
    return {}


__all__ = ["DISCOVERY_FILE", "dashboard", "efa_counters", "metrics_addresses", "node_metrics", "read_token"]
