"""What the tutorial knows offline: the model presets and the GPU instance types.

Plain tables, read by the settings' validators (``train.model_preset``, ``aws.gpu_node_type``) and by the plan
(memory, placement) and the capacity checks of 01_capacity.
"""

from __future__ import annotations

from typing import Any

#: Model presets: Qwen2 configs built with random weights (no download).
PRESETS: dict[str, dict[str, Any]] = {
    "tiny": {
        "vocab_size": 1024,
        "hidden_size": 64,
        "intermediate_size": 176,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "tie_word_embeddings": True,
        "max_position_embeddings": 4096,
        "rope_theta": 10000.0,
        "rms_norm_eps": 1e-6,
    },
    # The exact shape of Qwen/Qwen2.5-1.5B (config.json of the public release).
    "qwen2.5-1.5b": {
        "vocab_size": 151936,
        "hidden_size": 1536,
        "intermediate_size": 8960,
        "num_hidden_layers": 28,
        "num_attention_heads": 12,
        "num_key_value_heads": 2,
        "tie_word_embeddings": True,
        "max_position_embeddings": 32768,
        "rope_theta": 1000000.0,
        "rms_norm_eps": 1e-6,
    },
}


#: GPU instance types the tutorial knows offline. 01_capacity re-checks against
#: ``ec2:DescribeInstanceTypes`` on the aws target. gpu_mem_gib is per GPU.
INSTANCE_TYPES: dict[str, dict[str, Any]] = {
    "g5.12xlarge": {"gpus": 4, "gpu_model": "A10G", "gpu_mem_gib": 24, "vcpus": 48, "mem_gib": 192, "efa": 1},
    "g5.48xlarge": {"gpus": 8, "gpu_model": "A10G", "gpu_mem_gib": 24, "vcpus": 192, "mem_gib": 768, "efa": 1},
    "g6.12xlarge": {"gpus": 4, "gpu_model": "L4", "gpu_mem_gib": 24, "vcpus": 48, "mem_gib": 192, "efa": 1},
    "g6.24xlarge": {"gpus": 4, "gpu_model": "L4", "gpu_mem_gib": 24, "vcpus": 96, "mem_gib": 384, "efa": 1},
    "g6.48xlarge": {"gpus": 8, "gpu_model": "L4", "gpu_mem_gib": 24, "vcpus": 192, "mem_gib": 768, "efa": 1},
    "g6e.12xlarge": {"gpus": 4, "gpu_model": "L40S", "gpu_mem_gib": 48, "vcpus": 48, "mem_gib": 384, "efa": 1},
    "g6e.48xlarge": {"gpus": 8, "gpu_model": "L40S", "gpu_mem_gib": 48, "vcpus": 192, "mem_gib": 1536, "efa": 4},
    "p4d.24xlarge": {"gpus": 8, "gpu_model": "A100", "gpu_mem_gib": 40, "vcpus": 96, "mem_gib": 1152, "efa": 4},
    "p4de.24xlarge": {"gpus": 8, "gpu_model": "A100", "gpu_mem_gib": 80, "vcpus": 96, "mem_gib": 1152, "efa": 4},
    "p5.48xlarge": {"gpus": 8, "gpu_model": "H100", "gpu_mem_gib": 80, "vcpus": 192, "mem_gib": 2048, "efa": 32},
    "p5e.48xlarge": {"gpus": 8, "gpu_model": "H200", "gpu_mem_gib": 141, "vcpus": 192, "mem_gib": 2048, "efa": 32},
    "p5en.48xlarge": {"gpus": 8, "gpu_model": "H200", "gpu_mem_gib": 141, "vcpus": 192, "mem_gib": 2048, "efa": 16},
}
