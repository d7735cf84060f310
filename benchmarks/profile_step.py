"""Where one training step's GPU time goes: the job's model (build, kernels, FSDP2) on one GPU, profiled.

    python benchmarks/profile_step.py [--batch 22] [--kernels liger] [--seq 2048]

Builds the qwen2.5-1.5b model with the job's own functions (worker/train.py's build_model and shard_model,
worker/kernels.py), runs 3 warm-up steps, profiles 2 with torch.profiler and prints JSON: GPU time per kernel
family (matmul, attention, liger/Triton, elementwise, optimizer, copies) and the 12 largest kernels.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import defaultdict

FAMILIES = (
    ("attention", ("flash", "fmha", "attention", "cudnn")),
    ("matmul", ("gemm", "sm90_xmma", "cutlass", "nvjet", "ampere", "cublas")),
    ("liger/triton", ("_kernel", "triton")),
    ("optimizer", ("adam", "multi_tensor")),
    ("copies/casts", ("copy", "cat", "split", "chunk", "foreach")),
    ("nccl", ("nccl",)),
)


def family(name: str) -> str:
    low = name.lower()
    for fam, keys in FAMILIES:
        if any(k in low for k in keys):
            return fam
    return "elementwise/other"


def attention_backends(batch: int, seq: int) -> dict[str, float | str]:
    """ms of one causal SDPA forward + backward of one layer's shape (12 query heads, 2 kv heads, head 128)."""
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.functional import scaled_dot_product_attention as sdpa

    q = torch.randn(batch, 12, seq, 128, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    k = torch.randn(batch, 2, seq, 128, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    v = torch.randn_like(k, requires_grad=True)
    out: dict[str, float | str] = {}
    for name, backend in (("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)):
        for gqa in (True, False):
            kk, vv = (k, v) if gqa else (k.repeat_interleave(6, 1), v.repeat_interleave(6, 1))
            try:
                with sdpa_kernel([backend]):
                    for _ in range(2):
                        sdpa(q, kk, vv, is_causal=True, enable_gqa=gqa).sum().backward()
                    torch.cuda.synchronize()
                    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    start.record()
                    for _ in range(5):
                        sdpa(q, kk, vv, is_causal=True, enable_gqa=gqa).sum().backward()
                    end.record()
                    torch.cuda.synchronize()
                out[f"{name}{'-gqa' if gqa else '-repeat'}"] = round(start.elapsed_time(end) / 5, 2)
            except Exception as e:  # noqa: BLE001 - a backend that does not take this shape
                out[f"{name}{'-gqa' if gqa else '-repeat'}"] = f"{type(e).__name__}: {str(e)[:120]}"
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=22)
    ap.add_argument("--seq", type=int, default=2048)
    ap.add_argument("--kernels", default="liger")
    args = ap.parse_args(argv)
    import torch
    import torch.distributed as dist
    from torch.profiler import ProfilerActivity, profile

    from raytrain_helpers.core.config import PRESETS
    from raytrain_helpers.worker import kernels
    from raytrain_helpers.worker.train import build_model, shard_model

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29533")
    device = torch.device("cuda", 0)
    torch.cuda.set_device(device)
    dist.init_process_group("nccl", rank=0, world_size=1, device_id=device)
    cfg = dict(model=dict(PRESETS["qwen2.5-1.5b"]), seed=0)
    torch.manual_seed(0)
    model = build_model(cfg, device)
    used = kernels.apply(model, args.kernels, on_gpu=True)
    shard_model(model, mixed_precision=True)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    ids = torch.randint(0, model.config.vocab_size, (args.batch, args.seq), device=device)

    def step():
        kernels.causal_lm_loss(model, ids).backward()
        opt.step()
        opt.zero_grad(set_to_none=False)

    for _ in range(3):
        step()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(2):
            step()
        torch.cuda.synchronize()
    per_kernel: dict[str, float] = defaultdict(float)
    for ev in prof.key_averages():
        t = getattr(ev, "device_time_total", None) or getattr(ev, "cuda_time_total", 0)
        if t and ev.key and not ev.key.startswith("ProfilerStep"):
            per_kernel[ev.key] += t / 2 / 1e3  # ms per step
    fams: dict[str, float] = defaultdict(float)
    for k, v in per_kernel.items():
        fams[family(k)] += v
    top = sorted(per_kernel.items(), key=lambda kv: -kv[1])[:12]
    out = dict(
        batch=args.batch,
        seq=args.seq,
        kernels=used,
        gpu_ms_per_step=sum(fams.values()),
        families_ms={k: round(v, 1) for k, v in sorted(fams.items(), key=lambda kv: -kv[1])},
        top_kernels_ms=[(k[:110], round(v, 1)) for k, v in top],
        sdpa_backends=dict(
            flash=torch.backends.cuda.flash_sdp_enabled(),
            cudnn=torch.backends.cuda.cudnn_sdp_enabled(),
            mem_efficient=torch.backends.cuda.mem_efficient_sdp_enabled(),
        ),
    )
    model = opt = ids = None  # free the GPU for the attention timings
    torch.cuda.empty_cache()
    out["attention_ms_per_layer"] = attention_backends(args.batch, args.seq)
    print(json.dumps(out, indent=2))
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
