"""Whether an object on aws is the tutorial's: the one rule every step applies before it deletes or changes anything.

An object is the tutorial's when it carries the tutorial's mark for this cluster, set when the tutorial created it:

* AWS resources (the EKS cluster, its node groups, eksctl's CloudFormation stacks, the storage role, the bucket, the
  Pod Identity association): the tag ``raytrain-tutorial=<aws.cluster_name>``. Step 02 puts it on the bucket, the
  role and the association itself, and on the cluster and the node groups through eksctl: the ClusterConfig's
  ``metadata.tags`` become the ``AWS::EKS::Cluster``'s ``Tags`` (eksctl-io/eksctl 99984adb, v0.230.0+5,
  pkg/cfn/builder/cluster.go ``makeCFNTags``) and every stack's tags (pkg/cfn/manager/api.go
  ``NewStackCollection``: ``alpha.eksctl.io/cluster-name``, ``eksctl.cluster.k8s.io/v1alpha1/cluster-name``,
  ``alpha.eksctl.io/eksctl-version`` and ``metadata.tags``); a managed node group's ``tags`` (with
  ``metadata.tags`` merged in) become the ``AWS::EKS::Nodegroup``'s (pkg/cfn/builder/managed_nodegroup.go). eksctl's
  own ``alpha.eksctl.io/*`` tags say only that eksctl made an object, not that the tutorial did: they are never taken
  as proof.
* Helm releases: the release label ``raytrain-tutorial=<aws.cluster_name>`` (``helm upgrade --install --labels``,
  helm/helm v3.13.0+ cmd/helm/upgrade.go; kept on the release's storage object, pkg/storage/driver/secrets.go
  ``newSecretsObject``) found again with ``helm list --selector`` (cmd/helm/list.go).
* Kubernetes objects (namespaces, the ServiceAccount, NetworkPolicies, the RayCluster): the label
  ``app.kubernetes.io/part-of=raytrain-tutorial`` (:func:`..plan.kube_objects.is_part_of_tutorial`).

What is not the tutorial's is left as it is, and the step says what it left and why. A cluster the tutorial did not
create is used only when the learner says so (``aws.existing_cluster: true``): then 02 and 03 create nothing and 08
removes only what the tutorial put in.
"""

from __future__ import annotations

from typing import Any

from ...clients import helm
from ...core.settings import Settings
from . import common

#: The tag (AWS) and Helm release label on everything the tutorial creates; its value is the cluster's name.
TAG_KEY = common.TAG_KEY
#: The setting that lets the tutorial work in a cluster it did not create.
SETTING = "aws.existing_cluster"
#: What :func:`release_state` finds.
ABSENT, OURS, NOT_OURS = "absent", "ours", "not ours"


def tag_value(settings: Settings) -> str:
    """The tag's value: the cluster's name (a Kubernetes label value holds at most 63 characters)."""
    return settings.aws.cluster_name[:63].rstrip("-")


def tags(settings: Settings) -> dict[str, str]:
    """The tags (as a dict) the tutorial puts on what it creates."""
    return {TAG_KEY: settings.aws.cluster_name}


def tag_list(settings: Settings) -> list[dict[str, str]]:
    """:func:`tags` as AWS's ``[{"Key": ..., "Value": ...}]``."""
    return [{"Key": k, "Value": v} for k, v in tags(settings).items()]


def as_dict(found: Any) -> dict[str, str]:
    """Tags as a dict, from a dict (EKS) or a list of Key/Value pairs (IAM, S3, CloudFormation)."""
    if isinstance(found, dict):
        return {str(k): str(v) for k, v in found.items()}
    return {t.get("Key", ""): t.get("Value", "") for t in found or []}


def owned(found_tags: Any, settings: Settings) -> bool:
    """Whether these tags are the tutorial's for this cluster."""
    return as_dict(found_tags).get(TAG_KEY) == settings.aws.cluster_name


def not_ours(what: str, settings: Settings, mark: str = "tag") -> str:
    """The words for an object left alone: what it is and why (``mark``: ``tag``, or ``release label`` for Helm)."""
    return (
        f"{what}: left as it is - not created by the tutorial (no {mark} {TAG_KEY}={settings.aws.cluster_name}); "
        f"the tutorial never deletes or changes it"
    )


def helm_selector(settings: Settings) -> str:
    """``helm list --selector`` for the tutorial's releases in this cluster."""
    return f"{TAG_KEY}={tag_value(settings)}"


def helm_labels(settings: Settings) -> dict[str, str]:
    """``helm upgrade --install --labels``: the release label that marks a release as the tutorial's."""
    return {TAG_KEY: tag_value(settings)}


def release_state(client, release: str, namespace: str, settings: Settings) -> str:
    """``absent``, ``ours`` (labelled for this cluster) or ``not ours``: the Helm release of that name in
    ``namespace``."""
    if release not in helm.releases(client, namespace):
        return ABSENT
    return OURS if release in helm.releases(client, namespace, selector=helm_selector(settings)) else NOT_OURS


def existing(settings: Settings) -> bool:
    """Whether the learner said the cluster is theirs (``aws.existing_cluster``)."""
    return bool(settings.aws.existing_cluster)


def cluster_refusal(settings: Settings, cluster: dict[str, Any]) -> str:
    """02 ``up`` on a cluster of this name that the tutorial did not create, without ``aws.existing_cluster``."""
    a = settings.aws
    eksctl = as_dict(cluster.get("tags")).get("alpha.eksctl.io/cluster-name")
    how = " (eksctl made it, from another config)" if eksctl else ""
    return (
        f"EKS cluster {a.cluster_name} in {a.region} exists and was not created by the tutorial{how}: it has no tag "
        f"{TAG_KEY}={a.cluster_name}. Nothing was created, changed or deleted. Fix: to run the tutorial in this "
        f"cluster, set {SETTING}: true (env.yaml, or `-p existing_cluster true`): 02 and 03 then create nothing in "
        f"it and 08 removes only what the tutorial put in; or choose another aws.cluster_name for a cluster of the "
        f"tutorial's own"
    )


def missing_existing(settings: Settings) -> str:
    """``aws.existing_cluster: true`` and no cluster of that name."""
    a = settings.aws
    return (
        f"{SETTING} is true, but there is no EKS cluster {a.cluster_name} in {a.region}; nothing was created. Fix: "
        f"set aws.cluster_name (and aws.region) to your cluster's, or {SETTING}: false to let 02 create one"
    )


__all__ = [
    "ABSENT",
    "NOT_OURS",
    "OURS",
    "SETTING",
    "TAG_KEY",
    "as_dict",
    "cluster_refusal",
    "existing",
    "helm_labels",
    "helm_selector",
    "missing_existing",
    "not_ours",
    "owned",
    "release_state",
    "tag_list",
    "tag_value",
    "tags",
]
