"""Watching the job on aws (05, 07): the Ray dashboard through a port-forward, each Ray pod's metrics page through
the Kubernetes API's pod proxy, and each GPU node's EFA hardware counters read inside its worker pod.

Facts used: KubeRay v1.7.0 gives every Ray container the metrics port 8080, named ``metrics``
(``ray-operator/controllers/ray/utils/constant.go``: ``DefaultMetricsPort``, ``MetricsPortName``), which its
PodMonitors scrape (``config/prometheus/podMonitor.yaml``); Ray's dashboard logs a browser in with the cluster's
token (``POST /api/authenticate`` sets the ``ray-authentication-token`` cookie, ``ray/dashboard/http_server_head.py``
in Ray 2.58); the EFA driver's counters are files under ``/sys/class/infiniband/*/ports/*/hw_counters/``
(:mod:`raytrain_helpers.plan.hardware`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from ....clients import kubernetes as kube
from ....core.constants import DASHBOARD_PORT, LOOPBACK
from ....core.settings import Settings
from ....plan.hardware import EFA_COUNTER_GLOB, parse_efa_counters
from ....plan.kube_objects import name_of, phase_of
from ....plan.raycluster import AUTH_TOKEN_KEY, auth_secret_name
from ...base import DashboardAccess
from ..kuberay.pods import cluster_pods, pod_role
from ..kuberay.raycluster import cluster_token, job_server, worker_pods

#: The Ray containers' metrics port (KubeRay v1.7.0 ``utils.DefaultMetricsPort``).
METRICS_PORT = 8080
#: Prints ``<path> <value>`` for every EFA counter file (nothing where the pod sees no EFA device).
COUNTERS_SCRIPT = f'for f in {EFA_COUNTER_GLOB}; do [ -r "$f" ] && printf "%s %s\\n" "$f" "$(cat "$f")"; done; true'


def dashboard_steps(settings: Settings) -> list[tuple[str, str]]:
    """What a person types to open the dashboard themselves: the port-forward, and the token written to a file only
    they can read (never echoed), to paste into the dashboard's login."""
    k = settings.kubernetes
    secret = auth_secret_name(k.ray_cluster_name)
    return [
        (
            "forward the head's dashboard to this machine (leave it running)",
            f"kubectl -n {k.namespace} port-forward svc/{k.ray_cluster_name}-head-svc "
            f"{DASHBOARD_PORT}:{DASHBOARD_PORT}",
        ),
        (
            "the cluster's token into a file only you can read (never echoed)",
            f"(umask 077; kubectl -n {k.namespace} get secret {secret} -o jsonpath='{{.data.{AUTH_TOKEN_KEY}}}' "
            "| base64 -d > ~/.ray-dashboard-token)",
        ),
        (
            "open in your browser; paste the file's content at 'Authentication Token Required'",
            f"http://{LOOPBACK}:{DASHBOARD_PORT}",
        ),
    ]


@contextlib.contextmanager
def dashboard(settings: Settings) -> Iterator[DashboardAccess]:
    """The head's dashboard through a port-forward (the one the Jobs API uses), with the cluster's token."""
    with job_server(settings) as url:
        yield DashboardAccess(url=url, token=cluster_token(settings), steps=dashboard_steps(settings))


def node_metrics(settings: Settings) -> dict[str, str]:
    """Each running Ray pod's metrics page, by ``<role> <pod>``, through the API server's pod proxy
    (``/api/v1/namespaces/NS/pods/POD:8080/proxy/metrics``; needs ``pods/proxy`` get). A pod that does not answer
    is left out."""
    ns = settings.kubernetes.namespace
    out: dict[str, str] = {}
    with kube.using_client(settings) as api:
        for pod in cluster_pods(api, settings):
            if phase_of(pod) != "Running":
                continue
            path = f"/api/v1/namespaces/{ns}/pods/{name_of(pod)}:{METRICS_PORT}/proxy/metrics"
            try:
                text = kube.request(api, "GET", path, timeout=10.0)
            except kube.K8sError:
                continue
            if isinstance(text, str):
                out[f"{pod_role(pod)} {name_of(pod)}"] = text
    return out


def efa_counters(settings: Settings) -> dict[str, dict[str, int]]:
    """Each running worker pod's EFA counters (its node's devices, as the pod sees ``/sys``), by pod; a pod that
    sees no EFA device gives none and is left out."""
    client = kube.api_client(settings)
    try:
        out: dict[str, dict[str, int]] = {}
        for pod in worker_pods(settings, client=client):
            listing = kube.exec_in_pod(settings, pod, ["sh", "-c", COUNTERS_SCRIPT], client=client, timeout_s=30)
            counters = parse_efa_counters(listing)
            if counters:
                out[pod] = counters
        return out
    finally:
        client.close()


__all__ = ["COUNTERS_SCRIPT", "METRICS_PORT", "dashboard", "dashboard_steps", "efa_counters", "node_metrics"]
