"""How the training job runs on the ``aws`` target: the one-line description, the job's defaults, and the
transport variants notebook 07 compares."""

from __future__ import annotations

from typing import Any

from ....clients import aws as aws_client
from ....core.settings import Settings
from ....core.validation import ConfigError
from ....plan import iam
from ....plan.ray_pods import NCCL_NET_EFA
from ...base import JobDefaults
from ..storage import state as storage_state


def where(settings: Settings) -> str:
    """One line saying what the run is on."""
    a = settings.aws
    return f"EKS {a.cluster_name} in {a.region}: {a.gpu_node_count} x {a.gpu_node_type} ({a.gpus_per_node} GPUs each)"


def job_defaults(settings: Settings) -> JobDefaults:
    """The driver decides GPU or not from the cluster (GPU nodes: NCCL; a CPU-only cluster: gloo, which then
    fails notebook 06's transport audit instead of failing to schedule); checkpoints go to storage every worker
    pod reaches: ``train.storage_path``, or else the bucket and prefix step 02 prepared); with
    ``aws.storage_per_namespace`` the namespace's own prefix under either (``plan.iam.storage_location``: the
    role's policy grants no other), computed from the settings and this account where 02 left no record."""
    path = settings.train.storage_path
    if path and settings.aws.storage_per_namespace:
        path = iam.storage_location(settings, "").uri  # the bucket is the path's: no account needed
    if not path:
        rec = storage_state.load_record(settings)
        path = f"s3://{rec['bucket']}/{rec['prefix']}" if rec and rec.get("bucket") else ""
    if not path and settings.aws.storage_per_namespace:  # an attendee's folder: 02 ran in the facilitator's
        sess = aws_client.session(settings.aws.region)
        path = iam.storage_location(settings, aws_client.identity(sess, settings.aws.region).account).uri
    if not path:
        raise ConfigError(
            "train.storage_path is empty and step 02 has not prepared the checkpoint bucket for this cluster, but "
            "the aws target needs storage every worker pod can reach. Fix: run 02_cluster (it creates the bucket), "
            "or set storage_path: s3://YOUR-BUCKET/raytrain"
        )
    # the Ray Train DLC image's interpreter, the one its raylets run
    # the workers download a hub model_id into their cache volume (HF_HOME); HF_TOKEN comes from a Secret
    online = {"HF_HUB_OFFLINE": "0", "TRANSFORMERS_OFFLINE": "0"}
    return JobDefaults(use_gpu="auto", storage_path=path, env=online, python="python")


def expected_transport(settings: Settings, gpus: int | None = None) -> str:
    """EFA between the GPU nodes (libfabric through the aws-ofi-nccl plugin), whatever ``gpus`` says."""
    return "efa" if settings.nccl.expect == "auto" else settings.nccl.expect


def benchmark_variants(settings: Settings) -> list[dict[str, Any]]:
    """EFA (libfabric through the aws-ofi-nccl plugin, forced with ``NCCL_NET``) against NCCL's plain sockets
    (``NCCL_NET=Socket`` in the job's env_vars overrides the pods' ``NCCL_NET=Libfabric``)."""
    return [
        dict(label="efa", expect="efa", env={"FI_PROVIDER": "efa", "NCCL_NET_PLUGIN": "ofi", "NCCL_NET": NCCL_NET_EFA}),
        dict(label="socket", expect="socket", env={"NCCL_NET": "Socket"}),
    ]
