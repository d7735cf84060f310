"""01's prediction: for the GPUs the local capacity check found, or for the aws shape in the settings."""

from __future__ import annotations

from types import SimpleNamespace

from raytrain_helpers.core.config import load
from raytrain_helpers.steps import capacity


def test_local_gpus_give_p2p_and_socket_predictions(repo_root):
    s = load(repo_root / "env.yaml", environ={}, model_preset="qwen2.5-1.5b", seq_len=2048)
    cap = SimpleNamespace(gpus=[{"name": "NVIDIA H200", "mem_gib": 139.8}] * 2)
    preds = capacity.predict(s, cap)
    assert list(preds) == ["p2p", "socket"]
    assert preds["p2p"].tokens_per_s_per_gpu > preds["socket"].tokens_per_s_per_gpu > 0
    assert preds["p2p"].usd_per_million_tokens is None, "local GPUs have no price"


def test_a_cpu_machine_gets_no_prediction(repo_root):
    s = load(repo_root / "env.yaml", environ={})
    assert capacity.predict(s, SimpleNamespace(gpus=[])) == {}


def test_the_aws_shape_is_priced(repo_root):
    s = load(repo_root / "env.yaml", environ={}, target="aws", model_preset="qwen2.5-1.5b", seq_len=2048)
    preds = capacity.predict(s, SimpleNamespace())  # the aws capacity report lists no local GPUs
    assert list(preds) == ["efa", "socket"]
    assert all(p.usd_per_million_tokens and p.usd_per_million_tokens > 0 for p in preds.values())
    assert preds["efa"].world_size == s.aws.gpu_node_count * s.aws.gpus_per_node
