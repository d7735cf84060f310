"""Fused GPU kernels for the model's family (liger-kernel), and the FLOPs accounting behind the job's MFU.

``train.kernels``: ``liger`` patches a model that is already built (before FSDP shards it) with liger-kernel's
RMSNorm, SwiGLU MLP and RoPE, and replaces the model's forward with one that computes the loss straight from
the last hidden states (fused linear cross-entropy: the LM head and the loss in chunks, so the fp32 logits
``[batch, seq, vocab]`` never exist). ``none`` leaves the model alone; ``auto`` = liger on CUDA when it can be
imported, none on CPU.

FSDP2 works with the patched model because only ``forward`` methods change: the root's ``fully_shard`` hooks
still run around the patched forward, so the tied LM head / embedding weight is gathered while the fused loss
reads it, and its gradient is reduce-scattered as usual.

Runs inside the training workers: standard library at import time, torch and liger-kernel inside functions.
"""

from __future__ import annotations

import importlib
from typing import Any

from ..core.kernel_families import kernels_note, liger_function

#: The pinned liger-kernel (the `gpu` extra, constraints.txt and the aws runtime_env pip all use this one).
LIGER_REQUIREMENT = "liger-kernel==0.8.5"
#: sha256 of the one file PyPI publishes for that pin, liger_kernel-0.8.5-py3-none-any.whl (its only runtime
#: dependencies, torch and triton, come with the image; read from the downloaded wheel, 2026-12-05).
LIGER_SHA256 = "60789cd576af073ab9b192b570d2597fd0cdad489cd62fb44fb16256d43754c9"
#: The runtime_env requirement line: pip installs that wheel only if its hash matches (hash-checking mode).
LIGER_HASHED = f"{LIGER_REQUIREMENT} --hash=sha256:{LIGER_SHA256}"
CHOICES = ("auto", "liger", "none")


class KernelsUnavailable(RuntimeError):
    """``train.kernels = liger`` was asked for where liger-kernel cannot run."""


def liger_import_error() -> str | None:
    """None when liger-kernel (and Triton under it) imports here, else why not."""
    try:
        importlib.import_module("liger_kernel.transformers")
    except Exception as e:  # noqa: BLE001 - ImportError, or Triton failing to find a GPU toolchain
        return f"{type(e).__name__}: {e}"
    return None


def resolve(choice: str, *, on_gpu: bool) -> str:
    """``liger`` or ``none`` for this worker; a forced ``liger`` that cannot run raises a clear error."""
    if choice not in CHOICES:
        raise KernelsUnavailable(f"train.kernels = {choice!r} is not one of {', '.join(CHOICES)}")
    if choice == "none":
        return "none"
    if not on_gpu:
        if choice == "liger":
            raise KernelsUnavailable(
                "train.kernels = 'liger' but this worker has no CUDA GPU (liger-kernel's Triton kernels need one). "
                "Fix: kernels: auto (none on CPU) or kernels: none"
            )
        return "none"
    why = liger_import_error()
    if why is None:
        return "liger"
    if choice == "liger":
        raise KernelsUnavailable(
            f"train.kernels = 'liger' but liger-kernel cannot be imported on this worker ({why}). Fix: "
            f"pip install 'raytrain-tutorial[gpu]' ({LIGER_REQUIREMENT}) where the workers run (on aws the job's "
            "runtime_env installs it), or kernels: none"
        )
    return "none"


def apply(model, choice: str, *, on_gpu: bool) -> str:
    """Patch a built causal LM in place with its family's liger-kernel function (call it before ``fully_shard``);
    returns what was used.

    Kernels that ``auto`` chose are optional: when the model's family has no liger patch
    (:data:`~raytrain_helpers.core.kernel_families.LIGER_FAMILIES`), or patching raises (a liger-kernel that does
    not fit this transformers, a Triton error...), whatever the patch had changed is put back, a ``[kernels]`` line
    says why, and the worker trains without them (``none``). A forced ``liger`` that cannot be applied is an error
    naming the cause and the fix, as when it cannot be imported."""
    used = resolve(choice, on_gpu=on_gpu)
    model_type = getattr(getattr(model, "config", None), "model_type", None)
    if used == "liger" and liger_function(model_type) is None:
        why = kernels_note(model_type, "none")
        if choice == "liger":
            raise KernelsUnavailable(f"train.kernels = 'liger' but {why}. Fix: kernels: auto or kernels: none")
        print(f"{FALLBACK_PREFIX}{why}: training without fused kernels (train.kernels: auto -> none)", flush=True)
        used = "none"
    if used == "liger":
        why = _patch_or_restore(model, _apply_liger)
        if why is not None:
            if choice == "liger":
                raise KernelsUnavailable(
                    f"train.kernels = 'liger' but applying liger-kernel to the model failed ({why}). Fix: "
                    f"kernels: auto (falls back to none when this happens) or kernels: none"
                )
            print(
                f"{FALLBACK_PREFIX}liger-kernel failed to patch the model ({why}): training without fused "
                "kernels (train.kernels: auto -> none)",
                flush=True,
            )
            used = "none"
    model.raytrain_kernels = used
    return used


#: How a worker's log line about kernels starts (a fallback to none says why).
FALLBACK_PREFIX = "[kernels] "
#: What each family's patch is asked for (a function takes the ones its signature names: Gemma's GeGLU, the
#: others' SwiGLU): the loss from the hidden states (fused linear cross-entropy), no separate cross-entropy.
LIGER_OPTIONS = dict(
    rope=True, rms_norm=True, swiglu=True, geglu=True, cross_entropy=False, fused_linear_cross_entropy=True
)


def _apply_liger(model) -> None:
    import inspect

    import liger_kernel.transformers as liger

    fn = getattr(liger, liger_function(model.config.model_type) or "", None)
    if fn is None:
        raise KernelsUnavailable(f"this liger-kernel has no {liger_function(model.config.model_type)}")
    params = inspect.signature(fn).parameters
    takes_all = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    fn(**{k: v for k, v in LIGER_OPTIONS.items() if takes_all or k in params}, model=model)


def _patch_or_restore(model, patch) -> str | None:
    """Run ``patch(model)``; when it raises, undo what it changed and return why (None: it worked).

    A patch such as liger-kernel's changes three kinds of things: names in the model's modelling module (the
    RMSNorm and MLP classes, the rotary function), attributes of that module's classes (the CausalLM's forward),
    and the attributes and class of each of the model's submodules (bound forwards, norm settings). All three are
    snapshot first and put back on failure, so a patch that stopped halfway leaves no half-patched model."""
    import sys

    mod = sys.modules.get(type(model).__module__)
    module_names = dict(vars(mod)) if mod is not None else {}
    classes = {c: dict(vars(c)) for c in module_names.values() if isinstance(c, type) and c.__module__ == mod.__name__}
    instances = [(m, m.__class__, dict(vars(m))) for m in model.modules()]
    try:
        patch(model)
    except Exception as e:  # noqa: BLE001 - any failure of optional kernels: put the model back
        for m, cls, attrs in instances:
            m.__class__ = cls
            vars(m).clear()
            vars(m).update(attrs)
        for c, attrs in classes.items():
            for k in set(vars(c)) - set(attrs):
                delattr(c, k)
            for k, v in attrs.items():
                if k not in ("__dict__", "__weakref__") and vars(c).get(k) is not v:
                    setattr(c, k, v)
        if mod is not None:
            for k in set(vars(mod)) - set(module_names):
                delattr(mod, k)
            vars(mod).update(module_names)
        return f"{type(e).__name__}: {e}"
    return None


def causal_lm_loss(model, ids, labels=None):
    """Next-token loss of ``ids`` on the tokens whose ``labels`` are not -100 (None: every token); with liger the
    loss comes from the hidden states (no logits tensor)."""
    labels = ids if labels is None else labels
    if getattr(model, "raytrain_kernels", "none") == "liger":
        return model(input_ids=ids, labels=labels, skip_logits=True).loss
    return model(input_ids=ids, labels=labels).loss


# ---- FLOPs and MFU (the notebook side's plan.perf uses the same formula; a unit test checks they agree) ----


def flops_per_token(model_cfg: dict[str, Any], seq_len: int) -> float:
    """Training FLOPs per token: 6 N (forward + backward of every weight) + causal attention 6 L s d_attn.

    N counts every parameter once (a tied LM head is the embedding, and its matmul is real work); attention's
    QK^T and AV cost 12 L s d_attn per token for full attention (PaLM, appendix B), half of it with a causal
    mask, which flash/SDPA kernels skip.
    """
    h, v, i = model_cfg["hidden_size"], model_cfg["vocab_size"], model_cfg["intermediate_size"]
    heads, kv_heads, layers = (
        model_cfg["num_attention_heads"],
        model_cfg["num_key_value_heads"],
        model_cfg["num_hidden_layers"],
    )
    head_dim = model_cfg.get("head_dim") or h // heads
    q, kv = heads * head_dim, kv_heads * head_dim
    per_layer = (h * q + q) + 2 * (h * kv + kv) + q * h + 3 * h * i + 2 * h
    n = v * h + layers * per_layer + h + (0 if model_cfg.get("tie_word_embeddings", False) else v * h)
    return 6.0 * n + 6.0 * layers * seq_len * q


def peak_tflops(device_name: str, table: dict[str, float] | None) -> float | None:
    """Dense bf16 peak of a device from ``{model: TFLOPs}`` (the longest model name found in the name wins)."""
    if not table:
        return None
    name = device_name.upper()
    for model in sorted(table, key=len, reverse=True):
        if model.upper() in name:
            return float(table[model])
    return None


def mfu(model_cfg: dict[str, Any], seq_len: int, tokens_per_s: float, peak: float | None) -> float | None:
    """Model FLOPs utilisation of one device: flops_per_token x tokens/s / peak (None without a peak)."""
    if not peak or not tokens_per_s:
        return None
    return flops_per_token(model_cfg, seq_len) * tokens_per_s / (peak * 1e12)
