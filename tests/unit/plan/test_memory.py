import pytest

from raytrain_helpers.core import config
from raytrain_helpers.plan import memory


def test_param_count_matches_transformers_exactly():
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    for preset in config.PRESETS:
        with torch.device("meta"):
            m = Qwen2ForCausalLM(Qwen2Config(**config.PRESETS[preset]))
        assert memory.count_params(config.PRESETS[preset])["total"] == sum(p.numel() for p in m.parameters()), preset


def test_untied_embeddings_counted_twice():
    cfg = dict(config.PRESETS["tiny"], tie_word_embeddings=False)
    tied = memory.count_params(config.PRESETS["tiny"])["total"]
    assert memory.count_params(cfg)["total"] == tied + cfg["vocab_size"] * cfg["hidden_size"]


def test_seed_figures():
    total_gb, per_gpu_gb = memory.article_figure_check()
    assert total_gb == pytest.approx(12.35, abs=0.05)  # "about 12 GB"
    assert per_gpu_gb == pytest.approx(1.54, abs=0.02)  # "about 1.5 GB per GPU" over 8
    plan = memory.article_plan()
    assert plan.world_size == 8 and plan.fits is True


def test_plan_shards_with_world_size_and_flags_too_big():
    q = config.PRESETS["qwen2.5-1.5b"]
    p1 = memory.memory_plan(q, world_size=1, batch_size=4, seq_len=2048, on_gpu=True, device_mem_gib=24)
    p8 = memory.memory_plan(q, world_size=8, batch_size=4, seq_len=2048, on_gpu=True, device_mem_gib=24)
    assert p1.state_per_device_gib == pytest.approx(8 * p8.state_per_device_gib)
    assert p1.fits is False and p1.notes
    assert p8.peak_per_device_gib < p1.peak_per_device_gib
    with pytest.raises(ValueError):
        memory.memory_plan(q, world_size=0, batch_size=1, seq_len=8, on_gpu=True)


def test_the_root_units_gathered_weights_are_in_the_plan():
    """The job shards every decoder layer, then the root; what the root unit holds (the parameters outside every
    layer: embeddings, final norm, the output layer tied to them) stays gathered from forward to backward (the
    root's reshard_after_forward is False), so the plan counts it, in the compute dtype, in the peak."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    q = config.PRESETS["qwen2.5-1.5b"]
    with torch.device("meta"):
        m = Qwen2ForCausalLM(Qwen2Config(**q))
    in_layers = {id(p) for layer in m.model.layers for p in layer.parameters()}
    root_params = sum(p.numel() for p in m.parameters() if id(p) not in in_layers)
    assert 0.23e9 < root_params < 0.24e9  # about 233 M: the tied 151,936 x 1,536 embedding and the final norm
    plan = memory.memory_plan(q, world_size=8, batch_size=1, seq_len=2048, on_gpu=True)
    assert plan.gathered_root_gib == pytest.approx(root_params * 2 / memory.GIB)  # bf16
    rest = plan.state_per_device_gib + plan.gathered_layers_gib + plan.activations_gib + plan.logits_gib
    assert plan.peak_per_device_gib == pytest.approx(rest + plan.gathered_root_gib)
    assert any(label.startswith("gathered root") for label, _ in plan.rows())
