"""Names and markers shared by the notebook side and the training job (one definition each)."""

from __future__ import annotations

#: The custom Ray resource only worker nodes offer: training workers ask for one, so none lands on the head.
TRAIN_SLOT = "train_slot"

#: The job's driver prints one ``RAYTRAIN_RESULT {json}`` line; the notebook side parses it from the logs.
RESULT_PREFIX = "RAYTRAIN_RESULT "
#: Rank 0 prints the run's summary as ``RAYTRAIN_SUMMARY {json}``.
SUMMARY_PREFIX = "RAYTRAIN_SUMMARY "
#: Every training step prints ``[train] step k/N loss=...``.
STEP_PREFIX = "[train] step"
#: Every worker prints ``[raytrain] marker=<id>`` first, so its log file can be tied to one job.
MARKER_PREFIX = "[raytrain] marker="
#: The line each rank prints when it finished its steps.
SUCCESS_RE = r"\[train\] SUCCESS rank=(\d+)/(\d+)"

#: The module the Ray job runs as its entrypoint (``python -m ...``).
ENTRYPOINT_MODULE = "raytrain_helpers.worker.entrypoint"

#: Everything the local target serves listens on this address only.
LOOPBACK = "127.0.0.1"
#: The Ray dashboard / Jobs API port inside the head pod (the ClusterIP Service's port).
DASHBOARD_PORT = 8265

GIB = 1024**3

#: What a step that creates something can be asked to do, on every target: say what it would create (``plan``),
#: create or reuse it (``up``), read it (``status``), delete it (``down``). The one definition: the cluster (02) takes
#: them all; the device plugins (03) and the KubeRay operator with its RayCluster (04) take all but ``plan``
#: (``targets.base.PART_ACTIONS``).
STEP_ACTIONS = ("plan", "up", "status", "down")

#: eksctl releases the aws path relies on, and what each brought (eksctl-io/eksctl at tag v0.230.0, commit
#: 99984adb, checked 2026-12-04: `git tag --contains` of each change).
EKSCTL_RELEASES: dict[str, str] = {
    # pkg/eks/versions_manager.go (PR #8144): the versions eksctl accepts come from EKS DescribeClusterVersions,
    # no longer a list compiled in, so it creates any version the region offers (`eksctl utils
    # describe-cluster-versions`), 1.35 and 1.36 included; eksctl v0.230.0 still defaults to 1.34 when a config
    # names none (types.go DefaultVersion), ours always names aws.k8s_version.
    "0.202.0": "Kubernetes versions read from EKS (any version the region offers)",
    # pkg/apis/eksctl.io/v1alpha5/validation.go and pkg/cfn/builder/managed_nodegroup.go (PR #8207):
    # instanceMarketOptions.marketType "capacity-block" -> the managed node group's capacity type CAPACITY_BLOCK.
    "0.205.0": "Capacity Blocks for ML (instanceMarketOptions.marketType: capacity-block)",
    # pkg/cfn/manager/api.go DoCreateStackRequest (PR #8586, release notes 0.218.0): every stack eksctl creates is
    # termination-protected; its DeleteStackBySpec turns the protection off first, and so does 02 for the failed
    # GPU node group stack it deletes. The tests' fake eksctl models this behaviour, not the one before it.
    "0.218.0": "termination-protected stacks (the behaviour the tests model)",
}
#: The oldest eksctl the aws path works with: the newest release in EKSCTL_RELEASES.
EKSCTL_MIN_VERSION = max(EKSCTL_RELEASES, key=lambda v: tuple(int(p) for p in v.split(".")))
#: The newest eksctl the aws path accepts: the release the tests' fake eksctl models (tests/fakes/aws/eksctl), the
#: newest in eksctl-io/eksctl when it was read (tag v0.230.0, commit 6ee3b761, 2026-08-13). What the fake models did
#: not change from 0.218.0 to it (`git diff v0.218.0 v0.230.0` of pkg/cfn/manager/api.go DoCreateStackRequest and
#: DeleteStackBySpec, nodegroup.go, pkg/ctl/cmdutils/filter/nodegroup_filter.go, pkg/utils/kubeconfig/kubeconfig.go
#: and validation.go's capacity-block rules); a newer eksctl is refused until the fake is checked against it.
EKSCTL_MODELLED_VERSION = "0.230.0"
#: The newest Kubernetes version (``aws.k8s_version``) the aws path accepts: the one the tests' stand-in for the
#: cluster's API models (tests/fakes/k8s_standin: ``/version``), the newest EKS offered in standard support when it
#: was set; every API group the stand-in serves is GA (v1) in it. A newer one is refused until it is checked.
K8S_MODELLED_VERSION = "1.36"
