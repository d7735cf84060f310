"""Rules about the logs as a whole (runs, Ray nodes, NCCL present or not, versions) and about their other lines
(the Socket plugin line, NCCL WARN lines, lines that could not be read, SHM pairs).
"""

from __future__ import annotations

from collections import Counter

from ..result import AuditResult, Finding, quote
from .context import Context


def mixed_run_markers(ctx: Context) -> None:
    """warn mixed-runs: the logs hold the markers of several runs."""
    markers = sorted({info["marker"] for info, _ in ctx.log.markers})
    if len(markers) > 1:
        evs, more = quote(e for _, e in ctx.log.markers)
        ctx.add(
            Finding(
                "warn",
                "mixed-runs",
                f"the logs hold {len(markers)} runs (markers {', '.join(markers)}); audit "
                f"one run: collect_local_logs(..., marker) or audit(..., marker=...)",
                evs,
                more,
            )
        )


def ray_nodes_share_host(ctx: Context) -> None:
    """info ray-nodes-share-host: several Ray nodes on one machine (the local target's raylets)."""
    nodes_by_host: dict[str, set[str]] = {}
    for p in ctx.log.procs.values():
        if p.marker and p.marker.get("node") and p.host_id:
            nodes_by_host.setdefault(p.host_id, set()).add(p.marker["node"])
    for host, nodes in sorted(nodes_by_host.items()):
        if len(nodes) > 1:
            evs, more = quote(
                p.evidence["marker"] for p in ctx.log.procs.values() if p.host_id == host and "marker" in p.evidence
            )
            ctx.add(
                Finding(
                    "info",
                    "ray-nodes-share-host",
                    f"{len(nodes)} Ray nodes run on one host ({host}): to NCCL "
                    f"their ranks are intra-node (the local target's raylets stand in for separate GPU nodes)",
                    evs[:2],
                    more + max(0, len(evs) - 2),
                )
            )


def no_nccl(ctx: Context) -> AuditResult | None:
    """No NCCL process at all: n/a (pass) when none was expected, else fail no-nccl. Settles the verdict."""
    log = ctx.log
    if log.procs:
        return None
    bare, more = quote(log.bare_versions)
    if ctx.expect == "none":
        ctx.add(Finding("pass", "no-nccl", "no NCCL lines: the run did not use NCCL (gloo on CPU), as expected"))
        return ctx.result(True, "n/a", "none", "as asked", "n/a: NCCL not used (gloo)")
    msg = (
        "no NCCL INFO lines in the logs (" + f"{log.lines} lines read). Either the run used gloo (CPU; "
        "use expect='none'), NCCL_DEBUG=INFO was not set for the workers, or these are not the training "
        "workers' logs (Ray writes them to session_latest/logs/worker-*.out)"
    )
    if bare:
        msg += "; only a bare 'NCCL version' line was found"
    ctx.add(Finding("fail", "no-nccl", msg, bare, more))
    return ctx.result(
        False, "no-nccl", ctx.expect, "no NCCL lines to infer from", "no-nccl: no NCCL INFO lines to audit"
    )


def versions(ctx: Context) -> None:
    """warn version-mismatch when processes run different NCCL versions; else info versions."""
    procs = ctx.procs
    counts = Counter(p.nccl_version for p in procs if p.nccl_version)
    if len(counts) > 1:
        evs, more = quote(p.evidence["version"] for p in procs if "version" in p.evidence)
        ctx.add(
            Finding(
                "warn",
                "version-mismatch",
                "processes run different NCCL versions: " + ", ".join(f"{v} x{n}" for v, n in counts.most_common()),
                evs,
                more,
            )
        )
    elif counts:
        v = next(iter(counts))
        ofi = sorted({p.ofi_version for p in procs if p.ofi_version})
        evs, _ = quote(
            [p.evidence["version"] for p in procs if "version" in p.evidence][:1]
            + [p.evidence["ofi"] for p in procs if "ofi" in p.evidence][:1]
        )
        ctx.add(
            Finding(
                "info",
                "versions",
                f"NCCL {v} in {sum(counts.values())} process(es)" + (f"; aws-ofi-nccl {', '.join(ofi)}" if ofi else ""),
                evs,
            )
        )


def nccl_not_expected(ctx: Context) -> AuditResult | None:
    """fail unexpected: NCCL ran although none (CPU/gloo) was expected. Settles the verdict."""
    if ctx.expect != "none":
        return None
    procs = ctx.procs
    evs, more = quote(
        [p.evidence["version"] for p in procs if "version" in p.evidence]
        or [c.evidence[0] for p in procs for c in p.comms if c.evidence]
    )
    ctx.add(
        Finding("fail", "unexpected", f"expected no NCCL (CPU/gloo) but {len(procs)} process(es) ran NCCL", evs, more)
    )
    return ctx.result(
        False, "unexpected", "none", ctx.basis, "unexpected: NCCL in use although gloo (no NCCL) was expected"
    )


def socket_plugin_unused(ctx: Context) -> None:
    """info socket-plugin-unused: 'Using network Socket' is printed, yet no pair rides NET/Socket."""
    using_socket = ctx.cause_ev(["net:Socket"])
    channels = ctx.log.channels
    if using_socket and not any(c.cls == "socket" for c in channels) and channels:
        evs, more = quote(using_socket, 2)
        ctx.add(
            Finding(
                "info",
                "socket-plugin-unused",
                "'Using network Socket' is printed, yet no rank pair uses "
                "NET/Socket: the line names the NET plugin NCCL loaded, not a transport any pair rides",
                evs,
                more,
            )
        )


def nccl_warnings(ctx: Context) -> None:
    """warn nccl-warn: NCCL WARN lines other than the plugin failures already reported."""
    warns = [e for p in ctx.procs for e in p.warnings if not any(e is fe for _, fe in p.plugin_failures)]
    if warns:
        evs, more = quote(warns, 4)
        ctx.add(Finding("warn", "nccl-warn", f"{len(warns)} NCCL WARN line(s)", evs, more))


def unparsed_lines(ctx: Context) -> None:
    """info unparsed: NCCL-looking lines that could not be read."""
    unparsed = ctx.log.unparsed
    if unparsed:
        evs, more = quote(unparsed, 3)
        ctx.add(
            Finding(
                "info", "unparsed", f"{len(unparsed)} NCCL-looking line(s) could not be read (truncated?)", evs, more
            )
        )


def shm_pairs(ctx: Context) -> None:
    """info shm: pairs use host shared memory rather than P2P (when a GPU transport is expected)."""
    shm = [(g, p) for g, p in ctx.all_pairs if "shm" in p.classes]
    if shm and ctx.expected in ("p2p", "efa", "ib"):
        ctx.add(
            Finding(
                "info",
                "shm",
                f"{len(shm)} pair(s) use SHM (host memory) rather than P2P: the GPUs cannot "
                f"address each other directly (no NVLink/PCIe P2P, or separate CUDA_VISIBLE_DEVICES)",
            )
        )
