"""The commands each step stands for on this machine (``ray``, ``raytrain-tutorial``), with the settings' values.

Shown after the aws path's commands (the path the local cluster stands in for) by ``present.equivalent_commands``;
nothing here runs.
"""

from __future__ import annotations

from ...core.config import Settings
from ...core.constants import LOOPBACK
from ..job_commands import Commands, benchmark_commands, train_commands


def steps_commands(settings: Settings) -> dict[str, Commands]:
    lo = settings.local
    return {
        "capacity": [("this machine's CPUs, memory and GPUs", "nproc; free -g; nvidia-smi -L")],
        "cluster": [
            ("start (or reuse) the head and worker raylets", "raytrain-tutorial up"),
            ("the cluster's nodes and resources", f"ray status --address {LOOPBACK}:{lo.gcs_port}"),
        ],
        "plugins": [("the resources each raylet offers", f"ray status --address {LOOPBACK}:{lo.gcs_port} -v")],
        "kuberay": [
            ("the RayCluster this machine stands in for", "raytrain-tutorial render --target aws --out rendered")
        ],
        "teardown": [("stop the raylets this tutorial started", "raytrain-tutorial down")],
    }


def equivalent_commands(settings: Settings, step: str, forced: dict[str, str] | None = None) -> Commands:
    """This machine's commands of one step (none for 06: its checks are the aws path's); ``forced``: the
    environment that switches the fast transport off (07)."""
    address = f"http://{LOOPBACK}:{settings.local.dashboard_port}"
    if step == "train":
        return train_commands(settings, address, [])
    if step == "benchmark":
        return benchmark_commands(settings, address, [], forced or {})
    return steps_commands(settings).get(step, [])


__all__ = ["equivalent_commands", "steps_commands"]
