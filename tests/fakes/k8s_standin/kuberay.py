"""What the KubeRay operator v1.7.0 names and labels, for the Kubernetes stand-in and the tests (test-only).

It models ray-project/kuberay tag v1.7.0 (commit 59d663ae, 2026-08-19), the operator the tutorial pins
(``versions.kuberay_version``), with the operator's defaults (no ``DefaultPodLabels`` option, feature gates off).
Each function names the function of that tag it follows; nothing here is modelled without one.

* the labels of a Ray pod (:func:`pod_labels`): ``ray-operator/controllers/ray/common/pod.go``
  ``DefaultHeadPodTemplate`` / ``DefaultWorkerPodTemplate`` merge the group's template labels with its ``labels``
  (``mergeLabels``: the group's win), then ``labelPod`` sets the operator's labels and lets the merged ones override
  all but ``ray.io/node-type``, ``ray.io/group`` and ``ray.io/cluster``; keys and values from
  ``ray-operator/controllers/ray/utils/constant.go`` (``RayNodeLabelKey`` ... ``ComponentName``) and
  ``utils/util.go`` (``GenerateIdentifier``, ``CheckLabel``);
* the RayCluster a RayJob makes (:func:`rayjob_cluster`): ``ray-operator/controllers/ray/rayjob_controller.go``
  ``initRayJobStatusIfNeed`` names it ``utils.GenerateRayClusterName(rayJob.Name)`` = ``<name>-<5 random
  characters>`` (``utils/util.go``; ``rand.String`` of k8s.io/apimachinery ``pkg/util/rand``, whose alphabet is
  :data:`RAND_ALPHABET`) unless ``clusterSelector`` names one, and ``constructRayClusterForRayJob`` gives it the
  RayJob's labels plus ``ray.io/originated-from-cr-name``, ``ray.io/originated-from-crd: RayJob`` and
  ``ray.io/job-submission-mode``, the RayJob's ``rayClusterSpec`` unchanged, and the RayJob as controller owner;
* the submitter pod of ``K8sJobMode`` (:func:`submitter_pod_labels`): ``getSubmitterTemplate`` (same file) takes
  ``submitterPodTemplate`` or ``common.GetSubmitterTemplate``'s default (no labels) and adds
  ``ray.io/originated-from-cr-name``, ``ray.io/originated-from-crd`` and ``app.kubernetes.io/created-by``; the
  Kubernetes Job controller adds ``batch.kubernetes.io/job-name`` and ``batch.kubernetes.io/controller-uid``
  (Kubernetes documentation, "Jobs": "Job labels"), the legacy ``job-name`` and ``controller-uid`` too.
"""

from __future__ import annotations

import copy
import random
from typing import Any

VERSION = "1.7.0"
#: k8s.io/apimachinery pkg/util/rand ``alphanums``: what ``rand.String`` draws from (no vowels, no 0/1/3).
RAND_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
#: utils/constant.go
CLUSTER = "ray.io/cluster"
NODE_TYPE = "ray.io/node-type"
GROUP = "ray.io/group"
IS_RAY_NODE = "ray.io/is-ray-node"
IDENTIFIER = "ray.io/identifier"
APP_NAME = "app.kubernetes.io/name"
CREATED_BY = "app.kubernetes.io/created-by"
FROM_CR_NAME = "ray.io/originated-from-cr-name"
FROM_CRD = "ray.io/originated-from-crd"
SUBMISSION_MODE = "ray.io/job-submission-mode"
HEAD_GROUP = "headgroup"  # RayNodeHeadGroupLabelValue
#: labelPod: the labels a template may not override
PROTECTED = (NODE_TYPE, GROUP, CLUSTER)


def generate_cluster_name(rayjob_name: str, rng: random.Random | None = None) -> str:
    """utils.GenerateRayClusterName: ``<rayjob name>-<5 random characters>``."""
    pick = rng or random
    return f"{rayjob_name}-{''.join(pick.choice(RAND_ALPHABET) for _ in range(5))}"


def check_label(value: str) -> str:
    """utils.CheckLabel: the last 63 characters; a leading punctuation character replaced by ``r``."""
    value = value[-63:]
    return "r" + value[1:] if value and not value[0].isalnum() else value


def pod_labels(cluster: str, node_type: str, group: str, group_spec: dict[str, Any]) -> dict[str, str]:
    """The labels of a head (``node_type`` "head", ``group`` "headgroup") or worker pod of RayCluster ``cluster``
    from its group spec (``headGroupSpec`` or one ``workerGroupSpecs`` entry): labelPod(mergeLabels(...))."""
    merged = dict(((group_spec.get("template") or {}).get("metadata") or {}).get("labels") or {})
    merged.update(group_spec.get("labels") or {})
    labels = {
        IS_RAY_NODE: "yes",
        CLUSTER: cluster,
        NODE_TYPE: node_type,
        GROUP: group,
        IDENTIFIER: check_label(f"{cluster}-{node_type}"),
        APP_NAME: "kuberay",
        CREATED_BY: "kuberay-operator",
    }
    labels.update({k: str(v) for k, v in merged.items() if k not in PROTECTED})
    return labels


def cluster_pod_labels(cluster: str, spec: dict[str, Any]) -> list[dict[str, str]]:
    """One label set per pod the operator creates for a RayCluster named ``cluster`` with ``spec``: the head, then
    each worker group's ``replicas``."""
    out = [pod_labels(cluster, "head", HEAD_GROUP, spec["headGroupSpec"])]
    for g in spec.get("workerGroupSpecs") or []:
        out += [pod_labels(cluster, "worker", g["groupName"], g) for _ in range(int(g.get("replicas", 1)))]
    return out


def rayjob_cluster(rayjob: dict[str, Any], name: str) -> dict[str, Any]:
    """constructRayClusterForRayJob: the RayCluster ``name`` the operator creates for ``rayjob``."""
    md = rayjob["metadata"]
    labels = dict(md.get("labels") or {})
    labels.update(
        {
            FROM_CR_NAME: md["name"],
            FROM_CRD: "RayJob",
            SUBMISSION_MODE: str(rayjob["spec"].get("submissionMode", "K8sJobMode")),
        }
    )
    owner = {"apiVersion": rayjob.get("apiVersion", "ray.io/v1"), "kind": "RayJob", "name": md["name"]}
    if md.get("uid"):
        owner.update(uid=md["uid"], controller=True, blockOwnerDeletion=True)
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": name, "namespace": md.get("namespace", ""), "labels": labels, "ownerReferences": [owner]},
        "spec": copy.deepcopy(rayjob["spec"]["rayClusterSpec"]),
    }


def rayjob_cluster_name(rayjob: dict[str, Any], rng: random.Random | None = None) -> str:
    """initRayJobStatusIfNeed: the cluster the RayJob runs on - the one ``clusterSelector`` names, else a new name."""
    chosen = (rayjob["spec"].get("clusterSelector") or {}).get("ray.io/cluster", "")
    return chosen or generate_cluster_name(rayjob["metadata"]["name"], rng)


def submitter_pod_labels(rayjob: dict[str, Any], job_uid: str = "00000000-0000-4000-8000-000000000000") -> dict:
    """The labels of a K8sJobMode submitter pod (getSubmitterTemplate, then the Job controller's)."""
    name = rayjob["metadata"]["name"]
    template = rayjob["spec"].get("submitterPodTemplate") or {}
    labels = dict((template.get("metadata") or {}).get("labels") or {})
    labels.update({FROM_CR_NAME: name, FROM_CRD: "RayJob", CREATED_BY: "kuberay-operator"})
    labels.update(
        {"batch.kubernetes.io/job-name": name, "job-name": name}
        | {"batch.kubernetes.io/controller-uid": job_uid, "controller-uid": job_uid}
    )
    return labels
