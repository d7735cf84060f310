"""The FSDP memory plan: parameters, sharded state, gathered layers, activations and logits per device.

Pure computation from a model config (a preset or a config.json), the world size and the batch shape.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from ..core.config import INSTANCE_TYPES, PRESETS, Settings
from ..core.constants import GIB
from ..core.tables import human_bytes as hb


def count_params(cfg: dict[str, Any]) -> dict[str, int]:
    """Exact parameter count of a Qwen2ForCausalLM built from ``cfg`` (a PRESETS entry or config.json)."""
    h, i, v = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    heads, kv_heads = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    layers = cfg["num_hidden_layers"]
    head_dim = cfg.get("head_dim") or h // heads
    kv = kv_heads * head_dim
    q = heads * head_dim
    attn = (h * q + q) + 2 * (h * kv + kv) + q * h  # q,k,v carry a bias, o does not
    mlp = 3 * h * i  # gate, up, down
    norms = 2 * h
    per_layer = attn + mlp + norms
    embed = v * h
    lm_head = 0 if cfg.get("tie_word_embeddings", False) else v * h
    total = embed + layers * per_layer + h + lm_head
    return dict(total=total, embedding=embed, per_layer=per_layer, layers=layers, lm_head=lm_head, final_norm=h)


@dataclass
class MemoryPlan:
    preset: str
    params: int
    world_size: int
    precision: str  # bf16-mixed (GPU) or fp32 (CPU)
    # the seeds' accounting: bf16 params + bf16 grads + two bf16 AdamW states = 8 bytes/param
    seed_total_gib: float
    seed_per_device_gib: float
    # what this tutorial's job really keeps, sharded: fp32 master params + fp32 grads + 2 fp32 AdamW states
    state_bytes_per_param: int
    state_total_gib: float
    state_per_device_gib: float
    gathered_layers_gib: float  # unsharded layers held during forward/backward (prefetch of 2)
    activations_gib: float  # per device, no activation checkpointing
    logits_gib: float  # per device
    peak_per_device_gib: float
    device_mem_gib: float | None = None
    fits: bool | None = None
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def rows(self) -> list[tuple[str, str]]:
        g = GIB
        r = [
            (
                "model",
                f"{self.preset}: {self.params / 1e9:.3f} B parameters"
                if self.params > 1e8
                else f"{self.preset}: {self.params / 1e6:.2f} M parameters",
            ),
            ("world size", str(self.world_size)),
            (
                "seed's figure (bf16 params+grads+AdamW, 8 B/param)",
                f"{hb(self.seed_total_gib * g)} total, {hb(self.seed_per_device_gib * g)} per device",
            ),
            (
                f"this job's sharded state ({self.precision}, {self.state_bytes_per_param} B/param)",
                f"{hb(self.state_total_gib * g)} total, {hb(self.state_per_device_gib * g)} per device",
            ),
            ("gathered layers (prefetch 2)", hb(self.gathered_layers_gib * g)),
            ("activations + logits per device", hb((self.activations_gib + self.logits_gib) * g)),
            ("planned peak per device", hb(self.peak_per_device_gib * g)),
        ]
        if self.device_mem_gib is not None:
            r.append(("device memory", f"{self.device_mem_gib:.0f} GiB -> {'fits' if self.fits else 'DOES NOT FIT'}"))
        return r


def memory_plan(
    model_cfg: dict[str, Any],
    *,
    world_size: int,
    batch_size: int,
    seq_len: int,
    on_gpu: bool,
    preset: str = "custom",
    device_mem_gib: float | None = None,
) -> MemoryPlan:
    if world_size < 1:
        raise ValueError("world_size must be at least 1")
    n = count_params(model_cfg)
    p = n["total"]
    seed_total = p * 8 / GIB
    state_bpp = 16  # fp32 param + fp32 grad + fp32 exp_avg + fp32 exp_avg_sq
    state_total = p * state_bpp / GIB
    compute_bytes = 2 if on_gpu else 4
    gathered = 2 * n["per_layer"] * compute_bytes / GIB
    h, v, i = model_cfg["hidden_size"], model_cfg["vocab_size"], model_cfg["intermediate_size"]
    kv = model_cfg["num_key_value_heads"] * (model_cfg.get("head_dim") or h // model_cfg["num_attention_heads"])
    tokens = batch_size * seq_len
    # Tensors autograd keeps per token and decoder layer (transformers' Qwen2, SDPA attention, no activation
    # checkpointing), in 16-bit units: the RMSNorms' fp32 inputs and outputs, q/k/v/o inputs, rotary copies,
    # attention output (~22 h), k and v (4 kv), and the SwiGLU MLP's gate, up, silu and product (8 i).
    # Checked on 2 x H200 (qwen2.5-1.5b, seq 2048, batch 4): 50.5 GiB measured, 50.5 GiB planned.
    per_token_layer = (22 * h + 4 * kv + 8 * i) * (compute_bytes / 2)
    activations = tokens * per_token_layer * n["layers"] / GIB
    # logits in compute dtype, their fp32 upcast, log-softmax kept for backward, and its gradient
    logits = tokens * v * (compute_bytes + 4 + 4 + 4) / GIB
    peak = state_total / world_size + gathered + activations + logits
    fits = None if device_mem_gib is None else peak <= 0.9 * device_mem_gib
    plan = MemoryPlan(
        preset=preset,
        params=p,
        world_size=world_size,
        precision="bf16-mixed" if on_gpu else "fp32",
        seed_total_gib=seed_total,
        seed_per_device_gib=seed_total / world_size,
        state_bytes_per_param=state_bpp,
        state_total_gib=state_total,
        state_per_device_gib=state_total / world_size,
        gathered_layers_gib=gathered,
        activations_gib=activations,
        logits_gib=logits,
        peak_per_device_gib=peak,
        device_mem_gib=device_mem_gib,
        fits=fits,
    )
    if fits is False:
        plan.notes.append("reduce batch_size or seq_len, add GPUs/nodes, or use activation checkpointing")
    return plan


def plan_for(settings: Settings, world_size: int, *, on_gpu: bool, device_mem_gib: float | None = None) -> MemoryPlan:
    t = settings.train
    return memory_plan(
        settings.model_config_dict(),
        world_size=world_size,
        batch_size=t.batch_size,
        seq_len=t.seq_len,
        on_gpu=on_gpu,
        preset=t.model_preset,
        device_mem_gib=device_mem_gib,
    )


def aws_plan(settings: Settings) -> MemoryPlan:
    """The memory plan on the configured GPU instance type (from the offline table)."""
    it = INSTANCE_TYPES[settings.aws.gpu_node_type]
    world = settings.train.num_workers or settings.aws.gpu_node_count * settings.aws.gpus_per_node
    return plan_for(settings, world, on_gpu=True, device_mem_gib=it["gpu_mem_gib"])


def seed_plan() -> MemoryPlan:
    """The seeds' example: Qwen2.5-1.5B sharded over 8 L4 GPUs (2 x g6.12xlarge)."""
    return memory_plan(
        PRESETS["qwen2.5-1.5b"],
        world_size=8,
        batch_size=1,
        seq_len=2048,
        on_gpu=True,
        preset="qwen2.5-1.5b",
        device_mem_gib=INSTANCE_TYPES["g6.12xlarge"]["gpu_mem_gib"],
    )


def seed_figure_check() -> tuple[float, float]:
    """The seeds' numbers: Qwen2.5-1.5B at 8 bytes/param is about 12 GB, 1.5 GB per GPU over 8."""
    p = count_params(PRESETS["qwen2.5-1.5b"])["total"]
    return p * 8 / 1e9, p * 8 / 8 / 1e9
