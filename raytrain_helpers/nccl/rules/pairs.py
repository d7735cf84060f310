"""Rules about rank pairs: one finding per verdict, location and transport class of the pairs
(:func:`~.context.pair_verdict` judged each when the context was built).
"""

from __future__ import annotations

from collections import Counter

from ..result import MAX_EVIDENCE, Finding, abbr, quote
from .context import WHERE, Context, PairItem, chan_ev, label_class


def _pair_groups(ctx: Context, sev: str, code: str) -> list[tuple[str, str, list[PairItem]]]:
    """The groups with this verdict, as (location, class, items), in location|class order."""
    out = []
    for key in sorted(ctx.groups):
        if key[:2] == (sev, code):
            loc, cls = key[2].split("|", 1)
            out.append((loc, cls, ctx.groups[key]))
    return out


def _npairs(items: list[PairItem]) -> int:
    return len({(id(g), p.src, p.dst) for g, p, _ in items})


def _transport(items: list[PairItem], cls: str) -> str:
    labels: Counter = Counter()
    for _, p, c in items:
        for lab, n in p.transports.items():
            if label_class(lab, c):
                labels[lab] += n
    return ", ".join(lab for lab, _ in labels.most_common(3)) or abbr(cls)


def _desc(cls: str) -> str:
    return {
        "p2p": "GPU peer-to-peer: NVLink or PCIe",
        "shm": "host shared memory",
        "nvls": "NVLink SHARP",
        "collnet": "CollNet",
        "efa": "aws-ofi-nccl over EFA",
        "ib": "InfiniBand verbs",
        "socket": "TCP sockets",
    }.get(cls, cls)


def degraded_pairs(ctx: Context) -> None:
    """fail degraded: ranks on one host talk over a network transport (P2P/SHM disabled or unavailable)."""
    env_ev = ctx.cause_ev(["env:NCCL_P2P_DISABLE", "env:NCCL_SHM_DISABLE", "env:NCCL_P2P_LEVEL"])
    for loc, cls, items in _pair_groups(ctx, "fail", "degraded"):
        evs, more = chan_ev(items)
        msg = (
            f"{_npairs(items)} {WHERE[loc]} pair(s) ride {_transport(items, cls)} although their ranks share a "
            f"host: P2P/SHM are disabled or unavailable"
            + (", see the NCCL_*_DISABLE lines" if env_ev else "")
            + (f" (expected {ctx.expected})")
        )
        evs2, more2 = quote(evs + env_ev[:2], MAX_EVIDENCE + 2)
        ctx.add(Finding("fail", "degraded", msg, evs2, more + more2))


def fallback_pairs(ctx: Context) -> None:
    """fail fallback: pairs ride TCP (NET/Socket, or a libfabric provider other than efa) instead of the fabric."""
    for loc, cls, items in _pair_groups(ctx, "fail", "fallback"):
        cause = ctx.cause_ev(["net:Socket"]) if cls == "socket" else ctx.cause_ev(["provider"])
        evs, more = chan_ev(items, 4)
        msg = (
            f"{_npairs(items)} {WHERE[loc]} pair(s) ride {_transport(items, cls)} - "
            + (
                "TCP sockets instead of the fabric: the silent fallback"
                if cls == "socket"
                else f"libfabric's {cls[4:]} provider (TCP), not EFA: the EFA device is not visible to the pod"
            )
            + ("" if loc == "inter" else " (hosts unknown: TCP either way)")
        )
        forced = ctx.cause_ev(["env:NCCL_NET"])
        if forced and cls == "socket":
            msg += " (NCCL_NET is set by environment: for a deliberate TCP baseline audit with expect='socket')"
        evs2, more2 = quote(evs + forced[:1] + cause[:2])
        ctx.add(Finding("fail", "fallback", msg, evs2, more + more2))


def unexpected_pairs(ctx: Context) -> None:
    """fail unexpected: pairs ride a transport other than the expected one (and not a TCP fallback)."""
    for loc, cls, items in _pair_groups(ctx, "fail", "unexpected"):
        evs, more = chan_ev(items)
        ctx.add(
            Finding(
                "fail",
                "unexpected",
                f"{_npairs(items)} {WHERE[loc]} pair(s) ride {_transport(items, cls)}, but {ctx.expected} was expected",
                evs,
                more,
            )
        )


def p2p_across_hosts(ctx: Context) -> None:
    """info p2p-across-hosts: a host-local transport between two different hosts (MNNVL, or aliases)."""
    for _loc, cls, items in _pair_groups(ctx, "info", "p2p-across-hosts"):
        evs, more = chan_ev(items)
        ctx.add(
            Finding(
                "info",
                "p2p-across-hosts",
                f"{_npairs(items)} pair(s) between different hosts ride {_transport(items, cls)}: "
                f"a multi-node NVLink domain (MNNVL) or one machine under several hostnames",
                evs,
                more,
            )
        )


def expected_pairs(ctx: Context) -> None:
    """pass intra-node / inter-node / location-unknown: pairs ride the expected transport."""
    for loc, cls, items in _pair_groups(ctx, "pass", "ok"):
        where = WHERE[loc]
        evs, more = chan_ev(items)
        ctx.add(
            Finding(
                "pass",
                f"{where}",
                f"{_npairs(items)} {where} pair(s) ride {_transport(items, cls)} ({_desc(cls)}), as "
                f"expected for {ctx.expected}",
                evs[:2],
                max(0, more + len(evs) - 2),
            )
        )


def unconfirmed_pairs(ctx: Context) -> None:
    """warn unconfirmed: pairs ride a transport the log does not let the audit confirm as the expected one."""
    for loc, cls, items in _pair_groups(ctx, "warn", "unconfirmed"):
        evs, more = chan_ev(items)
        ctx.add(
            Finding(
                "warn",
                "unconfirmed",
                f"{_npairs(items)} {WHERE[loc]} pair(s) ride {_transport(items, cls)}, which the log does not "
                f"let the audit confirm as {ctx.expected}"
                + (" (no 'NET/OFI Selected provider' line)" if cls == "ofi?" else ""),
                evs,
                more,
            )
        )
