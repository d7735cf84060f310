"""The FSDP memory plan: parameters, sharded state, gathered layers, the gathered root, activations and logits
per device.

Pure computation from a model config (a preset or a config.json), the world size and the batch shape.

The job calls ``fully_shard`` on every decoder layer, then on the whole model (the *root* unit: what no layer
holds, the embeddings, the final norm and the output layer, tied to the embeddings in Qwen2.5). Each layer's
weights are gathered before it runs forward, freed after it, and gathered again before its backward. The root's
are not: PyTorch's ``fully_shard`` documents that ``reshard_after_forward=None`` (the default) means ``False`` for
the root, which keeps its unsharded parameters from the forward pass until the backward pass begins (PyTorch
2.13, ``torch.distributed.fsdp.fully_shard`` docstring). So the plan counts the root's weights, gathered in the
compute dtype, for the whole step.
"""

from __future__ import annotations

import functools
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..core.constants import GIB
from ..core.kernel_families import kernels_note, liger_function
from ..core.presets import INSTANCE_TYPES, PRESETS
from ..core.settings import Settings
from ..core.tables import human_bytes as hb
from ..core.validation import ConfigError


def count_params(cfg: dict[str, Any]) -> dict[str, int]:
    """Exact parameter count of the causal LM ``cfg`` describes (a PRESETS entry or any Hub config.json): Qwen2
    (the presets' family, no ``model_type``) by formula, any other family by building it on PyTorch's ``meta``
    device (no memory, no download) and counting (:func:`counted_on_meta`)."""
    if (cfg.get("model_type") or "qwen2") != "qwen2":
        return counted_on_meta(json.dumps(cfg, sort_keys=True))
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


@functools.lru_cache(maxsize=32)
def counted_on_meta(cfg_json: str) -> dict[str, int]:
    """:func:`count_params` of any family: the model built on the ``meta`` device from its config, its parameters
    counted (shared ones once); the decoder layers are the classes it names in ``_no_split_modules`` (what the job
    shards one by one); what no layer holds is the root (embeddings, final norm, output layer)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    d = {k: v for k, v in json.loads(cfg_json).items() if k not in ("architectures", "transformers_version")}
    kind = d.pop("model_type")
    try:
        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(AutoConfig.for_model(kind, **d))
    except (ValueError, KeyError) as e:
        raise ConfigError(
            f"train.model_id: a config.json of model_type {kind!r} that this transformers cannot build as a causal "
            f"LM ({e}). Fix: a causal LM's config (Llama, Mistral, Qwen2/Qwen3, Gemma, Phi...), or a newer transformers"
        ) from None
    names = set(getattr(model, "_no_split_modules", None) or ())
    layers = [m for m in model.modules() if type(m).__name__ in names]
    total = sum(p.numel() for p in model.parameters())
    per_layer = sum(p.numel() for p in layers[0].parameters()) if layers else 0
    embed = model.get_input_embeddings().weight.numel()
    out = model.get_output_embeddings()
    lm_head = 0 if out is None or out.weight is model.get_input_embeddings().weight else out.weight.numel()
    rest = total - embed - lm_head - len(layers) * per_layer
    return dict(total=total, embedding=embed, per_layer=per_layer, layers=len(layers), lm_head=lm_head, final_norm=rest)


def shape(cfg: dict[str, Any]) -> dict[str, int]:
    """The sizes the activation and FLOPs formulas read, with a Hub config's omissions filled the way transformers
    fills them: key/value heads = attention heads (no grouped-query attention), head_dim = hidden / heads."""
    h, heads = cfg["hidden_size"], cfg["num_attention_heads"]
    return dict(
        hidden=h,
        vocab=cfg["vocab_size"],
        intermediate=cfg.get("intermediate_size") or 4 * h,
        heads=heads,
        kv_heads=cfg.get("num_key_value_heads") or heads,
        head_dim=cfg.get("head_dim") or h // heads,
        layers=cfg["num_hidden_layers"],
    )


@dataclass
class MemoryPlan:
    preset: str
    params: int
    world_size: int
    precision: str  # bf16-mixed (GPU) or fp32 (CPU)
    # the source article's accounting: bf16 params + bf16 grads + two bf16 AdamW states = 8 bytes/param
    article_total_gib: float
    article_per_device_gib: float
    # what this tutorial's job really keeps, sharded: fp32 master params + fp32 grads + 2 fp32 AdamW states
    state_bytes_per_param: int
    state_total_gib: float
    state_per_device_gib: float
    gathered_layers_gib: float  # unsharded layers held during forward/backward (prefetch of 2)
    gathered_root_gib: float  # the root unit (embeddings, final norm, untied output layer) unsharded all step
    activations_gib: float  # per device, no activation checkpointing
    logits_gib: float  # per device
    peak_per_device_gib: float
    device_mem_gib: float | None = None
    fits: bool | None = None
    notes: list[str] = field(default_factory=list)
    batch_size: int | None = None  # sequences per device the plan is for
    kernels: str = "none"  # liger or none
    model_type: str | None = None  # the config's family (None: the presets' Qwen2)

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
                "the source article's figure (bf16 params+grads+AdamW, 8 B/param)",
                f"{hb(self.article_total_gib * g)} total, {hb(self.article_per_device_gib * g)} per device",
            ),
            (
                f"this job's sharded state ({self.precision}, {self.state_bytes_per_param} B/param)",
                f"{hb(self.state_total_gib * g)} total, {hb(self.state_per_device_gib * g)} per device",
            ),
            ("gathered layers (prefetch 2)", hb(self.gathered_layers_gib * g)),
            ("gathered root (held forward to backward)", hb(self.gathered_root_gib * g)),
            ("activations + logits per device", hb((self.activations_gib + self.logits_gib) * g)),
            ("planned peak per device", hb(self.peak_per_device_gib * g)),
        ]
        if self.precision.startswith("bf16"):
            r.append(("fused kernels", kernels_note(self.model_type, self.kernels)))
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
    kernels: str = "none",
) -> MemoryPlan:
    """The plan of one device; ``kernels`` is what the workers will run: ``liger`` or ``none`` (see kernels_for)."""
    if world_size < 1:
        raise ValueError("world_size must be at least 1")
    n = count_params(model_cfg)
    p = n["total"]
    article_total = p * 8 / GIB
    state_bpp = 16  # fp32 param + fp32 grad + fp32 exp_avg + fp32 exp_avg_sq
    state_total = p * state_bpp / GIB
    compute_bytes = 2 if on_gpu else 4
    gathered = 2 * n["per_layer"] * compute_bytes / GIB
    root = (n["embedding"] + n["final_norm"] + n["lm_head"]) * compute_bytes / GIB
    sh = shape(model_cfg)
    h, v, i = sh["hidden"], sh["vocab"], sh["intermediate"]
    kv = sh["kv_heads"] * sh["head_dim"]
    tokens = batch_size * seq_len
    # Tensors autograd keeps per token and decoder layer (transformers' Qwen2, SDPA attention, no activation
    # checkpointing), in 16-bit units: the RMSNorms' fp32 inputs and outputs, q/k/v/o inputs, rotary copies,
    # attention output (~22 h), k and v (4 kv), and the SwiGLU MLP's gate, up, silu and product (8 i).
    # Checked on 2 x H200 (qwen2.5-1.5b, seq 2048, batch 4): 50.5 GiB measured, 50.5 GiB planned.
    per_token_layer = (22 * h + 4 * kv + 8 * i) * (compute_bytes / 2)
    # liger: its RMSNorm keeps only its 16-bit input and output (no fp32 copies), its RoPE keeps no rotated
    # copies, its SwiGLU keeps gate and up, not silu(gate): 7 h-sized, 2 kv-sized and 3 i-sized tensors.
    if kernels == "liger":
        per_token_layer = (14 * h + 4 * kv + 6 * i) * (compute_bytes / 2)
    activations = tokens * per_token_layer * n["layers"] / GIB
    # logits in compute dtype, their fp32 upcast, log-softmax kept for backward, and its gradient
    logits = tokens * v * (compute_bytes + 4 + 4 + 4) / GIB
    if kernels == "liger":  # fused linear cross-entropy: no logits tensor, one chunk of them at a time
        logits = fused_ce_bytes(tokens, h, v) / GIB
    peak = state_total / world_size + gathered + root + activations + logits
    fits = None if device_mem_gib is None else peak <= 0.9 * device_mem_gib
    plan = MemoryPlan(
        preset=preset,
        params=p,
        world_size=world_size,
        precision=("bf16-mixed" if on_gpu else "fp32") + (", liger kernels" if kernels == "liger" else ""),
        article_total_gib=article_total,
        article_per_device_gib=article_total / world_size,
        state_bytes_per_param=state_bpp,
        state_total_gib=state_total,
        state_per_device_gib=state_total / world_size,
        gathered_layers_gib=gathered,
        gathered_root_gib=root,
        activations_gib=activations,
        logits_gib=logits,
        peak_per_device_gib=peak,
        device_mem_gib=device_mem_gib,
        fits=fits,
    )
    if fits is False:
        plan.notes.append("reduce batch_size or seq_len, add GPUs/nodes, or use activation checkpointing")
    return plan


#: Model hub ids whose shape the tutorial knows offline: their plan needs no download (the job still loads them).
KNOWN_HUB_SHAPES = {"Qwen/Qwen2.5-1.5B": "qwen2.5-1.5b", "Qwen/Qwen2.5-1.5B-Instruct": "qwen2.5-1.5b"}
#: Bigger models' shapes known offline, for "does it fit" before anything is downloaded (docs/adapt.md): the
#: config.json values of the public release (Qwen/Qwen2.5-7B: hidden 3584, MLP 18944, 28 layers, 28 heads, 4 key/value
#: heads, vocabulary 152064, untied output layer; 7,615,616,512 parameters, as counted on the meta device).
KNOWN_HUB_CONFIGS: dict[str, dict[str, Any]] = {
    "Qwen/Qwen2.5-7B": {
        "model_type": "qwen2",
        "vocab_size": 152064,
        "hidden_size": 3584,
        "intermediate_size": 18944,
        "num_hidden_layers": 28,
        "num_attention_heads": 28,
        "num_key_value_heads": 4,
        "tie_word_embeddings": False,
        "max_position_embeddings": 131072,
        "rope_theta": 1000000.0,
        "rms_norm_eps": 1e-6,
    },
}


def model_config(settings: Settings) -> dict[str, Any]:
    """The shape the job really trains: ``train.model_id``'s config.json (its folder, or the Hugging Face cache),
    or the ``model_preset``. Used by the memory plan, the job config and the checkpoint check."""
    model_id = settings.train.model_id
    if not model_id:
        return settings.model_config_dict()
    folder = Path(model_id).expanduser()
    found = folder / "config.json" if folder.is_dir() else cached_hub_file(model_id, "config.json")
    if found is not None and Path(found).is_file():
        return json.loads(Path(found).read_text())
    if model_id in KNOWN_HUB_SHAPES:
        return dict(PRESETS[KNOWN_HUB_SHAPES[model_id]])
    if model_id in KNOWN_HUB_CONFIGS:
        return dict(KNOWN_HUB_CONFIGS[model_id])
    raise ConfigError(
        f"train.model_id = {model_id!r}: its config.json is not in the Hugging Face cache here, so the memory plan "
        f"cannot be made. Fix: `hf download {model_id} config.json` (the config alone), or set train.model_id to "
        "a local folder with config.json and *.safetensors"
    )


def cached_hub_file(model_id: str, filename: str) -> str | None:
    """A file of a hub model from the local Hugging Face cache (never downloads); None when it is not there, or when
    huggingface_hub is not installed (the package's own install does not need it: the known shapes then answer)."""
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return None

    try:
        found = try_to_load_from_cache(model_id, filename)
    except ValueError:  # not a valid repo id
        return None
    return found if isinstance(found, str) else None


def model_label(settings: Settings) -> str:
    """The plan's model name: the model_id's last part, or the preset."""
    model_id = settings.train.model_id
    return model_id.rstrip("/").rsplit("/", 1)[-1] if model_id else settings.train.model_preset


def plan_for(
    settings: Settings,
    world_size: int,
    *,
    on_gpu: bool,
    device_mem_gib: float | None = None,
    batch_size: int | None = None,
    kernels: str | None = None,
) -> MemoryPlan:
    """The settings' plan; ``batch_size``/``kernels`` override the settings (e.g. with what a job really ran)."""
    t = settings.train
    kernels = kernels or kernels_for(settings, on_gpu=on_gpu)
    if batch_size is None:
        batch_size = batch_for(settings, world_size, on_gpu=on_gpu, device_mem_gib=device_mem_gib)
    plan = memory_plan(
        model_config(settings),
        world_size=world_size,
        batch_size=batch_size,
        seq_len=t.seq_len,
        on_gpu=on_gpu,
        preset=model_label(settings),
        device_mem_gib=device_mem_gib,
        kernels=kernels,
    )
    plan.batch_size, plan.kernels = batch_size, kernels
    plan.model_type = model_config(settings).get("model_type")
    if (plan.model_type or "qwen2") != "qwen2":
        plan.notes.append(
            f"{plan.model_type}: parameters counted exactly; activations estimated with the per-token formula "
            "measured on Qwen2 (2 x H200), applied to this config's sizes"
        )
    if t.batch_size == "auto":
        plan.notes.append(f"batch_size auto = {batch_size} per device (largest under {AUTO_BATCH_FRACTION:.0%})")
    return plan


def aws_plan(settings: Settings) -> MemoryPlan:
    """The memory plan on the configured GPU instance type (from the offline table)."""
    it = INSTANCE_TYPES[settings.aws.gpu_node_type]
    world = settings.train.num_workers or settings.aws.gpu_node_count * settings.aws.gpus_per_node
    return plan_for(settings, world, on_gpu=True, device_mem_gib=it["gpu_mem_gib"])


def article_plan() -> MemoryPlan:
    """The source article's example: Qwen2.5-1.5B sharded over 8 L4 GPUs (2 x g6.12xlarge)."""
    return memory_plan(
        PRESETS["qwen2.5-1.5b"],
        world_size=8,
        batch_size=1,
        seq_len=2048,
        on_gpu=True,
        preset="qwen2.5-1.5b",
        device_mem_gib=INSTANCE_TYPES["g6.12xlarge"]["gpu_mem_gib"],
    )


def article_figure_check() -> tuple[float, float]:
    """The source article's numbers: Qwen2.5-1.5B at 8 bytes/param is about 12 GB, 1.5 GB per GPU over 8."""
    p = count_params(PRESETS["qwen2.5-1.5b"])["total"]
    return p * 8 / 1e9, p * 8 / 8 / 1e9


#: ``train.batch_size: auto`` takes the largest batch whose planned peak stays under this share of one GPU's
#: memory (the rest: the CUDA context, NCCL buffers and the caching allocator's fragmentation).
AUTO_BATCH_FRACTION = 0.85
#: CPU workers with ``batch_size: auto`` (no device memory to fill).
AUTO_BATCH_CPU = 2


def kernels_for(settings: Settings, *, on_gpu: bool) -> str:
    """What the workers will run: ``liger`` on GPUs unless ``train.kernels: none`` or the model's family has no
    liger-kernel patch (:data:`~raytrain_helpers.core.kernel_families.LIGER_FAMILIES`); always ``none`` on CPU."""
    if not on_gpu or settings.train.kernels == "none":
        return "none"
    return "liger" if liger_function(model_config(settings).get("model_type")) else "none"


def fused_ce_bytes(tokens: int, hidden: int, vocab: int) -> float:
    """liger's fused linear cross-entropy: the LM head's gradient, one chunk of logits and the hidden gradient."""
    chunks = max(1, -(-vocab // hidden))
    chunk = 1 << max(0, (-(-tokens // chunks) - 1).bit_length())  # next power of two, as liger picks it
    return vocab * hidden * (2 + 4) + min(chunk, tokens) * vocab * (2 + 4) + tokens * hidden * 4


def largest_batch(
    model_cfg: dict[str, Any],
    *,
    world_size: int,
    seq_len: int,
    device_mem_gib: float,
    kernels: str,
    fraction: float = AUTO_BATCH_FRACTION,
    limit: int = 256,
) -> int:
    """The largest batch per device whose planned peak is at most ``fraction`` of ``device_mem_gib`` (0: none)."""
    budget = fraction * device_mem_gib

    def peak(b: int) -> float:
        return memory_plan(
            model_cfg, world_size=world_size, batch_size=b, seq_len=seq_len, on_gpu=True, kernels=kernels
        ).peak_per_device_gib

    lo, hi = 0, limit  # the plan grows with the batch: bisect
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if peak(mid) <= budget else (lo, mid - 1)
    return lo


def batch_for(settings: Settings, world_size: int, *, on_gpu: bool, device_mem_gib: float | None) -> int:
    """``train.batch_size``, with ``auto`` resolved from the memory plan (largest_batch) on GPUs."""
    t = settings.train
    if t.batch_size != "auto":
        return int(t.batch_size)
    if not on_gpu:
        return AUTO_BATCH_CPU
    if not device_mem_gib:
        raise ConfigError(
            "train.batch_size = auto needs the GPUs' memory to plan the batch, and none is known here. "
            "Fix: pass device_mem_gib (or the batch a job ran with), or set batch_size to a number"
        )
    b = largest_batch(
        model_config(settings),
        world_size=world_size,
        seq_len=t.seq_len,
        device_mem_gib=device_mem_gib,
        kernels=kernels_for(settings, on_gpu=True),
    )
    if b < 1:
        raise ConfigError(
            f"train.batch_size = auto: not even one sequence of {t.seq_len} tokens fits under "
            f"{AUTO_BATCH_FRACTION:.0%} of {device_mem_gib:.0f} GiB per GPU with {world_size} GPUs. Fix: a shorter "
            "seq_len, more GPUs, or a GPU with more memory"
        )
    return b
