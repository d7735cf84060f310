"""Verify: a topology-aware audit of the transports NCCL really used.

When EFA or the aws-ofi-nccl plugin is misconfigured, NCCL silently falls back to TCP sockets: the job
succeeds at a fraction of the speed. Grepping for ``Using network Socket`` is not a test: a perfectly
healthy single-node NVLink run prints it too (it only names the NET plugin NCCL loaded; no rank pair has
to use it). This package reads ``NCCL_DEBUG=INFO`` output instead, rank pair by rank pair:

* :func:`parse` (:mod:`.parsing`) reads NCCL INFO/WARN lines under any prefix (bare, Ray driver, kubectl) into
  processes, communicators and channel connections: the prefixes in :mod:`.lines`, each NCCL message in
  :mod:`.messages`, the data model in :mod:`.model`.
* :func:`audit` (:mod:`.auditing`) builds the rank-pair x transport matrix of each communicator (:mod:`.matrix`),
  classifies each pair as intra-node or inter-node by host identity, and gives a verdict against the expected
  transport by the rules of :mod:`.rules` (a package, one module per family of rules), with the exact log
  lines each finding rests on (:mod:`.result`).
* :func:`select_run` keeps one run's logs by the marker its workers print.
* :func:`plot_matrix` (:mod:`.plot`) draws a rank x rank transport heatmap.
* :func:`compare_runs` (:mod:`.compare`) compares two benchmark runs only after both audits confirm their
  transports.
* :mod:`.reference`: real logs captured on 2 x H200 (a healthy run and a socket fallback, shipped in
  ``captured/``), audited side by side for runs that print no NCCL lines of their own; :mod:`.examples`: synthetic
  example lines for an instance type (``/GDRDMA`` only where it has GPUDirect RDMA), labelled synthetic.

Pure log analysis: reading the logs from raylets or pods is the targets' job.
"""

from __future__ import annotations

from . import examples, reference
from .auditing import (
    EXPECTATIONS,
    WORKER_FILE,
    audit,
    check_expect,
    check_marker,
    resolve_expect,
    select_run,
    sibling_log,
)
from .compare import Comparison, compare_runs
from .model import Channel, Communicator, Evidence, LocalComm, Pair, ParsedLog, Process
from .parsing import parse
from .plot import plot_matrix
from .result import AuditResult, Finding

__all__ = [
    "EXPECTATIONS",
    "WORKER_FILE",
    "AuditResult",
    "Channel",
    "Communicator",
    "Comparison",
    "Evidence",
    "Finding",
    "LocalComm",
    "Pair",
    "ParsedLog",
    "Process",
    "audit",
    "check_expect",
    "check_marker",
    "compare_runs",
    "examples",
    "parse",
    "plot_matrix",
    "reference",
    "resolve_expect",
    "select_run",
    "sibling_log",
]
