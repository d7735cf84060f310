"""Rules about one communicator (a rank claimed twice, nNodes against the real hosts, ranks with no lines),
applied communicator by communicator by :func:`communicators`.
"""

from __future__ import annotations

from ..model import Communicator
from ..result import Finding, quote
from .context import Context


def comm_conflicts(ctx: Context, g: Communicator) -> Finding | None:
    """warn mixed-runs: two processes claim one rank of the communicator."""
    if not g.conflicts:
        return None
    return Finding(
        "warn",
        "mixed-runs",
        f"communicator {g.label}: "
        + "; ".join(g.conflicts[:3])
        + " - logs of several runs mixed? Audit one run (marker filter)",
        g.evidence[:2],
    )


def comm_nnodes_vs_hosts(ctx: Context, g: Communicator) -> Finding | None:
    """info nnodes-vs-hosts: NCCL's nNodes differs from the hosts the ranks really are on."""
    hosts = g.hosts
    complete = len(g.ranks) >= (g.nranks or 0) and all(g.rank_host.get(r) for r in g.ranks)
    if not (g.nnodes and hosts and complete):
        return None
    nn = max(g.nnodes)
    if nn == len(hosts):
        return None
    procs = ctx.log.procs
    env_ev = [
        procs[pk].evidence[k]
        for pk in dict.fromkeys(g.ranks[r] for r in sorted(g.ranks))  # each process once, in rank order
        for k in ("env:NCCL_P2P_DISABLE", "env:NCCL_SHM_DISABLE")
        if k in procs[pk].evidence
    ]
    topo = [e for e in g.evidence if "nNodes" in e.text][:2]
    why = (
        (
            " NCCL counts a host as several 'nodes' when its GPUs cannot reach each other through "
            "P2P or SHM (here NCCL_P2P_DISABLE / NCCL_SHM_DISABLE are set)"
        )
        if env_ev and nn > len(hosts)
        else ""
    )
    evs, more = quote(topo + env_ev)
    return Finding(
        "info",
        "nnodes-vs-hosts",
        f"communicator {g.label}: NCCL reports nNodes {nn} but its ranks are on {len(hosts)} "
        f"host(s) ({', '.join(hosts)}); pairs are classified by host identity, not by nNodes." + why,
        evs,
        more,
    )


def comm_partial_logs(ctx: Context, g: Communicator) -> Finding | None:
    """warn partial-logs: some (not all) ranks of the communicator left no lines."""
    if not g.nranks or g.key == "anon":
        return None
    missing = [r for r in range(g.nranks) if r not in g.ranks]
    if not missing or len(missing) >= g.nranks:
        return None
    return Finding(
        "warn",
        "partial-logs",
        f"communicator {g.label}: no log lines from rank(s) "
        f"{_ranges(missing)} of {g.nranks}; pairs touching them are judged from the other end",
        g.evidence[:1],
    )


COMM_RULES = (comm_conflicts, comm_nnodes_vs_hosts, comm_partial_logs)


def communicators(ctx: Context) -> None:
    """The communicator rules, communicator by communicator (largest first)."""
    for g in ctx.ordered:
        for rule in COMM_RULES:
            finding = rule(ctx, g)
            if finding is not None:
                ctx.add(finding)


def _ranges(nums: list[int]) -> str:
    nums = sorted(nums)
    out = []
    start = prev = nums[0]
    for x in nums[1:] + [None]:  # type: ignore[list-item]
        if x is not None and x == prev + 1:
            prev = x
            continue
        out.append(f"{start}-{prev}" if prev != start else f"{start}")
        if x is not None:
            start = prev = x
    return ",".join(out)
