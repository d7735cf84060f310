"""Synthetic example lines for one instance type: what a healthy EFA pair and the silent fallback print.

These are typed for illustration, not captured, and every view says so. A channel line carries ``/GDRDMA`` only
where GPUs and the EFA device exchange data directly (GPUDirect RDMA), so the example for an instance type without
it (the default ``g6.12xlarge``) shows none: the learner compares it with their own logs.

Which instance types have GPUDirect RDMA over EFA: aws-ofi-nccl's platform table, ``platform_data_map`` in
``src/platform-aws.cpp`` of aws/aws-ofi-nccl (commit 45197dfad429db8e9fbc2da408d7c906c76dda2d, checked 2026-12-04),
sets ``gdr_required = true`` for ``p4d.24xlarge``, ``p4de.24xlarge``, ``p5``/``p5e`` (``^p5(e?\\..*)``), ``p5en`` and
later P families (``^(p5en\\.48xlarge)|(^p([6-9]|[0-9]{2,}).*)``), and ``false`` for ``g5.48xlarge`` and
``p3dn.24xlarge``; G6 / G6e have no entry (no GPUDirect RDMA: NCCL stages the data through host memory).
"""

from __future__ import annotations

import re

from ..core.presets import INSTANCE_TYPES

#: GPU instance types whose EFA carries GPUDirect RDMA (the aws-ofi-nccl platform table above, GPU rows).
GPUDIRECT_RDMA = re.compile(r"^(p4d\.24xlarge|p4de\.24xlarge|p5e?\..*|p5en\..*|p([6-9]|[0-9]{2,}).*)$")
#: The label every synthetic example carries.
SYNTHETIC = "synthetic example (typed for illustration, not captured from any run)"


def gpudirect_rdma(instance_type: str) -> bool:
    """Whether EFA on ``instance_type`` moves GPU memory directly (GPUDirect RDMA): ``p4d``/``p5`` yes, ``g6`` no."""
    return bool(GPUDIRECT_RDMA.match(str(instance_type).strip().lower()))


def efa_example(instance_type: str, gpus_per_node: int = 4) -> str:
    """Synthetic lines of one inter-node pair (the last rank of node 0 to the first of node 1) on two
    ``instance_type`` nodes: healthy over EFA, then the silent fallback over TCP. ``/GDRDMA`` appears only where the
    instance type has GPUDirect RDMA."""
    n = max(1, int(gpus_per_node))
    a, b, dev = n - 1, n, n - 1
    prefix = f"ip-10-0-1-11:4211:4211 [{dev}] NCCL INFO"
    gdr = gpudirect_rdma(instance_type)
    nics = INSTANCE_TYPES.get(instance_type, {}).get("efa", 1)
    via = "NET/Libfabric/0/GDRDMA" if gdr else "NET/Libfabric/0"
    why = (
        "GPUDirect RDMA: the channel line ends in /GDRDMA"
        if gdr
        else "no GPUDirect RDMA on this instance type: data is staged through host memory, no RDMA suffix"
    )
    return "\n".join(
        [
            f"{SYNTHETIC}: 2 x {instance_type}, ranks {a} and {b} on different nodes",
            f"healthy, over EFA ({why}):",
            f"  {prefix} NET/OFI Selected provider is efa, fabric is efa (found {nics} nics)",
            f"  {prefix} Channel 00/0 : {a}[{dev}] -> {b}[0] [send] via {via}",
            "the silent fallback (the same pair, over TCP):",
            f"  {prefix} Using network Socket",
            f"  {prefix} Channel 00/0 : {a}[{dev}] -> {b}[0] [send] via NET/Socket/0",
        ]
    )


__all__ = ["GPUDIRECT_RDMA", "SYNTHETIC", "efa_example", "gpudirect_rdma"]
