"""Step 02 on aws: ``plan`` | ``up`` | ``status`` - the state read, the actions decided, and carried out in order."""

from __future__ import annotations

from ...clients.eksctl import eksctl_path
from ...core.config import Settings
from ...plan import cost
from ...plan.eksctl import (
    CLUSTER_CFG,
    FAILED_NG,
    GPU_CFG,
    NOT_FOUND,
    Decision,
    cluster_azs,
    decide_actions,
    drift,
    render_cluster_config,
    render_gpu_nodegroup_config,
)
from . import common, storage
from .eks_create import UpInputs, execute_actions, fail
from .eks_placement import gpu_placement, observe
from .eks_state import ACTIONS, AwsClusterResult, AwsContext, failure_causes, read_nodegroups
from .eks_teardown import delete

# --------------------------------------------------------------------------------------------------------------
# The step
# --------------------------------------------------------------------------------------------------------------


def cluster(settings: Settings, action: str | None = "up", *, assume_yes: bool = False) -> AwsClusterResult:
    """Notebook 02 on aws: ``plan`` | ``up`` | ``status`` | ``down``, each decided from the real state.

    Without an action: ``up`` with ``assume_yes`` (nothing billable happens without it), else ``plan``."""
    action = action or ("up" if assume_yes else "plan")
    if action not in ACTIONS:
        raise ValueError(f"unknown action {action!r}: use {', '.join(ACTIONS)}")
    ctx = AwsContext(settings)
    res = AwsClusterResult(
        action=action, account=ctx.ident.account, region=ctx.region, cluster_name=settings.aws.cluster_name
    )
    if action in ("plan", "up"):
        _plan_or_up(ctx, res, execute=(action == "up"), assume_yes=assume_yes)
    elif action == "status":
        _status(ctx, res)
    else:
        delete(settings, assume_yes=assume_yes, context=ctx, result=res)
    return res


def _status(ctx: AwsContext, res: AwsClusterResult) -> None:
    a = ctx.settings.aws
    c = ctx.cluster()
    res.cluster_status = c["status"] if c else NOT_FOUND
    if c is None:
        res.notes.append("no cluster: run `up` (raytrain-tutorial cluster up)")
        return
    res.nodegroups = read_nodegroups(ctx)
    if c["status"] == "FAILED":
        res.causes += failure_causes(ctx.sess, ctx.region, a.cluster_name)
    for ng in res.nodegroups:
        if ng["status"] in FAILED_NG:
            res.causes += failure_causes(ctx.sess, ctx.region, a.cluster_name, ng["name"])
    gpu = res.nodegroup(a.gpu_nodegroup_name)
    if gpu is None:
        res.notes.append(f"GPU node group {a.gpu_nodegroup_name} does not exist yet: run `up`")
    else:
        res.gpu_az = ",".join(gpu["azs"])
        res.gpu_subnets = gpu["subnets"]
        res.gpu_az_source = "the node group's subnets"


def _plan_or_up(ctx: AwsContext, res: AwsClusterResult, *, execute: bool, assume_yes: bool) -> None:
    s = ctx.settings
    c = ctx.cluster()
    res.cluster_status = c["status"] if c else NOT_FOUND
    offering, zones = gpu_placement(ctx, res, execute=execute)
    observed = observe(ctx, res, c, offering)
    azs = cluster_azs(res.gpu_az or offering[0], offering, zones, common.EKS_UNSUPPORTED_AZ_IDS)
    inputs = UpInputs(
        cluster_text=render_cluster_config(s, azs=azs, gpu_az=res.gpu_az),
        cluster_file=ctx.run_dir / "eksctl" / "cluster.yaml",
        gpu_file=ctx.run_dir / "eksctl" / "gpu-nodegroup.yaml",
        gpu_az=res.gpu_az,
    )
    res.configs[CLUSTER_CFG] = inputs.cluster_text
    res.notes += [f"WARNING: {w}" for w in cost.estimate(s, ctx.region).warnings]  # the version's support tier
    decision = decide_actions(s, observed, azs=azs, cluster_file=inputs.cluster_file, gpu_file=inputs.gpu_file)
    _take_decision(ctx, res, decision)
    storage.plan_into(res, s, ctx.sess, ctx.ident, c)  # the checkpoint bucket and the pods' role: read, not made
    if not execute or res.problems:
        if not execute:
            res.notes.append("plan: nothing was created; run `up` to do the actions above")
        return
    _confirm_billable(ctx, decision, assume_yes=assume_yes)
    eksctl_path()  # a clear error before anything starts when eksctl is missing
    done: list[str] = []
    try:
        execute_actions(ctx, res, decision.actions, inputs, done)
    except common.WaitTimeout as e:
        fail(ctx, res, f"stuck: {e}", None, nodegroup=e.nodegroup)
    res.actions = done
    # the real state, whatever happened
    res.cluster_status = ctx.cluster_status()
    if res.cluster_status == "ACTIVE" and not res.problems:
        storage.up_into(res, s, ctx.sess, ctx.ident, ctx.cluster(), assume_yes=assume_yes)
    res.nodegroups = read_nodegroups(ctx) if res.cluster_status != NOT_FOUND else []
    gpu = res.nodegroup(s.aws.gpu_nodegroup_name)
    problem = drift(s, gpu, res.gpu_az) if gpu and not res.problems else None
    if problem:
        res.problems.append(problem)


def _take_decision(ctx: AwsContext, res: AwsClusterResult, decision: Decision) -> None:
    """Record the decision in ``res``: the causes of what failed, the problems, the GPU config, the actions."""
    for nodegroup in decision.diagnose:
        res.causes += failure_causes(ctx.sess, ctx.region, ctx.settings.aws.cluster_name, nodegroup)
    res.problems += decision.problems
    res.gpu_subnets = decision.gpu_subnets
    if decision.gpu_config_subnets is not None:
        res.configs[GPU_CFG] = render_gpu_nodegroup_config(
            ctx.settings,
            gpu_az=res.gpu_az,
            subnet_ids=decision.gpu_config_subnets,
            reservation_type=res.reservation_type,
        )
    res.actions = decision.descriptions


def _confirm_billable(ctx: AwsContext, decision: Decision, *, assume_yes: bool) -> None:
    """One confirmation for everything billable (nothing to confirm when nothing is created)."""
    billable = decision.billable
    if not billable:
        return
    est = cost.estimate(ctx.settings, ctx.region)
    common.confirm(
        f"create EKS resources for {ctx.settings.aws.cluster_name}",
        ctx.ident,
        assume_yes=assume_yes,
        details=billable
        + [
            f"billed while they exist: about ${est.total_per_hour:.2f}/h for the whole "
            f"stack (prices as of {est.as_of}); remove with `cluster down`"
        ],
    )
