"""The line level of ``NCCL_DEBUG=INFO`` output: the prefixes around NCCL's own lines.

:func:`strip_prefixes` removes what Ray's driver (``(RayTrainWorker pid=.., ip=..)`` with colours and
``[repeated Nx across cluster]``), ``kubectl logs --prefix --timestamps`` and timestamps put in front of (or
behind) a line, and says what they told: pod, container, Ray pid and ip, Ray's dedup count.
"""

from __future__ import annotations

import re
from typing import Any

#: Terminal colour codes (removed from every line before it is read or quoted).
ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
_REPEATED = re.compile(r"\s*\[repeated (\d+)x across cluster\](?:\s*\(Ray deduplicates logs.*\))?\s*$")
_POD = re.compile(r"\[pod/([^/\]\s]+)(?:/([^\]\s]+))?\]\s?")
_TS_ISO = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?\s+")
_TS_BRACKET = re.compile(r"\[\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?\]\s*")
_RAY = re.compile(r"\(([^()]{0,200}(?:\([^()]{0,100}\)[^()]{0,100})?)\)\s?")
_RAY_PID = re.compile(r"(?:^|[\s,])pid=(\d+)")
_RAY_IP = re.compile(r"(?:^|[\s,])ip=([0-9A-Za-z.:-]+)")
_RAY_SYSTEM = ("raylet", "gcs_server", "autoscaler", "dashboard", "monitor", "log_monitor")


def strip_prefixes(line: str) -> tuple[str, dict[str, Any]]:
    """Remove Ray / kubectl / timestamp prefixes and the Ray dedup suffix; return (core, meta)."""
    meta: dict[str, Any] = {}
    if "repeated" in line:
        m = _REPEATED.search(line)
        if m:
            meta["repeated"] = int(m.group(1))
            line = line[: m.start()]
    for _ in range(8):
        s = line.lstrip()
        m = _POD.match(s)
        if m:
            meta["pod"], meta["container"] = m.group(1), m.group(2)
            line = s[m.end() :]
            continue
        m = _TS_ISO.match(s) or _TS_BRACKET.match(s)
        if m:
            line = s[m.end() :]
            continue
        end = _ray_prefix(s, meta) if s.startswith("(") else None
        if end is not None:
            line = s[end:]
            continue
        break
    return line, meta


def _ray_prefix(s: str, meta: dict[str, Any]) -> int | None:
    """Read a Ray driver prefix ``(name pid=.., ip=..)`` into ``meta`` and return where it ends; None when ``s``
    does not start with one."""
    m = _RAY.match(s)
    if not m:
        return None
    inner = m.group(1).strip()
    pid, ip = _RAY_PID.search(inner), _RAY_IP.search(inner)
    first = re.split(r"[\s,]", inner, maxsplit=1)[0]
    if not (pid or ip or first in _RAY_SYSTEM):
        return None
    if pid:
        meta["ray_pid"] = int(pid.group(1))
        name = inner[: pid.start()].strip(" ,")
        if name:
            meta["ray_name"] = name
    elif first in _RAY_SYSTEM:
        meta["ray_name"] = first
    if ip:
        meta["ray_ip"] = ip.group(1)
    return m.end()
