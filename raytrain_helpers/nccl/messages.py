"""One NCCL message, a reader per message family: channel connections and their transport classes, the
communicators' rank topology, the NCCL version, bootstrap interface, NET plugins, aws-ofi-nccl, the environment.

:func:`parse_info` and :func:`parse_warn` read the message of one INFO or WARN line (its prefixes and NCCL's
``host:pid:tid [dev]`` header already removed) into the process it came from.
"""

from __future__ import annotations

import re

from .model import Channel, Evidence, LocalComm, ParsedLog, Process

# transport classes of one channel line
LOCAL_CLASSES = ("p2p", "shm", "nvls", "collnet")  # never leave the host

_VERSION = re.compile(r"^NCCL version (?P<v>\S+)")
_BOOTSTRAP = re.compile(r"^Bootstrap ?: Using (?P<ifname>[^:\s]+):(?P<ip>[^<\s]+)")
_CHANNEL = re.compile(
    r"^(?:Channel|Ring) (?P<ch>\d+)(?:/(?P<sub>\d+))? : (?P<src>\d+)(?:\[(?P<sdev>\d+)\])? -> "
    r"(?P<dst>\d+)(?:\[(?P<ddev>\d+)\])?(?: \[(?P<dir>send|receive)\])? via (?P<via>\S.*?)\s*$"
)
_COMM_EVENT = re.compile(
    r"^(?:(?P<fn>ncclComm\w+):? )?comm (?P<ptr>0x[0-9a-fA-F]+) (?P<rest>.*?)\s*-\s*"
    r"(?P<what>Init|Destroy|Abort) (?P<state>START|COMPLETE)"
)
_COMM_TOPO = re.compile(
    r"^comm (?P<ptr>0x[0-9a-fA-F]+) rank (?P<rank>\d+) nRanks (?P<nranks>\d+) "
    r"nNodes (?P<nnodes>\d+) localRanks (?P<lranks>\d+) localRank (?P<lrank>\d+)"
)
_KV = re.compile(r"\b(rank|nranks|cudaDev|nvmlDev|busId|commId|parent|splitCount|color|key) (-?(?:0x)?[0-9a-fA-F]+)")
_USING_NET = re.compile(r"^Using network (?P<net>.+?)\s*$")
_ASSIGNED = re.compile(r"^Assigned NET plugin (?P<net>.+?) to comm")
_INITIALIZED = re.compile(r"^Initialized NET plugin (?P<net>.+?)\s*$")
_FAILED_NET = re.compile(r"^Failed to initialize NET plugin (?P<net>.+?)\s*$")
_PLUGIN_MISSING = re.compile(
    r"^NET/Plugin ?: ?(?:Could not find:? (?P<a>\S+?)\.?\s*$|.*No plugin found \((?P<b>[^)]+)\)"
    r"|Plugin load returned \d+ : (?P<c>[^:\s]+))"
)
_PLUGIN_LOADED = re.compile(
    r"^(?:NET/Plugin ?: ?Loaded net plugin (?P<name>.+?)(?: \(v\d+\))?\s*$"
    r"|Successfully loaded external plugin (?P<lib>\S+))"
)
_OFI_INIT = re.compile(r"^NET/OFI Initializing aws-ofi-nccl (?P<v>\S+)")
_OFI_LIBFABRIC = re.compile(r"^NET/OFI Using Libfabric version (?P<v>\S+)")
_OFI_PROVIDER = re.compile(
    r"^NET/OFI Selected [Pp]rovider is (?P<prov>[^,\s(]+)(?:, fabric is (?P<fabric>[^\s(,]+))?"
    r"(?: \(found (?P<nics>\d+) nics?\))?"
)
_OFI_PROTOCOL = re.compile(r"^NET/OFI Using transport protocol (?P<p>\S+)")
_OFI_FAILURES = (
    "No eligible providers were found",
    "aws-ofi-nccl initialization failed",
    "Unable to find a protocol that worked",
    "Initializing plugin failed",
    "fi_getinfo() call failed",
    "requires at least libfabric",
    "Failed to initialize",
    "Couldn't open",
)
_ENV = re.compile(r"^(?P<var>(?:NCCL|FI|OFI_NCCL)_[A-Z0-9_]+) set by environment to (?P<val>.*?)\.?\s*$")


def classify_via(via: str) -> tuple[str, str, bool]:
    """'NET/Libfabric/0/GDRDMA' -> ('NET/Libfabric', 'ofi', True). Classes: p2p shm nvls collnet socket ib
    ofi net? ? (ofi is refined later with the process's libfabric provider)."""
    v = via.strip()
    gdr = "GDRDMA" in v
    parts = v.split("/")
    head = parts[0].strip().upper()
    second = parts[1].strip() if len(parts) > 1 else ""
    if head == "P2P":
        return (f"P2P/{second}" if second else "P2P"), "p2p", gdr
    if head == "SHM":
        return "SHM", "shm", gdr
    if head.startswith("NVLS"):
        return "NVLS", "nvls", gdr
    if head.startswith("COLLNET"):
        return "CollNet", "collnet", gdr
    if head == "NET" and second:
        s = second.lower()
        if s == "socket":
            return "NET/Socket", "socket", gdr
        if s == "ib":
            return "NET/IB", "ib", gdr
        if "libfabric" in s or s in ("ofi", "aws ofi", "efa"):
            return f"NET/{second}", "ofi", gdr
        return f"NET/{second}", "net?", gdr
    return v[:40], "?", gdr


def parse_warn(proc: Process, msg: str, ev: Evidence) -> None:
    proc.warnings.append(ev)
    if "NET/OFI" in msg and any(s in msg for s in _OFI_FAILURES):
        proc.plugin_failures.append(("ofi", ev))


def parse_info(log: ParsedLog, proc: Process, msg: str, ev: Evidence, seq: int, repeated: int) -> None:
    c0 = msg[:1]
    if c0 in ("C", "R") and (msg.startswith("Channel ") or msg.startswith("Ring ")):
        _parse_channel(log, proc, msg, ev, seq, repeated)
        return
    if msg.startswith("comm 0x") or msg.startswith("ncclComm"):
        _parse_comm(proc, msg, ev, seq)
        return
    for prefixes, reader in _INFO_READERS:
        if msg.startswith(prefixes):
            reader(proc, msg, ev)
            return
    if msg.startswith("NET/IB") and "No device found" in msg:
        proc.plugin_failures.append(("ib", ev))
        return
    if " set by environment to " in msg:
        _parse_env(proc, msg, ev)


def _parse_channel(log: ParsedLog, proc: Process, msg: str, ev: Evidence, seq: int, repeated: int) -> None:
    m = _CHANNEL.match(msg)
    if m is None:
        if "->" in msg:
            log.unparsed.append(ev)
        return
    label, kind, gdr = classify_via(m.group("via"))
    log.channels.append(
        Channel(
            proc=proc.key,
            seq=seq,
            channel=int(m.group("ch")),
            src=int(m.group("src")),
            dst=int(m.group("dst")),
            src_dev=int(m.group("sdev")) if m.group("sdev") else None,
            dst_dev=int(m.group("ddev")) if m.group("ddev") else None,
            direction=m.group("dir"),
            via=m.group("via"),
            label=label,
            kind=kind,
            gdr=gdr,
            evidence=ev,
            repeated=repeated,
        )
    )


_COMM_FIELDS = (
    ("rank", "rank", int),
    ("nranks", "nranks", int),
    ("cudaDev", "cuda_dev", int),
    ("busId", "bus_id", str),
    ("commId", "comm_id", str),
    ("parent", "parent", str),
    ("color", "color", str),
    ("splitCount", "split_count", str),
)


def _parse_comm(proc: Process, msg: str, ev: Evidence, seq: int) -> None:
    m = _COMM_TOPO.match(msg)
    if m:
        c = _local_comm(proc, m.group("ptr"), seq)
        c.rank = int(m.group("rank"))
        c.nranks = int(m.group("nranks"))
        c.nnodes = int(m.group("nnodes"))
        c.local_ranks = int(m.group("lranks"))
        c.local_rank = int(m.group("lrank"))
        c.evidence.append(ev)
        return
    m = _COMM_EVENT.match(msg)
    if not m or m.group("what") != "Init":
        return
    kv = dict(_KV.findall(m.group("rest")))
    c = _local_comm(proc, m.group("ptr"), seq, new=(m.group("state") == "START"), comm_id=kv.get("commId"))
    c.fn = c.fn or m.group("fn")
    for name, attr, conv in _COMM_FIELDS:
        if name in kv and getattr(c, attr) is None:
            try:
                setattr(c, attr, conv(kv[name]))
            except ValueError:
                pass
    c.evidence.append(ev)


def _local_comm(proc: Process, ptr: str, seq: int, *, new: bool = False, comm_id: str | None = None) -> LocalComm:
    """The process's latest communicator with this pointer (pointers are reused after a Destroy)."""
    for c in reversed(proc.comms):
        if c.ptr == ptr:
            fresh_init = new and any("Init START" in e.text for e in c.evidence)
            other_id = comm_id is not None and c.comm_id is not None and c.comm_id != comm_id
            if not (fresh_init or other_id):
                return c
            break
    c = LocalComm(proc=proc.key, ptr=ptr, seq=seq)
    proc.comms.append(c)
    return c


def _parse_version(proc: Process, msg: str, ev: Evidence) -> None:
    m = _VERSION.match(msg)
    if m and proc.nccl_version is None:
        proc.nccl_version = m.group("v")
        proc.note("version", ev)


def _parse_bootstrap(proc: Process, msg: str, ev: Evidence) -> None:
    m = _BOOTSTRAP.match(msg)
    if m and proc.bootstrap_ip is None:
        proc.bootstrap_if, proc.bootstrap_ip = m.group("ifname"), m.group("ip")
        proc.note("bootstrap", ev)


def _parse_ofi(proc: Process, msg: str, ev: Evidence) -> None:
    if any(s in msg for s in _OFI_FAILURES):
        proc.plugin_failures.append(("ofi", ev))
        return
    m = _OFI_PROVIDER.match(msg)
    if m:
        proc.provider = m.group("prov")
        proc.fabric = m.group("fabric")
        proc.nics = int(m.group("nics")) if m.group("nics") else None
        proc.note("provider", ev)
        return
    m = _OFI_INIT.match(msg)
    if m:
        proc.ofi_version = m.group("v")
        proc.note("ofi", ev)
        return
    m = _OFI_LIBFABRIC.match(msg)
    if m:
        proc.libfabric_version = m.group("v")
        return
    m = _OFI_PROTOCOL.match(msg)
    if m:
        proc.ofi_protocol = m.group("p")


def _parse_plugin(proc: Process, msg: str, ev: Evidence) -> None:
    m = _PLUGIN_MISSING.match(msg)
    if m:
        lib = m.group("a") or m.group("b") or m.group("c") or "?"
        proc.plugin_failures.append(("plugin-missing:" + lib, ev))
        return
    m = _PLUGIN_LOADED.match(msg)
    if m:
        proc.plugins_loaded.append(m.group("name") or m.group("lib"))
        proc.note("plugin-loaded", ev)


def _parse_using_network(proc: Process, msg: str, ev: Evidence) -> None:
    m = _USING_NET.match(msg)
    if m:
        proc.nets.append(m.group("net"))
        proc.note("net:" + m.group("net"), ev)


def _parse_assigned(proc: Process, msg: str, ev: Evidence) -> None:
    m = _ASSIGNED.match(msg)
    if m:
        proc.nets.append(m.group("net"))
        proc.note("assigned:" + m.group("net"), ev)


def _parse_initialized(proc: Process, msg: str, ev: Evidence) -> None:
    m = _INITIALIZED.match(msg)
    if m:
        proc.note("net-init:" + m.group("net"), ev)


def _parse_failed_net(proc: Process, msg: str, ev: Evidence) -> None:
    m = _FAILED_NET.match(msg)
    if m:
        proc.plugin_failures.append(("net-init:" + m.group("net"), ev))


def _parse_env(proc: Process, msg: str, ev: Evidence) -> None:
    m = _ENV.match(msg)
    if m:
        proc.env[m.group("var")] = m.group("val")
        proc.note("env:" + m.group("var"), ev)


#: Message prefix(es) -> reader, tried in order after channel and communicator lines.
_INFO_READERS = (
    (("NCCL version",), _parse_version),
    (("Bootstrap",), _parse_bootstrap),
    (("NET/OFI",), _parse_ofi),
    (("NET/Plugin", "Successfully loaded"), _parse_plugin),
    (("Using network",), _parse_using_network),
    (("Assigned NET plugin",), _parse_assigned),
    (("Initialized NET plugin",), _parse_initialized),
    (("Failed to initialize NET plugin",), _parse_failed_net),
)
