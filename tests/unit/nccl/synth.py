"""Synthetic NCCL_DEBUG=INFO logs written from the documented NCCL 2.2x / aws-ofi-nccl formats.

Used by the NCCL audit tests and to (re)write tests/fixtures/nccl/synthetic-*.log:
``python tests/unit/nccl/synth.py`` regenerates them. Formats follow the real 2xH200 fixtures (NCCL 2.28)
for NCCL's own lines and aws-ofi-nccl's ``NET/OFI ...`` messages (``Initializing aws-ofi-nccl``,
``Selected provider is efa, fabric is efa (found N nics)``, ``No eligible providers were found``).
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "nccl"


@dataclass
class Rank:
    rank: int
    node: int
    local: int
    host: str
    ip: str
    pid: int
    ptr: str

    @property
    def prefix(self) -> str:
        return f"{self.host}:{self.pid}:{self.pid} [{self.local}] NCCL INFO "


def layout(nodes: int, gpus: int, *, hostnames: list[str] | None = None, base_pid: int = 4100) -> list[Rank]:
    out = []
    for r in range(nodes * gpus):
        n, local = divmod(r, gpus)
        host = hostnames[n] if hostnames else f"ip-10-0-1-{11 + n}"
        out.append(Rank(r, n, local, host, f"10.0.1.{11 + n}", base_pid + 37 * r, f"0x55d0c{r:03x}a0"))
    return out


def edges(ranks: list[Rank], nchannels: int = 2) -> list[tuple[int, int, int]]:
    """(channel, src, dst): a ring over all ranks per channel plus tree edges between node leaders."""
    n = len(ranks)
    out = []
    for ch in range(nchannels):
        for i in range(n):
            out.append((ch, i, (i + 1) % n))
    gpus = sum(1 for r in ranks if r.node == 0)
    leaders = [r.rank for r in ranks if r.local == 0]
    for a, b in zip(leaders, leaders[1:], strict=False):
        out.append((0, a, b))
        out.append((0, b, a))
    return [(c, a, b) for c, a, b in out if a != b and gpus > 0]


def channel_lines(
    ranks: list[Rank],
    e: list[tuple[int, int, int]],
    *,
    intra: str,
    inter: str,
    overrides: dict[tuple[int, int], str] | None = None,
) -> dict[int, list[str]]:
    """Per rank: the channel lines it prints. NET connections are printed by both ends ([send]/[receive]);
    P2P/SHM connections by the sender."""
    out: dict[int, list[str]] = {r.rank: [] for r in ranks}
    for ch, a, b in e:
        ra, rb = ranks[a], ranks[b]
        via = (overrides or {}).get((a, b)) or (intra if ra.node == rb.node else inter)
        head = f"Channel {ch:02d}/0 : {a}[{ra.local}] -> {b}[{rb.local}]"
        if via.startswith("NET/"):
            out[a].append(ra.prefix + f"{head} [send] via {via}")
            out[b].append(rb.prefix + f"{head} [receive] via {via}")
        else:
            out[a].append(ra.prefix + f"{head} via {via}")
    return out


def run_log(
    nodes: int = 2,
    gpus: int = 4,
    *,
    net: str = "efa",
    intra: str = "P2P/CUMEM/read",
    provider: str = "efa",
    nccl: str = "2.29.7+cuda13.0",
    ofi: str = "1.17.1",
    seed: int = 0,
    hostnames: list[str] | None = None,
    overrides: dict[tuple[int, int], str] | None = None,
    env: dict[str, str] | None = None,
    comm_id: str = "0x1f2e3d4c5b6a7988",
    print_provider: bool = True,
    base_pid: int = 4100,
    nchannels: int = 2,
) -> str:
    """A whole run's NCCL output, processes interleaved as in one stream.

    net: efa (aws-ofi-nccl works), no-providers (aws-ofi-nccl fails, NCCL falls back to NET/Socket),
    plugin-missing (plugin not found, NET/Socket), provider (libfabric picks ``provider``, e.g. tcp/sockets),
    socket (NCCL_NET=Socket forced: the deliberate TCP baseline), ib."""
    ranks = layout(nodes, gpus, hostnames=hostnames, base_pid=base_pid)
    inter = {"efa": "NET/Libfabric/0/GDRDMA", "provider": "NET/Libfabric/0", "ib": "NET/IB/0/GDRDMA"}.get(
        net, "NET/Socket/0"
    )
    chans = channel_lines(ranks, edges(ranks, nchannels), intra=intra, inter=inter, overrides=overrides)
    per: dict[int, list[str]] = {}
    n = len(ranks)
    for r in ranks:
        p = r.prefix
        lines = [
            p + f"Bootstrap: Using eth0:{r.ip}<0>",
            p + "cudaDriverVersion 13000",
            p + f"NCCL version {nccl}",
            p + "Comm config Blocking set to 1",
        ]
        for k, v in (env or {}).items():
            lines.append(p + f"{k} set by environment to {v}")
        lines += net_lines(r, net, provider=provider, ofi=ofi, print_provider=print_provider)
        lines += comm_lines(r, n, nodes, gpus, comm_id)
        lines += chans[r.rank]
        lines += [p + "Connected all rings, use ring PXN 0 GDR 1"]
        per[r.rank] = lines
    return "\n".join(interleave(per, seed)) + "\n"


def net_lines(r: Rank, net: str, *, provider: str, ofi: str, print_provider: bool) -> list[str]:
    """What one process prints about its NET plugin (aws-ofi-nccl, IB or the Socket fallback)."""
    p = r.prefix
    lines: list[str] = []
    if net in ("efa", "no-providers", "provider"):
        lines += [
            p + "NET/Plugin: Plugin name set by env to libnccl-net-ofi.so",
            p + "NET/Plugin: Loaded net plugin Libfabric (v10)",
            p + "Successfully loaded external plugin libnccl-net-ofi.so",
            p + f"NET/OFI Initializing aws-ofi-nccl {ofi}",
            p + "NET/OFI Using Libfabric version 2.2",
            p + "NET/OFI Using CUDA driver version 13000 with runtime 13000",
            p + "NET/OFI Configuring AWS-specific options",
        ]
    if net == "efa":
        lines += [p + "NET/OFI Setting provider_filter to efa"]
        if print_provider:
            lines += [p + "NET/OFI Selected provider is efa, fabric is efa (found 1 nics)"]
        lines += [
            p + "NET/OFI Using transport protocol SENDRECV",
            p + "NET/OFI Support for global registrations: true",
            p + "Initialized NET plugin Libfabric",
            p + "Assigned NET plugin Libfabric to comm",
            p + "Using network Libfabric",
        ]
    elif net == "provider":
        lines += [
            p + f"NET/OFI Selected provider is {provider}, fabric is 10.0.1.0/24 (found 1 nics)",
            p + "NET/OFI Using transport protocol SENDRECV",
            p + "Initialized NET plugin Libfabric",
            p + "Assigned NET plugin Libfabric to comm",
            p + "Using network Libfabric",
        ]
    elif net == "ib":
        lines += [
            p + "NET/Plugin: Could not find: libnccl-net.so",
            p + "NET/IB : Using [0]mlx5_0:1/IB [RO]; OOB eth0:" + r.ip + "<0>",
            p + "Initialized NET plugin IB",
            p + "Assigned NET plugin IB to comm",
            p + "Using network IB",
        ]
    else:
        if net == "no-providers":
            ts = "[2026-11-29 10:00:01] "
            lines += [
                p + "NET/OFI Setting provider_filter to efa",
                p + "NET/OFI No eligible providers were found",
                "",
                ts + f"{r.host}:{r.pid}:{r.pid} [{r.local}] int nccl_net_ofi_create_plugin("
                "nccl_net_ofi_plugin_t**):259 NCCL WARN NET/OFI Unable to find a protocol that worked."
                "  Failing initialization.",
                "",
                ts + f"{r.host}:{r.pid}:{r.pid} [{r.local}] int nccl_net_ofi_create_plugin("
                "nccl_net_ofi_plugin_t**):352 NCCL WARN NET/OFI aws-ofi-nccl initialization failed",
                p + "Failed to initialize NET plugin Libfabric",
            ]
        elif net == "plugin-missing":
            lines += [p + "NET/Plugin: Could not find: libnccl-net-ofi.so"]
        lines += [
            p + "NET/IB : No device found.",
            p + f"NET/IB : Using [RO]; OOB eth0:{r.ip}<0>",
            p + "Failed to initialize NET plugin IB",
            p + f"NET/Socket : Using [0]eth0:{r.ip}<0>",
            p + "Initialized NET plugin Socket",
            p + "Assigned NET plugin Socket to comm",
            p + "Using network Socket",
        ]
    return lines


def comm_lines(r: Rank, n: int, nodes: int, gpus: int, comm_id: str) -> list[str]:
    """One process's communicator init lines (rank 0 also prints the rings)."""
    p = r.prefix
    lines: list[str] = []
    bus = f"{(r.local + 1) * 16:x}000"
    lines += [
        p + f"ncclCommInitRankConfig comm {r.ptr} rank {r.rank} nranks {n} cudaDev {r.local} "
        f"nvmlDev {r.local} busId {bus} commId {comm_id} - Init START",
        p + f"comm {r.ptr} rank {r.rank} nRanks {n} nNodes {nodes} localRanks {gpus} localRank {r.local} MNNVL 0",
    ]
    if r.rank == 0:
        lines += [p + f"Channel {c:02d}/02 : " + " ".join(str(i) for i in range(n)) for c in range(2)]
    lines += [
        f"{r.host}:{r.pid}:{r.pid + 19} [{r.local}] NCCL INFO [Proxy Service] Device {r.local} CPU core 3",
        p + f"ncclCommInitRankConfig comm {r.ptr} rank {r.rank} nranks {n} cudaDev {r.local} "
        f"nvmlDev {r.local} busId {bus} commId {comm_id} - Init COMPLETE",
    ]
    return lines


def interleave(per: dict[int, list[str]], seed: int) -> list[str]:
    """Merge the processes' lines in a random order that keeps each process's own order."""
    rnd = random.Random(seed)
    idx = {k: 0 for k in per}
    out = []
    live = [k for k in per if per[k]]
    while live:
        k = rnd.choice(live)
        out.append(per[k][idx[k]])
        idx[k] += 1
        if idx[k] >= len(per[k]):
            live.remove(k)
    return out


def ray_prefixed(
    text: str, ips: dict[str, str] | None = None, *, colour: bool = True, actor: str = "RayTrainWorker"
) -> str:
    """As the Ray driver prints worker output: ``(RayTrainWorker pid=P, ip=IP) line`` (cyan prefix)."""
    out = []
    for ln in text.splitlines():
        head = ln.split(" ", 1)[0]
        parts = head.split(":")
        if len(parts) >= 3 and parts[1].isdigit():
            ip = (ips or {}).get(parts[0], "10.0.1.5")
            pre = f"({actor} pid={parts[1]}, ip={ip})"
            out.append((f"\x1b[36m{pre}\x1b[0m " if colour else pre + " ") + ln)
        else:
            out.append(ln)
    return "\n".join(out) + "\n"


def kubectl_prefixed(text: str, pods: dict[str, str] | None = None) -> str:
    """As ``kubectl logs --prefix --timestamps`` prints: ``[pod/NAME/CONTAINER] RFC3339NANO line``."""
    out = []
    for i, ln in enumerate(text.splitlines()):
        m = re.search(r"([A-Za-z0-9][\w.-]*):\d+:\d+ \[", ln)
        pod = (pods or {}).get(m.group(1) if m else "", "raytrain-gpu-group-worker-abc12")
        out.append(f"[pod/{pod}/ray-worker] 2026-11-29T10:00:{i % 60:02d}.{i:09d}Z {ln}")
    return "\n".join(out) + "\n"


SYNTHETIC = {
    "synthetic-efa-2x4-healthy.log": dict(net="efa"),
    "synthetic-efa-2x4-no-providers.log": dict(net="no-providers"),
    "synthetic-efa-2x4-plugin-missing.log": dict(net="plugin-missing"),
    "synthetic-efa-2x4-tcp-provider.log": dict(net="provider", provider="tcp"),
    "synthetic-efa-2x4-sockets-provider.log": dict(net="provider", provider="sockets"),
    "synthetic-efa-2x4-p2p-disabled.log": dict(
        net="efa", intra="NET/Libfabric/0/GDRDMA", env={"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1."}
    ),
    "synthetic-socket-2x4-baseline.log": dict(net="socket", env={"NCCL_NET": "Socket"}),
}

HEADER = (
    "# synthetic: written by tests/unit/nccl/synth.py from the documented NCCL 2.2x / aws-ofi-nccl "
    "log formats; not a captured log\n"
)


def write_all() -> list[Path]:
    out = []
    for name, kw in SYNTHETIC.items():
        path = FIXTURES / name
        path.write_text(HEADER + run_log(**kw))
        out.append(path)
    return out


if __name__ == "__main__":
    for p in write_all():
        print(p)
