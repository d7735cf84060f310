"""A local stand-in for the Kubernetes API of an EKS cluster (see server.py).

``from tests.fakes.k8s_standin import standin, StandIn, SCENARIOS``;
``python -m tests.fakes.k8s_standin.server --help``.
"""

__all__ = ["SCENARIOS", "StandIn", "standin", "ray_worker_logs"]


def __getattr__(name):  # lazy, so that `python -m tests.fakes.k8s_standin.server` imports server.py only once
    if name in __all__:
        from . import server

        return getattr(server, name)
    raise AttributeError(name)
