"""A local stand-in for the Kubernetes API of an EKS cluster (see server.py)."""

from .server import SCENARIOS, StandIn, standin  # noqa: F401
