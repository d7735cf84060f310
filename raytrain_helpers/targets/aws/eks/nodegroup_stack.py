"""Step 02 on aws: the GPU node group's CloudFormation stack - its status, why it failed, whether the tutorial made
it, deleting a failed one, and the AZs to try when EC2 has no capacity.

Why the stack matters: when a managed node group cannot launch its instances, CloudFormation rolls eksctl's stack
``eksctl-<cluster>-nodegroup-<name>`` back and leaves it ``ROLLBACK_COMPLETE``. ``eksctl create nodegroup`` then
counts that stack as an existing node group and skips it, exiting 0 with nothing created (eksctl-io/eksctl
99984adb: pkg/actions/nodegroup/create.go calls pkg/ctl/cmdutils/filter/nodegroup_filter.go ``SetOnlyLocal``,
whose "existing" node groups come from pkg/cfn/manager/nodegroup.go ``ListNodeGroupStacks``; that lists stacks in
every status of api.go ``allNonDeletedStackStatuses``, ROLLBACK_COMPLETE included, and drops only DELETE_COMPLETE
and DELETE_FAILED). So the failed stack is deleted before the node group is created again - only when its tags say
eksctl made it for this cluster and node group from the tutorial's config (eksctl tags a managed node group's stack
with the node group's own ``tags``, ``alpha.eksctl.io/cluster-name`` and ``alpha.eksctl.io/nodegroup-name``:
pkg/cfn/manager/nodegroup.go createManagedNodeGroupTask, pkg/apis/eksctl.io/v1alpha5/defaults.go).

Since eksctl v0.218.0 every stack eksctl creates has termination protection on (eksctl-io/eksctl v0.230.0
pkg/cfn/manager/api.go ``DoCreateStackRequest``: ``EnableTerminationProtection: aws.Bool(true)``, PR #8586), and
CloudFormation refuses to delete a protected stack (API Reference, UpdateTerminationProtection: "If a user attempts
to delete a stack with termination protection enabled, the operation fails and the stack remains unchanged").
eksctl's own ``DeleteStackBySpec`` (same file) turns the protection off first; so does :func:`delete`, for a stack
:func:`not_ours` has proved the tutorial's, and for no other.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ....clients import aws as aws_client
from ....core.config import Settings
from .. import common, ownership

#: Stack statuses of a create that failed: eksctl skips the node group while its stack is in one of them.
FAILED_STACK = ("ROLLBACK_COMPLETE", "ROLLBACK_FAILED", "CREATE_FAILED")
#: Stack statuses CloudFormation is still moving out of: eksctl stops waiting at ROLLBACK_IN_PROGRESS and exits.
MOVING_STACK = ("CREATE_IN_PROGRESS", "ROLLBACK_IN_PROGRESS", "DELETE_IN_PROGRESS")
#: The tag the tutorial puts on every node group it renders (manifests/eksctl-*.yaml.j2 ``tags``).
TUTORIAL_TAG = ownership.TAG_KEY
CLUSTER_TAG = "alpha.eksctl.io/cluster-name"
NODEGROUP_TAG = "alpha.eksctl.io/nodegroup-name"
#: EKS's reason when the node group's Auto Scaling group cannot launch On-Demand instances (the stack event's
#: ResourceStatusReason, shown in full in github.com/eksctl-io/eksctl/issues/4732): it names the type and the AZ.
CAPACITY_RE = re.compile(
    r"InsufficientInstanceCapacity - We currently do not have sufficient (?P<type>\S+) capacity in the "
    r"Availability Zone you requested \((?P<az>[a-z0-9-]+)\)"
)
#: Seconds between stack reads while a stack is deleted (tests shorten it), and the most to wait.
POLL_S = 10.0
DELETE_TIMEOUT_S = 15 * 60


def stack_name(cluster: str, nodegroup: str) -> str:
    """eksctl's name for a node group's stack (pkg/cfn/manager/nodegroup.go makeNodeGroupStackName)."""
    return f"eksctl-{cluster}-nodegroup-{nodegroup}"


@dataclass
class NodegroupStack:
    """A node group's stack as CloudFormation reports it, with the first failed event's reason."""

    name: str
    stack_id: str
    status: str
    tags: dict[str, str] = field(default_factory=dict)
    reason: str = ""
    #: DescribeStacks' EnableTerminationProtection (eksctl >= 0.218.0 creates every stack protected)
    protected: bool = False

    @property
    def failed(self) -> bool:
        return self.status in FAILED_STACK

    @property
    def capacity(self) -> tuple[str, str] | None:
        """(instance type, AZ) when the stack failed because EC2 had no capacity, else None."""
        m = CAPACITY_RE.search(self.reason)
        return (m.group("type"), m.group("az")) if m else None

    def short_reason(self) -> str:
        cap = self.capacity
        if cap:
            return f"InsufficientInstanceCapacity: no {cap[0]} capacity in {cap[1]}"
        return self.reason[:200] or self.status


def read(cfn, cluster: str, nodegroup: str) -> NodegroupStack | None:
    """The node group's stack (DescribeStacks, then DescribeStackEvents for a failed one); None when absent."""
    name = stack_name(cluster, nodegroup)
    resp = aws_client.essential_call(cfn, "describe_stacks", absent=("ValidationError",), StackName=name)
    stacks = (resp or {}).get("Stacks") or []
    if not stacks or stacks[0]["StackStatus"] == "DELETE_COMPLETE":
        return None
    st = stacks[0]
    found = NodegroupStack(name, st["StackId"], st["StackStatus"], aws_client.tags_of(st))
    found.protected = bool(st.get("EnableTerminationProtection"))
    if found.failed:
        found.reason = _failure_reason(cfn, st["StackId"])
    return found


def _failure_reason(cfn, stack_id: str) -> str:
    sig = aws_client.optional_call(
        cfn, "describe_stack_events", instead="the failure's reason is not shown", default={}, StackName=stack_id
    )
    events = sig.value.get("StackEvents", []) if sig.available else []
    failed = [e for e in events if e.get("ResourceStatus") == "CREATE_FAILED" and e.get("ResourceStatusReason")]
    capacity = [e for e in failed if CAPACITY_RE.search(e["ResourceStatusReason"])]
    first = (capacity or failed or [{}])[0]
    return str(first.get("ResourceStatusReason", "")) or ("" if sig.available else f"({sig.line()})")


def settled(cfn, cluster: str, nodegroup: str) -> NodegroupStack | None:
    """:func:`read`, once CloudFormation has finished moving the stack (eksctl exits while a failed create is still
    ``ROLLBACK_IN_PROGRESS``; the rollback deletes the node group, which takes minutes)."""

    def status() -> str:
        found = read(cfn, cluster, nodegroup)
        return found.status if found else "DELETE_COMPLETE"

    common.wait_until(
        status,
        done=lambda st: st not in MOVING_STACK,
        desc=f"stack {stack_name(cluster, nodegroup)}",
        timeout=DELETE_TIMEOUT_S,
        every=POLL_S,
    )
    return read(cfn, cluster, nodegroup)


def not_ours(stack: NodegroupStack, settings: Settings) -> str | None:
    """Why the tutorial must leave ``stack`` alone (its tags do not say eksctl made it for this cluster and node group
    from the tutorial's config), or None when the tutorial may delete it."""
    a, t = settings.aws, stack.tags
    if t.get(CLUSTER_TAG) != a.cluster_name or t.get(NODEGROUP_TAG) != a.gpu_nodegroup_name:
        return f"its tags {CLUSTER_TAG}/{NODEGROUP_TAG} are not {a.cluster_name}/{a.gpu_nodegroup_name}"
    if not ownership.owned(t, settings):
        return (
            f"it has no {TUTORIAL_TAG} tag for this cluster ({TUTORIAL_TAG}={a.cluster_name}): the tutorial did not "
            f"create it"
        )
    return None


def delete(cfn, stack: NodegroupStack, settings: Settings) -> str:
    """Delete the tutorial's failed stack (by its id) and wait until it is gone; the status it ended in. A stack
    :func:`not_ours` does not prove the tutorial's is refused (ValueError) before anything changes; a protected one
    has its termination protection turned off first, as eksctl's ``DeleteStackBySpec`` does."""
    why = not_ours(stack, settings)
    if why:
        raise ValueError(f"stack {stack.name} is not the tutorial's: {why}")
    if stack.protected:
        aws_client.essential_call(
            cfn, "update_termination_protection", StackName=stack.stack_id, EnableTerminationProtection=False
        )
    aws_client.essential_call(cfn, "delete_stack", StackName=stack.stack_id)

    def status() -> str:
        resp = aws_client.essential_call(cfn, "describe_stacks", absent=("ValidationError",), StackName=stack.stack_id)
        return ((resp or {}).get("Stacks") or [{"StackStatus": "DELETE_COMPLETE"}])[0]["StackStatus"]

    return common.wait_until(
        status,
        done=lambda st: st != "DELETE_IN_PROGRESS",
        desc=f"deleting stack {stack.name}",
        timeout=DELETE_TIMEOUT_S,
        every=POLL_S,
    )


def delete_commands(stack: NodegroupStack, region: str) -> str:
    """The AWS CLI commands that delete ``stack`` by hand: termination protection off first (eksctl >= 0.218.0
    creates it on; CloudFormation refuses DeleteStack while it is on), then delete-stack."""
    where = f"--stack-name {stack.name} --region {region}"
    return (
        f"`aws cloudformation update-termination-protection --no-enable-termination-protection {where}` then "
        f"`aws cloudformation delete-stack {where}`"
    )


def candidate_azs(
    settings: Settings, gpu_az: str, private: dict[str, list[str]], offering: list[str], *, fixed: str = ""
) -> tuple[list[str], str]:
    """The AZs to try for the GPU node group, in order, and why there is no other ("" when there may be).

    The GPU AZ first; then, when nothing fixes the AZ (``fixed``: a capacity reservation, a Capacity Block, a
    pinned ``gpu_az``), step 01's ranked AZs (``ranked_azs`` of its placement) that offer the type and where the
    cluster's VPC has a private subnet, up to ``aws.gpu_az_attempts`` in all."""
    if fixed:
        return [gpu_az], fixed
    placement = common.load_placement(settings) or {}
    ranked = [z for z in placement.get("ranked_azs") or [] if z in offering] + sorted(offering)
    order: list[str] = [gpu_az]
    for z in ranked:
        if z not in order and private.get(z):
            order.append(z)
    limit = settings.aws.gpu_az_attempts
    if limit <= 1:
        return order[:1], "aws.gpu_az_attempts is 1"
    return order[:limit], ""


def fixed_reason(settings: Settings, reservation_type: str) -> str:
    """Why the GPU AZ cannot change ("" when it can): a reservation or a pinned ``gpu_az``."""
    a = settings.aws
    if a.capacity_reservation_id:
        kind = "Capacity Block" if (a.capacity_reservation_type or reservation_type) == "capacity-block" else "ODCR"
        return (
            f"the GPU nodes use {kind} {a.capacity_reservation_id}, which holds capacity in one AZ only: no other "
            f"AZ is tried"
        )
    if a.gpu_az:
        return f"aws.gpu_az pins the GPU AZ to {a.gpu_az}: no other AZ is tried (empty it to let 02 fall back)"
    return ""


def record_fallback(settings: Settings, az: str, zones: dict[str, dict[str, Any]], tried: list[str]) -> None:
    """Step 01's placement, updated to the AZ the GPU node group was created in after ``tried`` had no capacity, so a
    re-run of 02 (and 03-08) works with the AZ the nodes are in."""
    placement = common.load_placement(settings)
    if not placement:
        return
    placement.update(az=az, az_id=zones.get(az, {}).get("id", ""), source="02 fallback", no_capacity_in=tried)
    common.save_placement(settings, placement)
