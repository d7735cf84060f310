"""The ``ray job`` commands steps 05 and 07 stand for, on any target: each target gives the Jobs API address (and,
on aws, the port-forward that opens it) and the environment that switches its fast transport off.

Used by each target's ``equivalent_commands`` (:mod:`.aws.commands`, :mod:`.local.commands`); nothing here runs.
"""

from __future__ import annotations

import json
import shlex
from typing import Any

from ..core.config import Settings
from ..core.constants import ENTRYPOINT_MODULE

#: (purpose, command) pairs, in the order a person would type them.
Commands = list[tuple[str, str]]


def quote(value: Any) -> str:
    return shlex.quote(str(value))


def train_commands(settings: Settings, address: str, first: Commands) -> Commands:
    """05: submit the job with the code as working_dir, follow its log, read its status."""
    env = {"NCCL_DEBUG": settings.nccl.debug, **{k: str(v) for k, v in settings.nccl.env.items()}}
    runtime_env: dict[str, Any] = {"env_vars": env}
    if settings.train.extra_pip:
        runtime_env["pip"] = list(settings.train.extra_pip)
    sid, src = f"raytrain-{settings.run_name}-MARKER", f"runs/{settings.run_name}/job_src/MARKER"
    return [
        *first,
        (
            "submit the job (the code travels as working_dir)",
            f"ray job submit --address {address} --submission-id {sid} "
            f"--working-dir {src} --runtime-env-json {quote(json.dumps(runtime_env))} "
            f"-- python -m {ENTRYPOINT_MODULE} --config job_config.json",
        ),
        ("follow its log", f"ray job logs --address {address} --follow {sid}"),
        (
            "its status, and every job of the cluster",
            f"ray job status --address {address} {sid}; ray job list --address {address}",
        ),
    ]


def benchmark_commands(settings: Settings, address: str, first: Commands, forced: dict[str, str]) -> Commands:
    """07: the same job with the fast transport switched off (``forced``: the variables that do it here)."""
    env = json.dumps({"env_vars": {"NCCL_DEBUG": settings.nccl.debug, **forced}})
    return [
        *first,
        (
            "the same job with the fast transport switched off",
            f"ray job submit --address {address} --working-dir runs/{settings.run_name}/job_src/MARKER "
            f"--runtime-env-json {quote(env)} -- python -m {ENTRYPOINT_MODULE} --config job_config.json",
        ),
        (
            "audit a run's logs against the transport it was meant to use",
            "raytrain-tutorial audit WORKER_LOGS --expect socket",
        ),
    ]


__all__ = ["Commands", "benchmark_commands", "quote", "train_commands"]
