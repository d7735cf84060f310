"""One typed settings object for the whole tutorial.

Sources, lowest precedence first:

1. defaults built into this module,
2. ``env.yaml`` (found in the working directory or its parents, or ``RAYTRAIN_ENV_FILE``),
3. override files (``raytrain-tutorial run -f extra.yaml``, ``load(files=[...])``), in order,
4. environment variables ``RAYTRAIN_<NAME>`` where NAME is the reference sample's env.sh name
   (``RAYTRAIN_GPU_NODE_COUNT=4``, ``RAYTRAIN_STEPS=20``) or the upper-cased flat name of any other
   setting (``RAYTRAIN_TARGET=aws``, ``RAYTRAIN_MODEL_PRESET=qwen2.5-1.5b``),
5. explicit parameters: papermill ``-p name value``, CLI ``-p name value``, ``load(steps=3)``.

Every setting has a unique flat name (``steps``, ``gpu_node_count``...) usable at every level, and a
dotted name (``train.steps``) usable in YAML files. Invalid values raise :class:`ConfigError` naming
the field, the bad value, where it came from, and the fix.
"""

from __future__ import annotations

import ast
import copy
import difflib
import functools
import importlib.metadata
import importlib.util
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from .s3_uri import check_storage_uri

ENV_PREFIX = "RAYTRAIN_"
ENV_FILE_VAR = "RAYTRAIN_ENV_FILE"
#: RAYTRAIN_* variables that are not settings (paths and test switches).
RESERVED_ENV = {ENV_FILE_VAR, "RAYTRAIN_RUNS_DIR", "RAYTRAIN_NOTEBOOKS_DIR", "RAYTRAIN_KUBERAY_CRDS"}

# --------------------------------------------------------------------------------------------
# Static facts
# --------------------------------------------------------------------------------------------

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

DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
REGION_RE = re.compile(r"^[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-\d$")
RESERVATION_RE = re.compile(r"^cr-[0-9a-f]{8,17}$")
RUN_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")
BUCKET_RE = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")

#: env.sh names of the reference sample -> flat field names.
ENV_SH_NAMES: dict[str, str] = {
    "CLUSTER_NAME": "cluster_name",
    "REGION": "region",
    "K8S_VERSION": "k8s_version",
    "NODE_AMI_FAMILY": "node_ami_family",
    "SYSTEM_NODE_TYPE": "system_node_type",
    "SYSTEM_NODE_COUNT": "system_node_count",
    "GPU_NODE_TYPE": "gpu_node_type",
    "GPU_NODE_COUNT": "gpu_node_count",
    "GPUS_PER_NODE": "gpus_per_node",
    "GPU_NODEGROUP_NAME": "gpu_nodegroup_name",
    "GPU_AZ": "gpu_az",
    "CAPACITY_RESERVATION_ID": "capacity_reservation_id",
    "CAPACITY_RESERVATION_TYPE": "capacity_reservation_type",
    "DLC_IMAGE": "dlc_image",
    "KUBERAY_VERSION": "kuberay_version",
    "RAY_VERSION": "ray_version",
    "NVIDIA_DEVICE_PLUGIN_VERSION": "nvidia_device_plugin_version",
    "EFA_DEVICE_PLUGIN_VERSION": "efa_device_plugin_version",
    "NAMESPACE": "namespace",
    "RAY_CLUSTER_NAME": "ray_cluster_name",
    "MODEL_ID": "model_id",
    "STEPS": "steps",
    "SEQ_LEN": "seq_len",
    "BATCH_SIZE": "batch_size",
    "LEARNING_RATE": "learning_rate",
    "NUM_WORKERS": "num_workers",
    "BENCH_STEPS": "bench_steps",
    "BENCH_WARMUP_STEPS": "bench_warmup_steps",
}


class ConfigError(ValueError):
    """A setting is wrong. The message names the field, the value, its source and the fix."""


def _dns_label(field: str, max_len: int = 63):
    def check(v: str) -> str:
        if not isinstance(v, str) or len(v) > max_len or not DNS1123_LABEL.match(v):
            raise ValueError(
                f"must be a DNS-1123 label (lower-case letters, digits and '-', starting and ending "
                f"with a letter or digit, at most {max_len} characters). "
                f"Fix: e.g. {_suggest_dns(v, max_len)!r}"
            )
        return v

    return check


def _suggest_dns(v: Any, max_len: int) -> str:
    s = re.sub(r"[^a-z0-9-]+", "-", str(v).lower()).strip("-")[:max_len].strip("-")
    return s or "raytrain"


# --------------------------------------------------------------------------------------------
# The settings groups
# --------------------------------------------------------------------------------------------


class _Group(BaseModel):
    # use_attribute_docstrings: the docstring under each field becomes its description (`config --names`,
    # `config --markdown` and docs/settings.md's settings table are generated from them).
    model_config = ConfigDict(extra="forbid", validate_assignment=True, use_attribute_docstrings=True)


class AwsSettings(_Group):
    """The reference architecture on Amazon EKS."""

    cluster_name: str = "raytrain-tutorial"
    """EKS cluster name: starts with a letter, then letters, digits and '-', at most 100 characters."""
    region: str = "us-west-2"
    """AWS region of the cluster, e.g. `us-west-2`."""
    k8s_version: str = "1.35"
    """Kubernetes minor version of the EKS cluster, e.g. `1.35` (quote it in YAML); `plan` warns when it is in
    (or within 30 days of) EKS extended support, which costs $0.60/h instead of $0.10/h."""
    node_ami_family: str = "AmazonLinux2023"
    """AMI family of every node group (eksctl's `amiFamily`)."""
    system_node_type: str = "m7i.xlarge"
    """Instance type of the system node group, which runs the KubeRay operator and the Ray head (no GPUs)."""
    system_node_count: int = Field(1, ge=1)
    """Number of system nodes (at least 1)."""
    gpu_node_type: str = "g6.12xlarge"
    """EFA-capable GPU instance type of the worker nodes (g5, g6, g6e, p4d, p4de, p5, p5e or p5en sizes the
    tutorial knows offline; a bad value lists them). g6.12xlarge: 4 x NVIDIA L4, 1 EFA interface."""
    gpu_node_count: int = Field(2, ge=1)
    """Number of GPU worker nodes (at least 1)."""
    gpus_per_node: int = Field(4, ge=1)
    """GPUs per GPU node: must equal the GPU count of `gpu_node_type`."""
    gpu_nodegroup_name: str = "gpu-efa"
    """Name of the GPU node group (DNS-1123 label, at most 63 characters)."""
    gpu_az: str = ""
    """Availability zone of the GPU nodes, inside `region` (e.g. `us-west-2a`); empty = the zone 01_capacity
    recommends."""
    capacity_reservation_id: str = ""
    """EC2 capacity reservation for the GPU nodes (`cr-` and 8-17 hex digits); empty = no reservation."""
    capacity_reservation_type: Literal["", "default", "capacity-block"] = ""
    """Type of `capacity_reservation_id`: `capacity-block` (a Capacity Block for ML), `default` (an ordinary
    capacity reservation, ODCR), or empty = read from EC2 (set it to render and plan without credentials)."""
    storage_bucket: str = ""
    """S3 bucket of the run's checkpoints (3-63 lower-case letters, digits, '-' and '.'); empty = the bucket of
    `train.storage_path` when it is `s3://...`, else `<cluster_name>-<account>-<region>`. Step 02 creates it
    when missing (tagged as the tutorial's, removed by 08 only then); a bucket of another account is refused."""
    pod_identity: Literal["auto", "pod-identity", "irsa"] = "auto"
    """How the Ray pods get the storage role: `pod-identity` (EKS Pod Identity, the add-on step 02 installs),
    `irsa` (IAM roles for service accounts, through the cluster's OIDC provider), or `auto` = Pod Identity
    unless the cluster runs without its add-on."""

    @field_validator("cluster_name")
    @classmethod
    def _cluster_name(cls, v: str) -> str:
        if not re.match(r"^[A-Za-z][A-Za-z0-9-]{0,99}$", v or ""):
            raise ValueError(
                "must start with a letter and hold only letters, digits and '-' "
                "(EKS cluster names, at most 100 characters). Fix: e.g. 'raytrain-tutorial'"
            )
        return v

    _ng = field_validator("gpu_nodegroup_name")(classmethod(lambda cls, v: _dns_label("gpu_nodegroup_name")(v)))

    @field_validator("region")
    @classmethod
    def _region(cls, v: str) -> str:
        if not REGION_RE.match(v or ""):
            raise ValueError("is not an AWS region name. Fix: e.g. 'us-west-2' or 'us-east-1'")
        known = known_regions()
        if known and v not in known:
            close = difflib.get_close_matches(v, sorted(known), n=3, cutoff=0.7)
            raise ValueError(
                "is not an AWS region (botocore's list of regions does not hold it). "
                f"Fix: {'e.g. ' + ', '.join(close) if close else 'e.g. us-west-2'}"
            )
        return v

    @field_validator("k8s_version")
    @classmethod
    def _k8s(cls, v: Any) -> str:
        v = str(v)
        if not re.match(r"^1\.\d{2}$", v):
            raise ValueError("must be a Kubernetes minor version such as '1.33' (quote it in YAML)")
        return v

    @field_validator("capacity_reservation_id")
    @classmethod
    def _cr(cls, v: str) -> str:
        if v and not RESERVATION_RE.match(v):
            raise ValueError("must be empty or a capacity reservation id such as 'cr-0123456789abcdef0'")
        return v

    @field_validator("storage_bucket")
    @classmethod
    def _bucket(cls, v: str) -> str:
        if v and (not BUCKET_RE.match(v) or ".." in v or re.match(r"^\d+\.\d+\.\d+\.\d+$", v)):
            raise ValueError(
                "must be empty (derived) or an S3 bucket name: 3-63 lower-case letters, digits, '-' and '.', "
                "starting and ending with a letter or digit. Fix: e.g. 'raytrain-checkpoints-123456789012'"
            )
        return v

    @model_validator(mode="after")
    def _cross(self) -> AwsSettings:
        known = INSTANCE_TYPES.get(self.gpu_node_type)
        if known is None:
            raise ValueError(
                f"gpu_node_type {self.gpu_node_type!r} is not a known EFA-capable GPU instance type. "
                f"Fix: use one of {', '.join(sorted(INSTANCE_TYPES))}"
            )
        if self.gpus_per_node != known["gpus"]:
            same = sorted(k for k, v in INSTANCE_TYPES.items() if v["gpus"] == self.gpus_per_node)
            raise ValueError(
                f"gpus_per_node = {self.gpus_per_node} but {self.gpu_node_type} has {known['gpus']} GPUs. "
                f"Fix: set gpus_per_node: {known['gpus']}"
                + (f", or choose a type with {self.gpus_per_node} GPUs ({', '.join(same)})" if same else "")
            )
        if self.capacity_reservation_type and not self.capacity_reservation_id:
            raise ValueError(
                f"capacity_reservation_type {self.capacity_reservation_type!r} is set without a "
                f"capacity_reservation_id. Fix: set capacity_reservation_id: cr-..., or leave the type empty"
            )
        if self.gpu_az and not self.gpu_az.startswith(self.region):
            raise ValueError(
                f"gpu_az {self.gpu_az!r} is not in region {self.region!r}. "
                f"Fix: leave gpu_az empty (01_capacity picks one) or use e.g. '{self.region}a'"
            )
        return self


class VersionSettings(_Group):
    """What the Ray Train DLC contains and the cluster pieces pinned to it."""

    dlc_image: str = "public.ecr.aws/deep-learning-containers/ray:train-ml-cuda-v1.1"
    """The Ray Train DLC image of the head and the workers (one tag for both); an explicit tag, never
    `latest`."""
    ray_version: str = "2.58.0"
    """Ray version the image carries (x.y.z); must equal the installed client's Ray (checked at load)."""
    kuberay_version: str = "1.7.0"
    """KubeRay operator Helm chart version (x.y.z, no leading `v`; docs/pins.md says where it was checked)."""
    nvidia_device_plugin_version: str = "0.20.0"
    """NVIDIA device plugin Helm chart version (x.y.z, no leading `v`)."""
    # v0.5.30: the newest chart in eks-charts' published index that could be read on 2026-12-04 (docs/pins.md)
    efa_device_plugin_version: str = "v0.5.30"
    """EFA device plugin Helm chart version, with the leading `v` as the chart tags it (e.g. `v0.5.30`)."""

    @field_validator("dlc_image")
    @classmethod
    def _image(cls, v: str) -> str:
        m = re.match(r"^[a-z0-9.\-/_:]+:([A-Za-z0-9_.\-]+)$", v or "")
        if not m or m.group(1) == "latest":
            raise ValueError(
                "must be an image reference with an explicit tag other than 'latest'. "
                "Fix: public.ecr.aws/deep-learning-containers/ray:train-ml-cuda-v1.1"
            )
        return v

    @field_validator("ray_version", "kuberay_version", "nvidia_device_plugin_version")
    @classmethod
    def _semver(cls, v: Any) -> str:
        v = str(v)
        if not re.match(r"^\d+\.\d+\.\d+$", v):
            raise ValueError("must be a version like '1.7.0' (no leading 'v')")
        return v

    @field_validator("efa_device_plugin_version")
    @classmethod
    def _efa(cls, v: Any) -> str:
        v = str(v)
        if not re.match(r"^v\d+\.\d+\.\d+$", v):
            raise ValueError("must be a version like 'v0.5.30' (with the leading 'v', as the chart tags it)")
        return v


class KubernetesSettings(_Group):
    """Names inside the Kubernetes cluster."""

    namespace: str = "ray-train"
    """Namespace of the RayCluster and its jobs (DNS-1123 label, at most 63 characters)."""
    ray_cluster_name: str = "raytrain"
    """Name of the RayCluster (DNS-1123 label, at most 40 characters: KubeRay derives pod and service names
    from it and appends suffixes)."""

    service_account: str = "raytrain"
    """ServiceAccount of the Ray head and workers (DNS-1123 label); on aws it carries the storage role
    (EKS Pod Identity or IRSA). Step 04 creates it, step 08 removes it."""
    hf_token_secret: str = ""
    """Kubernetes Secret (in `namespace`) whose key `HF_TOKEN` the head and the workers get as `HF_TOKEN`
    (optional: pods start without it); empty = no token. The token itself is never read or printed by the tutorial."""
    hf_cache_gib: int = Field(0, ge=0)
    """Size limit of the workers' Hugging Face cache volume (`HF_HOME`) in GiB; 0 = from the model (twice its
    bf16 weights, at least 10 GiB)."""

    _ns = field_validator("namespace")(classmethod(lambda cls, v: _dns_label("namespace")(v)))
    _rc = field_validator("ray_cluster_name")(classmethod(lambda cls, v: _dns_label("ray_cluster_name", 40)(v)))
    _sa = field_validator("service_account")(classmethod(lambda cls, v: _dns_label("service_account")(v)))

    @field_validator("hf_token_secret")
    @classmethod
    def _hf_secret(cls, v: str) -> str:
        if v and (len(v) > 253 or not re.match(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$", v)):
            raise ValueError(
                "must be empty or a Secret name (lower-case letters, digits, '-' and '.', at most 253). "
                "Fix: e.g. 'hf-token' (kubectl create secret generic hf-token --from-literal=HF_TOKEN=...)"
            )
        return v


class TrainSettings(_Group):
    """The training job: model, data shape, optimizer, checkpoints and the benchmark."""

    model_preset: str = "tiny"
    """Model shape, built with random weights (no download): `tiny` (CPU, seconds) or `qwen2.5-1.5b` (the
    exact Qwen2.5-1.5B shape, GPUs)."""
    model_id: str = ""
    """Pretrained weights to fine-tune: a local folder written by `save_pretrained` (`config.json` +
    `*.safetensors`, tokenizer files optional) or a model hub id such as `Qwen/Qwen2.5-1.5B` (the workers download
    it into the Hugging Face cache, with `HF_TOKEN` when set; where `HF_HUB_OFFLINE=1` or no hub is reachable, as on
    the local target, its files must already be in the cache). The memory plan and checks use its config.json.
    Empty = random weights in the shape of `model_preset`."""
    data: str = "learnable"
    """Training data, read through Ray Data: `learnable` (a small corpus the tutorial writes: runs of consecutive
    letters, which even `tiny` learns in a few steps), a `.txt` / `.jsonl` / `.parquet` file or a folder of one
    kind (`.jsonl` and `.parquet` need a `text` column), `s3://bucket/prefix` (aws), or `random` (uniform token ids,
    for throughput benchmarks only: nothing can be learned). Tokenized with the model's tokenizer when `model_id`
    has one, else bytes; packed to `seq_len`; one text in 20 is held out for evaluation."""
    eval_every: int = 20
    """Held-out eval loss every K steps (0 or more; also before the first step and after the last; 0 = only
    those)."""
    export: bool = True
    """Write the trained model once at the end as a Hugging Face folder (`config.json`, `model.safetensors`,
    tokenizer) to `runs/<run_name>/model`, or `<storage_path>/<run_name>/model` for s3 storage; false = only the
    sharded checkpoints."""
    steps: int = 80
    """Training steps (at least 1)."""
    seq_len: int = 128
    """Tokens per sequence (at least 8), e.g. 128 for `tiny`, 2048 for `qwen2.5-1.5b`."""
    batch_size: int | Literal["auto"] = 2
    """Sequences per worker per step (at least 1), or `auto` = the largest batch the memory plan fits under
    85 % of one GPU's memory (kernels taken into account), chosen before the job is submitted; `auto` on CPU
    workers = 2."""
    learning_rate: float = 0.0
    """AdamW learning rate, between 0 and 1 (exclusive); 0 = auto: 5e-3 for `tiny` from random weights (it learns
    the `learnable` data within the default steps), 1e-4 for the other presets, 2e-5 when fine-tuning `model_id`."""
    num_workers: int = 0
    """Ray Train workers (ranks); 0 = every GPU (or every worker slot on CPU)."""
    checkpoint_every: int = 40
    """Write a sharded checkpoint every K steps and at the end; 0 = only at the end."""
    seed: int = 0
    """Random seed of the initial weights and the synthetic tokens (0 or more)."""
    bench_steps: int = 8
    """Steps of each benchmark run (at least 1, more than `bench_warmup_steps`)."""
    bench_warmup_steps: int = 2
    """Leading benchmark steps left out of the timings (0 or more, fewer than `bench_steps`)."""
    storage_path: str = ""
    """Where the run's checkpoints go; empty = `runs/<run_name>/storage` on local. The aws target needs storage
    every worker pod can reach: `s3://bucket/prefix`."""
    extra_pip: list[str] = Field(default_factory=list)
    """Extra pip packages for the job, installed through the Ray runtime_env only (never a new image); empty =
    none."""
    precision: Literal["auto", "bf16", "fp32"] = "auto"
    """`auto` or `bf16` = bf16 compute with fp32 master weights on GPU (fp32 on CPU); `fp32` = fp32
    everywhere."""
    kernels: Literal["auto", "liger", "none"] = "auto"
    """Fused GPU kernels for the model: `liger` = liger-kernel's RMSNorm, SwiGLU, RoPE and fused linear
    cross-entropy (the loss straight from the hidden states, no logits tensor); `none` = plain PyTorch;
    `auto` = liger on CUDA workers when it can be installed or imported there, none on CPU. liger-kernel is the
    optional extra `gpu`; on aws it reaches the workers through the runtime_env's pip, never a new image."""
    job_timeout_s: int = 0
    """Seconds 05_train lets the job run before stopping it (0 or more); 0 = no limit. A Qwen2.5-1.5B run on aws
    can take hours: set a limit only as a budget guard."""
    max_failures: int = 0
    """Worker-group failures Ray Train recovers from (0 or more; Ray Train's `FailureConfig(max_failures=...)`):
    after a worker process or node dies it restarts every worker from the latest checkpoint. 0 = the first failure
    fails the job."""

    @field_validator("job_timeout_s", "max_failures")
    @classmethod
    def _zero_or_more(cls, v: int) -> int:
        if v < 0:
            raise ValueError("must be 0 or more. Fix: 0 (job_timeout_s: no limit; max_failures: fail at once) or more")
        return v

    @field_validator("model_preset")
    @classmethod
    def _preset(cls, v: str) -> str:
        if v not in PRESETS:
            raise ValueError(f"is not a known preset. Fix: one of {', '.join(PRESETS)}")
        return v

    @field_validator("steps", "bench_steps")
    @classmethod
    def _positive(cls, v: int) -> int:
        if v < 1:
            raise ValueError("must be at least 1. Fix: e.g. 8")
        return v

    @field_validator("batch_size")
    @classmethod
    def _batch(cls, v: int | str) -> int | str:
        if v != "auto" and v < 1:
            raise ValueError("must be at least 1 or `auto`. Fix: e.g. 4, or auto (the memory plan's largest)")
        return v

    @field_validator("seq_len")
    @classmethod
    def _seq(cls, v: int) -> int:
        if v < 8:
            raise ValueError("must be at least 8 tokens. Fix: e.g. 128 (tiny) or 2048 (qwen2.5-1.5b)")
        return v

    @field_validator("learning_rate")
    @classmethod
    def _lr(cls, v: float) -> float:
        if not (0 <= v < 1):
            raise ValueError("must be between 0 and 1 (0 = auto). Fix: e.g. 1e-4, or 0")
        return v

    @field_validator("eval_every")
    @classmethod
    def _eval_every(cls, v: int) -> int:
        if v < 0:
            raise ValueError("must be 0 or more. Fix: e.g. 2 (0 = only before the first step and after the last)")
        return v

    _storage = field_validator("storage_path")(classmethod(lambda cls, v: check_storage_uri(v)))

    @field_validator("data")
    @classmethod
    def _data(cls, v: str) -> str:
        v = (v or "").strip()
        if v in ("learnable", "random") or v.startswith("s3://"):
            return v
        p = Path(v).expanduser()
        kinds = (".txt", ".jsonl", ".json", ".parquet")
        if p.is_dir() or (p.is_file() and p.suffix.lower() in kinds):
            return str(p)
        raise ValueError(
            f"is neither `learnable`, `random`, an s3:// prefix, nor an existing {' / '.join(kinds)} file or folder. "
            "Fix: train.data: learnable (the default), or the path of your text / jsonl / parquet data"
        )

    @field_validator("num_workers", "checkpoint_every", "bench_warmup_steps", "seed")
    @classmethod
    def _non_negative(cls, v: int) -> int:
        if v < 0:
            raise ValueError("must not be negative (num_workers: 0 means every GPU / worker slot)")
        return v

    @field_validator("model_id")
    @classmethod
    def _model_id(cls, v: str) -> str:
        v = (v or "").strip()
        path = Path(v).expanduser()
        if not v or (path.is_dir() and (path / "config.json").is_file()):
            return v
        if path.is_dir():
            raise ValueError(
                "is a folder without config.json. Fix: a folder written by save_pretrained (config.json + "
                "*.safetensors), or empty for random weights from model_preset"
            )
        if v.startswith(("/", ".", "~")) or not re.fullmatch(r"[\w.-]+/[\w.-]+", v):
            raise ValueError(
                "is neither an existing folder nor a model hub id (`org/name`). Fix: e.g. Qwen/Qwen2.5-1.5B, a folder "
                "with config.json and *.safetensors, or empty for random weights from model_preset"
            )
        return v

    @model_validator(mode="after")
    def _bench(self) -> TrainSettings:
        if self.bench_warmup_steps >= self.bench_steps:
            raise ValueError(
                f"bench_warmup_steps ({self.bench_warmup_steps}) must be smaller than bench_steps "
                f"({self.bench_steps}) so that some timed steps remain"
            )
        return self


class NcclSettings(_Group):
    """Collective communication: the transport the audit expects and the workers' NCCL environment."""

    expect: Literal["auto", "efa", "p2p", "socket", "ib", "none"] = "auto"
    """Expected NCCL transport between ranks: `auto` = efa on aws, p2p on local GPUs, none (gloo) on CPU; or
    one of `efa`, `p2p`, `socket`, `ib`, `none`."""
    debug: str = "INFO"
    """`NCCL_DEBUG` for the workers (`INFO` writes the lines the transport audit reads)."""
    env: dict[str, str] = Field(default_factory=dict)
    """Extra environment for the training workers (`NCCL_*`, `FI_*`), passed through the runtime_env; empty =
    none."""


class LocalSettings(_Group):
    """The embedded target: a real Ray cluster on this machine."""

    worker_nodes: int = Field(2, ge=1, le=16)
    """Worker raylets standing in for GPU nodes (1-16); the head raylet takes no training work."""
    cpus_per_worker_node: int = Field(1, ge=1)
    """CPUs of each worker raylet (at least 1); without GPUs, also its training worker slots."""
    gpus_per_worker_node: int = Field(-1, ge=-1)
    """GPUs of each worker raylet: -1 = split the visible GPUs evenly over the worker nodes; 0 = CPU only."""
    gcs_port: int = Field(6390, ge=1024, le=65535)
    """Port of the head's GCS on 127.0.0.1 (1024-65535, different from `dashboard_port`)."""
    dashboard_port: int = Field(8266, ge=1024, le=65535)
    """Port of the Ray dashboard and Jobs API on 127.0.0.1 (1024-65535)."""
    temp_root: str = "/tmp/raytrain"
    """Root of the raylets' temporary folders; at most 40 characters (Ray's unix socket paths under it are
    limited to 107 bytes)."""
    object_store_mb: int = Field(128, ge=78)
    """Object store of each raylet in MiB (at least 78)."""
    auth_mode: Literal["disabled", "token"] = "disabled"
    """Ray token authentication: `disabled`, or `token` (one token file shared by every process of the
    cluster and the notebook kernel)."""

    @model_validator(mode="after")
    def _ports(self) -> LocalSettings:
        if self.gcs_port == self.dashboard_port:
            raise ValueError("gcs_port and dashboard_port must differ")
        if len(self.temp_root) > 40:
            raise ValueError(
                "temp_root is too long: Ray's unix sockets live under it and their paths "
                "are limited to 107 bytes. Fix: a short path such as /tmp/raytrain"
            )
        return self


class Settings(_Group):
    """Every setting of the tutorial, grouped as in env.yaml."""

    target: Literal["local", "aws"] = "local"
    """Where the tutorial runs: `local` (a real Ray cluster on this machine) or `aws` (EKS with KubeRay)."""
    run_name: str = "tutorial"
    """Names `runs/<run_name>/`, the Ray Train run and its checkpoints (1-63 letters, digits, '.', '_', '-');
    the same name again resumes from the latest checkpoint."""
    aws: AwsSettings = Field(default_factory=AwsSettings)
    """The reference architecture on Amazon EKS (the aws target)."""
    versions: VersionSettings = Field(default_factory=VersionSettings)
    """The Ray Train DLC image and the cluster pieces pinned to it."""
    kubernetes: KubernetesSettings = Field(default_factory=KubernetesSettings)
    """Names inside the Kubernetes cluster."""
    train: TrainSettings = Field(default_factory=TrainSettings)
    """The training job: model, data shape, optimizer, checkpoints and the benchmark."""
    nccl: NcclSettings = Field(default_factory=NcclSettings)
    """The NCCL transport the audit expects and the workers' NCCL environment."""
    local: LocalSettings = Field(default_factory=LocalSettings)
    """The local target: a real Ray cluster on this machine."""

    @field_validator("run_name")
    @classmethod
    def _run_name(cls, v: str) -> str:
        if not RUN_NAME_RE.match(v or ""):
            raise ValueError("must be 1-63 characters of letters, digits, '.', '_' and '-'. Fix: e.g. 'tutorial'")
        return v

    # ---- derived facts -------------------------------------------------------------------
    def model_config_dict(self) -> dict[str, Any]:
        return dict(PRESETS[self.train.model_preset])

    def flat(self) -> dict[str, Any]:
        """Every setting by its flat name (what papermill and ``-p`` use)."""
        out: dict[str, Any] = {}
        for name, (group, leaf) in FLAT_FIELDS.items():
            obj = self if group is None else getattr(self, group)
            out[name] = getattr(obj, leaf)
        return out

    def public_dict(self) -> dict[str, Any]:
        return json.loads(self.model_dump_json())


def _flat_fields() -> dict[str, tuple[str | None, str]]:
    out: dict[str, tuple[str | None, str]] = {}
    for name, info in Settings.model_fields.items():
        ann = info.annotation
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            for leaf in ann.model_fields:
                assert leaf not in out, f"flat name {leaf} is not unique"
                out[leaf] = (name, leaf)
        else:
            out[name] = (None, name)
    return out


FLAT_FIELDS: dict[str, tuple[str | None, str]] = _flat_fields()
FLAT_TO_ENV_SH = {v: k for k, v in ENV_SH_NAMES.items()}
GROUPS = {g for g, _ in FLAT_FIELDS.values() if g is not None}


def env_var_name(flat: str) -> str:
    """The environment variable that sets a setting: ``RAYTRAIN_`` + its env.sh name or its upper-cased name."""
    return ENV_PREFIX + FLAT_TO_ENV_SH.get(flat, flat.upper())


@dataclass(frozen=True)
class FieldDoc:
    """One setting as the documentation shows it (``raytrain-tutorial config --names`` / ``--markdown``)."""

    flat: str
    dotted: str
    #: the reference sample's env.sh name; empty when env.sh has no such variable
    env_sh: str
    type: str
    default: Any
    #: the field's docstring, on one line
    description: str


def _type_name(annotation: Any) -> str:
    """A field's type as a reader writes it: ``int``, ``list[str]``, ``auto | bf16 | fp32``."""
    if get_origin(annotation) is Literal:
        return " | ".join(str(a) for a in get_args(annotation))
    if isinstance(annotation, type) and not get_args(annotation):
        return annotation.__name__
    return str(annotation).replace("typing.", "")


def field_docs() -> list[FieldDoc]:
    """Every setting, in env.yaml order, with its type, default and docstring."""
    out = []
    for flat, (group, leaf) in FLAT_FIELDS.items():
        model = Settings if group is None else Settings.model_fields[group].annotation
        info = model.model_fields[leaf]
        out.append(
            FieldDoc(
                flat=flat,
                dotted=f"{group}.{leaf}" if group else leaf,
                env_sh=FLAT_TO_ENV_SH.get(flat, ""),
                type=_type_name(info.annotation),
                default=info.get_default(call_default_factory=True),
                description=" ".join((info.description or "").split()),
            )
        )
    return out


# --------------------------------------------------------------------------------------------
# Loading
# --------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def known_regions() -> frozenset[str]:
    """Every AWS region botocore knows (its endpoints.json, read without importing botocore); empty without it."""
    spec = importlib.util.find_spec("botocore")
    if spec is None or not spec.origin:
        return frozenset()
    try:
        doc = json.loads((Path(spec.origin).parent / "data" / "endpoints.json").read_text())
    except (OSError, ValueError):
        return frozenset()
    return frozenset(r for part in doc.get("partitions", []) for r in part.get("regions", {}))


def find_env_file(start: str | os.PathLike | None = None) -> Path | None:
    if os.environ.get(ENV_FILE_VAR):
        return Path(os.environ[ENV_FILE_VAR]).expanduser().resolve()
    here = Path(start or os.getcwd()).resolve()
    for d in [here, *here.parents]:
        if (d / "env.yaml").is_file():
            return d / "env.yaml"
    pkg_root = Path(__file__).resolve().parent.parent
    if (pkg_root / "env.yaml").is_file():
        return pkg_root / "env.yaml"
    return None


def resolve_key(key: str) -> tuple[str | None, str]:
    """'steps', 'train.steps', 'STEPS' or 'RAYTRAIN_STEPS' -> (group, leaf)."""
    k = key.strip()
    if k.upper().startswith(ENV_PREFIX):
        k = k[len(ENV_PREFIX) :]
    if k in ENV_SH_NAMES:
        k = ENV_SH_NAMES[k]
    if "." in k:
        group, leaf = k.split(".", 1)
        if group in Settings.model_fields and (group, leaf) in FLAT_FIELDS.values():
            return group, leaf
    kl = k.lower()
    if kl in FLAT_FIELDS:
        return FLAT_FIELDS[kl]
    dotted = [f"{g}.{leaf}" if g else leaf for g, leaf in FLAT_FIELDS.values()]
    close = difflib.get_close_matches(kl, list(FLAT_FIELDS) + dotted, n=5, cutoff=0.6)
    hint = f"did you mean {', '.join(close)}? " if close else ""
    raise ConfigError(
        f"unknown setting {key!r}. Fix: {hint}use a setting's name (flat `steps`, dotted `train.steps` or "
        f"env.sh `STEPS`); `raytrain-tutorial config --names` lists them all"
    )


def coerce_scalar(text: str) -> Any:
    """Environment and CLI values are strings: read them as YAML scalars (5 -> int, '1e-4' -> float)."""
    try:
        v = yaml.safe_load(text)
    except yaml.YAMLError:
        return text
    if isinstance(v, str) and re.match(r"^[+-]?\d+(\.\d*)?[eE][+-]?\d+$", v):
        return float(v)
    return v


def field_annotation(group: str | None, leaf: str) -> Any:
    """The type annotation of one setting."""
    model = Settings if group is None else Settings.model_fields[group].annotation
    return model.model_fields[leaf].annotation


def _coerce_for(group: str | None, leaf: str, raw: str) -> Any:
    """Strings from the environment or a command line, typed by the field they set (str fields stay str)."""
    ann = field_annotation(group, leaf)
    if ann is str or get_origin(ann) is Literal:
        return raw
    return coerce_scalar(raw)


def type_fix(group: str | None, leaf: str) -> str:
    """How to write a valid value of one setting, e.g. ``a whole number such as 8``."""
    ann = field_annotation(group, leaf)
    model = Settings if group is None else Settings.model_fields[group].annotation
    default = model.model_fields[leaf].get_default(call_default_factory=True)
    if get_origin(ann) is Literal:
        return "one of " + ", ".join(str(a) for a in get_args(ann))
    if ann is bool:
        return "true or false"
    if ann is int:
        return f"a whole number such as {default}"
    if ann is float:
        return f"a number such as {default}"
    if ann is str:
        return f"text such as {default or 'name'!r} (quote it in YAML when it looks like a number)"
    if get_origin(ann) is list:
        return "a list such as [a, b] (YAML flow syntax), or [] for none"
    if get_origin(ann) is dict:
        return "a mapping such as {KEY: value} (YAML flow syntax), or {} for none"
    return f"a value like the default {default!r}"


def _check_type(group: str | None, leaf: str, value: Any, source: str) -> None:
    """Refuse a value of the wrong kind before validation: booleans for numbers, numbers for names."""
    ann = field_annotation(group, leaf)
    wrong = (ann in (int, float) and isinstance(value, bool)) or (ann is int and isinstance(value, float))
    wrong = wrong or (ann in (int, float) and not isinstance(value, (int, float)))
    wrong = wrong or (get_origin(ann) is list and not isinstance(value, list))
    wrong = wrong or (get_origin(ann) is dict and not isinstance(value, Mapping))
    if value is not None and wrong:
        dotted = f"{group}.{leaf}" if group else leaf
        env_sh = FLAT_TO_ENV_SH.get(leaf)
        label = f"{dotted} ({env_sh})" if env_sh else dotted
        raise ConfigError(f"{label} = {value!r} is invalid [{source}]. Fix: {type_fix(group, leaf)}")


def parse_param(key: str, value: Any, source: str = "parameter") -> tuple[str, Any]:
    """One ``-p NAME VALUE``: its flat name (what the notebooks' parameters use) and a value of the field's type.

    NAME may be flat (``steps``), dotted (``train.steps``) or the env.sh name (``STEPS``); a string VALUE is
    read as the field's type (``k8s_version 1.30`` stays the string ``"1.30"``, ``steps 20`` becomes 20).
    """
    group, leaf = resolve_key(str(key))
    if isinstance(value, str):
        value = _coerce_for(group, leaf, value)
    _check_type(group, leaf, value, f"{source} {key}")
    return leaf, value


class _Layered:
    def __init__(self) -> None:
        self.data: dict[str, Any] = {}
        self.source: dict[tuple[str | None, str], str] = {}

    def set(self, group: str | None, leaf: str, value: Any, source: str) -> None:
        _check_type(group, leaf, value, source)
        if group is None:
            self.data[leaf] = value
        else:
            self.data.setdefault(group, {})[leaf] = value
        self.source[(group, leaf)] = source

    def merge_yaml(self, doc: Any, source: str) -> None:
        if not isinstance(doc, Mapping):
            raise ConfigError(
                f"{source}: expected a mapping of settings at the top level, found {type(doc).__name__}. "
                f"Fix: write `name: value` lines, e.g. `target: local` (see the repository's env.yaml)"
            )
        for key, value in doc.items():
            if key in GROUPS:
                if not isinstance(value, Mapping):
                    leaves = ", ".join(list(Settings.model_fields[key].annotation.model_fields)[:4])
                    raise ConfigError(
                        f"{source}: {key} must be a mapping of settings, found {value!r}. "
                        f"Fix: indent its settings under `{key}:` ({leaves}...)"
                    )
                for leaf, v in value.items():
                    if (key, leaf) not in FLAT_FIELDS.values():
                        valid = list(Settings.model_fields[key].annotation.model_fields)
                        close = difflib.get_close_matches(str(leaf), valid, n=1)
                        hint = f"did you mean {key}.{close[0]}? " if close else ""
                        raise ConfigError(
                            f"{source}: unknown setting {key}.{leaf}. Fix: {hint}one of {', '.join(valid)}"
                        )
                    self.set(key, leaf, v, f"{source} ({key}.{leaf})")
            else:
                try:
                    group, leaf = resolve_key(str(key))
                except ConfigError as e:
                    raise ConfigError(f"{source}: {e}") from None
                self.set(group, leaf, value, f"{source} ({key})")


def load(
    env_file: str | os.PathLike | None = None,
    *,
    files: list[str | os.PathLike] | tuple = (),
    environ: Mapping[str, str] | None = None,
    check_installed_ray: bool = True,
    **params: Any,
) -> Settings:
    """Build the settings from every source (see the module docstring for the precedence)."""
    layers = _Layered()
    path = Path(env_file).expanduser() if env_file else find_env_file()
    if path is not None:
        if path.is_dir():
            raise ConfigError(f"env file {path} is a folder. Fix: give the path of the env.yaml file inside it")
        if not path.is_file():
            raise ConfigError(
                f"env file {path} does not exist. Fix: point --env-file or {ENV_FILE_VAR} at an existing env.yaml, "
                f"or write one with `raytrain-tutorial init DIR`"
            )
        layers.merge_yaml(_read_yaml(path), path.name)
    for f in files or ():
        fp = Path(f).expanduser()
        if not fp.is_file():
            raise ConfigError(f"override file {fp} (-f) does not exist. Fix: give the path of an existing YAML file")
        layers.merge_yaml(_read_yaml(fp), fp.name)
    env = os.environ if environ is None else environ
    for var, raw in sorted(env.items()):
        if not var.startswith(ENV_PREFIX) or var in RESERVED_ENV:
            continue
        try:
            group, leaf = resolve_key(var)
        except ConfigError as e:
            raise ConfigError(f"environment variable {var}: {e}") from None
        layers.set(group, leaf, _coerce_for(group, leaf, raw), f"environment ({var})")
    for key, value in params.items():
        if value is None:
            continue
        group, leaf = resolve_key(key)
        if isinstance(value, str):
            value = _coerce_for(group, leaf, value)
        layers.set(group, leaf, value, f"parameter ({key})")
    try:
        settings = Settings.model_validate(layers.data)
    except ValidationError as e:
        raise ConfigError(_explain(e, layers, path)) from None
    if check_installed_ray:
        _check_ray_version(settings, layers)
    settings.__dict__["_sources"] = {
        f"{group}.{leaf}" if group else leaf: src for (group, leaf), src in layers.source.items()
    }
    settings.__dict__["_env_file"] = str(path) if path else None
    return settings


def sources(settings: Settings) -> dict[str, str]:
    """Where each non-default value came from."""
    return dict(settings.__dict__.get("_sources", {}))


def loaded_env_file(settings: Settings) -> str | None:
    """The env file these settings were read from (None: defaults and overrides only)."""
    return settings.__dict__.get("_env_file")


#: PyYAML's safe loader, in C where PyYAML was built with libyaml (env.yaml: 1 ms instead of 6 ms, and every kernel,
#: command and test reads it).
SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _read_yaml(path: Path) -> Any:
    """A settings file's YAML document ({} when empty); unreadable or invalid files name the fix."""
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not a text file (not UTF-8). Fix: give a YAML settings file") from None
    except OSError as e:
        raise ConfigError(f"{path}: cannot be read ({e.strerror}). Fix: check the path and its permissions") from None
    try:
        doc = yaml.load(text, Loader=SAFE_LOADER)
    except yaml.YAMLError as e:
        where = getattr(e, "problem_mark", None)
        at = f" at line {where.line + 1}, column {where.column + 1}" if where else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise ConfigError(
            f"{path}: not valid YAML{at}: {problem}. Fix: correct the YAML syntax there (`name: value`, two-space "
            f"indents, quote values holding ':' or '#')"
        ) from None
    return {} if doc is None else doc


def _explain(err: ValidationError, layers: _Layered, path: Path | None) -> str:
    lines = []
    for e in err.errors():
        loc = [str(p) for p in e["loc"]]
        msg = e["msg"].removeprefix("Value error, ")
        if len(loc) == 1 and loc[0] in Settings.model_fields and isinstance(e.get("input"), dict):
            # a model_validator of a group: the message names the field(s) itself
            group = loc[0]
            field = next((f for f in Settings.model_fields[group].annotation.model_fields if msg.startswith(f)), None)
            where = layers.source.get((group, field), "default") if field else "env.yaml"
            if "Fix" not in msg:
                msg += f". Fix: change the {group} settings it names (`raytrain-tutorial config --names` explains each)"
            lines.append(f"{group}: {msg} [{where}]")
            continue
        if len(loc) >= 2 and loc[0] in Settings.model_fields and loc[0] not in ("target", "run_name"):
            group, leaf = loc[0], loc[1]
        else:
            group, leaf = None, loc[0]
        dotted = f"{group}.{leaf}" if group else leaf
        envname = FLAT_TO_ENV_SH.get(leaf)
        label = f"{dotted} ({envname})" if envname else dotted
        value = e.get("input")
        where = layers.source.get((group, leaf), "default")
        if e["type"] == "extra_forbidden":
            lines.append(f"{label}: unknown setting [{where}]. Fix: remove it or check the spelling")
            continue
        if "Fix" not in msg and (group, leaf) in FLAT_FIELDS.values():
            msg = f"{msg}. Fix: {type_fix(group, leaf)}"
        lines.append(f"{label} = {value!r} is invalid [{where}]: {msg}")
    head = f"invalid settings ({path.name if path else 'defaults'}):"
    return head + "\n  - " + "\n  - ".join(lines)


def installed_ray_version() -> str | None:
    """The installed Ray's version, read from its package metadata (importing Ray costs about half a CPU-second,
    in every kernel and command that loads the settings); None where Ray is not installed."""
    try:
        return importlib.metadata.version("ray")
    except importlib.metadata.PackageNotFoundError:
        return None


def _check_ray_version(settings: Settings, layers: _Layered) -> None:
    installed = installed_ray_version()
    if installed is None:
        return
    if installed != settings.versions.ray_version:
        where = layers.source.get(("versions", "ray_version"), "default")
        raise ConfigError(
            f"versions.ray_version (RAY_VERSION) = {settings.versions.ray_version!r} [{where}] but the installed "
            f"Ray is {installed}: the client's Ray must equal the image's, or jobs fail in odd ways. "
            f"Fix: set ray_version: {installed} if the image really runs it, or "
            f"`pip install ray[train,default]=={settings.versions.ray_version}`"
        )


#: How a parameters cell starts: the tutorial's own (tagged ``parameters``) and papermill's injected-parameters cell.
PARAMETERS_HEADER = "# Parameters"
#: A notebook namespace may list its parameters explicitly under this name (it wins over the input history).
PARAMS_VAR = "__raytrain_params__"


def assigned_names(source: str) -> set[str]:
    """The names a cell assigns at its top level (``a = 1``, ``a: int = 1``, ``a = b = 1``); none if not Python."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    names: set[str] = set()
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            names.update(t.id for t in targets if isinstance(t, ast.Name))
    return names


def parameter_names(namespace: Mapping[str, Any]) -> set[str] | None:
    """The names a notebook's parameters set: those of every parameters cell the kernel ran.

    A parameters cell is one whose source starts with :data:`PARAMETERS_HEADER` (the tutorial's cell tagged
    ``parameters`` and the cell papermill injects after it). They are read from IPython's input history
    (``In``), so a variable assigned in any other cell never counts. ``__raytrain_params__`` (a list of names)
    overrides the history; None: no history and no list (not a notebook), every name of ``namespace`` counts.
    """
    explicit = namespace.get(PARAMS_VAR)
    if explicit is not None:
        return {str(n) for n in explicit}
    history = namespace.get("In")
    if not isinstance(history, list) or not all(isinstance(s, str) for s in history):
        return None
    names: set[str] = set()
    for source in history:
        if source.lstrip().startswith(PARAMETERS_HEADER):
            names |= assigned_names(source)
    return names


def settings_from(namespace: Mapping[str, Any], **extra: Any) -> Settings:
    """For notebooks: build settings from the parameters cell's variables (``settings_from(globals())``).

    Only the names the parameters cells assign count (see :func:`parameter_names`): a notebook variable that
    happens to share a setting's name (``seed = 5`` in a later cell) is ignored. Outside a notebook, every name
    of ``namespace`` that is a setting counts (pass a dict of the parameters). Values that are None keep the
    env.yaml value; ``env_file`` and ``override_files`` name the files to read.
    """
    allowed = parameter_names(namespace)
    params = {
        k: v for k, v in namespace.items() if k in FLAT_FIELDS and v is not None and (allowed is None or k in allowed)
    }
    params.update({k: v for k, v in extra.items() if v is not None})
    files = namespace.get("override_files") or ()
    if isinstance(files, str):
        files = [files]
    return load(namespace.get("env_file") or None, files=files, **params)


def dump_yaml(settings: Settings) -> str:
    return yaml.safe_dump(settings.public_dict(), sort_keys=False)


def with_overrides(settings: Settings, **params: Any) -> Settings:
    """A copy of ``settings`` with some flat-named values replaced (validated)."""
    data = copy.deepcopy(settings.public_dict())
    for key, value in params.items():
        group, leaf = resolve_key(key)
        (data if group is None else data[group])[leaf] = value
    try:
        new = Settings.model_validate(data)
    except ValidationError as e:
        raise ConfigError(_explain(e, _Layered(), None)) from None
    new.__dict__["_sources"] = sources(settings)
    new.__dict__["_env_file"] = loaded_env_file(settings)
    return new
