"""The `aws:` group of env.yaml: the reference architecture on Amazon EKS."""

from __future__ import annotations

import difflib
import re
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from .presets import INSTANCE_TYPES
from .s3_uri import bucket_name_problem
from .settings_group import SettingsGroup
from .validation import REGION_RE, RESERVATION_RE, dns_label, known_regions


class AwsSettings(SettingsGroup):
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
    metrics_stack: bool = False
    """`true`: `raytrain-tutorial render` also writes a metrics stack under `metrics/` (Prometheus and Grafana from
    the kube-prometheus-stack chart with KubeRay's PodMonitors and Ray's Grafana dashboards, NVIDIA's DCGM exporter on
    the GPU nodes; pinned charts), to install by hand (docs/observability.md). `false` = nothing of it is rendered
    or installed: it costs nothing."""
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
    existing_cluster: bool = False
    """`true`: run the tutorial in an EKS cluster it did not create (yours, named by `cluster_name` in `region`).
    Step 02 then creates no cluster and no node group (only the checkpoint storage), 03 installs no device plugin
    (it reads the nodes' GPUs and EFA devices), and 08 removes only what the tutorial put in (its bucket, role and
    Pod Identity association, its Helm releases, its namespace and RayCluster), never the cluster or its node
    groups. `raytrain-tutorial check --target aws --existing-cluster` lists what the cluster lacks. `false` = 02
    creates the cluster and 08 deletes it; a cluster of that name the tutorial did not create is refused."""

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
