"""plan/perf.py: MFU, the step-time prediction, and batch_size auto from the memory plan."""

from __future__ import annotations

import pytest

from raytrain_helpers.core.config import PRESETS, ConfigError, load
from raytrain_helpers.plan import memory, perf
from raytrain_helpers.worker import kernels

QWEN = PRESETS["qwen2.5-1.5b"]


def test_flops_per_token_is_6n_plus_causal_attention():
    n = memory.count_params(QWEN)["total"]
    attention = 6 * 28 * 2048 * 1536  # layers x seq x (heads x head_dim), half of PaLM's 12 L s d (causal)
    assert perf.flops_per_token(QWEN, 2048) == 6 * n + attention
    # 57,000 tokens/s per H200 is the 56 % MFU the benchmarks aim at
    assert perf.mfu(QWEN, 2048, 57_000, perf.PEAK_BF16_TFLOPS["H200"][0]) == pytest.approx(0.564, abs=0.001)


@pytest.mark.parametrize("preset", sorted(PRESETS))
@pytest.mark.parametrize("seq", [128, 2048])
def test_the_worker_counts_flops_like_the_plan(preset, seq):
    assert kernels.flops_per_token(PRESETS[preset], seq) == perf.flops_per_token(PRESETS[preset], seq)


def test_every_peak_has_a_source_and_device_names_map_to_it():
    assert all(t > 0 and "sheet" in src for t, src in perf.PEAK_BF16_TFLOPS.values())
    assert perf.gpu_model("NVIDIA H100 80GB HBM3") == "H100"
    assert perf.gpu_model("NVIDIA H100 PCIe") == "H100 PCIe"
    assert perf.gpu_model("NVIDIA L40S") == "L40S" and perf.gpu_model("NVIDIA L4") == "L4"
    assert perf.gpu_model("Tesla T4") is None


def test_prediction_grows_with_bandwidth_until_compute_bound():
    def tps(gbps):
        return perf.predict(
            QWEN, gpu="H200", world_size=2, batch_size=4, seq_len=2048, kernels="none", link_gbps=gbps
        ).tokens_per_s_per_gpu

    speeds = [tps(b) for b in (0.5, 1, 2, 4, 8, 32, 128, 512)]
    assert all(a < b for a, b in zip(speeds, speeds[1:], strict=False))
    slow = perf.predict(QWEN, gpu="H200", world_size=2, batch_size=4, seq_len=2048, kernels="none", link_gbps=1)
    assert slow.comm_s > slow.compute_s and "communication-bound" in slow.notes[0]


def test_one_gpu_moves_nothing_and_the_cost_follows_the_price():
    p = perf.predict(QWEN, gpu="H200", world_size=1, batch_size=8, seq_len=2048, usd_per_hour=36.0, steps=10)
    assert p.comm_s == 0 and p.step_s == p.compute_s and p.time_s == pytest.approx(10 * p.step_s)
    assert p.usd_per_million_tokens == pytest.approx(36.0 / 3600 / p.tokens_per_s_per_gpu * 1e6)


def _peak(b, kernels_used, world=2, seq=2048):
    return memory.memory_plan(
        QWEN, world_size=world, batch_size=b, seq_len=seq, on_gpu=True, kernels=kernels_used
    ).peak_per_device_gib


@pytest.mark.parametrize("mem", [24, 40, 80, 139.8])  # L4, A100 40 GB, H100 / A100 80 GB, H200 as torch sees it
@pytest.mark.parametrize("kernels_used", ["none", "liger"])
def test_auto_batch_is_the_largest_that_fits(mem, kernels_used):
    b = memory.largest_batch(QWEN, world_size=2, seq_len=2048, device_mem_gib=mem, kernels=kernels_used)
    budget = memory.AUTO_BATCH_FRACTION * mem
    if b:
        assert _peak(b, kernels_used) <= budget
    assert _peak(b + 1, kernels_used) > budget


def test_the_fused_loss_lets_a_larger_batch_fit():
    none = memory.largest_batch(QWEN, world_size=2, seq_len=2048, device_mem_gib=139.8, kernels="none")
    liger = memory.largest_batch(QWEN, world_size=2, seq_len=2048, device_mem_gib=139.8, kernels="liger")
    assert (none, liger) == (10, 25)


def test_batch_auto_from_settings(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    s = load(model_preset="qwen2.5-1.5b", seq_len=2048, batch_size="auto")
    plan = memory.plan_for(s, 2, on_gpu=True, device_mem_gib=139.8)
    assert (plan.batch_size, plan.kernels) == (25, "liger") and plan.fits
    assert memory.plan_for(s, 2, on_gpu=False).batch_size == memory.AUTO_BATCH_CPU
    assert memory.plan_for(load(model_preset="qwen2.5-1.5b", seq_len=2048, batch_size="auto", kernels="none"), 2,
                           on_gpu=True, device_mem_gib=139.8).batch_size == 10  # fmt: skip
    with pytest.raises(ConfigError, match="batch_size = auto needs the GPUs' memory"):
        memory.plan_for(s, 2, on_gpu=True)
    with pytest.raises(ConfigError, match="not even one sequence"):
        memory.plan_for(load(model_preset="qwen2.5-1.5b", seq_len=8192, batch_size="auto"), 1, on_gpu=True,
                        device_mem_gib=24)  # fmt: skip


def test_aws_prediction_uses_the_instance_and_its_price(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    s = load(target="aws", storage_path="s3://bucket/x", model_preset="qwen2.5-1.5b", seq_len=2048, batch_size="auto")
    p = perf.predict_aws(s)
    assert (p.gpu, p.world_size, p.nodes, p.kernels) == ("L4", 8, 2, "liger")
    assert p.link == "EFA" and p.comm_s > p.compute_s  # 40 Gbit/s between two g6.12xlarge
    assert p.usd_per_million_tokens and p.usd_per_hour > 2 * 4.6


def test_predictions_per_transport_and_side_by_side(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    s = load(model_preset="qwen2.5-1.5b", seq_len=2048, batch_size="auto")
    preds = perf.predictions(s, local_gpus=[{"name": "NVIDIA H200", "mem_gib": 139.8}] * 2)
    assert set(preds) == {"p2p", "socket"}
    assert preds["socket"].tokens_per_s_per_gpu < preds["p2p"].tokens_per_s_per_gpu
    rows = perf.side_by_side(preds, {"p2p": preds["p2p"].tokens_per_s_per_gpu / 1.1, "gloo": 5.0})
    assert rows == [("p2p", f"{preds['p2p'].tokens_per_s_per_gpu:,.0f}", rows[0][2], "+10%")]
    assert perf.predictions(s, local_gpus=[]) == {}
    perf.show_predictions({})
    assert "no throughput prediction" in capsys.readouterr().out
