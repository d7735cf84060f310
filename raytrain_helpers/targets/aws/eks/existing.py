"""Step 02 in an EKS cluster the tutorial did not create (``aws.existing_cluster: true``): no cluster and no node
group is created; only the checkpoint storage (the tutorial's bucket, role and Pod Identity association, each tagged,
each removed by 08). The cluster's NetworkPolicy enforcement is read and said plainly.

NetworkPolicy enforcement on EKS is the Amazon VPC CNI's network policy agent, off unless the ``vpc-cni`` add-on's
configuration sets ``enableNetworkPolicy: "true"`` (aws/amazon-vpc-cni-k8s b5218838, charts/aws-vpc-cni/values.yaml
``enableNetworkPolicy: "false"``, passed to the agent as ``--enable-network-policy`` in templates/daemonset.yaml; the
EKS add-on takes the chart's values as its ``configurationValues``, EKS User Guide "Restrict Pod network traffic with
Kubernetes network policies"). Step 02 turns it on in the clusters it creates (manifests/eksctl-cluster.yaml.j2);
in another cluster :func:`..cluster_check.network_policy` reads it with ``eks:DescribeAddon``.
"""

from __future__ import annotations

from typing import Any

from .. import ownership
from ..cluster_check import network_policy
from ..storage import bucket as storage
from .state import AwsClusterResult, AwsContext, read_nodegroups


def plan_or_up(
    ctx: AwsContext, res: AwsClusterResult, c: dict[str, Any] | None, *, execute: bool, assume_yes: bool
) -> None:
    """02 ``plan`` / ``up`` with ``aws.existing_cluster``: the cluster read, the storage planned (and created by
    ``up``); no cluster, no node group."""
    s = ctx.settings
    if c is None:
        res.problems.append(ownership.missing_existing(s))
        return
    res.nodegroups = read_nodegroups(ctx)
    res.notes.append(
        f"existing cluster ({ownership.SETTING}: true): 02 creates no cluster and no node group in "
        f"{s.aws.cluster_name}; it adds only the checkpoint storage (bucket, role, Pod Identity association), "
        f"tagged {ownership.TAG_KEY}={s.aws.cluster_name}, which 08 removes"
    )
    enforced, line = network_policy(ctx.eks, s)
    res.notes.append(("" if enforced else "WARNING: ") + f"NetworkPolicy enforcement: {line}")
    if c["status"] != "ACTIVE":
        res.problems.append(
            f"EKS cluster {s.aws.cluster_name} is {c['status']}, not ACTIVE. Fix: wait until it is ACTIVE "
            f"(`aws eks describe-cluster --name {s.aws.cluster_name}`), then run 02 again"
        )
        return
    res.actions = []
    storage.plan_into(res, s, ctx.sess, ctx.ident, c)
    if not execute or res.problems:
        if not execute:
            res.notes.append("plan: nothing was created; run `up` to do the actions above")
        return
    res.actions = []
    storage.up_into(res, s, ctx.sess, ctx.ident, c, assume_yes=assume_yes)


__all__ = ["plan_or_up"]
