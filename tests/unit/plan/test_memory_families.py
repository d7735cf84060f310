"""The memory plan and the step-time prediction of any causal LM's config.json (built here, tiny, from the families'
own config classes; no download): exact parameter counts, the fused kernels each family gets, and the 7B figures
docs/adapt.md quotes."""

from __future__ import annotations

import json

import pytest

from raytrain_helpers.core.presets import PRESETS
from raytrain_helpers.plan import memory, perf
from tests.unit.worker.test_families import FAMILIES, family_config

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("kind", list(FAMILIES))
def test_the_parameter_count_of_any_family_is_exact(kind):
    from transformers import AutoModelForCausalLM

    from raytrain_helpers.worker import model as model_mod

    cfg = family_config(kind)
    real = AutoModelForCausalLM.from_config(model_mod.config_from_dict(cfg))
    n = memory.count_params(cfg)
    assert n["total"] == sum(p.numel() for p in real.parameters())
    layer = sum(p.numel() for p in real.model.layers[0].parameters())
    assert n["per_layer"] == layer and n["layers"] == 2
    assert n["total"] == n["embedding"] + n["lm_head"] + 2 * layer + n["final_norm"]


def test_the_meta_count_of_qwen2_agrees_with_the_formula():
    cfg = dict(PRESETS["qwen2.5-1.5b"], model_type="qwen2")
    assert memory.counted_on_meta(json.dumps(cfg, sort_keys=True)) == memory.count_params(cfg)
    big = memory.KNOWN_HUB_CONFIGS["Qwen/Qwen2.5-7B"]
    assert memory.counted_on_meta(json.dumps(big, sort_keys=True))["total"] == memory.count_params(big)["total"]
    assert memory.count_params(big)["total"] == 7_615_616_512


def _settings(tmp_path, kind, **train):
    from tests.helpers import aws_settings

    folder = tmp_path / kind
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(family_config(kind)))
    return aws_settings(model_id=str(folder), seq_len=64, batch_size=1, **train)


@pytest.mark.parametrize("kind,kernels", [("llama", "liger"), ("gemma", "liger"), ("phi", "none")])
def test_the_plan_of_a_model_folder_names_the_kernels_its_family_gets(tmp_path, clean_env, kind, kernels):
    s = _settings(tmp_path, kind)
    plan = memory.aws_plan(s)
    assert plan.kernels == kernels and plan.model_type == kind
    row = dict(plan.rows())["fused kernels"]
    assert (f"apply_liger_kernel_to_{kind}" in row) if kernels == "liger" else ("no patch for model_type 'phi'" in row)
    pred = perf.predict_aws(s)
    assert pred.step_s > 0 and pred.kernels == kernels


def test_seven_billion_on_the_articles_nodes_does_not_fit_and_what_does():
    """The figures docs/adapt.md quotes: Qwen2.5-7B, 2048 tokens, batch 1, liger kernels."""
    big = memory.KNOWN_HUB_CONFIGS["Qwen/Qwen2.5-7B"]

    def peak(world, seq, mem):
        p = memory.memory_plan(
            big, world_size=world, batch_size=1, seq_len=seq, on_gpu=True, kernels="liger", device_mem_gib=mem
        )
        return round(p.peak_per_device_gib, 1), round(p.state_per_device_gib, 1), p.fits

    assert peak(8, 2048, 24) == (29.1, 14.2, False)  # 2 x g6.12xlarge (8 x L4 24 GiB): the article's nodes
    assert peak(16, 2048, 24) == (22.0, 7.1, False)  # 4 x g6.12xlarge: still over 90 % of 24 GiB
    assert peak(16, 1024, 24) == (17.5, 7.1, True)  # 4 x g6.12xlarge at 1024 tokens
    assert peak(8, 2048, 48) == (29.1, 14.2, True)  # 2 x g6e.12xlarge (8 x L40S 48 GiB)
