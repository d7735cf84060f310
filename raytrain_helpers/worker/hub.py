"""Where a ``train.model_id`` lives on this machine: a local folder, or a snapshot in the Hugging Face cache.

Runs in the job (driver, workers, Ray Data tasks): a hub id is downloaded only when ``HF_HUB_OFFLINE`` is unset;
``HF_TOKEN`` is read by ``huggingface_hub`` from the environment, never printed or passed on. The driver (on the
head) and the tokenizing tasks need only the config and the tokenizer (:func:`resolve_config_dir`); the weights are
downloaded by the training workers alone (:func:`resolve_model_dir`), into their cache volume.
"""

from __future__ import annotations

import os

#: The model's config and tokenizer files (``*.json`` includes ``model.safetensors.index.json``, a small index).
CONFIG_PATTERNS = ["*.json", "tokenizer*", "*.txt", "*.model", "*.tiktoken"]
#: Everything the training workers need: the config, the tokenizer and the weights.
HUB_PATTERNS = [*CONFIG_PATTERNS, "*.safetensors"]


class ModelSourceError(ValueError):
    """``train.model_id`` cannot be resolved to files on this machine (the message names the fix)."""


def hub_offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


def resolve_model_dir(model_id: str, *, download: bool | None = None) -> str:
    """A local folder with the model's files: ``model_id`` itself, or its snapshot in the Hugging Face cache.

    A hub id is downloaded only when downloads are allowed (``HF_HUB_OFFLINE`` unset); ``HF_TOKEN`` is read by
    ``huggingface_hub`` from the environment and never printed.
    """
    return _resolve(model_id, HUB_PATTERNS, download)


def resolve_config_dir(model_id: str, *, download: bool | None = None) -> str:
    """Like :func:`resolve_model_dir`, but a hub id brings only its config and tokenizer files, never the weights:
    what the job's driver on the head (a CPU pod without the workers' cache volume) and the tokenizing tasks use."""
    return _resolve(model_id, CONFIG_PATTERNS, download)


def _resolve(model_id: str, patterns: list[str], download: bool | None) -> str:
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
        return snapshot_download(model_id, allow_patterns=patterns, local_files_only=offline)
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
