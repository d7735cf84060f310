"""Rules about the expected transport as a whole: the fabric exercised at all, aws-ofi-nccl and its libfabric
provider (efa), the IB transport (ib), NET plugin probes (no fabric expected).
"""

from __future__ import annotations

import re

from ..model import Evidence
from ..result import Finding, quote
from .context import Context


def fabric_on_one_host(ctx: Context) -> None:
    """fail unexpected: efa/ib expected, but no pair crosses hosts (the fabric is not exercised)."""
    if ctx.expected in ("efa", "ib") and ctx.log.channels and not ctx.net_pairs and not ctx.inter_pairs:
        hosts = sorted({p.host_id or "?" for p in ctx.procs})
        ctx.add(
            Finding(
                "fail",
                "unexpected",
                f"all ranks are on one host ({', '.join(hosts)}): no inter-node traffic, "
                f"so {ctx.expected.upper()} is not exercised. Use expect='p2p' for a single-node run",
                quote(c.evidence for c in ctx.log.channels)[0][:2],
            )
        )


def socket_not_used(ctx: Context) -> None:
    """fail unexpected: socket expected, but no pair rides NET/Socket."""
    if ctx.expected == "socket" and ctx.log.channels and not any(c.cls == "socket" for c in ctx.log.channels):
        using, more = quote(ctx.cause_ev(["net:Socket"]))
        ctx.add(
            Finding(
                "fail",
                "unexpected",
                "socket was expected but no rank pair uses NET/Socket"
                + (
                    " ('Using network Socket' only names the plugin NCCL loaded, no pair has to use it)"
                    if using
                    else ""
                ),
                using,
                more,
            )
        )


def ofi_not_initialised(ctx: Context) -> None:
    """efa expected: plugin-failure (fail, or warn when EFA pairs exist and no failure line) for processes
    where aws-ofi-nccl did not initialise."""
    if ctx.expected != "efa":
        return
    bad = [p for p in ctx.procs if not p.ofi_ok]
    if not bad:
        return
    lines = [
        e
        for p in bad
        for k, e in p.plugin_failures
        if k == "ofi" or k.startswith("plugin-missing") or k.lower().startswith("net-init:libfabric")
    ]
    efa_pairs = [p for _, p in ctx.net_pairs if "efa" in p.classes]
    sev = "fail" if not efa_pairs or lines else "warn"
    reasons = _ofi_reasons(lines)
    evs, more = quote(lines + ctx.cause_ev(["net:Socket"])[:1])
    ctx.add(
        Finding(
            sev,
            "plugin-failure",
            f"aws-ofi-nccl did not initialise in {len(bad)} of {len(ctx.procs)} process(es)"
            + (
                f": {reasons}"
                if reasons
                else ": no 'NET/OFI Selected provider' or 'Using network "
                "Libfabric' line (plugin not loaded; NCCL_NET_PLUGIN / LD_LIBRARY_PATH?)"
            ),
            evs,
            more,
        )
    )


def _ofi_reasons(lines: list[Evidence]) -> str:
    reasons = []
    for e in lines:
        t = e.text
        for s in (
            "No eligible providers were found",
            "aws-ofi-nccl initialization failed",
            "fi_getinfo() call failed",
            "requires at least libfabric",
        ):
            if s in t and s not in reasons:
                reasons.append(s)
        m = re.search(r"Could not find:? (\S+)", t)
        if m and f"{m.group(1).rstrip('.')} not found" not in reasons:
            reasons.append(f"{m.group(1).rstrip('.')} not found")
    return "; ".join(reasons)


def efa_provider(ctx: Context) -> None:
    """efa expected: provider (pass when every process selected efa, else info)."""
    if ctx.expected != "efa":
        return
    efa_procs = [p for p in ctx.procs if p.provider and p.provider.lower().startswith("efa")]
    if efa_procs:
        evs, more = quote(p.evidence["provider"] for p in efa_procs)
        ctx.add(
            Finding(
                "pass" if len(efa_procs) == len(ctx.procs) else "info",
                "provider",
                f"libfabric selected provider efa in {len(efa_procs)} of {len(ctx.procs)} process(es)",
                evs[:2],
                more + max(0, len(evs) - 2),
            )
        )


def non_efa_provider(ctx: Context) -> None:
    """efa expected: fail plugin-failure when libfabric selected another provider (tcp, sockets...)."""
    if ctx.expected != "efa":
        return
    non_efa = sorted({p.provider for p in ctx.procs if p.provider and not p.provider.lower().startswith("efa")})
    if non_efa:
        evs, more = quote(p.evidence["provider"] for p in ctx.procs if p.provider in non_efa)
        ctx.add(
            Finding(
                "fail",
                "plugin-failure",
                f"libfabric selected provider {', '.join(non_efa)} instead of efa: "
                f"the EFA device is not visible (vpc.amazonaws.com/efa resource, FI_PROVIDER=efa)",
                evs,
                more,
            )
        )


def ofi_warnings(ctx: Context) -> None:
    """efa expected: warn ofi-warnings when aws-ofi-nccl printed errors in processes where it initialised."""
    if ctx.expected != "efa":
        return
    ofi_other = [(k, e) for p in ctx.procs if p.ofi_ok for k, e in p.plugin_failures if k == "ofi"]
    if ofi_other:
        evs, more = quote(e for _, e in ofi_other)
        ctx.add(
            Finding(
                "warn", "ofi-warnings", "aws-ofi-nccl printed errors in processes where it did initialise", evs, more
            )
        )


def ib_not_initialised(ctx: Context) -> None:
    """ib expected: fail plugin-failure when no pair rides IB and some process has no IB network."""
    if ctx.expected != "ib":
        return
    bad = [p for p in ctx.procs if not any(n.upper() == "IB" for n in p.nets)]
    if bad and not any("ib" in p.classes for _, p in ctx.net_pairs):
        lines = [e for p in bad for k, e in p.plugin_failures if k in ("ib", "net-init:IB")]
        evs, more = quote(lines)
        ctx.add(
            Finding(
                "fail", "plugin-failure", f"the IB transport did not initialise in {len(bad)} process(es)", evs, more
            )
        )


def plugin_probes(ctx: Context) -> None:
    """No fabric expected: info plugins for NET plugin probes that found nothing (normal without a fabric)."""
    if ctx.expected in ("efa", "ib"):
        return
    fails = [e for p in ctx.procs for k, e in p.plugin_failures]
    if fails:
        evs, more = quote(fails, 3)
        ctx.add(
            Finding(
                "info",
                "plugins",
                "NET plugin probes that found nothing (normal without a fabric; NCCL "
                "then uses its built-in Socket transport only for pairs that need a network)",
                evs,
                more,
            )
        )
