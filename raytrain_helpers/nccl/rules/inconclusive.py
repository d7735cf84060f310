"""Rules that make a run without failures inconclusive: no channel lines, pairs the audit cannot confirm, channel
lines Ray folded together.
"""

from __future__ import annotations

from ..result import Finding, quote
from .context import Context, chan_ev


def no_channels(ctx: Context) -> None:
    """fail inconclusive: nothing failed, but there is no channel line (or only one-rank communicators)."""
    if ctx.fail_codes or ctx.log.channels:
        return
    single = all((g.nranks or 0) <= 1 for g in ctx.comms.values()) and ctx.comms
    ctx.add(
        Finding(
            "fail",
            "inconclusive",
            ("every communicator has one rank: there is no inter-rank traffic to audit")
            if single
            else "no channel connection lines (`Channel xx/x : a[d] -> b[d] via ...`) "
            "in the logs: the run stopped before its first collective, or the logs are truncated",
        )
    )


def unconfirmed_inconclusive(ctx: Context) -> None:
    """fail inconclusive: nothing failed, but some pairs ride a transport the audit cannot confirm."""
    if not ctx.fail_codes and ctx.unconfirmed:
        ctx.add(
            Finding(
                "fail",
                "inconclusive",
                f"{len(ctx.unconfirmed)} pair(s) ride a transport the audit cannot confirm as {ctx.expected}",
                chan_ev(ctx.unconfirmed)[0],
            )
        )


def ray_dedup(ctx: Context) -> None:
    """inconclusive (fail, or warn beside another failure): Ray folded channel lines ('[repeated Nx ...]')."""
    repeated_ch = [c for c in ctx.log.channels if c.repeated]
    if not repeated_ch:
        return
    evs, more = quote(c.evidence for c in repeated_ch)
    ctx.add(
        Finding(
            "warn" if ctx.fail_codes else "fail",
            "inconclusive",
            f"{len(repeated_ch)} channel line(s) carry Ray's '[repeated Nx across "
            f"cluster]': Ray folded lines that differ only in numbers - which includes the transport "
            f"(NET/Socket/0 and NET/Libfabric/0 look alike to it). Audit the worker log files "
            f"(collect_local_logs / collect_pod_logs) or run with RAY_DEDUP_LOGS=0",
            evs,
            more,
        )
    )
