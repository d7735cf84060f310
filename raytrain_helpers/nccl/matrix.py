"""From parsed lines to communicators, host identities and the rank-pair x transport matrix.

:func:`build_comms` groups every process's communicators (by commId, split parent, or order) and attributes
each channel line to one; :func:`assign_hosts` gives every process a host identity (NCCL hostname, split by
bootstrap IP, or ``hosts_hint``); :func:`classify_pairs` fills each communicator's pairs with their transport
classes and says whether each pair is intra-node or inter-node.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .messages import LOCAL_CLASSES
from .model import Channel, Communicator, LocalComm, Pair, ParsedLog, Process


def _group_key(proc: Process, c: LocalComm, ordinal: dict[tuple[str, int | None], int]) -> tuple[str, str]:
    if c.comm_id:
        return f"commId:{c.comm_id}", f"commId {c.comm_id}"
    if c.parent:
        parent = next((p for p in reversed(proc.comms) if p.ptr == c.parent and p.seq < c.seq), None)
        if parent is not None and parent.group:
            return (
                f"split:{parent.group}:{c.color}:{c.split_count}",
                f"split of {parent.group.split(':', 1)[-1]} (color {c.color})",
            )
        return f"split:?:{c.color}:{c.split_count}:{c.nranks}", f"split comm (color {c.color}, parent not in log)"
    k = (proc.key, c.nranks)
    ordinal[k] = ordinal.get(k, 0) + 1
    return f"seq:{c.nranks}:{ordinal[k]}", f"{c.nranks}-rank comm #{ordinal[k]} (no commId in log)"


def build_comms(log: ParsedLog) -> dict[str, Communicator]:
    """Every communicator of the log, keyed by its group; channel lines are attributed to one each."""
    comms: dict[str, Communicator] = {}
    ordinal: dict[tuple[str, int | None], int] = {}
    for proc in log.procs.values():
        for c in sorted(proc.comms, key=lambda c: c.seq):
            key, label = _group_key(proc, c, ordinal)
            c.group = key
            g = comms.get(key)
            if g is None:
                g = comms[key] = Communicator(key=key, label=label)
            _add_local_comm(g, proc, c)
    for ch in log.channels:
        _attribute_channel(comms, log.procs[ch.proc], ch)
    return comms


def _add_local_comm(g: Communicator, proc: Process, c: LocalComm) -> None:
    if c.nranks is not None:
        g.nranks = max(g.nranks or 0, c.nranks)
    if c.nnodes is not None:
        g.nnodes.add(c.nnodes)
    if c.local_ranks is not None:
        g.local_ranks.add(c.local_ranks)
    if c.rank is not None:
        prev = g.ranks.get(c.rank)
        if prev is None:
            g.ranks[c.rank] = proc.key
            if c.cuda_dev is not None:
                g.rank_dev[c.rank] = c.cuda_dev
        elif prev != proc.key:
            g.conflicts.append(f"rank {c.rank} claimed by {prev} and {proc.key}")
    g.evidence.extend(c.evidence[:2])


def _attribute_channel(comms: dict[str, Communicator], proc: Process, ch: Channel) -> None:
    """A channel line belongs to the printing process's latest communicator in which it holds the local rank."""
    hi = max(ch.src, ch.dst)
    cands = [
        c for c in proc.comms if (c.rank is None or c.rank == ch.local_rank) and (c.nranks is None or c.nranks > hi)
    ]
    exact = [c for c in cands if c.rank == ch.local_rank]
    cands = exact or cands
    before = [c for c in cands if c.seq < ch.seq]
    chosen = (before or cands)[-1] if cands else None
    ch.comm = chosen
    key = chosen.group if chosen is not None and chosen.group else "anon"
    g = comms.get(key)
    if g is None:
        g = comms[key] = Communicator(key=key, label="channel lines without a communicator line")
    if key == "anon":
        prev = g.ranks.get(ch.local_rank)
        if prev is None:
            g.ranks[ch.local_rank] = proc.key
        elif prev != proc.key and not any(str(ch.local_rank) in s for s in g.conflicts):
            g.conflicts.append(f"rank {ch.local_rank} printed by {prev} and {proc.key}")
    g.channels.append(ch)


def _split_hint(hosts_hint: Any) -> tuple[dict[str, str], dict[int, str]]:
    """``hosts_hint`` as (by hostname/IP/pod, by world rank)."""
    by_str: dict[str, str] = {}
    by_rank: dict[int, str] = {}
    if hosts_hint is None:
        return by_str, by_rank
    if not isinstance(hosts_hint, Mapping):
        raise TypeError(
            f"hosts_hint: expected a mapping, got {type(hosts_hint).__name__}. Fix: pass "
            f"{{hostname, IP or pod: host}} or {{world rank: host}}, or None"
        )
    for k, v in hosts_hint.items():
        if isinstance(k, bool) or not isinstance(k, (int, str)):
            raise TypeError(f"hosts_hint key {k!r}: expected a hostname/IP/pod (str) or a world rank (int)")
        if isinstance(k, int):
            by_rank[k] = str(v)
        else:
            by_str[k] = str(v)
    return by_str, by_rank


def assign_hosts(log: ParsedLog, comms: dict[str, Communicator], hosts_hint: Any) -> str:
    """Give every process a host identity; return a sentence saying what it rested on."""
    by_str, by_rank = _split_hint(hosts_hint)
    world = max(comms.values(), key=lambda g: (g.size, len(g.ranks)), default=None)
    rank_of: dict[str, int] = {}
    if world is not None:
        rank_of = {pk: r for r, pk in world.ranks.items()}
    hinted = 0
    rest: dict[str, list[Process]] = {}
    for p in log.procs.values():
        label = None
        if by_rank and p.key in rank_of and rank_of[p.key] in by_rank:
            label = by_rank[rank_of[p.key]]
        for k in (p.key, p.hostname, p.bootstrap_ip, p.ray_ip, p.pod, *p.sources):
            if label is None and k and k in by_str:
                label = by_str[k]
        if label is not None:
            p.host_id, p.host_basis = label, "hosts_hint"
            hinted += 1
        else:
            rest.setdefault(p.hostname, []).append(p)
    split = []
    for hostname, procs in rest.items():
        what = _hosts_by_name(hostname, procs)
        if what:
            split.append(what)
    parts = []
    if hinted:
        parts.append(f"hosts_hint for {hinted} process(es)")
    if rest:
        parts.append("NCCL hostnames (the prefix host:pid:tid of every NCCL line)")
    if split:
        parts.append(f"one hostname with several IPs split ({', '.join(split)})")
    for g in comms.values():
        g.rank_host = {r: log.procs[pk].host_id for r, pk in g.ranks.items()}
    return "; ".join(parts) or "no NCCL processes"


def _hosts_by_name(hostname: str, procs: list[Process]) -> str | None:
    """One host per NCCL hostname, unless the processes of one hostname print several IPs: then one host per
    IP. Returns what was split (``"<hostname> by <kind>"``) or None."""
    ips = {p.bootstrap_ip for p in procs if p.bootstrap_ip}
    kind = "bootstrap IP"
    if not ips:
        ips = {p.ray_ip for p in procs if p.ray_ip}
        kind = "Ray node IP"
    if len(ips) <= 1:
        for p in procs:
            p.host_id, p.host_basis = hostname, "NCCL hostname"
        return None
    for p in procs:
        ip = p.bootstrap_ip if kind == "bootstrap IP" else p.ray_ip
        p.host_id = f"{hostname}@{ip}" if ip else None
        p.host_basis = f"NCCL hostname + {kind}" if ip else f"NCCL hostname {hostname} is ambiguous"
    return f"{hostname} by {kind}"


def classify_pairs(log: ParsedLog, comms: dict[str, Communicator]) -> None:
    """Fill each communicator's pairs from its channel lines, then say where each pair is (intra/inter/unknown)."""
    known = {p.provider for p in log.procs.values() if p.provider}
    consensus = next(iter(known)) if len(known) == 1 else None
    for g in comms.values():
        for ch in g.channels:
            _refine_class(ch, log.procs[ch.proc], consensus)
            pair = g.pairs.get((ch.src, ch.dst))
            if pair is None:
                pair = g.pairs[(ch.src, ch.dst)] = Pair(ch.src, ch.dst)
            lab = ch.label + ("/GDRDMA" if ch.gdr else "")
            pair.transports[lab] += 1
            pair.classes[ch.cls] += 1
            if ch.repeated:
                pair.repeated += ch.repeated
            pair.lines.setdefault(ch.cls, []).append(ch.evidence)
        for (a, b), pair in g.pairs.items():
            _locate_pair(log, g, a, b, pair)


def _refine_class(ch: Channel, proc: Process, consensus: str | None) -> None:
    """A channel's class; OFI channels become efa or ofi-<provider> by the libfabric provider."""
    if ch.kind != "ofi":
        ch.cls = ch.kind
        return
    prov = proc.provider
    if prov:
        ch.provider_basis = f"provider of {proc.key}"
    elif consensus:
        prov = consensus
        ch.provider_basis = "provider printed by the other processes"
    if prov is None:
        ch.cls = "ofi?"
    elif prov.lower().startswith("efa"):
        ch.cls = "efa"
    else:
        ch.cls = f"ofi-{prov.lower()}"


def _locate_pair(log: ParsedLog, g: Communicator, a: int, b: int, pair: Pair) -> None:
    ha, hb = g.rank_host.get(a), g.rank_host.get(b)
    pair.src_host, pair.dst_host = ha, hb
    if ha and hb:
        pair.location = "intra" if ha == hb else "inter"
        pa, pb = log.procs[g.ranks[a]], log.procs[g.ranks[b]]
        bases = sorted({pa.host_basis, pb.host_basis})
        pair.basis = " / ".join(bases)
    elif g.nnodes == {1}:
        pair.location, pair.basis = "intra", "NCCL nNodes 1"
    elif all(c in LOCAL_CLASSES for c in pair.classes):
        pair.location, pair.basis = "intra", "transport (P2P/SHM/NVLS never leave a host)"
    else:
        missing = [str(r) for r, h in ((a, ha), (b, hb)) if not h]
        pair.location = "unknown"
        pair.basis = f"no host for rank {', '.join(missing)} (its process printed no communicator line)"
