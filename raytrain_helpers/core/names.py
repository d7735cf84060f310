"""The names of a setting: flat (``steps``), dotted (``train.steps``), the reference sample's env.sh name
(``STEPS``) and its environment variable (``RAYTRAIN_STEPS``); and each setting as the documentation shows it.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any, Literal, get_args, get_origin

from .settings import FLAT_FIELDS, Settings
from .validation import ConfigError

ENV_PREFIX = "RAYTRAIN_"


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


FLAT_TO_ENV_SH = {v: k for k, v in ENV_SH_NAMES.items()}


def env_var_name(flat: str) -> str:
    """The environment variable that sets a setting: ``RAYTRAIN_`` + its env.sh name or its upper-cased name."""
    return ENV_PREFIX + FLAT_TO_ENV_SH.get(flat, flat.upper())


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


def field_annotation(group: str | None, leaf: str) -> Any:
    """The type annotation of one setting."""
    model = Settings if group is None else Settings.model_fields[group].annotation
    return model.model_fields[leaf].annotation


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
