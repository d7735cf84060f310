"""Throughput before any money is spent: GPU peaks, MFU, and the predicted step time of the FSDP job.

Pure computation. A training step of one GPU costs ``flops_per_token x tokens`` of compute at a calibrated share
of the GPU's dense bf16 peak, and moves the bytes FSDP all-gathers (bf16 parameters, forward and backward) and
reduce-scatters (fp32 gradients) over the slowest link of the ring (NVLink or PCIe inside a node, the
instance's EFA or TCP between nodes, or NCCL's sockets when P2P is off). FSDP prefetching overlaps the two:

    step = max(compute, comm) + (1 - OVERLAP) x min(compute, comm)

tokens/s per GPU = batch x seq_len / step; time for the configured steps; cost per million tokens from the
hourly price of the stack (plan/cost.py). Two kinds of efficiency factor were measured on H200s (the
compute efficiency, and NCCL sockets between two GPUs of one host); the link efficiencies and the overlap are
assumed (CALIBRATION marks each). Every other GPU and link uses its published figure times the same factor,
which is the prediction's largest uncertainty off H200.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from ..core.presets import INSTANCE_TYPES
from ..core.settings import Settings
from ..core.tables import table
from . import cost
from .memory import aws_plan, batch_for, count_params, kernels_for, model_config, shape

#: Dense (no sparsity) bf16 tensor-core peaks, TFLOP/s per GPU, with the source of each figure. NVIDIA's data
#: sheets print the 2:4-sparsity figure; dense is half of it.
PEAK_BF16_TFLOPS: dict[str, tuple[float, str]] = {
    "H200": (989.4, "NVIDIA H200 Tensor Core GPU data sheet (SXM): BF16 1,979 TFLOPS with sparsity"),
    "H100 NVL": (835.5, "NVIDIA H100 data sheet (H100 NVL): BF16 1,671 TFLOPS with sparsity"),
    "H100 PCIe": (756.5, "NVIDIA H100 data sheet (H100 PCIe): BF16 1,513 TFLOPS with sparsity"),
    "H100": (989.4, "NVIDIA H100 data sheet (H100 SXM): BF16 1,979 TFLOPS with sparsity"),
    "A100": (312.0, "NVIDIA A100 data sheet: BF16 312 TFLOPS dense (624 with sparsity)"),
    "L40S": (362.05, "NVIDIA L40S data sheet: BF16 362.05 TFLOPS dense (733 with sparsity)"),
    "L4": (121.0, "NVIDIA L4 data sheet: BF16 242 TFLOPS with sparsity"),
    "A10G": (125.0, "NVIDIA A10 data sheet: BF16 125 TFLOPS dense (AWS publishes no figure for its A10G)"),
}

#: Links, GB/s per direction: NVLink per GPU, PCIe per GPU, EFA / network per instance.
NVLINK_GBPS = {"H200": 450.0, "H100": 450.0, "A100": 300.0}  # NVLink 4 (900 GB/s both ways), NVLink 3 (600)
PCIE_GBPS = 25.0  # PCIe Gen4 x16: 32 GB/s raw, about 25 usable (L4, L40S, A10G: no NVLink)
#: Network bandwidth per instance (AWS's instance type pages), Gbit/s.
INSTANCE_NET_GBIT = {
    "g5.12xlarge": 40,
    "g5.48xlarge": 100,
    "g6.12xlarge": 40,
    "g6.24xlarge": 50,
    "g6.48xlarge": 100,
    "g6e.12xlarge": 100,
    "g6e.48xlarge": 400,
    "p4d.24xlarge": 400,
    "p4de.24xlarge": 400,
    "p5.48xlarge": 3200,
    "p5e.48xlarge": 3200,
    "p5en.48xlarge": 3200,
}

#: Efficiency factors: the share of the published figure the job reaches, with the run each was measured on
#: (benchmarks/results/h200-perf.json). Compute: MFU = E x T / (T + T_half), T = tokens per GPU and step (small
#: batches leave the GPU idle between kernels), fitted per kernel choice on 1 x H200, qwen2.5-1.5b, seq 2048.
CALIBRATION: dict[str, tuple[float, str]] = {
    "compute_liger": (0.600, "E, liger: MFU 0.355 at batch 4 and 0.533 at batch 22 (1 x H200, torchrun and Ray)"),
    "compute_liger_half": (5644.0, "T_half (tokens), liger: the same two runs"),
    "compute_none": (0.430, "E, no kernels: MFU 0.31 at batch 4 and 0.367 at batch 9 (1 x H200, torchrun)"),
    "compute_none_half": (3183.0, "T_half (tokens), no kernels: the same two runs"),
    "nvlink": (0.7, "NCCL bus bandwidth over NVLink is about 70 % of the link (NCCL tests on H100); not measured"),
    "pcie": (0.8, "not measured"),
    "efa": (0.8, "not measured"),
    "socket_local_gbps": (3.5, "GB/s, NCCL sockets between 2 GPUs of one host: the 2 x H200 gpu-evidence socket runs"),
    "socket_net": (0.5, "NCCL sockets over the instance network: not measured"),
    "overlap": (0.5, "share of the shorter of compute and comm hidden behind the longer: assumed, not separable"),
}


def compute_efficiency(kernels: str, tokens_per_gpu: int) -> float:
    """The calibrated MFU of the job's compute alone (no communication) at this many tokens per GPU and step."""
    key = "compute_liger" if kernels == "liger" else "compute_none"
    top, half = CALIBRATION[key][0], CALIBRATION[key + "_half"][0]
    return top * tokens_per_gpu / (tokens_per_gpu + half)


def gpu_model(name: str) -> str | None:
    """The PEAK_BF16_TFLOPS key a device name (``NVIDIA H200``, ``NVIDIA A100-SXM4-80GB``) belongs to."""
    up = name.upper()
    for model in sorted(PEAK_BF16_TFLOPS, key=len, reverse=True):
        if model.upper() in up:
            return model
    return None


def peak_table() -> dict[str, float]:
    """``{model: TFLOPs}``: what the job config hands the workers (they may not import this module)."""
    return {k: v[0] for k, v in PEAK_BF16_TFLOPS.items()}


def flops_per_token(model_cfg: dict[str, Any], seq_len: int) -> float:
    """6 N + 6 L s d_attn: every weight forward and backward, and causal attention (half of PaLM's 12 L s d)."""
    n = count_params(model_cfg)["total"]
    sh = shape(model_cfg)
    return 6.0 * n + 6.0 * sh["layers"] * seq_len * sh["heads"] * sh["head_dim"]


def mfu(model_cfg: dict[str, Any], seq_len: int, tokens_per_s_per_gpu: float, peak_tflops: float) -> float:
    """(6 N + attention FLOPs) x tokens/s per GPU / the GPU's dense bf16 peak."""
    return flops_per_token(model_cfg, seq_len) * tokens_per_s_per_gpu / (peak_tflops * 1e12)


def fsdp_bytes_per_step(params: int, world_size: int) -> float:
    """Bytes each GPU sends per step: bf16 all-gathers in forward and backward, fp32 reduce-scatter (ring)."""
    return (2 + 2 + 4) * params * (world_size - 1) / world_size


@dataclass
class Link:
    """The slowest link of the FSDP ring: its name and usable GB/s."""

    name: str
    gbps: float
    note: str = ""


def link_for(model: str, *, nodes: int, transport: str, instance_type: str | None = None) -> Link:
    """``transport``: ``p2p`` (NVLink or PCIe), ``socket`` (NCCL sockets), ``efa``; between nodes the NIC decides."""
    cal = {k: v[0] for k, v in CALIBRATION.items()}
    if model in NVLINK_GBPS:
        intra = Link("NVLink", NVLINK_GBPS[model] * cal["nvlink"], f"{NVLINK_GBPS[model]:.0f} GB/s x {cal['nvlink']}")
    else:
        intra = Link("PCIe", PCIE_GBPS * cal["pcie"], f"{PCIE_GBPS:.0f} GB/s x {cal['pcie']}")
    net_gbit = INSTANCE_NET_GBIT.get(instance_type or "", 0)
    if transport == "socket":
        if nodes > 1 and net_gbit:
            return Link("TCP sockets", net_gbit / 8 * cal["socket_net"], f"{net_gbit} Gbit/s x {cal['socket_net']}")
        return Link("NCCL sockets (one host)", cal["socket_local_gbps"], "measured on 2 x H200")
    if nodes > 1:
        if not net_gbit:
            raise ValueError(f"no network bandwidth known for {instance_type!r}: add it to INSTANCE_NET_GBIT")
        efa = Link("EFA", net_gbit / 8 * cal["efa"], f"{net_gbit} Gbit/s per instance x {cal['efa']}")
        return efa if efa.gbps < intra.gbps else intra
    return intra


@dataclass
class Prediction:
    """Predicted throughput and cost of one configuration (per GPU unless said otherwise)."""

    gpu: str
    world_size: int
    nodes: int
    batch_size: int
    seq_len: int
    kernels: str
    link: str
    link_gbps: float
    compute_s: float
    comm_s: float
    step_s: float
    tokens_per_s_per_gpu: float
    mfu: float
    steps: int
    time_s: float
    usd_per_hour: float | None = None
    usd_per_million_tokens: float | None = None
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def rows(self) -> list[tuple[str, str]]:
        r = [
            ("shape", f"{self.world_size} x {self.gpu} on {self.nodes} node(s), {self.kernels} kernels"),
            ("per-GPU batch", f"{self.batch_size} x {self.seq_len} tokens"),
            ("slowest link", f"{self.link}, {self.link_gbps:.1f} GB/s usable"),
            ("compute | comm per step", f"{self.compute_s:.3f} s | {self.comm_s:.3f} s"),
            ("predicted step", f"{self.step_s:.3f} s"),
            ("predicted tokens/s per GPU", f"{self.tokens_per_s_per_gpu:,.0f} (MFU {self.mfu:.0%})"),
            (f"time for {self.steps} steps", f"{self.time_s:.0f} s (training steps only)"),
        ]
        if self.usd_per_million_tokens is not None:
            r.append(("cost per million tokens", f"${self.usd_per_million_tokens:.3f} at ${self.usd_per_hour:.2f}/h"))
        return r

    def show(self) -> None:
        table(self.rows(), ["prediction", "value"])
        for n in self.notes:
            print(f"note: {n}")


def predict(
    model_cfg: dict[str, Any],
    *,
    gpu: str,
    world_size: int,
    nodes: int = 1,
    batch_size: int,
    seq_len: int,
    kernels: str = "liger",
    transport: str = "p2p",
    instance_type: str | None = None,
    steps: int = 1,
    usd_per_hour: float | None = None,
    link_gbps: float | None = None,
) -> Prediction:
    """Tokens/s per GPU, step time, time for ``steps`` and cost per million tokens of one configuration.

    ``link_gbps`` replaces the usable bandwidth of the slowest link (GB/s), e.g. one measured with nccl-tests."""
    if gpu not in PEAK_BF16_TFLOPS:
        raise ValueError(f"unknown GPU model {gpu!r}. Fix: one of {', '.join(PEAK_BF16_TFLOPS)}")
    peak = PEAK_BF16_TFLOPS[gpu][0] * 1e12
    tokens = batch_size * seq_len
    eff = compute_efficiency(kernels, tokens)
    compute = flops_per_token(model_cfg, seq_len) * tokens / (peak * eff)
    link = link_for(gpu, nodes=nodes, transport=transport, instance_type=instance_type)
    if link_gbps is not None:
        link = Link(link.name, link_gbps, "given")
    comm = fsdp_bytes_per_step(count_params(model_cfg)["total"], world_size) / (link.gbps * 1e9)
    step = max(compute, comm) + (1 - CALIBRATION["overlap"][0]) * min(compute, comm)
    tps = tokens / step
    pred = Prediction(
        gpu=gpu,
        world_size=world_size,
        nodes=nodes,
        batch_size=batch_size,
        seq_len=seq_len,
        kernels=kernels,
        link=link.name,
        link_gbps=link.gbps,
        compute_s=compute,
        comm_s=comm,
        step_s=step,
        tokens_per_s_per_gpu=tps,
        mfu=mfu(model_cfg, seq_len, tps, peak / 1e12),
        steps=steps,
        time_s=steps * step,
    )
    if usd_per_hour is not None:
        pred.usd_per_hour = usd_per_hour
        pred.usd_per_million_tokens = usd_per_hour / 3600 / (tps * world_size) * 1e6
    if comm > compute:
        pred.notes.append(f"communication-bound: {link.name} ({link.note}) is the bottleneck")
    return pred


def predict_aws(settings: Settings, *, transport: str = "efa", batch_size: int | None = None, prices=None):
    """The configured AWS shape: ``gpu_node_count`` x ``gpu_node_type``, its price from plan/cost.py."""
    a, t = settings.aws, settings.train
    it = INSTANCE_TYPES[a.gpu_node_type]
    plan = aws_plan(settings)
    est = cost.estimate(settings, a.region, prices)
    return predict(
        model_config(settings),
        gpu=it["gpu_model"],
        world_size=plan.world_size,
        nodes=a.gpu_node_count,
        batch_size=batch_size or plan.batch_size or 1,
        seq_len=t.seq_len,
        kernels=plan.kernels,
        transport=transport,
        instance_type=a.gpu_node_type,
        steps=t.steps,
        usd_per_hour=est.total_per_hour if est.complete else None,
    )


def predict_local(settings: Settings, gpus: list[dict[str, Any]], *, transport: str = "p2p", world_size: int = 0):
    """The local GPUs (``[{'name': 'NVIDIA H200', 'mem_gib': 139.8}, ...]``, as 01 lists them); no price."""
    if not gpus:
        raise ValueError("no local GPUs: the prediction is for GPU runs (CPU runs use gloo)")
    model = gpu_model(gpus[0]["name"])
    if model is None:
        raise ValueError(f"no bf16 peak known for {gpus[0]['name']!r}. Fix: add it to PEAK_BF16_TFLOPS")
    world = world_size or settings.train.num_workers or len(gpus)
    mem = min(g["mem_gib"] for g in gpus)
    return predict(
        model_config(settings),
        gpu=model,
        world_size=world,
        batch_size=batch_for(settings, world, on_gpu=True, device_mem_gib=mem),
        seq_len=settings.train.seq_len,
        kernels=kernels_for(settings, on_gpu=True),
        transport=transport,
        steps=settings.train.steps,
    )


def predictions(settings: Settings, *, local_gpus: list[dict[str, Any]] | None) -> dict[str, Prediction]:
    """01 and 07: one prediction per transport 07 compares, by the benchmark's labels.

    ``local_gpus``: the GPUs 01 found on this machine (``[]`` on a CPU-only machine: nothing to predict); None =
    the aws shape (``gpu_node_count`` x ``gpu_node_type``, EFA and ``NCCL_NET=Socket``, priced)."""
    if local_gpus is None:
        return {label: predict_aws(settings, transport=label) for label in ("efa", "socket")}
    if not local_gpus:
        return {}
    return {label: predict_local(settings, local_gpus, transport=label) for label in ("p2p", "socket")}


def step_text(seconds: float) -> str:
    """A step time as people read it: seconds from one second up, milliseconds below."""
    return f"{seconds:.3f} s" if seconds >= 1 else f"{seconds * 1000:.2f} ms"


def show_predictions(preds: dict[str, Prediction]) -> None:
    """A table of the predictions side by side (plain text, stable across runs)."""
    if not preds:
        print("no GPU workers here: no throughput prediction (CPU workers train with gloo)")
        return
    first = next(iter(preds.values()))
    print(f"{first.world_size} x {first.gpu} on {first.nodes} node(s), batch {first.batch_size} x {first.seq_len}, "
          f"{first.kernels} kernels, {first.steps} steps")  # fmt: skip
    rows = []
    for label, p in preds.items():
        per_m = f"${p.usd_per_million_tokens:.3f}" if p.usd_per_million_tokens is not None else "-"
        rows.append(
            (label, f"{p.link} {p.link_gbps:.1f} GB/s", step_text(p.step_s), f"{p.tokens_per_s_per_gpu:,.0f}",
             f"{p.mfu:.0%}", f"{p.time_s:.1f} s", per_m)
        )  # fmt: skip
    table(rows, ["transport", "slowest link", "step", "tokens/s per GPU", "MFU", "time for steps", "$ per M tokens"])


def side_by_side(preds: dict[str, Prediction], measured: dict[str, float]) -> list[tuple[str, str, str, str]]:
    """07: (label, predicted, measured, error) for every label with both; tokens/s per GPU."""
    rows = []
    for label, m in measured.items():
        p = preds.get(label)
        if p is None or not m:
            continue
        err = (p.tokens_per_s_per_gpu - m) / m
        rows.append((label, f"{p.tokens_per_s_per_gpu:,.0f}", f"{m:,.0f}", f"{err:+.0%}"))
    return rows
