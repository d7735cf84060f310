"""The settings' schema: the groups of env.yaml, a docstring per field, and the validators of each group.

Each field's docstring (the string literal under it) becomes its description through pydantic's
``use_attribute_docstrings``: ``raytrain-tutorial config --names`` / ``--markdown`` and docs/settings.md's table are
generated from them (:func:`.names.field_docs`). Every field also has a unique flat name (:data:`FLAT_FIELDS`).
"""

from __future__ import annotations

import json
import os
import re
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from .presets import PRESETS
from .settings_aws import AwsSettings
from .settings_group import SettingsGroup
from .settings_train import TrainSettings
from .validation import RUN_NAME_RE, dns_label


class VersionSettings(SettingsGroup):
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
    # The sha256 of each chart's archive, checked before it is installed; the defaults are the `digest` of the
    # pinned version in the publisher's index (docs/pins.md says where each was read)
    kuberay_chart_digest: str = ""
    """sha256 of the kuberay-operator chart archive (64 hex); empty = the digest of its entry in the repository's
    index, read when 03/04 install it (no published index with 1.7.0 could be read to pin it: docs/pins.md)."""
    nvidia_device_plugin_chart_digest: str = "9e5642bcdd3805c6e931f9d3ca542677d1f714d68c14c1364892011e67d9a606"
    """sha256 of the nvidia-device-plugin chart archive (of 0.20.0 by default); empty = the repository index's."""
    efa_device_plugin_chart_digest: str = "43b3d666f81a40b7f7ac88ee04a64954abaaa061b1e5f54dc7ce4beb3374e32a"
    """sha256 of the aws-efa-k8s-device-plugin chart archive (of v0.5.30 by default); empty = the repository
    index's."""

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

    @field_validator("kuberay_chart_digest", "nvidia_device_plugin_chart_digest", "efa_device_plugin_chart_digest")
    @classmethod
    def _chart_digest(cls, v: Any) -> str:
        v = str(v or "").strip().lower().removeprefix("sha256:")
        if v and not re.match(r"^[0-9a-f]{64}$", v):
            raise ValueError(
                "must be the sha256 of the chart archive (64 hex, the `digest` of its entry in the repository's "
                "index.yaml), or empty to read it from that index when the chart is installed"
            )
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


class KubernetesSettings(SettingsGroup):
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


class NcclSettings(SettingsGroup):
    """Collective communication: the transport the audit expects and the workers' NCCL environment."""

    expect: Literal["auto", "efa", "p2p", "socket", "ib", "none"] = "auto"
    """Expected NCCL transport between ranks: `auto` = efa on aws, p2p on local GPUs, none (gloo) on CPU; or
    one of `efa`, `p2p`, `socket`, `ib`, `none`."""
    debug: str = "INFO"
    """`NCCL_DEBUG` for the workers (`INFO` writes the lines the transport audit reads)."""
    env: dict[str, str] = Field(default_factory=dict)
    """Extra environment for the training workers (`NCCL_*`, `FI_*`), passed through the runtime_env; empty =
    none."""


class LocalSettings(SettingsGroup):
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


class Settings(SettingsGroup):
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
