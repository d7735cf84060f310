"""The settings' schema: the groups of env.yaml, a docstring per field, and the validators of each group.

Each field's docstring (the string literal under it) becomes its description through pydantic's
``use_attribute_docstrings``: ``raytrain-tutorial config --names`` / ``--markdown`` and docs/settings.md's table are
generated from them (:func:`.names.field_docs`). Every field also has a unique flat name (:data:`FLAT_FIELDS`).
"""

from __future__ import annotations

import difflib
import json
import os
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from .presets import INSTANCE_TYPES, PRESETS
from .s3_uri import bucket_name_problem, check_storage_uri
from .validation import REGION_RE, RESERVATION_RE, RUN_NAME_RE, dns_label, known_regions


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
    gpu_az_attempts: int = Field(3, ge=1, le=6)
    """How many Availability Zones step 02 tries for the GPU node group when EC2 has no capacity for it
    (`InsufficientInstanceCapacity`): the GPU AZ, then the next of 01's ranked AZs where the cluster has a private
    subnet (the cluster is created with a private subnet in `max(2, gpu_az_attempts - 1)` AZs besides the GPU AZ).
    1 = no fallback. A capacity reservation, a Capacity Block or a set `gpu_az` fixes the AZ: no fallback."""
    teardown_on_failure: bool = False
    """`true`: when `raytrain-tutorial run` stops at a failed notebook on aws, the teardown (notebook 08's, every
    resource the tutorial created) runs at once, so nothing keeps billing unattended. `false` = the run prints what is
    still billing, its cost per hour and the command that stops it, and leaves the resources for a retry."""
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
    storage_per_namespace: bool = False
    """`true`: one storage role serves every namespace of the cluster and keeps them apart in the bucket - the run's
    prefix becomes `<prefix>/<namespace>` and the role's policy grants objects only under
    `<prefix>/${aws:PrincipalTag/kubernetes-namespace}/` (the session tag EKS Pod Identity attaches), so a
    workshop's `raytrain-tutorial handout storage DIR` can associate it with every attendee's namespace. Needs
    `pod_identity` other than `irsa`. `false` = the role serves its own namespace and prefix only."""
    shared_cluster: bool = False
    """`true` in a workshop attendee's env.yaml (written by `raytrain-tutorial handout`): the EKS cluster, its node
    groups, the device plugins and the KubeRay operator belong to the facilitator. Steps 02 and 03 only read them,
    04 applies only this attendee's RayCluster, and 08 deletes only this attendee's RayCluster and RayJob; creating
    or deleting anything cluster-wide is refused. `false` = this folder owns the cluster."""

    @field_validator("cluster_name")
    @classmethod
    def _cluster_name(cls, v: str) -> str:
        if not re.match(r"^[A-Za-z][A-Za-z0-9-]{0,99}$", v or ""):
            raise ValueError(
                "must start with a letter and hold only letters, digits and '-' "
                "(EKS cluster names, at most 100 characters). Fix: e.g. 'raytrain-tutorial'"
            )
        return v

    _ng = field_validator("gpu_nodegroup_name")(classmethod(lambda cls, v: dns_label("gpu_nodegroup_name")(v)))

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
        why = bucket_name_problem(v) if v else ""
        if why:
            raise ValueError(
                f"must be empty (derived) or a bucket name S3 accepts; {v!r} is not ({why}). Fix: e.g. "
                "'raytrain-checkpoints-123456789012'"
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
        if self.storage_per_namespace and self.pod_identity == "irsa":
            raise ValueError(
                "storage_per_namespace = true needs EKS Pod Identity's session tag kubernetes-namespace, which IRSA "
                "does not attach (pod_identity = irsa). Fix: pod_identity: pod-identity (or auto), or "
                "storage_per_namespace: false"
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
    """The Ray Train DLC image of the head and the workers (one for both): an explicit tag other than `latest`,
    a digest (`REPO@sha256:<64 hex>`), or both (`REPO:TAG@sha256:...`: the digest decides what runs)."""
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
        # the reference grammar of the OCI distribution spec (distribution/reference): NAME[:TAG][@DIGEST]
        m = re.match(r"^([a-z0-9.\-/_:]+?)(?::([A-Za-z0-9_][A-Za-z0-9_.\-]{0,127}))?(@sha256:[0-9a-f]{64})?$", v or "")
        if not m or not (m.group(2) or m.group(3)) or (m.group(2) == "latest" and not m.group(3)):
            raise ValueError(
                "must be an image reference with an explicit tag other than 'latest', or a digest. "
                "Fix: public.ecr.aws/deep-learning-containers/ray:train-ml-cuda-v1.1, or pinned to what it pulled: "
                "public.ecr.aws/deep-learning-containers/ray:train-ml-cuda-v1.1@sha256:<64 hex>"
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


#: How to make the Hugging Face token Secret without the token in the shell's history or the process list: read
#: without echo into a variable, handed to kubectl on its stdin by printf, a shell builtin (no process of its own).
HF_SECRET_COMMAND = (
    'read -rs HF_TOKEN_VALUE && printf %s "$HF_TOKEN_VALUE" | kubectl -n NAMESPACE create secret generic hf-token '
    "--from-file=HF_TOKEN=/dev/stdin && unset HF_TOKEN_VALUE"
)


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
    (optional: pods start without it); empty = no token. The token itself is never read or printed by the tutorial.
    Make it from stdin, not `--from-literal` (which leaves the token in shell history and the process list): see
    docs/aws.md."""
    hf_cache_gib: int = Field(0, ge=0)
    """Size limit of the workers' Hugging Face cache volume (`HF_HOME`) in GiB; 0 = from the model (twice its
    bf16 weights, at least 10 GiB)."""

    _ns = field_validator("namespace")(classmethod(lambda cls, v: dns_label("namespace")(v)))
    _rc = field_validator("ray_cluster_name")(classmethod(lambda cls, v: dns_label("ray_cluster_name", 40)(v)))
    _sa = field_validator("service_account")(classmethod(lambda cls, v: dns_label("service_account")(v)))

    @field_validator("hf_token_secret")
    @classmethod
    def _hf_secret(cls, v: str) -> str:
        if v and (len(v) > 253 or not re.match(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$", v)):
            raise ValueError(
                "must be empty or a Secret name (lower-case letters, digits, '-' and '.', at most 253). "
                f"Fix: e.g. 'hf-token', made without the token in shell history or process list: {HF_SECRET_COMMAND}"
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
    """Port of the head's GCS (1024-65535, different from `dashboard_port`); Ray 2.58 listens on it on every
    interface, so the token (`auth_mode`) is what keeps others out."""
    dashboard_port: int = Field(8266, ge=1024, le=65535)
    """Port of the Ray dashboard and Jobs API on 127.0.0.1 (1024-65535)."""
    temp_root: str = "/tmp/raytrain-{uid}"
    """Root of the raylets' temporary folders, the cluster's state and its auth token; `{uid}` stands for your
    user id, so each user of a shared machine has their own. Created 0700; a folder owned by another user,
    writable by group or others, or a symbolic link is refused. At most 40 characters with `{uid}` replaced (Ray's
    unix socket paths under it are limited to 107 bytes)."""
    object_store_mb: int = Field(128, ge=78)
    """Object store of each raylet in MiB (at least 78)."""
    auth_mode: Literal["disabled", "token"] = "token"
    """Ray token authentication: `token` (a fresh 0600 token file under temp_root at each start, used by every
    process of the cluster and the notebook kernel; a request without it is refused), or `disabled` (anyone
    who can reach the cluster's ports runs code as you: only on a machine nobody else can log in to)."""

    @model_validator(mode="after")
    def _ports(self) -> LocalSettings:
        if self.gcs_port == self.dashboard_port:
            raise ValueError("gcs_port and dashboard_port must differ")
        if len(self.temp_root.replace("{uid}", "0" * 10)) > 40:  # a user id has at most 10 digits
            raise ValueError(
                "temp_root is too long: Ray's unix sockets live under it and their paths "
                "are limited to 107 bytes. Fix: a short path such as /tmp/raytrain-{uid}"
            )
        return self

    def temp_root_path(self) -> str:
        """``temp_root`` with ``{uid}`` replaced by this user's id."""
        return self.temp_root.replace("{uid}", str(os.geteuid()))


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


GROUPS = {g for g, _ in FLAT_FIELDS.values() if g is not None}
