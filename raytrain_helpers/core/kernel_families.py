"""Which fused kernels exist for which model family: liger-kernel's per-family patch functions.

liger-kernel patches one family at a time (``liger_kernel.transformers.apply_liger_kernel_to_<family>``), each
replacing that family's RMSNorm, MLP (SwiGLU; GeGLU for Gemma), rotary embedding and the LM head's loss (fused
linear cross-entropy). The table maps transformers' ``model_type`` (config.json) to the function's name; it lists
the families of liger-kernel's own ``MODEL_TYPE_TO_APPLY_LIGER_FN`` (``src/liger_kernel/transformers/monkey_patch.py``,
read at linkedin/Liger-Kernel 0.8.2, commit ead96b6; the pin is 0.8.5, whose wheel the workers install) that the
tutorial's causal-LM path uses. A family not listed has no patch: ``kernels: auto`` trains it without fused kernels
and says why. Both the plan (notebook side) and the workers read this table.
"""

from __future__ import annotations

#: model_type -> liger-kernel's patch function for it.
LIGER_FAMILIES: dict[str, str] = {
    "llama": "apply_liger_kernel_to_llama",
    "mistral": "apply_liger_kernel_to_mistral",
    "mixtral": "apply_liger_kernel_to_mixtral",
    "qwen2": "apply_liger_kernel_to_qwen2",
    "qwen3": "apply_liger_kernel_to_qwen3",
    "gemma": "apply_liger_kernel_to_gemma",
    "gemma2": "apply_liger_kernel_to_gemma2",
    "gemma3_text": "apply_liger_kernel_to_gemma3_text",
    "phi3": "apply_liger_kernel_to_phi3",
    "granite": "apply_liger_kernel_to_granite",
    "olmo2": "apply_liger_kernel_to_olmo2",
}


def liger_function(model_type: str | None) -> str | None:
    """The liger-kernel patch function of a model family (``model_type``; None = Qwen2, the presets' family)."""
    return LIGER_FAMILIES.get(model_type or "qwen2")


def kernels_note(model_type: str | None, used: str) -> str:
    """One line saying which fused kernels a model gets, or why none."""
    fn = liger_function(model_type)
    family = model_type or "qwen2"
    if used == "liger" and fn:
        return f"liger-kernel {fn}: RMSNorm, SwiGLU/GeGLU MLP, RoPE, fused linear cross-entropy ({family})"
    if fn is None:
        return f"none: liger-kernel has no patch for model_type {family!r} (families: {', '.join(LIGER_FAMILIES)})"
    return f"none ({family}: liger-kernel's {fn} exists; kernels: none, a CPU worker, or liger not importable)"
