"""Step 02 on aws (notebook 02_cluster): the EKS cluster, created with eksctl; and step 08 (notebook 08_teardown),
its removal.

Every action is decided from the resources' real state, read with boto3 (``eks:DescribeCluster`` /
``eks:DescribeNodegroup``: NOT_FOUND, CREATING, ACTIVE, DELETING, FAILED...), so re-running any action is safe:

* ``plan``   renders the eksctl configs from env.yaml and lists what ``up`` would do; creates nothing.
* ``up``     creates what is missing - the cluster (VPC with private subnets in the AZs offering the GPU
             type, one NAT gateway, OIDC, core add-ons, the ``role=system`` node group); then the checkpoint
             storage (bucket, role, Pod Identity association) and its check from a one-off pod on the system
             node (:mod:`..storage.gate`); only when that passed, the EFA GPU node group in exactly one AZ (the
             placement from step 01, passed as explicit subnet ids) - after one confirmation; waits for what
             is in progress; reports failures with their causes.
* ``status`` reads and shows the state; never changes anything.
* ``down``   deletes the GPU node group, then the cluster, after one confirmation, and lists what is left.

What to do is decided by :func:`raytrain_helpers.plan.eksctl.decide_actions` from the state read here; this
module reads the state, carries the actions out, waits and diagnoses. :func:`teardown` (notebook 08) also
removes the Kubernetes objects first: the RayCluster, the KubeRay operator and the device plugins.

Where things are: :mod:`.state` (the result, the context, node groups and failure causes as read, leftovers,
waits), :mod:`.placement` (the GPU AZ, the capacity reservation, what exists), :mod:`.create` (eksctl creating the
cluster and node groups), :mod:`.up` (the ``plan``/``up``/``status`` sequence), :mod:`.down` (``down`` and notebook
08). This package keeps the names callers import.
"""

from __future__ import annotations

from ....plan.eksctl import CLUSTER_CFG, GPU_CFG
from .create import EXECUTORS, UpInputs, execute_actions
from .down import AwsTeardownResult, TeardownRows, delete, teardown
from .placement import reservation_problems, resolve_gpu_az, validate_reservation
from .state import AwsClusterResult, AwsContext, failure_causes, leftovers, nodegroup_summary, read_nodegroups
from .up import cluster

__all__ = [
    "CLUSTER_CFG",
    "EXECUTORS",
    "GPU_CFG",
    "AwsClusterResult",
    "AwsContext",
    "AwsTeardownResult",
    "TeardownRows",
    "UpInputs",
    "cluster",
    "delete",
    "execute_actions",
    "failure_causes",
    "leftovers",
    "nodegroup_summary",
    "read_nodegroups",
    "reservation_problems",
    "resolve_gpu_az",
    "teardown",
    "validate_reservation",
]
