"""The job's driver runs on the head (a CPU pod without the workers' cache volume): for a hub model it fetches only
the config and the tokenizer, never the weights; the training workers alone download those.

The hub stands behind ``huggingface_hub.snapshot_download``, faked by what it is documented to do: deliver the
repository's files that ``allow_patterns`` selects (selected with huggingface_hub's own ``filter_repo_objects``,
the function ``snapshot_download`` filters with) into a snapshot folder, and return that folder. Every file
delivered is recorded.
"""

from __future__ import annotations

import json
import shutil

import huggingface_hub
import pytest
from huggingface_hub.utils import filter_repo_objects

from raytrain_helpers.worker import data, entrypoint, hub
from tests.helpers import job_cfg

WEIGHTS = (".safetensors", ".bin")


@pytest.fixture
def fake_hub(tmp_path, monkeypatch):
    """A hub repository ``org/tiny`` with a config, a tokenizer and two weight files; returns the delivered list."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    repo = tmp_path / "remote"
    vocab = {"[EOS]": 0, "[UNK]": 1, **{c: 10 + i for i, c in enumerate("abcdefghijklmnopqrstuvwxyz")}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Split("", "isolated")
    PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="[EOS]", unk_token="[UNK]").save_pretrained(repo)
    (repo / "config.json").write_text(json.dumps({"model_type": "qwen2", "vocab_size": 36}))
    (repo / "model.safetensors").write_bytes(b"not to be fetched by the driver")
    (repo / "pytorch_model.bin").write_bytes(b"not to be fetched by the driver")
    (repo / "model.safetensors.index.json").write_text("{}")
    delivered: list[str] = []

    def snapshot_download(repo_id, *, allow_patterns=None, ignore_patterns=None, local_files_only=False, **kw):
        assert repo_id == "org/tiny"
        snap = tmp_path / "cache" / "snapshots" / "a"
        snap.mkdir(parents=True, exist_ok=True)
        names = sorted(p.name for p in repo.iterdir())
        for name in filter_repo_objects(names, allow_patterns=allow_patterns, ignore_patterns=ignore_patterns):
            shutil.copy(repo / name, snap / name)
            delivered.append(name)
        return str(snap)

    monkeypatch.setattr(huggingface_hub, "snapshot_download", snapshot_download)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    return delivered


def test_the_drivers_data_path_fetches_config_and_tokenizer_never_weights(fake_hub, monkeypatch):
    monkeypatch.setattr(data, "driver_rows", lambda rows, workers, labels=None: rows)  # the Ray Dataset wrapper
    cfg = job_cfg(model_id="org/tiny", model={"vocab_size": 36}, data="learnable", seq_len=8, batch_size=2, seed=0)
    datasets, held_out = entrypoint.datasets_for(cfg.replace(num_workers=2))
    assert fake_hub, "the driver fetched nothing: the tokenizer did not come from the hub"
    assert "config.json" in fake_hub and "tokenizer.json" in fake_hub
    assert not [f for f in fake_hub if f.endswith(WEIGHTS)], fake_hub
    # and the rows were made with the hub model's tokenizer (letters 10..35, EOS 0), not bytes
    ids = {0, *range(10, 36)}
    assert set(datasets["train"].ravel()) <= ids and set(held_out["input_ids"].ravel()) <= ids


def test_the_workers_still_get_the_weights(fake_hub):
    folder = hub.resolve_model_dir("org/tiny")
    assert {"model.safetensors", "config.json"} <= set(fake_hub) and folder.endswith("snapshots/a")
    assert "pytorch_model.bin" not in fake_hub  # safetensors only: the workers read nothing else
