"""The model: built from a preset (random weights) or loaded from pretrained weights the FSDP2 way, and exported.

Pretrained (``train.model_id``: a local folder with ``config.json`` + ``*.safetensors``, or a model hub id whose
files the workers find in, or download into, the Hugging Face cache): every rank builds the model on the
``meta`` device (no memory), shards it (``fully_shard`` per decoder layer, then the root), allocates only its
shards (``to_empty``), re-creates the non-persistent buffers (rotary ``inv_freq``), and rank 0 alone reads the
safetensors; ``set_model_state_dict(..., full_state_dict=True, broadcast_from_rank0=True)`` sends each rank its
shards. Host memory holds one full copy (rank 0's), not one per rank.

Export: the trained shards are gathered once to rank 0 (``get_model_state_dict(full_state_dict=True,
cpu_offload=True)``) and written as a Hugging Face folder (``config.json``, ``model.safetensors``, tokenizer
files) that ``AutoModelForCausalLM.from_pretrained`` loads.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import tempfile
from typing import Any

from . import data as data_mod
from .hub import ModelSourceError, resolve_model_dir

__all__ = ["ModelSourceError", "resolve_model_dir"]

EXPORT_META = "raytrain_export.json"


def config_from_dict(d: dict[str, Any]):
    """A transformers config from a config.json dict (Qwen2 when it names no ``model_type``)."""
    from transformers import AutoConfig, Qwen2Config

    d = {k: v for k, v in d.items() if k not in ("architectures", "transformers_version", "_name_or_path")}
    if "model_type" in d:
        kind = d.pop("model_type")
        return AutoConfig.for_model(kind, **d)
    return Qwen2Config(**d)


def load_config(model_dir: str):
    with open(os.path.join(model_dir, "config.json")) as f:
        return config_from_dict(json.load(f))


def _prepare(config):
    config.use_cache = False
    try:
        config._attn_implementation = "sdpa"
    except Exception:  # pragma: no cover - older transformers
        pass
    return config


def build_random(model_cfg: dict[str, Any], device):
    """The model with random weights on ``device`` (call ``torch.manual_seed`` first: same weights on every rank)."""
    import torch
    from transformers import AutoModelForCausalLM

    with torch.device(device):
        return AutoModelForCausalLM.from_config(_prepare(config_from_dict(model_cfg)))


def decoder_layers(model) -> list:
    """The model's decoder layers, whatever its family: the modules whose class the model names in
    ``_no_split_modules`` (what transformers' own device map and FSDP wrapping keep whole: ``LlamaDecoderLayer``,
    ``MistralDecoderLayer``, ``Qwen2DecoderLayer``, ``Qwen3DecoderLayer``, ``GemmaDecoderLayer``,
    ``PhiDecoderLayer``, ``Phi3DecoderLayer``...), else ``model.model.layers``. None found is an error naming the
    model's class."""
    names = set(getattr(model, "_no_split_modules", None) or ())
    found = [m for m in model.modules() if type(m).__name__ in names]
    if not found:
        inner = getattr(getattr(model, "model", None), "layers", None)
        found = list(inner) if inner is not None else []
    if not found:
        raise ValueError(
            f"{type(model).__name__}: no decoder layers found (neither the classes its _no_split_modules names nor "
            "model.model.layers), so FSDP cannot shard it layer by layer. Fix: a causal LM of transformers' own "
            "families (Llama, Mistral, Qwen2/Qwen3, Gemma, Phi), or pass your own shard function"
        )
    return found


def shard_model(model, *, mixed_precision: bool):
    """FSDP2: ``fully_shard`` each decoder layer (:func:`decoder_layers`), then the root."""
    import torch
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    mp = (
        MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
        if mixed_precision
        else MixedPrecisionPolicy()
    )
    for layer in decoder_layers(model):
        fully_shard(layer, mp_policy=mp)
    fully_shard(model, mp_policy=mp)
    return model


def reinit_buffers(model, device) -> int:
    """Re-create the non-persistent buffers that ``to_empty`` left uninitialised: the rotary embeddings'
    ``inv_freq`` (built from the config alone) and Gemma's embedding scale (``scalar_embed_scale``)."""
    import torch

    n = 0
    for module in model.modules():
        names = [b for b in getattr(module, "_non_persistent_buffers_set", ()) if b in module._buffers]
        if not names:
            continue
        if hasattr(module, "scalar_embed_scale"):  # Gemma's scaled word embedding
            fresh = {"embed_scale": torch.tensor(module.scalar_embed_scale)}
        elif hasattr(module, "config"):
            with torch.device("cpu"):
                rebuilt = type(module)(config=module.config)  # rotary embeddings are built from the config alone
            fresh = {b: getattr(rebuilt, b) for b in names}
        else:
            raise ValueError(
                f"{type(module).__name__}: non-persistent buffers {names} that cannot be re-created after meta-device "
                "initialisation. Fix: load this model without model_id's meta-device path (random weights), or "
                "report the model family"
            )
        for b in names:
            module._buffers[b] = fresh[b].to(device)
            n += 1
    return n


def read_safetensors(model_dir: str, model) -> dict[str, Any]:
    """The full state dict from the folder's safetensors, in the model's dtypes, with tied weights filled in."""
    from safetensors.torch import load_file

    files = sorted(glob.glob(os.path.join(model_dir, "*.safetensors")))
    if not files:
        raise ModelSourceError(f"train.model_id: no *.safetensors in {model_dir}. Fix: save_pretrained the model")
    sd: dict[str, Any] = {}
    for f in files:
        sd.update(load_file(f, device="cpu"))
    wanted = {k: v.dtype for k, v in model.state_dict().items()}
    if "lm_head.weight" in wanted and "lm_head.weight" not in sd and "model.embed_tokens.weight" in sd:
        sd["lm_head.weight"] = sd["model.embed_tokens.weight"]  # tied embeddings are saved once
    return {k: (v.to(wanted[k]) if k in wanted and v.is_floating_point() else v) for k, v in sd.items()}


def load_pretrained(model_dir: str, device, *, rank: int, mixed_precision: bool, before_shard=None):
    """Meta-device model, sharded, then filled from rank 0's safetensors by broadcast (the FSDP2 way).

    ``before_shard(model)`` runs on the meta model before ``fully_shard`` (e.g. to patch forwards)."""
    import torch
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(_prepare(load_config(model_dir)))
    if before_shard is not None:
        before_shard(model)
    shard_model(model, mixed_precision=mixed_precision)
    model.to_empty(device=device)
    reinit_buffers(model, device)
    full = read_safetensors(model_dir, model) if rank == 0 else {}
    set_model_state_dict(model, full, options=StateDictOptions(full_state_dict=True, broadcast_from_rank0=True))
    del full
    return model


def gather_full_state(model) -> dict[str, Any]:
    """Every rank takes part; rank 0 gets the full, unsharded state dict on CPU (others get an empty dict)."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    return get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))


def write_hf_folder(full_sd: dict[str, Any], config, out: str, *, model_dir: str | None, meta: dict[str, Any]) -> str:
    """Write a Hugging Face folder (config, safetensors, tokenizer) to ``out`` (a local path or ``s3://``)."""
    from safetensors.torch import save_file

    with tempfile.TemporaryDirectory(prefix="raytrain-export-") as tmp:
        config = config.__class__.from_dict(config.to_dict())
        config.use_cache = True
        config.save_pretrained(tmp)
        sd = dict(full_sd)
        if getattr(config, "tie_word_embeddings", False):
            sd.pop("lm_head.weight", None)  # tied: saved once, as save_pretrained does
        save_file({k: v.contiguous() for k, v in sd.items()}, os.path.join(tmp, "model.safetensors"), {"format": "pt"})
        if data_mod.has_tokenizer(model_dir):
            from transformers import AutoTokenizer

            AutoTokenizer.from_pretrained(model_dir).save_pretrained(tmp)
        else:
            data_mod.byte_tokenizer().save_pretrained(tmp)
        with open(os.path.join(tmp, EXPORT_META), "w") as f:
            json.dump(meta, f, indent=1)
        _publish(tmp, out)
    return out


def _publish(tmp: str, out: str) -> None:
    if out.startswith("s3://"):
        import pyarrow.fs

        pyarrow.fs.copy_files(tmp, out)
        return
    parent = os.path.dirname(os.path.abspath(out))
    os.makedirs(parent, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=".model-", dir=parent)
    shutil.copytree(tmp, staging, dirs_exist_ok=True)
    if os.path.isdir(out):
        shutil.rmtree(out)
    os.replace(staging, out)
