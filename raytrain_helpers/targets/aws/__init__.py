"""The ``aws`` target: EKS created with eksctl, the device plugins, KubeRay, reached through the Kubernetes API.

Exports the names of :mod:`..base` (the Target interface). Credentials come only from the standard boto3 chain
(environment, ``AWS_PROFILE``, SSO, instance role); nothing takes or prints a key.
"""

from __future__ import annotations

from .capacity_blocks import capacity
from .eks import cluster, teardown
from .identity import infra_criteria, raycluster
from .jobs import benchmark_variants, expected_transport, job_defaults, where
from .kuberay import job_server
from .logs import worker_logs
from .plugins import devices

NAME = "aws"

__all__ = [
    "NAME",
    "where",
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
]
