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


def _liger_that_fails_halfway(monkeypatch, error: Exception):
    """A liger-kernel whose Qwen2 patch changes what the real one changes (a name in the modelling module, the
    CausalLM's forward, each decoder MLP's bound forward and an RMSNorm's class), then raises ``error``."""
    import types

    from transformers.models.qwen2 import modeling_qwen2

    def apply_liger_kernel_to_qwen2(*, model, **flags):
        monkeypatch.setattr(modeling_qwen2, "apply_rotary_pos_emb", lambda *a, **k: None, raising=True)
        modeling_qwen2.Qwen2ForCausalLM.forward = lambda self, *a, **k: None
        for layer in model.model.layers:
            layer.mlp.forward = types.MethodType(lambda self, x: x * 0, layer.mlp)
        model.model.norm.__class__ = type("PatchedNorm", (type(model.model.norm),), {})
        model.model.norm.offset = 0.0
        raise error

    pkg = types.ModuleType("liger_kernel")
    pkg.__path__ = []
    sub = types.ModuleType("liger_kernel.transformers")
    sub.apply_liger_kernel_to_qwen2 = apply_liger_kernel_to_qwen2
    monkeypatch.setitem(sys.modules, "liger_kernel", pkg)
    monkeypatch.setitem(sys.modules, "liger_kernel.transformers", sub)


def _tiny_model(seed: int = 0):
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(seed)
    return Qwen2ForCausalLM(Qwen2Config(**PRESETS["tiny"]))


def test_auto_kernels_that_fail_to_apply_fall_back_to_none_with_the_model_untouched(monkeypatch, capsys):
    """An error raised inside liger-kernel's patch (not an import error) is no failed job: the worker says why in
    a [kernels] line, trains with none, and nothing the patch had changed before it raised stays changed."""
    import torch
    from transformers.models.qwen2 import modeling_qwen2

    forward, rotary = modeling_qwen2.Qwen2ForCausalLM.forward, modeling_qwen2.apply_rotary_pos_emb
    _liger_that_fails_halfway(monkeypatch, RuntimeError("Triton: unsupported GPU architecture sm_75"))
    model, twin = _tiny_model(), _tiny_model()
    assert kernels.apply(model, "auto", on_gpu=True) == "none"
    assert model.raytrain_kernels == "none"
    out = capsys.readouterr().out
    assert out.startswith(kernels.FALLBACK_PREFIX) and "RuntimeError: Triton: unsupported GPU architecture" in out
    assert "training without fused kernels" in out
    assert modeling_qwen2.Qwen2ForCausalLM.forward is forward and modeling_qwen2.apply_rotary_pos_emb is rotary
    assert type(model.model.norm) is modeling_qwen2.Qwen2RMSNorm and not hasattr(model.model.norm, "offset")
    assert all("forward" not in vars(layer.mlp) for layer in model.model.layers)
    ids = torch.randint(0, 1024, (2, 16))
    assert torch.equal(kernels.causal_lm_loss(model, ids), kernels.causal_lm_loss(twin, ids))


def test_forced_liger_that_fails_to_apply_is_a_clear_error(monkeypatch):
    _liger_that_fails_halfway(monkeypatch, TypeError("unexpected keyword argument 'model'"))
    with pytest.raises(kernels.KernelsUnavailable, match=r"applying liger-kernel to the model failed \(TypeError"):
        kernels.apply(_tiny_model(), "liger", on_gpu=True)


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


def _recording_liger(monkeypatch) -> list:
    """A liger-kernel whose per-family functions record what they were called with (with the real signatures'
    switches: GeGLU for Gemma, SwiGLU for the others) and change nothing."""
    import inspect
    import types

    calls: list = []
    sub = types.ModuleType("liger_kernel.transformers")

    def make(name, mlp):
        def fn(rope=True, cross_entropy=False, fused_linear_cross_entropy=True, rms_norm=True, model=None, **kw):
            calls.append((name, dict(rope=rope, fused=fused_linear_cross_entropy, **kw), model))

        switches = ("rope", "cross_entropy", "fused_linear_cross_entropy", "rms_norm", mlp, "model")
        fn.__signature__ = inspect.Signature(
            [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None) for n in switches]
        )
        return fn

    for kind, name in FAMILY_TABLE.items():
        setattr(sub, name, make(name, "geglu" if kind.startswith("gemma") else "swiglu"))
    pkg = types.ModuleType("liger_kernel")
    pkg.__path__ = []
    monkeypatch.setitem(sys.modules, "liger_kernel", pkg)
    monkeypatch.setitem(sys.modules, "liger_kernel.transformers", sub)
    return calls


FAMILY_TABLE = __import__("raytrain_helpers.core.kernel_families", fromlist=["x"]).LIGER_FAMILIES


@pytest.mark.parametrize(
    "kind,mlp", [("llama", "swiglu"), ("mistral", "swiglu"), ("qwen3", "swiglu"), ("gemma", "geglu")]
)
def test_auto_applies_the_familys_own_liger_function(monkeypatch, kind, mlp):
    from raytrain_helpers.worker import model as model_mod
    from tests.unit.worker.test_families import family_config

    calls = _recording_liger(monkeypatch)
    m = model_mod.build_random(family_config(kind), "meta")
    assert kernels.apply(m, "auto", on_gpu=True) == "liger"
    ((name, flags, got),) = calls
    assert name == f"apply_liger_kernel_to_{kind}" and got is m
    assert flags == {"rope": True, "fused": True, mlp: True}  # only what the function takes


def test_a_family_without_liger_trains_without_kernels_and_says_why(monkeypatch, capsys):
    from raytrain_helpers.worker import model as model_mod
    from tests.unit.worker.test_families import family_config

    calls = _recording_liger(monkeypatch)
    m = model_mod.build_random(family_config("phi"), "meta")
    assert kernels.apply(m, "auto", on_gpu=True) == "none" and calls == []
    out = capsys.readouterr().out
    assert out.startswith(kernels.FALLBACK_PREFIX) and "no patch for model_type 'phi'" in out
    with pytest.raises(kernels.KernelsUnavailable, match=r"no patch for model_type 'phi'.*Fix: kernels: auto"):
        kernels.apply(model_mod.build_random(family_config("phi"), "meta"), "liger", on_gpu=True)
