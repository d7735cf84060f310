"""The training workers' own log files on the ``aws`` target, read inside the worker pods."""

from __future__ import annotations

from ...clients import kubernetes as kube
from ...core.config import Settings
from ..aws_logs import collect_pod_logs
from .kuberay import worker_pods


def worker_logs(settings: Settings, marker: str) -> dict[str, str]:
    """The worker log files of the job with ``marker``, read by exec in every running worker pod, by
    ``"<pod>:<path>"`` (NCCL prints there, not on the driver)."""
    client = kube.api_client(settings)  # one client for the listing and every exec
    try:
        pods = worker_pods(settings, client=client)
        return collect_pod_logs(lambda pod, cmd: kube.exec_in_pod(settings, pod, cmd, client=client), pods, marker)
    finally:
        client.close()
