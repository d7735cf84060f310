"""The verdict rules of the audit: one function per rule, applied in order by :func:`judge`.

Each rule reads the audit's :class:`Context` and adds its findings to it. A rule that settles the verdict on
its own (no NCCL at all; NCCL where none was expected) returns the :class:`~.result.AuditResult`; the others
return None. After the last rule the verdict is the most serious failure, or a pass.

Every rank pair and transport class is first judged by :func:`pair_verdict` (ok, unconfirmed, info, fallback,
degraded, unexpected); the pair rules then report each group of pairs that share a verdict, a location and a
class.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from .messages import LOCAL_CLASSES, classify_via
from .model import Communicator, Evidence, Pair, ParsedLog, Process
from .result import MAX_EVIDENCE, AuditResult, Finding, abbr, quote

#: Failure codes, most serious first: the verdict is the first one any failing finding carries.
VERDICT_ORDER = ("fallback", "plugin-failure", "degraded", "unexpected", "no-nccl", "inconclusive")
_SEVERITY_ORDER = {"fail": 0, "warn": 1, "pass": 2, "info": 3}
_WHERE = {"intra": "intra-node", "inter": "inter-node", "unknown": "location-unknown"}

PairItem = tuple[Communicator, Pair, str]  # a communicator, one of its pairs, one of the pair's classes


@dataclass
class Context:
    """Everything the rules read, and the findings they add."""

    log: ParsedLog
    comms: dict[str, Communicator]
    expect: str  # as asked
    expected: str  # resolved
    basis: str  # why that expectation
    host_basis: str
    findings: list[Finding] = field(default_factory=list)
    procs: list[Process] = field(default_factory=list)
    ordered: list[Communicator] = field(default_factory=list)  # largest first
    all_pairs: list[tuple[Communicator, Pair]] = field(default_factory=list)
    groups: dict[tuple[str, str, str], list[PairItem]] = field(default_factory=dict)  # (sev, code, loc|cls)
    unconfirmed: list[PairItem] = field(default_factory=list)
    labels_seen: dict[str, Counter] = field(default_factory=dict)  # location -> transport label -> lines

    def __post_init__(self) -> None:
        self.procs = sorted(self.log.procs.values(), key=lambda p: (p.host_id or "~", p.pid))
        self.ordered = sorted(self.comms.values(), key=lambda g: (-g.size, g.key == "anon", g.key))
        self.all_pairs = [(g, p) for g in self.ordered for p in g.pairs.values()]
        _group_pairs(self)

    def add(self, finding: Finding) -> None:
        self.findings.append(finding)

    @property
    def fail_codes(self) -> list[str]:
        return [f.code for f in self.findings if f.severity == "fail"]

    @property
    def net_pairs(self) -> list[tuple[Communicator, Pair]]:
        """Pairs that are (or may be) between hosts and ride a network transport."""
        return [
            (g, p)
            for g, p in self.all_pairs
            if p.location in ("inter", "unknown") and any(c not in LOCAL_CLASSES for c in p.classes)
        ]

    @property
    def inter_pairs(self) -> list[tuple[Communicator, Pair]]:
        return [(g, p) for g, p in self.all_pairs if p.location == "inter"]

    def cause_ev(self, kinds: Sequence[str]) -> list[Evidence]:
        """Each process's first line of each fact in ``kinds`` (e.g. ``net:Socket``, ``env:NCCL_NET``)."""
        return [p.evidence[k] for p in self.procs for k in kinds if k in p.evidence]

    def stats(self) -> dict[str, int]:
        log = self.log
        return {
            "lines": log.lines,
            "nccl_lines": log.nccl_lines,
            "processes": len(self.procs),
            "communicators": len(self.comms),
            "channel_lines": len(log.channels),
            "deduplicated_lines": len(log.repeated),
            "unparsed_lines": len(log.unparsed),
            "sources": len(log.sources),
        }

    def result(self, ok: bool, verdict: str, expected: str, basis: str, summary: str) -> AuditResult:
        self.findings.sort(key=lambda f: _SEVERITY_ORDER.get(f.severity, 9))
        return AuditResult(
            ok=ok,
            verdict=verdict,
            expect=self.expect,
            expected=expected,
            expected_basis=basis,
            summary=summary,
            host_basis=self.host_basis,
            findings=self.findings,
            matrix=self.ordered,
            processes=self.procs,
            stats=self.stats(),
        )


Rule = Callable[[Context], "AuditResult | None"]


# --------------------------------------------------------------------------------------------
# One pair, one class: its verdict
# --------------------------------------------------------------------------------------------


def pair_verdict(expected: str, loc: str, cls: str) -> str:
    """ok | unconfirmed | info | fallback | degraded | unexpected for one (location, class) of a pair."""
    local = cls in LOCAL_CLASSES
    unknown_cls = cls in ("?", "net?", "ofi?")
    tcp = cls == "socket" or cls.startswith("ofi-")
    if expected == "socket":
        if local:
            return "ok" if loc == "intra" else "info"
        if cls == "socket":
            return "ok"
        return "unconfirmed" if unknown_cls else "unexpected"
    if expected == "p2p":
        if local:
            return "ok" if loc == "intra" else "info"
        if loc == "inter":
            return "fallback" if tcp else ("unconfirmed" if unknown_cls else "unexpected")
        return "unconfirmed" if cls == "?" else "degraded"
    # efa / ib: the fabric across nodes, P2P/SHM/NVLS within one
    fabric = "efa" if expected == "efa" else "ib"
    if loc == "intra":
        if local:
            return "ok"
        return "unconfirmed" if cls == "?" else "degraded"
    if local:
        return "info"
    if cls == fabric:
        return "ok"
    if tcp:
        return "fallback"
    if unknown_cls:
        return "unconfirmed"
    return "unexpected"


_VERDICT_GROUP = {"ok": ("pass", "ok"), "unconfirmed": ("warn", "unconfirmed"), "info": ("info", "p2p-across-hosts")}


def _group_pairs(ctx: Context) -> None:
    """Judge every (pair, class) and group them by (severity, code, location|class)."""
    for g, pair in ctx.all_pairs:
        for cls in pair.classes:
            loc = pair.location
            if loc == "unknown" and cls in LOCAL_CLASSES:
                loc = "intra"
            for lab, k in pair.transports.items():
                if label_class(lab, cls):
                    ctx.labels_seen.setdefault(loc, Counter())[lab] += k
            verdict = pair_verdict(ctx.expected, loc, cls)
            sev, code = _VERDICT_GROUP.get(verdict, ("fail", verdict))
            if verdict == "unconfirmed":
                ctx.unconfirmed.append((g, pair, cls))
            ctx.groups.setdefault((sev, code, f"{loc}|{cls}"), []).append((g, pair, cls))


def label_class(label: str, cls: str) -> bool:
    """Whether a transport label (``NET/Libfabric/GDRDMA``) belongs to a class (``efa``)."""
    kind = classify_via(label.replace("/GDRDMA", ""))[1]
    if cls in ("efa", "ofi?") or cls.startswith("ofi-"):
        return kind == "ofi"
    return kind == cls


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


def _chan_ev(items: list[PairItem], limit: int = MAX_EVIDENCE) -> tuple[list[Evidence], int]:
    return quote((e for _, pair, cls in items for e in pair.lines.get(cls, [])), limit)


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


# --------------------------------------------------------------------------------------------
# Rules about the logs as a whole
# --------------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------------
# Rules about one communicator
# --------------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------------
# Rules about rank pairs (one finding per location and class)
# --------------------------------------------------------------------------------------------


def degraded_pairs(ctx: Context) -> None:
    """fail degraded: ranks on one host talk over a network transport (P2P/SHM disabled or unavailable)."""
    env_ev = ctx.cause_ev(["env:NCCL_P2P_DISABLE", "env:NCCL_SHM_DISABLE", "env:NCCL_P2P_LEVEL"])
    for loc, cls, items in _pair_groups(ctx, "fail", "degraded"):
        evs, more = _chan_ev(items)
        msg = (
            f"{_npairs(items)} {_WHERE[loc]} pair(s) ride {_transport(items, cls)} although their ranks share a "
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
        evs, more = _chan_ev(items, 4)
        msg = (
            f"{_npairs(items)} {_WHERE[loc]} pair(s) ride {_transport(items, cls)} - "
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
        evs, more = _chan_ev(items)
        ctx.add(
            Finding(
                "fail",
                "unexpected",
                f"{_npairs(items)} {_WHERE[loc]} pair(s) ride {_transport(items, cls)}, but {ctx.expected} was "
                f"expected",
                evs,
                more,
            )
        )


def p2p_across_hosts(ctx: Context) -> None:
    """info p2p-across-hosts: a host-local transport between two different hosts (MNNVL, or aliases)."""
    for _loc, cls, items in _pair_groups(ctx, "info", "p2p-across-hosts"):
        evs, more = _chan_ev(items)
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
        where = _WHERE[loc]
        evs, more = _chan_ev(items)
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
        evs, more = _chan_ev(items)
        ctx.add(
            Finding(
                "warn",
                "unconfirmed",
                f"{_npairs(items)} {_WHERE[loc]} pair(s) ride {_transport(items, cls)}, which the log does not "
                f"let the audit confirm as {ctx.expected}"
                + (" (no 'NET/OFI Selected provider' line)" if cls == "ofi?" else ""),
                evs,
                more,
            )
        )


# --------------------------------------------------------------------------------------------
# Rules about the expected transport as a whole
# --------------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------------
# Rules about other lines
# --------------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------------
# Rules that make a run without failures inconclusive
# --------------------------------------------------------------------------------------------


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
                _chan_ev(ctx.unconfirmed)[0],
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


# --------------------------------------------------------------------------------------------
# The driver
# --------------------------------------------------------------------------------------------

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
            text = f"{_WHERE[loc]} pairs ride {', '.join(lab for lab, _ in ctx.labels_seen[loc].most_common())}"
            prov = sorted({p.provider for p in ctx.procs if p.provider})
            if loc == "inter" and prov and ctx.expected == "efa":
                text += f" (libfabric provider {', '.join(prov)})"
            parts.append(text)
    return "; ".join(parts)
