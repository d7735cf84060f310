"""Step 02 ``down`` and notebook 08 on aws: the GPU node group, then the cluster, deleted and verified by listing;
notebook 08's teardown of everything in reverse order."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ....clients import aws as aws_client
from ....clients.eksctl import eksctl_path
from ....clients.kubernetes import cluster_context
from ....core.config import Settings
from ....core.tables import table
from ....plan.eksctl import NOT_FOUND
from ....plan.raycluster import OPERATOR_NAMESPACE
from .. import common, ownership
from ..kuberay import raycluster as kuberay
from ..placement.capacity import cancel_probe_reservations, probe_reservations
from ..plugins import install as plugins
from ..storage import bucket as storage
from ..storage import teardown as storage_teardown
from .state import (
    AwsClusterResult,
    AwsContext,
    failure_causes,
    leftovers,
    read_nodegroups,
    wait_cluster_gone,
    wait_nodegroup_gone,
)

# --------------------------------------------------------------------------------------------------------------
# Deleting: the GPU node group, then the cluster; verified by listing what is left
# --------------------------------------------------------------------------------------------------------------


def delete(
    settings: Settings,
    *,
    assume_yes: bool = False,
    nodegroup_only: bool = False,
    context: AwsContext | None = None,
    result: AwsClusterResult | None = None,
) -> AwsClusterResult:
    """Delete the GPU node group, then (unless ``nodegroup_only``) the cluster with everything eksctl made.

    Headless with ``assume_yes=True``; never prompts in a non-interactive run (it refuses instead).
    ``context`` / ``result``: an open :class:`AwsContext` and the result to fill (new ones by default).
    """
    ctx = context or AwsContext(settings)
    res = result or AwsClusterResult(
        action="down", account=ctx.ident.account, region=ctx.region, cluster_name=settings.aws.cluster_name
    )
    a = settings.aws
    c = ctx.cluster()
    res.cluster_status = c["status"] if c else NOT_FOUND
    c, gpu_status = _owned(ctx, res, c)
    try:
        probes = [cr["CapacityReservationId"] for cr in probe_reservations(ctx.ec2)]
    except Exception:  # noqa: BLE001 - listing may be denied; leftovers() reports it
        probes = []
    if nodegroup_only:
        probes = []
    todo = _deletions(settings, c, gpu_status, probes, nodegroup_only=nodegroup_only)
    if todo:
        what = f"delete {'the GPU node group of ' if nodegroup_only else ''}{a.cluster_name}"
        common.confirm(what, ctx.ident, assume_yes=assume_yes, details=todo)
        if gpu_status != NOT_FOUND or c is not None:
            eksctl_path()  # a clear error before anything starts when eksctl is missing
    done: list[str] = []
    try:
        if _delete_gpu_nodegroup(ctx, res, done, gpu_status) and not nodegroup_only and c is not None:
            _delete_cluster(ctx, res, done, c)
    except common.WaitTimeout as e:
        res.causes += failure_causes(ctx.sess, ctx.region, a.cluster_name, e.nodegroup)
        res.problems.append(f"stuck: {e}. Fix: see the causes; run `down` again later")
    if probes:
        cancelled, _left = cancel_probe_reservations(ctx.ec2)
        if cancelled:
            done.append(f"cancelled probe reservations {', '.join(cancelled)}")
    res.actions = done or ["nothing to delete"]
    res.cluster_status = ctx.cluster_status()
    res.nodegroups = read_nodegroups(ctx) if res.cluster_status != NOT_FOUND else []
    left = leftovers(ctx)
    res.remaining = [x for x in left if a.gpu_nodegroup_name in x] if nodegroup_only else left
    if res.kept:  # what is kept on purpose is no leftover: only the tutorial's own count
        res.remaining = [x for x in res.remaining if x.startswith("probe capacity reservation")]
    return res


def _owned(ctx: AwsContext, res: AwsClusterResult, c: dict[str, Any] | None) -> tuple[dict[str, Any] | None, str]:
    """The cluster and the GPU node group's status as far as they are the tutorial's to delete (None / NOT_FOUND
    otherwise); what is left alone goes to ``res.kept`` with the reason."""
    s = ctx.settings
    name, ng_name = s.aws.cluster_name, s.aws.gpu_nodegroup_name
    if c is None:
        return None, NOT_FOUND
    ng = ctx.nodegroup(ng_name)
    if ownership.existing(s) or not ownership.owned(c.get("tags"), s):
        why = (
            f"{ownership.SETTING} is true: the cluster is yours"
            if ownership.existing(s)
            else ownership.not_ours(f"EKS cluster {name}", s)
        )
        res.kept.append(f"EKS cluster {name}, its node groups and eksctl stacks: {why}")
        return None, NOT_FOUND
    gpu_status = ng["status"] if ng else NOT_FOUND
    if ng is not None and not ownership.owned(ng.get("tags"), s):
        res.kept.append(ownership.not_ours(f"node group '{ng_name}' of EKS cluster {name}", s))
        gpu_status = NOT_FOUND
    names = aws_client.paginate(ctx.eks, "list_nodegroups", "nodegroups", clusterName=name)
    foreign = [n for n in names if n != ng_name and not ownership.owned((ctx.nodegroup(n) or {}).get("tags"), s)]
    if foreign or gpu_status == NOT_FOUND and ng is not None:
        res.kept.append(
            f"EKS cluster {name}: kept - it holds node group(s) {', '.join(foreign or [ng_name])} the tutorial did "
            f"not create, which deleting the cluster would delete. Fix: remove them yourself if they are yours to "
            f"remove, then run `cluster down` again"
        )
        return None, gpu_status
    return c, gpu_status


def _deletions(
    settings: Settings, c: dict[str, Any] | None, gpu_status: str, probes: list[str], *, nodegroup_only: bool
) -> list[str]:
    """What ``down`` will delete, as shown before the confirmation."""
    a = settings.aws
    todo = []
    if gpu_status != NOT_FOUND:
        todo.append(f"delete GPU node group '{a.gpu_nodegroup_name}' ({gpu_status})")
    if not nodegroup_only and c is not None:
        todo.append(
            f"delete EKS cluster {a.cluster_name} ({c['status']}) with its node groups, VPC, NAT gateway "
            f"and eksctl stacks"
        )
    if probes:
        todo.append(f"cancel leftover capacity-probe reservations {', '.join(probes)}")
    return todo


def _delete_gpu_nodegroup(ctx: AwsContext, res: AwsClusterResult, done: list[str], gpu_status: str) -> bool:
    """Delete the GPU node group and wait until it is gone; False when it is still there."""
    a = ctx.settings.aws
    if gpu_status not in (NOT_FOUND, "DELETING"):
        r = ctx.eksctl(
            [
                "delete",
                "nodegroup",
                "--cluster",
                a.cluster_name,
                "--name",
                a.gpu_nodegroup_name,
                "--region",
                ctx.region,
                "--drain=false",
                "--wait",
            ],
            "delete-gpu-nodegroup",
            f"deleting node group {a.gpu_nodegroup_name}",
            poll=lambda: ctx.nodegroup_status(a.gpu_nodegroup_name),
        )
        res.logs.append(str(r.log_path))
        if r.returncode != 0:
            res.causes += [f"eksctl: {line}" for line in r.tail[-6:] if line.strip()]
    if gpu_status == NOT_FOUND:
        return True
    st = ctx.nodegroup_status(a.gpu_nodegroup_name)
    if st == "DELETING":
        st = wait_nodegroup_gone(ctx, a.gpu_nodegroup_name)
    if st != NOT_FOUND:
        res.causes += failure_causes(ctx.sess, ctx.region, a.cluster_name, a.gpu_nodegroup_name)
        res.problems.append(
            f"GPU node group '{a.gpu_nodegroup_name}' is {st}, not deleted. Fix: see the causes "
            f"(often an ENI or security group still in use), then run `down` again"
        )
        return False
    done.append(f"deleted GPU node group '{a.gpu_nodegroup_name}'")
    return True


def _delete_cluster(ctx: AwsContext, res: AwsClusterResult, done: list[str], c: dict[str, Any]) -> None:
    """Delete the cluster with everything eksctl made, and wait until it is gone."""
    name = ctx.settings.aws.cluster_name
    if c["status"] != "DELETING":
        r = ctx.eksctl(
            ["delete", "cluster", "--name", name, "--region", ctx.region, "--wait"],
            "delete-cluster",
            f"deleting cluster {name}",
            poll=ctx.cluster_status,
        )
        res.logs.append(str(r.log_path))
        if r.returncode != 0:
            res.causes += [f"eksctl: {line}" for line in r.tail[-6:] if line.strip()]
    st = ctx.cluster_status()
    if st == "DELETING":
        st = wait_cluster_gone(ctx)
    if st != NOT_FOUND:
        res.causes += failure_causes(ctx.sess, ctx.region, name)
        res.problems.append(f"cluster {name} is {st}, not deleted. Fix: see the causes; run `down` again")
        return
    done.append(f"deleted EKS cluster {name}")


# --------------------------------------------------------------------------------------------------------------
# Notebook 08: everything, in reverse order
# --------------------------------------------------------------------------------------------------------------


class AwsTeardownResult:
    """Notebook 08 on aws: one row (what, gone, evidence) per step in the order done; ``parts``: each step's
    own result (``kuberay``, ``plugins``, ``cluster``)."""

    def __init__(self, steps: list[tuple[str, bool, str]], *, refused: str = "", parts: dict[str, Any] | None = None):
        self.steps = steps
        self.refused = refused
        self.parts = parts or {}

    @property
    def ok(self) -> bool:
        return not self.refused and bool(self.steps) and all(ok for _, ok, _ in self.steps)

    @property
    def remaining(self) -> list[str]:
        c = self.parts.get("cluster")
        return list(c.remaining) if c is not None else []

    def show(self) -> None:
        if self.refused:
            print(self.refused)
            return
        table(
            [(name, ("kept" if "kept" in ev else "gone") if ok else "LEFT", ev) for name, ok, ev in self.steps],
            ["what", "state", "evidence"],
            title="teardown (reverse order)",
            max_width=90,
        )
        if self.parts.get("storage") is not None:
            storage.show_kept(self.parts["storage"].kept)
        c = self.parts.get("cluster")
        if c is not None:
            for k in c.kept:
                print(f"kept: {k}")
            print("left in the account: " + ("nothing" if not c.remaining else ""))
            for r in c.remaining:
                print(f"  - {r}")
            for x in c.causes:
                print(f"cause: {x}")
            for x in c.problems:
                print(f"PROBLEM: {x}")
        kept = c is not None and c.kept or self.parts.get("storage") is not None and self.parts["storage"].kept
        done = (
            "everything the tutorial created is gone; what it did not create is kept (above)"
            if kept
            else ("everything is gone")
        )
        print("teardown:", done if self.ok else "NOT complete (see LEFT above); re-run to retry")


@dataclass
class TeardownRows:
    """The names of notebook 08's rows, from the settings."""

    raycluster: str
    operator: str
    plugins: str
    nodegroup: str
    cluster: str

    @classmethod
    def of(cls, settings: Settings) -> TeardownRows:
        a, k = settings.aws, settings.kubernetes
        return cls(
            raycluster=f"RayCluster {k.namespace}/{k.ray_cluster_name} and its pods",
            operator=f"KubeRay operator (its Helm release in {OPERATOR_NAMESPACE}; Helm keeps the ray.io CRDs until "
            f"the cluster goes), namespace {k.namespace}",
            plugins="device plugins (the NVIDIA and EFA Helm releases in kube-system)",
            nodegroup=f"GPU node group '{a.gpu_nodegroup_name}'",
            cluster=f"EKS cluster {a.cluster_name} (node groups, VPC, NAT gateway, eksctl stacks)",
        )


def teardown(settings: Settings, *, assume_yes: bool = False, nodegroup_only: bool = False) -> AwsTeardownResult:
    """RayCluster -> KubeRay operator -> device plugins -> GPU node group -> EKS cluster, each checked by
    listing. The Kubernetes objects are deleted only through the kubeconfig context of *this* EKS
    cluster; without one (or with the API unreachable) they are left to go with the cluster.
    ``nodegroup_only``: only the GPU node group. Never prompts: refuses without ``assume_yes``."""
    if not assume_yes:
        return AwsTeardownResult([], refused=_refusal(settings, nodegroup_only))
    rows = TeardownRows.of(settings)
    ctx = AwsContext(settings)
    parts: dict[str, Any] = {}
    k8s_rows = [] if nodegroup_only else _kubernetes_teardown(settings, ctx.cluster(), rows, parts)
    if not nodegroup_only:  # the pods' role and association, the tutorial's bucket (before the cluster)
        parts["storage"] = storage.teardown(settings, ctx.sess, ctx.ident, ctx.cluster())
    res = delete(settings, assume_yes=True, nodegroup_only=nodegroup_only, context=ctx)
    parts["cluster"] = res
    steps = _summary(settings, res, rows, k8s_rows, nodegroup_only=nodegroup_only)
    steps[len(k8s_rows) : len(k8s_rows)] = parts["storage"].rows if "storage" in parts else []
    return AwsTeardownResult(steps, parts=parts)


def _refusal(settings: Settings, nodegroup_only: bool) -> str:
    a, k = settings.aws, settings.kubernetes
    if nodegroup_only:
        what = f"GPU node group '{a.gpu_nodegroup_name}' of EKS cluster {a.cluster_name}"
    else:
        what = (
            f"RayCluster {k.namespace}/{k.ray_cluster_name}, the KubeRay operator, the device plugins, GPU "
            f"node group '{a.gpu_nodegroup_name}' and EKS cluster {a.cluster_name}"
        )
    note = "" if nodegroup_only else storage_teardown.model_copy_note(settings)
    return (
        f"refused: teardown deletes the {what} in {a.region}; nothing was deleted."
        + (f" Also {note}." if note else "")
        + " Fix: pass assume_yes=True (notebook parameter assume_yes, CLI --yes) after checking the account and "
        "region"
    )


def _kubernetes_teardown(
    settings: Settings, c: dict[str, Any] | None, rows: TeardownRows, parts: dict[str, Any]
) -> list[tuple[str, bool, str]]:
    """The RayCluster, the operator and the device plugins, through this cluster's kubeconfig context only."""
    k8s_names = (rows.raycluster, rows.operator, rows.plugins)
    if c is None:
        return [
            (r, True, f"no EKS cluster {settings.aws.cluster_name}: nothing in Kubernetes to delete") for r in k8s_names
        ]
    context, where = cluster_context(settings)
    if context is None:
        return [(r, False, f"not deleted through the API: {where}") for r in k8s_names]
    print(f"Kubernetes: {where}")
    kr = kuberay.teardown(settings, assume_yes=True)
    parts["kuberay"] = kr
    rc = [(o, st) for o, st in kr.deleted if o.startswith(("RayCluster", "pods"))]
    op = [(o, st) for o, st in kr.deleted if not o.startswith(("RayCluster", "pods"))]
    out = []
    for row, listed in ((rows.raycluster, rc), (rows.operator, op)):
        gone = bool(listed) and all(st == "absent" or st.startswith("kept") for _, st in listed)
        out.append((row, gone, "; ".join(f"{o}: {st}" for o, st in listed) or kr.message))
    pl = plugins.teardown(settings, assume_yes=True)
    parts["plugins"] = pl
    out.append((rows.plugins, pl.ok, "; ".join(f"{o}: {st}" for o, st in pl.deleted) or pl.message))
    return out


def _summary(
    settings: Settings,
    res: AwsClusterResult,
    rows: TeardownRows,
    k8s_rows: list[tuple[str, bool, str]],
    *,
    nodegroup_only: bool,
) -> list[tuple[str, bool, str]]:
    """Notebook 08's rows: the Kubernetes ones, the node group, the cluster (unless ``nodegroup_only``)."""
    name, cl = settings.aws.gpu_nodegroup_name, settings.aws.cluster_name
    cluster_gone = res.cluster_status == NOT_FOUND
    # what the API could not delete went with the cluster when the cluster is gone (verified by EKS)
    steps = [
        (r, ok or cluster_gone, ev if ok or not cluster_gone else f"{ev}; gone with the EKS cluster")
        for r, ok, ev in k8s_rows
    ]
    ng_left = [x for x in res.remaining if f"node group {name} " in x or f"nodegroup-{name}" in x]
    ng_done = any(name in x and x.startswith("deleted") for x in res.actions)
    ng_kept = [k for k in res.kept if f"node group '{name}'" in k or k.startswith(f"EKS cluster {cl}, its")]
    ng_evidence = "; ".join(ng_left) or ("deleted, then checked: absent" if ng_done else "absent (nothing to delete)")
    ng_evidence = "kept: " + "; ".join(ng_kept) if ng_kept and not ng_done else ng_evidence
    steps.append((rows.nodegroup, not ng_left and not any(name in p for p in res.problems), ng_evidence))
    if nodegroup_only:
        return steps
    cl_kept = [k for k in res.kept if k.startswith(f"EKS cluster {cl}")]
    if cl_kept:
        steps.append((rows.cluster, not res.problems, "kept: " + "; ".join(cl_kept)))
        return steps
    others = [x for x in res.remaining if x not in ng_left]
    cl_done = any(x.startswith("deleted EKS cluster") for x in res.actions)
    evidence = "; ".join(others[:6]) + (f" ... ({len(others)} in all)" if len(others) > 6 else "")
    if not evidence:
        evidence = (
            "; ".join(res.problems)
            if res.problems
            else ("deleted, then listed: nothing left" if cl_done else "absent (nothing to delete)")
        )
    steps.append((rows.cluster, not others and cluster_gone and not res.problems, evidence))
    return steps
