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
    a = ctx.settings.aws
    c = ctx.cluster()
    private = common.private_subnets_by_az(ctx.ec2, (c.get("resourcesVpcConfig") or {}).get("subnetIds") or [])
    subnets = private.get(inputs.gpu_az or "", [])
    if not subnets:
        res.problems.append(
            f"the cluster has no private subnet in {inputs.gpu_az} (AZs with one: "
            f"{', '.join(private) or 'none'}). Fix: `cluster down` then `up`, or set gpu_az"
        )
        return False
    res.gpu_subnets = subnets
    text = render_gpu_nodegroup_config(
        ctx.settings, gpu_az=inputs.gpu_az, subnet_ids=subnets, reservation_type=res.reservation_type
    )
    res.configs[GPU_CFG] = text
    _write(inputs.gpu_file, text, res, GPU_CFG)
    r = ctx.eksctl(
        ["create", "nodegroup", "-f", str(inputs.gpu_file), "--install-nvidia-plugin=false"],
        "create-gpu-nodegroup",
        f"GPU node group {a.gpu_nodegroup_name}",
        poll=lambda: ctx.nodegroup_status(a.gpu_nodegroup_name),
    )
    res.logs.append(str(r.log_path))
    st = wait_nodegroup(ctx, a.gpu_nodegroup_name)
    if r.returncode != 0 or st != "ACTIVE":
        what = f"eksctl create nodegroup ({a.gpu_nodegroup_name}) exited {r.returncode}; it is {st}"
        fail(ctx, res, what, r, nodegroup=a.gpu_nodegroup_name)
        return False
    return True


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
