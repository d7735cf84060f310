"""The verdict rules of the audit: one function per rule, applied in order by :func:`judge`.

Each rule reads the audit's :class:`Context` and adds its findings to it. A rule that settles the verdict on
its own (no NCCL at all; NCCL where none was expected) returns the :class:`~..result.AuditResult`; the others
return None. After the last rule the verdict is the most serious failure, or a pass.

Every rank pair and transport class is first judged by :func:`pair_verdict` (ok, unconfirmed, info, fallback,
degraded, unexpected); the pair rules then report each group of pairs that share a verdict, a location and a
class.

* :mod:`.context`: the :class:`Context` the rules read, and the verdict of one pair and class;
* :mod:`.logs`: rules about the logs as a whole and their other lines;
* :mod:`.comms`: rules about one communicator;
* :mod:`.pairs`: rules about rank pairs, one finding per verdict, location and class;
* :mod:`.fabric`: rules about the expected transport (aws-ofi-nccl, its provider, IB, plugin probes);
* :mod:`.inconclusive`: rules that make a run without failures inconclusive;
* :mod:`.registry`: :data:`RULES` in the order they are applied, :func:`judge` and the verdict.
"""

from __future__ import annotations

from .comms import COMM_RULES, comm_conflicts, comm_nnodes_vs_hosts, comm_partial_logs, communicators
from .context import Context, PairItem, Rule, label_class, pair_verdict
from .fabric import (
    efa_provider,
    fabric_on_one_host,
    ib_not_initialised,
    non_efa_provider,
    ofi_not_initialised,
    ofi_warnings,
    plugin_probes,
    socket_not_used,
)
from .inconclusive import no_channels, ray_dedup, unconfirmed_inconclusive
from .logs import (
    mixed_run_markers,
    nccl_not_expected,
    nccl_warnings,
    no_nccl,
    ray_nodes_share_host,
    shm_pairs,
    socket_plugin_unused,
    unparsed_lines,
    versions,
)
from .pairs import (
    degraded_pairs,
    expected_pairs,
    fallback_pairs,
    p2p_across_hosts,
    unconfirmed_pairs,
    unexpected_pairs,
)
from .registry import RULES, VERDICT_ORDER, judge, pass_summary, verdict

__all__ = [
    "COMM_RULES",
    "RULES",
    "VERDICT_ORDER",
    "Context",
    "PairItem",
    "Rule",
    "comm_conflicts",
    "comm_nnodes_vs_hosts",
    "comm_partial_logs",
    "communicators",
    "degraded_pairs",
    "efa_provider",
    "expected_pairs",
    "fabric_on_one_host",
    "fallback_pairs",
    "ib_not_initialised",
    "judge",
    "label_class",
    "mixed_run_markers",
    "nccl_not_expected",
    "nccl_warnings",
    "no_channels",
    "no_nccl",
    "non_efa_provider",
    "ofi_not_initialised",
    "ofi_warnings",
    "p2p_across_hosts",
    "pair_verdict",
    "pass_summary",
    "plugin_probes",
    "ray_dedup",
    "ray_nodes_share_host",
    "shm_pairs",
    "socket_not_used",
    "socket_plugin_unused",
    "unconfirmed_inconclusive",
    "unconfirmed_pairs",
    "unexpected_pairs",
    "unparsed_lines",
    "verdict",
    "versions",
]
