"""The ``aws`` target: EKS created with eksctl, the device plugins, KubeRay, reached through the Kubernetes API.

Exports the names of :mod:`..base` (the Target interface); ``cluster`` and ``capacity`` are the gated ones of
:mod:`.gate` (the preflight runs before anything billable); ``cluster``, ``devices``, ``raycluster`` and
``teardown`` go through :mod:`.shared`, which keeps a workshop attendee (``aws.shared_cluster``) to their
namespace. Credentials come only from the standard boto3 chain (environment, ``AWS_PROFILE``, SSO, instance
role); nothing takes or prints a key.
"""

from __future__ import annotations

from .gate import capacity
from .jobs.defaults import benchmark_variants, expected_transport, job_defaults, where
from .jobs.logs import worker_logs
from .jobs.observe import dashboard, efa_counters, node_metrics
from .jobs.verify import infra_criteria
from .kuberay.raycluster import job_server
from .parts import (
    NODEGROUP_ONLY_DOWN,
    STANDS_IN_FOR,
    WORKERS_USE_THIS_ENVIRONMENT,
    after_failure,
    billing,
    cluster_missing,
    equivalent_commands,
    kuberay_action,
    memory_plan,
    plugins_action,
    worker_node_count,
)
from .preflight import preflight
from .workshop.access import attendee_access
from .workshop.attendee import cluster, devices, raycluster, teardown
from .workshop.facilitator import attendee_state, create_namespace, remove_namespace
from .workshop.storage import attendee_storage

NAME = "aws"


def workshop_host(attendees):  # noqa: ANN001, ANN201 - the Target interface's signature
    """Attendees' clusters run on EKS, not on the host: the hand-out plans the shared cluster instead."""
    return None


__all__ = [
    "NAME",
    "STANDS_IN_FOR",
    "NODEGROUP_ONLY_DOWN",
    "WORKERS_USE_THIS_ENVIRONMENT",
    "where",
    "preflight",
    "capacity",
    "cluster",
    "devices",
    "raycluster",
    "job_server",
    "job_defaults",
    "expected_transport",
    "worker_logs",
    "infra_criteria",
    "benchmark_variants",
    "teardown",
    "attendee_state",
    "create_namespace",
    "remove_namespace",
    "attendee_storage",
    "attendee_access",
    "workshop_host",
    "worker_node_count",
    "plugins_action",
    "kuberay_action",
    "cluster_missing",
    "memory_plan",
    "equivalent_commands",
    "billing",
    "after_failure",
    "dashboard",
    "node_metrics",
    "efa_counters",
]
