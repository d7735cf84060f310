"""Step 02 on aws: the executor - eksctl creates the cluster and its node groups, one function per kind of action of
:func:`raytrain_helpers.plan.eksctl.decide_actions`; each returns False to stop."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ....clients.eksctl import CommandResult
from ....plan.eksctl import (
    CLUSTER_CFG,
    CREATE_CLUSTER,
    CREATE_GPU_NG,
    CREATE_SYSTEM_NG,
    GPU_CFG,
    IN_PROGRESS,
    KUBECONFIG,
    SYSTEM_NODEGROUP,
    WAIT_CLUSTER,
    WAIT_GPU_NG,
    WAIT_GPU_NG_GONE,
    Action,
    render_gpu_nodegroup_config,
)
from .. import common
from . import nodegroup_stack as ng_stack
from .state import AwsClusterResult, AwsContext, failure_causes, wait_cluster, wait_nodegroup, wait_nodegroup_gone


@dataclass
class UpInputs:
    """What the actions of ``up`` work from: the rendered cluster config, where the configs go, the GPU AZ."""

    cluster_text: str
    cluster_file: Path
    gpu_file: Path
    gpu_az: str | None


# --------------------------------------------------------------------------------------------------------------
# The executor: one function per kind of action; each returns False to stop
# --------------------------------------------------------------------------------------------------------------


def execute_actions(
    ctx: AwsContext, res: AwsClusterResult, actions: list[Action], inputs: UpInputs, done: list[str]
) -> None:
    """Carry ``actions`` out in order, appending each one's description to ``done``; stop at the first failure."""
    for action in actions:
        if not EXECUTORS[action.kind](ctx, res, inputs):
            break
        done.append(action.description)


def _create_cluster(ctx: AwsContext, res: AwsClusterResult, inputs: UpInputs) -> bool:
    _write(inputs.cluster_file, inputs.cluster_text, res, CLUSTER_CFG)
    r = ctx.eksctl(
        ["create", "cluster", "-f", str(inputs.cluster_file)],
        "create-cluster",
        f"cluster {ctx.settings.aws.cluster_name}",
        poll=ctx.cluster_status,
    )
    res.logs.append(str(r.log_path))
    status = ctx.cluster_status()
    if status in IN_PROGRESS:
        status = wait_cluster(ctx)
    if r.returncode != 0 or status != "ACTIVE":
        fail(ctx, res, f"eksctl create cluster exited {r.returncode}; cluster is {status}", r, nodegroup=None)
        return False
    return True


def _wait_cluster_active(ctx: AwsContext, res: AwsClusterResult, inputs: UpInputs) -> bool:
    status = wait_cluster(ctx)
    if status != "ACTIVE":
        fail(ctx, res, f"cluster ended {status}", None, nodegroup=None)
        return False
    return True


def _create_system_nodegroup(ctx: AwsContext, res: AwsClusterResult, inputs: UpInputs) -> bool:
    _write(inputs.cluster_file, inputs.cluster_text, res, CLUSTER_CFG)
    r = ctx.eksctl(
        ["create", "nodegroup", "-f", str(inputs.cluster_file), "--include", SYSTEM_NODEGROUP],
        "create-system-nodegroup",
        f"node group {SYSTEM_NODEGROUP}",
        poll=lambda: ctx.nodegroup_status(SYSTEM_NODEGROUP),
    )
    res.logs.append(str(r.log_path))
    st = wait_nodegroup(ctx, SYSTEM_NODEGROUP)
    if r.returncode != 0 or st != "ACTIVE":
        what = f"eksctl create nodegroup ({SYSTEM_NODEGROUP}) exited {r.returncode}; it is {st}"
        fail(ctx, res, what, r, nodegroup=SYSTEM_NODEGROUP)
        return False
    return True


def _wait_gpu_nodegroup_gone(ctx: AwsContext, res: AwsClusterResult, inputs: UpInputs) -> bool:
    wait_nodegroup_gone(ctx, ctx.settings.aws.gpu_nodegroup_name)
    return True


def _create_gpu_nodegroup(ctx: AwsContext, res: AwsClusterResult, inputs: UpInputs) -> bool:
    """The GPU node group in the GPU AZ; when EC2 has no capacity there, in the next AZs (see
    :func:`.nodegroup_stack.candidate_azs`), each AZ tried a row of ``res.gpu_az_tries``."""
    a = ctx.settings.aws
    c = ctx.cluster()
    private = common.private_subnets_by_az(ctx.ec2, (c.get("resourcesVpcConfig") or {}).get("subnetIds") or [])
    if not private.get(inputs.gpu_az or ""):
        res.problems.append(
            f"the cluster has no private subnet in {inputs.gpu_az} (AZs with one: "
            f"{', '.join(private) or 'none'}). Fix: `cluster down` then `up`, or set gpu_az"
        )
        return False
    offering = common.offering_azs(ctx.ec2, a.gpu_node_type)
    fixed = ng_stack.fixed_reason(ctx.settings, res.reservation_type)
    azs, why_only = ng_stack.candidate_azs(ctx.settings, inputs.gpu_az or "", private, offering, fixed=fixed)
    cfn = ctx.client("cloudformation")
    short: list[str] = []
    for az in azs:
        if not _clear_failed_stack(ctx, res, cfn, az):
            return False
        outcome = _create_gpu_in(ctx, res, inputs, az, private[az])
        if outcome is None:
            if short:
                res.notes.append(f"the GPU nodes run in {az}: no capacity in {', '.join(short)}")
                res.gpu_az, res.gpu_az_source = az, f"fallback after no capacity in {', '.join(short)}"
                ng_stack.record_fallback(ctx.settings, az, common.zones(ctx.ec2), short)
            return True
        if outcome.capacity is None:
            res.gpu_az_tries.append((az, f"failed: {outcome.short_reason()}"))
            fail(ctx, res, f"GPU node group in {az}: {outcome.short_reason()}", None, nodegroup=a.gpu_nodegroup_name)
            return False
        short.append(az)
        gone = _delete_own(ctx, res, cfn, outcome)
        res.gpu_az_tries.append((az, f"{outcome.short_reason()}; {gone}"))
    res.problems.append(
        f"no {a.gpu_node_type} capacity for {a.gpu_node_count} nodes in {', '.join(short)} (EC2's "
        f"InsufficientInstanceCapacity); {why_only or f'{len(azs)} AZ(s) tried of aws.gpu_az_attempts'}. Fix: try "
        f"again later (`cluster up` resumes), re-run step 01 to rank the AZs again, raise aws.gpu_az_attempts, "
        f"or reserve capacity (aws.capacity_reservation_id); `cluster down --yes` stops what bills meanwhile"
    )
    return False


def _create_gpu_in(
    ctx: AwsContext, res: AwsClusterResult, inputs: UpInputs, az: str, subnets: list[str]
) -> ng_stack.NodegroupStack | None:
    """``eksctl create nodegroup`` in ``az``: None when the node group is ACTIVE, else its failed stack (a
    stack without a failure reason when eksctl failed otherwise)."""
    a = ctx.settings.aws
    res.gpu_subnets = subnets
    text = render_gpu_nodegroup_config(
        ctx.settings, gpu_az=az, subnet_ids=subnets, reservation_type=res.reservation_type
    )
    res.configs[GPU_CFG] = text
    _write(inputs.gpu_file, text, res, GPU_CFG)
    r = ctx.eksctl(
        ["create", "nodegroup", "-f", str(inputs.gpu_file), "--install-nvidia-plugin=false"],
        "create-gpu-nodegroup",
        f"GPU node group {a.gpu_nodegroup_name} in {az}",
        poll=lambda: ctx.nodegroup_status(a.gpu_nodegroup_name),
    )
    res.logs.append(str(r.log_path))
    st = wait_nodegroup(ctx, a.gpu_nodegroup_name)
    if r.returncode == 0 and st == "ACTIVE":
        res.gpu_az_tries.append((az, "created: node group ACTIVE"))
        return None
    found = ng_stack.settled(ctx.client("cloudformation"), a.cluster_name, a.gpu_nodegroup_name)
    if found is not None and found.capacity is not None and found.capacity[1] == az:
        return found
    what = f"eksctl create nodegroup ({a.gpu_nodegroup_name}) exited {r.returncode}; it is {st}"
    if r.returncode == 0 and found is not None:  # eksctl skips a node group whose stack exists, and exits 0
        what += f" (eksctl created nothing: stack {found.name} is {found.status})"
    stack = found or ng_stack.NodegroupStack(ng_stack.stack_name(a.cluster_name, a.gpu_nodegroup_name), "", st)
    stack.reason = stack.reason or what
    if r.tail:
        res.causes += [f"eksctl: {line}" for line in r.tail[-8:] if line.strip()]
    return stack


def _clear_failed_stack(ctx: AwsContext, res: AwsClusterResult, cfn, az: str) -> bool:
    """Before creating: a failed stack of the GPU node group (which eksctl would take for an existing node group and
    skip) is deleted when the tutorial made it; False (with the problem) when it is another's."""
    a = ctx.settings.aws
    found = ng_stack.read(cfn, a.cluster_name, a.gpu_nodegroup_name)
    if found is None or not found.failed:
        return True
    why = ng_stack.not_ours(found, ctx.settings)
    if why:
        res.gpu_az_tries.append((az, f"not tried: stack {found.name} is {found.status} and not the tutorial's"))
        res.problems.append(
            f"CloudFormation stack {found.name} is {found.status} and {why}; eksctl would skip the node group while it "
            f"exists, and the tutorial never deletes what it did not create. Fix: delete it yourself if it is yours "
            f"({ng_stack.delete_commands(found, ctx.region)}), or set another aws.gpu_nodegroup_name"
        )
        return False
    gone = _delete_own(ctx, res, cfn, found)
    res.actions.append(f"{found.name} was {found.status} from an earlier try ({found.short_reason()}): {gone}")
    return True


def _delete_own(ctx: AwsContext, res: AwsClusterResult, cfn, found: ng_stack.NodegroupStack) -> str:
    """Delete the tutorial's failed stack so the next ``eksctl create nodegroup`` is not skipped; what happened."""
    if ng_stack.not_ours(found, ctx.settings):
        return f"stack {found.name} left alone (not the tutorial's)"
    end = ng_stack.delete(cfn, found, ctx.settings)
    return f"stack {found.status} deleted" if end == "DELETE_COMPLETE" else f"stack deletion ended {end}"


def _wait_gpu_nodegroup(ctx: AwsContext, res: AwsClusterResult, inputs: UpInputs) -> bool:
    name = ctx.settings.aws.gpu_nodegroup_name
    st = wait_nodegroup(ctx, name)
    if st != "ACTIVE":
        fail(ctx, res, f"GPU node group ended {st}", None, nodegroup=name)
        return False
    return True


def _write_kubeconfig(ctx: AwsContext, res: AwsClusterResult, inputs: UpInputs) -> bool:
    r = ctx.eksctl(
        ["utils", "write-kubeconfig", "--cluster", ctx.settings.aws.cluster_name, "--region", ctx.region],
        "write-kubeconfig",
        "kubeconfig",
    )
    if r.returncode != 0:
        res.notes.append(f"writing the kubeconfig failed (exit {r.returncode}); see {r.log_path}")
    return True


#: The function carrying out each kind of action of :func:`raytrain_helpers.plan.eksctl.decide_actions`.
EXECUTORS: dict[str, Callable[[AwsContext, AwsClusterResult, UpInputs], bool]] = {
    CREATE_CLUSTER: _create_cluster,
    WAIT_CLUSTER: _wait_cluster_active,
    CREATE_SYSTEM_NG: _create_system_nodegroup,
    WAIT_GPU_NG_GONE: _wait_gpu_nodegroup_gone,
    CREATE_GPU_NG: _create_gpu_nodegroup,
    WAIT_GPU_NG: _wait_gpu_nodegroup,
    KUBECONFIG: _write_kubeconfig,
}


def _write(path: Path, text: str, res: AwsClusterResult, name: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    res.config_files[name] = str(path)


def fail(
    ctx: AwsContext, res: AwsClusterResult, what: str, run: CommandResult | None, *, nodegroup: str | None
) -> None:
    res.causes += failure_causes(ctx.sess, ctx.region, ctx.settings.aws.cluster_name, nodegroup)
    if run is not None and run.tail:
        res.causes += [f"eksctl: {line}" for line in run.tail[-8:] if line.strip()]
    res.problems.append(
        f"{what}. Fix: read the causes and the log; re-running `up` resumes from the real state; "
        f"`cluster down --yes` removes what was created"
    )
