"""Stopping the local cluster's processes: only those its state file records (by pid and start time) and their
descendants, the head's GCS last.
"""

from __future__ import annotations

from typing import Any

from ...core.settings import Settings
from . import procs
from .cluster_state import read_state, state_path


def recorded(settings: Settings) -> list[dict[str, Any]] | None:
    """The processes the state file records (None: no state file, or one written before processes were)."""
    state = read_state(settings)
    if state is None or "processes" not in state:
        return None
    return list(state["processes"])


def our_pids(settings: Settings) -> list[int]:
    """The live processes this cluster started (recorded by pid and start time when each raylet started) and
    their descendants: Ray's workers, agents and job drivers. Nothing else, whatever its command line says."""
    return [r["pid"] for r in procs.with_descendants(recorded(settings) or [])]


def stop_gcs_last(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Stop the recorded processes and their descendants, the head's GCS only once the rest is gone; returns what
    still runs. A raylet told to stop says goodbye to the GCS first: signalled together with the GCS, the raylets
    and the autoscaler's monitor outlived SIGTERM by more than 8 s and were killed; with the GCS still answering,
    all of them exit within about 2 s, and the GCS then at once."""
    gcs = [r for r in records if procs.is_alive(r) and procs.program(int(r["pid"])) == "gcs_server"]
    return procs.stop([r for r in records if r not in gcs]) + procs.stop(gcs)


def stop_recorded(settings: Settings) -> list[dict[str, Any]]:
    """Stop the recorded processes and their descendants; the state file goes once none is left."""
    left = stop_gcs_last(recorded(settings) or [])
    if not left:
        state_path(settings).unlink(missing_ok=True)
    return left
