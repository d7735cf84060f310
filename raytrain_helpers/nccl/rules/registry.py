"""The rules in the order they are applied (:data:`RULES`), and the verdict once they ran (:func:`judge`)."""

from __future__ import annotations

from ..model import Communicator, ParsedLog
from ..result import AuditResult
from .comms import communicators
from .context import WHERE, Context, Rule
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
from .pairs import degraded_pairs, expected_pairs, fallback_pairs, p2p_across_hosts, unconfirmed_pairs, unexpected_pairs

#: Failure codes, most serious first: the verdict is the first one any failing finding carries.
VERDICT_ORDER = ("fallback", "plugin-failure", "degraded", "unexpected", "no-nccl", "inconclusive")


#: Every rule, in the order it is applied (the order of the findings of equal severity).
RULES: tuple[Rule, ...] = (
    mixed_run_markers,
    ray_nodes_share_host,
    no_nccl,
    versions,
    nccl_not_expected,
    communicators,
    degraded_pairs,
    fallback_pairs,
    unexpected_pairs,
    p2p_across_hosts,
    expected_pairs,
    unconfirmed_pairs,
    fabric_on_one_host,
    socket_not_used,
    ofi_not_initialised,
    efa_provider,
    non_efa_provider,
    ofi_warnings,
    ib_not_initialised,
    plugin_probes,
    socket_plugin_unused,
    nccl_warnings,
    unparsed_lines,
    shm_pairs,
    no_channels,
    unconfirmed_inconclusive,
    ray_dedup,
)


def judge(
    log: ParsedLog, comms: dict[str, Communicator], expect: str, expected: str, basis: str, host_basis: str
) -> AuditResult:
    """Apply :data:`RULES` in order; the verdict is the most serious failure (see :data:`VERDICT_ORDER`)."""
    ctx = Context(log, comms, expect, expected, basis, host_basis)
    for rule in RULES:
        settled = rule(ctx)
        if settled is not None:
            return settled
    return verdict(ctx)


def verdict(ctx: Context) -> AuditResult:
    """The result once every rule ran: the most serious failure's code, or a pass with what the pairs rode."""
    fail_codes = ctx.fail_codes
    if fail_codes:
        code = min(fail_codes, key=lambda c: VERDICT_ORDER.index(c) if c in VERDICT_ORDER else 99)
        first = next(f for f in ctx.findings if f.severity == "fail" and f.code == code)
        return ctx.result(False, code, ctx.expected, ctx.basis, f"{code}: {first.message}")
    return ctx.result(True, "pass", ctx.expected, ctx.basis, "pass: " + pass_summary(ctx))


def pass_summary(ctx: Context) -> str:
    """'<n> ranks on <h> host(s); inter-node pairs ride ...; intra-node pairs ride ...'."""
    hosts = sorted({p.host_id for p in ctx.procs if p.host_id})
    world = max(ctx.comms.values(), key=lambda g: g.size, default=None)
    n = world.size if world else 0
    parts = [f"{n} ranks on {len(hosts)} host(s)"]
    for loc in ("inter", "intra", "unknown"):
        if loc in ctx.labels_seen:
            text = f"{WHERE[loc]} pairs ride {', '.join(lab for lab, _ in ctx.labels_seen[loc].most_common())}"
            prov = sorted({p.provider for p in ctx.procs if p.provider})
            if loc == "inter" and prov and ctx.expected == "efa":
                text += f" (libfabric provider {', '.join(prov)})"
            parts.append(text)
    return "; ".join(parts)
