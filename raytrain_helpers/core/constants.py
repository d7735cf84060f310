"""Names and markers shared by the notebook side and the training job (one definition each)."""

from __future__ import annotations

#: The custom Ray resource only worker nodes offer: training workers ask for one, so none lands on the head.
TRAIN_SLOT = "train_slot"

#: The job's driver prints one ``RAYTRAIN_RESULT {json}`` line; the notebook side parses it from the logs.
RESULT_PREFIX = "RAYTRAIN_RESULT "
#: Rank 0 prints the run's summary as ``RAYTRAIN_SUMMARY {json}``.
SUMMARY_PREFIX = "RAYTRAIN_SUMMARY "
#: Every training step prints ``[train] step k/N loss=...``.
STEP_PREFIX = "[train] step"
#: Every worker prints ``[raytrain] marker=<id>`` first, so its log file can be tied to one job.
MARKER_PREFIX = "[raytrain] marker="
#: The line each rank prints when it finished its steps.
SUCCESS_RE = r"\[train\] SUCCESS rank=(\d+)/(\d+)"

#: The module the Ray job runs as its entrypoint (``python -m ...``).
ENTRYPOINT_MODULE = "raytrain_helpers.worker.entrypoint"

#: Everything the local target serves listens on this address only.
LOOPBACK = "127.0.0.1"
#: The Ray dashboard / Jobs API port inside the head pod (the ClusterIP Service's port).
DASHBOARD_PORT = 8265

GIB = 1024**3

#: The oldest eksctl the aws path accepts: Capacity Blocks for ML (``instanceMarketOptions.marketType:
#: capacity-block`` in a node group) arrived in eksctl 0.205.0 (eksctl-io/eksctl commit 854da876d, PR #8207, first
#: in tag 0.205.0; checked 2026-12-04).
EKSCTL_MIN_VERSION = "0.205.0"
