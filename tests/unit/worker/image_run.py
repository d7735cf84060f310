"""A short run of the job's training function through Ray Train: pretrained weights, FSDP2, a checkpoint every
step, a second fit of the same run that resumes from the latest one, and the export.

Collected only where it is named (``test_image_versions.py`` runs it with the image's package versions): the
suite's own training runs are the integration tests on the session's cluster. Here Ray starts in this process
(``ray.init``, no dashboard, token authentication on), one CPU worker trains, and the worker reports which
transformers and pydantic it imported.
"""

from __future__ import annotations

import json
import math
import os
import shutil
from pathlib import Path

import pytest

from raytrain_helpers.worker import model as model_mod
from raytrain_helpers.worker import train
from tests.helpers import SMALL_MODEL, job_cfg

torch = pytest.importorskip("torch")


def _fit(cfg, probe: Path):
    from ray.train import RunConfig, ScalingConfig
    from ray.train.torch import TorchConfig, TorchTrainer

    def loop(config):  # defined here: Ray ships it by value; the job's own function does the work
        import pydantic
        import transformers

        Path(config["probe"]).write_text(
            json.dumps(dict(transformers=[transformers.__version__, transformers.__file__], pydantic=pydantic.VERSION))
        )
        train.train_loop_per_worker({k: v for k, v in config.items() if k != "probe"})

    trainer = TorchTrainer(
        loop,
        train_loop_config=dict(train.loop_config(cfg), probe=str(probe)),
        scaling_config=ScalingConfig(num_workers=1, use_gpu=False),
        run_config=RunConfig(name=cfg.run_name, storage_path=cfg.storage_path),
        torch_config=TorchConfig(backend="gloo"),
    )
    return trainer.fit()


def test_a_short_run_checkpoints_resumes_from_its_checkpoint_and_exports(tmp_path, monkeypatch):
    import ray
    from transformers import AutoModelForCausalLM

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("RAY_TRAIN_V2_ENABLED", "1")
    # as the job's environment has it (steps/train.py: worker_env): the controller sees each step's report sooner
    monkeypatch.setenv("RAY_TRAIN_HEALTH_CHECK_INTERVAL_S", "0.5")
    monkeypatch.setenv("RAY_prestart_worker_first_driver", "0")  # no idle worker started beside the trainer's
    # Ray reads its token settings when it is imported: the caller's environment carries them
    assert os.environ.get("RAY_AUTH_MODE") == "token" and os.path.isfile(os.environ["RAY_AUTH_TOKEN_PATH"])
    torch.manual_seed(0)
    model_mod.build_random(SMALL_MODEL, "cpu").save_pretrained(tmp_path / "src")
    cfg = job_cfg(
        run_name="image-run",
        model_id=str(tmp_path / "src"),
        data="random",
        steps=2,
        checkpoint_every=1,
        storage_path=str(tmp_path / "storage"),
        export_path=str(tmp_path / "model"),
    )
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        first = _fit(cfg, tmp_path / "probe1.json")
        again = _fit(cfg.replace(steps=3), tmp_path / "probe2.json")
    finally:
        ray.shutdown()
    assert first.checkpoint is not None and first.metrics["checkpoint_step"] == 2
    assert first.metrics["resumed_from"] is None and len(first.metrics["losses"]) == 2
    assert again.metrics["resumed_from"] == 2 and again.metrics["ranks"][0]["steps_run"] == 1
    assert again.metrics["checkpoint_step"] == 3 and all(math.isfinite(x) for x in again.metrics["losses"])
    exported = AutoModelForCausalLM.from_pretrained(tmp_path / "model")
    ids = torch.arange(8).reshape(1, 8)
    assert torch.isfinite(exported(input_ids=ids).logits).all()
    report = os.environ.get("RAYTRAIN_IMAGE_REPORT")
    if report:  # what the worker imported, for the caller to compare with the pins
        shutil.copy(tmp_path / "probe2.json", report + ".worker")
