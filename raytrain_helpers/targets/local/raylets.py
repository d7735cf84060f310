"""The ``local`` target: a real Ray cluster on this machine, shaped like the EKS reference.

* a **head** raylet that takes no training work (``--num-cpus 0 --num-gpus 0``, as the head pod's
  ``num-gpus: "0"``), running the GCS, the dashboard and the Ray Jobs server on 127.0.0.1;
* N **worker** raylets standing in for the GPU nodes, each with its own ``--temp-dir`` (a shared temp dir
  makes concurrent runtime-env setup crash), its share of the visible GPUs (``CUDA_VISIBLE_DEVICES``),
  and a ``train_slot`` custom resource: training workers ask for one, so they land only on worker nodes.

``up`` is idempotent: a running cluster of the same shape is reused; a half-started one is stopped
before an error is raised, so nothing is left behind. ``down`` stops only this cluster's processes.

This module holds the cluster's life: :func:`up` (start, reuse, or repair a running one), :func:`down` and
:func:`teardown`. The shape, state file, status and auth token are in :mod:`.cluster_state`; ``ray start`` for
each node in :mod:`.raylet_start`; stopping the recorded processes, the GCS last, in :mod:`.stopping`. Their
names are exported here as well.
"""

from __future__ import annotations

import sys
from typing import Any

from ...core.config import Settings
from ...core.constants import LOOPBACK
from ...core.tables import table
from .cluster_state import (
    STATE_FILE,
    LocalClusterError,
    LocalClusterInfo,
    auth_env,
    cluster_python,
    desired_shape,
    exposure_rows,
    new_auth_token,
    own_root,
    read_state,
    session_log_dirs,
    shape_str,
    state_path,
    status,
    token_path,
)
from .raylet_start import (
    HEALTH_CHECK_PERIOD_MS,
    RAY_START_GAVE_UP,
    SLOW_AGENTS,
    START_ATTEMPTS,
    RayletLog,
    Recorder,
    base_env,
    check_ports,
    named_nodes,
    start_parallelism,
    start_raylets,
    start_worker_node,
    wait_until,
)
from .stopping import our_pids, recorded, stop_gcs_last, stop_recorded


def up(settings: Settings, plan: bool = False, timeout_s: float = 120.0) -> LocalClusterInfo:
    """Start the head and the worker raylets, or reuse a running cluster of the same shape (idempotent).

    ``plan`` only says what would start. A failed start stops everything it started: nothing is left behind.
    """
    shape = desired_shape(settings)
    own_root(settings, create=False)
    current = status(settings)
    if current.running:
        return reuse(settings, current, shape)
    loc = settings.local
    if plan:
        check_ports(settings)
        return LocalClusterInfo(
            False,
            f"{LOOPBACK}:{loc.gcs_port}",
            f"http://{LOOPBACK}:{loc.dashboard_port}",
            action="plan",
            shape=shape,
            message=f"would start a head (num-cpus 0, num-gpus 0) and {shape_str(shape)}",
        )
    stop_recorded(settings)  # leftovers of a crashed cluster: only the processes its state file records
    check_ports(settings)  # before anything is created
    own_root(settings, create=True)
    env = base_env(settings)
    env.update(new_auth_token(settings))
    from tqdm import tqdm

    bar = tqdm(
        total=1 + len(shape["workers"]),
        desc="starting raylets",
        unit="node",
        file=sys.stderr,
        ncols=80,
        bar_format="{desc}: {n_fmt}/{total_fmt} {bar} {elapsed}",
    )
    recorder = Recorder(settings, shape)
    try:
        start_raylets(settings, shape, env, timeout_s, recorder, on_node=lambda: bar.update(1))
    except BaseException:
        # nothing half-created is left behind
        stop_gcs_last(recorder.state["processes"])
        state_path(settings).unlink(missing_ok=True)
        raise
    finally:
        bar.close()
    info = status(settings)
    info.action = "started"
    info.message = f"head + {len(shape['workers'])} worker node(s) started"
    return info


def reuse(settings: Settings, current: LocalClusterInfo, shape: dict[str, Any]) -> LocalClusterInfo:
    """A running cluster is reused when it has the shape the settings ask for, and refused otherwise."""
    have = (read_state(settings) or {}).get("shape")
    if have != shape:
        raise LocalClusterError(
            f"a local Ray cluster is already running on {LOOPBACK}:{settings.local.gcs_port} with a different "
            f"shape ({shape_str(have)}) than the settings ask for ({shape_str(shape)}). "
            f"Fix: `raytrain-tutorial down` then re-run, or change local.gcs_port/dashboard_port"
        )
    alive = {n["name"] for n in current.workers if n["alive"]}
    if len(alive) == len(shape["workers"]):
        current.action = "reused"
        current.message = "a running cluster of the same shape was reused"
        return current
    return restart_workers(settings, [w for w in shape["workers"] if w["name"] not in alive])


def restart_workers(settings: Settings, dead: list[dict[str, Any]], timeout_s: float = 120.0) -> LocalClusterInfo:
    """Start again the worker nodes of a running cluster that died (killed, out of memory), under the same names
    and temp dirs; the head and the live workers are kept, and so is the auth token. What is left of a dead
    node's recorded processes is stopped first."""
    recorder = Recorder(settings, desired_shape(settings), state=read_state(settings))
    names = {w["name"] for w in dead}
    stop_gcs_last([r for r in recorder.state["processes"] if r.get("node") in names])
    env = dict(base_env(settings), **auth_env(settings))
    for w in dead:
        start_worker_node(settings, w, env, recorder)
    url = f"http://{LOOPBACK}:{settings.local.dashboard_port}"
    wait_until(
        lambda: len(named_nodes(url, names)) == len(names), timeout_s, "the restarted worker node(s) to register"
    )
    recorder.add([], named_nodes(url, names))
    info = status(settings)
    info.action = "repaired"
    info.message = f"worker node(s) {', '.join(sorted(names))} had died and were started again"
    return info


def down(settings: Settings) -> LocalClusterInfo:
    """Stop only what this cluster started (see :func:`our_pids`), and check that it is gone."""
    own_root(settings, create=False)
    before = status(settings)
    if recorded(settings) is None and before.running:
        raise LocalClusterError(
            f"a Ray cluster answers on {LOOPBACK}:{settings.local.gcs_port} but {state_path(settings)} records no "
            f"process of it (another program's cluster, or one started by an older version of this tool), so "
            f"nothing was stopped. Fix: stop it where it was started, or choose other local.gcs_port/dashboard_port"
        )
    n = len(our_pids(settings))
    left = stop_recorded(settings)
    after = status(settings)
    if left:
        raise LocalClusterError(
            f"{len(left)} process(es) of the local cluster did not stop (pids "
            f"{', '.join(str(r['pid']) for r in left[:10])}). Fix: run `raytrain-tutorial down` again"
        )
    after.action = "stopped"
    after.message = (
        f"stopped {len(before.nodes)} node(s), {n} process(es)" if before.running or n else "nothing was running"
    )
    return after


class TeardownResult:
    def __init__(self, steps: list[tuple[str, bool, str]]):
        self.steps = steps

    @property
    def ok(self) -> bool:
        return all(ok for _, ok, _ in self.steps)

    def show(self) -> None:
        table(
            [(name, "gone" if ok else "LEFT", ev) for name, ok, ev in self.steps],
            ["what", "state", "evidence"],
            title="teardown (reverse order)",
            max_width=90,
        )


def teardown(settings: Settings) -> TeardownResult:
    """Stop the local cluster and check by listing that none of its processes is left."""
    info = down(settings)
    left = our_pids(settings)
    return TeardownResult(
        [
            (
                "local Ray cluster (head + worker raylets)",
                not info.running and not left,
                f"{info.message}; {len(left)} process(es) left",
            )
        ]
    )


__all__ = [
    "HEALTH_CHECK_PERIOD_MS",
    "RAY_START_GAVE_UP",
    "SLOW_AGENTS",
    "STATE_FILE",
    "START_ATTEMPTS",
    "LocalClusterError",
    "LocalClusterInfo",
    "RayletLog",
    "TeardownResult",
    "auth_env",
    "check_ports",
    "cluster_python",
    "desired_shape",
    "exposure_rows",
    "down",
    "new_auth_token",
    "our_pids",
    "restart_workers",
    "reuse",
    "session_log_dirs",
    "start_parallelism",
    "state_path",
    "status",
    "stop_gcs_last",
    "teardown",
    "token_path",
    "up",
]
