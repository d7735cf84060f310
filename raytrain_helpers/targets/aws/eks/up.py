"""Step 02 on aws: ``plan`` | ``up`` | ``status`` - the state read, the actions decided, and carried out in order."""

from __future__ import annotations

from ....clients import aws as aws_client
from ....clients import kubernetes as kube
from ....clients.eksctl import eksctl_path
from ....clients.kubernetes import cluster_context
from ....core.config import ConfigError, Settings
from ....core.constants import STEP_ACTIONS
from ....plan import cost
from ....plan.eksctl import (
    CLUSTER_CFG,
    CREATE_CLUSTER,
    CREATE_GPU_NG,
    CREATE_SYSTEM_NG,
    FAILED_NG,
    GPU_CFG,
    KUBECONFIG,
    NOT_FOUND,
    WAIT_CLUSTER,
    Action,
    Decision,
    cluster_azs,
    decide_actions,
    drift,
    render_cluster_config,
    render_gpu_nodegroup_config,
)
from ...base import check_action
from .. import common, ownership
from ..plugins import install as plugins
from ..plugins import owners as device_owners
from ..storage import bucket as storage
from ..storage import gate as storage_gate
from . import existing
from .create import EXECUTORS, UpInputs, execute_actions, fail
from .down import delete
from .placement import gpu_placement, observe
from .state import AwsClusterResult, AwsContext, failure_causes, read_nodegroups

#: The actions carried out before the storage (the cluster and its system node group); the GPU node group comes
#: after the storage and its check.
BEFORE_STORAGE = (CREATE_CLUSTER, WAIT_CLUSTER, CREATE_SYSTEM_NG)

# --------------------------------------------------------------------------------------------------------------
# The step
# --------------------------------------------------------------------------------------------------------------


def cluster(settings: Settings, action: str | None = "up", *, assume_yes: bool = False) -> AwsClusterResult:
    """Notebook 02 on aws: ``plan`` | ``up`` | ``status`` | ``down``, each decided from the real state.

    Without an action: ``up`` with ``assume_yes`` (nothing billable happens without it), else ``plan``."""
    action = action or ("up" if assume_yes else "plan")
    check_action(action, STEP_ACTIONS)
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
    if ownership.existing(s):
        existing.plan_or_up(ctx, res, c, execute=execute, assume_yes=assume_yes)
        return
    if c is not None and not ownership.owned(c.get("tags"), s):
        res.problems.append(ownership.cluster_refusal(s, c))  # before anything is read, rendered or created
        return
    offering, zones = gpu_placement(ctx, res, execute=execute)
    observed = observe(ctx, res, c, offering)
    ranked = [z for z in (common.load_placement(s) or {}).get("ranked_azs") or [] if z in offering]
    others = max(2, s.aws.gpu_az_attempts - 1)
    azs = cluster_azs(
        res.gpu_az or offering[0],
        ranked + [z for z in offering if z not in ranked],
        zones,
        common.EKS_UNSUPPORTED_AZ_IDS,
        others,
    )
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
    before = [x for x in decision.actions if x.kind in BEFORE_STORAGE]
    after = [x for x in decision.actions if x.kind not in BEFORE_STORAGE]
    gated = any(x.kind == CREATE_GPU_NG for x in after)
    res.actions = [x.description for x in before]  # the order of `up`: cluster, storage, check, GPU node group
    storage.plan_into(res, s, ctx.sess, ctx.ident, c)  # the checkpoint bucket and the pods' role: read, not made
    res.actions += ([storage_gate.description(s)] if gated else []) + [x.description for x in after]
    if not execute or res.problems:
        if not execute:
            res.notes.append("plan: nothing was created; run `up` to do the actions above")
        return
    _confirm_billable(ctx, decision, assume_yes=assume_yes)
    eksctl_path()  # a clear error before anything starts when eksctl is missing
    res.actions = done = []
    try:
        _carry_out(ctx, res, inputs, (before, after), gated=gated, assume_yes=assume_yes)
    except common.WaitTimeout as e:
        fail(ctx, res, f"stuck: {e}", None, nodegroup=e.nodegroup)
    res.actions = done
    # the real state, whatever happened
    res.cluster_status = ctx.cluster_status()
    res.nodegroups = read_nodegroups(ctx) if res.cluster_status != NOT_FOUND else []
    gpu = res.nodegroup(s.aws.gpu_nodegroup_name)
    problem = drift(s, gpu, res.gpu_az) if gpu and not res.problems else None
    if problem:
        res.problems.append(problem)


def _carry_out(
    ctx: AwsContext,
    res: AwsClusterResult,
    inputs: UpInputs,
    actions: tuple[list[Action], list[Action]],
    *,
    gated: bool,
    assume_yes: bool,
) -> None:
    """The cluster and its system node group; the storage (bucket, role, association); the storage check from a
    pod on the system node (when the GPU node group is to be created); only then the GPU node group. Each stage
    runs only when the one before left no problem; what was done is appended to ``res.actions``."""
    before, after = actions
    done = res.actions
    execute_actions(ctx, res, before, inputs, done)
    if res.problems or ctx.cluster_status() != "ACTIVE":
        return
    storage.up_into(res, ctx.settings, ctx.sess, ctx.ident, ctx.cluster(), assume_yes=assume_yes)
    if res.problems or (gated and not _storage_checked(ctx, res, inputs)):
        return
    execute_actions(ctx, res, after, inputs, done)
    if gated and not res.problems:
        _replace_eksctl_efa_plugin(ctx, res)


def _storage_checked(ctx: AwsContext, res: AwsClusterResult, inputs: UpInputs) -> bool:
    """:func:`.storage_gate.run` through this cluster's kubeconfig context (written first when missing); False
    (with the named rows in ``res.problems``/``res.causes``) when the pods' identity cannot use the storage."""
    s = ctx.settings
    if cluster_context(s)[0] is None:
        EXECUTORS[KUBECONFIG](ctx, res, inputs)
    context, where = cluster_context(s)
    if context is None:
        res.problems.append(
            f"the storage check needs the cluster's Kubernetes API, but {where}. Fix: `aws eks update-kubeconfig "
            f"--name {s.aws.cluster_name} --region {s.aws.region}`, then re-run `up`; the GPU node group "
            f"was not created"
        )
        return False
    try:
        ok, lines = storage_gate.run(s)
    except (kube.K8sError, ConfigError, aws_client.AwsError) as e:
        ok, lines = False, [f"the storage check could not run: {e}. Fix: see the message; re-run `up`"]
    if ok:
        res.actions += lines
        return True
    res.problems.append(f"{lines[0]} - the GPU node group was not created (no GPU time was spent)")
    res.causes += lines[1:]
    return False


def _replace_eksctl_efa_plugin(ctx: AwsContext, res: AwsClusterResult) -> None:
    """After ``eksctl create nodegroup`` of an EFA node group eksctl has put its own EFA device plugin back
    (eksctl-io/eksctl 99984adb, pkg/actions/nodegroup/create.go postNodeCreationTasks -> pkg/eks/tasks.go
    newEFADevicePluginTask; docs/pins.md, checked 2026-12-04); where the
    tutorial's own EFA plugin is installed (03 ran before), delete eksctl's copy again so one plugin serves."""
    try:
        with kube.using_client(ctx.settings) as api:
            if plugins.tutorial_daemonsets(plugins.find_daemonsets(api)).get("efa") is None:
                return  # 03 has not installed the tutorial's plugin yet: 03 replaces eksctl's
            notes = device_owners.replace_eksctl_efa(api, log=print)
    except kube.K8sError as e:
        res.problems.append(
            f"eksctl's EFA device plugin could not be checked after the new GPU node group: {e}. Fix: run 03 "
            f"(device plugins), which replaces it"
        )
        return
    res.actions += notes


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
