"""Step 02: the cluster. ``local`` starts real Ray raylets here; ``aws`` creates EKS (eksctl).

On ``aws`` every action is decided from the resources' real state, read with boto3
(``eks:DescribeCluster`` / ``eks:DescribeNodegroup``: NOT_FOUND, CREATING, ACTIVE, DELETING, FAILED...),
so re-running any action is safe (the aws target lives in ``targets.aws.cluster``; its names are re-exported
here while other modules still import them from this path):

* ``plan``   renders the eksctl configs from env.yaml and lists what ``up`` would do; creates nothing.
* ``up``     creates what is missing - the cluster (VPC with private subnets in the AZs offering the GPU
             type, one NAT gateway, OIDC, core add-ons, the ``role=system`` node group), then the EFA GPU
             node group in exactly one AZ (the placement from step 01, passed as explicit subnet ids) -
             after one confirmation; waits for what is in progress; reports failures with their causes.
* ``status`` reads and shows the state; never changes anything.
* ``down``   deletes the GPU node group, then the cluster, after one confirmation, and lists what is left.
"""

from __future__ import annotations

from .config import ConfigError, Settings  # noqa: F401
from .plan.eksctl import cluster_azs, render_cluster_config, render_gpu_nodegroup_config  # noqa: F401
from .targets.aws.cluster import (  # noqa: F401
    ACTIONS,
    CLUSTER_CFG,
    CLUSTER_TIMEOUT_S,
    DELETE_TIMEOUT_S,
    FAILED_NG,
    GPU_CFG,
    NODEGROUP_TIMEOUT_S,
    NOT_FOUND,
    POLL_S,
    SYSTEM_NODEGROUP,
    AwsClusterResult,
    AwsTeardownResult,
    failure_causes,
    leftovers,
    resolve_gpu_az,
    validate_reservation,
)
from .targets.aws.cluster import AwsContext as _Ctx  # noqa: F401
from .targets.aws.cluster import cluster as aws_step
from .targets.aws.cluster import delete as aws_teardown  # noqa: F401
from .targets.aws.cluster import teardown as aws_full_teardown


def step(settings: Settings, action: str = "up", *, assume_yes: bool = False):
    """Notebook 02's entry point: action is up | status | down | plan."""
    if settings.target == "local":
        from .targets import local

        if action in ("up", "plan"):
            return local.up(settings, plan=(action == "plan"))
        if action == "status":
            return local.status(settings)
        if action == "down":
            return local.down(settings)
        raise ValueError(f"unknown action {action!r}: use up, status, down or plan")
    return aws_step(settings, action, assume_yes=assume_yes)


class TeardownResult:
    def __init__(self, steps: list[tuple[str, bool, str]]):
        self.steps = steps

    @property
    def ok(self) -> bool:
        return all(ok for _, ok, _ in self.steps)

    def show(self) -> None:
        from .report import table

        table(
            [(name, "gone" if ok else "LEFT", ev) for name, ok, ev in self.steps],
            ["what", "state", "evidence"],
            title="teardown (reverse order)",
            max_width=90,
        )


def teardown(settings: Settings, *, assume_yes: bool = False, nodegroup_only: bool = False):
    """Notebook 08's entry point: remove everything in reverse order, verified by listing.

    On aws (never prompts; refuses without ``assume_yes``): the RayCluster, the KubeRay operator, the
    device plugins (through the Kubernetes API, only in the kubeconfig context of this EKS cluster), then
    the GPU node group and the cluster (``nodegroup_only``: only the node group), returning an
    :class:`AwsTeardownResult` (``.parts`` holds each step's own result)."""
    if settings.target == "local":
        from .targets import local

        info = local.down(settings)
        left = local._our_pids(settings)
        return TeardownResult(
            [
                (
                    "local Ray cluster (head + worker raylets)",
                    not info.running and not left,
                    f"{info.message}; {len(left)} process(es) left",
                )
            ]
        )
    return aws_full_teardown(settings, assume_yes=assume_yes, nodegroup_only=nodegroup_only)
