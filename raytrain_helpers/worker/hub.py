"""Where a ``train.model_id`` lives on this machine: a local folder, or a snapshot in the Hugging Face cache.

Runs in the job (driver, workers, Ray Data tasks): a hub id is downloaded only when ``HF_HUB_OFFLINE`` is unset;
``HF_TOKEN`` is read by ``huggingface_hub`` from the environment, never printed or passed on.
"""

from __future__ import annotations

import os

HUB_PATTERNS = ["*.json", "*.safetensors", "tokenizer*", "*.txt", "*.model", "*.tiktoken"]


class ModelSourceError(ValueError):
    """``train.model_id`` cannot be resolved to files on this machine (the message names the fix)."""


def hub_offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


def resolve_model_dir(model_id: str, *, download: bool | None = None) -> str:
    """A local folder with the model's files: ``model_id`` itself, or its snapshot in the Hugging Face cache.

    A hub id is downloaded only when downloads are allowed (``HF_HUB_OFFLINE`` unset); ``HF_TOKEN`` is read by
    ``huggingface_hub`` from the environment and never printed.
    """
    path = os.path.expanduser(model_id)
    if os.path.isdir(path):
        if not os.path.isfile(os.path.join(path, "config.json")):
            raise ModelSourceError(
                f"train.model_id = {model_id!r} is a folder without config.json. Fix: a folder written by "
                "save_pretrained (config.json + *.safetensors), or leave model_id empty for train.model_preset"
            )
        return path
    from huggingface_hub import snapshot_download

    offline = hub_offline() if download is None else not download
    try:
        return snapshot_download(model_id, allow_patterns=HUB_PATTERNS, local_files_only=offline)
    except Exception as e:  # noqa: BLE001 - not cached, no network, gated, unknown id: one message
        why = (
            "is not in the Hugging Face cache here and downloads are off (HF_HUB_OFFLINE=1)"
            if offline
            else f"could not be downloaded ({type(e).__name__})"
        )
        raise ModelSourceError(
            f"train.model_id = {model_id!r} is a model hub id that {why}. Fix: download it once where this "
            f"cluster reads its cache (`hf download {model_id}`), or set train.model_id to a local folder with "
            "config.json and *.safetensors, or leave train.model_id empty (random weights from train.model_preset)"
        ) from None
