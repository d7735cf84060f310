"""train.kernels on the worker side: what auto resolves to, the error of a forced liger that cannot run, the pin."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from raytrain_helpers.core.config import PRESETS
from raytrain_helpers.worker import kernels

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def no_liger(monkeypatch):
    """liger-kernel absent, whatever this machine has installed (a None entry makes the import fail)."""
    monkeypatch.setitem(sys.modules, "liger_kernel", None)
    monkeypatch.setitem(sys.modules, "liger_kernel.transformers", None)


def test_auto_is_none_on_cpu_and_leaves_the_model_alone():
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    assert kernels.resolve("auto", on_gpu=False) == "none"
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(Qwen2Config(**PRESETS["tiny"]))
    forward = model.forward
    assert kernels.apply(model, "auto", on_gpu=False) == "none"
    assert model.forward == forward and model.raytrain_kernels == "none"
    ids = torch.randint(0, 1024, (2, 16))
    assert torch.equal(kernels.causal_lm_loss(model, ids), model(input_ids=ids, labels=ids).loss)


def test_auto_on_gpu_without_liger_falls_back_to_none(no_liger):
    assert kernels.resolve("auto", on_gpu=True) == "none"
    assert kernels.resolve("none", on_gpu=True) == "none"


def test_forced_liger_without_liger_is_a_clear_error(no_liger):
    with pytest.raises(kernels.KernelsUnavailable) as e:
        kernels.resolve("liger", on_gpu=True)
    msg = str(e.value)
    assert "train.kernels = 'liger'" in msg and "cannot be imported" in msg
    assert kernels.LIGER_REQUIREMENT in msg and "kernels: none" in msg


def test_forced_liger_on_cpu_is_a_clear_error():
    with pytest.raises(kernels.KernelsUnavailable, match=r"no CUDA GPU.*Fix: kernels: auto"):
        kernels.resolve("liger", on_gpu=False)


def test_one_pin_everywhere():
    pin = kernels.LIGER_REQUIREMENT
    assert re.fullmatch(r"liger-kernel==\d+\.\d+\.\d+", pin)
    assert f'gpu = ["{pin}"]' in (ROOT / "pyproject.toml").read_text()
    assert pin in (ROOT / "constraints.txt").read_text().splitlines()


@pytest.mark.parametrize(
    "name,expected", [("NVIDIA H200", 989.4), ("NVIDIA A100-SXM4-80GB", 312.0), ("NVIDIA L4", 121.0)]
)
def test_peak_from_device_name(name, expected):
    table = {"H200": 989.4, "A100": 312.0, "L40S": 362.05, "L4": 121.0}
    assert kernels.peak_tflops(name, table) == expected
    assert kernels.peak_tflops("Tesla T4", table) is None
    assert kernels.mfu(PRESETS["tiny"], 128, 1000.0, None) is None
