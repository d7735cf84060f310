"""The hardware's own numbers, parsed: Ray's Prometheus metrics of each node, and the EFA driver's hardware counters.

Pure: text in, figures out, so the tests feed it real scrapes and sysfs listings.

**Ray's metrics.** Every Ray node's agent serves Prometheus text on its metrics export port; Ray 2.58 names the
node gauges in ``ray/dashboard/modules/reporter/reporter_agent.py`` (``METRICS_GAUGES``) and exports them with the
``ray_`` prefix, tagged ``ip``, ``SessionName``, ``IsHeadNode``, ``RayNodeType`` (``ray/dashboard/consts.py``,
``NODE_TAG_KEYS``), GPU gauges also ``GpuIndex``, ``GpuDeviceName`` (``GPU_TAG_KEYS``).

**EFA counters.** The EFA kernel driver exposes per-port hardware counters as files under
``/sys/class/infiniband/<device>/ports/<port>/hw_counters/``; their names are the driver's stats table
(``EFA_DEFINE_STATS`` / ``EFA_DEFINE_PORT_STATS`` in ``efa_verbs.c``, amzn/amzn-drivers
``kernel/linux/efa/src/`` and Linux ``drivers/infiniband/hw/efa/``): ``tx_bytes``, ``rx_bytes`` (send/receive),
``rdma_read_bytes``, ``rdma_read_resp_bytes`` (RDMA read), ``rdma_write_bytes``, ``rdma_write_recv_bytes`` (RDMA
write, newer devices). The bytes NCCL moved over EFA are the sum of those a node has, after a run minus before it.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

#: Ray 2.58's node gauges the tutorial records (exported name -> short name, unit).
NODE_METRICS: dict[str, tuple[str, str]] = {
    "ray_node_cpu_utilization": ("cpu_percent", "%"),
    "ray_node_cpu_count": ("cpus", "cores"),
    "ray_node_mem_used": ("mem_used_bytes", "bytes"),
    "ray_node_mem_total": ("mem_total_bytes", "bytes"),
    "ray_node_gpus_utilization": ("gpu_percent", "%"),
    "ray_node_gram_used": ("gpu_mem_used_bytes", "bytes"),
    "ray_node_network_send_speed": ("net_send_bytes_per_s", "bytes/s"),
    "ray_node_network_receive_speed": ("net_recv_bytes_per_s", "bytes/s"),
}
#: Gauges with one series per GPU (``GpuIndex``): summed over a node's GPUs (memory) or averaged (utilisation).
PER_GPU_MEAN = ("gpu_percent",)

#: ``name{labels} value [timestamp]`` (the Prometheus text exposition format, version 0.0.4).
_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)(\s+\S+)?\s*$")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse_prometheus(text: str) -> list[tuple[str, dict[str, str], float]]:
    """Every sample of a Prometheus text page: (metric name, labels, value); comments and bad lines skipped."""
    out = []
    for line in (text or "").splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if not m:
            continue
        try:
            value = float(m.group(4))
        except ValueError:
            continue
        labels = {k: v.replace('\\"', '"').replace("\\\\", "\\") for k, v in _LABEL.findall(m.group(3) or "")}
        out.append((m.group(1), labels, value))
    return out


def node_figures(text: str, session: str | None = None) -> dict[str, Any]:
    """One node's figures from its metrics page: the short names of :data:`NODE_METRICS` (GPU memory summed over
    the node's GPUs, GPU utilisation averaged), ``gpus`` (how many report), ``head`` (``IsHeadNode``), ``ip``.
    ``session``: keep only samples of this Ray session (``SessionName``), as a node may serve an old one's too."""
    sums: dict[str, list[float]] = {}
    out: dict[str, Any] = {}
    gpus: set[str] = set()
    for name, labels, value in parse_prometheus(text):
        if name not in NODE_METRICS or not math.isfinite(value):
            continue
        if session and labels.get("SessionName") not in (None, session):
            continue
        short = NODE_METRICS[name][0]
        sums.setdefault(short, []).append(value)
        if "GpuIndex" in labels:
            gpus.add(labels["GpuIndex"])
        if "IsHeadNode" in labels:
            out["head"] = labels["IsHeadNode"].lower() == "true"
        if "ip" in labels:
            out["ip"] = labels["ip"]
    for short, values in sums.items():
        out[short] = sum(values) / len(values) if short in PER_GPU_MEAN else sum(values)
    out["gpus"] = len(gpus)
    return out


# ---------------------------------------------------------------------------------------------------------------
# EFA hardware counters
# ---------------------------------------------------------------------------------------------------------------

#: The counters whose sum is the bytes a node moved over EFA (names from the driver's stats table, see above).
EFA_BYTE_COUNTERS = (
    "tx_bytes",
    "rx_bytes",
    "rdma_read_bytes",
    "rdma_read_resp_bytes",
    "rdma_write_bytes",
    "rdma_write_recv_bytes",
)
#: The sysfs glob a node's counters are read from.
EFA_COUNTER_GLOB = "/sys/class/infiniband/*/ports/*/hw_counters/*"
#: ``/sys/class/infiniband/<dev>/ports/<port>/hw_counters/<name> <value>``: one line of the listing.
_COUNTER_LINE = re.compile(r"^/sys/class/infiniband/([^/\s]+)/ports/(\d+)/hw_counters/([A-Za-z0-9_]+)\s+(\d+)\s*$")
#: An EFA run must move at least this much per GPU node over EFA; a TCP run at most this much.
EFA_MIN_BYTES = 64 * 2**20
TCP_MAX_BYTES = 16 * 2**20


def parse_efa_counters(listing: str) -> dict[str, int]:
    """``{"<device>/<port>/<counter>": value}`` from lines ``<sysfs path> <value>`` (what the reading command
    prints, :data:`EFA_COUNTER_GLOB`); other lines (a counter that could not be read) are skipped."""
    out: dict[str, int] = {}
    for line in (listing or "").splitlines():
        m = _COUNTER_LINE.match(line.strip())
        if m:
            out[f"{m.group(1)}/{m.group(2)}/{m.group(3)}"] = int(m.group(4))
    return out


def efa_bytes(counters: dict[str, int]) -> int:
    """The bytes a node's EFA devices count over all their ports (:data:`EFA_BYTE_COUNTERS`)."""
    return sum(v for k, v in counters.items() if k.rsplit("/", 1)[-1] in EFA_BYTE_COUNTERS)


def efa_moved(before: dict[str, dict[str, int]], after: dict[str, dict[str, int]]) -> dict[str, int | None]:
    """Per node, the bytes moved over EFA between two readings (``{node: counters}``); None for a node not read
    both times, or whose counters went down (the device was reset: no difference to take)."""
    out: dict[str, int | None] = {}
    for node in sorted(set(before) | set(after)):
        b, a = before.get(node), after.get(node)
        if not b or not a:
            out[node] = None
            continue
        moved = efa_bytes(a) - efa_bytes(b)
        out[node] = moved if moved >= 0 else None
    return out


@dataclass
class EfaVerdict:
    """Whether the bytes counted by the EFA devices agree with the transport a run was meant to use."""

    ok: bool | None
    expect: str
    moved: dict[str, int | None]
    message: str


def efa_verdict(moved: dict[str, int | None], expect: str) -> EfaVerdict:
    """``efa``: every GPU node moved at least :data:`EFA_MIN_BYTES` over EFA; ``socket`` (the TCP baseline): none
    moved more than :data:`TCP_MAX_BYTES`; other expectations, or no node read, are not judged (ok None)."""
    if not moved:
        return EfaVerdict(None, expect, moved, "no EFA counters read (no EFA device in the worker pods)")
    unread = sorted(n for n, v in moved.items() if v is None)
    if unread:
        return EfaVerdict(False, expect, moved, f"counters not read before and after on {', '.join(unread)}")
    mib = ", ".join(f"{n}: {v / 2**20:,.0f} MiB" for n, v in moved.items() if v is not None)
    if expect == "efa":
        low = sorted(n for n, v in moved.items() if (v or 0) < EFA_MIN_BYTES)
        ok = not low
        why = "over EFA as expected" if ok else f"too little over EFA on {', '.join(low)}: NCCL did not use it"
        return EfaVerdict(ok, expect, moved, f"{mib} ({why}; needs >= {EFA_MIN_BYTES // 2**20} MiB per node)")
    if expect == "socket":
        high = sorted(n for n, v in moved.items() if (v or 0) > TCP_MAX_BYTES)
        ok = not high
        why = "about zero, as a TCP run should" if ok else f"EFA carried traffic on {', '.join(high)}"
        return EfaVerdict(ok, expect, moved, f"{mib} ({why}; at most {TCP_MAX_BYTES // 2**20} MiB per node)")
    return EfaVerdict(None, expect, moved, f"{mib} (not judged for {expect})")


__all__ = [
    "EFA_BYTE_COUNTERS",
    "EFA_COUNTER_GLOB",
    "EFA_MIN_BYTES",
    "NODE_METRICS",
    "TCP_MAX_BYTES",
    "EfaVerdict",
    "efa_bytes",
    "efa_moved",
    "efa_verdict",
    "node_figures",
    "parse_efa_counters",
    "parse_prometheus",
]
